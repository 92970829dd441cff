//! Drives concurrent operations on a store through chosen interleavings of their storage steps.
//!
//! [`Scheduled`] wraps any [`Storage`]: every call made by an *actor* thread stops at a barrier
//! before it reaches the store, and [`Scheduler::run`] lets exactly one actor through at a
//! time, picking which by a seeded random choice. Between two barriers an actor runs alone, so
//! a schedule is one interleaving of the actors' storage steps at their finest grain, and the
//! same seed replays it. Calls from other threads (test setup, checks) pass straight through.
//! No sleeps: the only waiting is on the scheduler's condition variable.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::reader::RangeReader;
use crate::storage::{CopySource, ObjectInfo, Precondition, Storage, StorageResult, Versioned};

thread_local! {
    /// (scheduler identity, actor index) of the current thread, when it is an actor.
    static ACTOR: Cell<Option<(usize, usize)>> = const { Cell::new(None) };
}

#[derive(Default)]
struct State {
    /// The actor allowed to run until its next barrier (or its end).
    running: Option<usize>,
    /// Actors stopped at a barrier, with the step they are about to take.
    waiting: BTreeMap<usize, String>,
    finished: BTreeSet<usize>,
    actors: usize,
    /// Every step taken, in order: `actor: step`.
    trace: Vec<String>,
}

/// Decides the order of the actors' storage steps.
#[derive(Default)]
pub struct Scheduler {
    state: Mutex<State>,
    wake: Condvar,
}

/// A small, seedable generator (xorshift64*): schedules must replay from their seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n.max(1)
    }
}

impl Scheduler {
    pub fn new() -> Arc<Self> {
        Arc::new(Scheduler::default())
    }

