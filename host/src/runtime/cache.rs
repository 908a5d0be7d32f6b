//! The compiled-component cache: compile once, keep the native code on disk keyed by the
//! component's sha256 and the engine's compatibility hash.
//!
//! Deserialising native code is `unsafe` in wasmtime because a forged file could run
//! anything: this cache only ever reads files it wrote itself (atomically, into its own
//! directory, under a name derived from the source bytes and the engine).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Errors of the cache.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The component does not compile.
    #[error("failed to compile component {digest}: {source}")]
    Compile {
        /// `sha256:<hex>` of the component bytes.
        digest: String,
        #[source]
        /// The compiler's error.
        source: wasmtime::Error,
    },
    /// The cache directory could not be written.
    #[error("failed to write compiled component to {path}: {source}")]
    Write {
        /// The cache file.
        path: PathBuf,
        #[source]
        /// The I/O error.
        source: std::io::Error,
    },
}

/// A component ready to instantiate, with how it was obtained.
pub struct Loaded {
    /// The compiled component.
    pub component: Component,
    /// `sha256:<hex>` of the component bytes.
    pub digest: String,
    /// Whether the native code came from the cache.
    pub cache_hit: bool,
}

/// The on-disk cache. `None` directory = compile every time.
#[derive(Debug, Clone)]
pub struct CompiledCache {
    dir: Option<PathBuf>,
    /// A lock per digest loaded (shared by the clones): a load of bytes another load is
    /// compiling waits for it and reads what it stored, instead of compiling them again — a
    /// standby's compile still running when the serving Plugin host loads the same plugin,
    /// a ring's Plugin hosts, two Plugins of one artifact. One small entry per digest.
    turns: Arc<Mutex<HashMap<String, Arc<Mutex<()>>>>>,
}

impl CompiledCache {
    /// A cache in `dir` (created on first write).
    pub fn new(dir: Option<PathBuf>) -> Self {
        Self {
            dir,
            turns: Arc::default(),
        }
    }

    /// The lock of `digest_hex`'s loads.
    fn turn(&self, digest_hex: &str) -> Arc<Mutex<()>> {
        // A poisoned map is still whole (one insert at a time): take it as it is.
        let mut turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(turns.entry(digest_hex.to_owned()).or_default())
    }

    /// The default location: `$XDG_CACHE_HOME/orchard/compiled` or `~/.cache/orchard/compiled`.
    pub fn default_dir() -> Option<PathBuf> {
        std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))
            .map(|base| base.join("orchard").join("compiled"))
    }

    fn path(&self, engine: &Engine, digest_hex: &str) -> Option<PathBuf> {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_hash = hasher.finish();
        self.dir
            .as_ref()
            .map(|d| d.join(format!("{digest_hex}-{engine_hash:016x}.cwasm")))
    }

    /// Loads `bytes` as a component, from the cache when this host compiled it before.
    pub fn load(&self, engine: &Engine, bytes: &[u8]) -> Result<Loaded, Error> {
        let digest_hex = hex::encode(Sha256::digest(bytes));
        let digest = format!("sha256:{digest_hex}");
        let path = self.path(engine, &digest_hex);
        // Without a directory nothing is stored for another load to read: no turn to wait.
        let turn = path.is_some().then(|| self.turn(&digest_hex));
        let _turn = turn
            .as_deref()
            .map(|t| t.lock().unwrap_or_else(PoisonError::into_inner));
        if let Some(path) = path.as_deref().filter(|p| p.is_file()) {
            // SAFETY: the file was written by `store` below, in this cache's own directory,
            // under a name bound to these exact source bytes and this engine's settings.
            #[allow(unsafe_code, reason = "deserialising native code this host compiled")]
            match unsafe { Component::deserialize_file(engine, path) } {
                Ok(component) => {
                    return Ok(Loaded {
                        component,
                        digest,
                        cache_hit: true,
                    });
                }
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "discarding unusable compiled artifact");
                }
            }
        }
        let component = Component::new(engine, bytes).map_err(|source| Error::Compile {
            digest: digest.clone(),
            source,
        })?;
        if let Some(path) = path {
            store(&component, &path)?;
        }
        Ok(Loaded {
            component,
            digest,
            cache_hit: false,
        })
    }
}

fn store(component: &Component, path: &Path) -> Result<(), Error> {
    let write = |source| Error::Write {
        path: path.to_owned(),
        source,
    };
    let bytes = component
        .serialize()
        .map_err(|e| write(std::io::Error::other(e.to_string())))?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(write)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(write)?;
    std::fs::rename(&tmp, path).map_err(write)
}
