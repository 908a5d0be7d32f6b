//! The values of the actuator contract (`wit/actuator.wit`, interface `types`) as plain Rust.
//!
//! The same types serve a plugin compiled to Wasm (the export macro converts them from and to
//! the generated bindings) and a plugin linked natively into a test or benchmark host.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// Why a call failed. Converts from any error through [`Failure::transient`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// Retried with per-object exponential backoff.
    Transient(String),
    /// Terminal: the user must fix the spec.
    InvalidConfiguration(String),
    /// Terminal: nothing in the spec can fix it.
    Unrecoverable(String),
}

impl Failure {
    /// A failure worth retrying.
    pub fn transient(message: impl std::fmt::Display) -> Self {
        Self::Transient(message.to_string())
    }

    /// A terminal failure the user fixes in the spec.
    pub fn invalid(message: impl std::fmt::Display) -> Self {
        Self::InvalidConfiguration(message.to_string())
    }

    /// A terminal failure the spec cannot fix.
    pub fn unrecoverable(message: impl std::fmt::Display) -> Self {
        Self::Unrecoverable(message.to_string())
    }

    /// The message, whatever the kind.
    pub fn message(&self) -> &str {
        match self {
            Self::Transient(m) | Self::InvalidConfiguration(m) | Self::Unrecoverable(m) => m,
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Transient(m) => write!(f, "transient: {m}"),
            Self::InvalidConfiguration(m) => write!(f, "invalid configuration: {m}"),
            Self::Unrecoverable(m) => write!(f, "unrecoverable: {m}"),
        }
    }
}

impl From<serde_json::Error> for Failure {
    fn from(e: serde_json::Error) -> Self {
        Self::transient(format!("JSON: {e}"))
    }
}

/// What a wait is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitEvent {
    Creation,
    Ready,
    Deletion,
    Update,
}

/// Work that is not finished yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Poll the external system again after `poll_after`.
    WaitingOnExternal {
        event: WaitEvent,
        message: String,
        poll_after: Duration,
    },
    /// A watch on this object brings the reconcile back.
    WaitingOnObject {
        kind: String,
        name: String,
        event: WaitEvent,
    },
    /// The external resource changed; fetch it again now.
    NeedsRefresh(String),
}

/// Outcome of a step: done when it has neither progress nor failure.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    pub progress: Vec<Progress>,
    pub failure: Option<Failure>,
}

impl Status {
    /// Nothing left to do.
    pub fn done() -> Self {
        Self::default()
    }

    /// Poll the external system again after `poll_after`.
    pub fn waiting_on_external(
        event: WaitEvent,
        message: impl Into<String>,
        poll_after: Duration,
    ) -> Self {
        Self::progress(Progress::WaitingOnExternal {
            event,
            message: message.into(),
            poll_after,
        })
    }

    /// The external resource was changed and must be fetched again.
    pub fn needs_refresh(message: impl Into<String>) -> Self {
        Self::progress(Progress::NeedsRefresh(message.into()))
    }

    /// One item of progress.
    pub fn progress(progress: Progress) -> Self {
        Self {
            progress: vec![progress],
            failure: None,
        }
    }

    /// Whether nothing is pending.
    pub fn is_done(&self) -> bool {
        self.progress.is_empty() && self.failure.is_none()
    }

    /// Both statuses together (the first failure wins).
    #[must_use]
    pub fn and(mut self, other: Status) -> Self {
        self.progress.extend(other.progress);
        self.failure = self.failure.or(other.failure);
        self
    }
}

impl From<Failure> for Status {
    fn from(failure: Failure) -> Self {
        Self {
            progress: Vec::new(),
            failure: Some(failure),
        }
    }
}

impl<E: Into<Failure>> From<Result<Status, E>> for Status {
    fn from(r: Result<Status, E>) -> Self {
        r.unwrap_or_else(|e| e.into().into())
    }
}

/// Whether the external resource is ready for use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Availability {
    Available,
    Unavailable,
    Unknown,
}

/// A referenced object the host resolved for this call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependency {
    pub name: String,
    pub kind: String,
    pub object: String,
    pub id: Option<String>,
    pub observed: Option<String>,
}

