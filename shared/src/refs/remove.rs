//! Removing an upload's reference to a key, and the object with its last reference
//! (invariant 3).

use std::io;

use super::keys::KeyRecord;
use super::layout::key_file;
use super::lease::{remove_holder, Lease};
use super::listing::Listed;
use super::patience::Patience;
use super::prior::Prior;
use super::swap::Step;
use super::RefStore;

/// What taking one reference back came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoveOutcome {
    /// It was the last reference: the object was deleted.
    Removed,
    /// Other uploads still reference the key.
    Kept,
    /// The upload did not reference the key.
    NotReferenced,
}

/// What a removal's compare-and-swap on a key's record came to.
pub(super) struct Taken {
    pub(super) outcome: RemoveOutcome,
    /// The tombstone's lease, when the object is to go.
    pub(super) lease: Option<Lease>,
    /// Whom the record names as the object's writer.
    pub(super) by: String,
    /// A tombstone made where no record was (invariant 7): only an object naming `by` as its
    /// owner is the one it is for.
    pub(super) owned_only: bool,
}

impl<'s> RefStore<'s> {
    /// Takes `upload`'s reference to `key` back; the last one out deletes the object under a
    /// tombstone lease (invariant 3). Also finishes a dead remover's tombstone.
    pub async fn remove(&self, key: &str, upload: &str) -> io::Result<RemoveOutcome> {
        self.remove_reporting(key, upload, false, None).await
    }

    /// [`Self::remove`] for an upload being removed: a key it unpublishes is noted in its
    /// upload record (`removed`) before the tombstone goes. Noted after, a failure in between
    /// lost the key from the removal's report: its retry found neither record nor reference.
    /// Noted before, the retry finds its own tombstone and reports the key again.
    pub(crate) async fn remove_noted(&self, key: &str, upload: &str) -> io::Result<RemoveOutcome> {
        self.remove_reporting(key, upload, true, None).await
    }

    /// `leased`: only while the record holds this lease of ours ([`Self::take_back`]).
    pub(super) async fn remove_reporting(
        &self,
        key: &str,
        upload: &str,
        note: bool,
        leased: Option<&Lease>,
    ) -> io::Result<RemoveOutcome> {
        let file = key_file(key);
        let holder = remove_holder(upload);
        let mut listed = Listed::new();
        let mut patience = Patience::new(self.policy.wait);
        let (taken, version) = loop {
            let (taken, version) = self
                .update_versioned(&file, Prior::Unread, |current: Option<KeyRecord>| {
                    if let Some(ours) = leased {
                        // Ours still: nobody else acts on the key meanwhile, and the lease is
                        // replaced below (by a tombstone's, or cleared). Else not ours to take.
                        match current {
                            Some(mut record) if record.lease.as_ref() == Some(ours) => {
                                record.lease = None;
                                return self.take_back_step(record, upload, &holder, false);
                            }
                            _ => return Ok(Step::Keep(Ok(None))),
                        }
                    }
                    let Some(mut record) = current else {
                        if !self.owners_named() {
                            return Ok(Step::Keep(Ok(None)));
                        }
                        // No record: the object may be this upload's alone (invariant 7). A
                        // tombstone holding our lease, created only where no record is, keeps
                        // every writer and sharer off while we look whose it is.
                        let lease = self.new_lease("remove", &holder);
                        let tombstone = KeyRecord {
                            key: key.to_string(),
                            by: upload.to_string(),
                            lease: Some(lease.clone()),
                            ..Default::default()
                        };
                        let taken = Taken {
                            outcome: RemoveOutcome::Removed,
                            lease: Some(lease),
                            by: upload.to_string(),
                            owned_only: true,
                        };
                        return Ok(Step::Write(tombstone, Ok(Some(taken))));
                    };
                    if let Err(holder) = self.settle(&mut record, &listed) {
                        return Ok(Step::Keep(Err(holder)));
                    }
                    // Our own earlier attempt's tombstone: its removal is ours to finish and report.
                    let ours = record.lease.as_ref().is_some_and(|l| l.holder == holder);
                    if self.blocked(&record, &holder) {
                        if let Some(creator) = self.creating(&record) {
                            return Ok(Step::Keep(Err(creator)));
                        }
                        return Ok(Step::Wait(format!("{key}: a change is in progress")));
                    }
                    self.take_back_step(record, upload, &holder, ours)
                })
                .await?;
            match taken {
                Ok(taken) => break (taken, version),
                Err(creator) => {
                    self.learn_listing(&creator, &mut listed, &mut patience, key)
                        .await?
                }
            }
        };
        match (taken, version) {
            (None, _) => Ok(RemoveOutcome::NotReferenced),
            (Some(taken), Some(tombstone)) if taken.lease.is_some() => {
                self.delete_under(key, upload, note, taken, &tombstone.version)
                    .await
            }
            (Some(taken), _) => Ok(taken.outcome),
        }
    }

