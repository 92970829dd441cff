//! The upstream cache on disk: one file per key (named by the SHA-256 of the key, so any key
//! is a safe file name), written under a temporary name and renamed into place only once it is
//! whole and verified (a partial download is never served), bounded in total with the least
//! recently used evicted first.
//!
//! What was used when is kept in memory (file times would change the files' stamps, which the
//! memory cache checks); after a restart the files' modification times order them.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use super::super::cache::oldest_first;

pub struct DiskCache {
    pub root: PathBuf,
    max_bytes: u64,
    index: Mutex<Index>,
}

#[derive(Default)]
struct Index {
    /// File name (relative to the root) -> (size, last use).
    files: HashMap<String, (u64, u64)>,
    bytes: u64,
    clock: u64,
}

/// A download being written: removed unless it is [`DiskCache::keep`]t.
pub struct Partial {
    pub path: PathBuf,
    pub file: std::fs::File,
    relative: String,
}

impl Drop for Partial {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl DiskCache {
    /// Opens (creating) the cache at `root`: leftover partial downloads removed, what is there
    /// counted, oldest first.
    pub fn open(root: &Path, max_bytes: u64) -> io::Result<DiskCache> {
        std::fs::create_dir_all(root)?;
        let mut found = Vec::new();
        for shard in std::fs::read_dir(root)? {
            let shard = shard?;
            if !shard.file_type()?.is_dir() {
                continue;
            }
            for file in std::fs::read_dir(shard.path())? {
                let file = file?;
                let name = file.file_name().to_string_lossy().into_owned();
                if name.starts_with(".partial-") {
                    let _ = std::fs::remove_file(file.path());
                    continue;
                }
                let meta = file.metadata()?;
                let shard_name = shard.file_name().to_string_lossy().into_owned();
                found.push((
                    meta.modified().ok(),
                    meta.len(),
                    format!("{shard_name}/{name}"),
                ));
            }
        }
        found.sort();
        let mut index = Index::default();
        for (_, len, relative) in found {
            index.clock += 1;
            index.bytes += len;
            index.files.insert(relative, (len, index.clock));
        }
        let cache = DiskCache {
            root: root.to_path_buf(),
            max_bytes,
            index: Mutex::new(index),
        };
        cache.evict();
        Ok(cache)
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

    /// `key`'s cached file relative to the root, marked as used, when there is one.
    pub fn lookup(&self, key: &str) -> Option<String> {
        let relative = Self::relative(key);
        let mut index = self.lock();
        index.clock += 1;
        let clock = index.clock;
        let entry = index.files.get_mut(&relative)?;
        entry.1 = clock;
        Some(relative)
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
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)?;
        Ok(Partial {
            path,
            file,
            relative,
        })
    }

    /// Puts a whole, verified download in place (atomically: a reader sees the old file or
    /// this one), then evicts down to the bound.
    pub fn keep(&self, partial: Partial) -> io::Result<()> {
        let len = partial.file.metadata()?.len();
        std::fs::rename(&partial.path, self.root.join(&partial.relative))?;
        {
            let mut index = self.lock();
            index.clock += 1;
            let clock = index.clock;
            if let Some((old, _)) = index.files.insert(partial.relative.clone(), (len, clock)) {
                index.bytes -= old;
            }
            index.bytes += len;
        }
        // Renamed: nothing left for the drop to remove.
        std::mem::forget(partial);
        self.evict();
        Ok(())
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
                .map(|(relative, (_, used))| (*used, relative)),
        );
        for relative in oldest {
            if index.bytes <= self.max_bytes {
                break;
            }
            // A file being served stays readable until its reader closes it.
            let _ = std::fs::remove_file(self.root.join(&relative));
            if let Some((len, _)) = index.files.remove(&relative) {
                index.bytes -= len;
            }
        }
    }

    #[cfg(test)]
    fn held(&self) -> u64 {
        self.lock().bytes
    }
}

/// A number that differs between concurrent partial files of one key in one process.
fn next_partial() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn put(cache: &DiskCache, key: &str, len: usize) {
        let mut partial = cache.partial(key).unwrap();
        partial.file.write_all(&vec![1u8; len]).unwrap();
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
        drop(cache);
        let again = DiskCache::open(dir.path(), 10_000).unwrap();
        assert_eq!(again.held(), 8_000);
        assert!(again.lookup("a").is_some());
    }
}
