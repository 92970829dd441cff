//! A manifest that records decisions, not repetitions: re-running `symdex index` over
//! unchanged inputs writes one `repeated` record per build, and `manifest query` answers each
//! upload's latest decision (its whole history with `--history`).

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{build_split_elf, index_json, ok, symdex, Workdir};
use serde_json::Value;

/// Every manifest record of the store, as written.
fn history(store: &Path, args: &[&str]) -> Vec<Value> {
    let out = symdex()
        .args(["manifest", "query", "--json", "--history"])
        .args(args)
        .arg(store)
        .output()
        .unwrap();
    ok(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Each upload's latest decision, as `manifest query` answers by default.
fn latest(store: &Path, args: &[&str]) -> Vec<Value> {
    let out = symdex()
        .args(["manifest", "query", "--json"])
        .args(args)
        .arg(store)
        .output()
        .unwrap();
    ok(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn actions(records: &[Value]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for r in records {
        *out.entry(r["action"].as_str().unwrap_or("").to_string())
            .or_default() += 1;
    }
    out
}

/// The bytes of every manifest object of the store.
fn manifest_bytes(store: &Path) -> u64 {
    let mut total = 0;
    let mut dirs = vec![store.join("_manifest")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                dirs.push(entry.path());
            } else {
                total += entry.metadata().unwrap().len();
            }
        }
    }
    total
}

#[test]
fn unchanged_reruns_write_one_record_per_build_and_queries_answer_the_latest_decision() {
    let w = Workdir::new();
    build_split_elf(&w, "b1", "0x1111aaaa", "x + 1");
    build_split_elf(&w, "b2", "0x2222bbbb", "x + 2");
    let store = w.path("store");
    let index = |build: &str, dir: &str| {
        index_json(
            &store,
            &[
                format!("--build={build}"),
                w.path(dir).display().to_string(),
            ],
        )
    };
    let fresh = index("one", "b1");
    assert_eq!(fresh.len(), 2, "{fresh:?}");
    let after_fresh = manifest_bytes(&store);

    // Two unchanged re-runs: each input still reported to the caller, one line each in the
    // manifest per run.
    for _ in 0..2 {
        let again = index("one", "b1");
        assert!(
            again.iter().all(|r| r["action"] == "unchanged"),
            "{again:?}"
        );
    }
    let all = history(&store, &[]);
    assert_eq!(
        actions(&all),
        BTreeMap::from([("indexed".into(), 2), ("repeated".into(), 2)]),
        "{all:#?}"
    );
    let repeated: Vec<&Value> = all.iter().filter(|r| r["action"] == "repeated").collect();
    for r in &repeated {
        assert_eq!(r["repeated"]["unchanged"], 2, "{r}");
        assert_eq!(r["build"], "one");
        assert!(
            r["ingest_key"].as_str().unwrap().ends_with("/b1/"),
            "the inputs' folder: {r}"
        );
    }
    let growth = manifest_bytes(&store) - after_fresh;
    assert!(
        growth * 2 < after_fresh,
        "two re-runs grew the manifest by {growth} bytes beside the fresh index's {after_fresh}"
    );

    // Another build uploading the same files is a decision of its own: recorded in full.
    let same_bytes = index("two", "b1");
    assert!(same_bytes.iter().all(|r| r["action"] == "unchanged"));
    assert_eq!(history(&store, &["--build", "two"]).len(), 2);

    // The latest decision per upload: each build's two uploads once, no `repeated` line.
    let now = latest(&store, &[]);
    assert_eq!(
        actions(&now),
        BTreeMap::from([("indexed".into(), 2), ("unchanged".into(), 2)])
    );
    assert_eq!(latest(&store, &["--build", "one"]).len(), 2);
    assert_eq!(
        latest(&store, &["--action", "repeated"]).len(),
        2,
        "asked for, repetitions are history"
    );

    // A removal is the upload's latest decision: the build published nothing now.
    ok(symdex()
        .args(["delete", "--build", "one", "--store"])
        .arg(&store)
        .output()
        .unwrap());
    let one = latest(&store, &["--build", "one"]);
    assert!(one.iter().all(|r| r["action"] == "unpublished"), "{one:#?}");
    let published_now = latest(&store, &["--build", "one", "--action", "indexed"]);
    assert!(published_now.is_empty(), "{published_now:#?}");
    assert_eq!(
        history(&store, &["--build", "one", "--action", "indexed"]).len(),
        2,
        "the history keeps what it published"
    );

    // The table says what a repeated line stands for.
    let table = ok(symdex()
        .args(["manifest", "query", "--history", "--action", "repeated"])
        .arg(&store)
        .output()
        .unwrap());
    assert!(
        table.contains("(2 unchanged, 0 conflicts seen again)"),
        "{table}"
    );
}
