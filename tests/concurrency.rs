//! Several writers on one local store, and runs killed at exact points: the store ends
//! consistent (`verify` clean), with the references a serial run gives, a complete manifest
//! and no temporary files.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use common::{build_split_elf, ok, prog_c, symdex, verify_clean, Workdir};
use serde_json::Value;

fn index_cmd(store: &Path, build: &str, inputs: &[&Path]) -> Command {
    let mut cmd = symdex();
    // Conflicts allowed: the tests read them from the records.
    cmd.args(["index", "--allow-conflicts"])
        .arg("--store")
        .arg(store)
        .args(["--build", build])
        .args(inputs);
    cmd
}

/// Six split programs, each in its own directory, with distinct build ids.
fn programs(w: &Workdir) -> Vec<std::path::PathBuf> {
    (0..6)
        .map(|i| {
            let dir = format!("p{i}");
            build_split_elf(
                w,
                &dir,
                &format!("0x{i:02x}{}", "ab".repeat(19)),
                &format!("x * {}", i + 2),
            );
            w.path(&dir)
        })
        .collect()
}

/// The store's references, as the CLI reads them: its records, and the keys one upload alone
/// references, whose objects name it (refs/, invariant 7).
fn key_records(store: &Path) -> Vec<symdex_shared::refs::KeyRecord> {
    let store = symdex_shared::storage::LocalStore::open(store)
        .and_then(|s| s.naming_owners_as_marked(None))
        .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime
        .block_on(symdex_shared::refs::RefStore::new(&store).all_keys())
        .unwrap()
}

/// key -> uploads referencing it.
fn references(store: &Path) -> BTreeMap<String, BTreeSet<String>> {
    key_records(store)
        .into_iter()
        .map(|record| (record.key, record.refs))
        .collect()
}

#[test]
fn four_indexers_and_a_delete_on_one_store() {
    let w = Workdir::new();
    let dirs = programs(&w);
    let inputs = |i: usize| -> Vec<&Path> { (i..i + 3).map(|j| dirs[j % 6].as_path()).collect() };
    // The serial run: the four builds, one after another.
    let serial = w.path("serial");
    for i in 0..4 {
        ok(index_cmd(&serial, &format!("b{i}"), &inputs(i))
            .output()
            .unwrap());
    }
    let expected = references(&serial);
    assert!(!expected.is_empty());
    for round in 0..3 {
        let store = w.path(&format!("store{round}"));
        let all: Vec<&Path> = dirs.iter().map(|d| d.as_path()).collect();
        ok(index_cmd(&store, "old", &all).output().unwrap());
        // Four indexers over overlapping inputs and the delete of the old build, at once.
        let mut children: Vec<_> = (0..4)
            .map(|i| {
                index_cmd(&store, &format!("b{i}"), &inputs(i))
                    .spawn()
                    .unwrap()
            })
            .collect();
        children.push(
            symdex()
                .args(["delete", "--build", "old", "--store"])
                .arg(&store)
                .spawn()
                .unwrap(),
        );
        for mut child in children {
            assert!(child.wait().unwrap().success(), "round {round}");
        }
        verify_clean(&store);
        assert_eq!(
            references(&store),
            expected,
            "round {round}: same as the serial run"
        );
    }
}

/// Every published key was recorded as `published` by the upload that published it.
fn manifest_complete(store: &Path) {
    let out = ok(symdex()
        .args(["manifest", "query", "--history", "--json"])
        .arg(store)
        .output()
        .unwrap());
    let mut published: BTreeSet<(String, String)> = BTreeSet::new();
    for line in out.lines() {
        let record: Value = serde_json::from_str(line).unwrap();
        for key in record["published"].as_array().into_iter().flatten() {
            published.insert((
                record["upload"].as_str().unwrap().to_string(),
                key.as_str().unwrap().to_string(),
            ));
        }
    }
    for record in key_records(store) {
        let (key, by) = (record.key.as_str(), record.by.as_str());
        if key.ends_with(".meta") {
            continue; // generated sidecars are not artifacts' keys
        }
        assert!(
            published.contains(&(by.to_string(), key.to_string())),
            "{key}: published by {by}, but no manifest record says so"
        );
    }
}

