//! Leases: who may change the object at a key, until when (invariant 1): [`Lease`], the
//! policy leases are taken and judged by ([`LeasePolicy`]), and who takes them (the holders,
//! a [`Publisher`]).

use std::io;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::patience::{busy, Wait};
use super::RefStore;

/// The lease of a key that had no record: nothing symdex wrote is there, but something written
/// outside symdex may be. Its holder (or whoever takes it over) creates the object only where
/// nothing is (`Storage::copy_new`), and decides on what it finds there only then: the same
/// content is adopted, other content is a conflict. No HEAD is asked first, and the lease is
/// released by the upload record listing the key (invariant 1). Where objects name their
/// owners, a fresh key takes no lease at all (invariant 7): this is then how a key whose
/// record is a dead remover's tombstone is taken back.
pub(super) const CREATE: &str = "create";

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

/// Who publishes a key: the upload referencing it, the removal handing it on to that
/// upload, where one does (empty else; [`Lease::acting`]), and the upload's product (`None`:
/// it names none), which decides whose bytes its overwrite may replace (overwrites.rs).
#[derive(Clone, Copy)]
pub(crate) struct Publisher<'a> {
    pub(super) upload: &'a str,
    pub(super) acting: &'a str,
    pub(super) product: Option<&'a str>,
}

impl<'a> Publisher<'a> {
    /// `upload` publishing its own key, as an upload of `product`.
    pub(crate) fn new(upload: &'a str, product: Option<&'a str>) -> Self {
        Publisher {
            upload,
            acting: "",
            product,
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

pub(super) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

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
