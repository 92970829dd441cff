//! Tar archives (plain, or the stream inside a gzip/zstd/xz/bzip2 file), read as a stream:
//! nothing seeks, so the same code reads a local file and a decompressor's output.

use std::io::{self, Read};

use ::tar::Archive;

use super::{ExpandError, Walk, WatchedReader};

/// Largest GNU long-name or pax extension header accepted: the tar crate reads them into
/// memory, so a hostile archive must not declare gigabytes.
const MAX_EXTENSION_HEADER: u64 = 1 << 20;

pub(super) fn expand(
    walk: &mut Walk<'_>,
    reader: &WatchedReader<'_>,
    stream: &mut dyn Read,
) -> Result<(), ExpandError> {
    let bad = |e: io::Error| reader.classify("bad tar archive", e);
    let mut archive = Archive::new(HeaderGuard::new(stream));
    for entry in archive.entries().map_err(bad)? {
        let mut entry = entry.map_err(bad)?;
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let kind = entry.header().entry_type();
        if kind.is_dir() || kind.is_pax_global_extensions() {
            continue;
        }
        if !walk.admit(&name)? {
            break;
        }
        if kind.is_symlink() || kind.is_hard_link() {
            walk.skip(&name, "a link entry (not followed)")?;
            continue;
        }
        if !(kind.is_file() || kind.is_contiguous() || kind.is_gnu_sparse()) {
            walk.skip(
                &name,
                format!("not a regular file (tar type {:?})", kind.as_byte() as char),
            )?;
            continue;
        }
        if let Some(reason) = walk.over_limits(entry.size(), None) {
            walk.reject(&name, reason)?;
            continue;
        }
        walk.entry(&name, &mut entry, None)?;
    }
    Ok(())
}

/// Follows the tar stream as the tar crate reads it, header by header, and refuses an
/// extension header (GNU long name/link, pax) larger than [`MAX_EXTENSION_HEADER`] before the
/// crate reads it into memory.
///
/// Written by hand: the tar crate has no limit of its own. A header it cannot follow (a bad
/// checksum, the end-of-archive blocks, a sparse file's extra headers) ends the guarding, never
/// the archive: the guard may only refuse what it has understood.
struct HeaderGuard<'s> {
    inner: &'s mut dyn Read,
    /// Stream position of the next byte read.
    pos: u64,
    /// Stream position of the next header block (`None`: no longer followed).
    next: Option<u64>,
    header: [u8; 512],
    filled: usize,
}

impl<'s> HeaderGuard<'s> {
    fn new(inner: &'s mut dyn Read) -> Self {
        HeaderGuard {
            inner,
            pos: 0,
            next: Some(0),
            header: [0; 512],
            filled: 0,
        }
    }

    /// Takes in the bytes `data` read at `self.pos`.
    fn observe(&mut self, mut data: &[u8]) -> io::Result<()> {
        let mut at = self.pos;
        while let Some(next) = self.next {
            let end = at + data.len() as u64;
            let want = next + self.filled as u64;
            if want >= end {
                break;
            }
            // `want` is inside this read (tar reads headers whole and in order).
            let skip = (want.saturating_sub(at)) as usize;
            data = &data[skip..];
            at = want;
            let n = (512 - self.filled).min(data.len());
            self.header[self.filled..self.filled + n].copy_from_slice(&data[..n]);
            self.filled += n;
            data = &data[n..];
            at += n as u64;
            if self.filled < 512 {
                break;
            }
            self.filled = 0;
            self.next = self.check_header(next)?;
        }
        Ok(())
    }

    /// The position of the header after the one in `self.header` (at `at`), or `None` to stop
    /// following; an error for an oversized extension header.
    fn check_header(&self, at: u64) -> io::Result<Option<u64>> {
        let h = &self.header;
        let stored = octal(&h[148..156]);
        let sum: u64 = h
            .iter()
            .enumerate()
            .map(|(i, &b)| {
                if (148..156).contains(&i) {
                    32
                } else {
                    u64::from(b)
                }
            })
            .sum();
        if stored != Some(sum) {
            return Ok(None);
        }
        let Some(size) = header_size(&h[124..136]) else {
            return Ok(None);
        };
        let kind = h[156];
        if matches!(kind, b'L' | b'K' | b'x' | b'g') && size > MAX_EXTENSION_HEADER {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "an extension header of {size} bytes (at most {MAX_EXTENSION_HEADER} are read)"
                ),
            ));
        }
        if kind == b'S' {
            return Ok(None);
        }
        let data = size.checked_next_multiple_of(512);
        Ok(data.and_then(|d| at.checked_add(512)?.checked_add(d)))
    }
}

/// A tar number field: octal ASCII, or GNU base-256 (high bit set).
fn header_size(field: &[u8]) -> Option<u64> {
    if field[0] & 0x80 != 0 {
        if field[0] != 0x80 || field[1..4].iter().any(|&b| b != 0) {
            return None;
        }
        return Some(
            field[4..]
                .iter()
                .fold(0u64, |n, &b| (n << 8) | u64::from(b)),
        );
    }
    octal(field)
}

fn octal(field: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(field).ok()?;
    let text = text.trim_matches(|c: char| c == '\0' || c == ' ');
    if text.is_empty() {
        return Some(0);
    }
    u64::from_str_radix(text, 8).ok()
}

impl Read for HeaderGuard<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.observe(&buf[..n])?;
        self.pos += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::{header_size, octal};

    #[test]
    fn header_numbers_parse_as_tar_writes_them() {
        assert_eq!(octal(b"0000644\0"), Some(0o644));
        assert_eq!(octal(b"       \0"), Some(0));
        assert_eq!(octal(b"12x\0"), None);
        let mut big = [0u8; 12];
        big[0] = 0x80;
        big[11] = 5;
        assert_eq!(header_size(&big), Some(5));
    }
}
