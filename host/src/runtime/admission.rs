//! Admission to the engine's instance pool: an instance that would not fit waits for room,
//! in order of arrival and within its call's deadline, instead of failing.
//!
//! The pooling allocator holds a fixed number of component instances, core instances,
//! memories and tables for the whole host ([`super::engine::POOL`]); past any of them
//! instantiation fails. Reconcile concurrency is set per kind, so a host with several busy
//! kinds asks for more instances than the pool holds: the passes past it failed ("maximum
//! concurrent limit of 256 for component instances reached", a transient error) and were
//! retried with backoff — a burst of errors for what is only a queue.
//!
//! So every instance first takes its plugin's [`Footprint`] out of one budget, counted in
//! *units*: a unit is one core instance, and every other kind of slot is priced so that a
//! budget spent in full spends no kind past its pool (with [`super::engine::POOL`]: a
//! component instance is 16 units, a memory 8, a table 4). An instance's weight is the most
//! any one kind of slot prices it at: 16 for every plugin of the five guest languages today
//! (a Rust component holds 3 core instances, Go 4, Python 14), more for a component of more
//! than 16 core instances or 2 memories. Waiters are served first come, first served
//! (tokio's semaphore is fair): a heavy instance is not starved by light ones.
//!
//! The units go back when the instance's store is dropped — after it, so that the slots are
//! free by the time the next instance is admitted.
//!
//! Waiting is right for a burst, but a host whose kinds' concurrency together asks for more
//! than the pool holds waits on every busy minute. So each running controller also states what
//! it may ask for at once ([`Admission::expect`]: its concurrency × its plugin's weight); when
//! the kinds together expect more than the budget, the host says so once, in a warning naming
//! them, and `orchard_wasm_pool_units_expected` shows it before any pass waits.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::engine::PoolSize;

/// What one instance of a plugin takes from the pool, counted from its component at load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footprint {
    /// Core module instances (`instantiate` entries of every core instance section).
    pub core_instances: u32,
    /// Linear memories the core instances define.
    pub memories: u32,
    /// Tables the core instances define.
    pub tables: u32,
}

/// Errors of reading a component's footprint.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The component's sections could not be read.
    #[error("could not read the component's core instances: {0}")]
    Parse(#[from] wasmparser::BinaryReaderError),
    /// One instance would take more than the whole pool.
    #[error(
        "one instance needs {needs} ({footprint:?}), more than the host's whole pool ({pool:?})"
    )]
    TooLarge {
        /// What the component needs.
        footprint: Footprint,
        /// The kind of slot it needs too many of.
        needs: &'static str,
        /// The pool.
        pool: PoolSize,
    },
}

impl Footprint {
    /// The footprint of `component`: its core instances counted from its sections, its
    /// memories and tables as wasmtime reports them (`resources`; `None`: a component that
    /// imports its modules, which wasmtime cannot size — counted as one of each per core
    /// instance).
    pub fn of(
        component: &[u8],
        resources: Option<wasmtime::ResourcesRequired>,
    ) -> Result<Self, Error> {
        use wasmparser::{Instance, Parser, Payload};
        let mut core_instances = 0u32;
        // Nested components and modules are read too (`parse_all` walks into them): a core
        // instance section anywhere is instantiated with the component.
        for payload in Parser::new(0).parse_all(component) {
            if let Payload::InstanceSection(section) = payload? {
                for instance in section {
                    if matches!(instance?, Instance::Instantiate { .. }) {
                        core_instances = core_instances.saturating_add(1);
                    }
                }
            }
        }
        let (memories, tables) = match resources {
            Some(r) => (r.num_memories, r.num_tables),
            None => (core_instances, core_instances),
        };
        Ok(Self {
            core_instances,
            memories,
            tables,
        })
    }
}

/// The host's budget of pool slots (module docs).
#[derive(Debug)]
pub struct Admission {
    units: Arc<Semaphore>,
    pool: PoolSize,
    /// Units the budget holds: the pool's core instances.
    capacity: u32,
    /// `orchard_wasm_pool_units_in_use`, when metered.
    in_use: Option<Gauge>,
    /// What the running controllers expect to take at once ([`Admission::expect`]).
    expected: Mutex<Expectations>,
}

