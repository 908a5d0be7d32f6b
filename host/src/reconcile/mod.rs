//! The generic reconciler: one controller per plugin kind, ORC's semantics.
//!
//! Modules, dependencies pointing down the list:
//! - [`flow`]: the reconcile flow — one pass over one object (skip, the flow, status, marker,
//!   what next), with the two flows (`normal`, `delete`) as ordered lists of named phases and
//!   what they use alone (dependency resolution, status, the spec envelope);
//! - [`ops`]: the seam below the flows — every read and write of Kubernetes objects;
//! - [`machinery`]: what drives and serves the flow — caches, the work queue, triggers,
//!   claims, the dependents index, deletion guards, Events, backoff. It never imports the flow;
//! - [`annotations`]: the annotation names the host reads and writes (a leaf).
//!
//! This module holds what they share ([`Context`], [`Error`], [`Settings`], [`Names`]), and
//! [`run`] wires them to the apiserver.

pub mod annotations;
pub mod flow;
pub mod machinery;
pub mod ops;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject};
use kube::core::GroupVersionKind;
use kube::{Client, Resource, ResourceExt};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::actuator::{Actuator, Description};
use flow::{deps, trace};
use machinery::cache::{self, Change, KindCache, Reads};
use machinery::claims::Claims;
use machinery::dependents::{self, DependentsIndex};
use machinery::events;
use machinery::queue::{Key, WorkQueue};
use machinery::triggers::Triggers;
use machinery::writes::{Freshness, OwnWrites};
use machinery::{backoff, guard};
use ops::{KubeOps, ObjectOps};

pub use flow::envelope::parse_duration;

/// The metadata the apiserver sets on every stored object of a plugin's kind, read without
/// an `Option` at each use. An object built in a unit test may lack them; it then gets `""`,
/// which only ever serves as a map key or a namespace there.
pub(crate) trait StoredMeta {
    /// `metadata.uid`: the apiserver sets it on create, so a watched object always has one.
    fn stored_uid(&self) -> String;
    /// `metadata.namespace`: every plugin kind is namespaced (the CRD says so), and so are
    /// its dependencies (same namespace by the contract).
    fn stored_namespace(&self) -> String;
}

impl<K: Resource> StoredMeta for K {
    fn stored_uid(&self) -> String {
        self.meta().uid.clone().unwrap_or_default()
    }

    fn stored_namespace(&self) -> String {
        self.meta().namespace.clone().unwrap_or_default()
    }
}

/// Errors of the reconciler: the Kubernetes API failed. Actuator failures are not errors here:
/// they end up in the object's conditions.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the Kubernetes API failed.
    #[error("{action} {kind} {name}: {source}")]
    Kube {
        /// What was being done (get, apply, delete…).
        action: &'static str,
        /// Kind of the object.
        kind: String,
        /// Name of the object.
        name: String,
        #[source]
        /// The apiserver's answer.
        source: kube::Error,
    },
    /// The kind of a declared dependency is not served by the apiserver.
    #[error("plugin {plugin}: dependency kind {kind} ({group}/{version}) is not served: {source}")]
    Discovery {
        /// The plugin declaring the dependency.
        plugin: String,
        /// The dependency kind.
        kind: String,
        /// Its API group.
        group: String,
        /// Its API version.
        version: String,
        #[source]
        /// The discovery error.
        source: kube::Error,
    },
}

impl Error {
    fn api_code(&self) -> Option<u16> {
        match self {
            Self::Kube {
                source: kube::Error::Api(e),
                ..
            } => Some(e.code),
            _ => None,
        }
    }

    /// The apiserver refused the host's identity (RBAC): no retry soon will change that.
    pub fn is_forbidden(&self) -> bool {
        self.api_code() == Some(403)
    }

    /// The apiserver refused the request itself (too large, invalid): the same request will
    /// be refused again.
    pub fn is_refused(&self) -> bool {
        matches!(self.api_code(), Some(400 | 413 | 422))
    }

    /// The apiserver's message, or this error's text.
    pub fn api_message(&self) -> String {
        match self {
            Self::Kube {
                source: kube::Error::Api(e),
                ..
            } => format!("{} ({})", e.message, e.code),
            other => other.to_string(),
        }
    }
}

