//! `symdex serve --cors`: a page on another origin may fetch symbols. curl sends the preflight
//! a browser would; headless Chromium (Debian's `chromium` driven by npm `playwright-core`
//! from tests/browser/, as tests/audit_page.rs does) runs a page served from another loopback
//! port whose `fetch()` reads a debug file and its `X-Debuginfod-Size` with `--cors`, and
//! is refused by the browser without it.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{build_split_elf, index_json, Server, StaticServer, Workdir};
use serde_json::{json, Value};
use symdex_shared::encoded::{copy_key, Encoding};
use symdex_shared::storage::local::relative_path;

const CHROMIUM: &str = "/usr/bin/chromium";
const BUILD_ID: &str = "c0c0a0a0112233445566778899aabbccddeeff00";
const KEY: &str = "buildid/c0c0a0a0112233445566778899aabbccddeeff00/debuginfo";
const ORIGIN: &str = "http://127.0.0.1:9";

/// A store with one debug file (`KEY`) and the zstd copy the index made of it; the debug
/// file's bytes.
fn store(w: &Workdir) -> (PathBuf, Vec<u8>) {
    build_split_elf(w, "p", &format!("0x{BUILD_ID}"), "x * 5 + 2");
    let store = w.path("store");
    index_json(&store, &[w.path("p/app.debug")]);
    assert!(store
        .join(relative_path(&copy_key(Encoding::Zstd, KEY)))
        .is_file());
    let raw = std::fs::read(store.join(KEY)).unwrap();
    (store, raw)
}

/// `curl -i` of `url` with `args`: (status, head lowercased).
fn curl(url: &str, args: &[&str]) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-s", "-i", "--max-time", "30"])
        .args(args)
        .arg(url)
        .output()
        .expect("curl (scripts/setup.sh installs it)");
    let text = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
    let head = text.split("\r\n\r\n").next().unwrap_or("").to_string();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no answer from {url}: {text}"));
    (status, head)
}

fn header(head: &str, name: &str) -> Option<String> {
    head.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}: ")))
        .map(|v| v.trim().to_string())
}

/// What a browser sends before a fetch that sets `Authorization` and the size limit.
fn preflight(server: &Server) -> (u16, String) {
    curl(
        &format!("{}/{KEY}", server.url()),
        &[
            "-X",
            "OPTIONS",
            "-H",
            &format!("Origin: {ORIGIN}"),
            "-H",
            "Access-Control-Request-Method: GET",
            "-H",
            "Access-Control-Request-Headers: authorization, x-debuginfod-maxsize",
        ],
    )
}

fn assert_preflight_answered(head: &str) {
    let expect = [
        ("access-control-allow-origin", "*"),
        ("access-control-allow-methods", "get, head, options"),
        (
            "access-control-allow-headers",
            "authorization, range, x-debuginfod-maxsize",
        ),
        ("access-control-max-age", "86400"),
    ];
    for (name, value) in expect {
        assert_eq!(header(head, name).as_deref(), Some(value), "{name}: {head}");
    }
    let exposed = header(head, "access-control-expose-headers").unwrap_or_default();
    for name in [
        "x-debuginfod-size",
        "x-debuginfod-file",
        "x-debuginfod-archive",
        "content-encoding",
    ] {
        assert!(exposed.contains(name), "{name} not exposed: {head}");
    }
}

#[test]
fn a_preflight_is_answered_with_cors_and_refused_without() {
    let w = Workdir::new();
    let (store, _) = store(&w);
    std::fs::write(w.path("tokens"), "s3cret-cors\n").unwrap();
    let tokens = w.path("tokens");
    let args = ["--cors", "--auth-token-file", tokens.to_str().unwrap()];
    let server = Server::start_with(&store, &args, None);

    // No credentials with the preflight (browsers send none): 204 all the same.
    let (status, head) = preflight(&server);
    assert_eq!(status, 204, "{head}");
    assert_preflight_answered(&head);
    // The GET keeps the server's rules: 401 without the token (readable by the page, so it
    // can ask for one), 200 with it; both say who may read them.
    let url = format!("{}/{KEY}", server.url());
    let origin = format!("Origin: {ORIGIN}");
    let (status, head) = curl(&url, &["-H", &origin]);
    assert_eq!(status, 401, "{head}");
    assert_eq!(
        header(&head, "access-control-allow-origin").as_deref(),
        Some("*")
    );
    let bearer = "Authorization: Bearer s3cret-cors";
    let (status, head) = curl(&url, &["-H", &origin, "-H", bearer, "--compressed"]);
    assert_eq!(status, 200, "{head}");
    assert_eq!(
        header(&head, "access-control-allow-origin").as_deref(),
        Some("*")
    );
    assert_eq!(header(&head, "content-encoding").as_deref(), Some("zstd"));
    assert!(header(&head, "access-control-expose-headers").is_some());

    // Without --cors: OPTIONS is what it was (405 on a key), and nothing says CORS.
    let plain = Server::start(&store);
    let (status, head) = preflight(&plain);
    assert_eq!(status, 405, "{head}");
    assert!(!head.contains("access-control-"), "{head}");
    let (status, head) = curl(&format!("{}/{KEY}", plain.url()), &["-H", &origin]);
    assert!(status == 200 && !head.contains("access-control-"), "{head}");
}

