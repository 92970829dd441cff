//! What the `--upstream...` flags configured.

use std::path::PathBuf;
use std::time::Duration;

use super::spec::Upstream;

pub struct Settings {
    pub upstreams: Vec<Upstream>,
    /// `--upstream-redirect-host`: hosts (`HOST` or `HOST:PORT`) redirects may lead to besides
    /// each upstream's own.
    pub redirect_hosts: Vec<String>,
    pub cache_dir: PathBuf,
    pub cache_max_bytes: u64,
    /// The largest answer taken (larger ones are cut and refused).
    pub max_size: u64,
    /// How long a cached answer is served before it is asked for again.
    pub max_age: Duration,
    /// Downloads (and HEADs) from upstreams at once.
    pub downloads: usize,
    /// For one whole exchange with an upstream, redirects and body included.
    pub timeout: Duration,
}
