//! Source Link: the JSON map a PDB or Portable PDB carries from the source paths it was built
//! from to the URLs a debugger downloads them from, and the URLs of sources served from the
//! store (`<url>/src/<product>/<build>/<path under a build root>`).
//!
//! The rules are the Source Link specification's, as Visual Studio and WinDbg apply them: a
//! key ending in `*` matches every path it prefixes, the longest such prefix wins, and the
//! rest of the path replaces the `*` of the URL with its `\` turned into `/`; a key without
//! `*` matches one path exactly and wins over every prefix. Paths compare ignoring ASCII case
//! (they are Windows paths as often as not: the debugger asks with the case the compiler
//! recorded, which need not be the case of the key).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The most bytes of Source Link JSON read: real maps are a few hundred bytes (one entry a
/// repository or build root); a map this large is not one a debugger could use either.
pub const MAX_SOURCE_LINK_BYTES: usize = 4 << 20;

/// The most entries a map may have.
pub const MAX_SOURCE_LINK_ENTRIES: usize = 10_000;

/// A Source Link map: `{"documents": {"<path or prefix*>": "<url, with * for a prefix>"}}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceLinkMap {
    /// Key: a path (exact) or a path prefix ending in `*`; value: the URL, whose one `*`
    /// stands for the rest of the path when the key is a prefix.
    pub documents: BTreeMap<String, String>,
}

/// Why a Source Link JSON text is not a map a debugger can apply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Source Link: {0}")]
pub struct SourceLinkError(pub String);

impl SourceLinkMap {
    /// Parses Source Link JSON bytes (UTF-8, a byte order mark allowed), at most
    /// [`MAX_SOURCE_LINK_BYTES`]. Fields other than `documents` are ignored, as debuggers do.
    pub fn parse(bytes: &[u8]) -> Result<Self, SourceLinkError> {
        if bytes.len() > MAX_SOURCE_LINK_BYTES {
            return Err(SourceLinkError(format!(
                "{} bytes, more than the {MAX_SOURCE_LINK_BYTES} read",
                bytes.len()
            )));
        }
        let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
        let map: SourceLinkMap =
            serde_json::from_slice(bytes).map_err(|e| SourceLinkError(e.to_string()))?;
        map.validate()?;
        Ok(map)
    }

    /// Checks each entry as the specification has them: a `*` only at the end of a key, and
    /// then exactly one in its URL; none in an exact key's URL.
    pub fn validate(&self) -> Result<(), SourceLinkError> {
        if self.documents.len() > MAX_SOURCE_LINK_ENTRIES {
            return Err(SourceLinkError(format!(
                "{} entries, more than {MAX_SOURCE_LINK_ENTRIES}",
                self.documents.len()
            )));
        }
        for (key, url) in &self.documents {
            let stars = key.matches('*').count();
            let wildcard = key.ends_with('*');
            let url_stars = url.matches('*').count();
            let fits = match (wildcard, stars) {
                (true, 1) => url_stars == 1,
                (false, 0) => url_stars == 0,
                _ => false,
            };
            if key.is_empty() || !fits {
                return Err(SourceLinkError(format!(
                    "entry {key:?}: {url:?} (a `*` ends a key, and then its URL has one)"
                )));
            }
        }
        Ok(())
    }

    /// The map of sources served from the store: each build root's files under
    /// `<base>/` (`base` from [`store_base`]).
    pub fn for_roots(roots: &[BuildRoot], base: &str) -> Self {
        let documents = roots
            .iter()
            .map(|root| (format!("{}*", root.prefix()), format!("{base}/*")))
            .collect();
        SourceLinkMap { documents }
    }

    /// The URL a debugger downloads `path` from, if an entry maps it.
    pub fn resolve(&self, path: &str) -> Option<String> {
        if let Some(url) = self
            .documents
            .iter()
            .find(|(key, _)| !key.ends_with('*') && key.eq_ignore_ascii_case(path))
            .map(|(_, url)| url.clone())
        {
            return Some(url);
        }
        let (key, url) = self
            .documents
            .iter()
            .filter_map(|(key, url)| Some((key.strip_suffix('*')?, url)))
            .filter(|(prefix, _)| starts_with_ignoring_case(path, prefix))
            .max_by_key(|(prefix, _)| prefix.len())?;
        let rest = path.get(key.len()..)?.replace('\\', "/");
        Some(url.replacen('*', &rest, 1))
    }

