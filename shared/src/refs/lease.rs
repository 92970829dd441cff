//! Leases: who may change the object at a key, until when (invariant 1), and the upload
//! listings that end the `create` leases a finalize releases.

use std::collections::BTreeSet;
use std::io;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::records::{key_file, KeyRecord, UploadRecord};
use super::{busy, now_secs, read_shared, Patience, Publisher, RefStore, Step, CREATE};

/// A change of the object at one key in progress (invariant 1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// Who holds it (one id per indexer instance).
    pub holder: String,
    /// Unix seconds after which the holder is presumed dead.
    pub until: u64,
    /// `copy` or `remove`.
    pub op: String,
    /// The run that took it (unique per [`RefStore`]): two runs of one upload at once (a
    /// message delivered twice) hold the same `holder`, and must not end each other's leases
    /// (invariant 1). Empty in leases written before it existed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub run: String,
    /// The upload whose removal hands the key on to `holder` (a source's withdrawal serving
    /// a path from another source, invariant 5); empty for anyone else. Such a lease is taken
    /// over at once only by another attempt of the same removal, and takes nobody else's
    /// live lease over (invariant 1).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub acting: String,
}

/// One key's turn among keys published at once ([`RefStore::publish_in_turn`]): it waits
/// for the key before it to decide, and tells the key after it when it has (or when it is
/// dropped: a key that failed keeps nobody waiting).
pub struct InTurn {
    pub(super) after: Option<tokio::sync::oneshot::Receiver<()>>,
    // Dropping the sender is the signal.
    pub(super) _tells: tokio::sync::oneshot::Sender<()>,
}

impl InTurn {
    /// Turns for `n` keys, in order.
    pub fn chain(n: usize) -> Vec<InTurn> {
        let mut turns = Vec::with_capacity(n);
        let mut after = None;
        for _ in 0..n {
            let (tells, next) = tokio::sync::oneshot::channel();
            turns.push(InTurn {
                after: after.replace(next),
                _tells: tells,
            });
        }
        turns
    }

    pub(super) async fn wait(&mut self) {
        if let Some(after) = self.after.take() {
            // Told or dropped: either way the key before has decided (or failed).
            let _ = after.await;
        }
    }
}

/// How long to wait for somebody else's live lease before giving up (the caller then fails
/// the message or the run, to be retried).
#[derive(Debug, Clone, Copy)]
pub struct Wait {
    pub attempts: u32,
    pub first_pause: Duration,
    pub max_pause: Duration,
}

impl Default for Wait {
    fn default() -> Self {
        Wait {
            attempts: 30,
            first_pause: Duration::from_millis(20),
            max_pause: Duration::from_secs(2),
        }
    }
}

/// How leases are taken and judged.
#[derive(Debug, Clone)]
pub struct LeasePolicy {
    /// Lease length: longer than the longest run of whoever takes one (the Lambda timeout).
    pub duration: Duration,
    /// This process holds the store's writer lock: every other holder is dead.
    pub exclusive: bool,
    pub wait: Wait,
}

impl Default for LeasePolicy {
    fn default() -> Self {
        LeasePolicy {
            // Lambda's longest timeout, plus a margin for clock skew.
            duration: Duration::from_secs(15 * 60 + 60),
            exclusive: false,
            wait: Wait::default(),
        }
    }
}

pub(super) fn index_holder(upload: &str) -> String {
    format!("index:{upload}")
}

/// The upload whose run holds `lease`, if it is a `create` lease (released by that upload's
/// finalize, invariant 1).
pub(super) fn created_by(lease: &Lease) -> Option<&str> {
    if lease.op == CREATE {
        lease.holder.strip_prefix("index:")
    } else {
        None
    }
}

/// Whether a `create` lease is released without a write: its holder's upload lists `key`
/// for the lease's run (`listing`: an upload's listing, if it has a record). Other leases
/// are released by a write.
pub fn released_by_finalize(
    lease: &Lease,
    key: &str,
    listing: impl Fn(&str) -> Option<Listing>,
) -> bool {
    created_by(lease)
        .and_then(listing)
        .is_some_and(|listing| listing.ends(key, lease))
}

