//! Taking uploads back: unindex (an ingest object deleted), expiry by retention policy, and
//! promotion of a build to another channel.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::time::SystemTime;

use super::packages::is_package_join;
use super::upload::upload_record_of;
use super::Indexer;
use crate::layouts;
use crate::manifest::{Action, Record};
#[cfg(doc)]
use crate::refs::RefStore;
use crate::refs::{UploadRecord, UploadState, Waiting};
use crate::retention::{check_channel, is_expired, RetentionPolicy};
use crate::upload_meta::UploadMeta;

/// An upload removed but not yet forgotten: its record stays (`removing`, listing the keys it
/// unpublished) until [`Indexer::end_removal`], called once `record` is in the manifest, so a
/// run that dies in between reports the same keys again (the manifest is at-least-once).
#[derive(Debug)]
pub struct Removal {
    pub record: Record,
    pub(super) upload: UploadRecord,
    /// Keys it listed or planned and did not reference ([`TakenBack`]).
    pub(super) not_referenced: BTreeSet<String>,
}

/// What taking an upload's references back came to.
pub(super) struct TakenBack {
    /// Keys unpublished (an earlier attempt's included).
    pub(super) removed: Vec<String>,
    /// Keys other uploads still reference.
    pub(super) kept: usize,
    /// Keys the upload did not reference (a conflict, or bytes an overwrite replaced): where
    /// it may wait for the key (refs/, invariant 8).
    pub(super) not_referenced: BTreeSet<String>,
}

/// The outcome of an expiry computed ahead (`--dry-run`, and the bytes an expiry frees).
#[derive(Debug, Default)]
pub struct ExpiryPlan {
    pub uploads: Vec<UploadRecord>,
    /// Keys that would be unpublished, and their sizes.
    pub freed: BTreeMap<String, u64>,
}

impl ExpiryPlan {
    pub fn bytes_freed(&self) -> u64 {
        self.freed.values().sum()
    }
}

/// Whether an expiry at `now` acts on this upload: its retention has passed, or a removal of
/// it was begun and not finished (a run that died; the expiry finishes it).
pub fn is_due(upload: &UploadRecord, now: SystemTime, policy: Option<&RetentionPolicy>) -> bool {
    upload.state == UploadState::Removing || is_expired(&upload.meta, &upload.time, now, policy)
}

impl<'s> Indexer<'s> {
    /// Deletes one upload: marks it removing, takes back its references (unpublishing keys
    /// nobody else needs), hands the keys it freed to the uploads waiting for them, then
    /// forgets it. Re-running it after a crash finishes the job. A caller writing the
    /// manifest runs the two halves around it instead ([`Self::begin_unindex`],
    /// [`Self::end_removal`]).
    pub async fn unindex(&self, upload_id: &str) -> io::Result<Option<Record>> {
        let Some(removal) = self.begin_unindex(upload_id).await? else {
            return Ok(None);
        };
        self.end_removal(&removal).await?;
        Ok(Some(removal.record))
    }

    /// A removal run to its end as a deletion's is: its record in the manifest (`note` before
    /// its reason), then the keys it freed handed over (nothing where no such upload is).
    pub(super) async fn removal_to_its_end(
        &self,
        upload_id: &str,
        note: Option<&str>,
    ) -> io::Result<()> {
        if let Some(mut removal) = self.begin_unindex(upload_id).await? {
            if let Some(note) = note {
                let reason = removal.record.reason.take().unwrap_or_default();
                removal.record.reason = Some(format!("{note}; {reason}"));
            }
            self.write_manifest(std::slice::from_ref(&removal.record))
                .await?;
            self.end_removal(&removal).await?;
        }
        Ok(())
    }

    /// [`Self::unindex`] up to its hand-over: the upload marked removing and its references
    /// taken back, its record kept (`removing`, noting the keys unpublished) until
    /// [`Self::end_removal`], called once the returned record is in the manifest. `None`: no
    /// such upload.
    pub async fn begin_unindex(&self, upload_id: &str) -> io::Result<Option<Removal>> {
        let Some(upload) = self.refs.begin_removal(upload_id).await? else {
            return Ok(None);
        };
        let removal = self.take_back_all(upload_id, upload, Action::Unpublished, None);
        Ok(Some(removal.await?))
    }

