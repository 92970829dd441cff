//! Publishing a key for an upload: the steps of [`RefStore::publish`] and the vocabulary of
//! their outcomes.

use std::collections::BTreeSet;
use std::io;

use super::lease::{index_holder, InTurn, Lease, Listed};
use super::records::{key_file, KeyRecord};
#[cfg(doc)]
use super::CREATE;
use super::{busy, Deciding, Patience, RefStore, RemoveOutcome};
use crate::storage::{CopySource, ObjectInfo, Owned, StorageError, Versioned};

/// What [`RefStore::publish`] does where a key's record names other content than the
/// upload's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnDifferent {
    /// Leave it, report a conflict.
    Conflict,
    /// Replace it (`--overwrite`).
    Overwrite,
    /// Take the published copy as this upload's: content symdex generates from an upload (a
    /// section, a sidecar) whose identity depends on how it was copied (an S3 part copy's
    /// ETag), so a live copy of it serves as well as a new one. An object written outside
    /// symdex is still a conflict.
    Adopt,
}

impl OnDifferent {
    /// `--overwrite` or not.
    pub fn overwrite(overwrite: bool) -> Self {
        if overwrite {
            OnDifferent::Overwrite
        } else {
            OnDifferent::Conflict
        }
    }
}

/// What one key's publication came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyOutcome {
    /// Bytes were written now, or by this same upload in an earlier, unfinished attempt.
    Published,
    /// The key already held this content; the upload now references it.
    Unchanged,
    /// The key holds other content (not overwritten): not referenced.
    Conflict,
}

/// A key's outcome, with what its publication learned on the way of the key's alias target
/// (invariant 6: an upload finding an alias in place holds its target too), so that the
/// upload need not read the key's record again to find out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publication {
    pub outcome: KeyOutcome,
    /// Found in place ([`KeyOutcome::Unchanged`]): the target the key's record names, as the
    /// publication left the record (every way to that outcome learns it). Else none.
    pub alias_of: Option<String>,
}

impl From<KeyOutcome> for Publication {
    /// An outcome other than [`KeyOutcome::Unchanged`], which comes with its target.
    fn from(outcome: KeyOutcome) -> Self {
        debug_assert_ne!(
            outcome,
            KeyOutcome::Unchanged,
            "a key found in place names its target"
        );
        Publication {
            outcome,
            alias_of: None,
        }
    }
}

/// The content an upload wants at a key.
#[derive(Debug, Clone, Copy)]
pub struct Content<'a> {
    pub etag: &'a str,
    pub size: u64,
    pub source: CopySource<'a>,
}

/// One step of a read-modify-write.
pub(super) enum Step<T, R> {
    Write(T, R),
    Delete(R),
    Keep(R),
    /// Nothing written, and what was read handed back: the caller learns more, then may
    /// decide again on that read.
    KeepRead(R),
    /// Somebody else's live lease: wait, then read again.
    Wait(String),
}

/// Who publishes a key: the upload referencing it, and the removal handing it on to that
/// upload, where one does (empty else; [`Lease::acting`]).
#[derive(Clone, Copy)]
pub(super) struct Publisher<'a> {
    pub(super) upload: &'a str,
    pub(super) acting: &'a str,
}

