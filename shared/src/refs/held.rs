//! The `create` leases a run holds until its upload's finalize lists their keys (invariant 1):
//! kept per process ([`Held`]), handed on to the finalize, or released by a write each.

use std::collections::BTreeMap;
use std::io;
use std::sync::Mutex;

use super::keys::KeyRecord;
use super::layout::key_file;
use super::lease::{index_holder, Lease};
use super::swap::Step;
use super::RefStore;

/// `create` leases this process took and left to be released by their upload's finalize
/// (invariant 1), by key, until the run hands them on ([`Self::take_held`]).
/// (Ordered: the leases of a run are released in key order, so that a schedule of the
/// interleaving tests replays from its seed.)
#[derive(Default)]
pub(super) struct Held(Mutex<BTreeMap<String, Lease>>);

impl Held {
    /// Keeps `lease` on `key`, to be released by its upload's finalize.
    pub(super) fn keep(&self, key: &str, lease: &Lease) {
        if let Ok(mut held) = self.0.lock() {
            held.insert(key.to_string(), lease.clone());
        }
    }

    /// The leases `holder` holds, forgotten here, in key order.
    fn take(&self, holder: &str) -> Vec<(String, Lease)> {
        let Ok(mut held) = self.0.lock() else {
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
}

impl<'s> RefStore<'s> {
    /// The `create` leases `upload`'s runs on this store left to its finalize (invariant 1),
    /// forgotten here: whoever takes the upload's references back instead of finalizing it
    /// releases them first ([`Self::release_created`]).
    pub(crate) fn take_held(&self, upload: &str) -> Vec<(String, Lease)> {
        self.held.take(&index_holder(upload))
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
}
