//! The shared wasmtime engine: component model, async, epoch interruption driven by a
//! ticker thread, the pooling allocator when the address space allows it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use wasmtime::{
    Config, Enabled, Engine, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig,
};

/// One epoch tick: how often a computing guest checks its wall-clock deadline and yields to the
/// async runtime (`component.rs`). A guest is stopped within one tick past its deadline.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Largest linear memory any plugin may be configured for (the pool's slot size).
pub const MAX_PLUGIN_MEMORY: usize = 1 << 30;

/// Bytes of each pooled memory and table kept resident (reset, not unmapped) on reuse. With
/// `pagemap_scan` only the pages a call dirtied are reset. 16 MiB: a Rust guest's whole
/// footprint is under 8 MiB, a Go guest's heap starts at 8 MiB and a Python guest's reaches
/// past it, so that at 8 MiB their instances faulted those pages in again at every call
/// (16 MiB: Go's calls 6 % faster, Python's 15 %; 32 and 64 MiB gained nothing more;
/// docs/benchmarks.md).
const KEEP_RESIDENT: usize = 16 << 20;

/// How a pooled memory is made ready for the next instance once its store is dropped.
///
/// Both reset it to the component's initial image; they differ in what they touch. `Scan` is
/// the default: the right choice for Rust, Go, C and JavaScript plugins, whose calls write a
/// few compact stretches of memory. A Python plugin (`CPython` inside the component) writes all
/// over its heap, which the scan follows only so far (wasmtime reads 32 written regions; past
/// them the rest is decommitted and faulted in again at the next call); a host that serves
/// only Python plugins may spend less CPU with `Copy` (measured: −6 to −11 % in the throughput
/// job, +25 to +28 % peak RSS; docs/benchmarks.md), and every other guest's calls slower (a Rust call
/// 1.6–1.7×, a Go call 1.5–1.7×).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MemoryReset {
    /// Reset only the pages a call wrote (Linux's `PAGEMAP_SCAN`, 6.7 and later; elsewhere
    /// as `Copy`), up to the 16 MiB kept resident; decommit the rest.
    #[default]
    Scan,
    /// Reset the first 16 MiB (those kept resident) whole, written or not; decommit the rest.
    Copy,
}

/// How the engine allocates instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allocation {
    /// Pre-reserved slots: fast instantiation.
    Pooling,
    /// Allocation per instance, when the pool's address space could not be reserved.
    OnDemand,
}

fn base_config() -> Config {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.epoch_interruption(true);
    config.cranelift_opt_level(OptLevel::Speed);
    config
}

/// How many of each kind of slot the pooling allocator holds for the whole host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolSize {
    /// Component instances (one per plugin instance).
    pub component_instances: u32,
    /// Core module instances (a Rust plugin's instance holds 3, a Python one's 14).
    pub core_instances: u32,
    /// Linear memories.
    pub memories: u32,
    /// Tables.
    pub tables: u32,
}

impl PoolSize {
    /// A pool for `instances` plugin instances at once, of any plugin of the five guest
    /// languages: 16 core instances each (a Python plugin's instance holds 14; the pool only
    /// counts core instances, it reserves nothing for them, so that at 4 each a host ran out
    /// of them at 73 Python instances), 2 memories (each reserves its slot's address space:
    /// [`MAX_PLUGIN_MEMORY`] and guards) and 4 tables.
    pub const fn for_instances(instances: u32) -> Self {
        Self {
            component_instances: instances,
            core_instances: instances.saturating_mul(16),
            memories: instances.saturating_mul(2),
            tables: instances.saturating_mul(4),
        }
    }
}

/// Largest pool a host may be given (`--instance-pool`): its memories alone reserve a few TiB
/// of address space (never resident), within the 128 TiB of a 64-bit process.
pub const MAX_POOL_INSTANCES: u32 = 1024;

/// The host's pool by default. Sized like Spin's defaults, scaled down: a few hundred
/// concurrent instances is more than one host's reconcile concurrency needs (16 per kind by
/// default); instances past it wait for room ([`super::admission`]).
pub const POOL: PoolSize = PoolSize::for_instances(256);

