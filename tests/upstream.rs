//! `serve --upstream`: one URL for a store's own symbols and upstream servers nobody here
//! wrote — elfutils `debuginfod -F` over ELF files symdex never indexed, and a static
//! SymSrv-style tree served by `python3 -m http.server` — fetched through symdex by
//! debuginfod-find, gdb and SymSrv-style GETs, then again from the cache with the upstream
//! stopped; the store's own keys never asked upstream; one upstream request for many
//! concurrent ones; a wrong file for a build id never served; a trickle cut. Hostile upstreams
//! are in upstream_hostile.rs.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{
    build_split_elf, debuginfod_client, fetched_by, gdb_via_debuginfod, get, ok, symdex, url_path,
    Server, StaticServer, Workdir,
};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A process stopped on drop.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits until `ready` holds (a server starting up), for at most a minute.
fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{what} never came up"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// elfutils' debuginfod over `dir`, answering once it has scanned `build_id`.
fn debuginfod(w: &Workdir, dir: &Path, build_id: &str) -> (Running, String) {
    let port = free_port();
    let child = Command::new("debuginfod")
        .args(["-F", "-p", &port.to_string(), "-t", "1", "-d"])
        .arg(w.path("debuginfod.sqlite"))
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("debuginfod (scripts/setup.sh installs it)");
    let running = Running(child);
    let addr = format!("127.0.0.1:{port}");
    let key = format!("/buildid/{build_id}/debuginfo");
    wait_for("debuginfod", || {
        get(&addr, &key).is_some_and(|(status, _, _)| status == 200)
    });
    (running, addr)
}

fn serve_with_upstream(store: &Path, cache: &Path, upstreams: &[String], extra: &[&str]) -> Server {
    let mut args = vec!["--upstream-cache", cache.to_str().unwrap()];
    for upstream in upstreams {
        args.extend(["--upstream", upstream.as_str()]);
    }
    args.extend(extra);
    Server::start_with(store, &args, None)
}

fn empty_store(w: &Workdir) -> PathBuf {
    let store = w.path("store");
    std::fs::create_dir_all(&store).unwrap();
    store
}

#[test]
fn debuginfod_find_and_gdb_fetch_upstream_elf_files_then_from_the_cache_without_it() {
    let w = Workdir::new();
    let id = "0x5566778899aabbccddeeff00112233445566aabb";
    build_split_elf(&w, "elsewhere", id, "x * 7");
    let build_id = id.trim_start_matches("0x");
    let (upstream, addr) = debuginfod(&w, &w.path("elsewhere"), build_id);
    let server = serve_with_upstream(
        &empty_store(&w),
        &w.path("cache"),
        &[format!("http://{addr}")],
        &[],
    );
    std::fs::create_dir_all(w.path("run")).unwrap();
    std::fs::copy(w.path("elsewhere/app.stripped"), w.path("run/app")).unwrap();
    let debug = std::fs::read(w.path("elsewhere/app.debug")).unwrap();
    let mut find = debuginfod_client("debuginfod-find", &w, &server);
    find.args(["debuginfo", build_id]);
    assert_eq!(fetched_by(find), debug, "byte-identical through symdex");
    let (status, head, _) = get(&server.addr, &format!("/buildid/{build_id}/debuginfo")).unwrap();
    assert_eq!(status, 200);
    assert!(head.contains("x-symdex-source: upstream"), "{head}");
    assert!(head.contains("x-debuginfod-size: "), "{head}");

    // The upstream gone: the cache answers, a new client cache and gdb alike.
    drop(upstream);
    std::fs::remove_dir_all(w.path("cache-debuginfod-find")).unwrap();
    let mut again = debuginfod_client("debuginfod-find", &w, &server);
    again.args(["debuginfo", build_id]);
    assert_eq!(fetched_by(again), debug, "from the cache, upstream stopped");
    let out = gdb_via_debuginfod(&w, &server, "info line compute", "./app")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("Line 1 of") && said.contains("prog.c\""),
        "gdb said:\n{said}"
    );
}

