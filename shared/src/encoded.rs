//! Compressed copies of published keys: what `symdex serve` and the CDN answer a client that
//! accepts `zstd` (or `gzip`) with, instead of the raw bytes.
//!
//! A copy of key `K` lives at `_symdex/encoded/<encoding>/K` ([`copy_key`]): under the
//! store's own prefix, which no layout's key starts with (`KEYS.md`; `check_key` refuses
//! nothing under it, but the layouts' grammar never makes it), so no client key can name a
//! copy, and the CDN reaches the copies through an origin whose path is
//! `/_symdex/encoded/<encoding>` (infra/modules/symdex/cdn.tf). A copy is made once, when a
//! key is first published ([`crate::pipeline`]'s encode step), kept only when it is worth it
//! ([`worth_keeping`]), and removed with its key (refs/remove.rs).
//!
//! # Invariant: a copy is served only as the content its key holds
//!
//! A copy names the content it encodes ([`EncodedMeta::raw`]: the raw key's size and content
//! identity, S3 metadata `symdex-raw-*`, a local file's attribute `user.symdex.encodes`).
//! - Its writer writes it only after the raw key was published with that content, and looks
//!   at the raw key again after the write: gone or changed meanwhile (a removal or an
//!   overwrite between the two), the copy is deleted again. A removal deletes a key's copies
//!   before the key (refs/remove.rs), so the copy never outlives its key but for a writer's
//!   one request between its write and its look.
//! - `symdex serve` serves a copy only while its named content is the raw file's (a stat and
//!   two attributes a request), and `verify` reports a copy that names other content or
//!   whose key is gone.

use std::cell::RefCell;
use std::fmt;
use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::str::FromStr;

use zstd::zstd_safe::{CCtx, CParameter, ResetDirective};

pub use crate::storage::encoding::{
    copy_key, raw_key_of, EncodedMeta, Encoding, Staged, StagedBytes, ENCODED_PREFIX,
};

/// Objects smaller than this are not worth a copy: the saving is less than a request's
/// headers.
pub const MIN_RAW_SIZE: u64 = 1024;

/// zstd's level for copies. Level 3 (zstd's default) compresses a rustc DWARF debug file to
/// about a fifth at a few hundred MB/s a core; higher levels gain a few percent for several
/// times the time (`make bench` prints the figures).
pub const ZSTD_LEVEL: i32 = 3;

/// gzip's level: 6, gzip's own default.
pub const GZIP_LEVEL: u32 = 6;

/// The encodings copies are made in (`--compress zstd,gzip`, `SYMDEX_COMPRESS`): each at most
/// once, in [`Encoding::ALL`]'s order. `none` (or nothing) makes no copies.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Encodings(Vec<Encoding>);

impl Encodings {
    pub fn none() -> Self {
        Encodings(Vec::new())
    }

    pub fn zstd() -> Self {
        Encodings(vec![Encoding::Zstd])
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = Encoding> + '_ {
        self.0.iter().copied()
    }

    pub fn contains(&self, encoding: Encoding) -> bool {
        self.0.contains(&encoding)
    }
}

impl fmt::Display for Encodings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        let names: Vec<&str> = self.0.iter().map(|e| e.as_str()).collect();
        f.write_str(&names.join(","))
    }
}

impl FromStr for Encodings {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.is_empty() || s.eq_ignore_ascii_case("none") {
            return Ok(Encodings::none());
        }
        let mut chosen = Vec::new();
        for name in s.split(',') {
            chosen.push(name.parse::<Encoding>()?);
        }
        Ok(Encodings(
            Encoding::ALL
                .into_iter()
                .filter(|e| chosen.contains(e))
                .collect(),
        ))
    }
}

/// Whether a copy of `encoded` bytes is kept for `raw` bytes: at least [`MIN_RAW_SIZE`] raw
/// and shrunk by at least a quarter. Less saves too little egress to pay for its storage and
/// its request (a copy is about a fifth of a debug file, of a source a quarter or less;
/// already compressed files — `.dwz`, PDZ, zip — barely shrink and keep none).
pub fn worth_keeping(raw: u64, encoded: u64) -> bool {
    raw >= MIN_RAW_SIZE && u128::from(encoded) * 4 <= u128::from(raw) * 3
}

