//! `symdex check`'s source clients: a PDB's documents as Visual Studio finds them through
//! its Source Link map (`sourcelink`) and as WinDbg finds them through its srcsrv stream
//! (`srcsrv`), each served (its checksum as recorded), missing, of the wrong checksum, or not
//! served by this store. A native PDB made by clang-19 + lld-link-19 carries both (the JSON
//! `symdex sourcelink` prints, the stream `symdex srcsrv` prints); a Portable PDB built byte
//! by byte carries SHA-256 checksums. Source files are put in the store at their keys
//! directly (the LocalStore's own writes), one right, one wrong, one left out; and indexed
//! from a tarball beside the PDB, all served until the tarball's upload is deleted, then all
//! missing.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::windows::{compile, have_toolchain, link};
use common::{ok, symdex, Server, Workdir};
use serde_json::Value;
use sha2::{Digest, Sha256};
use symdex_shared::storage::LocalStore;

const URL: &str = "https://sym.example.com";

/// `check --json` with `args`: its exit code, rows and stderr.
fn check(args: &[&str]) -> (i32, Vec<Value>, String) {
    let out = symdex()
        .args(["check", "--json"])
        .args(args)
        .output()
        .unwrap();
    let rows = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().unwrap_or(-1), rows, stderr)
}

/// Each row's status by (client, the document's file name).
fn statuses(rows: &[Value]) -> BTreeMap<(String, String), String> {
    rows.iter()
        .map(|r| {
            let document = r["document"].as_str().unwrap();
            let name = document.rsplit(['/', '\\']).next().unwrap().to_string();
            let client = r["client"].as_str().unwrap().to_string();
            ((client, name), r["status"].as_str().unwrap().to_string())
        })
        .collect()
}

fn expected(clients: &[&str], each: &[(&str, &str)]) -> BTreeMap<(String, String), String> {
    clients
        .iter()
        .flat_map(|c| {
            each.iter()
                .map(|(name, status)| ((c.to_string(), name.to_string()), status.to_string()))
        })
        .collect()
}

/// `app.pdb` linked with the Source Link JSON and the srcsrv stream for product `app`,
/// build `1.0` at [`URL`]; returns the build root.
fn native_pdb(w: &Workdir) -> String {
    let root = compile(w);
    let served = [
        "--root",
        &root,
        "--product",
        "app",
        "--build",
        "1.0",
        "--url",
        URL,
    ];
    let json = ok(symdex().arg("sourcelink").args(served).output().unwrap());
    std::fs::write(w.path("sl.json"), json).unwrap();
    link(w, "first.pdb", &[("sourcelink", "sl.json")]);
    let stream = ok(symdex()
        .arg("srcsrv")
        .arg(w.path("first.pdb"))
        .args(served)
        .output()
        .unwrap());
    std::fs::write(w.path("srcsrv.txt"), stream).unwrap();
    link(
        w,
        "app.pdb",
        &[("sourcelink", "sl.json"), ("srcsrv", "srcsrv.txt")],
    );
    root
}