    /// The JSON a linker embeds (`/SOURCELINK:`, `/pdbstream:sourcelink=`).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl FromStr for SourceLinkMap {
    type Err = SourceLinkError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SourceLinkMap::parse(s.as_bytes())
    }
}

fn starts_with_ignoring_case(path: &str, prefix: &str) -> bool {
    path.len() >= prefix.len()
        && path.is_char_boundary(prefix.len())
        && path[..prefix.len()].eq_ignore_ascii_case(prefix)
}

/// A directory a build compiled its sources under, as the compiler recorded their paths
/// (`/home/ci/work`, `C:\b`): what is below it is what the store serves under
/// `src/<product>/<build>/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildRoot(String);

impl BuildRoot {
    /// The root with its separator at the end: the one it uses (`\` for `C:\b`, `/` for
    /// `/home/ci/w` and `C:/b`, as compilers record paths under each).
    fn prefix(&self) -> String {
        let root = self.0.as_str();
        if root.ends_with(['/', '\\']) {
            return root.to_string();
        }
        let windows = root.contains('\\');
        format!("{root}{}", if windows { '\\' } else { '/' })
    }

    /// The path of `path` below this root, `/`-separated, or `None` when it is not below it
    /// (compared ignoring ASCII case, as Source Link does).
    pub fn relative(&self, path: &str) -> Option<String> {
        let prefix = self.prefix();
        if !starts_with_ignoring_case(path, &prefix) {
            return None;
        }
        let rest = path.get(prefix.len()..)?.replace('\\', "/");
        (!rest.is_empty()).then_some(rest)
    }
}

impl FromStr for BuildRoot {
    type Err = String;

    /// An absolute path (`/...`, `C:\...`, `C:/...`, `\\server\share`), no `*`, no control
    /// characters.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bytes = s.as_bytes();
        let drive = bytes.len() >= 3
            && bytes[0].is_ascii_alphabetic()
            && bytes[1] == b':'
            && matches!(bytes[2], b'\\' | b'/');
        let absolute = s.starts_with('/') || s.starts_with("\\\\") || drive;
        if !absolute {
            return Err(format!("build root {s:?} is not an absolute path"));
        }
        if s.contains('*') || s.chars().any(char::is_control) {
            return Err(format!("build root {s:?} holds `*` or a control character"));
        }
        Ok(BuildRoot(s.to_string()))
    }
}

impl fmt::Display for BuildRoot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The path of `path` below the first of `roots` holding it (the longest root first, so a
/// nested root wins), `/`-separated.
pub fn relative_to_roots(roots: &[BuildRoot], path: &str) -> Option<String> {
    let mut by_length: Vec<&BuildRoot> = roots.iter().collect();
    by_length.sort_by_key(|root| std::cmp::Reverse(root.0.len()));
    by_length.into_iter().find_map(|root| root.relative(path))
}

/// `<url>/src/<product>/<build>`: where the store serves a build's sources. The product and
/// build are one path segment each (no separator, `*`, `%`, `.`/`..`, control character), so
/// the URL names no other build's directory.
pub fn store_base(url: &str, product: &str, build: &str) -> Result<String, String> {
    one_segment("product", product)?;
    one_segment("build", build)?;
    if !(url.starts_with("https://") || url.starts_with("http://")) || url.contains('*') {
        return Err(format!("URL {url:?} is not an http(s) URL without `*`"));
    }
    Ok(format!(
        "{}/src/{product}/{build}",
        url.trim_end_matches('/')
    ))
}

/// Whether `value` (a product or build, `what`) is one path segment of a source URL: no
/// separator, `*`, `%`, `?`, `#`, space or control character, not `.` or `..`, so the URL
/// names no other build's directory.
pub fn one_segment(what: &str, value: &str) -> Result<(), String> {
    let bad = value.is_empty()
        || value == "."
        || value == ".."
        || value.contains(['/', '\\', '*', '%', '?', '#'])
        || value.chars().any(|c| c.is_control() || c == ' ');
    if bad {
        return Err(format!(
            "{what} {value:?} is not one path segment (no separators, `*`, `%`, `?`, `#`, spaces)"
        ));
    }
    Ok(())
}

/// Where a debugger fetches a PDB document from, as the store sees it ([`document_place`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DocumentPlace {
    /// From the store, under `src/<product>/<build>/` at this path (`/`-separated).
    Store(String),
    /// From another host: the PDB's Source Link map sends it there (this URL).
    Elsewhere(String),
    /// Nowhere the store can tell: no Source Link entry maps it and it is under no build root.
    Unmapped,
}

