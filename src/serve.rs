//! `symdex serve`: a store over HTTP, as debuggers expect a symbol server to behave: GET and
//! HEAD, byte ranges, `application/octet-stream`, 404 (never 403) for anything missing, and
//! nothing outside the store or inside symdex's own bookkeeping.
//!
//! What is private is decided on the path that will be opened: the request path is decoded and
//! normalised here (empty and `.` segments dropped; `..`, backslashes, control characters,
//! components over 255 bytes and non-UTF-8 refused; private folders in any case), and exactly
//! that path is opened beneath the store (`serve_file.rs`: regular files only, no symbolic
//! link followed, streamed), so no spelling (`//_symdex`, `/./_symdex`, `/%2e/_symdex`,
//! `/.%2f_manifest`, `/_SYMDEX`, the absolute form) reaches a private file. Connections are
//! served here, not by `axum::serve` (`serve_conn.rs`): TCP_NODELAY (no 40 ms stall per
//! kept-alive request), a header-read timeout (idle connections are closed), a progress
//! timeout (a client that takes no bytes is dropped), a cap on open connections (accepting
//! pauses at the cap) and optionally per client address.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use axum::extract::Request;
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use clap::Args;

#[derive(Args)]
pub struct ServeArgs {
    /// The store directory.
    #[arg(default_value = crate::DEFAULT_STORE)]
    pub store: PathBuf,
    /// Address to listen on (port 0 picks a free port; the chosen address is printed).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,
    /// Seconds a client has to send a request's headers (idle connections are closed then).
    #[arg(long, default_value_t = 10)]
    pub header_timeout: u64,
    /// Connections served at once (default: what the open-files limit allows).
    #[arg(long)]
    pub max_connections: Option<usize>,
    /// Connections one client address may hold at once (default: no cap of its own); further
    /// ones are closed at once.
    #[arg(long, value_name = "N")]
    pub max_connections_per_ip: Option<usize>,
    /// Seconds a client may take no bytes of a response before its connection is closed
    /// (a client that asks and never reads holds no buffer or connection past it).
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    pub send_timeout: u64,
    /// Require credentials: one token, `user:password` or `sha256:<hex>` per line (auth.rs);
    /// requests without them get 401 and a basic-auth challenge.
    #[arg(long, value_name = "FILE")]
    pub auth_token_file: Option<PathBuf>,
    /// Append a JSON access log (one object per request: time, method, path, status, bytes,
    /// range, ms, agent) to FILE; `symdex report misses FILE` reads it.
    #[arg(long, value_name = "FILE")]
    pub access_log: Option<PathBuf>,
    /// Case-insensitive lookups under `/symbols/` and `/index2/` (what SymSrv over IIS does),
    /// for a store indexed with `symdex index --fold-case`: request paths there are lowercased.
    #[arg(long)]
    pub fold_case: bool,
    /// No line per request on stderr (the `--access-log` file, if any, is still written).
    #[arg(long)]
    pub quiet: bool,
}

/// What every request is checked against.
struct Served {
    root: crate::serve_file::Root,
    credentials: Option<crate::auth::Credentials>,
    /// One `write` per line on an append-only file: lines of concurrent requests never
    /// interleave, and a killed server leaves whole lines.
    access_log: Option<std::sync::Mutex<std::fs::File>>,
    fold_case: bool,
    /// No line per request on stderr (`--quiet`).
    quiet: bool,
}

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [
            (header::WWW_AUTHENTICATE, "Basic realm=\"symdex\""),
            (header::CONTENT_TYPE, "text/plain"),
        ],
        "credentials required\n",
    )
        .into_response()
}

/// Top-level directories that are symdex's state, never symbols.
const PRIVATE_DIRS: [&str; 2] = ["_symdex", "_manifest"];
/// The longest file name a store holds (and most file systems allow).
const MAX_COMPONENT: usize = 255;

