//! `serve --audit`: the audit page of the store at /_symdex/audit.html, rebuilt from the
//! manifest as it grows; shown on a loopback address or behind the token, and refused to an
//! anonymous reader elsewhere.

mod common;

use common::{build_split_elf, index_json, Server, Workdir};

const PAGE: &str = "/_symdex/audit.html";

#[test]
fn the_audit_page_grows_with_the_manifest_on_loopback() {
    let w = Workdir::new();
    build_split_elf(&w, "one", "0x0101010101010101", "x + 1");
    build_split_elf(&w, "two", "0x0202020202020202", "x + 2");
    let store = w.path("store");
    index_json(&store, &[w.path("one/app.debug")]);
    let server = Server::start_with(&store, &["--audit"], None);
    let (status, headers, body) = server.request("GET", PAGE, "");
    let page = String::from_utf8_lossy(&body);
    assert_eq!(status, 200, "{headers}");
    assert!(
        headers.contains("text/html") && headers.contains("no-store"),
        "{headers}"
    );
    assert!(page.contains("one/app.debug") && !page.contains("two/app.debug"));
    // Another index: the next request shows it.
    index_json(&store, &[w.path("two/app.debug")]);
    let (status, _, body) = server.request("GET", PAGE, "");
    assert_eq!(status, 200);
    assert!(String::from_utf8_lossy(&body).contains("two/app.debug"));
    let (status, headers, body) = server.request("HEAD", PAGE, "");
    assert!(status == 200 && body.is_empty(), "{headers}");
    // Without --audit it is a private path like any other.
    let plain = Server::start(&store);
    assert_eq!(plain.request("GET", PAGE, "").0, 404);
}

#[test]
fn the_audit_page_is_refused_off_loopback_without_the_token() {
    let w = Workdir::new();
    build_split_elf(&w, "one", "0x0303030303030303", "x + 3");
    let store = w.path("store");
    index_json(&store, &[w.path("one/app.debug")]);
    // Every address, no token: symbol readers get symbols, not the page.
    let open = Server::start_on(&store, "0.0.0.0:0", &["--audit"]);
    let (status, _, body) = open.request("GET", PAGE, "");
    assert_eq!(status, 403, "{}", String::from_utf8_lossy(&body));
    assert!(!String::from_utf8_lossy(&body).contains("app.debug"));
    // Every address, with a token: the token's holders only.
    std::fs::write(w.path("tokens"), "s3cret-audit\n").unwrap();
    let tokens = w.path("tokens");
    let args = ["--audit", "--auth-token-file", tokens.to_str().unwrap()];
    let private = Server::start_on(&store, "0.0.0.0:0", &args);
    assert_eq!(private.request("GET", PAGE, "").0, 401);
    let bearer = "Authorization: Bearer s3cret-audit\r\n";
    let (status, _, body) = private.request("GET", PAGE, bearer);
    assert_eq!(status, 200);
    assert!(String::from_utf8_lossy(&body).contains("one/app.debug"));
}
