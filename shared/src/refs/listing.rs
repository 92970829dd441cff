//! Upload records' listings, which end the `create` leases a finalize releases (invariant 1),
//! and a key record's lease judged by them: whom it blocks, and whether it still holds.

use std::collections::BTreeSet;
use std::io;

use super::keys::KeyRecord;
use super::lease::{created_by, Lease, Publisher};
use super::patience::Patience;
use super::uploads::UploadRecord;
use super::RefStore;

/// Whether a `create` lease is released without a write: its holder's upload lists `key`
/// for the lease's run (`listing`: an upload's listing, if it has a record). Other leases
/// are released by a write.
pub(crate) fn released_by_finalize(
    lease: &Lease,
    key: &str,
    listing: impl Fn(&str) -> Option<Listing>,
) -> bool {
    created_by(lease)
        .and_then(listing)
        .is_some_and(|listing| listing.ends(key, lease))
}

/// An upload record's listing: the keys it lists, and the runs whose `create` leases on them
/// it ends (invariant 1).
#[derive(Debug, Default, Clone)]
pub(crate) struct Listing {
    pub(super) keys: BTreeSet<String>,
    pub(super) runs: BTreeSet<String>,
}

impl Listing {
    pub fn of(record: &UploadRecord) -> Self {
        Listing {
            keys: record.keys.clone(),
            runs: record.runs.clone(),
        }
    }

    /// The listing of a record read as a view of it (an audit's, audit.rs).
    pub fn new(
        keys: impl IntoIterator<Item = impl Into<String>>,
        runs: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Listing {
            keys: keys.into_iter().map(Into::into).collect(),
            runs: runs.into_iter().map(Into::into).collect(),
        }
    }

    /// Whether this listing ends `lease` on `key`: it lists the key, for the lease's run
    /// (a lease without a run was written before runs were told apart).
    pub fn ends(&self, key: &str, lease: &Lease) -> bool {
        self.keys.contains(key) && (lease.run.is_empty() || self.runs.contains(&lease.run))
    }

    /// What both listings say (an upload's listing only grows while its record lives).
    pub(super) fn merge(&mut self, other: &Listing) {
        self.keys.extend(other.keys.iter().cloned());
        self.runs.extend(other.runs.iter().cloned());
    }
}

/// What a decision needs to know first: the listings of these uploads (holders of the
/// `create` leases it met), read from their upload records.
pub(super) type Listed = std::collections::HashMap<String, Listing>;

impl<'s> RefStore<'s> {
    /// Whether `record` is held by somebody else's live lease (then `holder` waits).
    pub(super) fn blocked(&self, record: &KeyRecord, holder: &str) -> bool {
        record
            .lease
            .as_ref()
            .is_some_and(|l| self.lease_is_live_other(l, holder))
    }

    /// [`Self::blocked`], for `publisher` holding `holder`'s leases. A removal handing a key
    /// on (`acting`) waits for a live lease of its holder's unless its own removal's (an
    /// earlier attempt): its retry may never meet the key again (the offer it withdraws may
    /// be dropped meanwhile by whoever finds it dead), so a lease it took over from a run
    /// still going would be left to run out. Anyone else takes a lease of its holder over at
    /// once, as a retry takes its own earlier attempt's: the run that took it over lists
    /// it, or its own retry meets the key again (invariant 1).
    pub(super) fn blocked_for(
        &self,
        record: &KeyRecord,
        holder: &str,
        publisher: Publisher<'_>,
    ) -> bool {
        record.lease.as_ref().is_some_and(|l| {
            let ours =
                l.holder == holder && (publisher.acting.is_empty() || l.acting == publisher.acting);
            !ours && self.lease_runs(l)
        })
    }

    /// Drops `record`'s lease where it is released without a write (invariant 1): a `create`
    /// lease whose holder's upload record lists the key. `Err(upload)`: that holder's listing
    /// must be read first ([`Self::learn_listing`]) into `listed`. Our own upload's leases too:
    /// a re-run of a finalized upload finds its keys unchanged, not still being created.
    pub(super) fn settle(&self, record: &mut KeyRecord, listed: &Listed) -> Result<(), String> {
        let Some(lease) = &record.lease else {
            return Ok(());
        };
        let Some(upload) = created_by(lease) else {
            return Ok(());
        };
        let seen = |listed: &Listed| {
            listed
                .get(upload)
                .map(|listing| listing.ends(&record.key, lease))
        };
        let known = self.listed.lock().ok().and_then(|cache| seen(&cache));
        let released = match (known, seen(listed)) {
            (Some(true), _) => true,
            (_, Some(listed)) => listed,
            _ => return Err(upload.to_string()),
        };
        if released {
            record.lease = None;
        }
        Ok(())
    }

    /// The upload whose run's `create` lease (not released) is on `record`.
    pub(super) fn creating(&self, record: &KeyRecord) -> Option<String> {
        record
            .lease
            .as_ref()
            .and_then(created_by)
            .map(str::to_string)
    }

    /// Reads the keys `upload` lists into `listed` (and the process-wide cache). Read again
    /// (its lease still in force on `key`), after a pause, as a wait: given up as busy when
    /// the policy's patience runs out.
    pub(super) async fn learn_listing(
        &self,
        upload: &str,
        listed: &mut Listed,
        patience: &mut Patience,
        key: &str,
    ) -> io::Result<()> {
        if listed.contains_key(upload) {
            patience
                .wait(&format!("{key}: a creation is in progress"))
                .await?;
        }
        let listing = self.read_listing(upload).await?;
        if let Ok(mut cache) = self.listed.lock() {
            cache.entry(upload.to_string()).or_default().merge(&listing);
        }
        listed.insert(upload.to_string(), listing);
        Ok(())
    }

    /// `upload`'s listing, read from its record — or by a read of it already in flight, which
    /// is as good: a listing only ends leases its record lists for their runs, so one read
    /// earlier than ours can at worst end fewer (the key then waits and reads again, as on
    /// a listing read before the finalize), never a lease it should not.
    pub(super) async fn read_listing(&self, upload: &str) -> io::Result<Listing> {
        let read = || async {
            let record = self.upload(upload).await?;
            Ok(record.map(|r| Listing::of(&r)).unwrap_or_default())
        };
        // Not kept: the next decision reads afresh.
        let (listing, _) = self.listing_reads.read(upload, read, |_| false).await?;
        Ok(listing)
    }
}