/// The store-relative path a request names, normalised, or `None` when it names nothing that
/// may be served (outside the store, symdex's state, or not representable as a file name).
fn servable_path(raw: &str) -> Option<Vec<String>> {
    let decoded = percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .ok()?;
    let mut parts = Vec::new();
    for part in decoded.split('/') {
        match part {
            "" | "." => continue,
            ".." => return None,
            _ if part.len() > MAX_COMPONENT
                || part.contains('\\')
                || part.chars().any(char::is_control) =>
            {
                return None
            }
            _ => parts.push(part.to_string()),
        }
    }
    // In any case: on a case-insensitive file system `_SYMDEX` opens `_symdex`.
    if parts
        .first()
        .is_some_and(|p| PRIVATE_DIRS.iter().any(|d| d.eq_ignore_ascii_case(p)))
    {
        return None;
    }
    Some(parts)
}

/// Path components as a URL path (each percent-encoded; keys hold spaces, `+`, `#`...):
/// what `check` asks a server for (and `serve`'s tests expect).
pub fn url_path<'a>(parts: impl IntoIterator<Item = &'a str>) -> String {
    const KEEP: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~');
    parts
        .into_iter()
        .map(|p| percent_encoding::utf8_percent_encode(p, KEEP).to_string())
        .collect::<Vec<_>>()
        .join("/")
}

/// The normalised path as a URI path again.
#[cfg(test)]
fn encoded(parts: &[String]) -> String {
    format!("/{}", url_path(parts.iter().map(String::as_str)))
}

fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        [(header::CONTENT_TYPE, "text/plain")],
        "not found\n",
    )
        .into_response()
}

/// Answers 404 for private paths, non-GET/HEAD methods and anything but a regular file;
/// sets the content type; writes one access-log line per request.
async fn guard(
    axum::extract::State(served): axum::extract::State<std::sync::Arc<Served>>,
    request: Request,
    // Every request is answered here (`serve_file`): nothing goes on.
    _next: Next,
) -> Response {
    let root = &served.root;
    let started = Instant::now();
    let agent = request
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let range = request
        .headers()
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    // Without credentials nothing is told, not even whether a key exists.
    let allowed = served.credentials.as_ref().is_none_or(|c| {
        c.allows(
            request
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok()),
        )
    });
    let mut servable = servable_path(&path);
    if let Some(parts) = servable.as_mut().filter(|_| served.fold_case) {
        fold_case(parts);
    }
    let response = if !allowed {
        unauthorized()
    } else if method != Method::GET && method != Method::HEAD {
        match servable {
            None => not_found(),
            Some(_) => (
                StatusCode::METHOD_NOT_ALLOWED,
                [(header::ALLOW, "GET, HEAD")],
            )
                .into_response(),
        }
    } else {
        match servable.filter(|parts| !parts.is_empty()) {
            Some(parts) => {
                // Several ranges: the whole file (200), which every client accepts.
                let single = range.clone().filter(|r| !r.contains(','));
                let head = method == Method::HEAD;
                crate::serve_file::answer(root, &parts, head, single)
                    .await
                    .unwrap_or_else(not_found)
            }
            // Directories, the root, names no file can have, private paths: not found.
            None => not_found(),
        }
    };
    let mut response = response;
    debuginfod_headers(&path, &mut response);
    let length = response
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-")
        .to_string();
    let time = symdex_shared::manifest::now_rfc3339();
    let status = response.status().as_u16();
    let ms = started.elapsed().as_millis();
    if let Some(log) = &served.access_log {
        let line = serde_json::json!({
            "time": time,
            "method": method.as_str(),
            "path": path,
            "status": status,
            "bytes": length.parse::<u64>().ok(),
            "range": range,
            "ms": ms,
            "agent": agent,
        });
        if let Ok(mut file) = log.lock() {
            // A failed log write must not fail the request; it is said on stderr.
            if let Err(e) = writeln!(file, "{line}") {
                eprintln!("symdex: access log: {e}");
            }
        }
    }
    if served.quiet {
        return response;
    }
    eprintln!(
        "{time} {method} {path} {status} {length}{} {ms}ms",
        range.map(|r| format!(" range={r}")).unwrap_or_default(),
    );
    response
}

