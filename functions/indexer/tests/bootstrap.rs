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

/// A deployment's setting the function cannot read stops it at its start, naming the
/// variable (a typo in a flag would otherwise turn off what it defaults on), before it asks
/// the Runtime API for an event: Lambda reports the init failure, and no event is lost to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bootstrap_binary_stops_at_its_start_on_a_flag_it_cannot_read() {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    let stack = Stack::new().await;
    let api = support::runtime_api::RuntimeApi::start(vec![("req-1".into(), "{}".into())]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_symdex-indexer"))
        .envs(support::lambda_env(
            "symdex-indexer",
            &api.addr,
            &stack.moto,
        ))
        .env("SYMDEX_SOURCE_JOINS", "ture")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the function did not stop");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let output = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!status.success(), "{said}");
    assert!(said.contains("SYMDEX_SOURCE_JOINS"), "{said}");
    assert!(said.contains("ture"), "{said}");
    // The event is still queued: no invocation was taken.
    assert_eq!(api.pending(), 1);
}
