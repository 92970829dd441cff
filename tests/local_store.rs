//! The embedded default end to end: `symdex index` into a directory, re-index, conflicts,
//! delete with shared references, verify, zip archives, PE/PDB name aliasing, manifest query.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use common::{build_pe_and_pdb, build_split_elf, ok, symdex, verify_clean, Server, Workdir};
use serde_json::Value;

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
    assert_eq!(manifest(&store, &["--action", "unchanged"]).len(), 2);
    assert_eq!(manifest(&store, &["--build", "7"]).len(), 0);
    // The debug file by its name, and the stripped binary whose debuglink names it.
    assert_eq!(manifest(&store, &["--name", "APP.DEBUG"]).len(), 4);
    assert_eq!(manifest(&store, &["--name", "app.stripped"]).len(), 2);
    let table = ok(symdex()
        .args(["manifest", "query"])
        .arg(&store)
        .output()
        .unwrap());
    assert!(table.contains("4 records"), "{table}");
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

/// Build b's files meet build a's bytes under their build id and wait for those keys; deleting
/// build a hands the keys to b (indexed again from its files), and the store stays whole.
#[test]
fn deleting_the_upload_holding_a_key_hands_it_to_the_upload_waiting_for_it() {
    let w = Workdir::new();
    build_split_elf(&w, "a", BID, "x * 3 + 1");
    build_split_elf(&w, "b", BID, "x * 5 - 2"); // same build id, different code
    let store = w.path("store");
    index(&store, &[w.path("a").to_str().unwrap()]);
    let out = index(&store, &[w.path("b").to_str().unwrap()]);
    assert!(out.contains("2 conflicts"), "{out}");
    let key = store.join(format!("buildid/{BID_HEX}/debuginfo"));
    let stderr = delete_input(&store, &w.path("a"));
    assert!(stderr.contains("handed over"), "{stderr}");
    assert!(
        std::fs::read(&key).unwrap() == std::fs::read(w.path("b/app.debug")).unwrap(),
        "the waiting upload's bytes now serve the key"
    );
    verify_clean(&store);
    let waits = common::files_of(&store, |k| k.starts_with("_symdex/waiting/"));
    assert!(waits.is_empty(), "the waits ended: {:?}", waits.keys());
    // The manifest says the key was unpublished, then published again.
    let key_name = format!("buildid/{BID_HEX}/debuginfo");
    let about_key = manifest(&store, &["--key", &key_name]);
    let actions: Vec<&str> = about_key
        .iter()
        .map(|r| r["action"].as_str().unwrap())
        .collect();
    let unpublished = actions.iter().position(|a| *a == "unpublished");
    let again = actions.iter().rposition(|a| *a == "indexed");
    assert!(unpublished.is_some() && unpublished < again, "{actions:?}");
}

