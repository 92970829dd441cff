//! `serve`'s answer for one file: opened without blocking the runtime on anything that is not
//! a regular file (a FIFO in the store), never through a link out of the store or into its
//! private folders, one range implementation for every size (RFC 9110: an unsatisfiable range
//! is 416, an invalid one is ignored), and streamed with a bounded read-ahead: no response
//! holds more than [`INLINE_MAX`] of a file in memory, whatever its size or its reader's pace.

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use axum::body::Body;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

/// Files up to this size are read whole, on the runtime's own thread (symbol files are read
/// again and again: from the page cache, microseconds); larger ones are streamed.
pub const INLINE_MAX: u64 = 256 << 10;
/// How much of a streamed file is read ahead of what the client took.
const READ_AHEAD: usize = 64 << 10;

/// One `bytes=` range of a file of `len` bytes: `Ok(None)` for no (or an invalid, hence
/// ignored) range, `Err(())` for an unsatisfiable one.
pub fn single_range(header: Option<&str>, len: u64) -> Result<Option<(u64, u64)>, ()> {
    let Some(spec) = header.and_then(|h| h.trim().strip_prefix("bytes=")) else {
        return Ok(None);
    };
    let Some((first, last)) = spec.trim().split_once('-') else {
        return Ok(None);
    };
    let (first, last) = (first.trim(), last.trim());
    let range = match (first.parse::<u64>(), last.parse::<u64>()) {
        (Ok(a), Ok(b)) if a <= b => (a, b.min(len.saturating_sub(1))),
        (Ok(a), Err(_)) if last.is_empty() => (a, len.saturating_sub(1)),
        (Err(_), Ok(n)) if first.is_empty() && n > 0 => {
            (len.saturating_sub(n), len.saturating_sub(1))
        }
        // A suffix of zero bytes is satisfiable by no file (RFC 9110 14.1.3).
        (Err(_), Ok(0)) if first.is_empty() => return Err(()),
        _ => return Ok(None),
    };
    if range.0 >= len {
        return Err(());
    }
    Ok(Some(range))
}

/// Whether `path`, with every link resolved, is still inside `root` and outside its private
/// folders (compared case-insensitively: a case-insensitive file system opens `_SYMDEX` as
/// `_symdex`). A store made of plain files costs one `realpath`.
fn inside(root: &Path, path: &Path, private: &[&str]) -> bool {
    let Ok(real) = std::fs::canonicalize(path) else {
        return false;
    };
    let Ok(relative) = real.strip_prefix(root) else {
        return false;
    };
    let first = relative.components().next();
    !first.is_some_and(|c| {
        let c = c.as_os_str().to_string_lossy();
        private.iter().any(|p| p.eq_ignore_ascii_case(&c))
    })
}

/// Opens a regular file for reading, without blocking on a FIFO or a device (`O_NONBLOCK`,
/// then refused for not being a regular file); `None` for anything but a regular file inside
/// the store.
fn open_regular(root: &Path, path: &Path, private: &[&str]) -> Option<(File, std::fs::Metadata)> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc_o_nonblock())
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || !inside(root, path, private) {
        return None;
    }
    Some((file, meta))
}

/// `O_NONBLOCK` on Linux (all architectures symdex builds for share the value).
const fn libc_o_nonblock() -> i32 {
    0o4000
}

