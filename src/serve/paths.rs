//! Which store file a request path names: decoded and normalised here (empty and `.` segments
//! dropped; `..`, backslashes, control characters, components over 255 bytes and non-UTF-8
//! refused; symdex's private folders refused in any case), and exactly that path is opened
//! beneath the store (`file.rs`), so no spelling (`//_symdex`, `/./_symdex`, `/%2e/_symdex`,
//! `/.%2f_manifest`, `/_SYMDEX`, the absolute form) reaches a private file.

/// Top-level directories that are symdex's state, never symbols.
const PRIVATE_DIRS: [&str; 2] = ["_symdex", "_manifest"];
/// The longest file name a store holds (and most file systems allow).
const MAX_COMPONENT: usize = 255;

/// The store-relative path a request names, normalised, or `None` when it names nothing that
/// may be served (outside the store, symdex's state, or not representable as a file name).
pub(super) fn servable_path(raw: &str) -> Option<Vec<String>> {
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

/// The SymSrv family's paths lowercased (ASCII, as the indexer folds their keys and the CDN's
/// edge function folds requests): `/symbols/...` and `/index2/...`.
pub(super) fn fold_case(parts: &mut [String]) {
    if matches!(
        parts.first().map(String::as_str),
        Some("symbols" | "index2")
    ) {
        for part in parts.iter_mut() {
            part.make_ascii_lowercase();
        }
    }
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
