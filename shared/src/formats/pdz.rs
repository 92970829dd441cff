//! PDZ: a PDB stored in Microsoft's compressed MSFZ container (the MSFZ specification in
//! microsoft/pdb-rs, `msfz/src/msfz.md`). The streams are the PDB's own; only the container
//! differs. Identification reads the 80-byte header, the stream directory, the chunk table,
//! and the first bytes of streams 1 (PDB info) and 3 (DBI) — decompressing only the chunks
//! that hold them — then decodes them as a PDB's (`pdb.rs`).
//!
//! Hand-written: Microsoft's reader crate opens whole files through its own I/O and builds
//! with C zstd; this needs bounded reads through [`RangeReader`] and a few fields. Chunks are
//! zstd (`ruzstd`, pure Rust) or DEFLATE (`flate2`), each one read and inflated within a size
//! limit.

use std::collections::HashMap;
use std::io::Read;

use super::pdb::{
    identity_from_streams, DBI_HEADER_LEN, DBI_STREAM, INFO_HEADER_LEN, PDB_INFO_STREAM,
};
use super::{le_u32, Format, FormatError};
use crate::identity::Identity;
use crate::reader::{read_vec, RangeReader};

/// The MSFZ file signature (its first 32 bytes).
pub const MSFZ_MAGIC: &[u8; 32] = b"Microsoft MSFZ Container\r\n\x1aALD\0\0";
const HEADER_LEN: usize = 80;
const CHUNK_ENTRY_LEN: usize = 20;
const NIL_STREAM: u32 = u32::MAX;
/// The stream directory and one chunk are each inflated within this size: far above what real
/// PDZ writers use (chunks of a few MiB), far below what a lying header could ask for.
const MAX_INFLATED: u32 = 64 * 1024 * 1024;
/// Entries of the chunk table read at most (20 bytes each: 4 MiB).
const MAX_CHUNKS: u32 = 200_000;

const COMPRESSION_NONE: u32 = 0;
const COMPRESSION_ZSTD: u32 = 1;
const COMPRESSION_DEFLATE: u32 = 2;

/// The format this module reads (its errors name it: `FormatError::malformed`).
const FORMAT: Format = Format::Pdz;

fn io(e: std::io::Error) -> FormatError {
    FormatError::from_io(Format::Pdz, e)
}

fn le_u64(data: &[u8], at: usize) -> Option<u64> {
    let bytes: [u8; 8] = data.get(at..at + 8)?.try_into().ok()?;
    Some(u64::from_le_bytes(bytes))
}

/// Inflates `data` with `compression` into exactly `size` bytes.
fn inflate(compression: u32, data: &[u8], size: u32) -> Result<Vec<u8>, FormatError> {
    if size > MAX_INFLATED {
        return Err(FormatError::malformed(
            FORMAT,
            format!("{size} bytes to inflate, more than the {MAX_INFLATED} allowed"),
        ));
    }
    let limit = u64::from(size) + 1;
    // No capacity up front: the size is the header's claim, the bytes decide.
    let mut out = Vec::new();
    let result = match compression {
        COMPRESSION_NONE => {
            out.extend_from_slice(data);
            Ok(out.len())
        }
        COMPRESSION_ZSTD => ruzstd::decoding::StreamingDecoder::new(data)
            .map_err(|e| FormatError::malformed(FORMAT, format!("zstd: {e}")))?
            .take(limit)
            .read_to_end(&mut out),
        COMPRESSION_DEFLATE => flate2::read::DeflateDecoder::new(data)
            .take(limit)
            .read_to_end(&mut out),
        other => {
            return Err(FormatError::malformed(
                FORMAT,
                format!("unknown compression {other}"),
            ))
        }
    };
    result.map_err(|e| FormatError::malformed(FORMAT, format!("cannot inflate: {e}")))?;
    if out.len() != size as usize {
        return Err(FormatError::malformed(
            FORMAT,
            format!("inflated to {} bytes, the header says {size}", out.len()),
        ));
    }
    Ok(out)
}

/// One chunk of the chunk table.
#[derive(Clone, Copy)]
struct Chunk {
    offset: u64,
    compression: u32,
    compressed: u32,
    size: u32,
}

