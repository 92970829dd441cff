//! Source Link and srcsrv end to end, with a native Windows build made on Linux: C++ files
//! compiled by `clang-19 --target=x86_64-pc-windows-msvc -g -gcodeview`, linked by
//! `lld-link-19 /debug` with the Source Link JSON `symdex sourcelink` prints
//! (`/pdbstream:sourcelink=`). What `symdex keys --json` reads of the PDB is checked against
//! `llvm-pdbutil-19` (the stream it exports, the MD5s `dump -files` lists); the srcsrv stream
//! `symdex srcsrv` prints, linked in with `/pdbstream:srcsrv=`, resolves every document to
//! its URL through an independent reader (the `srcsrv` crate); a PDB whose srcsrv stream runs
//! commands is flagged, and refused by `index --refuse-srcsrv-commands`. A Portable PDB is
//! built byte by byte (no .NET SDK here).

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::windows::{compile, have_toolchain, link};
use common::{index_json, ok, symdex, Workdir};
use md5::{Digest, Md5};
use serde_json::Value;

const URL: &str = "https://sym.example.com";

/// The PDB's `pdb_sources` as `symdex keys --json` reports them.
fn pdb_sources(path: &Path) -> Value {
    let out = ok(symdex()
        .args(["keys", "--json"])
        .arg(path)
        .output()
        .unwrap());
    let row: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(row["format"], "pdb", "{row}");
    row["pdb_sources"].clone()
}

