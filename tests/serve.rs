//! `symdex serve` against what an attacker or a careless client sends: every spelling of a
//! private path, idle connections under a small open-files limit, names no file can have,
//! several ranges at once; files changed under a running server (its memory cache).

mod common;

use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{build_split_elf, symdex, Server, Workdir};

fn store_with_state(w: &Workdir) -> std::path::PathBuf {
    build_split_elf(
        w,
        "p",
        "0x11223344556677889900aabbccddeeff00112233",
        "x + 1",
    );
    let store = w.path("store");
    let out = symdex()
        .args(["index", "--store"])
        .arg(&store)
        .arg(w.path("p"))
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(store.join("_symdex/uploads").is_dir() && store.join("_manifest").is_dir());
    store
}

/// The name of a file in `dir`.
fn first_name(dir: &std::path::Path) -> String {
    let entry = std::fs::read_dir(dir).unwrap().next().unwrap().unwrap();
    entry.file_name().to_string_lossy().into_owned()
}

#[test]
fn private_records_are_not_found_in_any_spelling() {
    let w = Workdir::new();
    let store = store_with_state(&w);
    let server = Server::start(&store);
    let debuginfo = "/buildid/11223344556677889900aabbccddeeff00112233/debuginfo";
    assert_eq!(
        server.request("GET", debuginfo, "").0,
        200,
        "a published key is served"
    );
    // The upload's record (its keys have none: their objects name the upload).
    let record = format!(
        "_symdex/uploads/{}",
        first_name(&store.join("_symdex/uploads"))
    );
    assert!(store.join(&record).is_file());
    let manifest = first_name(&store.join("_manifest"));
    for path in [
        format!("/{record}"),
        format!("//{record}"),
        format!("///{record}"),
        format!("/./{record}"),
        format!("/%2e/{record}"),
        format!("/.%2f{record}"),
        format!("/%5fsymdex/{}", record.trim_start_matches("_symdex/")),
        format!("/symbols/../{record}"),
        format!("///_manifest/{manifest}"),
        "/_manifest/".to_string(),
    ] {
        let (status, _, body) = server.request("GET", &path, "");
        assert_eq!(status, 404, "{path}: {}", String::from_utf8_lossy(&body));
    }
    // The absolute form of the request target.
    let absolute = format!(
        "GET http://{0}//{record} HTTP/1.1\r\nHost: {0}\r\nConnection: close\r\n\r\n",
        server.addr
    );
    assert_eq!(server.raw(&absolute).0, 404);
}

#[test]
fn idle_connections_do_not_lock_clients_out() {
    let w = Workdir::new();
    let store = store_with_state(&w);
    // 256 open files, 300 connections that never send a byte.
    let server = Server::start_with(&store, &["--header-timeout", "1"], Some(256));
    let idle: Vec<TcpStream> = (0..300)
        .filter_map(|_| TcpStream::connect(&server.addr).ok())
        .collect();
    assert!(idle.len() > 200, "the listen backlog took the connections");
    let started = Instant::now();
    let (status, _, _) = server.request(
        "GET",
        "/buildid/11223344556677889900aabbccddeeff00112233/debuginfo",
        "",
    );
    assert_eq!(status, 200);
    // Not a speed check: the idle connections were closed for the real client to get in.
    assert!(started.elapsed() < Duration::from_secs(60));
    drop(idle);

    // A kept-alive connection that goes quiet after a request is closed as well.
    use std::io::{Read, Write};
    let mut kept = TcpStream::connect(&server.addr).unwrap();
    write!(
        kept,
        "GET /buildid/11223344556677889900aabbccddeeff00112233/debuginfo HTTP/1.1\r\nHost: x\r\n\r\n"
    )
    .unwrap();
    kept.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut response = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        match kept.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => response.extend_from_slice(&buf[..n]),
            Err(e) => panic!("the idle kept-alive connection stayed open: {e}"),
        }
    }
    assert!(response.starts_with(b"HTTP/1.1 200"));
}

#[test]
fn long_names_are_misses_and_several_ranges_get_the_whole_file() {
    let w = Workdir::new();
    let store = store_with_state(&w);
    let server = Server::start(&store);
    let long = format!("/symbols/{}/ab/{}", "x".repeat(300), "x".repeat(300));
    assert_eq!(server.request("GET", &long, "").0, 404, "not a 500");
    let key = "/buildid/11223344556677889900aabbccddeeff00112233/debuginfo";
    let file = std::fs::read(store.join(key.trim_start_matches('/'))).unwrap();
    let (status, _, body) = server.request("GET", key, "Range: bytes=0-1,4-5\r\n");
    assert_eq!(status, 200, "two ranges: the whole file, never 416");
    assert_eq!(body, file);
    let (status, head, body) = server.request("GET", key, "Range: bytes=4-5\r\n");
    assert_eq!((status, body.as_slice()), (206, &file[4..6]));
    assert!(head.contains("content-range: bytes 4-5/"));
}