/// Artifacts of at most this many raw bytes are staged in memory ([`Stager`]): read once into
/// a buffer, compressed from it into in-memory copies, stored without a temporary file. Most
/// of a symbol store's artifacts are small (16 KB in the debuginfod benchmark), where a file
/// per copy in the system's `/tmp` costs an inode, a write and a copy into the store, a
/// visible share of the work. The bound keeps the memory of a copy in flight at a few MiB
/// (the raw bytes, a copy per encoding, and per runtime thread one zstd context of about
/// 2.5 MiB; docs/compression.md, "Memory"); larger artifacts, up to a 4 GiB PDB, are streamed
/// into unnamed temporary files, memory staying at the codec's window.
pub const MEMORY_STAGING_MAX: u64 = 1 << 20;

/// Whether copies of `raw_size` raw bytes are staged in memory (at most
/// [`MEMORY_STAGING_MAX`]) rather than in temporary files.
pub fn staged_in_memory(raw_size: u64) -> bool {
    raw_size <= MEMORY_STAGING_MAX
}

/// The copies of one artifact being staged: fed its raw bytes with `write` (one pass for
/// every encoding), then [`Stager::finish`]ed with the count the read returned.
pub struct Stager {
    raw_size: u64,
    /// Raw bytes written so far: never more than `raw_size` (a write past it is an error).
    fed: u64,
    staging: Staging,
}

enum Staging {
    /// At most [`MEMORY_STAGING_MAX`] raw bytes, gathered to be compressed at the finish.
    Memory {
        raw: Vec<u8>,
        encodings: Vec<Encoding>,
    },
    /// A compressor per encoding streaming into its temporary file.
    Stream(Vec<(Encoding, Compressor)>),
}

impl Stager {
    /// Stages copies in `encodings` of `raw_size` raw bytes: in memory up to
    /// [`MEMORY_STAGING_MAX`], in temporary files beyond.
    pub fn new(encodings: &[Encoding], raw_size: u64) -> io::Result<Self> {
        let staging = match usize::try_from(raw_size) {
            Ok(capacity) if staged_in_memory(raw_size) => Staging::Memory {
                raw: Vec::with_capacity(capacity),
                encodings: encodings.to_vec(),
            },
            _ => Staging::Stream(
                encodings
                    .iter()
                    .map(|&e| Ok((e, Compressor::new(e, raw_size)?)))
                    .collect::<io::Result<_>>()?,
            ),
        };
        Ok(Stager {
            raw_size,
            fed: 0,
            staging,
        })
    }

    /// The staged copies, `read` the number of raw bytes the read fed in: anything but the
    /// size the stager was made for is refused (the upload changed while it was read). The
    /// in-memory copies are compressed here, on the calling thread ([`copies_of_bytes`]: call
    /// it on the runtime's threads, not `spawn_blocking`'s).
    pub fn finish(self, read: u64) -> io::Result<Vec<(Encoding, Staged)>> {
        let size = self.raw_size;
        if read != size || self.fed != size {
            let read = if read == size { self.fed } else { read };
            return Err(changed(format!("read {read} bytes of {size}")));
        }
        match self.staging {
            Staging::Memory { raw, encodings } => copies_of_bytes(&encodings, &raw),
            Staging::Stream(compressors) => compressors
                .into_iter()
                .map(|(e, c)| Ok((e, c.finish()?)))
                .collect(),
        }
    }
}

/// The error of a read that did not give the size the upload had when it was indexed.
fn changed(what: String) -> io::Error {
    io::Error::other(format!(
        "{what}: the upload changed while it was compressed"
    ))
}