/// `--overwrite` replaces another build's bytes under a build id; the build it replaced waits
/// for its keys. Deleting the overwriting build hands them back (they held its bytes, or were
/// unpublished, before), and deleting the replaced build leaves the overwriter's keys alone;
/// `verify` finds nothing wrong at any step.
#[test]
fn an_overwritten_build_gets_its_keys_back_when_the_overwriting_build_is_deleted() {
    let w = Workdir::new();
    build_split_elf(&w, "a", BID, "x * 3 + 1");
    build_split_elf(&w, "b", BID, "x * 5 - 2"); // same build id, different code
    std::fs::create_dir_all(w.path("a2")).unwrap();
    std::fs::copy(w.path("a/app.debug"), w.path("a2/app.debug")).unwrap();
    let key = |store: &Path| store.join(format!("buildid/{BID_HEX}/debuginfo"));
    let bytes = |path: std::path::PathBuf| std::fs::read(path).unwrap();
    // Which build is deleted, and whether a's inputs are indexed again before.
    for (deleted, serving, again) in [("b", "a", true), ("a", "b", true), ("a", "b", false)] {
        let store = w.path(&format!("store-{deleted}-{again}"));
        // Two uploads of a's debug file: the key's record names both.
        index(
            &store,
            &[
                w.path("a").to_str().unwrap(),
                w.path("a2").to_str().unwrap(),
            ],
        );
        let out = index(&store, &[w.path("b").to_str().unwrap(), "--overwrite"]);
        assert!(out.contains("0 conflicts"), "{out}");
        assert!(bytes(key(&store)) == bytes(w.path("b/app.debug")));
        verify_clean(&store);
        // The manifest says whose bytes were replaced.
        let key_name = format!("buildid/{BID_HEX}/debuginfo");
        let records = manifest(&store, &["--key", &key_name]);
        let reasons: Vec<&str> = records
            .iter()
            .filter_map(|r| r["reason"].as_str())
            .collect();
        let a_debug = w.path("a/app.debug").display().to_string();
        assert!(
            reasons
                .iter()
                .any(|r| r.starts_with("overwrote the bytes of") && r.contains(&a_debug)),
            "{reasons:?}"
        );
        // Indexed again, a's uploads say that other bytes hold their keys (not `unchanged`).
        if again {
            let out = index(
                &store,
                &[
                    w.path("a").to_str().unwrap(),
                    w.path("a2").to_str().unwrap(),
                ],
            );
            assert!(
                out.contains("0 unchanged") && out.contains("3 conflicts"),
                "{out}"
            );
            verify_clean(&store);
        }
        let stderr = delete_input(&store, &w.path(deleted));
        assert_eq!(
            stderr.contains("handed over"),
            deleted == "b",
            "deleting {deleted}: {stderr}"
        );
        assert!(
            bytes(key(&store)) == bytes(w.path(&format!("{serving}/app.debug"))),
            "after deleting {deleted}, {serving}'s bytes serve the key"
        );
        verify_clean(&store);
        // b's deletion ended the waits with the hand-back; a's deletion ended a's own (its
        // records still listing the keys b took, without a re-index in between), and a2,
        // a copy of a's debug file, still waits.
        let waiting: BTreeSet<String> =
            common::files_of(&store, |k| k.starts_with("_symdex/waiting/"))
                .values()
                .map(|bytes| {
                    let wait: Value = serde_json::from_slice(bytes).unwrap();
                    let upload = wait["upload"].as_str().unwrap();
                    upload[..upload.find('@').unwrap()].to_string()
                })
                .collect();
        let a2_debug = w.path("a2/app.debug").canonicalize().unwrap();
        let still: BTreeSet<String> = match deleted {
            "a" => [format!("file:{}", a2_debug.display())].into(),
            _ => BTreeSet::new(),
        };
        assert_eq!(
            waiting, still,
            "deleting {deleted} (re-indexed before: {again})"
        );
    }
}

/// The upload waiting is an archive's entry: the archive is indexed again, entry by entry.
#[test]
fn a_key_freed_is_handed_to_an_archive_entry_waiting_for_it() {
    let w = Workdir::new();
    build_split_elf(&w, "a", BID, "x * 3 + 1");
    build_split_elf(&w, "b", BID, "x * 5 - 2");
    w.run("zip", &["-q", "-r", "b.zip", "b"]);
    let store = w.path("store");
    index(&store, &[w.path("a").to_str().unwrap()]);
    let out = index(&store, &[w.path("b.zip").to_str().unwrap()]);
    assert!(out.contains("2 conflicts"), "{out}");
    let stderr = delete_input(&store, &w.path("a"));
    assert!(stderr.contains("handed over"), "{stderr}");
    let key = store.join(format!("buildid/{BID_HEX}/debuginfo"));
    assert!(
        std::fs::read(&key).unwrap() == std::fs::read(w.path("b/app.debug")).unwrap(),
        "the entry's bytes now serve the key"
    );
    verify_clean(&store);
}