/// Host-wide settings of the reconcilers.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Only this namespace (all when `None`).
    pub namespace: Option<String>,
    /// Resync period of objects that set none (`None`: no resync).
    pub default_resync: Option<Duration>,
    /// Reconciles in flight per plugin.
    pub concurrency: u16,
    /// Test-only fail point: abort the process right after a successful create, before
    /// `status.id` is written (proves that adoption prevents a leak).
    pub abort_after_create: bool,
    /// Name of this host in Events.
    pub instance: String,
    /// Which Events are published.
    pub events: events::EventLevel,
    /// Readiness of the host, reported by `/readyz`.
    pub health: Arc<crate::ops::Health>,
    /// Every change of this value reconciles every object of the kind again (a new version
    /// of the plugin re-observes what the previous one did).
    pub reconcile_all: Option<tokio::sync::watch::Receiver<u64>>,
    /// The host's caches (one per kind, shared by every plugin).
    pub caches: Arc<cache::Caches>,
    /// With sharding: the label selector of this replica's buckets. The controller watches
    /// only those objects of its kind; claims and guards still see all of them.
    pub shard_selector: Option<String>,
    /// Test instrument: every pass's begin and end, appended to a file.
    pub pass_trace: Option<Arc<trace::PassTrace>>,
    /// Where each pass is journaled (the host's: [`crate::ops::journal::global`]).
    pub journal: Arc<crate::ops::journal::Journal>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            namespace: None,
            default_resync: None,
            concurrency: 4,
            abort_after_create: false,
            instance: "orchard".to_owned(),
            events: events::EventLevel::Normal,
            health: Arc::default(),
            reconcile_all: None,
            caches: Arc::default(),
            shard_selector: None,
            pass_trace: None,
            journal: Arc::default(),
        }
    }
}

/// Names derived from the plugin's name.
#[derive(Debug, Clone)]
pub struct Names {
    /// `orchard.dev/<plugin>`: on every object of the kind.
    pub finalizer: String,
    /// Field manager of that finalizer (and of the create-pending marker).
    pub finalizer_manager: String,
    /// Field manager of the status apply.
    pub status_manager: String,
    /// `orchard.dev/<plugin>-guard`: on dependencies this kind uses.
    pub guard_finalizer: String,
    /// Field manager of guard finalizers.
    pub guard_manager: String,
    /// Field manager of connection Secrets (`spec.writeConnectionSecretTo`).
    pub connection_manager: String,
}

impl Names {
    /// The names of plugin `plugin`.
    pub fn new(plugin: &str) -> Self {
        Self {
            finalizer: format!("orchard.dev/{plugin}"),
            finalizer_manager: format!("orchard.dev/{plugin}/finalizer"),
            status_manager: format!("orchard.dev/{plugin}/status"),
            guard_finalizer: format!("orchard.dev/{plugin}-guard"),
            guard_manager: format!("orchard.dev/{plugin}/guard"),
            connection_manager: format!("orchard.dev/{plugin}/connection"),
        }
    }
}

/// What the host remembers of an object's last normal pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PassRecord {
    /// The plugin version it ran with ([`Context::plugin_version`]).
    pub version: u64,
    /// [`deps::inputs_fingerprint`] at that pass.
    pub inputs: u64,
    /// The digest of its `orchard.dev/reconcile-now` value (0: none).
    pub requested: u64,
}

/// Everything a pass over one plugin's objects needs.
pub struct Context {
    /// The plugin that owns the kind.
    pub actuator: Arc<dyn Actuator>,
    /// What the plugin manages (validated at load).
    pub description: Description,
    /// Finalizer and field-manager names of the plugin.
    pub names: Names,
    /// The kind's resource, `<plural>.<group>` (the journal's key).
    pub resource: String,
    /// Host-wide settings (resync default, poll bounds…).
    pub settings: Settings,
    /// Per-object retry backoff for failed passes.
    pub backoff: backoff::Backoff,
    /// The seam below the flows.
    pub ops: Arc<dyn ObjectOps>,
    /// The kind's exclusive claims.
    pub claims: Arc<Claims>,
    /// Object uid → its last pass. Bounded: an object's entry goes when it does.
    passes: Mutex<HashMap<String, PassRecord>>,
    /// Object uid → connection details reported but not yet written to its Secret (the
    /// write failed): retried at its next pass, never dropped while the object lives.
    pending_details: Mutex<HashMap<String, BTreeMap<String, Vec<u8>>>>,
}