impl Write for Stager {
    /// Takes `buf` whole, or refuses it where it would take the bytes fed past the size: the
    /// upload grew (an object replaced while read), and the read stops there instead of
    /// going on to its end (a 4 GiB object replacing a small one is not downloaded whole
    /// only to be refused by [`Stager::finish`]).
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let fed = self.fed.saturating_add(buf.len() as u64);
        if fed > self.raw_size {
            let size = self.raw_size;
            return Err(changed(format!("read past the {size} bytes")));
        }
        self.fed = fed;
        match &mut self.staging {
            Staging::Memory { raw, .. } => raw.extend_from_slice(buf),
            Staging::Stream(compressors) => {
                for (_, compressor) in compressors {
                    compressor.write_all(buf)?;
                }
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.staging {
            Staging::Memory { .. } => Ok(()),
            Staging::Stream(compressors) => compressors.iter_mut().try_for_each(|(_, c)| c.flush()),
        }
    }
}

/// A streaming compressor writing into a temporary file: bytes go in with `write`, and
/// [`Compressor::finish`] returns the staged copy. Memory stays at the codec's window
/// whatever the size (a 4 GiB PDB is staged on disk, not held).
pub struct Compressor {
    inner: Inner,
}

enum Inner {
    Zstd(zstd::stream::write::Encoder<'static, File>),
    Gzip(flate2::write::GzEncoder<File>),
}

impl Compressor {
    /// A compressor for `encoding` staging into a new unnamed file in the system's temporary
    /// directory (`TMPDIR`; the Lambda's `/tmp`, sized by the module's ephemeral storage).
    pub fn new(encoding: Encoding, raw_size: u64) -> io::Result<Self> {
        let file = tempfile_in_tmp()?;
        let inner = match encoding {
            Encoding::Zstd => {
                let mut encoder = zstd::stream::write::Encoder::new(file, ZSTD_LEVEL)?;
                frame_as_copies_are(&mut encoder, raw_size)?;
                Inner::Zstd(encoder)
            }
            Encoding::Gzip => Inner::Gzip(gzip_encoder(file)),
        };
        Ok(Compressor { inner })
    }