/// A SymSrv-style tree (`download/symbols/<name>/<id>/<name>`) made by indexing a PE and its
/// PDB into a scratch store with the symstore layout.
fn symsrv_tree(w: &Workdir) -> (PathBuf, Vec<String>) {
    std::fs::write(w.path("src.cpp"), "int foo(int x) { return x * 5; }\n").unwrap();
    common::build_pe_and_pdb(w, "Upstream.pdb", "Upstream.dll");
    ok(symdex()
        .args(["index", "--layout", "symstore", "--store"])
        .arg(w.path("scratch"))
        .arg(w.path("Upstream.dll"))
        .arg(w.path("Upstream.pdb"))
        .output()
        .unwrap());
    let root = w.path("msdl");
    let tree = root.join("download");
    std::fs::create_dir_all(&tree).unwrap();
    std::fs::rename(w.path("scratch/symbols"), tree.join("symbols")).unwrap();
    let keys: Vec<String> = walkdir::WalkDir::new(tree.join("symbols"))
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let rel = e.path().strip_prefix(&tree).unwrap();
            rel.to_string_lossy().into_owned()
        })
        .collect();
    assert!(
        keys.iter().any(|k| k.ends_with(".pdb")) && keys.iter().any(|k| k.ends_with(".dll")),
        "{keys:?}"
    );
    (root, keys)
}

#[test]
fn symsrv_fetches_pass_a_prefix_through_and_the_stores_own_keys_never_go_upstream() {
    let w = Workdir::new();
    let (root, keys) = symsrv_tree(&w);
    let log = w.path("upstream.log");
    let upstream = StaticServer::start(&root, &log);
    let addr = upstream.addr.clone();
    // The store has symbols of its own (an ELF pair) under every layout.
    build_split_elf(
        &w,
        "own",
        "0x0102030405060708090a0b0c0d0e0f1011121314",
        "x + 2",
    );
    let store = w.path("store");
    ok(symdex()
        .args(["index", "--store"])
        .arg(&store)
        .arg(w.path("own"))
        .output()
        .unwrap());
    let server = serve_with_upstream(
        &store,
        &w.path("cache"),
        &[format!("symbols/=http://{addr}/download/symbols/")],
        &[],
    );
    for key in &keys {
        let original = std::fs::read(root.join("download").join(key)).unwrap();
        let (status, head, body) = get(&server.addr, &format!("/{key}")).unwrap();
        assert_eq!((status, body == original), (200, true), "{key}");
        assert!(head.contains("x-symdex-source: upstream"), "{head}");
        // A range and a HEAD of an upstream answer, now cached.
        let (status, _, body) = server.request("GET", &format!("/{key}"), "Range: bytes=2-9\r\n");
        assert_eq!((status, body.as_slice()), (206, &original[2..10]));
        let (status, head, _) = server.request("HEAD", &format!("/{key}"), "");
        assert_eq!(status, 200);
        assert!(
            head.contains(&format!("content-length: {}", original.len())),
            "{head}"
        );
    }
    let upstream_asked = upstream.asked("/download/symbols/");
    assert_eq!(
        upstream_asked,
        keys.len(),
        "one upstream request per key, then the cache"
    );

    // The store's own keys, in every layout: answered by the store, never asked upstream.
    let own = common::published_files(&store);
    assert!(
        own.keys().any(|k| k.starts_with("symbols/")),
        "{:?}",
        own.keys()
    );
    for (key, bytes) in &own {
        let (status, head, body) = get(&server.addr, &format!("/{}", url_path(key))).unwrap();
        assert_eq!((status, &body), (200, bytes), "{key}");
        assert!(!head.contains("x-symdex-source"), "{head}");
    }
    // Private folders and paths outside the prefix never go upstream either.
    for path in ["/_symdex/refs/x", "/_manifest/x", "/buildid/00/debuginfo"] {
        assert_eq!(get(&server.addr, path).unwrap().0, 404, "{path}");
    }
    // A miss everywhere: 404, and asked once however often it is asked again.
    let missing = "/symbols/nothing.pdb/0123456789ABCDEF0123456789ABCDEF1/nothing.pdb";
    for _ in 0..3 {
        assert_eq!(get(&server.addr, missing).unwrap().0, 404);
    }
    assert_eq!(upstream.asked("nothing.pdb"), 1, "misses are remembered");
    assert_eq!(upstream.asked("/download/symbols/"), upstream_asked + 1);
}