/// The headers a debuginfod server answers with, for `/buildid/...` files: the whole file's
/// size (`X-Debuginfod-Size`, what clients show progress against, also on a range) and the
/// file served (`X-Debuginfod-File`, its key).
fn debuginfod_headers(path: &str, response: &mut Response) {
    let Some(key) = path.strip_prefix('/').filter(|p| p.starts_with("buildid/")) else {
        return;
    };
    let headers = response.headers();
    let size = match response.status() {
        StatusCode::OK => headers.get(header::CONTENT_LENGTH).cloned(),
        StatusCode::PARTIAL_CONTENT => headers
            .get(header::CONTENT_RANGE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.rsplit_once('/'))
            .and_then(|(_, total)| HeaderValue::from_str(total).ok()),
        _ => None,
    };
    let Some(size) = size else {
        return;
    };
    let file = HeaderValue::from_str(key).ok();
    let headers = response.headers_mut();
    headers.insert("x-debuginfod-size", size);
    if let Some(file) = file {
        headers.insert("x-debuginfod-file", file);
    }
}

/// The SymSrv family's paths lowercased (ASCII, as the indexer folds their keys and the CDN's
/// edge function folds requests): `/symbols/...` and `/index2/...`.
fn fold_case(parts: &mut [String]) {
    if matches!(
        parts.first().map(String::as_str),
        Some("symbols" | "index2")
    ) {
        for part in parts.iter_mut() {
            part.make_ascii_lowercase();
        }
    }
}

fn router(
    root: crate::serve_file::Root,
    credentials: Option<crate::auth::Credentials>,
    access_log: Option<std::fs::File>,
    args: &ServeArgs,
) -> Router {
    let served = Served {
        root,
        credentials,
        access_log: access_log.map(std::sync::Mutex::new),
        fold_case: args.fold_case,
        quiet: args.quiet,
    };
    Router::new()
        // Every request is answered by `guard`; nothing reaches the fallback.
        .fallback(|| async { not_found() })
        .layer(middleware::from_fn_with_state(
            std::sync::Arc::new(served),
            guard,
        ))
}

/// Connections the open-files limit leaves room for (each one is a descriptor; files being
/// served and the listener need some too).
fn default_max_connections() -> usize {
    let soft = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|limits| {
            limits
                .lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3).map(str::to_string))
        })
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(1024);
    (soft.saturating_sub(32) / 2).clamp(16, 4096)
}

