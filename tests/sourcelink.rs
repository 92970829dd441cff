//! Source Link and srcsrv end to end, with a native Windows build made on Linux: C++ files
//! compiled by `clang-19 --target=x86_64-pc-windows-msvc -g -gcodeview`, linked by
//! `lld-link-19 /debug` with the Source Link JSON `symdex sourcelink` prints
//! (`/pdbstream:sourcelink=`). What `symdex keys --json` reads of the PDB is checked against
//! `llvm-pdbutil-19` (the stream it exports, the MD5s `dump -files` lists); the srcsrv stream
//! `symdex srcsrv` prints, linked in with `/pdbstream:srcsrv=`, resolves every document to
//! its URL through an independent reader (the `srcsrv` crate); a PDB whose srcsrv stream runs
//! commands is flagged, and refused by `index --refuse-srcsrv-commands`. A Portable PDB is
//! built byte by byte (no .NET SDK here). The build's sources, indexed beside the PDB as a
//! tarball in either order, are served under `src/<product>/<build>/` by `symdex serve` at
//! the URL the embedded map gives each document, with the MD5 `llvm-pdbutil-19` lists; an
//! edited file, another product's file and a path outside the build are not.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::windows::{compile, have_toolchain, link};
use common::{index_json, ok, symdex, Server, Workdir};
use md5::{Digest, Md5};
use serde_json::Value;

const URL: &str = "https://sym.example.com";

