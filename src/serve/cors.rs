//! `serve --cors`: a page on another origin (a web profiler, the audit page opened from disk
//! or another host) may fetch symbols. Off by default: without it no answer carries a CORS
//! header and a browser keeps every answer from other origins' scripts.
//!
//! The choices:
//! - `Access-Control-Allow-Origin: *`, not the request's `Origin` echoed: `serve`'s
//!   credentials are an `Authorization` header (a bearer token or basic credentials) that a
//!   page's script must set itself, with a token it was given; nothing ambient (cookies, a
//!   browser's remembered basic credentials) goes with a cross-origin fetch unless the server
//!   says `Access-Control-Allow-Credentials: true`, which it never does, and a browser refuses
//!   `*` for such a fetch anyway. So `*` lets a page read only what its own token allows, and
//!   answers need no `Vary: Origin` (a cache keeps one copy for every origin).
//! - A preflight (`OPTIONS`) is answered 204 before credentials are checked: browsers never
//!   send credentials with one (Fetch standard), and it tells nothing of the store. The GET or
//!   HEAD that follows keeps every rule of `serve`, credentials included.
//! - The audit page (`/_symdex/audit.html`) gets no CORS header: it is shown to this machine's
//!   users on a loopback address, and `*` would let any site a local browser visits read it.

use http::{header, HeaderMap, HeaderValue, Response, StatusCode};

use super::body::Body;

/// The methods a page may use: reading only.
const METHODS: HeaderValue = HeaderValue::from_static("GET, HEAD, OPTIONS");

/// The request headers a page may set: credentials, a range, debuginfod's size limit.
const REQUEST_HEADERS: HeaderValue =
    HeaderValue::from_static("Authorization, Range, X-DEBUGINFOD-MAXSIZE");

/// The answer headers a page may read beyond the safelisted ones: debuginfod's, the coding
/// the browser decoded, and a range's place in the file.
const EXPOSED: HeaderValue = HeaderValue::from_static(
    "X-Debuginfod-Size, X-Debuginfod-File, X-Debuginfod-Archive, Content-Encoding, Content-Range",
);

/// Seconds a browser may keep a preflight's answer: a day (Chromium keeps at most two hours,
/// Firefox a day).
const MAX_AGE: HeaderValue = HeaderValue::from_static("86400");

/// The answer to an `OPTIONS` request: 204 with what may be asked.
pub fn preflight() -> Response<Body> {
    let mut response = Response::new(Body::Empty);
    *response.status_mut() = StatusCode::NO_CONTENT;
    let headers = response.headers_mut();
    allow_origin(headers);
    headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, METHODS);
    headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, REQUEST_HEADERS);
    headers.insert(header::ACCESS_CONTROL_MAX_AGE, MAX_AGE);
    headers.insert(header::ALLOW, METHODS);
    response
}

/// What every other answer carries: any origin may read it and the headers above.
pub fn allow_origin(headers: &mut HeaderMap) {
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, EXPOSED);
}
