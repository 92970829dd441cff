//! Byte-level builders of small artifacts (ELF, PE with CodeView records, MSF/PDB), written
//! from the published formats, for tests here and in the other crates (feature `testing`).

use crate::formats::pdb::{DBI_SIGNATURE, DBI_VERSION_V70, MSF7_MAGIC};
use crate::formats::pe::DEBUG_TYPE_CODEVIEW;

/// Builds a minimal ELF file: a header, one PT_NOTE segment with the given build id (if any),
/// and section headers for `.text`, the note, optional `.debug_info`, `.shstrtab`.
pub fn build_elf(
    is_64: bool,
    big_endian: bool,
    machine: u16,
    build_id: Option<&[u8]>,
    with_debug_info: bool,
) -> Vec<u8> {
    let w16 = |v: u16| {
        if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let w32 = |v: u32| {
        if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let w64 = |v: u64| {
        if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let word = |v: u64| -> Vec<u8> {
        if is_64 {
            w64(v).to_vec()
        } else {
            w32(v as u32).to_vec()
        }
    };
    let (ehsize, phentsize, shentsize) = if is_64 {
        (64u16, 56u16, 64u16)
    } else {
        (52, 32, 40)
    };

    let mut note = Vec::new();
    if let Some(id) = build_id {
        note.extend(w32(4));
        note.extend(w32(id.len() as u32));
        note.extend(w32(3));
        note.extend(b"GNU\0");
        note.extend(id);
        while note.len() % 4 != 0 {
            note.push(0);
        }
    }
    let text: Vec<u8> = (0..64u8)
        .map(|i| i.wrapping_mul(7).wrapping_add(3))
        .collect();
    let shstrtab = b"\0.text\0.note.gnu.build-id\0.debug_info\0.shstrtab\0".to_vec();
    let debug_info = vec![0u8; 16];

    let phoff = ehsize as u64;
    let text_off = phoff + phentsize as u64;
    let note_off = text_off + text.len() as u64;
    let debug_off = note_off + note.len() as u64;
    let shstr_off = debug_off + debug_info.len() as u64;
    let shoff = (shstr_off + shstrtab.len() as u64 + 7) & !7;
    let shnum = 5u16;

    let mut f = Vec::new();
    f.extend(b"\x7fELF");
    f.push(if is_64 { 2 } else { 1 });
    f.push(if big_endian { 2 } else { 1 });
    f.push(1);
    f.resize(16, 0);
    f.extend(w16(3)); // ET_DYN
    f.extend(w16(machine));
    f.extend(w32(1));
    f.extend(word(0)); // entry
    f.extend(word(phoff));
    f.extend(word(shoff));
    f.extend(w32(0));
    f.extend(w16(ehsize));
    f.extend(w16(phentsize));
    f.extend(w16(1)); // phnum
    f.extend(w16(shentsize));
    f.extend(w16(shnum));
    f.extend(w16(4)); // shstrndx
    assert_eq!(f.len(), ehsize as usize);
    // One PT_NOTE program header.
    if is_64 {
        f.extend(w32(4));
        f.extend(w32(4));
        f.extend(w64(note_off));
        f.extend(w64(0));
        f.extend(w64(0));
        f.extend(w64(note.len() as u64));
        f.extend(w64(note.len() as u64));
        f.extend(w64(4));
    } else {
        f.extend(w32(4));
        f.extend(w32(note_off as u32));
        f.extend(w32(0));
        f.extend(w32(0));
        f.extend(w32(note.len() as u32));
        f.extend(w32(note.len() as u32));
        f.extend(w32(4));
        f.extend(w32(4));
    }
    f.extend(&text);
    f.extend(&note);
    f.extend(&debug_info);
    f.extend(&shstrtab);
    f.resize(shoff as usize, 0);
    let mut section = |name: u32, typ: u32, off: u64, size: u64| {
        f.extend(w32(name));
        f.extend(w32(typ));
        f.extend(word(0)); // flags
        f.extend(word(0)); // addr
        f.extend(word(off));
        f.extend(word(size));
        f.extend(w32(0));
        f.extend(w32(0));
        f.extend(word(1));
        f.extend(word(0));
    };
    section(0, 0, 0, 0);
    section(1, 1, text_off, text.len() as u64);
    section(7, 7, note_off, note.len() as u64);
    if with_debug_info {
        section(26, 1, debug_off, debug_info.len() as u64);
    } else {
        section(0, 1, debug_off, debug_info.len() as u64);
    }
    section(38, 3, shstr_off, shstrtab.len() as u64);
    f
}

/// `elf` (64-bit little-endian, from [`build_elf`]) with one more section appended: a new
/// section name table and section header table are written after the file's end.
pub fn with_section(mut elf: Vec<u8>, name: &str, bytes: &[u8]) -> Vec<u8> {
    let u16_at = |f: &[u8], at: usize| u16::from_le_bytes([f[at], f[at + 1]]);
    let u64_at = |f: &[u8], at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&f[at..at + 8]);
        u64::from_le_bytes(b)
    };
    let shoff = u64_at(&elf, 0x28) as usize;
    let shnum = u16_at(&elf, 0x3c) as usize;
    let shstrndx = u16_at(&elf, 0x3e) as usize;
    let mut headers: Vec<Vec<u8>> = (0..shnum)
        .map(|i| elf[shoff + i * 64..shoff + (i + 1) * 64].to_vec())
        .collect();
    let strtab_header = &headers[shstrndx];
    let (str_off, str_size) = (u64_at(strtab_header, 24), u64_at(strtab_header, 32));
    let mut strtab = elf[str_off as usize..(str_off + str_size) as usize].to_vec();
    let name_offset = strtab.len() as u32;
    strtab.extend(name.as_bytes());
    strtab.push(0);
    let data_off = elf.len() as u64;
    elf.extend(bytes);
    let strtab_off = elf.len() as u64;
    elf.extend(&strtab);
    headers[shstrndx][24..32].copy_from_slice(&strtab_off.to_le_bytes());
    headers[shstrndx][32..40].copy_from_slice(&(strtab.len() as u64).to_le_bytes());
    let mut header = vec![0u8; 64];
    header[0..4].copy_from_slice(&name_offset.to_le_bytes());
    header[4..8].copy_from_slice(&1u32.to_le_bytes()); // SHT_PROGBITS
    header[24..32].copy_from_slice(&data_off.to_le_bytes());
    header[32..40].copy_from_slice(&(bytes.len() as u64).to_le_bytes());
    header[48..56].copy_from_slice(&1u64.to_le_bytes());
    headers.push(header);
    while !elf.len().is_multiple_of(8) {
        elf.push(0);
    }
    let new_shoff = elf.len() as u64;
    for h in &headers {
        elf.extend(h);
    }
    elf[0x28..0x30].copy_from_slice(&new_shoff.to_le_bytes());
    elf[0x3c..0x3e].copy_from_slice(&(headers.len() as u16).to_le_bytes());
    elf
}

/// A DWARF 5 `.debug_line` unit (32-bit, little-endian, empty program) naming `files` in
/// directory `dir`, strings inline (`DW_FORM_string`).
pub fn dwarf5_line_table(dir: &str, files: &[&str]) -> Vec<u8> {
    line_table(dir, files.iter().map(|f| (*f, None)))
}

/// [`dwarf5_line_table`] recording each file's MD5 (`DW_LNCT_MD5`, as clang writes it).
pub fn dwarf5_line_table_with_md5(dir: &str, files: &[(&str, [u8; 16])]) -> Vec<u8> {
    line_table(dir, files.iter().map(|(f, md5)| (*f, Some(*md5))))
}

/// Every file with an MD5, or none (one entry format per table).
fn line_table<'a>(dir: &str, files: impl Iterator<Item = (&'a str, Option<[u8; 16]>)>) -> Vec<u8> {
    let files: Vec<_> = files.collect();
    let with_md5 = files.first().is_some_and(|(_, md5)| md5.is_some());
    let mut header = vec![
        1,    // minimum_instruction_length
        1,    // maximum_operations_per_instruction
        1,    // default_is_stmt
        0xfb, // line_base -5
        14,   // line_range
        13,   // opcode_base
    ];
    header.extend([0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1]);
    header.extend([1, 1, 0x08]); // directories: DW_LNCT_path as DW_FORM_string
    header.push(1);
    header.extend(dir.as_bytes());
    header.push(0);
    // files: path (string), directory_index (udata)[, MD5 (data16)]
    if with_md5 {
        header.extend([3, 1, 0x08, 2, 0x0f, 5, 0x1e]);
    } else {
        header.extend([2, 1, 0x08, 2, 0x0f]);
    }
    header.push(files.len() as u8);
    for (file, md5) in files {
        header.extend(file.as_bytes());
        header.push(0);
        header.push(0);
        if with_md5 {
            header.extend(md5.unwrap_or_default());
        }
    }
    let mut unit = Vec::new();
    unit.extend(5u16.to_le_bytes());
    unit.push(8); // address_size
    unit.push(0); // segment_selector_size
    unit.extend((header.len() as u32).to_le_bytes());
    unit.extend(header);
    let mut out = (unit.len() as u32).to_le_bytes().to_vec();
    out.extend(unit);
    out
}

