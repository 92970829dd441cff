//! The upstream cache on disk: one file per key (named by the SHA-256 of the key, so any key
//! is a safe file name), written under a temporary name and renamed into place only once it is
//! whole and verified (a partial download is never served), bounded in total with the least
//! recently used evicted first.
//!
//! The cache manages only what it created: its directory carries a tag file ([`TAG`]), a
//! directory that holds anything else and no tag is refused at start (an operator pointing
//! `--upstream-cache` at a shared folder must not lose its files to eviction), and inside its
//! own directory only names of its own shape (`<2 hex>/<62 hex>`) are counted, evicted or
//! cleaned up.
//!
//! What was used when is kept in memory (file times would change the files' stamps, which the
//! memory cache checks); after a restart the files' modification times order them. A file's
//! modification time is also when it was fetched (a rename keeps it): its age.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

use super::super::cache::oldest_first;
use super::partial::Partial;

/// The file that marks a directory as an upstream cache symdex created.
pub const TAG: &str = ".symdex-upstream-cache";
const TAG_TEXT: &str = "An upstream cache of `symdex serve --upstream`: symdex adds and deletes \
files here. Delete the whole directory to clear it.\n";

pub struct DiskCache {
    pub root: PathBuf,
    max_bytes: u64,
    index: Mutex<Index>,
}

#[derive(Default)]
struct Index {
    /// File name (relative to the root) -> (size, last use, fetched).
    files: HashMap<String, (u64, u64, SystemTime)>,
    bytes: u64,
    clock: u64,
}

