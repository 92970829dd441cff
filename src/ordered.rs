//! Work spread over every core, its results taken in input order.
//!
//! `keys`, `push`'s plan and `index`'s read-ahead identify many files, each on its own: the
//! work runs on a worker a core, and what each gives is handed on in the order of the inputs,
//! so the output is the same whatever thread finished first. At most [`WINDOW_PER_WORKER`]
//! results a worker wait to be taken: one slow input holds memory to that bound, not to the
//! run's size.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Condvar, Mutex};

/// Results each worker may run ahead of the one being waited for.
pub const WINDOW_PER_WORKER: usize = 32;

/// The workers to run: one a core (one where that is not known).
pub fn workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `work` on each of `items`, on `workers` threads, each result handed to `take` in the
/// order of `items` (on the calling thread). `take` returning `false` stops the run: no
/// further item is started (those claimed with the last may be). A panic in `work` goes on
/// unwinding on the calling thread once every worker stopped.
pub fn map_in_order_on<T, R>(
    workers: usize,
    items: &[T],
    work: impl Fn(&T) -> R + Sync,
    take: impl FnMut(R) -> bool,
) where
    T: Sync,
    R: Send,
{
    map_in_order_iter_on(workers, items.iter(), work, take);
}

/// [`map_in_order_on`] over items an iterator makes as it goes (a directory walk): the
/// workers draw them from it in turn, so work on the first items starts while later ones
/// are still being made.
pub fn map_in_order_iter_on<I, R>(
    workers: usize,
    items: I,
    work: impl Fn(I::Item) -> R + Sync,
    mut take: impl FnMut(R) -> bool,
) where
    I: Iterator + Send,
    R: Send,
{
    // One worker, or one item: no thread is worth starting.
    let known = match items.size_hint() {
        (low, Some(high)) if low == high => Some(low),
        _ => None,
    };
    if workers <= 1 || known.is_some_and(|len| len <= 1) {
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
    // run, 134 so). Where the count is known, a run is an eighth of a worker's share; where
    // it is not (a walk), runs grow with what was claimed, so that a few items still go to
    // every worker.
    let gate = Gate {
        source: Mutex::new(Source {
            items,
            next: 0,
            ended: false,
        }),
        taken: Mutex::new(0),
        moved: Condvar::new(),
        stop: AtomicBool::new(false),
    };
    let run_at = |next: usize| match known {
        Some(len) => (len / (workers * 8)).clamp(1, MAX_RUN),
        None => (next / (workers * 4)).clamp(1, MAX_RUN),
    };
    std::thread::scope(|scope| {
        let (done, results) = mpsc::channel::<(usize, Vec<R>)>();
        for _ in 0..known.map_or(workers, |len| workers.min(len)) {
            let done = done.clone();
            let (gate, work, run_at) = (&gate, &work, &run_at);
            scope.spawn(move || {
                // A panic here must not leave the others waiting for its result.
                let _stops = StopOnDrop(gate);
                while let Some((start, claimed)) = gate.claim(run_at, window) {
                    let made = claimed.into_iter().map(work).collect();
                    if done.send((start, made)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(done);
        // A panic in `take` must not leave a worker waiting on the window: the scope would
        // wait for it forever.
        let _stops = StopOnDrop(&gate);
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

/// Where the items come from, the index of the next one, and whether the iterator ended (it
/// is not asked again: an iterator need not say `None` twice).
struct Source<I> {
    items: I,
    next: usize,
    ended: bool,
}

/// What the workers share: the items not yet claimed, how far the results were taken.
struct Gate<I> {
    source: Mutex<Source<I>>,
    taken: Mutex<usize>,
    moved: Condvar,
    stop: AtomicBool,
}

impl<I: Iterator> Gate<I> {
    /// The next items to work on (a run of them, sized by `run_at` from the index of the
    /// first), with that index, once they are within `window` of the results taken; `None`
    /// when there is none left or the run stopped. The items are drawn under the source's
    /// lock: one worker at a time moves the iterator on.
    fn claim(
        &self,
        run_at: impl Fn(usize) -> usize,
        window: usize,
    ) -> Option<(usize, Vec<I::Item>)> {
        // Poisoned: the iterator panicked drawing another worker's run, whose items are lost;
        // drawing on would give later items their indices. The run ends (the panic goes on).
        let Ok(mut source) = self.source.lock() else {
            return None;
        };
        if source.ended {
            return None;
        }
        // The window is waited for with the source held: the index `at` stays the next
        // item's until it is drawn, and no other worker draws past the window meanwhile.
        let at = source.next;
        {
            let mut taken = self.taken.lock().unwrap_or_else(|e| e.into_inner());
            while at >= *taken + window && !self.stop.load(Ordering::Relaxed) {
                taken = self.moved.wait(taken).unwrap_or_else(|e| e.into_inner());
            }
        }
        if self.stop.load(Ordering::Relaxed) {
            return None;
        }
        let run = run_at(at);
        let claimed: Vec<I::Item> = source.items.by_ref().take(run).collect();
        source.ended = claimed.len() < run;
        source.next += claimed.len();
        (!claimed.is_empty()).then_some((at, claimed))
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
struct StopOnDrop<'g, I: Iterator>(&'g Gate<I>);

impl<I: Iterator> Drop for StopOnDrop<'_, I> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::{map_in_order_iter_on, map_in_order_on, MAX_RUN, WINDOW_PER_WORKER};

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

    #[test]
    fn items_made_as_the_run_goes_are_worked_on_before_the_last_is_made() {
        let made = AtomicUsize::new(0);
        let items = unknown_length(0..1000u64).inspect(|_| {
            made.fetch_add(1, Ordering::SeqCst);
        });
        let mut made_at_first_result = None;
        let mut seen = Vec::new();
        map_in_order_iter_on(
            2,
            items,
            |i| i * 2,
            |r| {
                made_at_first_result.get_or_insert(made.load(Ordering::SeqCst));
                seen.push(r);
                true
            },
        );
        assert_eq!(seen, (0..1000u64).map(|i| i * 2).collect::<Vec<_>>());
        // The first result was taken within a window and a run of the start, not after the
        // whole iterator was drawn.
        let first = made_at_first_result.expect("a result");
        assert!(
            first <= 2 * WINDOW_PER_WORKER + 2 * MAX_RUN,
            "{first} made first"
        );
    }

    #[test]
    fn a_panic_in_the_iterator_or_in_taking_ends_the_run_and_goes_on() {
        let walk = std::panic::catch_unwind(|| {
            let items = unknown_length(0..500u32).inspect(|&i| assert!(i != 40, "item forty"));
            map_in_order_iter_on(2, items, |i| i, |_| true)
        });
        assert!(walk.is_err());
        // Taking panics while workers wait on the window: they are let go.
        let taking = std::panic::catch_unwind(|| {
            map_in_order_iter_on(
                2,
                unknown_length(0..10_000u32),
                |i| i,
                |i| {
                    assert!(i != 3, "taking three");
                    true
                },
            )
        });
        assert!(taking.is_err());
    }

    #[test]
    fn taking_stops_a_run_over_an_iterator() {
        let started = AtomicUsize::new(0);
        let mut seen = 0;
        map_in_order_iter_on(
            2,
            unknown_length(0..10_000u32),
            |_| started.fetch_add(1, Ordering::Relaxed),
            |_| {
                seen += 1;
                seen < 5
            },
        );
        assert_eq!(seen, 5);
        assert!(started.load(Ordering::Relaxed) <= 5 + 2 * WINDOW_PER_WORKER + 2 * MAX_RUN);
    }

    /// `items` as a walk gives them: no length known ahead (a range's is, and would take the
    /// slices' path: runs sized from the count).
    fn unknown_length<T>(items: impl Iterator<Item = T>) -> impl Iterator<Item = T> {
        items.filter(|_| true)
    }
}
