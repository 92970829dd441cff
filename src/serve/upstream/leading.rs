//! The download of one key: while it lives, other requests for the key wait for it.

use std::sync::Arc;

use tokio::sync::watch;

use super::Upstreams;

pub struct Leading {
    pub upstreams: Arc<Upstreams>,
    pub key: String,
    /// Dropped with this: a waiter's receiver sees the download end.
    pub _done: watch::Sender<()>,
}

impl Drop for Leading {
    fn drop(&mut self) {
        // Forgotten before the sender drops (after this body): a waiter woken by the drop
        // finds the cache filled or the miss recorded, never this download still in flight.
        self.upstreams.forget_inflight(&self.key);
    }
}
