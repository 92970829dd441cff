//! Which container a file is, by its first bytes: the one place both the archive layer (to
//! expand it) and `formats` (to leave it to the archive layer) ask, below both.

use std::io;

use crate::reader::{read_up_to, RangeReader};

/// The magic every ar archive starts with (a Debian package is one).
pub(crate) const AR_MAGIC: &[u8] = b"!<arch>\n";
/// What an RPM starts with (its lead is 96 bytes).
pub(crate) const RPM_MAGIC: &[u8] = &[0xed, 0xab, 0xee, 0xdb];
pub(crate) const RPM_LEAD: u64 = 96;
/// What each RPM header starts with: magic, version 1, four reserved bytes.
pub(crate) const RPM_HEADER_MAGIC: &[u8] = &[0x8e, 0xad, 0xe8, 0x01];
/// The magic numbers of the cpio formats read (new ASCII, with and without CRC).
pub(crate) const CPIO_MAGICS: [&[u8]; 2] = [b"070701", b"070702"];
/// A cpio header's size.
pub(crate) const CPIO_HEADER: usize = 110;

/// The kinds of container symdex expands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Container {
    Zip,
    Tar,
    Gzip,
    Zstd,
    Xz,
    /// An lzip stream (`lzip`, `tar --lzip`: GNU projects' tarballs).
    Lzip,
    Bzip2,
    Cab,
    /// A Debian package (an ar archive starting with `debian-binary`).
    Deb,
    /// An RPM package.
    Rpm,
    /// A cpio archive (new ASCII formats).
    Cpio,
    /// A 7z archive.
    SevenZip,
}

impl Container {
    pub fn as_str(self) -> &'static str {
        match self {
            Container::Zip => "zip",
            Container::Tar => "tar",
            Container::Gzip => "gzip",
            Container::Zstd => "zstd",
            Container::Xz => "xz",
            Container::Lzip => "lzip",
            Container::Bzip2 => "bzip2",
            Container::Cab => "cab",
            Container::Deb => "deb",
            Container::Rpm => "rpm",
            Container::Cpio => "cpio",
            Container::SevenZip => "7z",
        }
    }

    /// Whether this is a single compressed stream (`compressed.rs` decodes it), which a
    /// package's payload or data member may be as well as a file. Matched whole, so that a
    /// new container is placed here once, not in each package reader's list.
    pub(crate) fn is_compressed_stream(self) -> bool {
        match self {
            Container::Gzip
            | Container::Zstd
            | Container::Xz
            | Container::Lzip
            | Container::Bzip2 => true,
            Container::Zip
            | Container::Tar
            | Container::Cab
            | Container::Deb
            | Container::Rpm
            | Container::Cpio
            | Container::SevenZip => false,
        }
    }
}

/// How many bytes [`detect`] wants: tar's magic sits at offset 257.
pub const DETECT_LEN: usize = 512;

/// The container `head` (the first [`DETECT_LEN`] bytes, or all of a shorter file) starts,
/// by its magic bytes.
pub fn detect(head: &[u8]) -> Option<Container> {
    let starts = |magic: &[u8]| head.starts_with(magic);
    if starts(b"PK\x03\x04") || starts(b"PK\x05\x06") {
        Some(Container::Zip)
    } else if starts(b"\x1f\x8b") {
        Some(Container::Gzip)
    } else if starts(b"\x28\xb5\x2f\xfd") {
        Some(Container::Zstd)
    } else if starts(b"\xfd7zXZ\x00") {
        Some(Container::Xz)
    } else if starts(b"LZIP\x01") {
        Some(Container::Lzip)
    } else if head.len() >= 4 && starts(b"BZh") && (b'1'..=b'9').contains(&head[3]) {
        Some(Container::Bzip2)
    } else if starts(b"7z\xbc\xaf\x27\x1c") {
        Some(Container::SevenZip)
    } else if starts(b"MSCF\0\0\0\0") {
        Some(Container::Cab)
    } else if is_debian_package(head) {
        Some(Container::Deb)
    } else if is_rpm(head) {
        Some(Container::Rpm)
    } else if is_cpio(head) {
        Some(Container::Cpio)
    } else if head.get(257..262) == Some(b"ustar") {
        Some(Container::Tar)
    } else {
        None
    }
}

/// The container a reader holds, from its first bytes.
pub fn detect_reader(reader: &dyn RangeReader) -> io::Result<Option<Container>> {
    Ok(detect(&read_up_to(reader, 0, DETECT_LEN)?))
}

/// Whether `head` (the first bytes of a file) is a Debian package: an ar archive whose first
/// member is `debian-binary` (its 16-byte name field padded with `/` or spaces). Other ar
/// archives (static libraries: object files, which have no build ids to serve) stay
/// unrecognized.
fn is_debian_package(head: &[u8]) -> bool {
    let name_at = AR_MAGIC.len();
    head.starts_with(AR_MAGIC)
        && head.get(name_at..name_at + 16).is_some_and(|name| {
            name.starts_with(b"debian-binary") && matches!(name[13], b'/' | b' ')
        })
}

/// Whether `head` starts an RPM: the lead's magic, and the signature header's after it.
fn is_rpm(head: &[u8]) -> bool {
    head.starts_with(RPM_MAGIC)
        && head
            .get(RPM_LEAD as usize..)
            .is_some_and(|h| h.starts_with(RPM_HEADER_MAGIC))
}

/// Whether `head` starts a cpio archive: a magic number and a header of hex fields (six
/// digits alone would take a text file that starts with them for one).
fn is_cpio(head: &[u8]) -> bool {
    head.len() >= CPIO_HEADER
        && CPIO_MAGICS.contains(&&head[..6])
        && head[6..CPIO_HEADER].iter().all(u8::is_ascii_hexdigit)
}
