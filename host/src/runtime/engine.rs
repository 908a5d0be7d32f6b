//! The shared wasmtime engine: component model, async, epoch interruption driven by a
//! ticker thread, the pooling allocator when the address space allows it.

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

fn pooling() -> PoolingAllocationConfig {
    // Sized like Spin's defaults, scaled down: a few hundred concurrent calls is far more
    // than one host's reconcile concurrency.
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(256)
        .total_core_instances(1024)
        .total_memories(512)
        .total_tables(1024)
        .total_stacks(256)
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
        // pages: that memset was ~40 % of a fresh instance's cost.
        .pagemap_scan(Enabled::Auto);
    pool
}

/// Builds the engine, falling back from pooling to on-demand allocation (with a log line)
/// where the pool cannot be reserved, and starts the epoch ticker.
pub fn new_engine() -> wasmtime::Result<(Engine, Allocation)> {
    let mut config = base_config();
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pooling()));
    let (engine, allocation) = match Engine::new(&config) {
        Ok(engine) => (engine, Allocation::Pooling),
        Err(e) => {
            tracing::warn!(error = %e, "pooling allocator unavailable, falling back to on-demand allocation");
            (Engine::new(&base_config())?, Allocation::OnDemand)
        }
    };
    spawn_ticker(engine.weak());
    Ok((engine, allocation))
}

/// Increments the epoch every tick until the engine is dropped.
fn spawn_ticker(engine: wasmtime::EngineWeak) {
    let spawned = std::thread::Builder::new()
        .name("orchard-epoch".into())
        .spawn(move || {
            while let Some(engine) = engine.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(EPOCH_TICK);
            }
        });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "could not start the epoch ticker: computing guests are neither interrupted nor made to yield, only the I/O timeout holds");
    }
}
