//! Dependencies between objects, declared by the plugin (`describe().dependencies`) and
//! enforced by the host, ORC's way:
//!
//! - a dependency that is missing or not Available makes the dependent wait (no timer: a
//!   watch on the dependency's kind requeues its dependents when it changes);
//! - a guarded dependency gets the finalizer `orchard.dev/<plugin>-guard` at the last moment
//!   (when it is used), and a guard controller removes it once the dependency is being deleted
//!   and no dependent remains (dependents the dependency itself owns do not count);
//! - the credentials Secret (`spec.credentialsRef.secretName`) is a guarded dependency whose
//!   data reaches every call.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::actuator::{Dependency, Description, Progress, WaitEvent};
use crate::reconcile::{Context, Error, Settings, has_finalizer, object_ref};

/// The kind name under which the credentials Secret is tracked.
const SECRET: &str = "Secret";

fn secret_resource() -> ApiResource {
    ApiResource {
        group: String::new(),
        version: "v1".into(),
        api_version: "v1".into(),
        kind: SECRET.into(),
        plural: "secrets".into(),
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
        kinds.insert(SECRET.to_owned(), secret_resource());
    }
    for decl in &d.dependencies {
        if kinds.contains_key(&decl.kind) {
            continue;
        }
        let resource = if decl.kind == SECRET {
            secret_resource()
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

/// The name an object's spec gives for each dependency kind: `(kind, name)` pairs.
fn references(d: &Description, obj: &DynamicObject) -> Vec<(String, String)> {
    let spec = &obj.data["spec"];
    let mut refs: Vec<(String, String)> = d
        .dependencies
        .iter()
        .filter_map(|decl| {
            spec["resource"][&decl.field]
                .as_str()
                .map(|name| (decl.kind.clone(), name.to_owned()))
        })
        .collect();
    if let Some(name) = spec["credentialsRef"]["secretName"]
        .as_str()
        .filter(|_| d.needs_credentials)
    {
        refs.push((SECRET.to_owned(), name.to_owned()));
    }
    refs
}

/// Objects in `store` that use `dep` (of `kind`), leaving out those `dep` owns.
fn dependents(
    d: &Description,
    store: &Store<DynamicObject>,
    kind: &str,
    dep: &DynamicObject,
) -> Vec<Arc<DynamicObject>> {
    let (ns, name, uid) = (dep.namespace(), dep.name_any(), dep.uid());
    store
        .state()
        .into_iter()
        .filter(|o| o.namespace() == ns)
        .filter(|o| {
            references(d, o)
                .iter()
                .any(|(k, n)| k == kind && *n == name)
        })
        .filter(|o| {
            !o.owner_references()
                .iter()
                .any(|r| Some(&r.uid) == uid.as_ref())
        })
        .collect()
}

fn watcher_api(client: &Client, resource: &ApiResource, settings: &Settings) -> Api<DynamicObject> {
    match &settings.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    }
}

/// Adds to the controller a watch per dependency kind that requeues the dependents of a
/// changed dependency.
pub fn watch_dependencies(
    mut controller: Controller<DynamicObject>,
    client: &Client,
    d: &Description,
    kinds: &HashMap<String, ApiResource>,
    settings: &Settings,
    store: Store<DynamicObject>,
) -> Controller<DynamicObject> {
    let own = crate::crd::api_resource(d);
    for (kind, resource) in kinds {
        let (d, store, kind, own) = (d.clone(), store.clone(), kind.clone(), own.clone());
        // Secrets: only their creation matters (a Secret that appears unblocks its users).
        let config = watcher::Config::default();
        controller = controller.watches_with(
            watcher_api(client, resource, settings),
            resource.clone(),
            config,
            move |dep| {
                dependents(&d, &store, &kind, &dep)
                    .iter()
                    .map(|o| object_ref(o, &own))
                    .collect::<Vec<_>>()
            },
        );
    }
    controller
}

/// What [`resolve`] found.
pub enum Resolution {
    /// Everything needed is there.
    Ready {
        dependencies: Vec<Dependency>,
        credentials: BTreeMap<String, Vec<u8>>,
    },
    /// Something needed is missing or not ready.
    Waiting(Vec<Progress>),
}

/// Which flow asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Create,
    Delete,
}

fn is_available(obj: &DynamicObject) -> bool {
    // Secrets have no conditions: one that exists is ready (ORC's credentials rule).
    obj.types.as_ref().is_some_and(|t| t.kind == SECRET)
        || obj.data["status"]["conditions"]
            .as_array()
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Available" && c["status"] == "True")
            })
}

