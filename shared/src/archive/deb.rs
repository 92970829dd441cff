//! Debian packages (`.deb`, `.ddeb`, `.udeb`; the `-dbgsym` packages `dh_strip` builds hold
//! the debug files under `/usr/lib/debug/.build-id/`): an `ar` archive of `debian-binary`,
//! `control.tar.*` and `data.tar.*` (plain, gzip, xz, zstd or bzip2).
//!
//! The data tarball's files are the package's entries
//! (`data.tar.xz!/./usr/lib/debug/.build-id/ab/cdef….debug`), expanded as a compressed tarball
//! is: the tarball is part of the package format, not an archive nested in it, so a package in
//! a zip (a CI artifact downloaded as one) still reaches its files. `debian-binary` and the
//! control tarball are skipped as package metadata; any other member (a signature,
//! `_gpgbuilder`) is an entry like any other.
//!
//! Read by hand: an ar archive is an 8-byte magic and its members, each a 60-byte text header
//! (name, times, owner, mode, decimal size, "`\n") and its bytes, padded to an even offset.
//! The `object` crate's reader (a dependency already) reads through a cache that keeps every
//! header it read and takes a GNU name table whole, whatever size it claims; this walks the
//! headers in order, holding one, and streams each member. Packages use no long names, so
//! neither GNU's name table nor BSD's `#1/` names are read: such a name stands as it is.

use std::io::{Read, Seek, SeekFrom};

use super::{
    compressed, detect_reader, sequential, tar, Container, ExpandError, Part, Walk, WatchedReader,
};
use crate::reader::RangeReader;

use crate::sniff::AR_MAGIC as MAGIC;
/// A member header's size.
const HEADER: u64 = 60;
/// What ends a member header.
const HEADER_END: &[u8] = b"`\n";

pub(super) fn expand(walk: &mut Walk<'_>, reader: &WatchedReader<'_>) -> Result<(), ExpandError> {
    let size = reader.size();
    let mut at = MAGIC.len() as u64;
    while at < size {
        let left = size - at;
        if left < HEADER {
            // Some writers end an archive with a newline; anything else is a cut header.
            let tail = crate::reader::read_up_to(reader, at, left as usize)
                .map_err(|e| reader.classify("bad ar member header", e))?;
            if tail.iter().all(|&b| b == b'\n') {
                break;
            }
            return Err(ExpandError::Malformed(format!(
                "a member header cut short at offset {at}"
            )));
        }
        let mut header = [0u8; HEADER as usize];
        reader
            .read_exact_at(at, &mut header)
            .map_err(|e| reader.classify("bad ar member header", e))?;
        if &header[58..] != HEADER_END {
            return Err(ExpandError::Malformed(format!(
                "no member header at offset {at}"
            )));
        }
        let name = member_name(&header[..16]);
        let len = decimal(&header[48..58]).ok_or_else(|| {
            ExpandError::Malformed(format!("member {name:?}: its size is not a number"))
        })?;
        let start = at + HEADER;
        let end = start
            .checked_add(len)
            .filter(|&end| end <= size)
            .ok_or_else(|| {
                ExpandError::Malformed(format!(
                    "member {name:?} of {len} bytes runs past the end of the package ({size} bytes)"
                ))
            })?;
        if !member(walk, reader, &name, start, len)? {
            break;
        }
        at = end + (len & 1);
    }
    Ok(())
}

/// A member's name: up to a `/` (GNU) or the space padding (what dpkg writes). Not UTF-8 is
/// replaced, as every entry name is (it names an upload, never a path).
fn member_name(field: &[u8]) -> String {
    let end = field
        .iter()
        .position(|&b| b == b'/' || b == b' ')
        .unwrap_or(field.len());
    // "/" and "//" (a GNU symbol or name table) keep their slashes, so they are not empty.
    let end = if end == 0 {
        field.iter().position(|&b| b == b' ').unwrap_or(field.len())
    } else {
        end
    };
    String::from_utf8_lossy(&field[..end]).into_owned()
}

/// A header's decimal field (space padded); `None` when it is not one.
fn decimal(field: &[u8]) -> Option<u64> {
    let digits = std::str::from_utf8(field).ok()?.trim_end_matches(' ');
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// One member at `start..start + len`; `false` when the archive's budget is spent.
fn member(
    walk: &mut Walk<'_>,
    reader: &WatchedReader<'_>,
    name: &str,
    start: u64,
    len: u64,
) -> Result<bool, ExpandError> {
    if name.starts_with("data.tar") {
        let part = Part::new(reader, start, len);
        let part = WatchedReader::new(&part, walk.failed.clone());
        walk.inside(name, |walk| data_tarball(walk, &part, name))?;
        return Ok(!walk.exhausted);
    }
    if !walk.admit(name)? {
        return Ok(false);
    }
    if name == "debian-binary" || name.starts_with("control.tar") {
        walk.skip(name, "Debian package metadata (not indexed)")?;
    } else if let Some(reason) = walk.over_limits(len, None) {
        walk.reject(name, reason)?;
    } else {
        let mut stream = sequential(reader);
        stream.seek(SeekFrom::Start(start))?;
        walk.entry(name, &mut (&mut stream).take(len), None)?;
    }
    Ok(true)
}

/// The files of the data tarball, `part`.
fn data_tarball(
    walk: &mut Walk<'_>,
    part: &WatchedReader<'_>,
    name: &str,
) -> Result<(), ExpandError> {
    match detect_reader(part).map_err(|e| part.classify("bad data tarball", e))? {
        Some(Container::Tar) => tar::expand(walk, part, &mut sequential(part)),
        Some(stream) if stream.is_compressed_stream() => {
            compressed::expand(walk, part, stream, name)
        }
        _ => Err(ExpandError::Malformed(format!("{name} is not a tarball"))),
    }
}
