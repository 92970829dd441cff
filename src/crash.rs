//! The store the CLI writes through: the local store, plus one switch for crash tests.
//!
//! With `SYMDEX_CRASH_AFTER_WRITES=N` set, the process aborts (as `kill -9` would end it: no
//! destructors, no flushing) right before its N+1-th write to the store. Tests use it to stop
//! a run at exact points and check that a re-run repairs everything; nothing else sets it.

use std::sync::atomic::{AtomicU64, Ordering};

use symdex_shared::storage::{
    CopySource, LocalStore, ObjectInfo, Precondition, Storage, StorageFuture, Versioned,
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
    fn head<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<ObjectInfo>> {
        self.inner.head(key)
    }
    fn size<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<u64>> {
        self.inner.size(key)
    }
    fn get<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<Versioned>> {
        self.inner.get(key)
    }
    fn read<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<Vec<u8>>> {
        self.inner.read(key)
    }
    fn put<'a>(&'a self, key: &'a str, bytes: &'a [u8]) -> StorageFuture<'a, ObjectInfo> {
        self.write();
        self.inner.put(key, bytes)
    }
    fn put_if<'a>(
        &'a self,
        key: &'a str,
        bytes: &'a [u8],
        condition: Precondition<'a>,
    ) -> StorageFuture<'a, Option<String>> {
        self.write();
        self.inner.put_if(key, bytes, condition)
    }
    fn delete_if<'a>(&'a self, key: &'a str, version: &'a str) -> StorageFuture<'a, bool> {
        self.write();
        self.inner.delete_if(key, version)
    }
    fn copy<'a>(
        &'a self,
        source: &'a CopySource<'a>,
        key: &'a str,
        known: &'a ObjectInfo,
    ) -> StorageFuture<'a, u64> {
        self.write();
        self.inner.copy(source, key, known)
    }
    fn copy_new<'a>(
        &'a self,
        source: &'a CopySource<'a>,
        key: &'a str,
        known: &'a ObjectInfo,
    ) -> StorageFuture<'a, Option<u64>> {
        self.write();
        self.inner.copy_new(source, key, known)
    }
    fn list<'a>(&'a self, prefix: &'a str) -> StorageFuture<'a, Vec<String>> {
        self.inner.list(prefix)
    }
    fn delete<'a>(&'a self, key: &'a str) -> StorageFuture<'a, ()> {
        self.write();
        self.inner.delete(key)
    }
    fn key_copies_are_aliases(&self) -> bool {
        self.inner.key_copies_are_aliases()
    }
    fn versions_are_free(&self) -> bool {
        self.inner.versions_are_free()
    }
}