/// How [`RefStore::copy_under_lease`] treats an object it finds at the key.
#[derive(Clone)]
pub(super) struct CopyHow {
    /// Other content is replaced (else: a conflict).
    pub(super) overwrite: bool,
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

/// What [`RefStore::publish`] does after its compare-and-swap.
pub(super) enum PublishPlan {
    /// We hold the lease now: copy, then release. With the record as written (to release it
    /// by one conditional write on the version the swap returned). A `create` lease copies
    /// only where nothing is at the key (see [`CREATE`]).
    /// `true`: the lease was taken over from an earlier attempt of the same upload, so the
    /// same content found at the key is its own copy (published), not adopted.
    Copy(Lease, Box<KeyRecord>, bool),
    /// A sole writer's new key, its record written in its final state: copy.
    CopySole,
    /// Referenced, no lease needed: check the object is there, of the recorded size.
    Check {
        by_us: bool,
        size: u64,
        /// The target the record names.
        alias_of: Option<String>,
    },
    Done(KeyOutcome),
    /// No record: first ask what is at the key (an object written outside symdex).
    NeedHead,
    /// We hold a `create` lease on a record written as sharing another upload's object, seen
    /// just before: confirm the object is still that upload's ([`RefStore::share_created`]).
    Share(Lease, Box<KeyRecord>, Sharing),
    /// Decided on a guess that the key has no record (a fresh upload's first swap, not a
    /// read): read it, and decide again.
    Reread,
    /// The record holds a `create` lease of this upload's run: read which keys its upload
    /// record lists (a listed key's lease is released, invariant 1), and decide again.
    Learn(String),
    /// An overwrite replaces these uploads' bytes: mark them waiting for the key first
    /// (invariant 8), and decide again.
    MarkWaiting(BTreeSet<String>),
}

impl<'s> RefStore<'s> {
    /// The key a copy of `content` is an alias of, where the store writes aliases.
    pub(super) fn alias_target(&self, content: &Content<'_>) -> Option<String> {
        match content.source {
            CopySource::Key(target) if self.traits.key_copies_are_aliases => {
                Some(target.to_string())
            }
            _ => None,
        }
    }

    /// Publishes `content` at `key` for `upload` and adds the reference (invariants 1–3).
    /// `different`: what to do where the key's record names other content. `fresh`: the
    /// upload was not indexed before (a key this upload first wrote in an earlier, unfinished
    /// attempt counts as published again).
    pub async fn publish(
        &self,
        key: &str,
        upload: &str,
        content: &Content<'_>,
        different: OnDifferent,
        fresh: bool,
    ) -> io::Result<KeyOutcome> {
        let published = self
            .publish_in_turn(key, upload, content, different, fresh, None)
            .await?;
        Ok(published.outcome)
    }

    /// [`Self::publish`], in `turn`: the key's record step starts when the key before has
    /// decided, and this key tells the next once its own record step is taken: from then on
    /// it waits for nobody (it holds the key's lease, or was answered without one), only
    /// copies. Keys published at once are taken in turn this way ([`InTurn`]): each starts
    /// its record step when the one before has decided, so the leases of an upload's keys are
    /// taken in the same order as one after another — two uploads sharing keys never hold
    /// one each of two keys the other waits for — while the objects are written at once.
    pub async fn publish_in_turn(
        &self,
        key: &str,
        upload: &str,
        content: &Content<'_>,
        different: OnDifferent,
        fresh: bool,
        turn: Option<InTurn>,
    ) -> io::Result<Publication> {
        let publisher = Publisher { upload, acting: "" };
        self.publish_as(key, publisher, content, different, fresh, turn)
            .await
    }

    /// [`Self::publish`] of a key on `holder`'s behalf (invariant 5), as fresh: a copy first
    /// written for `holder` is reported as published again by a retry (at-least-once, as for
    /// its own keys). Where `removed`'s removal hands the key on, its leases say so, and it
    /// waits for a live lease of another run of `holder`'s (`blocked_for`).
    pub async fn publish_for(
        &self,
        key: &str,
        holder: &str,
        removed: Option<&str>,
        content: &Content<'_>,
    ) -> io::Result<Publication> {
        let publisher = Publisher {
            upload: holder,
            acting: removed.unwrap_or_default(),
        };
        self.publish_as(key, publisher, content, OnDifferent::Conflict, true, None)
            .await
    }

