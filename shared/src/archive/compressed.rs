//! Single compressed streams: gzip, zstd, xz, lzip, bzip2. The stream is decompressed as it is read
//! (bounded memory); a tarball or cpio archive inside is expanded entry by entry, anything else
//! is one entry named after the file (`foo.debug.gz` → `foo.debug`).

use std::io::{self, BufRead, Read};

use ruzstd::decoding::errors::{FrameDecoderError, ReadFrameHeaderError};
use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};

use super::{detect, expanded_name, sequential, Container, ExpandError, Walk, WatchedReader};

/// Largest zstd window accepted (what `zstd --long` uses by default; the decoder holds one).
pub(super) const ZSTD_MAX_WINDOW: u64 = 128 << 20;
/// Memory the xz decoder may use (xz -9 needs 65 MiB).
pub(super) const XZ_MEM_LIMIT_KIB: u32 = 256 * 1024;
/// The least dictionary or window an xz or zstd decoder is given, whatever its first header
/// says: what `xz` (-6) and `zstd` (up to -19) write by default.
const FLOOR_WINDOW: u64 = 8 << 20;

pub(super) fn expand(
    walk: &mut Walk<'_>,
    reader: &WatchedReader<'_>,
    container: Container,
    name: &str,
) -> Result<(), ExpandError> {
    let mut stream = decoded(walk, reader, container)?;
    let what = format!("bad {} stream", container.as_str());
    let mut head = Vec::with_capacity(super::DETECT_LEN);
    (&mut stream)
        .take(super::DETECT_LEN as u64)
        .read_to_end(&mut head)
        .map_err(|e| reader.classify(&what, e))?;
    let mut whole = io::Cursor::new(&head[..]).chain(stream);
    match detect(&head) {
        Some(Container::Tar) => return super::tar::expand(walk, reader, &mut whole),
        Some(Container::Cpio) => return super::cpio::expand(walk, reader, &mut whole),
        _ => {}
    }
    let entry = expanded_name(name);
    if walk.admit(&entry)? {
        walk.entry(&entry, &mut whole, None)?;
    }
    Ok(())
}

/// What `reader` decodes to as the compressed stream `container`, stopped at the archive's
/// budget: even bytes that are skipped (an entry over its limit) cost time to decode.
///
/// An xz or zstd decoder's memory (a dictionary, a window: up to 256 and 128 MiB) is
/// reserved from the walks' shared budget (memory.rs) as its stream's first block or frame
/// header says, at least [`FLOOR_WINDOW`], and the decoder is held to it: a later block or
/// frame asking for more is an error of the stream (xz and zstd write every block of a
/// stream alike; streams concatenated from several runs of the tool up to the floor). gzip
/// and bzip2 decoders take at most a few MiB, not reserved.
pub(super) fn decoded<'r>(
    walk: &Walk<'_>,
    reader: &'r WatchedReader<'r>,
    container: Container,
) -> Result<impl Read + 'r, ExpandError> {
    stream_decoder(walk, sequential(reader), container)
}

/// A decoder of the compressed stream `container` that `input` holds (an archive, or a zip
/// entry's data), its memory reserved and its output stopped at the archive's budget as
/// [`decoded`] says.
pub(super) fn stream_decoder<'r>(
    walk: &Walk<'_>,
    mut input: impl BufRead + 'r,
    container: Container,
) -> Result<Budget<Box<dyn Read + 'r>>, ExpandError> {
    // The stream's header, from the read-ahead window the decoder then reads on (no read of
    // its own: over S3 each read is a GET).
    let window = input.fill_buf().map_err(ExpandError::Io)?;
    let head = window[..window.len().min(64)].to_vec();
    let needs = match container {
        Container::Zstd => super::memory::window_memory(zstd_window_of(&head)),
        Container::Xz => xz_memory_of(&head),
        Container::Lzip => lzip_memory_of(&head),
        _ => 0,
    };
    // The xz and lzip decoders are held to what is reserved for them.
    let limit_kib = u32::try_from(needs >> 10).unwrap_or(XZ_MEM_LIMIT_KIB);
    Budget::reserving(walk, needs, || {
        let decoder: Box<dyn Read + 'r> = match container {
            Container::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(input)),
            Container::Zstd => Box::new(ZstdFrames::new(input, zstd_window_of(&head))),
            Container::Xz => Box::new(lzma_rust2::XzReader::new_mem_limit(input, true, limit_kib)),
            Container::Lzip => Box::new(LzipMembers {
                input,
                stream: lzma_rust2::LzipStream::new_mem_limit(true, limit_kib),
                ended: false,
            }),
            Container::Bzip2 => Box::new(bzip2::bufread::MultiBzDecoder::new(input)),
            other => {
                return Err(ExpandError::Malformed(format!(
                    "{} is not a compressed stream",
                    other.as_str()
                )))
            }
        };
        Ok(decoder)
    })
}