/// One debug-directory entry for [`build_pe`].
pub struct Entry {
    pub typ: u32,
    pub minor_version: u16,
    pub timestamp: u32,
    pub payload: Vec<u8>,
}

pub fn codeview(guid: [u8; 16], age: u32, path: &str, minor_version: u16, timestamp: u32) -> Entry {
    let mut payload = b"RSDS".to_vec();
    payload.extend(guid);
    payload.extend(age.to_le_bytes());
    payload.extend(path.as_bytes());
    payload.push(0);
    Entry {
        typ: DEBUG_TYPE_CODEVIEW,
        minor_version,
        timestamp,
        payload,
    }
}

/// A PE image with one `.rdata` section holding the debug directory and its payloads.
/// `file_pointers: false` zeroes PointerToRawData so readers must map the RVA.
pub fn build_pe(
    is_64: bool,
    machine: u16,
    dll: bool,
    entries: &[Entry],
    file_pointers: bool,
) -> Vec<u8> {
    const TIMESTAMP: u32 = 0x542d_574e;
    const SIZE_OF_IMAGE: u32 = 0xc2000;
    const SECTION_VA: u32 = 0x1000;
    const SECTION_RAW: u32 = 0x200;
    let opt_size: u16 = if is_64 { 240 } else { 224 };
    let mut f = vec![0u8; 0x40];
    f[0..2].copy_from_slice(b"MZ");
    f[0x3c..0x40].copy_from_slice(&0x40u32.to_le_bytes());
    f.extend(b"PE\0\0");
    f.extend(machine.to_le_bytes());
    f.extend(1u16.to_le_bytes());
    f.extend(TIMESTAMP.to_le_bytes());
    f.extend([0u8; 8]);
    f.extend(opt_size.to_le_bytes());
    let characteristics: u16 = 0x0022 | if dll { 0x2000 } else { 0 };
    f.extend(characteristics.to_le_bytes());
    let opt_start = f.len();
    let mut opt = vec![0u8; opt_size as usize];
    opt[0..2].copy_from_slice(&(if is_64 { 0x20bu16 } else { 0x10bu16 }).to_le_bytes());
    opt[32..36].copy_from_slice(&0x1000u32.to_le_bytes()); // SectionAlignment
    opt[36..40].copy_from_slice(&0x200u32.to_le_bytes()); // FileAlignment
    opt[56..60].copy_from_slice(&SIZE_OF_IMAGE.to_le_bytes());
    opt[60..64].copy_from_slice(&0x200u32.to_le_bytes()); // SizeOfHeaders
    let dirs = if is_64 { 112 } else { 96 };
    opt[dirs - 4..dirs].copy_from_slice(&16u32.to_le_bytes());
    let dir_size = (entries.len() * 28) as u32;
    if !entries.is_empty() {
        opt[dirs + 48..dirs + 52].copy_from_slice(&SECTION_VA.to_le_bytes());
        opt[dirs + 52..dirs + 56].copy_from_slice(&dir_size.to_le_bytes());
    }
    f.extend(opt);
    assert_eq!(f.len(), opt_start + opt_size as usize);
    // Section: directory first, then payloads.
    let mut body = Vec::new();
    let mut payload_at = dir_size;
    for e in entries {
        body.extend(0u32.to_le_bytes());
        body.extend(e.timestamp.to_le_bytes());
        body.extend(0u16.to_le_bytes());
        body.extend(e.minor_version.to_le_bytes());
        body.extend(e.typ.to_le_bytes());
        body.extend((e.payload.len() as u32).to_le_bytes());
        body.extend((SECTION_VA + payload_at).to_le_bytes());
        let pointer = if file_pointers {
            SECTION_RAW + payload_at
        } else {
            0
        };
        body.extend(pointer.to_le_bytes());
        payload_at += e.payload.len() as u32;
    }
    for e in entries {
        body.extend(&e.payload);
    }
    let raw_size = (body.len() as u32).next_multiple_of(0x200).max(0x200);
    let mut section = b".rdata\0\0".to_vec();
    section.extend((body.len() as u32).to_le_bytes());
    section.extend(SECTION_VA.to_le_bytes());
    section.extend(raw_size.to_le_bytes());
    section.extend(SECTION_RAW.to_le_bytes());
    section.extend([0u8; 12]);
    section.extend(0x4000_0040u32.to_le_bytes());
    f.extend(section);
    f.resize(SECTION_RAW as usize, 0);
    f.extend(body);
    f.resize((SECTION_RAW + raw_size) as usize, 0);
    f
}

