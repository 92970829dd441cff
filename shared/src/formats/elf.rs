//! ELF (32/64-bit, either byte order): GNU build id, debug-file detection, `.gnu_debuglink`,
//! and the `.text` hash that stands in for a missing build id.
//!
//! Headers, program headers, section headers and notes come from the `object` crate's lazy ELF
//! reader over a [`ReadCache`], so only those structures are fetched; the symbol tables are
//! never touched.

use debugid::{CodeId, DebugId};
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader, SectionTable};
use object::{elf, Endianness, ReadCache, ReadRef};
use uuid::Uuid;

use super::dwarf::{DwarfLayout, MAX_DECOMPRESSED, SOURCE_SECTIONS};
use super::dwp::{read_package, skeleton_dwo_ids, CU_INDEX};
use super::{c_string, hex, Format, FormatError};
use crate::arch::Arch;
use crate::identity::{Identity, Kind, SectionRef};
use crate::reader::{RangeReader, ReaderCursor};

/// Note segments and sections larger than this are not read (real ones are a few hundred bytes).
const MAX_NOTES_LEN: u64 = 1024 * 1024;
/// How much of `.text` the fallback identifier hashes (Breakpad and Sentry use one page).
const TEXT_HASH_LEN: u64 = 4096;
/// Section tables with more entries than this are not parsed.
const MAX_SECTIONS: usize = 1 << 16;
/// The sections published on their own for debuginfod's `/section/<name>` (gdb asks for
/// `.gdb_index` before it downloads a debug file): the indexes and line tables, not the bulk
/// of `.debug_info`.
/// Largest section served on its own.
pub const MAX_SERVED_SECTION: u64 = 256 << 20;
pub const SERVED_SECTIONS: [&str; 5] = [
    ".gdb_index",
    ".debug_names",
    ".debug_line",
    ".debug_line_str",
    ".debug_aranges",
];

type Data<'a> = &'a ReadCache<ReaderCursor<'a>>;

/// The format this module reads (its errors name it: `FormatError::malformed`).
const FORMAT: Format = Format::Elf;

pub fn identify(reader: &dyn RangeReader) -> Result<Identity, FormatError> {
    let cache = ReadCache::new(ReaderCursor::new(reader));
    let data = &cache;
    let ident = data
        .read_bytes_at(0, 16)
        .map_err(|()| FormatError::malformed(FORMAT, "truncated identification"))?;
    match ident[4] {
        1 => identify_class::<elf::FileHeader32<Endianness>>(reader, data),
        2 => identify_class::<elf::FileHeader64<Endianness>>(reader, data),
        other => Err(FormatError::malformed(
            FORMAT,
            format!("unknown ELF class {other}"),
        )),
    }
}

/// One ELF class's identity: header, build id, kind, DWARF layout and served sections,
/// debug link, and the `.text` hash where there is no build id. Each step reads only headers
/// (and notes, and a page of `.text`) through the lazy reader, in the order they lie in. A
/// DWARF package is identified by its index instead ([`package`]).
fn identify_class<'a, Elf: FileHeader<Endian = Endianness>>(
    reader: &dyn RangeReader,
    data: Data<'a>,
) -> Result<Identity, FormatError> {
    let header = Elf::parse(data)
        .map_err(|e| FormatError::malformed(FORMAT, format!("file header: {e}")))?;
    let endian = header
        .endian()
        .map_err(|e| FormatError::malformed(FORMAT, format!("byte order: {e}")))?;
    let program_headers = header
        .program_headers(endian, data)
        .map_err(|e| FormatError::malformed(FORMAT, format!("program headers: {e}")))?;
    let sections = section_table(header, endian, data)?;
    if let Some(index) = sections.section_by_name(endian, CU_INDEX.as_bytes()) {
        return package::<Elf>(reader, header, endian, index.1, data);
    }
    let build_id = build_id_of(program_headers, &sections, endian, data);

    let name_of = |s: &Elf::SectionHeader| sections.section_name(endian, s).unwrap_or(&[]);
    let has_debug_info = sections
        .iter()
        .any(|s| matches!(name_of(s), b".debug_info" | b".zdebug_info"));
    let text = sections.iter().find(|s| name_of(s) == b".text");
    let text_in_file = text.is_some_and(|s| s.sh_type(endian) != elf::SHT_NOBITS);
    let kind = kind_of(
        header,
        endian,
        program_headers,
        has_debug_info,
        text_in_file,
    );

    let mut id = Identity::new(Format::Elf, kind);
    id.arch = arch_name(header.e_machine(endian).0, header.is_class_64());
    if has_debug_info {
        let found = debug_sections(header, &sections, endian, data);
        id.sections = found.served;
        id.dwarf = Some(found.dwarf);
    }
    id.has_debug_info = has_debug_info;
    id.debuglink = debuglink(&sections, endian, data);
    let little_endian = endian == Endianness::Little;
    match build_id {
        Some(bytes) => {
            id.debug_id = debug_id_from_bytes(&bytes, little_endian);
            id.code_id = Some(CodeId::new(hex(&bytes)));
            id.build_id = Some(hex(&bytes));
        }
        None => {
            // No build id: XOR-fold the first page of .text (what Breakpad and Sentry do).
            if let Some(text) = text.filter(|_| text_in_file) {
                id.debug_id = folded_text_id::<Elf>(text, endian, data, little_endian)?;
            }
        }
    }
    Ok(id)
}

