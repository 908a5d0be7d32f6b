//! The generic reconciler: one kube-runtime controller per plugin kind, ORC's semantics.
//!
//! - [`flow`]: the create/update and delete flows, each a top-down list of named phases;
//! - [`status`]: conditions and the status writer;
//! - [`backoff`]: per-object exponential backoff of transient failures;
//! - [`crate::deps`]: dependencies, credentials and deletion guards.

pub mod backoff;
pub mod flow;
pub mod status;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};
use tracing::Instrument;

use crate::actuator::{Actuator, Description};
use crate::deps;

/// Errors of the reconciler: the Kubernetes API failed. Actuator failures are not errors here:
/// they end up in the object's conditions.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the Kubernetes API failed.
    #[error("{action} {kind} {name}: {source}")]
    Kube {
        action: &'static str,
        kind: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    /// The kind of a declared dependency is not served by the apiserver.
    #[error("plugin {plugin}: dependency kind {kind} ({group}/{version}) is not served: {source}")]
    Discovery {
        plugin: String,
        kind: String,
        group: String,
        version: String,
        #[source]
        source: kube::Error,
    },
}

impl Error {
    /// The apiserver refused the host's identity (RBAC): no retry soon will change that.
    pub fn is_forbidden(&self) -> bool {
        matches!(self, Self::Kube { source: kube::Error::Api(e), .. } if e.code == 403)
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
    /// Readiness of the host, reported by `/readyz`.
    pub health: Arc<crate::ops::Health>,
    /// Every change of this value reconciles every object of the kind again (a new version
    /// of the plugin re-observes what the previous one did).
    pub reconcile_all: Option<tokio::sync::watch::Receiver<u64>>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            namespace: None,
            default_resync: None,
            concurrency: 4,
            abort_after_create: false,
            instance: "orchard".to_owned(),
            health: Arc::default(),
            reconcile_all: None,
        }
    }
}

/// Names derived from the plugin's name.
#[derive(Debug, Clone)]
pub struct Names {
    /// `orchard.dev/<plugin>`: on every object of the kind.
    pub finalizer: String,
    /// Field manager of that finalizer.
    pub finalizer_manager: String,
    /// Field manager of the status apply.
    pub status_manager: String,
    /// `orchard.dev/<plugin>-guard`: on dependencies this kind uses.
    pub guard_finalizer: String,
    /// Field manager of guard finalizers.
    pub guard_manager: String,
}

impl Names {
    fn new(plugin: &str) -> Self {
        Self {
            finalizer: format!("orchard.dev/{plugin}"),
            finalizer_manager: format!("orchard.dev/{plugin}/finalizer"),
            status_manager: format!("orchard.dev/{plugin}/status"),
            guard_finalizer: format!("orchard.dev/{plugin}-guard"),
            guard_manager: format!("orchard.dev/{plugin}/guard"),
        }
    }
}

/// Everything a reconcile of one plugin's objects needs.
pub struct Context {
    pub client: Client,
    pub actuator: Arc<dyn Actuator>,
    pub description: Description,
    pub resource: ApiResource,
    /// Kinds of the declared dependencies.
    pub dependency_kinds: HashMap<String, ApiResource>,
    pub names: Names,
    pub settings: Settings,
    pub backoff: backoff::Backoff,
    pub recorder: Recorder,
    /// Every object of the kind (the controller's cache), for reverse lookups.
    pub store: Store<DynamicObject>,
    /// Object uid → the plugin version (see [`Context::plugin_version`]) of its last pass.
    pub passes: std::sync::Mutex<HashMap<String, u64>>,
}

impl Context {
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

    /// Whether `obj` had a pass with plugin `version`. Every object counts as passed with the
    /// version the host started with: a restart does not re-run everything.
    pub fn passed_with(&self, obj: &DynamicObject, version: u64) -> bool {
        version == 0
            || self
                .passes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(obj.uid().as_deref().unwrap_or_default())
                == Some(&version)
    }

    /// Records a pass of `obj` with plugin `version`.
    pub fn passed(&self, obj: &DynamicObject, version: u64) {
        if version != 0 {
            let uid = obj.uid().unwrap_or_default();
            self.passes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(uid, version);
        }
    }

    /// Forgets `obj` (its finalizer is released: it is about to be gone).
    pub fn forget(&self, obj: &DynamicObject) {
        self.passes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(obj.uid().as_deref().unwrap_or_default());
    }