struct Msfz<'r> {
    reader: &'r dyn RangeReader,
    chunks: Vec<Chunk>,
    /// Fragments `(size, location)` of the streams identification needs, by stream number.
    fragments: HashMap<u32, Vec<(u32, u64)>>,
    /// Chunks inflated so far.
    inflated: HashMap<usize, Vec<u8>>,
}

impl<'r> Msfz<'r> {
    fn open(reader: &'r dyn RangeReader) -> Result<Self, FormatError> {
        let header = read_vec(reader, 0, HEADER_LEN).map_err(io)?;
        if !header.starts_with(MSFZ_MAGIC) {
            return Err(FormatError::malformed(FORMAT, "not an MSFZ header"));
        }
        let u64_at =
            |at| le_u64(&header, at).ok_or_else(|| FormatError::malformed(FORMAT, "short header"));
        let u32_at =
            |at| le_u32(&header, at).ok_or_else(|| FormatError::malformed(FORMAT, "short header"));
        let version = u64_at(32)?;
        if version != 0 {
            return Err(FormatError::malformed(
                FORMAT,
                format!("MSFZ version {version} (only 0 is known)"),
            ));
        }
        let (dir_offset, table_offset) = (u64_at(40)?, u64_at(48)?);
        let num_streams = u32_at(56)?;
        let (dir_compression, dir_compressed, dir_size) = (u32_at(60)?, u32_at(64)?, u32_at(68)?);
        let (num_chunks, table_size) = (u32_at(72)?, u32_at(76)?);
        if num_chunks > MAX_CHUNKS
            || u64::from(table_size) != u64::from(num_chunks) * CHUNK_ENTRY_LEN as u64
        {
            return Err(FormatError::malformed(
                FORMAT,
                format!("chunk table of {table_size} bytes for {num_chunks} chunks"),
            ));
        }
        if dir_compressed > MAX_INFLATED {
            return Err(FormatError::malformed(
                FORMAT,
                format!("stream directory of {dir_compressed} bytes"),
            ));
        }
        let raw_dir = read_vec(reader, dir_offset, dir_compressed as usize).map_err(io)?;
        let directory = inflate(dir_compression, &raw_dir, dir_size)?;
        let table = read_vec(reader, table_offset, table_size as usize).map_err(io)?;
        let chunks = table
            .chunks_exact(CHUNK_ENTRY_LEN)
            .map(|e| Chunk {
                offset: le_u64(e, 0).unwrap_or(0),
                compression: le_u32(e, 8).unwrap_or(0),
                compressed: le_u32(e, 12).unwrap_or(0),
                size: le_u32(e, 16).unwrap_or(0),
            })
            .collect();

        // The directory: per stream, `u32::MAX` (nil) or fragments `(u32 size, u64 location)`
        // ended by a zero size. Only streams 0..=3 are walked.
        let mut fragments = HashMap::new();
        let mut pos = 0usize;
        for stream in 0..num_streams.min(DBI_STREAM + 1) {
            let first = le_u32(&directory, pos)
                .ok_or_else(|| FormatError::malformed(FORMAT, "short stream directory"))?;
            pos += 4;
            if first == NIL_STREAM {
                continue;
            }
            let mut list = Vec::new();
            let mut size = first;
            while size != 0 {
                let location = le_u64(&directory, pos)
                    .ok_or_else(|| FormatError::malformed(FORMAT, "short stream directory"))?;
                list.push((size, location));
                pos += 8;
                size = le_u32(&directory, pos)
                    .ok_or_else(|| FormatError::malformed(FORMAT, "short stream directory"))?;
                pos += 4;
            }
            fragments.insert(stream, list);
        }
        Ok(Msfz {
            reader,
            chunks,
            fragments,
            inflated: HashMap::new(),
        })
    }

    fn chunk(&mut self, index: usize) -> Result<&[u8], FormatError> {
        if !self.inflated.contains_key(&index) {
            let chunk = *self.chunks.get(index).ok_or_else(|| {
                FormatError::malformed(FORMAT, format!("chunk {index} is not in the chunk table"))
            })?;
            if chunk.compressed > MAX_INFLATED {
                return Err(FormatError::malformed(
                    FORMAT,
                    format!("chunk of {} bytes", chunk.compressed),
                ));
            }
            let raw = read_vec(self.reader, chunk.offset, chunk.compressed as usize).map_err(io)?;
            let data = inflate(chunk.compression, &raw, chunk.size)?;
            self.inflated.insert(index, data);
        }
        Ok(self.inflated.get(&index).map_or(&[][..], Vec::as_slice))
    }

