//! Zip (every method), tarballs in every compression, lzip, single compressed files, cabinets.

use super::{
    bzip2, cab_of, expand_all, files, find, gzip, lzip, tar_of, xz, zip_in_methods, zip_of, zstd,
    Seen, A, B,
};
use crate::archive::{compressed, Limits, Options};

#[test]
fn zip_entries_are_expanded_or_given_as_ranges() {
    use ::zip::CompressionMethod::{Deflated, Stored};
    let bytes = zip_of(&[("dir/a.txt", A, Stored), ("b.txt", B, Deflated)]);
    let seen = expand_all(&bytes, "x.zip", Options::default()).unwrap();
    assert_eq!(files(&seen), [("dir/a.txt", A), ("b.txt", B)]);

    let ranges = Options {
        stored_ranges: true,
        ..Options::default()
    };
    let seen = expand_all(&bytes, "x.zip", ranges).unwrap();
    let Seen::Stored(name, offset, size) = &seen[0] else {
        panic!("{seen:?}")
    };
    assert_eq!(name, "dir/a.txt");
    assert_eq!(&bytes[*offset as usize..(*offset + *size) as usize], A);
    assert_eq!(files(&seen), [("b.txt", B)]);
}

/// Entries in methods the zip crate is built without are decoded by symdex's own decoders,
/// their size and CRC-32 checked.
#[test]
fn zip_entries_in_bzip2_lzma_zstd_xz_and_ppmd_are_expanded() {
    // Over a MiB, of bytes that do not compress past the ratio limit.
    let big: Vec<u8> = (0..300_000u32)
        .flat_map(|n| {
            n.wrapping_mul(2_654_435_761)
                .rotate_left(n % 7)
                .to_le_bytes()
        })
        .collect();
    let entries: [(&str, &[u8], u16); 7] = [
        ("a.bz2.txt", A, 12),
        ("dir/b.lzma.txt", B, 14),
        ("big.lzma", &big, 14),
        ("c.zst.txt", A, 93),
        ("d.xz.txt", B, 95),
        ("e.ppmd.txt", A, 98),
        ("big.ppmd", &big, 98),
    ];
    let bytes = zip_in_methods(&entries);
    let seen = expand_all(&bytes, "m.zip", Options::default()).unwrap();
    let expected: Vec<(&str, &[u8])> = entries.iter().map(|(n, b, _)| (*n, *b)).collect();
    assert_eq!(files(&seen), expected);

    // What an entry decodes to is held to its header: a wrong CRC-32, or a size over or
    // under what it decodes to, rejects the entry (and only it).
    type Lie = fn(&mut Vec<u8>, usize);
    let lies: [(&str, Lie); 3] = [
        ("CRC-32", |zip, central| zip[central + 16] ^= 1),
        ("bytes, its header says", |zip, central| {
            zip[central + 24] += 1
        }),
        ("decodes past", |zip, central| zip[central + 24] -= 1),
    ];
    for (said, lie) in lies {
        for method in [12, 14, 93, 95, 98] {
            let mut zip = zip_in_methods(&[("x", A, method), ("ok", B, method)]);
            let central = find(&zip, b"PK\x01\x02");
            lie(&mut zip, central);
            let seen = expand_all(&zip, "m.zip", Options::default()).unwrap();
            // (Zip's LZMA is decoded to the size its header says: a stream ending before
            // that fails in the decoder, one going on after it fails its CRC-32.)
            let as_said = |why: &str| why.contains(said) || (method == 14 && said != "CRC-32");
            // (A PPMd stream ends at its end mark, wherever the header says it ends.)
            assert!(
                matches!(&seen[0], Seen::Rejected(name, why) if name == "x" && why.contains("unreadable entry") && as_said(why)),
                "{method} {said}: {seen:?}"
            );
            assert_eq!(files(&seen), [("ok", B)], "{method} {said}");
        }
    }

    // A PPMd header restoring its model by a method that does not exist: the entry is
    // rejected, saying so.
    let mut zip = zip_in_methods(&[("x", A, 98), ("ok", B, 98)]);
    let data = find(&zip, b"PK\x03\x04") + 30 + 1;
    zip[data + 1] |= 0x30;
    let seen = expand_all(&zip, "m.zip", Options::default()).unwrap();
    assert!(
        matches!(&seen[0], Seen::Rejected(_, why) if why.contains("restores its model by method 3")),
        "{seen:?}"
    );
    assert_eq!(files(&seen), [("ok", B)]);

    // A dictionary over what a decoder may take is refused before anything is allocated
    // (one larger than the entry is never filled: the entry's size, within the limits here,
    // is what counts).
    let mut zip = zip_in_methods(&[("x", A, 14)]);
    let data = find(&zip, b"PK\x03\x04") + 30 + 1;
    zip[data + 5..data + 9].copy_from_slice(&u32::MAX.to_le_bytes());
    let central = find(&zip, b"PK\x01\x02");
    zip[central + 24..central + 28].copy_from_slice(&(1u32 << 30).to_le_bytes());
    let unlimited = Options {
        limits: Limits {
            max_ratio: 1 << 40,
            ..Limits::default()
        },
        ..Options::default()
    };
    let seen = expand_all(&zip, "m.zip", unlimited).unwrap();
    assert!(
        matches!(&seen[..], [Seen::Rejected(_, why)] if why.contains("dictionary")),
        "{seen:?}"
    );
}