/// Where the store serves a document (its `path`) of a PDB uploaded for `product` and
/// `build`: the path its Source Link `map` gives below `/src/<product>/<build>/` (what Visual
/// Studio asks for), else the path its srcsrv stream's URL (`srcsrv_url`) gives there (what
/// WinDbg asks for), else its path below the upload's build `root`. A URL of another
/// product's or build's sources is [`DocumentPlace::Elsewhere`]: a PDB publishes under its own
/// upload's product and build only (THREATS.md, tenancy), whatever its streams say. A path
/// holding `%`, `?` or `#` is not taken apart (a debugger would encode or cut it): elsewhere
/// too.
pub fn document_place(
    path: &str,
    srcsrv_url: Option<&str>,
    map: Option<&SourceLinkMap>,
    root: Option<&BuildRoot>,
    (product, build): (&str, &str),
) -> DocumentPlace {
    let url = map
        .and_then(|m| m.resolve(path))
        .or(srcsrv_url.map(str::to_string));
    if let Some(url) = url {
        let own = format!("/src/{product}/{build}/");
        let url_path = url
            .split_once("://")
            .and_then(|(_, after)| after.split_once('/'))
            .map(|(_, path)| format!("/{path}"));
        let rest = url_path.and_then(|p| p.split_once(own.as_str()).map(|(_, r)| r.to_string()));
        return match rest {
            Some(rest) if !rest.contains(['%', '?', '#']) => DocumentPlace::Store(rest),
            _ => DocumentPlace::Elsewhere(url),
        };
    }
    match root.and_then(|root| root.relative(path)) {
        Some(rest) => DocumentPlace::Store(rest),
        None => DocumentPlace::Unmapped,
    }
}

#[cfg(test)]
mod tests {
    use super::{
        document_place, relative_to_roots, store_base, BuildRoot, DocumentPlace, SourceLinkMap,
        MAX_SOURCE_LINK_BYTES,
    };

    fn root(s: &str) -> BuildRoot {
        s.parse().unwrap()
    }