    /// Takes back every reference of `upload`, marked removing, and says so in its record:
    /// `action`, `why` (if given) and what came of its keys.
    pub(super) async fn take_back_all(
        &self,
        upload_id: &str,
        upload: UploadRecord,
        action: Action,
        why: Option<String>,
    ) -> io::Result<Removal> {
        let TakenBack {
            removed,
            kept,
            not_referenced,
        } = self
            .take_back_references(upload_id, &upload.all_keys(), Some(&upload))
            .await?;
        let mut record = upload_record_of(&upload, action);
        let keys = format!(
            "{} keys removed, {kept} still referenced by other uploads",
            removed.len()
        );
        record.reason = Some(match why {
            Some(why) => format!("{why}; {keys}"),
            None => keys,
        });
        record.removed = removed;
        Ok(Removal {
            record,
            upload,
            not_referenced,
        })
    }

    /// Removes one upload if its retention has passed at `now` (by its recorded expiry, or
    /// counted under `policy` from its indexing time), through the reference-counted delete:
    /// keys other uploads still reference stay. The decision is taken on the record version
    /// the removal mark is swapped into, so a promotion swapped in first wins
    /// ([`RefStore::begin_removal_if`]); a removal found already begun (a run that died) is
    /// finished. Call [`Self::end_removal`] once the returned record is in the manifest.
    pub async fn expire(
        &self,
        upload_id: &str,
        now: SystemTime,
        policy: Option<&RetentionPolicy>,
    ) -> io::Result<Option<Removal>> {
        let expired = |r: &UploadRecord| is_expired(&r.meta, &r.time, now, policy);
        let Some(upload) = self.refs.begin_removal_if(upload_id, expired).await? else {
            return Ok(None);
        };
        let why = match (&upload.meta.channel, &upload.meta.expires) {
            _ if !expired(&upload) => "a removal in progress was finished".to_string(),
            (Some(channel), Some(at)) => format!("retention of channel {channel} ended at {at}"),
            (channel, _) => format!(
                "retention of channel {} ended under the given policy",
                channel.as_deref().unwrap_or("(none)")
            ),
        };
        let removal = self.take_back_all(upload_id, upload, Action::Expired, Some(why));
        Ok(Some(removal.await?))
    }

    /// Hands the keys a removal freed to the uploads waiting for them (refs/, invariant
    /// 8), then forgets the removed upload: after its record reached the manifest, which so
    /// says the keys were unpublished before the re-indexes say they are published again.
    pub async fn end_removal(&self, removal: &Removal) -> io::Result<()> {
        let upload = &removal.upload;
        let not_referenced = &removal.not_referenced;
        self.finish_removal(
            &upload.upload,
            &removal.record.removed,
            Some(upload),
            None,
            not_referenced,
        )
        .await
    }

    /// The end of every removal, once its record is in the manifest: the keys it `freed`
    /// handed over, a source upload's offer withdrawn (its join record: the `record`'s, else
    /// `offered_in`, what a take-back's attempt planned) and its paths served by the offers
    /// matching them now, then the removed upload forgotten (if it still has a `record`) —
    /// its own waits first (refs/, invariant 8; a marker is where a key it plans and does
    /// not reference held other bytes, or a key it lists and an overwrite took: among the
    /// keys its take-back found `not_referenced`), then its record. A marker a crash in
    /// between leaves, or a late attempt of the upload writes, is found stale by the key
    /// holder's removal, as any wait of an upload gone.
    pub(super) async fn finish_removal(
        &self,
        upload_id: &str,
        freed: &[String],
        record: Option<&UploadRecord>,
        offered_in: Option<&str>,
        not_referenced: &BTreeSet<String>,
    ) -> io::Result<()> {
        self.hand_over(upload_id, freed).await?;
        let offered_in = record.and_then(|r| r.offered_in.as_deref()).or(offered_in);
        match offered_in {
            Some(file) if is_package_join(file) => {
                self.withdraw_package_entries(upload_id, file).await?
            }
            Some(file) => self.withdraw_offer(upload_id, file, freed).await?,
            None => {}
        }
        let Some(record) = record else {
            return Ok(());
        };
        let mut waits = record.unreferenced();
        waits.extend(not_referenced.iter().cloned());
        self.stop_waiting(upload_id, &waits).await?;
        self.refs.end_removal(record).await
    }

