//! Whose an object is, where objects name their owner (invariant 7): the upload an owner
//! names ([`SameBy`], the upload's record read or shared), and the record a key without one
//! stands for.

use std::io;

use super::keys::KeyRecord;
use super::layout::is_upload_name;
use super::uploads::UploadRecord;
use super::RefStore;
use crate::storage::{Owned, UPLOADS_DIR};

/// Who else wrote the same content found at a key (invariant 7).
pub(super) enum SameBy {
    /// Nobody named (written outside symdex): adopted, unless our own earlier attempt's.
    Nobody,
    /// This upload (an earlier or concurrent run of it).
    Us,
    /// Another upload, still there: both reference the key now.
    Upload(String, Option<String>),
    /// Ours to write again: an upload whose record is gone named it (an orphan), or this
    /// upload did and it holds other bytes now (changed behind symdex's back: repaired).
    Replace,
}

impl<'s> RefStore<'s> {
    /// Whether keys one upload alone references go without a record (invariant 7): where
    /// objects name their owners, whether writers run at once or one holds the writer lock.
    pub(super) fn owners_named(&self) -> bool {
        self.traits.names_owners
    }

    /// The owner to name in an object whose record says `by` wrote it.
    pub(super) async fn owner_for(&self, by: &str) -> io::Result<Option<String>> {
        if !self.owners_named() || by.is_empty() {
            return Ok(None);
        }
        Ok(Some(self.owner_token(by).await?))
    }

    /// The record a key without one stands for (invariant 7): its object's owner alone
    /// references it. `None`: nothing there, written outside symdex, or its owner's upload
    /// record is gone (an orphan, which `verify` reports).
    pub(super) async fn owned_key(&self, key: &str) -> io::Result<Option<KeyRecord>> {
        let Some(found) = self.store.owned(key).await? else {
            return Ok(None);
        };
        self.owned_key_of(key, found, |_| None).await
    }

    /// [`Self::owned_key`] of what was `found` at `key`; `listed`: the upload an owner names,
    /// where the caller knows it (else its record is read).
    pub(super) async fn owned_key_of(
        &self,
        key: &str,
        found: Owned,
        listed: impl Fn(&str) -> Option<String>,
    ) -> io::Result<Option<KeyRecord>> {
        let Some(owner) = found.owner else {
            return Ok(None);
        };
        let upload = match listed(&owner) {
            Some(upload) => upload,
            None => match self.upload_by_owner(&owner).await? {
                Some(upload) => upload,
                None => return Ok(None),
            },
        };
        // The content named with the owner stands for the record's (what is there now may
        // have been changed in place since, which `verify` reports as for a record).
        let written = found.written.unwrap_or(found.info);
        Ok(Some(KeyRecord {
            key: key.to_string(),
            etag: written.etag,
            size: written.size,
            refs: [upload.clone()].into(),
            by: upload,
            lease: None,
            alias_of: found.alias_of,
        }))
    }

    /// The id of the upload an object names as its owner ([`owner_token`]).
    pub(super) async fn upload_by_owner(&self, owner: &str) -> io::Result<Option<String>> {
        if !is_upload_name(owner) {
            return Ok(None);
        }
        let file = format!("{UPLOADS_DIR}{owner}.json");
        let record = self.read::<UploadRecord>(&file).await?;
        // Its product is kept for an overwrite's check of it (overwrites.rs): no read more.
        Ok(record.map(|u| {
            self.remember_product(&u.upload, u.meta.product);
            u.upload
        }))
    }

    /// Whose the object of the same content found at a key is (invariant 7). The owner's
    /// record is read after the object was seen, never taken from a read already in flight
    /// (as [`Self::read_listing`] does): one begun earlier may predate the owner's
    /// registration, and would call a live upload's object an orphan's (`SameBy::Replace`).
    pub(super) async fn same_by(&self, upload: &str, found: Owned) -> io::Result<SameBy> {
        let Some(owner) = found.owner else {
            return Ok(SameBy::Nobody);
        };
        if owner == self.owner_token(upload).await? {
            return Ok(SameBy::Us);
        }
        // A kept answer may be older than this key's object was seen, yet it is as good: the
        // record naming the owner's upload is there (created, or found) before the object is
        // seen (the `create` lease's look, or `share_created`'s), and the owner's removal
        // deletes every object naming it before it forgets the upload — the object seen
        // after our record was there, the removal had not passed the key yet, and meets our
        // record when it does. (Only an object the owner's run wrote after its removal had
        // passed the key, left by a crash before that run's finalize took it back, names a
        // gone upload: a fresh read replaces it, a kept answer names the gone upload in the
        // record — a key kept, which `verify` reports, never one lost. A fresh read during
        // that removal names it too.)
        Ok(match self.upload_named_by(&owner).await? {
            Some(other) => SameBy::Upload(other, found.alias_of),
            None => SameBy::Replace,
        })
    }

    /// The upload `owner` names, from [`Self::known_owners`] where it was found (or is being
    /// read), else read. Found gone, it is asked again by the next key: only a read begun
    /// after this key's object was seen may call it gone (see `same_by`).
    pub(super) async fn upload_named_by(&self, owner: &str) -> io::Result<Option<String>> {
        let read = || self.upload_by_owner(owner);
        let (found, ours) = self.known_owners.read(owner, read, Option::is_some).await?;
        match found {
            // Gone by a read another key began (perhaps before our object was seen): ask anew.
            None if !ours => self.upload_by_owner(owner).await,
            found => Ok(found),
        }
    }
}
