//! Drives concurrent operations on a store through chosen interleavings of their storage steps.
//!
//! [`Scheduled`] wraps any [`Storage`]: every call made by an *actor* stops at a barrier
//! before it reaches the store, and [`Scheduler::run`] lets exactly one actor through at a
//! time, picking which by a seeded random choice. Between two barriers an actor runs alone, so
//! a schedule is one interleaving of the actors' storage steps at their finest grain, and the
//! same seed replays it. Calls from outside an actor (test setup, checks) pass straight
//! through. No sleeps: actors wait on the scheduler's notifications.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use crate::storage::{
    CopySource, ObjectInfo, Owned, Precondition, Storage, StorageFuture, Versioned,
};

tokio::task_local! {
    /// (scheduler identity, actor index) of the future being polled, when it is an actor.
    static ACTOR: (usize, usize);
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
    changed: Notify,
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

/// One actor: a future run under the scheduler.
pub type Actor<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

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

    /// Waits until `done` holds of the state (re-checked at every change).
    async fn until(&self, done: impl Fn(&State) -> bool) {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if done(&self.lock()) {
                return;
            }
            notified.await;
        }
    }

    /// Called before every storage step: an actor waits here until it is picked.
    async fn barrier(&self, step: &str) {
        let Ok((scheduler, actor)) = ACTOR.try_with(|a| *a) else {
            return;
        };
        if scheduler != self.id() {
            return;
        }
        {
            let mut state = self.lock();
            state.waiting.insert(actor, step.to_string());
            if state.running == Some(actor) {
                state.running = None;
            }
        }
        self.changed.notify_waiters();
        self.until(|state| state.running == Some(actor)).await;
    }

    fn finish(&self, actor: usize) {
        {
            let mut state = self.lock();
            state.finished.insert(actor);
            state.waiting.remove(&actor);
            if state.running == Some(actor) {
                state.running = None;
            }
        }
        self.changed.notify_waiters();
    }

    /// Runs the actors to their ends, one storage step at a time in the order `seed` picks.
    /// Returns each actor's result and the trace.
    pub async fn run<T: Send>(
        self: &Arc<Self>,
        seed: u64,
        actors: Vec<Actor<'_, T>>,
    ) -> (Vec<T>, Vec<String>) {
        let mut rng = Rng::new(seed);
        let random = |waiting: &BTreeMap<usize, String>| {
            let ready: Vec<usize> = waiting.keys().copied().collect();
            ready[rng.below(ready.len())]
        };
        self.run_picking(actors, random).await
    }

    /// [`Self::run`] with the next actor to take a step picked by `pick`, from the actors
    /// waiting at a barrier and the step each is about to take (one schedule, written out:
    /// "let this one reach that step, then run that one to its end"). `pick` must name a
    /// waiting actor.
    pub async fn run_picking<T: Send>(
        self: &Arc<Self>,
        actors: Vec<Actor<'_, T>>,
        mut pick: impl FnMut(&BTreeMap<usize, String>) -> usize,
    ) -> (Vec<T>, Vec<String>) {
        let count = actors.len();
        *self.lock() = State {
            actors: count,
            ..State::default()
        };
        let id = self.id();
        let actors = actors.into_iter().enumerate().map(|(index, actor)| {
            let scheduler = self.clone();
            ACTOR.scope((id, index), async move {
                // Every actor starts at a barrier, so the first step is chosen too.
                scheduler.barrier("start").await;
                let result = actor.await;
                scheduler.finish(index);
                result
            })
        });
        let driver = async {
            loop {
                self.until(|s| {
                    s.running.is_none() && s.waiting.len() + s.finished.len() == s.actors
                })
                .await;
                {
                    let mut state = self.lock();
                    if state.finished.len() == state.actors {
                        break;
                    }
                    let pick = pick(&state.waiting);
                    let Some(step) = state.waiting.remove(&pick) else {
                        panic!(
                            "picked actor {pick}, which is not waiting: {:?}",
                            state.waiting
                        );
                    };
                    state.trace.push(format!("{pick}: {step}"));
                    state.running = Some(pick);
                }
                self.changed.notify_waiters();
            }
        };
        let (results, ()) = tokio::join!(futures_util::future::join_all(actors), driver);
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
    fn head<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<ObjectInfo>> {
        Box::pin(async move {
            self.scheduler.barrier(&format!("head {key}")).await;
            self.inner.head(key).await
        })
    }
    fn size<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<u64>> {
        Box::pin(async move {
            self.scheduler.barrier(&format!("size {key}")).await;
            self.inner.size(key).await
        })
    }
    fn get<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<Versioned>> {
        Box::pin(async move {
            self.scheduler.barrier(&format!("get {key}")).await;
            self.inner.get(key).await
        })
    }
    fn put<'a>(&'a self, key: &'a str, bytes: &'a [u8]) -> StorageFuture<'a, ()> {
        Box::pin(async move {
            self.scheduler.barrier(&format!("put {key}")).await;
            self.inner.put(key, bytes).await
        })
    }
    fn put_if<'a>(
        &'a self,
        key: &'a str,
        bytes: &'a [u8],
        condition: Precondition<'a>,
    ) -> StorageFuture<'a, Option<String>> {
        Box::pin(async move {
            self.scheduler.barrier(&format!("put_if {key}")).await;
            self.inner.put_if(key, bytes, condition).await
        })
    }
    fn delete_if<'a>(&'a self, key: &'a str, version: &'a str) -> StorageFuture<'a, bool> {
        Box::pin(async move {
            self.scheduler.barrier(&format!("delete_if {key}")).await;
            self.inner.delete_if(key, version).await
        })
    }
    fn copy<'a>(
        &'a self,
        source: &'a CopySource<'a>,
        key: &'a str,
        known: &'a ObjectInfo,
        owner: Option<&'a str>,
    ) -> StorageFuture<'a, u64> {
        Box::pin(async move {
            self.scheduler.barrier(&format!("copy {key}")).await;
            self.inner.copy(source, key, known, owner).await
        })
    }
    fn copy_new<'a>(
        &'a self,
        source: &'a CopySource<'a>,
        key: &'a str,
        known: &'a ObjectInfo,
        owner: Option<&'a str>,
    ) -> StorageFuture<'a, Option<u64>> {
        Box::pin(async move {
            self.scheduler.barrier(&format!("copy_new {key}")).await;
            self.inner.copy_new(source, key, known, owner).await
        })
    }
    fn list<'a>(&'a self, prefix: &'a str) -> StorageFuture<'a, Vec<String>> {
        Box::pin(async move {
            self.scheduler.barrier(&format!("list {prefix}")).await;
            self.inner.list(prefix).await
        })
    }
    fn delete<'a>(&'a self, key: &'a str) -> StorageFuture<'a, ()> {
        Box::pin(async move {
            self.scheduler.barrier(&format!("delete {key}")).await;
            self.inner.delete(key).await
        })
    }
    fn owned<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<Owned>> {
        Box::pin(async move {
            self.scheduler.barrier(&format!("owned {key}")).await;
            self.inner.owned(key).await
        })
    }
    fn any_under<'a>(&'a self, prefix: &'a str) -> StorageFuture<'a, bool> {
        Box::pin(async move {
            self.scheduler.barrier(&format!("any_under {prefix}")).await;
            self.inner.any_under(prefix).await
        })
    }
    fn read_settled<'a>(&'a self, key: &'a str) -> StorageFuture<'a, Option<Vec<u8>>> {
        Box::pin(async move {
            self.scheduler.barrier(&format!("read_settled {key}")).await;
            self.inner.read_settled(key).await
        })
    }
    fn create_settled<'a>(&'a self, key: &'a str, bytes: &'a [u8]) -> StorageFuture<'a, bool> {
        Box::pin(async move {
            self.scheduler
                .barrier(&format!("create_settled {key}"))
                .await;
            self.inner.create_settled(key, bytes).await
        })
    }
    fn traits(&self) -> crate::storage::StoreTraits {
        self.inner.traits()
    }
    fn creates_only_new(&self, source: &CopySource<'_>, size: u64) -> bool {
        self.inner.creates_only_new(source, size)
    }
    fn read_source<'a>(
        &'a self,
        source: &'a CopySource<'a>,
        out: &'a mut (dyn std::io::Write + Send),
    ) -> StorageFuture<'a, u64> {
        self.inner.read_source(source, out)
    }
    fn put_encoded<'a>(
        &'a self,
        key: &'a str,
        staged: &'a crate::storage::encoding::Staged,
        meta: &'a crate::storage::encoding::EncodedMeta,
    ) -> StorageFuture<'a, ()> {
        Box::pin(async move {
            self.scheduler.barrier(&format!("put_encoded {key}")).await;
            self.inner.put_encoded(key, staged, meta).await
        })
    }
    fn encoded<'a>(
        &'a self,
        key: &'a str,
    ) -> StorageFuture<'a, Option<(u64, crate::storage::encoding::EncodedMeta)>> {
        self.inner.encoded(key)
    }
}

#[cfg(test)]
mod tests {
    use super::{Actor, Scheduled, Scheduler};
    use crate::storage::{LocalStore, Storage};
    use std::collections::BTreeSet;

    #[tokio::test]
    async fn a_seed_replays_its_interleaving_and_seeds_differ() {
        let dir = tempfile::tempdir().unwrap();
        let local = LocalStore::open(dir.path()).unwrap();
        let scheduler = Scheduler::new();
        let store = Scheduled::new(&local, scheduler.clone());
        let actor = |name: &'static str| -> Actor<'_, ()> {
            let store = &store;
            Box::pin(async move {
                for i in 0..4 {
                    store.put(&format!("{name}/{i}"), b"x").await.unwrap();
                }
            })
        };
        let mut traces = BTreeSet::new();
        for seed in 0..20 {
            let (_, first) = scheduler.run(seed, vec![actor("a"), actor("b")]).await;
            let (_, again) = scheduler.run(seed, vec![actor("a"), actor("b")]).await;
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
