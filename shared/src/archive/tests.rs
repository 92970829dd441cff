//! Archives built in memory with the writers of the same crates (the integration tests use the
//! real tools: zip, tar, gzip, zstd, xz, bzip2, gcab).

use std::io::{self, Cursor, Write};

use super::*;
use crate::reader::MemReader;

/// What the visitor saw, in order: (kind, entry, content or reason).
#[derive(Debug, PartialEq)]
pub(super) enum Seen {
    File(String, Vec<u8>),
    Stored(String, u64, u64),
    Skipped(String, String),
    Rejected(String, String),
}

fn expand_all(bytes: &[u8], name: &str, options: Options) -> Result<Vec<Seen>, ExpandError> {
    let (seen, result) = expand_seen(bytes, name, options);
    result.map(|()| seen)
}

/// What the visitor saw, and how the walk ended.
fn expand_seen(bytes: &[u8], name: &str, options: Options) -> (Vec<Seen>, Result<(), ExpandError>) {
    let container = detect_reader(&MemReader(bytes))
        .unwrap()
        .expect("a container");
    expand_seen_as(bytes, container, name, options)
}

/// [`expand_seen`] as `container`, whatever the bytes' magic number says.
pub(super) fn expand_seen_as(
    bytes: &[u8],
    container: Container,
    name: &str,
    options: Options,
) -> (Vec<Seen>, Result<(), ExpandError>) {
    let scratch = tempfile::tempdir().unwrap();
    let reader = MemReader(bytes);
    let mut seen = Vec::new();
    let result = expand(
        &reader,
        container,
        name,
        &options,
        scratch.path(),
        &mut |event| {
            seen.push(match event {
                Event::File {
                    entry,
                    data,
                    size,
                    sha1,
                } => {
                    let bytes = match data {
                        Expanded::Bytes(bytes) => bytes,
                        Expanded::File(file) => std::fs::read(file)?,
                    };
                    assert_eq!(bytes.len() as u64, size);
                    assert_eq!(crate::storage::content_sha1(&bytes), sha1);
                    Seen::File(entry, bytes)
                }
                Event::Stored {
                    entry,
                    offset,
                    size,
                    ..
                } => Seen::Stored(entry, offset, size),
                Event::Skipped { entry, reason } => Seen::Skipped(entry, reason),
                Event::Rejected { entry, reason } => Seen::Rejected(entry, reason),
            });
            Ok(())
        },
    );
    // Every scratch file is gone once the walk is over.
    assert_eq!(std::fs::read_dir(scratch.path()).unwrap().count(), 0);
    (seen, result)
}

fn files(seen: &[Seen]) -> Vec<(&str, &[u8])> {
    seen.iter()
        .filter_map(|s| match s {
            Seen::File(name, bytes) => Some((name.as_str(), bytes.as_slice())),
            _ => None,
        })
        .collect()
}

