//! Redirect aliases storing each artifact once; ingest objects checked by version.

use crate::{
    checks, context, delete_and_remove, failures, sqs_event, upload_and_index, Fixtures, Stack,
    INGEST, SERVING,
};
use serde_json::{json, Value};
use symdex_lambda::handle_indexer;

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
