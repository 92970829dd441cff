//! `serve --upstream` against hostile upstreams (small python servers on 127.0.0.0/8): what
//! they answer is served and cached only when it is identified as the file the key names,
//! they cannot send symdex elsewhere, exhaust its disk or memory, reach its private folders or
//! learn its credentials; and the operator's cache directory is symdex's only when symdex
//! made it. THREATS.md, the upstream and operator rows.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{build_pe_and_pdb, build_split_elf, get, ok, symdex, Server, Workdir};

/// A hostile upstream: `python3 - HOST PORT LOG MODE ARG`. Every request is logged as
/// `METHOD PATH auth=<Authorization or ->`. Modes: `random` (ARG bytes of noise for any
/// path), `file` (the file ARG for any path; 404 once it is gone), `slow` (404 after ARG
/// seconds), `redirect` (302 to ARG
/// followed by the path), `big` and `big-unsized` (a GiB of zeros, generated as it is sent,
/// with and without `Content-Length`).
const HOSTILE: &str = r#"
import http.server, os, random, sys, time
host, port, log, mode, arg = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
GIB = 1 << 30
class Hostile(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    def answer(self, head):
        with open(log, "a") as f:
            f.write("%s %s auth=%s\n" % (self.command, self.path, self.headers.get("Authorization", "-")))
        if mode == "slow":
            time.sleep(float(arg))
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if mode == "redirect":
            self.send_response(302)
            self.send_header("Location", arg + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if mode.startswith("big"):
            self.send_response(200)
            if mode == "big":
                self.send_header("Content-Length", str(GIB))
            self.end_headers()
            chunk = bytes(1 << 16)
            try:
                for _ in range(0 if head else GIB // len(chunk)):
                    self.wfile.write(chunk)
            except OSError:
                pass
            return
        if mode == "file" and not os.path.exists(arg):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = random.Random(7).randbytes(int(arg)) if mode == "random" else open(arg, "rb").read()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if not head:
            self.wfile.write(data)
    def do_GET(self):
        self.answer(False)
    def do_HEAD(self):
        self.answer(True)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer((host, port), Hostile).serve_forever()
"#;

struct Hostile {
    child: Child,
    addr: String,
    log: PathBuf,
}

impl Hostile {
    fn start(w: &Workdir, host: &str, mode: &str, arg: &str) -> Hostile {
        let port = std::net::TcpListener::bind((host, 0))
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let log = w.path(&format!("{mode}-{host}-{port}.log"));
        std::fs::write(&log, "").unwrap();
        let mut child = Command::new("python3")
            .args(["-c", HOSTILE, host, &port.to_string()])
            .arg(&log)
            .args([mode, arg])
            .stdin(Stdio::null())
            .spawn()
            .expect("python3");
        let addr = format!("{host}:{port}");
        let start = Instant::now();
        while std::net::TcpStream::connect(&addr).is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the hostile upstream exited: {status}");
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "{addr} never came up"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Hostile { child, addr, log }
    }

    fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    fn lines(&self) -> Vec<String> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines().map(str::to_string).collect()
    }

    /// Requests of `method` whose path contains `part`.
    fn asked(&self, method: &str, part: &str) -> usize {
        let prefix = format!("{method} ");
        let lines = self.lines();
        lines
            .iter()
            .filter(|l| l.starts_with(&prefix) && l.contains(part))
            .count()
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn empty_store(w: &Workdir) -> PathBuf {
    let store = w.path("store");
    std::fs::create_dir_all(&store).unwrap();
    store
}

/// `serve` with the given `--upstream`s and extra flags, its cache at `cache`.
fn serve(store: &Path, cache: &Path, upstreams: &[String], extra: &[&str]) -> Server {
    let mut args = vec!["--upstream-cache", cache.to_str().unwrap()];
    for upstream in upstreams {
        args.extend(["--upstream", upstream.as_str()]);
    }
    args.extend(extra);
    Server::start_with(store, &args, None)
}

/// The files in the cache directory other than its tag.
fn cached_files(cache: &Path) -> Vec<PathBuf> {
    walkdir::WalkDir::new(cache)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file() && e.file_name() != ".symdex-upstream-cache")
        .map(|e| e.path().to_path_buf())
        .collect()
}

/// Never the whole of `len` bytes with a 200: nothing, a broken answer, or another status.
fn assert_not_served(answer: Option<(u16, String, Vec<u8>)>, len: usize, what: &str) {
    if let Some((status, _, body)) = answer {
        assert!(
            status != 200 || body.len() < len,
            "{what}: served whole ({status}, {} bytes)",
            body.len()
        );
    }
}

const PDB_KEY: &str = "ntdll.pdb/0123456789ABCDEF0123456789ABCDEF1/ntdll.pdb";
const DLL_KEY: &str = "kernel32.dll/5A1B2C3D9e000/kernel32.dll";
const BUILD_ID: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

#[test]
fn random_bytes_are_refused_for_pdb_and_dll_keys_and_behind_a_prefix_and_asked_once() {
    let w = Workdir::new();
    let noise = Hostile::start(&w, "127.0.0.1", "random", "100000");
    let cache = w.path("cache");
    let server = serve(
        &empty_store(&w),
        &cache,
        &[
            format!("symbols/={}", noise.url()),
            format!("teamb/={}", noise.url()),
        ],
        &[],
    );
    let refused = [
        format!("/symbols/{PDB_KEY}"),
        format!("/symbols/{DLL_KEY}"),
        format!("/teamb/symbols/{PDB_KEY}"),
        format!("/teamb/buildid/{BUILD_ID}/debuginfo"),
        format!("/teamb/buildid/{BUILD_ID}/executable"),
        "/teamb/unified/01/23456789abcdef0123456789abcdef1/debuginfo".to_string(),
    ];
    for path in &refused {
        assert_not_served(get(&server.addr, path), 100_000, path);
        // Asked twice more: refused from memory (502), the upstream not asked again.
        for _ in 0..2 {
            assert_eq!(get(&server.addr, path).unwrap().0, 502, "{path}");
        }
        let rest = path.split_once('/').unwrap().1.split_once('/').unwrap().1;
        assert_eq!(noise.asked("GET", rest), 1, "{path}: one upstream request");
    }
    assert!(
        cached_files(&cache).is_empty(),
        "{:?}",
        cached_files(&cache)
    );

    // A format symdex does not read (a cabinet-compressed PDB) passes as it came, and is kept.
    let compressed = "/symbols/ntdll.pd_/0123456789ABCDEF0123456789ABCDEF1/ntdll.pd_";
    let (status, head, body) = get(&server.addr, compressed).unwrap();
    assert_eq!((status, body.len()), (200, 100_000));
    assert!(head.contains("x-symdex-source: upstream"), "{head}");
    assert_eq!(cached_files(&cache).len(), 1);
}

/// A SymSrv-style store of a DLL and its PDB: the keys of each, by a scratch `index`.
fn dll_and_pdb_keys(w: &Workdir) -> (String, String) {
    build_pe_and_pdb(w, "Hostile.pdb", "Hostile.dll");
    ok(symdex()
        .args(["index", "--layout", "symstore", "--store"])
        .arg(w.path("scratch"))
        .arg(w.path("Hostile.dll"))
        .arg(w.path("Hostile.pdb"))
        .output()
        .unwrap());
    let keys: Vec<String> = walkdir::WalkDir::new(w.path("scratch/symbols"))
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let relative = e.path().strip_prefix(w.path("scratch")).unwrap();
            relative.to_string_lossy().into_owned()
        })
        .collect();
    let find = |end: &str| {
        keys.iter()
            .find(|k| k.ends_with(end))
            .unwrap_or_else(|| panic!("no {end} key in {keys:?}"))
            .clone()
    };
    (find("Hostile.dll"), find("Hostile.pdb"))
}

#[test]
fn a_dll_is_not_served_for_its_pdbs_key() {
    let w = Workdir::new();
    let (dll_key, pdb_key) = dll_and_pdb_keys(&w);
    let dll = std::fs::read(w.path("Hostile.dll")).unwrap();
    let upstream = Hostile::start(
        &w,
        "127.0.0.1",
        "file",
        w.path("Hostile.dll").to_str().unwrap(),
    );
    let cache = w.path("cache");
    let server = serve(&empty_store(&w), &cache, &[upstream.url()], &[]);
    let pdb_path = format!("/{pdb_key}");
    assert_not_served(get(&server.addr, &pdb_path), dll.len(), &pdb_key);
    assert_eq!(get(&server.addr, &pdb_path).unwrap().0, 502);
    assert!(cached_files(&cache).is_empty());
    // The DLL under its own key is served: the refusal was the key's, not the file's.
    let (status, _, body) = get(&server.addr, &format!("/{dll_key}")).unwrap();
    assert_eq!((status, body == dll), (200, true), "{dll_key}");
}

/// A cache symdex made whose every shard is a file: nothing can be written in it.
fn unwritable_cache(w: &Workdir) -> PathBuf {
    let cache = w.path("cache");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::write(cache.join(".symdex-upstream-cache"), "").unwrap();
    for shard in 0..=255u8 {
        std::fs::write(cache.join(format!("{shard:02x}")), "in the way").unwrap();
    }
    cache
}

#[test]
fn a_wrong_elf_is_refused_with_the_cache_unwritable_and_the_right_one_identified_in_memory() {
    let w = Workdir::new();
    build_split_elf(&w, "other", &format!("0x{}", "b".repeat(40)), "x - 1");
    let debug = std::fs::read(w.path("other/app.debug")).unwrap();
    let liar = Hostile::start(
        &w,
        "127.0.0.1",
        "file",
        w.path("other/app.debug").to_str().unwrap(),
    );
    let server = serve(&empty_store(&w), &unwritable_cache(&w), &[liar.url()], &[]);
    let wrong = format!("/buildid/{BUILD_ID}/debuginfo");
    assert_not_served(get(&server.addr, &wrong), debug.len(), &wrong);
    assert_eq!(get(&server.addr, &wrong).unwrap().0, 502);
    // The file the key names: identified in memory and served, whole, a range of it too,
    // and asked again each time (nothing is kept).
    let right = format!("/buildid/{}/debuginfo", "b".repeat(40));
    let (status, _, body) = get(&server.addr, &right).unwrap();
    assert_eq!((status, body == debug), (200, true));
    let (status, _, body) = server.request("GET", &right, "Range: bytes=4-9\r\n");
    assert_eq!((status, body.as_slice()), (206, &debug[4..10]));
    assert_eq!(liar.asked("GET", &right), 2);
}

#[test]
fn wrong_elf_files_are_never_served_under_descriptor_pressure() {
    let w = Workdir::new();
    build_split_elf(&w, "other", &format!("0x{}", "b".repeat(40)), "x - 1");
    let debug = std::fs::read(w.path("other/app.debug")).unwrap();
    let liar = Hostile::start(
        &w,
        "127.0.0.1",
        "file",
        w.path("other/app.debug").to_str().unwrap(),
    );
    let cache = w.path("cache");
    let args = [
        "--upstream-cache",
        cache.to_str().unwrap(),
        "--upstream",
        &liar.url(),
        "--quiet",
    ];
    // Room for a few connections: downloads and cache files compete for what is left.
    let server = Server::start_with(&empty_store(&w), &args, Some(48));
    let answers: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..40)
            .map(|i| {
                let addr = &server.addr;
                scope.spawn(move || {
                    let path = format!("/buildid/{i:02x}{}/debuginfo", "c".repeat(38));
                    (path.clone(), get(addr, &path))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (path, answer) in answers {
        assert_not_served(answer, debug.len(), &path);
    }
    assert!(liar.asked("GET", "/buildid/") > 0, "the upstream was asked");
    assert!(
        cached_files(&cache).is_empty(),
        "{:?}",
        cached_files(&cache)
    );
}

#[test]
fn a_redirect_to_another_loopback_address_is_not_followed_unless_listed() {
    let w = Workdir::new();
    let id = "d".repeat(40);
    build_split_elf(&w, "tree", &format!("0x{id}"), "x * 9");
    let debug = std::fs::read(w.path("tree/app.debug")).unwrap();
    let metadata = Hostile::start(
        &w,
        "127.0.0.2",
        "file",
        w.path("tree/app.debug").to_str().unwrap(),
    );
    let target = format!("http://{}/latest/meta-data", metadata.addr);
    let upstream = Hostile::start(&w, "127.0.0.1", "redirect", &target);
    let credentialed = format!("http://ci:t0ken@{}/", upstream.addr);
    let key = format!("/buildid/{id}/debuginfo");

    let server = serve(
        &empty_store(&w),
        &w.path("cache"),
        std::slice::from_ref(&credentialed),
        &[],
    );
    let (status, _, _) = get(&server.addr, &key).unwrap();
    assert_eq!(status, 404, "a failed upstream is a miss");
    assert_eq!(upstream.asked("GET", &key), 1);
    assert!(metadata.lines().is_empty(), "{:?}", metadata.lines());
    drop(server);

    // Listed by the operator (and the upstream is itself on loopback): followed, and the
    // upstream's credentials stay with the upstream.
    let listed = metadata.addr.clone();
    let server = serve(
        &empty_store(&w),
        &w.path("cache-listed"),
        &[credentialed],
        &["--upstream-redirect-host", &listed],
    );
    let (status, _, body) = get(&server.addr, &key).unwrap();
    assert_eq!((status, body == debug), (200, true));
    assert_eq!(
        metadata.lines(),
        [format!("GET /latest/meta-data{key} auth=-")]
    );
    assert!(
        upstream
            .lines()
            .iter()
            .all(|l| l.ends_with("auth=Basic Y2k6dDBrZW4=")),
        "{:?}",
        upstream.lines()
    );
}

/// The largest the cache directory (partial downloads included) and the server's resident
/// memory get while `work` runs.
fn peaks(server: &Server, cache: &Path, work: impl FnOnce()) -> (u64, u64) {
    let (disk, rss, done) = (AtomicU64::new(0), AtomicU64::new(0), AtomicBool::new(false));
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                let bytes: u64 = walkdir::WalkDir::new(cache)
                    .into_iter()
                    .filter_map(Result::ok)
                    .filter_map(|e| e.metadata().ok())
                    .filter(|m| m.is_file())
                    .map(|m| m.len())
                    .sum();
                disk.fetch_max(bytes, Ordering::SeqCst);
                rss.fetch_max(server.rss_kib() << 10, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        work();
        done.store(true, Ordering::SeqCst);
    });
    (disk.into_inner(), rss.into_inner())
}

#[test]
fn a_gib_body_is_cut_at_the_cache_cap_and_the_max_size_with_disk_and_memory_bounded() {
    let w = Workdir::new();
    let sized = Hostile::start(&w, "127.0.0.1", "big", "");
    let unsized_ = Hostile::start(&w, "127.0.0.1", "big-unsized", "");
    let key = "ntdll.pd_/0123456789ABCDEF0123456789ABCDEF1/ntdll.pd_";
    for (cache, flags) in [
        ("cache-capped", ["--upstream-cache-max", "1"]),
        ("cache-max-size", ["--upstream-max-size", "1"]),
    ] {
        let cache = w.path(cache);
        let server = serve(
            &empty_store(&w),
            &cache,
            &[
                format!("sized/={}", sized.url()),
                format!("unsized/={}", unsized_.url()),
            ],
            &flags,
        );
        let started = Instant::now();
        let (disk, rss) = peaks(&server, &cache, || {
            // A Content-Length past the bound: refused before a byte is read.
            let (status, _, _) = get(&server.addr, &format!("/sized/{key}")).unwrap();
            assert_eq!(status, 502, "{flags:?}");
            // No length: cut where it passes the bound.
            let answer = get(&server.addr, &format!("/unsized/{key}"));
            assert_not_served(answer, 2 << 20, &format!("{flags:?}"));
        });
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{flags:?}: cut, not read"
        );
        assert!(
            disk < 2 << 20,
            "{flags:?}: the cache peaked at {disk} bytes"
        );
        assert!(
            rss < 200 << 20,
            "{flags:?}: the server peaked at {rss} bytes resident"
        );
        assert!(cached_files(&cache).is_empty());
        assert_eq!(
            get(&server.addr, &format!("/unsized/{key}")).unwrap().0,
            502
        );
        assert_eq!(unsized_.asked("GET", key), 1, "the refusal is remembered");
        drop(server);
        std::fs::write(&unsized_.log, "").unwrap();
    }
}

#[test]
fn upstream_downloads_at_once_are_capped() {
    let w = Workdir::new();
    let slow = Hostile::start(&w, "127.0.0.1", "slow", "6");
    let server = serve(
        &empty_store(&w),
        &w.path("cache"),
        &[slow.url()],
        &["--upstream-downloads", "1", "--upstream-timeout", "2"],
    );
    let keys: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|c| format!("/buildid/{}/debuginfo", c.repeat(40)))
        .collect();
    let ask = |key: &str| get(&server.addr, key).map_or(0, |a| a.0);
    let statuses: Vec<u16> = std::thread::scope(|scope| {
        // The first holds the one place for the timeout (its upstream takes 6 s); the second
        // and the third queue for it, each as long as the timeout: one of them gets it when
        // the first is cut, the other gives up (which one is a matter of milliseconds: the
        // second's wait ends about when the first's exchange does).
        let first = scope.spawn(|| ask(&keys[0]));
        let start = Instant::now();
        while slow.asked("GET", &keys[0]) == 0 {
            assert!(start.elapsed() < Duration::from_secs(10), "never asked");
            std::thread::sleep(Duration::from_millis(20));
        }
        let second = scope.spawn(|| ask(&keys[1]));
        std::thread::sleep(Duration::from_millis(300));
        let third = ask(&keys[2]);
        let mut queued = [second.join().unwrap(), third];
        queued.sort();
        vec![first.join().unwrap(), queued[0], queued[1]]
    });
    assert_eq!(
        statuses,
        [404, 404, 503],
        "one waited for a place, then gave up"
    );
    assert_eq!(slow.asked("GET", "/buildid/"), 2, "one exchange at a time");
}

#[test]
fn a_head_of_a_miss_is_a_head_upstream() {
    let w = Workdir::new();
    let noise = Hostile::start(&w, "127.0.0.1", "random", "100000");
    let gone = Hostile::start(&w, "127.0.0.1", "file", w.path("nothing").to_str().unwrap());
    let server = serve(
        &empty_store(&w),
        &w.path("cache"),
        &[
            format!("symbols/={}", noise.url()),
            format!("gone/={}", gone.url()),
        ],
        &[],
    );
    let (status, head, body) = server.request("HEAD", &format!("/symbols/{PDB_KEY}"), "");
    assert_eq!(status, 200);
    assert!(body.is_empty());
    assert!(head.contains("content-length: 100000"), "{head}");
    assert!(head.contains("x-symdex-source: upstream"), "{head}");
    assert_eq!(noise.asked("HEAD", PDB_KEY), 1);
    assert_eq!(noise.asked("GET", PDB_KEY), 0, "nothing downloaded");
    assert!(cached_files(&w.path("cache")).is_empty());
    let (status, _, _) = server.request("HEAD", &format!("/gone/{PDB_KEY}"), "");
    assert_eq!(status, 404);
    assert_eq!(
        (gone.asked("HEAD", PDB_KEY), gone.asked("GET", PDB_KEY)),
        (1, 0)
    );
}

#[test]
fn private_folders_behind_a_prefix_are_never_asked_in_any_spelling() {
    let w = Workdir::new();
    let noise = Hostile::start(&w, "127.0.0.1", "random", "1000");
    let server = serve(
        &empty_store(&w),
        &w.path("cache"),
        &[format!("teamb/={}", noise.url()), noise.url()],
        &[],
    );
    for path in [
        "/teamb/_symdex/owners.json",
        "/teamb/_SYMDEX/owners.json",
        "/teamb/_%C5%BFymdex/owners.json",
        "/teamb/_manife%C5%BFt/dt=2026-01-01/a.jsonl",
        "/teamb/buildid/_symdex/x",
        "/_%C5%BFymdex/owners.json",
        "/_Manifest/x",
    ] {
        assert_eq!(get(&server.addr, path).unwrap().0, 404, "{path}");
    }
    assert!(noise.lines().is_empty(), "{:?}", noise.lines());
    // What is not private is asked (a debuginfod source passes as it comes).
    let source = format!("/teamb/buildid/{BUILD_ID}/source/src/a.c");
    assert_eq!(get(&server.addr, &source).unwrap().0, 200);
    assert_eq!(noise.lines().len(), 1);
}

#[test]
fn a_cache_pointed_at_a_folder_with_foreign_files_is_refused_and_left_untouched() {
    let w = Workdir::new();
    let shared = w.path("shared");
    std::fs::create_dir_all(shared.join("projects")).unwrap();
    std::fs::write(shared.join("projects/thesis.db"), "years of work").unwrap();
    std::fs::create_dir_all(shared.join("ab")).unwrap();
    std::fs::write(shared.join("ab").join("c".repeat(62)), "looks like ours").unwrap();
    let before: Vec<_> = walkdir::WalkDir::new(&shared)
        .into_iter()
        .filter_map(Result::ok)
        .map(|e| (e.path().to_path_buf(), std::fs::read(e.path()).ok()))
        .collect();
    let mut serve = symdex()
        .arg("serve")
        .arg(empty_store(&w))
        .args(["--addr", "127.0.0.1:0", "--upstream", "http://127.0.0.1:9/"])
        .arg("--upstream-cache")
        .arg(&shared)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(w.path("stderr")).unwrap())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = serve.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(20) {
            let _ = serve.kill();
            let _ = serve.wait();
            panic!("serve started with a foreign cache directory");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = std::fs::read_to_string(w.path("stderr")).unwrap();
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains(shared.to_str().unwrap()) && stderr.contains(".symdex-upstream-cache"),
        "{stderr}"
    );
    let after: Vec<_> = walkdir::WalkDir::new(&shared)
        .into_iter()
        .filter_map(Result::ok)
        .map(|e| (e.path().to_path_buf(), std::fs::read(e.path()).ok()))
        .collect();
    assert_eq!(before, after, "untouched");
}

