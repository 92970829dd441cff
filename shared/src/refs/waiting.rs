//! Uploads waiting for a key other bytes hold, and the hand-over when they go (invariant 8).

use std::collections::BTreeSet;
use std::io;

use serde::{Deserialize, Serialize};

use super::RefStore;
use crate::storage::ObjectInfo;

/// Uploads waiting for keys other content holds (invariant 8).
pub(super) const WAITING_DIR: &str = "_symdex/waiting/";
/// The waiters of one key, by the key's SHA-1 (no key's directory holds another's).
pub(super) fn waiting_dir(key: &str) -> String {
    format!("{WAITING_DIR}{}/", crate::digest::sha1_hex(key.as_bytes()))
}

pub(super) fn waiting_file(key: &str, upload: &str) -> String {
    format!(
        "{}{}.json",
        waiting_dir(key),
        crate::digest::sha1_hex(upload.as_bytes())
    )
}

/// An upload waiting for a key that holds other content (invariant 8).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(crate) struct Waiting {
    pub key: String,
    pub upload: String,
}

impl<'s> RefStore<'s> {
    /// Records that `upload` waits for `key`, where it found other content, then looks at
    /// the key again: what is there now (invariant 8). Free, or holding the upload's own
    /// content, the key is the upload's to publish after all.
    pub async fn wait_for(&self, key: &str, upload: &str) -> io::Result<Option<ObjectInfo>> {
        self.mark_waiting(key, upload).await?;
        Ok(self.store.head(key).await?)
    }

    /// Writes the marker saying that `upload` waits for `key`.
    pub(super) async fn mark_waiting(&self, key: &str, upload: &str) -> io::Result<()> {
        let waiting = Waiting {
            key: key.to_string(),
            upload: upload.to_string(),
        };
        let bytes = serde_json::to_vec(&waiting)?;
        Ok(self.store.put(&waiting_file(key, upload), &bytes).await?)
    }

    /// Marks the uploads whose bytes `upload` is about to replace at `key` (an overwrite) as
    /// waiting for it (invariant 8), before the replacement: a marker of an upload that
    /// still holds the key (the overwrite then failed, lost a race, or was refused by the
    /// product rule) costs a re-index that changes nothing once the key is handed over, and
    /// is forgotten when the key is freed (the hand-over forgets the waits of uploads gone);
    /// while it stands, `verify` still sees a lost reference of that upload where files name
    /// their owners (the object there is the upload's own and no change of the key is in
    /// progress: no wait explains it), and takes the listing for a wait where they do not. A missing mark would lose the key when the
    /// overwriter goes. So marks
    /// are never taken back: two overwrites at once may mark one holder, and they share its
    /// one file — one taking its mark back would take the other's.
    pub(super) async fn overwritten(
        &self,
        key: &str,
        upload: &str,
        earlier: impl IntoIterator<Item = String>,
    ) -> io::Result<()> {
        for earlier in earlier.into_iter().filter(|e| e != upload) {
            self.mark_waiting(key, &earlier).await?;
        }
        Ok(())
    }

    /// Notes that `upload` replaced the bytes `displaced` held (an overwrite whose swap and
    /// copy are done), for its record to report ([`Self::take_overwritten`]).
    pub(super) fn note_overwrote(&self, upload: &str, displaced: impl IntoIterator<Item = String>) {
        let displaced = displaced.into_iter().filter(|e| e != upload);
        if let Ok(mut overwrote) = self.overwrote.lock() {
            overwrote
                .entry(upload.to_string())
                .or_default()
                .extend(displaced);
        }
    }

    /// The uploads whose bytes `upload` has replaced at some key since the last call (an
    /// overwrite): they wait for those keys.
    pub(crate) fn take_overwritten(&self, upload: &str) -> BTreeSet<String> {
        self.overwrote
            .lock()
            .ok()
            .and_then(|mut overwrote| overwrote.remove(upload))
            .unwrap_or_default()
    }

    /// The uploads waiting for `key` (invariant 8): asked after its object was deleted.
    pub(crate) async fn waiting(&self, key: &str) -> io::Result<Vec<Waiting>> {
        self.list_records(&waiting_dir(key)).await
    }

    /// Every upload waiting for a key (`verify`).
    pub(crate) async fn all_waiting(&self) -> io::Result<Vec<Waiting>> {
        self.list_records(WAITING_DIR).await
    }

    /// Forgets a wait (its upload is gone, or going).
    pub(crate) async fn stop_waiting(&self, waiting: &Waiting) -> io::Result<()> {
        let file = waiting_file(&waiting.key, &waiting.upload);
        Ok(self.store.delete(&file).await?)
    }
}
