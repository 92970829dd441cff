//! The handlers: plain async fns over the event payload. The pipeline is async end to end:
//! identification runs over prefetched ranges (`S3Object::identify`), every S3 call is awaited,
//! and the messages of a batch run as concurrent tasks on the function's runtime.

use std::collections::HashMap;
use std::sync::Arc;

use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use serde_json::{json, Value};
use symdex_shared::manifest::{Action, Record};
use symdex_shared::pipeline::{HandOver, Indexed, Indexer, Input, RecordLookup, Upload};
use symdex_shared::refs::UploadRecord;
use symdex_shared::storage::s3::FirstBlock;
use symdex_shared::storage::{CopySource, SeenCurrent};
use symdex_shared::upload_id::{Location, UploadId};
use symdex_shared::upload_meta::{product_named, UploadMeta};
use symdex_shared::IdentifyOptions;

use crate::archives::ObjectSink;
use crate::batch::{finalize, manifest_and_liveness, Ingest, Job};
use crate::context::ObjectBytes;
pub use crate::context::{Context, Error};
use crate::events::{decode, is_sqs_batch, Change, ObjectEvent};

/// Upload metadata: `x-amz-meta-build` / `-product` / `-version` / `-channel` (also with a
/// `symdex-` prefix), else `build=`, `product=`, `version=`, `channel=` path segments of the
/// key.
fn upload_meta(key: &str, metadata: &HashMap<String, String>) -> UploadMeta {
    let from_meta = |name: &str| {
        metadata
            .get(name)
            .or_else(|| metadata.get(&format!("symdex-{name}")))
            .cloned()
    };
    let from_path = |name: &str| {
        key.split('/')
            .find_map(|segment| segment.strip_prefix(&format!("{name}=")))
            .map(str::to_string)
    };
    let get = |name: &str| from_meta(name).or_else(|| from_path(name));
    UploadMeta {
        build: get("build"),
        product: product_named(get("product")),
        version: get("version"),
        channel: get("channel"),
        expires: None,
        // Metadata only: a path segment cannot hold a directory.
        source_root: from_meta("source-root"),
    }
}

/// With product prefixes enforced (SYMDEX_PRODUCT_PREFIXES), the first segment of the ingest
/// key is the upload's product: IAM lets each CI role write only under its own, so metadata
/// naming another product is a lie (or a mistake) and is rejected. The product recorded is
/// the prefix's.
fn check_product_prefix(key: &str, meta: &mut UploadMeta) -> Result<(), String> {
    let prefix = key.split('/').next().unwrap_or("");
    let product = prefix.strip_prefix("product=").unwrap_or(prefix);
    if product.is_empty() || !key.contains('/') {
        return Err(format!(
            "{key:?} is not under a product prefix (<product>/...)"
        ));
    }
    match &meta.product {
        Some(claimed) if claimed != product => Err(format!(
            "product {claimed:?} in the upload's metadata does not match its key prefix {product:?}"
        )),
        _ => {
            meta.product = Some(product.to_string());
            Ok(())
        }
    }
}

/// The ingest object `event` names, of content `etag` (the upload id's rule: `Input`).
fn object_input(event: &ObjectEvent, etag: &str, size: u64, meta: &UploadMeta) -> Input {
    let version = event.version_id.as_deref();
    Input::s3_object(&event.bucket, &event.key, version, etag, size, meta)
}

/// The id of the upload of `event`'s object of content `etag`.
fn upload_id(event: &ObjectEvent, etag: &str) -> String {
    object_input(event, etag, 0, &UploadMeta::default()).upload_id(etag)
}

/// `event`'s object by its location alone: gone, or refused before it was read.
fn located(event: &ObjectEvent, meta: &UploadMeta) -> Input {
    let version = event.version_id.as_deref();
    Input::s3_location(&event.bucket, &event.key, version, meta)
}

/// The record of a created event whose object is already gone: nothing to index, said so.
fn vanished(event: &ObjectEvent) -> Indexed {
    located(event, &UploadMeta::default()).nothing_published(
        None,
        Action::Skipped,
        "the ingest object no longer exists (deleted before it was indexed)".into(),
    )
}