/// A `delete` killed at any point, then the deleted input indexed again: `index` finishes the
/// removal it finds half done as the delete would have — its record in the manifest, the keys
/// it freed handed to the upload waiting for them — before indexing the input again (which
/// then waits in turn). A kill before the removal of the key's holder began deleted nothing.
#[test]
fn index_finishes_a_killed_delete_and_hands_over_the_keys_it_freed() {
    let w = Workdir::new();
    build_split_elf(&w, "a", BID, "x * 3 + 1");
    build_split_elf(&w, "b", BID, "x * 5 - 2"); // same build id, different code
    let (a, b) = (w.path("a"), w.path("b"));
    let before = w.path("before");
    index(&before, &[a.to_str().unwrap()]);
    index(&before, &[b.to_str().unwrap()]);
    let key = format!("buildid/{BID_HEX}/debuginfo");
    let a_bytes = std::fs::read(a.join("app.debug")).unwrap();
    let b_bytes = std::fs::read(b.join("app.debug")).unwrap();
    let holder = a.join("app.debug").canonicalize().unwrap();
    let (mut began, mut not_begun) = (0, 0);
    for crash_after in 0.. {
        let name = format!("store{crash_after}");
        let Some(store) = common::store_with_killed_delete(&w, &before, &name, &a, crash_after)
        else {
            break;
        };
        // The holder's removal began (its record `removing`) or ended (no record).
        let removal_began = common::upload_state(&store, &holder).as_deref() != Some("indexed");
        index(&store, &[a.to_str().unwrap()]);
        verify_clean(&store);
        let holds = std::fs::read(store.join(&key)).unwrap();
        if !removal_began {
            not_begun += 1;
            assert!(
                holds == a_bytes,
                "crash after {crash_after}: nothing deleted"
            );
            continue;
        }
        began += 1;
        assert!(
            holds == b_bytes,
            "crash after {crash_after}: the key went to the upload waiting for it"
        );
        let about_key: Vec<(String, String)> = manifest(&store, &["--key", &key])
            .iter()
            .map(|r| {
                let upload = r["upload"].as_str().unwrap_or_default().to_string();
                (upload, r["action"].as_str().unwrap_or_default().to_string())
            })
            .collect();
        let went = about_key
            .iter()
            .position(|(u, a)| u.contains("/a/app.debug") && a == "unpublished");
        let back = about_key
            .iter()
            .rposition(|(u, a)| u.contains("/b/app.debug") && a == "indexed");
        assert!(
            went.is_some() && went < back,
            "crash after {crash_after}: the manifest says the key went, then came back: {about_key:?}"
        );
    }
    assert!(
        began >= 3 && not_begun >= 1,
        "the crash points fell before and inside the removal: {not_begun} / {began}"
    );
}

