//! One batch's work after its objects were indexed: the manifest written while the ingest
//! objects' liveness is asked, then every upload finalized (the manifest is at-least-once).

use std::sync::Arc;

use futures_util::StreamExt;
use symdex_shared::manifest::Record;
use symdex_shared::pipeline::{HandOver, Indexed, Indexer};

use crate::context::{Context, Error};
use crate::events::ObjectEvent;

/// One object's work, waiting to be finalized after the manifest write: one upload, or an
/// archive's entries.
pub struct Job {
    pub(crate) indexed: Vec<Indexed>,
    /// The ingest object whose uploads were referenced, for the liveness check.
    pub(crate) ingest: Option<Ingest>,
}

/// An ingest object as it was indexed, for the liveness check after its references were added.
pub(crate) struct Ingest {
    pub(crate) event: ObjectEvent,
    /// The ETag that was indexed.
    pub(crate) etag: String,
    /// A copy made from it after the upload was registered read it as current with that
    /// content ([`SeenCurrent`]): live then, and no request needed to say so.
    pub(crate) seen_current: bool,
}

impl Ingest {
    /// An ingest object whose liveness is asked of the bucket.
    pub(crate) fn asked(event: &ObjectEvent, etag: &str) -> Ingest {
        Ingest {
            event: event.clone(),
            etag: etag.to_string(),
            seen_current: false,
        }
    }
}

impl Job {
    pub(crate) fn records(&self) -> impl Iterator<Item = &Record> {
        self.indexed.iter().flat_map(|i| &i.records)
    }
}

/// Whether the indexed object still exists: its version, and (versioned bucket) no delete
/// marker on top of it; unversioned, the key still holds the content that was indexed. A
/// removal processed before its creation found nothing to remove; this check, made after the
/// upload was registered with its location (its upload record created where the removal
/// looks), catches it (refs/, invariant 4). A copy from the ingest object made after the
/// registration may have answered it already ([`Ingest::seen_current`]).
pub(crate) async fn ingest_alive(
    ctx: &Context,
    event: &ObjectEvent,
    etag: &str,
) -> std::io::Result<bool> {
    let store = &ctx.store;
    let current = store
        .head_object_versioned(&event.bucket, &event.key, None)
        .await?;
    Ok(match (&event.version_id, current) {
        (_, None) => false,
        // The indexed version is still the current one: no need to ask for it by id.
        (Some(version), Some((_, _, Some(current), _))) if current == *version => true,
        (Some(version), Some(_)) => store
            .head_object(&event.bucket, &event.key, Some(version))
            .await?
            .is_some(),
        (None, Some((info, _, _, _))) => info.etag == etag,
    })
}

/// Whether each job's ingest object is still there ([`ingest_alive`]), per message, a few
/// asked at once.
async fn liveness(ctx: &Arc<Context>, messages: &[&[Job]]) -> Vec<Vec<std::io::Result<bool>>> {
    let asks: Vec<_> = messages
        .iter()
        .map(|jobs| async move {
            let mut alive = Vec::new();
            for job in *jobs {
                alive.push(match &job.ingest {
                    Some(ingest) if ingest.seen_current => Ok(true),
                    Some(ingest) => ingest_alive(ctx, &ingest.event, &ingest.etag).await,
                    None => Ok(true),
                });
            }
            alive
        })
        .collect();
    futures_util::stream::iter(asks)
        .buffered(ctx.config.concurrency.max(1))
        .collect()
        .await
}

/// Writes the records to the manifest while the liveness of each message's ingest objects is
/// asked: both come only after the uploads were registered with their sources (the liveness
/// check's condition), and both before any finalize — so the two requests on the way of
/// every message are made at once.
pub(crate) async fn manifest_and_liveness(
    ctx: &Arc<Context>,
    records: Vec<Record>,
    messages: &[&[Job]],
) -> Result<Vec<Vec<std::io::Result<bool>>>, Error> {
    let (written, alive) = tokio::join!(write_manifest(ctx, records), liveness(ctx, messages));
    written?;
    Ok(alive)
}

/// Marks the jobs' uploads indexed (after the manifest holds their records); returns the
/// records of uploads that had to be taken back, which `Indexer::finalize` wrote to the
/// manifest before handing over the keys they freed. `alive`: each job's [`liveness`].
pub(crate) async fn finalize(
    ctx: &Arc<Context>,
    hand_over: &dyn HandOver,
    jobs: Vec<Job>,
    alive: Vec<std::io::Result<bool>>,
) -> Result<Vec<Record>, String> {
    let indexer = Indexer::new(&ctx.store, ctx.config.pipeline.clone()).handing_over_to(hand_over);
    let mut records = Vec::new();
    for (job, alive) in jobs.iter().zip(alive) {
        let alive = alive.map_err(|e| e.to_string())?;
        for indexed in &job.indexed {
            records.extend(
                indexer
                    .finalize(indexed, alive)
                    .await
                    .map_err(|e| e.to_string())?,
            );
        }
    }
    Ok(records)
}

async fn write_manifest(ctx: &Arc<Context>, records: Vec<Record>) -> Result<Option<String>, Error> {
    let indexer = Indexer::new(&ctx.store, ctx.config.pipeline.clone());
    Ok(indexer.write_manifest(&records).await?)
}
