//! The sandboxed Wasm runtime: one engine, one linker, a compiled-component cache, and
//! [`ComponentActuator`]s made from component bytes with per-plugin [`Limits`] and
//! [`EgressPolicy`].

pub mod admission;
mod bindings;
pub mod cache;
mod component;
pub mod egress;
pub mod engine;
pub mod limits;
mod shortcuts;
mod state;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use wasmtime::Engine;
use wasmtime::component::{HasSelf, Linker};

pub use cache::CompiledCache;
pub use component::ComponentActuator;
pub use egress::{AllowedHost, EgressPolicy, TrustedCas};
pub use engine::Allocation;
pub use limits::Limits;
pub use state::CALL_DEADLINE_ENV;

use bindings::optional::conversion;
use bindings::{ActuatorPluginIndices, ActuatorPluginPre};
use shortcuts::ShortcutsExport;
use state::PluginState;

/// Errors of the runtime.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The engine or linker could not be built.
    #[error("failed to set up the Wasm engine: {0}")]
    Engine(#[source] wasmtime::Error),
    /// The plugin file could not be read.
    #[error("failed to read plugin {path}: {source}")]
    Read {
        /// The plugin file.
        path: PathBuf,
        #[source]
        /// The I/O error.
        source: std::io::Error,
    },
    /// The component could not be compiled or cached.
    #[error("plugin {plugin}: {source}")]
    Cache {
        /// The plugin.
        plugin: String,
        #[source]
        /// Why compiling or caching failed.
        source: cache::Error,
    },
    /// The component does not implement world `actuator-plugin`, or imports more than it.
    #[error("plugin {plugin} is not an orchard:actuator/actuator-plugin component: {source:#}")]
    World {
        /// The plugin.
        plugin: String,
        #[source]
        /// What linking reported.
        source: wasmtime::Error,
    },
    /// One instance of the component would not fit in the host's instance pool.
    #[error("plugin {plugin}: {source}")]
    Footprint {
        /// The plugin.
        plugin: String,
        #[source]
        /// What it needs, and of what the pool holds too few.
        source: admission::Error,
    },
    /// A memory limit larger than the engine's slots.
    #[error("plugin {plugin}: memory limit {asked} bytes exceeds the host's maximum of {max}")]
    MemoryLimit {
        /// The plugin.
        plugin: String,
        /// The limit the plugin asked for, in bytes.
        asked: usize,
        /// The host's maximum, in bytes.
        max: usize,
    },
}

/// How one plugin runs.
#[derive(Debug, Clone, Default)]
pub struct PluginConfig {
    /// Memory, time and concurrency bounds of a call.
    pub limits: Limits,
    /// Where the guest may send HTTP requests.
    pub egress: EgressPolicy,
}

/// Engine, linker and cache shared by every plugin of a host.
#[derive(Clone)]
pub struct Runtime {
    engine: Engine,
    linker: Arc<Linker<PluginState>>,
    cache: CompiledCache,
    allocation: Allocation,
    ticker: Arc<engine::Ticker>,
    /// The pool's budget every instance of every plugin takes its room from.
    admission: Arc<admission::Admission>,
}

impl Runtime {
    /// A runtime caching compiled components in `cache_dir` (none: compile every load), with
    /// the default instance pool ([`engine::POOL`]).
    pub fn new(cache_dir: Option<PathBuf>) -> Result<Self, Error> {
        Self::with_pool(cache_dir, engine::POOL)
    }

    /// A runtime whose instance pool holds `pool` ([`engine::PoolSize::for_instances`]).
    pub fn with_pool(cache_dir: Option<PathBuf>, pool: engine::PoolSize) -> Result<Self, Error> {
        Self::with_options(cache_dir, pool, engine::MemoryReset::default())
    }

