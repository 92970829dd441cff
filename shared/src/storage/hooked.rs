//! A store that asks a hook before each change it passes on: how the CLI's crash switch
//! stops a run at an exact write, and how tests fail one change at a time.

use super::{
    CopySource, ObjectInfo, Owned, Precondition, Storage, StorageFuture, StorageResult,
    StoreTraits, Versioned,
};
use crate::storage::encoding::{EncodedMeta, Staged};

/// Asked before each change (write, copy, delete) of a [`Hooked`] store.
pub trait BeforeChange: Send + Sync {
    /// `op` names the change, `key` what it changes; an error is the change's outcome, and
    /// the change is not made. By default every change goes through (a hook that only holds).
    fn before_change(&self, _op: &'static str, _key: &str) -> StorageResult<()> {
        Ok(())
    }

    /// A wait before a change `before_change` let through goes on: none, unless a test holds
    /// the change back — for the interleavings the scheduler (`testing::interleave`) cannot
    /// drive, where one writer waits on a lock of the process, not on the store.
    fn hold<'a>(&'a self, _op: &'static str, _key: &str) -> Option<StorageFuture<'a, ()>> {
        None
    }

    /// A wait before a read (`get`, `read`) goes on: none, unless a test holds the read back
    /// to show what others do while it is in flight.
    fn hold_read<'a>(&'a self, _key: &str) -> Option<StorageFuture<'a, ()>> {
        None
    }
}

/// `inner`, with `hook` asked before each change, when the change is asked for (before its
/// future runs). Reads go straight through, unless the hook holds them
/// ([`BeforeChange::hold_read`]).
pub struct Hooked<S, H> {
    inner: S,
    hook: H,
}

impl<S, H> Hooked<S, H> {
    pub fn new(inner: S, hook: H) -> Self {
        Hooked { inner, hook }
    }

    pub fn inner(&self) -> &S {
        &self.inner
    }

    pub fn hook(&self) -> &H {
        &self.hook
    }
}

impl<S: Storage, H: BeforeChange> Hooked<S, H> {
    fn change<'a, T: Send + 'a>(
        &'a self,
        op: &'static str,
        key: &str,
        then: impl FnOnce() -> StorageFuture<'a, T> + Send + 'a,
    ) -> StorageFuture<'a, T> {
        if let Err(e) = self.hook.before_change(op, key) {
            return Box::pin(async move { Err(e) });
        }
        after_hold(self.hook.hold(op, key), then)
    }
}

/// `then`'s future, after `held` (a wait a hook asked for) where there is one.
fn after_hold<'a, T: Send + 'a>(
    held: Option<StorageFuture<'a, ()>>,
    then: impl FnOnce() -> StorageFuture<'a, T> + Send + 'a,
) -> StorageFuture<'a, T> {
    match held {
        None => then(),
        Some(held) => Box::pin(async move {
            held.await?;
            then().await
        }),
    }
}

impl<S: Storage, H: BeforeChange> Storage for Hooked<S, H> {
    fn head<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<ObjectInfo>> {
        self.inner.head(key)
    }
    fn size<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<u64>> {
        self.inner.size(key)
    }
    fn get<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<Versioned>> {
        after_hold(self.hook.hold_read(key), move || self.inner.get(key))
    }
    fn read<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<Vec<u8>>> {
        after_hold(self.hook.hold_read(key), move || self.inner.read(key))
    }
    fn put<'a>(&'a self, key: &'a str, bytes: &'a [u8]) -> StorageFuture<'a, ()> {
        self.change("put", key, move || self.inner.put(key, bytes))
    }
    fn put_if<'a>(
        &'a self,
        key: &'a str,
        bytes: &'a [u8],
        condition: Precondition<'a>,
    ) -> StorageFuture<'a, Option<String>> {
        self.change("put_if", key, move || {
            self.inner.put_if(key, bytes, condition)
        })
    }
    fn delete_if<'a>(&'a self, key: &'a str, version: &'a str) -> StorageFuture<'a, bool> {
        self.change("delete_if", key, move || self.inner.delete_if(key, version))
    }
    fn copy<'a>(
        &'a self,
        source: &'a CopySource<'a>,
        key: &'a str,
        known: &'a ObjectInfo,
        owner: Option<&'a str>,
    ) -> StorageFuture<'a, u64> {
        self.change("copy", key, move || {
            self.inner.copy(source, key, known, owner)
        })
    }
    fn copy_new<'a>(
        &'a self,
        source: &'a CopySource<'a>,
        key: &'a str,
        known: &'a ObjectInfo,
        owner: Option<&'a str>,
    ) -> StorageFuture<'a, Option<u64>> {
        self.change("copy_new", key, move || {
            self.inner.copy_new(source, key, known, owner)
        })
    }
    fn list<'a>(&'a self, prefix: &'a str) -> StorageFuture<'a, Vec<String>> {
        self.inner.list(prefix)
    }
    fn any_under<'a>(&'a self, prefix: &'a str) -> StorageFuture<'a, bool> {
        self.inner.any_under(prefix)
    }
    fn read_settled<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<Vec<u8>>> {
        self.inner.read_settled(key)
    }
    fn create_settled<'a>(&'a self, key: &'a str, bytes: &'a [u8]) -> StorageFuture<'a, bool> {
        self.change("create_settled", key, move || {
            self.inner.create_settled(key, bytes)
        })
    }
    fn traits(&self) -> StoreTraits {
        self.inner.traits()
    }
    fn delete<'a>(&'a self, key: &'a str) -> StorageFuture<'a, ()> {
        self.change("delete", key, move || self.inner.delete(key))
    }
    fn owned<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<Owned>> {
        self.inner.owned(key)
    }
    fn owned_unread<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<Owned>> {
        self.inner.owned_unread(key)
    }
    fn creates_only_new(&self, source: &CopySource<'_>, size: u64) -> bool {
        self.inner.creates_only_new(source, size)
    }
    fn read_source<'a>(
        &'a self,
        source: &'a CopySource<'a>,
        out: &'a mut (dyn std::io::Write + Send),
    ) -> StorageFuture<'a, u64> {
        self.inner.read_source(source, out)
    }
    fn put_encoded<'a>(
        &'a self,
        key: &'a str,
        staged: &'a Staged,
        meta: &'a EncodedMeta,
    ) -> StorageFuture<'a, ()> {
        self.change("put_encoded", key, move || {
            self.inner.put_encoded(key, staged, meta)
        })
    }
    fn encoded<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<(u64, EncodedMeta)>> {
        self.inner.encoded(key)
    }
}
