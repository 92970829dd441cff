//! Real clients against `symdex serve`: debuginfod-find, gdb and lldb-19 fetch what symdex
//! indexed, and the server behaves like a symbol server (ranges, HEAD, 404 for misses).

mod common;

use std::process::Command;

use common::{readelf_build_id, symdex, Server, Workdir};

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

use common::debuginfod_client as client;

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
        assert_eq!(
            common::fetched_by(cmd),
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
    let cmd = common::gdb_via_debuginfod(&w, &server, "info line compute", "./app");
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

#[test]
fn debuginfod_find_sends_the_token_of_its_headers_file() {
    let (w, _open, build_id) = setup();
    // The server's file holds the token's hash only.
    let token = "ci-reader-7f3a";
    let hash = String::from_utf8(
        Command::new("sha256sum")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write;
                child.stdin.take().unwrap().write_all(token.as_bytes())?;
                child.wait_with_output()
            })
            .unwrap()
            .stdout,
    )
    .unwrap();
    let hash = hash.split_whitespace().next().unwrap();
    std::fs::write(w.path("tokens"), format!("# readers\nsha256:{hash}\n")).unwrap();
    let server = Server::start_with(
        &w.path("store"),
        &["--auth-token-file", w.path("tokens").to_str().unwrap()],
        None,
    );
    let path = format!("/buildid/{build_id}/debuginfo");
    let (status, headers, _) = server.request("HEAD", &path, "");
    assert_eq!(status, 401);
    assert!(headers.contains("www-authenticate: basic"), "{headers}");
    let (status, _, _) = server.request("HEAD", "/buildid/00/debuginfo", "");
    assert_eq!(status, 401, "a miss tells nothing either");

    let mut without = client("debuginfod-find", &w, &server);
    without.args(["debuginfo", &build_id]);
    assert!(!without.output().unwrap().status.success(), "401 must fail");

    std::fs::write(
        w.path("headers"),
        format!("Authorization: Bearer {token}\n"),
    )
    .unwrap();
    let mut with = client("debuginfod-find", &w, &server);
    with.env("DEBUGINFOD_HEADERS_FILE", w.path("headers"))
        .env("DEBUGINFOD_CACHE_PATH", w.path("cache-with-token"))
        .args(["debuginfo", &build_id]);
    assert_eq!(
        common::fetched_by(with),
        std::fs::read(w.path("app.debug")).unwrap()
    );
}

#[test]
fn report_misses_lists_what_debuginfod_find_did_not_get() {
    let (w, _open, build_id) = setup();
    let log = w.path("access.jsonl");
    let server = Server::start_with(
        &w.path("store"),
        &["--access-log", log.to_str().unwrap()],
        None,
    );
    let missing = "00112233445566778899aabbccddeeff00112233";
    // Each run with its own cache (a client's negative cache would not ask twice).
    for (run, id) in [missing, missing, &build_id].into_iter().enumerate() {
        let mut cmd = client("debuginfod-find", &w, &server);
        cmd.env("DEBUGINFOD_CACHE_PATH", w.path(&format!("cache-run-{run}")))
            .args(["debuginfo", id]);
        let found = cmd.output().unwrap().status.success();
        assert_eq!(found, id == build_id, "{id}");
    }
    // The log holds what the client requested, as it requested it.
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines
        .iter()
        .any(|l| l["path"] == format!("/buildid/{missing}/debuginfo")
            && l["status"] == 404
            && l["agent"].as_str().unwrap_or("").contains("elfutils")));

    let out = symdex()
        .args(["report", "misses", "--json"])
        .arg(&log)
        .output()
        .unwrap();
    assert!(out.status.success());
    let rows: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 1, "only the missing build id: {rows:?}");
    assert_eq!(rows[0]["layout"], "debuginfod");
    assert_eq!(rows[0]["id"], missing);
    assert_eq!(rows[0]["name"], "debuginfo");
    assert_eq!(rows[0]["requests"], 2, "asked twice");
}

#[test]
fn debuginfod_find_gets_a_section_without_the_whole_debug_file() {
    let (w, _open, build_id) = setup();
    let log = w.path("access.jsonl");
    let server = Server::start_with(
        &w.path("store"),
        &["--access-log", log.to_str().unwrap()],
        None,
    );
    w.run(
        "objcopy",
        &[
            "--dump-section",
            ".debug_line=line.bin",
            "app.debug",
            "scratch.o",
        ],
    );
    let mut cmd = client("debuginfod-find", &w, &server);
    cmd.args(["section", &build_id, ".debug_line"]);
    assert_eq!(
        common::fetched_by(cmd),
        std::fs::read(w.path("line.bin")).unwrap(),
        "the section, byte for byte"
    );
    // Served on its own: the client asked for the section and nothing else (it falls back to
    // downloading the debug file when a server has no section).
    let text = std::fs::read_to_string(&log).unwrap();
    let paths: Vec<String> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["path"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(paths, [format!("/buildid/{build_id}/section/.debug_line")]);
    let served: u64 = text
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["bytes"]
                .as_u64()
                .unwrap_or(0)
        })
        .sum();
    let whole = std::fs::metadata(w.path("app.debug")).unwrap().len();
    assert!(
        served > 0 && served < whole,
        "served {served} bytes of a {whole} byte debug file"
    );
}

#[test]
fn buildid_files_carry_the_debuginfod_headers() {
    let (w, server, build_id) = setup();
    let size = std::fs::metadata(w.path("app.debug")).unwrap().len();
    let path = format!("/buildid/{build_id}/debuginfo");
    let (status, head, _) = server.request("GET", &path, "");
    assert_eq!(status, 200);
    assert!(
        head.contains(&format!("x-debuginfod-size: {size}\r\n")),
        "{head}"
    );
    assert!(
        head.contains(&format!("x-debuginfod-file: buildid/{build_id}/debuginfo")),
        "{head}"
    );
    // A range still tells the whole file's size.
    let (status, head, body) = server.request("GET", &path, "Range: bytes=0-15\r\n");
    assert_eq!((status, body.len()), (206, 16));
    assert!(
        head.contains(&format!("x-debuginfod-size: {size}\r\n")),
        "{head}"
    );
    // Other layouts are not debuginfod's.
    let gdb = format!("/gdb/{}/{}.debug", &build_id[..2], &build_id[2..]);
    let (status, head, _) = server.request("HEAD", &gdb, "");
    assert_eq!(status, 200);
    assert!(!head.contains("x-debuginfod"), "{head}");
}
