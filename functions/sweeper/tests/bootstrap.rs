//! The built sweeper `bootstrap` binary under a Lambda Runtime API harness, against
//! moto_server: a scheduled event after a try build's retention unpublishes it.

#[path = "../../lambda/tests/support/mod.rs"]
mod support;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::json;
use support::{config, sqs_event, Fixtures, Stack, INGEST, SERVING};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bootstrap_binary_expires_a_try_build_on_schedule() {
    let stack = Stack::new().await;
    let fx = Fixtures::build();
    stack
        .upload("channel=try/app.debug", &fx.path("app.debug"))
        .await;
    let created = stack.receive(1).await;
    let ctx = Arc::new(symdex_lambda::Context::new(
        config(&[]),
        stack.moto.s3().await,
    ));
    symdex_lambda::handle_indexer(&ctx, sqs_event(&created, &stack.queue_arn))
        .await
        .unwrap();
    let key = format!("buildid/{}/debuginfo", fx.build_id());
    assert_eq!(stack.objects(SERVING, &key).await.len(), 1);

    let at = SystemTime::now() + Duration::from_secs(29 * 86_400);
    let event = json!({
        "version": "0",
        "id": "9b1c2f52-8e4a-4c55-a0b3-2f1b3cbd6c11",
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "123456789012",
        "time": symdex_shared::retention::format_time(at),
        "region": "us-east-1",
        "resources": ["arn:aws:events:us-east-1:123456789012:rule/symdex-sweeper"],
        "detail": {}
    });
    let (response, logs) = support::invoke_bootstrap(
        env!("CARGO_BIN_EXE_symdex-sweeper"),
        "symdex-sweeper",
        &stack.moto,
        event.to_string(),
    )
    .await;
    assert_eq!(response["expired"], 1, "{response}\n{logs}");
    assert!(logs.contains("\"action\":\"expired\""), "{logs}");
    assert!(
        stack.objects(SERVING, &key).await.is_empty(),
        "not unpublished"
    );
    assert!(
        stack.objects(INGEST, "").await.is_empty(),
        "ingest object kept"
    );
}
