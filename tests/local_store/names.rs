//! Zip entries, a PDB under the name its PE uses, each artifact stored once under all its names.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use crate::common::{
    self, build_pe_and_pdb, build_split_elf, get, ok, symdex, url_path, verify_clean, Server,
    StaticServer, Workdir,
};
use crate::{index, manifest, BID, BID_HEX};

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
    let plain = StaticServer::start(&store, &w.path("static.log"));
    for (key, bytes) in &published {
        let path = format!("/{}", url_path(key));
        let (status, _, body) = serve.request("GET", &path, "");
        assert_eq!(
            (status, body.len()),
            (200, bytes.len()),
            "symdex serve {key}"
        );
        assert!(body == *bytes, "symdex serve {key}: other bytes");
        let (status, _, body) = get(&plain.addr, &path).expect("an answer");
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