/// The PDB's `pdb_sources` as `symdex keys --json` reports them.
fn pdb_sources(path: &Path) -> Value {
    let out = ok(symdex()
        .args(["keys", "--json", "--details"])
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
    // Indexed with its sources, the store serves every URL the stream resolves to (no
    // Source Link map, no source root: the stream's own lines say where), with the bytes the
    // PDB records.
    w.run("tar", &["cf", "src.tar", "-C", &root, "a.cpp", "sub"]);
    let store = w.path("store");
    let (pdb, tar) = (w.path("app.pdb"), w.path("src.tar"));
    index_json(
        &store,
        &[
            "--product",
            "app",
            "--build",
            "1.0",
            "--source-ext",
            "cpp,h",
            pdb.to_str().unwrap(),
            tar.to_str().unwrap(),
        ],
    );
    let server = Server::start(&store);
    let listed = pdbutil_files(&w, "app.pdb");
    assert_eq!(listed.len(), 3);
    for (path, md5) in &listed {
        let Some(srcsrv::SourceRetrievalMethod::Download { url }) =
            parsed.source_for_path(path, r"C:\cache").unwrap()
        else {
            panic!("{path}: no download");
        };
        let (status, _, body) = server.request("GET", url.strip_prefix(URL).unwrap(), "");
        assert_eq!(status, 200, "{url}");
        assert_eq!(&md5_hex(&body), md5, "{url}");
    }
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
    // The command in the variables section, and in the ini section in lower case: WinDbg
    // takes variables from both, their names in any case.
    let in_variables = "SRCSRV: ini ------\r\nVERSION=2\r\nSRCSRV: variables ------\r\n\
        SRCSRVTRG=%targ%\\%var2%\r\nSRCSRVCMD=cmd /c tf get %var2%\r\n\
        SRCSRV: source files ------\r\nSRCSRV: end ------\r\n";
    let in_ini = "SRCSRV: ini ------\r\nVERSION=2\r\nsrcsrvcmd=cmd /c tf get %var2%\r\n\
        SRCSRV: variables ------\r\nSRCSRVTRG=%targ%\\%var2%\r\n\
        SRCSRV: source files ------\r\nSRCSRV: end ------\r\n";
    for (name, stream) in [("variables", in_variables), ("ini", in_ini)] {
        let txt = format!("{name}.txt");
        std::fs::write(w.path(&txt), stream).unwrap();
        let pdb = format!("{name}.pdb");
        link(&w, &pdb, &[("srcsrv", txt.as_str())]);
        let sources = pdb_sources(&w.path(&pdb));
        assert_eq!(sources["srcsrv"]["commands"], true, "{name}: {sources}");
        let records = index_json(&w.path(&format!("store-{name}")), &[w.path(&pdb)]);
        assert_eq!(records[0]["action"], "indexed", "{name}: {records:?}");
        assert_eq!(records[0]["pdb_sources"]["srcsrv"]["commands"], true);
        let records = index_json(
            &w.path(&format!("refusing-{name}")),
            &[
                w.path(&pdb).into_os_string(),
                "--refuse-srcsrv-commands".into(),
            ],
        );
        assert_eq!(records[0]["action"], "rejected", "{name}: {records:?}");
        assert!(records[0]["reason"].as_str().unwrap().contains("SRCSRVCMD"));
    }
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
        .args(["keys", "--json", "--details"])
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

/// `symdex index` of `inputs` (in `w`) into `store` for product `product`, build 1.0, C++
/// sources flagged by extension.
fn index_for(w: &Workdir, store: &Path, product: &str, inputs: &[&str]) -> Vec<Value> {
    let mut args = vec![
        "--product".to_string(),
        product.into(),
        "--build".into(),
        "1.0".into(),
        "--source-ext".into(),
        "cpp,h".into(),
    ];
    args.extend(
        inputs
            .iter()
            .map(|i| w.path(i).to_string_lossy().into_owned()),
    );
    index_json(store, &args)
}

/// The path on the server a debugger asks for `document` by the embedded map `sl.json`.
fn asked_path(w: &Workdir, document: &str) -> String {
    let map =
        symdex_shared::sourcelink::SourceLinkMap::parse(&std::fs::read(w.path("sl.json")).unwrap())
            .unwrap();
    let url = map.resolve(document).unwrap();
    url.strip_prefix(URL).unwrap().to_string()
}

fn md5_hex(bytes: &[u8]) -> String {
    Md5::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A native build linked with the Source Link map, its sources tarred as `src.tar` (with a
/// file no document names, `extra.cpp`); returns the documents and MD5s llvm-pdbutil lists.
fn linked_build(w: &Workdir) -> BTreeMap<String, String> {
    let root = compile(w);
    let json = ok(symdex()
        .arg("sourcelink")
        .args(served(&root))
        .output()
        .unwrap());
    std::fs::write(w.path("sl.json"), &json).unwrap();
    link(w, "app.pdb", &[("sourcelink", "sl.json")]);
    std::fs::write(w.path("src/extra.cpp"), "int extra() { return 1; }\n").unwrap();
    let src = w.path("src");
    let src = src.to_str().unwrap();
    w.run(
        "tar",
        &["cf", "src.tar", "-C", src, "a.cpp", "sub", "extra.cpp"],
    );
    let files = pdbutil_files(w, "app.pdb");
    assert_eq!(files.len(), 3, "{files:?}");
    files
}

#[test]
fn every_document_is_served_at_its_source_link_url_in_any_order() {
    if !have_toolchain() {
        return;
    }
    let w = Workdir::new();
    let documents = linked_build(&w);
    let orders: [&[&[&str]]; 3] = [
        &[&["app.exe", "app.pdb", "src.tar"]],
        &[&["src.tar"], &["app.exe", "app.pdb"]],
        &[&["app.pdb"], &["src.tar"], &["app.exe"]],
    ];
    for (n, runs) in orders.iter().enumerate() {
        let store = w.path(&format!("store{n}"));
        let records: Vec<Value> = runs
            .iter()
            .flat_map(|inputs| index_for(&w, &store, "app", inputs))
            .collect();
        let pdb = records
            .iter()
            .find(|r| r["format"] == "pdb")
            .expect("the PDB's record");
        assert_eq!(pdb["sources"]["referenced"], 3, "{pdb}");
        let server = Server::start(&store);
        for (document, md5) in &documents {
            let path = asked_path(&w, document);
            let (status, _, body) = server.request("GET", &path, "");
            assert_eq!(status, 200, "order {n}: {document} at {path}");
            assert_eq!(&md5_hex(&body), md5, "order {n}: {document}");
        }
        // Nothing outside the build's documents: a file no document names, another build,
        // a climb out of the build.
        for path in [
            "/src/app/1.0/extra.cpp",
            "/src/app/2.0/a.cpp",
            "/src/app/1.0/../1.0/a.cpp",
            "/src/app/1.0/sub/../../../symbols",
        ] {
            let (status, _, _) = server.request("GET", path, "");
            assert!(
                status == 404 || status == 400,
                "order {n}: {path}: {status}"
            );
        }
        common::verify_clean(&store);
    }
}

#[test]
fn an_edited_source_another_products_and_a_removed_upload_are_not_served() {
    if !have_toolchain() {
        return;
    }
    let w = Workdir::new();
    let documents = linked_build(&w);
    let a_cpp = documents
        .keys()
        .find(|d| d.ends_with("a.cpp"))
        .unwrap()
        .clone();
    let b_h = documents
        .keys()
        .find(|d| d.ends_with("b.h"))
        .unwrap()
        .clone();
    // The tarball of an edited tree: a.cpp is not what the PDB was built from.
    std::fs::write(w.path("src/a.cpp"), "int main() { return 7; }\n").unwrap();
    let src = w.path("src");
    w.run(
        "tar",
        &[
            "cf",
            "edited.tar",
            "-C",
            src.to_str().unwrap(),
            "a.cpp",
            "sub",
        ],
    );
    for (n, runs) in [
        [&["app.pdb"][..], &["edited.tar"]],
        [&["edited.tar"], &["app.pdb"]],
    ]
    .iter()
    .enumerate()
    {
        let store = w.path(&format!("edited{n}"));
        let records: Vec<Value> = runs
            .iter()
            .flat_map(|inputs| index_for(&w, &store, "app", inputs))
            .collect();
        let server = Server::start(&store);
        let (status, _, _) = server.request("GET", &asked_path(&w, &a_cpp), "");
        assert_eq!(status, 404, "order {n}: the edited a.cpp is not served");
        let (status, _, _) = server.request("GET", &asked_path(&w, &b_h), "");
        assert_eq!(status, 200, "order {n}: b.h is what the PDB records");
        // Whoever came second says why: the source's record, or the PDB's.
        let said = records.iter().any(|r| {
            let text = r.to_string();
            text.contains("a.cpp") && text.contains("MD5") && text.contains("src/app/1.0/a.cpp")
                || r["format"] == "pdb"
                    && r["sources"]["unserved"]
                        .as_array()
                        .is_some_and(|u| u.iter().any(|l| l.as_str().unwrap().contains("MD5")))
        });
        assert!(said, "order {n}: {records:#?}");
    }

    // What is missing now, replayed from the manifest: all three documents while only the
    // PDB is in, none once the sources came.
    let missing = |store: &Path| -> Vec<String> {
        ok(symdex()
            .args(["manifest", "query", "--missing-sources", "--format", "json"])
            .arg(store)
            .output()
            .unwrap())
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["key"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
    };
    let store = w.path("replayed");
    index_for(&w, &store, "app", &["app.pdb"]);
    let mut keys = missing(&store);
    keys.sort();
    assert_eq!(
        keys,
        [
            "src/app/1.0/a.cpp",
            "src/app/1.0/sub/b.h",
            "src/app/1.0/sub/c.cpp"
        ]
    );
    index_for(&w, &store, "app", &["edited.tar"]);
    assert_eq!(
        missing(&store),
        ["src/app/1.0/a.cpp"],
        "the edited one is still missing"
    );

    // Another product's sources never serve this product's PDB.
    let store = w.path("tenancy");
    linked_build(&w);
    index_for(&w, &store, "other", &["src.tar"]);
    let records = index_for(&w, &store, "app", &["app.pdb"]);
    let pdb = records.iter().find(|r| r["format"] == "pdb").unwrap();
    assert_eq!(
        pdb["sources"]["missing"].as_array().unwrap().len(),
        3,
        "{pdb}"
    );
    let under = |store: &Path, prefix: &str| {
        common::published_files(store)
            .keys()
            .filter(|k| k.starts_with(prefix))
            .count()
    };
    assert_eq!(
        under(&store, "src/"),
        0,
        "no PDB of product other names them"
    );

    // Removing the sources unpublishes them.
    let store = w.path("removed");
    index_for(&w, &store, "app", &["app.pdb", "src.tar"]);
    assert_eq!(under(&store, "src/app/1.0/"), 3);
    ok(symdex()
        .args(["delete", "--store"])
        .arg(&store)
        .arg("--input")
        .arg(w.path("src.tar"))
        .output()
        .unwrap());
    let server = Server::start(&store);
    for document in documents.keys() {
        let (status, _, _) = server.request("GET", &asked_path(&w, document), "");
        assert_eq!(status, 404, "{document} after its source upload is deleted");
    }
}

#[test]
fn a_portable_pdbs_documents_are_served_by_their_sha256() {
    use symdex_shared::testing::source_pdbs::{portable_pdb_with_sources, SHA256};
    let w = Workdir::new();
    let sha256 =
        |bytes: &[u8]| -> [u8; 32] { <sha2::Sha256 as sha2::Digest>::digest(bytes).into() };
    std::fs::create_dir_all(w.path("tree/App")).unwrap();
    let program = b"class Program { static void Main() {} }\n".as_slice();
    let util = b"static class Util {}\n".as_slice();
    std::fs::write(w.path("tree/App/Program.cs"), program).unwrap();
    // Util.cs as built, and as edited since (what is uploaded).
    std::fs::write(w.path("tree/App/Util.cs"), b"static class Util { }\n").unwrap();
    let json = br#"{"documents":{"/_/src/*":"https://s.example/src/app/7/*"}}"#;
    let file = portable_pdb_with_sources(
        [9; 20],
        &[
            ("/_/src/App/Program.cs", SHA256, &sha256(program)),
            ("/_/src/App/Util.cs", SHA256, &sha256(util)),
        ],
        Some(json),
    );
    std::fs::write(w.path("App.pdb"), file).unwrap();
    for (n, runs) in [[&["App.pdb"][..], &["tree"]], [&["tree"], &["App.pdb"]]]
        .iter()
        .enumerate()
    {
        let store = w.path(&format!("store{n}"));
        let records: Vec<Value> = runs
            .iter()
            .flat_map(|inputs| {
                let mut args = vec!["--product", "app", "--build", "7", "--source-ext", "cs"];
                let paths: Vec<String> = inputs
                    .iter()
                    .map(|i| w.path(i).to_string_lossy().into_owned())
                    .collect();
                args.extend(paths.iter().map(String::as_str));
                index_json(&store, &args)
            })
            .collect();
        let server = Server::start(&store);
        let (status, _, body) = server.request("GET", "/src/app/7/App/Program.cs", "");
        assert_eq!((status, body.as_slice()), (200, program), "order {n}");
        let (status, _, _) = server.request("GET", "/src/app/7/App/Util.cs", "");
        assert_eq!(status, 404, "order {n}: the edited Util.cs is not served");
        let said = records
            .iter()
            .any(|r| r.to_string().contains("SHA-256") && r.to_string().contains("Util.cs"));
        assert!(
            said,
            "order {n}: a record names the SHA-256 mismatch: {records:#?}"
        );
    }
}

/// A hostile PDB: documents whose mapped paths climb out of the build or hold characters no
/// key may, a Source Link map sending documents to another product's URL and a srcsrv line
/// pointing into yet another build. None of them publishes a key outside its own build's
/// `src/`, each is said in the PDB's record, and the store verifies clean.
#[test]
fn a_hostile_pdbs_documents_publish_nothing_outside_its_build() {
    use symdex_shared::testing::source_pdbs::pdb_with_sources;
    let w = Workdir::new();
    let text = b"int x;\n";
    let md5: [u8; 16] = Md5::digest(text).into();
    std::fs::create_dir_all(w.path("tree/sub")).unwrap();
    for name in ["x.c", "sub/x.c", "y.c", "z.c", "ok.c"] {
        std::fs::write(w.path(&format!("tree/{name}")), text).unwrap();
    }
    let map = br#"{"documents":{
        "C:\\b\\*":"https://s/src/app/1/*",
        "C:\\b\\other\\*":"https://s/src/other/1/*",
        "C:\\b\\pct\\*":"https://s/src/app/1/%2e%2e/*"
    }}"#;
    let documents: Vec<(&str, u8, &[u8])> = [
        "C:\\b\\..\\..\\..\\x.c",
        "C:\\b\\sub\\.\\x.c",
        "C:\\b\\other\\y.c",
        "C:\\b\\pct\\z.c",
        "C:\\b\\ok.c",
    ]
    .into_iter()
    .map(|path| (path, 1u8, md5.as_slice()))
    .collect();
    std::fs::write(
        w.path("evil.pdb"),
        pdb_with_sources([4; 16], &documents, None, Some(map)),
    )
    .unwrap();
    let store = w.path("store");
    let tree = w.path("tree");
    let evil = w.path("evil.pdb");
    let records = index_json(
        &store,
        &[
            "--product",
            "app",
            "--build",
            "1",
            "--source-ext",
            "c",
            evil.to_str().unwrap(),
            tree.to_str().unwrap(),
        ],
    );
    let pdb = records.iter().find(|r| r["format"] == "pdb").unwrap();
    let report = pdb["sources"].to_string();
    assert!(report.contains("not a valid key"), "{report}");
    assert!(report.contains("another host"), "{report}");
    let src: Vec<String> = common::published_files(&store)
        .into_keys()
        .filter(|k| k.starts_with("src/"))
        .collect();
    assert_eq!(
        src,
        ["src/app/1/ok.c"],
        "only the document inside its build"
    );
    common::verify_clean(&store);
}
