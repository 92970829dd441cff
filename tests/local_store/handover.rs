//! Keys handed over: a deleted or overwriting upload's keys go to the upload waiting for them
//! (an archive entry too); a killed delete is finished by the next index.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use crate::common::{self, build_split_elf, verify_clean, Workdir};
use crate::{delete_input, index, manifest, BID, BID_HEX};

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
