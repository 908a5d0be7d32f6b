//! Operations: metrics, health and readiness, the admin HTTP server, leader election.

pub mod leader;
pub mod metrics;
pub mod server;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// What `/readyz` reports: plugins loaded, and the caches of every running controller synced.
#[derive(Debug, Default)]
pub struct Health {
    plugins_loaded: AtomicBool,
    controllers_started: AtomicUsize,
    controllers_synced: AtomicUsize,
}

impl Health {
    /// Every plugin is loaded and described.
    pub fn set_plugins_loaded(&self) {
        self.plugins_loaded.store(true, Ordering::SeqCst);
    }

    /// A controller started; its cache is not synced yet.
    pub fn controller_started(&self) {
        self.controllers_started.fetch_add(1, Ordering::SeqCst);
    }

    /// A controller's cache finished its initial list.
    pub fn controller_synced(&self) {
        self.controllers_synced.fetch_add(1, Ordering::SeqCst);
    }

    /// Ready to serve.
    pub fn is_ready(&self) -> bool {
        self.plugins_loaded.load(Ordering::SeqCst)
            && self.controllers_synced.load(Ordering::SeqCst)
                >= self.controllers_started.load(Ordering::SeqCst)
    }
}