    /// The last reference taken back ([`Self::remove_reporting`]), under the tombstone its
    /// swap wrote (at `tombstone`): the object deleted, the key noted (`note`) before it goes,
    /// then the tombstone. Returns what the removal came to.
    async fn delete_under(
        &self,
        key: &str,
        upload: &str,
        note: bool,
        taken: Taken,
        tombstone: &str,
    ) -> io::Result<RemoveOutcome> {
        let Taken {
            mut outcome,
            lease,
            by,
            owned_only,
        } = taken;
        if let Some(lease) = &lease {
            self.check_own_lease(lease)?;
        }
        let delete = if self.owners_named() {
            // Only the object the tombstone is for (invariant 7): one created since the
            // object was deleted (by a writer finding the key free, which needs no
            // record) names another owner, and stays.
            let found = self.store.owned(key).await?;
            let owner = found.as_ref().and_then(|f| f.owner.clone());
            let named = owner.is_some() && owner == self.owner_for(&by).await?;
            let delete = found.is_some() && (named || (owner.is_none() && !owned_only));
            if owned_only && by == upload && !delete {
                outcome = RemoveOutcome::NotReferenced;
            }
            delete
        } else {
            true
        };
        // Noted before the object goes: a retry that finds it gone still reports it.
        if note && outcome == RemoveOutcome::Removed {
            self.note_removed(upload, key).await?;
        }
        if delete {
            // Its compressed copies first (crate::encoded): a copy never outlives its key.
            self.delete_copies(key).await?;
            self.store.delete(key).await?;
        }
        // Only our tombstone goes: one taken over meanwhile stays its new holder's.
        self.store.delete_if(&key_file(key), tombstone).await?;
        Ok(outcome)
    }

    /// [`Self::remove_reporting`]'s swap, on a record nobody else's live lease holds:
    /// `upload`'s reference taken out, and the record kept (others reference it) or
    /// tombstoned under `holder`'s lease (the last one out, invariant 3). `ours`: the record
    /// is our own earlier attempt's tombstone.
    #[allow(clippy::type_complexity)]
    pub(super) fn take_back_step(
        &self,
        mut record: KeyRecord,
        upload: &str,
        holder: &str,
        ours: bool,
    ) -> io::Result<Step<KeyRecord, Result<Option<Taken>, String>>> {
        let had = record.refs.remove(upload) || (ours && record.refs.is_empty());
        if !had && !record.refs.is_empty() {
            return Ok(Step::Keep(Ok(None)));
        }
        // A tombstone made where no record was (invariant 7) names no content.
        let owned_only = record.refs.is_empty() && record.etag.is_empty();
        if !record.refs.is_empty() {
            let kept = Taken {
                outcome: RemoveOutcome::Kept,
                lease: None,
                by: record.by.clone(),
                owned_only,
            };
            return Ok(Step::Write(record, Ok(Some(kept))));
        }
        // The last reference (or a dead remover's tombstone): an empty record holding our
        // lease, written before the object goes (invariant 3).
        let lease = self.new_lease("remove", holder);
        record.lease = Some(lease.clone());
        let outcome = if had {
            RemoveOutcome::Removed
        } else {
            RemoveOutcome::NotReferenced
        };
        let taken = Taken {
            outcome,
            lease: Some(lease),
            by: record.by.clone(),
            owned_only,
        };
        Ok(Step::Write(record, Ok(Some(taken))))
    }
}
