//! Zip archives (and nupkg, snupkg, aar, apk, ipa, jar): the central directory is read through
//! ranged reads; each entry is expanded, or, stored uncompressed, reported as a byte range.

use std::io::{self, BufRead, Read};

use ::zip::result::ZipError;
use ::zip::{CompressionMethod, ZipArchive};

use super::compressed::{self, Budget};
use super::{windowed, Container, Event, ExpandError, Walk, WatchedReader};
use crate::reader::RangeReader;

/// Read-ahead of zip reads: the central directory in GETs of this size, and a deflated entry's
/// data (whose large reads skip the window anyway).
const ZIP_WINDOW: usize = 64 << 10;

pub(super) fn expand(walk: &mut Walk<'_>, reader: &WatchedReader<'_>) -> Result<(), ExpandError> {
    let bad = |e: ZipError| reader.classify("bad zip archive", e);
    // A zip is read where its directory and headers are, and its stored entries are not read
    // at all (with ranges): a small window wastes little.
    let mut archive = ZipArchive::new(windowed(reader, ZIP_WINDOW)).map_err(bad)?;
    for index in 0..archive.len() {
        let entry = archive.by_index_raw(index).map_err(bad)?;
        let name = entry.name().to_string();
        if entry.is_dir() {
            continue;
        }
        if !walk.admit(&name)? {
            break;
        }
        if entry.is_symlink() {
            walk.skip(&name, "a symbolic link entry (not followed)")?;
            continue;
        }
        if entry.encrypted() {
            walk.reject(&name, "an encrypted zip entry")?;
            continue;
        }
        let (size, compressed, entry_crc32) =
            (entry.size(), entry.compressed_size(), entry.crc32());
        if let Some(reason) = walk.over_limits(size, Some(compressed)) {
            walk.reject(&name, reason)?;
            continue;
        }
        if walk.options.stored_ranges
            && walk.depth == 0
            && entry.compression() == CompressionMethod::Stored
            && compressed == size
        {
            let offset = entry.data_start();
            if offset
                .checked_add(size)
                .is_none_or(|end| end > reader.size())
            {
                walk.reject(&name, "a stored entry that lies outside the archive")?;
                continue;
            }
            walk.expanded += size;
            let entry = walk.name(&name);
            let crc32 = entry_crc32;
            (walk.visit)(Event::Stored {
                entry,
                offset,
                size,
                crc32,
            })?;
            continue;
        }
        let method = entry.compression();
        let declared = Declared {
            size,
            crc32: entry_crc32,
        };
        drop(entry);
        if let Some(container) = decoded_here(method) {
            let raw = archive.by_index_raw(index).map_err(bad)?;
            let input = io::BufReader::with_capacity(READ_BUFFER, raw);
            let decoder = match container {
                Own::Stream(container) => compressed::stream_decoder(walk, input, container),
                Own::Lzma => lzma_decoder(walk, input, size),
                Own::Ppmd => ppmd_decoder(walk, input),
            };
            match decoder {
                Ok(decoder) => {
                    let mut data = declared.checking(decoder);
                    walk.entry(&name, &mut data, Some(compressed))?;
                }
                // A header that did not read because reading the archive failed is worth a
                // retry; one that is not what it should be is the entry's fault.
                Err(ExpandError::Malformed(reason)) => match reader.classify(&name, &reason) {
                    ExpandError::Malformed(_) => walk.reject(&name, reason)?,
                    io => return Err(io),
                },
                Err(io) => return Err(io),
            }
            continue;
        }
        let mut entry = match archive.by_index(index) {
            Ok(entry) => entry,
            Err(ZipError::UnsupportedArchive(what)) => {
                walk.reject(&name, format!("unsupported zip entry: {what}"))?;
                continue;
            }
            Err(e) => return Err(bad(e)),
        };
        walk.entry(&name, &mut entry, Some(compressed))?;
    }
    Ok(())
}

/// Buffer over an entry's compressed data read by symdex's own decoders.
const READ_BUFFER: usize = 64 << 10;

/// How symdex decodes an entry the zip crate is built without (each method would bring a C
/// library or another decoder crate), with the decoders its archives already use.
enum Own {
    /// As the compressed stream it is: bzip2 (Info-ZIP's `zip -Z bzip2`, Python's
    /// `ZIP_BZIP2`, 7-Zip's `-tzip -mm=BZip2`), zstd and xz (WinZip, 7-Zip's `-mm=XZ`).
    Stream(Container),
    /// Zip's LZMA (Python's `ZIP_LZMA`, 7-Zip's `-mm=LZMA`).
    Lzma,
    /// PPMd var. I (WinZip, 7-Zip's `-mm=PPMd`: what they give text, sources).
    Ppmd,
}

/// How symdex decodes an entry compressed with `method` itself; `None`: by the zip crate, or
/// not at all.
fn decoded_here(method: CompressionMethod) -> Option<Own> {
    // Constants, not a match: the crate's variants depend on its features.
    [
        (CompressionMethod::BZIP2, Own::Stream(Container::Bzip2)),
        (CompressionMethod::ZSTD, Own::Stream(Container::Zstd)),
        (CompressionMethod::XZ, Own::Stream(Container::Xz)),
        (CompressionMethod::LZMA, Own::Lzma),
        (CompressionMethod::PPMD, Own::Ppmd),
    ]
    .into_iter()
    .find_map(|(known, own)| (known == method).then_some(own))
}