/// Writes a minimal MSF 7.00 file: the streams given, laid out one block after another.
pub fn build_msf(block_size: u32, streams: &[Option<Vec<u8>>]) -> Vec<u8> {
    let bs = block_size as usize;
    // Block 0 superblock, 1-2 free block maps, 3 block map, then directory, then streams.
    let mut blocks: Vec<Vec<u8>> = vec![vec![0; bs]; 4];
    let mut stream_blocks = Vec::new();
    for stream in streams {
        let mut list = Vec::new();
        if let Some(data) = stream {
            for chunk in data.chunks(bs) {
                let mut b = chunk.to_vec();
                b.resize(bs, 0);
                list.push(blocks.len() as u32);
                blocks.push(b);
            }
        }
        stream_blocks.push(list);
    }
    let mut dir = Vec::new();
    dir.extend((streams.len() as u32).to_le_bytes());
    for stream in streams {
        let size = stream.as_ref().map_or(u32::MAX, |d| d.len() as u32);
        dir.extend(size.to_le_bytes());
    }
    for list in &stream_blocks {
        for b in list {
            dir.extend(b.to_le_bytes());
        }
    }
    let mut dir_blocks = Vec::new();
    for chunk in dir.chunks(bs) {
        let mut b = chunk.to_vec();
        b.resize(bs, 0);
        dir_blocks.push(blocks.len() as u32);
        blocks.push(b);
    }
    let mut map = Vec::new();
    for b in &dir_blocks {
        map.extend(b.to_le_bytes());
    }
    map.resize(bs, 0);
    blocks[3] = map;
    let mut sb = MSF7_MAGIC.to_vec();
    sb.extend(block_size.to_le_bytes());
    sb.extend(1u32.to_le_bytes());
    sb.extend((blocks.len() as u32).to_le_bytes());
    sb.extend((dir.len() as u32).to_le_bytes());
    sb.extend(0u32.to_le_bytes());
    sb.extend(3u32.to_le_bytes());
    sb.resize(bs, 0);
    blocks[0] = sb;
    blocks.concat()
}