/// Resolves the dependencies and credentials of `obj` for `purpose`; puts guard finalizers
/// on the ones used for create.
pub async fn resolve(
    ctx: &Context,
    obj: &DynamicObject,
    purpose: Purpose,
) -> Result<Resolution, Error> {
    let ns = obj.namespace().unwrap_or_default();
    let spec = &obj.data["spec"];
    let mut waiting = Vec::new();
    let mut dependencies = Vec::new();
    for decl in &ctx.description.dependencies {
        let needed = match purpose {
            Purpose::Create => decl.for_create,
            Purpose::Delete => decl.for_delete,
        };
        let Some(name) = spec["resource"][&decl.field].as_str().filter(|_| needed) else {
            continue;
        };
        let Some(resource) = ctx.dependency_kinds.get(&decl.kind) else {
            continue;
        };
        let api = Api::<DynamicObject>::namespaced_with(ctx.client.clone(), &ns, resource);
        let dep = api
            .get_opt(name)
            .await
            .map_err(kube_error(&decl.kind, name))?;
        let wait = |event| Progress::WaitingOnObject {
            kind: decl.kind.clone(),
            name: name.to_owned(),
            event,
        };
        match dep {
            // Deletion must not hang on a dependency that is gone: delete with what there is.
            None if purpose == Purpose::Delete => {}
            None => waiting.push(wait(WaitEvent::Creation)),
            Some(dep)
                if purpose == Purpose::Create
                    && (!is_available(&dep) || dep.metadata.deletion_timestamp.is_some()) =>
            {
                waiting.push(wait(WaitEvent::Ready));
            }
            Some(dep) => {
                if purpose == Purpose::Create && decl.guard_deletion {
                    guard(ctx, resource, &dep).await?;
                }
                dependencies.push(Dependency {
                    name: decl.name.clone(),
                    kind: decl.kind.clone(),
                    object: name.to_owned(),
                    id: dep.data["status"]["id"].as_str().map(str::to_owned),
                    observed: Some(dep.data["status"]["resource"].clone()).filter(|v| !v.is_null()),
                });
            }
        }
    }

    let mut credentials = BTreeMap::new();
    if ctx.description.needs_credentials {
        let Some(name) = spec["credentialsRef"]["secretName"].as_str() else {
            return Ok(Resolution::Waiting(vec![]));
        };
        let api =
            Api::<DynamicObject>::namespaced_with(ctx.client.clone(), &ns, &secret_resource());
        match api.get_opt(name).await.map_err(kube_error(SECRET, name))? {
            None => waiting.push(Progress::WaitingOnObject {
                kind: SECRET.to_owned(),
                name: name.to_owned(),
                event: WaitEvent::Creation,
            }),
            Some(secret) => {
                if purpose == Purpose::Create {
                    guard(ctx, &secret_resource(), &secret).await?;
                }
                credentials = secret_data(&secret.data["data"]);
            }
        }
    }

    Ok(if waiting.is_empty() {
        Resolution::Ready {
            dependencies,
            credentials,
        }
    } else {
        Resolution::Waiting(waiting)
    })
}

