//! Operations: metrics, health and readiness, the admin HTTP server, leader election, the
//! presence of each host (which host serves which kinds where) and the journal of passes
//! (what each object's last passes did), and the traces of the passes (OpenTelemetry).

pub mod journal;
pub mod leader;
pub mod metrics;
pub mod presence;
pub mod server;
pub mod traces;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A Kubernetes object name from `text`: lower case, `[a-z0-9-.]`, at most 253 characters.
pub fn object_name(text: &str) -> String {
    let name: String = text
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .take(253)
        .collect();
    name.trim_matches(['-', '.']).to_owned()
}

/// What `/readyz` reports: plugins loaded (the Plugin objects a host listed at its start
/// too, each loaded or failed once), not installing CRDs, every controller spawned started,
/// and the caches of every running controller synced.
#[derive(Debug, Default)]
pub struct Health {
    plugins_loaded: AtomicBool,
    /// Loads readiness waits for: one per [`Pending`] alive.
    pending: AtomicUsize,
    installing: AtomicBool,
    controllers_expected: AtomicUsize,
    controllers_started: AtomicUsize,
    controllers_synced: AtomicUsize,
}

impl Health {
    /// Every plugin is loaded and described, the conversion webhook listens, and a standby's
    /// loads are counted ([`Health::pending`]).
    pub fn set_plugins_loaded(&self) {
        self.plugins_loaded.store(true, Ordering::SeqCst);
    }

    /// A load readiness waits for until the guard is dropped (a Plugin host's first list of
    /// Plugins, then each Plugin of it until its first load ended, well or not): a replica
    /// whose conversion webhook is called through a Service is ready only once it can
    /// convert the kinds of the Plugins it found.
    pub fn pending(self: &Arc<Self>) -> Pending {
        self.pending.fetch_add(1, Ordering::SeqCst);
        Pending(Arc::clone(self))
    }

    /// The host installs its CRDs and starts its controllers (not ready meanwhile: a client
    /// that waits for `/readyz` may then use the kinds at once).
    pub fn set_installing(&self, installing: bool) {
        self.installing.store(installing, Ordering::SeqCst);
    }

    /// `n` controllers were spawned: not ready until each has started (and synced).
    pub fn expect_controllers(&self, n: usize) {
        self.controllers_expected.fetch_add(n, Ordering::SeqCst);
    }

    /// The controllers counted so far all ended (a sharded host drained its assignment): only
    /// those spawned next count. Without it, a controller stopped before it started or synced
    /// (buckets that moved again within moments) would keep `/readyz` false for good.
    pub fn controllers_drained(&self) {
        self.controllers_expected.store(0, Ordering::SeqCst);
        self.controllers_started.store(0, Ordering::SeqCst);
        self.controllers_synced.store(0, Ordering::SeqCst);
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
        self.waiting_for().is_empty()
    }

    /// What readiness still waits for, in words (`/readyz` says it): empty when ready.
    pub fn waiting_for(&self) -> Vec<String> {
        let mut waits = Vec::new();
        if !self.plugins_loaded.load(Ordering::SeqCst) {
            waits.push("the plugins to load (and the webhook to listen)".to_owned());
        }
        let pending = self.pending.load(Ordering::SeqCst);
        if pending > 0 {
            waits.push(format!(
                "{pending} load(s) of Plugin objects (the list of Plugins, then each Plugin's first load)"
            ));
        }
        if self.installing.load(Ordering::SeqCst) {
            waits.push("the CRDs to be installed".to_owned());
        }
        let expected = self.controllers_expected.load(Ordering::SeqCst);
        let started = self.controllers_started.load(Ordering::SeqCst);
        let synced = self.controllers_synced.load(Ordering::SeqCst);
        if started < expected {
            waits.push(format!("controllers to start ({started} of {expected})"));
        }
        if synced < started {
            waits.push(format!(
                "the caches of the controllers to sync ({synced} of {started})"
            ));
        }
        waits
    }
}

/// A load `/readyz` waits for ([`Health::pending`]): done when dropped.
#[derive(Debug)]
pub struct Pending(Arc<Health>);

impl Drop for Pending {
    fn drop(&mut self) {
        self.0.pending.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::Health;

    #[test]
    fn the_host_is_not_ready_while_a_load_it_waits_for_is_pending() {
        let health = Arc::new(Health::default());
        health.set_plugins_loaded();
        let listing = health.pending();
        let (a, b) = (health.pending(), health.pending());
        drop(listing);
        assert!(!health.is_ready(), "two Plugins of the list not loaded yet");
        drop(a);
        assert!(!health.is_ready(), "one Plugin of the list not loaded yet");
        drop(b);
        assert!(health.is_ready());
    }

    #[test]
    fn what_readiness_waits_for_is_said_in_words_and_nothing_once_ready() {
        let health = Arc::new(Health::default());
        assert_eq!(
            health.waiting_for(),
            ["the plugins to load (and the webhook to listen)"]
        );
        health.set_plugins_loaded();
        let listing = health.pending();
        health.expect_controllers(2);
        health.controller_started();
        assert_eq!(
            health.waiting_for(),
            [
                "1 load(s) of Plugin objects (the list of Plugins, then each Plugin's first load)",
                "controllers to start (1 of 2)",
                "the caches of the controllers to sync (0 of 1)",
            ]
        );
        drop(listing);
        health.controller_started();
        health.controller_synced();
        health.controller_synced();
        assert!(health.waiting_for().is_empty());
        assert!(health.is_ready());
    }

    #[test]
    fn controllers_of_a_drained_assignment_that_never_started_or_synced_do_not_hold_readiness_back()
    {
        let health = Health::default();
        health.set_plugins_loaded();
        // Assignment 1: two controllers spawned; one started, neither synced; then drained.
        health.expect_controllers(2);
        health.controller_started();
        assert!(!health.is_ready());
        health.controllers_drained();
        // Assignment 2: both start and sync.
        health.expect_controllers(2);
        health.controller_started();
        health.controller_started();
        assert!(!health.is_ready(), "not before both synced");
        health.controller_synced();
        health.controller_synced();
        assert!(health.is_ready());
    }

    #[test]
    fn the_host_is_ready_only_once_its_crds_are_installed_and_every_spawned_controller_synced() {
        let health = Health::default();
        assert!(!health.is_ready(), "before the plugins are loaded");
        health.set_plugins_loaded();
        // A standby (leader election) loaded its plugins and waits: ready.
        assert!(health.is_ready());
        health.set_installing(true);
        assert!(!health.is_ready(), "while the CRDs are installed");
        health.expect_controllers(2);
        health.set_installing(false);
        assert!(
            !health.is_ready(),
            "spawned controllers that have not started yet"
        );
        health.controller_started();
        health.controller_started();
        assert!(!health.is_ready(), "controllers whose caches did not sync");
        health.controller_synced();
        health.controller_synced();
        assert!(health.is_ready());
    }
}
