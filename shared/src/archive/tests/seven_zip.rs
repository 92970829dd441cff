//! 7z archives: solid and per-file blocks, limits, malformed ones.

use super::{
    expand_all, files, find, sevenz_header, sevenz_in, sevenz_of, sevenz_with_header, zip_of, Seen,
    A, B,
};
use crate::archive::{ExpandError, Limits, Options};
use crate::sniff::{detect, Container};

#[test]
fn sevenz_archives_are_expanded_solid_or_a_block_per_file() {
    let entries: [(&str, &[u8]); 4] = [
        ("syms/", b""),
        ("syms/a.debug", A),
        ("empty", b""),
        ("b", B),
    ];
    use ::sevenz_rust2::EncoderMethod;
    for (solid, method) in [
        (true, EncoderMethod::LZMA2),
        (false, EncoderMethod::LZMA2),
        // What `7zz -m0=PPMd` writes (text, sources).
        (true, EncoderMethod::PPMD),
    ] {
        let archive = sevenz_in(&entries, solid, method.into());
        assert_eq!(detect(&archive), Some(Container::SevenZip));
        let seen = expand_all(&archive, "symbols.7z", Options::default()).unwrap();
        let mut got = files(&seen);
        got.sort();
        assert_eq!(
            got,
            [("b", B), ("empty", &b""[..]), ("syms/a.debug", A)],
            "solid {solid}: {seen:?}"
        );
        assert_eq!(seen.len(), 3, "no record for the directory: {seen:?}");
    }
    // A 7z inside a zip (a CI artifact as it is downloaded) reaches its files.
    let inner = sevenz_of(&[("a.debug", A)], true);
    let outer = zip_of(&[("symbols.7z", &inner, ::zip::CompressionMethod::Stored)]);
    let seen = expand_all(&outer, "artifact.zip", Options::default()).unwrap();
    assert_eq!(files(&seen), [("symbols.7z!/a.debug", A)]);
}

/// In a 7z block, a file is reached only by decoding every file before it: an entry over the
/// limits is decoded through where the archive's budget allows (the next entries indexed),
/// else the rest of its block is rejected, each entry with a reason.
#[test]
fn a_7z_entry_over_the_limits_is_decoded_through_or_ends_its_block() {
    let big = vec![0u8; 1 << 20];
    let entries: [(&str, &[u8]); 3] = [("a", A), ("big", &big), ("b", B)];
    let limits = |max_entry_size, max_expanded| Options {
        limits: Limits {
            max_entry_size,
            max_expanded,
            max_ratio: 1_000_000,
            ..Limits::default()
        },
        ..Options::default()
    };
    let solid = sevenz_of(&entries, true);
    // Over the entry limit, within the archive's budget: decoded through.
    let seen = expand_all(&solid, "s.7z", limits(100 << 10, 64 << 20)).unwrap();
    assert_eq!(files(&seen), [("a", A), ("b", B)], "{seen:?}");
    assert!(
        matches!(&seen[1], Seen::Rejected(name, reason) if name == "big" && reason.contains("over the limits")),
        "{seen:?}"
    );
    // Past the archive's budget: the rest of the block is not decoded, and says so.
    let seen = expand_all(&solid, "s.7z", limits(100 << 10, 200 << 10)).unwrap();
    assert_eq!(files(&seen), [("a", A)], "{seen:?}");
    assert!(
        matches!(&seen[2], Seen::Rejected(name, reason) if name == "b" && reason.contains("follows `big`")),
        "{seen:?}"
    );
    assert_eq!(seen.len(), 3);
    // A block per file: the next block is decoded on its own.
    let apart = sevenz_of(&entries, false);
    let seen = expand_all(&apart, "s.7z", limits(100 << 10, 200 << 10)).unwrap();
    assert_eq!(files(&seen), [("a", A), ("b", B)], "{seen:?}");
}

#[test]
fn a_malformed_7z_says_why_and_an_undecodable_block_rejects_its_entries() {
    let archive = sevenz_of(&[("a", A), ("b", B)], true);
    // Cut short: its header is gone.
    let err = expand_all(&archive[..archive.len() - 10], "cut.7z", Options::default()).unwrap_err();
    assert!(
        matches!(&err, ExpandError::Malformed(reason) if reason.contains("bad 7z archive")),
        "{err}"
    );
    // Its header is stored plain: LZMA2's coder (flags 0x21: one id byte, properties; id 0x21).
    let coder = |h: &[u8]| find(h, &[0x21, 0x21]);
    assert!(coder(&archive[sevenz_header(&archive)]) > 0);
    // Both entries of `edited` rejected, each reason saying `says`.
    let both_rejected = |edited: &[u8], name: &str, says: &str| {
        let seen = expand_all(edited, name, Options::default()).unwrap();
        assert_eq!(seen.len(), 2, "{seen:?}");
        for s in &seen {
            assert!(
                matches!(s, Seen::Rejected(_, reason) if reason.contains(says)),
                "{seen:?}"
            );
        }
    };
    // A method symdex does not decode (zstd's id): each entry rejected, saying so.
    let zstd = sevenz_with_header(&archive, |h| {
        let at = coder(h);
        h.splice(at..at + 2, [0x24, 0x04, 0xf7, 0x11, 0x01]);
    });
    both_rejected(&zstd, "zstd.7z", "not decoded: compressed with ZSTD");
    // An encrypted block (AES's id): its entries rejected as encrypted.
    let aes = sevenz_with_header(&archive, |h| {
        let at = coder(h);
        h.splice(at..at + 2, [0x24, 0x06, 0xf1, 0x07, 0x01]);
    });
    both_rejected(&aes, "aes.7z", "encrypted");
    // The dictionary a block's LZMA2 property claims: 128 MiB (what `7zz -mx9` gives a large
    // file) is decoded, 384 MiB is over the memory limit and says so.
    let with_dictionary = |property: u8| {
        sevenz_with_header(&archive, |h| {
            let at = coder(h);
            assert_eq!(h[at + 2], 1, "one property byte");
            h[at + 3] = property;
        })
    };
    let seen = expand_all(&with_dictionary(30), "128m.7z", Options::default()).unwrap();
    assert_eq!(files(&seen), [("a", A), ("b", B)], "{seen:?}");
    both_rejected(&with_dictionary(33), "384m.7z", "KiB of memory, over the");
    // Data that does not decode: the first entry rejected as unreadable, the rest as not
    // decoded.
    let mut corrupt = sevenz_of(&[("a", &vec![5u8; 50_000]), ("b", B)], true);
    for byte in &mut corrupt[40..60] {
        *byte ^= 0x5a;
    }
    let seen = expand_all(&corrupt, "corrupt.7z", Options::default()).unwrap();
    assert!(files(&seen).is_empty(), "{seen:?}");
    assert_eq!(seen.len(), 2, "{seen:?}");
}
