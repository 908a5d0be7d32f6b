//! The work queue of one kind: which objects are due a pass, in which order, and when the
//! ones that wait for a time come due. The controller's workers take objects from it; the
//! cache's changes, dependency changes, hot swaps and the passes themselves put them in.
//!
//! Rules:
//! 1. An object MUST be passed by at most one worker at a time.
//! 2. Due objects MUST be passed first come, first served: a steady load (a resync period
//!    shorter than a round through every object) still reaches every object.
//! 3. An object triggered again while it waits MUST be passed once; one triggered during its
//!    pass MUST be passed again after it (the pass may have read the object before the change).
//! 4. Of two times asked for an object (a requeue, a resync, a backoff), the earlier MUST win;
//!    a trigger supersedes both.
//! 5. An object gone from the cache MUST leave nothing behind once its pass (if any) ends.
//! 6. Once stopped, no pass MAY start; passes in flight finish.
//!
//! A waiting object costs one entry (its namespace and name), not a future: kube-runtime's
//! runner, which this replaces, held a future and a span per due object when it ran
//! unbounded, and parked them in a `HashSet` (started in hash order, against rule 2) when
//! bounded.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard};

use kube::{Resource, ResourceExt};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::reconcile::StoredMeta;

/// Which object: namespace and name (what the cache looks it up by).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
}

impl Key {
    /// The key of `obj`.
    pub fn of(obj: &impl Resource) -> Self {
        Self {
            namespace: obj.stored_namespace(),
            name: obj.name_any(),
        }
    }
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Where one object is in the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Entry {
    /// Due: in the ready line.
    Ready,
    /// Due at this time: in the timers.
    Later(Instant),
    /// A worker is passing it.
    Running {
        /// Triggered during the pass: passed again right after (rule 3).
        again: bool,
        /// A time asked for during the pass (rule 4, with the pass's own).
        later: Option<Instant>,
        /// Gone from the cache during the pass (rule 5).
        gone: bool,
    },
}

#[derive(Debug, Default)]
struct State {
    /// Due objects, in the order they came due.
    ready: VecDeque<Key>,
    /// Every object the queue knows: due, waiting for a time, or running.
    entries: HashMap<Key, Entry>,
    /// The objects waiting for a time, earliest first.
    timers: BTreeSet<(Instant, Key)>,
}

impl State {
    /// Puts `key` in the ready line (its entry already says `Ready`).
    fn push_ready(&mut self, key: Key, work: &Notify) {
        self.ready.push_back(key);
        work.notify_one();
    }

    /// Makes `key` wait for `at`; whether it is now the earliest timer.
    fn set_timer(&mut self, key: Key, at: Instant) -> bool {
        let earliest = self.timers.first().is_none_or(|(first, _)| at < *first);
        self.timers.insert((at, key.clone()));
        self.entries.insert(key, Entry::Later(at));
        earliest
    }
}

/// The work queue of one kind (see the module's rules).
#[derive(Debug, Default)]
pub struct WorkQueue {
    state: Mutex<State>,
    /// An object came due: one waiting worker wakes.
    work: Notify,
    /// A timer earlier than every other was set: the timer loop wakes.
    timer: Notify,
}

impl WorkQueue {
    fn state(&self) -> MutexGuard<'_, State> {
        // Every critical section below leaves the state whole; a poisoned lock (a panic in
        // one) still holds a usable state.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `key` is due now: a change of it or of what it depends on.
    pub fn trigger(&self, key: Key) {
        let mut state = self.state();
        match state.entries.get_mut(&key) {
            None => {
                state.entries.insert(key.clone(), Entry::Ready);
                state.push_ready(key, &self.work);
            }
            Some(Entry::Ready) => {}
            Some(Entry::Running { again, gone, .. }) => {
                *again = true;
                *gone = false;
            }
            Some(Entry::Later(at)) => {
                let at = *at;
                state.timers.remove(&(at, key.clone()));
                state.entries.insert(key.clone(), Entry::Ready);
                state.push_ready(key, &self.work);
            }
        }
    }

    /// `key` is due at `at`, unless something makes it due sooner (rule 4).
    pub fn schedule(&self, key: Key, at: Instant) {
        let mut state = self.state();
        let earliest = match state.entries.get_mut(&key) {
            None => state.set_timer(key, at),
            Some(Entry::Running { later, .. }) => {
                *later = Some(later.map_or(at, |l| l.min(at)));
                false
            }
            Some(Entry::Later(current)) if at < *current => {
                let current = *current;
                state.timers.remove(&(current, key.clone()));
                state.set_timer(key, at)
            }
            // Due now, or already due sooner.
            Some(Entry::Ready | Entry::Later(_)) => false,
        };
        if earliest {
            self.timer.notify_one();
        }
    }

