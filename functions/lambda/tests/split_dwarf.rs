//! Split DWARF through the Lambda, driven by the S3 -> SQS notifications of real uploads to
//! moto_server: a binary with skeleton units and its `.dwp` (clang-19, `llvm-dwp-19`), of one
//! product and build, end with the package published at `buildid/<binary's build id>/debuginfo`
//! whichever is indexed first, and when both arrive in one batch; the remover takes the key
//! back with the package; another product's package with the same DWO ids never gets it.

#[path = "support/checks.rs"]
mod checks;
mod support;

use std::sync::Arc;

use serde_json::Value;
use support::{build_id_of, config, sqs_event, Fixtures, Stack, INGEST};
use symdex_lambda::{handle_remover, Context};

const BUILD: &str = "ci-42";

/// How the binary and its package reach the indexer.
#[derive(Clone, Copy, Debug)]
enum Order {
    BinaryFirst,
    PackageFirst,
    /// One SQS event holding both notifications.
    OneBatch,
}

/// The ingest keys of one case (each its own prefix and serving bucket).
struct Case {
    serving: String,
    binary: String,
    package: String,
    ctx: Arc<Context>,
}

impl Case {
    async fn new(stack: &Stack, n: usize) -> Case {
        let serving = format!("split-{n}");
        let bucket = stack.s3.create_bucket().bucket(&serving);
        bucket.send().await.unwrap();
        let ctx = Arc::new(Context::new(
            config(&[("SYMDEX_SERVING_BUCKET", serving.as_str())]),
            stack.moto.s3().await,
        ));
        Case {
            binary: format!("case-{n}/app"),
            package: format!("case-{n}/app.dwp"),
            serving,
            ctx,
        }
    }

    /// The manifest records of `ingest_key`, in the order they were written.
    async fn records_of(&self, stack: &Stack, ingest_key: &str) -> Vec<Value> {
        let records = checks::manifest_records(stack, &self.serving).await;
        records
            .into_iter()
            .filter(|r| r["ingest_key"] == ingest_key)
            .collect()
    }

    /// The serving bucket's object at `key`, if any.
    async fn object(&self, stack: &Stack, key: &str) -> Option<Vec<u8>> {
        let objects = checks::published(stack, &self.serving).await;
        objects.get(key).cloned()
    }

    async fn assert_audit_clean(&self, stack: &Stack, when: &str) {
        let (problems, _) = checks::audited(stack, &self.serving).await;
        assert!(problems.is_empty(), "{when}: {problems:#?}");
    }
}

/// Puts `path` at `key` of the ingest bucket as an upload of `product`'s build [`BUILD`].
async fn put(stack: &Stack, key: &str, path: &std::path::Path, product: &str) {
    let bytes = std::fs::read(path).unwrap();
    stack
        .put(key, bytes, &[("product", product), ("build", BUILD)])
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_package_is_published_at_its_binarys_key_in_any_order_and_removed_with_it() {
    let stack = Stack::new().await;
    let fx = support::split_dwarf();
    let package_bytes = std::fs::read(fx.path("app.dwp")).unwrap();
    let key = format!("buildid/{}/debuginfo", build_id_of(&fx.path("app")));
    for (n, order) in [Order::BinaryFirst, Order::PackageFirst, Order::OneBatch]
        .into_iter()
        .enumerate()
    {
        let case = Case::new(&stack, n).await;
        let (first, second) = match order {
            Order::PackageFirst => (&case.package, &case.binary),
            _ => (&case.binary, &case.package),
        };
        put(&stack, first, &fx.path(file_of(first)), "app").await;
        if !matches!(order, Order::OneBatch) {
            stack.index_received(&case.ctx, 1).await;
            // Alone, neither serves the package's key: the binary leaves it to its package.
            assert_eq!(case.object(&stack, &key).await, None, "{order:?}");
        }
        put(&stack, second, &fx.path(file_of(second)), "app").await;
        let count = if matches!(order, Order::OneBatch) {
            2
        } else {
            1
        };
        stack.index_received(&case.ctx, count).await;

        let served = case.object(&stack, &key).await;
        assert_eq!(served.as_ref(), Some(&package_bytes), "{order:?}: {key}");
        let records = case.records_of(&stack, &case.package).await;
        let last = records.last().unwrap();
        // In one batch the binary may have the package indexed again while the package's own
        // run is in flight; that run's `skipped` record is then followed by its finalize's
        // look again, answered `unchanged` (the key already holds its bytes).
        let action = last["action"].as_str().unwrap();
        match order {
            Order::OneBatch => assert!(
                matches!(action, "indexed" | "unchanged"),
                "{order:?}: {records:#?}"
            ),
            _ => assert_eq!(action, "indexed", "{order:?}: {records:#?}"),
        }
        let keys_of = |field: &str| last[field].as_array().cloned().unwrap_or_default();
        let mut keys = keys_of("published");
        keys.extend(keys_of("unchanged"));
        assert_eq!(keys, vec![Value::from(key.as_str())], "{order:?}: {last:#}");
        assert_eq!(last["format"], "dwp", "{order:?}");
        case.assert_audit_clean(&stack, &format!("{order:?}")).await;

        if n == 0 {
            another_products_package_gets_nothing(&stack, &case, &fx, &key).await;
        }

        let delete = stack.s3.delete_object().bucket(INGEST).key(&case.package);
        delete.send().await.unwrap();
        let removed = stack.receive(1).await;
        let response = handle_remover(&case.ctx, sqs_event(&removed, &stack.queue_arn))
            .await
            .unwrap();
        assert_eq!(response["batchItemFailures"], serde_json::json!([]));
        assert_eq!(case.object(&stack, &key).await, None, "{order:?}: removed");
        let objects = checks::published(&stack, &case.serving).await;
        assert!(
            objects.keys().any(|k| k.ends_with("/executable")),
            "{order:?}: the binary stays: {:?}",
            objects.keys()
        );
        case.assert_audit_clean(&stack, &format!("{order:?} removed"))
            .await;
    }
}

/// `app` or `app.dwp`: the fixture file an ingest key carries.
fn file_of(ingest_key: &str) -> &'static str {
    if ingest_key.ends_with(".dwp") {
        "app.dwp"
    } else {
        "app"
    }
}

/// The same package bytes under another product, its binary's package live: it holds no
/// reference to the binary's key (its scope has no binary), and says why it waits.
async fn another_products_package_gets_nothing(
    stack: &Stack,
    case: &Case,
    fx: &Fixtures,
    key: &str,
) {
    let foreign = "other/app.dwp";
    put(stack, foreign, &fx.path("app.dwp"), "other").await;
    stack.index_received(&case.ctx, 1).await;
    let (problems, refs) = checks::audited(stack, &case.serving).await;
    assert!(problems.is_empty(), "{problems:#?}");
    let holders = &refs[key];
    assert!(
        !holders.iter().any(|u| u.contains("/other/")),
        "another product's package references {key}: {holders:?}"
    );
    assert!(refs
        .values()
        .all(|uploads| !uploads.iter().any(|u| u.contains("/other/"))));
    let records = case.records_of(stack, foreign).await;
    let last = records.last().unwrap();
    assert_eq!(last["action"], "skipped", "{records:#?}");
    let reason = last["reason"].as_str().unwrap();
    assert!(reason.contains("no binary of its build"), "{reason}");
}
