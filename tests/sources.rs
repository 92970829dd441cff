//! Sources for debuggers: a C program's debug file names its sources (DWARF), a tarball of the
//! source tree is uploaded beside it, and gdb / debuginfod-find get the sources from the store
//! after the source directory is gone.

mod common;

use std::path::Path;

use common::debuginfod_client as client;
use common::{
    index_json, ok, published_files, readelf_build_id, symdex, verify_clean, Server, Workdir,
};

const HELLO: &str = r#"#include <stdio.h>
#include "util.h"
int main(void) {
    int answer = twice(21);
    printf("%d\n", answer);
    return 0;
}
"#;

const UTIL: &str = "static inline int twice(int x) {\n    return 2 * x;\n}\n";

/// Builds `build/src/hello.c` (+ `util.h`) with -g in `build/` (so the DWARF names
/// `<w>/build/src/...`), splits the debug file, strips the binary into `run/app`, and tars the
/// source tree as `src.tar` (entries `src/hello.c`, `src/util.h`). Returns the build id.
/// `padding` functions are added to hello.c (a line table large enough to be compressed).
fn build(w: &Workdir, extra: &[&str], padding: usize) -> String {
    std::fs::create_dir_all(w.path("build/src")).unwrap();
    let mut hello = HELLO.to_string();
    for i in 0..padding {
        hello.push_str(&format!(
            "int f{i}(int x) {{\n    return twice(x + {i});\n}}\n"
        ));
    }
    std::fs::write(w.path("build/src/hello.c"), hello).unwrap();
    std::fs::write(w.path("build/src/util.h"), UTIL).unwrap();
    let build = w.path("build");
    let mut args = vec!["-g", "-O0", "-o", "app", "src/hello.c"];
    args.extend_from_slice(extra);
    common::run_in(&build, "gcc", &args);
    common::run_in(
        &build,
        "objcopy",
        &["--only-keep-debug", "app", "../app.debug"],
    );
    common::run_in(
        &build,
        "objcopy",
        &["--strip-all", "app", "../app.stripped"],
    );
    common::run_in(&build, "tar", &["cf", "../src.tar", "src"]);
    std::fs::create_dir_all(w.path("run")).unwrap();
    std::fs::copy(w.path("app.stripped"), w.path("run/app")).unwrap();
    readelf_build_id(w, "app.debug").unwrap()
}

fn index(store: &Path, inputs: &[&Path]) -> Vec<serde_json::Value> {
    let mut args: Vec<&std::ffi::OsStr> = vec!["--source-ext".as_ref(), "c,h".as_ref()];
    args.extend(inputs.iter().map(|p| p.as_os_str()));
    index_json(store, &args)
}

/// `symdex manifest query --missing-sources --format json`: the paths it lists.
fn missing_sources(store: &Path) -> Vec<String> {
    let out = symdex()
        .args(["manifest", "query", "--missing-sources", "--format", "json"])
        .arg(store)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["path"].as_str().unwrap().to_string()
        })
        .collect()
}

/// `debuginfod-find source BUILD_ID PATH` against `server`, which must succeed: the bytes of
/// the file it fetched.
fn fetch_source(w: &Workdir, server: &Server, build_id: &str, path: &str) -> Vec<u8> {
    let mut find = client("debuginfod-find", w, server);
    find.args(["source", build_id, path]);
    common::fetched_by(find)
}

fn debug_record(records: &[serde_json::Value]) -> &serde_json::Value {
    records
        .iter()
        .find(|r| r["kind"] == "debug")
        .expect("a record of the debug file")
}

