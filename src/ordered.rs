//! Work spread over every core, its results taken in input order.
//!
//! `keys`, `push`'s plan and `index`'s read-ahead identify many files, each on its own: the
//! work runs on a worker a core, and what each gives is handed on in the order of the inputs,
//! so the output is the same whatever thread finished first. At most [`WINDOW_PER_WORKER`]
//! results a worker wait to be taken: one slow input holds memory to that bound, not to the
//! run's size.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Condvar, Mutex};

/// Results each worker may run ahead of the one being waited for.
pub const WINDOW_PER_WORKER: usize = 32;

/// The workers to run: one a core (one where that is not known).
pub fn workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `work` on each of `items`, on [`workers`] threads, each result handed to `take` in the
/// order of `items` (on the calling thread). `take` returning `false` stops the run: no
/// further item is started (those claimed with the last may be). A panic in `work` goes on unwinding on the calling thread once
/// every worker stopped.
pub fn map_in_order<T, R>(items: &[T], work: impl Fn(&T) -> R + Sync, take: impl FnMut(R) -> bool)
where
    T: Sync,
    R: Send,
{
    map_in_order_on(workers(), items, work, take);
}

/// [`map_in_order`] on `workers` threads (tests choose the count).
pub fn map_in_order_on<T, R>(
    workers: usize,
    items: &[T],
    work: impl Fn(&T) -> R + Sync,
    mut take: impl FnMut(R) -> bool,
) where
    T: Sync,
    R: Send,
{
    // One worker, or one item: no thread is worth starting.
    if workers <= 1 || items.len() <= 1 {
        for item in items {
            if !take(work(item)) {
                return;
            }
        }
        return;
    }
    let window = workers * WINDOW_PER_WORKER;
    // Items are claimed and their results handed over a run at a time: a send an item woke
    // the taking thread for each (`keys` over ten times the corpus: 1,234 context switches a
    // run, 134 so).
    let run = (items.len() / (workers * 8)).clamp(1, MAX_RUN);
    let gate = Gate {
        next: AtomicUsize::new(0),
        taken: Mutex::new(0),
        moved: Condvar::new(),
        stop: AtomicBool::new(false),
    };
    std::thread::scope(|scope| {
        let (done, results) = mpsc::channel::<(usize, Vec<R>)>();
        for _ in 0..workers.min(items.len()) {
            let done = done.clone();
            let (gate, work) = (&gate, &work);
            scope.spawn(move || {
                // A panic here must not leave the others waiting for its result.
                let _stops = StopOnDrop(gate);
                while let Some(claimed) = gate.claim(items.len(), run, window) {
                    let start = claimed.start;
                    let made = items[claimed].iter().map(work).collect();
                    if done.send((start, made)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(done);
        let mut waiting = BTreeMap::new();
        let mut wanted = 0;
        'results: for (start, made) in results.iter() {
            waiting.insert(start, made);
            while let Some(made) = waiting.remove(&wanted) {
                wanted += made.len();
                gate.taken_up_to(wanted);
                for result in made {
                    if !take(result) {
                        break 'results;
                    }
                }
            }
        }
        gate.stop();
    });
}

/// The most items a worker claims at once.
const MAX_RUN: usize = 16;

/// What the workers share: the next item to claim, how far the results were taken.
struct Gate {
    next: AtomicUsize,
    taken: Mutex<usize>,
    moved: Condvar,
    stop: AtomicBool,
}

impl Gate {
    /// The next items to work on (up to `run` of them), once they are within `window` of the
    /// results taken; `None` when there is none left or the run stopped.
    fn claim(&self, len: usize, run: usize, window: usize) -> Option<std::ops::Range<usize>> {
        let at = self.next.fetch_add(run, Ordering::Relaxed);
        if at >= len {
            return None;
        }
        let mut taken = self.taken.lock().unwrap_or_else(|e| e.into_inner());
        while at >= *taken + window && !self.stop.load(Ordering::Relaxed) {
            taken = self.moved.wait(taken).unwrap_or_else(|e| e.into_inner());
        }
        (!self.stop.load(Ordering::Relaxed)).then_some(at..len.min(at + run))
    }

    fn taken_up_to(&self, taken: usize) {
        *self.taken.lock().unwrap_or_else(|e| e.into_inner()) = taken;
        self.moved.notify_all();
    }

    fn stop(&self) {
        // Set under the lock: a worker between its check and its wait would miss the call.
        let _taken = self.taken.lock().unwrap_or_else(|e| e.into_inner());
        self.stop.store(true, Ordering::Relaxed);
        self.moved.notify_all();
    }
}

/// Stops the run when a worker ends, normally or by a panic: after a panic the result it
/// owed never comes, and the workers waiting on the window must not wait for it.
struct StopOnDrop<'g>(&'g Gate);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_in_input_order_whatever_finishes_first() {
        let items: Vec<u64> = (0..1000).collect();
        for workers in [1, 2, 3, 8] {
            let mut seen = Vec::new();
            map_in_order_on(
                workers,
                &items,
                |&i| {
                    // The early ones slowest: later items finish first.
                    if i % 97 == 0 {
                        std::thread::sleep(std::time::Duration::from_millis(2));
                    }
                    i * 2
                },
                |r| {
                    seen.push(r);
                    true
                },
            );
            assert_eq!(seen, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        }
    }

    #[test]
    fn taking_stops_the_run() {
        let items: Vec<u32> = (0..10_000).collect();
        let started = AtomicUsize::new(0);
        let mut seen = 0;
        map_in_order_on(
            2,
            &items,
            |_| started.fetch_add(1, Ordering::Relaxed),
            |_| {
                seen += 1;
                seen < 5
            },
        );
        assert_eq!(seen, 5);
        // Within the window of what was taken, and a run a worker.
        assert!(started.load(Ordering::Relaxed) <= 5 + 2 * WINDOW_PER_WORKER + 2 * MAX_RUN);
    }

    #[test]
    fn a_panic_in_the_work_ends_the_run_and_goes_on() {
        let items: Vec<u32> = (0..500).collect();
        let run = std::panic::catch_unwind(|| {
            map_in_order_on(
                2,
                &items,
                |&i| {
                    assert!(i != 3, "item three");
                    i
                },
                |_| true,
            )
        });
        assert!(run.is_err());
    }
}