/// A run that finishes a killed delete hands the keys it frees to an upload later in the
/// same run. That upload's record, read ahead by the reader thread (its input's stamp vouched
/// for it) before the hand-over rewrote it, is read again: the run changed the store since
/// (`Prefetched`). So the run reports what the upload is now (unchanged, serving the key),
/// not the conflict its record said when it was read ahead.
#[test]
fn a_record_read_ahead_is_read_again_when_the_run_changed_the_store() {
    let w = Workdir::new();
    build_split_elf(&w, "a", BID, "x * 3 + 1");
    // The same build id, different code.
    build_split_elf(&w, "b", BID, "x * 5 - 2");
    // One upload each: the delete killed inside a's removal has nothing else left to do (with
    // two, which one it removes first follows their records' names, random here).
    for dir in ["a", "b"] {
        std::fs::remove_file(w.path(&format!("{dir}/app.stripped"))).unwrap();
    }
    // Settled before the first index (its stamps kept): the last run reads neither input.
    std::thread::sleep(std::time::Duration::from_millis(2_100));
    let (a, b) = (w.path("a"), w.path("b"));
    let before = w.path("before");
    index(&before, &[a.to_str().unwrap()]);
    let out = index(&before, &[b.to_str().unwrap()]);
    assert!(out.contains("1 conflicts"), "{out}");
    let holder = a.join("app.debug").canonicalize().unwrap();
    let store = (0..200)
        .map_while(|n| common::store_with_killed_delete(&w, &before, &format!("s{n}"), &a, n))
        .find(|s| common::upload_state(s, &holder).as_deref() == Some("removing"))
        .expect("a delete killed inside the removal of a's debug file");
    let records = common::index_json(&store, &[a.to_str().unwrap(), b.to_str().unwrap()]);
    let of_b: Vec<&str> = records
        .iter()
        .filter(|r| r["ingest_key"].as_str().unwrap_or_default().contains("/b/"))
        .map(|r| r["action"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        of_b,
        ["unchanged"],
        "b, handed a's keys earlier in the run, is reported as it is now"
    );
    let key = store.join(format!("buildid/{BID_HEX}/debuginfo"));
    assert_eq!(
        std::fs::read(key).unwrap(),
        std::fs::read(b.join("app.debug")).unwrap()
    );
    verify_clean(&store);
}

#[test]
fn deleting_builds_honours_shared_references() {
    let w = Workdir::new();
    build_split_elf(&w, "b1", BID, "x + 1");
    std::fs::create_dir_all(w.path("b2")).unwrap();
    for f in ["app.debug", "app.stripped"] {
        std::fs::copy(w.path(&format!("b1/{f}")), w.path(&format!("b2/{f}"))).unwrap();
    }
    let store = w.path("store");
    index(&store, &[w.path("b1").to_str().unwrap(), "--build", "1"]);
    index(&store, &[w.path("b2").to_str().unwrap(), "--build", "2"]);
    let key = store.join(format!("buildid/{BID_HEX}/debuginfo"));

    let out = ok(symdex()
        .args(["delete", "--build", "1", "--store"])
        .arg(&store)
        .output()
        .unwrap());
    assert!(
        out.contains("2 uploads deleted, 0 keys unpublished"),
        "{out}"
    );
    assert!(key.is_file(), "build 2 still references the file");

    let out = ok(symdex()
        .args(["delete", "--build", "2", "--store"])
        .arg(&store)
        .output()
        .unwrap());
    assert!(out.contains("2 uploads deleted"), "{out}");
    assert!(!key.exists(), "the last reference is gone");
    assert!(!store.join("symbols").exists(), "no key is left behind");
    let unpublished = manifest(&store, &["--action", "unpublished"]);
    assert_eq!(unpublished.len(), 4);
    assert!(unpublished
        .iter()
        .any(|r| r["removed"].as_array().is_some_and(|a| !a.is_empty())));

    // Delete by input path.
    index(&store, &[w.path("b1").to_str().unwrap()]);
    assert!(key.is_file());
    ok(symdex()
        .args(["delete", "--store"])
        .arg(&store)
        .arg("--input")
        .arg(w.path("b1"))
        .output()
        .unwrap());
    assert!(!key.exists());
}

#[test]
fn verify_finds_a_removed_or_changed_file() {
    let w = Workdir::new();
    build_split_elf(&w, "out", BID, "x");
    let store = w.path("store");
    index(&store, &[w.path("out").to_str().unwrap()]);
    assert!(symdex()
        .arg("verify")
        .arg(&store)
        .status()
        .unwrap()
        .success());
    let key = format!("buildid/{BID_HEX}/executable");
    std::fs::remove_file(store.join(&key)).unwrap();
    // Replaced, not edited in place (every name of a file is a hard link to the same bytes):
    // the new file names no owner, which is seen without reading it.
    let debug = store.join(format!("gdb/01/{}.debug", &BID_HEX[2..]));
    std::fs::remove_file(&debug).unwrap();
    std::fs::write(&debug, b"tampered").unwrap();
    let out = symdex().arg("verify").arg(&store).output().unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("missing  {key}")), "{text}");
    assert!(
        text.contains("changed  gdb/01/"),
        "a size change is seen without --deep: {text}"
    );

    // The same size, other bytes, written in place (the file keeps the attribute naming its
    // owner and the content written): only --deep reads content.
    let debuginfo_key = format!("buildid/{BID_HEX}/debuginfo");
    let debuginfo = store.join(&debuginfo_key);
    let size = std::fs::metadata(&debuginfo).unwrap().len() as usize;
    std::io::Write::write_all(
        &mut std::fs::OpenOptions::new()
            .write(true)
            .open(&debuginfo)
            .unwrap(),
        &vec![b'x'; size],
    )
    .unwrap();
    let changed = format!("changed  {debuginfo_key}");
    let fast = symdex().arg("verify").arg(&store).output().unwrap();
    let text = String::from_utf8_lossy(&fast.stdout);
    assert!(!text.contains(&changed), "{text}");
    let deep = symdex()
        .args(["verify", "--deep"])
        .arg(&store)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&deep.stdout);
    assert!(!deep.status.success());
    assert!(text.contains(&changed), "{text}");
}