/// A DWARF package (`.dwp`, an ELF file with a `.debug_cu_index`): a debug companion with no
/// build id and no code, identified by the DWO ids its index lists (dwp.rs). What else it
/// holds (`.debug_info.dwo` and the other `.dwo` sections) is not read.
fn package<'a, Elf: FileHeader<Endian = Endianness>>(
    reader: &dyn RangeReader,
    header: &Elf,
    endian: Endianness,
    index: &Elf::SectionHeader,
    data: Data<'a>,
) -> Result<Identity, FormatError> {
    let in_file = index.file_range(endian).filter(|(offset, size)| {
        offset
            .checked_add(*size)
            .is_some_and(|end| end <= data.len().unwrap_or(0))
    });
    let Some((offset, size)) = in_file else {
        return Err(FormatError::malformed(
            Format::Dwp,
            format!("{CU_INDEX} lies outside the file"),
        ));
    };
    let index = SectionRef {
        name: CU_INDEX.to_string(),
        offset,
        size,
        compressed: index.sh_flags(endian).contains(elf::SHF_COMPRESSED),
    };
    let layout = DwarfLayout {
        little_endian: endian == Endianness::Little,
        is_64: header.is_class_64(),
        sections: Vec::new(),
    };
    let mut id = Identity::new(Format::Dwp, Kind::Debug);
    id.arch = arch_name(header.e_machine(endian).0, header.is_class_64());
    id.has_debug_info = true;
    id.dwarf_package = Some(read_package(reader, &index, &layout)?);
    Ok(id)
}

/// The section table, refused past [`MAX_SECTIONS`] entries.
fn section_table<'a, Elf: FileHeader<Endian = Endianness>>(
    header: &'a Elf,
    endian: Endianness,
    data: Data<'a>,
) -> Result<SectionTable<'a, Elf, Data<'a>>, FormatError> {
    let section_count = header
        .shnum(endian, data)
        .map_err(|e| FormatError::malformed(FORMAT, format!("section count: {e}")))?;
    if section_count as usize > MAX_SECTIONS {
        return Err(FormatError::malformed(
            FORMAT,
            format!("{section_count} sections"),
        ));
    }
    header
        .sections(endian, data)
        .map_err(|e| FormatError::malformed(FORMAT, format!("section headers: {e}")))
}

/// The GNU build id: KEYS.md §2, PT_NOTE segments first, then SHT_NOTE sections (notes
/// larger than [`MAX_NOTES_LEN`] are not read).
fn build_id_of<'a, Elf: FileHeader<Endian = Endianness>>(
    program_headers: &'a [Elf::ProgramHeader],
    sections: &SectionTable<'a, Elf, Data<'a>>,
    endian: Endianness,
    data: Data<'a>,
) -> Option<Vec<u8>> {
    let mut build_id = None;
    for segment in program_headers {
        if build_id.is_some() {
            break;
        }
        if segment.p_type(endian) != elf::PT_NOTE || segment.p_filesz(endian).into() > MAX_NOTES_LEN
        {
            continue;
        }
        if let Ok(Some(notes)) = segment.notes(endian, data) {
            build_id = find_build_id(notes, endian);
        }
    }
    for section in sections.iter() {
        if build_id.is_some() {
            break;
        }
        if section.sh_type(endian) != elf::SHT_NOTE
            || section.sh_size(endian).into() > MAX_NOTES_LEN
        {
            continue;
        }
        if let Ok(Some(notes)) = section.notes(endian, data) {
            build_id = find_build_id(notes, endian);
        }
    }
    build_id
}

