//! Event shapes (direct S3, EventBridge), other buckets, and products (cross-product
//! conflicts, per-product prefixes).

use crate::{checks, context, failures, sqs_event, Fixtures, Stack, INGEST, SERVING};
use serde_json::{json, Value};
use symdex_lambda::{handle_indexer, handle_remover};

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
    conflict_with_another_products_keys(&[]).await;
}

/// The same with SYMDEX_OVERWRITE (and the product prefixes it needs): an overwrite replaces
/// only its own product's bytes (refs/overwrites.rs), so beta's is the same conflict. Before,
/// beta's bytes replaced alpha's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overwrite_of_another_products_keys_is_a_conflict_naming_that_product() {
    let overwrite = [
        ("SYMDEX_OVERWRITE", "true"),
        ("SYMDEX_PRODUCT_PREFIXES", "true"),
    ];
    conflict_with_another_products_keys(&overwrite).await;
}

/// Alpha publishes a Breakpad file, then beta other bytes under the same module id, indexed
/// with `env`: a conflict naming alpha, alpha's bytes served.
async fn conflict_with_another_products_keys(env: &[(&str, &str)]) {
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
    let ctx = context(&stack, env).await;
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
