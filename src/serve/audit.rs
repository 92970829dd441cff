//! The audit page on `serve --audit` (`symdex audit`'s page, rebuilt from the store's manifest
//! at each request, so it grows with it) at [`AUDIT_PATH`], a path under symdex's private
//! folder that no symbol client asks for. Shown only to whom the store's state may be shown:
//! on a loopback address (the machine's own users), or where `serve` asks every request for
//! its token; elsewhere 403, never to an anonymous reader of the symbols.

use std::path::PathBuf;

use http::{header, HeaderValue, Response, StatusCode};

use super::body::Body;

/// Where the page is served.
pub const AUDIT_PATH: &str = "/_symdex/audit.html";

/// The page of one store, and whether this server may show it.
pub struct AuditPage {
    store: PathBuf,
    shown: bool,
}

impl AuditPage {
    /// The page of the store at `store`, shown when `serve` listens on loopback only or asks
    /// for credentials (`shown`).
    pub fn new(store: PathBuf, shown: bool) -> AuditPage {
        AuditPage { store, shown }
    }

    /// The answer to a GET (or HEAD: `head`) of [`AUDIT_PATH`].
    pub async fn answer(&self, head: bool) -> Response<Body> {
        if !self.shown {
            return status(
                StatusCode::FORBIDDEN,
                "the audit page is served on a loopback address or with --auth-token-file\n",
            );
        }
        let store = crate::deployment::StoreArg::Dir(self.store.clone());
        let shown_as = self.store.display().to_string();
        let page = crate::audit_page::render_store(&store, &shown_as, "_manifest").await;
        let html = match page {
            Ok(html) => html,
            Err(e) => {
                say_err!("symdex: audit page: {e:#}");
                return status(StatusCode::INTERNAL_SERVER_ERROR, "audit page failed\n");
            }
        };
        let len = html.len();
        let body = match head {
            true => Body::Empty,
            false => Body::Bytes(Some(html.into())),
        };
        let mut response = Response::new(body);
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        );
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
        // Rebuilt each time from a growing manifest: never kept by a cache.
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        response
    }
}

fn status(code: StatusCode, text: &'static str) -> Response<Body> {
    let mut response = Response::new(Body::text(text));
    *response.status_mut() = code;
    response
}