/// A run id unique to this process and call: a random per-process key (std's hasher seed)
/// hashed with a counter and the time — no crate needed for a nonce.
pub(super) fn new_run_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    pub(super) static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    hasher.write_u128(nanos);
    format!("{:016x}", hasher.finish())
}

pub(super) fn remove_holder(upload: &str) -> String {
    format!("remove:{upload}")
}

/// An upload record's listing: the keys it lists, and the runs whose `create` leases on them
/// it ends (invariant 1).
#[derive(Debug, Default, Clone)]
pub struct Listing {
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
    pub fn new<'a>(
        keys: impl IntoIterator<Item = &'a str>,
        runs: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        Listing {
            keys: keys.into_iter().map(String::from).collect(),
            runs: runs.into_iter().map(String::from).collect(),
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
    pub(super) fn new_lease(&self, op: &str, holder: &str) -> Lease {
        Lease {
            holder: holder.to_string(),
            until: now_secs() + self.policy.duration.as_secs(),
            op: op.to_string(),
            run: self.run.clone(),
            acting: String::new(),
        }
    }

    /// [`Self::new_lease`] of a publisher: one acting for a removal says so.
    pub(super) fn publisher_lease(
        &self,
        op: &str,
        holder: &str,
        publisher: Publisher<'_>,
    ) -> Lease {
        Lease {
            acting: publisher.acting.to_string(),
            ..self.new_lease(op, holder)
        }
    }

    /// A lease `holder` may not act against: somebody else's, still running.
    pub(super) fn lease_is_live_other(&self, lease: &Lease, holder: &str) -> bool {
        lease.holder != holder && self.lease_runs(lease)
    }

    /// Whether `lease`'s holder may still be at work: within its time, and not while this
    /// process holds the local store's writer lock (then its holder is dead, invariant 1).
    pub(super) fn lease_runs(&self, lease: &Lease) -> bool {
        !self.policy.exclusive && lease.until >= now_secs()
    }

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

    /// The `create` leases `upload`'s runs on this store left to its finalize (invariant 1),
    /// forgotten here: whoever takes the upload's references back instead of finalizing it
    /// releases them first ([`Self::release_created`]).
    pub fn take_held(&self, upload: &str) -> Vec<(String, Lease)> {
        let holder = index_holder(upload);
        let Ok(mut held) = self.held.lock() else {
            return Vec::new();
        };
        let keys: Vec<String> = held
            .iter()
            .filter(|(_, lease)| lease.holder == holder)
            .map(|(key, _)| key.clone())
            .collect();
        keys.into_iter()
            .filter_map(|key| held.remove(&key).map(|lease| (key, lease)))
            .collect()
    }

    /// Releases `create` leases by a write each, where they are still as taken: for a run
    /// that will not list their keys (it failed, or takes its references back), so that
    /// nobody waits for them and its own take-back is not blocked by them.
    pub async fn release_created(&self, held: &[(String, Lease)]) -> io::Result<()> {
        for (key, lease) in held {
            self.update(&key_file(key), |current: Option<KeyRecord>| match current {
                Some(mut r) if r.lease.as_ref() == Some(lease) => {
                    r.lease = None;
                    Ok(Step::Write(r, ()))
                }
                _ => Ok(Step::Keep(())),
            })
            .await?;
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
        let (listing, _) = read_shared(&self.listing_reads, upload, read, |_| false).await?;
        Ok(listing)
    }

    /// Before touching an object: our lease must not be past its time (someone may have
    /// taken it over). A margin keeps the act itself inside the lease.
    pub(super) fn check_own_lease(&self, lease: &Lease) -> io::Result<()> {
        if self.policy.exclusive || lease.until > now_secs() + 30 {
            Ok(())
        } else {
            Err(busy(&format!(
                "lease on a key ran out (holder {})",
                lease.holder
            )))
        }
    }
}
