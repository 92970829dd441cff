//! Split DWARF read from built packages and binaries: the ids, and every lie a header can
//! tell ending in an error (a package) or a reason (a binary's walk), within a few reads.

use std::io;

use gimli::Reader;

use super::{read_package, skeleton_dwo_ids, CU_INDEX, MAX_DWO_IDS, WALK_BUDGET};
use crate::formats::{identify, identify_with_details, Format, FormatError, IdentifyOptions};
use crate::identity::{DwarfLayout, DwoId, Kind, SectionRef};
use crate::reader::{CountingReader, MemReader, RangeReader};
use crate::testing::builders::{build_dwp, build_split_binary, cu_index, skeleton_units, Unit};

/// A file of `size` bytes that are `head`, then `tail` repeated (zeros when empty): a huge
/// artifact without holding it.
pub(crate) struct Sparse {
    head: Vec<u8>,
    tail: Vec<u8>,
    size: u64,
}

impl Sparse {
    pub(crate) fn new(head: Vec<u8>, size: u64) -> Self {
        Sparse::repeating(head, Vec::new(), size)
    }

    fn repeating(head: Vec<u8>, tail: Vec<u8>, size: u64) -> Self {
        Sparse { head, tail, size }
    }

    fn byte(&self, at: u64) -> u8 {
        let head = self.head.len() as u64;
        if at < head {
            return self.head[at as usize];
        }
        match self.tail.len() as u64 {
            0 => 0,
            n => self.tail[((at - head) % n) as usize],
        }
    }
}

