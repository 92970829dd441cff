//! A store that fails one change: every point where a run can die, one at a time.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::storage::{
    CopySource, ObjectInfo, Precondition, Storage, StorageError, StorageFuture, Versioned,
};

/// Passes every call to `inner`, except its `nth` change (a write, copy or delete, counted
/// from 0), which fails without reaching it — as a process dies, or a network fails, before
/// that request. Reads always go through.
pub struct FailingNth<'a> {
    inner: &'a dyn Storage,
    nth: usize,
    changes: AtomicUsize,
}

impl<'a> FailingNth<'a> {
    pub fn new(inner: &'a dyn Storage, nth: usize) -> Self {
        FailingNth {
            inner,
            nth,
            changes: AtomicUsize::new(0),
        }
    }

    /// Whether the failing change was asked for.
    pub fn failed(&self) -> bool {
        self.changes.load(Ordering::SeqCst) > self.nth
    }

    fn change(&self, what: &str, key: &str) -> Result<(), StorageError> {
        if self.changes.fetch_add(1, Ordering::SeqCst) == self.nth {
            return Err(StorageError::Io(io::Error::other(format!(
                "injected failure of change {} ({what} {key})",
                self.nth
            ))));
        }
        Ok(())
    }
}

impl Storage for FailingNth<'_> {
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
        Box::pin(async move {
            self.change("put", key)?;
            self.inner.put(key, bytes).await
        })
    }
    fn put_if<'a>(
        &'a self,
        key: &'a str,
        bytes: &'a [u8],
        condition: Precondition<'a>,
    ) -> StorageFuture<'a, Option<String>> {
        Box::pin(async move {
            self.change("put_if", key)?;
            self.inner.put_if(key, bytes, condition).await
        })
    }
    fn delete_if<'a>(&'a self, key: &'a str, version: &'a str) -> StorageFuture<'a, bool> {
        Box::pin(async move {
            self.change("delete_if", key)?;
            self.inner.delete_if(key, version).await
        })
    }
    fn copy<'a>(
        &'a self,
        source: &'a CopySource<'a>,
        key: &'a str,
        known: &'a ObjectInfo,
    ) -> StorageFuture<'a, u64> {
        Box::pin(async move {
            self.change("copy", key)?;
            self.inner.copy(source, key, known).await
        })
    }
    fn copy_new<'a>(
        &'a self,
        source: &'a CopySource<'a>,
        key: &'a str,
        known: &'a ObjectInfo,
    ) -> StorageFuture<'a, Option<u64>> {
        Box::pin(async move {
            self.change("copy_new", key)?;
            self.inner.copy_new(source, key, known).await
        })
    }
    fn list<'a>(&'a self, prefix: &'a str) -> StorageFuture<'a, Vec<String>> {
        self.inner.list(prefix)
    }
    fn delete<'a>(&'a self, key: &'a str) -> StorageFuture<'a, ()> {
        Box::pin(async move {
            self.change("delete", key)?;
            self.inner.delete(key).await
        })
    }
    fn key_copies_are_aliases(&self) -> bool {
        self.inner.key_copies_are_aliases()
    }
    fn versions_are_free(&self) -> bool {
        self.inner.versions_are_free()
    }
}
