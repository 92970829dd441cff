//! The built `bootstrap` binary under a Lambda Runtime API harness, against moto_server.

#[path = "../../lambda/tests/support/mod.rs"]
mod support;

use support::{sqs_event, Fixtures, Stack, SERVING};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bootstrap_binary_indexes_an_sqs_batch() {
    let stack = Stack::new().await;
    let fx = Fixtures::build();
    stack
        .upload("build=1/app.debug", &fx.path("app.debug"))
        .await;
    stack.upload("build=1/app", &fx.path("app.stripped")).await;
    let messages = stack.receive(2).await;
    let event = sqs_event(&messages, &stack.queue_arn).to_string();
    let (response, logs) = support::invoke_bootstrap(
        env!("CARGO_BIN_EXE_symdex-indexer"),
        "symdex-indexer",
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
    let bid = fx.build_id();
    let objects = stack.objects(SERVING, "").await;
    let keys: Vec<&str> = objects.iter().map(|(k, _)| k.as_str()).collect();
    assert!(
        keys.contains(&format!("buildid/{bid}/debuginfo").as_str()),
        "{keys:?}"
    );
    assert!(keys.contains(&format!("buildid/{bid}/executable").as_str()));
    assert!(keys
        .iter()
        .any(|k| k.starts_with("_manifest/dt=") && k.ends_with(".jsonl.gz")));
    // Structured logs: one JSON object per decision.
    let decisions: Vec<serde_json::Value> = logs
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["fields"]["message"] == "decision")
        .collect();
    assert_eq!(decisions.len(), 2, "logs:\n{logs}");
    assert!(decisions.iter().all(|d| d["fields"]["action"] == "indexed"));
}
