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
use crate::arch::Arch;
use crate::identity::{
    EmbeddedPortablePdb, Identity, Kind, PdbChecksum, PdbReference, PerfmapInfo,
};
use crate::reader::{read_vec, RangeReader, ReaderCursor};

/// CodeView entries whose MinorVersion is this describe a Portable PDB ("PM").
pub const PORTABLE_PDB_MINOR_VERSION: u16 = 0x504d;

pub(crate) const DEBUG_TYPE_CODEVIEW: u32 = 2;
const DEBUG_TYPE_EMBEDDED_PORTABLE_PDB: u32 = 17;
const DEBUG_TYPE_PDB_CHECKSUM: u32 = 19;
const DEBUG_TYPE_PERFMAP: u32 = 21;

/// More debug entries than this is a lie (real images have a handful).
const MAX_DEBUG_ENTRIES: usize = 256;
/// Largest debug entry payload read (a CodeView record is a path plus 24 bytes).
const MAX_ENTRY_DATA: u32 = 64 * 1024;

/// The format this module reads (its errors name it: `FormatError::malformed`).
const FORMAT: Format = Format::Pe;

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
        .map_err(|e| FormatError::malformed(FORMAT, format!("headers: {e}")))?;
    match magic {
        pe::IMAGE_NT_OPTIONAL_HDR32_MAGIC => identify_nt::<pe::ImageNtHeaders32>(reader, data),
        pe::IMAGE_NT_OPTIONAL_HDR64_MAGIC => identify_nt::<pe::ImageNtHeaders64>(reader, data),
        other => Err(FormatError::malformed(
            FORMAT,
            format!("unknown optional header magic {other:#x}"),
        )),
    }
}

