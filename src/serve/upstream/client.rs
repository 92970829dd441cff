//! Asking one upstream for one path: its own credentials sent to its own origin only,
//! redirects followed here (never by the HTTP client) and only to the upstream's origin or a
//! host the operator listed (`--upstream-redirect-host`), an https upstream never sent to plain
//! http, the whole exchange (redirects included) within `--upstream-timeout`, and no internal
//! address reached through a redirect ([`Guard`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{header, Response};

use super::guard::Guard;
use super::origin::Origin;
use super::spec::Upstream;
use crate::credentials::redacted;

/// Redirects followed at most for one request.
const MAX_REDIRECTS: usize = 5;

pub struct Client {
    pub upstream: Upstream,
    own: Origin,
    agent: ureq::Agent,
    /// `--upstream-redirect-host`: `HOST` or `HOST:PORT`.
    redirect_hosts: Arc<[String]>,
    timeout: Duration,
}

/// What an upstream said.
pub enum Asked {
    /// A 200: the body is still to be read.
    Found(Response<ureq::Body>),
    /// 404, 403 or 410: it does not have it.
    Missing,
    /// Anything else (an error, another status, a refused redirect): why, safe to print.
    Failed(String),
}

impl Client {
    pub fn new(upstream: Upstream, redirect_hosts: Arc<[String]>, timeout: Duration) -> Client {
        // Checked when the upstream was parsed; an origin nothing matches otherwise.
        let own = upstream.origin().unwrap_or(Origin {
            https: true,
            host: String::new(),
            port: 0,
        });
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .https_only(upstream.https())
            .user_agent(concat!("symdex/", env!("CARGO_PKG_VERSION")))
            .build();
        let agent = ureq::Agent::with_parts(
            config,
            ureq::unversioned::transport::DefaultConnector::default(),
            Guard::new(own.clone()),
        );
        Client {
            upstream,
            own,
            agent,
            redirect_hosts,
            timeout,
        }
    }

    /// GETs (or HEADs) `rest` below the upstream's URL.
    pub fn ask(&self, head: bool, rest: &str) -> Asked {
        let deadline = Instant::now() + self.timeout;
        let mut url = self.upstream.url_of(rest);
        for _ in 0..=MAX_REDIRECTS {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Asked::Failed("timed out".to_string());
            }
            let response = match self.call(head, &url, left) {
                Ok(response) => response,
                Err(e) => return Asked::Failed(redacted(&e.to_string())),
            };
            match response.status().as_u16() {
                200 => return Asked::Found(response),
                404 | 403 | 410 => return Asked::Missing,
                301 | 302 | 303 | 307 | 308 => {
                    let location = response
                        .headers()
                        .get(header::LOCATION)
                        .and_then(|l| l.to_str().ok());
                    let next = location.map(|l| joined(&url, l));
                    match next.as_deref().map(|next| (next, self.may_follow(next))) {
                        Some((next, Ok(()))) => url = next.to_string(),
                        Some((next, Err(why))) => {
                            return Asked::Failed(format!("redirect to {} {why}", redacted(next)))
                        }
                        None => return Asked::Failed("a redirect without a Location".into()),
                    }
                }
                status => return Asked::Failed(format!("answered {status}")),
            }
        }
        Asked::Failed(format!("more than {MAX_REDIRECTS} redirects"))
    }

    fn call(
        &self,
        head: bool,
        url: &str,
        left: Duration,
    ) -> Result<Response<ureq::Body>, ureq::Error> {
        let request = match head {
            true => self.agent.head(url),
            false => self.agent.get(url),
        };
        let mut request = request.config().timeout_global(Some(left)).build();
        // The credentials go to the upstream's own origin, never to where it redirects.
        if let Some(secret) = &self.upstream.authorization {
            if Origin::of(url).as_ref() == Some(&self.own) {
                request = request.header(header::AUTHORIZATION, secret.expose());
            }
        }
        request.call()
    }

    /// `Ok` when a redirect to `next` may be followed, else why not.
    fn may_follow(&self, next: &str) -> Result<(), String> {
        let Some(origin) = Origin::of(next) else {
            return Err("refused: not an http(s) URL without user information".into());
        };
        if self.own.https && !origin.https {
            return Err("refused: an https upstream is never left for plain http".into());
        }
        let own_host = origin.host == self.own.host && origin.port == self.own.port;
        if own_host || self.redirect_hosts.iter().any(|h| origin.matches_listed(h)) {
            return Ok(());
        }
        Err(format!(
            "refused: {}:{} is not the upstream's host nor an --upstream-redirect-host",
            origin.host, origin.port
        ))
    }
}

/// A `Location` resolved against the URL that sent it (absolute, scheme-relative,
/// absolute-path or relative to its directory).
fn joined(base: &str, location: &str) -> String {
    if location.starts_with("http://") || location.starts_with("https://") {
        return location.to_string();
    }
    let (scheme, rest) = base.split_once("://").unwrap_or(("http", base));
    if let Some(network) = location.strip_prefix("//") {
        return format!("{scheme}://{network}");
    }
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let origin = &base[..scheme.len() + 3 + authority_end];
    if location.starts_with('/') {
        return format!("{origin}{location}");
    }
    let directory = base
        .rfind('/')
        .filter(|&i| i >= origin.len())
        .map_or(origin.len(), |i| i + 1);
    let directory = &base[..directory];
    match directory.ends_with('/') {
        true => format!("{directory}{location}"),
        false => format!("{directory}/{location}"),
    }
}

#[cfg(test)]
mod tests {
    use super::joined;

    #[test]
    fn locations_are_resolved_against_their_url() {
        let base = "http://h:1/a/b/c.pdb";
        assert_eq!(joined(base, "https://x/y"), "https://x/y");
        assert_eq!(joined(base, "//x/y"), "http://x/y");
        assert_eq!(joined(base, "/y"), "http://h:1/y");
        assert_eq!(joined(base, "d.pdb"), "http://h:1/a/b/d.pdb");
        assert_eq!(joined("http://h", "d"), "http://h/d");
    }
}