    /// The first `len` bytes of `stream`, or `None` when it is absent, nil or shorter.
    fn stream_head(&mut self, stream: u32, len: usize) -> Result<Option<Vec<u8>>, FormatError> {
        let Some(fragments) = self.fragments.get(&stream).cloned() else {
            return Ok(None);
        };
        let total: u64 = fragments.iter().map(|(size, _)| u64::from(*size)).sum();
        if total < len as u64 {
            return Ok(None);
        }
        let mut out = Vec::with_capacity(len);
        for (size, location) in fragments {
            if out.len() == len {
                break;
            }
            let want = (size as usize).min(len - out.len());
            if location >> 63 == 0 {
                // Uncompressed: bits 0..=47 are a file offset.
                let at = location & 0x0000_ffff_ffff_ffff;
                out.extend(read_vec(self.reader, at, want).map_err(io)?);
                continue;
            }
            // Compressed: chunk index in bits 32..=62, offset in its inflated bytes in 0..=31;
            // inflated chunks form one address space, so a fragment may run into the next.
            let mut chunk = ((location >> 32) & 0x7fff_ffff) as usize;
            let mut at = (location & 0xffff_ffff) as usize;
            let mut left = want;
            while left > 0 {
                let data = self.chunk(chunk)?;
                if at >= data.len() {
                    at -= data.len();
                    chunk += 1;
                    continue;
                }
                let take = (data.len() - at).min(left);
                out.extend_from_slice(&data[at..at + take]);
                left -= take;
                at = 0;
                chunk += 1;
            }
        }
        Ok(Some(out))
    }
}

pub fn identify(reader: &dyn RangeReader) -> Result<Identity, FormatError> {
    let mut msfz = Msfz::open(reader)?;
    let info = msfz
        .stream_head(PDB_INFO_STREAM, INFO_HEADER_LEN)?
        .ok_or_else(|| FormatError::malformed(FORMAT, "no PDB info stream"))?;
    let dbi = msfz.stream_head(DBI_STREAM, DBI_HEADER_LEN)?;
    identity_from_streams(Format::Pdz, &info, dbi.as_deref())
}

#[cfg(test)]
mod tests {
    use super::identify;
    use crate::reader::MemReader;
    use crate::testing::builders::{build_msfz, dbi_stream, info_stream};
    use crate::Format;

    fn streams(age: u32) -> Vec<Option<Vec<u8>>> {
        vec![
            Some(vec![]),
            Some(info_stream([0x42; 16], 1)),
            None,
            Some(dbi_stream(age, 0x8664)),
        ]
    }

    #[test]
    fn compressed_and_uncompressed_containers_identify_alike() {
        for compressed in [false, true] {
            let id = identify(&MemReader(build_msfz(&streams(3), compressed))).unwrap();
            assert_eq!(id.format, Format::Pdz);
            assert_eq!(
                id.debug_id.to_string(),
                "42424242-4242-4242-4242-424242424242-3",
                "the DBI age wins, as for a PDB (compressed: {compressed})"
            );
            assert_eq!(id.arch, "x86_64");
        }
    }

    #[test]
    fn lying_headers_are_errors_not_allocations() {
        let good = build_msfz(&streams(1), true);
        // Directory size claimed 4 GiB; chunk count out of range; a truncated file.
        let mut huge = good.clone();
        huge[68..72].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(identify(&MemReader(huge)).is_err());
        let mut chunks = good.clone();
        chunks[72..76].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(identify(&MemReader(chunks)).is_err());
        for cut in [10, 79, 100, good.len() - 1] {
            assert!(
                identify(&MemReader(good[..cut].to_vec())).is_err(),
                "cut at {cut}"
            );
        }
        let mut version = good;
        version[32] = 1;
        assert!(identify(&MemReader(version)).is_err());
    }
}