fn temp_files(store: &Path) -> usize {
    std::fs::read_dir(store.join("_symdex/tmp")).map_or(0, |d| d.count())
}

#[test]
fn a_run_killed_at_any_point_is_repaired_by_running_it_again() {
    let w = Workdir::new();
    let dirs = programs(&w);
    let all: Vec<&Path> = dirs.iter().map(|d| d.as_path()).collect();
    let clean = w.path("clean");
    ok(index_cmd(&clean, "x", &all).output().unwrap());
    let expected = references(&clean);
    let mut crashed = 0;
    for crash_after in [0, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233] {
        let store = w.path(&format!("store{crash_after}"));
        let killed = index_cmd(&store, "x", &all)
            .env("SYMDEX_CRASH_AFTER_WRITES", crash_after.to_string())
            .output()
            .unwrap();
        if !killed.status.success() {
            crashed += 1;
        }
        ok(index_cmd(&store, "x", &all).output().unwrap());
        verify_clean(&store);
        assert_eq!(
            references(&store),
            expected,
            "crash after {crash_after} writes"
        );
        manifest_complete(&store);
        assert_eq!(temp_files(&store), 0, "temporary files left behind");

        // And a delete killed half-way, then run again, unpublishes everything.
        let killed = symdex()
            .args(["delete", "--build", "x", "--store"])
            .arg(&store)
            .env("SYMDEX_CRASH_AFTER_WRITES", (crash_after / 2).to_string())
            .output()
            .unwrap();
        assert!(!killed.status.success() || crash_after > 89);
        delete_build(&store);
        assert!(
            references(&store).is_empty(),
            "crash after {crash_after}: all unpublished"
        );
        let left: Vec<_> = walkdir::WalkDir::new(&store)
            .into_iter()
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_file())
            .map(|e| {
                e.path()
                    .strip_prefix(&store)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .filter(|p| {
                !p.starts_with("_symdex/")
                    && !p.starts_with("_manifest/")
                    && !p.ends_with("index2.txt")
            })
            .collect();
        assert!(left.is_empty(), "still published: {left:?}");
    }
    assert!(crashed >= 10, "the crash points were inside the run");
}

/// A run of debug files killed at any point, run again, then their sources uploaded: every
/// `source/` key a clean run publishes is published. The debug files' wants are written once,
/// at the end of the run, before their uploads are finalized; a want lost with an upload
/// finalized would leave its source unserved forever (a re-run answers from the upload record).
#[test]
fn a_run_killed_before_its_source_maps_are_written_is_repaired() {
    let w = Workdir::new();
    let mut debug_files = Vec::new();
    let mut sources = Vec::new();
    for i in 0..3 {
        let dir = format!("s{i}");
        let body = format!("x * {}", i + 2);
        build_split_elf(&w, &dir, &format!("0x{i:02x}{}", "cd".repeat(19)), &body);
        let source = w.path(&format!("{dir}/prog.c"));
        std::fs::write(&source, prog_c(&body)).unwrap();
        debug_files.push(w.path(&format!("{dir}/app.debug")));
        debug_files.push(w.path(&format!("{dir}/app.stripped")));
        sources.push(source);
    }
    let run = |store: &Path, inputs: &[std::path::PathBuf]| {
        let inputs: Vec<&Path> = inputs.iter().map(|p| p.as_path()).collect();
        let mut cmd = index_cmd(store, "x", &inputs);
        // One lane: with two, the number of writes a run makes varies from run to run (one
        // run in three made fewer: a debug file and its stripped binary share a build id and
        // race for their shared records), so the bisected count below was not every run's
        // and a crash point could fall after the run's end.
        cmd.args(["--source-ext", "c", "--jobs", "1"]);
        cmd
    };
    let clean = w.path("clean");
    ok(run(&clean, &debug_files).output().unwrap());
    ok(run(&clean, &sources).output().unwrap());
    let expected = references(&clean);
    let served = expected.keys().filter(|k| k.contains("/source/")).count();
    assert_eq!(
        served, 3,
        "each debug file's source is served: {expected:#?}"
    );
    // How many writes the run makes: the fewest a crash point may allow for it to finish
    // (bisected on fresh stores). The points then cover the run, and its end densely (the
    // manifest, the source-map records, the finalizes).
    let finishes = |n: usize| {
        let store = w.path(&format!("probe{n}"));
        let out = run(&store, &debug_files)
            .env("SYMDEX_CRASH_AFTER_WRITES", n.to_string())
            .output()
            .unwrap();
        out.status.success()
    };
    let (mut low, mut high) = (0, 1000);
    assert!(finishes(high));
    while low < high {
        let mid = (low + high) / 2;
        if finishes(mid) {
            high = mid;
        } else {
            low = mid + 1;
        }
    }
    let writes = low;
    let mut points: Vec<usize> = (1..4).map(|q| writes * q / 4).collect();
    points.extend(writes.saturating_sub(12)..writes);
    let mut crashed = 0;
    for crash_after in points {
        let store = w.path(&format!("store{crash_after}"));
        let killed = run(&store, &debug_files)
            .env("SYMDEX_CRASH_AFTER_WRITES", crash_after.to_string())
            .output()
            .unwrap();
        if !killed.status.success() {
            crashed += 1;
        }
        ok(run(&store, &debug_files).output().unwrap());
        ok(run(&store, &sources).output().unwrap());
        verify_clean(&store);
        assert_eq!(
            references(&store),
            expected,
            "crash after {crash_after} writes"
        );
    }
    assert_eq!(crashed, 15, "every crash point was inside the run");
}

/// `symdex delete --build x` succeeds and leaves the store verifiably clean.
fn delete_build(store: &Path) {
    ok(symdex()
        .args(["delete", "--build", "x", "--store"])
        .arg(store)
        .output()
        .unwrap());
    verify_clean(store);
}

/// A run killed at any point and then deleted (not run again) leaves nothing published and
/// nothing half done: a key record written before its object (a sole writer's creation,
/// refs/ invariant 2) goes with the delete as well as one holding a lease.
#[test]
fn a_run_killed_at_any_point_is_undone_by_a_delete() {
    let w = Workdir::new();
    let dirs = programs(&w);
    let all: Vec<&Path> = dirs.iter().map(|d| d.as_path()).collect();
    for crash_after in [1, 2, 3, 4, 5, 6, 7, 9, 12, 20, 33, 60, 120] {
        let store = w.path(&format!("store{crash_after}"));
        let killed = index_cmd(&store, "x", &all)
            .env("SYMDEX_CRASH_AFTER_WRITES", crash_after.to_string())
            .output()
            .unwrap();
        assert!(!killed.status.success(), "crash after {crash_after}");
        delete_build(&store);
        assert!(
            common::published_files(&store)
                .keys()
                .all(|k| k.ends_with("index2.txt")),
            "crash after {crash_after}: still published {:?}",
            common::published_files(&store).keys().collect::<Vec<_>>()
        );
    }
}

/// Every file of a store, reference records without their clock readings, the manifest left
/// out (its file names are times). Input stamps are left out too (a source record's `file`,
/// and the directories' stamp records, `_symdex/stamps/`): one is kept only for an input left
/// alone for `FileStamp::SETTLED` before the run read it, so whether it is there says how long
/// after the build a run started, not what the run did (the serial run, right after the
/// build, kept none; a later run kept them all).
fn store_files(store: &Path) -> BTreeMap<String, Vec<u8>> {
    fn timeless(value: &mut Value) {
        match value {
            Value::Object(map) => {
                // Runs are random ids: a shared key's record keeps the sharer's `create`
                // lease, ended by its upload record listing the key for the lease's run
                // (refs/, invariant 1).
                for clock in ["time", "until", "expires", "run", "runs"] {
                    map.remove(clock);
                }
                map.values_mut().for_each(timeless);
            }
            Value::Array(items) => items.iter_mut().for_each(timeless),
            _ => {}
        }
    }
    let mut files = common::files_of(store, |key| {
        !key.starts_with("_manifest")
            && !key.starts_with("_symdex/lock")
            && !key.starts_with("_symdex/stamps/")
    });
    for (key, bytes) in files.iter_mut() {
        if key.starts_with("_symdex") && key.ends_with(".json") {
            let mut value: Value = serde_json::from_slice(bytes).unwrap();
            timeless(&mut value);
            if let (true, Some(record)) =
                (key.starts_with("_symdex/sources/"), value.as_object_mut())
            {
                record.remove("file");
            }
            *bytes = serde_json::to_vec(&value).unwrap();
        }
    }
    files
}

/// `symdex index --jobs N` indexes ELF files of different build ids side by side, and comes
/// out as `--jobs 1` does: the same store file for file, the same manifest records in the
/// same order — over a directory mixing debug files and their stripped binaries (one route
/// each), sources between them (indexed alone), a copy of a debug file, and other bytes under
/// a build id already taken (a conflict, decided by input order).
#[test]
fn index_with_jobs_ends_as_one_input_after_another() {
    let w = Workdir::new();
    let dirs = programs(&w);
    for (i, dir) in dirs.iter().enumerate() {
        std::fs::write(dir.join("prog.c"), prog_c(&format!("x * {}", i + 2))).unwrap();
    }
    std::fs::create_dir_all(w.path("p9")).unwrap();
    std::fs::copy(dirs[0].join("app.debug"), w.path("p9/copy.debug")).unwrap();
    build_split_elf(&w, "p3b", &format!("0x03{}", "ab".repeat(19)), "x + 100");
    // A PE and its PDB between them (indexed alone: joined through `_symdex/ids`).
    std::fs::create_dir_all(w.path("p4w")).unwrap();
    std::fs::write(w.path("src.cpp"), "int foo(int x) { return x + 1; }\n").unwrap();
    common::build_pe_and_pdb(&w, "p4w/Lib.pdb", "p4w/lib.dll");
    let mut inputs: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    inputs.extend(["p3b", "p4w", "p9"].map(|d| w.path(d).display().to_string()));
    let run = |jobs: &str, store: &Path| {
        let mut args = vec!["--jobs", jobs, "--build", "j", "--source-ext", "c"];
        args.extend(inputs.iter().map(String::as_str));
        let records = common::index_json(store, &args);
        let records: Vec<Value> = records
            .into_iter()
            .map(|mut r| {
                let map = r.as_object_mut().unwrap();
                map.remove("time");
                map.remove("indexer");
                r
            })
            .collect();
        (records, store_files(store))
    };
    let one = w.path("one");
    let (serial_records, serial_files) = run("1", &one);
    assert!(
        serial_records
            .iter()
            .any(|r| r["conflicts"].as_array().is_some_and(|c| !c.is_empty())),
        "the inputs hold a conflict: {serial_records:#?}"
    );
    assert!(
        serial_files.keys().any(|k| k.contains("/source/")),
        "sources are served"
    );
    for format in ["pe", "pdb", "elf"] {
        assert!(
            serial_records.iter().any(|r| r["format"] == format),
            "a {format} among the inputs"
        );
    }
    for round in 0..3 {
        let store = w.path(&format!("jobs{round}"));
        let (records, files) = run("4", &store);
        assert_eq!(records, serial_records, "round {round}: manifest records");
        symdex_shared::testing::assert_same_files(&files, &serial_files, &format!("round {round}"));
        verify_clean(&store);
    }
}