/// Zip's PPMd: a 2-byte header (the model's order less 1, its memory in MiB less 1, how the
/// model restarts when full), then PPMd var. I data, ended by an end mark.
fn ppmd_decoder<'r>(
    walk: &Walk<'_>,
    mut input: impl BufRead + 'r,
) -> Result<Budget<Box<dyn Read + 'r>>, ExpandError> {
    let malformed = |what: &str| ExpandError::Malformed(format!("its PPMd data {what}"));
    let header = u16::from_le_bytes(header_of(&mut input, "PPMd")?);
    let order = u32::from(header & 0xf) + 1;
    // At most 256 MiB (8 bits of MiB), allocated whole when the decoder starts.
    let memory = (u32::from((header >> 4) & 0xff) + 1) << 20;
    let restore = match header >> 12 {
        0 => ppmd_rust::RestoreMethod::Restart,
        1 => ppmd_rust::RestoreMethod::CutOff,
        other => {
            return Err(malformed(&format!(
                "restores its model by method {other}, unknown"
            )))
        }
    };
    Budget::reserving(walk, u64::from(memory) + (1 << 20), || {
        let decoder = ppmd_rust::Ppmd8Decoder::new(input, order, memory, restore)
            .map_err(|e| malformed(&format!("does not start: {e}")))?;
        Ok(Box::new(decoder) as Box<dyn Read + 'r>)
    })
}

/// Zip's LZMA: a 4-byte header (the LZMA SDK's version, the properties' size: 5), the
/// properties (lc/lp/pb, the dictionary's size), then raw LZMA data of `size` bytes decoded
/// (ended, or not, by an end marker: general purpose flag 1 says which; the size decides).
fn lzma_decoder<'r>(
    walk: &Walk<'_>,
    mut input: impl BufRead + 'r,
    size: u64,
) -> Result<Budget<Box<dyn Read + 'r>>, ExpandError> {
    let malformed = |what: &str| ExpandError::Malformed(format!("its LZMA data {what}"));
    let header: [u8; 9] = header_of(&mut input, "LZMA")?;
    if header[2..4] != [5, 0] {
        return Err(malformed("has properties of another size than 5 bytes"));
    }
    let properties = header[4];
    let dictionary = u32::from_le_bytes([header[5], header[6], header[7], header[8]]);
    // The dictionary is a window at most the entry's size: a larger one is never filled.
    let window = u64::from(dictionary).min(size.max(4096));
    let needs = super::memory::window_memory(window) + (6 << 20);
    let most = u64::from(compressed::XZ_MEM_LIMIT_KIB) << 10;
    if needs > most {
        return Err(malformed(&format!(
            "needs a {dictionary}-byte dictionary, over the {most} bytes allowed"
        )));
    }
    Budget::reserving(walk, needs, || {
        let decoder =
            lzma_rust2::LzmaReader::new_with_props(input, size, properties, dictionary, None)
                .map_err(|e| malformed(&format!("has bad properties: {e}")))?;
        Ok(Box::new(decoder) as Box<dyn Read + 'r>)
    })
}

/// The first `N` bytes of an entry's `method` data, its header. (Whether reading the archive
/// failed is told by the caller, from the watched reader.)
fn header_of<const N: usize>(input: &mut impl Read, method: &str) -> Result<[u8; N], ExpandError> {
    let mut header = [0u8; N];
    input.read_exact(&mut header).map_err(|_| {
        ExpandError::Malformed(format!("its {method} data is shorter than its header"))
    })?;
    Ok(header)
}

/// What an entry's local header and directory say of its content, checked against what it
/// decodes to where symdex decodes it (the zip crate checks those it decodes).
struct Declared {
    size: u64,
    crc32: u32,
}

impl Declared {
    fn checking<R: Read>(self, inner: R) -> Checked<R> {
        Checked {
            inner,
            declared: self,
            read: 0,
            crc: crc32fast::Hasher::new(),
        }
    }
}

/// An entry's decoded data, ending in an error where it is longer or shorter than declared or
/// its CRC-32 differs: the entry is then rejected as unreadable.
struct Checked<R> {
    inner: R,
    declared: Declared,
    read: u64,
    crc: crc32fast::Hasher,
}

impl<R: Read> Read for Checked<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let bad = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        let declared = self.declared.size;
        if self.read > declared {
            return Err(bad(format!(
                "it decodes past the {declared} bytes its header says"
            )));
        }
        if n > 0 {
            self.crc.update(&buf[..n]);
            return Ok(n);
        }
        if self.read < declared {
            return Err(bad(format!(
                "it decodes to {} bytes, its header says {declared}",
                self.read
            )));
        }
        let crc = self.crc.clone().finalize();
        if crc != self.declared.crc32 {
            return Err(bad(format!(
                "its CRC-32 is {crc:08x}, its header says {:08x}",
                self.declared.crc32
            )));
        }
        Ok(0)
    }
}
