//! One cache per kind for the whole host: a single watch of each kind, whose objects (pruned
//! of what the host never reads) every plugin's controller, dependency watch, guard and
//! lookup shares. A zone is therefore held once in memory, however many plugins use zones.
//!
//! With sharding, a kind has up to three views (each its own watch): the replica's share of it
//! (a label selector of its buckets) for its controller, all of it for dependency lookups, and
//! a skeleton of all of it (no status but the id, no labels or annotations) for the claims
//! index and deletion guards, which must see every object of the kind wherever it is served.
//!
//! A subscriber gets every object of the cache first (so a controller that starts late still
//! sees them all), then every change; one that falls behind gets the whole cache again
//! rather than losing events. Each object comes decoded as deep as the subscriber reads it
//! ([`Reads`]): a change is decoded once per depth for all subscribers, and not at all deeper.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::api::{Api, ApiResource, DynamicObject, ObjectMeta, TypeMeta};
use kube::core::DynamicResourceScope;
use kube::runtime::reflector::{ObjectRef, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde_json::Value;
use tokio::sync::{broadcast, watch};

/// An object as the cache holds it: its metadata decoded, everything else (spec, status, a
/// Secret's data) as compact JSON text, decoded when the object is read ([`Self::object`]).
///
/// Why: a decoded JSON tree costs 5–10× its text (every map a B-tree node of 11 slots):
/// measured on a zone with two conditions, a spec of 191 bytes of JSON is 2,198 bytes decoded
/// and a status of 533 bytes 3,083 — ≈ 45 MiB at 10,000 zones. A pass reads the object once;
/// lookups of who uses a dependency go through indexes ([`super::dependents`]), not the cache.
///
/// It is decoded from the watch directly ([`Deserialize`](serde::Deserialize) below), never
/// through a `DynamicObject`: `managedFields` are skipped unread and the other fields are
/// transcoded to text without a tree in between.
#[derive(Debug, Clone)]
pub struct CachedObject {
    types: Option<TypeMeta>,
    /// The object's metadata (pruned: [`prune`]).
    pub metadata: ObjectMeta,
    /// Every top-level field but `apiVersion`, `kind` and `metadata`, as JSON text; `None`
    /// when there is none.
    data: Option<Box<str>>,
}

/// `fields` as compact JSON text; `None` when empty.
fn encode(fields: serde_json::Map<String, Value>) -> Option<Box<str>> {
    (!fields.is_empty()).then(|| Value::Object(fields).to_string().into_boxed_str())
}

/// [`ObjectMeta`] as the cache decodes it: every field but `managedFields`, which serde then
/// skips without building it (two thirds of a typical object, never read by the host: the
/// cache dropped them after decoding them before).
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct CachedMeta {
    annotations: Option<std::collections::BTreeMap<String, String>>,
    creation_timestamp: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    finalizers: Option<Vec<String>>,
    generate_name: Option<String>,
    generation: Option<i64>,
    labels: Option<std::collections::BTreeMap<String, String>>,
    name: Option<String>,
    namespace: Option<String>,
    owner_references: Option<Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>>,
    resource_version: Option<String>,
    self_link: Option<String>,
    uid: Option<String>,
}

impl From<CachedMeta> for ObjectMeta {
    fn from(m: CachedMeta) -> Self {
        ObjectMeta {
            annotations: m.annotations,
            creation_timestamp: m.creation_timestamp,
            deletion_grace_period_seconds: m.deletion_grace_period_seconds,
            deletion_timestamp: m.deletion_timestamp,
            finalizers: m.finalizers,
            generate_name: m.generate_name,
            generation: m.generation,
            labels: m.labels,
            managed_fields: None,
            name: m.name,
            namespace: m.namespace,
            owner_references: m.owner_references,
            resource_version: m.resource_version,
            self_link: m.self_link,
            uid: m.uid,
        }
    }
}

/// Writes the value a deserializer holds as compact JSON text into a buffer, without
/// building it (`serde_transcode`): it works on any deserializer, the watch's JSON as well as
/// the buffered items of a list (kube's `ObjectList` flattens, so serde buffers its items).
struct AsText<'a>(&'a mut Vec<u8>);

impl<'de> serde::de::DeserializeSeed<'de> for AsText<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        let mut out = serde_json::Serializer::new(self.0);
        serde_transcode::transcode(d, &mut out).map_err(serde::de::Error::custom)
    }
}

/// Decodes a [`CachedObject`] from a Kubernetes object's fields, in one pass.
struct CachedVisitor;

