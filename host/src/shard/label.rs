//! The labeller: writes `orchard.dev/shard-bucket` on the objects of a kind that have none (or
//! one that is not a bucket), once this replica serves their bucket — so exactly one replica
//! writes each label, and an object a user mislabels is put back where it belongs instead of
//! being served by nobody.
//!
//! It watches only the objects without a valid label (the apiserver filters with `notin`);
//! a labelled object leaves that watch.
//!
//! **One write, not two.** The label goes on in a server-side apply of the plugin's
//! finalizer manager that also puts the finalizer on — what the first pass of the replica that
//! serves the object would write next — so that pass has no metadata to write (a ring's
//! create costs the apiserver the writes of one host's). The apply carries the object's
//! `resourceVersion` as a precondition and every other field that manager owns (the
//! create-pending marker): it is made from the object as this watch last saw it, and a newer
//! object refuses it (`409`; the watch brings the newer one, and it is written again). The
//! finalizer is left off where the flow would not put it yet: an object being deleted (no
//! finalizer may be added), a paused one, one whose envelope the flow refuses (its deletion
//! must not wait for a fix).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, ApiResource, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::{Semaphore, watch};
use tokio_util::sync::CancellationToken;

use super::Assignment;
use super::ring::{BUCKET_LABEL, BUCKETS, bucket_of};
use crate::reconcile::annotations::CREATE_PENDING;
use crate::reconcile::machinery::cache::{CachedObject, WatchBackoff};
use crate::reconcile::{Names, has_finalizer};

/// Label patches in flight per kind.
const IN_FLIGHT: usize = 16;

/// How often objects still unlabelled are looked at again (a failed patch, a missed event).
const RESCAN: Duration = Duration::from_secs(2);

/// The selector of objects whose bucket label is missing or not a bucket.
pub fn unlabelled_selector() -> String {
    let all: Vec<String> = (0..BUCKETS).map(|b| b.to_string()).collect();
    format!("{BUCKET_LABEL} notin ({})", all.join(","))
}

/// An object without a valid bucket label, as the watch last saw it: what its labelling
/// writes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Unlabelled {
    bucket: u16,
    uid: String,
    resource_version: String,
    /// The apply puts the plugin's finalizer on (or keeps it).
    finalizer: bool,
    /// The create-pending marker, which the finalizer manager owns: kept as it is.
    create_pending: Option<String>,
}

impl Unlabelled {
    fn of(obj: &CachedObject, bucket: u16, names: &Names) -> Self {
        // The flow's first pass puts the finalizer on every object it does not refuse or
        // hold; one already there stays.
        let finalizer = has_finalizer(obj, &names.finalizer)
            || (obj.metadata.deletion_timestamp.is_none()
                && !crate::reconcile::flow::is_paused(obj)
                && crate::reconcile::flow::envelope::decode(&obj.object().data["spec"]).is_ok());
        Self {
            bucket,
            uid: obj.uid().unwrap_or_default(),
            resource_version: obj.resource_version().unwrap_or_default(),
            finalizer,
            create_pending: obj.annotations().get(CREATE_PENDING).cloned(),
        }
    }

    /// The server-side apply of the finalizer manager that labels the object `name`.
    fn apply(&self, resource: &ApiResource, names: &Names, name: &str) -> Value {
        let mut metadata = json!({
            "name": name,
            "uid": self.uid,
            "resourceVersion": self.resource_version,
            "labels": { BUCKET_LABEL: self.bucket.to_string() },
        });
        if self.finalizer {
            metadata["finalizers"] = json!([names.finalizer]);
        }
        if let Some(since) = &self.create_pending {
            metadata["annotations"] = json!({ CREATE_PENDING: since });
        }
        json!({ "apiVersion": resource.api_version, "kind": resource.kind, "metadata": metadata })
    }
}

/// An unlabelled object and since when this labeller has seen it so.
struct Waiting {
    object: Unlabelled,
    since: Instant,
}

