//! Deciding a key's record for one publish: the step its compare-and-swap takes (write, keep,
//! wait) and the plan that follows ([`RefStore::publish_as`] carries it out).

use std::collections::BTreeSet;
use std::io;

use super::keys::KeyRecord;
use super::lease::{Lease, Publisher, CREATE};
use super::listing::Listed;
use super::objects::Sharing;
use super::prior::Prior;
use super::publication::{Content, KeyOutcome, OnDifferent};
use super::swap::Step;
use super::RefStore;
use crate::storage::ObjectInfo;

/// What [`RefStore::decide`] goes by for one key: fixed for one publish, but for what its loop
/// learns between two reads (a HEAD of the key, listings, uploads marked waiting).
#[derive(Clone, Copy)]
pub(super) struct Deciding<'a, 'c> {
    pub(super) key: &'a str,
    pub(super) publisher: Publisher<'a>,
    /// The lease holder (`index:<upload>`).
    pub(super) holder: &'a str,
    pub(super) content: &'a Content<'c>,
    pub(super) different: OnDifferent,
    /// A fresh upload's key: its record was guessed absent, not read.
    pub(super) fresh: bool,
    /// Keys without a record are created under a `create` lease (concurrent writers, or
    /// objects naming their owners), not asked about by a HEAD first.
    pub(super) creates: bool,
    /// The first decision went on a guess.
    pub(super) guessing: bool,
    /// Another upload's object of this content, seen just before (invariant 7).
    pub(super) sharing: &'a Option<Sharing>,
    /// What a HEAD found at the key, once asked (a sole writer's key without a record).
    pub(super) external: &'a Prior<ObjectInfo>,
    pub(super) listed: &'a Listed,
    /// Uploads this overwrite marked as waiting for the key.
    pub(super) marked_waiting: &'a BTreeSet<String>,
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
    /// An overwrite's swap, written: [`PublishPlan::Copy`] (never our own earlier copy), the
    /// uploads it displaced from the record noted as overwritten once the copy published.
    Replace(Lease, Box<KeyRecord>, BTreeSet<String>),
    /// An overwrite the product rule refuses (overwrites.rs): a conflict, as without
    /// overwrite.
    Refused,
}

impl Deciding<'_, '_> {
    /// A record of this publish's content at its key, naming `refs` and `by`, under `lease`.
    pub(super) fn record(&self, refs: BTreeSet<String>, by: String, lease: &Lease) -> KeyRecord {
        KeyRecord {
            key: self.key.to_string(),
            etag: self.content.etag.to_string(),
            size: self.content.size,
            refs,
            by,
            lease: Some(lease.clone()),
            alias_of: None,
        }
    }
}