/// One log line per decision.
fn log_decisions(event: &ObjectEvent, indexed: &Indexed, bytes_read: u64) {
    for r in &indexed.records {
        tracing::info!(
            action = r.action.map(|a| a.as_str()),
            bucket = %event.bucket,
            key = %event.key,
            format = r.format.map(|f| f.as_str()),
            debug_id = r.debug_id.map(|id| id.to_string()),
            code_id = r.code_id.as_ref().map(|id| id.as_str()),
            published = r.published.len(),
            unchanged = r.unchanged.len(),
            conflicts = r.conflicts.len(),
            bytes_read,
            reason = r.reason.as_deref(),
            "decision"
        );
    }
}

/// Indexes one created object. `Err` means: retry (or dead-letter) this message.
async fn index_object(
    ctx: Arc<Context>,
    event: ObjectEvent,
    delivery: Delivery,
) -> std::io::Result<Job> {
    let first = ctx
        .store
        .head_with_first_block(&event.bucket, &event.key, event.version_id.as_deref())
        .await?;
    let Some(first) = first else {
        return Ok(Job {
            indexed: vec![vanished(&event)],
            ingest: None,
        });
    };
    index_first_block(ctx, event, first, delivery).await
}

/// [`index_object`], its first block read (with what the object is: size, ETag, metadata):
/// its upload run by the pipeline's driver (`Indexer::index`). The order of its requests
/// (redelivery lookup, identification, markers, archive or plain index, bundle) is what
/// `tests/requests/` counts.
async fn index_first_block(
    ctx: Arc<Context>,
    event: ObjectEvent,
    mut first: FirstBlock,
    delivery: Delivery,
) -> std::io::Result<Job> {
    let event = &event;
    let first_read = first.bytes.len() as u64;
    let info = &first.info;
    let mut meta = upload_meta(&event.key, &first.metadata);
    if ctx.config.product_prefixes {
        if let Err(reason) = check_product_prefix(&event.key, &mut meta) {
            let rejected = located(event, &meta)
                .with_content(&info.etag, info.size)
                .nothing_published(None, Action::Rejected, reason);
            return Ok(Job {
                indexed: vec![rejected],
                ingest: None,
            });
        }
    }
    let version = event.version_id.as_deref();
    let object = (ctx
        .store
        .open_object(&event.bucket, &event.key, version, info.size))
    .with_first_block(std::mem::take(&mut first.bytes));
    let bytes = ObjectBytes::object(object);
    // Set by the copy of the artifact from its current object, if it proves it live.
    let seen = SeenCurrent::default();
    let source = CopySource::Object {
        bucket: &event.bucket,
        key: &event.key,
        version_id: version,
        size: info.size,
        etag: &info.etag,
        seen: Some(&seen),
    };
    let options = IdentifyOptions {
        as_source: ctx.config.is_source(&event.key),
    };
    let input = object_input(event, &info.etag, info.size, &meta);
    let upload = Upload::from_s3_object(&input, source, options);
    // A debug file has the unclaimed files it names indexed again from the ingest bucket
    // (sourcemap.rs, "sources without flags"), as a removal hands over what it freed.
    let claim = FromIngest(ctx.clone());
    // A plain object alone in its invocation: nothing of the invocation waits on its keys
    // before its finalize (the driver lists a bundle's at once: its files come next).
    let indexer = Indexer::new(&ctx.store, ctx.config.pipeline.clone())
        .claiming_sources_through(&claim)
        .sharing_markers(&ctx.markers)
        .lists_keys_at_finalize(delivery.alone);
    // A first delivery is most likely a new upload: its record is created by the plan without
    // a read (one of the same bytes at the same location indexed before is found then, and
    // answered from its record just the same). A re-delivery of an upload indexed in full is
    // answered from its upload record (one read): nothing identified or published again.
    let lookup = match delivery.first {
        true => RecordLookup::GuessAbsent,
        false => RecordLookup::Read,
    };
    let mut sink = ObjectSink::new(&ctx, &claim, event, info);
    indexer.index(&upload, lookup, &bytes, &mut sink).await?;
    let (walked, indexed) = (sink.walked, sink.pending);
    if walked {
        return Ok(Job {
            indexed,
            ingest: Some(Ingest::asked(event, &info.etag)),
        });
    }
    for one in &indexed {
        log_decisions(event, one, first_read + bytes.fetched());
    }
    // Nothing referenced (answered from the record, skipped, rejected): no liveness check.
    let referenced = indexed.iter().any(|i| i.upload.is_some());
    let ingest = referenced.then(|| Ingest {
        seen_current: seen.seen(),
        ..Ingest::asked(event, &info.etag)
    });
    Ok(Job { indexed, ingest })
}

