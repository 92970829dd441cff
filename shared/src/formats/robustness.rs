//! Hostile inputs: valid artifacts of every format with random bytes overwritten, and random
//! bytes behind every magic number, are identified or refused with an error, never a panic.

use proptest::prelude::*;

use super::{identify, IdentifyOptions};
use crate::reader::MemReader;

fn seeds() -> Vec<Vec<u8>> {
    let id20: Vec<u8> = (1..=20).collect();
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
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn corrupted_artifacts_never_panic(
        seed in 0usize..10,
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..12),
        cut in prop::option::of(any::<prop::sample::Index>()),
    ) {
        let mut data = seeds().swap_remove(seed);
        for (at, byte) in edits {
            let i = at.index(data.len());
            data[i] = byte;
        }
        if let Some(cut) = cut {
            data.truncate(cut.index(data.len() + 1));
        }
        let _ = identify(&MemReader(data), &IdentifyOptions::default());
    }

    #[test]
    fn random_bytes_behind_any_magic_never_panic(
        magic in prop::sample::select(vec![
            &b"\x7fELF\x01\x01"[..], &b"\x7fELF\x02\x02"[..], &b"MZ"[..], &b"\xca\xfe\xba\xbe\x00\x00\x00\x02"[..],
            &b"\xcf\xfa\xed\xfe"[..], &b"\xfe\xed\xfa\xce"[..], &b"\0asm\x01\0\0\0"[..], &b"BSJB"[..],
            &b"Microsoft C/C++ MSF 7.00\r\n\x1aDS\0\0\0"[..], &b"MODULE "[..], &b"FFFFFFFF 00 "[..],
        ]),
        tail in prop::collection::vec(any::<u8>(), 0..4096),
    ) {
        let mut data = magic.to_vec();
        data.extend(tail);
        let _ = identify(&MemReader(data), &IdentifyOptions::default());
    }
}
