//! PE/COFF images (PE32 and PE32+): COFF header, SizeOfImage and every debug-directory entry.
//!
//! Headers and the section table come from the `object` crate's lazy PE reader over a
//! [`ReadCache`]; the debug directory and its entries are read by range here, because `object`
//! only exposes the first CodeView record and reads whole sections to get at it.

use debugid::{CodeId, DebugId};
use object::pe::{self, ImageDebugDirectory};
use object::read::pe::{ImageNtHeaders, ImageOptionalHeader, SectionTable};
use object::{LittleEndian as LE, ReadCache, ReadRef};

use super::{c_string, hex, le_u32, Format, FormatError};
use crate::identity::{EmbeddedPortablePdb, Identity, Kind, PdbChecksum, PdbReference, PerfmapInfo};
use crate::reader::{read_vec, RangeReader, ReaderCursor};

/// CodeView entries whose MinorVersion is this describe a Portable PDB ("PM").
pub const PORTABLE_PDB_MINOR_VERSION: u16 = 0x504d;

const DEBUG_TYPE_CODEVIEW: u32 = 2;
const DEBUG_TYPE_EMBEDDED_PORTABLE_PDB: u32 = 17;
const DEBUG_TYPE_PDB_CHECKSUM: u32 = 19;
const DEBUG_TYPE_PERFMAP: u32 = 21;

/// More debug entries than this is a lie (real images have a handful).
const MAX_DEBUG_ENTRIES: usize = 256;
/// Largest debug entry payload read (a CodeView record is a path plus 24 bytes).
const MAX_ENTRY_DATA: u32 = 64 * 1024;

fn malformed(reason: impl Into<String>) -> FormatError {
    FormatError::malformed(Format::Pe, reason)
}

/// True when `head` (starting with `MZ`) points at a `PE\0\0` signature.
pub fn has_pe_signature(head: &[u8], reader: &dyn RangeReader) -> std::io::Result<bool> {
    let Some(e_lfanew) = le_u32(head, 0x3c) else {
        return Ok(false);
    };
    let at = e_lfanew as usize;
    if let Some(sig) = head.get(at..at.saturating_add(4)) {
        return Ok(sig == b"PE\0\0");
    }
    if u64::from(e_lfanew) + 4 > reader.size() {
        return Ok(false);
    }
    let mut sig = [0u8; 4];
    reader.read_exact_at(u64::from(e_lfanew), &mut sig)?;
    Ok(&sig == b"PE\0\0")
}

pub fn identify(reader: &dyn RangeReader) -> Result<Identity, FormatError> {
    let cache = ReadCache::new(ReaderCursor::new(reader));
    let data = &cache;
    let magic = object::read::pe::optional_header_magic(data)
        .map_err(|e| malformed(format!("headers: {e}")))?;
    match magic {
        pe::IMAGE_NT_OPTIONAL_HDR32_MAGIC => identify_nt::<pe::ImageNtHeaders32>(reader, data),
        pe::IMAGE_NT_OPTIONAL_HDR64_MAGIC => identify_nt::<pe::ImageNtHeaders64>(reader, data),
        other => Err(malformed(format!("unknown optional header magic {other:#x}"))),
    }
}

fn identify_nt<'data, Pe: ImageNtHeaders>(
    reader: &dyn RangeReader,
    data: &'data ReadCache<ReaderCursor<'data>>,
) -> Result<Identity, FormatError> {
    let dos = pe::ImageDosHeader::parse(data).map_err(|e| malformed(format!("DOS header: {e}")))?;
    let mut offset = u64::from(dos.nt_headers_offset());
    let (nt, data_dirs) =
        Pe::parse(data, &mut offset).map_err(|e| malformed(format!("NT headers: {e}")))?;
    let sections = nt
        .sections(data, offset)
        .map_err(|e| malformed(format!("section table: {e}")))?;
    let file_header = nt.file_header();
    let timestamp = file_header.time_date_stamp.get(LE);
    let machine = file_header.machine.get(LE).0;
    let characteristics = file_header.characteristics.get(LE);
    let size_of_image = nt.optional_header().size_of_image();

    let kind = if characteristics.0 & pe::IMAGE_FILE_DLL.0 != 0 {
        Kind::Library
    } else {
        Kind::Executable
    };
    let mut id = Identity::new(Format::Pe, kind);
    id.arch = arch_name(machine).to_string();
    id.pe_timestamp = Some(timestamp);
    id.pe_size_of_image = Some(size_of_image);
    id.code_id = Some(CodeId::new(format!("{timestamp:08x}{size_of_image:x}")));

    if let Some(dir) = data_dirs.get(pe::IMAGE_DIRECTORY_ENTRY_DEBUG) {
        let rva = dir.virtual_address.get(LE);
        let size = dir.size.get(LE);
        if rva != 0 && size != 0 {
            read_debug_directory(reader, &sections, data, rva, size, &mut id)?;
        }
    }

    // The debug id is the first CodeView record's (KEYS.md §3); without one it stays nil.
    if let Some(first) = id.pdb_references.first() {
        id.debug_id = first.debug_id;
        id.age = Some(first.age);
        id.debug_file = Some(first.path.clone());
    }
    Ok(id)
}