#[test]
fn gdb_lists_main_and_debuginfod_find_fetches_sources_from_the_store() {
    let w = Workdir::new();
    let build_id = build(&w, &[], 0);
    let root = w.path("build").canonicalize().unwrap();
    let hello = format!("{}/src/hello.c", root.display());
    let util = format!("{}/src/util.h", root.display());
    let store = w.path("store");
    let records = index(
        &store,
        &[
            &w.path("app.debug"),
            &w.path("app.stripped"),
            &w.path("src.tar"),
        ],
    );
    // The debug file's record names its sources; both were served by the tarball, which came
    // after it (stdio.h was not uploaded).
    let debug = debug_record(&records);
    let named: Vec<&str> = debug["source_paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert!(
        named.contains(&hello.as_str()) && named.contains(&util.as_str()),
        "{named:?}"
    );
    let missing = debug["sources"]["missing"].as_array().unwrap();
    assert!(missing
        .iter()
        .any(|p| p.as_str().unwrap().ends_with("/stdio.h")));
    let key = format!("buildid/{build_id}/source{hello}");
    assert!(
        records.iter().any(|r| r["entry"] == "src/hello.c"
            && r["published"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k == &serde_json::Value::from(key.clone()))),
        "the tarball's entry published {key}"
    );
    assert_eq!(std::fs::read(store.join(&key)).unwrap(), HELLO.as_bytes());
    verify_clean(&store);

    // The sources are gone from disk: whatever the debuggers show came from the store.
    std::fs::remove_dir_all(w.path("build")).unwrap();
    let log = w.path("access.jsonl");
    let server = Server::start_with(&store, &["--access-log", log.to_str().unwrap()], None);
    let mut gdb = common::gdb_via_debuginfod(&w, &server, "list main", "./app");
    let out = gdb.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("int answer = twice(21);"),
        "gdb listed no source:\n{text}"
    );
    let requested = std::fs::read_to_string(&log).unwrap();
    assert!(
        requested.contains(&format!("/buildid/{build_id}/source{hello}")),
        "gdb asked the store for the source:\n{requested}"
    );

    for (path, content) in [(&hello, HELLO), (&util, UTIL)] {
        let fetched = fetch_source(&w, &server, &build_id, path);
        assert_eq!(fetched, content.as_bytes(), "{path}");
    }
}

#[test]
fn sources_uploaded_before_or_after_the_binaries_give_the_same_store() {
    let w = Workdir::new();
    let build_id = build(&w, &["-gdwarf-4"], 0);
    let (debug, binary, tar) = (
        w.path("app.debug"),
        w.path("app.stripped"),
        w.path("src.tar"),
    );
    let first = w.path("sources-first");
    index(&first, &[&tar]);
    index(&first, &[&debug, &binary]);
    let last = w.path("sources-last");
    index(&last, &[&debug, &binary]);
    let named = |p: &str| p.ends_with("/src/hello.c") || p.ends_with("/src/util.h");
    let before = missing_sources(&last);
    assert_eq!(before.iter().filter(|p| named(p)).count(), 2, "{before:?}");
    let later = index(&last, &[&tar]);
    // Served now: only the system header is left missing.
    let after = missing_sources(&last);
    assert!(
        !after.is_empty() && after.iter().all(|p| p.ends_with("/stdio.h")),
        "{after:?}"
    );
    let a = published_files(&first);
    let b = published_files(&last);
    assert_eq!(
        a.keys().collect::<Vec<_>>(),
        b.keys().collect::<Vec<_>>(),
        "the same keys"
    );
    assert_eq!(a, b, "the same bytes");
    let sources: Vec<&String> = a
        .keys()
        .filter(|k| k.starts_with(&format!("buildid/{build_id}/source/")))
        .collect();
    assert_eq!(sources.len(), 2, "hello.c and util.h: {sources:?}");
    // The later tarball's records say which keys it published for the debug file.
    assert!(later
        .iter()
        .any(|r| r["entry"] == "src/util.h" && !r["published"].as_array().unwrap().is_empty()));
    verify_clean(&first);
    verify_clean(&last);

    // Deleting the tarball unpublishes its sources; the debug file stays.
    let out = symdex()
        .args(["delete", "--store"])
        .arg(&last)
        .arg("--input")
        .arg(&tar)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let left = published_files(&last);
    assert!(
        !left.keys().any(|k| k.contains("/source/")),
        "{:?}",
        left.keys()
    );
    assert!(left.contains_key(&format!("buildid/{build_id}/debuginfo")));
    verify_clean(&last);
    assert_eq!(missing_sources(&last), before, "missing again once removed");
    // Uploaded again, the sources are served again (the debug file's wants were kept).
    index(&last, &[&tar]);
    assert_eq!(published_files(&last), b);
}

/// `symdex index --source-ext c,h [--source-root ROOT] src/hello.c` run in `dir`.
fn index_source_in(store: &Path, dir: &Path, root: Option<&Path>) {
    let mut cmd = symdex();
    cmd.current_dir(dir)
        .args([
            "index",
            "--allow-conflicts",
            "--source-ext",
            "c,h",
            "--store",
        ])
        .arg(store);
    if let Some(root) = root {
        cmd.arg("--source-root").arg(root);
    }
    ok(cmd.arg("src/hello.c").output().unwrap());
}

