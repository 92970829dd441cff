//! The built `bootstrap` binary under a Lambda Runtime API harness, against moto_server.

#[path = "../../lambda/tests/support/mod.rs"]
mod support;

use std::process::{Command, Stdio};
use std::time::Duration;

use support::runtime_api::RuntimeApi;
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
    let api = RuntimeApi::start(vec![("req-1".into(), event)]);

    let mut child = Command::new(env!("CARGO_BIN_EXE_symdex-indexer"))
        .envs(support::lambda_env(
            "symdex-indexer",
            &api.addr,
            &stack.moto,
        ))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let responses =
        tokio::task::spawn_blocking(move || api.wait_responses(1, Duration::from_secs(120)))
            .await
            .unwrap();
    let _ = child.kill();
    let output = child.wait_with_output().unwrap();
    let logs = String::from_utf8_lossy(&output.stdout);

    assert_eq!(responses[0].0, "req-1");
    let response: serde_json::Value = serde_json::from_str(&responses[0].1).unwrap();
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