#[test]
fn tarballs_in_every_compression_are_expanded_entry_by_entry() {
    let tar = tar_of(&[("src/a.c", A), ("lib/b.debug", B)]);
    for (name, bytes) in [
        ("t.tar", tar.clone()),
        ("t.tar.gz", gzip(&tar)),
        ("t.tar.zst", zstd(&tar)),
        ("t.tar.xz", xz(&tar)),
        ("t.tar.lz", lzip(&tar)),
        ("t.tar.bz2", bzip2(&tar)),
    ] {
        let seen = expand_all(&bytes, name, Options::default()).unwrap();
        assert_eq!(files(&seen), [("src/a.c", A), ("lib/b.debug", B)], "{name}");
    }
}

/// An lzip stream: members concatenated (plzip) are one file; the decoder's memory is what
/// the first member's header says, and a later member asking for more is the stream's
/// error; a stream cut short or with a bad CRC is one too.
#[test]
fn lzip_streams_are_decoded_within_their_first_members_memory() {
    let mut two = lzip(A);
    two.extend(lzip(B));
    let seen = expand_all(&two, "ab.lz", Options::default()).unwrap();
    assert_eq!(files(&seen), [("ab", [A, B].concat().as_slice())]);

    // The dictionary sizes lzip codes (`-0`: 64 KiB; `-9`: 32 MiB; 512 MiB, the most), read
    // from the first header, the floor and the ceiling applied.
    let memory = |coded: u8| compressed::lzip_memory_of(&[b'L', b'Z', b'I', b'P', 1, coded]);
    let floor = crate::archive::memory::window_memory(8 << 20);
    assert_eq!(memory(0x10), floor);
    assert_eq!(memory(25), crate::archive::memory::window_memory(32 << 20));
    // 3 MiB: 4 MiB less 4 sixteenths.
    assert_eq!(memory(0x80 | 22), floor);
    assert_eq!(
        memory(0x20 | 25),
        crate::archive::memory::window_memory((32 << 20) - (2 << 20))
    );
    assert_eq!(memory(29), u64::from(compressed::XZ_MEM_LIMIT_KIB) << 10);

    // A second member whose header asks for 32 MiB, after one of 64 KiB (decoded within the
    // 8 MiB floor): refused.
    let first = vec![7u8; 4096];
    let mut grown = lzip(&first);
    let second = lzip(B);
    let at = grown.len();
    grown.extend(&second);
    grown[at + 5] = 25;
    let seen = expand_all(&grown, "grown.lz", Options::default()).unwrap();
    assert!(
        matches!(&seen[..], [Seen::Rejected(name, why)] if name == "grown" && why.contains("memory")),
        "{seen:?}"
    );

    let one = lzip(&first);
    let mut bad_crc = one.clone();
    let crc_at = bad_crc.len() - 20;
    bad_crc[crc_at] ^= 1;
    for (name, bytes) in [("cut.lz", &one[..one.len() - 7]), ("crc.lz", &bad_crc[..])] {
        let seen = expand_all(bytes, name, Options::default()).unwrap();
        assert!(
            matches!(&seen[..], [Seen::Rejected(_, why)] if why.contains("unreadable entry")),
            "{name}: {seen:?}"
        );
    }
}

