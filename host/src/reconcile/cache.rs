//! One cache per kind for the whole host: a single watch of each kind, whose objects (pruned
//! of what the host never reads) every plugin's controller, dependency watch, guard and
//! lookup shares. A zone is therefore held once in memory, however many plugins use zones.
//!
//! A subscriber gets every object of the cache first (so a controller that starts late still
//! sees them all), then every change; one that falls behind gets the whole cache again
//! rather than losing events.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::reflector::{ObjectRef, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::broadcast;

/// A change of one cached object.
#[derive(Debug, Clone)]
pub enum Change {
    /// Created or changed (or replayed to a new subscriber).
    Applied(Arc<DynamicObject>),
    /// Gone.
    Deleted(Arc<DynamicObject>),
}

/// Changes kept for subscribers that are momentarily behind.
const BUFFER: usize = 4096;

/// The cache of one kind (in one namespace, or all).
pub struct KindCache {
    /// The kind cached.
    pub resource: ApiResource,
    /// The reflector's store: every object of the kind seen so far.
    pub store: Store<DynamicObject>,
    changes: broadcast::Sender<Change>,
}

impl std::fmt::Debug for KindCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KindCache")
            .field("kind", &self.resource.kind)
            .field("objects", &self.store.state().len())
            .finish_non_exhaustive()
    }
}

/// Watch reconnects: quick after an apiserver outage (kube-runtime's default waits up to
/// 30 s between tries): 250 ms doubling to 2 s, reset once events flow again.
#[derive(Debug, Clone)]
pub struct WatchBackoff {
    next: Duration,
}

impl WatchBackoff {
    const FIRST: Duration = Duration::from_millis(250);
    /// The longest wait between two tries.
    pub const MAX: Duration = Duration::from_secs(2);

    /// A fresh backoff.
    pub fn new() -> Self {
        Self { next: Self::FIRST }
    }
}

impl Default for WatchBackoff {
    fn default() -> Self {
        Self::new()
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let delay = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        Some(delay)
    }
}

impl kube::runtime::utils::Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = Self::FIRST;
    }
}

/// Drops what the host never reads from a cached object: managedFields (two thirds of a
/// typical object) and the last-applied annotation.
pub fn prune(obj: &mut DynamicObject) {
    obj.metadata.managed_fields = None;
    if let Some(annotations) = obj.metadata.annotations.as_mut() {
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
}

impl KindCache {
    /// Starts the watch of `resource` (in `namespace`, or all) that fills the cache.
    fn start(client: &Client, resource: &ApiResource, namespace: Option<&str>) -> Arc<Self> {
        let api: Api<DynamicObject> = match namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
            None => Api::all_with(client.clone(), resource),
        };
        let writer = Writer::new(resource.clone());
        let (changes, _) = broadcast::channel(BUFFER);
        let cache = Arc::new(Self {
            resource: resource.clone(),
            store: writer.as_reader(),
            changes: changes.clone(),
        });
        let kind = resource.kind.clone();
        let pump = watcher(api, watcher::Config::default().any_semantic())
            .backoff(WatchBackoff::new())
            .modify(prune)
            .reflect(writer)
            .for_each(move |event| {
                let change = match event {
                    Ok(watcher::Event::Apply(obj) | watcher::Event::InitApply(obj)) => {
                        Some(Change::Applied(Arc::new(obj)))
                    }
                    Ok(watcher::Event::Delete(obj)) => Some(Change::Deleted(Arc::new(obj))),
                    Ok(watcher::Event::Init | watcher::Event::InitDone) => None,
                    Err(e) => {
                        tracing::warn!(kind = %kind, error = %e, "watch failed; retrying");
                        None
                    }
                };
                if let Some(change) = change {
                    // No subscriber yet is fine: they replay the store when they come.
                    let _ = changes.send(change);
                }
                futures::future::ready(())
            });
        tokio::spawn(pump);
        cache
    }

    /// The cached object `namespace/name`.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<DynamicObject>> {
        self.store
            .get(&ObjectRef::new_with(name, self.resource.clone()).within(namespace))
    }

    /// Every object of the cache (once it holds them), then every change.
    pub fn subscribe(&self) -> impl Stream<Item = Change> + Send + 'static {
        let rx = self.changes.subscribe();
        let store = self.store.clone();
        let replay = |store: &Store<DynamicObject>| {
            store
                .state()
                .into_iter()
                .map(Change::Applied)
                .collect::<Vec<_>>()
        };
        let first = replay(&store);
        futures::stream::unfold(
            (rx, store, first.into_iter()),
            move |(mut rx, store, mut pending)| async move {
                loop {
                    if let Some(change) = pending.next() {
                        return Some((change, (rx, store, pending)));
                    }
                    match rx.recv().await {
                        Ok(change) => return Some((change, (rx, store, pending))),
                        Err(broadcast::error::RecvError::Lagged(missed)) => {
                            tracing::debug!(missed, "cache subscriber fell behind; replaying");
                            pending = replay(&store).into_iter();
                        }
                        Err(broadcast::error::RecvError::Closed) => return None,
                    }
                }
            },
        )
    }

    /// Waits (at most `limit`) until the cache holds every object of its first listing.
    pub async fn wait_ready(&self, limit: Duration) -> bool {
        tokio::time::timeout(limit, self.store.wait_until_ready())
            .await
            .is_ok_and(|r| r.is_ok())
    }
}

/// Which cache: namespace scope (`None`: all namespaces), API version, kind.
type CacheKey = (Option<String>, String, String);

/// The host's caches, one per kind and namespace scope, made on first use.
#[derive(Default)]
pub struct Caches {
    kinds: Mutex<HashMap<CacheKey, Arc<KindCache>>>,
}

impl std::fmt::Debug for Caches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kinds = self
            .kinds
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f.debug_list().entries(kinds.values()).finish()
    }
}

impl Caches {
    /// The cache of `resource` in `namespace` (all when `None`), started if it is not yet.
    pub fn kind(
        &self,
        client: &Client,
        resource: &ApiResource,
        namespace: Option<&str>,
    ) -> Arc<KindCache> {
        let key = (
            namespace.map(str::to_owned),
            resource.api_version.clone(),
            resource.kind.clone(),
        );
        let mut kinds = self
            .kinds
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(
            kinds
                .entry(key)
                .or_insert_with(|| KindCache::start(client, resource, namespace)),
        )
    }
}
