//! The built remover `bootstrap` binary under a Lambda Runtime API harness, against moto_server.

#[path = "../../lambda/tests/support/mod.rs"]
mod support;

use support::{sqs_event, Fixtures, Stack, INGEST, SERVING};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bootstrap_binary_unpublishes_a_removed_object() {
    let stack = Stack::new().await;
    let fx = Fixtures::build();
    stack
        .upload_and_index("app.debug", &fx.path("app.debug"))
        .await;
    let key = format!("buildid/{}/debuginfo", fx.build_id());
    assert_eq!(stack.objects(SERVING, &key).await.len(), 1);

    stack
        .s3
        .delete_object()
        .bucket(INGEST)
        .key("app.debug")
        .send()
        .await
        .unwrap();
    let removed = stack.receive(1).await;
    let event = sqs_event(&removed, &stack.queue_arn).to_string();
    let (response, _) = support::invoke_bootstrap(
        env!("CARGO_BIN_EXE_symdex-remover"),
        "symdex-remover",
        &stack.moto,
        event,
    )
    .await;
    assert_eq!(
        response["batchItemFailures"]
            .as_array()
            .map_or(0, |a| a.len()),
        0,
        "{response}"
    );
    assert!(
        stack.objects(SERVING, &key).await.is_empty(),
        "the key was not unpublished"
    );
}