/// `serve` with its stdout and stderr kept; (the address, a stop that returns both).
fn serve_logged(w: &Workdir, args: &[&str]) -> (String, impl FnOnce() -> String) {
    let stderr = w.path("serve.stderr");
    let mut child = symdex()
        .arg("serve")
        .arg(empty_store(w))
        .args(["--addr", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    let addr = first
        .split("http://")
        .nth(1)
        .expect("an address")
        .trim()
        .to_string();
    let stop = move || {
        let _ = child.kill();
        let _ = child.wait();
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut rest);
        format!(
            "{first}{rest}{}",
            std::fs::read_to_string(stderr).unwrap_or_default()
        )
    };
    (addr, stop)
}

#[test]
fn upstream_credentials_are_sent_but_never_printed() {
    let w = Workdir::new();
    let noise = Hostile::start(&w, "127.0.0.1", "random", "1000");
    let token = "s3cr3tT0ken";
    let in_url = format!("symbols/=http://ci:{token}@{}/", noise.addr);
    let cache = w.path("cache");
    let (addr, stop) = serve_logged(
        &w,
        &[
            "--upstream-cache",
            cache.to_str().unwrap(),
            "--upstream",
            &in_url,
        ],
    );
    // A refusal: a line on stderr that names the upstream.
    assert_not_served(get(&addr, &format!("/symbols/{PDB_KEY}")), 1000, PDB_KEY);
    let output = stop();
    assert!(!output.contains(token), "{output}");
    assert!(
        output.contains(&format!("http://{}/", noise.addr)),
        "{output}"
    );
    assert!(output.contains("not served"), "{output}");
    assert!(
        output.contains("process list"),
        "the operator is warned: {output}"
    );
    assert!(
        noise
            .lines()
            .iter()
            .all(|l| l.ends_with("auth=Basic Y2k6czNjcjN0VDBrZW4=")),
        "{:?}",
        noise.lines()
    );

    // From a file: nothing of it on the command line or in the output.
    let file = w.path("upstream-credentials");
    std::fs::write(
        &file,
        format!("# msdl mirror\nhttp://{}/ {token}\n", noise.addr),
    )
    .unwrap();
    std::fs::write(&noise.log, "").unwrap();
    let (addr, stop) = serve_logged(
        &w,
        &[
            "--upstream-cache",
            cache.to_str().unwrap(),
            "--upstream",
            &format!("symbols/=http://{}/", noise.addr),
            "--upstream-credentials",
            file.to_str().unwrap(),
        ],
    );
    let compressed = "/symbols/ntdll.pd_/0123456789ABCDEF0123456789ABCDEF1/ntdll.pd_";
    assert_eq!(get(&addr, compressed).unwrap().0, 200);
    let output = stop();
    assert!(!output.contains(token), "{output}");
    assert!(!output.contains("process list"), "{output}");
    assert_eq!(
        noise.lines(),
        [format!(
            "GET /ntdll.pd_/0123456789ABCDEF0123456789ABCDEF1/ntdll.pd_ auth=Bearer {token}"
        )]
    );

    // A URL refused at start: the error names it without its credentials.
    let out = symdex()
        .arg("serve")
        .arg(empty_store(&w))
        .args(["--upstream", &format!("_x=https://ci:{token}@h.example/")])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && said.contains("h.example"),
        "{said}"
    );
    assert!(!said.contains(token), "{said}");
}

