//! Where a key's file lives in a local store: at the key's own path under the root, except a
//! compressed copy (`_symdex/encoded/<encoding>/<key>`, [`crate::storage::encoding`]), which
//! is one flat file of its encoding's directory, named after its raw key with every `/` as
//! [`FLAT_SEPARATOR`]: `_symdex/encoded/zstd/buildid\<id>\debuginfo`.
//!
//! Why: at the key's own path the copies repeated the whole layout tree beside the layouts
//! themselves, a directory more per layout's key directory (four per input with every
//! layout), each an inode and an entry to journal. Flat, they take none.
//!
//! Invariants:
//! - One path written per logical key ([`relative_path`]): writers, deleters and readers
//!   running at once meet at the same name, which a rename or a link replaces or creates
//!   atomically, exactly as at a nested path. The mapping depends on the key alone (never on
//!   what is on the disk), so every process picks the same name.
//! - The mapping can be undone ([`key_of`]): no key holds [`FLAT_SEPARATOR`]
//!   ([`crate::storage::check_key`] refuses it, as the layouts' names do), so a flat name
//!   names one raw key. Listing the store gives back the logical copy keys.
//! - A raw key longer than a file name may be ([`MAX_FLAT_NAME`]) keeps the nested path (its
//!   only path).
//! - Stores written before kept every copy at its nested path ([`legacy_relative_path`]):
//!   that path is only ever read, listed and removed, never written. A write goes to the
//!   flat name, then removes the nested one (where the handle found nested copies at all); a
//!   delete removes both; a read looks at the nested one only where the flat one is not, and
//!   at the flat one again where neither was (a writer in between wrote the flat one before
//!   it removed the nested one: the key was never absent). A nested copy beside a flat one
//!   (its writer died in between) is never read and is listed once, as the flat one.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::LocalStore;
use crate::storage::encoding::{raw_key_of, Encoding, ENCODED_PREFIX};
use crate::storage::{check_key, StorageResult};

/// What stands for `/` in a copy's flat name. No key may hold it (`check_key`); nor may a
/// layout's name (`layouts::Name`), which keeps Windows symbol caches working.
pub const FLAT_SEPARATOR: char = '\\';

/// The longest file name most file systems take (ext4, XFS, tmpfs, btrfs: `NAME_MAX`, bytes).
pub const MAX_FLAT_NAME: usize = 255;

/// The path of `key`'s file relative to the store's root (a checked key: no `..`, no `\`).
pub fn relative_path(key: &str) -> PathBuf {
    match flat_name(key) {
        Some((dir, name)) => PathBuf::from(dir).join(name),
        None => PathBuf::from(key),
    }
}

/// Where a store written before copies were flat kept `key`'s file, if that is not
/// [`relative_path`]: a copy's nested path.
pub fn legacy_relative_path(key: &str) -> Option<PathBuf> {
    flat_name(key).map(|_| PathBuf::from(key))
}

/// The directory (relative to the root) and the flat name of a copy key stored flat; `None`
/// for any other key (and a copy of a raw key without a `/`, whose nested path is flat).
fn flat_name(key: &str) -> Option<(&str, String)> {
    let (_, raw) = raw_key_of(key)?;
    if !raw.contains('/') || raw.len() > MAX_FLAT_NAME {
        return None;
    }
    let dir = &key[..key.len() - raw.len() - 1];
    Some((dir, raw.replace('/', &FLAT_SEPARATOR.to_string())))
}

/// The key a stored file names, given its path relative to the root with `/` separators:
/// a flat copy's name spelt out again. Anything else is its path.
pub fn key_of(relative: String) -> String {
    let flat = relative
        .strip_prefix(ENCODED_PREFIX)
        .and_then(|rest| rest.split_once('/'))
        .is_some_and(|(_, name)| name.contains(FLAT_SEPARATOR));
    if flat {
        relative.replace(FLAT_SEPARATOR, "/")
    } else {
        relative
    }
}

/// The key prefix whose directory a listing of `prefix` walks: the deepest directory the
/// prefix names, but never below a copies' directory (`_symdex/encoded/<encoding>`), where
/// the flat copies of every key beneath `prefix` lie side by side.
pub fn walk_root(prefix: &str) -> &str {
    let dir = prefix.rfind('/').map_or("", |i| &prefix[..i]);
    if let Some(rest) = dir.strip_prefix(ENCODED_PREFIX) {
        if let Some(at) = rest.find('/') {
            return &dir[..ENCODED_PREFIX.len() + at];
        }
    }
    dir
}