pub(super) fn zip_of(entries: &[(&str, &[u8], ::zip::CompressionMethod)]) -> Vec<u8> {
    let mut zip = ::zip::ZipWriter::new(Cursor::new(Vec::new()));
    for (name, data, method) in entries {
        let options = ::zip::write::SimpleFileOptions::default().compression_method(*method);
        zip.start_file(*name, options).unwrap();
        zip.write_all(data).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

pub(super) fn tar_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut tar = ::tar::Builder::new(Vec::new());
    for (name, data) in entries {
        let mut header = ::tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(&mut header, name, *data).unwrap();
    }
    tar.into_inner().unwrap()
}

pub(super) fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

pub(super) fn zstd(bytes: &[u8]) -> Vec<u8> {
    ruzstd::encoding::compress_to_vec(bytes, ruzstd::encoding::CompressionLevel::Fastest)
}

pub(super) fn bzip2(bytes: &[u8]) -> Vec<u8> {
    let mut bz = ::bzip2::write::BzEncoder::new(Vec::new(), ::bzip2::Compression::default());
    bz.write_all(bytes).unwrap();
    bz.finish().unwrap()
}

/// `bytes` as lzip writes them at `-0` (a 64 KiB dictionary), in one member.
pub(super) fn lzip(bytes: &[u8]) -> Vec<u8> {
    use lzma_rust2::{LzipOptions, LzipWriter};
    let mut writer = LzipWriter::new(Vec::new(), LzipOptions::with_preset(0));
    writer.write_all(bytes).unwrap();
    writer.finish().unwrap()
}

pub(super) fn xz(bytes: &[u8]) -> Vec<u8> {
    let mut xz =
        lzma_rust2::XzWriter::new(Vec::new(), lzma_rust2::XzOptions::with_preset(1)).unwrap();
    xz.write_all(bytes).unwrap();
    xz.finish().unwrap()
}

/// A cabinet of one folder compressed as `compression` holding `entries`.
pub(super) fn cab_of(entries: &[(&str, &[u8])], compression: ::cab::CompressionType) -> Vec<u8> {
    let mut builder = ::cab::CabinetBuilder::new();
    let folder = builder.add_folder(compression);
    for (name, _) in entries {
        folder.add_file(*name);
    }
    let mut writer = builder.build(Cursor::new(Vec::new())).unwrap();
    let mut data = entries.iter();
    while let Some(mut file) = writer.next_file().unwrap() {
        file.write_all(data.next().unwrap().1).unwrap();
    }
    writer.finish().unwrap().into_inner()
}

/// An ar archive of `members`, as dpkg-deb writes one (names space padded, no slash; each
/// member padded to an even offset with a newline).
pub(super) fn ar_of(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut ar = b"!<arch>\n".to_vec();
    for (name, data) in members {
        let header = format!(
            "{name:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n",
            0,
            0,
            0,
            "100644",
            data.len()
        );
        assert_eq!(header.len(), 60);
        ar.extend_from_slice(header.as_bytes());
        ar.extend_from_slice(data);
        if data.len() % 2 == 1 {
            ar.push(b'\n');
        }
    }
    ar
}

/// A Debian package whose data tarball (`data.tar.xz` and the like: `data_name`) is `data`.
pub(super) fn deb_of(data_name: &str, data: &[u8]) -> Vec<u8> {
    let control = gzip(&tar_of(&[("./control", b"Package: p\n")]));
    ar_of(&[
        ("debian-binary", b"2.0\n"),
        ("control.tar.gz", &control),
        (data_name, data),
    ])
}

/// A cpio archive ("new ASCII" format) of `members`: (name, mode, bytes), each padded to 4, and
/// the trailer.
pub(super) fn cpio_of(members: &[(&str, u32, &[u8])]) -> Vec<u8> {
    let mut cpio = Vec::new();
    let trailer = [("TRAILER!!!", 0, &b""[..])];
    for (ino, (name, mode, data)) in members.iter().chain(&trailer).enumerate() {
        let fields = [
            ino as u32,
            *mode,
            0,
            0,
            1,
            0,
            data.len() as u32,
            0,
            0,
            0,
            0,
            name.len() as u32 + 1,
            0,
        ];
        cpio.extend_from_slice(b"070701");
        for field in fields {
            cpio.extend_from_slice(format!("{field:08X}").as_bytes());
        }
        cpio.extend_from_slice(name.as_bytes());
        cpio.push(0);
        cpio.resize(cpio.len().next_multiple_of(4), 0);
        cpio.extend_from_slice(data);
        cpio.resize(cpio.len().next_multiple_of(4), 0);
    }
    cpio
}

/// A regular file's mode in cpio members.
pub(super) const REGULAR: u32 = 0o100_644;

/// An RPM package whose payload is `payload` (a cpio archive, compressed or not): a lead, a
/// signature header and a header with `entries` index entries and `data` bytes each (their
/// contents do not matter to symdex), the signature padded to 8.
pub(super) fn rpm_of(payload: &[u8], entries: u32, data: u32) -> Vec<u8> {
    let mut rpm = vec![0u8; 96];
    rpm[..4].copy_from_slice(&[0xed, 0xab, 0xee, 0xdb]);
    for pad in [true, false] {
        rpm.extend_from_slice(&[0x8e, 0xad, 0xe8, 0x01, 0, 0, 0, 0]);
        rpm.extend_from_slice(&entries.to_be_bytes());
        rpm.extend_from_slice(&data.to_be_bytes());
        rpm.resize(rpm.len() + 16 * entries as usize + data as usize, 0x5a);
        if pad {
            rpm.resize(rpm.len().next_multiple_of(8), 0);
        }
    }
    rpm.extend_from_slice(payload);
    rpm
}

const A: &[u8] = b"first entry\n";
const B: &[u8] = b"second entry, a little longer\n";

#[test]
fn containers_are_detected_by_content() {
    assert_eq!(detect(&gzip(A)), Some(Container::Gzip));
    assert_eq!(detect(&zstd(A)), Some(Container::Zstd));
    assert_eq!(detect(&bzip2(A)), Some(Container::Bzip2));
    assert_eq!(detect(&xz(A)), Some(Container::Xz));
    assert_eq!(detect(&tar_of(&[("a", A)])), Some(Container::Tar));
    let zip = zip_of(&[("a", A, ::zip::CompressionMethod::Stored)]);
    assert_eq!(detect(&zip), Some(Container::Zip));
    assert_eq!(
        detect(&deb_of("data.tar", &tar_of(&[("a", A)]))),
        Some(Container::Deb)
    );
    // A static library is an ar archive too, of object files without build ids: not a
    // container symdex expands.
    let library = ar_of(&[("/", b"\0\0\0\0"), ("a.o/", A)]);
    assert_eq!(detect(&library), None);
    let cpio = cpio_of(&[("a", REGULAR, A)]);
    assert_eq!(detect(&cpio), Some(Container::Cpio));
    // Text that merely starts with the digits is not one (a digit short of a header's fields).
    let text = [&b"070701"[..], &[b'0'; 103], b" and then prose"].concat();
    assert_eq!(detect(&text), None);
    let fields = [&b"070701"[..], &[b'0'; 104], b" and then prose"].concat();
    assert_eq!(detect(&fields), Some(Container::Cpio));
    assert_eq!(detect(&rpm_of(&gzip(&cpio), 3, 5)), Some(Container::Rpm));
    assert_eq!(detect(b"\x7fELF\x02\x01\x01"), None);
    assert_eq!(detect(b"BZh"), None);
    assert_eq!(detect(b""), None);
}

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

/// Zip's LZMA data of `bytes`: the 4-byte header (version 9.20, 5 bytes of properties), the
/// properties, raw LZMA ended by an end marker (as Python's `zipfile` writes it).
pub(super) fn zip_lzma(bytes: &[u8]) -> Vec<u8> {
    use lzma_rust2::{LzmaOptions, LzmaWriter};
    let options = LzmaOptions::with_preset(1);
    let mut out = vec![9, 20, 5, 0];
    out.push(options.get_props());
    out.extend_from_slice(&options.dict_size.to_le_bytes());
    let mut writer = LzmaWriter::new_no_header(out, &options, true).unwrap();
    writer.write_all(bytes).unwrap();
    writer.finish().unwrap()
}

/// Zip's PPMd data of `bytes`: the 2-byte header (order 6, 1 MiB, restart), PPMd var. I
/// data ended by its end mark (as 7-Zip writes it).
pub(super) fn zip_ppmd(bytes: &[u8]) -> Vec<u8> {
    use ppmd_rust::{Ppmd8Encoder, RestoreMethod};
    let (order, mib) = (6u16, 1u16);
    let header = (order - 1) | ((mib - 1) << 4);
    let mut encoder = Ppmd8Encoder::new(
        header.to_le_bytes().to_vec(),
        u32::from(order),
        u32::from(mib) << 20,
        RestoreMethod::Restart,
    )
    .unwrap();
    encoder.write_all(bytes).unwrap();
    encoder.finish(true).unwrap()
}

/// A zip whose entries are compressed with zip's `method` ids the zip crate does not write
/// (bzip2 12, LZMA 14, zstd 93, xz 95, PPMd 98): each written stored, holding its compressed data,
/// then its method, CRC-32 and size set in its local header and directory entry.
pub(super) fn zip_in_methods(entries: &[(&str, &[u8], u16)]) -> Vec<u8> {
    let compressed: Vec<Vec<u8>> = entries
        .iter()
        .map(|(_, bytes, method)| match method {
            12 => bzip2(bytes),
            14 => zip_lzma(bytes),
            93 => zstd(bytes),
            95 => xz(bytes),
            98 => zip_ppmd(bytes),
            other => panic!("method {other}"),
        })
        .collect();
    let stored: Vec<(&str, &[u8], ::zip::CompressionMethod)> = entries
        .iter()
        .zip(&compressed)
        .map(|((name, _, _), data)| (*name, data.as_slice(), ::zip::CompressionMethod::Stored))
        .collect();
    let mut zip = zip_of(&stored);
    let u16_at = |zip: &[u8], at: usize| usize::from(u16::from_le_bytes([zip[at], zip[at + 1]]));
    let set =
        |zip: &mut Vec<u8>, at: usize, (_, bytes, method): &(&str, &[u8], u16), field: usize| {
            // method at +8 (local) / +10 (central); CRC-32 and the uncompressed size follow.
            zip[at + field..at + field + 2].copy_from_slice(&method.to_le_bytes());
            let crc = crc32fast::hash(bytes).to_le_bytes();
            zip[at + field + 6..at + field + 10].copy_from_slice(&crc);
            let size = (bytes.len() as u32).to_le_bytes();
            zip[at + field + 14..at + field + 18].copy_from_slice(&size);
        };
    let mut at = 0;
    for (entry, data) in entries.iter().zip(&compressed) {
        assert_eq!(&zip[at..at + 4], b"PK\x03\x04");
        set(&mut zip, at, entry, 8);
        at += 30 + u16_at(&zip, at + 26) + u16_at(&zip, at + 28) + data.len();
    }
    for entry in entries {
        assert_eq!(&zip[at..at + 4], b"PK\x01\x02");
        set(&mut zip, at, entry, 10);
        at += 46 + u16_at(&zip, at + 28) + u16_at(&zip, at + 30) + u16_at(&zip, at + 32);
    }
    assert_eq!(&zip[at..at + 4], b"PK\x05\x06");
    zip
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

/// Where `needle` first is in `haystack`.
pub(super) fn find(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("found")
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

#[test]
fn archives_nest_one_level_deep() {
    use ::zip::CompressionMethod::Deflated;
    let inner = gzip(&tar_of(&[("a.debug", A)]));
    let innermost = zip_of(&[("deep.txt", B, Deflated)]);
    let middle = zip_of(&[("deep.zip", &innermost, Deflated)]);
    let outer = zip_of(&[
        ("syms/inner.tar.gz", &inner, Deflated),
        ("middle.zip", &middle, Deflated),
    ]);
    let seen = expand_all(&outer, "outer.zip", Options::default()).unwrap();
    assert_eq!(
        files(&seen),
        [
            ("syms/inner.tar.gz!/a.debug", A),
            ("middle.zip!/deep.zip", innermost.as_slice())
        ]
    );
}

#[test]
fn bombs_are_stopped_by_the_limits() {
    let zeros = vec![0u8; 8 << 20];
    let limits = Limits {
        max_ratio: 100,
        ..Limits::default()
    };
    let options = Options {
        limits,
        ..Options::default()
    };
    // A gzip bomb: no entry larger than 100x the archive is written.
    let seen = expand_all(&gzip(&zeros), "zeros.gz", options).unwrap();
    assert!(
        matches!(&seen[..], [Seen::Rejected(name, reason)] if name == "zeros" && reason.contains("expands past")),
        "{seen:?}"
    );
    // A zip bomb is refused on its own claims, before a byte is expanded.
    let bomb = zip_of(&[("z", &zeros, ::zip::CompressionMethod::Deflated)]);
    let seen = expand_all(&bomb, "z.zip", options).unwrap();
    assert!(
        matches!(&seen[..], [Seen::Rejected(_, reason)] if reason.contains("over the limits")),
        "{seen:?}"
    );
    // A tar.gz whose stream is a bomb: the big entry is rejected, and the stream stops at
    // the archive's budget (decoding the skipped bytes costs time too).
    let tar = tar_of(&[("a", A), ("zeros", &zeros), ("b", B)]);
    let (seen, result) = expand_seen(&gzip(&tar), "t.tar.gz", options);
    assert_eq!(files(&seen), [("a", A)]);
    assert!(
        matches!(&seen[1], Seen::Rejected(name, _) if name == "zeros"),
        "{seen:?}"
    );
    assert!(
        matches!(result, Err(ExpandError::Malformed(reason)) if reason.contains("expands past"))
    );

    // The number of entries.
    let many: Vec<(String, &[u8])> = (0..10).map(|i| (format!("e{i}"), A)).collect();
    let many: Vec<(&str, &[u8])> = many.iter().map(|(n, d)| (n.as_str(), *d)).collect();
    let options = Options {
        limits: Limits {
            max_entries: 3,
            ..Limits::default()
        },
        ..Options::default()
    };
    let seen = expand_all(&tar_of(&many), "many.tar", options).unwrap();
    assert_eq!(files(&seen).len(), 3);
    assert!(
        matches!(&seen[3], Seen::Rejected(name, reason) if name == "e3" && reason.contains("more than 3 entries"))
    );
    assert_eq!(seen.len(), 4);
}

#[test]
fn a_huge_tar_extension_header_is_refused_before_it_is_read() {
    // A GNU long-name header declaring 1 GiB of name.
    let mut header = ::tar::Header::new_gnu();
    header.set_entry_type(::tar::EntryType::GNULongName);
    header.set_size(1 << 30);
    header.as_gnu_mut().unwrap().name[..13].copy_from_slice(b"././@LongLink");
    header.set_cksum();
    let mut bytes = header.as_bytes().to_vec();
    bytes.extend(vec![b'a'; 4 << 20]);
    let mut ustar = tar_of(&[("x", A)]);
    ustar.truncate(512);
    let err = expand_all(&gzip(&bytes), "long.tar.gz", Options::default()).unwrap_err();
    assert!(
        matches!(&err, ExpandError::Malformed(reason) if reason.contains("extension header")),
        "{err}"
    );
}

#[test]
fn malformed_archives_say_so_and_corrupt_entries_are_rejected() {
    use ::zip::CompressionMethod::Deflated;
    let zip = zip_of(&[("a", A, Deflated)]);
    let err = expand_all(&zip[..zip.len() - 10], "cut.zip", Options::default()).unwrap_err();
    assert!(matches!(err, ExpandError::Malformed(_)), "{err}");

    // A gzip stream cut in the middle: the one entry is unreadable.
    let gz = gzip(&vec![7u8; 100_000]);
    let seen = expand_all(&gz[..gz.len() / 2], "cut.gz", Options::default()).unwrap();
    assert!(
        matches!(&seen[..], [Seen::Rejected(name, reason)] if name == "cut" && reason.contains("unreadable")),
        "{seen:?}"
    );

    // A corrupt deflate stream inside a zip: that entry is rejected, the next one indexed.
    let data = vec![9u8; 50_000];
    let mut zip = zip_of(&[("bad", &data, Deflated), ("good", B, Deflated)]);
    zip[60] ^= 0xff;
    zip[70] ^= 0xff;
    let seen = expand_all(&zip, "x.zip", Options::default()).unwrap();
    assert!(
        matches!(&seen[0], Seen::Rejected(name, _) if name == "bad"),
        "{seen:?}"
    );
    assert_eq!(files(&seen), [("good", B)]);
}

#[test]
fn a_visitor_error_stops_the_walk() {
    let tar = tar_of(&[("a", A), ("b", B)]);
    let scratch = tempfile::tempdir().unwrap();
    let reader = MemReader(tar);
    let mut calls = 0;
    let err = expand(
        &reader,
        Container::Tar,
        "t.tar",
        &Options::default(),
        scratch.path(),
        &mut |_| {
            calls += 1;
            Err(io::Error::other("publishing failed"))
        },
    )
    .unwrap_err();
    assert!(matches!(err, ExpandError::Io(_)));
    assert_eq!(calls, 1);
}

#[test]
fn names_of_single_compressed_files() {
    assert_eq!(expanded_name("a/b/foo.debug.gz"), "foo.debug");
    assert_eq!(expanded_name("syms.tgz"), "syms.tar");
    assert_eq!(expanded_name("syms.tlz"), "syms.tar");
    assert_eq!(expanded_name(".gz"), ".gz");
    assert_eq!(expanded_name("plain"), "plain");
}

/// An archive whose reads past its first 512 bytes panic, as a parser's bug would.
struct PanicsPastTheHeader(Vec<u8>);

impl RangeReader for PanicsPastTheHeader {
    fn size(&self) -> u64 {
        self.0.len() as u64
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        assert!(offset < 512, "a parser's bug");
        MemReader(&self.0).read_exact_at(offset, buf)
    }
}

/// `keys` and `check` call [`expand`] on their own thread: a parser's panic is the archive's
/// fault, told as malformed after the entries before it, not a panic of the command; a panic
/// in the caller's own `visit` is the caller's and goes on.
#[test]
fn expand_tells_a_parser_panic_as_a_malformed_archive() {
    let tar = tar_of(&[("a", &vec![2u8; 256]), ("b", &vec![1u8; 2 << 20])]);
    let scratch = tempfile::tempdir().unwrap();
    let reader = PanicsPastTheHeader(tar);
    let mut seen = Vec::new();
    let walked = expand(
        &reader,
        Container::Tar,
        "t.tar",
        &Options::default(),
        scratch.path(),
        &mut |event| {
            if let Event::File { entry, .. } = event {
                seen.push(entry);
            }
            Ok(())
        },
    );
    assert!(
        matches!(&walked, Err(ExpandError::Malformed(reason)) if reason.contains("panicked: a parser's bug")),
        "{walked:?}"
    );
    assert_eq!(seen, ["a"]);

    let ours = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        expand(
            &MemReader(&tar_of(&[("a", A)])),
            Container::Tar,
            "t.tar",
            &Options::default(),
            scratch.path(),
            &mut |_| panic!("the caller's bug"),
        )
    }));
    let panic = ours.expect_err("the caller's panic was caught");
    assert_eq!(crate::panic_message(&*panic), "the caller's bug");
}

