//! The values of the contract, host side. JSON travels as text across the boundary; here it
//! is parsed (`serde_json::Value`), so a plugin's malformed JSON is caught at the boundary.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

/// The Kubernetes object being reconciled, as the actuator sees it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagedObject {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`; dependencies and credentials live in the same one.
    pub namespace: String,
    /// `metadata.uid`: tells a recreated object from its predecessor of the same name.
    pub uid: String,
    /// `metadata.generation`: bumped by the apiserver on every spec change.
    pub generation: i64,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
    /// `spec.resource`.
    pub spec: Option<Value>,
    /// `status.id`.
    pub status_id: Option<String>,
    /// The dependencies the host resolved for this call (each exists and is Available).
    pub dependencies: Vec<Dependency>,
    /// Secret data; never serialised (it would end up in logs or CLI output).
    #[serde(skip)]
    pub credentials: BTreeMap<String, Vec<u8>>,
}

/// A resolved dependency.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Dependency {
    /// The name of its declaration in [`Description::dependencies`].
    pub name: String,
    /// Kind of the referenced object.
    pub kind: String,
    /// Name of the referenced object (same namespace).
    pub object: String,
    /// Its `status.id`, when it has one.
    pub id: Option<String>,
    /// Its `status.resource`, when it has one.
    pub observed: Option<Value>,
}

/// An external resource.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExternalResource {
    /// The external system's identifier; the host stores it in `status.id`.
    pub id: String,
    /// Whatever the actuator needs later (its own format); passed back on every call.
    pub state: Value,
}

/// What a wait is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum WaitEvent {
    /// The external resource is still being created.
    Creation,
    /// The external resource exists but is not ready for use yet.
    Ready,
    /// The external resource is still being deleted.
    Deletion,
    /// A change to the external resource has not taken effect yet.
    Update,
}

impl WaitEvent {
    /// As in a condition message.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Creation => "creation",
            Self::Ready => "ready",
            Self::Deletion => "deletion",
            Self::Update => "update",
        }
    }
}

/// Work not finished yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "type")]
pub enum Progress {
    /// Poll the external system again after `poll_after`.
    WaitingOnExternal {
        /// What the wait is for.
        event: WaitEvent,
        /// Human-readable reason, shown in the `Progressing` condition.
        message: String,
        #[serde(with = "millis")]
        /// How long the host waits before it calls again.
        poll_after: Duration,
    },
    /// A watch on this object brings the reconcile back.
    WaitingOnObject {
        /// Kind of the object waited on (same namespace).
        kind: String,
        /// Name of the object waited on.
        name: String,
        /// What the wait is for.
        event: WaitEvent,
    },
    /// Fetch the resource again now.
    NeedsRefresh {
        /// What changed.
        message: String,
    },
}

impl Progress {
    /// A human sentence for the Progressing condition.
    pub fn message(&self) -> String {
        match self {
            Self::WaitingOnExternal { message, .. } | Self::NeedsRefresh { message } => {
                message.clone()
            }
            Self::WaitingOnObject { kind, name, event } => {
                format!(
                    "Waiting for {kind}/{name} to be {}",
                    match event {
                        WaitEvent::Creation => "created",
                        WaitEvent::Ready => "available",
                        WaitEvent::Deletion => "deleted",
                        WaitEvent::Update => "updated",
                    }
                )
            }
        }
    }
}

mod millis {
    use serde::Serializer;
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u128(d.as_millis())
    }
}

/// Why a step failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(rename_all = "camelCase", tag = "type", content = "message")]
pub enum Failure {
    /// Retried with backoff.
    #[error("{0}")]
    Transient(String),
    /// Terminal: fix the spec.
    #[error("{0}")]
    InvalidConfiguration(String),
    /// Terminal.
    #[error("{0}")]
    Unrecoverable(String),
}