impl Context {
    /// A context over `ops`.
    pub fn new(
        actuator: Arc<dyn Actuator>,
        description: Description,
        settings: Settings,
        ops: Arc<dyn ObjectOps>,
        claims: Arc<Claims>,
    ) -> Self {
        Self {
            actuator,
            names: Names::new(&description.name),
            resource: crate::crd::crd_name(&description),
            description,
            settings,
            backoff: backoff::Backoff::new(Duration::from_secs(1), Duration::from_mins(1)),
            ops,
            claims,
            passes: Mutex::default(),
            pending_details: Mutex::default(),
        }
    }

    /// The plugin's name.
    pub fn plugin(&self) -> &str {
        &self.description.name
    }

    /// The version of the plugin serving now: 0 at start, bumped by each hot swap
    /// ([`Settings::reconcile_all`]).
    pub fn plugin_version(&self) -> u64 {
        self.settings
            .reconcile_all
            .as_ref()
            .map_or(0, |version| *version.borrow())
    }

    fn passes(&self) -> std::sync::MutexGuard<'_, HashMap<String, PassRecord>> {
        // Poisoned only by a panic while inserting a Copy value: the map is whole.
        self.passes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The last pass of `obj` this host ran, if any.
    pub fn pass_record(&self, obj: &DynamicObject) -> Option<PassRecord> {
        self.passes().get(&obj.stored_uid()).copied()
    }

    /// Records a pass of `obj`.
    pub fn record_pass(&self, obj: &DynamicObject, record: PassRecord) {
        self.passes().insert(obj.stored_uid(), record);
    }

    /// Forgets `obj` (released, or gone): its pass record, backoff and claims.
    pub fn forget(&self, obj: &DynamicObject) {
        self.settings
            .journal
            .forget(&self.resource, &obj.stored_namespace(), &obj.name_any());
        let uid = obj.stored_uid();
        self.passes().remove(&uid);
        self.pending_details().remove(&uid);
        self.backoff.reset(&uid);
        self.claims.forget(obj);
    }

    /// Objects remembered (for tests of bounded bookkeeping).
    pub fn remembered(&self) -> usize {
        self.passes().len() + self.pending_details().len()
    }

    /// The connection details of `obj` still to be written, with `new` ones over them.
    pub fn take_pending_details(
        &self,
        obj: &DynamicObject,
        new: BTreeMap<String, Vec<u8>>,
    ) -> BTreeMap<String, Vec<u8>> {
        let mut details = self
            .pending_details()
            .remove(&obj.stored_uid())
            .unwrap_or_default();
        details.extend(new);
        details
    }

    /// Keeps `details` of `obj` for its next pass (their write failed).
    pub fn keep_pending_details(&self, obj: &DynamicObject, details: BTreeMap<String, Vec<u8>>) {
        self.pending_details().insert(obj.stored_uid(), details);
    }

