//! The sweeper: a scheduled function (EventBridge) that removes expired uploads from the
//! serving bucket through the reference-counted delete, as `symdex expire` does locally.
//!
//! Each run examines one page of upload records (SYMDEX_SWEEP_MAX_UPLOADS) after a cursor kept
//! in `_symdex/sweeper.json`, so a large store is swept over several runs and a run never
//! outlasts its timeout. Per page:
//!
//! 1. expire the page's expired uploads (their records stay `removing`, listing what they
//!    unpublished);
//! 2. write their `expired` records to the manifest;
//! 3. note their ingest objects as pending deletions in the sweeper state;
//! 4. forget the uploads, then delete the ingest objects (that version; unversioned, only
//!    while it still holds the indexed content), then clear the pending list and advance the
//!    cursor.
//!
//! A run that dies anywhere is resumed by the next: before 2, the uploads are still
//! `removing` and are expired again (the same keys reported: the manifest is at-least-once);
//! after 3, the pending deletions are done first. The ingest object goes only after the upload
//! is forgotten, so the remover's event for it finds nothing left to do. One sweeper runs at
//! a time (the module reserves a concurrency of 1), so the state needs no compare-and-swap.
//!
//! With SYMDEX_AUDIT_PAGE on, each run then writes the audit page (audit_page.rs).

use std::sync::Arc;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use symdex_shared::manifest::Record;
use symdex_shared::pipeline::{is_due, Indexer};
use symdex_shared::refs::STATE_PREFIX;
use symdex_shared::retention::{format_time, parse_time, RELEASE_CHANNEL};
use symdex_shared::storage::Storage;

use crate::context::{Context, Error};

/// One ingest object to delete.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct IngestObject {
    bucket: String,
    key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    version_id: Option<String>,
    etag: String,
}

/// What survives between runs.
#[derive(Debug, Default, Serialize, Deserialize)]
struct SweepState {
    /// The upload record file the last finished page ended at (empty: start over).
    #[serde(default)]
    after: String,
    /// Ingest objects of forgotten uploads not yet deleted.
    #[serde(default)]
    pending: Vec<IngestObject>,
}

fn state_key() -> String {
    format!("{STATE_PREFIX}/sweeper.json")
}

async fn load(store: &dyn Storage) -> Result<SweepState, Error> {
    Ok(match store.get(&state_key()).await? {
        Some(found) => serde_json::from_slice(&found.bytes)?,
        None => SweepState::default(),
    })
}

async fn save(store: &dyn Storage, state: &SweepState) -> Result<(), Error> {
    store.put(&state_key(), &serde_json::to_vec(state)?).await?;
    Ok(())
}

/// The ingest object an S3 upload came from, from its record: the object (an archive, for an
/// entry's upload), its version, or in an unversioned bucket its ETag. Local uploads have none.
fn ingest_object(record: &Record) -> Option<IngestObject> {
    Some(IngestObject {
        bucket: record.ingest_bucket.clone()?,
        key: record.ingest_key.clone(),
        version_id: record.ingest_version.clone(),
        etag: record.ingest_etag.clone()?,
    })
}

async fn delete_ingest(ctx: &Context, objects: &[IngestObject]) -> Result<usize, Error> {
    let mut deleted = 0;
    for object in objects {
        let done = ctx
            .store
            .delete_object_version(
                &object.bucket,
                &object.key,
                object.version_id.as_deref(),
                &object.etag,
            )
            .await?;
        deleted += usize::from(done);
    }
    Ok(deleted)
}

/// A promotion asked of the function (`aws lambda invoke --payload
/// '{"promote": {"build": "B", "channel": "release"}}'`): the S3 form of `symdex promote`.
/// Bounded like a sweep: a page of upload records after `after`; the answer's `next` is the
/// `after` of the next call (`null`: done).
#[derive(Debug, Deserialize)]
struct Promote {
    build: String,
    #[serde(default)]
    product: Option<String>,
    #[serde(default)]
    channel: Option<String>,
    #[serde(default)]
    after: String,
}

async fn promote(ctx: &Context, request: Promote) -> Result<Value, Error> {
    let indexer = Indexer::new(&ctx.store, ctx.config.pipeline.clone());
    let channel = request.channel.as_deref().unwrap_or(RELEASE_CHANNEL);
    let (uploads, next) = indexer
        .refs()
        .uploads_after(&request.after, ctx.config.sweep_max_uploads)
        .await?;
    let records = indexer
        .promote_build(
            uploads,
            &request.build,
            request.product.as_deref(),
            channel,
            &ctx.config.pipeline.retention,
        )
        .await?;
    indexer.write_manifest(&records).await?;
    for record in &records {
        tracing::info!(action = "promoted", upload = %record.upload, reason = record.reason.as_deref(), "decision");
    }
    Ok(json!({ "promoted": records.len(), "channel": channel, "next": next }))
}

