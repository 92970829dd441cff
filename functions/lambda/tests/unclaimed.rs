//! Sources without flags through the Lambda (sourcemap.rs): with no
//! `SYMDEX_SOURCE_EXTENSIONS`, a source tarball and a debug file whose DWARF names its files
//! are published together — the tarball before the debug file (the debug file has it indexed
//! again), after it, or in one batch — and debuginfod-find fetches the source byte-identical
//! from the serving bucket; a loose text file and a tarball entry no DWARF names publish
//! nothing.

#[path = "support/checks.rs"]
mod checks;
mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use serde_json::Value;
use support::{config, Fixtures, Stack, SERVING};
use symdex_lambda::Context;

/// Ingest keys and the files uploaded there, delivered in one batch.
type Batch<'a> = Vec<(&'a str, &'a Path)>;

/// Uploads each `(key, path)` and runs the indexer on their notifications, in one batch.
async fn index_batch(stack: &Stack, ctx: &Arc<Context>, uploads: &[(&str, &Path)]) {
    for (key, path) in uploads {
        stack.upload(key, path).await;
    }
    stack.index_received(ctx, uploads.len()).await;
}

/// Published keys and bytes, SymStore's store-level marker left out.
async fn published(stack: &Stack) -> BTreeMap<String, Vec<u8>> {
    let mut keys = checks::published(stack, SERVING).await;
    keys.retain(|k, _| !k.starts_with("index2/"));
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_tarball_is_published_without_flags_whichever_came_first() {
    let fx = Fixtures::build();
    let dir = fx.dir.path().canonicalize().unwrap();
    let source = std::fs::read(dir.join("prog.c")).unwrap();
    // The tarball holds the checkout's directory (`<dir>/prog.c`): a file no flag names
    // serves a want sharing two path components with it (sourcemap.rs).
    let status = Command::new("sh")
        .args([
            "-c",
            "echo 'release notes' > NOTES.txt && d=$(basename \"$PWD\") \
             && tar -czf src.tar.gz -C .. \"$d/prog.c\" \"$d/NOTES.txt\"",
        ])
        .current_dir(&dir)
        .status()
        .unwrap();
    assert!(status.success());
    let (debug, tarball, notes) = (
        dir.join("app.debug"),
        dir.join("src.tar.gz"),
        dir.join("notes.txt"),
    );
    let source_key = format!("buildid/{}/source{}/prog.c", fx.build_id(), dir.display());
    let orders: [(&str, Vec<Batch>); 3] = [
        (
            "sources first",
            vec![
                vec![("ci/src.tar.gz", &tarball)],
                vec![("ci/notes.txt", &notes)],
                vec![("ci/app.debug", &debug)],
            ],
        ),
        (
            "debug file first",
            vec![
                vec![("ci/app.debug", &debug)],
                vec![("ci/notes.txt", &notes)],
                vec![("ci/src.tar.gz", &tarball)],
            ],
        ),
        (
            "one batch",
            vec![vec![
                ("ci/src.tar.gz", &tarball),
                ("ci/notes.txt", &notes),
                ("ci/app.debug", &debug),
            ]],
        ),
    ];
    let mut stores = Vec::new();
    for (order, batches) in orders {
        let stack = Stack::new().await;
        let ctx = Arc::new(Context::new(config(&[]), stack.moto.s3().await));
        for batch in &batches {
            index_batch(&stack, &ctx, batch).await;
        }
        let store = published(&stack).await;
        assert_eq!(
            store.get(&source_key),
            Some(&source),
            "{order}: {source_key}"
        );
        // Nothing but the debug file's keys and prog.c's: the loose notes and the tarball's
        // NOTES.txt publish nothing.
        let notes_published = store.keys().any(|k| k.to_lowercase().contains("notes"));
        assert!(!notes_published, "{order}: {:?}", store.keys());
        let records = checks::manifest_records(&stack, SERVING).await;
        let skipped = |name: &str| {
            records.iter().any(|r: &Value| {
                r["action"] == "skipped"
                    && (r["entry"]
                        .as_str()
                        .is_some_and(|e| e.ends_with(&format!("/{name}")))
                        || r["ingest_key"] == format!("ci/{name}"))
            })
        };
        assert!(skipped("notes.txt") && skipped("NOTES.txt"), "{order}");
        let (problems, _) = checks::audited(&stack, SERVING).await;
        assert!(problems.is_empty(), "{order}: {problems:?}");
        if order == "sources first" {
            // The debug file's record says its source is served (by the tarball it had
            // indexed again), and debuginfod-find fetches it from the serving bucket.
            let debug_record = records
                .iter()
                .find(|r| r["kind"] == "debug")
                .expect("the debug file's record");
            assert_eq!(debug_record["sources"]["served"], 1, "{debug_record}");
            stack.public_read().await;
            let urls = format!("{}/{SERVING}", stack.moto.endpoint);
            let path = format!("{}/prog.c", dir.display());
            let build_id = fx.build_id();
            let args = ["source", &build_id, &path];
            let fetched = support::debuginfod_find(&urls, &args, &dir.join("cache"));
            assert_eq!(fetched, source);
        }
        stores.push((order, store));
    }
    // Whatever the order, the same keys with the same bytes.
    let (first_order, first) = &stores[0];
    for (order, store) in &stores[1..] {
        let keys = |s: &BTreeMap<String, Vec<u8>>| s.keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(store), keys(first), "{order} vs {first_order}");
        assert!(store == first, "{order} vs {first_order}: other bytes");
    }
}
