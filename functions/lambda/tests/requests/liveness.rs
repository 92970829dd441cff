//! The ingest object's liveness check, answered by the artifact's copy where it can be.

use std::sync::Arc;

use symdex_lambda::{handle_indexer, Context};

use super::debug_file_naming_headers;
use crate::fault_proxy::FaultProxy;
use crate::support::{build_id_of, config, sqs_event, Fixtures, Stack, INGEST, SERVING};
/// The creation message of the object version `(etag, version)` among `messages`, naming
/// its version as AWS's notifications do (moto's leave `versionId` out).
fn message_of(
    messages: &[aws_sdk_sqs::types::Message],
    (etag, version): &(String, String),
) -> aws_sdk_sqs::types::Message {
    let mut message = messages
        .iter()
        .find(|m| {
            let body = m.body().unwrap_or("");
            body.contains("ObjectCreated") && body.contains(&format!("\"eTag\": \"{etag}\""))
        })
        .cloned()
        .unwrap_or_else(|| panic!("no message about {etag}: {messages:#?}"));
    let mut body: serde_json::Value =
        serde_json::from_str(message.body.as_deref().unwrap()).unwrap();
    body["Records"][0]["s3"]["object"]["versionId"] = serde_json::json!(version);
    message.body = Some(body.to_string());
    message
}

/// An ingest object is asked whether it still lives once its references are added (the
/// liveness check, refs/ invariant 4) — unless the artifact's copy, made from the bucket's
/// current object on condition of the indexed ETag, already saw it live. Shown here in a
/// versioned ingest bucket (the Terraform module's), over moto_server, which ignores the
/// copy's source condition: the paths where the copy does not prove it are driven too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_from_the_current_object_answers_the_liveness_check() {
    let stack = Stack::new().await;
    stack
        .s3
        .put_bucket_versioning()
        .bucket(INGEST)
        .versioning_configuration(
            aws_sdk_s3::types::VersioningConfiguration::builder()
                .status(aws_sdk_s3::types::BucketVersioningStatus::Enabled)
                .build(),
        )
        .send()
        .await
        .unwrap();
    let fx = Fixtures::build();
    let proxy = FaultProxy::start(&stack.moto.endpoint, 0, 1).await;
    let client = stack.moto.s3_via(&proxy.endpoint).await;
    let ctx = Arc::new(Context::new(
        config(&[("SYMDEX_CONDITIONAL_COPY", "true")]),
        client,
    ));
    let log = || std::mem::take(&mut *proxy.faults.log.lock().unwrap());
    let put = |key: &'static str, path: std::path::PathBuf| {
        let s3 = stack.s3.clone();
        async move {
            let body = aws_sdk_s3::primitives::ByteStream::from_path(path)
                .await
                .unwrap();
            let put = s3.put_object().bucket(INGEST).key(key).body(body);
            let put = put.send().await.unwrap();
            (
                put.e_tag.unwrap().trim_matches('"').to_string(),
                put.version_id.unwrap(),
            )
        }
    };
    let index = |message: aws_sdk_sqs::types::Message| {
        let (ctx, arn) = (ctx.clone(), stack.queue_arn.clone());
        async move {
            let response = handle_indexer(&ctx, sqs_event(&[message], &arn))
                .await
                .unwrap();
            assert_eq!(response["batchItemFailures"], serde_json::json!([]));
        }
    };
    let liveness_asked = |requests: &[String]| {
        requests
            .iter()
            .any(|l| l.starts_with(&format!("HEAD /{INGEST}/")))
    };
    let debuginfo = |build_id: String| {
        let s3 = stack.s3.clone();
        async move {
            let got = s3
                .get_object()
                .bucket(SERVING)
                .key(format!("buildid/{build_id}/debuginfo"))
                .send()
                .await
                .ok()?;
            let bytes = got.body.collect().await.unwrap().into_bytes();
            // Compared by content identity: a failure prints two lines, not the bytes.
            Some(symdex_shared::storage::content_sha1(&bytes))
        }
    };

    // A fresh version, current when copied: published, and no liveness request.
    let version = put("ci/app.debug", fx.path("app.debug")).await;
    let messages = stack.receive(1).await;
    log();
    index(message_of(&messages, &version)).await;
    let fresh = log();
    assert!(!liveness_asked(&fresh), "{fresh:#?}");
    let sha1_of = |path: std::path::PathBuf| {
        symdex_shared::storage::content_sha1(&std::fs::read(path).unwrap())
    };
    assert_eq!(
        debuginfo(fx.build_id()).await,
        Some(sha1_of(fx.path("app.debug")))
    );

    // A version with a newer one (other bytes) on top when it is indexed: the copy from the
    // current object brings the newer bytes (moto_server ignores the condition that keeps
    // Amazon S3 from copying them), which are written over with the indexed version's; the
    // liveness check asks, and the upload stays (its version lives).
    let many = debug_file_naming_headers(1);
    let many_id = build_id_of(&many.path().join("many"));
    let older = put("ci/many.debug", many.path().join("many.debug")).await;
    put("ci/many.debug", fx.path("app.stripped")).await;
    let messages = stack.receive(2).await;
    log();
    index(message_of(&messages, &older)).await;
    let covered = log();
    assert!(liveness_asked(&covered), "{covered:#?}");
    let indexed = sha1_of(many.path().join("many.debug"));
    assert_eq!(debuginfo(many_id).await, Some(indexed));

    // A version under a delete marker when it is indexed (its removal ran before and found
    // nothing): the copy from the current object fails, the version's copy is made, the
    // liveness check asks and finds the delete marker: the references are taken back.
    let gone = debug_file_naming_headers(2);
    let gone_id = build_id_of(&gone.path().join("many"));
    let deleted = put("ci/gone.debug", gone.path().join("many.debug")).await;
    stack
        .s3
        .delete_object()
        .bucket(INGEST)
        .key("ci/gone.debug")
        .send()
        .await
        .unwrap();
    // (moto_server notifies no delete marker's creation.)
    let messages = stack.receive(1).await;
    log();
    index(message_of(&messages, &deleted)).await;
    let removed = log();
    assert!(liveness_asked(&removed), "{removed:#?}");
    assert_eq!(debuginfo(gone_id).await, None, "{removed:#?}");
}
