//! `serve`'s answer for one file: opened without blocking the runtime on anything that is not
//! a regular file (a FIFO in the store), never through a link out of the store or into its
//! private folders, one range implementation for every size (RFC 9110: an unsatisfiable range
//! is 416, an invalid one is ignored), small files answered from the memory cache
//! (`cache.rs`), larger ones streamed with a bounded read-ahead (`body.rs`).

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};

use super::body::{Body, FileChunks};
use super::cache::{Cached, MemoryCache, Stamp, CACHED_MAX};
use super::raw_size::RawSize;

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

/// The store being served: its path, and its directory opened once, which every file is opened
/// beneath.
pub struct Root {
    pub path: PathBuf,
    dir: File,
}

impl Root {
    pub fn open(path: PathBuf) -> io::Result<Root> {
        let dir = File::open(&path)?;
        Ok(Root { path, dir })
    }
}

/// Opens `relative` (normalised: no `..`, no empty parts) beneath the store for reading. No
/// symbolic link is followed, anywhere in the path: a store symdex writes holds hard links
/// only, and a link could lead out of the store or into its private folders. One `openat2`
/// (`RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`, written by hand: std has no wrapper) where the
/// kernel has it (Linux 5.6); else the path is opened and its canonical form must be itself.
/// `O_NONBLOCK`: opening a FIFO or a device returns at once (then refused for not being a
/// regular file) instead of blocking the server.
fn open_beneath(root: &Root, relative: &Path) -> io::Result<File> {
    use std::os::fd::{AsRawFd, FromRawFd};
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::CString::new(relative.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // The kernel's `struct open_how` (libc's is non-exhaustive, so it cannot be built).
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    let how = OpenHow {
        flags: (libc::O_RDONLY | libc::O_NONBLOCK | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: `name` is a NUL-terminated string and `how` a valid `open_how` of the size
    // given, both alive for the call; the descriptor returned is owned by the `File` alone.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            root.dir.as_raw_fd(),
            name.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd >= 0 {
        // SAFETY: a new descriptor nobody else owns.
        return Ok(unsafe { File::from_raw_fd(fd as i32) });
    }
    let error = io::Error::last_os_error();
    if !openat2_unavailable(&error) {
        return Err(error);
    }
    let path = root.path.join(relative);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&path)?;
    if std::fs::canonicalize(&path)? != path {
        return Err(io::Error::from(io::ErrorKind::NotFound));
    }
    Ok(file)
}

/// Whether `openat2` failing with `error` means the kernel will not run it at all: `ENOSYS`
/// before Linux 5.6, and `EPERM` where a seccomp profile that predates it refuses unknown
/// system calls (Docker's did until 20.10; some CI runners' still do). Either way the
/// checked fallback opens the file instead; every key a 404 otherwise.
fn openat2_unavailable(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::ENOSYS | libc::EPERM))
}

/// The regular file at `relative` and what it is; `None` for anything else.
pub fn open_regular(root: &Root, relative: &Path) -> Option<(File, std::fs::Metadata)> {
    let file = open_beneath(root, relative).ok()?;
    let meta = file.metadata().ok()?;
    meta.is_file().then_some((file, meta))
}

/// A response with no body but its status and headers.
pub fn bare(status: StatusCode, headers: &[(header::HeaderName, HeaderValue)]) -> Response<Body> {
    let mut response = Response::new(Body::Empty);
    *response.status_mut() = status;
    for (name, value) in headers {
        response.headers_mut().insert(name, value.clone());
    }
    response
}

/// The answer for a GET or HEAD of `key` (a normalised path relative to `root`), or `None` for
/// a miss (anything that is not a regular file inside the store): [`answer_file`] of the file
/// opened.
pub fn answer(
    root: &Root,
    cache: &MemoryCache,
    key: &str,
    head: bool,
    range: Option<&str>,
) -> Option<Response<Body>> {
    let (file, meta) = open_regular(root, Path::new(key))?;
    answer_file(cache, key, file, &meta, head, range)
}

/// The answer for a GET or HEAD of `file` (`meta` what it is), opened at `key`. Files up to
/// [`CACHED_MAX`] are answered from (and kept in) `cache` under `key`; larger ones are
/// streamed, [`READ_AHEAD`](super::body::READ_AHEAD) at a time: no response holds more than
/// that of a large file, whatever its reader's pace.
pub fn answer_file(
    cache: &MemoryCache,
    key: &str,
    file: File,
    meta: &std::fs::Metadata,
    head: bool,
    range: Option<&str>,
) -> Option<Response<Body>> {
    let len = meta.len();
    let (status, (start, end)) = match single_range(range, len) {
        Ok(Some(r)) => (StatusCode::PARTIAL_CONTENT, r),
        Ok(None) => (StatusCode::OK, (0, len.saturating_sub(1))),
        Err(()) => return unsatisfiable(len),
    };
    let count = if len == 0 { 0 } else { end - start + 1 };
    let (body, last_modified) = if len <= CACHED_MAX {
        let stamp = Stamp::of(meta);
        let cached = match cache.get(key, stamp) {
            Some(cached) => cached,
            None => {
                let mut buf = vec![0u8; len as usize];
                file.read_exact_at(&mut buf, 0).ok()?;
                let cached = Cached {
                    bytes: Bytes::from(buf),
                    last_modified: last_modified(meta),
                };
                cache.put(key, stamp, cached.clone());
                cached
            }
        };
        let body = match head || count == 0 {
            true => Body::Empty,
            false => Body::Bytes(Some(
                cached.bytes.slice(start as usize..(start + count) as usize),
            )),
        };
        (body, cached.last_modified)
    } else {
        let body = match head {
            true => Body::Empty,
            false => Body::File(FileChunks::new(file, start, count)),
        };
        (body, last_modified(meta))
    };
    framed(status, (start, end, len), last_modified, body)
}