    /// `key` is gone from the cache: its timer goes, and its entry with it once no worker
    /// holds it (rule 5). A due one stays in line: the worker finds it gone and passes nothing.
    pub fn forget(&self, key: &Key) {
        let mut state = self.state();
        match state.entries.get_mut(key) {
            Some(Entry::Later(at)) => {
                let at = *at;
                state.timers.remove(&(at, key.clone()));
                state.entries.remove(key);
            }
            Some(Entry::Running {
                again, later, gone, ..
            }) => {
                *again = false;
                *later = None;
                *gone = true;
            }
            Some(Entry::Ready) | None => {}
        }
    }

    /// The next due object for a worker, in the order they came due; `None` once `stop` is
    /// cancelled (rule 6). The worker MUST call [`Self::done`] with it after its pass.
    pub async fn next(&self, stop: &CancellationToken) -> Option<Key> {
        loop {
            // Registered before looking, so an object that comes due in between is not missed.
            let notified = self.work.notified();
            if stop.is_cancelled() {
                return None;
            }
            {
                let mut state = self.state();
                while let Some(key) = state.ready.pop_front() {
                    // A due object whose entry went (forgotten, then its pass ended) is
                    // skipped; one that is due again is passed.
                    if state.entries.get(&key) == Some(&Entry::Ready) {
                        state.entries.insert(
                            key.clone(),
                            Entry::Running {
                                again: false,
                                later: None,
                                gone: false,
                            },
                        );
                        if !state.ready.is_empty() {
                            // More are due: the next idle worker takes one.
                            self.work.notify_one();
                        }
                        return Some(key);
                    }
                }
            }
            tokio::select! {
                () = notified => {}
                () = stop.cancelled() => return None,
            }
        }
    }

    /// The pass of `key` ended; `next` is the time it asked for, if any.
    pub fn done(&self, key: Key, next: Option<Instant>) {
        let mut state = self.state();
        let Some(Entry::Running { again, later, gone }) = state.entries.get(&key).copied() else {
            return;
        };
        if again {
            state.entries.insert(key.clone(), Entry::Ready);
            state.push_ready(key, &self.work);
            return;
        }
        let at = match (gone, later, next) {
            (true, ..) => None,
            (false, Some(a), Some(b)) => Some(a.min(b)),
            (false, a, b) => a.or(b),
        };
        let earliest = if let Some(at) = at {
            state.set_timer(key, at)
        } else {
            state.entries.remove(&key);
            false
        };
        drop(state);
        if earliest {
            self.timer.notify_one();
        }
    }

    /// Moves the objects whose time came into the ready line, until `stop` is cancelled.
    pub async fn run_timers(&self, stop: &CancellationToken) {
        loop {
            let notified = self.timer.notified();
            let first = self.state().timers.first().map(|(at, _)| *at);
            let sleep = async {
                match first {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = sleep => {}
                () = notified => {}
                () = stop.cancelled() => return,
            }
            let now = Instant::now();
            let mut state = self.state();
            while let Some((at, key)) = state.timers.first().cloned()
                && at <= now
            {
                state.timers.remove(&(at, key.clone()));
                state.entries.insert(key.clone(), Entry::Ready);
                state.push_ready(key, &self.work);
            }
        }
    }

    /// How many objects the queue knows (due, waiting for a time or running).
    pub fn len(&self) -> usize {
        self.state().entries.len()
    }

    /// Whether the queue knows no object.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    fn key(name: &str) -> Key {
        Key {
            namespace: "ns".into(),
            name: name.into(),
        }
    }

    /// The next due key, or `None` if none is due without waiting.
    async fn due(queue: &WorkQueue) -> Option<Key> {
        let stop = CancellationToken::new();
        tokio::select! {
            biased;
            key = queue.next(&stop) => key,
            () = tokio::task::yield_now() => None,
        }
    }

    /// Runs the timer loop for `d` of (paused) time.
    async fn advance(queue: &WorkQueue, d: Duration) {
        let stop = CancellationToken::new();
        tokio::select! {
            () = queue.run_timers(&stop) => unreachable!("the timer loop ends only when stopped"),
            () = tokio::time::sleep(d) => {}
        }
    }

    #[tokio::test]
    async fn due_objects_are_passed_first_come_first_served_and_once_however_often_triggered() {
        let queue = WorkQueue::default();
        for name in ["c", "a", "b", "a", "c"] {
            queue.trigger(key(name));
        }
        let mut order = Vec::new();
        while let Some(k) = due(&queue).await {
            order.push(k.name.clone());
            queue.done(k, None);
        }
        assert_eq!(order, ["c", "a", "b"]);
        assert!(
            queue.is_empty(),
            "nothing left once every pass waits for a change"
        );
    }

    #[tokio::test]
    async fn an_object_triggered_during_its_pass_is_passed_again_after_it_never_twice_at_once() {
        let queue = WorkQueue::default();
        queue.trigger(key("a"));
        let a = due(&queue).await.unwrap();
        queue.trigger(key("a"));
        queue.trigger(key("b"));
        assert_eq!(due(&queue).await, Some(key("b")), "only b: a is running");
        assert_eq!(due(&queue).await, None);
        queue.done(a, None);
        assert_eq!(due(&queue).await, Some(key("a")), "a again, after its pass");
    }