impl<'de> serde::de::Visitor<'de> for CachedVisitor {
    type Value = CachedObject;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a Kubernetes object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<CachedObject, A::Error> {
        let (mut api_version, mut kind, mut metadata) = (None, None, None);
        // `{"field":<text>,...}`: every field but the three above, in the object's order.
        let mut data = Vec::new();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match key.as_ref() {
                "apiVersion" => api_version = Some(map.next_value::<String>()?),
                "kind" => kind = Some(map.next_value::<String>()?),
                "metadata" => metadata = Some(map.next_value::<CachedMeta>()?),
                field => {
                    data.push(if data.is_empty() { b'{' } else { b',' });
                    serde_json::to_writer(&mut data, field).map_err(serde::de::Error::custom)?;
                    data.push(b':');
                    map.next_value_seed(AsText(&mut data))?;
                }
            }
        }
        let data = if data.is_empty() {
            None
        } else {
            data.push(b'}');
            // serde_json writes UTF-8 only; a failure here would be a bug of the transcoder.
            Some(
                String::from_utf8(data)
                    .map_err(serde::de::Error::custom)?
                    .into_boxed_str(),
            )
        };
        Ok(CachedObject {
            types: api_version
                .zip(kind)
                .map(|(api_version, kind)| TypeMeta { api_version, kind }),
            metadata: metadata.map(ObjectMeta::from).unwrap_or_default(),
            data,
        })
    }
}

impl<'de> serde::Deserialize<'de> for CachedObject {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(CachedVisitor)
    }
}

impl CachedObject {
    /// The object, decoded whole.
    pub fn object(&self) -> DynamicObject {
        DynamicObject {
            types: self.types.clone(),
            metadata: self.metadata.clone(),
            data: Value::Object(self.fields()),
        }
    }

    /// The object as a subscriber reading [`Reads::SpecAndId`] gets it: its metadata, its
    /// spec and its `status.id`; the rest of the status (and any other field) is skipped
    /// unread, not decoded into a tree and dropped.
    pub fn spec_and_id(&self) -> DynamicObject {
        DynamicObject {
            types: self.types.clone(),
            metadata: self.metadata.clone(),
            // A status the cut cannot read (not an object) is read whole, as everywhere else.
            data: Value::Object(self.cut().unwrap_or_else(|| self.fields())),
        }
    }

    /// The object as `reads` reads it.
    pub fn read(&self, reads: Reads) -> DynamicObject {
        match reads {
            Reads::Whole => self.object(),
            Reads::SpecAndId => self.spec_and_id(),
        }
    }

    /// The spec and the `status.id` (not when null) of the fields, the rest skipped unread;
    /// `None` when the fields are not what the cut can read (a status that is not an object).
    fn cut(&self) -> Option<serde_json::Map<String, Value>> {
        let Cut { spec, status } = self
            .data
            .as_deref()
            .map_or(Ok(Cut::default()), serde_json::from_str::<Cut>)
            .ok()?;
        let mut fields = serde_json::Map::new();
        if let Some(spec) = spec {
            fields.insert("spec".to_owned(), spec);
        }
        if let Some(id) = status.and_then(|s| s.id).filter(|id| !id.is_null()) {
            fields.insert("status".to_owned(), serde_json::json!({ "id": id }));
        }
        Some(fields)
    }

    /// The fields kept as text, decoded.
    fn fields(&self) -> serde_json::Map<String, Value> {
        // The text was encoded from a map by `encode`: it decodes (an empty map otherwise,
        // never a panic).
        self.data
            .as_deref()
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or_default()
    }
}

/// The kind's description is shared, not copied: the reflector's store keys every object by
/// an `ObjectRef` holding its own `DynamicType`, and an `ApiResource` is five strings (≈ 200
/// bytes with their allocations) where an `Arc` is one pointer.
impl Resource for CachedObject {
    type DynamicType = Arc<ApiResource>;
    type Scope = DynamicResourceScope;

    fn group(dt: &Arc<ApiResource>) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &Arc<ApiResource>) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn kind(dt: &Arc<ApiResource>) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn api_version(dt: &Arc<ApiResource>) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &Arc<ApiResource>) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// A change of one cached object.
#[derive(Debug, Clone)]
pub enum Change {
    /// Created or changed (or replayed to a new subscriber).
    Applied(Arc<DynamicObject>),
    /// Gone.
    Deleted(Arc<DynamicObject>),
}

/// What a subscriber reads of each object ([`KindCache::subscribe`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reads {
    /// The whole object.
    Whole,
    /// Its metadata, its spec and its `status.id` ([`CachedObject::spec_and_id`]): what the
    /// work queue's triggers, the claims index and the dependents indexes read. A subscriber
    /// that reads this MUST read nothing else of an object: the rest is not there.
    SpecAndId,
}

/// One changed object, as the watch gave it, decoded on first need at most once per
/// [`Reads`]: every subscriber that reads it so gets the same `Arc`, and a depth no
/// subscriber reads is never decoded (the rest of a zone's status is most of its text).
#[derive(Debug)]
struct Changed {
    obj: CachedObject,
    whole: OnceLock<Arc<DynamicObject>>,
    spec_and_id: OnceLock<Arc<DynamicObject>>,
}