fn pooling(size: PoolSize, reset: MemoryReset) -> PoolingAllocationConfig {
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(size.component_instances)
        .total_core_instances(size.core_instances)
        .total_memories(size.memories)
        .total_tables(size.tables)
        // A fiber stack is held by a store's call in flight: at most one per instance.
        .total_stacks(size.component_instances)
        .max_component_instance_size(10 << 20)
        .max_core_instance_size(10 << 20)
        .max_memories_per_component(32)
        .max_tables_per_component(64)
        .max_memory_size(MAX_PLUGIN_MEMORY)
        // Keep the first pages of a slot mapped between instances: a fresh instance then
        // reuses warm pages instead of faulting every page its call touches.
        .linear_memory_keep_resident(KEEP_RESIDENT)
        .table_keep_resident(KEEP_RESIDENT)
        // Reset only the pages a call dirtied (Linux ≥ 6.7) instead of memset-ing all kept
        // pages: that memset was ~40 % of a fresh instance's cost (a Rust guest's).
        .pagemap_scan(match reset {
            MemoryReset::Scan => Enabled::Auto,
            MemoryReset::Copy => Enabled::No,
        });
    pool
}

/// Builds the engine with a pool of `size` whose memories are made ready again by `reset`,
/// falling back from pooling to on-demand allocation (with a log line) where the pool cannot be
/// reserved, and starts its epoch [`Ticker`].
pub fn new_engine(
    size: PoolSize,
    reset: MemoryReset,
) -> wasmtime::Result<(Engine, Allocation, Arc<Ticker>)> {
    let mut config = base_config();
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling(size, reset)));
    let (engine, allocation) = match Engine::new(&config) {
        Ok(engine) => (engine, Allocation::Pooling),
        Err(e) => {
            tracing::warn!(error = %e, "pooling allocator unavailable, falling back to on-demand allocation");
            (Engine::new(&base_config())?, Allocation::OnDemand)
        }
    };
    let ticker = Ticker::start(engine.weak());
    Ok((engine, allocation, ticker))
}

/// The engine's epoch ticker: a thread that increments the epoch every [`EPOCH_TICK`] while
/// at least one store is alive ([`Ticker::ticking`]), and sleeps parked while none is.
///
/// Guest code runs only inside a store, so an epoch tick with no store alive interrupts
/// nothing; without the parking an idle host woke a hundred times a second for nothing (the
/// only thread of an idle host that woke at all: docs/benchmarks.md). A store's first tick
/// comes at most one tick after the ticker wakes for it, as before at most one tick after
/// the store's start, so every deadline holds as it did.
pub struct Ticker {
    shared: Arc<TickerShared>,
    /// The ticker's thread, to wake; `None` when it could not be started.
    thread: Option<std::thread::Thread>,
}

#[derive(Default)]
struct TickerShared {
    /// Stores alive ([`Ticking`] guards).
    stores: AtomicUsize,
    /// The [`Ticker`] is gone: the thread ends.
    stopped: AtomicBool,
    /// The thread sleeps until a store is made (what an idle host looks like).
    parked: AtomicBool,
    /// The thread has ended.
    ended: AtomicBool,
}

impl Ticker {
    /// Starts the ticker of `engine`; its thread ends when the ticker or the engine is dropped.
    fn start(engine: wasmtime::EngineWeak) -> Arc<Self> {
        Self::with_tick(move || {
            engine
                .upgrade()
                .map(|engine| engine.increment_epoch())
                .is_some()
        })
    }

    /// Starts a ticker that calls `tick` every [`EPOCH_TICK`] while a store is alive, until
    /// `tick` answers false or the ticker is dropped.
    fn with_tick(mut tick: impl FnMut() -> bool + Send + 'static) -> Arc<Self> {
        let shared = Arc::new(TickerShared::default());
        let state = Arc::clone(&shared);
        let spawned = std::thread::Builder::new()
            .name("orchard-epoch".into())
            .spawn(move || {
                while !state.stopped.load(Ordering::Acquire) {
                    if state.stores.load(Ordering::Acquire) == 0 {
                        // Woken by the first store (or the drop); an unpark that came
                        // before the park makes it return at once, so no wake-up is lost.
                        state.parked.store(true, Ordering::Release);
                        std::thread::park();
                        state.parked.store(false, Ordering::Release);
                        continue;
                    }
                    std::thread::sleep(EPOCH_TICK);
                    if !tick() {
                        break;
                    }
                }
                state.ended.store(true, Ordering::Release);
            });
        let thread = match spawned {
            Ok(handle) => Some(handle.thread().clone()),
            Err(e) => {
                tracing::error!(error = %e, "could not start the epoch ticker: computing guests are neither interrupted nor made to yield, only the I/O timeout holds");
                None
            }
        };
        Arc::new(Self { shared, thread })
    }

