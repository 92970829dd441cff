//! A directory as a store: keys are relative paths under its root. Writes go to a temporary
//! file in the store and are renamed into place; copies inside the store are hard links
//! (stored files are never modified in place, so sharing an inode is safe). Upload records
//! alone take a new version by an append (`super::appended`: cheaper than a new file renamed
//! over the record, on the flush every lane waits for); they are never linked.
//!
//! Conditional writes are atomic across processes: the compare and the rename happen under an
//! exclusive `flock` of `_symdex/lock/cas` (and a mutex for the threads of one process, which
//! share nothing with `flock` when they reuse a descriptor). A version is the SHA-1 of the
//! content, so it survives restarts and needs no side file.
//!
//! A whole run that changes references (`symdex index`, `delete`) also holds the *writer lock*
//! (`_symdex/lock/writer`): a second writer waits for the first. Whoever holds it knows every
//! change lease in the store that is not its own was left by a process that died.

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use super::{
    appended, check_key, content_sha1, CopySource, ObjectInfo, Owned, Precondition, Storage,
    StorageError, StorageFuture, StorageResult, Versioned,
};

/// Where temporary files live (inside the store, so renames stay on one file system).
const TMP_DIR: &str = "_symdex/tmp";
/// Lock files (never served, never listed).
const LOCK_DIR: &str = "_symdex/lock";
/// Who wrote each published object, where a writer named itself ([`Storage::copy`]'s
/// `owner`), and the content it wrote (`<owner> <size> <SHA-1>`, the record the object
/// stands for: refs/, invariant 7): an extended attribute of the object's file. S3 keeps an
/// owner in the object's metadata, created and deleted with it; so does the file: the
/// attribute is set on the temporary file before it gets its name, so the object never shows
/// without it, and goes with the object's last name. A file changed in place keeps it, so the
/// content is named too (`verify` compares). A side file per key did the same at the cost of
/// a file per key (the very cost of a record per key). The keys of one blob are hard links of
/// one file, so they share its attribute: a key is linked only to a file naming the owner the
/// key is written for (else its bytes are copied).
const OWNER_ATTRIBUTE: &str = "user.symdex.owner";
/// The marker of a store whose objects name their owners ([`LocalStore::naming_owners_as_marked`]).
pub const OWNERS_MARKER: &str = "_symdex/owners.json";
/// What the marker's own attribute says (no upload's name: no key's owner).
const MARKER_OWNER: &[u8] = b"store";

/// Counts one change of a [`LocalStore`] when dropped ([`LocalStore::ending`]).
struct ChangeEnds<'a>(&'a AtomicU64);

impl Drop for ChangeEnds<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Held while a process changes the store; released when dropped (or when the process dies).
#[derive(Debug)]
pub struct WriterLock {
    _file: fs::File,
}

#[derive(Debug)]
pub struct LocalStore {
    root: PathBuf,
    counter: AtomicU64,
    /// Serialises conditional writes within this process; holds the `cas` lock file, opened
    /// once.
    write_lock: Mutex<Option<fs::File>>,
    /// Records are created from unnamed temporary files (until the file system says no).
    unnamed_temp: AtomicBool,
    /// Writers' owners are kept ([`Storage::names_owners`]).
    owners: bool,
    /// Upload records of a new store go under their location, as on S3
    /// ([`Storage::uploads_by_location`]).
    by_location: bool,
    /// Changes made through this handle, counted when each ends ([`LocalStore::changes`]).
    changes: AtomicU64,
    /// The files this handle created last that name an owner, still open ([`Recent`]).
    recent: Mutex<std::collections::VecDeque<Recent>>,
}

/// A file this handle created (`create_unnamed`) naming an owner, kept open: a new key of its
/// content naming the same owner and content (`copy_new_owned_now` from `key`, an artifact's
/// every other key) is a link of this very file, made through its descriptor. Before, each
/// such key opened `key`, read its attribute and its size, and closed it first (`linkable`):
/// four calls of an artifact's ~105, for each of its 8 linked keys. The file is the one that
/// was created: its bytes are never written again and its attribute names the owner and the
/// content the new key must name (compared whole), so the link publishes what a copy from
/// `key` would — even if `key` has been removed or replaced since, as a copy from the
/// writer's own bytes would; a file no name holds any more cannot be linked, and the copy
/// then goes the usual way.
#[derive(Debug)]
struct Recent {
    key: String,
    attribute: Vec<u8>,
    size: u64,
    file: std::sync::Arc<fs::File>,
}

/// How many created files a handle keeps open: an artifact's keys are linked right after
/// its file is created, by the lane that created it.
const RECENT_FILES: usize = 16;

impl LocalStore {
    /// How many changes (puts, copies, deletes, failed ones too) made through this handle
    /// have ended. A read made after this count was taken, while it is still the count, is
    /// as good as a read made now by this process: every change that ended before the count
    /// was taken is in the read, and any change that ended since would have moved the count.
    /// (It says nothing of other processes: the CLI relies on it while it holds the writer
    /// lock.)
    pub fn changes(&self) -> u64 {
        self.changes.load(Ordering::SeqCst)
    }

