//! The store the CLI writes through: the local store, plus one switch for crash tests.
//!
//! With `SYMDEX_CRASH_AFTER_WRITES=N` set, the process aborts (as `kill -9` would end it: no
//! destructors, no flushing) right before its N+1-th write to the store. Tests use it to stop
//! a run at exact points and check that a re-run repairs everything; nothing else sets it.

use std::sync::atomic::{AtomicU64, Ordering};

use symdex_shared::storage::hooked::{BeforeChange, Hooked};
use symdex_shared::storage::{LocalStore, StorageResult};

/// The local store, each change counted by the crash switch.
pub type Store = Hooked<LocalStore, CrashSwitch>;

/// Aborts the process before its change number `crash_after` (counted from 0), if set.
pub struct CrashSwitch {
    writes: AtomicU64,
    crash_after: Option<u64>,
}

/// `inner`, with the crash switch `SYMDEX_CRASH_AFTER_WRITES` says.
pub fn store(inner: LocalStore) -> Store {
    let crash_after = std::env::var("SYMDEX_CRASH_AFTER_WRITES")
        .ok()
        .and_then(|v| v.parse().ok());
    Hooked::new(
        inner,
        CrashSwitch {
            writes: AtomicU64::new(0),
            crash_after,
        },
    )
}

impl BeforeChange for CrashSwitch {
    fn before_change(&self, _op: &'static str, _key: &str) -> StorageResult<()> {
        let n = self.writes.fetch_add(1, Ordering::SeqCst);
        if self.crash_after.is_some_and(|limit| n >= limit) {
            std::process::abort();
        }
        Ok(())
    }
}
