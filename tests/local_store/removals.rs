//! Deleting builds that share references; verify after files were removed or changed.

use crate::common::{build_split_elf, ok, symdex, Workdir};
use crate::{index, manifest, BID, BID_HEX};

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