#[test]
fn zip_archives_are_indexed_entry_by_entry() {
    let w = Workdir::new();
    build_split_elf(&w, "out", BID, "x + 2");
    std::fs::write(w.path("out/README.txt"), "not an artifact").unwrap();
    w.run("zip", &["-q", "-r", "build.zip", "out"]);
    let store = w.path("store");
    let out = index(
        &store,
        &[w.path("build.zip").to_str().unwrap(), "--build", "z"],
    );
    assert!(
        out.contains("2 published") && out.contains("1 skipped"),
        "{out}"
    );
    assert_eq!(
        std::fs::read(store.join(format!("buildid/{BID_HEX}/executable"))).unwrap(),
        std::fs::read(w.path("out/app.stripped")).unwrap()
    );
    let records = manifest(&store, &["--build", "z"]);
    // Each entry is an upload of its own, recorded with the archive and its path inside.
    assert!(records
        .iter()
        .all(|r| r["ingest_key"].as_str().unwrap().ends_with("build.zip")
            && r["entry"].as_str().unwrap().starts_with("out/")));
    let skipped = manifest(&store, &["--action", "skipped"]);
    assert!(skipped[0]["reason"]
        .as_str()
        .unwrap()
        .contains("unrecognized"));
}

/// A PE whose CodeView record names `pdb_name`, and its PDB saved as `pdbs/<renamed>`.
fn build_pe_with_renamed_pdb(w: &Workdir, pdb_name: &str, dll: &str, renamed: &str) {
    build_pe_and_pdb(w, pdb_name, dll);
    std::fs::create_dir_all(w.path("pdbs")).unwrap();
    std::fs::rename(w.path(pdb_name), w.path(&format!("pdbs/{renamed}"))).unwrap();
}

#[test]
fn a_pdb_is_reachable_under_the_name_its_pe_uses() {
    let w = Workdir::new();
    build_pe_with_renamed_pdb(&w, "Mixed.PDB", "mixed.dll", "mixed.pdb");
    let keys_out = ok(symdex()
        .args(["keys", "--json"])
        .arg(w.path("mixed.dll"))
        .output()
        .unwrap());
    let pe: Value = serde_json::from_str(keys_out.lines().next().unwrap()).unwrap();
    let guid_age = {
        let id = pe["debug_id"].as_str().unwrap();
        let (uuid, age) = id.rsplit_once('-').unwrap();
        format!("{}{age}", uuid.replace('-', "").to_ascii_uppercase())
    };
    let alias = format!("symbols/Mixed.PDB/{guid_age}/Mixed.PDB");

    // PDB first, then the PE.
    let store = w.path("store1");
    index(&store, &[w.path("pdbs").to_str().unwrap()]);
    assert!(!store.join(&alias).exists());
    index(&store, &[w.path("mixed.dll").to_str().unwrap()]);
    assert!(store.join(&alias).is_file(), "PE indexed after its PDB");
    assert_eq!(
        std::fs::read(store.join(&alias)).unwrap(),
        std::fs::read(w.path("pdbs/mixed.pdb")).unwrap()
    );

    // PE first, then the PDB.
    let store = w.path("store2");
    index(&store, &[w.path("mixed.dll").to_str().unwrap()]);
    index(&store, &[w.path("pdbs").to_str().unwrap()]);
    assert!(store.join(&alias).is_file(), "PDB indexed after its PE");
    assert!(store
        .join(format!(
            "symbols/mixed.pdb/{}/mixed.pdb",
            guid_age.to_ascii_lowercase()
        ))
        .is_file());
    verify_clean(&store);
}