    /// [`Self::publish_in_turn`] by `publisher`.
    ///
    /// Longer than most: it is one compare-and-swap loop whose state lives across its reads
    /// (the guess, listings learned, a HEAD asked, uploads marked waiting); the cases are in
    /// [`Self::decide`] and [`Self::carry_out`].
    pub(super) async fn publish_as(
        &self,
        key: &str,
        publisher: Publisher<'_>,
        content: &Content<'_>,
        different: OnDifferent,
        fresh: bool,
        mut turn: Option<InTurn>,
    ) -> io::Result<Publication> {
        let upload = publisher.upload;
        let overwrite = different == OnDifferent::Overwrite;
        let file = key_file(key);
        let holder = index_holder(upload);
        // A fresh upload's key usually has no record yet, so the first swap creates one
        // without reading (a wrong guess fails and reads). Concurrent writers (leases): what
        // is at the key is found by creating the object only where nothing is (`CREATE`).
        // A sole writer: without a record, whatever is at the key was written outside symdex:
        // asked once, before the first swap. Unless objects name their owners: a key without
        // a record may then be another upload's alone, found (and shared) by creating it
        // under a `create` lease as concurrent writers do (invariant 7).
        let creates = !self.policy.exclusive || self.owners_named();
        let mut prefetched = if fresh {
            Some(None)
        } else {
            Some(self.store.get(&file).await?)
        };
        // Only a write checks a guess (it fails where a record is): anything else decided on
        // one is decided again on a read.
        let mut on_guess = fresh;
        // No record (or none guessed): the object alone, naming this upload (invariant 7).
        let alone =
            self.owners_named() && self.store.creates_only_new(&content.source, content.size);
        let mut seen = false;
        let mut sharing: Option<Sharing> = None;
        if alone && !overwrite && matches!(prefetched, Some(None)) {
            // No lease taken: the keys after this one need not wait for it. Should the record
            // protocol decide after all, its lease is taken out of turn — two uploads then
            // at worst wait for each other's lease until one gives up and is retried.
            drop(turn.take());
            let adopt = different == OnDifferent::Adopt;
            match self
                .publish_owned(key, upload, content, fresh, adopt)
                .await?
            {
                Alone::Done(outcome) => return Ok(outcome),
                // Something the record protocol decides: on the record if it was read. Else
                // guessed absent again where writers create records only where none is (a
                // key another upload alone references has none): the `create` lease's write
                // checks the guess, and a record found instead is read.
                Alone::Decide(record, found) => {
                    seen = true;
                    sharing = found;
                    on_guess = record.is_none() && creates;
                    prefetched = match record {
                        Some(record) => Some(Some(record)),
                        None if creates => Some(None),
                        None => None,
                    };
                }
            }
        }
        if let Some(turn) = turn.as_mut() {
            turn.wait().await;
        }
        let mut external: Option<Option<ObjectInfo>> = None;
        if let (false, Some(None)) = (creates, &prefetched) {
            external = Some(self.store.head(key).await?);
        }
        let mut listed = Listed::new();
        let mut patience = Patience::new(self.policy.wait);
        let guessing = on_guess;
        let mut read_before_listing = false;
        // Uploads this overwrite has marked as waiting for the key (`MarkWaiting`).
        let mut marked_waiting = BTreeSet::new();
        // What decides is built anew on each pass: the loop's state (a HEAD asked, listings
        // learned, uploads marked waiting) changes between swaps.
        loop {
            let deciding = Deciding {
                key,
                publisher,
                holder: &holder,
                content,
                different,
                fresh,
                creates,
                guessing,
                sharing: &sharing,
                external: &external,
                listed: &listed,
                marked_waiting: &marked_waiting,
            };
            let mut decide = |current: Option<KeyRecord>| {
                let guessed = std::mem::take(&mut on_guess);
                self.decide(&deciding, guessed, current)
            };
            let (plan, written) = self
                .update_versioned(&file, prefetched.take(), |current| {
                    let step = decide(current)?;
                    // Decided on the read from before a listing was learned: only a write,
                    // a swap on that read's version (it fails if the record changed since),
                    // stands; anything else is decided again on a fresh read — the record
                    // with the lease ended was never read as it is now.
                    if std::mem::take(&mut read_before_listing) && !matches!(step, Step::Write(..))
                    {
                        return Ok(Step::Keep(PublishPlan::Reread));
                    }
                    Ok(step)
                })
                .await?;
            if let PublishPlan::NeedHead = plan {
                external = Some(self.store.head(key).await?);
                continue;
            }
            if let PublishPlan::Reread = plan {
                continue;
            }
            if let PublishPlan::MarkWaiting(earlier) = plan {
                self.overwritten(key, upload, earlier.iter().cloned())
                    .await?;
                marked_waiting.extend(earlier);
                continue;
            }
            if let PublishPlan::Learn(creator) = &plan {
                // The first listing learned decides on the record just read (one read per
                // key saved) where what it decides is a swap on that read (above). One met
                // again was not ended by it: read both anew.
                let first = !listed.contains_key(creator);
                self.learn_listing(creator, &mut listed, &mut patience, key)
                    .await?;
                if first {
                    prefetched = Some(written);
                    read_before_listing = true;
                }
                continue;
            }
            // A check may still wait (to repair a missing object under a lease): it tells
            // later.
            if !matches!(plan, PublishPlan::Check { .. }) {
                drop(turn.take());
            }
            break self.carry_out(&deciding, plan, written, seen, turn).await;
        }
    }

