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
    if parts.first().is_some_and(|p| is_private(p)) {
        return None;
    }
    Some(parts)
}

/// Whether `name` is one of symdex's private folders in any spelling a file system may treat
/// as the same name: on a case-insensitive one `_SYMDEX` opens `_symdex`, on a Unicode
/// case-folding one (ext4 `casefold`, APFS, NTFS) `_ſymdex` (long s) folds to `_symdex` too,
/// and HFS+ ignores zero-width characters. Folded here by uppercasing then lowercasing each
/// character (a superset of simple case folding: refusing a few more names costs nothing),
/// the invisible ones dropped. Names are components of at most 255 bytes: the fold is cheap.
pub(super) fn is_private(name: &str) -> bool {
    let folded: String = name
        .chars()
        .filter(|c| !is_ignorable(*c))
        .flat_map(char::to_uppercase)
        .flat_map(char::to_lowercase)
        .collect();
    PRIVATE_DIRS.contains(&folded.as_str())
}

/// Characters some file systems ignore in names (zero-width, joiners, directional marks, the
/// byte-order mark, the soft hyphen).
fn is_ignorable(c: char) -> bool {
    matches!(c, '\u{AD}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}')
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
    use super::{encoded, is_private, servable_path};

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
            "/_%C5%BFymdex/x",
            "/_MANIFE%C5%BFT/x",
            "/_symde%E2%80%8Bx/x",
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
        assert!(is_private("_\u{17F}YMDEX") && is_private("_manifest"));
        assert!(!is_private("_symbols") && !is_private("symdex"));
    }
}