/// `--fold-case` on both ends: the SymSrv family's keys are stored lowercase, and any casing of
/// a request under `/symbols/` or `/index2/` finds them (as SymSrv over IIS would); without it
/// an upper-case spelling is a miss. debuginfod's paths keep their case.
#[test]
fn folded_keys_resolve_in_any_casing() {
    let w = Workdir::new();
    std::fs::write(w.path("src.cpp"), "int foo(int x) { return x + 1; }\n").unwrap();
    common::build_pe_and_pdb(&w, "MixedCase.pdb", "Lib.DLL");
    let store = w.path("store");
    let out = symdex()
        .args(["index", "--fold-case", "--store"])
        .arg(&store)
        .arg(w.path("Lib.DLL"))
        .arg(w.path("MixedCase.pdb"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut folded = Vec::new();
    for top in ["symbols", "index2"] {
        for entry in walkdir::WalkDir::new(store.join(top)) {
            let entry = entry.unwrap();
            if entry.file_type().is_file() {
                let rel = entry.path().strip_prefix(&store).unwrap();
                let rel = rel.to_string_lossy().into_owned();
                assert_eq!(rel, rel.to_ascii_lowercase(), "stored lowercase");
                folded.push(rel);
            }
        }
    }
    assert!(
        folded
            .iter()
            .any(|k| k.starts_with("symbols/mixedcase.pdb/")),
        "{folded:?}"
    );
    let exact = Server::start(&store);
    let insensitive = Server::start_with(&store, &["--fold-case"], None);
    for key in folded.iter().filter(|k| !k.ends_with("index2.txt")) {
        let size = std::fs::metadata(store.join(key)).unwrap().len() as usize;
        let upper = format!(
            "/{}",
            key.to_ascii_uppercase().replacen("SYMBOLS/", "symbols/", 1)
        );
        let upper = upper.replacen("/INDEX2/", "/index2/", 1);
        let (status, _, body) = insensitive.request("GET", &upper, "");
        assert_eq!((status, body.len()), (200, size), "{upper}");
        assert_eq!(
            exact.request("GET", &upper, "").0,
            404,
            "{upper} without folding"
        );
        assert_eq!(insensitive.request("GET", &format!("/{key}"), "").0, 200);
    }
}

/// serve keeps small files in memory, but never answers from memory for a file that is no
/// longer the one read: a key rewritten in place (same inode), replaced by rename (a new
/// inode, as symdex writes), or removed is answered as it is on disk, for GET, HEAD and ranges.
#[test]
fn a_changed_or_removed_file_is_never_answered_from_memory() {
    let w = Workdir::new();
    let store = store_with_state(&w);
    let server = Server::start(&store);
    let key = "/buildid/11223344556677889900aabbccddeeff00112233/debuginfo";
    let path = store.join(key.trim_start_matches('/'));
    let original = std::fs::read(&path).unwrap();
    for _ in 0..2 {
        let (status, _, body) = server.request("GET", key, "");
        assert_eq!(
            (status, body == original),
            (200, true),
            "read, then from memory"
        );
    }
    // In place, the same size: the change time tells (the file's was set when it was indexed).
    let mut same_size = original.clone();
    same_size[0] ^= 0xff;
    std::fs::write(&path, &same_size).unwrap();
    let (status, _, body) = server.request("GET", key, "");
    assert_eq!(
        (status, body == same_size),
        (200, true),
        "rewritten in place"
    );
    let (status, _, body) = server.request("GET", key, "Range: bytes=0-3\r\n");
    assert_eq!((status, body.as_slice()), (206, &same_size[..4]));
    // Replaced by rename: a new inode.
    let replacement = w.path("replacement");
    std::fs::write(&replacement, b"new bytes").unwrap();
    std::fs::rename(&replacement, &path).unwrap();
    let (status, head, body) = server.request("HEAD", key, "");
    assert_eq!(status, 200);
    assert!(head.contains("content-length: 9"), "{head}");
    assert!(body.is_empty());
    assert_eq!(server.request("GET", key, "").2, b"new bytes");
    std::fs::remove_file(&path).unwrap();
    assert_eq!(server.request("GET", key, "").0, 404, "removed");
}
