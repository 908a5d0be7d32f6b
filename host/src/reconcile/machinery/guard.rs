//! The deletion-guard controller of one guarded dependency kind: it removes this plugin's
//! guard finalizer from a dependency being deleted once no dependent uses it (dependents the
//! dependency itself owns do not count, which avoids a deadlock).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::cache::{Change, KindCache, Reads};
use super::dependents::{DependentsIndex, references};
use super::queue::{Key, WorkQueue};
use crate::actuator::Description;
use crate::reconcile::{Error, Names, StoredMeta, has_finalizer};

/// What the guard of one dependency kind needs.
pub struct Guard {
    /// Client for the dependency kind's objects.
    pub client: Client,
    /// What the dependent plugin manages.
    pub description: Description,
    /// The dependent plugin's finalizer and field-manager names.
    pub names: Names,
    /// The dependency kind.
    pub kind: String,
    /// API resource of the dependency kind.
    pub resource: ApiResource,
    /// Which of the plugin's objects (all of them, wherever served) use which dependency; fed
    /// by [`run`].
    pub dependents: DependentsIndex,
    /// Releases in flight (the controller's concurrency): every dependency in use is guarded,
    /// so a kind's guard may have as many objects to release as the dependency kind has.
    pub workers: u16,
}

/// Runs the guard until `shutdown`: triggered by the dependency kind's changes and by those
/// of the plugin's own objects (a dependent that goes may free its dependency).
pub async fn run(
    guard: Guard,
    dependencies: Arc<KindCache>,
    own: Arc<KindCache>,
    shutdown: CancellationToken,
) {
    let queue = WorkQueue::default();
    let (d, k) = (guard.description.clone(), guard.kind.clone());
    // Subscribed first, so the dependents indexed below miss no later change.
    let own_changes = own.subscribe(Reads::SpecAndId);
    // Nothing is released before every dependent is indexed: a dependency released while the
    // dependents' cache was still listing could go while in use.
    tokio::select! {
        _ = own.wait_ready(Duration::MAX) => {}
        () = shutdown.cancelled() => return,
    }
    for obj in own.store.state() {
        guard.dependents.observe(&obj.spec_and_id());
    }
    let feed_deps = dependencies.subscribe(Reads::SpecAndId).for_each(|change| {
        match change {
            Change::Applied(dep) => queue.trigger(Key::of(&*dep)),
            Change::Deleted(dep) => queue.forget(&Key::of(&*dep)),
        }
        futures::future::ready(())
    });
    let feed_dependents = own_changes.for_each(|change| {
        match &change {
            Change::Applied(obj) => guard.dependents.observe(obj),
            Change::Deleted(obj) => guard.dependents.forget(obj),
        }
        let (Change::Applied(obj) | Change::Deleted(obj)) = change;
        let namespace = obj.stored_namespace();
        for (_, name) in references(&d, &obj)
            .into_iter()
            .filter(|(kind, _)| *kind == k)
        {
            queue.trigger(Key {
                namespace: namespace.clone(),
                name,
            });
        }
        futures::future::ready(())
    });
    let work = |_| async {
        while let Some(key) = queue.next(&shutdown).await {
            let next = match dependencies.get(&key.namespace, &key.name) {
                None => None,
                Some(dep) => match release(&dep, &guard).await {
                    Ok(next) => next,
                    Err(e) => {
                        tracing::warn!(plugin = %guard.description.name, kind = %guard.kind, dependency = %key, error = %e, "releasing a deletion guard failed");
                        Some(Duration::from_secs(5))
                    }
                },
            };
            queue.done(key, next.map(|delay| Instant::now() + delay));
        }
    };
    let workers = futures::future::join_all((0..guard.workers.max(1)).map(work));
    let feeding = async {
        tokio::select! {
            _ = futures::future::join(feed_deps, feed_dependents) => {}
            () = shutdown.cancelled() => {}
        }
    };
    tokio::join!(workers, queue.run_timers(&shutdown), feeding);
}

/// What the guard does with a dependency.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Not being deleted, or not guarded by this plugin: nothing.
    Untouched,
    /// Being deleted, but these many dependents still use it.
    InUse(usize),
    /// Being deleted and unused: the guard finalizer goes.
    Release,
}

/// The verdict on `dep` (of `kind`) for a plugin whose guard finalizer is `finalizer`, by the
/// dependents in `index`.
pub(crate) fn verdict(
    dep: &DynamicObject,
    finalizer: &str,
    kind: &str,
    index: &DependentsIndex,
) -> Verdict {
    if dep.metadata.deletion_timestamp.is_none() || !has_finalizer(dep, finalizer) {
        return Verdict::Untouched;
    }
    match index.of(kind, dep).len() {
        0 => Verdict::Release,
        users => Verdict::InUse(users),
    }
}

/// Removes our guard finalizer from a dependency being deleted once nothing uses it.
/// What comes next: another look after a delay, or nothing until a change.
async fn release(dep: &DynamicObject, g: &Guard) -> Result<Option<Duration>, Error> {
    match verdict(dep, &g.names.guard_finalizer, &g.kind, &g.dependents) {
        Verdict::Untouched => return Ok(None),
        Verdict::InUse(users) => {
            // The cache may not have seen a dependent's deletion yet: look again soon rather
            // than wait for an event that may already have passed.
            tracing::debug!(plugin = %g.description.name, dependency = %dep.name_any(), users, "dependency still in use");
            return Ok(Some(Duration::from_secs(1)));
        }
        Verdict::Release => {}
    }
    tracing::info!(plugin = %g.description.name, kind = %g.kind, dependency = %dep.name_any(), "releasing deletion guard");
    apply_guard(
        &g.client,
        &g.resource,
        &g.names.guard_manager,
        dep,
        json!([]),
    )
    .await?;
    Ok(None)
}

/// Server-side applies `finalizers` to `dep` as the guard manager (the uid a precondition).
pub async fn apply_guard(
    client: &Client,
    resource: &ApiResource,
    manager: &str,
    dep: &DynamicObject,
    finalizers: Value,
) -> Result<(), Error> {
    let name = dep.name_any();
    let api =
        Api::<DynamicObject>::namespaced_with(client.clone(), &dep.stored_namespace(), resource);
    let body = json!({
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": {"name": name, "uid": dep.uid(), "finalizers": finalizers},
    });
    let params = PatchParams::apply(manager).force();
    api.patch(&name, &params, &Patch::Apply(&body))
        .await
        .map(drop)
        .map_err(|source| Error::Kube {
            action: "apply finalizer to",
            kind: resource.kind.clone(),
            name,
            source,
        })
}
