//! What a Portable PDB says about its sources: its Document table (name blob, hash algorithm
//! GUID, hash) and the Source Link custom debug information (Portable PDB format
//! specification, ECMA-335 II.24 for the metadata tables and heaps).
//!
//! The metadata is read whole, up to [`MAX_METADATA_BYTES`]: a Portable PDB is the debug
//! information of one assembly (kilobytes to a few megabytes), and its documents' names are
//! spread over its blob heap.

use uuid::Uuid;

use super::stream_headers;
use crate::digest::hex;
use crate::formats::{le_u16, le_u32};
use crate::pdb_sources::{Checksum, ChecksumAlgorithm, Document, PdbSources, MAX_DOCUMENTS};
use crate::reader::{read_up_to, read_vec, RangeReader};
use crate::sourcelink::SourceLinkMap;

/// The most bytes of a Portable PDB read for its documents.
pub(crate) const MAX_METADATA_BYTES: u64 = 64 << 20;
/// The most parts a document name blob may have.
const MAX_NAME_PARTS: usize = 4096;

/// Table numbers (ECMA-335 II.22 and the Portable PDB specification).
const DOCUMENT: usize = 0x30;
const CUSTOM_DEBUG_INFORMATION: usize = 0x37;
/// The tables a HasCustomDebugInformation coded index may point into (its 5 tag bits).
const HAS_CUSTOM_DEBUG_INFORMATION: [usize; 27] = [
    0x06, 0x04, 0x01, 0x02, 0x08, 0x09, 0x0a, 0x00, 0x0e, 0x17, 0x14, 0x11, 0x1a, 0x1b, 0x20, 0x23,
    0x26, 0x27, 0x28, 0x2a, 0x2c, 0x2b, 0x30, 0x32, 0x33, 0x34, 0x35,
];
const METHOD_DEF: usize = 0x06;

const SOURCE_LINK: Uuid = Uuid::from_u128(0xcc110556_a091_4d38_9fec_25ab9a351a6a);
const MD5: Uuid = Uuid::from_u128(0x406ea660_64cf_4c82_b6f0_42d48172a799);
const SHA1: Uuid = Uuid::from_u128(0xff1816ec_aa5e_4d10_87f7_6f4963833460);
const SHA256: Uuid = Uuid::from_u128(0x8829d00f_11b8_4213_878b_770e8597ac16);

/// Reads what a Portable PDB says about its sources; every failure is a line of `unread`.
pub fn read_sources(reader: &dyn RangeReader) -> PdbSources {
    let mut sources = PdbSources::default();
    if let Err(reason) = read_into(reader, &mut sources) {
        sources.unread.push(reason);
    }
    sources
}

/// The heaps and tables of the metadata.
struct Metadata<'a> {
    strings_wide: bool,
    guids_wide: bool,
    blobs_wide: bool,
    guids: &'a [u8],
    blobs: &'a [u8],
    /// Rows of every table, those of the type system from the `#Pdb` stream.
    rows: [u32; 64],
    /// Where each present table's rows start in `tables`.
    table_at: [usize; 64],
    tables: &'a [u8],
}

fn read_into(reader: &dyn RangeReader, sources: &mut PdbSources) -> Result<(), String> {
    if reader.size() > MAX_METADATA_BYTES {
        return Err(format!(
            "a Portable PDB of {} bytes (more than {MAX_METADATA_BYTES} read for its documents)",
            reader.size()
        ));
    }
    let file = read_vec(reader, 0, reader.size() as usize).map_err(|e| e.to_string())?;
    let head = read_up_to(reader, 0, crate::formats::SNIFF_LEN).map_err(|e| e.to_string())?;
    let stream = |name: &str| -> Result<&[u8], String> {
        let (_, offset, size) = stream_headers(&head)?
            .into_iter()
            .find(|(n, _, _)| n == name)
            .ok_or(format!("no {name} stream"))?;
        let start = offset as usize;
        file.get(start..start.saturating_add(size as usize))
            .ok_or(format!("{name} stream past the end of the file"))
    };
    let pdb = stream("#Pdb")?;
    let tables = stream("#~")?;
    let guids = stream("#GUID").unwrap_or(&[]);
    let blobs = stream("#Blob").unwrap_or(&[]);
    let metadata = Metadata::read(pdb, tables, guids, blobs)?;
    metadata.documents(sources)?;
    match metadata.source_link() {
        Ok(Some(map)) => sources.source_link = Some(map),
        Ok(None) => {}
        Err(reason) => sources.unread.push(format!("Source Link: {reason}")),
    }
    Ok(())
}

