//! Real clients through `symdex serve` from a store with the compressed copies `symdex index`
//! makes: debuginfod-find and gdb (libdebuginfod, which asks for `deflate, gzip, br, zstd`)
//! get the debug file byte-identical and gdb resolves `main`, with fewer bytes on the wire
//! than the file (a recording proxy between them counts every byte `serve` sent, headers
//! included); lldb-19 resolves through the same server; LLDB 23 (PyPI `lldb-for-pwndbg`, whose
//! own debuginfod client asks for `deflate, gzip, zstd`) gets the zstd copy, caches the file
//! byte-identical and resolves `main`, and cannot without the server; a client that sends no
//! `Accept-Encoding` (samply's symsrv, curl without `--compressed`) gets the raw bytes.

mod common;

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{readelf_build_id, symdex, Server, Workdir};
use symdex_shared::encoded::{copy_key, Encoding};
use symdex_shared::storage::local::relative_path;

const PROGRAM: &str = r#"#include <stdio.h>
int compute(int x) {
    int y = x * 3;
    return y + 1;
}
int main(int argc, char **argv) {
    printf("%d\n", compute(argc));
    return 0;
}
"#;

/// A TCP relay in front of a server that records what passed: the bytes the server sent
/// (headers and bodies) and the requests clients sent. Stopped on drop.
struct Recorder {
    addr: String,
    from_server: Arc<AtomicU64>,
    requests: Arc<Mutex<Vec<u8>>>,
    stop: Arc<AtomicBool>,
}