/// One sweeper run. The payload is EventBridge's scheduled event: its `time` is the time to
/// expire at (so a replayed event decides as the original would); `detail.dry_run: true`
/// reports without changing anything. A `promote` payload promotes instead ([`Promote`]);
/// `{"audit_page": true}` writes the audit page now, sweeping nothing (SYMDEX_AUDIT_PAGE on).
/// After a sweep, the audit page is written when SYMDEX_AUDIT_PAGE is on (audit_page.rs).
pub async fn handle_sweeper(ctx: &Arc<Context>, payload: Value) -> Result<Value, Error> {
    if let Some(request) = payload.get("promote") {
        return promote(ctx, serde_json::from_value(request.clone())?).await;
    }
    if payload.get("audit_page").and_then(Value::as_bool) == Some(true) {
        if !ctx.config.audit_page {
            return Err("the audit page is off (SYMDEX_AUDIT_PAGE)".into());
        }
        let written = crate::audit_page::write_audit_page(ctx).await?;
        return Ok(json!({ "audit_page": written }));
    }
    let now = match payload.get("time").and_then(Value::as_str) {
        Some(time) => parse_time(time)?,
        None => SystemTime::now(),
    };
    let dry_run = payload
        .pointer("/detail/dry_run")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let store: &dyn Storage = &ctx.store;
    // An expiry hands the keys it frees to the uploads waiting for them (refs/, invariant 8).
    let hand_over = crate::handler::FromIngest(ctx.clone());
    let indexer = Indexer::new(&ctx.store, ctx.config.pipeline.clone()).handing_over_to(&hand_over);
    let mut state = load(store).await?;

    // A run that died after noting its ingest deletions: finish them first.
    let mut ingest_deleted = 0;
    if !dry_run && !state.pending.is_empty() {
        ingest_deleted += delete_ingest(ctx, &state.pending).await?;
        state.pending.clear();
        save(store, &state).await?;
    }

    let (uploads, next) = indexer
        .refs()
        .uploads_after(&state.after, ctx.config.sweep_max_uploads)
        .await?;
    let examined = uploads.len();
    let due: Vec<_> = uploads
        .into_iter()
        .filter(|u| is_due(u, now, None))
        .collect();
    if dry_run {
        let would: Vec<&str> = due.iter().map(|u| u.source.as_str()).collect();
        return Ok(json!({
            "now": format_time(now),
            "examined": examined,
            "would_expire": would,
            "next": next,
        }));
    }

    let mut removals = Vec::new();
    for upload in &due {
        removals.extend(indexer.expire(&upload.upload, now, None).await?);
    }
    let records: Vec<_> = removals.iter().map(|r| r.record.clone()).collect();
    indexer.write_manifest(&records).await?;
    if ctx.config.sweep_delete_ingest {
        // An archive's entries expire together and name the same object: deleted once.
        let mut pending: Vec<IngestObject> = Vec::new();
        for object in removals.iter().filter_map(|r| ingest_object(&r.record)) {
            if !pending.contains(&object) {
                pending.push(object);
            }
        }
        state.pending = pending;
        if !state.pending.is_empty() {
            save(store, &state).await?;
        }
    }
    for removal in &removals {
        indexer.end_removal(removal).await?;
    }
    ingest_deleted += delete_ingest(ctx, &state.pending).await?;
    state.pending.clear();
    state.after = next.clone().unwrap_or_default();
    save(store, &state).await?;

    let keys_removed: usize = records.iter().map(|r| r.removed.len()).sum();
    for record in &records {
        tracing::info!(
            action = "expired",
            upload = %record.upload,
            channel = record.meta.channel.as_deref(),
            expires = record.meta.expires.as_deref(),
            removed = record.removed.len(),
            "decision"
        );
    }
    let mut answer = json!({
        "now": format_time(now),
        "examined": examined,
        "expired": records.len(),
        "keys_removed": keys_removed,
        "ingest_deleted": ingest_deleted,
        "next": next,
    });
    crate::audit_page::refresh_after_sweep(ctx, &mut answer).await;
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::{ingest_object, Record};

    fn record(upload: &str, bucket: Option<&str>, key: &str, version: Option<&str>) -> Record {
        Record {
            ingest_version: version.map(str::to_string),
            ingest_etag: Some("etag1".into()),
            ..Record::about(
                symdex_shared::manifest::Action::Expired,
                upload.into(),
                bucket.map(str::to_string),
                key.into(),
            )
        }
    }

    #[test]
    fn ingest_objects_from_records() {
        let versioned = ingest_object(&record(
            "s3:in/a/b@c.debug@v123",
            Some("in"),
            "a/b@c.debug",
            Some("v123"),
        ))
        .unwrap();
        assert_eq!(versioned.bucket, "in");
        assert_eq!(versioned.key, "a/b@c.debug");
        assert_eq!(versioned.version_id.as_deref(), Some("v123"));
        let plain = ingest_object(&record("s3:in/x.pdb@etag1", Some("in"), "x.pdb", None)).unwrap();
        assert_eq!(
            (plain.version_id, plain.etag.as_str()),
            (None, "etag1"),
            "unversioned: conditional on the ETag"
        );
        // An archive entry's upload names its archive.
        let entry = ingest_object(&record(
            "s3:in/s.zip@etag1!/a@b/c.pdb",
            Some("in"),
            "s.zip",
            None,
        ))
        .unwrap();
        assert_eq!(entry.key, "s.zip");
        assert!(ingest_object(&record("file:/ci/x.pdb@etag1", None, "/ci/x.pdb", None)).is_none());
    }
}