/// A walk whose parser panics ends with the archive malformed (a record saying why), not an
/// I/O error that would be retried until the queue gives up: the same bytes panic again.
#[tokio::test]
async fn a_walk_that_panics_ends_with_the_archive_malformed() {
    let tar = tar_of(&[("a", A), ("b", &vec![1u8; 2 << 20])]);
    let scratch = tempfile::tempdir().unwrap();
    let reader = Arc::new(PanicsPastTheHeader(tar));
    let mut walk = Walker::start(
        reader,
        Container::Tar,
        "t.tar".into(),
        Options::default(),
        scratch.path().into(),
    )
    .unwrap();
    while walk.next().await.is_some() {}
    let err = walk.finish().unwrap_err();
    assert!(
        matches!(&err, ExpandError::Malformed(reason) if reason.contains("panicked: a parser's bug")),
        "{err}"
    );
}

#[test]
fn debian_packages_are_expanded_through_their_data_tarball() {
    // An odd-sized entry and member: padding is skipped as ar writes it. (The tar writer
    // drops the `./` dpkg-deb's names start with: the integration test has them.)
    let debug = b"an odd-sized debug file";
    let tar = tar_of(&[
        ("./usr/lib/debug/.build-id/ab/cdef.debug", debug),
        ("./usr/share/doc/p/copyright", B),
    ]);
    for (name, bytes) in [
        ("data.tar", tar.clone()),
        ("data.tar.gz", gzip(&tar)),
        ("data.tar.xz", xz(&tar)),
        ("data.tar.zst", zstd(&tar)),
        ("data.tar.bz2", bzip2(&tar)),
    ] {
        let package = deb_of(name, &bytes);
        let seen = expand_all(&package, "p-dbgsym_1.0_amd64.ddeb", Options::default()).unwrap();
        let debug_entry = format!("{name}!/usr/lib/debug/.build-id/ab/cdef.debug");
        let copyright = format!("{name}!/usr/share/doc/p/copyright");
        assert_eq!(
            files(&seen),
            [(debug_entry.as_str(), &debug[..]), (copyright.as_str(), B)],
            "{name}"
        );
        let skipped: Vec<&str> = seen
            .iter()
            .filter_map(|s| match s {
                Seen::Skipped(entry, reason) if reason.contains("package metadata") => {
                    Some(entry.as_str())
                }
                _ => None,
            })
            .collect();
        assert_eq!(skipped, ["debian-binary", "control.tar.gz"], "{name}");
    }
    // Another member (a signature) is an entry like any other.
    let control = gzip(&tar_of(&[("./control", A)]));
    let signed = ar_of(&[
        ("debian-binary", b"2.0\n"),
        ("control.tar.gz", &control),
        ("data.tar", &tar),
        ("_gpgbuilder", B),
    ]);
    let seen = expand_all(&signed, "p.deb", Options::default()).unwrap();
    assert_eq!(files(&seen).last(), Some(&("_gpgbuilder", B)));
}

