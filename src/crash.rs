//! The store the CLI writes through: the local store, plus one switch for crash tests.
//!
//! With `SYMDEX_CRASH_AFTER_WRITES=N` set, the process aborts (as `kill -9` would end it: no
//! destructors, no flushing) right before its N+1-th write to the store. Tests use it to stop
//! a run at exact points and check that a re-run repairs everything; nothing else sets it.

use std::sync::atomic::{AtomicU64, Ordering};

use symdex_shared::reader::RangeReader;
use symdex_shared::storage::{
    CopySource, LocalStore, ObjectInfo, Precondition, Storage, StorageResult, Versioned,
};

pub struct Store {
    inner: LocalStore,
    writes: AtomicU64,
    crash_after: Option<u64>,
}

impl Store {
    pub fn new(inner: LocalStore) -> Self {
        let crash_after = std::env::var("SYMDEX_CRASH_AFTER_WRITES")
            .ok()
            .and_then(|v| v.parse().ok());
        Store {
            inner,
            writes: AtomicU64::new(0),
            crash_after,
        }
    }

    pub fn local(&self) -> &LocalStore {
        &self.inner
    }

    fn write(&self) {
        let n = self.writes.fetch_add(1, Ordering::SeqCst);
        if self.crash_after.is_some_and(|limit| n >= limit) {
            std::process::abort();
        }
    }
}

impl Storage for Store {
    fn open(&self, key: &str) -> StorageResult<Box<dyn RangeReader + '_>> {
        self.inner.open(key)
    }
    fn size(&self, key: &str) -> StorageResult<Option<u64>> {
        self.inner.size(key)
    }
    fn head(&self, key: &str) -> StorageResult<Option<ObjectInfo>> {
        self.inner.head(key)
    }
    fn get(&self, key: &str) -> StorageResult<Option<Versioned>> {
        self.inner.get(key)
    }
    fn put(&self, key: &str, bytes: &[u8]) -> StorageResult<ObjectInfo> {
        self.write();
        self.inner.put(key, bytes)
    }
    fn put_if(
        &self,
        key: &str,
        bytes: &[u8],
        condition: Precondition<'_>,
    ) -> StorageResult<Option<String>> {
        self.write();
        self.inner.put_if(key, bytes, condition)
    }
    fn delete_if(&self, key: &str, version: &str) -> StorageResult<bool> {
        self.write();
        self.inner.delete_if(key, version)
    }
    fn copy(&self, source: &CopySource<'_>, key: &str) -> StorageResult<ObjectInfo> {
        self.write();
        self.inner.copy(source, key)
    }
    fn list(&self, prefix: &str) -> StorageResult<Vec<String>> {
        self.inner.list(prefix)
    }
    fn delete(&self, key: &str) -> StorageResult<()> {
        self.write();
        self.inner.delete(key)
    }
}