pub fn info_stream(guid: [u8; 16], age: u32) -> Vec<u8> {
    let mut s = Vec::new();
    s.extend(20000404u32.to_le_bytes());
    s.extend(0x5f00_0000u32.to_le_bytes());
    s.extend(age.to_le_bytes());
    s.extend(guid);
    s.extend(0u32.to_le_bytes()); // empty names table
    s
}

pub fn dbi_stream(age: u32, machine: u16) -> Vec<u8> {
    let mut s = vec![0u8; 64];
    s[0..4].copy_from_slice(&DBI_SIGNATURE.to_le_bytes());
    s[4..8].copy_from_slice(&DBI_VERSION_V70.to_le_bytes());
    s[8..12].copy_from_slice(&age.to_le_bytes());
    s[58..60].copy_from_slice(&machine.to_le_bytes());
    s
}

/// An MSFZ (PDZ) container of `streams` (`None`: a nil stream), laid out as the MSFZ
/// specification describes: the 80-byte header, the stream data (uncompressed fragments, or
/// all of it in one zstd chunk when `compressed`), the stream directory (zstd-compressed too
/// when `compressed`), the chunk table.
pub fn build_msfz(streams: &[Option<Vec<u8>>], compressed: bool) -> Vec<u8> {
    use ruzstd::encoding::{compress_to_vec, CompressionLevel};
    let mut file = vec![0u8; 80];
    let mut directory = Vec::new();
    let mut chunk_table = Vec::new();
    let mut num_chunks = 0u32;
    if compressed {
        let mut plain = Vec::new();
        let mut offsets = Vec::new();
        for stream in streams {
            offsets.push(plain.len() as u64);
            plain.extend(stream.iter().flatten());
        }
        let packed = compress_to_vec(&plain[..], CompressionLevel::Fastest);
        chunk_table.extend((file.len() as u64).to_le_bytes());
        chunk_table.extend(1u32.to_le_bytes());
        chunk_table.extend((packed.len() as u32).to_le_bytes());
        chunk_table.extend((plain.len() as u32).to_le_bytes());
        num_chunks = 1;
        file.extend(packed);
        for (stream, offset) in streams.iter().zip(offsets) {
            match stream {
                None => directory.extend(u32::MAX.to_le_bytes()),
                Some(bytes) => {
                    if !bytes.is_empty() {
                        directory.extend((bytes.len() as u32).to_le_bytes());
                        directory.extend(((1u64 << 63) | offset).to_le_bytes());
                    }
                    directory.extend(0u32.to_le_bytes());
                }
            }
        }
    } else {
        for stream in streams {
            match stream {
                None => directory.extend(u32::MAX.to_le_bytes()),
                Some(bytes) => {
                    if !bytes.is_empty() {
                        directory.extend((bytes.len() as u32).to_le_bytes());
                        directory.extend((file.len() as u64).to_le_bytes());
                        file.extend(bytes);
                    }
                    directory.extend(0u32.to_le_bytes());
                }
            }
        }
    }
    let directory_on_disk = if compressed {
        compress_to_vec(&directory[..], CompressionLevel::Fastest)
    } else {
        directory.clone()
    };
    let directory_offset = file.len() as u64;
    file.extend(&directory_on_disk);
    let table_offset = file.len() as u64;
    file.extend(&chunk_table);
    let mut header = crate::formats::pdz::MSFZ_MAGIC.to_vec();
    header.extend(0u64.to_le_bytes());
    header.extend(directory_offset.to_le_bytes());
    header.extend(table_offset.to_le_bytes());
    header.extend((streams.len() as u32).to_le_bytes());
    header.extend(u32::from(compressed).to_le_bytes());
    header.extend((directory_on_disk.len() as u32).to_le_bytes());
    header.extend((directory.len() as u32).to_le_bytes());
    header.extend(num_chunks.to_le_bytes());
    header.extend((chunk_table.len() as u32).to_le_bytes());
    file[..80].copy_from_slice(&header);
    file
}