impl Changed {
    fn new(obj: CachedObject) -> Arc<Self> {
        Arc::new(Self {
            obj,
            whole: OnceLock::new(),
            spec_and_id: OnceLock::new(),
        })
    }

    fn read(&self, reads: Reads) -> Arc<DynamicObject> {
        let decoded = match reads {
            Reads::Whole => &self.whole,
            Reads::SpecAndId => &self.spec_and_id,
        };
        Arc::clone(decoded.get_or_init(|| Arc::new(self.obj.read(reads))))
    }
}

/// What the watch tells subscribers.
#[derive(Debug, Clone)]
enum Message {
    /// One object was created or changed.
    Applied(Arc<Changed>),
    /// One object is gone.
    Deleted(Arc<Changed>),
    /// A listing completed: the store now holds every object (subscribers replay it). The
    /// objects of a listing are never sent one by one — they reach the store only at its end,
    /// so a subscriber that came in the middle could lose them.
    Listed,
}

/// The message a watch event makes, if any: the object is decoded by its subscribers, once
/// per depth they read.
fn message(event: watcher::Event<CachedObject>) -> Option<Message> {
    match event {
        watcher::Event::Apply(obj) => Some(Message::Applied(Changed::new(obj))),
        watcher::Event::Delete(obj) => Some(Message::Deleted(Changed::new(obj))),
        watcher::Event::InitDone => Some(Message::Listed),
        watcher::Event::Init | watcher::Event::InitApply(_) => None,
    }
}

/// What the pump does with an event once the reflector applied it to the store: tells the
/// subscribers, and marks the cache ready at the end of its first listing.
fn forward(
    event: watcher::Event<CachedObject>,
    changes: &broadcast::Sender<Message>,
    listed: &watch::Sender<bool>,
) {
    if matches!(event, watcher::Event::InitDone) {
        listed.send_replace(true);
    }
    if let Some(message) = message(event) {
        // No subscriber yet is fine: they replay the store when they come.
        let _ = changes.send(message);
    }
}

/// Changes kept for subscribers that are momentarily behind. Each slot keeps its object (and
/// what subscribers decoded of it) until every subscriber has read it or it is overwritten, so
/// the ring is kept small: a subscriber that falls further behind replays the store instead.
const BUFFER: usize = 512;

/// Which objects of a kind a cache holds, and how much of each.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum View {
    /// Every object, pruned of what the host never reads.
    All,
    /// The objects matching a label selector (a shard's buckets).
    Selected(String),
    /// Every object, cut to what claims and guards read ([`skeleton`]).
    Skeleton,
}

/// The cache of one kind (in one namespace, or all).
pub struct KindCache {
    /// The kind cached.
    pub resource: ApiResource,
    /// The same, as the store's objects share it.
    dyntype: Arc<ApiResource>,
    /// The reflector's store: every object of the kind seen so far.
    pub store: Store<CachedObject>,
    changes: broadcast::Sender<Message>,
    /// Set once the first listing is in the store. (The store's own `wait_until_ready` wakes
    /// only the last of several waiters — a oneshot underneath — so a second waiter, e.g. a
    /// second plugin's controller, would sleep until its timeout.)
    ready: watch::Receiver<bool>,
    /// The watch that fills the cache: it ends with the cache.
    pump: tokio::task::AbortHandle,
    /// The host's own last write to each object of the cache, not yet in it
    /// ([`super::writes`]): kept with the cache, so that a controller restarted over it (a hot
    /// swap) still knows what its predecessor wrote.
    pub writes: Arc<super::writes::OwnWrites>,
    /// The object [`Self::get`] decoded last, with the version of it the store held.
    last_read: Mutex<Option<LastRead>>,
}

/// A decoded object and the stored version it was decoded from: the store replaces an
/// object's `Arc` at every change, so the same `Arc` is the same version.
#[derive(Debug)]
struct LastRead {
    stored: Arc<CachedObject>,
    decoded: Arc<DynamicObject>,
}