/// Hands the keys a removal freed to the uploads waiting for them (refs/, invariant 8):
/// each is indexed again from its ingest object, every key checked (`Config::recheck`), and
/// finalized as a message of its own would be. One whose object is gone, or holds other
/// bytes now, is left to its own removal or index.
pub(crate) struct FromIngest(pub(crate) Arc<Context>);

impl HandOver for FromIngest {
    fn reindex<'a>(
        &'a self,
        waiter: &'a UploadRecord,
        handed: &'a std::collections::BTreeSet<String>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<()>> + Send + 'a>> {
        let (ctx, waiter, handed) = (self.0.clone(), waiter.clone(), handed.clone());
        // On a task of its own: the re-index runs inside the removal or debug file that hands
        // over (pipeline/, `unclaimed.rs`), and an index inside an index, the SDK beneath,
        // is more stack than a worker thread of an unoptimised build has.
        Box::pin(async move {
            tokio::spawn(async move { reindex(&ctx, &waiter, &handed).await })
                .await
                .map_err(|e| std::io::Error::other(format!("re-index: {e}")))?
        })
    }
}

async fn reindex(
    ctx: &Arc<Context>,
    waiter: &UploadRecord,
    handed: &std::collections::BTreeSet<String>,
) -> std::io::Result<()> {
    let location = Location::of_source(&waiter.source);
    let Some((bucket, key)) = location.s3() else {
        return Ok(());
    };
    let event = ObjectEvent {
        change: Change::Created,
        bucket: bucket.to_string(),
        key: key.to_string(),
        version_id: waiter.ingest_version.clone(),
        etag: None,
        size: None,
    };
    let version = event.version_id.as_deref();
    // One read: the first block says what the object holds now, and is where indexing starts.
    let Some(first) = ctx
        .store
        .head_with_first_block(bucket, key, version)
        .await?
    else {
        return Ok(());
    };
    // The same bytes still (an archive's entry: the archive's upload).
    let same = upload_id(&event, &first.info.etag)
        .parse::<UploadId>()
        .is_ok_and(|id| id.holds(&waiter.upload));
    if !same {
        return Ok(());
    }
    let mut config = ctx.config.clone();
    config.pipeline.recheck = true;
    config.pipeline.handed.clone_from(handed);
    let rechecking = Arc::new(Context {
        config,
        store: ctx.store.clone(),
        markers: ctx.markers.clone(),
    });
    let delivery = Delivery {
        alone: true,
        first: false,
    };
    let job = Box::pin(index_first_block(
        rechecking.clone(),
        event,
        first,
        delivery,
    ))
    .await?;
    run_jobs(&rechecking, vec![job])
        .await
        .map(|_| ())
        .map_err(|e| std::io::Error::other(e.to_string()))
}

/// Unindexes the uploads of one removed object: their records reach the manifest before the
/// keys they freed are handed over (`Indexer::end_removal`), so it says they were unpublished
/// before it says who published them again.
async fn remove_object(ctx: Arc<Context>, event: ObjectEvent) -> std::io::Result<Job> {
    let event = &event;
    let hand_over = FromIngest(ctx.clone());
    let indexer = Indexer::new(&ctx.store, ctx.config.pipeline.clone()).handing_over_to(&hand_over);
    let location = Location::S3 {
        bucket: event.bucket.clone(),
        key: event.key.clone(),
    };
    let uploads = indexer
        .refs()
        .uploads_of_source(&location.source(), &location.to_string())
        .await?;
    // A specific version deleted: only that upload; a delete marker or an unversioned delete:
    // every upload of the key.
    let only = match (event.change, &event.version_id) {
        (Change::Removed, Some(version)) => {
            Some(UploadId::s3(&event.bucket, &event.key, Some(version), None))
        }
        _ => None,
    };
    let mut removals = Vec::new();
    // An archive's entries are uploads of the same object (`<upload>!/<entry>`).
    let of_only = |u: &str| only.as_ref().is_none_or(|o| o.holds(u));
    for upload in uploads.iter().filter(|u| of_only(u)) {
        if let Some(removal) = indexer.begin_unindex(upload).await? {
            let record = &removal.record;
            tracing::info!(action = "unpublished", key = %event.key, upload = %upload, removed = record.removed.len(), "decision");
            removals.push(removal);
        }
    }
    if removals.is_empty() {
        tracing::info!(action = "none", key = %event.key, "no upload of this object was indexed");
    }
    let records: Vec<Record> = removals.iter().map(|r| r.record.clone()).collect();
    indexer.write_manifest(&records).await?;
    for removal in &removals {
        indexer.end_removal(removal).await?;
    }
    // In the manifest already.
    Ok(Job {
        indexed: Vec::new(),
        ingest: None,
    })
}