    fn id(&self) -> usize {
        self as *const Scheduler as usize
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Called before every storage step: an actor waits here until it is picked.
    fn barrier(&self, step: &str) {
        let Some((scheduler, actor)) = ACTOR.with(Cell::get) else {
            return;
        };
        if scheduler != self.id() {
            return;
        }
        let mut state = self.lock();
        state.waiting.insert(actor, step.to_string());
        if state.running == Some(actor) {
            state.running = None;
        }
        self.wake.notify_all();
        while state.running != Some(actor) {
            state = self.wake.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn finish(&self, actor: usize) {
        let mut state = self.lock();
        state.finished.insert(actor);
        state.waiting.remove(&actor);
        if state.running == Some(actor) {
            state.running = None;
        }
        self.wake.notify_all();
    }

    /// Runs the actors to their ends, one storage step at a time in the order `seed` picks.
    /// Returns each actor's result (an actor that panicked re-panics here) and the trace.
    pub fn run<T: Send>(
        self: &Arc<Self>,
        seed: u64,
        actors: Vec<Box<dyn FnOnce() -> T + Send + '_>>,
    ) -> (Vec<T>, Vec<String>) {
        let mut rng = Rng::new(seed);
        {
            let mut state = self.lock();
            *state = State {
                actors: actors.len(),
                ..State::default()
            };
        }
        let results = std::thread::scope(|scope| {
            let handles: Vec<_> = actors
                .into_iter()
                .enumerate()
                .map(|(index, actor)| {
                    let scheduler = self.clone();
                    scope.spawn(move || {
                        ACTOR.with(|a| a.set(Some((scheduler.id(), index))));
                        // Every actor starts at a barrier, so the first step is chosen too.
                        scheduler.barrier("start");
                        let result = catch_unwind(AssertUnwindSafe(actor));
                        scheduler.finish(index);
                        ACTOR.with(|a| a.set(None));
                        result
                    })
                })
                .collect();
            loop {
                let mut state = self.lock();
                while state.running.is_some()
                    || state.waiting.len() + state.finished.len() < state.actors
                {
                    state = self.wake.wait(state).unwrap_or_else(|p| p.into_inner());
                }
                if state.finished.len() == state.actors {
                    break;
                }
                let ready: Vec<usize> = state.waiting.keys().copied().collect();
                let pick = ready[rng.below(ready.len())];
                let step = state.waiting.remove(&pick).unwrap_or_default();
                state.trace.push(format!("{pick}: {step}"));
                state.running = Some(pick);
                self.wake.notify_all();
            }
            handles
                .into_iter()
                .map(|h| match h.join() {
                    Ok(Ok(value)) => value,
                    Ok(Err(panic)) | Err(panic) => std::panic::resume_unwind(panic),
                })
                .collect::<Vec<T>>()
        });
        let trace = std::mem::take(&mut self.lock().trace);
        (results, trace)
    }
}

/// A store whose every call stops at the scheduler's barrier first.
pub struct Scheduled<'a> {
    inner: &'a dyn Storage,
    scheduler: Arc<Scheduler>,
}

impl<'a> Scheduled<'a> {
    pub fn new(inner: &'a dyn Storage, scheduler: Arc<Scheduler>) -> Self {
        Scheduled { inner, scheduler }
    }
}

impl Storage for Scheduled<'_> {
    fn open(&self, key: &str) -> StorageResult<Box<dyn RangeReader + '_>> {
        self.scheduler.barrier(&format!("open {key}"));
        self.inner.open(key)
    }
    fn size(&self, key: &str) -> StorageResult<Option<u64>> {
        self.scheduler.barrier(&format!("size {key}"));
        self.inner.size(key)
    }
    fn head(&self, key: &str) -> StorageResult<Option<ObjectInfo>> {
        self.scheduler.barrier(&format!("head {key}"));
        self.inner.head(key)
    }
    fn get(&self, key: &str) -> StorageResult<Option<Versioned>> {
        self.scheduler.barrier(&format!("get {key}"));
        self.inner.get(key)
    }
    fn put(&self, key: &str, bytes: &[u8]) -> StorageResult<ObjectInfo> {
        self.scheduler.barrier(&format!("put {key}"));
        self.inner.put(key, bytes)
    }
    fn put_if(
        &self,
        key: &str,
        bytes: &[u8],
        condition: Precondition<'_>,
    ) -> StorageResult<Option<String>> {
        self.scheduler.barrier(&format!("put_if {key}"));
        self.inner.put_if(key, bytes, condition)
    }
    fn delete_if(&self, key: &str, version: &str) -> StorageResult<bool> {
        self.scheduler.barrier(&format!("delete_if {key}"));
        self.inner.delete_if(key, version)
    }
    fn copy(&self, source: &CopySource<'_>, key: &str) -> StorageResult<ObjectInfo> {
        self.scheduler.barrier(&format!("copy {key}"));
        self.inner.copy(source, key)
    }
    fn list(&self, prefix: &str) -> StorageResult<Vec<String>> {
        self.scheduler.barrier(&format!("list {prefix}"));
        self.inner.list(prefix)
    }
    fn delete(&self, key: &str) -> StorageResult<()> {
        self.scheduler.barrier(&format!("delete {key}"));
        self.inner.delete(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::LocalStore;

    #[test]
    fn a_seed_replays_its_interleaving_and_seeds_differ() {
        let dir = tempfile::tempdir().unwrap();
        let local = LocalStore::open(dir.path()).unwrap();
        let scheduler = Scheduler::new();
        let store = Scheduled::new(&local, scheduler.clone());
        let actor = |name: &'static str| {
            let store = &store;
            Box::new(move || {
                for i in 0..4 {
                    store.put(&format!("{name}/{i}"), b"x").unwrap();
                }
            }) as Box<dyn FnOnce() + Send + '_>
        };
        let mut traces = BTreeSet::new();
        for seed in 0..20 {
            let (_, first) = scheduler.run(seed, vec![actor("a"), actor("b")]);
            let (_, again) = scheduler.run(seed, vec![actor("a"), actor("b")]);
            assert_eq!(first, again, "seed {seed} replays");
            assert_eq!(first.len(), 10, "2 starts + 8 puts, one at a time");
            traces.insert(first);
        }
        assert!(
            traces.len() > 10,
            "different seeds, different interleavings"
        );
    }
}