/// The controllers' expectations, by the id of their [`Expected`].
#[derive(Debug, Default)]
struct Expectations {
    /// The id of the next expectation.
    next: u64,
    by_id: BTreeMap<u64, Expectation>,
    /// `orchard_wasm_pool_units_expected`, when metered.
    gauge: Option<Gauge>,
}

/// What one controller may ask of the pool at once.
#[derive(Debug, Clone)]
struct Expectation {
    plugin: Arc<str>,
    instances: u32,
    units: u64,
}

impl Expectations {
    fn total(&self) -> u64 {
        self.by_id.values().map(|e| e.units).sum()
    }

    /// The gauge moved by `units` (by deltas, as `in_use`: the runtimes of one process share it).
    fn publish(&self, units: u64, added: bool) {
        if let Some(gauge) = &self.gauge {
            let units = i64::try_from(units).unwrap_or(i64::MAX);
            if added {
                gauge.inc_by(units);
            } else {
                gauge.dec_by(units);
            }
        }
    }
}

/// A controller's expectation ([`Admission::expect`]), withdrawn when dropped.
#[derive(Debug)]
#[must_use = "the expectation is counted only while this lives"]
pub struct Expected {
    admission: Arc<Admission>,
    id: u64,
}

impl Drop for Expected {
    fn drop(&mut self) {
        let mut expected = self.admission.expectations();
        if let Some(gone) = expected.by_id.remove(&self.id) {
            expected.publish(gone.units, false);
        }
    }
}

/// One instance's units, given back when dropped.
#[derive(Debug)]
#[must_use = "the units are held only while the permit lives"]
pub struct Admitted {
    _permit: OwnedSemaphorePermit,
    weight: u32,
    in_use: Option<Gauge>,
}

impl Admitted {
    fn new(permit: OwnedSemaphorePermit, weight: u32, in_use: Option<Gauge>) -> Self {
        if let Some(gauge) = &in_use {
            gauge.inc_by(i64::from(weight));
        }
        Self {
            _permit: permit,
            weight,
            in_use,
        }
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        if let Some(gauge) = &self.in_use {
            gauge.dec_by(i64::from(self.weight));
        }
    }
}

/// No room in the pool came free before the call's deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full {
    /// How long the instance waited.
    pub waited: Duration,
}

impl Admission {
    /// A budget as large as `pool`.
    pub fn new(pool: PoolSize) -> Self {
        let capacity = pool.core_instances;
        Self {
            units: Arc::new(Semaphore::new(capacity as usize)),
            pool,
            capacity,
            in_use: None,
            expected: Mutex::default(),
        }
    }

    /// The same budget, its units in use counted in `in_use` and the controllers' expectations
    /// in `expected`.
    #[must_use]
    pub fn metered(self, in_use: Gauge, expected: Gauge) -> Self {
        self.expectations().gauge = Some(expected);
        Self {
            in_use: Some(in_use),
            ..self
        }
    }

    fn expectations(&self) -> std::sync::MutexGuard<'_, Expectations> {
        // Poisoned only by a panic while a map was updated: its entries are still whole.
        self.expected.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts that a controller of `plugin` may keep up to `instances` instances of `weight`
    /// units alive at once (its concurrency: a pass holds one instance), for as long as the
    /// answer lives. When the controllers together expect more than the budget — their passes
    /// past it will wait for room — it logs a warning naming each of them. It reserves
    /// nothing: admission stays first come, first served.
    pub fn expect(self: &Arc<Self>, plugin: &str, instances: u32, weight: u32) -> Expected {
        let expectation = Expectation {
            plugin: plugin.into(),
            instances,
            units: u64::from(instances) * u64::from(weight.clamp(1, self.capacity)),
        };
        let mut expected = self.expectations();
        let before = expected.total();
        let id = expected.next;
        expected.next += 1;
        let units = expectation.units;
        expected.by_id.insert(id, expectation);
        expected.publish(units, true);
        let total = expected.total();
        let capacity = u64::from(self.capacity);
        if total > capacity && before <= capacity {
            let kinds: Vec<String> = expected
                .by_id
                .values()
                .map(|e| format!("{} {} at once", e.plugin, e.instances))
                .collect();
            tracing::warn!(
                plugin,
                expected_units = total,
                pool_units = capacity,
                "the kinds' reconcile concurrency asks for more plugin instances at once than the \
                 instance pool holds ({}; the pool: {} instances, --instance-pool): passes past \
                 it wait for room. Raise --instance-pool (memory: docs/deploy.md) or lower a \
                 kind's concurrency",
                kinds.join(", "),
                self.instances(),
            );
        }
        Expected {
            admission: Arc::clone(self),
            id,
        }
    }

