//! The remover: keys no other upload references unpublished, in either upload layout; keys
//! handed to the uploads waiting for them.

use crate::{
    checks, context, delete_and_remove, failures, sqs_event, upload_and_index, Fixtures, Stack,
    INGEST, SERVING,
};
use serde_json::{json, Value};
use symdex_lambda::{handle_indexer, handle_remover};

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

/// SYMDEX_OVERWRITE (which needs SYMDEX_PRODUCT_PREFIXES: both builds are product demo's):
/// a second build's debug file (other bytes, the same build id) replaces the first one's at
/// every key, and the first waits for them (refs/, invariant 8).
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
    let prefixes = ("SYMDEX_PRODUCT_PREFIXES", "true");
    let plain = context(&stack, &[prefixes]).await;
    let overwriting = context(&stack, &[prefixes, ("SYMDEX_OVERWRITE", "true")]).await;
    for (key, file, ctx) in [
        ("demo/build-1/app.debug", fx.path("app.debug"), &plain),
        (
            "demo/build-2/app.debug",
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
            .any(|r| r["ingest_key"] == "demo/build-2/app.debug"
                && r["reason"].as_str().is_some_and(
                    |why| why.contains("overwrote") && why.contains("demo/build-1/app.debug")
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
        "s3": {"bucket": {"name": INGEST, "arn": "arn:aws:s3:::symdex-ingest"}, "object": {"key": "demo/build-1/app.debug"}}}]});
    handle_indexer(&plain, again).await.unwrap();
    let records = checks::manifest_records(&stack, SERVING).await;
    let last = records
        .iter()
        .rfind(|r| r["ingest_key"] == "demo/build-1/app.debug")
        .unwrap();
    assert_eq!(last["action"], "conflict", "{records:#?}");

    delete_and_remove(&stack, &plain, "demo/build-2/app.debug").await;
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
