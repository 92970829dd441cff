//! The object at a key: created where nothing is, shared with another upload's same bytes,
//! copied under a lease, or taken back (invariants 1, 2 and 7). Whose an object is, is
//! owners.rs's.

use std::io;

use super::keys::KeyRecord;
use super::layout::key_file;
use super::lease::{Lease, CREATE};
use super::owners::SameBy;
use super::patience::busy;
use super::publication::{Content, KeyOutcome, Publication};
use super::swap::Step;
use super::RefStore;
use crate::storage::encoding::{copy_key, Encoding};
use crate::storage::{ObjectInfo, Owned, Precondition, StorageError, Versioned};

/// How [`RefStore::copy_under_lease`] treats an object it finds at the key.
#[derive(Clone)]
pub(super) struct CopyHow {
    /// Other content is replaced (else: a conflict) — another upload's only where that
    /// upload is of `product` (overwrites.rs).
    pub(super) overwrite: bool,
    /// The publisher's product (`None`: it names none).
    pub(super) product: Option<String>,
    /// The lease was our own earlier attempt's (the same content there is our copy).
    pub(super) own: bool,
    /// The upload the record names as the object's writer (`by`): the owner a write names
    /// (invariant 7).
    pub(super) by: String,
    /// Any content found at the key is taken as this content (`OnDifferent::Adopt`).
    pub(super) adopt: bool,
    /// An object was found at the key just before: a [`CREATE`] lease looks before it
    /// creates (one request where it is still there, as it most likely is).
    pub(super) seen: bool,
}

/// What a [`CREATE`] lease's holder found at the key.
pub(super) enum Found {
    Created,
    /// An object with the same content (or any, adopting), whose it is, and what it holds.
    Same(SameBy, ObjectInfo),
    /// Other content: written outside symdex, or (where objects name their owners) the
    /// owner's, named.
    Other(Option<String>),
}

/// Whether the object `found` holds `content`, as its writer said it would: one whose bytes
/// are not what its owner wrote with it (a local file changed in place; a copy from a key
/// an overwrite replaced meanwhile, `Indexer::hold_for`) is not its owner's to share, even
/// where the bytes are ours.
pub(super) fn holds(found: &Owned, content: &Content<'_>) -> bool {
    let as_written = found
        .written
        .as_ref()
        .is_none_or(|w| w.etag == found.info.etag && w.size == found.info.size);
    found.info.etag == content.etag && found.info.size == content.size && as_written
}

/// What creating an object only where nothing is came to ([`RefStore::create_or_find`]).
pub(super) enum Creation {
    Created,
    /// Something is there: what, and whose.
    Found(Owned),
    /// The copy failed; nothing was created.
    Failed(StorageError),
}

/// What publishing a key as its object alone came to ([`RefStore::publish_owned`]).
pub(super) enum Alone {
    /// No record needed: the key's outcome.
    Done(Publication),
    /// For the record protocol to decide, on the key's record where it was just read; with
    /// the other upload whose object of this content was found there, to be shared.
    Decide(Option<Versioned>, Option<Sharing>),
}

/// Another upload's object found at a key without a record, which this upload shares
/// (invariant 7): whose it is, and what it holds.
#[derive(Debug, Clone)]
pub(super) struct Sharing {
    /// The upload its owner names, and the owner as the object names it.
    pub(super) other: String,
    pub(super) owner: String,
    pub(super) alias_of: Option<String>,
    pub(super) info: ObjectInfo,
}