/// Labels the objects of `resource` (in `namespace`, or all) whose bucket this replica
/// serves, until `stop`, with plugin `plugin`'s finalizer; publishes how long the oldest of
/// them has waited (`orchard_shard_unlabelled_oldest_seconds`).
pub async fn run(
    client: Client,
    resource: ApiResource,
    plugin: String,
    namespace: Option<String>,
    mut assignment: watch::Receiver<Assignment>,
    stop: CancellationToken,
) {
    // Whole objects — whether the flow would put the finalizer on reads the spec — decoded
    // as the cache decodes them (`managedFields` skipped unread).
    let shared = Arc::new(resource.clone());
    let api: Api<CachedObject> = match &namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &shared),
        None => Api::all_with(client.clone(), &shared),
    };
    let events = watcher(
        api,
        watcher::Config::default().labels(&unlabelled_selector()),
    )
    .backoff(WatchBackoff::new());
    let mut events = std::pin::pin!(events);
    let names = Names::new(&plugin);
    let _gauge = Gauge {
        plugin: plugin.clone(),
        kind: resource.kind.clone(),
    };
    // (namespace, name) → every object seen without a valid label; during a re-list, those
    // of the list before (how long they have waited carries over).
    let mut unlabelled: HashMap<(String, String), Waiting> = HashMap::new();
    let mut before_relist: HashMap<(String, String), Waiting> = HashMap::new();
    let mut serving: BTreeSet<u16> = assignment.borrow_and_update().buckets.clone();
    let permits = Arc::new(Semaphore::new(IN_FLIGHT));
    // Objects whose patch is queued or in flight: never two patches of one object at once.
    let labelling: Arc<Mutex<HashSet<(String, String)>>> = Arc::default();
    let group = resource.group.clone();
    let params = PatchParams::apply(&names.finalizer_manager).force();
    let label = |key: &(String, String), object: &Unlabelled| {
        if !lock(&labelling).insert(key.clone()) {
            return;
        }
        // The answer (the whole object, `managedFields` and all) is decoded as the cache
        // decodes it: nothing of it is read.
        let api: Api<CachedObject> = Api::namespaced_with(client.clone(), &key.0, &shared);
        let body = object.apply(&resource, &names, &key.1);
        let (key, permits, labelling) = (key.clone(), Arc::clone(&permits), Arc::clone(&labelling));
        let (kind, params) = (resource.kind.clone(), params.clone());
        tokio::spawn(async move {
            let name = key.1.clone();
            let _done = Done(labelling, key);
            let Ok(_permit) = permits.acquire_owned().await else {
                return;
            };
            match api.patch(&name, &params, &Patch::Apply(&body)).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                // Changed since the watch saw it: the watch brings the change, and the
                // object is written again from it.
                Err(kube::Error::Api(e)) if e.code == 409 => {
                    tracing::debug!(%kind, object = %name, "the object changed before its shard bucket label was written; writing it again from the change");
                }
                Err(e) => {
                    tracing::warn!(%kind, object = %name, error = %e, "could not label the object with its shard bucket; retrying");
                }
            }
        });
    };
    let mut rescan = tokio::time::interval(RESCAN);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            event = events.next() => match event {
                None => return,
                Some(Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o))) => {
                    let key = (o.namespace().unwrap_or_default(), o.name_any());
                    let bucket = bucket_of(&group, &resource.kind, &key.0, &key.1);
                    let object = Unlabelled::of(&o, bucket, &names);
                    if serving.contains(&bucket) {
                        label(&key, &object);
                    }
                    let since = unlabelled
                        .get(&key)
                        .or_else(|| before_relist.get(&key))
                        .map_or_else(Instant::now, |w| w.since);
                    unlabelled.insert(key, Waiting { object, since });
                }
                Some(Ok(watcher::Event::Delete(o))) => {
                    unlabelled.remove(&(o.namespace().unwrap_or_default(), o.name_any()));
                }
                Some(Ok(watcher::Event::Init)) => before_relist = std::mem::take(&mut unlabelled),
                Some(Ok(watcher::Event::InitDone)) => before_relist.clear(),
                Some(Err(e)) => tracing::warn!(kind = %resource.kind, error = %e, "watch of unlabelled objects failed; retrying"),
            },
            changed = assignment.changed() => {
                if changed.is_err() {
                    return;
                }
                serving = assignment.borrow_and_update().buckets.clone();
                for (key, w) in &unlabelled {
                    if serving.contains(&w.object.bucket) {
                        label(key, &w.object);
                    }
                }
            }
            _ = rescan.tick() => {
                // Labelled objects leave the watch; what is still here needs another try.
                let mut oldest = Duration::ZERO;
                for (key, w) in &unlabelled {
                    if serving.contains(&w.object.bucket) {
                        label(key, &w.object);
                        oldest = oldest.max(w.since.elapsed());
                    }
                }
                crate::ops::metrics::global().set_unlabelled_oldest(
                    &plugin,
                    &resource.kind,
                    i64::try_from(oldest.as_secs()).unwrap_or(i64::MAX),
                );
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned set only means a panic between two whole inserts.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Sets the kind's `orchard_shard_unlabelled_oldest_seconds` back to 0 when the labeller ends,
/// however it ends: a labeller that stopped waits for nothing.
struct Gauge {
    plugin: String,
    kind: String,
}

impl Drop for Gauge {
    fn drop(&mut self) {
        crate::ops::metrics::global().set_unlabelled_oldest(&self.plugin, &self.kind, 0);
    }
}

/// Takes an object off the in-flight set when its patch task ends, however it ends.
struct Done(Arc<Mutex<HashSet<(String, String)>>>, (String, String));

impl Drop for Done {
    fn drop(&mut self) {
        lock(&self.0).remove(&self.1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unlabelled_selector_matches_every_value_that_is_not_a_bucket() {
        let s = unlabelled_selector();
        assert!(
            s.starts_with("orchard.dev/shard-bucket notin (0,1,2,"),
            "{s}"
        );
        assert!(s.ends_with(",254,255)"), "{s}");
        assert_eq!(s.matches(',').count(), usize::from(BUCKETS) - 1);
    }

    fn zone(mut metadata: Value, spec: &Value) -> CachedObject {
        metadata["name"] = json!("z");
        metadata["namespace"] = json!("ns");
        metadata["uid"] = json!("u1");
        metadata["resourceVersion"] = json!("17");
        serde_json::from_value(json!({
            "apiVersion": "pdns.orchard.dev/v1alpha1", "kind": "DnsZone",
            "metadata": metadata, "spec": spec,
        }))
        .unwrap()
    }

    fn resource() -> ApiResource {
        let gvk = kube::api::GroupVersionKind::gvk("pdns.orchard.dev", "v1alpha1", "DnsZone");
        ApiResource::from_gvk_with_plural(&gvk, "dnszones")
    }

    fn spec() -> Value {
        json!({"resource": {"name": "example.org"}})
    }

    #[test]
    fn a_new_object_is_labelled_and_finalized_in_one_apply_made_from_the_version_seen() {
        let names = Names::new("pdns-zone");
        let o = Unlabelled::of(&zone(json!({}), &spec()), 9, &names);
        assert_eq!(
            o.apply(&resource(), &names, "z"),
            json!({
                "apiVersion": "pdns.orchard.dev/v1alpha1", "kind": "DnsZone",
                "metadata": {
                    "name": "z", "uid": "u1", "resourceVersion": "17",
                    "labels": {"orchard.dev/shard-bucket": "9"},
                    "finalizers": ["orchard.dev/pdns-zone"],
                },
            })
        );
    }

    #[test]
    fn the_apply_keeps_the_finalizer_and_the_create_pending_marker_an_object_has() {
        let names = Names::new("pdns-zone");
        // Being deleted, with a create in flight: both stay (the manager owns them).
        let o = Unlabelled::of(
            &zone(
                json!({
                    "deletionTimestamp": "2026-12-07T18:00:00Z",
                    "finalizers": ["other.example/keep", "orchard.dev/pdns-zone"],
                    "annotations": {"orchard.dev/create-pending": "2026-12-07T17:59:00Z"},
                }),
                &spec(),
            ),
            9,
            &names,
        );
        let apply = o.apply(&resource(), &names, "z");
        assert_eq!(
            apply["metadata"]["finalizers"],
            json!(["orchard.dev/pdns-zone"])
        );
        assert_eq!(
            apply["metadata"]["annotations"],
            json!({"orchard.dev/create-pending": "2026-12-07T17:59:00Z"})
        );
    }

    #[test]
    fn no_finalizer_goes_on_an_object_being_deleted_paused_or_with_an_envelope_the_flow_refuses() {
        let names = Names::new("pdns-zone");
        let cases = [
            (
                "being deleted",
                zone(
                    json!({"deletionTimestamp": "2026-12-07T18:00:00Z", "finalizers": ["other.example/keep"]}),
                    &spec(),
                ),
            ),
            (
                "paused",
                zone(
                    json!({"annotations": {"orchard.dev/paused": "true"}}),
                    &spec(),
                ),
            ),
            (
                "refused envelope",
                zone(
                    json!({}),
                    &json!({"resource": {}, "managementPolicy": "sometimes"}),
                ),
            ),
        ];
        for (what, obj) in cases {
            let apply = Unlabelled::of(&obj, 3, &names).apply(&resource(), &names, "z");
            assert!(
                apply["metadata"].get("finalizers").is_none(),
                "{what}: {apply}"
            );
            assert_eq!(
                apply["metadata"]["labels"],
                json!({"orchard.dev/shard-bucket": "3"}),
                "{what}"
            );
        }
        // Unpaused ("false") is not paused.
        let obj = zone(
            json!({"annotations": {"orchard.dev/paused": "false"}}),
            &spec(),
        );
        assert!(Unlabelled::of(&obj, 3, &names).finalizer);
    }
}