impl Drop for KindCache {
    fn drop(&mut self) {
        self.pump.abort();
    }
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

/// Drops what the host never reads from a cached object: the last-applied annotation
/// (managedFields never reach the cache: the decoder skips them, `CachedMeta`).
pub fn prune(obj: &mut CachedObject) {
    if let Some(annotations) = obj.metadata.annotations.as_mut() {
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
}

/// What claims and deletion guards read of an object, and nothing else: its identity,
/// finalizers, owners, deletion time, spec and `status.id`.
pub fn skeleton(obj: &mut CachedObject) {
    prune(obj);
    obj.metadata.labels = None;
    obj.metadata.annotations = None;
    // Every event of every object of the kind is cut here, in every replica of a ring: the
    // rest of the status (conditions, the observed resource) is skipped unread, not decoded
    // into a tree and dropped.
    obj.data = encode(obj.cut().unwrap_or_else(|| {
        // Fields the cut cannot read (a status that is not an object): the spec, as it is
        // read everywhere else.
        obj.fields()
            .into_iter()
            .filter(|(k, _)| k == "spec")
            .collect()
    }));
}

/// What [`skeleton`] and [`CachedObject::spec_and_id`] read of an object's fields: the spec,
/// and the status's id.
#[derive(Default, serde::Deserialize)]
struct Cut {
    spec: Option<Value>,
    status: Option<CutStatus>,
}

#[derive(serde::Deserialize)]
struct CutStatus {
    id: Option<Value>,
}

impl KindCache {
    /// Starts the watch of `resource` (in `namespace`, or all) that fills the cache.
    fn start(
        client: &Client,
        resource: &ApiResource,
        namespace: Option<&str>,
        view: &View,
    ) -> Arc<Self> {
        let dyntype = Arc::new(resource.clone());
        let api: Api<CachedObject> = match namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &dyntype),
            None => Api::all_with(client.clone(), &dyntype),
        };
        let writer = Writer::new(Arc::clone(&dyntype));
        let (changes, _) = broadcast::channel(BUFFER);
        let kind = resource.kind.clone();
        // Listed in pages (500 objects): a list "from any version" (resourceVersion=0) is
        // answered from the apiserver's watch cache in one piece, whatever the page size —
        // measured, all 10,000 zones in one response, whose decoding (managedFields and all)
        // was most of a restarted host's peak memory.
        let mut config = watcher::Config::default();
        if let View::Selected(selector) = view {
            config = config.labels(selector);
        }
        let cut: fn(&mut CachedObject) = match view {
            View::Skeleton => skeleton,
            View::All | View::Selected(_) => prune,
        };
        let store = writer.as_reader();
        let sender = changes.clone();
        let (listed, ready) = watch::channel(false);
        let pump = watcher(api, config)
            .backoff(WatchBackoff::new())
            .modify(cut)
            .reflect(writer)
            .for_each(move |event| {
                match event {
                    Ok(event) => forward(event, &sender, &listed),
                    Err(e) => tracing::warn!(kind = %kind, error = %e, "watch failed; retrying"),
                }
                futures::future::ready(())
            });
        Arc::new(Self {
            resource: resource.clone(),
            dyntype,
            store,
            changes,
            ready,
            pump: tokio::spawn(pump).abort_handle(),
            writes: Arc::default(),
            last_read: Mutex::default(),
        })
    }

    /// The cached object `namespace/name`, decoded.
    ///
    /// The last object decoded is kept with the version it came from, and read again without
    /// decoding while that version is the cache's: what many objects share — a credentials
    /// Secret, which a pass reads twice (its fingerprint, then its data) — is decoded once per
    /// change, not twice per pass of each of them.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<DynamicObject>> {
        let stored = self
            .store
            .get(&ObjectRef::new_with(name, Arc::clone(&self.dyntype)).within(namespace))?;
        let mut last = self
            .last_read
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(read) = last.as_ref().filter(|r| Arc::ptr_eq(&r.stored, &stored)) {
            return Some(Arc::clone(&read.decoded));
        }
        let decoded = Arc::new(stored.object());
        *last = Some(LastRead {
            stored,
            decoded: Arc::clone(&decoded),
        });
        Some(decoded)
    }

    /// Every object of the cache (once it holds them), then every change, each object as
    /// `reads` reads it.
    pub fn subscribe(&self, reads: Reads) -> impl Stream<Item = Change> + Send + 'static {
        subscription(self.changes.subscribe(), self.store.clone(), reads)
    }

    /// Waits (at most `limit`) until the cache holds every object of its first listing.
    /// Any number of tasks may wait at once; each is woken.
    pub async fn wait_ready(&self, limit: Duration) -> bool {
        let mut ready = self.ready.clone();
        tokio::time::timeout(limit, ready.wait_for(|listed| *listed))
            .await
            .is_ok_and(|r| r.is_ok())
    }
}

