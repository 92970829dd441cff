//! One request's answer: credentials, method and path checked, the file answered in a coding
//! the client accepts (`negotiate.rs`) or from upstream, debuginfod's size limit applied
//! (`max_size.rs`), debuginfod's and CORS headers added, one access-log line written.

use std::convert::Infallible;
use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use http::{header, HeaderValue, Method, Request, Response, StatusCode};

use super::accept::AcceptEncoding;
use super::audit::AUDIT_PATH;
use super::body::Body;
use super::cache::MemoryCache;
use super::file::Root;
use super::max_size::max_size;
use super::negotiate;
use super::paths::{fold_case, servable_path};
use super::raw_size::RawSize;

/// What every request is checked against and answered from.
pub struct Served {
    pub root: Root,
    pub cache: MemoryCache,
    pub credentials: Option<crate::auth::Credentials>,
    /// One `write` per line on an append-only file: lines of concurrent requests never
    /// interleave, and a killed server leaves whole lines.
    pub access_log: Option<std::sync::Mutex<std::fs::File>>,
    pub fold_case: bool,
    /// No line per request on stderr (`--quiet`).
    pub quiet: bool,
    /// Where store misses are asked (`--upstream`).
    pub upstreams: Option<Arc<super::upstream::Upstreams>>,
    /// The audit page (`--audit`), answered at `audit::AUDIT_PATH`.
    pub audit: Option<super::audit::AuditPage>,
    /// Answers readable by pages of any origin (`--cors`, `cors.rs`).
    pub cors: bool,
}

fn text(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut response = Response::new(Body::text(text));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    response
}

fn not_found() -> Response<Body> {
    text(StatusCode::NOT_FOUND, "not found\n")
}

fn unauthorized() -> Response<Body> {
    let mut response = text(StatusCode::UNAUTHORIZED, "credentials required\n");
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"symdex\""),
    );
    response
}

fn header_text<B>(request: &Request<B>, name: header::HeaderName) -> Option<&str> {
    request.headers().get(name).and_then(|v| v.to_str().ok())
}

/// The answer to `request`: 401 without credentials (nothing is told, not even whether a key
/// exists), 404 for private paths, directories and anything but a regular file, 405 for other
/// methods on a servable path; with `--cors`, 204 to a preflight (`cors.rs`).
pub async fn handle<B>(
    served: Arc<Served>,
    request: Request<B>,
) -> Result<Response<Body>, Infallible> {
    let started = Instant::now();
    let method = request.method();
    let path = request.uri().path();
    let allowed = served
        .credentials
        .as_ref()
        .is_none_or(|c| c.allows(header_text(&request, header::AUTHORIZATION)));
    let audit = served.audit.as_ref().filter(|_| path == AUDIT_PATH);
    let readable = method == Method::GET || method == Method::HEAD;
    let mut response = if served.cors && method == Method::OPTIONS {
        // Before credentials: a browser sends none with a preflight.
        super::cors::preflight()
    } else if !allowed {
        unauthorized()
    } else if let Some(audit) = audit.filter(|_| readable) {
        audit.answer(method == Method::HEAD).await
    } else if !readable {
        match servable_path(path) {
            None => not_found(),
            Some(_) => {
                let mut response = Response::new(Body::Empty);
                *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
                response
                    .headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
                response
            }
        }
    } else {
        let answer = read(&served, &request).await;
        match max_size(request.headers()) {
            Some(limit) if RawSize::of(&answer).is_some_and(|size| size > limit) => too_large(),
            _ => answer,
        }
    };
    debuginfod_headers(path, &mut response);
    // Never the audit page: see cors.rs.
    if served.cors && audit.is_none() {
        super::cors::allow_origin(response.headers_mut());
    }
    if served.access_log.is_some() || !served.quiet {
        log(&served, &request, &response, started);
    }
    Ok(response)
}

/// The answer to a GET or HEAD of a key: the store's file (its copy in a coding the request
/// accepts, `negotiate.rs`), else an upstream's answer, else 404.
async fn read<B>(served: &Served, request: &Request<B>) -> Response<Body> {
    let mut servable = servable_path(request.uri().path());
    if let Some(parts) = servable.as_mut().filter(|_| served.fold_case) {
        fold_case(parts);
    }
    // Directories, the root, names no file can have, private paths: not found.
    let Some(parts) = servable.filter(|parts| !parts.is_empty()) else {
        return not_found();
    };
    // Several ranges: the whole file (200), which every client accepts.
    let range = header_text(request, header::RANGE).filter(|r| !r.contains(','));
    let head = request.method() == Method::HEAD;
    let key = parts.join("/");
    let accepted = AcceptEncoding::of(request.headers().get_all(header::ACCEPT_ENCODING));
    let stored = negotiate::answer(&served.root, &served.cache, &key, head, range, &accepted);
    match (stored, &served.upstreams) {
        (Some(response), _) => response,
        // Upstream answers are the raw bytes: the upstream cache holds no copies.
        (None, Some(upstreams)) => upstreams
            .answer(&served.cache, &key, head, range)
            .await
            .unwrap_or_else(not_found),
        (None, None) => not_found(),
    }
}

/// 406 for a file larger than the request's `X-DEBUGINFOD-MAXSIZE` (`max_size.rs`).
fn too_large() -> Response<Body> {
    text(StatusCode::NOT_ACCEPTABLE, "file too large\n")
}

/// The access-log line (`--access-log`) and the stderr line (unless `--quiet`).
fn log<B>(served: &Served, request: &Request<B>, response: &Response<Body>, started: Instant) {
    let (method, path) = (request.method(), request.uri().path());
    let range = header_text(request, header::RANGE);
    let length = header_text_of(response, header::CONTENT_LENGTH).unwrap_or("-");
    // The bytes above are the copy's for a compressed answer: the coding says so.
    let encoding = header_text_of(response, header::CONTENT_ENCODING);
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
            "encoding": encoding,
            "ms": ms,
            "agent": header_text(request, header::USER_AGENT),
        });
        if let Ok(mut file) = log.lock() {
            // A failed log write must not fail the request; it is said on stderr.
            if let Err(e) = writeln!(file, "{line}") {
                say_err!("symdex: access log: {e}");
            }
        }
    }
    if !served.quiet {
        say_err!(
            "{time} {method} {path} {status} {length}{}{} {ms}ms",
            range.map(|r| format!(" range={r}")).unwrap_or_default(),
            encoding.map(|e| format!(" {e}")).unwrap_or_default(),
        );
    }
}

fn header_text_of(response: &Response<Body>, name: header::HeaderName) -> Option<&str> {
    response.headers().get(name).and_then(|v| v.to_str().ok())
}

/// The headers a debuginfod server answers with, for `/buildid/...` files: the whole file's
/// size before any coding (`X-Debuginfod-Size`, what clients show progress against, also on a
/// range or a compressed answer) and the file served (`X-Debuginfod-File`, its key).
fn debuginfod_headers(path: &str, response: &mut Response<Body>) {
    let Some(key) = path.strip_prefix('/').filter(|p| p.starts_with("buildid/")) else {
        return;
    };
    let Some(size) = RawSize::of(response) else {
        return;
    };
    let file = HeaderValue::from_str(key).ok();
    let headers = response.headers_mut();
    headers.insert("x-debuginfod-size", HeaderValue::from(size));
    if let Some(file) = file {
        headers.insert("x-debuginfod-file", file);
    }
}