    /// Units the running controllers expect to take at once ([`Admission::expect`]).
    pub fn expected(&self) -> u64 {
        self.expectations().total()
    }

    /// Plugin instances the pool holds (of a plugin that takes one component instance's
    /// units, as every plugin today).
    pub fn instances(&self) -> u32 {
        self.pool.component_instances
    }

    /// Units the budget holds.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Units in use now.
    pub fn in_use(&self) -> u32 {
        // The semaphore never holds more than the capacity it was made with.
        self.capacity - u32::try_from(self.units.available_permits()).unwrap_or(self.capacity)
    }

    /// The units one instance of `footprint` takes: the most any kind of slot prices it at
    /// (module docs), or why it can never fit.
    pub fn weight(&self, footprint: Footprint) -> Result<u32, Error> {
        let pool = self.pool;
        // (what it needs, how many the pool holds, the slot's name)
        let slots = [
            (1, pool.component_instances, "a component instance"),
            (
                footprint.core_instances,
                pool.core_instances,
                "core instances",
            ),
            (footprint.memories, pool.memories, "memories"),
            (footprint.tables, pool.tables, "tables"),
        ];
        let mut weight = 1u32;
        for (needs, holds, name) in slots {
            if needs == 0 {
                continue;
            }
            if needs > holds {
                return Err(Error::TooLarge {
                    footprint,
                    needs: name,
                    pool,
                });
            }
            // ceil(needs × capacity / holds): `needs ≤ holds`, so the weight is ≤ capacity.
            let units = (u64::from(needs) * u64::from(self.capacity)).div_ceil(u64::from(holds));
            weight = weight.max(u32::try_from(units).unwrap_or(self.capacity));
        }
        Ok(weight)
    }