impl<'s> RefStore<'s> {
    /// One decision on a key's record as read (`current`), for the swap [`Self::publish_as`]
    /// makes: write, keep, or wait, and the plan that follows. `guessed`: the record was
    /// guessed absent, not read.
    pub(super) fn decide(
        &self,
        d: &Deciding<'_, '_>,
        guessed: bool,
        mut current: Option<KeyRecord>,
    ) -> io::Result<Step<KeyRecord, PublishPlan>> {
        let Deciding {
            key,
            publisher,
            holder,
            content,
            different,
            fresh,
            guessing,
            listed,
            marked_waiting,
            ..
        } = *d;
        let upload = publisher.upload;
        let overwrite = different == OnDifferent::Overwrite;
        // Where objects name their owners, an empty record (a dead remover's
        // tombstone) is as good as none: the key is created under a `create`
        // lease, which finds out whose object is there (invariant 7).
        let had_record = current
            .as_ref()
            .is_some_and(|r| !r.refs.is_empty() || !self.owners_named());
        let shared = current.as_ref().is_some_and(|r| r.refs.len() > 1);
        if guessing && shared {
            // See `shared_before`: the upload's next keys read theirs.
            self.shared_before
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        if let Some(record) = current.as_mut() {
            if let Err(holder) = self.settle(record, listed) {
                return Ok(Step::KeepRead(PublishPlan::Learn(holder)));
            }
        }
        let record = match current {
            Some(r) if self.blocked_for(&r, holder, publisher) => {
                // A creation ends with its holder's listing: read it again.
                if let Some(creator) = self.creating(&r) {
                    return Ok(Step::KeepRead(PublishPlan::Learn(creator)));
                }
                return Ok(Step::Wait(format!("{key}: a change is in progress")));
            }
            // An empty record (a dead remover's tombstone) is as good as none.
            Some(r) if r.refs.is_empty() => None,
            other => other,
        };
        let lease = self.publisher_lease("copy", holder, publisher);
        let Some(mut record) = record else {
            return self.decide_unrecorded(d, guessed, had_record, lease);
        };
        if record.etag != content.etag && different != OnDifferent::Adopt {
            if !overwrite {
                return Ok(Step::Keep(PublishPlan::Done(KeyOutcome::Conflict)));
            }
            // The uploads whose bytes are replaced stop referencing the key and
            // wait for it (invariant 8), marked so before the swap: the
            // overwriter's removal hands it back. (Kept as references, they
            // held its bytes after the overwriter was deleted, or lost the key
            // with it where the object alone stood for the record.) Each is
            // checked to be of the overwriter's product before it is marked
            // (`plan_key`; overwrites.rs): this swap, on the record as read,
            // displaces only uploads marked, so only uploads checked. A dead
            // `create` lease's record may not say what is at the key: see
            // `replace`.
            let earlier: BTreeSet<String> = record
                .refs
                .iter()
                .filter(|r| *r != upload)
                .cloned()
                .collect();
            if !earlier.is_subset(marked_waiting) {
                return Ok(Step::Keep(PublishPlan::MarkWaiting(earlier)));
            }
            return Ok(self.replace(d, &record, lease, earlier));
        }
        let by_us = record.by == upload && fresh;
        if record.lease.is_some() {
            return Ok(self.take_over_dead(d, record, lease));
        }
        let check = PublishPlan::Check {
            by_us,
            size: record.size,
            alias_of: record.alias_of.clone(),
        };
        if record.refs.insert(upload.to_string()) {
            Ok(Step::Write(record, check))
        } else {
            Ok(Step::Keep(check))
        }
    }

    /// [`Self::decide`] for an overwrite whose holders (`earlier`, each checked and marked
    /// waiting) its swap displaces: the record names the overwriter alone.
    ///
    /// **A dead `create` lease keeps the key a creation** (as [`Self::take_over_dead`] does):
    /// its holder died before it created the object, so the record may not describe what is
    /// at the key — another upload's object alone (invariant 7), of another product, which
    /// no holder checked here stands for. Under a `create` lease the copy looks first
    /// (`Found::Other`), and replaces another upload's object only where that upload is of
    /// the overwriter's product (`may_replace_owned`); a `copy` lease would copy blind.
    fn replace(
        &self,
        d: &Deciding<'_, '_>,
        read: &KeyRecord,
        lease: Lease,
        earlier: BTreeSet<String>,
    ) -> Step<KeyRecord, PublishPlan> {
        let upload = d.publisher.upload;
        let creation = read.lease.as_ref().is_some_and(|l| l.op == CREATE);
        let lease = if creation {
            self.publisher_lease(CREATE, d.holder, d.publisher)
        } else {
            lease
        };
        let record = KeyRecord {
            // A creation's record stays as written (its lease ends with the finalize).
            alias_of: self.alias_target(d.content).filter(|_| creation),
            ..d.record([upload.to_string()].into(), upload.to_string(), &lease)
        };
        let plan = PublishPlan::Replace(lease, Box::new(record.clone()), earlier);
        Step::Write(record, plan)
    }

    /// [`Self::decide`] on a record holding a dead holder's lease (`decide` waits for a live
    /// one), for a change to this same content: finished by us (a creation stays one: what is
    /// at the key may not be symdex's), under `lease` unless a `create` one is taken.
    fn take_over_dead(
        &self,
        d: &Deciding<'_, '_>,
        mut record: KeyRecord,
        lease: Lease,
    ) -> Step<KeyRecord, PublishPlan> {
        let (holder, publisher) = (d.holder, d.publisher);
        let (own, creation) = match &record.lease {
            Some(dead) => (dead.holder == holder, dead.op == CREATE),
            None => (false, false),
        };
        let lease = if creation {
            self.publisher_lease(CREATE, holder, publisher)
        } else {
            lease
        };
        record.refs.insert(publisher.upload.to_string());
        let by = record.by.clone();
        let record = KeyRecord {
            lease: Some(lease.clone()),
            alias_of: self.alias_target(d.content).filter(|_| creation),
            ..d.record(record.refs, by, &lease)
        };
        let plan = PublishPlan::Copy(lease, Box::new(record.clone()), own);
        Step::Write(record, plan)
    }

    /// [`Self::decide`] for a key without a record (or with only a dead remover's tombstone).
    /// Symdex's own objects always have a record (or a tombstone): anything else at the key
    /// was written outside symdex (asked once, outside the swap, or found by creating the
    /// object where nothing is).
    pub(super) fn decide_unrecorded(
        &self,
        d: &Deciding<'_, '_>,
        guessed: bool,
        had_record: bool,
        lease: Lease,
    ) -> io::Result<Step<KeyRecord, PublishPlan>> {
        let Deciding {
            key,
            publisher,
            holder,
            content,
            different,
            creates,
            sharing,
            external,
            ..
        } = *d;
        let upload = publisher.upload;
        let overwrite = different == OnDifferent::Overwrite;
        let mine = |refs: BTreeSet<String>, by: String| d.record(refs, by, &lease);
        if creates && !had_record {
            let lease = self.publisher_lease(CREATE, holder, publisher);
            if let Some(sharing) = sharing {
                // Another upload's object of this content, seen just
                // before: the record names both, as sharing leaves it.
                let record = KeyRecord {
                    key: key.to_string(),
                    etag: sharing.info.etag.clone(),
                    size: sharing.info.size,
                    refs: [upload.to_string(), sharing.other.clone()].into(),
                    by: sharing.other.clone(),
                    lease: Some(lease.clone()),
                    alias_of: sharing.alias_of.clone(),
                };
                let plan = PublishPlan::Share(lease, Box::new(record.clone()), sharing.clone());
                return Ok(Step::Write(record, plan));
            }
            // Written as it will stay (alias target included): the upload's
            // finalize releases the lease (invariant 1).
            let record = KeyRecord {
                lease: Some(lease.clone()),
                alias_of: self.alias_target(content),
                ..mine([upload.to_string()].into(), upload.to_string())
            };
            let plan = PublishPlan::Copy(lease, Box::new(record.clone()), false);
            return Ok(Step::Write(record, plan));
        }
        if matches!(external, Prior::Unread) && !had_record {
            return Ok(Step::Keep(PublishPlan::NeedHead));
        }
        let outside = if had_record { None } else { external.found() };
        let adopted = match outside {
            Some(info) if info.etag == content.etag => true,
            // A record may be there after all, holding this content or
            // adopting any (a sidecar of the same bytes under another name).
            Some(_) if guessed => return Ok(Step::Keep(PublishPlan::Reread)),
            Some(_) if !overwrite => {
                return Ok(Step::Keep(PublishPlan::Done(KeyOutcome::Conflict)))
            }
            _ => false,
        };
        if adopted {
            let record = KeyRecord {
                lease: None,
                ..mine([upload.to_string()].into(), String::new())
            };
            let check = PublishPlan::Check {
                by_us: false,
                size: content.size,
                alias_of: None,
            };
            return Ok(Step::Write(record, check));
        }
        let record = mine([upload.to_string()].into(), upload.to_string());
        if self.policy.exclusive && !had_record && outside.is_none() {
            // A sole writer creating a key: the record is written as it will
            // stay, then the object (invariant 2, sole-writer form).
            let record = KeyRecord {
                lease: None,
                alias_of: self.alias_target(content),
                ..record
            };
            return Ok(Step::Write(record, PublishPlan::CopySole));
        }
        let plan = PublishPlan::Copy(lease, Box::new(record.clone()), false);
        Ok(Step::Write(record, plan))
    }
}