/// The answer for a GET or HEAD of bytes held in memory (an upstream's answer identified
/// there, the cache being unwritable), by the same range rules as a file's.
pub fn answer_bytes(bytes: Bytes, head: bool, range: Option<&str>) -> Option<Response<Body>> {
    let len = bytes.len() as u64;
    let (status, (start, end)) = match single_range(range, len) {
        Ok(Some(r)) => (StatusCode::PARTIAL_CONTENT, r),
        Ok(None) => (StatusCode::OK, (0, len.saturating_sub(1))),
        Err(()) => return unsatisfiable(len),
    };
    let body = match head || len == 0 {
        true => Body::Empty,
        false => Body::Bytes(Some(bytes.slice(start as usize..=end as usize))),
    };
    framed(status, (start, end, len), None, body)
}

/// 416 for a file of `len` bytes.
fn unsatisfiable(len: u64) -> Option<Response<Body>> {
    let unsatisfiable = HeaderValue::try_from(format!("bytes */{len}")).ok()?;
    Some(bare(
        StatusCode::RANGE_NOT_SATISFIABLE,
        &[
            (header::CONTENT_RANGE, unsatisfiable),
            (header::CONTENT_TYPE, OCTET_STREAM),
        ],
    ))
}

/// A 200 or 206 of bytes `start..=end` of `len` with its headers, `body` holding them (or
/// nothing, for a HEAD), `len` its [`RawSize`] (a copy's answer sets its raw file's).
fn framed(
    status: StatusCode,
    (start, end, len): (u64, u64, u64),
    last_modified: Option<HeaderValue>,
    body: Body,
) -> Option<Response<Body>> {
    let count = if len == 0 { 0 } else { end - start + 1 };
    let mut response = bare(
        status,
        &[
            (header::CONTENT_TYPE, OCTET_STREAM),
            (header::ACCEPT_RANGES, HeaderValue::from_static("bytes")),
            (header::CONTENT_LENGTH, HeaderValue::from(count)),
        ],
    );
    let headers = response.headers_mut();
    if status == StatusCode::PARTIAL_CONTENT {
        let range = HeaderValue::try_from(format!("bytes {start}-{end}/{len}")).ok()?;
        headers.insert(header::CONTENT_RANGE, range);
    }
    if let Some(modified) = last_modified {
        headers.insert(header::LAST_MODIFIED, modified);
    }
    *response.body_mut() = body;
    response.extensions_mut().insert(RawSize(len));
    Some(response)
}

pub const OCTET_STREAM: HeaderValue = HeaderValue::from_static("application/octet-stream");

pub fn last_modified(meta: &std::fs::Metadata) -> Option<HeaderValue> {
    let modified = meta.modified().ok()?;
    HeaderValue::try_from(httpdate::fmt_http_date(modified)).ok()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{open_regular, single_range, Root};

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
    fn no_link_is_followed_and_nothing_but_regular_files_opens() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store");
        std::fs::create_dir_all(store.join("_symdex")).unwrap();
        std::fs::create_dir_all(store.join("keys")).unwrap();
        std::fs::write(dir.path().join("outside"), "secret").unwrap();
        std::fs::write(store.join("_symdex/record"), "private").unwrap();
        std::fs::write(store.join("keys/real"), "bytes").unwrap();
        let link = |target: &Path, name: &str| {
            std::os::unix::fs::symlink(target, store.join("keys").join(name)).unwrap()
        };
        link(&dir.path().join("outside"), "out");
        link(&store.join("_symdex/record"), "private");
        link(&store.join("keys/real"), "inside");
        std::os::unix::fs::symlink(store.join("keys"), store.join("linked-dir")).unwrap();
        let root = Root::open(store.canonicalize().unwrap()).unwrap();
        let opens = |relative: &str| open_regular(&root, Path::new(relative)).is_some();
        assert!(opens("keys/real"));
        for refused in [
            "keys/out",
            "keys/private",
            "keys/inside",
            "linked-dir/real",
            "keys",
            "../outside",
        ] {
            assert!(!opens(refused), "{refused}");
        }
    }
}
