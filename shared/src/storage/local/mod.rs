//! A directory as a store: keys are relative paths under its root, but for compressed copies,
//! each one flat file (paths.rs; one path per key either way). Writes go to a temporary file
//! in the store and are renamed into place; copies inside the store are hard links (stored
//! files are never modified in place, so sharing an inode is safe). Upload records
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

#[cfg(doc)]
use super::Storage;
use super::{
    appended, check_key, content_sha1, CopySource, ObjectInfo, Precondition, StorageError,
    StorageResult, Versioned,
};

mod api;
mod copies;
mod encoded;
pub use encoded::EncodedFile;
mod owners;
mod paths;
pub use paths::{key_of, legacy_relative_path, relative_path, FLAT_SEPARATOR, MAX_FLAT_NAME};
#[cfg(test)]
mod tests;

use owners::{name_owner, owner_of};

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
    /// Open files are linked by their descriptor (`AT_EMPTY_PATH`, until the kernel says no).
    empty_path_links: AtomicBool,
    /// Writers' owners are kept ([`crate::storage::StoreTraits::names_owners`]).
    owners: bool,
    /// Upload records of a new store go under their location, as on S3
    /// ([`crate::storage::StoreTraits::uploads_by_location`]).
    by_location: bool,
    /// A flat store registers its uploads in source records
    /// ([`crate::storage::StoreTraits::source_records`]): only one standing in for S3.
    source_records: bool,
    /// Changes made through this handle, counted when each ends ([`LocalStore::changes`]).
    changes: AtomicU64,
    /// The files this handle created last that name an owner, still open ([`Recent`]).
    recent: Mutex<std::collections::VecDeque<Recent>>,
    /// Whether the store may hold copies at their nested paths, as stores did before copies
    /// were flat (paths.rs), asked once: a write of a copy then removes its nested one.
    nested_copies: std::sync::OnceLock<bool>,
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
            empty_path_links: AtomicBool::new(true),
            owners: false,
            by_location: false,
            source_records: false,
            changes: AtomicU64::new(0),
            recent: Mutex::default(),
            nested_copies: std::sync::OnceLock::new(),
        })
    }

    /// The store keeps the owner each writer names in its object (an extended attribute), as
    /// S3 keeps it in the object's metadata: for writers running at once without the writer
    /// lock (refs/, invariant 7 — the interleaving scenarios run so). Such a store stands in
    /// for the Lambda's S3 store in full: a new one also lays upload records out under their
    /// location ([`crate::storage::StoreTraits::uploads_by_location`]).
    pub fn with_owners(mut self) -> Self {
        self.owners = true;
        self.by_location = true;
        self.source_records = true;
        self
    }

    /// The store registers each upload in its location's source record, as S3 stores of the
    /// flat layout do ([`crate::storage::StoreTraits::source_records`]): for tests standing
    /// in for such a store (a local store of the CLI keeps none).
    pub fn with_source_records(mut self) -> Self {
        self.source_records = true;
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
        Ok(not_found_is_none(self.read_at(key, |p| fs::read(p))?)?
            .map(|bytes| content_sha1(&bytes)))
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
                    self.drop_legacy(key);
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
pub use crate::digest::{file_sha1, Sha1Writer};

fn not_found_is_none<T>(r: io::Result<T>) -> io::Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

impl LocalStore {
    pub fn size_now(&self, key: &str) -> StorageResult<Option<u64>> {
        if appended::holds_versions(key) {
            return Ok(self.read_now(key)?.map(|bytes| bytes.len() as u64));
        }
        Ok(not_found_is_none(self.read_at(key, |p| fs::metadata(p))?)?
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
        let etag = not_found_is_none(self.read_at(key, file_sha1)?)?;
        Ok(etag.map(|etag| ObjectInfo { size, etag }))
    }

    pub fn get_now(&self, key: &str) -> StorageResult<Option<Versioned>> {
        let Some(file) = not_found_is_none(self.read_at(key, read_record)?)? else {
            return Ok(None);
        };
        // The version is the whole file's: every append makes a new one.
        let version = content_sha1(&file);
        let bytes = appended::into_content(key, file);
        Ok(Some(Versioned { version, bytes }))
    }

    /// The content at `key`, without its version.
    pub fn read_now(&self, key: &str) -> StorageResult<Option<Vec<u8>>> {
        let file = not_found_is_none(self.read_at(key, read_record)?)?;
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
                match self.swap_appending(key, bytes, version)? {
                    Appended::Swapped(version) => return Ok(Some(version)),
                    Appended::Failed => return Ok(None),
                    // The file may not grow: replaced below (its compare made again).
                    Appended::MayNotGrow => {}
                }
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
    /// version is the whole file's SHA-1.
    fn swap_appending(&self, key: &str, bytes: &[u8], version: &str) -> StorageResult<Appended> {
        use std::io::Write;
        let path = self.path_of(key)?;
        self.with_cas_lock(|| {
            let Some(mut file) = not_found_is_none(read_record(&path))? else {
                return Ok(Appended::Failed);
            };
            if content_sha1(&file) != version {
                return Ok(Appended::Failed);
            }
            let Some(chunk) = appended::append(&file, bytes) else {
                return Ok(Appended::MayNotGrow);
            };
            // One write of the whole chunk: a reader meanwhile sees the version before, as
            // does everyone if it is cut short (a crash, a full disk: then the next swap
            // replaces the file).
            fs::OpenOptions::new()
                .append(true)
                .open(&path)?
                .write_all(&chunk)?;
            file.extend_from_slice(&chunk);
            Ok(Appended::Swapped(content_sha1(&file)))
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
}

/// What a swap of a record taking its versions by appending came to
/// ([`LocalStore::swap_appending`]).
enum Appended {
    /// Appended: the record's new version.
    Swapped(String),
    /// The condition failed: the record is absent, or at another version.
    Failed,
    /// The file may not grow (an append cut short, or past its bound): the caller replaces it.
    MayNotGrow,
}
