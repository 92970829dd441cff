//! The handlers driven by what a real S3 -> SQS notification pipeline delivers, against
//! moto_server on 127.0.0.1.

#[path = "support/checks.rs"]
mod checks;
mod support;

use std::sync::Arc;

use serde_json::{json, Value};
use support::{config, sqs_event, Fixtures, Stack, INGEST, SERVING};
use symdex_lambda::{handle_indexer, handle_remover, Context};

fn gunzip(bytes: &[u8]) -> String {
    use std::io::Read;
    let mut text = String::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_string(&mut text)
        .unwrap();
    text
}

async fn context(stack: &Stack, extra: &[(&str, &str)]) -> Arc<Context> {
    Arc::new(Context::new(config(extra), stack.moto.s3().await))
}

fn failures(response: &Value) -> Vec<String> {
    response["batchItemFailures"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|f| f["itemIdentifier"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Deletes `key` from the ingest bucket and runs the remover on the event that arrives.
async fn delete_and_remove(stack: &Stack, ctx: &Arc<Context>, key: &str) {
    let delete = stack.s3.delete_object().bucket(INGEST).key(key);
    delete.send().await.unwrap();
    let removed = stack.receive(1).await;
    let response = handle_remover(ctx, sqs_event(&removed, &stack.queue_arn))
        .await
        .unwrap();
    assert!(failures(&response).is_empty(), "{response}");
}

/// Uploads `file` to the ingest bucket as `key` and indexes its notification: no failure.
async fn upload_and_index(stack: &Stack, ctx: &Arc<Context>, key: &str, file: &std::path::Path) {
    stack.upload(key, file).await;
    let created = stack.receive(1).await;
    let response = handle_indexer(ctx, sqs_event(&created, &stack.queue_arn))
        .await
        .unwrap();
    assert!(failures(&response).is_empty(), "{response}");
}

const DEBUG_KEY: &str = "product=demo/build=7/my app+1.debug";
const BIN_KEY: &str = "product=demo/build=7/my app+1";

async fn upload_fixtures(stack: &Stack, fx: &Fixtures) {
    stack.upload(DEBUG_KEY, &fx.path("app.debug")).await;
    stack.upload(BIN_KEY, &fx.path("app.stripped")).await;
    stack
        .upload("product=demo/build=7/notes.txt", &fx.path("notes.txt"))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_through_sqs_publish_keys_and_a_manifest() {
    let stack = Stack::new().await;
    let fx = Fixtures::build();
    upload_fixtures(&stack, &fx).await;
    let messages = stack.receive(3).await;
    let ctx = context(&stack, &[]).await;
    let response = handle_indexer(&ctx, sqs_event(&messages, &stack.queue_arn))
        .await
        .unwrap();
    assert!(failures(&response).is_empty(), "{response}");

    let bid = fx.build_id();
    let serving = stack.objects(SERVING, "").await;
    let get = |key: &str| {
        serving
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(
        get(&format!("buildid/{bid}/debuginfo")).unwrap(),
        std::fs::read(fx.path("app.debug")).unwrap()
    );
    assert_eq!(
        get(&format!("buildid/{bid}/executable")).unwrap(),
        std::fs::read(fx.path("app.stripped")).unwrap()
    );
    // The decoded key (space and plus) named the SSQP key.
    assert!(
        get(&format!("symbols/my app+1/elf-buildid-{bid}/my app+1")).is_some(),
        "{:?}",
        serving.iter().map(|(k, _)| k).collect::<Vec<_>>()
    );
    assert!(get(&format!("symbols/_.debug/elf-buildid-sym-{bid}/_.debug")).is_some());

    let manifests: Vec<_> = serving
        .iter()
        .filter(|(k, _)| k.starts_with("_manifest/dt="))
        .collect();
    assert_eq!(manifests.len(), 1, "one manifest object per batch");
    assert!(manifests[0].0.ends_with(".jsonl.gz"));
    let text = gunzip(&manifests[0].1);
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 3);
    let by_key = |k: &str| records.iter().find(|r| r["ingest_key"] == k).unwrap();
    assert_eq!(by_key(DEBUG_KEY)["action"], "indexed");
    assert_eq!(by_key(DEBUG_KEY)["ingest_bucket"], INGEST);
    assert_eq!(by_key(DEBUG_KEY)["build"], "ci-42", "object metadata");
    assert_eq!(by_key(DEBUG_KEY)["product"], "demo", "key path");
    assert_eq!(
        by_key("product=demo/build=7/notes.txt")["action"],
        "skipped"
    );
}

/// Serving-bucket content and references, without the manifest and upload timestamps.
async fn state(stack: &Stack) -> Vec<(String, Vec<u8>)> {
    stack
        .objects(SERVING, "")
        .await
        .into_iter()
        .filter(|(k, _)| !k.starts_with("_manifest/") && !k.starts_with("_symdex/uploads/"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_event_delivered_three_times_out_of_order_changes_nothing() {
    let stack = Stack::new().await;
    let fx = Fixtures::build();
    upload_fixtures(&stack, &fx).await;
    let messages = stack.receive(3).await;
    let ctx = context(&stack, &[]).await;
    handle_indexer(&ctx, sqs_event(&messages, &stack.queue_arn))
        .await
        .unwrap();
    let once = state(&stack).await;
    let uploads_once = stack.objects(SERVING, "_symdex/uploads/").await.len();

    // Redeliver: each message three more times, in reversed and interleaved order, in batches.
    let mut again: Vec<_> = messages.iter().rev().cloned().collect();
    again.extend(messages.iter().cloned());
    again.extend(messages.iter().rev().cloned());
    for batch in again.chunks(2) {
        let response = handle_indexer(&ctx, sqs_event(batch, &stack.queue_arn))
            .await
            .unwrap();
        assert!(failures(&response).is_empty());
    }
    assert_eq!(
        state(&stack).await,
        once,
        "redelivery changed the serving bucket or references"
    );
    assert_eq!(
        stack.objects(SERVING, "_symdex/uploads/").await.len(),
        uploads_once
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_object_is_reported_while_the_rest_publishes() {
    let stack = Stack::new().await;
    let fx = Fixtures::build();
    stack.upload("good.debug", &fx.path("app.debug")).await;
    stack.upload("gone.debug", &fx.path("app.debug")).await;
    let mut messages = stack.receive(2).await;
    // The object behind one message disappears before it is indexed.
    stack
        .s3
        .delete_object()
        .bucket(INGEST)
        .key("gone.debug")
        .send()
        .await
        .unwrap();
    stack.drain().await;
    // And a poison message that is not an event at all.
    let mut poison = messages[0].clone();
    poison.message_id = Some("poison".into());
    poison.body = Some("{\"not\": \"an event\"}".into());
    messages.push(poison);
    let ctx = context(&stack, &[]).await;
    let response = handle_indexer(&ctx, sqs_event(&messages, &stack.queue_arn))
        .await
        .unwrap();
    let failed = failures(&response);
    let gone_id = messages
        .iter()
        .find(|m| m.body.as_deref().unwrap().contains("gone.debug"))
        .unwrap()
        .message_id
        .clone()
        .unwrap();
    assert_eq!(failed, ["poison".to_string()], "{response}");
    assert!(
        !failed.contains(&gone_id),
        "an object deleted before it was indexed is skipped, not retried into the DLQ"
    );
    let skipped: Vec<Value> = checks::manifest_records(&stack, SERVING)
        .await
        .into_iter()
        .filter(|r| r["ingest_key"] == "gone.debug")
        .collect();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!(skipped[0]["action"], "skipped");
    assert!(skipped[0]["reason"]
        .as_str()
        .unwrap()
        .contains("no longer exists"));
    let bid = fx.build_id();
    assert!(
        stack
            .objects(SERVING, &format!("buildid/{bid}/debuginfo"))
            .await
            .len()
            == 1,
        "the good object published"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_objects_are_copied_with_upload_part_copy() {
    let stack = Stack::new().await;
    let fx = Fixtures::build();
    // A 12 MiB debug file (padded) above an 8 MiB threshold: two parts.
    let big = fx.path("big.debug");
    std::fs::copy(fx.path("app.debug"), &big).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&big)
        .unwrap()
        .set_len(12 << 20)
        .unwrap();
    stack.upload("big.debug", &big).await;
    let messages = stack.receive(1).await;
    let ctx = context(
        &stack,
        &[
            ("SYMDEX_MULTIPART_THRESHOLD", &(8u64 << 20).to_string()),
            ("SYMDEX_LAYOUTS", "debuginfod"),
        ],
    )
    .await;
    let response = handle_indexer(&ctx, sqs_event(&messages, &stack.queue_arn))
        .await
        .unwrap();
    assert!(failures(&response).is_empty(), "{response}");
    assert!(
        ctx.store.stats().part_copies() >= 2,
        "UploadPartCopy was not used"
    );
    // Identification read kilobytes of the 12 MiB object, and the copy moved no bytes
    // through the function.
    let read = ctx.store.stats().range_bytes();
    assert!(
        read > 0 && read < 256 << 10,
        "identification read {read} bytes"
    );
    let copied = stack
        .objects(SERVING, &format!("buildid/{}/debuginfo", fx.build_id()))
        .await;
    assert_eq!(copied[0].1, std::fs::read(&big).unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_remover_unpublishes_keys_no_other_upload_references() {
    let stack = Stack::new().await;
    the_remover_unpublishes_keys_in(&stack, false).await;
    // New stores name upload records under their location: no source record is written.
    assert!(stack.objects(SERVING, "_symdex/sources/").await.is_empty());
    let layout = stack.objects(SERVING, "_symdex/layout.json").await;
    assert_eq!(layout[0].1, br#"{"uploads":"by-location"}"#);
}

/// A store an earlier version wrote (flat upload records, a source record per location) keeps
/// its layout: indexed and unindexed the same, its records where that version put them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_written_before_upload_records_were_named_by_location_keeps_its_layout() {
    let stack = Stack::new().await;
    let earlier = json!({
        "upload": "s3:symdex-ingest/old.debug@v0",
        "source": "s3://symdex-ingest/old.debug",
        "state": "indexed",
    });
    let upload_file = "_symdex/uploads/0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a.json";
    let source = json!({"source": "s3://symdex-ingest/old.debug", "uploads": ["s3:symdex-ingest/old.debug@v0"]});
    let source_file = "_symdex/sources/0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b.json";
    for (key, body) in [(upload_file, earlier), (source_file, source)] {
        let body = body.to_string().into_bytes();
        let put = stack
            .s3
            .put_object()
            .bucket(SERVING)
            .key(key)
            .body(body.into());
        put.send().await.unwrap();
    }
    the_remover_unpublishes_keys_in(&stack, true).await;
    let layout = stack.objects(SERVING, "_symdex/layout.json").await;
    assert_eq!(layout[0].1, br#"{"uploads":"flat"}"#);
    let uploads = stack.objects(SERVING, "_symdex/uploads/").await;
    assert_eq!(
        uploads.len(),
        1,
        "the earlier upload's record alone is left"
    );
    assert_eq!(uploads[0].0, upload_file);
}

/// Two uploads of one debug file: removing one keeps its keys, removing both unpublishes them.
/// `flat`: the store keeps source records (checked while both uploads are there).
async fn the_remover_unpublishes_keys_in(stack: &Stack, flat: bool) {
    let fx = Fixtures::build();
    stack
        .upload("build-1/app.debug", &fx.path("app.debug"))
        .await;
    stack
        .upload("build-2/app.debug", &fx.path("app.debug"))
        .await;
    let ctx = context(stack, &[]).await;
    let created = stack.receive(2).await;
    handle_indexer(&ctx, sqs_event(&created, &stack.queue_arn))
        .await
        .unwrap();
    let key = format!("buildid/{}/debuginfo", fx.build_id());
    let sources = stack.objects(SERVING, "_symdex/sources/").await;
    assert_eq!(sources.len(), if flat { 3 } else { 0 });
    let uploads = stack.objects(SERVING, "_symdex/uploads/").await;
    let nested = uploads.iter().filter(|(k, _)| k.matches('/').count() == 3);
    assert_eq!(nested.count(), if flat { 0 } else { 2 }, "{uploads:?}");

    stack
        .s3
        .delete_object()
        .bucket(INGEST)
        .key("build-1/app.debug")
        .send()
        .await
        .unwrap();
    let removed = stack.receive(1).await;
    let response = handle_remover(&ctx, sqs_event(&removed, &stack.queue_arn))
        .await
        .unwrap();
    assert!(failures(&response).is_empty());
    assert_eq!(
        stack.objects(SERVING, &key).await.len(),
        1,
        "build-2 still references it"
    );

    stack
        .s3
        .delete_object()
        .bucket(INGEST)
        .key("build-2/app.debug")
        .send()
        .await
        .unwrap();
    let removed = stack.receive(1).await;
    // The indexer ignores removals, the remover ignores creations: one queue can feed both.
    handle_indexer(&ctx, sqs_event(&removed, &stack.queue_arn))
        .await
        .unwrap();
    assert_eq!(stack.objects(SERVING, &key).await.len(), 1);
    handle_remover(&ctx, sqs_event(&removed, &stack.queue_arn))
        .await
        .unwrap();
    assert!(
        stack.objects(SERVING, &key).await.is_empty(),
        "the last reference is gone"
    );
    assert!(stack.objects(SERVING, "symbols/").await.is_empty());
}

/// An unstripped binary holds its build id's `debuginfo` key; its separate debug file,
/// uploaded after, finds the key taken and waits for it (refs/, invariant 8). Removing the
/// binary hands the key to the debug file, indexed again from its ingest object — and the
/// manifest says the key was unpublished before it says it was published again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_a_binary_hands_its_debuginfo_to_the_separate_debug_file_waiting_for_it() {
    let stack = Stack::new().await;
    let fx = Fixtures::build();
    let ctx = context(&stack, &[]).await;
    let debuginfo = format!("buildid/{}/debuginfo", fx.build_id());
    for (key, file) in [("build-1/app", "app"), ("build-1/app.debug", "app.debug")] {
        upload_and_index(&stack, &ctx, key, &fx.path(file)).await;
    }
    let binary = std::fs::read(fx.path("app")).unwrap();
    let debug_file = std::fs::read(fx.path("app.debug")).unwrap();
    assert!(stack.objects(SERVING, &debuginfo).await[0].1 == binary);
    let waiting = stack.objects(SERVING, "_symdex/waiting/").await;
    assert!(!waiting.is_empty(), "the debug file waits for the key");

    delete_and_remove(&stack, &ctx, "build-1/app").await;
    let found = stack.objects(SERVING, &debuginfo).await;
    assert_eq!(found.len(), 1, "handed over, not unpublished");
    assert!(found[0].1 == debug_file, "the debug file's bytes");
    let (problems, refs) = checks::audited(&stack, SERVING).await;
    assert!(problems.is_empty(), "{problems:?}");
    let holders: Vec<&String> = refs[&debuginfo].iter().collect();
    assert_eq!(holders.len(), 1);
    assert!(holders[0].contains("app.debug"), "{holders:?}");
    // The manifest, in order: the binary's removal, then the debug file publishing the key.
    let records = checks::manifest_records(&stack, SERVING).await;
    let mentions = |r: &Value, list: &str| {
        r[list]
            .as_array()
            .is_some_and(|keys| keys.iter().any(|k| k == debuginfo.as_str()))
    };
    let unpublished = records.iter().position(|r| mentions(r, "removed"));
    let republished = records.iter().rposition(|r| mentions(r, "published"));
    assert!(
        unpublished.is_some() && unpublished < republished,
        "{unpublished:?} {republished:?}: {records:#?}"
    );
}

/// SYMDEX_OVERWRITE: a second build's debug file (other bytes, the same build id) replaces
/// the first one's at every key, and the first waits for them (refs/, invariant 8).
/// Removing the second build's file hands them back: the first one, indexed again from its
/// ingest object, serves them — not the removed build's bytes, and not nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_an_overwriting_debug_file_hands_its_keys_back_to_the_one_it_replaced() {
    let stack = Stack::new().await;
    let fx = Fixtures::build();
    let first = std::fs::read(fx.path("app.debug")).unwrap();
    let mut second = first.clone();
    second.extend_from_slice(b"rebuilt"); // the same build id, other bytes
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("second.debug"), &second).unwrap();
    let debuginfo = format!("buildid/{}/debuginfo", fx.build_id());
    let plain = context(&stack, &[]).await;
    let overwriting = context(&stack, &[("SYMDEX_OVERWRITE", "true")]).await;
    for (key, file, ctx) in [
        ("build-1/app.debug", fx.path("app.debug"), &plain),
        (
            "build-2/app.debug",
            dir.path().join("second.debug"),
            &overwriting,
        ),
    ] {
        upload_and_index(&stack, ctx, key, &file).await;
    }
    assert!(stack.objects(SERVING, &debuginfo).await[0].1 == second);
    let records = checks::manifest_records(&stack, SERVING).await;
    assert!(
        records
            .iter()
            .any(|r| r["ingest_key"] == "build-2/app.debug"
                && r["reason"].as_str().is_some_and(
                    |why| why.contains("overwrote") && why.contains("build-1/app.debug")
                )),
        "the manifest says whose bytes were replaced: {records:#?}"
    );
    let (problems, refs) = checks::audited(&stack, SERVING).await;
    assert!(problems.is_empty(), "{problems:?}");
    assert!(
        refs[&debuginfo].iter().all(|u| u.contains("build-2")),
        "the replaced build no longer references the key: {:?}",
        refs[&debuginfo]
    );
    // Delivered again, the replaced build says that other bytes hold its key: its record's
    // answer (`unchanged`) was forgotten by the overwrite.
    let again = json!({"Records": [{"eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": "us-east-1",
        "eventName": "ObjectCreated:Put",
        "s3": {"bucket": {"name": INGEST, "arn": "arn:aws:s3:::symdex-ingest"}, "object": {"key": "build-1/app.debug"}}}]});
    handle_indexer(&plain, again).await.unwrap();
    let records = checks::manifest_records(&stack, SERVING).await;
    let last = records
        .iter()
        .rfind(|r| r["ingest_key"] == "build-1/app.debug")
        .unwrap();
    assert_eq!(last["action"], "conflict", "{records:#?}");

    delete_and_remove(&stack, &plain, "build-2/app.debug").await;
    let found = stack.objects(SERVING, &debuginfo).await;
    assert_eq!(found.len(), 1, "handed back, not unpublished");
    assert!(found[0].1 == first, "the first build's bytes");
    let (problems, refs) = checks::audited(&stack, SERVING).await;
    assert!(problems.is_empty(), "{problems:?}");
    assert!(
        refs[&debuginfo].iter().all(|u| u.contains("build-1")),
        "{:?}",
        refs[&debuginfo]
    );
    assert!(
        stack.objects(SERVING, "_symdex/waiting/").await.is_empty(),
        "the wait ended with the hand-back"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_s3_and_eventbridge_events() {
    let stack = Stack::new().await;
    let fx = Fixtures::build();
    stack.upload("dir/a b.debug", &fx.path("app.debug")).await;
    stack.drain().await;
    let ctx = context(&stack, &[]).await;
    let direct = json!({"Records": [{"eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": "us-east-1",
        "eventName": "ObjectCreated:Put",
        "s3": {"bucket": {"name": INGEST, "arn": "arn:aws:s3:::symdex-ingest"}, "object": {"key": "dir/a+b.debug"}}}]});
    assert_eq!(handle_indexer(&ctx, direct).await.unwrap()["records"], 1);
    let eventbridge = json!({"version": "0", "id": "1", "detail-type": "Object Created", "source": "aws.s3",
        "account": "123456789012", "time": "2026-11-21T00:00:00Z", "region": "us-east-1", "resources": [],
        "detail": {"version": "0", "bucket": {"name": INGEST}, "object": {"key": "dir/a b.debug"}, "reason": "PutObject"}});
    assert_eq!(
        handle_indexer(&ctx, eventbridge).await.unwrap()["records"],
        1
    );
    let test_event = json!({"Records": [{"eventSource": "aws:sqs", "messageId": "t", "body":
        "{\"Service\":\"Amazon S3\",\"Event\":\"s3:TestEvent\",\"Bucket\":\"symdex-ingest\"}"}]});
    assert!(failures(&handle_indexer(&ctx, test_event).await.unwrap()).is_empty());
    let missing = json!({"Records": [{"eventSource": "aws:s3", "eventName": "ObjectCreated:Put",
        "s3": {"bucket": {"name": INGEST}, "object": {"key": "nope"}}}]});
    assert_eq!(
        handle_indexer(&ctx, missing).await.unwrap()["records"],
        1,
        "an event for an object that is gone is recorded as skipped"
    );
    let poison = json!({"not": "an event"});
    assert!(
        handle_indexer(&ctx, poison).await.is_err(),
        "a direct event that fails is an error (retried)"
    );
    assert!(!stack
        .objects(SERVING, &format!("buildid/{}/debuginfo", fx.build_id()))
        .await
        .is_empty());
}

/// The functions act on the ingest bucket's events alone: an event naming the serving bucket
/// (a direct invoke aimed at its private records) or, with SYMDEX_INGEST_BUCKET, any other
/// bucket is recorded as rejected, acknowledged (not retried), and reads nothing there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_for_other_buckets_are_rejected_and_acknowledged() {
    let stack = Stack::new().await;
    let fx = Fixtures::build();
    stack.upload("ci/app.debug", &fx.path("app.debug")).await;
    let created = stack.receive(1).await;
    let ctx = context(&stack, &[("SYMDEX_INGEST_BUCKET", INGEST)]).await;
    let event = |bucket: &str, key: &str, name: &str| {
        json!({"Records": [{"eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": "us-east-1",
            "eventName": name, "s3": {"bucket": {"name": bucket}, "object": {"key": key}}}]})
    };
    for (bucket, key) in [
        (SERVING, "_symdex/layout.json"),
        ("someone-elses-bucket", "ci/app.debug"),
    ] {
        for (name, handle) in [("ObjectCreated:Put", true), ("ObjectRemoved:Delete", false)] {
            let payload = event(bucket, key, name);
            let response = if handle {
                handle_indexer(&ctx, payload).await
            } else {
                handle_remover(&ctx, payload).await
            };
            assert_eq!(response.unwrap()["records"], 1, "{bucket} {name}");
        }
    }
    // Through SQS too: acknowledged, no failure to retry.
    let mut foreign = sqs_event(&created, &stack.queue_arn);
    let body = foreign["Records"][0]["body"]
        .as_str()
        .unwrap()
        .replace(INGEST, "someone-elses-bucket");
    foreign["Records"][0]["body"] = Value::String(body);
    assert!(failures(&handle_indexer(&ctx, foreign).await.unwrap()).is_empty());
    let records = checks::manifest_records(&stack, SERVING).await;
    assert_eq!(records.len(), 5, "{records:?}");
    for record in &records {
        assert_eq!(record["action"], "rejected", "{record}");
        assert!(
            record["reason"].as_str().unwrap().contains("bucket"),
            "{record}"
        );
    }
    assert!(checks::published(&stack, SERVING).await.is_empty());
    // The ingest bucket's own event is indexed as ever.
    let response = handle_indexer(&ctx, sqs_event(&created, &stack.queue_arn))
        .await
        .unwrap();
    assert!(failures(&response).is_empty());
    assert!(checks::published(&stack, SERVING)
        .await
        .contains_key(&format!("buildid/{}/debuginfo", fx.build_id())));
}

/// Ids are global: product beta's upload meeting keys product alpha published first with other
/// bytes is a conflict naming alpha (`held_by_products`), alpha's bytes stay served; the
/// decision log says `conflict`, which the module's metric filter counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_with_another_products_keys_names_that_product() {
    let stack = Stack::new().await;
    let sym = |body: &str| {
        format!("MODULE Linux x86_64 0123456789ABCDEF0123456789ABCDEF0 app\nFILE 0 /src/{body}.c\n")
            .into_bytes()
    };
    stack
        .put("alpha/app.sym", sym("first"), &[("product", "alpha")])
        .await;
    let first = stack.receive(1).await;
    let ctx = context(&stack, &[]).await;
    let response = handle_indexer(&ctx, sqs_event(&first, &stack.queue_arn))
        .await
        .unwrap();
    assert!(failures(&response).is_empty());
    stack
        .put("beta/app.sym", sym("squatted"), &[("product", "beta")])
        .await;
    let second = stack.receive(1).await;
    let response = handle_indexer(&ctx, sqs_event(&second, &stack.queue_arn))
        .await
        .unwrap();
    assert!(
        failures(&response).is_empty(),
        "a conflict is a decision, not a retry"
    );
    let records = checks::manifest_records(&stack, SERVING).await;
    let beta = records
        .iter()
        .find(|r| r["ingest_key"] == "beta/app.sym")
        .unwrap();
    assert_eq!(beta["action"], "conflict");
    assert_eq!(beta["held_by_products"], json!(["alpha"]));
    assert!(
        beta["reason"].as_str().unwrap().contains("cross-product"),
        "{beta}"
    );
    let published = checks::published(&stack, SERVING).await;
    assert!(published.values().any(|b| *b == sym("first")));
    assert!(!published.values().any(|b| *b == sym("squatted")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_product_prefixes_a_lying_product_is_rejected() {
    let stack = Stack::new().await;
    let fx = Fixtures::build();
    let debug = std::fs::read(fx.path("app.debug")).unwrap();
    stack
        .put("demo/app.debug", debug, &[("product", "other")])
        .await;
    let stripped = std::fs::read(fx.path("app.stripped")).unwrap();
    stack.put("demo/app", stripped, &[]).await;
    let messages = stack.receive(2).await;
    let ctx = context(&stack, &[("SYMDEX_PRODUCT_PREFIXES", "true")]).await;
    let response = handle_indexer(&ctx, sqs_event(&messages, &stack.queue_arn))
        .await
        .unwrap();
    assert!(failures(&response).is_empty(), "{response}");
    let records = checks::manifest_records(&stack, SERVING).await;
    let by_key = |k: &str| records.iter().find(|r| r["ingest_key"] == k).unwrap();
    let lying = by_key("demo/app.debug");
    assert_eq!(lying["action"], "rejected");
    assert!(lying["reason"]
        .as_str()
        .unwrap()
        .contains("does not match its key prefix"));
    assert_eq!(by_key("demo/app")["action"], "indexed");
    assert_eq!(by_key("demo/app")["product"], "demo");
    let published = checks::published(&stack, SERVING).await;
    assert!(!published.contains_key(&format!("buildid/{}/debuginfo", fx.build_id())));
    assert!(published.contains_key(&format!("buildid/{}/executable", fx.build_id())));
}

/// SYMDEX_ALIASES=redirect: each artifact is stored once; its other keys are zero-byte
/// redirects to the key holding the bytes (what the CDN's viewer-response function and the S3
/// website endpoint answer with a 301). An alias never outlives its target: a second PDB of
/// the same bytes under another name finds the first one's aliases in place and holds their
/// target, so removing the first keeps every key the second needs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirect_aliases_store_each_artifact_once_and_never_dangle() {
    use symdex_shared::testing::builders::{build_msf, dbi_stream, info_stream};
    let stack = Stack::new().await;
    let ctx = context(&stack, &[("SYMDEX_ALIASES", "redirect")]).await;
    let fx = Fixtures::build();
    let pdb = build_msf(
        4096,
        &[
            None,
            Some(info_stream([0x5c; 16], 3)),
            None,
            Some(dbi_stream(1, 0x8664)),
        ],
    );
    std::fs::write(fx.path("foo.pdb"), &pdb).unwrap();
    std::fs::write(fx.path("bar.pdb"), &pdb).unwrap();
    std::fs::write(
        fx.path("libfat.dylib"),
        symdex_shared::testing::builders::build_fat_macho((0xa1, 0xb2)),
    )
    .unwrap();
    let index = |key: &'static str, file: &'static str| {
        let (stack, ctx, path) = (&stack, &ctx, fx.path(file));
        async move { upload_and_index(stack, ctx, key, &path).await }
    };
    index("ci/app.debug", "app.debug").await;
    index("ci/app.stripped", "app.stripped").await;
    index("ci/foo.pdb", "foo.pdb").await;
    // One upload, one identity per slice: the slices' keys name the same stored bytes.
    index("ci/libfat.dylib", "libfat.dylib").await;
    let input: u64 = ["app.debug", "app.stripped", "foo.pdb", "libfat.dylib"]
        .iter()
        .map(|f| std::fs::metadata(fx.path(f)).unwrap().len())
        .sum();
    // Every published key: bytes, or a redirect to a key holding the same bytes.
    let check = |stack: &Stack| {
        let s3 = stack.s3.clone();
        async move {
            let mut stored = 0u64;
            let mut aliases = 0;
            let keys = symdex_shared::storage::s3::S3Store::new(s3.clone(), SERVING);
            for key in symdex_shared::storage::Storage::list(&keys, "")
                .await
                .unwrap()
            {
                if key.starts_with("_symdex/") || key.starts_with("_manifest/") {
                    continue;
                }
                let head = s3
                    .head_object()
                    .bucket(SERVING)
                    .key(&key)
                    .send()
                    .await
                    .unwrap();
                let size = head.content_length().unwrap_or(0) as u64;
                stored += size;
                if let Some(target) = head.website_redirect_location() {
                    assert_eq!(size, 0, "{key}: an alias holds no bytes");
                    let target = target.trim_start_matches('/');
                    let target_head = s3
                        .head_object()
                        .bucket(SERVING)
                        .key(target)
                        .send()
                        .await
                        .unwrap_or_else(|e| panic!("{key} -> {target}: {e}"));
                    assert!(target_head.website_redirect_location().is_none(), "one hop");
                    let meta = head.metadata().cloned().unwrap_or_default();
                    assert_eq!(
                        meta.get("symdex-content-size"),
                        Some(&target_head.content_length().unwrap_or(0).to_string()),
                        "{key}"
                    );
                    aliases += 1;
                }
            }
            (stored, aliases)
        }
    };
    let (stored, aliases) = check(&stack).await;
    assert!(aliases >= 8, "{aliases} aliases");
    assert!(
        stored as f64 <= input as f64 * 1.05,
        "stored {stored} bytes for {input} bytes of input"
    );
    let (problems, _) = checks::audited(&stack, SERVING).await;
    assert!(problems.is_empty(), "{problems:?}");

    // The same PDB under another name, then the first one removed.
    index("ci/bar.pdb", "bar.pdb").await;
    delete_and_remove(&stack, &ctx, "ci/foo.pdb").await;
    check(&stack).await;
    let (problems, refs) = checks::audited(&stack, SERVING).await;
    assert!(problems.is_empty(), "{problems:?}");
    // bar.pdb found foo.pdb's unified key in place, an alias of foo's first key: it holds that
    // target too. And it found foo.pdb recorded and live under another name, so it serves
    // that name as well (a PE naming foo.pdb keeps resolving): every foo.pdb key outlived
    // foo.pdb, held by bar.pdb alone.
    let held: Vec<(&String, &std::collections::BTreeSet<String>)> =
        refs.iter().filter(|(k, _)| k.contains("foo.pdb")).collect();
    assert!(
        held.iter().any(|(k, _)| k.starts_with("index2/"))
            && held.iter().any(|(k, _)| k.starts_with("symbols/")),
        "{held:?}"
    );
    let by_bar =
        |owners: &std::collections::BTreeSet<String>| owners.iter().all(|o| o.contains("bar.pdb"));
    assert!(held.iter().all(|(_, owners)| by_bar(owners)), "{held:?}");
    assert!(refs.keys().any(|k| k.starts_with("symbols/bar.pdb/")));
}

/// The message of the upload just put at `key`, naming its version as AWS's notifications do
/// (moto's leave `versionId` out).
async fn with_current_version(stack: &Stack, key: &str) -> Vec<aws_sdk_sqs::types::Message> {
    let mut messages = stack.receive(1).await;
    let head = stack
        .s3
        .head_object()
        .bucket(INGEST)
        .key(key)
        .send()
        .await
        .unwrap();
    let version = head.version_id().expect("a versioned bucket").to_string();
    let mut body: Value = serde_json::from_str(messages[0].body.as_deref().unwrap()).unwrap();
    body["Records"][0]["s3"]["object"]["versionId"] = json!(version);
    messages[0].body = Some(body.to_string());
    messages
}

/// The default deployment's ingest bucket is versioned: an upload whose version is no longer
/// the current one is still indexed while that version exists, and one hidden by a delete
/// marker before it was finalized is taken back (the removal that came first found nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versioned_ingest_objects_are_checked_by_version_before_they_are_final() {
    use aws_sdk_s3::types::{BucketVersioningStatus, VersioningConfiguration};
    let stack = Stack::new().await;
    stack
        .s3
        .put_bucket_versioning()
        .bucket(INGEST)
        .versioning_configuration(
            VersioningConfiguration::builder()
                .status(BucketVersioningStatus::Enabled)
                .build(),
        )
        .send()
        .await
        .unwrap();
    let fx = Fixtures::build();
    let ctx = context(&stack, &[]).await;
    // Two versions of one key; the first one's event is processed after the second landed.
    stack.upload("build-1/app", &fx.path("app.stripped")).await;
    let first = with_current_version(&stack, "build-1/app").await;
    stack.upload("build-1/app", &fx.path("app.debug")).await;
    let second = with_current_version(&stack, "build-1/app").await;
    let response = handle_indexer(&ctx, sqs_event(&first, &stack.queue_arn))
        .await
        .unwrap();
    assert!(failures(&response).is_empty(), "{response}");
    let executable = format!("buildid/{}/executable", fx.build_id());
    assert_eq!(
        stack.objects(SERVING, &executable).await.len(),
        1,
        "the first version still exists: it stays indexed"
    );
    // The current version: kept by its own check.
    handle_indexer(&ctx, sqs_event(&second, &stack.queue_arn))
        .await
        .unwrap();
    let debuginfo = format!("buildid/{}/debuginfo", fx.build_id());
    assert_eq!(stack.objects(SERVING, &debuginfo).await.len(), 1);
    // Another key, deleted (a delete marker on top) before its creation is processed: its
    // version is still readable, so it is indexed, then found hidden and taken back.
    stack.upload("build-2/app", &fx.path("app.stripped")).await;
    let third = with_current_version(&stack, "build-2/app").await;
    stack
        .s3
        .delete_object()
        .bucket(INGEST)
        .key("build-2/app")
        .send()
        .await
        .unwrap();
    handle_indexer(&ctx, sqs_event(&third, &stack.queue_arn))
        .await
        .unwrap();
    let records = checks::manifest_records(&stack, SERVING).await;
    let of = |key: &str, action: &str| {
        records
            .iter()
            .filter(|r| r["ingest_key"] == key && r["action"] == action)
            .count()
    };
    assert_eq!(of("build-1/app", "indexed"), 2, "{records:#?}");
    assert_eq!(of("build-1/app", "unpublished"), 0, "{records:#?}");
    assert_eq!(of("build-2/app", "unpublished"), 1, "{records:#?}");
    // The executable key stays: build-1's first version references it.
    assert_eq!(stack.objects(SERVING, &executable).await.len(), 1);
}