/// The window a zstd decoder is given for a stream starting with `head`: what its first
/// frame says, within [`FLOOR_WINDOW`] and [`ZSTD_MAX_WINDOW`].
fn zstd_window_of(head: &[u8]) -> u64 {
    zstd_window(head).map_or(ZSTD_MAX_WINDOW, |w| w.clamp(FLOOR_WINDOW, ZSTD_MAX_WINDOW))
}

/// The memory an xz decoder is given for a stream starting with `head`: what its first
/// block's LZMA2 dictionary takes.
fn xz_memory_of(head: &[u8]) -> u64 {
    lzma_memory(xz_first_block_lzma2(head).and_then(super::memory::lzma2_memory))
}

/// The memory an lzip decoder is given for a stream starting with `head`: what its first
/// member's dictionary takes (its header's sixth byte: a power of two less sixteenths of it).
/// A later member needing more is an error of the stream, as for xz.
pub(super) fn lzip_memory_of(head: &[u8]) -> u64 {
    let dictionary = head.get(5).map(|&coded| {
        let base = 1u64 << (coded & 0x1f);
        base - (base / 16) * u64::from(coded >> 5)
    });
    lzma_memory(dictionary.map(super::memory::window_memory))
}

/// What an LZMA-family stream decoder (xz, lzip) is given for what its first header `needs`:
/// at least [`FLOOR_WINDOW`]'s, at most [`XZ_MEM_LIMIT_KIB`] (that much where the header is
/// not one this reads).
fn lzma_memory(needs: Option<u64>) -> u64 {
    let most = u64::from(XZ_MEM_LIMIT_KIB) << 10;
    let floor = super::memory::window_memory(FLOOR_WINDOW);
    needs.map_or(most, |needs| needs.clamp(floor, most))
}

/// An lzip stream of one or more members, over lzma-rust2's `LzipStream`: its `LzipReader`
/// takes no memory limit, and a member's header may ask for a 512 MiB dictionary.
struct LzipMembers<R> {
    input: R,
    stream: lzma_rust2::LzipStream,
    ended: bool,
}

impl<R: BufRead> Read for LzipMembers<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        use lzma_rust2::{Action, Status};
        if self.ended || buf.is_empty() {
            return Ok(0);
        }
        loop {
            let input = self.input.fill_buf()?;
            let action = if input.is_empty() {
                Action::Finish
            } else {
                Action::Run
            };
            let step = self.stream.process(input, buf, action)?;
            self.input.consume(step.bytes_consumed);
            if step.status == Status::StreamEnd {
                self.ended = true;
                return Ok(step.bytes_produced);
            }
            if step.bytes_produced > 0 {
                return Ok(step.bytes_produced);
            }
            if step.bytes_consumed == 0 {
                // Nothing taken, nothing given: the input ended inside a member.
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the lzip stream is cut short",
                ));
            }
        }
    }
}

/// The LZMA2 property (its dictionary) of an xz stream's first block, from the block header
/// after the 12-byte stream header: `None` where the header is not one this reads (the
/// decoder then gets the most it may take).
pub(super) fn xz_first_block_lzma2(head: &[u8]) -> Option<u8> {
    let header = head.get(12..)?;
    let size = (usize::from(*header.first()?) + 1) * 4;
    let header = header.get(..size)?;
    let flags = *header.get(1)?;
    let mut at = 2;
    let varint = |at: &mut usize| -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..63).step_by(7) {
            let byte = *header.get(*at)?;
            *at += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    };
    for present in [0x40, 0x80] {
        if flags & present != 0 {
            varint(&mut at)?;
        }
    }
    for _ in 0..=(flags & 3) {
        let id = varint(&mut at)?;
        let properties = usize::try_from(varint(&mut at)?).ok()?;
        if id == 0x21 && properties == 1 {
            return header.get(at).copied();
        }
        at = at.checked_add(properties)?;
    }
    None
}