#[test]
fn concurrent_requests_for_one_missing_key_make_one_upstream_request() {
    let w = Workdir::new();
    let (root, keys) = symsrv_tree(&w);
    let log = w.path("upstream.log");
    let upstream = StaticServer::start(&root, &log);
    let addr = upstream.addr.clone();
    let server = serve_with_upstream(
        &empty_store(&w),
        &w.path("cache"),
        &[format!("symbols/=http://{addr}/download/symbols/")],
        &[],
    );
    let key = keys.iter().find(|k| k.ends_with(".pdb")).unwrap().clone();
    let original = std::fs::read(root.join("download").join(&key)).unwrap();
    let bodies: Vec<(u16, Vec<u8>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let (addr, key) = (&server.addr, &key);
                scope.spawn(move || {
                    let (status, _, body) = get(addr, &format!("/{key}")).unwrap();
                    (status, body)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (status, body) in bodies {
        assert_eq!((status, body == original), (200, true));
    }
    assert_eq!(
        upstream.asked(&key),
        1,
        "eight requests, one upstream request"
    );
}

#[test]
fn an_upstream_answering_the_wrong_file_for_a_build_id_is_not_served_nor_cached() {
    let w = Workdir::new();
    let asked_id = "0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    build_split_elf(
        &w,
        "other",
        "0xbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
        "x - 1",
    );
    let wrong = std::fs::read(w.path("other/app.debug")).unwrap();
    let asked_hex = asked_id.trim_start_matches("0x");
    let dir = w.path("liar").join(format!("buildid/{asked_hex}"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("debuginfo"), &wrong).unwrap();
    let log = w.path("upstream.log");
    let upstream = StaticServer::start(&w.path("liar"), &log);
    let addr = upstream.addr.clone();
    let cache = w.path("cache");
    let server = serve_with_upstream(&empty_store(&w), &cache, &[format!("http://{addr}")], &[]);
    let mut find = debuginfod_client("debuginfod-find", &w, &server);
    std::fs::create_dir_all(w.path("run")).unwrap();
    find.args(["debuginfo", asked_hex]);
    let out = find.output().unwrap();
    assert!(
        !out.status.success(),
        "debuginfod-find must not get the wrong file"
    );
    let path = format!("/buildid/{asked_hex}/debuginfo");
    // Refused lately: 502 without asking again.
    let (status, _, _) = get(&server.addr, &path).unwrap();
    assert_eq!(status, 502);
    assert_eq!(
        upstream.asked(&path),
        1,
        "a refused answer is remembered, not asked again"
    );
    let cached: Vec<_> = walkdir::WalkDir::new(&cache)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file() && e.file_name() != ".symdex-upstream-cache")
        .collect();
    assert!(cached.is_empty(), "nothing cached: {cached:?}");
}

#[test]
fn an_upstream_that_trickles_is_cut_at_the_timeout() {
    let w = Workdir::new();
    let port = free_port();
    // Promises 100,000 bytes, then sends one a second.
    let script = format!(
        r#"
import http.server, time
class Slow(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "100000")
        self.end_headers()
        for _ in range(100000):
            self.wfile.write(b"x"); self.wfile.flush(); time.sleep(1)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", {port}), Slow).serve_forever()
"#
    );
    let _upstream = Running(
        Command::new("python3")
            .args(["-c", &script])
            .spawn()
            .unwrap(),
    );
    let addr = format!("127.0.0.1:{port}");
    wait_for("the trickling server", || {
        std::net::TcpStream::connect(&addr).is_ok()
    });
    let server = serve_with_upstream(
        &empty_store(&w),
        &w.path("cache"),
        &[format!("http://{addr}")],
        &["--upstream-timeout", "2"],
    );
    let started = Instant::now();
    // Nothing, or an answer cut short.
    let answer = get(&server.addr, "/buildid/abcdef/debuginfo");
    assert!(started.elapsed() < Duration::from_secs(20), "cut, not hung");
    assert!(answer.is_none_or(|(_, _, body)| body.len() < 100_000));
}

/// A cache that cannot be written (here: a file where the key's folder must go; a full disk
/// alike) identifies upstream answers in memory and keeps none: every request asks upstream
/// again.
#[test]
fn an_unwritable_cache_identifies_answers_in_memory_and_keeps_none() {
    use sha2::Digest;
    let w = Workdir::new();
    let id = "0x77665544332211009988776655443322110099aa";
    build_split_elf(&w, "tree", id, "x * 3");
    let hex = id.trim_start_matches("0x");
    let key = format!("buildid/{hex}/debuginfo");
    let dir = w.path("upstream").join(format!("buildid/{hex}"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(w.path("tree/app.debug"), dir.join("debuginfo")).unwrap();
    let log = w.path("upstream.log");
    let upstream = StaticServer::start(&w.path("upstream"), &log);
    let addr = upstream.addr.clone();
    let cache = w.path("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let hash: String = sha2::Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    // A cache symdex made (tagged), then broken.
    std::fs::write(cache.join(".symdex-upstream-cache"), "").unwrap();
    std::fs::write(cache.join(&hash[..2]), "in the way").unwrap();
    let server = serve_with_upstream(&empty_store(&w), &cache, &[format!("http://{addr}")], &[]);
    let original = std::fs::read(w.path("tree/app.debug")).unwrap();
    for _ in 0..2 {
        let (status, _, body) = get(&server.addr, &format!("/{key}")).unwrap();
        assert_eq!((status, body == original), (200, true));
    }
    assert_eq!(upstream.asked(&key), 2, "nothing cached");
}