    /// Keeps the epoch ticking until the returned guard is dropped: one per store, taken
    /// before the store is made and dropped after it (`component::Live` holds it beside the
    /// store), so that the epoch advances whenever guest code may run.
    pub fn ticking(self: &Arc<Self>) -> Ticking {
        if self.shared.stores.fetch_add(1, Ordering::AcqRel) == 0 {
            self.wake();
        }
        Ticking {
            ticker: Arc::clone(self),
        }
    }

    fn wake(&self) {
        if let Some(thread) = &self.thread {
            thread.unpark();
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::Release);
        self.wake();
    }
}

impl std::fmt::Debug for Ticker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticker")
            .field("stores", &self.shared.stores.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// One store's claim on the epoch ticker ([`Ticker::ticking`]).
#[derive(Debug)]
#[must_use = "the epoch ticks only while the guard lives"]
pub struct Ticking {
    ticker: Arc<Ticker>,
}

impl Drop for Ticking {
    fn drop(&mut self) {
        self.ticker.shared.stores.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;
    use std::time::Instant;

    use super::*;

    /// Polls `condition` every millisecond until it holds, for at most five seconds.
    fn eventually(what: &str, condition: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !condition() {
            assert!(Instant::now() < deadline, "timed out waiting until {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn counting_ticker() -> (Arc<Ticker>, Arc<AtomicU64>) {
        let ticks = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&ticks);
        let ticker = Ticker::with_tick(move || {
            counter.fetch_add(1, Ordering::AcqRel);
            true
        });
        (ticker, ticks)
    }

    #[test]
    fn the_ticker_sleeps_parked_while_no_store_is_alive_and_ticks_while_one_is() {
        let (ticker, ticks) = counting_ticker();
        eventually("the ticker parks with no store", || {
            ticker.shared.parked.load(Ordering::Acquire)
        });
        let idle = ticks.load(Ordering::Acquire);

        let first = ticker.ticking();
        let second = ticker.ticking();
        eventually("a store wakes the ticker", || {
            ticks.load(Ordering::Acquire) >= idle + 2
        });
        assert!(!ticker.shared.parked.load(Ordering::Acquire));

        drop(first);
        let one_left = ticks.load(Ordering::Acquire);
        eventually("it ticks on while one store is alive", || {
            ticks.load(Ordering::Acquire) >= one_left + 2
        });
        assert!(!ticker.shared.parked.load(Ordering::Acquire));

        drop(second);
        eventually("the ticker parks again after the last store", || {
            ticker.shared.parked.load(Ordering::Acquire)
        });
        let parked_at = ticks.load(Ordering::Acquire);
        // Parked, it ticks no more (it re-parks on a spurious wake-up); then a store wakes it.
        let _third = ticker.ticking();
        eventually("a store wakes it again", || {
            ticks.load(Ordering::Acquire) > parked_at
        });
    }

    #[test]
    fn dropping_the_ticker_ends_its_thread_even_while_parked() {
        let (ticker, _ticks) = counting_ticker();
        eventually("the ticker parks", || {
            ticker.shared.parked.load(Ordering::Acquire)
        });
        let shared = Arc::clone(&ticker.shared);
        drop(ticker);
        eventually("the thread ends", || shared.ended.load(Ordering::Acquire));
    }

    #[test]
    fn the_thread_ends_when_the_engine_is_gone() {
        let shared = {
            let ticker = Ticker::with_tick(|| false);
            let _store = ticker.ticking();
            let shared = Arc::clone(&ticker.shared);
            eventually("the thread ends", || shared.ended.load(Ordering::Acquire));
            shared
        };
        assert!(shared.ended.load(Ordering::Acquire));
    }
}
