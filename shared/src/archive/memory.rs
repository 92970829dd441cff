//! Memory the archive decoders of one process take at once. Each decoder is bounded on its
//! own (an xz or 7z dictionary within its limit, a zstd window), but a Lambda invocation walks
//! several archives at once (one per message in flight): four 7z archives of `-mx9`
//! (128 MiB dictionaries) would take more than a 512 MB function has, and the function,
//! killed, would take its whole batch down with it, again on every redelivery. A
//! [`DecoderMemory`] is a budget the decoders reserve from before they allocate (what their
//! stream's header says they need) and give back when they are dropped: over the budget, a
//! walk waits (on its own thread) for the decoders before it to finish.
//!
//! Invariant: the bytes reserved at once never exceed the budget, but for one exception
//! that keeps a walk from waiting on itself — a thread that holds a reservation (an outer
//! archive's decoder, while an archive inside it is walked) is granted a nested one at once.
//! A decoder needing more than the whole budget is granted the whole budget: it runs alone.

use std::cell::Cell;
use std::sync::{Condvar, Mutex};

/// A budget of decoder memory shared by the walks of a process.
#[derive(Debug)]
pub struct DecoderMemory {
    budget: u64,
    state: Mutex<State>,
    freed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    reserved: u64,
    /// The most reserved at once (for tests and logs).
    peak: u64,
    /// Walks waiting for memory.
    waiting: usize,
}

thread_local! {
    /// Reservations this thread holds (of any budget): a nested one is not made to wait.
    static HELD: Cell<usize> = const { Cell::new(0) };
}

impl DecoderMemory {
    pub fn new(budget: u64) -> DecoderMemory {
        DecoderMemory {
            budget: budget.max(1),
            state: Mutex::new(State::default()),
            freed: Condvar::new(),
        }
    }

    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// Reserves `bytes` (at most the whole budget), waiting until they are free unless this
    /// thread already holds a reservation; given back when the grant is dropped.
    pub fn reserve(&self, bytes: u64) -> Grant<'_> {
        let bytes = bytes.min(self.budget);
        let nested = HELD.with(|held| held.get() > 0);
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if !nested {
            state.waiting += 1;
            while state.reserved + bytes > self.budget {
                state = self.freed.wait(state).unwrap_or_else(|e| e.into_inner());
            }
            state.waiting -= 1;
        }
        state.reserved += bytes;
        state.peak = state.peak.max(state.reserved);
        HELD.with(|held| held.set(held.get() + 1));
        Grant {
            memory: self,
            bytes,
        }
    }

    /// The most bytes reserved at once so far.
    pub fn peak(&self) -> u64 {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).peak
    }

    /// The bytes reserved now.
    pub fn reserved(&self) -> u64 {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .reserved
    }

    /// Walks waiting for memory now.
    pub fn waiting(&self) -> usize {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).waiting
    }
}

/// Memory reserved for one decoder, given back when dropped (on the thread that reserved it:
/// a walk's decoders live on its thread).
#[derive(Debug)]
pub struct Grant<'m> {
    memory: &'m DecoderMemory,
    bytes: u64,
}

impl Drop for Grant<'_> {
    fn drop(&mut self) {
        HELD.with(|held| held.set(held.get().saturating_sub(1)));
        let mut state = self.memory.state.lock().unwrap_or_else(|e| e.into_inner());
        state.reserved -= self.bytes;
        drop(state);
        self.memory.freed.notify_all();
    }
}

/// What a decoder whose window (an LZMA dictionary, a zstd window) is `window` bytes takes at
/// its peak: the window grows with the output by doubling, so at its last growth the old
/// buffer (half) and the new one are both held; and its own state besides (up to 1 MiB).
/// Measured: a 7z of a 129 MB library with a 128 MiB dictionary took 220 MB more than the
/// library indexed loose.
pub(super) fn window_memory(window: u64) -> u64 {
    window + window / 2 + (1 << 20)
}

/// What an LZMA2 decoder takes for the dictionary its property byte gives
/// ([`window_memory`]): `None` for a property no decoder accepts.
pub(super) fn lzma2_memory(property: u8) -> Option<u64> {
    let dictionary = match property {
        0..=39 => (2 | u64::from(property & 1)) << (property / 2 + 11),
        40 => u64::from(u32::MAX),
        _ => return None,
    };
    Some(window_memory(dictionary))
}

#[cfg(test)]
mod tests {
    use super::{lzma2_memory, window_memory};
    use crate::archive::DecoderMemory;

    #[test]
    fn a_walk_over_the_budget_waits_for_the_one_before_it() {
        let memory = DecoderMemory::new(100);
        let first = memory.reserve(60);
        let (got, receive) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let second = memory.reserve(60);
                got.send(memory.peak()).unwrap();
                drop(second);
            });
            // The second walk is waiting, not granted, while the first holds its memory.
            while memory.waiting() == 0 {
                std::thread::yield_now();
            }
            assert!(receive.try_recv().is_err());
            drop(first);
            assert_eq!(receive.recv().unwrap(), 60, "never both at once");
        });
        assert_eq!(memory.peak(), 60);
        // What fits is granted at once, and more than the budget is the whole budget.
        let (a, b) = (memory.reserve(40), memory.reserve(50));
        assert_eq!(memory.peak(), 90);
        drop((a, b));
        let whole = memory.reserve(1 << 40);
        assert_eq!(memory.peak(), 100);
        drop(whole);
    }

    #[test]
    fn a_nested_reservation_is_granted_at_once() {
        let memory = DecoderMemory::new(100);
        let outer = memory.reserve(100);
        // An archive inside the outer one, walked on the same thread while the outer
        // decoder lives: waiting would be waiting for itself.
        let inner = memory.reserve(100);
        assert_eq!(memory.peak(), 200);
        drop(inner);
        drop(outer);
        let again = memory.reserve(100);
        assert_eq!(memory.waiting(), 0);
        drop(again);
    }

    #[test]
    fn lzma2_dictionaries_by_their_property() {
        let dictionary = |property| lzma2_memory(property).map(|m| (m - (1 << 20)) * 2 / 3);
        assert_eq!(dictionary(0), Some(4 << 10));
        assert_eq!(dictionary(16), Some(1 << 20));
        assert_eq!(dictionary(19), Some(3 << 20));
        // 7-Zip's -mx9 on a large file (LZMA2:27), xz -9 (64 MiB).
        assert_eq!(dictionary(30), Some(128 << 20));
        assert_eq!(dictionary(28), Some(64 << 20));
        assert_eq!(lzma2_memory(28), Some((96 << 20) + (1 << 20)));
        assert_eq!(lzma2_memory(40), Some(window_memory(u64::from(u32::MAX))));
        assert_eq!(lzma2_memory(41), None);
    }
}