pub fn run(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    if !args.store.is_dir() {
        anyhow::bail!("no store at {}", args.store.display());
    }
    let store = args.store.canonicalize()?;
    let credentials = args
        .auth_token_file
        .as_deref()
        .map(crate::auth::Credentials::load)
        .transpose()?;
    let access_log = match &args.access_log {
        Some(path) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open the access log {}", path.display()))?,
        ),
        None => None,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.addr)
            .await
            .with_context(|| format!("cannot listen on {}", args.addr))?;
        let addr = listener.local_addr()?;
        // Ignore write errors: whoever started us may have stopped reading stdout.
        let mut out = std::io::stdout();
        let _ = writeln!(out, "symdex: serving {} on http://{addr}", store.display());
        let _ = writeln!(out, "  debuginfod: DEBUGINFOD_URLS=http://{addr}");
        let _ = writeln!(
            out,
            "  WinDbg/VS:  srv*http://{addr}/symbols   dotnet-symbol: --server-path http://{addr}/symbols"
        );
        let _ = out.flush();
        if credentials.is_some() {
            let _ = writeln!(
                out,
                "  credentials required (Authorization: Bearer <token>, or basic auth)"
            );
        }
        let root = crate::serve_file::Root::open(store.clone())
            .with_context(|| format!("cannot open the store {}", store.display()))?;
        let app = router(root, credentials, access_log, args);
        let limit = std::sync::Arc::new(tokio::sync::Semaphore::new(
            args.max_connections.unwrap_or_else(default_max_connections).max(1),
        ));
        let header_timeout = std::time::Duration::from_secs(args.header_timeout.max(1));
        let send_timeout = std::time::Duration::from_secs(args.send_timeout.max(1));
        let per_address = crate::serve_conn::PerAddress::default();
        let shutdown = tokio::signal::ctrl_c();
        tokio::pin!(shutdown);
        loop {
            // At the cap, stop accepting: new connections wait in the listen backlog.
            let permit = tokio::select! {
                permit = limit.clone().acquire_owned() => permit?,
                _ = &mut shutdown => break,
            };
            let (stream, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    // Out of descriptors and the like: wait for a connection to end.
                    Err(_) => {
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    }
                },
                _ = &mut shutdown => break,
            };
            let counted = match args.max_connections_per_ip {
                Some(cap) => match per_address.admit(peer.ip(), cap.max(1)) {
                    Some(counted) => Some(counted),
                    // Over its address's cap: closed at once (dropped), its place kept.
                    None => continue,
                },
                None => None,
            };
            let _ = stream.set_nodelay(true);
            let stream = crate::serve_conn::Progressing::new(stream, send_timeout);
            let service = hyper_util::service::TowerToHyperService::new(app.clone());
            tokio::spawn(async move {
                let (_permit, _counted) = (permit, counted);
                let _ = hyper::server::conn::http1::Builder::new()
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(header_timeout)
                    // A response is queued a chunk or two ahead of the socket, no more: a slow
                    // reader holds that much of its file (serve_file.rs streams the rest).
                    .max_buf_size(128 << 10)
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_state_is_refused_in_every_spelling() {
        for path in [
            "/_symdex/refs/x.json",
            "//_symdex/refs/x.json",
            "///_manifest/dt=2026-11-23/a.jsonl",
            "/./_symdex/x",
            "/%2e/_symdex/x",
            "/.%2f_manifest/x",
            "/%2F_symdex/x",
            "/%5fsymdex/x",
            "/symbols/../_symdex/x",
            "/symbols/%2e%2e/%2e%2e/etc/passwd",
            "/_manifest",
            "/a\\\\b",
            "/a%00b",
            "/%ff%fe",
        ] {
            assert_eq!(servable_path(path), None, "{path}");
        }
        let long = format!("/symbols/{}/x", "x".repeat(256));
        assert_eq!(
            servable_path(&long),
            None,
            "unrepresentable names are misses"
        );
    }

    #[test]
    fn single_ranges() {
        use crate::serve_file::single_range;
        assert_eq!(single_range(None, 100), Ok(None));
        assert_eq!(single_range(Some("bytes=0-9"), 100), Ok(Some((0, 9))));
        assert_eq!(single_range(Some("bytes=90-200"), 100), Ok(Some((90, 99))));
        assert_eq!(single_range(Some("bytes=95-"), 100), Ok(Some((95, 99))));
        assert_eq!(single_range(Some("bytes=-10"), 100), Ok(Some((90, 99))));
        assert_eq!(single_range(Some("bytes=100-"), 100), Err(()));
        assert_eq!(
            single_range(Some("bytes=9-2"), 100),
            Ok(None),
            "invalid: ignored"
        );
        assert_eq!(single_range(Some("items=0-1"), 100), Ok(None));
    }

    #[test]
    fn ordinary_keys_are_normalised_and_encoded_back() {
        let parts = servable_path("//symbols/./Foo%20Bar.pdb/ABC1/Foo%20Bar.pdb").unwrap();
        assert_eq!(parts, ["symbols", "Foo Bar.pdb", "ABC1", "Foo Bar.pdb"]);
        assert_eq!(encoded(&parts), "/symbols/Foo%20Bar.pdb/ABC1/Foo%20Bar.pdb");
        assert_eq!(servable_path("/").unwrap(), Vec::<String>::new());
        assert!(
            servable_path("/_symdexx/a").is_some(),
            "only the exact directories"
        );
    }
}