    /// Carries out what [`Self::decide`] planned for a key (`written`: the record as the swap
    /// wrote it; `seen`: what is at the key was looked at already).
    async fn carry_out(
        &self,
        d: &Deciding<'_, '_>,
        plan: PublishPlan,
        written: Option<Versioned>,
        seen: bool,
        turn: Option<InTurn>,
    ) -> io::Result<Publication> {
        let (key, content, different) = (d.key, d.content, d.different);
        let (publisher, holder, listed) = (d.publisher, d.holder, d.listed);
        let upload = publisher.upload;
        let overwrite = different == OnDifferent::Overwrite;
        let file = key_file(key);
        match plan {
            // Never reached: the loop above asks and swaps again instead.
            PublishPlan::NeedHead
            | PublishPlan::Reread
            | PublishPlan::Learn(_)
            | PublishPlan::MarkWaiting(_) => Err(busy(&format!("{key}: no plan"))),
            PublishPlan::Done(outcome) => Ok(outcome.into()),
            PublishPlan::CopySole => {
                self.copy_or_take_back(key, upload, content, upload, None)
                    .await?;
                Ok(KeyOutcome::Published.into())
            }
            PublishPlan::Share(lease, record, sharing) => {
                let how = CopyHow {
                    overwrite,
                    own: false,
                    by: upload.to_string(),
                    adopt: different == OnDifferent::Adopt,
                    seen,
                };
                let version = written.map(|v| v.version);
                self.share_created(
                    key,
                    upload,
                    content,
                    &lease,
                    (*record, version),
                    &sharing,
                    how,
                )
                .await
            }
            PublishPlan::Copy(lease, record, own) => {
                let how = CopyHow {
                    overwrite,
                    own,
                    by: record.by.clone(),
                    adopt: different == OnDifferent::Adopt,
                    seen,
                };
                let written = written.map(|v| (*record, v.version));
                self.copy_under_lease(key, upload, content, &lease, written, how)
                    .await
            }
            PublishPlan::Check {
                by_us,
                size,
                alias_of,
            } => {
                // Invariant 2 says it is there; a missing or truncated object (removed by
                // hand, or a store restored from a backup) is repaired under a lease.
                if self.store.size(key).await? == Some(size) {
                    drop(turn);
                    let outcome = if by_us {
                        KeyOutcome::Published
                    } else {
                        KeyOutcome::Unchanged
                    };
                    return Ok(Publication { outcome, alias_of });
                }
                let lease = self
                    .update(&file, |mut current: Option<KeyRecord>| {
                        if let Some(record) = current.as_mut() {
                            if self.settle(record, listed).is_err() {
                                return Ok(Step::Wait(format!("{key}: a change is in progress")));
                            }
                        }
                        match current {
                            Some(r) if self.blocked_for(&r, holder, publisher) => {
                                Ok(Step::Wait(format!("{key}: a change is in progress")))
                            }
                            Some(mut r)
                                if (r.etag == content.etag || different == OnDifferent::Adopt)
                                    && r.refs.contains(upload) =>
                            {
                                let lease = self.publisher_lease("copy", holder, publisher);
                                r.lease = Some(lease.clone());
                                // What is copied now (an adopted copy is replaced by ours).
                                r.etag = content.etag.to_string();
                                r.size = content.size;
                                let by = r.by.clone();
                                Ok(Step::Write(r, Some((lease, by))))
                            }
                            _ => Ok(Step::Keep(None)),
                        }
                    })
                    .await?;
                drop(turn);
                match lease {
                    Some((lease, by)) => {
                        let how = CopyHow {
                            overwrite,
                            own: false,
                            by,
                            adopt: different == OnDifferent::Adopt,
                            seen: false,
                        };
                        self.copy_under_lease(key, upload, content, &lease, None, how)
                            .await
                    }
                    // Changed meanwhile (overwritten, or our reference taken back): retry.
                    None => Err(busy(&format!("{key}: changed while checking it"))),
                }
            }
        }
    }
}