fn served(root: &str) -> Vec<String> {
    [
        "--root",
        root,
        "--product",
        "app",
        "--build",
        "1.0",
        "--url",
        URL,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// `llvm-pdbutil-19 dump -files`: each document's path and MD5 (uppercase hex there).
fn pdbutil_files(w: &Workdir, pdb: &str) -> BTreeMap<String, String> {
    let dump = w.run("llvm-pdbutil-19", &["dump", "-files", pdb]);
    dump.lines()
        .filter_map(|line| line.trim().strip_prefix("- (MD5: "))
        .filter_map(|rest| rest.split_once(") "))
        .map(|(md5, path)| (path.to_string(), md5.to_ascii_lowercase()))
        .collect()
}

#[test]
fn a_native_pdb_says_what_llvm_pdbutil_reads() {
    if !have_toolchain() {
        return;
    }
    let w = Workdir::new();
    let root = compile(&w);
    let json = ok(symdex()
        .arg("sourcelink")
        .args(served(&root))
        .output()
        .unwrap());
    std::fs::write(w.path("sl.json"), &json).unwrap();
    link(&w, "app.pdb", &[("sourcelink", "sl.json")]);

    let sources = pdb_sources(&w.path("app.pdb"));
    // The Source Link map is the stream the linker embedded.
    w.run(
        "llvm-pdbutil-19",
        &[
            "export",
            "-stream=sourcelink",
            "-out=exported.json",
            "app.pdb",
        ],
    );
    let exported: Value =
        serde_json::from_slice(&std::fs::read(w.path("exported.json")).unwrap()).unwrap();
    assert_eq!(sources["source_link"], exported);
    assert_eq!(
        exported["documents"][format!("{root}/*")],
        format!("{URL}/src/app/1.0/*")
    );
    // The documents and their MD5s are what llvm-pdbutil lists, each once.
    let listed = pdbutil_files(&w, "app.pdb");
    let read: BTreeMap<String, String> = sources["documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            assert_eq!(d["checksum"]["algorithm"], "md5", "{d}");
            let digest = d["checksum"]["digest"].as_str().unwrap().to_string();
            (d["path"].as_str().unwrap().to_string(), digest)
        })
        .collect();
    assert_eq!(read.len(), sources["documents"].as_array().unwrap().len());
    assert_eq!(read, listed);
    assert_eq!(read.len(), 3, "{read:?}");
    // Each is the MD5 of the file compiled.
    for (path, md5) in &read {
        let bytes = std::fs::read(path).unwrap();
        let digest: String = Md5::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(md5, &digest, "{path}");
    }
    assert!(sources.get("srcsrv").is_none());
}

#[test]
fn the_srcsrv_stream_resolves_every_document_to_its_url() {
    if !have_toolchain() {
        return;
    }
    let w = Workdir::new();
    let root = compile(&w);
    link(&w, "first.pdb", &[]);
    let out = symdex()
        .arg("srcsrv")
        .arg(w.path("first.pdb"))
        .args(served(&root))
        .output()
        .unwrap();
    let stream = ok(out);
    std::fs::write(w.path("srcsrv.txt"), &stream).unwrap();
    // Embedded after the link (lld-link writes it in as it links again).
    link(&w, "app.pdb", &[("srcsrv", "srcsrv.txt")]);
    w.run(
        "llvm-pdbutil-19",
        &["export", "-stream=srcsrv", "-out=embedded.txt", "app.pdb"],
    );
    let embedded = std::fs::read(w.path("embedded.txt")).unwrap();
    assert_eq!(embedded, stream.as_bytes());
    let parsed = srcsrv::SrcSrvStream::parse(&embedded).unwrap();
    assert_eq!(parsed.version(), 2);
    let sources = pdb_sources(&w.path("app.pdb"));
    let documents = sources["documents"].as_array().unwrap();
    assert_eq!(documents.len(), 3);
    for document in documents {
        let path = document["path"].as_str().unwrap();
        let relative = path.strip_prefix(&format!("{root}/")).unwrap();
        let method = parsed.source_for_path(path, r"C:\cache").unwrap();
        assert_eq!(
            method,
            Some(srcsrv::SourceRetrievalMethod::Download {
                url: format!("{URL}/src/app/1.0/{relative}")
            }),
            "{path}"
        );
    }
    assert_eq!(sources["srcsrv"]["commands"], false);
    assert_eq!(
        sources["srcsrv"]["target"],
        format!("{URL}/src/app/1.0/%var2%")
    );
    // A document under no root is left out, and said on stderr.
    let out = symdex()
        .arg("srcsrv")
        .arg(w.path("first.pdb"))
        .args(served(&format!("{root}/sub")))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stream = ok(out);
    assert!(
        stream.contains("*b.h\r\n") && stream.contains("*c.cpp\r\n"),
        "{stream}"
    );
    assert!(stderr.contains("a.cpp: left out"), "{stderr}");
}

#[test]
fn a_pdb_whose_srcsrv_runs_commands_is_flagged_and_refused_when_asked() {
    if !have_toolchain() {
        return;
    }
    let w = Workdir::new();
    compile(&w);
    let stream = "SRCSRV: ini ------\r\nVERSION=2\r\nSRCSRV: variables ------\r\n\
        SRCSRVTRG=%targ%\\%var2%\r\nSRCSRVCMD=cmd /c tf get %var2%\r\n\
        SRCSRV: source files ------\r\nSRCSRV: end ------\r\n";
    std::fs::write(w.path("cmd.txt"), stream).unwrap();
    link(&w, "app.pdb", &[("srcsrv", "cmd.txt")]);
    let sources = pdb_sources(&w.path("app.pdb"));
    assert_eq!(sources["srcsrv"]["commands"], true, "{sources}");
    let records = index_json(&w.path("store"), &[w.path("app.pdb")]);
    assert_eq!(records[0]["action"], "indexed", "{records:?}");
    assert_eq!(records[0]["pdb_sources"]["srcsrv"]["commands"], true);
    let records = index_json(
        &w.path("refusing"),
        &[
            w.path("app.pdb").into_os_string(),
            "--refuse-srcsrv-commands".into(),
        ],
    );
    assert_eq!(records[0]["action"], "rejected", "{records:?}");
    assert!(records[0]["reason"].as_str().unwrap().contains("SRCSRVCMD"));
}

#[test]
fn sourcelink_escapes_windows_roots_and_takes_several() {
    let out = symdex()
        .args(["sourcelink", "--root", r"C:\b", "--root", "/home/ci/w/"])
        .args([
            "--product",
            "app",
            "--build",
            "7",
            "--url",
            "https://s.example/",
        ])
        .output()
        .unwrap();
    let json = ok(out);
    assert_eq!(
        json.trim(),
        r#"{"documents":{"/home/ci/w/*":"https://s.example/src/app/7/*","C:\\b\\*":"https://s.example/src/app/7/*"}}"#
    );
    for bad in [
        ["--root", "relative", "--product", "app", "--build", "7"],
        ["--root", "/w", "--product", "a/b", "--build", "7"],
        ["--root", "/w", "--product", "app", "--build", ".."],
    ] {
        let out = symdex()
            .arg("sourcelink")
            .args(bad)
            .args(["--url", URL])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{bad:?}");
    }
}

#[test]
fn a_portable_pdb_lists_its_documents_and_source_link() {
    use symdex_shared::testing::source_pdbs::{portable_pdb_with_sources, SHA256};
    let w = Workdir::new();
    let json = br#"{"documents":{"/_/src/*":"https://s.example/src/app/7/*"}}"#;
    let file = portable_pdb_with_sources(
        [9; 20],
        &[("/_/src/App/Program.cs", SHA256, &[0x5a; 32])],
        Some(json),
    );
    std::fs::write(w.path("App.pdb"), file).unwrap();
    let out = ok(symdex()
        .args(["keys", "--json"])
        .arg(w.path("App.pdb"))
        .output()
        .unwrap());
    let row: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(row["format"], "portablepdb");
    let sources = &row["pdb_sources"];
    assert_eq!(sources["documents"][0]["path"], "/_/src/App/Program.cs");
    assert_eq!(sources["documents"][0]["checksum"]["algorithm"], "sha256");
    assert_eq!(
        sources["source_link"],
        serde_json::from_slice::<Value>(json).unwrap()
    );
}