impl RangeReader for Sparse {
    fn size(&self) -> u64 {
        self.size
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        if offset.saturating_add(buf.len() as u64) > self.size {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        for (i, b) in buf.iter_mut().enumerate() {
            *b = self.byte(offset + i as u64);
        }
        Ok(())
    }
}

const IDS: [u64; 5] = [
    0x9ff5_1d77_14aa_2abf,
    0x57ae_4f79_97db_4c94,
    0x0000_0000_0000_0001,
    0xffff_ffff_ffff_fffe,
    0x5cc8_2758_0275_ff35,
];

fn sorted(ids: &[u64]) -> Vec<DwoId> {
    let mut ids: Vec<DwoId> = ids.iter().copied().map(DwoId).collect();
    ids.sort();
    ids
}

/// An index alone, as a section of an in-memory file.
fn package_of(index: &[u8]) -> Result<crate::identity::DwarfPackage, FormatError> {
    let section = SectionRef {
        name: CU_INDEX.into(),
        offset: 0,
        size: index.len() as u64,
        compressed: false,
    };
    read_package(&MemReader(index), &section, &layout())
}

fn layout() -> DwarfLayout {
    DwarfLayout {
        little_endian: true,
        is_64: true,
        sections: Vec::new(),
    }
}

#[test]
fn a_package_is_its_index_ids_in_either_version() {
    for version in [2u16, 5] {
        let dwp = build_dwp(version, &IDS);
        let ids = identify(&MemReader(&dwp), &IdentifyOptions::default()).unwrap();
        let [id] = &ids[..] else { panic!("{ids:?}") };
        assert_eq!((id.format, id.kind), (Format::Dwp, Kind::Debug));
        assert!(id.build_id.is_none() && id.debug_id.is_nil());
        let package = id.dwarf_package.as_ref().expect("a package");
        assert_eq!(package.index_version, version);
        assert_eq!(package.dwo_ids, sorted(&IDS));
        let json = serde_json::to_value(id).unwrap();
        assert_eq!(json["format"], "dwp");
        assert_eq!(json["dwarf_package"]["dwo_ids"][0], "0000000000000001");
    }
}

#[test]
fn the_builder_places_ids_where_gimli_finds_them() {
    let index = cu_index(5, &IDS, 16);
    let parsed = gimli::DebugCuIndex::new(&index, gimli::LittleEndian)
        .index()
        .unwrap();
    for (row, id) in IDS.iter().enumerate() {
        assert_eq!(parsed.find(*id), Some(row as u32 + 1));
    }
}

#[test]
fn every_cut_of_an_index_is_an_error_never_a_panic() {
    let index = cu_index(2, &IDS, 16);
    assert_eq!(package_of(&index).unwrap().dwo_ids, sorted(&IDS));
    for cut in 0..index.len() {
        let err = package_of(&index[..cut]).unwrap_err();
        assert!(matches!(err, FormatError::Malformed { .. }), "{cut}: {err}");
    }
    // Cut in the whole file: the section then lies past the file's end.
    let dwp = build_dwp(5, &IDS);
    for cut in (0..dwp.len()).step_by(7) {
        let r = identify(&MemReader(&dwp[..cut]), &IdentifyOptions::default());
        assert!(r.is_err() || r.unwrap()[0].dwarf_package.is_none(), "{cut}");
    }
}

/// Writes `value` at `at` of `index`, little-endian.
fn with_u32(mut index: Vec<u8>, at: usize, value: u32) -> Vec<u8> {
    index[at..at + 4].copy_from_slice(&value.to_le_bytes());
    index
}

#[test]
fn a_hash_table_that_is_not_what_its_header_says_is_malformed() {
    let index = cu_index(5, &IDS, 16);
    let rows = 16 + 16 * 8;
    let row_of = |slot: usize| rows + slot * 4;
    let used: Vec<usize> = (0..16)
        .filter(|&s| index[row_of(s)..row_of(s) + 4] != [0; 4])
        .collect();
    let free = (0..16).find(|s| !used.contains(s)).unwrap();
    let cases = [
        // A row past the units, a row in two slots, one unit fewer than the header says.
        (with_u32(index.clone(), row_of(used[0]), 6), "row 6 of 5"),
        (
            with_u32(index.clone(), row_of(free), 1),
            "row 1 is in two slots",
        ),
        (with_u32(index.clone(), row_of(used[0]), 0), "holds 4"),
        (with_u32(index.clone(), 8, 4), "of 4"),
        (with_u32(index.clone(), 0, 3), "unknown DWARF version: 3"),
        (with_u32(index.clone(), 0, 0), "unknown DWARF version: 0"),
    ];
    for (lying, said) in cases {
        let err = package_of(&lying).unwrap_err().to_string();
        assert!(err.contains(said), "{said}: {err}");
    }
    // The same id twice (two rows, two slots).
    let mut twice = IDS.to_vec();
    twice.push(IDS[0]);
    let err = package_of(&cu_index(2, &twice, 16))
        .unwrap_err()
        .to_string();
    assert!(err.contains("listed twice"), "{err}");
    assert!(package_of(&[]).unwrap_err().to_string().contains("empty"));
}

#[test]
fn huge_counts_are_refused_after_a_few_reads() {
    // Headers claiming more units (or slots) than allowed, the section as long as they say
    // (zeros): an error naming the limit, with kilobytes read.
    let claims: [(u32, u32, &str); 4] = [
        (MAX_DWO_IDS as u32 + 1, 1 << 21, "at most 1000000"),
        (1, 1 << 20, "hash slots for 1 units"),
        (u32::MAX, 1 << 31, "invalid DWP slot count"),
        (3, 0, "holds 0"),
    ];
    for (units, slots, said) in claims {
        // No columns: nothing after the hash table.
        let mut header = Vec::new();
        for word in [5u32, 0, units, slots] {
            header.extend(word.to_le_bytes());
        }
        let size = 16 + 12 * u64::from(slots);
        let sparse = CountingReader::new(Sparse::new(header, size));
        let section = SectionRef {
            name: CU_INDEX.into(),
            offset: 0,
            size,
            compressed: false,
        };
        let err = read_package(&sparse, &section, &layout()).unwrap_err();
        assert!(err.to_string().contains(said), "{said}: {err}");
        assert!(sparse.bytes_read() <= 4096, "{}", sparse.bytes_read());
    }
}

#[test]
fn a_four_gib_package_costs_kilobytes() {
    let dwp = build_dwp(2, &IDS);
    let huge = CountingReader::new(Sparse::new(dwp, 4 << 30));
    let ids = identify(&huge, &IdentifyOptions::default()).unwrap();
    assert_eq!(ids[0].dwarf_package.as_ref().unwrap().dwo_ids, sorted(&IDS));
    assert!(huge.bytes_read() < 64 << 10, "{}", huge.bytes_read());
}

#[test]
fn a_binary_lists_its_skeletons_ids_of_either_version() {
    let units = [
        Unit::Full4,
        Unit::Skeleton5(IDS[0]),
        Unit::Full5,
        Unit::Skeleton4(IDS[1]),
        Unit::Skeleton4(IDS[2]),
        Unit::Skeleton5(IDS[2]),
    ];
    let elf = build_split_binary(&units);
    let ids = identify_with_details(&MemReader(&elf), &IdentifyOptions::default()).unwrap();
    let split = ids[0].split_dwarf.as_ref().expect("skeletons");
    assert_eq!(split.dwo_ids, sorted(&IDS[..3]));
    assert!(split.unread.is_empty(), "{:?}", split.unread);
    // Headers only: without details, nothing is read of .debug_info.
    let plain = identify(&MemReader(&elf), &IdentifyOptions::default()).unwrap();
    assert!(plain[0].split_dwarf.is_none());
    // A file without skeletons has none to list.
    let full = build_split_binary(&[Unit::Full4, Unit::Full5]);
    let ids = identify_with_details(&MemReader(&full), &IdentifyOptions::default()).unwrap();
    assert!(ids[0].split_dwarf.is_none());
}

/// The layout of a `.debug_info` at 0 and a `.debug_abbrev` after it, in one buffer.
fn walk(info: &[u8], abbrev: &[u8]) -> Option<crate::identity::SplitDwarf> {
    let mut file = info.to_vec();
    file.extend(abbrev);
    let section = |name: &str, offset: usize, size: usize| SectionRef {
        name: name.into(),
        offset: offset as u64,
        size: size as u64,
        compressed: false,
    };
    let layout = DwarfLayout {
        sections: vec![
            section(".debug_info", 0, info.len()),
            section(".debug_abbrev", info.len(), abbrev.len()),
        ],
        ..layout()
    };
    skeleton_dwo_ids(&MemReader(file), &layout)
}

#[test]
fn every_cut_of_the_units_keeps_what_was_read_and_says_why_the_rest_was_not() {
    let (info, abbrev) = skeleton_units(&[
        Unit::Skeleton4(IDS[0]),
        Unit::Skeleton5(IDS[1]),
        Unit::Skeleton4(IDS[2]),
    ]);
    assert_eq!(walk(&info, &abbrev).unwrap().dwo_ids, sorted(&IDS[..3]));
    let ends = unit_ends(&info);
    for cut in 0..info.len() {
        if let Some(split) = walk(&info[..cut], &abbrev) {
            assert!(split.dwo_ids.len() < 3, "{cut}");
            // Cut between units, the section is whole; cut in one, its rest is unread.
            assert_eq!(split.unread.is_empty(), ends.contains(&cut), "{cut}");
        }
    }
    // The abbreviations cut: the DWARF 4 roots cannot be read (each says so), DWARF 5's can.
    for cut in 0..abbrev.len() {
        let split = walk(&info, &abbrev[..cut]).expect("the DWARF 5 skeleton");
        assert!(split.dwo_ids.contains(&DwoId(IDS[1])), "{cut}");
    }
    let split = walk(&info, &[]).unwrap();
    assert_eq!(split.dwo_ids, [DwoId(IDS[1])]);
    assert_eq!(split.unread.len(), 1, "{:?}", split.unread);
    assert!(split.unread[0].contains("(2 units)"), "{:?}", split.unread);
}

/// Where each unit of a (32-bit DWARF, little-endian) `.debug_info` ends.
fn unit_ends(info: &[u8]) -> Vec<usize> {
    let mut ends = Vec::new();
    let mut at = 0;
    while at + 4 <= info.len() {
        let length = u32::from_le_bytes(info[at..at + 4].try_into().unwrap());
        at += 4 + length as usize;
        ends.push(at);
    }
    ends
}

#[test]
fn a_walk_over_a_huge_section_stops_at_its_budget_and_says_so() {
    // A 4 GiB .debug_info of DWARF 4 skeletons padded to 1 KiB each: four million units.
    let (mut unit, abbrev) = skeleton_units(&[Unit::Skeleton4(IDS[0])]);
    let padded = 1024 - 4;
    unit[..4].copy_from_slice(&(padded as u32).to_le_bytes());
    unit.resize(1024, 0);
    let size = 4u64 << 30;
    let sparse = CountingReader::new(Sparse::repeating(abbrev.clone(), unit, size));
    let section = |name: &str, offset: u64, size: u64| SectionRef {
        name: name.into(),
        offset,
        size,
        compressed: false,
    };
    let layout = DwarfLayout {
        sections: vec![
            section(".debug_abbrev", 0, abbrev.len() as u64),
            section(
                ".debug_info",
                abbrev.len() as u64,
                size - abbrev.len() as u64,
            ),
        ],
        ..layout()
    };
    let split = skeleton_dwo_ids(&sparse, &layout).unwrap();
    assert_eq!(split.dwo_ids, [DwoId(IDS[0])]);
    assert!(
        split.unread.iter().any(|r| r.contains("reads more than")),
        "{:?}",
        split.unread
    );
    assert!(
        sparse.bytes_read() <= WALK_BUDGET,
        "{}",
        sparse.bytes_read()
    );
}

#[test]
fn a_ranged_reader_sees_what_a_slice_sees() {
    // The same unit headers through gimli's own slice reader and through ranged reads.
    let (info, _) = skeleton_units(&[Unit::Skeleton5(IDS[0]), Unit::Full4, Unit::Full5]);
    let budget = crate::formats::dwarf::ranged::Budget::new(1 << 20);
    let reader = MemReader(info.clone());
    let size = info.len() as u64;
    let section = crate::formats::dwarf::ranged::Section::new(&reader, 0, size, &budget);
    let ranged = section.reader(gimli::RunTimeEndian::Little);
    assert_eq!(ranged.len(), info.len());
    let mut by_ranges = gimli::DebugInfo::from(ranged).units();
    let mut by_slice = gimli::DebugInfo::new(&info, gimli::RunTimeEndian::Little).units();
    while let Some(want) = by_slice.next().unwrap() {
        let got = by_ranges.next().unwrap().unwrap();
        assert_eq!(got.type_(), want.type_());
        assert_eq!(got.version(), want.version());
        assert_eq!(got.offset(), want.offset());
        assert_eq!(got.header_size(), want.header_size());
    }
    assert!(by_ranges.next().unwrap().is_none());
}

fn uleb(mut v: u64, out: &mut Vec<u8>) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// A DWARF 4 unit whose root entry has abbreviation `code` of the table at `table`.
fn unit4(table: u32, code: u64) -> Vec<u8> {
    let mut body = 4u16.to_le_bytes().to_vec();
    body.extend(table.to_le_bytes());
    body.push(8);
    uleb(code, &mut body);
    let mut unit = (body.len() as u32).to_le_bytes().to_vec();
    unit.extend(body);
    unit
}

#[test]
fn abbreviation_tables_past_the_limits_skip_their_unit_with_a_reason() {
    let (mut info, mut abbrev) = skeleton_units(&[Unit::Skeleton5(IDS[0])]);
    // A root abbreviation declared after 5,000 others.
    let far = abbrev.len() as u32;
    for code in 1..=5001u64 {
        uleb(code, &mut abbrev);
        abbrev.extend([0x11, 0, 0, 0]);
    }
    abbrev.push(0);
    info.extend(unit4(far, 5001));
    // A root abbreviation of 2,000 attributes.
    let wide = abbrev.len() as u32;
    abbrev.extend([1, 0x11, 0]);
    for _ in 0..2000 {
        abbrev.extend([0x03, 0x08]);
    }
    abbrev.extend([0, 0, 0]);
    info.extend(unit4(wide, 1));
    // A root entry of code 0 (no entries), and one whose code no declaration has.
    info.extend(unit4(0, 0));
    info.extend(unit4(0, 77));
    let split = walk(&info, &abbrev).unwrap();
    assert_eq!(split.dwo_ids, [DwoId(IDS[0])]);
    let unread = split.unread.join("\n");
    assert!(unread.contains("past the first 4096"), "{unread}");
    assert!(unread.contains("more than 1024 attributes"), "{unread}");
    assert_eq!(split.unread.len(), 2, "{unread}");
}
