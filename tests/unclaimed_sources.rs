//! Sources without flags (sourcemap.rs): a source tarball and loose files beside a debug file
//! whose DWARF names them, indexed with no `--source`/`--source-ext`, are published as that
//! debug file's sources whichever came first — in one run or two — and debuginfod-find
//! fetches them byte-identical; files no debug file names publish nothing.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::{index_json, published_files, readelf_build_id, Server, Workdir};

const HELLO: &str = "#include \"util.h\"\nint main(void) {\n    return twice(21) - 42;\n}\n";
const UTIL: &str = "static inline int twice(int x) {\n    return 2 * x;\n}\n";

/// Builds `build/src/hello.c` (+ `util.h`) with -g in `build/`, keeps its debug file as
/// `app.debug` and its stripped binary as `run/app`, and tars the source tree as
/// `src.tar.gz` (entries `src/hello.c`, `src/util.h`, and `src/NOTES.txt`, which no DWARF
/// names). Beside them: `notes.txt` and `other/main.c`, files no debug file names. Returns
/// the build id.
fn build(w: &Workdir) -> String {
    std::fs::create_dir_all(w.path("build/src")).unwrap();
    std::fs::write(w.path("build/src/hello.c"), HELLO).unwrap();
    std::fs::write(w.path("build/src/util.h"), UTIL).unwrap();
    std::fs::write(w.path("build/src/NOTES.txt"), "release notes\n").unwrap();
    let build = w.path("build");
    common::run_in(&build, "gcc", &["-g", "-O0", "-o", "app", "src/hello.c"]);
    common::run_in(
        &build,
        "objcopy",
        &["--only-keep-debug", "app", "../app.debug"],
    );
    std::fs::create_dir_all(w.path("run")).unwrap();
    common::run_in(&build, "objcopy", &["--strip-all", "app", "../run/app"]);
    common::run_in(&build, "tar", &["czf", "../src.tar.gz", "src"]);
    std::fs::write(w.path("notes.txt"), "not an artifact, nor a source\n").unwrap();
    std::fs::create_dir_all(w.path("other")).unwrap();
    std::fs::write(w.path("other/main.c"), "int main(void) { return 0; }\n").unwrap();
    readelf_build_id(w, "app.debug").unwrap()
}

/// Asserts that `store` publishes exactly `expected`'s keys with their bytes (told by key).
fn assert_publishes(store: &Path, expected: &BTreeMap<String, Vec<u8>>, what: &str) {
    let published = published_files(store);
    let keys = |m: &BTreeMap<String, Vec<u8>>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&published), keys(expected), "{what}: keys");
    for (key, bytes) in expected {
        assert!(
            published.get(key) == Some(bytes),
            "{what}: {key} holds other bytes"
        );
    }
}

/// Indexes `runs` one after another into `store`, with no source flags: every record.
fn index_runs(store: &Path, runs: &[&[PathBuf]]) -> Vec<serde_json::Value> {
    runs.iter()
        .flat_map(|inputs| index_json(store, inputs))
        .collect()
}