/// What the file is: debug information without code, an executable, or a library.
fn kind_of<Elf: FileHeader<Endian = Endianness>>(
    header: &Elf,
    endian: Endianness,
    program_headers: &[Elf::ProgramHeader],
    has_debug_info: bool,
    text_in_file: bool,
) -> Kind {
    let has_interp = program_headers
        .iter()
        .any(|p| p.p_type(endian) == elf::PT_INTERP);
    if has_debug_info && !text_in_file {
        // objcopy --only-keep-debug: code sections became NOBITS.
        Kind::Debug
    } else if header.e_type(endian) == elf::ET_EXEC || has_interp {
        Kind::Executable
    } else {
        Kind::Library
    }
}

/// A debug file's sections ([`debug_sections`]): those its DWARF is read from, and those
/// served on their own.
struct DebugSections {
    dwarf: DwarfLayout,
    served: Vec<SectionRef>,
}

/// The sections of a file with debug information that are read ([`SOURCE_SECTIONS`]) or
/// served ([`SERVED_SECTIONS`], bounded), each once: the first of its name with a range in
/// the file.
fn debug_sections<'a, Elf: FileHeader<Endian = Endianness>>(
    header: &Elf,
    sections: &SectionTable<'a, Elf, Data<'a>>,
    endian: Endianness,
    data: Data<'a>,
) -> DebugSections {
    let mut dwarf = DwarfLayout {
        little_endian: endian == Endianness::Little,
        is_64: header.is_class_64(),
        sections: Vec::new(),
    };
    let mut served_sections = Vec::new();
    for section in sections.iter() {
        let name = sections.section_name(endian, section).unwrap_or(&[]);
        let served = SERVED_SECTIONS.iter().find(|n| n.as_bytes() == name);
        let read = SOURCE_SECTIONS.iter().find(|n| n.as_bytes() == name);
        if served.is_none() && read.is_none() {
            continue;
        }
        // NOBITS sections have no file range; a range past the file is the file's lie.
        let Some((offset, size)) = section.file_range(endian) else {
            continue;
        };
        let in_file = offset
            .checked_add(size)
            .is_some_and(|end| end <= data.len().unwrap_or(0));
        if size == 0 || !in_file {
            continue;
        }
        let compressed = section.sh_flags(endian).contains(elf::SHF_COMPRESSED);
        let found = |list: &[SectionRef], name: &str| list.iter().any(|s| s.name == name);
        if let Some(name) = read.filter(|n| !found(&dwarf.sections, n)) {
            dwarf.sections.push(SectionRef {
                name: name.to_string(),
                offset,
                size,
                compressed,
            });
        }
        // A compressed section is served decompressed: its size is known once read.
        let bounded = size <= MAX_SERVED_SECTION && (!compressed || size <= MAX_DECOMPRESSED);
        if let Some(name) = served.filter(|n| bounded && !found(&served_sections, n)) {
            served_sections.push(SectionRef {
                name: name.to_string(),
                offset,
                size,
                compressed,
            });
        }
    }
    DebugSections {
        dwarf,
        served: served_sections,
    }
}

/// The identifier of a file without a build id: the first page of its `.text`, XOR-folded
/// into 16 bytes.
fn folded_text_id<'a, Elf: FileHeader<Endian = Endianness>>(
    text: &Elf::SectionHeader,
    endian: Endianness,
    data: Data<'a>,
    little_endian: bool,
) -> Result<DebugId, FormatError> {
    let (offset, size) = text
        .file_range(endian)
        .ok_or_else(|| FormatError::malformed(FORMAT, ".text has no file range"))?;
    let bytes = data
        .read_bytes_at(offset, size.min(TEXT_HASH_LEN))
        .map_err(|()| FormatError::malformed(FORMAT, ".text is truncated"))?;
    let mut folded = [0u8; 16];
    for (i, b) in bytes.iter().enumerate() {
        folded[i % 16] ^= b;
    }
    Ok(debug_id_from_bytes(&folded, little_endian))
}

/// What identification leaves out because it costs more than headers: the source files a
/// debug file's DWARF names, and the served sections stored compressed, decompressed (at most
/// [`MAX_DECOMPRESSED`] in all), and the small ones as read, held for publishing. Runs on the
/// whole file's reader (the Lambda runs it on a blocking ranged reader after identification).
pub fn read_debug_details(reader: &dyn RangeReader, id: &mut Identity) {
    read_details(reader, id, true, true);
}