    /// Forgets the waits of `upload` for `keys` (refs/, invariant 8). A `.meta` sidecar
    /// never waits (beside a conflicting file it is a conflict too, and goes with that file,
    /// `publish_own`): it has no marker, and asking one to go costs a request.
    pub(super) async fn stop_waiting(
        &self,
        upload: &str,
        keys: &BTreeSet<String>,
    ) -> io::Result<()> {
        let waits = keys
            .iter()
            .filter(|key| layouts::unified::described_by_sidecar(key).is_none());
        for key in waits {
            let waiting = Waiting {
                key: key.clone(),
                upload: upload.to_string(),
            };
            self.refs.stop_waiting(&waiting).await?;
        }
        Ok(())
    }

    /// Moves an upload to `channel`, its expiry recomputed under `policy` from its indexing
    /// time. `None`: no such upload, or it is being removed (an expiry came first).
    pub async fn promote(
        &self,
        upload_id: &str,
        channel: &str,
        policy: &RetentionPolicy,
    ) -> io::Result<Option<Record>> {
        check_channel(channel).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let mut before = None;
        let updated = self
            .refs
            .update_meta(upload_id, |r| {
                before = Some(r.meta.clone());
                let moved = UploadMeta {
                    channel: Some(channel.to_string()),
                    ..r.meta.clone()
                };
                policy.stamp(&moved, &r.time)
            })
            .await?;
        let Some(upload) = updated else {
            return Ok(None);
        };
        let old = before.unwrap_or_default();
        let mut record = upload_record_of(&upload, Action::Promoted);
        record.reason = Some(format!(
            "channel {} -> {channel}; expires {} (was {})",
            old.channel.as_deref().unwrap_or("(none)"),
            upload.meta.expires.as_deref().unwrap_or("never"),
            old.expires.as_deref().unwrap_or("never"),
        ));
        Ok(Some(record))
    }

    /// Promotes the uploads of `build` (of `product`, when given) among `uploads` to
    /// `channel`: `symdex promote` over every record, the sweeper over a page of them.
    pub async fn promote_build(
        &self,
        uploads: Vec<UploadRecord>,
        build: &str,
        product: Option<&str>,
        channel: &str,
        policy: &RetentionPolicy,
    ) -> io::Result<Vec<Record>> {
        let mut records = Vec::new();
        for upload in uploads {
            let wanted = upload.meta.build.as_deref() == Some(build)
                && product.is_none_or(|p| upload.meta.product.as_deref() == Some(p));
            if wanted {
                records.extend(self.promote(&upload.upload, channel, policy).await?);
            }
        }
        Ok(records)
    }

    /// What an expiry at `now` would remove, without changing anything: the expired uploads,
    /// and the keys no unexpired upload references (with their sizes).
    pub async fn plan_expiry(
        &self,
        now: SystemTime,
        policy: Option<&RetentionPolicy>,
    ) -> io::Result<ExpiryPlan> {
        let uploads: Vec<UploadRecord> = self
            .refs
            .uploads()
            .await?
            .into_iter()
            .filter(|r| is_due(r, now, policy))
            .collect();
        let going: BTreeSet<&str> = uploads.iter().map(|u| u.upload.as_str()).collect();
        let mut freed = BTreeMap::new();
        let keys: BTreeSet<String> = uploads.iter().flat_map(|u| u.all_keys()).collect();
        for key in keys {
            if let Some(record) = self.refs.key(&key).await? {
                if record.refs.iter().all(|r| going.contains(r.as_str())) {
                    freed.insert(key, record.size);
                }
            }
        }
        Ok(ExpiryPlan { uploads, freed })
    }
}