#[test]
fn sources_without_flags_are_published_whichever_came_first() {
    let w = Workdir::new();
    let build_id = build(&w);
    let root = w.path("build").canonicalize().unwrap();
    let (debug, tarball) = (w.path("app.debug"), w.path("src.tar.gz"));
    let unrelated = [w.path("notes.txt"), w.path("other/main.c")];

    // What the flags publish for the debug file and its tarball alone.
    let flagged = w.path("flagged");
    let ext: &[&std::ffi::OsStr] = &["--source-ext".as_ref(), "c,h".as_ref()];
    let mut args: Vec<&std::ffi::OsStr> = ext.to_vec();
    args.extend([debug.as_os_str(), tarball.as_os_str()]);
    index_json(&flagged, &args);
    let expected = published_files(&flagged);
    let hello_key = format!("buildid/{build_id}/source{}/src/hello.c", root.display());
    assert_eq!(
        expected.get(&hello_key).map(Vec::as_slice),
        Some(HELLO.as_bytes())
    );

    // One run of a directory whose tarball is walked before the debug file (`a-src.tar.gz`
    // sorts first), with the unrelated files beside them.
    let dir = w.path("in");
    std::fs::create_dir_all(dir.join("other")).unwrap();
    std::fs::copy(&tarball, dir.join("a-src.tar.gz")).unwrap();
    std::fs::copy(&debug, dir.join("app.debug")).unwrap();
    std::fs::copy(&unrelated[0], dir.join("notes.txt")).unwrap();
    std::fs::copy(&unrelated[1], dir.join("other/main.c")).unwrap();
    let together = w.path("together");
    let records = index_runs(&together, &[std::slice::from_ref(&dir)]);
    let debug_record = records
        .iter()
        .find(|r| r["kind"] == "debug")
        .expect("the debug file's record");
    assert_eq!(debug_record["sources"]["served"], 2, "{debug_record}");
    for name in ["notes.txt", "main.c"] {
        let record = records
            .iter()
            .find(|r| r["ingest_key"].as_str().unwrap().ends_with(name))
            .unwrap_or_else(|| panic!("no record of {name}"));
        assert_eq!(record["action"], "skipped", "{record}");
    }
    assert_publishes(&together, &expected, "one run");

    // Two runs, both orders; a re-run changes nothing.
    let mut sources_then_debug = vec![tarball.clone()];
    sources_then_debug.extend(unrelated.iter().cloned());
    let orders: [(&str, Vec<&[PathBuf]>); 2] = [
        (
            "debug file first",
            vec![std::slice::from_ref(&debug), &sources_then_debug],
        ),
        (
            "sources first",
            vec![&sources_then_debug, std::slice::from_ref(&debug)],
        ),
    ];
    for (order, runs) in orders {
        let store = w.path(order);
        index_runs(&store, &runs);
        assert_publishes(&store, &expected, order);
        index_runs(&store, &runs);
        assert_publishes(&store, &expected, &format!("{order}, again"));
        common::verify_clean(&store);
    }

    // The sources are gone from disk: debuginfod-find gets them from the store.
    std::fs::remove_dir_all(w.path("build")).unwrap();
    let server = Server::start(&together);
    for (path, content) in [("hello.c", HELLO), ("util.h", UTIL)] {
        let path = format!("{}/src/{path}", root.display());
        let mut find = common::debuginfod_client("debuginfod-find", &w, &server);
        find.args(["source", &build_id, &path]);
        assert_eq!(common::fetched_by(find), content.as_bytes(), "{path}");
    }
}

/// A loose file whose DWARF-recorded MD5 differs (an edited copy of `hello.c`) is no source of
/// the debug file, flags or not: nothing of it is published.
#[test]
fn a_loose_file_of_other_content_than_its_dwarf_records_publishes_nothing() {
    let w = Workdir::new();
    std::fs::create_dir_all(w.path("build/src")).unwrap();
    std::fs::write(
        w.path("build/src/hello.c"),
        "int main(void) { return 0; }\n",
    )
    .unwrap();
    // DWARF 5 with clang records each file's MD5; gcc does not, so this asks clang.
    let build = w.path("build");
    common::run_in(
        &build,
        "clang-19",
        &["-g", "-gdwarf-5", "-O0", "-o", "app", "src/hello.c"],
    );
    common::run_in(
        &build,
        "objcopy",
        &["--only-keep-debug", "app", "../app.debug"],
    );
    std::fs::create_dir_all(w.path("edited/src")).unwrap();
    std::fs::write(
        w.path("edited/src/hello.c"),
        "int main(void) { return 1; }\n",
    )
    .unwrap();
    let store = w.path("store");
    let records = index_runs(
        &store,
        &[&[w.path("app.debug")], &[w.path("edited/src/hello.c")]],
    );
    let edited = records
        .iter()
        .find(|r| {
            r["ingest_key"]
                .as_str()
                .unwrap()
                .ends_with("edited/src/hello.c")
        })
        .expect("a record of the edited file");
    assert_eq!(edited["action"], "skipped", "{edited}");
    assert!(
        published_files(&store)
            .keys()
            .all(|k| !k.contains("/source/")),
        "no source published"
    );
    // The same bytes as compiled are its source.
    std::fs::write(
        w.path("edited/src/hello.c"),
        "int main(void) { return 0; }\n",
    )
    .unwrap();
    index_runs(&store, &[&[w.path("edited/src/hello.c")]]);
    assert!(
        published_files(&store)
            .keys()
            .any(|k| k.contains("/source/")),
        "the source as compiled is published"
    );
}
