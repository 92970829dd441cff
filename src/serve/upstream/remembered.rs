//! What a download that served nothing came to, remembered for a while ([`super::misses`]).

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Remembered {
    /// No upstream has it (404, 403, 410 everywhere): 404.
    Missing,
    /// An upstream answered with what may not be served as the key (another file, unknown
    /// bytes, too large): 502, or the cached copy it would have replaced.
    Refused,
    /// An upstream failed (an error, a timeout, another status): 404, or the cached copy.
    Failed,
}
