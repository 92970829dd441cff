//! Re-indexing an unchanged store: only its manifest written, no unchanged input read.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::common::{self, build_pe_and_pdb, build_split_elf, ok, verify_clean, Workdir};
use crate::{index, BID};

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
    // The stamps are kept by directory (`_symdex/stamps/`, one record for `out/`). A store
    // written before kept each input's in its source record (`_symdex/sources/`), which a
    // local store no longer has: made here from the directory's record, as they were.
    let stamps: Vec<_> = std::fs::read_dir(store.join("_symdex/stamps"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(stamps.len(), 1, "{stamps:?}");
    assert!(
        !store.join("_symdex/sources").exists(),
        "a local store keeps no source records"
    );
    let by_directory: Value = serde_json::from_slice(&std::fs::read(&stamps[0]).unwrap()).unwrap();
    let dir = by_directory["dir"].as_str().unwrap();
    let mut sources = Vec::new();
    for (name, stamp) in by_directory["files"].as_object().unwrap() {
        let source = format!("{dir}/{name}");
        let file = format!(
            "{}.json",
            symdex_shared::digest::sha1_hex(source.as_bytes())
        );
        let record = serde_json::json!({"source": source, "uploads": [], "file": stamp});
        sources.push((
            store.join("_symdex/sources").join(file),
            serde_json::to_vec(&record).unwrap(),
        ));
    }
    assert_eq!(sources.len(), 2, "{by_directory}");
    let (by_dir, text) = bytes_read_by_index(&store, &out);
    assert!(
        text.contains("2 unchanged") && by_dir < (PADDING / 8) as u64,
        "stamps by directory alone: read {by_dir} bytes\n{text}"
    );
    // A store whose stamps are only in its source records (written before): read from there.
    std::fs::create_dir_all(store.join("_symdex/sources")).unwrap();
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