/// The work for one event: index a created object, or remove a deleted one.
#[derive(Clone, Copy)]
enum Work {
    Index,
    Remove,
}

/// What an invocation says about one object's event.
#[derive(Debug, Clone, Copy)]
struct Delivery {
    /// No other object in the invocation: it is finalized right after it is indexed, and
    /// nothing of the invocation waits on its keys before (`Indexer::lists_keys_at_finalize`).
    alone: bool,
    /// The message's first delivery (SQS `ApproximateReceiveCount` 1): the upload is taken
    /// to be new. Only a saving: a wrong guess costs a read, never a decision.
    first: bool,
}

async fn work(
    ctx: &Arc<Context>,
    kind: Work,
    event: ObjectEvent,
    delivery: Delivery,
) -> std::io::Result<Job> {
    // Only the ingest bucket's objects: anything else is said so and acknowledged (a retry
    // would meet the same refusal).
    if let Some(reason) = ctx.config.foreign_bucket(&event.bucket) {
        let record = located(&event, &UploadMeta::default()).nothing_published(
            None,
            Action::Rejected,
            reason,
        );
        log_decisions(&event, &record, 0);
        return Ok(Job {
            indexed: vec![record],
            ingest: None,
        });
    }
    // Boxed: the pipeline's futures are deep, and a task's size should not be.
    match kind {
        Work::Index => Box::pin(index_object(ctx.clone(), event, delivery)).await,
        Work::Remove => Box::pin(remove_object(ctx.clone(), event)).await,
    }
}

/// Processes every event of one message; `Err` fails the message. `message`: what the
/// invocation says about the message (`alone`: it is the only one).
async fn process(
    ctx: &Arc<Context>,
    events: Vec<ObjectEvent>,
    wanted: &[Change],
    kind: Work,
    message: Delivery,
) -> Result<Vec<Job>, String> {
    let events: Vec<ObjectEvent> = events
        .into_iter()
        .filter(|e| wanted.contains(&e.change))
        .collect();
    let delivery = Delivery {
        alone: message.alone && events.len() == 1,
        ..message
    };
    let mut jobs = Vec::new();
    for event in events {
        let name = format!("s3://{}/{}", event.bucket, event.key);
        jobs.push(
            work(ctx, kind, event, delivery)
                .await
                .map_err(|e| format!("{name}: {e}"))?,
        );
    }
    Ok(jobs)
}

