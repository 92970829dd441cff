//! Real clients against `symdex serve`: debuginfod-find, gdb and lldb-19 fetch what symdex
//! indexed, and the server behaves like a symbol server (ranges, HEAD, 404 for misses).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::{readelf_build_id, symdex, Workdir};

/// A running `symdex serve`, stopped on drop.
struct Server {
    child: Child,
    addr: String,
    /// Kept open so the server never writes to a closed pipe.
    _stdout: BufReader<std::process::ChildStdout>,
}

impl Server {
    fn start(store: &Path) -> Server {
        let mut child = symdex()
            .arg("serve")
            .arg(store)
            .args(["--addr", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut first = String::new();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        stdout.read_line(&mut first).unwrap();
        let addr = first
            .split("http://")
            .nth(1)
            .unwrap_or_else(|| panic!("no address in {first:?}"))
            .trim()
            .to_string();
        Server {
            child,
            addr,
            _stdout: stdout,
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// One raw HTTP/1.1 request: (status, headers lowercased, body).
    fn request(&self, method: &str, path: &str, extra: &str) -> (u16, String, Vec<u8>) {
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n{extra}\r\n",
            self.addr
        )
        .unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
        let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        (status, head, raw[split + 4..].to_vec())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

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

/// Builds a C program with -g, splits its debug file, strips it, indexes both, serves them.
/// The stripped binary is copied alone into `run/` so no debugger finds the debug file locally.
fn setup() -> (Workdir, Server, String) {
    let w = Workdir::new();
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
    let build_id = readelf_build_id(&w, "app").unwrap();
    let store = w.path("store");
    let out = symdex()
        .args(["index", "--store"])
        .arg(&store)
        .arg(w.path("app.debug"))
        .arg(w.path("app.stripped"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let server = Server::start(&store);
    (w, server, build_id)
}

fn client(program: &str, w: &Workdir, server: &Server) -> Command {
    let mut cmd = Command::new(program);
    cmd.current_dir(w.path("run"))
        .env("DEBUGINFOD_URLS", server.url())
        .env("DEBUGINFOD_CACHE_PATH", w.path(&format!("cache-{program}")))
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

#[test]
fn debuginfod_find_fetches_byte_identical_files() {
    let (w, server, build_id) = setup();
    for (what, original) in [("debuginfo", "app.debug"), ("executable", "app.stripped")] {
        let mut cmd = client("debuginfod-find", &w, &server);
        cmd.args([what, &build_id]);
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let fetched = String::from_utf8(out.stdout).unwrap();
        assert_eq!(
            std::fs::read(fetched.trim()).unwrap(),
            std::fs::read(w.path(original)).unwrap(),
            "{what} differs"
        );
    }
    let mut miss = client("debuginfod-find", &w, &server);
    miss.args(["debuginfo", "00112233445566778899aabbccddeeff00112233"]);
    assert!(
        !miss.output().unwrap().status.success(),
        "a missing build id was found"
    );
}

#[test]
fn gdb_resolves_a_function_to_file_and_line() {
    let (w, server, _) = setup();
    let mut cmd = client("gdb", &w, &server);
    cmd.args([
        "-batch",
        "-nx",
        "-iex",
        "set debuginfod enabled on",
        "-iex",
        "set debug-file-directory /nonexistent",
        "-ex",
        "info line compute",
        "./app",
    ]);
    let text = output(cmd);
    assert!(text.contains("Line 2 of \"prog.c\""), "gdb said:\n{text}");
}

#[test]
fn lldb_resolves_a_function_through_its_debuginfod_locator() {
    let (w, server, _) = setup();
    let mut cmd = client("lldb-19", &w, &server);
    cmd.args(["-b", "-o", "image lookup -n compute", "./app"]);
    let text = output(cmd);
    assert!(text.contains("compute at prog.c:2"), "lldb said:\n{text}");
    // Without the server, lldb finds no line information: the store is what answered.
    let mut alone = Command::new("lldb-19");
    alone
        .current_dir(w.path("run"))
        .env_remove("DEBUGINFOD_URLS")
        .env("HOME", w.path("run"));
    alone.args(["-b", "-o", "image lookup -n compute", "./app"]);
    assert!(!output(alone).contains("prog.c:2"));
}

#[test]
fn the_server_speaks_symbol_server_http() {
    let (w, server, build_id) = setup();
    let path = format!("/buildid/{build_id}/debuginfo");
    let original = std::fs::read(w.path("app.debug")).unwrap();

    let (status, head, body) = server.request("GET", &path, "");
    assert_eq!(status, 200);
    assert!(
        head.contains("content-type: application/octet-stream"),
        "{head}"
    );
    assert_eq!(body, original);

    let (status, head, body) = server.request("HEAD", &path, "");
    assert_eq!(status, 200);
    assert!(
        head.contains(&format!("content-length: {}", original.len())),
        "{head}"
    );
    assert!(body.is_empty());

    let (status, _, body) = server.request("GET", &path, "Range: bytes=16-31\r\n");
    assert_eq!(status, 206);
    assert_eq!(body, original[16..32]);

    for missing in [
        "/buildid/0000/debuginfo".to_string(),
        "/buildid".to_string(),
        "/_symdex/refs".to_string(),
        "/%5Fmanifest/".to_string(),
        "/../../etc/passwd".to_string(),
        "/symbols/".to_string(),
    ] {
        let (status, _, _) = server.request("GET", &missing, "");
        assert_eq!(status, 404, "{missing}");
    }
}