    /// The staged copy, its size known.
    pub fn finish(self) -> io::Result<Staged> {
        let mut file = match self.inner {
            Inner::Zstd(encoder) => encoder.finish()?,
            Inner::Gzip(encoder) => encoder.finish()?,
        };
        file.flush()?;
        let size = file.stream_position()?;
        file.rewind()?;
        Ok(Staged::in_file(file, size))
    }
}

impl Write for Compressor {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.inner {
            Inner::Zstd(e) => e.write(buf),
            Inner::Gzip(e) => e.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.inner {
            Inner::Zstd(e) => e.flush(),
            Inner::Gzip(e) => e.flush(),
        }
    }
}

/// Sets up a zstd encoder for a copy of `raw_size` bytes, the same on both staging paths (a
/// copy is the same bytes whichever made it): [`ZSTD_LEVEL`], and the size in the frame
/// header — a decoder sizes its buffers from it, and clients that check X-Debuginfod-Size
/// can check it before decoding.
fn frame_as_copies_are<W: Write>(
    encoder: &mut zstd::stream::write::Encoder<'_, W>,
    raw_size: u64,
) -> io::Result<()> {
    encoder.set_parameter(CParameter::CompressionLevel(ZSTD_LEVEL))?;
    encoder.set_pledged_src_size(Some(raw_size))?;
    encoder.include_contentsize(true)
}

fn gzip_encoder<W: Write>(out: W) -> flate2::write::GzEncoder<W> {
    flate2::write::GzEncoder::new(out, flate2::Compression::new(GZIP_LEVEL))
}

/// Compresses all of `raw` (`raw_size` bytes) in `encoding`, streaming into a temporary file.
pub fn compress(encoding: Encoding, raw: &mut impl Read, raw_size: u64) -> io::Result<Staged> {
    let mut compressor = Compressor::new(encoding, raw_size)?;
    io::copy(raw, &mut compressor)?;
    compressor.finish()
}

/// The copies in `encodings` of `raw` (at most [`MEMORY_STAGING_MAX`] bytes: the caller
/// chose memory), compressed from the slice itself: a stager's buffer, or bytes the upload
/// already holds in memory (an archive entry, a section), which are not copied once more.
///
/// Synchronous, on the calling thread (the runtime's), which it holds meanwhile: 1 MiB takes
/// a few ms at zstd level 3, some tens of ms with gzip on (gzip -6 runs at a tenth of zstd's
/// speed), a 16 KB artifact (most of them) well under one. Left there on purpose: on
/// `spawn_blocking`'s threads each would keep a zstd context of its own ([`compress_bytes`]).
pub(crate) fn copies_of_bytes(
    encodings: &[Encoding],
    raw: &[u8],
) -> io::Result<Vec<(Encoding, Staged)>> {
    encodings
        .iter()
        .map(|&e| Ok((e, compress_bytes(e, raw)?)))
        .collect()
}

/// Compresses `raw` in `encoding` into memory: the same bytes as [`compress`] makes of them.
/// zstd runs in the thread's context ([`with_zstd_context`]); gzip has none to keep. The copy
/// is held until it is stored, across awaits: its buffer is shrunk to the copy.
///
/// Crate-private, called on the runtime's threads only: every thread that calls it keeps a
/// zstd context of about 2.5 MiB for good, so a call from `spawn_blocking` (a pool of up to
/// 512 threads) would leave one behind on each thread of the pool it ran on.
pub(crate) fn compress_bytes(encoding: Encoding, raw: &[u8]) -> io::Result<Staged> {
    let mut copy = match encoding {
        // Room for the worst case (incompressible bytes): the frame never grows the buffer.
        Encoding::Zstd => with_zstd_context(|context| {
            let out = Vec::with_capacity(zstd::zstd_safe::compress_bound(raw.len()));
            let mut encoder = zstd::stream::write::Encoder::with_context(out, context);
            frame_as_copies_are(&mut encoder, raw.len() as u64)?;
            encoder.write_all(raw)?;
            encoder.finish()
        })?,
        // A start at a quarter of the raw size, about what gzip keeps of a debug file or a
        // source (a copy is kept at three quarters at most): the buffer grows at most twice
        // for a copy worth keeping, where the raw size's half reserved twice the usual copy.
        // What is held after is the copy alone either way (shrunk below).
        Encoding::Gzip => {
            let mut encoder = gzip_encoder(Vec::with_capacity(raw.len() / 4));
            encoder.write_all(raw)?;
            encoder.finish()?
        }
    };
    copy.shrink_to_fit();
    Ok(Staged::in_memory(copy))
}

thread_local! {
    /// This thread's zstd context for in-memory copies, made on its first copy and kept:
    /// creating one per copy (`ZSTD_createCCtx`) was 3.6% of the CPU of a fresh index of
    /// 16 KB files. Its workspace is sized by the largest copy it made, at most
    /// [`MEMORY_STAGING_MAX`] raw bytes: about 2.5 MiB (`CCtx::sizeof` after a 1 MiB copy),
    /// kept for the thread's life (the streaming path makes contexts of its own).
    static ZSTD_CONTEXT: RefCell<Option<CCtx<'static>>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's zstd context, reset to what a new one is: no session (a frame
/// a previous user left unfinished is dropped) and zstd's default parameters, which
/// [`frame_as_copies_are`] then sets as for a new context — the frame is the one a fresh
/// context makes, whatever the context did before. `f` is synchronous: the context is
/// never held across an await, so no other task on the thread finds it in use.
fn with_zstd_context<T>(f: impl FnOnce(&mut CCtx<'static>) -> io::Result<T>) -> io::Result<T> {
    ZSTD_CONTEXT.with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else {
            // In use further up this thread's stack (never so today): a context of its own.
            return f(&mut new_zstd_context()?);
        };
        let context = match &mut *slot {
            Some(context) => context,
            empty => empty.insert(new_zstd_context()?),
        };
        context
            .reset(ResetDirective::SessionAndParameters)
            .map_err(|code| io::Error::other(zstd::zstd_safe::get_error_name(code)))?;
        f(context)
    })
}

fn new_zstd_context() -> io::Result<CCtx<'static>> {
    CCtx::try_create().ok_or_else(|| io::Error::other("no memory for a zstd context"))
}

/// An unnamed temporary file (`O_TMPFILE` where the system has it): nothing is left behind by
/// a process that dies while staging.
fn tempfile_in_tmp() -> io::Result<File> {
    tempfile::tempfile()
}

/// Decodes `encoded` bytes of `encoding` (tests and `verify`).
pub fn decode(encoding: Encoding, encoded: impl Read, out: &mut impl Write) -> io::Result<u64> {
    match encoding {
        Encoding::Zstd => io::copy(&mut zstd::stream::read::Decoder::new(encoded)?, out),
        Encoding::Gzip => io::copy(&mut flate2::read::GzDecoder::new(encoded), out),
    }
}

#[cfg(test)]
mod tests {
    use super::{
        compress, compress_bytes, decode, with_zstd_context, worth_keeping, Encoding, Encodings,
        Staged, StagedBytes, Stager, MEMORY_STAGING_MAX, MIN_RAW_SIZE,
    };
    use std::io::{Read, Write};