#[test]
fn a_single_compressed_file_is_one_entry_named_after_it() {
    for (name, bytes, entry) in [
        ("foo.debug.gz", gzip(B), "foo.debug"),
        ("foo.sym.zst", zstd(B), "foo.sym"),
        ("Foo.DBG.XZ", xz(B), "Foo.DBG"),
        ("foo.bz2", bzip2(B), "foo"),
        ("foo.debug.lz", lzip(B), "foo.debug"),
        ("noext", gzip(B), "noext"),
    ] {
        let seen = expand_all(&bytes, name, Options::default()).unwrap();
        assert_eq!(files(&seen), [(entry, B)], "{name}");
    }
    // Concatenated streams (pigz, zstd -T, pbzip2) are one file.
    let mut two = zstd(A);
    two.extend(zstd(B));
    let seen = expand_all(&two, "ab.zst", Options::default()).unwrap();
    assert_eq!(files(&seen), [("ab", [A, B].concat().as_slice())]);
}

#[test]
fn cabinets_are_expanded() {
    let bytes = cab_of(&[("foo.pdb", B)], ::cab::CompressionType::MsZip);
    let seen = expand_all(&bytes, "foo.pd_", Options::default()).unwrap();
    assert_eq!(files(&seen), [("foo.pdb", B)]);
}

/// A cabinet whose file claims to start past its folder's data, and one whose uncompressed
/// block is shorter than it says: the `cab` crate panics on both (index out of bounds); the
/// entry is rejected, the next one indexed.
#[test]
fn a_cabinet_lying_about_its_offsets_has_its_entry_rejected() {
    let bytes = cab_of(
        &[("lies.pdb", A), ("good.pdb", B)],
        ::cab::CompressionType::None,
    );
    // CFHEADER (36 bytes), one CFFOLDER (8), then the first CFFILE: its size (4 bytes), its
    // offset in the folder's uncompressed data (4).
    let offset_of_first = 36 + 8 + 4;
    assert_eq!(&bytes[offset_of_first..offset_of_first + 4], &[0, 0, 0, 0]);
    let mut past_the_data = bytes.clone();
    past_the_data[offset_of_first..offset_of_first + 4].copy_from_slice(&1000u32.to_le_bytes());
    let seen = expand_all(&past_the_data, "lies.pd_", Options::default()).unwrap();
    assert!(
        matches!(&seen[0], Seen::Rejected(name, reason) if name == "lies.pdb" && reason.contains("do not hold")),
        "{seen:?}"
    );
    assert_eq!(files(&seen), [("good.pdb", B)]);

    // The data block (after the CFFILEs and its 8-byte CFDATA header) claims 100 more
    // uncompressed bytes than it holds, and the second file (its CFFILE after the first's 16
    // bytes and name) starts inside that claim, past the bytes.
    let block = bytes.len() - A.len() - B.len() - 8;
    let mut short_block = bytes;
    let claimed = u16::try_from(A.len() + B.len() + 100).unwrap();
    short_block[block + 6..block + 8].copy_from_slice(&claimed.to_le_bytes());
    short_block[block..block + 4].copy_from_slice(&[0; 4]); // no checksum to fail first
    let offset_of_second = offset_of_first + 16 + "lies.pdb\0".len();
    let start = u32::try_from(A.len() + B.len() + 50).unwrap();
    short_block[offset_of_second..offset_of_second + 4].copy_from_slice(&start.to_le_bytes());
    let seen = expand_all(&short_block, "short.pd_", Options::default()).unwrap();
    assert_eq!(files(&seen), [("lies.pdb", A)]);
    assert!(
        matches!(&seen[1], Seen::Rejected(name, reason) if name == "good.pdb" && reason.contains("do not hold")),
        "{seen:?}"
    );
}