    fn pending_details(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, BTreeMap<String, Vec<u8>>>> {
        // A poisoned lock only means a panic elsewhere between two whole inserts.
        self.pending_details
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Looks up the API resource of every declared dependency kind (same group and version as
/// the plugin, or `Secret`).
pub async fn discover_kinds(
    client: &Client,
    d: &Description,
) -> Result<HashMap<String, ApiResource>, Error> {
    let mut kinds = HashMap::new();
    if d.needs_credentials {
        kinds.insert(dependents::SECRET.to_owned(), deps::secret_resource());
    }
    for decl in &d.dependencies {
        if kinds.contains_key(&decl.kind) {
            continue;
        }
        let resource = if decl.kind == dependents::SECRET {
            deps::secret_resource()
        } else {
            let gvk = GroupVersionKind::gvk(&d.group, &d.version, &decl.kind);
            let (resource, _) =
                kube::discovery::pinned_kind(client, &gvk)
                    .await
                    .map_err(|source| Error::Discovery {
                        plugin: d.name.clone(),
                        kind: decl.kind.clone(),
                        group: d.group.clone(),
                        version: d.version.clone(),
                        source,
                    })?;
            resource
        };
        kinds.insert(decl.kind.clone(), resource);
    }
    Ok(kinds)
}

/// Runs the controller of one plugin until `shutdown` is cancelled; reconciles in flight
/// finish first.
pub async fn run(
    client: Client,
    actuator: Arc<dyn Actuator>,
    description: Description,
    settings: Settings,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    // The controller's own token: its guards stop with it, not with the whole host.
    let stop = shutdown.child_token();
    // Each worker runs one pass at a time: counted against the room the actuator's passes
    // share with other kinds' (a component's instance pool) until the controller returns.
    let _passes = actuator.expect_passes(settings.concurrency);
    crate::ops::metrics::global().kind_served(
        &description.name,
        &description.kind,
        &[
            "TransientError",
            "InvalidConfiguration",
            "UnrecoverableError",
            "error",
        ],
    );
    let resource = crate::crd::api_resource(&description);
    let names = Names::new(&description.name);
    let kinds = discover_kinds(&client, &description).await?;
    let namespace = settings.namespace.as_deref();

    // Every kind from the host's shared caches: the plugin's own (this replica's share of it
    // when sharded), and its dependencies' (all of them: a dependency may live on any shard).
    let own = match &settings.shard_selector {
        Some(selector) => settings.caches.view(
            &client,
            &resource,
            namespace,
            &cache::View::Selected(selector.clone()),
        ),
        None => settings.caches.kind(&client, &resource, namespace),
    };
    // Claims and guards must see every object of the kind, wherever it is served.
    let everyone = match &settings.shard_selector {
        Some(_) => settings
            .caches
            .view(&client, &resource, namespace, &cache::View::Skeleton),
        None => Arc::clone(&own),
    };
    let dependencies: HashMap<String, Arc<KindCache>> = kinds
        .iter()
        .map(|(kind, r)| (kind.clone(), settings.caches.kind(&client, r, namespace)))
        .collect();
    let sharded = settings.shard_selector.is_some();
    for cache in dependencies.values().chain(sharded.then_some(&everyone)) {
        // Passes read dependencies from these caches: start once they hold every object.
        // Stopped meanwhile (a shard's buckets changed): a drain waits for no listing.
        tokio::select! {
            ready = cache.wait_ready(Duration::from_secs(30)) => if !ready {
                tracing::warn!(plugin = %description.name, kind = %cache.resource.kind, "dependency cache not ready after 30 s; starting anyway");
            },
            () = stop.cancelled() => return Ok(()),
        }
    }

    // The kind's triggers and claims index, fed by its cache's changes.
    let claims = Arc::new(Claims::default());
    let triggers = Arc::new(Triggers::new(&names.finalizer));
    // Sharded: the claims index is fed from the skeleton of every object of the kind.
    let (c, stop_claims) = (Arc::clone(&claims), stop.clone());
    let every_claim = sharded.then(|| everyone.subscribe(Reads::SpecAndId));
    let claims_feed = async move {
        let Some(every_claim) = every_claim else {
            return;
        };
        let feed = every_claim.for_each(|change| {
            match change {
                Change::Applied(obj) => c.observe(&obj),
                Change::Deleted(obj) => c.forget(&obj),
            }
            futures::future::ready(())
        });
        tokio::select! {
            () = feed => {}
            () = stop_claims.cancelled() => {}
        }
    };
    // The kind's work queue, fed by its own changes, its dependencies' and hot swaps.
    let queue = Arc::new(WorkQueue::default());
    // What the host wrote to the objects it serves: the cache they are read from keeps it.
    let writes = Arc::clone(&own.writes);
    let index = Arc::new(DependentsIndex::new(description.clone()));
    let mut feeds: Vec<futures::future::BoxFuture<'static, ()>> = Vec::new();
    {
        let (q, c, t, w) = (
            Arc::clone(&queue),
            Arc::clone(&claims),
            Arc::clone(&triggers),
            Arc::clone(&writes),
        );
        let index = Arc::clone(&index);
        // Every subscriber below reads an object's metadata, spec and status.id, nothing else:
        // the rest of its status is never decoded for them.
        let own_changes = own.subscribe(Reads::SpecAndId);
        feeds.push(Box::pin(own_changes.for_each(move |change| {
            // Indexed before its pass is triggered (the index's first rule).
            let waited = match &change {
                Change::Applied(obj) => {
                    index.observe(obj);
                    // A pass held back for this write of the host's runs now.
                    w.cached(obj).then(|| Key::of(&**obj))
                }
                Change::Deleted(obj) => {
                    index.forget(obj);
                    w.forget(obj);
                    q.forget(&Key::of(&**obj));
                    None
                }
            };
            if let Some(key) = own_change(change, &c, &t, sharded)
                .map(|obj| Key::of(&*obj))
                .or(waited)
            {
                q.trigger(key);
            }
            futures::future::ready(())
        })));
    }
    if let Some(mut changes) = settings.reconcile_all.clone() {
        let (q, store) = (Arc::clone(&queue), own.store.clone());
        feeds.push(Box::pin(async move {
            while changes.changed().await.is_ok() {
                for obj in store.state() {
                    q.trigger(Key::of(&*obj));
                }
            }
        }));
    }
    for (kind, cache) in &dependencies {
        let (index, kind, q) = (Arc::clone(&index), kind.clone(), Arc::clone(&queue));
        // uid → a hash of its input key: a zone's key holds its observed state, kept for
        // every zone by every plugin that depends on zones.
        let seen: Mutex<HashMap<String, u64>> = Mutex::default();
        let declared = kind.clone();
        let changed = cache.subscribe(Reads::Whole).filter_map(move |change| {
            let mut seen = seen
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            futures::future::ready(match change {
                Change::Applied(dep) => {
                    let key = deps::input_fingerprint(&declared, &dep);
                    let uid = dep.stored_uid();
                    (seen.insert(uid, key) != Some(key)).then_some(dep)
                }
                Change::Deleted(dep) => {
                    seen.remove(&dep.stored_uid());
                    Some(dep)
                }
            })
        });
        feeds.push(Box::pin(changed.for_each(move |dep| {
            for key in index.of(&kind, &dep) {
                q.trigger(key);
            }
            futures::future::ready(())
        })));
    }
    settings.health.controller_started();
    let (health, synced, stop_sync) =
        (Arc::clone(&settings.health), Arc::clone(&own), stop.clone());
    tokio::spawn(async move {
        tokio::select! {
            _ = synced.wait_ready(Duration::MAX) => tracing::debug!("controller cache synced"),
            // Stopped before it synced (a shard's buckets changed): it counts as done.
            () = stop_sync.cancelled() => {}
        }
        health.controller_synced();
    });

    let (events, event_lanes) = events::EventPublisher::new(
        format!("orchard.dev/{}", description.name),
        settings.instance.clone(),
        settings.events,
        description.name.clone(),
    );
    let ops = KubeOps::new(
        client.clone(),
        resource.clone(),
        names.clone(),
        events,
        description.name.clone(),
        dependencies.clone(),
        Arc::clone(&writes),
    );
    let ctx = Arc::new(Context::new(
        actuator,
        description.clone(),
        settings.clone(),
        Arc::new(ops),
        claims,
    ));
    let plugin = ctx.plugin().to_owned();

    let mut guards = Vec::new();
    let mut guarded: Vec<&String> = description
        .dependencies
        .iter()
        .filter(|d| d.guard_deletion)
        .map(|d| &d.kind)
        .collect();
    let secret = dependents::SECRET.to_owned();
    if description.needs_credentials {
        guarded.push(&secret);
    }
    guarded.sort();
    guarded.dedup();
    for kind in guarded {
        let Some(cache) = dependencies.get(kind) else {
            continue;
        };
        let guard = guard::Guard {
            client: client.clone(),
            description: description.clone(),
            names: names.clone(),
            kind: kind.clone(),
            resource: cache.resource.clone(),
            dependents: DependentsIndex::new(description.clone()),
            workers: settings.concurrency,
        };
        guards.push(guard::run(
            guard,
            Arc::clone(cache),
            Arc::clone(&everyone),
            stop.clone(),
        ));
    }
    let feeding = {
        let stop = stop.clone();
        async move {
            tokio::select! {
                _ = futures::future::join_all(feeds) => {}
                () = stop.cancelled() => {}
            }
        }
    };
    let lookup = |key: &Key| own.get(&key.namespace, &key.name);
    let workers = (0..settings.concurrency.max(1))
        .map(|_| work(&queue, lookup, &writes, &ctx, &stop))
        .collect::<Vec<_>>();
    let main = async {
        tokio::join!(
            futures::future::join_all(workers),
            queue.run_timers(&stop),
            feeding
        );
    }
    .instrument(tracing::info_span!("controller", plugin = %plugin));
    // The Event lanes stop after the last pass, so that its Events are posted too.
    let posting = CancellationToken::new();
    let reconciling = async {
        tokio::join!(main, futures::future::join_all(guards), claims_feed);
        posting.cancel();
    };
    tokio::join!(
        reconciling,
        event_lanes.run(client.clone(), posting.clone())
    );
    stop.cancel();
    Ok(())
}

/// What a change of the kind's own view does: it feeds the claims index (unless `sharded`:
/// then the skeleton of every object does, and an object leaving the view moved to another
/// replica and still holds its id) and the triggers; the object to reconcile, if any.
fn own_change(
    change: Change,
    claims: &Claims,
    triggers: &Triggers,
    sharded: bool,
) -> Option<Arc<DynamicObject>> {
    match change {
        Change::Applied(obj) => {
            if !sharded {
                claims.observe(&obj);
            }
            triggers.admit(&obj).then_some(obj)
        }
        Change::Deleted(obj) => {
            if !sharded {
                claims.forget(&obj);
            }
            triggers.forget(&obj);
            None
        }
    }
}

/// One worker of a kind: passes the objects the queue gives it, one at a time, until the
/// controller stops (a pass in flight ends first). `lookup` reads an object from the kind's
/// cache; an object cached before the host's own last write to it waits for the cache
/// ([`machinery::writes`]).
async fn work(
    queue: &WorkQueue,
    lookup: impl Fn(&Key) -> Option<Arc<DynamicObject>>,
    writes: &OwnWrites,
    ctx: &Arc<Context>,
    stop: &CancellationToken,
) {
    let metrics = crate::ops::metrics::global();
    while let Some(key) = queue.next(stop).await {
        metrics.set_queue_depth(ctx.plugin(), queue.len());
        // Passed as the cache holds it now; gone from it, there is nothing to pass.
        let freshness = lookup(&key).map(|obj| writes.check(&obj));
        // Looked up again once let through: had the watch brought the host's write in between
        // the first lookup and the check (on another thread), the check found no entry, and
        // the first copy may predate the write; the cache holds it by then.
        let next = match (freshness, lookup(&key)) {
            (None, _) | (_, None) => None,
            // The watch event of that write wakes it; the limit is the worst case.
            (Some(Freshness::Behind), Some(_)) => {
                metrics.pass_held_back(ctx.plugin());
                Some(tokio::time::Instant::now() + machinery::writes::CATCH_UP)
            }
            (Some(freshness), Some(obj)) => {
                if freshness == Freshness::WaitedOut {
                    metrics.pass_on_stale_cache(ctx.plugin());
                }
                match flow::reconcile(Arc::clone(&obj), Arc::clone(ctx)).await {
                    Ok(flow::Next::Wait) => None,
                    Ok(flow::Next::After(delay)) => Some(tokio::time::Instant::now() + delay),
                    Err(e) => Some(tokio::time::Instant::now() + error_policy(&obj, &e, ctx)),
                }
            }
        };
        queue.done(key, next);
        metrics.set_queue_depth(ctx.plugin(), queue.len());
    }
}

/// Kubernetes API errors: retry with the per-object backoff.
fn error_policy(obj: &DynamicObject, error: &Error, ctx: &Context) -> Duration {
    let key = obj.stored_uid();
    let delay = ctx.backoff.next(&key);
    tracing::warn!(plugin = ctx.plugin(), object = %obj.name_any(), error = %error, retry_in_ms = delay.as_millis(), "reconcile failed");
    delay
}

/// Whether the object's metadata lists this finalizer.
pub fn has_finalizer(obj: &impl Resource, finalizer: &str) -> bool {
    obj.meta()
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|x| x == finalizer))
}

#[cfg(test)]
mod tests;