fn secret_data(data: &Value) -> BTreeMap<String, Vec<u8>> {
    use base64::Engine as _;
    data.as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| {
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(v.as_str()?)
                        .ok()?;
                    Some((k.clone(), bytes))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn kube_error(kind: &str, name: &str) -> impl FnOnce(kube::Error) -> Error {
    let (kind, name) = (kind.to_owned(), name.to_owned());
    move |source| Error::Kube {
        action: "get",
        kind,
        name,
        source,
    }
}

async fn apply_finalizers(
    ctx: &Context,
    resource: &ApiResource,
    dep: &DynamicObject,
    finalizers: Value,
) -> Result<(), Error> {
    let name = dep.name_any();
    let api = Api::<DynamicObject>::namespaced_with(
        ctx.client.clone(),
        &dep.namespace().unwrap_or_default(),
        resource,
    );
    let body = json!({
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": {"name": name, "uid": dep.uid(), "finalizers": finalizers},
    });
    let params = PatchParams::apply(&ctx.names.guard_manager).force();
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

/// Puts our guard finalizer on `dep` unless it is there.
async fn guard(ctx: &Context, resource: &ApiResource, dep: &DynamicObject) -> Result<(), Error> {
    if has_finalizer(dep, &ctx.names.guard_finalizer) {
        return Ok(());
    }
    apply_finalizers(ctx, resource, dep, json!([ctx.names.guard_finalizer])).await
}

/// Runs one guard controller per guarded dependency kind until `shutdown`.
pub async fn run_guards(
    ctx: Arc<Context>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let mut guarded: Vec<String> = ctx
        .description
        .dependencies
        .iter()
        .filter(|d| d.guard_deletion)
        .map(|d| d.kind.clone())
        .collect();
    if ctx.description.needs_credentials {
        guarded.push(SECRET.to_owned());
    }
    guarded.sort();
    guarded.dedup();
    let shutdown = futures::future::FutureExt::shared(Box::pin(shutdown));
    let guards = guarded.into_iter().filter_map(|kind| {
        let resource = ctx.dependency_kinds.get(&kind)?.clone();
        Some(run_guard(
            Arc::clone(&ctx),
            kind,
            resource,
            shutdown.clone(),
        ))
    });
    futures::future::join_all(guards).await;
}

struct GuardContext {
    ctx: Arc<Context>,
    kind: String,
    resource: ApiResource,
}

async fn run_guard(
    ctx: Arc<Context>,
    kind: String,
    resource: ApiResource,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let own = ctx.resource.clone();
    let api = watcher_api(&ctx.client, &resource, &ctx.settings);
    let own_api = watcher_api(&ctx.client, &own, &ctx.settings);
    let (d, k, r) = (ctx.description.clone(), kind.clone(), resource.clone());
    // When a dependent changes (or goes), look at what it references again.
    let controller = Controller::new_with(api, watcher::Config::default(), resource.clone())
        .watches_with(own_api, own, watcher::Config::default(), move |obj| {
            let ns = obj.namespace().unwrap_or_default();
            references(&d, &obj)
                .into_iter()
                .filter(|(kind, _)| *kind == k)
                .map(|(_, name)| {
                    kube::runtime::reflector::ObjectRef::new_with(&name, r.clone()).within(&ns)
                })
                .collect::<Vec<_>>()
        })
        .graceful_shutdown_on(shutdown);
    let gctx = Arc::new(GuardContext {
        ctx,
        kind,
        resource,
    });
    controller
        .run(
            release_guard,
            |_, _, _| Action::requeue(std::time::Duration::from_secs(5)),
            gctx,
        )
        .for_each(|_| async {})
        .await;
}

/// Removes our guard finalizer from a dependency being deleted once nothing uses it.
async fn release_guard(dep: Arc<DynamicObject>, g: Arc<GuardContext>) -> Result<Action, Error> {
    let ctx = &g.ctx;
    if dep.metadata.deletion_timestamp.is_none()
        || !has_finalizer(&*dep, &ctx.names.guard_finalizer)
    {
        return Ok(Action::await_change());
    }
    let users = dependents(&ctx.description, &ctx.store, &g.kind, &dep);
    if !users.is_empty() {
        // The cache may not have seen a dependent's deletion yet: look again soon rather than
        // wait for an event that may already have passed.
        tracing::debug!(plugin = ctx.plugin(), dependency = %dep.name_any(), users = users.len(), "dependency still in use");
        return Ok(Action::requeue(std::time::Duration::from_secs(1)));
    }
    tracing::info!(plugin = ctx.plugin(), kind = %g.kind, dependency = %dep.name_any(), "releasing deletion guard");
    apply_finalizers(ctx, &g.resource, &dep, json!([])).await?;
    Ok(Action::await_change())
}
