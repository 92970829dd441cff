//! The embedded default end to end: `symdex index` into a directory, re-index, conflicts,
//! delete with shared references, verify, zip archives, PE/PDB name aliasing, manifest query.

#[path = "../common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{build_split_elf, ok, symdex, verify_clean, Workdir};
use serde_json::Value;

mod handover;
mod names;
mod reindex;
mod removals;

/// `symdex index` that must succeed, conflicts allowed (the tests read them from the output).
fn index(store: &Path, args: &[&str]) -> String {
    ok(symdex()
        .args(["index", "--allow-conflicts"])
        .arg("--store")
        .arg(store)
        .args(args)
        .output()
        .unwrap())
}

/// Every file of the store except the manifest, with its content.
fn snapshot(store: &Path) -> BTreeMap<String, Vec<u8>> {
    common::files_of(store, |key| !key.starts_with("_manifest"))
}

fn manifest(store: &Path, filters: &[&str]) -> Vec<Value> {
    let out = ok(symdex()
        .args(["manifest", "query", "--json"])
        .arg(store)
        .args(filters)
        .output()
        .unwrap());
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

const BID: &str = "0x0123456789abcdef0123456789abcdef01234567";
const BID_HEX: &str = "0123456789abcdef0123456789abcdef01234567";

#[test]
fn index_publishes_every_layout_and_reindex_changes_nothing() {
    let w = Workdir::new();
    build_split_elf(&w, "out", BID, "x * 3 + 1");
    let store = w.path("store");
    let first = index(
        &store,
        &[
            w.path("out").to_str().unwrap(),
            "--build",
            "42",
            "--product",
            "demo",
        ],
    );
    assert!(first.contains("2 published"), "{first}");
    for key in [
        format!("buildid/{BID_HEX}/debuginfo"),
        format!("buildid/{BID_HEX}/executable"),
        format!("symbols/_.debug/elf-buildid-sym-{BID_HEX}/_.debug"),
        format!("symbols/app.stripped/elf-buildid-{BID_HEX}/app.stripped"),
        format!("unified/01/{}/debuginfo", &BID_HEX[2..]),
        format!("unified/01/{}/debuginfo.meta", &BID_HEX[2..]),
        format!("gdb/01/{}.debug", &BID_HEX[2..]),
    ] {
        assert!(store.join(&key).is_file(), "missing {key}");
    }
    assert_eq!(
        std::fs::read(store.join(format!("buildid/{BID_HEX}/debuginfo"))).unwrap(),
        std::fs::read(w.path("out/app.debug")).unwrap()
    );
    let before = snapshot(&store);
    let second = index(
        &store,
        &[
            w.path("out").to_str().unwrap(),
            "--build",
            "42",
            "--product",
            "demo",
        ],
    );
    assert!(
        second.contains("0 published (0 keys), 2 unchanged"),
        "{second}"
    );
    assert_eq!(snapshot(&store), before, "re-indexing changed the store");

    let records = manifest(&store, &["--build", "42", "--action", "indexed"]);
    assert_eq!(records.len(), 2, "{records:#?}");
    for r in &records {
        assert_eq!(r["schema"], 1);
        assert_eq!(r["product"], "demo");
        assert_eq!(r["code_id"], BID_HEX);
        assert!(r["published"].as_array().unwrap().len() >= 4);
        assert!(r["time"].as_str().unwrap().ends_with('Z'));
    }
    // The re-index repeated both decisions: one record counts them.
    let repeated = manifest(&store, &["--history", "--action", "repeated"]);
    assert_eq!(repeated.len(), 1, "{repeated:#?}");
    assert_eq!(repeated[0]["repeated"]["unchanged"], 2);
    assert_eq!(repeated[0]["build"], "42");
    assert_eq!(manifest(&store, &["--action", "unchanged"]).len(), 0);
    assert_eq!(manifest(&store, &["--build", "7"]).len(), 0);
    // The debug file by its name, and the stripped binary whose debuglink names it: each
    // upload's latest decision.
    assert_eq!(manifest(&store, &["--name", "APP.DEBUG"]).len(), 2);
    assert_eq!(manifest(&store, &["--name", "app.stripped"]).len(), 1);
    let table = ok(symdex()
        .args(["manifest", "query"])
        .arg(&store)
        .output()
        .unwrap());
    assert!(table.contains("2 records"), "{table}");
    verify_clean(&store);
}

#[test]
fn conflicts_are_reported_and_not_overwritten() {
    let w = Workdir::new();
    build_split_elf(&w, "a", BID, "x * 3 + 1");
    build_split_elf(&w, "b", BID, "x * 5 - 2"); // same build id, different code
    let store = w.path("store");
    index(&store, &[w.path("a").to_str().unwrap()]);
    let key = store.join(format!("buildid/{BID_HEX}/debuginfo"));
    let original = std::fs::read(&key).unwrap();
    let out = index(&store, &[w.path("b").to_str().unwrap()]);
    assert!(out.contains("2 conflicts"), "{out}");
    assert_eq!(
        std::fs::read(&key).unwrap(),
        original,
        "a conflict overwrote the key"
    );
    let conflicts = manifest(&store, &["--action", "conflict"]);
    assert_eq!(conflicts.len(), 2);
    assert!(conflicts[0]["conflicts"]
        .as_array()
        .unwrap()
        .iter()
        .any(|k| k.as_str().unwrap().contains("buildid/")));
    // The audit questions in one command each.
    assert_eq!(manifest(&store, &["--conflicts"]).len(), 2);
    let key_name = format!("buildid/{BID_HEX}/debuginfo");
    let about_key = manifest(&store, &["--key", &key_name]);
    let mut actions: Vec<&str> = about_key
        .iter()
        .map(|r| r["action"].as_str().unwrap())
        .collect();
    // Both runs fall in one second: their order in the manifest is not defined.
    actions.sort_unstable();
    assert_eq!(
        actions,
        ["conflict", "indexed"],
        "who published it, who met it"
    );
    let table = ok(symdex()
        .args(["manifest", "query", "--key", &key_name])
        .arg(&store)
        .output()
        .unwrap());
    assert!(
        table.contains(&format!("{key_name}: published, referenced by 1 uploads:")),
        "{table}"
    );
    assert!(
        table.contains(&w.path("a/app.debug").display().to_string()),
        "{table}"
    );
    let csv = ok(symdex()
        .args(["manifest", "query", "--conflicts", "--format", "csv"])
        .arg(&store)
        .output()
        .unwrap());
    let mut lines = csv.lines();
    assert!(lines.next().unwrap().starts_with("time,action,upload,"));
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 2, "{csv}");
    assert!(
        rows.iter().all(|r| r.split(',').nth(1) == Some("conflict")),
        "{csv}"
    );
    let out = index(&store, &[w.path("b").to_str().unwrap(), "--overwrite"]);
    assert!(out.contains("2 published"), "{out}");
    assert_eq!(
        std::fs::read(&key).unwrap(),
        std::fs::read(w.path("b/app.debug")).unwrap()
    );
}

