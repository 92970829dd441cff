//! The built sweeper `bootstrap` binary under a Lambda Runtime API harness, against
//! moto_server: a scheduled event after a try build's retention unpublishes it.

#[path = "../../lambda/tests/support/mod.rs"]
mod support;

use std::time::{Duration, SystemTime};

use support::{Fixtures, Stack, INGEST, SERVING};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bootstrap_binary_expires_a_try_build_on_schedule() {
    let stack = Stack::new().await;
    let fx = Fixtures::build();
    stack
        .upload_and_index("channel=try/app.debug", &fx.path("app.debug"))
        .await;
    let key = format!("buildid/{}/debuginfo", fx.build_id());
    assert_eq!(stack.objects(SERVING, &key).await.len(), 1);

    let at = SystemTime::now() + Duration::from_secs(29 * 86_400);
    let event = support::scheduled_event(at);
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