impl Failure {
    /// Whether retrying cannot help.
    pub fn is_terminal(&self) -> bool {
        !matches!(self, Self::Transient(_))
    }

    /// The condition reason for it.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Transient(_) => "TransientError",
            Self::InvalidConfiguration(_) => "InvalidConfiguration",
            Self::Unrecoverable(_) => "UnrecoverableError",
        }
    }
}

/// Outcome of a step: done when empty.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Status {
    /// Work still pending; any item keeps `Progressing=True`.
    pub progress: Vec<Progress>,
    /// Why the step failed, if it did.
    pub failure: Option<Failure>,
}

impl Status {
    /// Whether nothing is pending.
    pub fn is_done(&self) -> bool {
        self.progress.is_empty() && self.failure.is_none()
    }
}

impl From<Failure> for Status {
    fn from(f: Failure) -> Self {
        Self {
            progress: Vec::new(),
            failure: Some(f),
        }
    }
}

/// Readiness of the external resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Availability {
    /// Ready for use: `Available=True`.
    Available,
    /// Exists but is not usable: `Available=False`.
    Unavailable,
    /// The actuator cannot tell (e.g. the external system did not answer).
    Unknown,
}

/// A field of `spec.resource` naming another object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DependencyDecl {
    /// Stable name of the dependency, e.g. `zone`.
    pub name: String,
    /// JSON field of `spec.resource` holding the referenced object's name, e.g. `zoneRef`.
    pub field: String,
    /// Kind of the referenced object (same API group as the plugin, or `Secret`).
    pub kind: String,
    /// The host resolves it before create and the reconcilers.
    pub for_create: bool,
    /// The host resolves it before delete.
    pub for_delete: bool,
    /// The host puts a finalizer on the dependency so it cannot go while this object uses it.
    pub guard_deletion: bool,
}

/// What a plugin manages.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Description {
    /// Short, stable plugin name (`[a-z0-9-]+`), used in finalizers and field managers.
    pub name: String,
    /// API group of the managed kind.
    pub group: String,
    /// API version of the managed kind, e.g. `v1alpha1`.
    pub version: String,
    /// The managed kind.
    pub kind: String,
    /// Plural resource name of the kind.
    pub plural: String,
    /// OpenAPI v3 schema of `spec.resource`.
    pub resource_schema: Value,
    /// OpenAPI v3 schema of `spec.import.filter`; `None` when import by filter is not supported.
    pub filter_schema: Option<Value>,
    /// OpenAPI v3 schema of `status.resource`; `observed` MUST match it.
    pub observed_schema: Value,
    /// The fields of `spec.resource` that name other objects.
    pub dependencies: Vec<DependencyDecl>,
    /// The objects carry `spec.credentialsRef`, whose Secret data reaches every call.
    pub needs_credentials: bool,
}

impl ManagedObject {
    /// Reads the envelope of a Kubernetes object (as JSON): metadata, `spec.resource` and
    /// `status.id`. Credentials and dependencies are resolved by the caller.
    pub fn from_manifest(obj: &Value) -> Self {
        let meta = &obj["metadata"];
        // Absent metadata reads as empty, as the apiserver omits empty fields: a manifest from
        // a file (`orchard call`) or a test has no uid, labels or annotations.
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let map = |v: &Value| -> BTreeMap<String, String> {
            v.as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                        .collect()
                })
                .unwrap_or_default()
        };
        Self {
            name: text(&meta["name"]),
            namespace: text(&meta["namespace"]),
            uid: text(&meta["uid"]),
            generation: meta["generation"].as_i64().unwrap_or(0),
            labels: map(&meta["labels"]),
            annotations: map(&meta["annotations"]),
            spec: obj["spec"]
                .get("resource")
                .filter(|v| !v.is_null())
                .cloned(),
            status_id: obj["status"]["id"].as_str().map(str::to_owned),
            dependencies: Vec::new(),
            credentials: BTreeMap::new(),
        }
    }
}
