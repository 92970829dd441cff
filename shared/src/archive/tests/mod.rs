//! Archives built in memory with the writers of the same crates (the integration tests use the
//! real tools: zip, tar, gzip, zstd, xz, bzip2, gcab).

use std::io::{Cursor, Write};

use crate::archive::{expand, Event, ExpandError, Expanded, Options};
use crate::reader::MemReader;
use crate::sniff::{detect, detect_reader, Container};

mod budgets;
mod containers;
mod limits;
mod packages;
mod seven_zip;

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

/// Where `needle` first is in `haystack`.
pub(super) fn find(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("found")
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