impl Recorder {
    fn start(server: &str) -> Recorder {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let recorder = Recorder {
            addr: listener.local_addr().unwrap().to_string(),
            from_server: Arc::default(),
            requests: Arc::default(),
            stop: Arc::default(),
        };
        let (server, stop) = (server.to_string(), recorder.stop.clone());
        let (from_server, requests) = (recorder.from_server.clone(), recorder.requests.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let Ok((client, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                client.set_nonblocking(false).unwrap();
                let upstream = TcpStream::connect(&server).unwrap();
                let (c, u) = (client.try_clone().unwrap(), upstream.try_clone().unwrap());
                let requests = requests.clone();
                std::thread::spawn(move || relay(c, u, |b| requests.lock().unwrap().extend(b)));
                let counted = from_server.clone();
                std::thread::spawn(move || {
                    relay(upstream, client, |b| {
                        counted.fetch_add(b.len() as u64, Ordering::SeqCst);
                    })
                });
            }
        });
        recorder
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn bytes_from_server(&self) -> u64 {
        self.from_server.load(Ordering::SeqCst)
    }

    fn requests(&self) -> String {
        String::from_utf8_lossy(&self.requests.lock().unwrap()).to_ascii_lowercase()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Copies `from` to `to` until `from` ends, telling `seen` of each chunk before it is passed
/// on (so a client that has the bytes finds them counted), then ends `to`'s writing half.
fn relay(mut from: TcpStream, mut to: TcpStream, mut seen: impl FnMut(&[u8])) {
    let mut buf = [0u8; 64 << 10];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                seen(&buf[..n]);
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

/// The program built with -g, its debug file split off and both indexed (the index's
/// default: zstd copies); the stripped binary alone in `run/`. The build id.
fn setup(w: &Workdir) -> String {
    std::fs::write(w.path("prog.c"), PROGRAM).unwrap();
    w.run("gcc", &["-g", "-O0", "-o", "app", "prog.c"]);
    w.run("objcopy", &["--only-keep-debug", "app", "app.debug"]);
    w.run(
        "objcopy",
        &[
            "--strip-all",
            "--add-gnu-debuglink=app.debug",
            "app",
            "app.stripped",
        ],
    );
    std::fs::create_dir_all(w.path("run")).unwrap();
    std::fs::copy(w.path("app.stripped"), w.path("run/app")).unwrap();
    let out = symdex()
        .args(["index", "--store"])
        .arg(w.path("store"))
        .arg(w.path("app.debug"))
        .arg(w.path("app.stripped"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    readelf_build_id(w, "app").unwrap()
}

/// `program` run in `run/` asking `url` alone, with a cache of its own (`cache-<name>`).
fn client(w: &Workdir, program: impl AsRef<OsStr>, url: &str, name: &str) -> Command {
    let mut cmd = Command::new(program);
    cmd.current_dir(w.path("run"))
        .env("DEBUGINFOD_URLS", url)
        .env("DEBUGINFOD_CACHE_PATH", w.path(&format!("cache-{name}")))
        .env("HOME", w.path("run"));
    cmd
}

fn output(mut cmd: Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}; scripts/setup.sh installs it"));
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// LLDB 23 ([`common::lldb23`]) run in `run/` on `./app`, then `commands`, its debuginfod
/// plugin set by its settings alone: the servers `url`, or none at all (cleared: with
/// `DEBUGINFOD_URLS` unset or empty this build asks https://debuginfod.pwndbg.re), and a cache
/// of its own (`cache-<name>`); no lldbinit, no `DEBUGINFOD_*` from the environment.
fn lldb23(w: &Workdir, url: Option<&str>, name: &str, commands: &[&str]) -> String {
    let servers = match url {
        Some(url) => format!("settings set plugin.symbol-locator.debuginfod.server-urls {url}"),
        None => "settings clear plugin.symbol-locator.debuginfod.server-urls".to_string(),
    };
    let cache = format!(
        "settings set plugin.symbol-locator.debuginfod.cache-path '{}'",
        w.path(&format!("cache-{name}")).display()
    );
    let mut cmd = Command::new(common::lldb23());
    cmd.current_dir(w.path("run"))
        .env_remove("DEBUGINFOD_URLS")
        .env_remove("DEBUGINFOD_CACHE_PATH")
        .env("HOME", w.path("run"))
        .args(["--no-lldbinit", "--batch"])
        .args(["-o", &servers, "-o", &cache, "-o", "target create ./app"]);
    for command in commands {
        cmd.args(["-o", command]);
    }
    output(cmd)
}

/// The access log's lines for GETs of `path`.
fn logged(log: &Path, path: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["method"] == "GET" && v["path"] == path)
        .collect()
}

#[test]
fn debuginfod_clients_get_the_file_byte_identical_in_fewer_bytes() {
    let w = Workdir::new();
    let build_id = setup(&w);
    let store = w.path("store");
    let key = format!("buildid/{build_id}/debuginfo");
    let debug = std::fs::read(w.path("app.debug")).unwrap();
    let copy = std::fs::read(store.join(relative_path(&copy_key(Encoding::Zstd, &key))))
        .expect("a zstd copy");
    let log = w.path("access.jsonl");
    let server = Server::start_with(&store, &["--access-log", log.to_str().unwrap()], None);

    // debuginfod-find through the recorder: the file as it was, in fewer bytes than it has.
    let recorder = Recorder::start(&server.addr);
    let mut find = client(&w, "debuginfod-find", &recorder.url(), "find");
    find.args(["debuginfo", &build_id]);
    assert_eq!(common::fetched_by(find), debug, "debuginfod-find's file");
    let asked = recorder.requests();
    assert!(
        asked.contains("accept-encoding:") && asked.contains("zstd"),
        "{asked}"
    );
    let wire = recorder.bytes_from_server();
    assert!(
        wire < debug.len() as u64,
        "{wire} bytes on the wire for a {}-byte file",
        debug.len()
    );
    let lines = logged(&log, &format!("/{key}"));
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["encoding"], "zstd");
    assert_eq!(lines[0]["bytes"], copy.len());
    println!(
        "debuginfod-find: {} bytes raw, {} in the copy, {wire} on the wire",
        debug.len(),
        copy.len()
    );

    // The executable too (whatever its coding).
    let mut exe = client(&w, "debuginfod-find", &server.url(), "exe");
    exe.args(["executable", &build_id]);
    let stripped = std::fs::read(w.path("app.stripped")).unwrap();
    assert_eq!(common::fetched_by(exe), stripped);

    // gdb through the recorder resolves main and compute from the served debug file.
    let recorder = Recorder::start(&server.addr);
    let mut gdb = client(&w, "gdb", &recorder.url(), "gdb");
    gdb.args([
        "-batch",
        "-nx",
        "-iex",
        "set debuginfod enabled on",
        "-iex",
        "set debug-file-directory /nonexistent",
        "-ex",
        "info line main",
        "-ex",
        "info line compute",
        "./app",
    ]);
    let said = output(gdb);
    assert!(said.contains("Line 6 of \"prog.c\""), "gdb said:\n{said}");
    assert!(said.contains("Line 2 of \"prog.c\""), "gdb said:\n{said}");
    let cached = std::fs::read(w.path(&format!("cache-gdb/{build_id}/debuginfo"))).unwrap();
    assert_eq!(cached, debug, "gdb's cached debug file");
    let wire = recorder.bytes_from_server();
    assert!(recorder.requests().contains("zstd"));
    assert!(wire < debug.len() as u64, "gdb: {wire} bytes on the wire");
    assert_eq!(logged(&log, &format!("/{key}")).len(), 2);

    // lldb-19's own debuginfod client, whatever it accepts, resolves through the server.
    let mut lldb = client(&w, "lldb-19", &server.url(), "lldb");
    lldb.args(["-b", "-o", "image lookup -n main", "./app"]);
    let said = output(lldb);
    assert!(said.contains("main at prog.c:6"), "lldb said:\n{said}");
}

/// LLDB 23.1 asks `GET /buildid/<id>/debuginfo` (twice: for the debug file its debuglink
/// names, then for a `.dwp` of it) with `Accept-Encoding: deflate, gzip, zstd`. Pointed at
/// `serve` it gets the zstd copy each time (the access log says so, and the recorder counts
/// fewer bytes on the wire than the debug file has, both answers and their headers together),
/// caches the debug file byte-identical and resolves `main` and `compute` to their lines.
/// Without a server, the stripped binary has not even a symbol table: no `main` at all.
#[test]
fn lldb_23_resolves_main_from_the_zstd_copy() {
    let w = Workdir::new();
    let build_id = setup(&w);
    let store = w.path("store");
    let key = format!("buildid/{build_id}/debuginfo");
    let debug = std::fs::read(w.path("app.debug")).unwrap();
    let copy = std::fs::read(store.join(relative_path(&copy_key(Encoding::Zstd, &key))))
        .expect("a zstd copy");
    let log = w.path("access.jsonl");
    let server = Server::start_with(&store, &["--access-log", log.to_str().unwrap()], None);
    let lookups = ["image lookup -n main", "image lookup -n compute"];

    // No server: the binary loads, and nothing resolves main, let alone to a line.
    let said = lldb23(&w, None, "none", &lookups);
    assert!(
        said.contains("Current executable set to"),
        "LLDB 23 said:\n{said}"
    );
    assert!(
        !said.contains("prog.c") && !said.contains("main at"),
        "LLDB 23 without a server said:\n{said}"
    );
    assert!(
        !std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains(&build_id),
        "nobody asked the server"
    );

    // Through the recorder: the zstd copy, decoded to the file, main and compute on their lines.
    let recorder = Recorder::start(&server.addr);
    let said = lldb23(&w, Some(&recorder.url()), "lldb23", &lookups);
    assert!(said.contains("main at prog.c:6"), "LLDB 23 said:\n{said}");
    assert!(
        said.contains("compute at prog.c:2"),
        "LLDB 23 said:\n{said}"
    );
    let asked = recorder.requests();
    assert!(asked.contains(&format!("get /{key} http/1.1")), "{asked}");
    assert!(
        asked.contains("user-agent: debuginfod-llvm/23.1"),
        "{asked}"
    );
    assert!(
        asked.contains("accept-encoding: deflate, gzip, zstd"),
        "{asked}"
    );
    let lines = logged(&log, &format!("/{key}"));
    assert!(!lines.is_empty(), "no GET of /{key} logged");
    for line in &lines {
        assert_eq!(line["status"], 200, "{line}");
        assert_eq!(line["encoding"], "zstd", "{line}");
        assert_eq!(line["bytes"], copy.len(), "{line}");
    }
    let wire = recorder.bytes_from_server();
    assert!(
        wire < debug.len() as u64,
        "{wire} bytes on the wire for {} GETs of a {}-byte file",
        lines.len(),
        debug.len()
    );
    let cached: Vec<_> = std::fs::read_dir(w.path("cache-lldb23"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with(&format!("llvmcache-{build_id}"))
        })
        .collect();
    assert!(!cached.is_empty(), "nothing cached for {build_id}");
    for file in &cached {
        assert!(
            std::fs::read(file).unwrap() == debug,
            "{file:?} is not the debug file"
        );
    }
    println!(
        "LLDB 23: {} GETs of a {}-byte debug file ({} in the copy), {wire} bytes on the wire",
        lines.len(),
        debug.len(),
        copy.len()
    );

    // DEBUGINFOD_URLS and DEBUGINFOD_CACHE_PATH, the settings' defaults, do as well.
    let mut lldb = client(&w, common::lldb23(), &server.url(), "lldb23-env");
    lldb.args([
        "--no-lldbinit",
        "--batch",
        "-o",
        "image lookup -n main",
        "./app",
    ]);
    let said = output(lldb);
    assert!(said.contains("main at prog.c:6"), "LLDB 23 said:\n{said}");
    for line in logged(&log, &format!("/{key}")).iter().skip(lines.len()) {
        assert_eq!(line["encoding"], "zstd", "{line}");
    }
}

#[test]
fn clients_without_accept_encoding_get_the_raw_bytes() {
    let w = Workdir::new();
    let build_id = setup(&w);
    let store = w.path("store");
    let key = format!("buildid/{build_id}/debuginfo");
    let debug = std::fs::read(w.path("app.debug")).unwrap();
    assert!(store
        .join(relative_path(&copy_key(Encoding::Zstd, &key)))
        .is_file());
    let server = Server::start(&store);
    let url = format!("{}/{key}", server.url());
    // What samply's symsrv and curl without --compressed send: no Accept-Encoding.
    let recorder = Recorder::start(&server.addr);
    let plain = w.path("plain");
    let proxied = format!("{}/{key}", recorder.url());
    let out = Command::new("curl")
        .args(["-s", "-f", "-D", "-", "-o"])
        .arg(&plain)
        .arg(&proxied)
        .output()
        .expect("curl");
    assert!(out.status.success());
    let head = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
    assert!(!recorder.requests().contains("accept-encoding"));
    assert!(!head.contains("content-encoding"), "{head}");
    assert_eq!(std::fs::read(&plain).unwrap(), debug, "the raw bytes");
    assert!(recorder.bytes_from_server() > debug.len() as u64);
    // curl --compressed: zstd on the wire, decoded by curl to the same bytes.
    let decoded = w.path("decoded");
    let out = Command::new("curl")
        .args(["-s", "-f", "--compressed", "-D", "-", "-o"])
        .arg(&decoded)
        .arg(&url)
        .output()
        .expect("curl");
    assert!(out.status.success());
    let head = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
    assert!(head.contains("content-encoding: zstd"), "{head}");
    assert_eq!(std::fs::read(&decoded).unwrap(), debug);
}