#[test]
fn a_native_pdbs_documents_are_served_missing_or_wrong_for_both_clients() {
    if !have_toolchain() {
        return;
    }
    let w = Workdir::new();
    let root = native_pdb(&w);
    let store_path = w.path("store");
    let store = LocalStore::open(&store_path).unwrap();
    let source = |rel: &str| std::fs::read(Path::new(&root).join(rel)).unwrap();
    store
        .put_now("src/app/1.0/a.cpp", &source("a.cpp"))
        .unwrap();
    store
        .put_now(
            "src/app/1.0/sub/b.h",
            b"inline int helper(int x) { return 0; }\n",
        )
        .unwrap();
    let pdb = w.path("app.pdb");
    let pdb = pdb.to_str().unwrap();
    let store_arg = store_path.to_str().unwrap();
    let clients = ["--client", "sourcelink", "--client", "srcsrv"];
    let args = [
        &clients[..],
        &["--store", store_arg, "--public-url", URL, pdb],
    ]
    .concat();
    let (code, rows, stderr) = check(&args);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        statuses(&rows),
        expected(
            &["sourcelink", "srcsrv"],
            &[
                ("a.cpp", "served"),
                ("b.h", "wrong-checksum"),
                ("c.cpp", "missing")
            ]
        ),
        "{rows:#?}"
    );
    assert!(
        stderr.contains("2 documents served, 2 missing, 2 wrong, 0 not served by this store"),
        "{stderr}"
    );
    for row in &rows {
        let name = row["document"]
            .as_str()
            .unwrap()
            .rsplit('/')
            .next()
            .unwrap();
        let key = row["key"].as_str().unwrap();
        assert!(
            key.starts_with("src/app/1.0/") && key.ends_with(name),
            "{row}"
        );
        assert_eq!(row["checksum"]["algorithm"], "md5", "{row}");
        let url = row["url"].as_str().unwrap();
        assert_eq!(url, format!("{URL}/{key}"), "{row}");
        if name == "b.h" {
            let detail = row["detail"].as_str().unwrap();
            assert!(detail.contains("the PDB recorded"), "{detail}");
        }
    }

    // Every document put right: all served, through the store and through `symdex serve`
    // (the key under the server asked, the URL's base named apart).
    store
        .put_now("src/app/1.0/sub/b.h", &source("sub/b.h"))
        .unwrap();
    store
        .put_now("src/app/1.0/sub/c.cpp", &source("sub/c.cpp"))
        .unwrap();
    let all_served = expected(
        &["sourcelink", "srcsrv"],
        &[("a.cpp", "served"), ("b.h", "served"), ("c.cpp", "served")],
    );
    let (code, rows, stderr) = check(&args);
    assert_eq!((code, statuses(&rows)), (0, all_served.clone()), "{stderr}");
    let server = Server::start(&store_path);
    let url = server.url();
    let args = [&clients[..], &["--server", &url, "--public-url", URL, pdb]].concat();
    let (code, rows, stderr) = check(&args);
    assert_eq!((code, statuses(&rows)), (0, all_served.clone()), "{stderr}");
    // A PDB inside an archive: its srcsrv URLs are those identification read of its stream.
    w.run("tar", &["cf", "pdb.tar", "app.pdb"]);
    let tar = w.path("pdb.tar");
    let in_tar = [
        "--store",
        store_arg,
        "--public-url",
        URL,
        tar.to_str().unwrap(),
    ];
    let (code, rows, stderr) = check(&[&clients[..], &in_tar].concat());
    assert_eq!((code, statuses(&rows)), (0, all_served.clone()), "{stderr}");
    // With no URL for the store, one whose path holds /src/<product>/<build>/ is taken for
    // its own (and said so).
    let (code, rows, stderr) = check(&[&clients[..], &["--store", store_arg, pdb]].concat());
    assert_eq!((code, statuses(&rows)), (0, all_served), "{stderr}");
    assert!(stderr.contains("--public-url"), "{stderr}");
    // Another store's URLs: not served by this one, and no failure of it.
    let other = [
        "--store",
        store_arg,
        "--public-url",
        "https://other.example",
        pdb,
    ];
    let (code, rows, stderr) = check(&[&clients[..], &other].concat());
    assert_eq!(code, 0, "{stderr}");
    assert!(
        rows.iter().all(|r| r["status"] == "not-in-store"
            && r["detail"]
                .as_str()
                .unwrap()
                .starts_with("not served by this store")),
        "{rows:#?}"
    );
    assert!(stderr.contains("6 not served by this store"), "{stderr}");
}

#[test]
fn indexed_sources_are_served_to_both_clients_until_their_upload_is_deleted() {
    if !have_toolchain() {
        return;
    }
    let w = Workdir::new();
    let root = native_pdb(&w);
    w.run("tar", &["cf", "src.tar", "-C", &root, "a.cpp", "sub"]);
    let store = w.path("store");
    let index = ok(symdex()
        .args(["index", "--store"])
        .arg(&store)
        .args([
            "--product",
            "app",
            "--build",
            "1.0",
            "--source-ext",
            "cpp,h",
        ])
        .args([w.path("app.pdb"), w.path("src.tar")])
        .output()
        .unwrap());
    let pdb = w.path("app.pdb");
    let args = [
        "--client",
        "sourcelink",
        "--client",
        "srcsrv",
        "--store",
        store.to_str().unwrap(),
        "--public-url",
        URL,
        pdb.to_str().unwrap(),
    ];
    let names = [("a.cpp", "served"), ("b.h", "served"), ("c.cpp", "served")];
    let (code, rows, stderr) = check(&args);
    assert_eq!(
        (code, statuses(&rows)),
        (0, expected(&["sourcelink", "srcsrv"], &names)),
        "{index}\n{stderr}"
    );
    assert!(stderr.contains("6 documents served, 0 missing"), "{stderr}");
    // Each key names the upload that published it: the sources'.
    assert!(
        rows.iter().all(|r| r["published_by"].is_string()),
        "{rows:#?}"
    );
    ok(symdex()
        .args(["delete", "--store"])
        .arg(&store)
        .arg("--input")
        .arg(w.path("src.tar"))
        .output()
        .unwrap());
    let (code, rows, stderr) = check(&args);
    let names = [
        ("a.cpp", "missing"),
        ("b.h", "missing"),
        ("c.cpp", "missing"),
    ];
    assert_eq!(
        (code, statuses(&rows)),
        (1, expected(&["sourcelink", "srcsrv"], &names)),
        "{stderr}"
    );
    assert!(stderr.contains("0 documents served, 6 missing"), "{stderr}");
}

