//! Waiting for somebody else's live lease: how long at most ([`Wait`]), the waits of one
//! decision ([`Patience`]), and the error when they run out ([`busy`]).

use std::io;
use std::time::Duration;

/// How long to wait for somebody else's live lease before giving up (the caller then fails
/// the message or the run, to be retried).
#[derive(Debug, Clone, Copy)]
pub struct Wait {
    pub attempts: u32,
    pub first_pause: Duration,
    pub max_pause: Duration,
}

impl Default for Wait {
    fn default() -> Self {
        Wait {
            attempts: 30,
            first_pause: Duration::from_millis(20),
            max_pause: Duration::from_secs(2),
        }
    }
}

/// The error of a lease that stayed busy: retryable, never a verdict on the artifact.
pub(crate) fn busy(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::WouldBlock, format!("busy: {what}"))
}

/// Waits of one decision (as [`RefStore::update`] waits for a lease): attempts and pauses.
pub(super) struct Patience {
    wait: Wait,
    waited: u32,
    pause: Duration,
}

impl Patience {
    pub(super) fn new(wait: Wait) -> Self {
        Patience {
            wait,
            waited: 0,
            pause: wait.first_pause,
        }
    }

    /// One more wait (a pause), or a retryable error when there were enough.
    pub(super) async fn wait(&mut self, why: &str) -> io::Result<()> {
        self.waited += 1;
        if self.waited > self.wait.attempts {
            return Err(busy(why));
        }
        if !self.pause.is_zero() {
            tokio::time::sleep(self.pause).await;
        }
        self.pause = (self.pause * 2).min(self.wait.max_pause);
        Ok(())
    }
}