#[test]
fn a_debian_package_in_a_zip_reaches_its_files() {
    use ::zip::CompressionMethod::Stored;
    let tar = tar_of(&[("./usr/lib/debug/x.debug", A)]);
    let package = deb_of("data.tar.xz", &xz(&tar));
    let zip = zip_of(&[("debs/p.ddeb", &package, Stored)]);
    let seen = expand_all(&zip, "artifact.zip", Options::default()).unwrap();
    assert_eq!(
        files(&seen),
        [("debs/p.ddeb!/data.tar.xz!/usr/lib/debug/x.debug", A)]
    );
}

#[test]
fn a_malformed_debian_package_says_where() {
    let good = deb_of("data.tar", &tar_of(&[("a", A)]));
    let cases: [(&str, Vec<u8>, &str); 4] = [
        (
            "cut in a member",
            good[..good.len() - 700].to_vec(),
            "runs past the end",
        ),
        ("cut in a header", good[..120].to_vec(), "cut short"),
        (
            "a size that is not a number",
            {
                let mut bad = good.clone();
                bad[8 + 48..8 + 50].copy_from_slice(b"x1");
                bad
            },
            "not a number",
        ),
        (
            "a header without its end",
            {
                let mut bad = good.clone();
                bad[8 + 58] = b'!';
                bad
            },
            "no member header",
        ),
    ];
    for (what, bytes, says) in cases {
        let (_, result) = expand_seen_as(&bytes, Container::Deb, "p.deb", Options::default());
        match result {
            Err(ExpandError::Malformed(reason)) => {
                assert!(reason.contains(says), "{what}: {reason}")
            }
            other => panic!("{what}: {other:?}"),
        }
    }
    // A newline after the last member is padding, not a header.
    let mut padded = good.clone();
    padded.push(b'\n');
    assert!(expand_all(&padded, "p.deb", Options::default()).is_ok());
    // A data member that is no tarball.
    let not_tar = deb_of("data.tar.gz", b"plain bytes, not gzip");
    match expand_seen_as(&not_tar, Container::Deb, "p.deb", Options::default()).1 {
        Err(ExpandError::Malformed(reason)) => {
            assert!(reason.contains("not a tarball"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn rpm_packages_and_cpio_archives_are_expanded_entry_by_entry() {
    let debug = b"an odd-sized debug file";
    let cpio = cpio_of(&[
        ("./usr", 0o040_755, b""),
        ("./usr/lib/debug/app.debug", REGULAR, debug),
        ("./usr/lib/debug/link.debug", 0o120_777, b"app.debug"),
        ("./usr/bin/app", REGULAR, B),
        ("./dev/null", 0o020_666, b""),
    ]);
    let expected = [
        ("./usr/lib/debug/app.debug", &debug[..]),
        ("./usr/bin/app", B),
    ];
    for (name, bytes) in [
        ("a.cpio", cpio.clone()),
        ("a.cpio.gz", gzip(&cpio)),
        ("p.rpm", rpm_of(&cpio, 0, 0)),
        ("p-gz.rpm", rpm_of(&gzip(&cpio), 7, 4276)),
        ("p-xz.rpm", rpm_of(&xz(&cpio), 54, 1349)),
        ("p-zst.rpm", rpm_of(&zstd(&cpio), 1, 3)),
        ("p-bz2.rpm", rpm_of(&bzip2(&cpio), 2, 17)),
    ] {
        let seen = expand_all(&bytes, name, Options::default()).unwrap();
        assert_eq!(files(&seen), expected, "{name}");
        let skipped: Vec<&str> = seen
            .iter()
            .filter_map(|s| match s {
                Seen::Skipped(entry, _) => Some(entry.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(
            skipped,
            ["./usr/lib/debug/link.debug", "./dev/null"],
            "{name}"
        );
    }
}

#[test]
fn a_malformed_rpm_or_cpio_says_why_and_a_cut_entry_is_never_indexed() {
    let cpio = cpio_of(&[("./a.debug", REGULAR, A), ("./b.debug", REGULAR, B)]);
    let malformed = |bytes: &[u8], container| match expand_seen_as(
        bytes,
        container,
        "p.rpm",
        Options::default(),
    ) {
        (seen, Err(ExpandError::Malformed(reason))) => (seen, reason),
        other => panic!("{other:?}"),
    };
    // Header counts past the end of the file.
    let (_, reason) = malformed(&rpm_of(&cpio, 1_000_000, 0)[..2000], Container::Rpm);
    assert!(reason.contains("runs past the end"), "{reason}");
    let mut lying = rpm_of(&cpio, 0, 0);
    lying[96 + 12..96 + 16].copy_from_slice(&u32::MAX.to_be_bytes());
    let (_, reason) = malformed(&lying, Container::Rpm);
    assert!(reason.contains("runs past the end"), "{reason}");
    // A payload that is not one.
    let (_, reason) = malformed(&rpm_of(b"not a payload", 0, 0), Container::Rpm);
    assert!(reason.contains("no cpio archive"), "{reason}");
    // A name size claiming gigabytes is refused before anything is read into memory.
    let mut huge_name = cpio.clone();
    huge_name[6 + 8 * 11..6 + 8 * 12].copy_from_slice(b"FFFFFFFF");
    let (_, reason) = malformed(&huge_name, Container::Cpio);
    assert!(reason.contains("at most 4096"), "{reason}");
    // Not hex.
    let mut not_hex = cpio.clone();
    not_hex[6 + 8 * 6] = b'g';
    let (_, reason) = malformed(&not_hex, Container::Cpio);
    assert!(reason.contains("not hex"), "{reason}");
    // Cut inside the second entry: the first is indexed, the second rejected, never indexed
    // as the bytes that were there.
    // (The trailer takes 124 bytes, B 32 with its padding: 10 of B's bytes are left.)
    let cut = &cpio[..cpio.len() - 124 - 32 + 10];
    let (seen, result) = expand_seen_as(cut, Container::Cpio, "a.cpio", Options::default());
    assert_eq!(files(&seen), [("./a.debug", A)]);
    assert!(
        matches!(&seen[1], Seen::Rejected(entry, reason) if entry == "./b.debug" && reason.contains("ends inside")),
        "{seen:?}"
    );
    assert!(
        matches!(result, Err(ExpandError::Malformed(_))),
        "{result:?}"
    );
}

/// An Alpine package (`abuild`'s `.apk`, `-dbg` packages among them): gzip streams, one after
/// another, of tar segments whose end-of-archive blocks are cut (a signature, the control
/// segment, the data), read as one tarball.
#[test]
fn an_alpine_package_is_read_as_one_tarball() {
    let segment = |entries: &[(&str, &[u8])]| {
        let tar = tar_of(entries);
        gzip(&tar[..tar.len() - 1024])
    };
    let mut apk = segment(&[(".SIGN.RSA.ci.rsa.pub", b"signature")]);
    apk.extend(segment(&[(".PKGINFO", b"pkgname = app-dbg\n")]));
    apk.extend(gzip(&tar_of(&[("usr/lib/debug/app.debug", A)])));
    let seen = expand_all(&apk, "app-dbg-1.0-r0.apk", Options::default()).unwrap();
    assert_eq!(
        files(&seen),
        [
            (".SIGN.RSA.ci.rsa.pub", &b"signature"[..]),
            (".PKGINFO", b"pkgname = app-dbg\n"),
            ("usr/lib/debug/app.debug", A),
        ]
    );
}

/// A 7z archive of `entries` (LZMA2, the writer's default): `solid`, one block for all; else
/// a block per file. An entry named with a trailing `/` is a directory.
pub(super) fn sevenz_of(entries: &[(&str, &[u8])], solid: bool) -> Vec<u8> {
    sevenz_in(entries, solid, ::sevenz_rust2::EncoderMethod::LZMA2.into())
}

/// A 7z archive of `entries` whose blocks are compressed as `method` says.
pub(super) fn sevenz_in(
    entries: &[(&str, &[u8])],
    solid: bool,
    method: ::sevenz_rust2::EncoderConfiguration,
) -> Vec<u8> {
    use ::sevenz_rust2::{ArchiveEntry, ArchiveWriter};
    let mut writer = ArchiveWriter::new(Cursor::new(Vec::new())).unwrap();
    writer.set_content_methods(vec![method]);
    let entry = |name: &str| match name.strip_suffix('/') {
        Some(dir) => ArchiveEntry::new_directory(dir),
        None => ArchiveEntry::new_file(name),
    };
    if solid {
        let (names, data): (Vec<_>, Vec<_>) = entries
            .iter()
            .filter(|(name, _)| !name.ends_with('/'))
            .map(|(name, data)| (entry(name), ::sevenz_rust2::SourceReader::new(*data)))
            .unzip();
        writer.push_archive_entries(names, data).unwrap();
        for (name, _) in entries.iter().filter(|(name, _)| name.ends_with('/')) {
            writer
                .push_archive_entry::<&[u8]>(entry(name), None)
                .unwrap();
        }
    } else {
        for (name, data) in entries {
            let data = (!name.ends_with('/')).then_some(*data);
            writer.push_archive_entry(entry(name), data).unwrap();
        }
    }
    writer.finish().unwrap().into_inner()
}

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

/// Where a 7z archive's next header lies: its start header's offset (after the 32-byte
/// signature header) and size.
pub(super) fn sevenz_header(archive: &[u8]) -> std::ops::Range<usize> {
    let offset = u64::from_le_bytes(archive[12..20].try_into().unwrap()) as usize;
    let size = u64::from_le_bytes(archive[20..28].try_into().unwrap()) as usize;
    32 + offset..32 + offset + size
}

/// The next header of a 7z archive edited by `edit`, the start header's offset, size and
/// checksums made to fit (a lie the checksums cannot catch).
pub(super) fn sevenz_with_header(archive: &[u8], edit: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let at = sevenz_header(archive);
    let mut header = archive[at.clone()].to_vec();
    edit(&mut header);
    let mut out = archive[..at.start].to_vec();
    out.extend_from_slice(&header);
    out[20..28].copy_from_slice(&(header.len() as u64).to_le_bytes());
    let crc = |bytes: &[u8]| {
        let mut crc = flate2::Crc::new();
        crc.update(bytes);
        crc.sum()
    };
    let header_crc = crc(&header);
    out[28..32].copy_from_slice(&header_crc.to_le_bytes());
    let start_crc = crc(&out[12..32]);
    out[8..12].copy_from_slice(&start_crc.to_le_bytes());
    out
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

/// A budget the tests' walks share: leaked, as a Lambda's lives as long as its process.
fn budget(bytes: u64) -> &'static DecoderMemory {
    Box::leak(Box::new(DecoderMemory::new(bytes)))
}

/// The decoders' memory is reserved from the walks' shared budget as their stream's header
/// says (memory.rs): an xz stream its first block's dictionary, a zstd stream its first
/// frame's window, a 7z block its coders' dictionaries; a gzip stream nothing.
#[test]
fn decoders_reserve_what_their_stream_header_says() {
    let tar = tar_of(&[("a", A), ("b", B)]);
    let peak = |bytes: &[u8], name: &str| {
        let memory = budget(1 << 40);
        let options = Options {
            memory: Some(memory),
            ..Options::default()
        };
        let seen = expand_all(bytes, name, options).unwrap();
        assert_eq!(files(&seen).len(), 2, "{name}: {seen:?}");
        memory.peak()
    };
    // xz at preset 1: a 1 MiB dictionary (LZMA2 property 16), given the floor: 8 MiB (half
    // again while it grows, and the decoder's 1 MiB).
    let floor = (8 << 20) + (4 << 20) + (1 << 20);
    let xz = xz(&tar);
    assert_eq!(compressed::xz_first_block_lzma2(&xz), Some(16));
    assert_eq!(peak(&xz, "a.tar.xz"), floor);
    let zstd = zstd(&tar);
    let window = compressed::zstd_window(&zstd).expect("a frame header");
    assert!(window >= tar.len() as u64, "{window}");
    assert_eq!(peak(&zstd, "a.tar.zst"), floor);
    // Over the floor, what the header says: xz -9's 64 MiB.
    let mut options = lzma_rust2::XzOptions::with_preset(1);
    options.lzma_options.dict_size = 64 << 20;
    let mut writer = lzma_rust2::XzWriter::new(Vec::new(), options).unwrap();
    writer.write_all(&tar).unwrap();
    let xz9 = writer.finish().unwrap();
    assert_eq!(compressed::xz_first_block_lzma2(&xz9), Some(28));
    assert_eq!(peak(&xz9, "a.tar.xz"), (64 << 20) + (32 << 20) + (1 << 20));
    assert_eq!(peak(&gzip(&tar), "a.tar.gz"), 0);
    let sevenz = sevenz_of(&[("a", A), ("b", B)], true);
    let at = sevenz
        .windows(3)
        .rposition(|w| w == [0x21, 0x21, 0x01])
        .unwrap();
    let dictionary = memory::lzma2_memory(sevenz[at + 3]).unwrap();
    assert_eq!(peak(&sevenz, "a.7z"), dictionary);
}

/// zstd frame headers: a window descriptor (exponent and mantissa), or a single segment's
/// content size in each field width.
#[test]
fn zstd_windows_from_frame_headers() {
    let magic = [0x28, 0xb5, 0x2f, 0xfd];
    let header = |rest: &[u8]| [&magic[..], rest].concat();
    // Window descriptor 0x58: 2^(10 + 11) = 2 MiB; 0x5b: and 3/8 more.
    assert_eq!(
        compressed::zstd_window(&header(&[0x00, 0x58])),
        Some(2 << 20)
    );
    assert_eq!(
        compressed::zstd_window(&header(&[0x00, 0x5b])),
        Some((2 << 20) + 3 * (2 << 17))
    );
    // A single segment: its content size, 1, 2 (from 256), 4 or 8 bytes.
    assert_eq!(compressed::zstd_window(&header(&[0x20, 100])), Some(100));
    assert_eq!(compressed::zstd_window(&header(&[0x60, 1, 0])), Some(257));
    assert_eq!(
        compressed::zstd_window(&header(&[0xa0, 0, 0, 0, 1])),
        Some(1 << 24)
    );
    // With a dictionary id (1 byte) before the content size.
    assert_eq!(compressed::zstd_window(&header(&[0x21, 7, 100])), Some(100));
    // Cut short, or not a frame.
    assert_eq!(compressed::zstd_window(&header(&[0x00])), None);
    assert_eq!(compressed::zstd_window(b"\x50\x2a\x4d\x18skippable"), None);
}

/// Two walks sharing a budget that holds one decoder: the second waits for the first's
/// decoder to be dropped before it makes its own, and both finish.
#[test]
fn walks_over_a_shared_budget_decode_one_at_a_time() {
    let archive = xz(&tar_of(&[("a", A), ("b", B)]));
    let memory = budget(2 << 20);
    let options = Options {
        memory: Some(memory),
        ..Options::default()
    };
    let walk = |visit: &mut dyn FnMut(Event) -> io::Result<()>| {
        let scratch = tempfile::tempdir().unwrap();
        let reader = MemReader(archive.as_slice());
        expand(
            &reader,
            Container::Xz,
            "a.tar.xz",
            &options,
            scratch.path(),
            visit,
        )
    };
    let (holding, held) = std::sync::mpsc::channel();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let second_done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let first = scope.spawn(move || {
            let mut first_entry = true;
            walk(&mut |_| {
                if std::mem::take(&mut first_entry) {
                    holding.send(()).unwrap();
                    released.recv().unwrap();
                }
                Ok(())
            })
        });
        held.recv().unwrap();
        let second = scope.spawn(|| {
            let walked = walk(&mut |_| Ok(()));
            second_done.store(true, Ordering::SeqCst);
            walked
        });
        while memory.waiting() == 0 {
            std::thread::yield_now();
        }
        assert!(!second_done.load(Ordering::SeqCst));
        release.send(()).unwrap();
        first.join().unwrap().unwrap();
        second.join().unwrap().unwrap();
    });
    assert_eq!(memory.peak(), 2 << 20, "never two decoders at once");
}
