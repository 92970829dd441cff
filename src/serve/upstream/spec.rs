//! `--upstream [PREFIX=]URL`: which request paths go to which server, and as what URL.

use std::str::FromStr;

/// One upstream symbol server: the request paths under `prefix` (all of them when it is
/// empty) are asked of `base` with the prefix replaced by it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upstream {
    /// Empty, or store-relative and ending in `/` (`symbols/`).
    pub prefix: String,
    /// `http://` or `https://`, ending in `/`.
    pub base: String,
}

impl FromStr for Upstream {
    type Err = String;

    fn from_str(text: &str) -> Result<Upstream, String> {
        // A prefix is what comes before the first `=` when that part is no URL (a URL's query
        // may hold `=` too).
        let (prefix, url) = match text.split_once('=') {
            Some((prefix, url)) if !prefix.contains("://") => (prefix, url),
            _ => ("", text),
        };
        let scheme_ok = url.starts_with("http://") || url.starts_with("https://");
        if !scheme_ok || url.contains(['?', '#']) {
            return Err(format!(
                "{text}: an upstream is [PREFIX=]http(s)://host/path, without query or fragment"
            ));
        }
        let prefix = prefix.trim_matches('/');
        if prefix.split('/').any(|p| p == ".." || p == ".") || prefix.starts_with('_') {
            return Err(format!("{text}: the prefix must be a plain store path"));
        }
        let prefix = match prefix {
            "" => String::new(),
            p => format!("{p}/"),
        };
        let base = match url.ends_with('/') {
            true => url.to_string(),
            false => format!("{url}/"),
        };
        Ok(Upstream { prefix, base })
    }
}

impl Upstream {
    /// The URL `key` (store-relative, normalised) is asked at, when it is under the prefix.
    pub fn url_for(&self, key: &str) -> Option<String> {
        let rest = self.rest(key)?;
        Some(format!(
            "{}{}",
            self.base,
            super::super::url_path(rest.split('/'))
        ))
    }

    /// `key` without the prefix: the path the upstream is asked for below its URL.
    pub fn rest<'k>(&self, key: &'k str) -> Option<&'k str> {
        key.strip_prefix(&self.prefix)
            .filter(|rest| !rest.is_empty())
    }

    pub fn https(&self) -> bool {
        self.base.starts_with("https://")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_replaced_and_paths_appended() {
        let debian: Upstream = "https://debuginfod.debian.net".parse().unwrap();
        assert_eq!(
            debian.url_for("buildid/ab/debuginfo").unwrap(),
            "https://debuginfod.debian.net/buildid/ab/debuginfo"
        );
        let microsoft: Upstream = "symbols/=https://msdl.microsoft.com/download/symbols/"
            .parse()
            .unwrap();
        assert_eq!(microsoft.prefix, "symbols/");
        assert_eq!(
            microsoft.url_for("symbols/a b.pdb/ID1/a b.pdb").unwrap(),
            "https://msdl.microsoft.com/download/symbols/a%20b.pdb/ID1/a%20b.pdb"
        );
        assert_eq!(microsoft.url_for("buildid/ab/debuginfo"), None);
        assert_eq!(
            microsoft.url_for("symbolsx/a"),
            None,
            "whole components only"
        );
        let with_equals: Upstream = "http://h/x=y".parse().unwrap();
        assert_eq!(
            (with_equals.prefix.as_str(), with_equals.base.as_str()),
            ("", "http://h/x=y/")
        );
    }

    #[test]
    fn bad_upstreams_are_refused() {
        for bad in [
            "ftp://h/",
            "symbols/=h",
            "../x=http://h/",
            "_symdex/=http://h/",
            "http://h/?q=1",
        ] {
            assert!(bad.parse::<Upstream>().is_err(), "{bad}");
        }
    }
}