/// The changes of `rx` over `store`: the store's objects first (none while its first listing
/// runs: the listing's end replays them), then every change, each object as `reads` reads it.
/// Subscribing before reading the store is what makes this gap-free: whatever the store
/// misses, `rx` brings.
fn subscription(
    rx: broadcast::Receiver<Message>,
    store: Store<CachedObject>,
    reads: Reads,
) -> impl Stream<Item = Change> + Send + 'static {
    // The store's own entries, each decoded only when it is sent: a replay of 10,000 objects
    // decoded at once would hold them all twice.
    let replay = |store: &Store<CachedObject>| store.state().into_iter();
    let first = replay(&store);
    futures::stream::unfold(
        (rx, store, first),
        move |(mut rx, store, mut pending)| async move {
            loop {
                if let Some(obj) = pending.next() {
                    let change = Change::Applied(Arc::new(obj.read(reads)));
                    return Some((change, (rx, store, pending)));
                }
                match rx.recv().await {
                    Ok(Message::Applied(changed)) => {
                        let change = Change::Applied(changed.read(reads));
                        return Some((change, (rx, store, pending)));
                    }
                    Ok(Message::Deleted(changed)) => {
                        let change = Change::Deleted(changed.read(reads));
                        return Some((change, (rx, store, pending)));
                    }
                    Ok(Message::Listed) => pending = replay(&store),
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        tracing::debug!(missed, "cache subscriber fell behind; replaying");
                        pending = replay(&store);
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        },
    )
}

/// Which cache: namespace scope (`None`: all namespaces), API version, kind, view.
type CacheKey = (Option<String>, String, String, View);

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
    /// The cache of every object of `resource` in `namespace` (all when `None`), started if
    /// it is not yet.
    pub fn kind(
        &self,
        client: &Client,
        resource: &ApiResource,
        namespace: Option<&str>,
    ) -> Arc<KindCache> {
        self.view(client, resource, namespace, &View::All)
    }

    /// The cache of `view` of `resource` in `namespace`, started if it is not yet.
    pub fn view(
        &self,
        client: &Client,
        resource: &ApiResource,
        namespace: Option<&str>,
        view: &View,
    ) -> Arc<KindCache> {
        let key = (
            namespace.map(str::to_owned),
            resource.api_version.clone(),
            resource.kind.clone(),
            view.clone(),
        );
        let mut kinds = self
            .kinds
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(
            kinds
                .entry(key)
                .or_insert_with(|| KindCache::start(client, resource, namespace, view)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone(name: &str) -> CachedObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "pdns.orchard.dev/v1alpha1", "kind": "DnsZone",
            "metadata": {"name": name, "namespace": "ns", "uid": name},
        }))
        .unwrap()
    }

    fn resource() -> ApiResource {
        ApiResource {
            group: "pdns.orchard.dev".into(),
            version: "v1alpha1".into(),
            api_version: "pdns.orchard.dev/v1alpha1".into(),
            kind: "DnsZone".into(),
            plural: "dnszones".into(),
        }
    }

    /// Feeds `event` through the store and the channel, as the pump does.
    fn pump(
        writer: &mut Writer<CachedObject>,
        tx: &broadcast::Sender<Message>,
        event: &watcher::Event<CachedObject>,
    ) {
        let (listed, _) = watch::channel(false);
        writer.apply_watcher_event(event);
        forward(event.clone(), tx, &listed);
    }

    /// A cache over `writer`'s store, its changes sent on `changes`, its readiness `ready`
    /// (no watch: the test feeds the store).
    fn cache_over(
        writer: &Writer<CachedObject>,
        changes: &broadcast::Sender<Message>,
        ready: watch::Receiver<bool>,
    ) -> Arc<KindCache> {
        Arc::new(KindCache {
            resource: resource(),
            dyntype: Arc::new(resource()),
            store: writer.as_reader(),
            changes: changes.clone(),
            ready,
            pump: tokio::spawn(async {}).abort_handle(),
            writes: Arc::default(),
            last_read: Mutex::default(),
        })
    }

    #[tokio::test]
    async fn an_object_read_again_unchanged_is_not_decoded_again_and_a_new_version_is() {
        let mut writer = Writer::new(Arc::new(resource()));
        let (tx, _) = broadcast::channel(16);
        let cache = cache_over(&writer, &tx, watch::channel(true).1);
        pump(&mut writer, &tx, &watcher::Event::Apply(served_zone("a")));
        pump(&mut writer, &tx, &watcher::Event::Apply(served_zone("b")));
        let first = cache.get("ns", "a").unwrap();
        assert_eq!(*first, served_zone("a").object());
        assert!(Arc::ptr_eq(&first, &cache.get("ns", "a").unwrap()));
        // Another object read in between: each reads as itself.
        assert_eq!(*cache.get("ns", "b").unwrap(), served_zone("b").object());
        assert_eq!(*cache.get("ns", "a").unwrap(), *first);
        // A new version of it is decoded anew.
        let mut changed = served_zone("a");
        changed.metadata.resource_version = Some("2".into());
        changed.data = Some(r#"{"spec":{"resource":{"name":"b.test."}}}"#.into());
        pump(&mut writer, &tx, &watcher::Event::Apply(changed.clone()));
        let newer = cache.get("ns", "a").unwrap();
        assert!(!Arc::ptr_eq(&newer, &first));
        assert_eq!(*newer, changed.object());
        assert_eq!(newer.data["spec"]["resource"]["name"], "b.test.");
        assert!(cache.get("ns", "missing").is_none());
    }

    #[tokio::test]
    async fn every_task_waiting_for_the_first_listing_is_woken_when_it_ends() {
        let mut writer = Writer::new(Arc::new(resource()));
        let (changes, _) = broadcast::channel(16);
        let (listed, ready) = watch::channel(false);
        let cache = cache_over(&writer, &changes, ready);
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let cache = Arc::clone(&cache);
                tokio::spawn(async move { cache.wait_ready(Duration::from_secs(30)).await })
            })
            .collect();
        // Every waiter is parked before the listing ends.
        tokio::task::yield_now().await;
        assert!(!*cache.ready.borrow());
        for event in [watcher::Event::Init, watcher::Event::InitDone] {
            writer.apply_watcher_event(&event);
            forward(event, &changes, &listed);
        }
        for waiter in waiters {
            let woken = tokio::time::timeout(Duration::from_secs(5), waiter).await;
            assert!(woken.expect("a waiter was not woken").unwrap());
        }
        assert!(*cache.ready.borrow());
    }

    fn names(changes: &[Change]) -> Vec<String> {
        let mut names: Vec<String> = changes
            .iter()
            .map(|c| match c {
                Change::Applied(o) | Change::Deleted(o) => o.name_any(),
            })
            .collect();
        names.sort();
        names
    }

    use kube::ResourceExt;

    #[tokio::test]
    async fn a_subscriber_that_comes_in_the_middle_of_the_first_listing_gets_every_object() {
        let mut writer = Writer::new(Arc::new(resource()));
        let store = writer.as_reader();
        let (tx, _) = broadcast::channel(16);
        pump(&mut writer, &tx, &watcher::Event::Init);
        pump(&mut writer, &tx, &watcher::Event::InitApply(zone("a")));
        // The subscriber arrives now: the store is still empty, "a" went by unsent.
        let mut changes = Box::pin(subscription(tx.subscribe(), store, Reads::Whole));
        pump(&mut writer, &tx, &watcher::Event::InitApply(zone("b")));
        pump(&mut writer, &tx, &watcher::Event::InitDone);
        pump(&mut writer, &tx, &watcher::Event::Apply(zone("c")));
        let mut got = Vec::new();
        for _ in 0..3 {
            let next = tokio::time::timeout(Duration::from_secs(5), changes.next());
            got.push(next.await.expect("an object was lost").unwrap());
        }
        assert_eq!(names(&got), ["a", "b", "c"]);
    }

    /// A zone as the watch gives it once the host served it: labels, a spec, a status with
    /// its id, conditions and the observed resource.
    fn served_zone(name: &str) -> CachedObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "pdns.orchard.dev/v1alpha1", "kind": "DnsZone",
            "metadata": {"name": name, "namespace": "ns", "uid": name, "labels": {"team": "a"},
                         "finalizers": ["orchard.dev/pdns-zone"]},
            "spec": {"resource": {"name": "a.test."}, "managementPolicy": "managed"},
            "status": {"id": "a.test.", "conditions": [{"type": "Available", "status": "True"}],
                       "resource": {"serial": 1}},
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn a_change_is_decoded_once_per_depth_its_subscribers_read_and_never_deeper() {
        let mut writer = Writer::new(Arc::new(resource()));
        let (tx, _) = broadcast::channel(16);
        let mut subscribers = [
            Reads::Whole,
            Reads::Whole,
            Reads::SpecAndId,
            Reads::SpecAndId,
        ]
        .map(|reads| (reads, tx.subscribe()));
        pump(&mut writer, &tx, &watcher::Event::Init);
        pump(&mut writer, &tx, &watcher::Event::InitDone);
        pump(&mut writer, &tx, &watcher::Event::Apply(served_zone("a")));
        let mut got = Vec::new();
        for (reads, rx) in &mut subscribers {
            assert!(matches!(rx.recv().await.unwrap(), Message::Listed));
            let Message::Applied(changed) = rx.recv().await.unwrap() else {
                panic!("not an applied change");
            };
            got.push(changed.read(*reads));
        }
        assert!(Arc::ptr_eq(&got[0], &got[1]) && Arc::ptr_eq(&got[2], &got[3]));
        let (whole, cut) = (&got[0], &got[2]);
        assert_eq!(**whole, served_zone("a").object());
        assert_eq!(cut.metadata, whole.metadata);
        assert_eq!(
            cut.data,
            serde_json::json!({
                "spec": {"resource": {"name": "a.test."}, "managementPolicy": "managed"},
                "status": {"id": "a.test."},
            })
        );

        // Read by no subscriber, the whole object is never decoded.
        let (tx, mut rx) = broadcast::channel(16);
        pump(&mut writer, &tx, &watcher::Event::Delete(served_zone("a")));
        let Message::Deleted(changed) = rx.recv().await.unwrap() else {
            panic!("not a deletion");
        };
        assert_eq!(
            changed.read(Reads::SpecAndId).data["status"]["id"],
            "a.test."
        );
        assert!(changed.whole.get().is_none());
    }

    #[test]
    fn an_object_whose_status_the_cut_cannot_read_is_read_whole_by_spec_and_id() {
        let odd: CachedObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "X", "metadata": {"name": "x"},
            "spec": {"a": 1}, "status": "pending",
        }))
        .unwrap();
        assert_eq!(odd.spec_and_id(), odd.object());
    }

    #[test]
    fn a_cached_object_keeps_all_but_its_metadata_as_text_and_decodes_to_the_object_it_came_from() {
        let json = serde_json::json!({
            "apiVersion": "v1", "kind": "X",
            "metadata": {"name": "x", "namespace": "ns"},
            "spec": {"resource": {"name": "a.test."}},
            "status": {"id": "a.test.", "conditions": [{"type": "Available", "status": "True"}]},
            "data": {"k": "dg=="},
        });
        let whole: DynamicObject = serde_json::from_value(json.clone()).unwrap();
        let cached: CachedObject = serde_json::from_value(json).unwrap();
        let text = cached.data.as_deref().unwrap();
        assert!(text.contains("a.test.") && text.contains("conditions") && !text.contains(' '));
        assert_eq!(cached.object(), whole);
        let bare: CachedObject = serde_json::from_value(
            serde_json::json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "y"}}),
        )
        .unwrap();
        assert!(bare.data.is_none());
        assert_eq!(bare.object().data, serde_json::json!({}));
    }

    #[tokio::test]
    async fn a_subscriber_that_comes_after_the_listing_replays_the_store_then_gets_changes() {
        // Replayed and changed alike, each object comes as deep as the subscriber reads.
        for reads in [Reads::Whole, Reads::SpecAndId] {
            let mut writer = Writer::new(Arc::new(resource()));
            let store = writer.as_reader();
            let (tx, _) = broadcast::channel(16);
            pump(&mut writer, &tx, &watcher::Event::Init);
            pump(
                &mut writer,
                &tx,
                &watcher::Event::InitApply(served_zone("a")),
            );
            pump(&mut writer, &tx, &watcher::Event::InitDone);
            let mut changes = Box::pin(subscription(tx.subscribe(), store, reads));
            pump(&mut writer, &tx, &watcher::Event::Delete(served_zone("a")));
            let expected = served_zone("a").read(reads);
            let first = changes.next().await.unwrap();
            assert!(
                matches!(&first, Change::Applied(o) if **o == expected),
                "{reads:?}"
            );
            let second = changes.next().await.unwrap();
            assert!(
                matches!(&second, Change::Deleted(o) if **o == expected),
                "{reads:?}"
            );
        }
        assert_eq!(
            served_zone("a").read(Reads::SpecAndId).data["status"],
            serde_json::json!({"id": "a.test."})
        );
    }

    #[test]
    fn a_skeleton_keeps_what_claims_and_guards_read_and_drops_the_rest() {
        let mut obj: CachedObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "pdns.orchard.dev/v1alpha1",
            "kind": "DnsZone",
            "metadata": {
                "name": "z", "namespace": "ns", "uid": "u1",
                "creationTimestamp": "2026-12-01T00:00:00Z",
                "finalizers": ["orchard.dev/pdns-zone"],
                "ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "o", "uid": "u0"}],
                "labels": {"orchard.dev/shard-bucket": "3"},
                "annotations": {"a": "b"},
                "managedFields": [{"manager": "kubectl"}],
            },
            "spec": {"resource": {"name": "a.test."}, "managementPolicy": "managed"},
            "status": {"id": "a.test.", "conditions": [{"type": "Available"}], "observed": {"big": 1}},
        }))
        .unwrap();
        skeleton(&mut obj);
        assert_eq!(obj.metadata.uid.as_deref(), Some("u1"));
        assert!(obj.metadata.creation_timestamp.is_some());
        assert_eq!(obj.metadata.finalizers.as_ref().map(Vec::len), Some(1));
        assert_eq!(
            obj.metadata.owner_references.as_ref().map(Vec::len),
            Some(1)
        );
        assert!(obj.metadata.labels.is_none() && obj.metadata.annotations.is_none());
        assert!(obj.metadata.managed_fields.is_none());
        let obj = obj.object();
        assert_eq!(obj.data["spec"]["managementPolicy"], "managed");
        assert_eq!(obj.data["status"], serde_json::json!({"id": "a.test."}));
    }

    #[test]
    fn pruning_drops_the_last_applied_annotation_and_keeps_the_others() {
        let mut obj: CachedObject = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "z", "uid": "u1",
                "annotations": {
                    "kubectl.kubernetes.io/last-applied-configuration": "{\"big\":1}",
                    "orchard.dev/create-pending": "2026-12-01T00:00:00Z",
                },
                "managedFields": [{"manager": "kubectl"}],
            },
        }))
        .unwrap();
        prune(&mut obj);
        let annotations = obj.metadata.annotations.as_ref().unwrap();
        assert_eq!(
            annotations.keys().collect::<Vec<_>>(),
            ["orchard.dev/create-pending"]
        );
        assert!(obj.metadata.managed_fields.is_none());
    }

    /// A zone as the apiserver sends it, managedFields and all.
    const ZONE: &str = r#"{"apiVersion":"pdns.orchard.dev/v1alpha1","kind":"DnsZone",
        "metadata":{"name":"z","namespace":"ns","uid":"u1","resourceVersion":"42","generation":2,
          "creationTimestamp":"2026-12-01T00:00:00Z","finalizers":["orchard.dev/pdns-zone"],
          "labels":{"a":"1"},"annotations":{"b":"2"},
          "ownerReferences":[{"apiVersion":"v1","kind":"X","name":"o","uid":"u0"}],
          "managedFields":[{"manager":"orchard.dev/pdns-zone/status","operation":"Apply",
            "apiVersion":"pdns.orchard.dev/v1alpha1","time":"2026-12-01T00:00:01Z",
            "fieldsType":"FieldsV1","fieldsV1":{"f:status":{"f:id":{}}},"subresource":"status"}]},
        "spec":{"resource":{"name":"a.test.","kind":"Native"},"n":1.5,"s":"\"q\" \u00e9"},
        "status":{"id":"a.test.","conditions":[{"type":"Available","status":"True"}]}}"#;

    #[test]
    fn an_object_decodes_into_the_cache_as_a_dynamic_object_would_without_its_managed_fields() {
        let direct: CachedObject = serde_json::from_str(ZONE).unwrap();
        let mut dynamic: DynamicObject = serde_json::from_str(ZONE).unwrap();
        dynamic.metadata.managed_fields = None;
        assert_eq!(direct.object(), dynamic);
        assert!(direct.metadata.managed_fields.is_none());
        assert_eq!(direct.object().data["spec"]["s"], "\"q\" é");
    }

    #[test]
    fn a_listed_object_and_a_watched_one_decode_alike() {
        let list = format!(
            r#"{{"apiVersion":"pdns.orchard.dev/v1alpha1","kind":"DnsZoneList",
                "metadata":{{"resourceVersion":"43"}},"items":[{ZONE}]}}"#
        );
        // kube's list flattens its type fields: its items reach the decoder buffered.
        let listed: kube::core::ObjectList<CachedObject> = serde_json::from_str(&list).unwrap();
        let event = format!(r#"{{"type":"MODIFIED","object":{ZONE}}}"#);
        let watched: kube::core::WatchEvent<CachedObject> = serde_json::from_str(&event).unwrap();
        let kube::core::WatchEvent::Modified(watched) = watched else {
            panic!("a MODIFIED event");
        };
        assert_eq!(listed.items.len(), 1);
        assert_eq!(listed.items[0].object(), watched.object());
        assert_eq!(watched.metadata.resource_version.as_deref(), Some("42"));
    }

    #[test]
    fn an_object_without_type_fields_or_data_decodes_with_none() {
        let bare: CachedObject =
            serde_json::from_str(r#"{"metadata":{"name":"x","resourceVersion":"7"}}"#).unwrap();
        assert!(bare.types.is_none() && bare.data.is_none());
        assert_eq!(bare.metadata.name.as_deref(), Some("x"));
        let not_an_object = serde_json::from_str::<CachedObject>("[1]").unwrap_err();
        assert!(
            not_an_object.to_string().contains("a Kubernetes object"),
            "{not_an_object}"
        );
    }

    #[test]
    fn a_skeleton_of_an_object_whose_status_is_not_an_object_keeps_its_spec() {
        let mut obj: CachedObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "X", "metadata": {"name": "x"},
            "spec": {"resource": {"name": "a"}}, "status": "broken",
        }))
        .unwrap();
        skeleton(&mut obj);
        let obj = obj.object();
        assert_eq!(
            obj.data,
            serde_json::json!({"spec": {"resource": {"name": "a"}}})
        );
    }

    #[test]
    fn a_skeleton_of_an_object_without_an_id_has_no_status() {
        let mut obj: CachedObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "X", "metadata": {"name": "x"},
            "spec": {}, "status": {"conditions": []},
        }))
        .unwrap();
        skeleton(&mut obj);
        let obj = obj.object();
        assert!(obj.data.get("status").is_none(), "{}", obj.data);
    }
}