impl<'a> Metadata<'a> {
    fn read(
        pdb: &[u8],
        tables: &'a [u8],
        guids: &'a [u8],
        blobs: &'a [u8],
    ) -> Result<Self, String> {
        let short = "#~ stream cut short";
        let heap_sizes = *tables.get(6).ok_or(short)?;
        let valid = u64::from(le_u32(tables, 8).ok_or(short)?)
            | u64::from(le_u32(tables, 12).ok_or(short)?) << 32;
        let mut rows = [0u32; 64];
        let mut at = 24;
        for (table, count) in rows.iter_mut().enumerate() {
            if valid & (1 << table) != 0 {
                *count = le_u32(tables, at).ok_or(short)?;
                at += 4;
            }
        }
        // The #Pdb stream: id (20), entry point (4), referenced type system tables (8), then
        // their row counts: what coded indexes into them are sized by.
        let referenced = u64::from(le_u32(pdb, 24).ok_or("#Pdb stream cut short")?)
            | u64::from(le_u32(pdb, 28).ok_or("#Pdb stream cut short")?) << 32;
        let mut pdb_at = 32;
        for (table, count) in rows.iter_mut().enumerate() {
            if referenced & (1 << table) != 0 {
                *count = le_u32(pdb, pdb_at).ok_or("#Pdb stream cut short")?;
                pdb_at += 4;
            }
        }
        let mut metadata = Metadata {
            strings_wide: heap_sizes & 1 != 0,
            guids_wide: heap_sizes & 2 != 0,
            blobs_wide: heap_sizes & 4 != 0,
            guids,
            blobs,
            rows,
            table_at: [0; 64],
            tables: &tables[at.min(tables.len())..],
        };
        let mut offset = 0usize;
        for (table, &count) in rows.iter().enumerate() {
            metadata.table_at[table] = offset;
            if valid & (1 << table) == 0 {
                continue;
            }
            let size = metadata.row_size(table)?;
            offset = (count as usize)
                .checked_mul(size)
                .and_then(|n| n.checked_add(offset))
                .ok_or("tables larger than memory")?;
        }
        if offset > metadata.tables.len() {
            return Err(format!(
                "tables of {offset} bytes in a #~ stream of {} bytes",
                metadata.tables.len()
            ));
        }
        Ok(metadata)
    }

    fn index(&self, table: usize) -> usize {
        if self.rows[table] < 1 << 16 {
            2
        } else {
            4
        }
    }

    fn heap(wide: bool) -> usize {
        if wide {
            4
        } else {
            2
        }
    }

    /// The size of a HasCustomDebugInformation coded index: 2 bytes while every table it may
    /// point into has fewer rows than its 11 bits count.
    fn coded_size(&self) -> usize {
        if HAS_CUSTOM_DEBUG_INFORMATION
            .iter()
            .all(|&t| self.rows[t] < 1 << (16 - 5))
        {
            2
        } else {
            4
        }
    }

    /// The row size of one of the Portable PDB's own tables.
    fn row_size(&self, table: usize) -> Result<usize, String> {
        let (string, guid, blob) = (
            Self::heap(self.strings_wide),
            Self::heap(self.guids_wide),
            Self::heap(self.blobs_wide),
        );
        let coded = self.coded_size();
        Ok(match table {
            0x30 => blob + guid + blob + guid,
            0x31 => self.index(DOCUMENT) + blob,
            0x32 => {
                self.index(METHOD_DEF) + self.index(0x35) + self.index(0x33) + self.index(0x34) + 8
            }
            0x33 => 4 + string,
            0x34 => string + blob,
            0x35 => self.index(0x35) + blob,
            0x36 => 2 * self.index(METHOD_DEF),
            0x37 => coded + guid + blob,
            other => return Err(format!("table {other:#x} in a Portable PDB")),
        })
    }

    /// The column at byte `offset` (2 or 4 bytes wide) of row `row` (0-based) of `table`.
    fn cell(&self, table: usize, row: usize, offset: usize, wide: bool) -> Option<u32> {
        let at = self.table_at[table] + row * self.row_size(table).ok()? + offset;
        if wide {
            le_u32(self.tables, at)
        } else {
            le_u16(self.tables, at).map(u32::from)
        }
    }

    fn guid(&self, index: u32) -> Option<Uuid> {
        let start = (index as usize).checked_sub(1)? * 16;
        let bytes: [u8; 16] = self.guids.get(start..start + 16)?.try_into().ok()?;
        Some(Uuid::from_bytes_le(bytes))
    }

