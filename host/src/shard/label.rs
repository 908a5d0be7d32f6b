//! The labeller: writes `orchard.dev/shard-bucket` on the objects of a kind that have none (or
//! one that is not a bucket), once this replica serves their bucket — so exactly one replica
//! writes each label, and an object a user mislabels is put back where it belongs instead of
//! being served by nobody.
//!
//! It watches only the objects without a valid label (the apiserver filters with `notin`),
//! metadata only; a labelled object leaves that watch.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::sync::{Semaphore, watch};
use tokio_util::sync::CancellationToken;

use super::Assignment;
use super::ring::{BUCKET_LABEL, BUCKETS, bucket_of};
use crate::reconcile::machinery::cache::WatchBackoff;

/// Label patches in flight per kind.
const IN_FLIGHT: usize = 16;

/// How often objects still unlabelled are looked at again (a failed patch, a missed event).
const RESCAN: Duration = Duration::from_secs(2);

/// The selector of objects whose bucket label is missing or not a bucket.
pub fn unlabelled_selector() -> String {
    let all: Vec<String> = (0..BUCKETS).map(|b| b.to_string()).collect();
    format!("{BUCKET_LABEL} notin ({})", all.join(","))
}

/// Labels the objects of `resource` (in `namespace`, or all) whose bucket this replica
/// serves, until `stop`.
pub async fn run(
    client: Client,
    resource: ApiResource,
    namespace: Option<String>,
    mut assignment: watch::Receiver<Assignment>,
    stop: CancellationToken,
) {
    // Metadata only: the labeller reads names, nothing else.
    let api: Api<PartialObjectMeta<DynamicObject>> = match &namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let events = watcher(
        api,
        watcher::Config::default().labels(&unlabelled_selector()),
    )
    .backoff(WatchBackoff::new());
    let mut events = std::pin::pin!(events);
    // (namespace, name) → bucket of every object seen without a valid label.
    let mut unlabelled: HashMap<(String, String), u16> = HashMap::new();
    let mut serving: BTreeSet<u16> = assignment.borrow_and_update().buckets.clone();
    let permits = Arc::new(Semaphore::new(IN_FLIGHT));
    // Objects whose patch is queued or in flight: never two patches of one object at once.
    let labelling: Arc<Mutex<HashSet<(String, String)>>> = Arc::default();
    let group = resource.group.clone();
    let label = |key: &(String, String), bucket: u16| {
        if !lock(&labelling).insert(key.clone()) {
            return;
        }
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &key.0, &resource);
        let (key, permits, labelling) = (key.clone(), Arc::clone(&permits), Arc::clone(&labelling));
        let kind = resource.kind.clone();
        tokio::spawn(async move {
            let name = key.1.clone();
            let _done = Done(labelling, key);
            let Ok(_permit) = permits.acquire_owned().await else {
                return;
            };
            let patch = json!({ "metadata": { "labels": { BUCKET_LABEL: bucket.to_string() } } });
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {}
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
                Some(Ok(watcher::Event::Apply(m) | watcher::Event::InitApply(m))) => {
                    let key = (m.namespace().unwrap_or_default(), m.name_any());
                    let bucket = bucket_of(&group, &resource.kind, &key.0, &key.1);
                    if serving.contains(&bucket) {
                        label(&key, bucket);
                    }
                    unlabelled.insert(key, bucket);
                }
                Some(Ok(watcher::Event::Delete(m))) => {
                    unlabelled.remove(&(m.namespace().unwrap_or_default(), m.name_any()));
                }
                Some(Ok(watcher::Event::Init)) => unlabelled.clear(),
                Some(Ok(watcher::Event::InitDone)) => {}
                Some(Err(e)) => tracing::warn!(kind = %resource.kind, error = %e, "watch of unlabelled objects failed; retrying"),
            },
            changed = assignment.changed() => {
                if changed.is_err() {
                    return;
                }
                serving = assignment.borrow_and_update().buckets.clone();
                for (key, bucket) in &unlabelled {
                    if serving.contains(bucket) {
                        label(key, *bucket);
                    }
                }
            }
            _ = rescan.tick() => {
                // Labelled objects leave the watch; what is still here needs another try.
                for (key, bucket) in &unlabelled {
                    if serving.contains(bucket) {
                        label(key, *bucket);
                    }
                }
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned set only means a panic between two whole inserts.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
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
}
