//! The Plugin host: watches `Plugin` objects and gives each its [`Worker`], which serves it.
//!
//! Contract:
//! - every Plugin the watch shows (matching the selector) MUST have exactly one worker;
//! - a Plugin deleted — or gone from a re-list after the watch was down — MUST have its worker
//!   stop serving (its objects, finalizers and external resources stay);
//! - on shutdown every worker stops its kind's controller, letting reconciles in flight finish;
//! - the host MUST hold `/readyz` back from its making until it has listed the Plugins, and
//!   until each Plugin of that first list has been loaded once, well or not (a replica is
//!   called for conversions as soon as it is ready).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Plugin;
use super::config::PluginHostConfig;
use super::kind_claims::KindClaims;
use super::worker::Worker;
use crate::actuator::Description;
use crate::oci::Registry;
use crate::ops::Pending;

/// Serves the kinds of `Plugin` objects.
pub struct PluginHost {
    client: Client,
    config: Arc<PluginHostConfig>,
    registry: Arc<Registry>,
    claims: Arc<KindClaims>,
    /// Readiness waits for the first list of Plugins from the host's making on.
    listing: Pending,
}

/// The spec channel of one Plugin's worker (`None`: the Plugin is gone).
type SpecSender = watch::Sender<Option<Arc<Plugin>>>;

impl PluginHost {
    /// A host of Plugins; `static_kinds` are served by `--plugin` flags and cannot be claimed.
    pub fn new(client: Client, config: PluginHostConfig, static_kinds: &[Description]) -> Self {
        let registry = Arc::new(Registry::new(config.registry.clone()));
        let claims = KindClaims::with_static(
            static_kinds
                .iter()
                .map(|d| (crate::crd::crd_name(d), d.name.as_str())),
        );
        let listing = config.settings.health.pending();
        Self {
            client,
            config: Arc::new(config),
            registry,
            claims: Arc::new(claims),
            listing,
        }
    }

    /// Watches Plugins until `shutdown` is cancelled, then waits for every worker to stop
    /// its kind's controller.
    pub async fn run(self, shutdown: CancellationToken) {
        let api: Api<Plugin> = Api::all(self.client.clone());
        let mut watch_config = watcher::Config::default();
        if let Some(selector) = &self.config.selector {
            watch_config = watch_config.labels(selector);
        }
        let events = watcher::watcher(api, watch_config).default_backoff();
        let mut events = std::pin::pin!(events);
        let mut workers: HashMap<String, SpecSender> = HashMap::new();
        let mut tasks = tokio::task::JoinSet::new();
        let mut listed: Option<HashSet<String>> = None;
        // Until the first list is done, each Plugin in it holds readiness back until loaded.
        let mut listing = Some(self.listing);
        // The workers' token: cancelled on shutdown, and when the watch itself ends.
        let stop = shutdown.child_token();
        loop {
            let event = tokio::select! {
                () = shutdown.cancelled() => break,
                event = events.next() => event,
            };
            let event = match event {
                None => break,
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "watching Plugins failed; retrying");
                    continue;
                }
                Some(Ok(event)) => event,
            };
            let mut apply = |plugin: Plugin, first_load: Option<Pending>| {
                let name = plugin.name_any();
                let plugin = Some(Arc::new(plugin));
                // A worker that ended (its Plugin was deleted) is replaced by a new one.
                if let Some(tx) = workers.get(&name).filter(|tx| !tx.is_closed()) {
                    tx.send_replace(plugin);
                } else {
                    let (tx, rx) = watch::channel(plugin);
                    workers.insert(name.clone(), tx);
                    let worker = Worker::new(
                        name,
                        self.client.clone(),
                        Arc::clone(&self.config),
                        Arc::clone(&self.registry),
                        Arc::clone(&self.claims),
                        stop.clone(),
                    );
                    tasks.spawn(worker.run(rx, first_load));
                }
            };
            match event {
                Event::Init => listed = Some(HashSet::new()),
                Event::InitApply(plugin) => {
                    if let Some(listed) = listed.as_mut() {
                        listed.insert(plugin.name_any());
                    }
                    let first_load = listing
                        .as_ref()
                        .map(|_| self.config.settings.health.pending());
                    apply(plugin, first_load);
                }
                Event::InitDone => {
                    listing = None;
                    // A re-list: Plugins deleted while the watch was down (or while no host of
                    // this replica ran) are gone from it.
                    if let Some(listed) = listed.take() {
                        self.config.kept.forget_unlisted(&listed);
                        workers.retain(|name, tx| {
                            let keep = listed.contains(name);
                            if !keep {
                                tx.send_replace(None);
                            }
                            keep
                        });
                    }
                }
                Event::Apply(plugin) => apply(plugin, None),
                Event::Delete(plugin) => {
                    // The worker stops serving and ends; a Plugin of the same name created
                    // later gets a new worker.
                    if let Some(tx) = workers.remove(&plugin.name_any()) {
                        tx.send_replace(None);
                    }
                }
            }
        }
        stop.cancel();
        while tasks.join_next().await.is_some() {}
    }
}