    /// Takes `weight` units, waiting for them (after every earlier waiter) until `deadline`;
    /// `waiting` is called once when there is no room at once, as the wait begins.
    pub async fn admit(
        &self,
        weight: u32,
        deadline: Instant,
        waiting: impl FnOnce(),
    ) -> Result<Admitted, Full> {
        let weight = weight.clamp(1, self.capacity);
        if let Ok(permit) = Arc::clone(&self.units).try_acquire_many_owned(weight) {
            // A waiter ahead of us would have left no room for this to succeed: the
            // semaphore serves waiters first.
            return Ok(Admitted::new(permit, weight, self.in_use.clone()));
        }
        waiting();
        // tokio's clock: the one `timeout_at` waits on (paused in tests).
        let started = tokio::time::Instant::now();
        let acquire = Arc::clone(&self.units).acquire_many_owned(weight);
        match tokio::time::timeout_at(deadline.into(), acquire).await {
            Ok(Ok(permit)) => Ok(Admitted::new(permit, weight, self.in_use.clone())),
            // The semaphore is never closed; a closed one or the deadline: no room.
            Ok(Err(_)) | Err(_) => Err(Full {
                waited: started.elapsed(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POOL: PoolSize = PoolSize {
        component_instances: 4,
        core_instances: 16,
        memories: 8,
        tables: 16,
    };

    fn footprint(core_instances: u32, memories: u32, tables: u32) -> Footprint {
        Footprint {
            core_instances,
            memories,
            tables,
        }
    }

    fn weight(footprint: Footprint) -> u32 {
        Admission::new(POOL).weight(footprint).expect("fits")
    }

    #[test]
    fn an_instance_weighs_what_its_scarcest_slot_costs() {
        assert_eq!(Admission::new(POOL).capacity(), 16);
        // A component instance is a quarter of the pool's: 4 units, whatever else it needs.
        assert_eq!(weight(footprint(3, 1, 1)), 4);
        // 14 core instances (a Python plugin's) outweigh the component instance.
        assert_eq!(weight(footprint(14, 1, 1)), 14);
        // 5 of the pool's 8 memories: ceil(5 × 16 / 8) = 10 units.
        assert_eq!(weight(footprint(2, 5, 1)), 10);
        assert_eq!(weight(footprint(1, 1, 9)), 9);
        // A component without tables, on a pool without tables: nothing to price.
        let tableless = Admission::new(PoolSize { tables: 0, ..POOL });
        assert_eq!(tableless.weight(footprint(3, 1, 0)).expect("fits"), 4);
        assert!(tableless.weight(footprint(3, 1, 1)).is_err());
    }

    #[test]
    fn an_instance_larger_than_the_whole_pool_is_refused_naming_the_slot() {
        let err = Admission::new(POOL)
            .weight(footprint(3, 9, 1))
            .expect_err("9 memories of 8");
        assert!(
            matches!(
                err,
                Error::TooLarge {
                    needs: "memories",
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("needs memories"), "{err}");
    }

    fn far() -> Instant {
        Instant::now() + Duration::from_hours(1)
    }

    #[test]
    fn the_controllers_expectations_add_up_while_held_and_are_withdrawn_when_dropped() {
        let admission = Arc::new(Admission::new(POOL));
        let zones = admission.expect("zones", 2, 4);
        let records = admission.expect("records", 3, 4);
        assert_eq!(admission.expected(), 20, "2 × 4 + 3 × 4, past the 16 units");
        // A weight above the budget counts as the whole budget, as admission clamps it.
        let heavy = admission.expect("heavy", 1, 1000);
        assert_eq!(admission.expected(), 36);
        drop(records);
        assert_eq!(admission.expected(), 24);
        drop((zones, heavy));
        assert_eq!(admission.expected(), 0);
        // Expecting reserves nothing: the whole budget is still there to take.
        assert_eq!(admission.in_use(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn instances_past_the_budget_wait_in_order_and_are_admitted_as_room_comes_free() {
        let admission = Arc::new(Admission::new(POOL));
        let waits = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let counted = |waits: &Arc<std::sync::atomic::AtomicU32>| {
            let waits = Arc::clone(waits);
            move || {
                waits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        };
        let first = admission
            .admit(12, far(), counted(&waits))
            .await
            .expect("room");
        assert_eq!(waits.load(std::sync::atomic::Ordering::Relaxed), 0);
        assert_eq!(admission.in_use(), 12);
        // 8 units do not fit beside 12: it waits; a later 4 would fit but must not pass it.
        let heavy = tokio::spawn({
            let admission = Arc::clone(&admission);
            let waited = counted(&waits);
            async move { admission.admit(8, far(), waited).await }
        });
        tokio::task::yield_now().await;
        let light = tokio::spawn({
            let admission = Arc::clone(&admission);
            let waited = counted(&waits);
            async move { admission.admit(4, far(), waited).await }
        });
        tokio::task::yield_now().await;
        assert!(!heavy.is_finished() && !light.is_finished());
        assert_eq!(waits.load(std::sync::atomic::Ordering::Relaxed), 2);
        drop(first);
        let heavy = heavy.await.expect("joined").expect("admitted");
        let light = light.await.expect("joined").expect("admitted");
        assert_eq!(admission.in_use(), 12);
        drop((heavy, light));
        assert_eq!(admission.in_use(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn an_instance_that_finds_no_room_before_its_deadline_is_refused_and_takes_nothing() {
        let admission = Admission::new(POOL);
        let held = admission.admit(16, far(), || ()).await.expect("room");
        let deadline = Instant::now() + Duration::from_secs(2);
        let full = admission
            .admit(1, deadline, || ())
            .await
            .expect_err("no room");
        assert!(full.waited >= Duration::from_secs(2), "{full:?}");
        drop(held);
        assert_eq!(admission.in_use(), 0);
        // A weight above the capacity is clamped, never a wait that cannot end.
        let whole = admission
            .admit(1000, far(), || ())
            .await
            .expect("the whole budget");
        assert_eq!(admission.in_use(), 16);
        drop(whole);
    }
}