/// The answer for a GET or HEAD of `parts` under `root`, or `None` for a miss (anything that
/// is not a regular file inside the store).
pub async fn answer(
    root: PathBuf,
    parts: &[String],
    head: bool,
    range: Option<String>,
    private: &'static [&'static str],
) -> Option<Response> {
    let mut path = root.clone();
    path.extend(parts);
    let (file, meta) = open_regular(&root, &path, private)?;
    let len = meta.len();
    let modified = meta.modified().ok().map(httpdate::fmt_http_date);
    let (status, (start, end)) = match single_range(range.as_deref(), len) {
        Ok(Some(r)) => (StatusCode::PARTIAL_CONTENT, r),
        Ok(None) => (StatusCode::OK, (0, len.saturating_sub(1))),
        Err(()) => {
            return Some(
                (
                    StatusCode::RANGE_NOT_SATISFIABLE,
                    [
                        (header::CONTENT_RANGE, format!("bytes */{len}")),
                        (header::CONTENT_TYPE, "application/octet-stream".into()),
                    ],
                )
                    .into_response(),
            )
        }
    };
    let count = if len == 0 { 0 } else { end - start + 1 };
    let body = if head || count == 0 {
        Body::empty()
    } else if count <= INLINE_MAX {
        let mut buf = vec![0u8; count as usize];
        file.read_exact_at(&mut buf, start).ok()?;
        Body::from(buf)
    } else {
        Body::from_stream(stream(file, start, count))
    };
    let mut response = Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/octet-stream")
        .header(header::ACCEPT_RANGES, "bytes")
        .header(header::CONTENT_LENGTH, count);
    if status == StatusCode::PARTIAL_CONTENT {
        response = response.header(header::CONTENT_RANGE, format!("bytes {start}-{end}/{len}"));
    }
    if let Some(modified) = modified {
        response = response.header(header::LAST_MODIFIED, modified);
    }
    response.body(body).ok()
}

/// `count` bytes of `file` from `start`, [`READ_AHEAD`] at a time, each read only once the
/// client took the one before (the body is polled as the connection writes): a reader that
/// stops reading holds one chunk, not the file. Read on the runtime's thread, as small files
/// are: the file is a regular file (checked when opened, so nothing here can block like a
/// FIFO would), its pages mostly cached; a pool thread per read cost more than the read, and
/// each pool thread its own allocator heap.
fn stream(
    file: File,
    start: u64,
    count: u64,
) -> impl futures_util::Stream<Item = io::Result<Vec<u8>>> + Send {
    futures_util::stream::unfold((file, start, start + count), |(file, at, end)| async move {
        if at >= end {
            return None;
        }
        let want = (end - at).min(READ_AHEAD as u64) as usize;
        let mut buf = vec![0u8; want];
        match file.read_exact_at(&mut buf, at) {
            Ok(()) => Some((Ok(buf), (file, at + want as u64, end))),
            // Cut short (the file shrank): the body ends with the error.
            Err(e) => Some((Err(e), (file, end, end))),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_ranges() {
        assert_eq!(single_range(None, 10), Ok(None));
        assert_eq!(single_range(Some("bytes=0-3"), 10), Ok(Some((0, 3))));
        assert_eq!(single_range(Some("bytes=5-"), 10), Ok(Some((5, 9))));
        assert_eq!(single_range(Some("bytes=-4"), 10), Ok(Some((6, 9))));
        assert_eq!(single_range(Some("bytes=8-100"), 10), Ok(Some((8, 9))));
        assert_eq!(single_range(Some("bytes=10-"), 10), Err(()));
        assert_eq!(single_range(Some("bytes=-0"), 10), Err(()));
        // Invalid (last before first, not a number): ignored, the whole file.
        assert_eq!(single_range(Some("bytes=5-3"), 10), Ok(None));
        assert_eq!(single_range(Some("items=0-3"), 10), Ok(None));
    }

    #[test]
    fn links_out_of_the_store_or_into_private_folders_are_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("store");
        std::fs::create_dir_all(root.join("_symdex")).unwrap();
        std::fs::create_dir_all(root.join("keys")).unwrap();
        std::fs::write(dir.path().join("outside"), "secret").unwrap();
        std::fs::write(root.join("_symdex/record"), "private").unwrap();
        std::fs::write(root.join("keys/real"), "bytes").unwrap();
        let link = |target: &Path, name: &str| {
            std::os::unix::fs::symlink(target, root.join("keys").join(name)).unwrap()
        };
        link(&dir.path().join("outside"), "out");
        link(&root.join("_symdex/record"), "private");
        link(&root.join("keys/real"), "inside");
        let root = root.canonicalize().unwrap();
        let private = &["_symdex", "_manifest"];
        let opens =
            |name: &str| open_regular(&root, &root.join("keys").join(name), private).is_some();
        assert!(opens("real"));
        assert!(opens("inside"), "a link within the store's keys is served");
        assert!(!opens("out"));
        assert!(!opens("private"));
    }
}
