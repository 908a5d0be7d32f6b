//! The deletion-guard controller of one guarded dependency kind: it removes this plugin's
//! guard finalizer from a dependency being deleted once no dependent uses it (dependents the
//! dependency itself owns do not count, which avoids a deadlock).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::cache::{Change, KindCache};
use super::deps::{apply_guard, dependents, references};
use super::{Error, Names, has_finalizer};
use crate::actuator::Description;
use crate::reconcile::StoredMeta;

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
    /// The plugin's own objects (the dependents), as cached.
    pub dependents: Store<DynamicObject>,
}

/// Runs the guard until `shutdown`: triggered by the dependency kind's changes and by those
/// of the plugin's own objects (a dependent that goes may free its dependency).
pub async fn run(
    guard: Guard,
    dependencies: Arc<KindCache>,
    own: Arc<KindCache>,
    shutdown: CancellationToken,
) {
    let (d, k, r) = (
        guard.description.clone(),
        guard.kind.clone(),
        guard.resource.clone(),
    );
    let deps = dependencies.subscribe().filter_map(|change| {
        futures::future::ready(match change {
            Change::Applied(dep) => Some(dep),
            Change::Deleted(_) => None,
        })
    });
    let dependents = own.subscribe().map(|change| match change {
        Change::Applied(obj) | Change::Deleted(obj) => obj,
    });
    let controller = Controller::for_shared_stream_with(
        deps,
        dependencies.store.clone(),
        guard.resource.clone(),
    )
    .watches_shared_stream_with(
        dependents,
        move |obj| {
            let ns = obj.stored_namespace();
            references(&d, &obj)
                .into_iter()
                .filter(|(kind, _)| *kind == k)
                .map(|(_, name)| ObjectRef::new_with(&name, r.clone()).within(&ns))
                .collect::<Vec<_>>()
        },
        own.resource.clone(),
    )
    .graceful_shutdown_on(async move { shutdown.cancelled().await });
    controller
        .run(
            release,
            |_, _, _| Action::requeue(Duration::from_secs(5)),
            Arc::new(guard),
        )
        .for_each(|_| async {})
        .await;
}

/// Removes our guard finalizer from a dependency being deleted once nothing uses it.
async fn release(dep: Arc<DynamicObject>, g: Arc<Guard>) -> Result<Action, Error> {
    if dep.metadata.deletion_timestamp.is_none() || !has_finalizer(&*dep, &g.names.guard_finalizer)
    {
        return Ok(Action::await_change());
    }
    let users = dependents(&g.description, &g.dependents, &g.kind, &dep);
    if !users.is_empty() {
        // The cache may not have seen a dependent's deletion yet: look again soon rather than
        // wait for an event that may already have passed.
        tracing::debug!(plugin = %g.description.name, dependency = %dep.name_any(), users = users.len(), "dependency still in use");
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    tracing::info!(plugin = %g.description.name, kind = %g.kind, dependency = %dep.name_any(), "releasing deletion guard");
    apply_guard(
        &g.client,
        &g.resource,
        &g.names.guard_manager,
        &dep,
        json!([]),
    )
    .await?;
    Ok(Action::await_change())
}
