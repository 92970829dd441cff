//! Hostile archives: valid archives of every container with random bytes overwritten or cut
//! short are expanded within their limits or refused as malformed — never a panic, never a
//! retryable error (a hostile archive would be redelivered until the queue gives up), never
//! more bytes than the limits allow, never a stored range outside the archive.

use std::sync::OnceLock;

use proptest::prelude::*;

use super::tests::{
    ar_of, bzip2, cab_of, cpio_of, deb_of, expand_seen_as, find, gzip, lzip, rpm_of, sevenz_header,
    sevenz_in, sevenz_of, sevenz_with_header, tar_of, xz, zip_in_methods, zip_of, zstd, Seen,
    REGULAR,
};
use crate::archive::{DecoderMemory, ExpandError, Limits, Options};
use crate::formats::robustness::{corrupted, edit, write_word, LIES};
use crate::sniff::Container;
use crate::testing::allocations::measure;

/// Limits small enough that the seeds reach them: a mutation that makes a length lie is
/// caught by them, not by the machine's memory.
const LIMITS: Limits = Limits {
    max_entry_size: 48 << 10,
    max_expanded: 160 << 10,
    max_ratio: 40,
    max_entries: 6,
};

/// Valid archives of every container, holding entries small and large (compressible past the
/// limits' ratio), a nested archive, and an entry over the size limit.
fn seeds() -> &'static [(Container, &'static str, Vec<u8>)] {
    static SEEDS: OnceLock<Vec<(Container, &'static str, Vec<u8>)>> = OnceLock::new();
    SEEDS.get_or_init(|| {
        use ::zip::CompressionMethod::{Deflated, Stored};
        let small = b"a small entry\n".to_vec();
        let text: Vec<u8> = (0..8_000u32)
            .flat_map(|i| format!("{i} ").into_bytes())
            .collect();
        let zeros = vec![0u8; 100 << 10];
        let entries: [(&str, &[u8]); 3] = [("a.debug", &small), ("b.txt", &text), ("z", &zeros)];
        let tar = tar_of(&entries);
        let cpio_entries: Vec<(&str, u32, &[u8])> = entries
            .iter()
            .map(|(name, data)| (*name, REGULAR, *data))
            .collect();
        let cpio = cpio_of(&cpio_entries);
        let nested = gzip(&tar_of(&entries[..2]));
        vec![
            (
                Container::Zip,
                "a.zip",
                zip_of(&[
                    ("a.debug", &small, Deflated),
                    ("b.txt", &text, Stored),
                    ("inner.tar.gz", &nested, Stored),
                    ("z", &zeros, Deflated),
                ]),
            ),
            (Container::Tar, "a.tar", tar.clone()),
            (
                Container::Zip,
                "b.zip",
                as_deflate64(zip_of(&[
                    ("a.debug", &small, Deflated),
                    ("b.txt", &text, Deflated),
                ])),
            ),
            (Container::Gzip, "a.tar.gz", gzip(&tar)),
            (Container::Zstd, "a.tar.zst", zstd(&tar)),
            (Container::Xz, "a.tar.xz", xz(&tar)),
            (Container::Bzip2, "a.tar.bz2", bzip2(&tar)),
            (Container::Lzip, "a.tar.lz", lzip(&tar)),
            (Container::Gzip, "b.txt.gz", gzip(&text)),
            (Container::Xz, "b.txt.xz", xz(&text)),
            (
                Container::Cab,
                "a.pd_",
                cab_of(&entries[..2], ::cab::CompressionType::MsZip),
            ),
            (
                Container::Cab,
                "b.pd_",
                cab_of(&entries[..2], ::cab::CompressionType::None),
            ),
            (Container::Rpm, "a.rpm", rpm_of(&gzip(&cpio), 0, 0)),
            (Container::Rpm, "b.rpm", rpm_of(&cpio, 1, 7)),
            (Container::Gzip, "a.cpio.gz", gzip(&cpio)),
            (Container::SevenZip, "a.7z", sevenz_of(&entries, true)),
            (
                Container::SevenZip,
                "b.7z",
                sevenz_of(
                    &[
                        ("a.debug", &small),
                        ("d/", b""),
                        ("inner.tar.gz", &nested),
                        ("z", &zeros),
                        ("b.txt", &text),
                    ],
                    false,
                ),
            ),
            (Container::Deb, "a.deb", deb_of("data.tar.xz", &xz(&tar))),
            (
                Container::Deb,
                "b.deb",
                ar_of(&[
                    ("debian-binary", b"2.0\n"),
                    ("data.tar", &tar_of(&entries[..2])),
                    ("_gpgbuilder", &small[..13]),
                    ("z", &zeros),
                ]),
            ),
            // Zip entries in the methods symdex decodes itself (zip.rs).
            (
                Container::Zip,
                "c.zip",
                zip_in_methods(&[
                    ("a.debug", &small, 12),
                    ("b.txt", &text, 14),
                    ("c.txt", &text[..9_000], 93),
                    ("z", &zeros, 95),
                    ("d.txt", &text[..7_000], 98),
                ]),
            ),
            (
                Container::SevenZip,
                "c.7z",
                sevenz_in(
                    &[("a.debug", &small), ("b.txt", &text), ("z", &zeros)],
                    true,
                    // A small model: every decode of the seed allocates it.
                    ::sevenz_rust2::encoder_options::PpmdOptions::from_order_memory_size(
                        6,
                        1 << 20,
                    )
                    .into(),
                ),
            ),
        ]
    })
}

/// A zip whose Deflate entries are marked Deflate64 (method 9), in their local headers and
/// the central directory: a Deflate stream that never codes length 258 (which Deflate64
/// reads with 16 extra bits) decodes the same, so the seed reaches the Deflate64 decoder.
fn as_deflate64(mut zip: Vec<u8>) -> Vec<u8> {
    let mut marked = 0;
    let mut at = 0;
    while at + 12 <= zip.len() {
        let method = match &zip[at..at + 4] {
            b"PK\x03\x04" => at + 8,
            b"PK\x01\x02" => at + 10,
            _ => {
                at += 1;
                continue;
            }
        };
        if zip[method..method + 2] == [8, 0] {
            zip[method] = 9;
            marked += 1;
        }
        at += 4;
    }
    assert!(
        marked >= 2,
        "an entry's local header and its directory entry"
    );
    zip
}

/// The most memory a walk may hold at once, whatever the archive claims: what it holds by
/// design — one entry in memory ([`IN_MEMORY`](super::IN_MEMORY); larger ones go to a
/// scratch file), and the largest of the decoders' claims it accepts (an xz or 7z dictionary
/// within its memory limit, a zstd window) — and headroom. (The seeds hold about 3 MB.) A size an
/// archive claims that is taken without a limit comes above it.
const MOST_HELD: usize = {
    let xz = super::compressed::XZ_MEM_LIMIT_KIB as u64 * 1024;
    let zstd = super::compressed::ZSTD_MAX_WINDOW;
    let sevenz = super::sevenz::MEM_LIMIT_KIB as u64 * 1024;
    let decoder = if xz > zstd { xz } else { zstd };
    let decoder = if sevenz > decoder { sevenz } else { decoder };
    (super::IN_MEMORY + decoder) as usize + (16 << 20)
};

/// What one entry came to.
enum Outcome {
    /// Expanded (its size) or reported as a range of the archive.
    Bytes(u64),
    Stored {
        offset: u64,
        size: u64,
    },
    Other,
}

/// Expands `bytes` as `container` (whatever its magic says now) within [`LIMITS`]: the
/// entries' outcomes and how the walk ended. (`expand_seen_as` checks that each expanded
/// entry's size and hash are its bytes', and that no scratch file is left.)
fn expand_hostile(
    bytes: &[u8],
    container: Container,
    name: &str,
    stored_ranges: bool,
) -> (Vec<Outcome>, Result<(), ExpandError>) {
    // Every decoder's reservation is given back, however the walk ends.
    let memory: &'static DecoderMemory = Box::leak(Box::new(DecoderMemory::new(1 << 40)));
    let options = Options {
        limits: LIMITS,
        stored_ranges,
        memory: Some(memory),
    };
    let ((seen, result), held) = measure(|| expand_seen_as(bytes, container, name, options));
    assert_eq!(memory.reserved(), 0, "{name}: decoder memory left reserved");
    assert!(
        held <= MOST_HELD,
        "{held} bytes held expanding {} bytes as {name}",
        bytes.len()
    );
    let outcomes = seen
        .into_iter()
        .map(|seen| match seen {
            Seen::File(_, bytes) => Outcome::Bytes(bytes.len() as u64),
            Seen::Stored(_, offset, size) => Outcome::Stored { offset, size },
            Seen::Skipped(..) | Seen::Rejected(..) => Outcome::Other,
        })
        .collect();
    (outcomes, result)
}

/// The promises a walk over any bytes keeps.
fn assert_within_limits(archive: &[u8], seen: &[Outcome], result: &Result<(), ExpandError>) {
    assert!(
        !matches!(result, Err(ExpandError::Io(_))),
        "a hostile archive read from memory is malformed, not worth a retry: {result:?}"
    );
    let mut total = 0u64;
    let mut indexed = 0u64;
    for outcome in seen {
        let size = match *outcome {
            Outcome::Bytes(size) => size,
            Outcome::Stored { offset, size } => {
                assert!(
                    offset
                        .checked_add(size)
                        .is_some_and(|end| end <= archive.len() as u64),
                    "a stored range {offset}+{size} outside an archive of {}",
                    archive.len()
                );
                size
            }
            Outcome::Other => continue,
        };
        assert!(size <= LIMITS.max_entry_size, "an entry of {size} bytes");
        total += size;
        indexed += 1;
    }
    let budget = LIMITS
        .max_expanded
        .min((archive.len() as u64).max(1) * LIMITS.max_ratio);
    assert!(
        total <= budget,
        "{total} bytes expanded from {} (budget {budget})",
        archive.len()
    );
    // A nested archive's entries count in the outer archive's walk too.
    assert!(indexed <= LIMITS.max_entries, "{indexed} entries");
}

#[test]
fn the_seeds_expand_and_reach_the_limits() {
    for (container, name, bytes) in seeds() {
        let (seen, result) = expand_hostile(bytes, *container, name, true);
        assert!(result.is_ok(), "{name}: {result:?}");
        assert!(
            seen.iter()
                .any(|o| matches!(o, Outcome::Bytes(_) | Outcome::Stored { .. })),
            "{name}: nothing indexed"
        );
        assert_within_limits(bytes, &seen, &result);
    }
    // In the tar, the small entry and the text (about 39 KB) are expanded; the zeros (100 KiB)
    // are over the entry limit.
    let (seen, _) = expand_hostile(&seeds()[1].2, Container::Tar, "a.tar", false);
    // The Deflate64 zip's entries decode as they were written.
    let (seen64, result) = expand_hostile(&seeds()[2].2, Container::Zip, "b.zip", false);
    assert!(result.is_ok(), "{result:?}");
    assert!(
        matches!(seen64[..], [Outcome::Bytes(14), Outcome::Bytes(38_890)]),
        "{} outcomes",
        seen64.len()
    );
    assert!(
        matches!(
            seen[..],
            [Outcome::Bytes(14), Outcome::Bytes(38_890), Outcome::Other]
        ),
        "{} outcomes",
        seen.len()
    );
    // So do the bzip2, LZMA, zstd and PPMd entries; the xz one (the zeros) is over the limits.
    let (_, name, bytes) = seeds().iter().find(|s| s.1 == "c.zip").unwrap();
    let (seen, result) = expand_hostile(bytes, Container::Zip, name, false);
    assert!(result.is_ok(), "{result:?}");
    assert!(
        matches!(
            seen[..],
            [
                Outcome::Bytes(14),
                Outcome::Bytes(38_890),
                Outcome::Bytes(9_000),
                Outcome::Other,
                Outcome::Bytes(7_000)
            ]
        ),
        "{} outcomes",
        seen.len()
    );
}

/// Every word of every seed's first and last 128 bytes (headers, a zip's central directory,
/// a stream's trailer) in turn telling each lie of the format tests' list: expanded within
/// the limits and [`MOST_HELD`], without a panic.
#[test]
fn every_header_word_lying_stays_within_the_limits() {
    for (container, name, bytes) in seeds() {
        let near = bytes.len().min(128);
        for at in (0..near).chain(bytes.len() - near..bytes.len()) {
            for lie in LIES {
                let mut data = bytes.clone();
                write_word(&mut data, at, lie);
                let (seen, result) = expand_hostile(&data, *container, name, at % 2 == 0);
                assert_within_limits(&data, &seen, &result);
            }
        }
    }
}

/// A Debian package's sizes are decimal text, which the binary lies above seldom make: every
/// member's size field telling each decimal lie (none, short, long, past any file) in turn.
#[test]
fn every_debian_member_size_lying_stays_within_the_limits() {
    for (container, name, bytes) in seeds().iter().filter(|s| s.0 == Container::Deb) {
        let mut at = crate::sniff::AR_MAGIC.len();
        while at + 60 <= bytes.len() {
            let field = at + 48..at + 58;
            let size: usize = std::str::from_utf8(&bytes[field.clone()])
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            for lie in [0, 1, size.saturating_sub(1), size + 1, 9_999_999_999] {
                let mut data = bytes.clone();
                data[field.clone()].copy_from_slice(format!("{lie:<10}").as_bytes());
                let (seen, result) = expand_hostile(&data, *container, name, false);
                assert_within_limits(&data, &seen, &result);
            }
            at += 60 + size + size % 2;
        }
    }
}

/// A cpio member's sizes are hex text: every member's file size and name size telling each
/// lie in turn (none, short, long, past any file, the most eight digits say).
#[test]
fn every_cpio_size_lying_stays_within_the_limits() {
    let (_, name, bytes) = seeds().iter().find(|s| s.1 == "b.rpm").unwrap();
    let start = find(bytes, b"070701");
    let mut at = start;
    while at + 110 <= bytes.len() && &bytes[at..at + 6] == b"070701" {
        let field = |n: usize| at + 6 + 8 * n..at + 14 + 8 * n;
        let value = |n: usize| {
            u64::from_str_radix(std::str::from_utf8(&bytes[field(n)]).unwrap(), 16).unwrap()
        };
        let (size, name_size) = (value(6), value(11));
        for n in [6, 11] {
            let was = value(n);
            for lie in [0, 1, was.saturating_sub(1), was + 1, 0xFFFF_FFFF] {
                let mut data = bytes.clone();
                data[field(n)].copy_from_slice(format!("{lie:08X}").as_bytes());
                let (seen, result) = expand_hostile(&data, Container::Rpm, name, false);
                assert_within_limits(&data, &seen, &result);
            }
        }
        let name_end = (at as u64 + 110 + name_size).next_multiple_of(4);
        at = (name_end + size).next_multiple_of(4) as usize;
    }
    assert!(at > start + 110, "the walk went over the members");
}

/// A 7z archive's header is checksummed, so the lies above stop at its checksum: here every
/// byte of each 7z seed's header tells each lie with the checksums made to fit — its
/// numbers (counts, sizes, offsets: variable-length, so a byte `0xff` says eight more
/// follow) reaching the parser and the decoders.
#[test]
fn every_7z_header_byte_lying_past_its_checksum_stays_within_the_limits() {
    for (container, name, bytes) in seeds().iter().filter(|s| s.0 == Container::SevenZip) {
        let header_len = sevenz_header(bytes).len();
        assert!(header_len > 20, "{name}: a header of {header_len} bytes");
        for at in 0..header_len {
            let lies = LIES.iter().map(|&lie| Lie::Word(lie));
            let bytes_lies = [0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff].map(Lie::Byte);
            for lie in lies.chain(bytes_lies) {
                let data = sevenz_with_header(bytes, |header| match lie {
                    Lie::Word(word) => write_word(header, at, word),
                    Lie::Byte(byte) => header[at] = byte,
                });
                let (seen, result) = expand_hostile(&data, *container, name, false);
                assert_within_limits(&data, &seen, &result);
            }
        }
    }
}

#[derive(Clone, Copy)]
enum Lie {
    Word(u32),
    Byte(u8),
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn corrupted_archives_stay_within_their_limits(
        seed in any::<prop::sample::Index>(),
        edits in prop::collection::vec(edit(), 1..10),
        cut in prop::option::of(any::<prop::sample::Index>()),
        stored_ranges in any::<bool>(),
    ) {
        let (container, name, bytes) = &seeds()[seed.index(seeds().len())];
        let data = corrupted(bytes.clone(), edits, cut);
        let (seen, result) = expand_hostile(&data, *container, name, stored_ranges);
        assert_within_limits(&data, &seen, &result);
    }

    /// A 7z seed whose header is edited at random past its checksum (the checksums made to
    /// fit): what the parser and the decoders make of any header.
    #[test]
    fn corrupted_7z_headers_past_their_checksum_stay_within_their_limits(
        seed in any::<prop::sample::Index>(),
        edits in prop::collection::vec(edit(), 1..6),
        cut in prop::option::of(any::<prop::sample::Index>()),
    ) {
        let sevenz: Vec<_> = seeds().iter().filter(|s| s.0 == Container::SevenZip).collect();
        let (container, name, bytes) = sevenz[seed.index(sevenz.len())];
        let data = sevenz_with_header(bytes, |header| {
            *header = corrupted(std::mem::take(header), edits, cut);
        });
        let (seen, result) = expand_hostile(&data, *container, name, false);
        assert_within_limits(&data, &seen, &result);
    }

    /// Bytes behind a container's magic number alone: every header field a lie.
    #[test]
    fn random_bytes_behind_any_container_magic_are_refused_or_bounded(
        seed in any::<prop::sample::Index>(),
        tail in prop::collection::vec(any::<u8>(), 0..2048),
    ) {
        let (container, name, bytes) = &seeds()[seed.index(seeds().len())];
        let mut data = bytes[..8.min(bytes.len())].to_vec();
        data.extend(tail);
        let (seen, result) = expand_hostile(&data, *container, name, true);
        assert_within_limits(&data, &seen, &result);
    }
}
