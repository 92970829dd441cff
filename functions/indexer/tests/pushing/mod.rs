//! What the push tests share: the CLI beside the bootstrap, the indexer taking the stack's
//! notifications, `symdex push` against the stack and its JSON lines.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde_json::Value;

use crate::support::{self, sqs_event, Stack, INGEST, SERVING};

/// The workspace's `symdex`, built beside this package's bootstrap.
pub fn cli() -> PathBuf {
    let exe = Path::new(env!("CARGO_BIN_EXE_symdex-indexer")).with_file_name("symdex");
    assert!(
        exe.exists(),
        "{} is not built: run the workspace's tests (make test), or cargo build --bin symdex first",
        exe.display()
    );
    exe
}

/// The indexer, as the event source mapping runs it: every batch of notifications that
/// arrives is handed to the built bootstrap, until the returned flag is set.
pub fn run_indexer(stack: &Arc<Stack>) -> (Arc<AtomicBool>, tokio::task::JoinHandle<()>) {
    run_indexer_ordered(stack, 1, None)
}

/// [`run_indexer`], holding notifications until `held` arrived, then handing them over one
/// invocation each, those whose key contains `first` first: an order of indexing the test
/// chooses (the batches of a real queue come in any).
pub fn run_indexer_ordered(
    stack: &Arc<Stack>,
    held: usize,
    first: Option<&'static str>,
) -> (Arc<AtomicBool>, tokio::task::JoinHandle<()>) {
    let stop = Arc::new(AtomicBool::new(false));
    let (stack, flag) = (stack.clone(), stop.clone());
    let task = tokio::spawn(async move {
        let mut waiting = Vec::new();
        while !flag.load(Ordering::Relaxed) {
            let received = stack
                .sqs
                .receive_message()
                .queue_url(&stack.queue_url)
                .max_number_of_messages(10)
                .wait_time_seconds(1)
                .send()
                .await
                .unwrap();
            let messages = received.messages.unwrap_or_default();
            for m in &messages {
                stack
                    .sqs
                    .delete_message()
                    .queue_url(&stack.queue_url)
                    .receipt_handle(m.receipt_handle.clone().unwrap())
                    .send()
                    .await
                    .unwrap();
            }
            waiting.extend(messages);
            if waiting.is_empty() || waiting.len() < held {
                continue;
            }
            let batches = match first {
                None => vec![std::mem::take(&mut waiting)],
                Some(first) => {
                    let rank = |m: &aws_sdk_sqs::types::Message| {
                        !m.body().is_some_and(|b| b.contains(first))
                    };
                    waiting.sort_by_key(rank);
                    waiting.drain(..).map(|m| vec![m]).collect()
                }
            };
            for batch in batches {
                let event = sqs_event(&batch, &stack.queue_arn).to_string();
                let (response, _) = support::invoke_bootstrap(
                    env!("CARGO_BIN_EXE_symdex-indexer"),
                    "symdex-indexer",
                    &stack.moto,
                    event,
                )
                .await;
                assert_eq!(
                    response["batchItemFailures"],
                    serde_json::json!([]),
                    "{response}"
                );
            }
        }
    });
    (stop, task)
}

/// The JSON lines a command printed.
pub fn json_lines(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// `symdex push ARGS...` against the stack: its output, and its JSON lines by path (the
/// file name) and the summary.
pub async fn push(stack: &Stack, args: &[&str]) -> (Output, Vec<Value>) {
    let mut command = Command::new(cli());
    command
        .arg("push")
        .args(args)
        .args([
            "--ingest",
            &format!("s3://{INGEST}"),
            "--serving",
            &format!("s3://{SERVING}"),
            "--json",
        ])
        .envs(stack.moto.env());
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    let lines = json_lines(&out.stdout);
    (out, lines)
}

pub fn status_of<'a>(lines: &'a [Value], name: &str) -> &'a Value {
    lines
        .iter()
        .find(|l| l["path"].as_str().is_some_and(|p| p.ends_with(name)))
        .unwrap_or_else(|| panic!("no line for {name}: {lines:?}"))
}
