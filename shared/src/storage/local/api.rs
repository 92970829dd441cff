//! The `Storage` trait over a local store, and its reads of owners, listings and deletes.

use std::fs;
use std::io;

use super::owners::{owner_of, parse_owner_attribute};
use super::paths::{key_of, legacy_relative_path, walk_root};
use super::{not_found_is_none, LocalStore, LOCK_DIR, TMP_DIR};
use crate::digest::sha1_of;
use crate::storage::encoding::{EncodedMeta, Staged};
use crate::storage::{
    check_key, CopySource, ObjectInfo, Owned, Precondition, Storage, StorageFuture, StorageResult,
    StoreTraits, Versioned,
};

impl Storage for LocalStore {
    fn read_source<'a>(
        &'a self,
        source: &'a CopySource<'a>,
        out: &'a mut (dyn io::Write + Send),
    ) -> StorageFuture<'a, u64> {
        Box::pin(async move {
            let mut file = match source {
                CopySource::File(path) => fs::File::open(path)?,
                CopySource::Key(key) => self.read_at(key, |p| fs::File::open(p))??,
                CopySource::Bytes(bytes) => {
                    out.write_all(bytes)?;
                    return Ok(bytes.len() as u64);
                }
                CopySource::Object { .. } | CopySource::Range { .. } => {
                    return Err(io::Error::from(io::ErrorKind::Unsupported).into())
                }
            };
            Ok(io::copy(&mut file, out)?)
        })
    }
    fn put_encoded<'a>(
        &'a self,
        key: &'a str,
        staged: &'a Staged,
        meta: &'a EncodedMeta,
    ) -> StorageFuture<'a, ()> {
        Box::pin(async move {
            let _ends = self.ending();
            self.put_encoded_now(key, staged, meta)
        })
    }
    fn encoded<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<(u64, EncodedMeta)>> {
        Box::pin(async move { self.encoded_now(key) })
    }
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
    fn any_under<'a>(&'a self, prefix: &'a str) -> StorageFuture<'a, bool> {
        Box::pin(async move { self.any_under_now(prefix) })
    }
    fn traits(&self) -> StoreTraits {
        StoreTraits {
            names_owners: self.owners,
            uploads_by_location: self.by_location,
            key_copies_are_aliases: false,
            versions_are_free: false,
            source_records: self.source_records,
        }
    }
    fn delete<'a>(&'a self, key: &'a str) -> StorageFuture<'a, ()> {
        Box::pin(async move {
            let _ends = self.ending();
            self.delete_now(key)
        })
    }
}

impl LocalStore {
    /// What is at `key` and who wrote it, read together (from one open file).
    pub fn owned_now(&self, key: &str) -> StorageResult<Option<Owned>> {
        self.owned_read(key, true)
    }

    /// [`Self::owned_now`]; `hash`: the content is hashed even where the owner attribute
    /// names what was written (without it, `info.etag` is the written SHA-1: `verify`'s fast
    /// pass over every key reads no file's bytes).
    pub(super) fn owned_read(&self, key: &str, hash: bool) -> StorageResult<Option<Owned>> {
        let unowned = |info| Owned {
            info,
            owner: None,
            alias_of: None,
            written: None,
        };
        if !self.owners {
            return Ok(self.head_now(key)?.map(unowned));
        }
        let Some(mut file) = not_found_is_none(self.read_at(key, |p| fs::File::open(p))?)? else {
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
    pub(super) fn walk(&self, prefix: &str, each: &mut dyn FnMut(String)) -> StorageResult<()> {
        self.walk_until(prefix, &mut |key| {
            each(key);
            false
        })
    }

    /// [`Self::walk`] until `each` says it has seen enough (`true`).
    fn walk_until(&self, prefix: &str, each: &mut dyn FnMut(String) -> bool) -> StorageResult<()> {
        // Walk from the deepest directory the prefix names (never below a copies' directory:
        // its copies are flat, paths.rs), then filter by the full prefix.
        let dir_part = walk_root(prefix);
        let start = if dir_part.is_empty() {
            self.root.clone()
        } else {
            check_key(dir_part)?;
            self.root.join(dir_part)
        };
        // Depth first with one open directory a level, not a stack of every directory still
        // to walk: that held each directory's subdirectories at once (50,000 paths under
        // `buildid/` at 50,000 debug files, the peak of `verify`, which walks every key).
        let mut open = Vec::new();
        if let Some(entries) = read_dir(&start)? {
            open.push(entries);
        }
        while let Some(entries) = open.last_mut() {
            let Some(entry) = entries.next() else {
                open.pop();
                continue;
            };
            // A directory removed by a concurrent delete is simply no longer listed.
            let Ok(entry) = entry else { continue };
            let path = entry.path();
            let Ok(file_type) = entry.file_type() else {
                continue;
            };
            if file_type.is_dir() {
                if let Some(entries) = read_dir(&path)? {
                    open.push(entries);
                }
            } else if file_type.is_file() {
                if let Ok(rel) = path.strip_prefix(&self.root) {
                    let rel = rel
                        .to_string_lossy()
                        .replace(std::path::MAIN_SEPARATOR, "/");
                    let key = key_of(rel.clone());
                    if key.starts_with(prefix)
                        && !key.starts_with(TMP_DIR)
                        && !key.starts_with(LOCK_DIR)
                        && !self.listed_twice(&rel, &key)
                        && each(key)
                    {
                        return Ok(());
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether any key is under `prefix`: the walk stops at the first (a listing of every
    /// key under it, the default, read a whole store's source records to say there are some).
    pub fn any_under_now(&self, prefix: &str) -> StorageResult<bool> {
        let mut found = false;
        self.walk_until(prefix, &mut |_| {
            found = true;
            true
        })?;
        Ok(found)
    }

    /// Deletes `key` (a published object's owner goes with its file).
    pub fn delete_now(&self, key: &str) -> StorageResult<()> {
        self.delete_file(key)
    }

    /// Removes an older store's nested copy of `key` (paths.rs), then `key`'s file, each
    /// with the directories it leaves empty. In that order: readers look at the flat file
    /// first, so one between the two removals (or after a crash there) finds the newest
    /// copy or none, never the older nested one behind a flat file already gone.
    pub(super) fn delete_file(&self, key: &str) -> StorageResult<()> {
        let path = self.path_of(key)?;
        if let Some(legacy) = legacy_relative_path(key) {
            self.remove_with_parents(&self.root.join(legacy))?;
        }
        self.remove_with_parents(&path)?;
        Ok(())
    }
}

/// A directory's entries; `None` where it is gone (removed by a concurrent delete).
fn read_dir(dir: &std::path::Path) -> io::Result<Option<fs::ReadDir>> {
    match fs::read_dir(dir) {
        Ok(entries) => Ok(Some(entries)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}
