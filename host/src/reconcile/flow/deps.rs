//! Dependencies between objects, declared by the plugin (`describe().dependencies`) and
//! enforced by the host, ORC's way:
//!
//! - a dependency that is missing or not Available makes the dependent wait (no timer: the
//!   watch on the dependency's kind requeues its dependents when it changes);
//! - a guarded dependency gets the finalizer `orchard.dev/<plugin>-guard` at the last moment
//!   (when it is used); the guard controller ([`crate::reconcile::machinery::guard`]) removes
//!   it once the dependency is being deleted and no dependent remains;
//! - the credentials Secret (`spec.credentialsRef.secretName`) is a guarded dependency whose
//!   data reaches every call.
//!
//! Everything is read from the host's caches through [`ObjectOps::cached`]: a pass makes no
//! GET of its dependencies.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use kube::api::{ApiResource, DynamicObject};
use serde_json::{Value, json};

use super::envelope::Envelope;
use crate::actuator::{Dependency, Description, ManagedObject, Progress, WaitEvent};
use crate::reconcile::machinery::dependents::{SECRET, references};
use crate::reconcile::ops::ObjectOps;
use crate::reconcile::{Context, Error, StoredMeta};

/// The API resource of Secrets.
pub fn secret_resource() -> ApiResource {
    ApiResource {
        group: String::new(),
        version: "v1".into(),
        api_version: "v1".into(),
        kind: SECRET.into(),
        plural: "secrets".into(),
    }
}

/// What of a dependency (or the credentials Secret) its dependents' passes depend on: a
/// Secret's data; a dependency's generation, status.id, availability and observed state;
/// and whether it is being deleted. Metadata-only writes (guard finalizers, labels) are not
/// part of it, so the host's own guard never looks like a change. A hash (stable within one
/// process): the dependency feeds keep one per dependency.
///
/// `kind` is the dependency's kind as declared, not the object's own `kind` field: objects
/// of a listing carry none (only watch events do), so reading it there made the first watch
/// event of a listed Secret — the host's own guard finalizer — look like a change of its data,
/// and every dependent ran an extra pass on a cache that had not seen its last status write.
pub fn input_fingerprint(kind: &str, dep: &DynamicObject) -> u64 {
    let deleting = dep.metadata.deletion_timestamp.is_some();
    let key = if kind == SECRET {
        json!([dep.data["data"], deleting])
    } else {
        let status = &dep.data["status"];
        json!([
            dep.metadata.generation,
            status["id"],
            is_available(dep),
            status["resource"],
            deleting
        ])
    };
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    key.to_string().hash(&mut hasher);
    hasher.finish()
}

/// A fingerprint of the inputs `obj` takes from other objects ([`input_fingerprint`] of each, as
/// cached): a terminal failure is retried when it changes, since the cause may have been
/// fixed there.
pub fn inputs_fingerprint(ops: &dyn ObjectOps, d: &Description, obj: &DynamicObject) -> u64 {
    let ns = obj.stored_namespace();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for (kind, name) in references(d, obj) {
        (kind.as_str(), name.as_str()).hash(&mut hasher);
        ops.cached(&kind, &ns, &name)
            .map(|o| input_fingerprint(&kind, &o))
            .hash(&mut hasher);
    }
    hasher.finish()
}

/// What [`resolve`] found.
#[derive(Debug)]
pub enum Resolution {
    /// Everything needed is there.
    Ready {
        /// The resolved dependencies, for `ManagedObject::dependencies`.
        dependencies: Vec<Dependency>,
        /// The credentials Secret's data, empty when none is needed.
        credentials: BTreeMap<String, Vec<u8>>,
    },
    /// Something needed is missing or not ready.
    Waiting(Vec<Progress>),
}

impl Resolution {
    /// Puts what was resolved into `mo`; `Some(progress)` when the pass must wait instead.
    pub fn fill(self, mo: &mut ManagedObject) -> Option<Vec<Progress>> {
        match self {
            Self::Waiting(progress) => Some(progress),
            Self::Ready {
                dependencies,
                credentials,
            } => {
                mo.dependencies = dependencies;
                mo.credentials = credentials;
                None
            }
        }
    }
}

