//! Downloads that served nothing, remembered for [`MISS_TTL`]: a storm of requests for a key
//! no upstream has, or one whose answer is refused, reaches the upstreams once.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::remembered::Remembered;

/// How long a download that served nothing is answered without asking again.
pub const MISS_TTL: Duration = Duration::from_secs(30);
/// Keys remembered at most (all forgotten at once past it: a bound, not a policy).
const MISSES_MAX: usize = 100_000;

#[derive(Default)]
pub struct Misses {
    keys: Mutex<HashMap<String, (Instant, Remembered)>>,
}

impl Misses {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, Remembered)>> {
        // The map is whole after every statement that changes it.
        self.keys.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What became of `key`'s last download, if that was within [`MISS_TTL`].
    pub fn get(&self, key: &str) -> Option<Remembered> {
        let keys = self.lock();
        let (at, what) = keys.get(key)?;
        (at.elapsed() < MISS_TTL).then_some(*what)
    }

    pub fn remember(&self, key: &str, what: Remembered) {
        let mut keys = self.lock();
        if keys.len() >= MISSES_MAX {
            keys.clear();
        }
        keys.insert(key.to_string(), (Instant::now(), what));
    }

    /// Forgets `key` (a download of it was served).
    pub fn forget(&self, key: &str) {
        self.lock().remove(key);
    }
}