#[test]
fn cached_answers_are_asked_for_again_after_their_age() {
    let w = Workdir::new();
    std::fs::write(w.path("a.pd_"), "compressed bytes").unwrap();
    std::fs::write(w.path("b.pd_"), "other bytes").unwrap();
    let a = Hostile::start(&w, "127.0.0.1", "file", w.path("a.pd_").to_str().unwrap());
    let b = Hostile::start(&w, "127.0.0.1", "file", w.path("b.pd_").to_str().unwrap());
    let cache = w.path("cache");
    let server = serve(
        &empty_store(&w),
        &cache,
        &[format!("a/={}", a.url()), format!("b/={}", b.url())],
        &["--upstream-max-age", "0"],
    );
    let key = "x.pd_/0123456789ABCDEF0123456789ABCDEF1/x.pd_";
    for asked in 1..=2 {
        let (status, _, body) = get(&server.addr, &format!("/a/{key}")).unwrap();
        assert_eq!((status, body.as_slice()), (200, &b"compressed bytes"[..]));
        assert_eq!(a.asked("GET", key), asked, "asked again once stale");
    }
    // No longer upstream: no longer cached either.
    std::fs::remove_file(w.path("a.pd_")).unwrap();
    assert_eq!(get(&server.addr, &format!("/a/{key}")).unwrap().0, 404);
    assert!(cached_files(&cache).is_empty());
    // The upstream down: what was cached is served stale.
    assert_eq!(get(&server.addr, &format!("/b/{key}")).unwrap().0, 200);
    drop(b);
    let (status, _, body) = get(&server.addr, &format!("/b/{key}")).unwrap();
    assert_eq!((status, body.as_slice()), (200, &b"other bytes"[..]));
}
