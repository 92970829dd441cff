//! `symdex push` of a debug file and the source tarball its DWARF names, no source flags, to a
//! deployment on moto_server (the built indexer bootstrap on the real S3 -> SQS
//! notifications). With `--wait` the tarball is sent once the debug file is indexed, and is
//! published on arrival; without, both are sent at once, and a deployment that indexes the
//! tarball first skips it, then indexes it again as the debug file's sources, which a later
//! `push --wait` reports. A text file no DWARF names is not sent.

mod pushing;
#[path = "../../lambda/tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pushing::{cli, json_lines, push, run_indexer, run_indexer_ordered, status_of};
use support::{Fixtures, Stack, SERVING};

/// `out/` under the fixtures' directory (returned canonical, with it): the debug file, the
/// tarball of the source it names (`<dir>/prog.c`, the tree's own directory in it: gcc
/// records no MD5, and a file no flag names serves a want sharing two path components, not
/// the base name alone) and a text file nothing names.
fn debug_file_and_sources(fx: &Fixtures) -> (PathBuf, PathBuf) {
    let root = fx.dir.path().canonicalize().unwrap();
    let inputs = root.join("out");
    std::fs::create_dir_all(&inputs).unwrap();
    std::fs::copy(fx.path("app.debug"), inputs.join("app.debug")).unwrap();
    std::fs::copy(fx.path("notes.txt"), inputs.join("notes.txt")).unwrap();
    let (Some(parent), Some(name)) = (root.parent(), root.file_name()) else {
        panic!("{} has no parent", root.display());
    };
    let tarball = inputs.join("src.tar.gz");
    let entry = Path::new(name).join("prog.c");
    let args = [
        "tar",
        "-czf",
        tarball.to_str().unwrap(),
        entry.to_str().unwrap(),
    ];
    support::run_in(parent, &args);
    (root, inputs)
}

/// `symdex push` of `inputs` as build b1 of product app, `--wait` or not.
async fn push_inputs(
    stack: &Stack,
    inputs: &Path,
    wait: bool,
) -> (std::process::Output, Vec<serde_json::Value>) {
    let mut args = vec![
        inputs.to_str().unwrap(),
        "--build",
        "b1",
        "--product",
        "app",
    ];
    if wait {
        args.extend(["--wait", "--timeout", "120"]);
    }
    push(stack, &args).await
}

/// Asserts that `source_key` serves `prog.c` under `root`, byte for byte.
async fn assert_serves_prog_c(stack: &Stack, source_key: &str, root: &Path) {
    let served: Vec<(String, Vec<u8>)> = stack.objects(SERVING, source_key).await;
    assert_eq!(
        served.first().map(|(_, bytes)| bytes.clone()),
        Some(std::fs::read(root.join("prog.c")).unwrap())
    );
}

/// The manifest's actions for the tarball's upload in the order they were recorded, as
/// `manifest query s3://` reads them.
async fn tarball_actions(stack: &Stack) -> Vec<String> {
    let mut query = std::process::Command::new(cli());
    query
        .args([
            "manifest",
            "query",
            "--history",
            &format!("s3://{SERVING}"),
            "--json",
        ])
        .envs(stack.moto.env());
    let out = tokio::task::spawn_blocking(move || query.output().unwrap())
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut records = json_lines(&out.stdout);
    records.retain(|r| {
        r["ingest_key"]
            .as_str()
            .is_some_and(|k| k.ends_with("src.tar.gz"))
    });
    records.sort_by(|a, b| a["time"].as_str().cmp(&b["time"].as_str()));
    records
        .iter()
        .map(|r| r["action"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_wait_sends_the_sources_once_their_debug_file_is_indexed() {
    let stack = Arc::new(Stack::new().await);
    let fx = Fixtures::build();
    let (root, inputs) = debug_file_and_sources(&fx);
    let (stop, indexer) = run_indexer(&stack);

    let (out, lines) = push_inputs(&stack, &inputs, true).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{lines:?}\n{stderr}");
    for name in ["app.debug", "src.tar.gz"] {
        let line = status_of(&lines, name);
        assert_eq!(line["status"], "published", "{line}");
    }
    let source_key = format!("buildid/{}/source{}/prog.c", fx.build_id(), root.display());
    let tarball = status_of(&lines, "src.tar.gz");
    let wanted = format!("{}/prog.c", root.display());
    assert_eq!(
        tarball["source_for"],
        serde_json::json!([wanted]),
        "{tarball}"
    );
    assert!(
        tarball["keys"]
            .as_array()
            .unwrap()
            .contains(&source_key.clone().into()),
        "{tarball}"
    );
    // Sent after the debug file was indexed: a source on arrival, never skipped and claimed.
    let actions = tarball_actions(&stack).await;
    assert!(
        !actions.is_empty() && !actions.iter().any(|a| a == "skipped"),
        "{actions:?}"
    );
    let notes = status_of(&lines, "notes.txt");
    assert_eq!(notes["status"], "skipped", "{notes}");
    assert_eq!(notes["sent"], false, "{notes}");
    assert_serves_prog_c(&stack, &source_key, &root).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    indexer.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sources_indexed_before_their_debug_file_are_claimed_and_a_rerun_reports_them() {
    let stack = Arc::new(Stack::new().await);
    let fx = Fixtures::build();
    let (root, inputs) = debug_file_and_sources(&fx);
    // The deployment takes both notifications, the tarball's first.
    let (stop, indexer) = run_indexer_ordered(&stack, 2, Some("src.tar.gz"));

    let (out, lines) = push_inputs(&stack, &inputs, false).await;
    assert_eq!(out.status.code(), Some(0), "{lines:?}");
    for name in ["app.debug", "src.tar.gz"] {
        assert_eq!(status_of(&lines, name)["status"], "uploaded", "{lines:?}");
    }
    // The indexer runs on its own: the debug file's claim indexes the tarball again, its
    // record written once its keys are published.
    let deadline = Instant::now() + Duration::from_secs(120);
    let actions = loop {
        let actions = tarball_actions(&stack).await;
        if actions.len() >= 2 {
            break actions;
        }
        assert!(
            Instant::now() < deadline,
            "never indexed again: {actions:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(actions[0], "skipped", "{actions:?}");
    assert!(
        actions[1..].iter().any(|a| a == "indexed"),
        "indexed again as the debug file's source: {actions:?}"
    );
    let source_key = format!("buildid/{}/source{}/prog.c", fx.build_id(), root.display());

    // Pushed again with --wait: nothing sent, both reported as the deployment has them.
    let (out, lines) = push_inputs(&stack, &inputs, true).await;
    assert_eq!(out.status.code(), Some(0), "{lines:?}");
    for name in ["app.debug", "src.tar.gz"] {
        let line = status_of(&lines, name);
        assert_eq!(line["status"], "already-published", "{line}");
        assert_eq!(line["sent"], false, "{line}");
    }
    assert_serves_prog_c(&stack, &source_key, &root).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    indexer.await.unwrap();
}
