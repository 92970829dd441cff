//! A store key's answer, negotiated: a client that accepts zstd or gzip (`accept.rs`) gets the
//! key's compressed copy made at ingest (`symdex_shared::encoded`, at
//! `_symdex/encoded/<encoding>/<key>`, a flat file in a local store) when there is one that
//! encodes what the key holds now; everyone else, and every range, gets the raw bytes as
//! before.
//!
//! Why this way:
//! - Copies are made once, when a key is published; nothing is compressed per request, so a
//!   compressed answer costs what an identity one does (the copy is streamed or answered from
//!   the memory cache exactly as a raw file is, `file.rs`).
//! - Fail closed: the copy is opened beneath the store like any key (no link followed) and
//!   answered with only when its attribute names the content the raw file, opened first, holds
//!   (`LocalStore::copy_encodes`, on these very files: no path is looked up in between). A
//!   copy left from older content, or naming nothing, is not answered with; the raw bytes are.
//! - A range is of the raw bytes (RFC 9110 ranges are of the representation sent, and a client
//!   resuming a download knows only raw offsets): always identity. A compressed answer does
//!   not say `Accept-Ranges: bytes`, so no client resumes one by its own offsets.
//! - `Vary: Accept-Encoding` on every answer of a key large enough to have a copy, identity
//!   ones too: a cache in front of `serve` keeps the codings apart.
//! - `X-Debuginfod-Size` stays the raw size (`raw_size.rs`), `Content-Length` is the copy's.

use std::fs::{File, Metadata};
use std::path::Path;

use http::{header, HeaderValue, Response};
use symdex_shared::encoded::{copy_key, Encoding, MIN_RAW_SIZE};
use symdex_shared::storage::local::{legacy_relative_path, relative_path};
use symdex_shared::storage::LocalStore;

use super::accept::AcceptEncoding;
use super::body::Body;
use super::cache::MemoryCache;
use super::file::{answer_file, last_modified, open_regular, Root};
use super::raw_size::RawSize;

/// The answer for a GET or HEAD of `key` in the store, the copy chosen by `accepted` where
/// one is current; `None` for a miss (as `file::answer`).
pub fn answer(
    root: &Root,
    cache: &MemoryCache,
    key: &str,
    head: bool,
    range: Option<&str>,
    accepted: &AcceptEncoding,
) -> Option<Response<Body>> {
    let (file, meta) = open_regular(root, Path::new(key))?;
    // Smaller keys never have a copy (encoded::worth_keeping): no Vary, no look for one.
    let may_have_copy = meta.len() >= MIN_RAW_SIZE;
    if may_have_copy && range.is_none() {
        for encoding in accepted.ranked() {
            if let Some(response) = copy_answer(root, cache, key, encoding, (&file, &meta), head) {
                return Some(varied(response));
            }
        }
    }
    let response = answer_file(cache, key, file, &meta, head, range)?;
    Some(match may_have_copy {
        true => varied(response),
        false => response,
    })
}

/// The answer with `key`'s copy in `encoding`, if there is one that encodes what `raw` (the
/// key's file, opened) holds.
fn copy_answer(
    root: &Root,
    cache: &MemoryCache,
    key: &str,
    encoding: Encoding,
    (raw, raw_meta): (&File, &Metadata),
    head: bool,
) -> Option<Response<Body>> {
    let copy_key = copy_key(encoding, key);
    // The copy's file, flat (local store paths.rs), or nested where an older store kept it.
    let (copy, copy_meta) = open_regular(root, &relative_path(&copy_key)).or_else(|| {
        legacy_relative_path(&copy_key).and_then(|nested| open_regular(root, &nested))
    })?;
    // An error reading either attribute is no copy: the raw bytes are always right.
    if !LocalStore::copy_encodes(raw, raw_meta, &copy).unwrap_or(false) {
        return None;
    }
    // Cached under the copy's key, which no client key can be (it is under `_symdex/`).
    let mut response = answer_file(cache, &copy_key, copy, &copy_meta, head, None)?;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_ENCODING,
        HeaderValue::from_static(encoding.as_str()),
    );
    headers.remove(header::ACCEPT_RANGES);
    // The key's content was modified then, not when its copy was written.
    match last_modified(raw_meta) {
        Some(modified) => headers.insert(header::LAST_MODIFIED, modified),
        None => headers.remove(header::LAST_MODIFIED),
    };
    response.extensions_mut().insert(RawSize(raw_meta.len()));
    Some(response)
}

fn varied(mut response: Response<Body>) -> Response<Body> {
    response
        .headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    response
}