/// What [`read_debug_details`] says of an identity (its source paths, DWO ids, which
/// compressed sections can be served), without holding any section's bytes: what a report
/// (`symdex keys`) shows, with no read of the sections only publishing needs; the source
/// paths only with `sources`.
pub fn describe_debug_details(reader: &dyn RangeReader, id: &mut Identity, sources: bool) {
    read_details(reader, id, false, sources);
}

/// [`read_debug_details`]; `hold`: the served sections' bytes kept in the identity;
/// `sources`: the DWARF's source paths read.
fn read_details(reader: &dyn RangeReader, id: &mut Identity, hold: bool, sources: bool) {
    let Some(layout) = id.dwarf.clone() else {
        return;
    };
    if id.kind == Kind::Debug || id.has_debug_info {
        if sources {
            id.sources = Some(super::dwarf::source_paths(reader, &layout));
        }
        id.split_dwarf = skeleton_dwo_ids(reader, &layout);
    }
    let mut budget = MAX_DECOMPRESSED;
    let mut unreadable = Vec::new();
    for section in id.sections.iter().filter(|s| s.compressed) {
        if section.size > budget {
            unreadable.push(section.name.clone());
            continue;
        }
        let bytes = crate::reader::read_vec(reader, section.offset, section.size as usize)
            .map_err(|e| e.to_string())
            .and_then(|raw| super::dwarf::decompress(&raw, layout.is_64, layout.little_endian));
        match bytes {
            Ok(bytes) if bytes.len() as u64 <= budget => {
                budget -= bytes.len() as u64;
                if hold {
                    id.decompressed.push((section.name.clone(), bytes));
                }
            }
            _ => unreadable.push(section.name.clone()),
        }
    }
    // A compressed section that could not be decompressed is not served.
    id.sections
        .retain(|s| !s.compressed || !unreadable.contains(&s.name));
    if !hold {
        return;
    }
    // Small ones are kept as read (on S3 the identification's blocks usually hold them
    // already): published by one write, where a copy of a range of the upload is a
    // three-request multipart copy.
    let mut kept = KEPT_SECTIONS;
    for section in id.sections.iter().filter(|s| !s.compressed) {
        if section.size > KEPT_SECTION || section.size > kept {
            continue;
        }
        if let Ok(bytes) = crate::reader::read_vec(reader, section.offset, section.size as usize) {
            kept -= section.size;
            id.decompressed.push((section.name.clone(), bytes));
        }
    }
}

/// Uncompressed served sections up to this size are kept in memory by
/// [`read_debug_details`], up to [`KEPT_SECTIONS`] in all.
const KEPT_SECTION: u64 = 64 << 10;
const KEPT_SECTIONS: u64 = 256 << 10;

fn find_build_id<Elf: FileHeader<Endian = Endianness>>(
    mut notes: object::read::elf::NoteIterator<'_, Elf>,
    endian: Endianness,
) -> Option<Vec<u8>> {
    while let Ok(Some(note)) = notes.next() {
        if note.name() == b"GNU" && note.n_type(endian) == elf::NT_GNU_BUILD_ID {
            let desc = note.desc();
            if !desc.is_empty() {
                return Some(desc.to_vec());
            }
        }
    }
    None
}

fn debuglink<'a, Elf: FileHeader<Endian = Endianness>>(
    sections: &SectionTable<'a, Elf, Data<'a>>,
    endian: Endianness,
    data: Data<'a>,
) -> Option<String> {
    let (_, section) = sections.section_by_name(endian, b".gnu_debuglink")?;
    let (offset, size) = section.file_range(endian)?;
    let bytes = data.read_bytes_at(offset, size.min(4096)).ok()?;
    c_string(bytes).filter(|s| !s.is_empty())
}

/// The Sentry debug id of an ELF id: its first 16 bytes (zero-padded) read as a GUID, so the
/// first three fields are byte-swapped when the file is little-endian; age 0.
pub fn debug_id_from_bytes(bytes: &[u8], little_endian: bool) -> DebugId {
    let mut raw = [0u8; 16];
    let n = bytes.len().min(16);
    raw[..n].copy_from_slice(&bytes[..n]);
    if little_endian {
        raw[0..4].reverse();
        raw[4..6].reverse();
        raw[6..8].reverse();
    }
    DebugId::from_uuid(Uuid::from_bytes(raw))
}

