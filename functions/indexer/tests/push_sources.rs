//! `symdex push` of a debug file and the source tarball its DWARF names, no source flags, to a
//! deployment on moto_server (the built indexer bootstrap on the real S3 -> SQS
//! notifications): both are sent and `--wait` reports both `published` whichever the
//! deployment indexes first (the tarball first: skipped, then indexed again as the debug
//! file's sources); a text file no DWARF names is not sent.

mod pushing;
#[path = "../../lambda/tests/support/mod.rs"]
mod support;

use std::sync::Arc;

use pushing::{push, run_indexer_ordered, status_of};
use support::{Fixtures, Stack, SERVING};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_sends_the_sources_a_debug_file_names_and_waits_until_they_are_live() {
    for first in ["src.tar.gz", "app.debug"] {
        push_debug_file_and_sources(first).await;
    }
}

/// Pushes a debug file and its source tarball with `--wait`, the deployment indexing the
/// notification of `first` before the other's.
async fn push_debug_file_and_sources(first: &'static str) {
    let stack = Arc::new(Stack::new().await);
    let fx = Fixtures::build();
    let root = fx.dir.path().canonicalize().unwrap();
    let inputs = root.join("out");
    std::fs::create_dir_all(&inputs).unwrap();
    std::fs::copy(fx.path("app.debug"), inputs.join("app.debug")).unwrap();
    std::fs::copy(fx.path("notes.txt"), inputs.join("notes.txt")).unwrap();
    support::run_in(&root, &["tar", "-czf", "out/src.tar.gz", "prog.c"]);
    let (stop, indexer) = run_indexer_ordered(&stack, 2, Some(first));

    let out_dir = inputs.to_str().unwrap();
    let args = [
        out_dir,
        "--build",
        "b1",
        "--product",
        "app",
        "--wait",
        "--timeout",
        "120",
    ];
    let (out, lines) = push(&stack, &args).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{first}: {lines:?}\n{stderr}");
    for name in ["app.debug", "src.tar.gz"] {
        let line = status_of(&lines, name);
        assert_eq!(line["status"], "published", "{first}: {line}");
    }
    let source_key = format!("buildid/{}/source{}/prog.c", fx.build_id(), root.display());
    let tarball = status_of(&lines, "src.tar.gz");
    assert!(
        tarball["keys"]
            .as_array()
            .unwrap()
            .contains(&source_key.clone().into()),
        "{tarball}"
    );
    let notes = status_of(&lines, "notes.txt");
    assert_eq!(notes["status"], "skipped", "{notes}");
    assert_eq!(notes["sent"], false, "{notes}");
    let served: Vec<(String, Vec<u8>)> = stack.objects(SERVING, &source_key).await;
    assert_eq!(
        served.first().map(|(_, bytes)| bytes.clone()),
        Some(std::fs::read(root.join("prog.c")).unwrap())
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    indexer.await.unwrap();
}