/// Runs `work` on each of a batch's messages (its id, and what the work needs of it), at most
/// `concurrency` at once: each message's index, id and outcome, in the batch's order. A
/// message whose work panics has failed, alone: its batch-mates' outcomes stand (a panic
/// failing the invocation had every message of the batch retried with it, each time, until
/// the queue moved them all to its dead-letter queue — one hostile object taking the others'
/// records with it).
async fn each_message<I, T, F, Fut>(
    messages: Vec<(String, I)>,
    concurrency: usize,
    work: F,
) -> Result<Vec<(usize, String, Result<T, String>)>, Error>
where
    T: Send + 'static,
    F: Fn(I) -> Fut,
    Fut: std::future::Future<Output = Result<T, String>> + Send + 'static,
{
    let limit = Arc::new(tokio::sync::Semaphore::new(concurrency.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    let mut message_of = HashMap::new();
    for (index, (id, message)) in messages.into_iter().enumerate() {
        let (limit, job) = (limit.clone(), work(message));
        let task = tasks.spawn(async move {
            let _permit = limit.acquire_owned().await;
            job.await
        });
        message_of.insert(task.id(), (index, id));
    }
    let mut done = Vec::new();
    while let Some(joined) = tasks.join_next_with_id().await {
        let (task, outcome) = match joined {
            Ok((task, outcome)) => (task, outcome),
            Err(failed) if failed.is_panic() => {
                let task = failed.id();
                let what = symdex_shared::panic_message(&*failed.into_panic());
                (task, Err(format!("it panicked: {what}")))
            }
            Err(failed) => return Err(failed.into()),
        };
        let (index, id) = message_of.remove(&task).ok_or("a task of no message")?;
        done.push((index, id, outcome));
    }
    done.sort_by_key(|(index, _, _)| *index);
    Ok(done)
}

/// One SQS message: its events, processed.
async fn process_message(
    ctx: &Arc<Context>,
    body: Option<&str>,
    wanted: &[Change],
    kind: Work,
    delivery: Delivery,
) -> Result<Vec<Job>, String> {
    match body.map(serde_json::from_str::<Value>) {
        Some(Ok(body)) => match decode(&body) {
            Ok(events) => process(ctx, events, wanted, kind, delivery).await,
            Err(e) => Err(e),
        },
        Some(Err(e)) => Err(format!("message body is not JSON: {e}")),
        None => Err("message without body".to_string()),
    }
}

/// SQS batch -> partial batch response; direct S3 / EventBridge events -> all or error.
///
/// The messages of a batch run concurrently (at most `SYMDEX_CONCURRENCY` at once): the
/// store's protocol makes any interleaving safe. Records reach the manifest before any upload
/// is finalized; a message whose work or finalization failed is reported for a retry, never
/// acknowledged, and its retry reports the same decisions again.
async fn handle(
    ctx: &Arc<Context>,
    payload: Value,
    wanted: &[Change],
    kind: Work,
) -> Result<Value, Error> {
    if is_sqs_batch(&payload) {
        let batch: SqsEvent = serde_json::from_value(payload)?;
        let sole_message = batch.records.len() == 1;
        let messages = batch
            .records
            .into_iter()
            .map(|m| (m.message_id.clone().unwrap_or_default(), m));
        let done = each_message(messages.collect(), ctx.config.concurrency, |message| {
            let (ctx, wanted) = (ctx.clone(), wanted.to_vec());
            async move {
                let delivery = Delivery {
                    alone: sole_message,
                    first: message
                        .attributes
                        .get("ApproximateReceiveCount")
                        .is_some_and(|count| count == "1"),
                };
                let body = message.body.as_deref();
                process_message(&ctx, body, &wanted, kind, delivery).await
            }
        })
        .await?;
        let mut failures = Vec::new();
        let mut succeeded = Vec::new();
        for (_, id, outcome) in done {
            match outcome {
                Ok(jobs) => succeeded.push((id, jobs)),
                Err(reason) => {
                    tracing::error!(message_id = %id, reason = %reason, "message failed; it will be retried");
                    failures.push(id);
                }
            }
        }
        let records: Vec<Record> = succeeded
            .iter()
            .flat_map(|(_, jobs)| jobs.iter().flat_map(|j| j.records().cloned()))
            .collect();
        let messages: Vec<&[Job]> = succeeded.iter().map(|(_, jobs)| jobs.as_slice()).collect();
        let alive = manifest_and_liveness(ctx, records, &messages).await?;
        // Each message's uploads are finalized on their own records: a few messages at once.
        let finalizes = succeeded
            .into_iter()
            .zip(alive)
            .map(|((id, jobs), alive)| (id, (jobs, alive)));
        let finalized = each_message(
            finalizes.collect(),
            ctx.config.concurrency,
            |(jobs, alive)| {
                let ctx = ctx.clone();
                async move { finalize(&ctx, &FromIngest(ctx.clone()), jobs, alive).await }
            },
        )
        .await?;
        for (_, id, outcome) in finalized {
            if let Err(reason) = outcome {
                tracing::error!(message_id = %id, reason = %reason, "finalizing failed; it will be retried");
                failures.push(id);
            }
        }
        let mut response = SqsBatchResponse::default();
        response.batch_item_failures = failures
            .into_iter()
            .map(|id| {
                let mut failure = BatchItemFailure::default();
                failure.item_identifier = id;
                failure
            })
            .collect();
        return Ok(serde_json::to_value(response)?);
    }
    let events = decode(&payload)?;
    // A direct invocation says nothing of earlier attempts (Lambda retries failed
    // asynchronous ones): the upload record is read first.
    let delivery = Delivery {
        alone: true,
        first: false,
    };
    let jobs = process(ctx, events, wanted, kind, delivery).await?;
    let count = run_jobs(ctx, jobs).await?;
    Ok(json!({ "records": count }))
}

/// The records of `jobs` to the manifest, then their uploads finalized (taken back where the
/// ingest object is gone, which is recorded too). Returns how many records were written.
async fn run_jobs(ctx: &Arc<Context>, jobs: Vec<Job>) -> Result<usize, Error> {
    let records: Vec<Record> = jobs.iter().flat_map(|j| j.records().cloned()).collect();
    let count = records.len();
    let alive = manifest_and_liveness(ctx, records, &[&jobs]).await?;
    let undone = finalize(
        ctx,
        &FromIngest(ctx.clone()),
        jobs,
        alive.into_iter().flatten().collect(),
    )
    .await?;
    Ok(count + undone.len())
}

/// The indexer: ObjectCreated events.
pub async fn handle_indexer(ctx: &Arc<Context>, payload: Value) -> Result<Value, Error> {
    Box::pin(handle(ctx, payload, &[Change::Created], Work::Index)).await
}

/// The remover: ObjectRemoved events.
pub async fn handle_remover(ctx: &Arc<Context>, payload: Value) -> Result<Value, Error> {
    Box::pin(handle(
        ctx,
        payload,
        &[Change::Removed, Change::DeleteMarker],
        Work::Remove,
    ))
    .await
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::{check_product_prefix, each_message, upload_meta, UploadMeta};

    #[test]
    fn product_prefixes_are_checked_against_metadata() {
        let meta = |product: Option<&str>| UploadMeta {
            product: product.map(str::to_string),
            ..UploadMeta::default()
        };
        let mut m = meta(None);
        assert!(check_product_prefix("demo/b/app.debug", &mut m).is_ok());
        assert_eq!(m.product.as_deref(), Some("demo"), "the prefix names it");
        let mut m = meta(Some("demo"));
        assert!(check_product_prefix("product=demo/app.debug", &mut m).is_ok());
        let mut m = meta(Some("other"));
        let err = check_product_prefix("demo/app.debug", &mut m).unwrap_err();
        assert!(err.contains("does not match"), "{err}");
        assert!(check_product_prefix("app.debug", &mut meta(None)).is_err());
        assert!(check_product_prefix("/app.debug", &mut meta(None)).is_err());
    }

    /// A message whose work panics fails alone; the others' outcomes stand, in order.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_message_that_panics_fails_alone() {
        let messages = ["a", "b", "c"].map(|id| (id.to_string(), id.to_string()));
        let done = each_message(messages.to_vec(), 2, |body| async move {
            if body == "b" {
                panic!("a parser's bug");
            }
            Ok::<_, String>(body.to_uppercase())
        })
        .await
        .unwrap();
        let outcomes: Vec<(usize, &str, Result<&str, &str>)> = done
            .iter()
            .map(|(i, id, o)| (*i, id.as_str(), o.as_deref().map_err(String::as_str)))
            .collect();
        assert_eq!(
            outcomes,
            [
                (0, "a", Ok("A")),
                (1, "b", Err("it panicked: a parser's bug")),
                (2, "c", Ok("C")),
            ]
        );
    }

    #[test]
    fn metadata_from_headers_or_path() {
        let mut meta = HashMap::new();
        meta.insert("build".to_string(), "77".to_string());
        let m = upload_meta("product=app/version=1.2/build=9/x.pdb", &meta);
        assert_eq!(m.build.as_deref(), Some("77"), "object metadata wins");
        assert_eq!(m.product.as_deref(), Some("app"));
        assert_eq!(m.version.as_deref(), Some("1.2"));
        assert_eq!(upload_meta("x.pdb", &HashMap::new()), UploadMeta::default());
    }

    /// An empty product (metadata or segment) is no product: the overwrite's product rule
    /// and the source joins agree on it, and a product prefix names it.
    #[test]
    fn an_empty_product_is_none() {
        let empty: HashMap<String, String> = [("product".to_string(), String::new())].into();
        assert_eq!(upload_meta("demo/x.pdb", &empty).product, None);
        assert_eq!(upload_meta("product=/x.pdb", &HashMap::new()).product, None);
        let mut m = upload_meta("demo/x.pdb", &empty);
        assert!(check_product_prefix("demo/x.pdb", &mut m).is_ok());
        assert_eq!(m.product.as_deref(), Some("demo"));
    }
}
