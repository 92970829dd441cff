//! What one thread allocates while a closure runs: the lib tests' global allocator counts the
//! bytes each thread holds, and [`measure`] reports the most a closure held at once beyond
//! what its thread held before. The tests that parse hostile inputs use it to show that a
//! lying header count or size costs no more memory than the input's limits allow
//! (`formats::robustness`). Other threads' allocations (the tests run side by side) are not
//! counted; work handed to other threads is not either, so it measures synchronous parsers.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, counting per thread (thread-locals without destructors: reading
/// them never allocates).
pub struct Counting;

thread_local! {
    static HELD: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn add(bytes: usize) {
    let _ = HELD.try_with(|held| {
        let now = held.get().saturating_add(bytes);
        held.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

fn sub(bytes: usize) {
    let _ = HELD.try_with(|held| held.set(held.get().saturating_sub(bytes)));
}

// SAFETY: every call is passed to the system allocator as it came; the counters only read
// the sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        add(layout.size());
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        add(layout.size());
        System.alloc_zeroed(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        sub(layout.size());
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        add(new_size);
        let moved = System.realloc(ptr, layout, new_size);
        // (A failed realloc keeps the old block: count it as held, the new size not.)
        if moved.is_null() {
            sub(new_size);
        } else {
            sub(layout.size());
        }
        moved
    }
}

/// `run`'s result and the most bytes this thread held at once while it ran, beyond what it
/// held when it began.
pub fn measure<T>(run: impl FnOnce() -> T) -> (T, usize) {
    let before = HELD.with(Cell::get);
    PEAK.with(|peak| peak.set(before));
    let result = run();
    let peak = PEAK.with(Cell::get);
    (result, peak.saturating_sub(before))
}
