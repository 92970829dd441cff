//! A store that fails one change: every point where a run can die, one at a time.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::storage::hooked::{BeforeChange, Hooked};
use crate::storage::{StorageError, StorageResult};

/// Fails the `nth` change (a write, copy or delete, counted from 0) without making it — as a
/// process dies, or a network fails, before that request. Reads always go through.
pub struct FailNth {
    nth: usize,
    changes: AtomicUsize,
    /// Every change from the `nth` on fails: the process died there, and nothing it would
    /// have done after (a clean-up on the error included) happens.
    dies: bool,
}

impl FailNth {
    /// Whether the failing change was asked for.
    pub fn failed(&self) -> bool {
        self.changes.load(Ordering::SeqCst) > self.nth
    }
}

impl BeforeChange for FailNth {
    fn before_change(&self, op: &'static str, key: &str) -> StorageResult<()> {
        let change = self.changes.fetch_add(1, Ordering::SeqCst);
        if change == self.nth || (self.dies && change > self.nth) {
            return Err(StorageError::Io(io::Error::other(format!(
                "injected failure of change {change} ({op} {key})"
            ))));
        }
        Ok(())
    }
}

/// `inner` failing its `nth` change ([`FailNth`]).
pub fn failing_nth<S>(inner: S, nth: usize) -> Hooked<S, FailNth> {
    fail_from(inner, nth, false)
}

/// `inner` as seen by a process that dies before its `nth` change: that change and every
/// later one fail ([`FailNth`]).
pub fn dying_at_nth<S>(inner: S, nth: usize) -> Hooked<S, FailNth> {
    fail_from(inner, nth, true)
}

fn fail_from<S>(inner: S, nth: usize, dies: bool) -> Hooked<S, FailNth> {
    Hooked::new(
        inner,
        FailNth {
            nth,
            changes: AtomicUsize::new(0),
            dies,
        },
    )
}