/// The window a zstd stream's first frame says it needs, from its frame header (a frame of a
/// single segment needs its content's size): `None` for anything else (a skippable frame
/// first, a header this does not read).
pub(super) fn zstd_window(head: &[u8]) -> Option<u64> {
    if head.get(..4)? != [0x28, 0xb5, 0x2f, 0xfd] {
        return None;
    }
    let descriptor = *head.get(4)?;
    let single_segment = descriptor & 0x20 != 0;
    if !single_segment {
        let window = *head.get(5)?;
        let base = 1u64 << (10 + (window >> 3));
        return Some(base + (base / 8) * u64::from(window & 7));
    }
    let dictionary_id_size = [0, 1, 2, 4][usize::from(descriptor & 3)];
    let content_size_size = [1, 2, 4, 8][usize::from(descriptor >> 6)];
    let at = 5 + dictionary_id_size;
    let field = head.get(at..at + content_size_size)?;
    let mut bytes = [0u8; 8];
    bytes[..content_size_size].copy_from_slice(field);
    let size = u64::from_le_bytes(bytes);
    // A two-byte field counts from 256.
    Some(if content_size_size == 2 {
        size + 256
    } else {
        size
    })
}

/// Stops a decompressed stream at the archive's budget with an error that says so, and holds
/// its decoder's memory reservation while it lives.
pub(super) struct Budget<R> {
    inner: R,
    left: u64,
    _reserved: Option<super::Grant<'static>>,
}

impl<R> Budget<R> {
    /// The decoder `make` makes once its `needs` bytes of memory are reserved from the walks'
    /// shared budget (none for 0; a decoder may allocate them as it is made), stopped a MiB
    /// past what the archive may still expand to.
    pub(super) fn reserving<E>(
        walk: &Walk<'_>,
        needs: u64,
        make: impl FnOnce() -> Result<R, E>,
    ) -> Result<Self, E> {
        let reserved = (needs > 0).then(|| walk.reserve(needs)).flatten();
        Ok(Budget {
            inner: make()?,
            left: walk.left().saturating_add(1 << 20),
            _reserved: reserved,
        })
    }
}

impl<R: Read> Read for Budget<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the stream expands past the archive's limits",
            ));
        }
        let max = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..max])?;
        self.left -= n as u64;
        Ok(n)
    }
}

/// A zstd stream of one or more frames (skippable frames skipped). Written over ruzstd's
/// `FrameDecoder` because its `StreamingDecoder` reads a single frame.
struct ZstdFrames<R> {
    source: R,
    decoder: FrameDecoder,
    in_frame: bool,
}

impl<R: BufRead> ZstdFrames<R> {
    /// Frames whose window is over `max_window` are refused.
    fn new(source: R, max_window: u64) -> Self {
        let mut decoder = FrameDecoder::new();
        decoder.set_max_window_size(max_window);
        ZstdFrames {
            source,
            decoder,
            in_frame: false,
        }
    }
}

impl<R: BufRead> Read for ZstdFrames<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if self.in_frame {
                let decoder = &mut self.decoder;
                while decoder.can_collect() == 0 && !decoder.is_finished() {
                    decoder
                        .decode_blocks(&mut self.source, BlockDecodingStrategy::UptoBlocks(1))
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                }
                let n = decoder.read(buf)?;
                if n > 0 {
                    return Ok(n);
                }
                self.in_frame = false;
            }
            if self.source.fill_buf()?.is_empty() {
                return Ok(0);
            }
            match self.decoder.init(&mut self.source) {
                Ok(()) => self.in_frame = true,
                Err(FrameDecoderError::ReadFrameHeaderError(ReadFrameHeaderError::SkipFrame {
                    length,
                    ..
                })) => {
                    io::copy(
                        &mut (&mut self.source).take(u64::from(length)),
                        &mut io::sink(),
                    )?;
                }
                Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
            }
        }
    }
}