/// A universal (fat) Mach-O dylib of two 64-bit slices (arm64 and x86_64), each a header with
/// one `LC_UUID` command: the first slice's UUID is sixteen bytes of `uuids.0`, the second's of
/// `uuids.1`. Each slice is an identity of its own; both serve the whole file.
pub fn build_fat_macho(uuids: (u8, u8)) -> Vec<u8> {
    let thin = |cputype: u32, subtype: u32, uuid: u8| {
        let mut out = Vec::new();
        // mach_header_64: magic, cputype, cpusubtype, MH_DYLIB, one command of 24 bytes.
        for word in [0xfeed_facf_u32, cputype, subtype, 6, 1, 24, 0, 0] {
            out.extend(word.to_le_bytes());
        }
        out.extend(0x1b_u32.to_le_bytes()); // LC_UUID
        out.extend(24_u32.to_le_bytes());
        out.extend([uuid; 16]);
        out
    };
    let slices = [
        (0x0100_000c, 0, thin(0x0100_000c, 0, uuids.0)),
        (0x0100_0007, 3, thin(0x0100_0007, 3, uuids.1)),
    ];
    let mut fat = Vec::new();
    fat.extend(0xcafe_babe_u32.to_be_bytes());
    fat.extend((slices.len() as u32).to_be_bytes());
    for (i, (cputype, subtype, bytes)) in slices.iter().enumerate() {
        // fat_arch: cputype, cpusubtype, offset (page-aligned), size, align (2^12).
        let offset = 4096 * (i as u32 + 1);
        for word in [*cputype, *subtype, offset, bytes.len() as u32, 12] {
            fat.extend(word.to_be_bytes());
        }
    }
    for (i, (_, _, bytes)) in slices.iter().enumerate() {
        fat.resize(4096 * (i + 1), 0);
        fat.extend(bytes);
    }
    fat
}