/// `symdex delete --input INPUT` run in `dir`.
fn delete_in(store: &Path, dir: &Path, input: &Path) {
    let mut cmd = symdex();
    cmd.current_dir(dir).args(["delete", "--store"]).arg(store);
    ok(cmd.arg("--input").arg(input).output().unwrap());
}

/// `checkout/src/hello.c` holding `text`.
fn checkout(w: &Workdir, name: &str, text: &str) -> std::path::PathBuf {
    std::fs::create_dir_all(w.path(&format!("{name}/src"))).unwrap();
    std::fs::write(w.path(&format!("{name}/src/hello.c")), text).unwrap();
    w.path(name)
}

/// The manifest records matching `filter` (`manifest query` options), as stored.
fn records_matching(store: &Path, filter: &[&str]) -> Vec<serde_json::Value> {
    let mut cmd = symdex();
    cmd.args(["manifest", "query", "--history", "--format", "json"])
        .args(filter);
    ok(cmd.arg(store).output().unwrap())
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Two checkouts offer the same path with different content: the first served it, the second
/// tied with it (ambiguous, nothing published for it). Deleting the first withdraws its offer
/// and hands the path to the second — for the debug file indexed before, and for one indexed
/// after (no stale offer of the deleted upload makes it ambiguous again).
#[test]
fn deleting_a_source_hands_its_paths_to_the_sources_that_match_them_now() {
    let w = Workdir::new();
    let build_id = build(&w, &[], 0);
    let root = w.path("build").canonicalize().unwrap();
    let store = w.path("store");
    index(&store, &[&w.path("app.debug")]);
    let edited = format!("{HELLO}/* edited */\n");
    let one = checkout(&w, "one", HELLO);
    index_source_in(&store, &one, Some(&root));
    let two = checkout(&w, "two", &edited);
    index_source_in(&store, &two, Some(&root));
    let key = format!("buildid/{build_id}/source{}/src/hello.c", root.display());
    assert_eq!(std::fs::read(store.join(&key)).unwrap(), HELLO.as_bytes());

    delete_in(&store, &w.path(""), &one.join("src/hello.c"));
    assert_eq!(
        std::fs::read(store.join(&key)).ok(),
        Some(edited.clone().into_bytes()),
        "the other checkout's file serves the path"
    );
    // The manifest says the key went with the first and came back with the second, in order.
    let actions: Vec<(String, String)> = records_matching(&store, &["--key", &key])
        .iter()
        .map(|r| {
            let upload = r["upload"].as_str().unwrap();
            let from = if upload.contains("/one/") {
                "one"
            } else {
                "two"
            };
            (from.to_string(), r["action"].as_str().unwrap().to_string())
        })
        .collect();
    let at = |step: (&str, &str)| {
        actions
            .iter()
            .position(|(u, a)| (u.as_str(), a.as_str()) == step)
            .unwrap_or_else(|| panic!("no record {step:?} in {actions:?}"))
    };
    assert!(
        at(("one", "unpublished")) < at(("two", "indexed")),
        "{actions:?}"
    );
    verify_clean(&store);

    // A debug file of another build naming the same path, indexed after the delete.
    common::run_in(
        &w.path("build"),
        "gcc",
        &["-g", "-O1", "-o", "app2", "src/hello.c"],
    );
    common::run_in(
        &w.path("build"),
        "objcopy",
        &["--only-keep-debug", "app2", "../app2.debug"],
    );
    let second_id = readelf_build_id(&w, "app2.debug").unwrap();
    assert_ne!(second_id, build_id);
    index(&store, &[&w.path("app2.debug")]);
    let second = format!("buildid/{second_id}/source{}/src/hello.c", root.display());
    assert_eq!(
        std::fs::read(store.join(&second)).ok(),
        Some(edited.into_bytes()),
        "served by the one offer left"
    );
    verify_clean(&store);
}

/// A loose source file keyed under a source root that waits for its key (a suffix match from
/// another checkout holds it) takes the key when the holder is deleted from another
/// directory: the hand-over indexes it again with the path it was keyed under (its upload
/// record), not one found from the deleting process's directory.
#[test]
fn a_waiting_source_is_handed_its_key_with_the_path_it_was_keyed_under() {
    let w = Workdir::new();
    let build_id = build(&w, &[], 0);
    let root = w.path("build").canonicalize().unwrap();
    let store = w.path("store");
    index(&store, &[&w.path("app.debug")]);
    let edited = format!("{HELLO}/* edited */\n");
    // Offered as `src/hello.c`: it serves the path by its suffix.
    let one = checkout(&w, "one", HELLO);
    index_source_in(&store, &one, None);
    let key = format!("buildid/{build_id}/source{}/src/hello.c", root.display());
    assert_eq!(std::fs::read(store.join(&key)).unwrap(), HELLO.as_bytes());
    // Under the source root the exact path wins, and finds the key holding other bytes.
    let two = checkout(&w, "two", &edited);
    index_source_in(&store, &two, Some(&root));
    assert_eq!(std::fs::read(store.join(&key)).unwrap(), HELLO.as_bytes());

    delete_in(&store, &w.path(""), &one.join("src/hello.c"));
    assert_eq!(
        std::fs::read(store.join(&key)).ok(),
        Some(edited.into_bytes())
    );
    // Indexed again as a source, as it was (the `delete` was not told `--source-ext`).
    assert_eq!(
        records_matching(&store, &["--action", "skipped"]),
        [] as [serde_json::Value; 0]
    );
    // Every offer the second checkout's file made is of the path it was keyed under.
    let offers: Vec<serde_json::Value> = common::files_of(&store, |k| k.contains("/sourcemap/"))
        .values()
        .flat_map(|bytes| {
            let record: serde_json::Value = serde_json::from_slice(bytes).unwrap();
            record["offers"].as_array().unwrap().clone()
        })
        .collect();
    let paths: Vec<&str> = offers.iter().map(|o| o["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["src/hello.c"], "{offers:?}");
    verify_clean(&store);
}

#[test]
fn a_source_root_maps_loose_files_exactly_and_compressed_debug_sections_are_read() {
    let w = Workdir::new();
    let build_id = build(&w, &[], 400);
    let hello = std::fs::read(w.path("build/src/hello.c")).unwrap();
    let root = w.path("build").canonicalize().unwrap();
    // Compressed DWARF (SHF_COMPRESSED, zlib): the paths are read all the same, and the served
    // line table is the decompressed one.
    w.run(
        "objcopy",
        &["--compress-debug-sections=zlib", "app.debug", "app.zdebug"],
    );
    // Loose files in another checkout, mapped by the source root (not by suffix).
    std::fs::create_dir_all(w.path("checkout/src")).unwrap();
    std::fs::write(w.path("checkout/src/hello.c"), &hello).unwrap();
    std::fs::write(w.path("checkout/src/util.h"), UTIL).unwrap();
    let store = w.path("store");
    index(&store, &[&w.path("app.zdebug")]);
    let out = symdex()
        .current_dir(w.path("checkout"))
        .args([
            "index",
            "--allow-conflicts",
            "--json",
            "--source-ext",
            "c,h",
            "--store",
        ])
        .arg(&store)
        .arg("--source-root")
        .arg(&root)
        .arg("src")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hello_key = format!("buildid/{build_id}/source{}/src/hello.c", root.display());
    assert_eq!(std::fs::read(store.join(&hello_key)).unwrap(), hello);

    // A root that is not where the build compiled serves nothing.
    let other = w.path("other-store");
    index(&other, &[&w.path("app.zdebug")]);
    let out = symdex()
        .current_dir(w.path("checkout"))
        .args([
            "index",
            "--allow-conflicts",
            "--source-ext",
            "c,h",
            "--store",
        ])
        .arg(&other)
        .args(["--source-root", "/somewhere/else", "src"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!published_files(&other)
        .keys()
        .any(|k| k.contains("/source/")));

    w.run(
        "objcopy",
        &["--decompress-debug-sections", "app.zdebug", "plain.debug"],
    );
    w.run(
        "objcopy",
        &[
            "--dump-section",
            ".debug_line=line.bin",
            "plain.debug",
            "scratch.o",
        ],
    );
    let served = std::fs::read(store.join(format!("buildid/{build_id}/section/.debug_line")))
        .expect("the compressed .debug_line is served");
    assert_eq!(served, std::fs::read(w.path("line.bin")).unwrap());
    verify_clean(&store);
}

#[test]
fn a_sentry_source_bundle_serves_its_files_to_debuginfod_clients() {
    let w = Workdir::new();
    let build_id = build(&w, &[], 0);
    let root = w.path("build").canonicalize().unwrap();
    // sentry-cli reads the DWARF's paths and bundles the files it finds: app.src.zip.
    w.run(
        "sentry-cli",
        &["debug-files", "bundle-sources", "app.debug"],
    );
    let store = w.path("store");
    index(&store, &[&w.path("app.src.zip"), &w.path("app.debug")]);
    for (name, content) in [("hello.c", HELLO), ("util.h", UTIL)] {
        let key = format!("buildid/{build_id}/source{}/src/{name}", root.display());
        assert_eq!(
            std::fs::read(store.join(&key)).unwrap_or_default(),
            content.as_bytes(),
            "{key}"
        );
    }
    // The bundle itself is still where symbolicator looks for it.
    let bundle = format!("unified/{}/{}/sourcebundle", &build_id[..2], &build_id[2..]);
    assert!(store.join(bundle).is_file());
    verify_clean(&store);
}

/// `index` meeting a source whose `delete` was killed finishes the removal first: the path
/// goes to the sources waiting for its key, indexed again by the hand-over. The same run
/// indexed another source of the path before (a join record changed and not yet written):
/// the hand-over's changes and the run's are written as one (they failed as "changed by
/// another writer"), whatever point the delete was killed at.
#[test]
fn index_finishes_a_killed_source_delete_after_another_source_of_the_path() {
    let w = Workdir::new();
    let build_id = build(&w, &[], 0);
    let root = w.path("build").canonicalize().unwrap();
    let before = w.path("before");
    index(&before, &[&w.path("app.debug")]);
    let edited = format!("{HELLO}/* edited */\n");
    // `one` serves the path by its suffix; `two`, under the source root, matches it exactly
    // and waits for the key.
    let one = checkout(&w, "one", HELLO);
    index_source_in(&before, &one, None);
    let two = checkout(&w, "two", &edited);
    index_source_in(&before, &two, Some(&root));
    checkout(&w, "a-third", &edited);
    let key = format!("buildid/{build_id}/source{}/src/hello.c", root.display());
    let one_input = one.join("src/hello.c").canonicalize().unwrap();
    let (mut began, mut handed_over, mut not_begun) = (0, 0, 0);
    for crash_after in 0.. {
        let name = format!("store{crash_after}");
        let killed = common::store_with_killed_delete(&w, &before, &name, &one_input, crash_after);
        let Some(store) = killed else {
            break;
        };
        // The removal began (its record `removing`) or ended (no record).
        let removal_began = common::upload_state(&store, &one_input).as_deref() != Some("indexed");
        let mut cmd = symdex();
        cmd.current_dir(w.path(""))
            .args([
                "index",
                "--allow-conflicts",
                "--jobs",
                "1",
                "--source-ext",
                "c,h",
                "--store",
            ])
            .arg(&store)
            .args(["a-third/src/hello.c", "one/src/hello.c"]);
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "crash after {crash_after}: {stderr}");
        verify_clean(&store);
        if !removal_began {
            not_begun += 1;
            continue;
        }
        began += 1;
        // The key went to a waiting source indexed again (the path that failed), or was
        // handed on by the withdrawal of `one`'s offer.
        handed_over += usize::from(stderr.contains("handed over"));
        // `one` is indexed again after its removal, and waits in turn.
        assert_eq!(
            std::fs::read(store.join(&key)).ok(),
            Some(edited.clone().into_bytes()),
            "crash after {crash_after}: the exact match serves the path"
        );
    }
    assert!(
        began >= 2 && handed_over >= 1 && not_begun >= 1,
        "the crash points fell before and inside the removal: {not_begun} / {began}, \
         {handed_over} handed over by indexing again"
    );
}

/// `verify` tells a source path the debug file names, that an uploaded source matches, left
/// unserved (here: its key and any record removed by hand), and `index --recheck` of the debug
/// file serves it again.
#[test]
fn verify_tells_an_unserved_source_path_and_recheck_serves_it() {
    let w = Workdir::new();
    let build_id = build(&w, &[], 0);
    let root = w.path("build").canonicalize().unwrap();
    let store = w.path("store");
    index(&store, &[&w.path("app.debug")]);
    let one = checkout(&w, "one", HELLO);
    index_source_in(&store, &one, Some(&root));
    let key = format!("buildid/{build_id}/source{}/src/hello.c", root.display());
    verify_clean(&store);
    std::fs::remove_file(store.join(&key)).unwrap();
    // Its record, where it has one (a key one upload alone references has none: its object
    // names the upload).
    let _ = std::fs::remove_file(store.join(format!("_symdex/refs/{key}.json")));
    let out = symdex().arg("verify").arg(&store).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{text}");
    let unserved: Vec<&str> = text.lines().filter(|l| l.starts_with("source")).collect();
    assert_eq!(unserved.len(), 1, "{text}");
    assert!(
        unserved[0].contains(&format!("{}/src/hello.c", root.display())),
        "{text}"
    );
    let mut recheck = symdex();
    recheck
        .args(["index", "--allow-conflicts", "--recheck", "--store"])
        .arg(&store)
        .arg(w.path("app.debug"));
    ok(recheck.output().unwrap());
    assert_eq!(std::fs::read(store.join(&key)).unwrap(), HELLO.as_bytes());
    verify_clean(&store);
}

#[test]
fn no_source_joins_serves_no_source_and_writes_no_join_record() {
    let w = Workdir::new();
    build(&w, &[], 0);
    let store = w.path("store");
    let args: [std::ffi::OsString; 5] = [
        "--no-source-joins".into(),
        "--source-ext".into(),
        "c,h".into(),
        w.path("app.debug").into(),
        w.path("src.tar").into(),
    ];
    let records = index_json(&store, &args);
    let sources = &debug_record(&records)["sources"];
    assert_eq!(sources["served"], 0, "{sources}");
    assert!(
        !sources["missing"].as_array().unwrap().is_empty(),
        "{sources}"
    );
    assert!(!store.join("_symdex/sourcemap").exists());
    let served_sources = walkdir::WalkDir::new(store.join("buildid"))
        .into_iter()
        .filter_map(Result::ok)
        .any(|e| e.path().components().any(|c| c.as_os_str() == "source"));
    assert!(!served_sources);
    verify_clean(&store);
}

/// Fedora-style packaging: a debug file built with its sources mapped under
/// `/usr/src/debug/<package>` and a `-debugsource` RPM holding them there (made by rpmbuild):
/// debuginfod-find fetches the source through the store.
#[test]
fn a_debugsource_rpm_serves_the_sources_its_debug_file_names() {
    let w = Workdir::new();
    std::fs::create_dir_all(w.path("src")).unwrap();
    std::fs::create_dir_all(w.path("run")).unwrap();
    std::fs::write(w.path("src/hello.c"), HELLO).unwrap();
    std::fs::write(w.path("src/util.h"), UTIL).unwrap();
    w.run(
        "sh",
        &[
            "-c",
            "cd src && gcc -g -O0 -fdebug-prefix-map=$PWD=/usr/src/debug/app-1.0 -Wl,--build-id \
             -o ../app hello.c && cd .. && objcopy --only-keep-debug app app.debug",
        ],
    );
    std::fs::write(
        w.path("app.spec"),
        "Name: app-debugsource\nVersion: 1.0\nRelease: 1\nSummary: s\nLicense: MIT\n\
         BuildArch: noarch\n%global debug_package %{nil}\n%global __os_install_post %{nil}\n\
         %description\nThe sources of app.\n%install\nmkdir -p %{buildroot}/usr/src/debug/app-1.0\n\
         cp %{_sourcedir}/hello.c %{_sourcedir}/util.h %{buildroot}/usr/src/debug/app-1.0/\n\
         %files\n/usr/src/debug/app-1.0/hello.c\n/usr/src/debug/app-1.0/util.h\n",
    )
    .unwrap();
    let top = w.path("rpm");
    w.run(
        "rpmbuild",
        &[
            "-bb",
            "--nodeps",
            "--quiet",
            "--define",
            &format!("_topdir {}", top.display()),
            "--define",
            &format!("_sourcedir {}", w.path("src").display()),
            w.path("app.spec").to_str().unwrap(),
        ],
    );
    let rpm = top.join("RPMS/noarch/app-debugsource-1.0-1.noarch.rpm");
    let store = w.path("store");
    let records = index(&store, &[&w.path("app.debug"), &rpm]);
    assert_eq!(debug_record(&records)["kind"], "debug");
    let build_id = readelf_build_id(&w, "app.debug").unwrap();
    let server = Server::start(&store);
    for (name, content) in [("hello.c", HELLO), ("util.h", UTIL)] {
        let path = format!("/usr/src/debug/app-1.0/{name}");
        let fetched = fetch_source(&w, &server, &build_id, &path);
        assert_eq!(fetched, content.as_bytes(), "{path}");
    }
    verify_clean(&store);
}