    /// The API of this kind in `ns`.
    pub fn api(&self, ns: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), ns, &self.resource)
    }

    fn kube_error(&self, action: &'static str, name: &str) -> impl FnOnce(kube::Error) -> Error {
        let kind = self.description.kind.clone();
        let name = name.to_owned();
        move |source| Error::Kube {
            action,
            kind,
            name,
            source,
        }
    }

    /// Server-side applies `body` (apiVersion/kind/metadata added) to `obj` as `manager`.
    pub async fn apply(
        &self,
        obj: &DynamicObject,
        manager: &str,
        mut body: Value,
        status: bool,
    ) -> Result<(), Error> {
        let name = obj.name_any();
        body["apiVersion"] = json!(self.resource.api_version);
        body["kind"] = json!(self.resource.kind);
        body["metadata"]["name"] = json!(name);
        let api = self.api(&obj.namespace().unwrap_or_default());
        let params = PatchParams::apply(manager).force();
        let result = if status {
            api.patch_status(&name, &params, &Patch::Apply(&body)).await
        } else {
            api.patch(&name, &params, &Patch::Apply(&body)).await
        };
        result.map(drop).map_err(self.kube_error("apply", &name))
    }

    /// JSON-merge-patches `obj` (or its status).
    pub async fn merge(&self, obj: &DynamicObject, body: Value, status: bool) -> Result<(), Error> {
        let name = obj.name_any();
        let api = self.api(&obj.namespace().unwrap_or_default());
        let params = PatchParams::default();
        let result = if status {
            api.patch_status(&name, &params, &Patch::Merge(&body)).await
        } else {
            api.patch(&name, &params, &Patch::Merge(&body)).await
        };
        result.map(drop).map_err(self.kube_error("patch", &name))
    }

    /// Publishes a Kubernetes Event on `obj`; a failure to do so is only logged.
    pub async fn event(&self, obj: &DynamicObject, type_: EventType, reason: &str, note: String) {
        let event = Event {
            type_,
            reason: reason.to_owned(),
            note: Some(note),
            action: reason.to_owned(),
            secondary: None,
        };
        if let Err(e) = self
            .recorder
            .publish(&event, &obj.object_ref(&self.resource))
            .await
        {
            tracing::warn!(plugin = self.plugin(), object = %obj.name_any(), error = %e, "could not publish event");
        }
    }
}

/// Runs the controller of one plugin until `shutdown` resolves.
pub async fn run(
    client: Client,
    actuator: Arc<dyn Actuator>,
    description: Description,
    settings: Settings,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> Result<(), Error> {
    let resource = crate::crd::api_resource(&description);
    let dependency_kinds = deps::discover_kinds(&client, &description).await?;
    let api: Api<DynamicObject> = match &settings.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let controller = Controller::new_with(api, watcher::Config::default(), resource.clone())
        .with_config(controller::Config::default().concurrency(settings.concurrency));
    let controller = match settings.reconcile_all.clone() {
        Some(changes) => controller.reconcile_all_on(futures::stream::unfold(
            changes,
            |mut changes| async move {
                changes.changed().await.ok()?;
                Some(((), changes))
            },
        )),
        None => controller,
    };
    let store = controller.store();
    settings.health.controller_started();
    let (health, synced) = (Arc::clone(&settings.health), store.clone());
    tokio::spawn(async move {
        // Re-poll with a short timeout: the store's readiness signal wakes only the last of
        // several waiters (the controller's own runner waits on it too).
        while tokio::time::timeout(Duration::from_millis(200), synced.wait_until_ready())
            .await
            .is_err()
        {}
        tracing::debug!("controller cache synced");
        health.controller_synced();
    });
    let controller = deps::watch_dependencies(
        controller,
        &client,
        &description,
        &dependency_kinds,
        &settings,
        store.clone(),
    );

    let names = Names::new(&description.name);
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: format!("orchard.dev/{}", description.name),
            instance: Some(settings.instance.clone()),
        },
    );
    let ctx = Arc::new(Context {
        client: client.clone(),
        actuator,
        resource,
        dependency_kinds,
        names,
        settings,
        backoff: backoff::Backoff::new(Duration::from_secs(1), Duration::from_secs(60)),
        recorder,
        store,
        description,
        passes: std::sync::Mutex::default(),
    });
    let plugin = ctx.plugin().to_owned();
    let (stop_main, stop_guards) = split_shutdown(shutdown);
    let guards = deps::run_guards(Arc::clone(&ctx), stop_guards);
    let main = controller
        .graceful_shutdown_on(stop_main)
        .run(flow::reconcile, error_policy, Arc::clone(&ctx))
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "reconcile stream error");
            }
        })
        .instrument(tracing::info_span!("controller", plugin = %plugin));
    tokio::join!(main, guards);
    Ok(())
}

/// One shutdown signal for two controllers.
fn split_shutdown(
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> (
    impl Future<Output = ()> + Send + Sync + 'static,
    impl Future<Output = ()> + Send + Sync + 'static,
) {
    let (tx, rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = tx.send(true);
    });
    let wait = move |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    (wait(rx.clone()), wait(rx))
}

/// Kubernetes API errors: retry with the per-object backoff.
fn error_policy(obj: Arc<DynamicObject>, error: &Error, ctx: Arc<Context>) -> Action {
    let key = obj.uid().unwrap_or_default();
    let delay = ctx.backoff.next(&key);
    tracing::warn!(plugin = ctx.plugin(), object = %obj.name_any(), error = %error, retry_in_ms = delay.as_millis(), "reconcile failed");
    Action::requeue(delay)
}

/// A reference to `obj` for the controller's queue.
pub fn object_ref(obj: &DynamicObject, resource: &ApiResource) -> ObjectRef<DynamicObject> {
    ObjectRef::new_with(&obj.name_any(), resource.clone())
        .within(&obj.namespace().unwrap_or_default())
}

/// Whether the object's metadata lists this finalizer.
pub fn has_finalizer(obj: &impl Resource, finalizer: &str) -> bool {
    obj.meta()
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|x| x == finalizer))
}