fn identify_nt<'data, Pe: ImageNtHeaders>(
    reader: &dyn RangeReader,
    data: &'data ReadCache<ReaderCursor<'data>>,
) -> Result<Identity, FormatError> {
    let dos = pe::ImageDosHeader::parse(data)
        .map_err(|e| FormatError::malformed(FORMAT, format!("DOS header: {e}")))?;
    let mut offset = u64::from(dos.nt_headers_offset());
    let (nt, data_dirs) = Pe::parse(data, &mut offset)
        .map_err(|e| FormatError::malformed(FORMAT, format!("NT headers: {e}")))?;
    let sections = nt
        .sections(data, offset)
        .map_err(|e| FormatError::malformed(FORMAT, format!("section table: {e}")))?;
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
    id.arch = arch_name(machine);
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
        return Err(FormatError::malformed(
            FORMAT,
            format!("debug directory claims {count} entries"),
        ));
    }
    let (file_offset, _) = sections.pe_file_range_at(rva).ok_or_else(|| {
        FormatError::malformed(
            FORMAT,
            format!("debug directory RVA {rva:#x} is in no section"),
        )
    })?;
    let entries: &[ImageDebugDirectory] = data
        .read_slice_at(u64::from(file_offset), count)
        .map_err(|()| FormatError::malformed(FORMAT, "debug directory is truncated"))?;

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
            DEBUG_TYPE_PERFMAP if id.perfmap.is_none() => {
                id.perfmap = parse_perfmap_entry(&payload);
            }
            // "MPDB", uncompressed size, then deflate data: record its presence and size.
            DEBUG_TYPE_EMBEDDED_PORTABLE_PDB if payload.starts_with(b"MPDB") => {
                id.embedded_portable_pdb = Some(EmbeddedPortablePdb {
                    compressed_size: entry.size_of_data.get(LE).saturating_sub(8),
                    uncompressed_size: le_u32(&payload, 4).unwrap_or(0),
                });
                id.has_debug_info = true;
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
        return Err(FormatError::malformed(
            FORMAT,
            format!("debug entry claims {size} bytes"),
        ));
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
pub fn arch_name(machine: u16) -> Arch {
    match machine {
        0x014c => Arch::X86,
        0x8664 => Arch::X86_64,
        0xaa64 | 0xa641 => Arch::Arm64,        // ARM64, ARM64EC
        0x01c0 | 0x01c2 | 0x01c4 => Arch::Arm, // ARM, THUMB, ARMNT
        0x01f0 => Arch::Ppc,
        0x0200 => Arch::Ia64,
        _ => Arch::Unknown,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::{
        identify, DEBUG_TYPE_EMBEDDED_PORTABLE_PDB, DEBUG_TYPE_PDB_CHECKSUM, DEBUG_TYPE_PERFMAP,
        PORTABLE_PDB_MINOR_VERSION,
    };
    use crate::reader::MemReader;
    pub(crate) use crate::testing::builders::{build_pe, codeview, Entry};
    use crate::{Identity, Kind};

    const GUID: [u8; 16] = [
        0xf6, 0x72, 0x7b, 0x49, 0x0a, 0x39, 0xfc, 0x44, 0x87, 0x8e, 0x5a, 0x2d, 0x63, 0xb6, 0xcc,
        0x4b,
    ];

    fn ident(file: Vec<u8>) -> Identity {
        identify(&MemReader(file)).unwrap()
    }

    #[test]
    fn codeview_record_gives_debug_id_and_code_id() {
        for is_64 in [false, true] {
            let file = build_pe(
                is_64,
                0x8664,
                true,
                &[codeview(GUID, 0x1b, r"C:\out\Foo.PDB", 0, 1)],
                true,
            );
            let id = ident(file);
            assert_eq!(id.code_id.as_ref().unwrap().as_str(), "542d574ec2000");
            assert_eq!(id.pe_timestamp, Some(0x542d_574e));
            assert_eq!(id.pe_size_of_image, Some(0xc2000));
            assert_eq!(
                id.debug_id.to_string(),
                "497b72f6-390a-44fc-878e-5a2d63b6cc4b-1b"
            );
            assert_eq!(id.debug_file.as_deref(), Some(r"C:\out\Foo.PDB"));
            assert_eq!(id.kind, Kind::Library);
            assert!(!id.pdb_references[0].portable);
        }
    }

    #[test]
    fn portable_flag_makes_the_timestamp_the_appendix() {
        let entries = [codeview(
            GUID,
            1,
            "Foo.pdb",
            PORTABLE_PDB_MINOR_VERSION,
            0xe396_469f,
        )];
        let id = ident(build_pe(false, 0x14c, true, &entries, true));
        assert_eq!(
            id.debug_id.to_string(),
            "497b72f6-390a-44fc-878e-5a2d63b6cc4b-e396469f"
        );
        assert!(id.pdb_references[0].portable);
        assert_eq!(id.pdb_references[0].age, 1);
        assert_eq!(id.arch, "x86");
    }

    #[test]
    fn all_entry_types_are_read() {
        let mut checksum = b"SHA256\0".to_vec();
        checksum.extend([0xab; 32]);
        let mut perfmap = b"R2RM".to_vec();
        perfmap.extend([0xf5; 16]);
        perfmap.extend(1u32.to_le_bytes());
        perfmap.extend(b"Foo.ni.r2rmap\0");
        let mut embedded = b"MPDB".to_vec();
        embedded.extend(5000u32.to_le_bytes());
        embedded.extend([0u8; 100]);
        let entries = [
            Entry {
                typ: 13,
                minor_version: 0,
                timestamp: 0,
                payload: vec![1; 40],
            }, // POGO: ignored
            codeview(GUID, 2, "a.pdb", 0, 0),
            codeview([0x22; 16], 3, "b.pdb", 0, 0),
            Entry {
                typ: DEBUG_TYPE_PDB_CHECKSUM,
                minor_version: 1,
                timestamp: 0,
                payload: checksum,
            },
            Entry {
                typ: DEBUG_TYPE_PERFMAP,
                minor_version: 0,
                timestamp: 0,
                payload: perfmap,
            },
            Entry {
                typ: DEBUG_TYPE_EMBEDDED_PORTABLE_PDB,
                minor_version: 0x100,
                timestamp: 0,
                payload: embedded,
            },
        ];
        for file_pointers in [true, false] {
            let id = ident(build_pe(true, 0xaa64, false, &entries, file_pointers));
            assert_eq!(id.kind, Kind::Executable);
            assert_eq!(id.arch, "arm64");
            assert_eq!(id.pdb_references.len(), 2);
            assert_eq!(id.pdb_references[1].path, "b.pdb");
            assert_eq!(id.age, Some(2), "the first CodeView record wins");
            assert_eq!(id.pdb_checksums[0].algorithm, "SHA256");
            assert_eq!(id.pdb_checksums[0].checksum, "ab".repeat(32));
            let perfmap = id.perfmap.as_ref().unwrap();
            assert_eq!(perfmap.signature, "f5".repeat(16));
            assert_eq!(
                (perfmap.version, perfmap.path.as_deref()),
                (1, Some("Foo.ni.r2rmap"))
            );
            let embedded = id.embedded_portable_pdb.as_ref().unwrap();
            assert_eq!(
                (embedded.compressed_size, embedded.uncompressed_size),
                (100, 5000)
            );
        }
    }

    #[test]
    fn no_debug_directory_means_nil_debug_id() {
        let id = ident(build_pe(false, 0x14c, false, &[], true));
        assert!(id.debug_id.is_nil());
        assert!(id.pdb_references.is_empty());
        assert_eq!(id.code_id.unwrap().as_str(), "542d574ec2000");
    }

    #[test]
    fn hostile_images_are_errors_not_panics() {
        let good = build_pe(
            true,
            0x8664,
            true,
            &[codeview(GUID, 1, "a.pdb", 0, 0)],
            true,
        );
        // Truncations anywhere.
        for cut in [2, 0x3c, 0x44, 0x60, 0x150, 0x1f0, 0x210] {
            assert!(
                identify(&MemReader(good[..cut].to_vec())).is_err(),
                "cut {cut}"
            );
        }
        // A debug directory claiming a million entries.
        let mut lying = good.clone();
        let dir_size_at = 0x40 + 4 + 20 + 112 + 52;
        lying[dir_size_at..dir_size_at + 4].copy_from_slice(&(28u32 * 1_000_000).to_le_bytes());
        assert!(identify(&MemReader(lying)).is_err());
        // An entry claiming a gigabyte of data.
        let mut huge = good.clone();
        huge[0x200 + 16..0x200 + 20].copy_from_slice(&0x4000_0000u32.to_le_bytes());
        assert!(identify(&MemReader(huge)).is_err());
        // A CodeView entry pointing past the end and at no section is skipped, not fatal.
        let mut dangling = good;
        dangling[0x200 + 20..0x200 + 28].copy_from_slice(&[0xff; 8]);
        let id = ident(dangling);
        assert!(id.debug_id.is_nil());
    }
}
