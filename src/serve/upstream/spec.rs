//! `--upstream [PREFIX=]URL`: which request paths go to which server, and as what URL. User
//! information in the URL (`https://user:token@host/`) is taken out of it at once and kept as
//! the upstream's credentials: the URL printed, logged or quoted in an error never has it.

use std::str::FromStr;

use super::origin::Origin;
use super::secret::Secret;
use crate::credentials::{redacted, split_userinfo};

/// One upstream symbol server: the request paths under `prefix` (all of them when it is
/// empty) are asked of `base` with the prefix replaced by it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upstream {
    /// Empty, or store-relative and ending in `/` (`symbols/`).
    pub prefix: String,
    /// `http://` or `https://`, ending in `/`, without user information: safe to print.
    pub base: String,
    /// Sent to `base`'s origin only, never to a host it redirects to.
    pub authorization: Option<Secret>,
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
        let shown = redacted(text);
        let scheme_ok = url.starts_with("http://") || url.starts_with("https://");
        if !scheme_ok || url.contains(['?', '#']) {
            return Err(format!(
                "{shown}: an upstream is [PREFIX=]http(s)://host/path, without query or fragment"
            ));
        }
        let split = split_userinfo(url);
        let url = split.base.as_str();
        if Origin::of(url).is_none() {
            return Err(format!("{shown}: no host in the upstream's URL"));
        }
        let authorization = split
            .headers
            .into_iter()
            .next()
            .map(|(_, value)| Secret::header(value));
        let prefix = prefix.trim_matches('/');
        if prefix.split('/').any(|p| p == ".." || p == ".") || prefix.starts_with('_') {
            return Err(format!("{shown}: the prefix must be a plain store path"));
        }
        let prefix = match prefix {
            "" => String::new(),
            p => format!("{p}/"),
        };
        let base = match url.ends_with('/') {
            true => url.to_string(),
            false => format!("{url}/"),
        };
        Ok(Upstream {
            prefix,
            base,
            authorization,
        })
    }
}

impl Upstream {
    /// The URL of `rest`, a path below the upstream's.
    pub fn url_of(&self, rest: &str) -> String {
        format!("{}{}", self.base, super::super::url_path(rest.split('/')))
    }

    /// Where `base` points (checked when parsed).
    pub fn origin(&self) -> Option<Origin> {
        Origin::of(&self.base)
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

/// Gives the upstreams the credentials of an `--upstream-credentials` file: one
/// `URL CREDENTIALS` per line (blank lines and `#` comments aside), `URL` as an `--upstream`
/// gives it (prefix aside), `CREDENTIALS` `user:password` (basic) or a token (bearer). Errors
/// name the line, never its credentials.
pub fn add_credentials(upstreams: &mut [Upstream], text: &str) -> Result<(), String> {
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let number = number + 1;
        let Some((url, credentials)) = line.split_once(char::is_whitespace) else {
            return Err(format!("line {number}: wants `URL CREDENTIALS`"));
        };
        let url = split_userinfo(url).base;
        let url = url.trim_end_matches('/');
        let mut named = upstreams
            .iter_mut()
            .filter(|u| u.base.trim_end_matches('/') == url)
            .peekable();
        if named.peek().is_none() {
            return Err(format!("line {number}: {url} is no --upstream"));
        }
        let secret = Secret::from_credentials(credentials.trim());
        for upstream in named {
            upstream.authorization = Some(secret.clone());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{add_credentials, Upstream};

    impl Upstream {
        /// The URL `key` is asked at, when it is under the prefix.
        fn url_for(&self, key: &str) -> Option<String> {
            self.rest(key).map(|rest| self.url_of(rest))
        }
    }

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
            "http:///x",
        ] {
            assert!(bad.parse::<Upstream>().is_err(), "{bad}");
        }
        let refused = "_x=https://u:t0ken@h/".parse::<Upstream>().unwrap_err();
        assert!(!refused.contains("t0ken"), "{refused}");
    }

    #[test]
    fn a_credentials_file_names_its_upstreams() {
        let mut upstreams: Vec<Upstream> = ["http://a.example/x", "symbols/=http://b.example/"]
            .iter()
            .map(|u| u.parse().unwrap())
            .collect();
        let text = "# team stores\nhttp://a.example/x/ t0ken\n\nhttp://b.example u:p\n";
        add_credentials(&mut upstreams, text).unwrap();
        let headers: Vec<_> = upstreams
            .iter()
            .map(|u| u.authorization.as_ref().unwrap().expose().to_string())
            .collect();
        assert_eq!(headers[0], "Bearer t0ken");
        assert!(headers[1].starts_with("Basic "));
        let unknown = add_credentials(&mut upstreams, "http://c.example s3cret").unwrap_err();
        assert!(
            unknown.contains("line 1") && !unknown.contains("s3cret"),
            "{unknown}"
        );
    }

    #[test]
    fn user_information_becomes_credentials_never_shown() {
        let upstream: Upstream = "symbols/=https://ci:t0ken@h.example/s".parse().unwrap();
        assert_eq!(upstream.base, "https://h.example/s/");
        let header = upstream.authorization.clone().unwrap();
        assert!(header.expose().starts_with("Basic "));
        assert!(!format!("{upstream:?}").contains("t0ken"));
        assert!(!format!("{upstream:?}").contains(&header.expose()[6..]));
    }
}
