//! Hostile inputs: valid artifacts of every format with random bytes overwritten, and random
//! bytes behind every magic number, are identified or refused with an error, never a panic.

use proptest::prelude::*;

use super::{identify_with_details, IdentifyOptions};
use crate::reader::MemReader;
use crate::testing::builders::{
    build_msfz, dbi_stream, dwarf5_line_table_with_md5, info_stream, with_section,
};

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
        build_msfz(&msfz_streams, true),
        build_msfz(&msfz_streams, false),
        super::sourcebundle::tests::bundle(
            r#"{"files":{"files/_/_/src/main.c":{"type":"source","path":"/src/main.c"}},"debug_id":"faa9207b-627f-3c60-4bae-ac1cd514e670","object_name":"app.debug"}"#,
        ),
    ]
}

/// Where an edit lands: anywhere, or in the first or last KiB, where formats and containers
/// keep their headers and directories (a zip's central directory, a stream's trailer) —
/// edits anywhere in a larger file mostly hit data nobody reads. (Shared with
/// `archive::robustness`.)
pub(crate) fn edited(region: u8, at: prop::sample::Index, len: usize) -> usize {
    let near = len.min(1024);
    match region {
        0 => at.index(len),
        1 => at.index(near),
        _ => len - near + at.index(near),
    }
}

/// The seeds are what they stand for: each identified as it is.
#[test]
fn every_seed_is_identified() {
    for (n, seed) in seeds().into_iter().enumerate() {
        let ids = identify_with_details(&MemReader(seed), &IdentifyOptions::default());
        assert!(ids.is_ok_and(|ids| !ids.is_empty()), "seed {n}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn corrupted_artifacts_never_panic(
        seed in 0usize..14,
        edits in prop::collection::vec((0..3u8, any::<prop::sample::Index>(), any::<u8>()), 1..12),
        cut in prop::option::of(any::<prop::sample::Index>()),
    ) {
        let mut data = seeds().swap_remove(seed);
        for (region, at, byte) in edits {
            let i = edited(region, at, data.len());
            data[i] = byte;
        }
        if let Some(cut) = cut {
            data.truncate(cut.index(data.len() + 1));
        }
        let _ = identify_with_details(&MemReader(data), &IdentifyOptions::default());
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
        let _ = identify_with_details(&MemReader(data), &IdentifyOptions::default());
    }
}