/// A `.debug_cu_index` (little-endian) of `version` (2 or 5) listing `ids` as units 1, 2, …
/// in a hash table placed as gimli and the DWARF 5 standard look ids up (`id & mask`, then
/// steps of `((id >> 32) & mask) | 1`), with `.debug_info` and `.debug_abbrev` columns of
/// zeros; `slots`: the table's size (a power of two above `ids.len()`).
pub fn cu_index(version: u16, ids: &[u64], slots: u32) -> Vec<u8> {
    let mut table = vec![(0u64, 0u32); slots as usize];
    let mask = u64::from(slots) - 1;
    for (row, &id) in ids.iter().enumerate() {
        let mut at = id & mask;
        let step = ((id >> 32) & mask) | 1;
        while table[at as usize].1 != 0 {
            at = (at + step) & mask;
        }
        table[at as usize] = (id, row as u32 + 1);
    }
    let mut out = Vec::new();
    out.extend(u32::from(version).to_le_bytes());
    out.extend(2u32.to_le_bytes()); // columns: DW_SECT_INFO (1), DW_SECT_ABBREV (3)
    out.extend((ids.len() as u32).to_le_bytes());
    out.extend(slots.to_le_bytes());
    out.extend(table.iter().flat_map(|(id, _)| id.to_le_bytes()));
    out.extend(table.iter().flat_map(|(_, row)| row.to_le_bytes()));
    out.extend(1u32.to_le_bytes());
    out.extend(3u32.to_le_bytes());
    out.resize(out.len() + ids.len() * 2 * 8, 0); // offsets, then sizes
    out
}

