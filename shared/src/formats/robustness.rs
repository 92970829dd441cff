//! Hostile inputs: valid artifacts of every format with random bytes overwritten, and random
//! bytes behind every magic number, are identified or refused with an error, never a panic.

use proptest::prelude::*;

use super::{identify_with_details, IdentifyOptions};
use crate::reader::MemReader;
use crate::testing::builders::{
    build_dwp, build_msfz, build_split_binary, dbi_stream, dwarf5_line_table_with_md5, info_stream,
    with_section, Unit,
};
use crate::testing::source_pdbs::{pdb_with_sources, portable_pdb_with_sources, MD5};

/// A valid artifact of every format (the pipeline's hostile-input test starts from them too).
pub(crate) fn seeds() -> Vec<Vec<u8>> {
    let id20: Vec<u8> = (1..=20).collect();
    let msfz_streams = [
        None,
        Some(info_stream([4; 16], 2)),
        None,
        Some(dbi_stream(2, 0x8664)),
    ];
    vec![
        super::elf::tests::build_elf(true, false, 62, Some(&id20), true),
        super::elf::tests::build_elf(false, true, 20, Some(&id20[..8]), false),
        super::pe::tests::build_pe(
            true,
            0x8664,
            true,
            &[super::pe::tests::codeview([7; 16], 3, "a.pdb", 0, 1)],
            true,
        ),
        super::pe::tests::build_pe(
            false,
            0x14c,
            false,
            &[super::pe::tests::codeview([7; 16], 3, "b.pdb", 0x504d, 9)],
            false,
        ),
        super::pdb::tests::build_msf(
            512,
            &[
                Some(vec![0; 10]),
                Some(super::pdb::tests::info_stream([3; 16], 1)),
                Some(vec![1; 100]),
                Some(super::pdb::tests::dbi_stream(2, 0x8664)),
            ],
        ),
        super::macho::tests::build_fat(
            &[(
                0x0100_000c,
                super::macho::tests::build_thin(0x0100_000c, 6, [5; 16], true),
            )],
            false,
        ),
        super::wasm::tests::build_wasm(Some(&id20), true),
        super::portable_pdb::tests::build_portable_pdb([9; 16], 77),
        super::perfmap::tests::build_perfmap("F5FDDF60EFB0BEE79EF02A19C3DECBA9", 1),
        b"MODULE Linux x86_64 0123456789ABCDEF0123456789ABCDEF0 lib.so\nINFO CODE_ID 01234567\n"
            .to_vec(),
        // What costs more than headers: a DWARF 5 line table (the source paths, with MD5s),
        // an MSFZ PDB (compressed and not), a source bundle's manifest.
        with_section(
            super::elf::tests::build_elf(true, false, 62, Some(&id20), true),
            ".debug_line",
            &dwarf5_line_table_with_md5(
                "/ci/work",
                &[("src/a.c", [1; 16]), ("include/b.h", [2; 16])],
            ),
        ),
        compressed_section(
            super::elf::tests::build_elf(true, false, 62, Some(&id20), true),
            ".debug_line",
            &dwarf5_line_table_with_md5("/ci/work", &[("src/z.c", [3; 16])]),
        ),
        build_msfz(&msfz_streams, true),
        build_msfz(&msfz_streams, false),
        super::sourcebundle::tests::bundle(
            r#"{"files":{"files/_/_/src/main.c":{"type":"source","path":"/src/main.c"}},"debug_id":"faa9207b-627f-3c60-4bae-ac1cd514e670","object_name":"app.debug"}"#,
        ),
        // Split DWARF: a package's index (both versions), a binary's skeleton units.
        build_dwp(2, &[0x5cc8_2758_0275_ff35, 7, 0x8e92_ec6f_450b_ffe7]),
        build_dwp(5, &[0x57ae_4f79_97db_4c94]),
        build_split_binary(&[
            Unit::Skeleton4(0x5857_625a_300c_75c2),
            Unit::Full4,
            Unit::Skeleton5(9),
        ]),
        // What PDBs say of their sources: documents, Source Link, srcsrv.
        pdb_with_sources(
            [6; 16],
            &[(r"C:\b\a.cpp", 1, &[1; 16]), (r"C:\b\a.h", 2, &[2; 20])],
            Some(b"SRCSRV: ini --\r\nVERSION=2\r\nSRCSRV: variables --\r\nSRCSRVCMD=x\r\n"),
            Some(br#"{"documents":{"C:\\b\\*":"https://s/*"}}"#),
        ),
        portable_pdb_with_sources(
            [8; 20],
            &[("/src/a.cs", MD5, &[3; 16])],
            Some(br#"{"documents":{"/src/*":"https://s/*"}}"#),
        ),
    ]
}

/// One of the [`seeds`], chosen by `index`.
pub(crate) fn seed_at(index: prop::sample::Index) -> Vec<u8> {
    let mut seeds = seeds();
    seeds.swap_remove(index.index(seeds.len()))
}

/// `elf` with a section `name` holding `bytes` zlib-compressed (`SHF_COMPRESSED`, an
/// `Elf64_Chdr` first), as `gcc -gz` writes debug sections: its header claims the size the
/// stream decompresses to.
fn compressed_section(elf: Vec<u8>, name: &str, bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut section = Vec::new();
    section.extend(1u32.to_le_bytes()); // ELFCOMPRESS_ZLIB
    section.extend(0u32.to_le_bytes());
    section.extend((bytes.len() as u64).to_le_bytes());
    section.extend(1u64.to_le_bytes());
    let mut zlib = flate2::write::ZlibEncoder::new(section, flate2::Compression::default());
    zlib.write_all(bytes).unwrap();
    let mut elf = with_section(elf, name, &zlib.finish().unwrap());
    // The section just added has the last header: its flags (at 8) get SHF_COMPRESSED.
    let last = elf.len() - 64;
    elf[last + 8..last + 16].copy_from_slice(&0x800u64.to_le_bytes());
    elf
}

/// Where an edit lands: anywhere, or in the first or last KiB, where formats and containers
/// keep their headers and directories (a zip's central directory, a stream's trailer) —
/// edits anywhere in a larger file mostly hit data nobody reads.
fn edited(region: u8, at: prop::sample::Index, len: usize) -> usize {
    let near = len.min(1024);
    match region {
        0 => at.index(len),
        1 => at.index(near),
        _ => len - near + at.index(near),
    }
}

/// Sizes and counts a hostile header claims.
pub(crate) const LIES: [u32; 5] = [u32::MAX, 0x7fff_ffff, 0x1000_0000, 0x0100_0000, 0x10_0000];

/// One edit of an input: a byte, or (a third of the time) a little-endian word where a count
/// or a size might be, telling a lie of a size no random byte tells often.
pub(crate) type Edit = (u8, prop::sample::Index, u8, Option<u32>);

pub(crate) fn edit() -> impl Strategy<Value = Edit> {
    let lie = prop::sample::select(LIES.to_vec());
    (
        0..3u8,
        any::<prop::sample::Index>(),
        any::<u8>(),
        prop::option::weighted(0.3, lie),
    )
}

/// Makes `edit` in `data` (a word cut short at its end).
fn apply((region, at, byte, word): Edit, data: &mut [u8]) {
    if data.is_empty() {
        return;
    }
    let i = edited(region, at, data.len());
    match word {
        None => data[i] = byte,
        Some(word) => write_word(data, i, word),
    }
}

/// `word` little-endian at `at` in `data`, cut short at its end.
pub(crate) fn write_word(data: &mut [u8], at: usize, word: u32) {
    let end = (at + 4).min(data.len());
    data[at..end].copy_from_slice(&word.to_le_bytes()[..end - at]);
}

/// `seed` with `edits` made, then cut at `cut` (of its length, inclusive) if there is one.
pub(crate) fn corrupted(
    mut seed: Vec<u8>,
    edits: Vec<Edit>,
    cut: Option<prop::sample::Index>,
) -> Vec<u8> {
    for edit in edits {
        apply(edit, &mut seed);
    }
    if let Some(cut) = cut {
        seed.truncate(cut.index(seed.len() + 1));
    }
    seed
}

/// The seeds are what they stand for: each identified as it is.
#[test]
fn every_seed_is_identified() {
    let mut sources = Vec::new();
    for (n, seed) in seeds().into_iter().enumerate() {
        let ids = identify_with_details(&MemReader(seed), &IdentifyOptions::default());
        let ids = ids.unwrap_or_else(|e| panic!("seed {n}: {e}"));
        assert!(!ids.is_empty(), "seed {n}");
        sources.extend(
            ids.into_iter()
                .filter_map(|id| id.sources)
                .flat_map(|s| s.paths),
        );
    }
    // The line tables are read, the compressed one decompressed.
    assert_eq!(
        sources,
        [
            "/ci/work/include/b.h",
            "/ci/work/src/a.c",
            "/ci/work/src/z.c"
        ]
    );
}

/// The most memory identifying any artifact may hold at once, whatever its headers claim:
/// what it holds by design, a compressed debug section decompressed whole (at most
/// [`super::dwarf::MAX_DECOMPRESSED`]), and headroom. (The seeds themselves hold about
/// 130 KB.) A header's claim read without a limit comes above it.
const MOST_HELD: usize = super::dwarf::MAX_DECOMPRESSED as usize + (16 << 20);

/// Identifies `data` (panicking is the failure these tests look for) and checks that it held
/// no more than [`MOST_HELD`] bytes at once.
/// (`case` says which input it was, for the failure's message.)
fn identify_within_bounds(data: &[u8], case: impl FnOnce() -> String) {
    let (_, held) = crate::testing::allocations::measure(|| {
        identify_with_details(&MemReader(data), &IdentifyOptions::default())
    });
    assert!(
        held <= MOST_HELD,
        "{held} bytes held identifying {} bytes ({})",
        data.len(),
        case()
    );
}

/// Every word of every seed's first and last KiB (where headers and directories are) in
/// turn telling each lie of [`LIES`]: identified within [`MOST_HELD`], without a panic.
/// Exhaustive where random edits rarely land on the one field that matters.
#[test]
fn every_header_word_lying_costs_no_more_than_the_limits() {
    for (n, seed) in seeds().into_iter().enumerate() {
        let near = seed.len().min(1024);
        let positions = (0..near).chain(seed.len() - near..seed.len());
        for at in positions {
            for lie in LIES {
                let mut data = seed.clone();
                write_word(&mut data, at, lie);
                identify_within_bounds(&data, || format!("seed {n}, {lie:#x} at {at}"));
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn corrupted_artifacts_never_panic(
        seed in any::<prop::sample::Index>(),
        edits in prop::collection::vec(edit(), 1..12),
        cut in prop::option::of(any::<prop::sample::Index>()),
    ) {
        identify_within_bounds(&corrupted(seed_at(seed), edits, cut), String::new);
    }

    #[test]
    fn random_bytes_behind_any_magic_never_panic(
        magic in prop::sample::select(vec![
            &b"\x7fELF\x01\x01"[..], &b"\x7fELF\x02\x02"[..], &b"MZ"[..], &b"\xca\xfe\xba\xbe\x00\x00\x00\x02"[..],
            &b"\xcf\xfa\xed\xfe"[..], &b"\xfe\xed\xfa\xce"[..], &b"\0asm\x01\0\0\0"[..], &b"BSJB"[..],
            &b"Microsoft C/C++ MSF 7.00\r\n\x1aDS\0\0\0"[..], &b"MODULE "[..], &b"FFFFFFFF 00 "[..],
            &super::pdz::MSFZ_MAGIC[..], &b"SYSB\x02\0\0\0PK\x03\x04"[..],
        ]),
        tail in prop::collection::vec(any::<u8>(), 0..4096),
    ) {
        let mut data = magic.to_vec();
        data.extend(tail);
        identify_within_bounds(&data, String::new);
    }
}