/// Sentry's architecture name for an ELF machine.
pub fn arch_name(machine: u16, is_64: bool) -> Arch {
    match machine {
        3 => Arch::X86,
        62 => Arch::X86_64,
        40 => Arch::Arm,
        183 => Arch::Arm64,
        20 => Arch::Ppc,
        21 => Arch::Ppc64,
        8 if is_64 => Arch::Mips64,
        8 => Arch::Mips,
        22 => Arch::S390x,
        243 if is_64 => Arch::Riscv64,
        243 => Arch::Riscv32,
        _ => Arch::Unknown,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::{debug_id_from_bytes, identify};
    use crate::reader::MemReader;
    pub(crate) use crate::testing::builders::build_elf;
    use crate::{Identity, Kind};

    const ID20: [u8; 20] = [
        0x18, 0x0a, 0x37, 0x3d, 0x6a, 0xfb, 0xab, 0xf0, 0xeb, 0x1f, 0x09, 0xbe, 0x1b, 0xc4, 0x5b,
        0xd7, 0x96, 0xa7, 0x10, 0x85,
    ];

    fn ident(file: Vec<u8>) -> Identity {
        identify(&MemReader(file)).unwrap()
    }

    #[test]
    fn little_endian_64_bit_with_20_byte_id() {
        let id = ident(build_elf(true, false, 62, Some(&ID20), false));
        assert_eq!(id.arch, "x86_64");
        assert_eq!(
            id.build_id.as_deref(),
            Some("180a373d6afbabf0eb1f09be1bc45bd796a71085")
        );
        assert_eq!(
            id.code_id.unwrap().as_str(),
            "180a373d6afbabf0eb1f09be1bc45bd796a71085"
        );
        assert_eq!(
            id.debug_id.to_string(),
            "3d370a18-fb6a-f0ab-eb1f-09be1bc45bd7"
        );
        assert!(!id.has_debug_info);
        assert_eq!(id.kind, Kind::Library);
    }

    #[test]
    fn big_endian_ids_are_not_swapped() {
        for is_64 in [false, true] {
            let id = ident(build_elf(
                is_64,
                true,
                if is_64 { 22 } else { 20 },
                Some(&ID20),
                false,
            ));
            assert_eq!(
                id.debug_id.to_string(),
                "180a373d-6afb-abf0-eb1f-09be1bc45bd7"
            );
            assert_eq!(id.arch, if is_64 { "s390x" } else { "ppc" });
        }
    }

    #[test]
    fn thirty_two_bit_and_short_ids() {
        let id = ident(build_elf(false, false, 3, Some(&ID20[..8]), false));
        assert_eq!(id.arch, "x86");
        assert_eq!(id.code_id.unwrap().as_str(), "180a373d6afbabf0");
        assert_eq!(
            id.debug_id.to_string(),
            "3d370a18-fb6a-f0ab-0000-000000000000"
        );
        let id = ident(build_elf(true, false, 183, Some(&ID20[..16]), false));
        assert_eq!(
            id.build_id.as_deref(),
            Some("180a373d6afbabf0eb1f09be1bc45bd7")
        );
        assert_eq!(
            id.debug_id.to_string(),
            "3d370a18-fb6a-f0ab-eb1f-09be1bc45bd7"
        );
    }

    #[test]
    fn no_build_id_hashes_text() {
        let id = ident(build_elf(true, false, 62, None, false));
        assert!(id.code_id.is_none());
        assert!(id.build_id.is_none());
        let mut folded = [0u8; 16];
        for i in 0..64u8 {
            folded[i as usize % 16] ^= i.wrapping_mul(7).wrapping_add(3);
        }
        assert!(!id.debug_id.is_nil());
        assert_eq!(id.debug_id, debug_id_from_bytes(&folded, true));
    }

    #[test]
    fn debug_info_is_detected() {
        let id = ident(build_elf(true, false, 62, Some(&ID20), true));
        assert!(id.has_debug_info);
        // .text is PROGBITS, so this is an unstripped binary, not a debug companion.
        assert_eq!(id.kind, Kind::Library);
    }

    #[test]
    fn truncated_and_garbage_inputs_are_errors() {
        let file = build_elf(true, false, 62, Some(&ID20), false);
        for cut in [5, 20, 63, 100, file.len() - 10] {
            let r = identify(&MemReader(file[..cut].to_vec()));
            assert!(r.is_err(), "cut at {cut} parsed");
        }
        let mut lying = file.clone();
        lying[60..62].copy_from_slice(&0xffffu16.to_le_bytes()); // e_shnum
        assert!(identify(&MemReader(lying)).is_err());
        let mut bad_class = file;
        bad_class[4] = 9;
        assert!(identify(&MemReader(bad_class)).is_err());
    }
}