#[test]
fn a_pdb_without_srcsrv_says_so_and_the_other_clients_are_unchanged() {
    if !have_toolchain() {
        return;
    }
    let w = Workdir::new();
    compile(&w);
    link(&w, "plain.pdb", &[]);
    ok(symdex()
        .args(["index", "--store"])
        .arg(w.path("store"))
        .arg(w.path("plain.pdb"))
        .output()
        .unwrap());
    let pdb = w.path("plain.pdb");
    let store = w.path("store");
    let (code, rows, stderr) = check(&[
        "--client",
        "windbg",
        "--client",
        "sourcelink",
        "--client",
        "srcsrv",
        "--store",
        store.to_str().unwrap(),
        pdb.to_str().unwrap(),
    ]);
    // The PDB itself is found by its clients; its documents are at no URL, said on stderr.
    assert_eq!(code, 0, "{stderr}");
    assert!(rows.iter().all(|r| r["status"] == "found"), "{rows:#?}");
    assert!(rows.iter().any(|r| r["client"] == "windbg"), "{rows:#?}");
    assert!(stderr.contains("no Source Link map"), "{stderr}");
    assert!(stderr.contains("no srcsrv stream"), "{stderr}");
}

#[test]
fn a_portable_pdbs_sha256_documents_are_checked() {
    use symdex_shared::testing::source_pdbs::{portable_pdb_with_sources, SHA256};
    let w = Workdir::new();
    let program = b"class Program { static void Main() {} }\n";
    let util = b"static class Util {}\n";
    let model = b"record Model(int Id);\n";
    let sha = |bytes: &[u8]| -> Vec<u8> { Sha256::digest(bytes).to_vec() };
    let (program_sha, util_sha, model_sha) = (sha(program), sha(util), sha(model));
    let json = br#"{"documents":{"/_/src/*":"https://s.example/src/app/7/*"}}"#;
    let file = portable_pdb_with_sources(
        [9; 20],
        &[
            ("/_/src/App/Program.cs", SHA256, &program_sha),
            ("/_/src/App/Util.cs", SHA256, &util_sha),
            ("/_/src/App/Model.cs", SHA256, &model_sha),
            ("/_/obj/Generated.cs", SHA256, &model_sha),
        ],
        Some(json),
    );
    std::fs::write(w.path("App.pdb"), file).unwrap();
    let store_path = w.path("store");
    let store = LocalStore::open(&store_path).unwrap();
    store.put_now("src/app/7/App/Program.cs", program).unwrap();
    store
        .put_now("src/app/7/App/Util.cs", b"static class Other {}\n")
        .unwrap();
    let pdb = w.path("App.pdb");
    let (code, rows, stderr) = check(&[
        "--client",
        "sourcelink",
        "--client",
        "srcsrv",
        "--store",
        store_path.to_str().unwrap(),
        "--public-url",
        "https://s.example",
        pdb.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        statuses(&rows),
        expected(
            &["sourcelink"],
            &[
                ("Program.cs", "served"),
                ("Util.cs", "wrong-checksum"),
                ("Model.cs", "missing"),
                ("Generated.cs", "not-in-store"),
            ]
        ),
        "{rows:#?}"
    );
    let util_row = rows
        .iter()
        .find(|r| r["document"] == "/_/src/App/Util.cs")
        .unwrap();
    assert_eq!(util_row["checksum"]["algorithm"], "sha256");
    assert!(
        util_row["detail"].as_str().unwrap().starts_with("sha256 "),
        "{util_row}"
    );
    let generated = rows
        .iter()
        .find(|r| r["document"] == "/_/obj/Generated.cs")
        .unwrap();
    assert_eq!(generated["detail"], "no Source Link entry maps it");
    assert!(
        stderr.contains("1 documents served, 1 missing, 1 wrong, 1 not served by this store"),
        "{stderr}"
    );
}