impl LocalStore {
    /// The file `key` is written to (validated: never outside the root). Reads go through
    /// [`LocalStore::read_at`], which finds an older store's copies too.
    pub fn path_of(&self, key: &str) -> StorageResult<PathBuf> {
        check_key(key)?;
        Ok(self.root.join(relative_path(key)))
    }

    /// `read` of `key`'s file: at [`LocalStore::path_of`], or where it is missing, at the
    /// nested path an older store kept a copy at. Missing there too, the flat name is tried
    /// once more: a writer meanwhile may have written it and removed the nested one (in that
    /// order), and the key was never absent. Any other key costs nothing more.
    pub(super) fn read_at<T>(
        &self,
        key: &str,
        mut read: impl FnMut(&Path) -> io::Result<T>,
    ) -> StorageResult<io::Result<T>> {
        let path = self.path_of(key)?;
        let first = read(&path);
        let Some(legacy) = legacy_relative_path(key) else {
            return Ok(first);
        };
        match first {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            found => return Ok(found),
        }
        match read(&self.root.join(legacy)) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(read(&path)),
            found => Ok(found),
        }
    }

    /// The file `key`'s content is read from: [`LocalStore::path_of`], or an older store's
    /// nested copy where only that exists (a copy source is then linked or copied from it).
    pub(super) fn found_path(&self, key: &str) -> StorageResult<PathBuf> {
        let found = self.read_at(key, |path| {
            fs::symlink_metadata(path).map(|_| path.to_path_buf())
        })?;
        match found {
            Ok(path) => Ok(path),
            Err(_) => self.path_of(key),
        }
    }

    /// After `key` was written at its flat name: the nested copy an older store kept goes
    /// (with the directories it leaves empty), so the key has one file again. Best effort: a
    /// nested copy left beside the flat one is never read (the flat one comes first) nor
    /// listed, and a delete removes both. In a store that holds no nested copy (every store
    /// made since) nothing is tried: not a call more per copy a fresh index writes.
    pub(super) fn drop_legacy(&self, key: &str) {
        let Some(legacy) = legacy_relative_path(key) else {
            return;
        };
        if *self
            .nested_copies
            .get_or_init(|| self.may_hold_nested_copies())
        {
            let _ = self.remove_with_parents(&self.root.join(legacy));
        }
    }

    /// Whether a copies' directory (`_symdex/encoded/<encoding>`) has a subdirectory: where
    /// nested copies are. A directory's link count is 2 and one per subdirectory on the file
    /// systems that count them (ext4, XFS, tmpfs); one that does not (btrfs says 1) or an
    /// error is taken for "may". Copies written flat never make a subdirectory (a raw key
    /// too long to be flat does, and the store's writers then try in vain: still right).
    fn may_hold_nested_copies(&self) -> bool {
        Encoding::ALL.into_iter().any(|encoding| {
            let dir = self.root.join(format!("{ENCODED_PREFIX}{encoding}"));
            match fs::symlink_metadata(dir) {
                Ok(meta) => meta.nlink() != 2,
                Err(e) => e.kind() != io::ErrorKind::NotFound,
            }
        })
    }

    /// Removes the file at `path` (`false`: there was none), then the directories it leaves
    /// empty up to the root, so a deleted build leaves no husks. (A concurrent writer whose
    /// directory goes here makes it again: see `commit`.)
    pub(super) fn remove_with_parents(&self, path: &Path) -> io::Result<bool> {
        match fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        }
        let mut dir = path.parent();
        while let Some(d) = dir {
            if d == self.root || fs::remove_dir(d).is_err() {
                break;
            }
            dir = d.parent();
        }
        Ok(true)
    }

    /// Whether the file found at `relative` (`/` separators) in a walk, naming `key`, is an
    /// older store's nested copy whose key has its flat file too: listed once, as the flat.
    pub(super) fn listed_twice(&self, relative: &str, key: &str) -> bool {
        relative == key
            && legacy_relative_path(key).is_some()
            && fs::symlink_metadata(self.root.join(relative_path(key))).is_ok()
    }
}

#[cfg(test)]
mod tests;