/// `symdex delete --input INPUT`; what it said on stderr.
fn delete_input(store: &Path, input: &Path) -> String {
    let out = symdex()
        .args(["delete", "--store"])
        .arg(store)
        .arg("--input")
        .arg(input)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    ok(out);
    stderr
}

/// A run whose inputs found their keys holding other bytes fails (exit 1, saying why), so CI
/// sees that the symbols served are not the ones it built; `--allow-conflicts` exits 0.
#[test]
fn conflicts_fail_the_run_unless_allowed() {
    let w = Workdir::new();
    let store = w.path("store");
    std::fs::create_dir_all(w.path("a")).unwrap();
    std::fs::create_dir_all(w.path("b")).unwrap();
    // Two sources of one name, other bytes: the same SSQP key (`--source`: sha1 keys differ,
    // so a name-keyed artifact: two Breakpad files of one module id).
    let sym = |body: &str| {
        format!("MODULE Linux x86_64 0123456789ABCDEF0123456789ABCDEF0 app\nFILE 0 /src/{body}.c\n")
    };
    std::fs::write(w.path("a/app.sym"), sym("one")).unwrap();
    std::fs::write(w.path("b/app.sym"), sym("two")).unwrap();
    let run = |dir: &str, extra: &[&str]| {
        symdex()
            .args(["index", "--store"])
            .arg(&store)
            .args(extra)
            .arg(w.path(dir))
            .output()
            .unwrap()
    };
    assert!(run("a", &[]).status.success());
    let conflicting = run("b", &[]);
    assert_eq!(conflicting.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&conflicting.stderr);
    assert!(stderr.contains("conflicts"), "{stderr}");
    assert!(stderr.contains("--allow-conflicts"), "{stderr}");
    let allowed = run("b", &["--allow-conflicts"]);
    assert!(allowed.status.success());
    // What is served is still the first upload's bytes.
    let served = common::published_files(&store);
    assert!(served
        .values()
        .any(|b| b.as_slice() == sym("one").as_bytes()));
    assert!(!served
        .values()
        .any(|b| b.as_slice() == sym("two").as_bytes()));
}

/// Ids are global: a product's upload meeting keys another product published first with other
/// bytes is a conflict that names that product (`held_by_products`, the reason), fails the run,
/// and publishes nothing of its own; within one product a conflict stays a plain one.
#[test]
fn a_conflict_with_another_products_keys_names_that_product() {
    let w = Workdir::new();
    let store = w.path("store");
    for dir in ["a", "b", "c"] {
        std::fs::create_dir_all(w.path(dir)).unwrap();
    }
    let sym = |body: &str| {
        format!("MODULE Linux x86_64 0123456789ABCDEF0123456789ABCDEF0 app\nFILE 0 /src/{body}.c\n")
    };
    std::fs::write(w.path("a/app.sym"), sym("first")).unwrap();
    std::fs::write(w.path("b/app.sym"), sym("squatted")).unwrap();
    std::fs::write(w.path("c/app.sym"), sym("rebuilt")).unwrap();
    let run = |dir: &str, product: &str| {
        symdex()
            .args(["index", "--json", "--store"])
            .arg(&store)
            .args(["--product", product])
            .arg(w.path(dir))
            .output()
            .unwrap()
    };
    assert!(run("a", "alpha").status.success());
    let record = |out: &std::process::Output| -> Value {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.starts_with('{'))
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|r| r["action"] == "conflict")
            .expect("a conflict record")
    };
    let other_product = run("b", "beta");
    assert_eq!(other_product.status.code(), Some(1));
    let conflict = record(&other_product);
    assert_eq!(conflict["held_by_products"], serde_json::json!(["alpha"]));
    assert!(
        conflict["reason"]
            .as_str()
            .unwrap()
            .contains("cross-product"),
        "{conflict}"
    );
    let same_product = run("c", "alpha");
    assert_eq!(same_product.status.code(), Some(1));
    let conflict = record(&same_product);
    assert!(conflict.get("held_by_products").is_none(), "{conflict}");
    assert!(!conflict["reason"]
        .as_str()
        .unwrap()
        .contains("cross-product"));
    // The first product's bytes are what is served.
    let served = common::published_files(&store);
    assert!(served
        .values()
        .any(|b| b.as_slice() == sym("first").as_bytes()));
    assert!(!served
        .values()
        .any(|b| b.as_slice() == sym("squatted").as_bytes()));
}
