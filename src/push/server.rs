//! The symbol server a push asks (`--server`): what it serves already, and with `--wait`
//! whether a key is live. Every request gives up after the request timeout, so that a server
//! that accepts connections and never answers fails the push, instead of hanging it past
//! `--timeout`.

use std::time::Duration;

use crate::credentials::redacted;

/// A server's base URL, and the agent asking it (blocking: called through `spawn_blocking`).
#[derive(Clone)]
pub struct Server {
    base: String,
    agent: ureq::Agent,
    timeout: Duration,
}

impl Server {
    pub fn new(base: &str, timeout: Duration) -> Server {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .max_redirects(5)
            .build()
            .into();
        Server {
            base: base.trim_end_matches('/').to_string(),
            agent,
            timeout,
        }
    }

    /// Whether the server answers at all (whatever the status: a private deployment says
    /// 403, a store 404): asked once before anything is sent, so that one that cannot be
    /// reached, or never answers, is told by name instead of read as "serves nothing".
    pub fn check(&self) -> Result<(), String> {
        match self.get(&format!("{}/", self.base)) {
            Ok(_) => Ok(()),
            Err(ureq::Error::Timeout(_)) => Err(format!(
                "the server {} did not answer within {} s (--request-timeout)",
                redacted(&self.base),
                self.timeout.as_secs()
            )),
            Err(e) => Err(redacted(&format!(
                "the server {} cannot be asked: {e}",
                self.base
            ))),
        }
    }

    /// The ETag the server answers `key` with (unquoted), if it serves it: a one-byte ranged
    /// GET, not a HEAD, so S3, CloudFront and `symdex serve` answer alike, and S3-compatible
    /// endpoints that refuse anonymous HEADs (moto_server) too. `None` too when it does not
    /// answer in time.
    pub fn etag(&self, key: &str) -> Option<String> {
        let response = self.get(&format!("{}/{key}", self.base)).ok()?;
        if !response.status().is_success() {
            return None;
        }
        let etag = response.headers().get("etag")?.to_str().ok()?;
        Some(etag.trim_matches('"').to_string())
    }

    fn get(&self, url: &str) -> Result<ureq::http::Response<ureq::Body>, ureq::Error> {
        self.agent.get(url).header("Range", "bytes=0-0").call()
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::time::{Duration, Instant};

    use super::Server;

    #[test]
    fn a_server_that_accepts_and_never_answers_is_given_up_in_time() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        // Connections are accepted (by the backlog) and never answered while it lives.
        let server = Server::new(&base, Duration::from_secs(1));
        let started = Instant::now();
        let problem = server.check().unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(problem.contains("did not answer within 1 s"), "{problem}");
        assert_eq!(server.etag("buildid/ab/debuginfo"), None);
        drop(listener);
    }
}