fn read_debug_directory<'data>(
    reader: &dyn RangeReader,
    sections: &SectionTable<'data>,
    data: &'data ReadCache<ReaderCursor<'data>>,
    rva: u32,
    size: u32,
    id: &mut Identity,
) -> Result<(), FormatError> {
    let entry_size = std::mem::size_of::<ImageDebugDirectory>();
    let count = size as usize / entry_size;
    if count > MAX_DEBUG_ENTRIES {
        return Err(malformed(format!("debug directory claims {count} entries")));
    }
    let (file_offset, _) = sections
        .pe_file_range_at(rva)
        .ok_or_else(|| malformed(format!("debug directory RVA {rva:#x} is in no section")))?;
    let entries: &[ImageDebugDirectory] = data
        .read_slice_at(u64::from(file_offset), count)
        .map_err(|()| malformed("debug directory is truncated"))?;

    for entry in entries {
        let typ = entry.typ.get(LE).0;
        if !matches!(
            typ,
            DEBUG_TYPE_CODEVIEW
                | DEBUG_TYPE_EMBEDDED_PORTABLE_PDB
                | DEBUG_TYPE_PDB_CHECKSUM
                | DEBUG_TYPE_PERFMAP
        ) {
            continue;
        }
        let Some(payload) = entry_data(reader, sections, entry)? else {
            continue;
        };
        match typ {
            DEBUG_TYPE_CODEVIEW => {
                if let Some(reference) = parse_codeview(&payload, entry) {
                    id.pdb_references.push(reference);
                }
            }
            DEBUG_TYPE_PDB_CHECKSUM => {
                if let Some(checksum) = parse_pdb_checksum(&payload) {
                    id.pdb_checksums.push(checksum);
                }
            }
            DEBUG_TYPE_PERFMAP => {
                if id.perfmap.is_none() {
                    id.perfmap = parse_perfmap_entry(&payload);
                }
            }
            DEBUG_TYPE_EMBEDDED_PORTABLE_PDB => {
                // "MPDB", uncompressed size, then deflate data: record its presence and size.
                if payload.starts_with(b"MPDB") {
                    id.embedded_portable_pdb = Some(EmbeddedPortablePdb {
                        compressed_size: entry.size_of_data.get(LE).saturating_sub(8),
                        uncompressed_size: le_u32(&payload, 4).unwrap_or(0),
                    });
                    id.has_debug_info = true;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The payload of one debug entry: at its file pointer, falling back to its RVA mapped through
/// the section table (KEYS.md §2). For an embedded PDB only its 8-byte header is read.
fn entry_data(
    reader: &dyn RangeReader,
    sections: &SectionTable<'_>,
    entry: &ImageDebugDirectory,
) -> Result<Option<Vec<u8>>, FormatError> {
    let mut size = entry.size_of_data.get(LE);
    if entry.typ.get(LE).0 == DEBUG_TYPE_EMBEDDED_PORTABLE_PDB {
        size = size.min(8);
    }
    if size == 0 {
        return Ok(None);
    }
    if size > MAX_ENTRY_DATA {
        return Err(malformed(format!("debug entry claims {size} bytes")));
    }
    let pointer = entry.pointer_to_raw_data.get(LE);
    let offset = if pointer != 0 && u64::from(pointer) + u64::from(size) <= reader.size() {
        Some(pointer)
    } else {
        sections
            .pe_file_range_at(entry.address_of_raw_data.get(LE))
            .map(|(offset, _)| offset)
    };
    let Some(offset) = offset else {
        return Ok(None);
    };
    read_vec(reader, u64::from(offset), size as usize)
        .map(Some)
        .map_err(|e| FormatError::from_io(Format::Pe, e))
}

/// `RSDS` + GUID + age + NUL-terminated path.
fn parse_codeview(payload: &[u8], entry: &ImageDebugDirectory) -> Option<PdbReference> {
    if !payload.starts_with(b"RSDS") || payload.len() < 24 {
        return None;
    }
    let guid = &payload[4..20];
    let age = le_u32(payload, 20)?;
    let path = c_string(&payload[24..]).unwrap_or_default();
    let portable = entry.minor_version.get(LE) == PORTABLE_PDB_MINOR_VERSION;
    let timestamp = entry.time_date_stamp.get(LE);
    // For a Portable PDB the id's appendix is the entry's timestamp, not the CodeView age.
    let appendix = if portable { timestamp } else { age };
    let debug_id = DebugId::from_guid_age(guid, appendix).ok()?;
    Some(PdbReference {
        path,
        debug_id,
        age,
        portable,
        timestamp,
    })
}

/// NUL-terminated algorithm name, then the checksum bytes.
fn parse_pdb_checksum(payload: &[u8]) -> Option<PdbChecksum> {
    let end = payload.iter().position(|&b| b == 0)?;
    let algorithm = std::str::from_utf8(&payload[..end]).ok()?.to_string();
    Some(PdbChecksum {
        algorithm,
        checksum: hex(&payload[end + 1..]),
    })
}

/// `R2RM`, 16-byte signature, u32 version, NUL-terminated perfmap path.
fn parse_perfmap_entry(payload: &[u8]) -> Option<PerfmapInfo> {
    if !payload.starts_with(b"R2RM") || payload.len() < 24 {
        return None;
    }
    Some(PerfmapInfo {
        signature: hex(&payload[4..20]),
        version: le_u32(payload, 20)?,
        path: c_string(&payload[24..]).filter(|p| !p.is_empty()),
    })
}

/// Sentry's architecture name for a COFF machine type.
pub fn arch_name(machine: u16) -> &'static str {
    match machine {
        0x014c => "x86",
        0x8664 => "x86_64",
        0xaa64 | 0xa641 => "arm64", // ARM64, ARM64EC
        0x01c0 | 0x01c2 | 0x01c4 => "arm", // ARM, THUMB, ARMNT
        0x01f0 => "ppc",
        0x0200 => "ia64",
        _ => "unknown",
    }
}