impl DiskCache {
    /// Opens (creating) the cache at `root`: refused when it holds files and no [`TAG`];
    /// leftover partial downloads removed, what is there counted, oldest first.
    pub fn open(root: &Path, max_bytes: u64) -> io::Result<DiskCache> {
        std::fs::create_dir_all(root)?;
        claim(root)?;
        let mut found = Vec::new();
        for shard in std::fs::read_dir(root)? {
            let shard = shard?;
            let shard_name = shard.file_name().to_string_lossy().into_owned();
            if !shard.file_type()?.is_dir() || !is_hex(&shard_name, 2) {
                continue;
            }
            for file in std::fs::read_dir(shard.path())? {
                let file = file?;
                let name = file.file_name().to_string_lossy().into_owned();
                let partial_of = name.strip_prefix(".partial-").and_then(|p| p.get(..62));
                if partial_of.is_some_and(|hash| is_hex(hash, 62)) {
                    let _ = std::fs::remove_file(file.path());
                    continue;
                }
                let meta = file.metadata()?;
                if !is_hex(&name, 62) || !meta.is_file() {
                    continue;
                }
                let fetched = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                found.push((fetched, meta.len(), format!("{shard_name}/{name}")));
            }
        }
        found.sort();
        let mut index = Index::default();
        for (fetched, len, relative) in found {
            index.clock += 1;
            index.bytes += len;
            index.files.insert(relative, (len, index.clock, fetched));
        }
        let cache = DiskCache {
            root: root.to_path_buf(),
            max_bytes,
            index: Mutex::new(index),
        };
        cache.evict();
        Ok(cache)
    }

    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Index> {
        // Every change to the index is whole before the lock is released.
        self.index.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Where `key`'s file is (relative to the root), cached or not.
    pub fn relative(key: &str) -> String {
        let hash = symdex_shared::digest::hex(&Sha256::digest(key.as_bytes()));
        format!("{}/{}", &hash[..2], &hash[2..])
    }

    /// `key`'s cached file relative to the root, marked as used, and its age, when there is
    /// one.
    pub fn lookup(&self, key: &str) -> Option<(String, Duration)> {
        let relative = Self::relative(key);
        let mut index = self.lock();
        index.clock += 1;
        let clock = index.clock;
        let entry = index.files.get_mut(&relative)?;
        entry.1 = clock;
        let age = entry.2.elapsed().unwrap_or_default();
        Some((relative, age))
    }

    /// A new partial file for `key`.
    pub fn partial(&self, key: &str) -> io::Result<Partial> {
        let relative = Self::relative(key);
        let dir = self.root.join(&relative[..2]);
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(format!(
            ".partial-{}-{}-{}",
            &relative[3..],
            std::process::id(),
            next_partial()
        ));
        Partial::create(path, relative)
    }

    /// Puts a whole, verified download in place (atomically: a reader sees the old file or
    /// this one), then evicts down to the bound.
    pub fn keep(&self, partial: Partial) -> io::Result<()> {
        let len = partial.len();
        std::fs::rename(&partial.path, self.root.join(&partial.relative))?;
        {
            let mut index = self.lock();
            index.clock += 1;
            let entry = (len, index.clock, SystemTime::now());
            if let Some((old, _, _)) = index.files.insert(partial.relative.clone(), entry) {
                index.bytes -= old;
            }
            index.bytes += len;
        }
        partial.kept();
        self.evict();
        Ok(())
    }

    /// Removes `key`'s file (the upstream no longer has it).
    pub fn forget(&self, key: &str) {
        let relative = Self::relative(key);
        let mut index = self.lock();
        if let Some((len, _, _)) = index.files.remove(&relative) {
            index.bytes -= len;
            let _ = std::fs::remove_file(self.root.join(&relative));
        }
    }

    /// Removes the least recently used files until the cache is within its bound.
    fn evict(&self) {
        let mut index = self.lock();
        if index.bytes <= self.max_bytes {
            return;
        }
        let oldest = oldest_first(
            index
                .files
                .iter()
                .map(|(relative, (_, used, _))| (*used, relative)),
        );
        for relative in oldest {
            if index.bytes <= self.max_bytes {
                break;
            }
            // A file being served stays readable until its reader closes it.
            let _ = std::fs::remove_file(self.root.join(&relative));
            if let Some((len, _, _)) = index.files.remove(&relative) {
                index.bytes -= len;
            }
        }
    }

    #[cfg(test)]
    fn held(&self) -> u64 {
        self.lock().bytes
    }
}

/// Makes sure `root` is a cache symdex created: tagged, or empty (then tagged).
fn claim(root: &Path) -> io::Result<()> {
    let tag = root.join(TAG);
    if tag.is_file() {
        return Ok(());
    }
    if let Some(entry) = std::fs::read_dir(root)?.next() {
        let name = entry?.file_name();
        return Err(io::Error::other(format!(
            "{} is not empty and symdex did not create it as a cache (no {TAG} in it; it holds \
             {}, for one): give --upstream-cache an empty or new directory",
            root.display(),
            name.to_string_lossy()
        )));
    }
    std::fs::write(tag, TAG_TEXT)
}

/// Whether `text` is `len` lowercase hex digits (the shape of the cache's own names).
fn is_hex(text: &str, len: usize) -> bool {
    text.len() == len && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A number that differs between concurrent partial files of one key in one process.
fn next_partial() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::{DiskCache, TAG};

    fn put(cache: &DiskCache, key: &str, len: usize) {
        let mut partial = cache.partial(key).unwrap();
        partial.write(&vec![1u8; len]).unwrap();
        cache.keep(partial).unwrap();
    }

    #[test]
    fn kept_files_are_found_bounded_and_counted_again_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let cache = DiskCache::open(dir.path(), 10_000).unwrap();
        put(&cache, "a", 4_000);
        put(&cache, "b", 4_000);
        assert!(cache.lookup("a").is_some(), "a used after b");
        put(&cache, "c", 4_000);
        assert!(cache.held() <= 10_000);
        assert!(cache.lookup("b").is_none(), "the least recently used went");
        assert!(cache.lookup("a").is_some() && cache.lookup("c").is_some());
        // An abandoned download leaves nothing behind.
        let partial = cache.partial("d").unwrap();
        let path = partial.path.clone();
        drop(partial);
        assert!(!path.exists());
        cache.forget("c");
        assert!(cache.lookup("c").is_none());
        drop(cache);
        let again = DiskCache::open(dir.path(), 10_000).unwrap();
        assert_eq!(again.held(), 4_000);
        assert!(again.lookup("a").is_some());
    }

    #[test]
    fn a_foreign_directory_is_refused_and_foreign_names_in_its_own_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("thesis.db"), "mine").unwrap();
        let refused = DiskCache::open(dir.path(), 1).err().unwrap().to_string();
        assert!(refused.contains("thesis.db"), "{refused}");
        assert!(!dir.path().join(TAG).exists());

        let own = tempfile::tempdir().unwrap();
        let cache = DiskCache::open(own.path(), 1).unwrap();
        assert!(own.path().join(TAG).is_file());
        std::fs::create_dir_all(own.path().join("ab")).unwrap();
        std::fs::write(own.path().join("ab/notes.txt"), "kept").unwrap();
        put(&cache, "a", 100);
        drop(cache);
        DiskCache::open(own.path(), 1).unwrap();
        assert!(own.path().join("ab/notes.txt").is_file(), "never evicted");
    }
}
