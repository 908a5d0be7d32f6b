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
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub generation: i64,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// `spec.resource`.
    pub spec: Option<Value>,
    /// `status.id`.
    pub status_id: Option<String>,
    pub dependencies: Vec<Dependency>,
    /// Secret data; never serialised (it would end up in logs or CLI output).
    #[serde(skip)]
    pub credentials: BTreeMap<String, Vec<u8>>,
}

/// A resolved dependency.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Dependency {
    pub name: String,
    pub kind: String,
    pub object: String,
    pub id: Option<String>,
    pub observed: Option<Value>,
}

/// An external resource.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExternalResource {
    pub id: String,
    pub state: Value,
}

/// What a wait is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum WaitEvent {
    Creation,
    Ready,
    Deletion,
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
        event: WaitEvent,
        message: String,
        #[serde(with = "millis")]
        poll_after: Duration,
    },
    /// A watch on this object brings the reconcile back.
    WaitingOnObject {
        kind: String,
        name: String,
        event: WaitEvent,
    },
    /// Fetch the resource again now.
    NeedsRefresh { message: String },
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
    pub progress: Vec<Progress>,
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
    Available,
    Unavailable,
    Unknown,
}

/// A field of `spec.resource` naming another object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DependencyDecl {
    pub name: String,
    pub field: String,
    pub kind: String,
    pub for_create: bool,
    pub for_delete: bool,
    pub guard_deletion: bool,
}

/// What a plugin manages.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Description {
    pub name: String,
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub resource_schema: Value,
    pub filter_schema: Option<Value>,
    pub observed_schema: Value,
    pub dependencies: Vec<DependencyDecl>,
    pub needs_credentials: bool,
}

impl ManagedObject {
    /// Reads the envelope of a Kubernetes object (as JSON): metadata, `spec.resource` and
    /// `status.id`. Credentials and dependencies are resolved by the caller.
    pub fn from_manifest(obj: &Value) -> Self {
        let meta = &obj["metadata"];
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