    #[tokio::test(start_paused = true)]
    async fn a_requeue_comes_due_at_its_time_and_a_trigger_or_an_earlier_time_supersedes_it() {
        // (case, what happens after a pass that asked for 10 s, when a is due again)
        type Then = fn(&WorkQueue);
        let cases: [(&str, Then, Duration); 4] = [
            ("nothing", |_| {}, Duration::from_secs(10)),
            ("a trigger", |q| q.trigger(key("a")), Duration::ZERO),
            (
                "an earlier time",
                |q| q.schedule(key("a"), Instant::now() + Duration::from_secs(3)),
                Duration::from_secs(3),
            ),
            (
                "a later time",
                |q| q.schedule(key("a"), Instant::now() + Duration::from_secs(30)),
                Duration::from_secs(10),
            ),
        ];
        for (case, then, expected) in cases {
            let queue = WorkQueue::default();
            queue.trigger(key("a"));
            let a = due(&queue).await.unwrap();
            let start = Instant::now();
            queue.done(a, Some(start + Duration::from_secs(10)));
            then(&queue);
            let mut waited = Duration::ZERO;
            while due(&queue).await.is_none() {
                assert!(waited < Duration::from_mins(1), "{case}: never due");
                advance(&queue, Duration::from_millis(500)).await;
                waited = start.elapsed();
            }
            assert!(
                waited >= expected && waited < expected + Duration::from_secs(1),
                "{case}: due after {waited:?}, expected {expected:?}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_time_asked_for_during_a_pass_is_kept_unless_the_pass_asks_for_an_earlier_one() {
        for (during, after, expected) in [(5, Some(20), 5), (20, Some(5), 5), (7, None, 7)] {
            let queue = WorkQueue::default();
            queue.trigger(key("a"));
            let a = due(&queue).await.unwrap();
            let start = Instant::now();
            queue.schedule(key("a"), start + Duration::from_secs(during));
            queue.done(a, after.map(|s| start + Duration::from_secs(s)));
            advance(&queue, Duration::from_millis(expected * 1000 - 1)).await;
            assert_eq!(due(&queue).await, None, "{during}/{after:?}: too early");
            advance(&queue, Duration::from_millis(2)).await;
            assert_eq!(due(&queue).await, Some(key("a")), "{during}/{after:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_object_gone_from_the_cache_leaves_nothing_behind() {
        let queue = WorkQueue::default();
        // Waiting for a time.
        queue.schedule(key("a"), Instant::now() + Duration::from_secs(5));
        // Running, with a time asked for by its pass.
        queue.trigger(key("b"));
        let b = due(&queue).await.unwrap();
        queue.forget(&key("a"));
        queue.forget(&key("b"));
        queue.done(b, Some(Instant::now() + Duration::from_secs(5)));
        assert!(queue.is_empty());
        advance(&queue, Duration::from_secs(10)).await;
        assert_eq!(due(&queue).await, None);
        // Due, then forgotten: the worker is handed it (and finds it gone in the cache).
        queue.trigger(key("c"));
        queue.forget(&key("c"));
        let c = due(&queue).await.unwrap();
        queue.done(c, None);
        assert!(queue.is_empty());
    }

    #[tokio::test]
    async fn once_stopped_no_pass_starts_and_waiting_workers_end() {
        let queue = Arc::new(WorkQueue::default());
        let stop = CancellationToken::new();
        let worker = {
            let (queue, stop) = (Arc::clone(&queue), stop.clone());
            tokio::spawn(async move { queue.next(&stop).await })
        };
        tokio::task::yield_now().await;
        stop.cancel();
        assert_eq!(worker.await.unwrap(), None);
        queue.trigger(key("a"));
        assert_eq!(queue.next(&stop).await, None, "due, but stopped");
    }

    #[tokio::test]
    async fn every_waiting_worker_gets_a_due_object() {
        let queue = Arc::new(WorkQueue::default());
        let stop = CancellationToken::new();
        let workers: Vec<_> = (0..3)
            .map(|_| {
                let (queue, stop) = (Arc::clone(&queue), stop.clone());
                tokio::spawn(async move { queue.next(&stop).await })
            })
            .collect();
        tokio::task::yield_now().await;
        for name in ["a", "b", "c"] {
            queue.trigger(key(name));
        }
        let mut got = Vec::new();
        for worker in workers {
            let k = tokio::time::timeout(Duration::from_secs(5), worker)
                .await
                .expect("a worker was not woken")
                .unwrap()
                .unwrap();
            got.push(k.name);
        }
        got.sort();
        assert_eq!(got, ["a", "b", "c"]);
    }
}