#[test]
fn the_audit_page_is_never_shared_with_other_origins() {
    let w = Workdir::new();
    let (store, _) = store(&w);
    let server = Server::start_with(&store, &["--cors", "--audit"], None);
    let origin = format!("Origin: {ORIGIN}");
    let page = format!("{}/_symdex/audit.html", server.url());
    let (status, head) = curl(&page, &["-H", &origin]);
    assert_eq!(status, 200, "{head}");
    assert!(!head.contains("access-control-"), "{head}");
}

fn browser_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser")
}

/// The browser and the driver are test prerequisites: missing, the test fails saying how to
/// install them.
fn require_browser() {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: scripts/setup.sh installs Debian's chromium"
    );
    assert!(
        browser_dir().join("node_modules/playwright-core").is_dir(),
        "tests/browser/node_modules/playwright-core is missing: scripts/setup.sh runs npm ci there"
    );
}

/// Runs `fetches` from `page` in Chromium (tests/browser/cors_fetch.mjs): what each saw.
fn fetch_in_browser(dir: &Path, page: &str, fetches: Value) -> Vec<Value> {
    require_browser();
    let spec = json!({
        "chromium": CHROMIUM,
        "userDataDir": dir.join("chromium-profile"),
        "page": page,
        "fetches": fetches,
    });
    let spec_path = dir.join("spec.json");
    std::fs::write(&spec_path, spec.to_string()).unwrap();
    let out = Command::new("node")
        .arg(browser_dir().join("cors_fetch.mjs"))
        .arg(&spec_path)
        .output()
        .expect("node (scripts/setup.sh installs nodejs)");
    assert!(
        out.status.success(),
        "the browser run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).expect("the driver's JSON");
    assert_eq!(seen["errors"], json!([]), "script errors");
    seen["results"].as_array().unwrap().clone()
}

/// The page's checksum of a body (cors_fetch.mjs): `sum * 31 + byte`, modulo 2^32.
fn checksum(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0u32, |sum, &b| {
            sum.wrapping_mul(31).wrapping_add(u32::from(b))
        })
        .into()
}

#[test]
fn a_page_on_another_origin_reads_a_debug_file_only_with_cors() {
    let w = Workdir::new();
    let (store, raw) = store(&w);
    std::fs::write(w.path("tokens"), "s3cret-page\n").unwrap();
    let tokens = w.path("tokens");
    let open = Server::start_with(&store, &["--cors"], None);
    let private = Server::start_with(
        &store,
        &["--cors", "--auth-token-file", tokens.to_str().unwrap()],
        None,
    );
    let closed = Server::start(&store);
    // The page comes from another loopback port: another origin.
    std::fs::create_dir_all(w.path("site")).unwrap();
    std::fs::write(
        w.path("site/index.html"),
        "<!doctype html><title>profiler</title>\n",
    )
    .unwrap();
    let site = StaticServer::start(&w.path("site"), &w.path("site.log"));
    let page = format!("http://{}/index.html", site.addr);
    let url = |server: &Server| format!("{}/{KEY}", server.url());
    let seen = fetch_in_browser(
        &w.path("."),
        &page,
        json!([
            { "url": url(&open) },
            { "url": url(&open), "headers": { "X-DEBUGINFOD-MAXSIZE": "100" } },
            { "url": url(&private), "headers": { "Authorization": "Bearer s3cret-page" } },
            { "url": url(&private) },
            { "url": url(&closed) },
        ]),
    );
    let size = raw.len().to_string();
    assert_eq!(seen[0]["origin"], json!(format!("http://{}", site.addr)));
    // With --cors: the file, decoded by the browser from the zstd copy, and its headers.
    let read = &seen[0];
    assert_eq!(read["ok"], json!(true), "{read}");
    assert_eq!(read["status"], json!(200));
    assert_eq!(
        read["size"],
        json!(size),
        "x-debuginfod-size read by the page"
    );
    assert_eq!(read["file"], json!(KEY));
    assert_eq!(read["encoding"], json!("zstd"), "{read}");
    assert_eq!(read["length"], json!(raw.len()));
    assert_eq!(read["sum"], json!(checksum(&raw)));
    // A header of debuginfod's own takes a preflight, answered: the 406 is the page's to read.
    assert_eq!(seen[1]["status"], json!(406), "{}", seen[1]);
    // Bearer credentials set by the page: preflight, then the file.
    let private_read = &seen[2];
    assert_eq!(private_read["status"], json!(200), "{private_read}");
    assert_eq!(private_read["size"], json!(size));
    assert_eq!(private_read["sum"], json!(checksum(&raw)));
    assert_eq!(seen[3]["status"], json!(401), "{}", seen[3]);
    // Without --cors the browser refuses the page the answer: fetch() rejects.
    assert_eq!(seen[4]["ok"], json!(false), "{}", seen[4]);
    assert!(
        seen[4]["error"]
            .as_str()
            .unwrap()
            .contains("Failed to fetch"),
        "{}",
        seen[4]
    );
}