    /// The blob at `index` of the blob heap (ECMA-335 II.24.2.4: a compressed length first).
    fn blob(&self, index: u32) -> Option<&'a [u8]> {
        let rest = self.blobs.get(index as usize..)?;
        let (len, used) = compressed_u32(rest)?;
        rest.get(used..used.checked_add(len as usize)?)
    }

    /// A document name blob: a separator, then the blob indexes of its parts.
    fn document_name(&self, index: u32) -> Option<String> {
        let blob = self.blob(index)?;
        let (&separator, mut rest) = blob.split_first()?;
        let mut name = Vec::new();
        let mut parts = 0;
        while !rest.is_empty() {
            parts += 1;
            if parts > MAX_NAME_PARTS {
                return None;
            }
            let (part, used) = compressed_u32(rest)?;
            rest = &rest[used..];
            if parts > 1 && separator != 0 {
                name.push(separator);
            }
            name.extend_from_slice(self.blob(part)?);
        }
        String::from_utf8(name).ok()
    }

    fn documents(&self, sources: &mut PdbSources) -> Result<(), String> {
        let count = self.rows[DOCUMENT] as usize;
        let blob = Self::heap(self.blobs_wide);
        let guid = Self::heap(self.guids_wide);
        for row in 0..count {
            if sources.documents.len() >= MAX_DOCUMENTS {
                sources
                    .unread
                    .push(format!("{count} documents, the first {MAX_DOCUMENTS} read"));
                break;
            }
            let name = self.cell(DOCUMENT, row, 0, self.blobs_wide);
            let algorithm = self.cell(DOCUMENT, row, blob, self.guids_wide);
            let hash = self.cell(DOCUMENT, row, blob + guid, self.blobs_wide);
            let (Some(name), Some(algorithm), Some(hash)) = (name, algorithm, hash) else {
                return Err(format!("document {} past its table", row + 1));
            };
            let Some(path) = self.document_name(name) else {
                sources
                    .unread
                    .push(format!("document {}: its name blob is broken", row + 1));
                continue;
            };
            let algorithm = match self.guid(algorithm) {
                Some(MD5) => Some(ChecksumAlgorithm::Md5),
                Some(SHA1) => Some(ChecksumAlgorithm::Sha1),
                Some(SHA256) => Some(ChecksumAlgorithm::Sha256),
                _ => None,
            };
            let digest = self.blob(hash).unwrap_or(&[]);
            let checksum = algorithm
                .filter(|a| a.digest_len() == digest.len())
                .map(|algorithm| Checksum {
                    algorithm,
                    digest: hex(digest),
                });
            sources.documents.push(Document {
                path,
                checksum,
                srcsrv_url: None,
            });
        }
        Ok(())
    }

    /// The first Source Link custom debug information's map.
    fn source_link(&self) -> Result<Option<SourceLinkMap>, String> {
        let coded = self.coded_size();
        let guid = Self::heap(self.guids_wide);
        for row in 0..self.rows[CUSTOM_DEBUG_INFORMATION] as usize {
            let kind = self.cell(CUSTOM_DEBUG_INFORMATION, row, coded, self.guids_wide);
            if kind.and_then(|k| self.guid(k)) != Some(SOURCE_LINK) {
                continue;
            }
            let value = self
                .cell(CUSTOM_DEBUG_INFORMATION, row, coded + guid, self.blobs_wide)
                .and_then(|v| self.blob(v))
                .ok_or("its value is not in the blob heap")?;
            return SourceLinkMap::parse(value)
                .map(Some)
                .map_err(|e| e.to_string());
        }
        Ok(None)
    }
}

/// An ECMA-335 compressed unsigned integer: its value and how many bytes it took.
fn compressed_u32(bytes: &[u8]) -> Option<(u32, usize)> {
    let first = *bytes.first()?;
    if first & 0x80 == 0 {
        Some((u32::from(first), 1))
    } else if first & 0xc0 == 0x80 {
        Some((
            (u32::from(first & 0x3f) << 8) | u32::from(*bytes.get(1)?),
            2,
        ))
    } else if first & 0xe0 == 0xc0 {
        let rest = bytes.get(1..4)?;
        let value = (u32::from(first & 0x1f) << 24)
            | (u32::from(rest[0]) << 16)
            | (u32::from(rest[1]) << 8)
            | u32::from(rest[2]);
        Some((value, 4))
    } else {
        None
    }
}
