//! One request's answer: credentials, method and path checked, the file answered
//! (`file.rs`), debuginfod's headers added, one access-log line written.

use std::convert::Infallible;
use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use http::{header, HeaderValue, Method, Request, Response, StatusCode};

use super::audit::AUDIT_PATH;
use super::body::Body;
use super::cache::MemoryCache;
use super::file::Root;
use super::paths::{fold_case, servable_path};

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
/// methods on a servable path.
pub async fn handle<B>(
    served: Arc<Served>,
    request: Request<B>,
) -> Result<Response<Body>, Infallible> {
    let started = Instant::now();
    let method = request.method();
    let path = request.uri().path();
    let range = header_text(&request, header::RANGE);
    let allowed = served
        .credentials
        .as_ref()
        .is_none_or(|c| c.allows(header_text(&request, header::AUTHORIZATION)));
    let mut servable = servable_path(path);
    if let Some(parts) = servable.as_mut().filter(|_| served.fold_case) {
        fold_case(parts);
    }
    let audit = served.audit.as_ref().filter(|_| path == AUDIT_PATH);
    let mut response = if !allowed {
        unauthorized()
    } else if let Some(audit) = audit.filter(|_| method == Method::GET || method == Method::HEAD) {
        audit.answer(method == Method::HEAD).await
    } else if method != Method::GET && method != Method::HEAD {
        match servable {
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
        match servable.filter(|parts| !parts.is_empty()) {
            Some(parts) => {
                // Several ranges: the whole file (200), which every client accepts.
                let single = range.filter(|r| !r.contains(','));
                let head = method == Method::HEAD;
                let key = parts.join("/");
                match super::file::answer(&served.root, &served.cache, &key, head, single) {
                    Some(response) => response,
                    None => match &served.upstreams {
                        Some(upstreams) => upstreams
                            .answer(&served.cache, &key, head, single)
                            .await
                            .unwrap_or_else(not_found),
                        None => not_found(),
                    },
                }
            }
            // Directories, the root, names no file can have, private paths: not found.
            None => not_found(),
        }
    };
    debuginfod_headers(path, &mut response);
    if served.access_log.is_some() || !served.quiet {
        log(&served, &request, &response, started);
    }
    Ok(response)
}

/// The access-log line (`--access-log`) and the stderr line (unless `--quiet`).
fn log<B>(served: &Served, request: &Request<B>, response: &Response<Body>, started: Instant) {
    let (method, path) = (request.method(), request.uri().path());
    let range = header_text(request, header::RANGE);
    let length = header_text_of(response, header::CONTENT_LENGTH).unwrap_or("-");
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
            "agent": header_text(request, header::USER_AGENT),
        });
        if let Ok(mut file) = log.lock() {
            // A failed log write must not fail the request; it is said on stderr.
            if let Err(e) = writeln!(file, "{line}") {
                eprintln!("symdex: access log: {e}");
            }
        }
    }
    if !served.quiet {
        eprintln!(
            "{time} {method} {path} {status} {length}{} {ms}ms",
            range.map(|r| format!(" range={r}")).unwrap_or_default(),
        );
    }
}

fn header_text_of(response: &Response<Body>, name: header::HeaderName) -> Option<&str> {
    response.headers().get(name).and_then(|v| v.to_str().ok())
}

/// The headers a debuginfod server answers with, for `/buildid/...` files: the whole file's
/// size (`X-Debuginfod-Size`, what clients show progress against, also on a range) and the
/// file served (`X-Debuginfod-File`, its key).
fn debuginfod_headers(path: &str, response: &mut Response<Body>) {
    let Some(key) = path.strip_prefix('/').filter(|p| p.starts_with("buildid/")) else {
        return;
    };
    let size = match response.status() {
        StatusCode::OK => response.headers().get(header::CONTENT_LENGTH).cloned(),
        StatusCode::PARTIAL_CONTENT => header_text_of(response, header::CONTENT_RANGE)
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
