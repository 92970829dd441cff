//! `serve`'s memory cache of small files: the bytes of files up to [`CACHED_MAX`], kept by
//! their store path and answered without reading the file again (a reference count, not a
//! copy), bounded in total (`--memory-cache`, least recently used evicted first).
//!
//! The cache never decides what exists: every request still opens its file beneath the store
//! (a deleted or replaced file is a miss or new bytes at once), and an entry is used only when
//! the opened file is the one cached — same device, inode, size, modification and change
//! times. symdex writes a key's file whole and renames it into place (a new inode); a file
//! rewritten in place by hand keeps its inode but changes its change time.
//!
//! Hand-written (a map and a sweep) rather than an LRU crate: eviction is rare (a store's hot
//! set is small files fetched again and again) and sweeping to three quarters makes it cheap.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::sync::Mutex;

use bytes::Bytes;
use http::HeaderValue;

/// Files larger than this are streamed from disk, never cached.
pub const CACHED_MAX: u64 = 256 << 10;

/// Which file, in which state: what an entry is valid for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    pub fn of(meta: &std::fs::Metadata) -> Stamp {
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// A cached file: its bytes and its `Last-Modified` header, formatted once.
#[derive(Clone)]
pub struct Cached {
    pub bytes: Bytes,
    pub last_modified: Option<HeaderValue>,
}

pub struct MemoryCache {
    max_bytes: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<String, Entry>,
    /// What the entries hold: their bytes, keys and a fixed overhead each.
    bytes: usize,
    /// Counts lookups: an entry's `used` is the count when it was last answered.
    clock: u64,
}

struct Entry {
    stamp: Stamp,
    cached: Cached,
    used: u64,
}

/// What an entry costs beyond its bytes and key (the map's slot, the `Bytes` header).
const ENTRY_OVERHEAD: usize = 96;

impl Entry {
    fn cost(key: &str, cached: &Cached) -> usize {
        key.len() + cached.bytes.len() + ENTRY_OVERHEAD
    }
}

impl MemoryCache {
    /// A cache holding at most `max_bytes` (0: nothing is cached).
    pub fn new(max_bytes: usize) -> MemoryCache {
        MemoryCache {
            max_bytes,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The map is consistent after every statement that changes it: a panic elsewhere
        // while it was held leaves nothing half done.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The cached bytes of `key` if they are those of the file stamped `stamp`.
    pub fn get(&self, key: &str, stamp: Stamp) -> Option<Cached> {
        if self.max_bytes == 0 {
            return None;
        }
        let mut inner = self.lock();
        inner.clock += 1;
        let clock = inner.clock;
        let entry = inner.entries.get_mut(key)?;
        if entry.stamp != stamp {
            return None;
        }
        entry.used = clock;
        Some(entry.cached.clone())
    }

    /// Keeps `cached` as `key`'s bytes for the file stamped `stamp`, evicting the least
    /// recently used entries down to three quarters of the bound when it is passed.
    pub fn put(&self, key: &str, stamp: Stamp, cached: Cached) {
        let cost = Entry::cost(key, &cached);
        if cost > self.max_bytes / 4 {
            return;
        }
        let mut inner = self.lock();
        let used = inner.clock;
        if let Some(old) = inner.entries.remove(key) {
            inner.bytes -= Entry::cost(key, &old.cached);
        }
        if inner.bytes + cost > self.max_bytes {
            inner.evict_to(self.max_bytes / 4 * 3);
        }
        inner.bytes += cost;
        inner.entries.insert(
            key.to_string(),
            Entry {
                stamp,
                cached,
                used,
            },
        );
    }

    #[cfg(test)]
    fn held(&self) -> usize {
        self.lock().bytes
    }
}

impl Inner {
    fn evict_to(&mut self, target: usize) {
        let oldest = oldest_first(self.entries.iter().map(|(key, entry)| (entry.used, key)));
        for key in oldest {
            if self.bytes <= target {
                break;
            }
            if let Some(entry) = self.entries.remove(&key) {
                self.bytes -= Entry::cost(&key, &entry.cached);
            }
        }
    }
}

/// Keys in the order both of serve's caches evict them: least recently used first, from
/// (last use, key) pairs.
pub fn oldest_first<'a>(uses: impl Iterator<Item = (u64, &'a String)>) -> Vec<String> {
    let mut by_use: Vec<(u64, &String)> = uses.collect();
    by_use.sort_unstable();
    by_use.into_iter().map(|(_, key)| key.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::{Cached, MemoryCache, Stamp};
    use bytes::Bytes;

    fn cached(len: usize) -> Cached {
        Cached {
            bytes: Bytes::from(vec![7u8; len]),
            last_modified: None,
        }
    }

    fn stamp(ino: u64) -> Stamp {
        Stamp {
            dev: 1,
            ino,
            len: 0,
            mtime: (0, 0),
            ctime: (0, 0),
        }
    }

    #[test]
    fn an_entry_answers_only_for_the_file_it_was_read_from() {
        let cache = MemoryCache::new(1 << 20);
        cache.put("a/b", stamp(1), cached(10));
        assert_eq!(cache.get("a/b", stamp(1)).unwrap().bytes.len(), 10);
        assert!(
            cache.get("a/b", stamp(2)).is_none(),
            "replaced: another inode"
        );
        assert!(cache.get("a/c", stamp(1)).is_none());
    }

    #[test]
    fn the_bound_holds_and_the_least_recently_used_go_first() {
        let cache = MemoryCache::new(100_000);
        for i in 0..10 {
            cache.put(&format!("k{i}"), stamp(i), cached(9_000));
        }
        // k0 answered again: k1 is now the least recently used.
        assert!(cache.get("k0", stamp(0)).is_some());
        for i in 10..20 {
            cache.put(&format!("k{i}"), stamp(i), cached(9_000));
            assert!(cache.held() <= 100_000, "{}", cache.held());
        }
        assert!(cache.get("k1", stamp(1)).is_none());
        assert!(cache.get("k19", stamp(19)).is_some());
    }

    #[test]
    fn nothing_is_cached_at_zero_and_big_entries_are_refused() {
        let off = MemoryCache::new(0);
        off.put("a", stamp(1), cached(1));
        assert!(off.get("a", stamp(1)).is_none());
        let small = MemoryCache::new(4_000);
        small.put("a", stamp(1), cached(2_000));
        assert!(small.get("a", stamp(1)).is_none());
        assert_eq!(small.held(), 0);
    }
}