/// Which flow asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Before create and the reconcilers.
    Create,
    /// Before delete.
    Delete,
}

fn is_available(obj: &DynamicObject) -> bool {
    obj.data["status"]["conditions"]
        .as_array()
        .is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Available" && c["status"] == "True")
        })
}

/// Resolves the dependencies and credentials of `obj` for `purpose`, from the caches; puts
/// guard finalizers on the ones used for create.
pub async fn resolve(
    ops: &dyn ObjectOps,
    d: &Description,
    obj: &DynamicObject,
    envelope: &Envelope,
    purpose: Purpose,
) -> Result<Resolution, Error> {
    let ns = obj.stored_namespace();
    let spec = &obj.data["spec"];
    let mut waiting = Vec::new();
    let mut dependencies = Vec::new();
    for decl in &d.dependencies {
        let needed = match purpose {
            Purpose::Create => decl.for_create,
            Purpose::Delete => decl.for_delete,
        };
        let Some(name) = spec["resource"][&decl.field].as_str().filter(|_| needed) else {
            continue;
        };
        let wait = |event| Progress::WaitingOnObject {
            kind: decl.kind.clone(),
            name: name.to_owned(),
            event,
        };
        // Secrets have no conditions: one that exists is ready (ORC's credentials rule).
        let ready = |dep: &DynamicObject| decl.kind == SECRET || is_available(dep);
        match ops.cached(&decl.kind, &ns, name) {
            // Deletion must not hang on a dependency that is gone: delete with what there is.
            None if purpose == Purpose::Delete => {}
            None => waiting.push(wait(WaitEvent::Creation)),
            Some(dep)
                if purpose == Purpose::Create
                    && (!ready(&dep) || dep.metadata.deletion_timestamp.is_some()) =>
            {
                waiting.push(wait(WaitEvent::Ready));
            }
            Some(dep) => {
                if purpose == Purpose::Create && decl.guard_deletion {
                    guard_once(ops, &decl.kind, d, &dep).await?;
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
    if d.needs_credentials {
        let Some(name) = envelope.credentials.as_deref() else {
            // The CRD requires it; a pass never runs without one.
            return Ok(Resolution::Waiting(vec![]));
        };
        match ops.cached(SECRET, &ns, name) {
            None => waiting.push(Progress::WaitingOnObject {
                kind: SECRET.to_owned(),
                name: name.to_owned(),
                event: WaitEvent::Creation,
            }),
            Some(secret) => {
                if purpose == Purpose::Create {
                    guard_once(ops, SECRET, d, &secret).await?;
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

/// The object as the plugin sees it, with what `purpose` needs of its dependencies and
/// credentials filled in from the caches ([`resolve`]); `Err(progress)` while something
/// needed is missing or not ready. The head of both flows.
pub async fn managed_object(
    ctx: &Context,
    obj: &DynamicObject,
    envelope: &Envelope,
    purpose: Purpose,
) -> Result<Result<ManagedObject, Vec<Progress>>, Error> {
    let mut mo = managed(obj);
    let resolution = resolve(ctx.ops.as_ref(), &ctx.description, obj, envelope, purpose).await?;
    Ok(match resolution.fill(&mut mo) {
        Some(progress) => Err(progress),
        None => Ok(mo),
    })
}

/// The object as the plugin sees it, read from its decoded metadata and its `spec` and
/// `status` (what [`ManagedObject::from_manifest`] reads of its JSON, without encoding the
/// whole object once a pass to read it back).
fn managed(obj: &DynamicObject) -> ManagedObject {
    let meta = &obj.metadata;
    let text = |v: &Option<String>| v.clone().unwrap_or_default();
    ManagedObject {
        name: text(&meta.name),
        namespace: text(&meta.namespace),
        uid: text(&meta.uid),
        generation: meta.generation.unwrap_or(0),
        labels: meta.labels.clone().unwrap_or_default(),
        annotations: meta.annotations.clone().unwrap_or_default(),
        ..ManagedObject::from_envelope(&obj.data["spec"], &obj.data["status"])
    }
}

/// Puts our guard finalizer on `dep` unless it is there.
async fn guard_once(
    ops: &dyn ObjectOps,
    kind: &str,
    d: &Description,
    dep: &DynamicObject,
) -> Result<(), Error> {
    let finalizer = crate::reconcile::Names::new(&d.name).guard_finalizer;
    if crate::reconcile::has_finalizer(dep, &finalizer) {
        return Ok(());
    }
    ops.guard(kind, dep).await
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
        // A Secret without data gives no credentials; the plugin names the missing key
        // (`Object::credential`). The apiserver only returns base64 values.
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The credentials Secret as a listing gives it (no `kind`, no finalizer).
    fn listed_secret() -> DynamicObject {
        serde_json::from_value(json!({
            "metadata": {"name": "pdns", "namespace": "ns", "uid": "s1", "resourceVersion": "1"},
            "data": {"apiKey": "a2V5"},
        }))
        .unwrap()
    }

    #[test]
    fn a_secrets_fingerprint_is_its_data_whether_or_not_the_object_names_its_kind() {
        let listed = listed_secret();
        let mut watched = listed.clone();
        watched.types = Some(kube::api::TypeMeta {
            api_version: "v1".into(),
            kind: SECRET.into(),
        });
        assert_eq!(
            input_fingerprint(SECRET, &listed),
            input_fingerprint(SECRET, &watched)
        );
    }

    #[test]
    fn the_hosts_guard_finalizer_on_a_secret_is_no_change_but_its_data_is() {
        let listed = listed_secret();
        let mut guarded = listed.clone();
        guarded.metadata.finalizers = Some(vec!["orchard.dev/pdns-zone-guard".into()]);
        guarded.metadata.resource_version = Some("2".into());
        assert_eq!(
            input_fingerprint(SECRET, &listed),
            input_fingerprint(SECRET, &guarded)
        );
        let mut rotated = guarded.clone();
        rotated.data["data"]["apiKey"] = json!("bmV3");
        assert_ne!(
            input_fingerprint(SECRET, &guarded),
            input_fingerprint(SECRET, &rotated)
        );
    }

    #[test]
    fn the_object_a_plugin_sees_is_what_its_manifest_gives() {
        let objects = [
            // As the watch gives a zone: identity, labels, annotations, generation, a spec
            // with its resource, a status with its id and more.
            json!({
                "apiVersion": "dns.orchard.dev/v1alpha1", "kind": "DnsZone",
                "metadata": {
                    "name": "z", "namespace": "ns", "uid": "u1", "generation": 3,
                    "resourceVersion": "7", "labels": {"team": "a"},
                    "annotations": {"orchard.dev/paused": "true"},
                    "finalizers": ["orchard.dev/pdns-zone"],
                },
                "spec": {"resource": {"name": "example.org."}, "credentialsRef": {"secretName": "pdns"}},
                "status": {"id": "example.org.", "conditions": [{"type": "Available", "status": "True"}]},
            }),
            // Bare: no uid, labels or annotations, no status.
            json!({"metadata": {"name": "bare"}, "spec": {}}),
            // A null resource is none; an id that is not a string is none.
            json!({"metadata": {"name": "odd", "namespace": "ns"}, "spec": {"resource": null}, "status": {"id": 7}}),
            // No spec at all.
            json!({"metadata": {"name": "empty", "namespace": "ns"}}),
        ];
        for manifest in objects {
            let obj: DynamicObject = serde_json::from_value(manifest.clone()).unwrap();
            assert_eq!(
                managed(&obj),
                ManagedObject::from_manifest(&manifest),
                "{manifest}"
            );
        }
    }
}