    #[test]
    fn longest_prefix_wins_and_backslashes_turn() {
        let map: SourceLinkMap = r#"{"documents": {
            "C:\\src\\*": "https://a/*",
            "C:\\src\\vendor\\*": "https://b/x/*/raw",
            "C:\\src\\one.h": "https://c/one.h"
        }}"#
        .parse()
        .unwrap();
        assert_eq!(
            map.resolve(r"C:\src\lib\a.cpp").as_deref(),
            Some("https://a/lib/a.cpp")
        );
        assert_eq!(
            map.resolve(r"c:\SRC\vendor\z\b.h").as_deref(),
            Some("https://b/x/z/b.h/raw")
        );
        assert_eq!(
            map.resolve(r"C:\src\one.h").as_deref(),
            Some("https://c/one.h")
        );
        assert_eq!(map.resolve(r"D:\other\a.cpp"), None);
        assert_eq!(map.resolve("C:"), None);
    }

    #[test]
    fn maps_for_roots_escape_windows_paths_in_json() {
        let base = store_base("https://sym.example.com/", "app", "1.2.3").unwrap();
        assert_eq!(base, "https://sym.example.com/src/app/1.2.3");
        let map = SourceLinkMap::for_roots(&[root(r"C:\b"), root("/home/ci/w/")], &base);
        assert_eq!(
            map.to_json(),
            r#"{"documents":{"/home/ci/w/*":"https://sym.example.com/src/app/1.2.3/*","C:\\b\\*":"https://sym.example.com/src/app/1.2.3/*"}}"#
        );
        let back: SourceLinkMap = map.to_json().parse().unwrap();
        assert_eq!(back, map);
        assert_eq!(
            back.resolve(r"C:\b\src\main.cpp").as_deref(),
            Some("https://sym.example.com/src/app/1.2.3/src/main.cpp")
        );
    }

    #[test]
    fn roots_strip_and_nested_roots_win() {
        let roots = [root("/w"), root("/w/third_party")];
        assert_eq!(
            relative_to_roots(&roots, "/w/third_party/z/z.h").as_deref(),
            Some("z/z.h")
        );
        assert_eq!(relative_to_roots(&roots, "/w/a.c").as_deref(), Some("a.c"));
        assert_eq!(relative_to_roots(&roots, "/wx/a.c"), None);
        assert_eq!(relative_to_roots(&roots, "/w/"), None);
        assert_eq!(
            root(r"C:\b").relative(r"c:\B\x\y.cpp").as_deref(),
            Some("x/y.cpp")
        );
        assert_eq!(
            root("C:/b").relative("C:/b/x/y.cpp").as_deref(),
            Some("x/y.cpp")
        );
    }

    #[test]
    fn hostile_maps_and_names_are_refused() {
        for bad in [
            "",
            "[]",
            r#"{"documents": 1}"#,
            r#"{"documents": {"a*b": "u/*"}}"#,
            r#"{"documents": {"a*": "u"}}"#,
            r#"{"documents": {"a*": "u/**"}}"#,
            r#"{"documents": {"a": "u/*"}}"#,
            r#"{"documents": {"": "u"}}"#,
        ] {
            assert!(bad.parse::<SourceLinkMap>().is_err(), "{bad}");
        }
        let huge = vec![b' '; MAX_SOURCE_LINK_BYTES + 1];
        assert!(SourceLinkMap::parse(&huge).is_err());
        let bom = b"\xef\xbb\xbf{\"documents\":{},\"x\":1}";
        assert_eq!(SourceLinkMap::parse(bom).unwrap(), SourceLinkMap::default());
        for bad in ["rel/dir", "C:", "/a*", "/a\nb"] {
            assert!(bad.parse::<BuildRoot>().is_err(), "{bad}");
        }
        for (product, build) in [
            ("a/b", "1"),
            ("a", ".."),
            ("", "1"),
            ("a", "1%2"),
            ("a", "x y"),
        ] {
            assert!(store_base("https://s", product, build).is_err());
        }
        assert!(store_base("ftp://s", "a", "1").is_err());
    }

    #[test]
    fn a_document_is_served_where_its_own_builds_url_says() {
        let map: SourceLinkMap = r#"{"documents": {
            "C:\\b\\*": "https://sym.example/src/app/7/*",
            "C:\\b\\vendor\\*": "https://raw.github.example/v/*",
            "C:\\b\\other\\*": "https://sym.example/src/other/7/*",
            "C:\\b\\odd\\*": "https://sym.example/src/app/7/odd%20/*"
        }}"#
        .parse()
        .unwrap();
        let place = |doc: &str| document_place(doc, None, Some(&map), None, ("app", "7"));
        assert_eq!(
            place("C:\\b\\src\\main.cpp"),
            DocumentPlace::Store("src/main.cpp".into())
        );
        assert!(matches!(
            place("C:\\b\\vendor\\z.h"),
            DocumentPlace::Elsewhere(_)
        ));
        assert!(
            matches!(place("C:\\b\\other\\a.c"), DocumentPlace::Elsewhere(_)),
            "another product's URL publishes nothing under it"
        );
        assert!(matches!(
            place("C:\\b\\odd\\a.c"),
            DocumentPlace::Elsewhere(_)
        ));
        assert_eq!(place("D:\\x.c"), DocumentPlace::Unmapped);
        let root = root("/home/ci/w");
        assert_eq!(
            document_place("/home/ci/w/lib/a.c", None, None, Some(&root), ("app", "7")),
            DocumentPlace::Store("lib/a.c".into())
        );
        assert_eq!(
            document_place(
                "/usr/include/stdio.h",
                None,
                None,
                Some(&root),
                ("app", "7")
            ),
            DocumentPlace::Unmapped
        );
        let srcsrv = Some("https://sym.example/src/app/7/x/y.c");
        assert_eq!(
            document_place("D:\\x\\y.c", srcsrv, None, None, ("app", "7")),
            DocumentPlace::Store("x/y.c".into())
        );
        let foreign = Some("https://sym.example/src/other/7/x/y.c");
        assert!(matches!(
            document_place("D:\\x\\y.c", foreign, None, Some(&root), ("app", "7")),
            DocumentPlace::Elsewhere(_)
        ));
    }
}