impl<'s> RefStore<'s> {
    /// Publishes `content` at a key without a record by creating its object, which names
    /// this upload as its owner (invariant 7): one request where the key is new. Else what
    /// is there may be for the record protocol to decide (other content, an object written
    /// outside symdex, another upload's object, a record).
    pub(super) async fn publish_owned(
        &self,
        key: &str,
        upload: &str,
        content: &Content<'_>,
        fresh: bool,
        adopt: bool,
    ) -> io::Result<Alone> {
        let owner = self.owner_token(upload).await?;
        let found = match self
            .create_or_find(key, content, Some(&owner), false)
            .await?
        {
            Creation::Created => return Ok(Alone::Done(KeyOutcome::Published.into())),
            // Nothing recorded yet: a failed copy leaves nothing to take back.
            Creation::Failed(e) => return Err(e.into()),
            Creation::Found(found) => found,
        };
        let same = holds(&found, content);
        let ours = found.owner.as_deref() == Some(owner.as_str());
        // Other content, not ours, and this upload neither overwrites nor adopts: a conflict,
        // decided on what the key holds now (invariant 7, last point) — the record protocol
        // would take a `create` lease only to find the same object and drop the record again
        // (six requests more per key).
        if !ours && !same && !adopt {
            return Ok(Alone::Done(KeyOutcome::Conflict.into()));
        }
        // Our own earlier or concurrent run's object. Anything else — another upload's (to be
        // shared), written outside symdex — is decided under a `create` lease: while a record
        // holds one, the owner's removal waits for it instead of deleting the object we are
        // about to reference. Another upload's is looked up now, so that the record is
        // created as sharing will leave it, and released by our finalize (one write per key
        // saved, `share_created`).
        if !(ours && (same || adopt)) {
            use std::sync::atomic::Ordering::Relaxed;
            if found.owner.is_some() && !ours && self.shared_before.load(Relaxed) {
                match self.store.get(&key_file(key)).await? {
                    Some(record) => return Ok(Alone::Decide(Some(record), None)),
                    None => self.shared_before.store(false, Relaxed),
                }
            }
            let sharing = match &found.owner {
                Some(owner) if !ours => {
                    let owner = owner.clone();
                    let info = found.info.clone();
                    match self.same_by(upload, found).await? {
                        SameBy::Upload(other, alias_of) => Some(Sharing {
                            other,
                            owner,
                            alias_of,
                            info,
                        }),
                        _ => None,
                    }
                }
                _ => None,
            };
            return Ok(Alone::Decide(None, sharing));
        }
        // Ours stands for the record only where there is none: a record left naming us as its
        // writer after our reference went (another upload shares the key) must get our
        // reference back. A fresh upload's record was guessed absent, unread: read now (a
        // sharer's record created since a read names the owner too).
        if fresh {
            if let Some(record) = self.store.get(&key_file(key)).await? {
                return Ok(Alone::Decide(Some(record), None));
            }
        }
        let outcome = if fresh {
            KeyOutcome::Published
        } else {
            KeyOutcome::Unchanged
        };
        // The object stands for the record (invariant 7): it names its target itself.
        Ok(Alone::Done(Publication::new(outcome, found.alias_of)))
    }

    /// Creates `content` at `key` only where nothing is, naming `owner`; else reads what is
    /// there. A few rounds: an object found and then gone (deleted meanwhile) is created
    /// again. Where the store's copy may replace what it finds (some servers ignore
    /// `If-None-Match` on CopyObject), it is made only where nothing was seen just before:
    /// an object created in between by a writer relying on its copy alone (invariant 7)
    /// could still be replaced — a window of one request, closed where copies are atomic.
    /// `seen`: an object was at the key just before, so the first round looks first (one
    /// request, not a failed creation and a look).
    pub(super) async fn create_or_find(
        &self,
        key: &str,
        content: &Content<'_>,
        owner: Option<&str>,
        seen: bool,
    ) -> io::Result<Creation> {
        let known = ObjectInfo {
            size: content.size,
            etag: content.etag.to_string(),
        };
        let look_first = !self.store.creates_only_new(&content.source, content.size);
        for round in 0..4 {
            if look_first || (seen && round == 0) {
                if let Some(found) = self.store.owned(key).await? {
                    return Ok(Creation::Found(found));
                }
            }
            match self
                .store
                .copy_new(&content.source, key, &known, owner)
                .await
            {
                Ok(Some(_)) => return Ok(Creation::Created),
                Ok(None) => {}
                Err(e) => return Ok(Creation::Failed(e)),
            }
            if let Some(found) = self.store.owned(key).await? {
                return Ok(Creation::Found(found));
            }
        }
        Err(busy(&format!(
            "{key}: created and deleted by others meanwhile"
        )))
    }

