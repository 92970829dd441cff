//! What a download tells the request that leads it, once it knows.

pub enum First {
    /// Nobody had it, or every upstream failed.
    Miss,
    /// Refused before a byte was sent (larger than allowed): 502.
    Refused,
    /// Being streamed: the body's length when the upstream said it.
    Streaming(Option<u64>),
    /// Over before anything was streamed (an empty answer, a refusal at the end): the request
    /// is answered from what the download left (the cache, or what was remembered).
    Done,
}