/// An ELF DWARF package ([`build_elf`] with no build id, plus a `.debug_cu_index` from
/// [`cu_index`] and an empty `.debug_info.dwo`).
pub fn build_dwp(version: u16, ids: &[u64]) -> Vec<u8> {
    let slots = (ids.len() as u32 * 3 / 2 + 1).next_power_of_two().max(16);
    let elf = with_section(
        build_elf(true, false, 62, None, false),
        ".debug_info.dwo",
        &[],
    );
    with_section(elf, ".debug_cu_index", &cu_index(version, ids, slots))
}

/// One unit of [`skeleton_units`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A DWARF 5 `DW_UT_skeleton` unit with this DWO id.
    Skeleton5(u64),
    /// A DWARF 4 compilation unit whose root entry has `DW_AT_GNU_dwo_id` (GCC and rustc's
    /// split DWARF).
    Skeleton4(u64),
    /// A DWARF 5 full compilation unit (no DWO id).
    Full5,
    /// A DWARF 4 compilation unit with no DWO id (its root entry has a name and children).
    Full4,
}

/// A `.debug_info` and its `.debug_abbrev` (32-bit DWARF, little-endian, 8-byte addresses)
/// holding `units`, each with a table of its own, its root entry's abbreviation last but
/// one in it (so a reader that looks up the root's code passes one over).
pub fn skeleton_units(units: &[Unit]) -> (Vec<u8>, Vec<u8>) {
    // DW_AT_name (0x03) as DW_FORM_string (0x08); DW_AT_GNU_dwo_id (0x2131) as DW_FORM_data8
    // (0x07); DW_TAG_compile_unit 0x11, DW_TAG_skeleton_unit 0x4a, DW_TAG_base_type 0x24.
    let (mut info, mut abbrev) = (Vec::new(), Vec::new());
    for unit in units {
        let table = abbrev.len() as u32;
        // Code 2 (declared first, never used): a base type; code 1: the root.
        abbrev.extend([2, 0x24, 0, 0x03, 0x08, 0, 0]);
        let (tag, children, dwo_id) = match unit {
            Unit::Skeleton5(id) => (0x4a, 0, Some(*id)),
            Unit::Skeleton4(id) => (0x11, 0, Some(*id)),
            Unit::Full5 | Unit::Full4 => (0x11, 1, None),
        };
        abbrev.extend([1, tag, children, 0x03, 0x08]);
        if matches!(unit, Unit::Skeleton4(_)) {
            abbrev.extend([0xb1, 0x42, 0x07]);
        }
        abbrev.extend([0, 0, 0]);
        let mut body = Vec::new();
        match unit {
            Unit::Skeleton5(_) | Unit::Full5 => {
                body.extend(5u16.to_le_bytes());
                body.push(if dwo_id.is_some() { 4 } else { 1 }); // DW_UT_skeleton, DW_UT_compile
                body.push(8);
                body.extend(table.to_le_bytes());
                if let Unit::Skeleton5(id) = unit {
                    body.extend(id.to_le_bytes());
                }
            }
            Unit::Skeleton4(_) | Unit::Full4 => {
                body.extend(4u16.to_le_bytes());
                body.extend(table.to_le_bytes());
                body.push(8);
            }
        }
        body.push(1); // the root entry: code 1, its name, its DWO id (DWARF 4)
        body.extend(b"a.c\0");
        if let Unit::Skeleton4(id) = unit {
            body.extend(id.to_le_bytes());
        }
        if children == 1 {
            body.extend([2]); // a child: code 2, its name
            body.extend(b"int\0");
            body.push(0);
        }
        info.extend((body.len() as u32).to_le_bytes());
        info.extend(body);
    }
    (info, abbrev)
}

/// An ELF file ([`build_elf`] with a build id, no `.debug_info` of its own) with the
/// `.debug_info` and `.debug_abbrev` of [`skeleton_units`].
pub fn build_split_binary(units: &[Unit]) -> Vec<u8> {
    let (info, abbrev) = skeleton_units(units);
    let elf = with_section(
        build_elf(true, false, 62, Some(&[0x3c; 20]), false),
        ".debug_abbrev",
        &abbrev,
    );
    with_section(elf, ".debug_info", &info)
}
