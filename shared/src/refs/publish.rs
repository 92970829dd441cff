//! Publishing a key for an upload ([`RefStore::publish`]): the compare-and-swap loop on its
//! record, and what its plan comes to.

use std::collections::BTreeSet;
use std::io;

use super::decide::{Deciding, PublishPlan};
use super::layout::key_file;
use super::lease::{index_holder, Publisher};
use super::listing::Listed;
use super::objects::{Alone, CopyHow, Sharing};
use super::patience::{busy, Patience};
use super::prior::Prior;
use super::publication::{Content, KeyOutcome, OnDifferent, Publication};
use super::records::KeyRecord;
use super::swap::Step;
use super::turn::InTurn;
use super::RefStore;
use crate::storage::{ObjectInfo, Versioned};

impl<'s> RefStore<'s> {
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
            Prior::Absent
        } else {
            Prior::of(self.store.get(&file).await?)
        };
        // Only a write checks a guess (it fails where a record is): anything else decided on
        // one is decided again on a read.
        let mut on_guess = fresh;
        // No record (or none guessed): the object alone, naming this upload (invariant 7).
        let alone =
            self.owners_named() && self.store.creates_only_new(&content.source, content.size);
        let mut seen = false;
        let mut sharing: Option<Sharing> = None;
        if alone && !overwrite && matches!(prefetched, Prior::Absent) {
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
                        Some(record) => Prior::Read(record),
                        None if creates => Prior::Absent,
                        None => Prior::Unread,
                    };
                }
            }
        }
        if let Some(turn) = turn.as_mut() {
            turn.wait().await;
        }
        let mut external: Prior<ObjectInfo> = Prior::Unread;
        if !creates && matches!(prefetched, Prior::Absent) {
            external = Prior::of(self.store.head(key).await?);
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
                external = Prior::of(self.store.head(key).await?);
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
                    prefetched = Prior::of(written);
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