    /// Ends a `create` lease on a record written as sharing `sharing`'s object (invariant 7):
    /// the object is looked at again, now that the record is there. Still that upload's, of
    /// the recorded content, the record says what is there — the owner's removal had not
    /// passed the key (it deletes the object first), and meets the record when it does — and
    /// the lease is left to our finalize, as a creation's (invariant 1): the copy, a look,
    /// the record and a look, where releasing it took a write more. Gone or changed
    /// meanwhile, the record goes back to naming this upload alone, as a `create` lease's is
    /// written (on the version written: else the lease was taken over, and we are too slow),
    /// and the creation decides on what is there now.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn share_created(
        &self,
        key: &str,
        upload: &str,
        content: &Content<'_>,
        lease: &Lease,
        (record, version): (KeyRecord, Option<String>),
        sharing: &Sharing,
        how: CopyHow,
    ) -> io::Result<Publication> {
        self.check_own_lease(lease)?;
        let now = self.store.owned(key).await?;
        let still = now.as_ref().is_some_and(|found| {
            found.owner.as_deref() == Some(sharing.owner.as_str())
                && found.info.etag == record.etag
                && found.info.size == record.size
                && found.alias_of == record.alias_of
        });
        if still {
            self.held.keep(key, lease);
            return Ok(Publication::new(KeyOutcome::Unchanged, record.alias_of));
        }
        let alone = KeyRecord {
            etag: content.etag.to_string(),
            size: content.size,
            refs: [upload.to_string()].into(),
            by: upload.to_string(),
            alias_of: self.alias_target(content),
            ..record
        };
        let bytes = serde_json::to_vec(&alone)?;
        let rewritten = match &version {
            Some(version) => {
                let condition = Precondition::Version(version);
                self.store.put_if(&key_file(key), &bytes, condition).await?
            }
            None => None,
        };
        let Some(version) = rewritten else {
            return Err(busy(&format!(
                "{key}: its record changed while sharing it (lease taken over)"
            )));
        };
        let how = CopyHow {
            seen: now.is_some(),
            ..how
        };
        self.copy_under_lease(key, upload, content, lease, Some((alone, version)), how)
            .await
    }

    /// Copies the content to `key`; on a failure the upload's reference is taken back (its
    /// record must not claim an object that is not there) — while the record still holds
    /// `lease`, where the copy was made under one ([`Self::take_back`]).
    pub(super) async fn copy_or_take_back(
        &self,
        key: &str,
        upload: &str,
        content: &Content<'_>,
        by: &str,
        lease: Option<&Lease>,
    ) -> io::Result<()> {
        let known = ObjectInfo {
            size: content.size,
            etag: content.etag.to_string(),
        };
        let owner = self.owner_for(by).await?;
        // The object may change its content here (a replacement): its compressed copies go
        // first, under the same lease (crate::encoded; the encode step makes new ones).
        self.delete_copies(key).await?;
        let copied = self
            .store
            .copy(&content.source, key, &known, owner.as_deref())
            .await;
        if let Err(e) = copied {
            self.take_back(key, upload, lease).await?;
            return Err(e.into());
        }
        Ok(())
    }

    /// Deletes the compressed copies of `key` (crate::encoded), in every encoding: before
    /// the object goes or changes, so that no copy outlives or misstates it.
    pub(super) async fn delete_copies(&self, key: &str) -> io::Result<()> {
        for encoding in Encoding::ALL {
            self.store.delete(&copy_key(encoding, key)).await?;
        }
        Ok(())
    }

    /// Takes `upload`'s reference back after its copy failed. Made under `lease`, only while
    /// the record still holds that lease: taken over meanwhile (by another run of the same
    /// upload, which takes a lease of its holder over at once, invariant 1), the reference
    /// is the new holder's, who may have written the object and listed the key since — taken
    /// back regardless, that run's key was unpublished under it (a source handed on by a
    /// removal and published by its debug file at once, the removal's copy failing:
    /// `a_source_removal_dying_while_its_debug_file_arrives_is_finished_by_its_retry`).
    pub(super) async fn take_back(
        &self,
        key: &str,
        upload: &str,
        lease: Option<&Lease>,
    ) -> io::Result<()> {
        self.remove_reporting(key, upload, false, lease).await?;
        Ok(())
    }

    /// Copies the content while holding `lease`, then releases it. On a failed copy the
    /// reference is taken back (the record must not claim an object that is not there).
    /// `written`: the record as the lease was taken and its version, when known: released by
    /// one conditional write on that version (it fails only if the record changed, i.e. the
    /// lease was taken over; then the record is read again and its new holder decides).
    /// A [`CREATE`] lease creates the object only where nothing is, and otherwise decides on
    /// what it finds: the same content is adopted (the record names no writer), other content
    /// is replaced (`overwrite`) or a conflict (the record goes: it claims nothing there).
    pub(super) async fn copy_under_lease(
        &self,
        key: &str,
        upload: &str,
        content: &Content<'_>,
        lease: &Lease,
        written: Option<(KeyRecord, String)>,
        how: CopyHow,
    ) -> io::Result<Publication> {
        self.check_own_lease(lease)?;
        let mut adopted = false;
        // Another upload's object of the same content, found where its record was absent
        // (invariant 7): the record names it too, and its writer.
        let mut shared: Option<(String, Option<String>, ObjectInfo)> = None;
        if lease.op == CREATE {
            match self
                .create_object(key, upload, content, lease, how.adopt, how.seen)
                .await?
            {
                Found::Created | Found::Same(SameBy::Us, _) => {}
                // Our own earlier attempt's copy, or the same bytes written outside symdex.
                Found::Same(SameBy::Nobody, _) => adopted = !how.own,
                Found::Same(SameBy::Upload(other, alias_of), info) => {
                    shared = Some((other, alias_of, info))
                }
                Found::Same(SameBy::Replace, _) => {
                    self.copy_or_take_back(key, upload, content, &how.by, Some(lease))
                        .await?
                }
                Found::Other(owner) if how.overwrite => {
                    let product = how.product.as_deref();
                    let replaced = self.may_replace_owned(key, upload, owner, product);
                    let Some(displaced) = replaced.await? else {
                        self.drop_created(key, lease).await?;
                        return Ok(Publication::refused());
                    };
                    self.copy_or_take_back(key, upload, content, &how.by, Some(lease))
                        .await?;
                    self.note_overwrote(upload, displaced);
                }
                Found::Other(_) => {
                    self.drop_created(key, lease).await?;
                    return Ok(KeyOutcome::Conflict.into());
                }
            }
        } else {
            self.copy_or_take_back(key, upload, content, &how.by, Some(lease))
                .await?;
        }
        if let Some((other, alias_of, info)) = shared {
            // The record says what the other upload's object holds (an adopted `.meta` of
            // another name may differ from ours).
            let share = |r: &mut KeyRecord| {
                r.lease = None;
                r.refs.insert(other.clone());
                r.by.clone_from(&other);
                r.alias_of.clone_from(&alias_of);
                r.etag.clone_from(&info.etag);
                r.size = info.size;
            };
            let outcome = self
                .release_as(key, lease, written, share, KeyOutcome::Unchanged)
                .await?;
            return Ok(Publication::new(outcome, alias_of));
        }
        if lease.op == CREATE && !adopted {
            // Created (or our own earlier attempt's copy found): the record, written with the
            // lease, already says what is there; the upload's finalize releases the lease by
            // listing the key (invariant 1), saving a write per key.
            self.held.keep(key, lease);
            return Ok(KeyOutcome::Published.into());
        }
        let alias_of = if adopted {
            None
        } else {
            self.alias_target(content)
        };
        let release = |r: &mut KeyRecord| {
            r.lease = None;
            r.alias_of.clone_from(&alias_of);
            if adopted && r.by == upload {
                r.by.clear();
            }
        };
        let outcome = if adopted {
            KeyOutcome::Unchanged
        } else {
            KeyOutcome::Published
        };
        let outcome = self
            .release_as(key, lease, written, release, outcome)
            .await?;
        Ok(Publication::new(outcome, alias_of))
    }

    /// Releases `lease` on `key`'s record, changed by `release`: by one conditional write on
    /// the version `written` when known, else on a read.
    pub(super) async fn release_as(
        &self,
        key: &str,
        lease: &Lease,
        written: Option<(KeyRecord, String)>,
        release: impl Fn(&mut KeyRecord),
        outcome: KeyOutcome,
    ) -> io::Result<KeyOutcome> {
        let file = key_file(key);
        if let Some((mut record, version)) = written {
            release(&mut record);
            let bytes = serde_json::to_vec(&record)?;
            let condition = Precondition::Version(&version);
            if self.store.put_if(&file, &bytes, condition).await?.is_some() {
                return Ok(outcome);
            }
        }
        self.update(&file, |current: Option<KeyRecord>| match current {
            Some(mut r) if r.lease.as_ref() == Some(lease) => {
                release(&mut r);
                Ok(Step::Write(r, ()))
            }
            // Taken over (we were too slow): the new holder decides.
            _ => Ok(Step::Keep(())),
        })
        .await?;
        Ok(outcome)
    }

    /// Creates the object at `key` where nothing is; else says whether what is there holds
    /// the same content. On a failed copy the reference is taken back. `seen`: as
    /// [`Self::create_or_find`].
    pub(super) async fn create_object(
        &self,
        key: &str,
        upload: &str,
        content: &Content<'_>,
        lease: &Lease,
        adopt: bool,
        seen: bool,
    ) -> io::Result<Found> {
        let owner = self.owner_for(upload).await?;
        let found = self.create_or_find(key, content, owner.as_deref(), seen);
        let found = match found.await? {
            Creation::Created => return Ok(Found::Created),
            Creation::Failed(e) => {
                self.take_back_created(key, upload, lease).await?;
                return Err(e.into());
            }
            Creation::Found(found) => found,
        };
        let same = holds(&found, content);
        Ok(if adopt || same {
            let info = found.info.clone();
            Found::Same(self.same_by(upload, found).await?, info)
        } else if owner.is_some() && found.owner == owner {
            Found::Same(SameBy::Replace, found.info)
        } else {
            Found::Other(found.owner)
        })
    }

    /// Takes `upload`'s reference back from the record its [`CREATE`] lease made, its creation
    /// having failed: nothing was created, so nothing is deleted — the record goes, or keeps
    /// the other uploads it names (one written as sharing). Only while the lease is ours (see
    /// [`Self::take_back`]: a run that took it over decides). Taken back as a removal would
    /// (a tombstone, the object deleted), a run of the same upload taking the lease over
    /// waited for that tombstone instead, and gave up.
    pub(super) async fn take_back_created(
        &self,
        key: &str,
        upload: &str,
        lease: &Lease,
    ) -> io::Result<()> {
        self.update(&key_file(key), |current: Option<KeyRecord>| match current {
            Some(mut r) if r.lease.as_ref() == Some(lease) => {
                r.refs.remove(upload);
                if r.refs.is_empty() {
                    return Ok(Step::Delete(()));
                }
                r.lease = None;
                Ok(Step::Write(r, ()))
            }
            _ => Ok(Step::Keep(())),
        })
        .await
    }

    /// Removes the record a [`CREATE`] lease made for an object that turned out to be
    /// somebody else's: nothing symdex wrote is there. Only while the lease is ours.
    pub(super) async fn drop_created(&self, key: &str, lease: &Lease) -> io::Result<()> {
        self.update(&key_file(key), |current: Option<KeyRecord>| match current {
            Some(r) if r.lease.as_ref() == Some(lease) => Ok(Step::Delete(())),
            _ => Ok(Step::Keep(())),
        })
        .await
    }
}