    /// `len` bytes that compress as a debug file does, about a fifth: runs of a few symbols
    /// among pseudo-random bytes (xorshift, `seed` varying them).
    fn artifact(len: usize, seed: u64) -> Vec<u8> {
        let mut state = seed | 1;
        let mut bytes = Vec::with_capacity(len);
        while bytes.len() < len {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let [kind, byte, run, ..] = state.to_le_bytes();
            if kind < 64 {
                bytes.push(byte);
            } else {
                bytes.extend(std::iter::repeat_n(
                    b"_ZN4core"[usize::from(run % 8)],
                    1 + usize::from(run % 24),
                ));
            }
        }
        bytes.truncate(len);
        bytes
    }

    fn bytes_of(staged: &Staged) -> Vec<u8> {
        let mut bytes = Vec::new();
        staged.reader().unwrap().read_to_end(&mut bytes).unwrap();
        assert_eq!(bytes.len() as u64, staged.size);
        bytes
    }

    /// The copy the temporary-file path makes of `raw`: a fresh context, fed 8 KiB at a
    /// time as a store's read feeds it.
    fn streamed(encoding: Encoding, raw: &[u8]) -> Vec<u8> {
        let staged = compress(encoding, &mut &raw[..], raw.len() as u64).unwrap();
        assert!(matches!(staged.bytes, StagedBytes::File(_)));
        bytes_of(&staged)
    }

    #[test]
    fn copies_staged_in_memory_are_the_streamed_copies() {
        let sizes = [1024, 16 * 1024 + 7, 200_000, MEMORY_STAGING_MAX as usize];
        for (seed, len) in sizes.into_iter().enumerate() {
            let raw = artifact(len, seed as u64 + 1);
            for encoding in Encoding::ALL {
                let staged = compress_bytes(encoding, &raw).unwrap();
                assert!(matches!(staged.bytes, StagedBytes::Memory(_)));
                assert_eq!(
                    bytes_of(&staged),
                    streamed(encoding, &raw),
                    "{encoding} {len}"
                );
                let mut back = Vec::new();
                decode(encoding, &bytes_of(&staged)[..], &mut back).unwrap();
                assert!(back == raw, "{encoding} {len}");
            }
        }
    }

    #[test]
    fn a_reused_zstd_context_makes_the_same_frames() {
        let large = artifact(MEMORY_STAGING_MAX as usize, 7);
        let small = artifact(20_000, 8);
        // A larger frame first (the context's workspace grown), then a small one, twice.
        for raw in [&large, &small, &large, &small] {
            let staged = compress_bytes(Encoding::Zstd, raw).unwrap();
            assert!(bytes_of(&staged) == streamed(Encoding::Zstd, raw));
        }
        // A frame abandoned half-way (its encoder dropped unfinished, another size pledged,
        // other parameters set): the next copy resets the session and sets its own.
        with_zstd_context(|context| {
            let mut encoder = zstd::stream::write::Encoder::with_context(Vec::new(), context);
            encoder.set_pledged_src_size(Some(large.len() as u64))?;
            encoder.include_checksum(true)?;
            encoder.include_contentsize(false)?;
            encoder.set_parameter(zstd::zstd_safe::CParameter::CompressionLevel(19))?;
            encoder.write_all(&large[..large.len() / 2])?;
            encoder.flush()
        })
        .unwrap();
        let staged = compress_bytes(Encoding::Zstd, &small).unwrap();
        assert!(bytes_of(&staged) == streamed(Encoding::Zstd, &small));
    }

    /// The copies a stager for `size` bytes makes when it is fed `fed` bytes of `raw`.
    fn staged(raw: &[u8], size: u64, fed: usize) -> std::io::Result<Vec<(Encoding, Staged)>> {
        let mut stager = Stager::new(&Encoding::ALL, size)?;
        for chunk in raw[..fed].chunks(8192) {
            stager.write_all(chunk)?;
        }
        stager.finish(fed as u64)
    }