    /// Counts a change when it ends (see [`LocalStore::changes`]), whatever it came to: a
    /// result or an error when the guard is dropped after it, a panic as it unwinds (a lane
    /// catches one and goes on, and the change may have been made).
    fn ending(&self) -> ChangeEnds<'_> {
        ChangeEnds(&self.changes)
    }

    /// Opens (creating if needed) a store rooted at `root`.
    pub fn open(root: impl Into<PathBuf>) -> io::Result<Self> {
        let root = root.into();
        fs::create_dir_all(root.join(TMP_DIR))?;
        Ok(LocalStore {
            root,
            counter: AtomicU64::new(0),
            write_lock: Mutex::new(None),
            // Unnamed temporary files are linked into place through /proc (see
            // `create_unnamed`); without it mounted, named ones are used.
            unnamed_temp: AtomicBool::new(
                cfg!(target_os = "linux") && Path::new("/proc/self/fd").is_dir(),
            ),
            owners: false,
            by_location: false,
            changes: AtomicU64::new(0),
            recent: Mutex::default(),
        })
    }

    /// The store keeps the owner each writer names in its object (an extended attribute), as
    /// S3 keeps it in the object's metadata: for writers running at once without the writer
    /// lock (refs/, invariant 7 — the interleaving scenarios run so). Such a store stands in
    /// for the Lambda's S3 store in full: a new one also lays upload records out under their
    /// location ([`Storage::uploads_by_location`]).
    pub fn with_owners(mut self) -> Self {
        self.owners = true;
        self.by_location = true;
        self
    }

    /// The store keeps the owner each writer names in its object, and its upload records as
    /// the CLI always laid them out: a sole writer's fresh key then needs no reference record
    /// (refs/, invariant 7), which was half of a fresh index's time on a disk.
    pub fn naming_owners(mut self) -> Self {
        self.owners = true;
        self
    }

    /// The store as the CLI opens it: its objects name their owners where the store says so
    /// ([`OWNERS_MARKER`]), or where `writer` is given (a writer), the store is new to owners
    /// and its file system keeps extended attributes (the marker is then written). A store
    /// once marked always names owners: a key without a record stands for its owner's
    /// reference, which a writer not reading owners would take for an object written outside
    /// symdex. The marker names itself in the same attribute: a store copied without its
    /// attributes (`cp -r`) has the marker and lost every owner, and is refused, readers
    /// included, before a writer takes its keys for others' and a removal unpublishes them.
    pub fn naming_owners_as_marked(self, writer: Option<&WriterLock>) -> io::Result<Self> {
        let store = self;
        let marker = store.path_of(OWNERS_MARKER)?;
        let marked = match not_found_is_none(fs::File::open(&marker))? {
            Some(file) if owner_of(&file)?.as_deref() == Some(MARKER_OWNER) => true,
            Some(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{}: its objects name their owners in an extended attribute \
                         ({OWNER_ATTRIBUTE}), and the store has lost them (copied without \
                         them? copy it again keeping them: cp -a, rsync -aX, tar --xattrs)",
                        store.root.display()
                    ),
                ))
            }
            None => false,
        };
        if marked || writer.is_none() {
            return Ok(if marked { store.naming_owners() } else { store });
        }
        if !store.can_name_owners()? {
            return Ok(store);
        }
        let temp = store.temp_path();
        fs::write(&temp, b"{\"owners\":\"xattr\"}\n")?;
        let named = name_owner(&temp, MARKER_OWNER).map_err(StorageError::from);
        let linked = named.and_then(|()| store.link_new(&temp, OWNERS_MARKER));
        let _ = fs::remove_file(&temp);
        linked?;
        Ok(store.naming_owners())
    }

    /// Whether this store's file system keeps the extended attribute owners are named in
    /// (tried on a temporary file).
    pub fn can_name_owners(&self) -> io::Result<bool> {
        let temp = self.temp_path();
        fs::write(&temp, b"")?;
        let named = name_owner(&temp, MARKER_OWNER);
        let _ = fs::remove_file(&temp);
        match named {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::Unsupported => Ok(false),
            Err(e) => Err(e),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Takes the store's writer lock, waiting for another writer (after calling `waiting`
    /// once, so the user knows why nothing happens).
    pub fn lock_writer(&self, waiting: impl FnOnce()) -> io::Result<WriterLock> {
        fs::create_dir_all(self.root.join(LOCK_DIR))?;
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.root.join(LOCK_DIR).join("writer"))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                waiting();
                file.lock()?;
            }
            Err(fs::TryLockError::Error(e)) => return Err(e),
        }
        Ok(WriterLock { _file: file })
    }

    /// Removes temporary files a killed run left behind. Only call it holding the writer lock
    /// (a live writer's temporary files are its own).
    pub fn clean_temp(&self, _lock: &WriterLock) -> io::Result<usize> {
        let mut removed = 0;
        for entry in fs::read_dir(self.root.join(TMP_DIR))? {
            let path = entry?.path();
            let result = if path.is_dir() {
                fs::remove_dir_all(&path)
            } else {
                fs::remove_file(&path)
            };
            if result.is_ok() {
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Runs `f` holding the compare-and-swap lock (this process's threads and other processes).
    fn with_cas_lock<T>(&self, f: impl FnOnce() -> StorageResult<T>) -> StorageResult<T> {
        let mut cas = self.write_lock.lock().unwrap_or_else(|p| p.into_inner());
        if cas.is_none() {
            let lock_dir = self.root.join(LOCK_DIR);
            fs::create_dir_all(&lock_dir)?;
            let file = fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(lock_dir.join("cas"))?;
            *cas = Some(file);
        }
        let file = cas
            .as_ref()
            .ok_or_else(|| io::Error::other("no lock file"))?;
        // The descriptor is opened once and kept; the mutex above keeps this process's
        // threads apart (they share the descriptor's lock), `flock` other processes.
        file.lock()?;
        let result = f();
        file.unlock()?;
        result
    }

    /// The current version (content SHA-1) of `key`, or `None`.
    fn version(&self, key: &str) -> StorageResult<Option<String>> {
        Ok(not_found_is_none(fs::read(self.path_of(key)?))?.map(|bytes| content_sha1(&bytes)))
    }

    /// The file behind `key` (validated: never outside the root).
    pub fn path_of(&self, key: &str) -> StorageResult<PathBuf> {
        check_key(key)?;
        Ok(self.root.join(key))
    }

    fn temp_path(&self) -> PathBuf {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        // The process id, asked once: a temporary file per write made it a syscall per write.
        static PID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
        let pid = *PID.get_or_init(std::process::id);
        self.root.join(TMP_DIR).join(format!("{pid}-{n}-{nanos}"))
    }

    /// Moves a finished temporary file to `key`. `linked`: the temporary file is a hard link
    /// of a stored file (which may already be at `key`).
    fn commit(&self, temp: &Path, key: &str, linked: bool) -> StorageResult<PathBuf> {
        let dest = self.path_of(key)?;
        // A concurrent delete may remove the (empty) parent between create and rename.
        // The parent usually exists (keys share directories): rename first, create it only
        // when the rename says it is missing (each mkdir costs an inode search on ext4).
        let mut attempts = 0;
        loop {
            match fs::rename(temp, &dest) {
                Ok(()) => {
                    // Renaming a hard link over another link to the same file does nothing
                    // (POSIX): the temporary name stays, and goes now.
                    if linked && temp.exists() {
                        let _ = fs::remove_file(temp);
                    }
                    return Ok(dest);
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound && attempts < 8 => {
                    attempts += 1;
                    if let Some(parent) = dest.parent() {
                        fs::create_dir_all(parent)?;
                    }
                }
                Err(e) => {
                    let _ = fs::remove_file(temp);
                    return Err(e.into());
                }
            }
        }
    }
}

/// The attribute naming `owner` as the writer of `written` ([`OWNER_ATTRIBUTE`]). Packed
/// where its parts are SHA-1s (always, for owners an upload's record names and a local
/// store's content): `1`, the owner's SHA-1 count, their 20 bytes each, the size (8 bytes,
/// little-endian), the content's 20 bytes — 50 bytes for the CLI's owners. Written out as
/// text (`<owner> <size> <SHA-1>`, 88 bytes) it outgrew the room ext4 keeps for attributes
/// in a 256-byte inode, and every object took a 4 KiB attribute block of its own.
fn owner_attribute(owner: &str, written: &ObjectInfo) -> Vec<u8> {
    let packed = (|| {
        let segments: Vec<[u8; 20]> = owner.split('/').map(sha1_bytes).collect::<Option<_>>()?;
        let etag = sha1_bytes(&written.etag)?;
        let mut value = vec![1, u8::try_from(segments.len()).ok()?];
        segments.iter().for_each(|s| value.extend_from_slice(s));
        value.extend_from_slice(&written.size.to_le_bytes());
        value.extend_from_slice(&etag);
        Some(value)
    })();
    packed.unwrap_or_else(|| format!("{owner} {} {}", written.size, written.etag).into_bytes())
}

/// The owner and the content an attribute names; `None` for anything symdex did not write.
fn parse_owner_attribute(value: &[u8]) -> Option<(String, ObjectInfo)> {
    if let [1, count, rest @ ..] = value {
        let owner_len = usize::from(*count) * 20;
        if *count == 0 || rest.len() != owner_len + 28 {
            return None;
        }
        let (owner, rest) = rest.split_at(owner_len);
        let (size, etag) = rest.split_at(8);
        let owner: Vec<String> = owner.chunks(20).map(crate::digest::hex).collect();
        let info = ObjectInfo {
            size: u64::from_le_bytes(size.try_into().ok()?),
            etag: crate::digest::hex(etag),
        };
        return Some((owner.join("/"), info));
    }
    let value = std::str::from_utf8(value).ok()?;
    let mut parts = value.split(' ');
    let (owner, size, etag) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || owner.is_empty() {
        return None;
    }
    let info = ObjectInfo {
        size: size.parse().ok()?,
        etag: etag.to_string(),
    };
    Some((owner.to_string(), info))
}

/// The 20 bytes 40 lowercase hex digits spell.
fn sha1_bytes(hex: &str) -> Option<[u8; 20]> {
    if hex.bytes().any(|d| d.is_ascii_uppercase()) {
        return None;
    }
    crate::digest::unhex(hex)?.try_into().ok()
}

/// Sets the owner attribute of the file at `path` (not yet a key's: see
/// [`OWNER_ATTRIBUTE`]). `Unsupported` where the file system keeps no extended attributes.
#[cfg(target_os = "linux")]
fn name_owner(path: &Path, value: &[u8]) -> io::Result<()> {
    use rustix::fs::{setxattr, XattrFlags};
    setxattr(path, OWNER_ATTRIBUTE, value, XattrFlags::empty()).map_err(|e| match e {
        rustix::io::Errno::OPNOTSUPP => io::Error::from(io::ErrorKind::Unsupported),
        e => io::Error::from(e),
    })
}

/// The owner attribute of an open file, if any.
#[cfg(target_os = "linux")]
fn owner_of(file: &fs::File) -> io::Result<Option<Vec<u8>>> {
    // An upload record's name (at most two SHA-1s and a slash), a size and a SHA-1: anything
    // longer was not written by symdex, and names nobody.
    let mut value = [0u8; 256];
    match rustix::fs::fgetxattr(file, OWNER_ATTRIBUTE, &mut value[..]) {
        Ok(n) => Ok(Some(value[..n].to_vec())),
        Err(
            rustix::io::Errno::NODATA | rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::RANGE,
        ) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

#[cfg(not(target_os = "linux"))]
fn name_owner(_path: &Path, _value: &[u8]) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

#[cfg(not(target_os = "linux"))]
fn owner_of(_file: &fs::File) -> io::Result<Option<Vec<u8>>> {
    Ok(None)
}

/// A whole file, read into a buffer sized for the small records it mostly holds: unlike
/// `fs::read`, no `statx` first to size it (a re-index reads two records per input, and the
/// call was a tenth of its time). Larger files grow the buffer as they are read. It reads
/// until a read finds nothing: a short read is the end of a regular file on a local file
/// system, but not on every one a store may sit on (a FUSE mount may answer short), and a
/// record or a manifest cut short would be read as whole.
fn read_record(path: &Path) -> io::Result<Vec<u8>> {
    read_file_up_to(path, 4096, u64::MAX)
}

/// A file's bytes up to `limit`, into a buffer of `capacity` to begin with, read without a
/// status call first (see [`read_record`]; the CLI reads its small inputs so, knowing their
/// size already).
pub fn read_file_up_to(path: &Path, capacity: usize, limit: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity(capacity);
    // Through `take`: `File`'s own `read_to_end` asks for the size first.
    fs::File::open(path)?.take(limit).read_to_end(&mut bytes)?;
    Ok(bytes)
}

// Hashing lives in digest.rs (below storage and archives both); re-exported for callers.
use crate::digest::sha1_of;
pub use crate::digest::{file_sha1, Sha1Writer};

fn not_found_is_none<T>(r: io::Result<T>) -> io::Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The store's operations, synchronous (the trait wraps them in ready futures: a local file
/// system call is quick and the CLI runs one operation at a time).
impl LocalStore {
    pub fn size_now(&self, key: &str) -> StorageResult<Option<u64>> {
        if appended::holds_versions(key) {
            return Ok(self.read_now(key)?.map(|bytes| bytes.len() as u64));
        }
        let path = self.path_of(key)?;
        Ok(not_found_is_none(fs::metadata(path))?
            .filter(|m| m.is_file())
            .map(|m| m.len()))
    }

    pub fn head_now(&self, key: &str) -> StorageResult<Option<ObjectInfo>> {
        if appended::holds_versions(key) {
            return Ok(self.read_now(key)?.map(|bytes| ObjectInfo {
                size: bytes.len() as u64,
                etag: content_sha1(&bytes),
            }));
        }
        let Some(size) = self.size_now(key)? else {
            return Ok(None);
        };
        let etag = not_found_is_none(file_sha1(&self.path_of(key)?))?;
        Ok(etag.map(|etag| ObjectInfo { size, etag }))
    }

    pub fn get_now(&self, key: &str) -> StorageResult<Option<Versioned>> {
        let Some(file) = not_found_is_none(read_record(&self.path_of(key)?))? else {
            return Ok(None);
        };
        // The version is the whole file's: every append makes a new one.
        let version = content_sha1(&file);
        let bytes = appended::into_content(key, file);
        Ok(Some(Versioned { version, bytes }))
    }

    /// The content at `key`, without its version.
    pub fn read_now(&self, key: &str) -> StorageResult<Option<Vec<u8>>> {
        let file = not_found_is_none(read_record(&self.path_of(key)?))?;
        Ok(file.map(|file| appended::into_content(key, file)))
    }

    pub fn put_now(&self, key: &str, bytes: &[u8]) -> StorageResult<()> {
        check_key(key)?;
        appended::check(key, bytes)?;
        let temp = self.temp_path();
        fs::write(&temp, bytes)?;
        self.commit(&temp, key, false).map(|_| ())
    }

    pub fn put_if_now(
        &self,
        key: &str,
        bytes: &[u8],
        condition: Precondition<'_>,
    ) -> StorageResult<Option<String>> {
        appended::check(key, bytes)?;
        if let Precondition::Absent = condition {
            // Creating needs no lock: a hard link never replaces a name, so it is atomic
            // against every other writer (a swap under the lock finds the record there, or
            // not yet, exactly as if it had come first).
            let created = self.copy_new_now(&CopySource::Bytes(bytes), key)?;
            return Ok(created.map(|_| content_sha1(bytes)));
        }
        check_key(key)?;
        if let Precondition::Version(version) = condition {
            if appended::holds_versions(key) {
                if let Some(swapped) = self.swap_appending(key, bytes, version)? {
                    return Ok(swapped);
                }
                // The file may not grow: replaced below (its compare made again).
            }
        }
        // The temporary file is written outside the lock; only compare + rename are inside.
        let temp = self.temp_path();
        fs::write(&temp, bytes)?;
        let result = self.with_cas_lock(|| {
            let current = self.version(key)?;
            let holds = match condition {
                Precondition::Absent => current.is_none(),
                Precondition::Version(v) => current.as_deref() == Some(v),
            };
            if !holds {
                return Ok(None);
            }
            self.commit(&temp, key, false)?;
            Ok(Some(content_sha1(bytes)))
        });
        // Not committed (condition failed, or an error): the temporary file goes.
        if !matches!(result, Ok(Some(_))) {
            let _ = fs::remove_file(&temp);
        }
        result
    }

    /// [`Self::put_if_now`] of a record that takes its versions by appending
    /// ([`appended`]): the read, the compare and the append all under the lock. The new
    /// version is the whole file's SHA-1. `None`: the file may not grow (an append cut short,
    /// or past its bound), for the caller to replace.
    fn swap_appending(
        &self,
        key: &str,
        bytes: &[u8],
        version: &str,
    ) -> StorageResult<Option<Option<String>>> {
        use std::io::Write;
        let path = self.path_of(key)?;
        self.with_cas_lock(|| {
            let Some(mut file) = not_found_is_none(read_record(&path))? else {
                return Ok(Some(None));
            };
            if content_sha1(&file) != version {
                return Ok(Some(None));
            }
            let Some(chunk) = appended::append(&file, bytes) else {
                return Ok(None);
            };
            // One write of the whole chunk: a reader meanwhile sees the version before, as
            // does everyone if it is cut short (a crash, a full disk: then the next swap
            // replaces the file).
            fs::OpenOptions::new()
                .append(true)
                .open(&path)?
                .write_all(&chunk)?;
            file.extend_from_slice(&chunk);
            Ok(Some(Some(content_sha1(&file))))
        })
    }

    pub fn delete_if_now(&self, key: &str, version: &str) -> StorageResult<bool> {
        self.with_cas_lock(|| {
            if self.version(key)?.as_deref() != Some(version) {
                return Ok(false);
            }
            self.delete_file(key)?;
            Ok(true)
        })
    }

    pub fn copy_now(&self, source: &CopySource<'_>, key: &str) -> StorageResult<u64> {
        self.copy_known_now(source, key, None)
    }

    /// [`Self::copy_now`] of a source whose size the caller knows (saves a stat of the
    /// source per linked key).
    fn copy_known_now(
        &self,
        source: &CopySource<'_>,
        key: &str,
        known_size: Option<u64>,
    ) -> StorageResult<u64> {
        check_key(key)?;
        // Another name for a stored file where the key is free: one link, no temporary name
        // (a stored file is complete, so its new name never shows a part of it).
        if let CopySource::Key(src) = source {
            let src = self.path_of(src)?;
            if let Ok(true) = self.link_new(&src, key) {
                return match known_size {
                    Some(size) => Ok(size),
                    None => Ok(fs::metadata(&src)?.len()),
                };
            }
            // Taken (replaced below, by a rename), or the source is missing (reported below).
        }
        let (temp, size, linked) = self.stage(source, true)?;
        self.commit(&temp, key, linked)?;
        Ok(size)
    }

    /// [`Self::copy_now`] only where `key` is free: the finished file gets its name by a hard
    /// link, which fails when the name exists (a rename would replace it). `None`: taken.
    pub fn copy_new_now(&self, source: &CopySource<'_>, key: &str) -> StorageResult<Option<u64>> {
        check_key(key)?;
        if let CopySource::Bytes(_) = source {
            if let Some((created, size)) = self.create_unnamed(source, None, key)? {
                return Ok(created.then_some(size));
            }
        }
        let (temp, size, _) = self.stage(source, true)?;
        let created = self.link_new(&temp, key);
        let _ = fs::remove_file(&temp);
        Ok(created?.then_some(size))
    }

    /// Creates `key` holding the bytes of `source` unless it exists, from a temporary file
    /// that never had a name (Linux `O_TMPFILE`, then `linkat` through `/proc/self/fd`):
    /// a record costs four calls instead of five, and the temporary directory's entries are
    /// not touched (on a disk, each entry made and removed is journaled). `attribute`: the
    /// owner's, set before the file gets its name ([`OWNER_ATTRIBUTE`]). Whether it was
    /// created, and its size; `None` where the file system or the system cannot, or for a
    /// source it does not copy (the caller stages a named file instead).
    #[cfg(target_os = "linux")]
    fn create_unnamed(
        &self,
        source: &CopySource<'_>,
        attribute: Option<&[u8]>,
        key: &str,
    ) -> StorageResult<Option<(bool, u64)>> {
        use rustix::fs::{openat, Mode, OFlags, CWD};
        use std::io::Write;
        if !self.unnamed_temp.load(Ordering::Relaxed) {
            return Ok(None);
        }
        // What fills the file: bytes at hand, or a file opened before the temporary one
        // (a missing source is reported without having made anything).
        enum Fill<'a> {
            Bytes(&'a [u8]),
            From(fs::File),
        }
        let fill = match source {
            CopySource::Bytes(bytes) => Fill::Bytes(bytes),
            CopySource::File(path) => Fill::From(fs::File::open(path)?),
            CopySource::Key(src) => match fs::File::open(self.path_of(src)?) {
                Ok(file) => Fill::From(file),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    return Err(StorageError::NotFound(src.to_string()))
                }
                Err(e) => return Err(e.into()),
            },
            _ => return Ok(None),
        };
        let flags = OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC;
        let fd = match openat(
            CWD,
            self.root.join(TMP_DIR),
            flags,
            Mode::from_raw_mode(0o666),
        ) {
            Ok(fd) => fd,
            // Not on this file system (or kernel): named temporary files from now on.
            Err(
                rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::ISDIR | rustix::io::Errno::INVAL,
            ) => {
                self.unnamed_temp.store(false, Ordering::Relaxed);
                return Ok(None);
            }
            Err(e) => return Err(io::Error::from(e).into()),
        };
        let mut file = fs::File::from(fd);
        let size = match fill {
            Fill::Bytes(bytes) => {
                file.write_all(bytes)?;
                bytes.len() as u64
            }
            // `io::copy` between files is `copy_file_range` on Linux, as `fs::copy` is.
            Fill::From(mut from) => io::copy(&mut from, &mut file)?,
        };
        if let Some(attribute) = attribute {
            rustix::fs::fsetxattr(
                &file,
                OWNER_ATTRIBUTE,
                attribute,
                rustix::fs::XattrFlags::empty(),
            )
            .map_err(io::Error::from)?;
        }
        let created = self.link_open_file(&file, key)?;
        if let (true, Some(attribute)) = (created, attribute) {
            let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
            if recent.len() >= RECENT_FILES {
                recent.pop_front();
            }
            recent.push_back(Recent {
                key: key.to_string(),
                attribute: attribute.to_vec(),
                size,
                file: std::sync::Arc::new(file),
            });
        }
        Ok(Some((created, size)))
    }

    /// [`Self::copy_new_owned_now`] from a file this handle created naming `attribute`
    /// ([`Recent`]): whether the key was created, and the size; `None` where no such file is
    /// kept, or it no longer has a name (then copied the usual way).
    #[cfg(target_os = "linux")]
    fn link_recent(
        &self,
        source: &CopySource<'_>,
        attribute: &[u8],
        key: &str,
    ) -> StorageResult<Option<Option<u64>>> {
        let CopySource::Key(src) = source else {
            return Ok(None);
        };
        let found = (self.recent.lock().unwrap_or_else(|e| e.into_inner()))
            .iter()
            .rev()
            .find(|r| r.key == *src && r.attribute == attribute)
            .map(|r| (std::sync::Arc::clone(&r.file), r.size));
        let Some((file, size)) = found else {
            return Ok(None);
        };
        match self.link_open_file(&file, key) {
            Ok(created) => Ok(Some(created.then_some(size))),
            Err(StorageError::Io(e)) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// [`Self::link_new_with`] naming an open file `key` (`linkat` through `/proc/self/fd`).
    #[cfg(target_os = "linux")]
    fn link_open_file(&self, file: &fs::File, key: &str) -> StorageResult<bool> {
        use rustix::fs::{AtFlags, CWD};
        use std::os::fd::AsRawFd;
        let proc_path = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        self.link_new_with(key, |dest| {
            rustix::fs::linkat(CWD, &proc_path, CWD, dest, AtFlags::SYMLINK_FOLLOW)
                .map_err(io::Error::from)
        })
    }

    #[cfg(not(target_os = "linux"))]
    fn link_recent(
        &self,
        _source: &CopySource<'_>,
        _attribute: &[u8],
        _key: &str,
    ) -> StorageResult<Option<Option<u64>>> {
        Ok(None)
    }

    #[cfg(not(target_os = "linux"))]
    fn create_unnamed(
        &self,
        _source: &CopySource<'_>,
        _attribute: Option<&[u8]>,
        _key: &str,
    ) -> StorageResult<Option<(bool, u64)>> {
        Ok(None)
    }

    /// Gives `file` the name `key` too, unless the key exists (`false`); creates its
    /// directory when missing.
    fn link_new(&self, file: &Path, key: &str) -> StorageResult<bool> {
        self.link_new_with(key, |dest| fs::hard_link(file, dest))
    }

    /// Names a file `key` by `link` (a hard link to the key's path, never replacing a name),
    /// unless the key exists (`false`); creates its directory when missing.
    fn link_new_with(
        &self,
        key: &str,
        link: impl Fn(&Path) -> io::Result<()>,
    ) -> StorageResult<bool> {
        let dest = self.path_of(key)?;
        let mut attempts = 0;
        loop {
            match link(&dest) {
                Ok(()) => return Ok(true),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(false),
                // The parent is missing (or a concurrent delete removed it, see `commit`): made,
                // and tried again. Missing again right after, it is `file` that is missing
                // (asking first would cost a stat for every new directory).
                Err(e) if e.kind() == io::ErrorKind::NotFound && attempts < 8 => {
                    attempts += 1;
                    let parent = dest.parent().ok_or(e)?;
                    if attempts > 1 && parent.is_dir() {
                        return Err(io::Error::from(io::ErrorKind::NotFound).into());
                    }
                    fs::create_dir_all(parent)?;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The bytes of `source` in a temporary file of the store: its path, its size, and whether
    /// it is a hard link of a stored file (only if `may_link`).
    fn stage(
        &self,
        source: &CopySource<'_>,
        may_link: bool,
    ) -> StorageResult<(PathBuf, u64, bool)> {
        let temp = self.temp_path();
        let mut linked = false;
        let size = match source {
            // Inputs are copied, never linked: a build may later rewrite its output in place.
            CopySource::File(path) => fs::copy(path, &temp)?,
            CopySource::Bytes(bytes) => {
                fs::write(&temp, bytes)?;
                bytes.len() as u64
            }
            CopySource::Key(src) => {
                let src_path = self.path_of(src)?;
                if may_link && fs::hard_link(&src_path, &temp).is_ok() {
                    linked = true;
                    fs::metadata(&temp)?.len()
                } else {
                    match fs::copy(&src_path, &temp) {
                        Ok(size) => size,
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {
                            return Err(StorageError::NotFound(src.to_string()))
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
            }
            CopySource::Object { bucket, key, .. } | CopySource::Range { bucket, key, .. } => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("a local store cannot copy from s3://{bucket}/{key}"),
                )
                .into())
            }
        };
        Ok((temp, size, linked))
    }

    /// [`Self::copy_known_now`] naming `owner` in the object, where owners are kept, as the
    /// writer of `known`.
    fn copy_owned_now(
        &self,
        source: &CopySource<'_>,
        key: &str,
        known: &ObjectInfo,
        owner: Option<&str>,
    ) -> StorageResult<u64> {
        if !self.owners {
            return self.copy_known_now(source, key, Some(known.size));
        }
        check_key(key)?;
        let (temp, size, linked) = self.stage_owned(source, known, owner)?;
        // A rename replaces the object and its owner at once.
        self.commit(&temp, key, linked)?;
        Ok(size)
    }

    /// [`Self::copy_new_now`] naming `owner` in the object it creates, where owners are kept,
    /// as the writer of `known`.
    fn copy_new_owned_now(
        &self,
        source: &CopySource<'_>,
        key: &str,
        known: &ObjectInfo,
        owner: Option<&str>,
    ) -> StorageResult<Option<u64>> {
        if !self.owners {
            return self.copy_new_now(source, key);
        }
        check_key(key)?;
        let attribute = owner.map(|owner| owner_attribute(owner, known));
        if let Some(attribute) = &attribute {
            if let Some(created) = self.link_recent(source, attribute, key)? {
                return Ok(created);
            }
        }
        if let Some((file, size)) = self.linkable(source, owner)? {
            return Ok(self.link_new(&file, key)?.then_some(size));
        }
        if let Some((created, size)) = self.create_unnamed(source, attribute.as_deref(), key)? {
            return Ok(created.then_some(size));
        }
        // Not linkable (asked above): a copy.
        let (temp, size) = self.stage_named(source, known, owner)?;
        let created = self.link_new(&temp, key);
        let _ = fs::remove_file(&temp);
        Ok(created?.then_some(size))
    }

    /// The stored file a copy of `source` naming `owner` may be a hard link of, and its size:
    /// one naming the same owner (a link shares the file's attribute, [`OWNER_ATTRIBUTE`]; a
    /// copy from a key is of the key's content, named there already).
    fn linkable(
        &self,
        source: &CopySource<'_>,
        owner: Option<&str>,
    ) -> StorageResult<Option<(PathBuf, u64)>> {
        let CopySource::Key(src) = source else {
            return Ok(None);
        };
        let path = self.path_of(src)?;
        // Missing: reported by the copy that follows.
        let Some(file) = not_found_is_none(fs::File::open(&path))? else {
            return Ok(None);
        };
        let named = owner_of(&file)?.and_then(|value| parse_owner_attribute(&value));
        if named.as_ref().map(|(named, _)| named.as_str()) != owner {
            return Ok(None);
        }
        Ok(Some((path, file.metadata()?.len())))
    }

    /// [`Self::stage`] naming `owner` (when given) as the writer of `known` in the temporary
    /// file: a hard link only of a file naming the same owner, else a copy.
    fn stage_owned(
        &self,
        source: &CopySource<'_>,
        known: &ObjectInfo,
        owner: Option<&str>,
    ) -> StorageResult<(PathBuf, u64, bool)> {
        if let Some((file, size)) = self.linkable(source, owner)? {
            let temp = self.temp_path();
            fs::hard_link(&file, &temp)?;
            return Ok((temp, size, true));
        }
        let (temp, size) = self.stage_named(source, known, owner)?;
        Ok((temp, size, false))
    }

    /// A copy of `source` in a temporary file naming `owner` (when given) as the writer of
    /// `known`.
    fn stage_named(
        &self,
        source: &CopySource<'_>,
        known: &ObjectInfo,
        owner: Option<&str>,
    ) -> StorageResult<(PathBuf, u64)> {
        let (temp, size, _) = self.stage(source, false)?;
        if let Some(owner) = owner {
            if let Err(e) = name_owner(&temp, &owner_attribute(owner, known)) {
                let _ = fs::remove_file(&temp);
                return Err(e.into());
            }
        }
        Ok((temp, size))
    }

    /// What is at `key` and who wrote it, read together (from one open file).
    pub fn owned_now(&self, key: &str) -> StorageResult<Option<Owned>> {
        self.owned_read(key, true)
    }

    /// [`Self::owned_now`]; `hash`: the content is hashed even where the owner attribute
    /// names what was written (without it, `info.etag` is the written SHA-1: `verify`'s fast
    /// pass over every key reads no file's bytes).
    fn owned_read(&self, key: &str, hash: bool) -> StorageResult<Option<Owned>> {
        let unowned = |info| Owned {
            info,
            owner: None,
            alias_of: None,
            written: None,
        };
        if !self.owners {
            return Ok(self.head_now(key)?.map(unowned));
        }
        let Some(mut file) = not_found_is_none(fs::File::open(self.path_of(key)?))? else {
            return Ok(None);
        };
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Ok(None);
        }
        let named = owner_of(&file)?.and_then(|value| parse_owner_attribute(&value));
        let etag = match &named {
            Some((_, written)) if !hash => written.etag.clone(),
            _ => sha1_of(&mut file)?,
        };
        let info = ObjectInfo {
            size: meta.len(),
            etag,
        };
        let (owner, written) = named.unzip();
        Ok(Some(Owned {
            owner,
            written,
            ..unowned(info)
        }))
    }

    pub fn list_now(&self, prefix: &str) -> StorageResult<Vec<String>> {
        let mut keys = Vec::new();
        self.walk(prefix, &mut |key| keys.push(key))?;
        keys.sort();
        Ok(keys)
    }

    /// The keys under `prefix`, each handed to `each` as the walk finds it.
    fn walk(&self, prefix: &str, each: &mut dyn FnMut(String)) -> StorageResult<()> {
        // Walk from the deepest directory the prefix names, then filter by the full prefix.
        let dir_part = prefix.rfind('/').map_or("", |i| &prefix[..i]);
        let start = if dir_part.is_empty() {
            self.root.clone()
        } else {
            self.path_of(dir_part)?
        };
        let mut stack = vec![start];
        while let Some(dir) = stack.pop() {
            let entries = match fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e.into()),
            };
            for entry in entries {
                // A directory removed by a concurrent delete is simply no longer listed.
                let Ok(entry) = entry else { continue };
                let path = entry.path();
                let Ok(file_type) = entry.file_type() else {
                    continue;
                };
                if file_type.is_dir() {
                    stack.push(path);
                } else if file_type.is_file() {
                    if let Ok(rel) = path.strip_prefix(&self.root) {
                        let key = rel
                            .to_string_lossy()
                            .replace(std::path::MAIN_SEPARATOR, "/");
                        if key.starts_with(prefix)
                            && !key.starts_with(TMP_DIR)
                            && !key.starts_with(LOCK_DIR)
                        {
                            each(key);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Deletes `key` (a published object's owner goes with its file).
    pub fn delete_now(&self, key: &str) -> StorageResult<()> {
        self.delete_file(key)
    }

    fn delete_file(&self, key: &str) -> StorageResult<()> {
        let path = self.path_of(key)?;
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        // Tidy empty directories up to the root, so a deleted build leaves no husks. (A
        // concurrent writer whose `create_dir_all` loses its directory here retries: see
        // `commit`.)
        let mut dir = path.parent();
        while let Some(d) = dir {
            if d == self.root || fs::remove_dir(d).is_err() {
                break;
            }
            dir = d.parent();
        }
        Ok(())
    }
}

impl Storage for LocalStore {
    fn head<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<ObjectInfo>> {
        Box::pin(async move { self.head_now(key) })
    }
    fn size<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<u64>> {
        Box::pin(async move { self.size_now(key) })
    }
    fn get<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<Versioned>> {
        Box::pin(async move { self.get_now(key) })
    }
    fn read<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<Vec<u8>>> {
        Box::pin(async move { self.read_now(key) })
    }
    fn versions_are_free(&self) -> bool {
        false
    }
    fn put<'a>(&'a self, key: &'a str, bytes: &'a [u8]) -> StorageFuture<'a, ()> {
        Box::pin(async move {
            let _ends = self.ending();
            self.put_now(key, bytes)
        })
    }
    fn put_if<'a>(
        &'a self,
        key: &'a str,
        bytes: &'a [u8],
        condition: Precondition<'a>,
    ) -> StorageFuture<'a, Option<String>> {
        Box::pin(async move {
            let _ends = self.ending();
            self.put_if_now(key, bytes, condition)
        })
    }
    fn delete_if<'a>(&'a self, key: &'a str, version: &'a str) -> StorageFuture<'a, bool> {
        Box::pin(async move {
            let _ends = self.ending();
            self.delete_if_now(key, version)
        })
    }
    fn copy<'a>(
        &'a self,
        source: &'a CopySource<'a>,
        key: &'a str,
        known: &'a ObjectInfo,
        owner: Option<&'a str>,
    ) -> StorageFuture<'a, u64> {
        // The size is what a link answers; the identity is named with an owner.
        Box::pin(async move {
            let _ends = self.ending();
            self.copy_owned_now(source, key, known, owner)
        })
    }
    fn copy_new<'a>(
        &'a self,
        source: &'a CopySource<'a>,
        key: &'a str,
        known: &'a ObjectInfo,
        owner: Option<&'a str>,
    ) -> StorageFuture<'a, Option<u64>> {
        Box::pin(async move {
            let _ends = self.ending();
            self.copy_new_owned_now(source, key, known, owner)
        })
    }
    fn owned<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<Owned>> {
        Box::pin(async move { self.owned_now(key) })
    }
    fn owned_unread<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<Owned>> {
        Box::pin(async move { self.owned_read(key, false) })
    }
    fn names_owners(&self) -> bool {
        self.owners
    }
    fn list<'a>(&'a self, prefix: &'a str) -> StorageFuture<'a, Vec<String>> {
        Box::pin(async move { self.list_now(prefix) })
    }
    fn list_each<'a>(
        &'a self,
        prefix: &'a str,
        each: &'a mut (dyn FnMut(String) + Send),
    ) -> StorageFuture<'a, ()> {
        Box::pin(async move { self.walk(prefix, each) })
    }
    fn uploads_by_location(&self) -> bool {
        self.by_location
    }
    fn delete<'a>(&'a self, key: &'a str) -> StorageFuture<'a, ()> {
        Box::pin(async move {
            let _ends = self.ending();
            self.delete_now(key)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::RangeReader;

    fn store() -> (tempfile::TempDir, LocalStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path().join("store")).unwrap();
        (dir, store)
    }

    /// A record is read whole whatever its size, at the buffer's first size and each size it
    /// doubles to (where a read fills the buffer exactly and only the next one ends it).
    #[test]
    fn records_of_every_size_are_read_whole() {
        let (_d, s) = store();
        for size in [0, 1, 4095, 4096, 4097, 8192, 8193, 100_000] {
            let bytes: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
            let key = format!("records/{size}.json");
            s.put_now(&key, &bytes).unwrap();
            let read = s.get_now(&key).unwrap().expect("the record");
            assert!(
                read.bytes == bytes,
                "{size} bytes read as {}",
                read.bytes.len()
            );
        }
    }

    /// `list_each` finds what `list` does, its bookkeeping directories left out alike.
    #[tokio::test]
    async fn list_each_finds_the_keys_list_does() {
        let (_d, s) = store();
        for key in ["a/b/c", "a/d", "b/e/f/g", "a-z"] {
            s.put_now(key, key.as_bytes()).unwrap();
        }
        for prefix in ["", "a", "a/", "b/e/", "zz"] {
            let mut found = Vec::new();
            s.list_each(prefix, &mut |key| found.push(key))
                .await
                .unwrap();
            found.sort();
            assert_eq!(found, s.list_now(prefix).unwrap(), "{prefix:?}");
        }
        assert_eq!(s.list_now("").unwrap().len(), 4);
    }

    #[test]
    fn put_get_head_list_delete() {
        let (_d, s) = store();
        s.put_now("a/b/c.txt", b"hello").unwrap();
        assert_eq!(s.get_now("a/b/c.txt").unwrap().unwrap().bytes, b"hello");
        let info = s.head_now("a/b/c.txt").unwrap().unwrap();
        assert_eq!((info.size, info.etag), (5, content_sha1(b"hello")));
        assert_eq!(
            s.size_now("a/b").unwrap(),
            None,
            "directories are not objects"
        );
        s.put_now("a/x", b"1").unwrap();
        assert_eq!(s.list_now("a/").unwrap(), ["a/b/c.txt", "a/x"]);
        assert_eq!(s.list_now("a/b").unwrap(), ["a/b/c.txt"]);
        s.delete_now("a/b/c.txt").unwrap();
        s.delete_now("a/b/c.txt").unwrap();
        assert!(
            !s.root().join("a/b").exists(),
            "empty directories are removed"
        );
        assert_eq!(s.get_now("a/b/c.txt").unwrap(), None);
    }

    #[tokio::test]
    async fn changes_are_counted_when_they_end_and_reads_are_not() {
        let (_d, s) = store();
        let before = s.changes();
        s.put("a/k", b"1").await.unwrap();
        assert_eq!(s.changes(), before + 1);
        s.read("a/k").await.unwrap();
        s.get("a/k").await.unwrap();
        s.head("a/k").await.unwrap();
        s.list("a/").await.unwrap();
        assert_eq!(s.changes(), before + 1, "reads are not changes");
        let version = s.put_if("a/k", b"2", Precondition::Absent).await.unwrap();
        assert!(version.is_none());
        assert_eq!(s.changes(), before + 2, "a failed change is counted too");
        let info = s.head("a/k").await.unwrap().unwrap();
        s.copy(&CopySource::Key("a/k"), "a/c", &info, None)
            .await
            .unwrap();
        s.delete("a/c").await.unwrap();
        assert_eq!(s.changes(), before + 4);
    }

    #[test]
    fn a_new_copy_never_replaces_what_is_there() {
        let (d, s) = store();
        let input = d.path().join("input.bin");
        fs::write(&input, b"new bytes").unwrap();
        let file = CopySource::File(&input);
        assert_eq!(s.copy_new_now(&file, "k/deep/one").unwrap(), Some(9));
        s.put_now("k/taken", b"theirs").unwrap();
        assert_eq!(s.copy_new_now(&file, "k/taken").unwrap(), None);
        assert_eq!(
            s.copy_new_now(&CopySource::Key("k/deep/one"), "k/taken")
                .unwrap(),
            None
        );
        assert_eq!(s.get_now("k/taken").unwrap().unwrap().bytes, b"theirs");
        assert_eq!(
            s.copy_new_now(&CopySource::Key("k/deep/one"), "k/two")
                .unwrap(),
            Some(9)
        );
        assert_eq!(s.get_now("k/two").unwrap().unwrap().bytes, b"new bytes");
        // A copy from a key that is not there says which.
        assert!(matches!(
            s.copy_now(&CopySource::Key("k/gone"), "k/other/three"),
            Err(StorageError::NotFound(key)) if key == "k/gone"
        ));
        assert!(s
            .copy_new_now(&CopySource::Key("k/gone"), "k/four")
            .is_err());
        assert_eq!(
            fs::read_dir(s.root().join(TMP_DIR)).unwrap().count(),
            0,
            "no temporary file left behind"
        );
    }

    fn inode(s: &LocalStore, key: &str) -> u64 {
        use std::os::unix::fs::MetadataExt;
        fs::metadata(s.path_of(key).unwrap()).unwrap().ino()
    }

    /// A key copied from a file this handle just created, naming the same owner and content,
    /// is a link of that very file (`Recent`): made even where the source key's name has gone
    /// since while the file has another, and not where the file has no name left (no file is
    /// brought back), nor for another owner or other content (the usual way then).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_key_of_a_file_just_created_is_a_link_of_it() {
        let (d, s) = store();
        let s = s.naming_owners();
        let input = d.path().join("input.bin");
        fs::write(&input, b"the bytes").unwrap();
        let known = ObjectInfo {
            size: 9,
            etag: content_sha1(b"the bytes"),
        };
        let copy_new = |source: &CopySource<'_>, key: &str, known: &ObjectInfo| {
            s.copy_new_owned_now(source, key, known, Some("up-a"))
        };
        assert_eq!(
            copy_new(&CopySource::File(&input), "a/one", &known).unwrap(),
            Some(9)
        );
        let file = inode(&s, "a/one");
        // Another name of the file, made outside the store; then the key's own name goes.
        fs::hard_link(s.path_of("a/one").unwrap(), d.path().join("kept")).unwrap();
        fs::remove_file(s.path_of("a/one").unwrap()).unwrap();
        // Asked to copy from `a/one`: a link of the file created under it, through its
        // descriptor (a copy by name would find nothing there).
        let from_one = CopySource::Key("a/one");
        assert_eq!(copy_new(&from_one, "b/two", &known).unwrap(), Some(9));
        assert_eq!(inode(&s, "b/two"), file);
        let owned = s.owned_now("b/two").unwrap().unwrap();
        assert_eq!(owned.owner.as_deref(), Some("up-a"));
        assert_eq!(owned.written, Some(known.clone()));
        assert_eq!(fs::read(s.path_of("b/two").unwrap()).unwrap(), b"the bytes");
        // Taken: nothing made.
        assert_eq!(copy_new(&from_one, "b/two", &known).unwrap(), None);
        // Other content named: not from the kept file (the source key is asked, and is gone).
        let other = ObjectInfo {
            size: 9,
            etag: content_sha1(b"other byt"),
        };
        assert!(copy_new(&from_one, "b/three", &other).is_err());
        // The file with no name left: not brought back; the copy finds no source.
        fs::remove_file(d.path().join("kept")).unwrap();
        fs::remove_file(s.path_of("b/two").unwrap()).unwrap();
        assert!(copy_new(&from_one, "b/four", &known).is_err());
        assert!(!s.path_of("b/four").unwrap().exists());
    }

    /// Owners named in the files' attribute: a key is a hard link only of a file naming the
    /// same owner (links share it), the content written is named with it, and a change in
    /// place (which keeps the attribute) shows against it.
    #[test]
    fn keys_name_their_owner_and_share_a_file_only_with_the_same_owner() {
        // Created from an unnamed temporary file, and from a named one where there are none.
        for unnamed in [true, false] {
            let (d, s) = store();
            let s = s.naming_owners();
            if !unnamed {
                s.unnamed_temp.store(false, Ordering::Relaxed);
            }
            let input = d.path().join("input.bin");
            fs::write(&input, b"the bytes").unwrap();
            let known = ObjectInfo {
                size: 9,
                etag: content_sha1(b"the bytes"),
            };
            let copy_new = |source: &CopySource<'_>, key: &str, owner: Option<&str>| {
                s.copy_new_owned_now(source, key, &known, owner).unwrap()
            };
            assert_eq!(
                copy_new(&CopySource::File(&input), "a/one", Some("up-a")),
                Some(9)
            );
            assert_eq!(
                copy_new(&CopySource::File(&input), "a/one", Some("up-b")),
                None
            );
            let from_one = CopySource::Key("a/one");
            assert_eq!(copy_new(&from_one, "a/two", Some("up-a")), Some(9));
            assert_eq!(copy_new(&from_one, "b/one", Some("up-b")), Some(9));
            assert_eq!(copy_new(&from_one, "n/one", None), Some(9));
            assert_eq!(
                inode(&s, "a/two"),
                inode(&s, "a/one"),
                "the same owner: a link"
            );
            assert_ne!(
                inode(&s, "b/one"),
                inode(&s, "a/one"),
                "another owner: a copy"
            );
            assert_ne!(inode(&s, "n/one"), inode(&s, "a/one"), "nobody: a copy");
            let owner = |key| s.owned_now(key).unwrap().unwrap().owner;
            assert_eq!(owner("a/two").as_deref(), Some("up-a"));
            assert_eq!(owner("b/one").as_deref(), Some("up-b"));
            assert_eq!(owner("n/one"), None);
            // An overwrite names its writer; the other names of the file it replaced keep theirs.
            s.copy_owned_now(&CopySource::Key("b/one"), "a/two", &known, Some("up-b"))
                .unwrap();
            assert_eq!(owner("a/two").as_deref(), Some("up-b"));
            assert_eq!(owner("a/one").as_deref(), Some("up-a"));
            let found = s.owned_now("a/one").unwrap().unwrap();
            assert_eq!(
                (found.written, found.info),
                (Some(known.clone()), known.clone())
            );
            // Changed in place: the attribute stays, and says what was written.
            fs::write(s.path_of("a/one").unwrap(), b"tampered").unwrap();
            let found = s.owned_now("a/one").unwrap().unwrap();
            assert_eq!(found.owner.as_deref(), Some("up-a"));
            assert_eq!(found.written, Some(known));
            assert_eq!(found.info.size, 8);
            // Deleting a name leaves the file's other names and their owner.
            let before = inode(&s, "b/one");
            s.delete_now("b/one").unwrap();
            assert_eq!(owner("a/two").as_deref(), Some("up-b"));
            assert_eq!(inode(&s, "a/two"), before);
            assert_eq!(fs::read_dir(s.root().join(TMP_DIR)).unwrap().count(), 0);
        }
    }

    /// An owner attribute is packed where its parts are SHA-1s, small enough to stay inside
    /// an ext4 inode of 256 bytes (60 bytes of value beside its name), and read back as
    /// written; other owners are kept as text.
    #[test]
    fn owner_attributes_pack_sha1s_and_read_back() {
        let written = ObjectInfo {
            size: 123_456_789,
            etag: content_sha1(b"content"),
        };
        let flat = content_sha1(b"upload");
        let by_location = format!("{}/{flat}", content_sha1(b"location"));
        // Uppercase hex stays text: packed, it would read back lowercase.
        let upper = flat.to_ascii_uppercase();
        for owner in [
            flat.as_str(),
            by_location.as_str(),
            "up-a",
            "Not/Hex",
            &upper,
        ] {
            let value = owner_attribute(owner, &written);
            let parsed = parse_owner_attribute(&value);
            assert_eq!(
                parsed,
                Some((owner.to_string(), written.clone())),
                "{owner}"
            );
        }
        assert_eq!(owner_attribute(&flat, &written).len(), 50);
        assert_eq!(parse_owner_attribute(&[1, 1, 0]), None, "truncated");
        assert_eq!(parse_owner_attribute(&[1, 0]), None, "no owner");
        assert_eq!(
            parse_owner_attribute(b"store"),
            None,
            "the marker names no upload"
        );
    }

    /// The CLI's store names owners once a writer marked it so, and refuses a copy that lost
    /// the attributes (a `cp -r`), whose keys would look written outside symdex.
    #[test]
    fn a_marked_store_names_owners_and_a_copy_without_attributes_is_refused() {
        let (d, s) = store();
        let unmarked = LocalStore::open(s.root()).unwrap();
        let reader = unmarked.naming_owners_as_marked(None).unwrap();
        assert!(!reader.names_owners(), "a reader does not mark a store");
        let lock = s.lock_writer(|| {}).unwrap();
        let writer = s.naming_owners_as_marked(Some(&lock)).unwrap();
        assert!(writer.names_owners());
        let reader = LocalStore::open(writer.root()).unwrap();
        assert!(reader.naming_owners_as_marked(None).unwrap().names_owners());
        drop(lock);
        // Copied file by file: `fs::copy` keeps no extended attributes, as `cp -r` does not.
        let copy = d.path().join("copy");
        fs::create_dir_all(copy.join("_symdex")).unwrap();
        fs::copy(writer.root().join(OWNERS_MARKER), copy.join(OWNERS_MARKER)).unwrap();
        let copied = LocalStore::open(&copy).unwrap();
        let lock = copied.lock_writer(|| {}).unwrap();
        let refused = copied.naming_owners_as_marked(Some(&lock)).unwrap_err();
        assert!(refused.to_string().contains("lost them"), "{refused}");
        let reader = LocalStore::open(&copy).unwrap();
        assert!(reader.naming_owners_as_marked(None).is_err());
    }

    #[test]
    fn a_record_is_created_alike_from_an_unnamed_or_a_named_temporary_file() {
        for unnamed in [true, false] {
            let (_d, s) = store();
            if !unnamed {
                s.unnamed_temp.store(false, Ordering::Relaxed);
            }
            let bytes = CopySource::Bytes(b"{\"refs\":[]}");
            assert_eq!(
                s.copy_new_now(&bytes, "r/new/dir/rec.json").unwrap(),
                Some(11)
            );
            assert_eq!(s.copy_new_now(&bytes, "r/new/dir/rec.json").unwrap(), None);
            s.put_now("r/theirs.json", b"theirs").unwrap();
            assert_eq!(s.copy_new_now(&bytes, "r/theirs.json").unwrap(), None);
            assert_eq!(
                s.get_now("r/theirs.json").unwrap().unwrap().bytes,
                b"theirs"
            );
            let created = s.get_now("r/new/dir/rec.json").unwrap().unwrap();
            assert_eq!(created.bytes, b"{\"refs\":[]}");
            let mode = fs::metadata(s.path_of("r/new/dir/rec.json").unwrap())
                .unwrap()
                .permissions();
            assert!(!mode.readonly(), "created writable, as a named file is");
            assert_eq!(fs::read_dir(s.root().join(TMP_DIR)).unwrap().count(), 0);
            // The condition holds for a creation through put_if too.
            assert!(s
                .put_if_now("r/new/dir/rec.json", b"x", Precondition::Absent)
                .unwrap()
                .is_none());
        }
    }

    #[test]
    fn ranged_reads_and_copies() {
        let (d, s) = store();
        let input = d.path().join("input.bin");
        fs::write(&input, b"0123456789").unwrap();
        assert_eq!(s.copy_now(&CopySource::File(&input), "k/one").unwrap(), 10);
        assert_eq!(s.copy_now(&CopySource::Key("k/one"), "k/two").unwrap(), 10);
        assert_eq!(
            s.head_now("k/two").unwrap().unwrap(),
            s.head_now("k/one").unwrap().unwrap()
        );
        let mut buf = [0u8; 3];
        crate::reader::FileReader::open(&s.path_of("k/two").unwrap())
            .unwrap()
            .read_exact_at(4, &mut buf)
            .unwrap();
        assert_eq!(&buf, b"456");
        // Rewriting the input does not change the store.
        fs::write(&input, b"changed").unwrap();
        assert_eq!(s.get_now("k/one").unwrap().unwrap().bytes, b"0123456789");
        assert!(s
            .copy_now(
                &CopySource::Object {
                    bucket: "b",
                    key: "k",
                    version_id: None,
                    size: 1,
                    etag: "e",
                    seen: None,
                },
                "x"
            )
            .is_err());
    }

    #[test]
    fn conditional_writes() {
        let (_d, s) = store();
        let v1 = s
            .put_if_now("r", b"v1", Precondition::Absent)
            .unwrap()
            .unwrap();
        assert!(s
            .put_if_now("r", b"v2", Precondition::Absent)
            .unwrap()
            .is_none());
        let read = s.get_now("r").unwrap().unwrap();
        assert_eq!(read.version, v1, "get returns the version it read");
        let v2 = s
            .put_if_now("r", b"v2", Precondition::Version(&v1))
            .unwrap()
            .unwrap();
        assert!(
            s.put_if_now("r", b"v3", Precondition::Version(&v1))
                .unwrap()
                .is_none(),
            "stale version"
        );
        assert_eq!(s.get_now("r").unwrap().unwrap().bytes, b"v2");
        assert!(!s.delete_if_now("r", &v1).unwrap(), "stale delete refused");
        assert!(s.delete_if_now("r", &v2).unwrap());
        assert!(s.get_now("r").unwrap().is_none());
        assert!(
            s.list_now("").unwrap().is_empty(),
            "no temporary or lock files listed"
        );
    }

    /// An upload record takes its versions by appending (`appended`): its inode stays (none
    /// is freed), every append is a new version, the history stays out of reads, and a stale
    /// version still loses its swap.
    #[test]
    fn an_upload_record_grows_by_appends_in_one_inode() {
        use std::os::unix::fs::MetadataExt;
        let (_d, s) = store();
        let key = "_symdex/uploads/ab.json";
        let inode = || fs::metadata(s.path_of(key).unwrap()).unwrap().ino();
        let v1 = s.put_if_now(key, b"{\"v\":1}", Precondition::Absent);
        let v1 = v1.unwrap().unwrap();
        let first = inode();
        let v2 = s.put_if_now(key, b"{\"v\":2}", Precondition::Version(&v1));
        let v2 = v2.unwrap().unwrap();
        let v3 = s.put_if_now(key, b"{\"v\":3}", Precondition::Version(&v2));
        let v3 = v3.unwrap().unwrap();
        assert_eq!(inode(), first, "appended, not replaced");
        let file = fs::read(s.path_of(key).unwrap()).unwrap();
        assert_eq!(file, b"{\"v\":1}\n{\"v\":2}\n{\"v\":3}\n");
        let read = s.get_now(key).unwrap().unwrap();
        assert_eq!(
            (read.bytes.as_slice(), read.version.as_str()),
            (&b"{\"v\":3}"[..], &*v3)
        );
        assert_eq!(v3, content_sha1(&file), "the whole file's SHA-1");
        assert_eq!(s.read_now(key).unwrap().unwrap(), b"{\"v\":3}");
        let head = s.head_now(key).unwrap().unwrap();
        assert_eq!((head.size, head.etag), (7, content_sha1(b"{\"v\":3}")));
        assert_eq!(s.size_now(key).unwrap(), Some(7));
        // A stale version loses its swap and its delete.
        assert!(s
            .put_if_now(key, b"x", Precondition::Version(&v2))
            .unwrap()
            .is_none());
        assert!(!s.delete_if_now(key, &v2).unwrap(), "stale delete refused");
        assert!(s.delete_if_now(key, &v3).unwrap());
        assert!(s.get_now(key).unwrap().is_none());
        // A line feed would read as two versions: refused, written by any path.
        assert!(s.put_now(key, b"{\n}").is_err());
        assert!(s.put_if_now(key, b"{\n}", Precondition::Absent).is_err());
    }

    /// An append cut short (a crash, a full disk) leaves the version before it readable; the
    /// next swap, made from that read, replaces the file, as does one that would outgrow
    /// [`appended::MAX_APPENDED`].
    #[test]
    fn an_append_cut_short_reads_as_the_version_before_and_is_replaced() {
        use std::io::Write;
        let (_d, s) = store();
        let key = "_symdex/uploads/ab/cd.json";
        let v1 = s.put_if_now(key, b"{\"v\":1}", Precondition::Absent);
        let v1 = v1.unwrap().unwrap();
        let path = s.path_of(key).unwrap();
        fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(b"\n{\"v\":"))
            .unwrap();
        let read = s.get_now(key).unwrap().unwrap();
        assert_eq!(read.bytes, b"{\"v\":1}");
        assert_ne!(read.version, v1, "the cut-short append changed the file");
        assert!(s
            .put_if_now(key, b"{\"v\":2}", Precondition::Version(&v1))
            .unwrap()
            .is_none());
        let v2 = s.put_if_now(key, b"{\"v\":2}", Precondition::Version(&read.version));
        assert_eq!(v2.unwrap().unwrap(), content_sha1(b"{\"v\":2}"), "replaced");
        assert_eq!(fs::read(&path).unwrap(), b"{\"v\":2}");
        // Grown to its bound, the file is replaced by the new version alone.
        let big = format!("{{\"pad\":\"{}\"}}", "x".repeat(appended::MAX_APPENDED / 3));
        let mut version = content_sha1(b"{\"v\":2}");
        for _ in 0..4 {
            let written = s.put_if_now(key, big.as_bytes(), Precondition::Version(&version));
            version = written.unwrap().unwrap();
            assert!(fs::metadata(&path).unwrap().len() <= appended::MAX_APPENDED as u64);
            assert_eq!(s.get_now(key).unwrap().unwrap().bytes, big.as_bytes());
        }
        assert_eq!(
            s.list_now("").unwrap(),
            vec![key.to_string()],
            "no temporary files"
        );
    }

    #[test]
    fn keys_cannot_escape_the_root() {
        let (_d, s) = store();
        for key in ["../x", "/etc/passwd", "a/../../x", ""] {
            assert!(s.put_now(key, b"x").is_err(), "{key}");
            assert!(s.get_now(key).is_err(), "{key}");
        }
    }
}
