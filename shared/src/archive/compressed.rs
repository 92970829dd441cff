//! Single compressed streams: gzip, zstd, xz, bzip2. The stream is decompressed as it is read
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
pub(super) fn decoded<'r>(
    walk: &Walk<'_>,
    reader: &'r WatchedReader<'r>,
    container: Container,
) -> Result<impl Read + 'r, ExpandError> {
    let input = sequential(reader);
    let decoder: Box<dyn Read + 'r> = match container {
        Container::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(input)),
        Container::Zstd => Box::new(ZstdFrames::new(input)),
        Container::Xz => Box::new(lzma_rust2::XzReader::new_mem_limit(
            input,
            true,
            XZ_MEM_LIMIT_KIB,
        )),
        Container::Bzip2 => Box::new(bzip2::bufread::MultiBzDecoder::new(input)),
        other => {
            return Err(ExpandError::Malformed(format!(
                "{} is not a compressed stream",
                other.as_str()
            )))
        }
    };
    Ok(Budget {
        inner: decoder,
        left: walk.left().saturating_add(1 << 20),
    })
}

/// Stops a decompressed stream at the archive's budget with an error that says so.
struct Budget<R> {
    inner: R,
    left: u64,
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
    fn new(source: R) -> Self {
        let mut decoder = FrameDecoder::new();
        decoder.set_max_window_size(ZSTD_MAX_WINDOW);
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
