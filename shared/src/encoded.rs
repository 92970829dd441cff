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

use std::fmt;
use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::str::FromStr;

pub use crate::storage::encoding::{
    copy_key, raw_key_of, EncodedMeta, Encoding, Staged, ENCODED_PREFIX,
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
                // The size in the frame header: a decoder sizes its buffers from it, and
                // clients that check X-Debuginfod-Size can check it before decoding.
                encoder.set_pledged_src_size(Some(raw_size))?;
                encoder.include_contentsize(true)?;
                Inner::Zstd(encoder)
            }
            Encoding::Gzip => Inner::Gzip(flate2::write::GzEncoder::new(
                file,
                flate2::Compression::new(GZIP_LEVEL),
            )),
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
        Ok(Staged {
            file,
            size,
            stored_at: Default::default(),
        })
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

/// Compresses all of `raw` (`raw_size` bytes) in `encoding`.
pub fn compress(encoding: Encoding, raw: &mut impl Read, raw_size: u64) -> io::Result<Staged> {
    let mut compressor = Compressor::new(encoding, raw_size)?;
    io::copy(raw, &mut compressor)?;
    compressor.finish()
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
    use super::{compress, decode, worth_keeping, Encoding, Encodings, MIN_RAW_SIZE};
    use std::io::Read;

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