/// The Kubernetes object being reconciled. `S` is the type of `spec.resource`: `String`
/// (JSON text) at the boundary, the plugin's own type inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object<S = String> {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub generation: i64,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub spec: Option<S>,
    pub status_id: Option<String>,
    pub dependencies: Vec<Dependency>,
    pub credentials: BTreeMap<String, Vec<u8>>,
}

impl<S> Object<S> {
    /// The spec, or an `InvalidConfiguration` failure when the object has none.
    pub fn spec(&self) -> Result<&S, Failure> {
        self.spec
            .as_ref()
            .ok_or_else(|| Failure::invalid("spec.resource is required"))
    }

    /// The resolved dependency declared as `name`.
    pub fn dependency(&self, name: &str) -> Result<&Dependency, Failure> {
        self.dependencies
            .iter()
            .find(|d| d.name == name)
            .ok_or_else(|| Failure::transient(format!("dependency {name} was not resolved")))
    }

    /// The id of the resolved dependency declared as `name`.
    pub fn dependency_id(&self, name: &str) -> Result<&str, Failure> {
        let dep = self.dependency(name)?;
        dep.id.as_deref().ok_or_else(|| {
            Failure::transient(format!("{} {} has no status.id yet", dep.kind, dep.object))
        })
    }

    /// A credentials value as UTF-8 text.
    pub fn credential(&self, key: &str) -> Result<String, Failure> {
        let raw = self
            .credentials
            .get(key)
            .ok_or_else(|| Failure::invalid(format!("credentials Secret has no key {key:?}")))?;
        String::from_utf8(raw.clone())
            .map_err(|_| Failure::invalid(format!("credentials key {key:?} is not UTF-8")))
    }

    /// The same object with another spec.
    pub fn with_spec<T>(self, spec: Option<T>) -> Object<T> {
        Object {
            name: self.name,
            namespace: self.namespace,
            uid: self.uid,
            generation: self.generation,
            labels: self.labels,
            annotations: self.annotations,
            spec,
            status_id: self.status_id,
            dependencies: self.dependencies,
            credentials: self.credentials,
        }
    }
}

impl Object<String> {
    /// Parses `spec.resource` into the plugin's type. A spec that does not parse is an
    /// `InvalidConfiguration` naming the field.
    pub fn parse<S: DeserializeOwned>(self) -> Result<Object<S>, Failure> {
        let spec =
            match &self.spec {
                None => None,
                Some(text) => Some(serde_json::from_str(text).map_err(|e| {
                    Failure::invalid(format!("spec.resource of {}: {e}", self.name))
                })?),
            };
        Ok(self.with_spec(spec))
    }
}

/// One external resource. `T` is `String` (JSON text) at the boundary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource<T = String> {
    pub id: String,
    pub state: T,
}

impl<T: Serialize> Resource<T> {
    /// The resource with its state as JSON text.
    pub fn to_raw(&self) -> Result<Resource<String>, Failure> {
        Ok(Resource {
            id: self.id.clone(),
            state: serde_json::to_string(&self.state)?,
        })
    }
}

impl Resource<String> {
    /// Parses the state into the plugin's type.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<Resource<T>, Failure> {
        Ok(Resource {
            id: self.id.clone(),
            state: serde_json::from_str(&self.state).map_err(|e| {
                Failure::transient(format!("state of external resource {}: {e}", self.id))
            })?,
        })
    }
}

/// A field of `spec.resource` naming another object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DependencyDecl {
    pub name: String,
    pub field: String,
    pub kind: String,
    pub for_create: bool,
    pub for_delete: bool,
    pub guard_deletion: bool,
}

impl DependencyDecl {
    /// A dependency needed for create and guarded against deletion (the common case).
    pub fn guarded(name: &str, field: &str, kind: &str) -> Self {
        Self {
            name: name.into(),
            field: field.into(),
            kind: kind.into(),
            for_create: true,
            for_delete: false,
            guard_deletion: true,
        }
    }
}

/// What the plugin manages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Description {
    pub name: String,
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub resource_schema: String,
    pub filter_schema: Option<String>,
    pub observed_schema: String,
    pub dependencies: Vec<DependencyDecl>,
    pub needs_credentials: bool,
}