    /// A runtime whose instance pool holds `pool` and makes its memories ready again by
    /// `reset`.
    pub fn with_options(
        cache_dir: Option<PathBuf>,
        pool: engine::PoolSize,
        reset: engine::MemoryReset,
    ) -> Result<Self, Error> {
        let (engine, allocation, ticker) =
            engine::new_engine(pool, reset).map_err(Error::Engine)?;
        let mut linker = Linker::<PluginState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(Error::Engine)?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)
            .map_err(Error::Engine)?;
        bindings::log::add_to_linker::<PluginState, HasSelf<PluginState>>(&mut linker, |s| s)
            .map_err(Error::Engine)?;
        bindings::report::add_to_linker::<PluginState, HasSelf<PluginState>>(&mut linker, |s| s)
            .map_err(Error::Engine)?;
        Ok(Self {
            engine,
            linker: Arc::new(linker),
            cache: CompiledCache::new(cache_dir),
            allocation,
            ticker,
            admission: Arc::new({
                let (in_use, expected) =
                    crate::ops::metrics::global().wasm_pool(pool.core_instances);
                admission::Admission::new(pool).metered(in_use, expected)
            }),
        })
    }

    /// How instances are allocated.
    pub fn allocation(&self) -> Allocation {
        self.allocation
    }

    /// Units of the instance pool the running controllers expect to take at once
    /// ([`admission::Admission::expect`]).
    pub fn pool_units_expected(&self) -> u64 {
        self.admission.expected()
    }

    /// The engine (for benchmarks and tools).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Loads a plugin from its component bytes.
    pub fn load(
        &self,
        name: &str,
        bytes: &[u8],
        config: PluginConfig,
    ) -> Result<ComponentActuator, Error> {
        if config.limits.memory_bytes > engine::MAX_PLUGIN_MEMORY {
            return Err(Error::MemoryLimit {
                plugin: name.to_owned(),
                asked: config.limits.memory_bytes,
                max: engine::MAX_PLUGIN_MEMORY,
            });
        }
        let started = std::time::Instant::now();
        let loaded = self
            .cache
            .load(&self.engine, bytes)
            .map_err(|source| Error::Cache {
                plugin: name.to_owned(),
                source,
            })?;
        let world = |source| Error::World {
            plugin: name.to_owned(),
            source,
        };
        let pre = self
            .linker
            .instantiate_pre(&loaded.component)
            .map_err(world)?;
        let indices = ActuatorPluginIndices::new(&pre).map_err(world)?;
        // The conversion and shortcuts exports are optional: looked up by their names (semver-compatible, as
        // wasmtime matches exports), and an export of the wrong shape refuses the plugin.
        let conversion = match loaded
            .component
            .get_export_index(None, bindings::CONVERSION_EXPORT)
        {
            Some(_) => Some(conversion::GuestIndices::new(&pre).map_err(world)?),
            None => None,
        };
        let shortcuts = ShortcutsExport::find(&loaded.component).map_err(world)?;
        // What one instance takes from the pool, and whether it can ever fit.
        let unfit = |source| Error::Footprint {
            plugin: name.to_owned(),
            source,
        };
        let footprint = admission::Footprint::of(bytes, loaded.component.resources_required())
            .map_err(unfit)?;
        let weight = self.admission.weight(footprint).map_err(unfit)?;
        let pre = ActuatorPluginPre::new(pre).map_err(world)?;
        tracing::info!(
            plugin = name,
            digest = %loaded.digest,
            cache_hit = loaded.cache_hit,
            elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
            core_instances = footprint.core_instances,
            pool_units = weight,
            "plugin loaded"
        );
        let name: Arc<str> = name.into();
        let instances = crate::ops::metrics::global().wasm_instances(&name);
        Ok(ComponentActuator::new(component::Loaded {
            egress: Arc::new(egress::Egress::new(config.egress, Arc::clone(&name))),
            name,
            pre,
            indices,
            conversion,
            shortcuts,
            limits: config.limits,
            digest: loaded.digest,
            ticker: Arc::clone(&self.ticker),
            instances,
            admission: Arc::clone(&self.admission),
            weight,
        }))
    }

    /// Loads a plugin from a file; its name is the file stem unless given.
    pub fn load_file(
        &self,
        path: &Path,
        name: Option<&str>,
        config: PluginConfig,
    ) -> Result<ComponentActuator, Error> {
        let bytes = std::fs::read(path).map_err(|source| Error::Read {
            path: path.to_owned(),
            source,
        })?;
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("plugin")
            .replace('_', "-");
        self.load(name.unwrap_or(&stem), &bytes, config)
    }
}
