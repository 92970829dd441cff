//! Where a URL points: scheme, host and port, which redirects are judged by (an upstream's
//! redirect is followed only to its own origin or a host the operator listed).

use http::Uri;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    pub https: bool,
    /// Lowercase; an IPv6 literal keeps its brackets.
    pub host: String,
    pub port: u16,
}

impl Origin {
    /// The origin of an absolute `http(s)://` URL without user information; `None` for
    /// anything else.
    pub fn of(url: &str) -> Option<Origin> {
        let uri: Uri = url.parse().ok()?;
        let https = match uri.scheme_str()? {
            "https" => true,
            "http" => false,
            _ => return None,
        };
        let authority = uri.authority()?;
        if authority.as_str().contains('@') || authority.host().is_empty() {
            return None;
        }
        let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
        Some(Origin {
            https,
            host: authority.host().to_ascii_lowercase(),
            port,
        })
    }

    /// `HOST` or `HOST:PORT` (`--upstream-redirect-host`): without a port, the scheme's own;
    /// `*.example.net` any host below `example.net` (msdl redirects to numbered blob-storage
    /// shards).
    pub fn matches_listed(&self, listed: &str) -> bool {
        let default = if self.https { 443 } else { 80 };
        let (host, port) = match listed.rsplit_once(':') {
            // Not an IPv6 literal's last group: `[::1]:8080` or `host:8080`.
            Some((host, port))
                if !host.ends_with(':') && (!host.contains(':') || host.ends_with(']')) =>
            {
                (host, port.parse::<u16>().ok())
            }
            _ => (listed, Some(default)),
        };
        let host = host.to_ascii_lowercase();
        let named = match host.strip_prefix("*.") {
            Some(domain) => self
                .host
                .strip_suffix(domain)
                .is_some_and(|sub| sub.len() > 1 && sub.ends_with('.')),
            None => host == self.host,
        };
        port == Some(self.port) && named
    }
}

#[cfg(test)]
mod tests {
    use super::Origin;

    #[test]
    fn origins_and_listed_hosts() {
        let o = Origin::of("https://Blob.Example.net/a/b").expect("origin");
        assert_eq!(
            (o.host.as_str(), o.port, o.https),
            ("blob.example.net", 443, true)
        );
        assert!(o.matches_listed("blob.example.net"));
        assert!(o.matches_listed("blob.example.net:443"));
        assert!(!o.matches_listed("blob.example.net:8443"));
        assert!(!o.matches_listed("example.net"));
        assert!(o.matches_listed("*.example.net") && o.matches_listed("*.EXAMPLE.net:443"));
        assert!(!o.matches_listed("*.blob.example.net") && !o.matches_listed("*.ample.net"));
        let local = Origin::of("http://127.0.0.2:9000/x").expect("origin");
        assert!(local.matches_listed("127.0.0.2:9000") && !local.matches_listed("127.0.0.2"));
        assert_eq!(Origin::of("http://u:p@h/"), None);
        assert_eq!(Origin::of("ftp://h/"), None);
        assert_eq!(Origin::of("/relative"), None);
    }
}