#[test]
fn a_deleted_pdb_is_not_used_as_an_alias_source() {
    let w = Workdir::new();
    build_pe_with_renamed_pdb(&w, "Lib.PDB", "lib.dll", "lib.pdb");
    let store = w.path("store");
    index(&store, &[w.path("pdbs").to_str().unwrap(), "--build", "a"]);
    ok(symdex()
        .args(["delete", "--build", "a", "--store"])
        .arg(&store)
        .output()
        .unwrap());
    // The PE arrives while its PDB is gone: no alias, and the stale copy is forgotten.
    index(
        &store,
        &[w.path("lib.dll").to_str().unwrap(), "--build", "c"],
    );
    let ids: Vec<_> = std::fs::read_dir(store.join("_symdex/ids"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(ids.len(), 1);
    let record: Value = serde_json::from_slice(&std::fs::read(ids[0].path()).unwrap()).unwrap();
    assert!(record["pdb_key"].is_null(), "{record}");
    assert!(!store.join("symbols/Lib.PDB").exists());
    // The PDB comes back: it is published under the PE's name too.
    index(&store, &[w.path("pdbs").to_str().unwrap(), "--build", "d"]);
    assert!(store.join("symbols/Lib.PDB").is_dir());
    verify_clean(&store);
}

/// Bytes a store holds for its published keys, each file counted once however many names
/// (hard links) it has; and the number of names.
fn stored_bytes(store: &Path) -> (u64, usize) {
    use std::os::unix::fs::MetadataExt;
    let mut inodes = std::collections::BTreeSet::new();
    let mut bytes = 0;
    let mut names = 0;
    for e in walkdir::WalkDir::new(store)
        .into_iter()
        .filter_map(Result::ok)
    {
        let key = e
            .path()
            .strip_prefix(store)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if !e.file_type().is_file() || key.starts_with("_symdex/") || key.starts_with("_manifest/")
        {
            continue;
        }
        names += 1;
        let meta = e.metadata().unwrap();
        if inodes.insert((meta.dev(), meta.ino())) {
            bytes += meta.len();
        }
    }
    (bytes, names)
}

#[test]
fn each_artifact_is_stored_once_under_all_its_names() {
    let w = Workdir::new();
    build_split_elf(&w, "out", BID, "x + 11");
    std::fs::write(w.path("src.cpp"), common::SOURCE_CPP).unwrap();
    build_pe_and_pdb(&w, "lib.pdb", "lib.dll");
    // Fat Mach-O: one upload, one identity per slice, every slice's keys naming the same bytes.
    common::build_macho(&w);
    let inputs = [
        "out/app.debug",
        "out/app.stripped",
        "lib.pdb",
        "lib.dll",
        "libm.dylib",
        "libm.dwarf",
    ];
    let input_bytes: u64 = inputs
        .iter()
        .map(|f| std::fs::metadata(w.path(f)).unwrap().len())
        .sum();
    let store = w.path("store");
    let args: Vec<String> = inputs
        .iter()
        .map(|f| w.path(f).to_string_lossy().into_owned())
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    index(&store, &args);
    let (bytes, names) = stored_bytes(&store);
    let ratio = bytes as f64 / input_bytes as f64;
    assert!(names > 4 * inputs.len(), "{names} names");
    assert!(
        ratio <= 1.05,
        "the store holds {bytes} bytes for {input_bytes} input bytes ({ratio:.2}x) under {names} names"
    );
    let key = format!("gdb/{}/{}.debug", &BID_HEX[..2], &BID_HEX[2..]);
    assert_eq!(
        std::fs::read(store.join(&key)).unwrap(),
        std::fs::read(w.path("out/app.debug")).unwrap()
    );
    // Every name of every layout serves its bytes through `symdex serve` and through a plain
    // static file server over the same directory (hard links are plain files to it).
    let published = common::published_files(&store);
    let layouts: BTreeSet<&str> = published
        .keys()
        .filter_map(|k| k.split('/').next())
        .collect();
    for prefix in ["buildid", "gdb", "symbols", "index2", "unified"] {
        assert!(layouts.contains(prefix), "no {prefix}/ key in {layouts:?}");
    }
    let serve = Server::start(&store);
    let plain = StaticServer::start(&store);
    for (key, bytes) in &published {
        let path = format!("/{}", url_path(key));
        let (status, _, body) = serve.request("GET", &path, "");
        assert_eq!(
            (status, body.len()),
            (200, bytes.len()),
            "symdex serve {key}"
        );
        assert!(body == *bytes, "symdex serve {key}: other bytes");
        let (status, body) = plain.get(&path);
        assert_eq!(
            (status, body.len()),
            (200, bytes.len()),
            "static server {key}"
        );
        assert!(body == *bytes, "static server {key}: other bytes");
    }
    drop((serve, plain));
    // Deleting one upload unlinks its names, never the bytes another name still needs.
    ok(symdex()
        .args(["delete", "--store"])
        .arg(&store)
        .arg("--input")
        .arg(w.path("out/app.debug"))
        .output()
        .unwrap());
    assert!(!store.join(&key).exists());
    assert_eq!(
        std::fs::read(store.join(format!("buildid/{BID_HEX}/executable"))).unwrap(),
        std::fs::read(w.path("out/app.stripped")).unwrap()
    );
    verify_clean(&store);
}

#[test]
fn a_reindex_of_an_unchanged_store_writes_only_its_manifest() {
    use std::os::unix::fs::MetadataExt;
    let w = Workdir::new();
    build_split_elf(&w, "out", BID, "x + 12");
    std::fs::write(w.path("src.cpp"), common::SOURCE_CPP).unwrap();
    build_pe_and_pdb(&w, "out/lib.pdb", "out/lib.dll");
    let store = w.path("store");
    let out = w.path("out");
    index(&store, &[out.to_str().unwrap(), "--build", "r"]);
    // Every file with its inode: a rewrite (temporary file renamed over) changes it.
    let files = || -> BTreeMap<String, u64> {
        walkdir::WalkDir::new(&store)
            .into_iter()
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_file())
            .map(|e| {
                let key = e
                    .path()
                    .strip_prefix(&store)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                (key, e.metadata().unwrap().ino())
            })
            .collect()
    };
    let before = files();
    let text = index(&store, &[out.to_str().unwrap(), "--build", "r"]);
    assert!(
        text.contains("0 published") && text.contains("4 unchanged"),
        "{text}"
    );
    let after = files();
    let changed: Vec<&String> = after
        .iter()
        .filter(|(k, ino)| before.get(*k) != Some(ino))
        .map(|(k, _)| k)
        .collect();
    assert!(
        changed.iter().all(|k| k.starts_with("_manifest/")) && changed.len() == 1,
        "re-index wrote {changed:?}"
    );
    verify_clean(&store);
}

/// Bytes a `symdex index` run read (read(2) and friends, page cache or not): its shell's
/// `/proc/<pid>/io` after it was reaped counts the child's I/O.
fn bytes_read_by_index(store: &Path, input: &Path) -> (u64, String) {
    let out = ok(std::process::Command::new("sh")
        .arg("-c")
        .arg(r#""$0" index --store "$1" "$2"; grep '^rchar:' /proc/$$/io"#)
        .arg(env!("CARGO_BIN_EXE_symdex"))
        .arg(store)
        .arg(input)
        .output()
        .unwrap());
    let rchar = out
        .lines()
        .find_map(|l| l.strip_prefix("rchar: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no rchar in {out}"));
    (rchar, out)
}

#[test]
fn a_reindex_reads_no_input_whose_status_is_unchanged() {
    const PADDING: usize = 32 << 20;
    let w = Workdir::new();
    build_split_elf(&w, "out", BID, "x * 5 + 2");
    // A big debug file: bytes past everything identification reads.
    let big = w.path("out/app.debug");
    let mut bytes = std::fs::read(&big).unwrap();
    bytes.resize(bytes.len() + PADDING, 0);
    std::fs::write(&big, &bytes).unwrap();
    // A file's status is trusted only once it was left alone for 2 s before it was hashed
    // (a write in the same clock tick as the stat would go unseen): the rule is about wall
    // time, so the test waits it out.
    std::thread::sleep(std::time::Duration::from_millis(2_100));
    let store = w.path("store");
    let out = w.path("out");
    let (first, text) = bytes_read_by_index(&store, &out);
    assert!(
        first > PADDING as u64,
        "a first index hashes and copies: {first}\n{text}"
    );
    let (again, text) = bytes_read_by_index(&store, &out);
    assert!(
        text.contains("0 published") && text.contains("2 unchanged"),
        "{text}"
    );
    assert!(
        again < (PADDING / 8) as u64,
        "an unchanged re-index read {again} bytes\n{text}"
    );
    // The stamps are kept by directory (`_symdex/stamps/`, one record for `out/`), and in
    // each input's source record as before: either alone vouches for the inputs.
    let stamps: Vec<_> = std::fs::read_dir(store.join("_symdex/stamps"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(stamps.len(), 1, "{stamps:?}");
    let mut sources = Vec::new();
    for entry in std::fs::read_dir(store.join("_symdex/sources")).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let mut record: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert!(record["file"].is_object(), "{record}");
        record.as_object_mut().unwrap().remove("file");
        std::fs::write(&path, serde_json::to_vec(&record).unwrap()).unwrap();
        sources.push((path, bytes));
    }
    let (by_dir, text) = bytes_read_by_index(&store, &out);
    assert!(
        text.contains("2 unchanged") && by_dir < (PADDING / 8) as u64,
        "stamps by directory alone: read {by_dir} bytes\n{text}"
    );
    // A store whose stamps are only in its source records (written before): read from there.
    for (path, bytes) in &sources {
        std::fs::write(path, bytes).unwrap();
    }
    std::fs::remove_dir_all(store.join("_symdex/stamps")).unwrap();
    let (by_source, text) = bytes_read_by_index(&store, &out);
    assert!(
        text.contains("2 unchanged") && by_source < (PADDING / 8) as u64,
        "stamps in source records alone: read {by_source} bytes\n{text}"
    );
    // Touched (same bytes, new status): read and hashed again, still unchanged.
    ok(std::process::Command::new("touch")
        .arg(&big)
        .output()
        .unwrap());
    let (touched, text) = bytes_read_by_index(&store, &out);
    assert!(
        text.contains("0 published") && text.contains("2 unchanged"),
        "{text}"
    );
    assert!(
        touched > PADDING as u64,
        "a touched input was not read: {touched}"
    );
    // Touched just before, it was not stamped (unsettled): once it has been left alone, the
    // next re-index hashes it one more time and keeps its stamp, answered from its upload
    // record all the same; the one after reads it no more (before, a file answered from its
    // record was never stamped again: hashed at every re-index).
    std::thread::sleep(std::time::Duration::from_millis(2_100));
    let (_, text) = bytes_read_by_index(&store, &out);
    assert!(
        text.contains("0 published") && text.contains("2 unchanged"),
        "{text}"
    );
    let (stamped, text) = bytes_read_by_index(&store, &out);
    assert!(
        text.contains("2 unchanged") && stamped < (PADDING / 8) as u64,
        "stamped again: read {stamped} bytes\n{text}"
    );
    // Rewritten in place with other bytes of the same size: its change time moved, so it is
    // read, and the new content is seen (a conflict under the same build id), not mistaken
    // for the old.
    *bytes.last_mut().unwrap() = 1;
    std::fs::write(&big, &bytes).unwrap();
    let (_, text) = bytes_read_by_index(&store, &out);
    assert!(text.contains("1 conflicts"), "{text}");
    verify_clean(&store);
}

/// `python3 -m http.server` over a directory: a static file server that knows nothing of
/// symdex. Stopped on drop.
struct StaticServer {
    child: std::process::Child,
    port: u16,
}

impl StaticServer {
    fn start(dir: &Path) -> StaticServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = std::process::Command::new("python3")
            .args([
                "-m",
                "http.server",
                "--bind",
                "127.0.0.1",
                &port.to_string(),
            ])
            .arg("--directory")
            .arg(dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "http.server did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        StaticServer { child, port }
    }

    /// GET `path`: (status, body).
    fn get(&self, path: &str) -> (u16, Vec<u8>) {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        let head = String::from_utf8_lossy(&raw[..split]).into_owned();
        let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        (status, raw[split + 4..].to_vec())
    }
}

impl Drop for StaticServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A key as a URL path: every byte but unreserved characters and `/` percent-encoded.
fn url_path(key: &str) -> String {
    key.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
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
