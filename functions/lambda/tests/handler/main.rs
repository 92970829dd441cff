//! The handlers driven by what a real S3 -> SQS notification pipeline delivers, against
//! moto_server on 127.0.0.1.

#[path = "../support/checks.rs"]
mod checks;
#[path = "../support/mod.rs"]
mod support;

use std::sync::Arc;

use serde_json::Value;
use support::{config, sqs_event, Fixtures, Stack, INGEST, SERVING};
use symdex_lambda::{handle_indexer, handle_remover, Context};

mod encoded;
mod events;
mod removals;
mod versions;

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
