//! Publishing a key for an upload ([`RefStore::publish`]): the compare-and-swap loop on its
//! record, and what its plan comes to.

use std::collections::BTreeSet;
use std::io;

use super::decide::{Deciding, PublishPlan};
use super::keys::KeyRecord;
use super::layout::key_file;
use super::lease::{index_holder, Lease, Publisher};
use super::listing::Listed;
use super::objects::{Alone, CopyHow, Sharing};
use super::patience::{busy, Patience, Wait};
use super::prior::Prior;
use super::publication::{Content, KeyOutcome, OnDifferent, Publication};
use super::swap::Step;
use super::turn::InTurn;
use super::RefStore;
use crate::storage::{ObjectInfo, Versioned};

impl<'s> RefStore<'s> {
    /// Publishes `content` at `key` for `upload` and adds the reference (invariants 1–3).
    /// `different`: what to do where the key's record names other content. `fresh`: the
    /// upload was not indexed before (a key this upload first wrote in an earlier, unfinished
    /// attempt counts as published again).
    pub(crate) async fn publish(
        &self,
        key: &str,
        upload: &str,
        content: &Content<'_>,
        different: OnDifferent,
        fresh: bool,
    ) -> io::Result<KeyOutcome> {
        let published = self
            .publish_in_turn(
                key,
                Publisher::new(upload, None),
                content,
                different,
                fresh,
                None,
            )
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
    /// `publisher`: the upload and its product (`UploadMeta::product`), whose bytes alone its
    /// overwrite may replace (overwrites.rs); [`Self::publish`] publishes as an upload naming
    /// none.
    pub(crate) async fn publish_in_turn(
        &self,
        key: &str,
        publisher: Publisher<'_>,
        content: &Content<'_>,
        different: OnDifferent,
        fresh: bool,
        turn: Option<InTurn>,
    ) -> io::Result<Publication> {
        self.publish_as(key, publisher, content, different, fresh, turn)
            .await
    }

    /// [`Self::publish`] of a key on `holder`'s behalf (invariant 5), as fresh: a copy first
    /// written for `holder` is reported as published again by a retry (at-least-once, as for
    /// its own keys). Where `removed`'s removal hands the key on, its leases say so, and it
    /// waits for a live lease of another run of `holder`'s (`blocked_for`).
    pub(crate) async fn publish_for(
        &self,
        key: &str,
        holder: &str,
        removed: Option<&str>,
        content: &Content<'_>,
    ) -> io::Result<Publication> {
        // Never an overwrite: no product needed.
        let publisher = Publisher {
            upload: holder,
            acting: removed.unwrap_or_default(),
            product: None,
        };
        self.publish_as(key, publisher, content, OnDifferent::Conflict, true, None)
            .await
    }

    /// [`Self::publish_in_turn`] by `publisher`: the key published as its object alone where
    /// it may be (invariant 7, [`Self::publish_alone`]), else in turn: its record swapped until
    /// a plan stands ([`Self::plan_key`], the cases in [`Self::decide`]), and that plan carried
    /// out ([`Self::carry_out`]).
    pub(super) async fn publish_as(
        &self,
        key: &str,
        publisher: Publisher<'_>,
        content: &Content<'_>,
        different: OnDifferent,
        fresh: bool,
        mut turn: Option<InTurn>,
    ) -> io::Result<Publication> {
        // Concurrent writers (leases): what is at a key without a record is found by creating
        // the object only where nothing is (`CREATE`). A sole writer: without a record,
        // whatever is at the key was written outside symdex: asked once, before the first
        // swap. Unless objects name their owners: a key without a record may then be another
        // upload's alone, found (and shared) by creating it under a `create` lease as
        // concurrent writers do (invariant 7).
        let creates = !self.policy.exclusive || self.owners_named();
        let p = Publishing {
            key,
            publisher,
            holder: index_holder(publisher.upload),
            content,
            different,
            fresh,
            creates,
        };
        let file = key_file(key);
        // A fresh upload's key usually has no record yet, so the first swap creates one
        // without reading (a wrong guess fails and reads).
        let prefetched = if fresh {
            Prior::Absent
        } else {
            Prior::of(self.store.get(&file).await?)
        };
        let mut learned = Learned::new(prefetched, fresh, self.policy.wait);
        if let Some(published) = self.publish_alone(&p, &mut learned, &mut turn).await? {
            return Ok(published);
        }
        if let Some(turn) = turn.as_mut() {
            turn.wait().await;
        }
        learned.guessing = learned.on_guess;
        if !creates && matches!(learned.prefetched, Prior::Absent) {
            learned.external = Prior::of(self.store.head(key).await?);
        }
        let (plan, written) = self.plan_key(&file, &p, &mut learned).await?;
        // A check may still wait (to repair a missing object under a lease): it tells later.
        if !matches!(plan, PublishPlan::Check { .. }) {
            drop(turn.take());
        }
        let deciding = p.deciding(&learned);
        self.carry_out(&deciding, plan, written, learned.seen, turn)
            .await
    }

    /// No record (or none guessed): the key published as its object alone, naming this upload
    /// (invariant 7), where objects name their owners and the store creates only where nothing
    /// is. `Some`: done so. Else the record protocol decides, on what this learned.
    async fn publish_alone(
        &self,
        p: &Publishing<'_, '_>,
        learned: &mut Learned,
        turn: &mut Option<InTurn>,
    ) -> io::Result<Option<Publication>> {
        let (key, content) = (p.key, p.content);
        let alone =
            self.owners_named() && self.store.creates_only_new(&content.source, content.size);
        let overwrite = p.different == OnDifferent::Overwrite;
        if !(alone && !overwrite && matches!(learned.prefetched, Prior::Absent)) {
            return Ok(None);
        }
        // No lease taken: the keys after this one need not wait for it. Should the record
        // protocol decide after all, its lease is taken out of turn — two uploads then at
        // worst wait for each other's lease until one gives up and is retried.
        drop(turn.take());
        let adopt = p.different == OnDifferent::Adopt;
        let upload = p.publisher.upload;
        match self
            .publish_owned(key, upload, content, p.fresh, adopt)
            .await?
        {
            Alone::Done(outcome) => Ok(Some(outcome)),
            // Something the record protocol decides: on the record if it was read. Else
            // guessed absent again where writers create records only where none is (a key
            // another upload alone references has none): the `create` lease's write checks
            // the guess, and a record found instead is read.
            Alone::Decide(record, found) => {
                learned.seen = true;
                learned.sharing = found;
                learned.on_guess = record.is_none() && p.creates;
                learned.prefetched = match record {
                    Some(record) => Prior::Read(record),
                    None if p.creates => Prior::Absent,
                    None => Prior::Unread,
                };
                Ok(None)
            }
        }
    }

    /// Swaps the key's record until a decision stands: a plan to carry out, with the record
    /// as the swap wrote it. What a decision needs to know first (a HEAD of the key, a
    /// listing, uploads marked waiting) is learned between swaps.
    async fn plan_key(
        &self,
        file: &str,
        p: &Publishing<'_, '_>,
        learned: &mut Learned,
    ) -> io::Result<(PublishPlan, Option<Versioned>)> {
        let (key, upload) = (p.key, p.publisher.upload);
        loop {
            let (plan, written) = self.swap_key(file, p, learned).await?;
            match plan {
                PublishPlan::NeedHead => {
                    learned.external = Prior::of(self.store.head(key).await?);
                }
                PublishPlan::Reread => {}
                PublishPlan::MarkWaiting(earlier) => {
                    // Each holder the swap would displace is checked before any is marked:
                    // one of another product (or unknown) makes the key a conflict, as
                    // without overwrite (overwrites.rs). Those marked were checked, and the
                    // swap waits for `earlier ⊆ marked_waiting` on the record it read.
                    let unchecked = earlier.difference(&learned.marked_waiting);
                    let unchecked = unchecked.map(String::as_str);
                    if !self.may_overwrite(p.publisher.product, unchecked).await? {
                        // Those marked in an earlier round still hold the key; their marks
                        // stay (waiting.rs, `overwritten`: harmless, where taking one back
                        // could take another overwrite's of the same file).
                        return Ok((PublishPlan::Refused, None));
                    }
                    self.overwritten(key, upload, earlier.iter().cloned())
                        .await?;
                    learned.marked_waiting.extend(earlier);
                }
                PublishPlan::Learn(creator) => {
                    // The first listing learned decides on the record just read (one read per
                    // key saved) where what it decides is a swap on that read (`swap_key`).
                    // One met again was not ended by it: read both anew.
                    let first = !learned.listed.contains_key(&creator);
                    let (listed, patience) = (&mut learned.listed, &mut learned.patience);
                    self.learn_listing(&creator, listed, patience, key).await?;
                    if first {
                        learned.prefetched = Prior::of(written);
                        learned.read_before_listing = true;
                    }
                }
                plan => return Ok((plan, written)),
            }
        }
    }

    /// One compare-and-swap of the key's record, deciding on what is learned so far (what
    /// decides is built anew for each: the state changes between swaps).
    async fn swap_key(
        &self,
        file: &str,
        p: &Publishing<'_, '_>,
        learned: &mut Learned,
    ) -> io::Result<(PublishPlan, Option<Versioned>)> {
        let prefetched = learned.prefetched.take();
        let mut on_guess = learned.on_guess;
        let mut read_before_listing = learned.read_before_listing;
        let deciding = p.deciding(learned);
        let swapped = self
            .update_versioned(file, prefetched, |current| {
                let guessed = std::mem::take(&mut on_guess);
                let step = self.decide(&deciding, guessed, current)?;
                // Decided on the read from before a listing was learned: only a write, a swap
                // on that read's version (it fails if the record changed since), stands;
                // anything else is decided again on a fresh read — the record with the lease
                // ended was never read as it is now.
                if std::mem::take(&mut read_before_listing) && !matches!(step, Step::Write(..)) {
                    return Ok(Step::Keep(PublishPlan::Reread));
                }
                Ok(step)
            })
            .await;
        learned.on_guess = on_guess;
        learned.read_before_listing = read_before_listing;
        swapped
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
        let upload = d.publisher.upload;
        let how = |own: bool, by: String| CopyHow {
            overwrite: different == OnDifferent::Overwrite,
            product: d.publisher.product.map(str::to_string),
            own,
            by,
            adopt: different == OnDifferent::Adopt,
            seen,
        };
        match plan {
            // Never reached: `plan_key` asks and swaps again instead.
            PublishPlan::NeedHead
            | PublishPlan::Reread
            | PublishPlan::Learn(_)
            | PublishPlan::MarkWaiting(_) => Err(busy(&format!("{key}: no plan"))),
            PublishPlan::Done(outcome) => Ok(outcome.into()),
            PublishPlan::Refused => Ok(Publication::refused()),
            PublishPlan::CopySole => {
                self.copy_or_take_back(key, upload, content, upload, None)
                    .await?;
                Ok(KeyOutcome::Published.into())
            }
            PublishPlan::Share(lease, record, sharing) => {
                let how = how(false, upload.to_string());
                let version = written.map(|v| v.version);
                let record = (*record, version);
                self.share_created(key, upload, content, &lease, record, &sharing, how)
                    .await
            }
            PublishPlan::Copy(lease, record, own) => {
                let how = how(own, record.by.clone());
                let written = written.map(|v| (*record, v.version));
                self.copy_under_lease(key, upload, content, &lease, written, how)
                    .await
            }
            PublishPlan::Replace(lease, record, displaced) => {
                let how = how(false, record.by.clone());
                let written = written.map(|v| (*record, v.version));
                let published = self
                    .copy_under_lease(key, upload, content, &lease, written, how)
                    .await?;
                // Displaced from the record by the swap, and their bytes replaced now (a
                // creation's copy may still have found another's object and given up).
                if published.outcome == KeyOutcome::Published {
                    self.note_overwrote(upload, displaced);
                }
                Ok(published)
            }
            PublishPlan::Check {
                by_us,
                size,
                alias_of,
            } => self.check_object(d, by_us, size, alias_of, turn).await,
        }
    }

    /// [`PublishPlan::Check`]: invariant 2 says the object is there; a missing or truncated
    /// one (removed by hand, or a store restored from a backup) is repaired under a lease.
    async fn check_object(
        &self,
        d: &Deciding<'_, '_>,
        by_us: bool,
        size: u64,
        alias_of: Option<String>,
        turn: Option<InTurn>,
    ) -> io::Result<Publication> {
        let (key, content, different) = (d.key, d.content, d.different);
        if self.store.size(key).await? == Some(size) {
            drop(turn);
            let outcome = if by_us {
                KeyOutcome::Published
            } else {
                KeyOutcome::Unchanged
            };
            return Ok(Publication::new(outcome, alias_of));
        }
        let lease = self.lease_to_repair(d).await?;
        drop(turn);
        match lease {
            Some((lease, by)) => {
                let how = CopyHow {
                    overwrite: different == OnDifferent::Overwrite,
                    product: d.publisher.product.map(str::to_string),
                    own: false,
                    by,
                    adopt: different == OnDifferent::Adopt,
                    seen: false,
                };
                self.copy_under_lease(key, d.publisher.upload, content, &lease, None, how)
                    .await
            }
            // Changed meanwhile (overwritten, or our reference taken back): retry.
            None => Err(busy(&format!("{key}: changed while checking it"))),
        }
    }

    /// Takes a `copy` lease on the key's record to repair its object, where the record still
    /// holds this content (or any, adopting) and this upload's reference: the lease, and whom
    /// the record names as the object's writer. `None`: changed meanwhile.
    async fn lease_to_repair(&self, d: &Deciding<'_, '_>) -> io::Result<Option<(Lease, String)>> {
        let (key, content, different) = (d.key, d.content, d.different);
        let (publisher, holder, listed) = (d.publisher, d.holder, d.listed);
        let upload = publisher.upload;
        self.update(&key_file(key), |mut current: Option<KeyRecord>| {
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
        .await
    }
}

/// What one publish goes by, the same for each of its swaps.
struct Publishing<'a, 'c> {
    key: &'a str,
    publisher: Publisher<'a>,
    /// The lease holder (`index:<upload>`).
    holder: String,
    content: &'a Content<'c>,
    different: OnDifferent,
    /// The upload was not indexed before: its key's record is guessed absent, not read.
    fresh: bool,
    /// Keys without a record are created under a `create` lease, not asked about first.
    creates: bool,
}

impl<'c> Publishing<'_, 'c> {
    /// What decides the next swap, on what was `learned` so far.
    fn deciding<'x>(&'x self, learned: &'x Learned) -> Deciding<'x, 'c> {
        Deciding {
            key: self.key,
            publisher: self.publisher,
            holder: &self.holder,
            content: self.content,
            different: self.different,
            fresh: self.fresh,
            creates: self.creates,
            guessing: learned.guessing,
            sharing: &learned.sharing,
            external: &learned.external,
            listed: &learned.listed,
            marked_waiting: &learned.marked_waiting,
        }
    }
}

/// What one publish knows of its key before its first swap, and learns between swaps.
struct Learned {
    /// The key's record as read (or guessed absent) for the next swap.
    prefetched: Prior<Versioned>,
    /// The next decision goes on a guess: only a write checks one (it fails where a record
    /// is), anything else decided on one is decided again on a read.
    on_guess: bool,
    /// The first decision went on a guess.
    guessing: bool,
    /// What is at the key was looked at already (publishing it alone).
    seen: bool,
    /// Another upload's object of this content, seen just before (invariant 7).
    sharing: Option<Sharing>,
    /// What a HEAD found at the key, once asked (a sole writer's key without a record).
    external: Prior<ObjectInfo>,
    /// The listings learned of the uploads whose `create` leases the swaps met.
    listed: Listed,
    patience: Patience,
    /// The next swap decides on a read from before a listing was learned.
    read_before_listing: bool,
    /// Uploads this overwrite has marked as waiting for the key (`MarkWaiting`), each found
    /// of the overwriter's product first (overwrites.rs).
    marked_waiting: BTreeSet<String>,
}

impl Learned {
    fn new(prefetched: Prior<Versioned>, fresh: bool, wait: Wait) -> Self {
        Learned {
            prefetched,
            on_guess: fresh,
            guessing: fresh,
            seen: false,
            sharing: None,
            external: Prior::Unread,
            listed: Listed::new(),
            patience: Patience::new(wait),
            read_before_listing: false,
            marked_waiting: BTreeSet::new(),
        }
    }
}
