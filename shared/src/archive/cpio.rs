//! cpio archives in the "new" ASCII formats (`070701`, and `070702` with checksums): an RPM's
//! payload, an initramfs; plain or inside a compressed stream. Read as a stream.
//!
//! Read by hand: each member is a 110-byte text header (thirteen 8-digit hex fields), its name
//! and its bytes, each padded to 4. The `cpio` crate reads a name into memory whatever size
//! its header claims (up to 4 GiB); here a name is at most [`MAX_NAME`] bytes.

use std::io::{self, Read};

use super::{ExpandError, Walk, WatchedReader};

use crate::sniff::{CPIO_HEADER as HEADER, CPIO_MAGICS as MAGICS};
/// Longest member name accepted (Linux's PATH_MAX).
const MAX_NAME: u64 = 4096;
/// The name of the member that ends an archive.
const TRAILER: &str = "TRAILER!!!";

/// File type bits of a member's mode.
const S_IFMT: u64 = 0o170_000;
const S_IFREG: u64 = 0o100_000;
const S_IFDIR: u64 = 0o040_000;
const S_IFLNK: u64 = 0o120_000;

pub(super) fn expand(
    walk: &mut Walk<'_>,
    reader: &WatchedReader<'_>,
    stream: &mut dyn Read,
) -> Result<(), ExpandError> {
    let bad = |e: io::Error| reader.classify("bad cpio archive", e);
    // Bytes read so far: every header and name starts at a multiple of 4.
    let mut at: u64 = 0;
    loop {
        let mut header = [0u8; HEADER];
        stream.read_exact(&mut header).map_err(bad)?;
        if !MAGICS.contains(&&header[..6]) {
            return Err(ExpandError::Malformed(format!(
                "no member header at offset {at}"
            )));
        }
        let field = |n: usize| hex(&header[6 + 8 * n..14 + 8 * n]);
        let (mode, size, name_size) = match (field(1), field(6), field(11)) {
            (Some(mode), Some(size), Some(name_size)) => (mode, size, name_size),
            _ => {
                return Err(ExpandError::Malformed(format!(
                    "a header field is not hex at offset {at}"
                )))
            }
        };
        if name_size == 0 || name_size > MAX_NAME {
            return Err(ExpandError::Malformed(format!(
                "a name of {name_size} bytes at offset {at} (at most {MAX_NAME})"
            )));
        }
        let mut name = vec![0u8; name_size as usize];
        stream.read_exact(&mut name).map_err(bad)?;
        at += (HEADER as u64) + name_size;
        skip(stream, padding(at)).map_err(bad)?;
        at += padding(at);
        // The name ends with a NUL.
        let name = String::from_utf8_lossy(name.strip_suffix(&[0]).unwrap_or(&name)).into_owned();
        if name == TRAILER {
            return Ok(());
        }
        let mut data = Exact {
            inner: &mut *stream,
            left: size,
        };
        let kind = mode & S_IFMT;
        if kind != S_IFDIR {
            if !walk.admit(&name)? {
                return Ok(());
            }
            if kind == S_IFLNK {
                walk.skip(&name, "a link entry (not followed)")?;
            } else if kind != S_IFREG {
                walk.skip(&name, format!("not a regular file (mode {mode:o})"))?;
            } else if let Some(reason) = walk.over_limits(size, None) {
                walk.reject(&name, reason)?;
            } else {
                walk.entry(&name, &mut data, None)?;
            }
        }
        // What the entry did not read (skipped, rejected, a directory).
        let left = data.left;
        skip(stream, left).map_err(bad)?;
        at += size;
        skip(stream, padding(at)).map_err(bad)?;
        at += padding(at);
    }
}

/// A member's bytes: exactly `left` of them, an error where the stream ends before (an entry
/// cut short is rejected as unreadable, never indexed as what was there).
struct Exact<'s> {
    inner: &'s mut dyn Read,
    left: u64,
}

impl Read for Exact<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 || buf.is_empty() {
            return Ok(0);
        }
        let max = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..max])?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the archive ends inside a member",
            ));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// Bytes up to the next multiple of 4.
fn padding(at: u64) -> u64 {
    (4 - at % 4) % 4
}

/// Reads and drops `count` bytes; an error if the stream ends first.
fn skip(stream: &mut dyn Read, count: u64) -> io::Result<()> {
    let skipped = io::copy(&mut stream.take(count), &mut io::sink())?;
    if skipped < count {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the archive ends inside a member",
        ));
    }
    Ok(())
}

/// An 8-digit hex field.
fn hex(field: &[u8]) -> Option<u64> {
    if !field.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    u64::from_str_radix(std::str::from_utf8(field).ok()?, 16).ok()
}