    #[test]
    fn the_bound_decides_where_copies_are_staged() {
        let raw = artifact(MEMORY_STAGING_MAX as usize + 1, 9);
        for (len, in_memory) in [(raw.len() - 1, true), (raw.len(), false)] {
            let copies = staged(&raw, len as u64, len).unwrap();
            assert_eq!(copies.len(), 2);
            for (encoding, staged) in copies {
                let memory = matches!(staged.bytes, StagedBytes::Memory(_));
                assert_eq!(memory, in_memory, "{encoding} of {len} bytes");
                assert_eq!(
                    bytes_of(&staged),
                    streamed(encoding, &raw[..len]),
                    "{encoding}"
                );
            }
        }
    }

    #[test]
    fn a_read_one_byte_short_or_one_byte_long_is_refused_in_memory_and_in_a_file() {
        let raw = artifact(MEMORY_STAGING_MAX as usize + 2, 10);
        for size in [MEMORY_STAGING_MAX, MEMORY_STAGING_MAX + 1] {
            let short = staged(&raw, size, size as usize - 1).unwrap_err();
            assert!(short.to_string().contains("the upload changed"), "{short}");
            let long = staged(&raw, size, size as usize + 1).unwrap_err();
            assert!(long.to_string().contains("the upload changed"), "{long}");
        }
    }

    /// A reader of endless bytes, counting what it gave.
    struct Endless {
        given: u64,
    }

    impl Read for Endless {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            buf.fill(b'x');
            self.given += buf.len() as u64;
            Ok(buf.len())
        }
    }

    /// A source that grew while it was read (an object replaced by a far larger one) is
    /// refused at the first write past its size: the read stops there, not at its end.
    #[test]
    fn a_growing_source_is_refused_within_a_chunk_of_its_size_in_memory_and_in_a_file() {
        const CHUNK: u64 = 8192;
        for size in [MIN_RAW_SIZE, MEMORY_STAGING_MAX, MEMORY_STAGING_MAX + 1] {
            let mut stager = Stager::new(&Encoding::ALL, size).unwrap();
            let mut source = Endless { given: 0 };
            let mut chunk = [0u8; CHUNK as usize];
            let refused = loop {
                let n = source.read(&mut chunk).unwrap();
                if let Err(e) = stager.write_all(&chunk[..n]) {
                    break e;
                }
                assert!(source.given < 1 << 30, "read on to 1 GiB");
            };
            assert!(
                refused.to_string().contains("the upload changed"),
                "{refused}"
            );
            assert!(source.given <= size + CHUNK, "{} of {size}", source.given);
            // The same through `io::copy` (how a local store feeds a file to the stager).
            let mut stager = Stager::new(&Encoding::ALL, size).unwrap();
            let mut source = Endless { given: 0 };
            let refused = std::io::copy(&mut (&mut source).take(1 << 30), &mut stager);
            let refused = refused.unwrap_err();
            assert!(
                refused.to_string().contains("the upload changed"),
                "{refused}"
            );
            assert!(source.given <= size + CHUNK, "{} of {size}", source.given);
        }
    }

    #[test]
    fn encodings_parse_in_preference_order() {
        let both: Encodings = "gzip, zstd".parse().unwrap();
        assert_eq!(both.to_string(), "zstd,gzip");
        assert!("none".parse::<Encodings>().unwrap().is_empty());
        assert!("".parse::<Encodings>().unwrap().is_empty());
        assert!("br".parse::<Encodings>().is_err());
        assert!("zstd,br".parse::<Encodings>().is_err());
    }

    #[test]
    fn small_or_incompressible_objects_keep_no_copy() {
        assert!(!worth_keeping(MIN_RAW_SIZE - 1, 10));
        assert!(worth_keeping(4000, 3000));
        assert!(!worth_keeping(4000, 3001));
        assert!(!worth_keeping(u64::MAX, u64::MAX));
    }

    #[test]
    fn copies_decode_to_the_raw_bytes() {
        let raw: Vec<u8> = (0..200_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        for encoding in Encoding::ALL {
            let staged = compress(encoding, &mut &raw[..], raw.len() as u64).unwrap();
            assert!(worth_keeping(raw.len() as u64, staged.size), "{encoding}");
            let mut stored = Vec::new();
            staged.reader().unwrap().read_to_end(&mut stored).unwrap();
            assert_eq!(stored.len() as u64, staged.size);
            let mut back = Vec::new();
            decode(encoding, &stored[..], &mut back).unwrap();
            assert_eq!(back, raw, "{encoding}");
        }
    }
}
