//! The size of the file an answer is of, before any content coding: what `X-Debuginfod-Size`
//! says (a client shows progress against it and checks the decoded file's size with it) and
//! what `X-DEBUGINFOD-MAXSIZE` is compared with. A compressed answer's `Content-Length` is
//! the copy's, so the size is carried beside the response rather than read back from it.

use http::{header, Response, StatusCode};

use super::body::Body;

/// Kept in a response's extensions, which are never sent: set by `file.rs` for every 200 or
/// 206 of a file or of bytes in memory, and by `negotiate.rs` for a copy's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawSize(pub u64);

impl RawSize {
    /// The raw size of a 200 or 206 `response`; `None` for any other status, or where it is
    /// not known (an upstream's answer streamed without a length).
    pub fn of(response: &Response<Body>) -> Option<u64> {
        let status = response.status();
        if status != StatusCode::OK && status != StatusCode::PARTIAL_CONTENT {
            return None;
        }
        if let Some(RawSize(size)) = response.extensions().get::<RawSize>() {
            return Some(*size);
        }
        // Answers not framed by file.rs (an upstream's streamed 200, its HEAD) are identity:
        // their length is the file's.
        let text = |name| response.headers().get(name).and_then(|v| v.to_str().ok());
        if response.headers().contains_key(header::CONTENT_ENCODING) {
            return None;
        }
        match status {
            StatusCode::OK => text(header::CONTENT_LENGTH)?.parse().ok(),
            _ => text(header::CONTENT_RANGE)?
                .rsplit_once('/')?
                .1
                .parse()
                .ok(),
        }
    }
}
