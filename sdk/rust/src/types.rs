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
    /// The external resource is still being created.
    Creation,
    /// The external resource exists but is not ready for use yet.
    Ready,
    /// The external resource is still being deleted.
    Deletion,
    /// A change to the external resource has not taken effect yet.
    Update,
}

/// Work that is not finished yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Poll the external system again after `poll_after`.
    WaitingOnExternal {
        /// What the wait is for.
        event: WaitEvent,
        /// Human-readable reason, shown in the `Progressing` condition.
        message: String,
        /// How long the host waits before the next call (sent in whole milliseconds).
        poll_after: Duration,
    },
    /// A watch on this object brings the reconcile back.
    WaitingOnObject {
        /// Kind of the object waited on (same namespace as the reconciled object).
        kind: String,
        /// Name of the object waited on.
        name: String,
        /// What the wait is for.
        event: WaitEvent,
    },
    /// The external resource changed; fetch it again now. The text says what changed.
    NeedsRefresh(String),
}

/// Outcome of a step: done when it has neither progress nor failure.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// Work still pending; any item keeps `Progressing=True`.
    pub progress: Vec<Progress>,
    /// Why the step failed, if it did.
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

    /// Wait for another object of this namespace; its watch brings the reconcile back.
    pub fn waiting_on_object(
        kind: impl Into<String>,
        name: impl Into<String>,
        event: WaitEvent,
    ) -> Self {
        Self::progress(Progress::WaitingOnObject {
            kind: kind.into(),
            name: name.into(),
            event,
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

/// A JSON error is a transient failure (as [`Failure`] converts it), so `?` works on
/// `serde_json` calls in `create` too.
impl From<serde_json::Error> for Status {
    fn from(e: serde_json::Error) -> Self {
        Failure::from(e).into()
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
    /// Ready for use: the object becomes `Available=True`.
    Available,
    /// Exists but is not usable: `Available=False`.
    Unavailable,
    /// The actuator cannot tell (e.g. the external system did not answer).
    Unknown,
}

/// A referenced object the host resolved for this call.
///
/// In a test: `Dependency::new("zone", "DnsZone", "example").with_id("example.org.")`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dependency {
    /// The name of its declaration in [`Description::dependencies`].
    pub name: String,
    /// Kind of the referenced object.
    pub kind: String,
    /// Name of the referenced object (same namespace).
    pub object: String,
    /// Its `status.id`, when it has one.
    pub id: Option<String>,
    /// Its `status.resource` as JSON text, when it has one.
    pub observed: Option<String>,
}

impl Dependency {
    /// A resolved dependency without `status.id` or `status.resource` (add them with
    /// [`Dependency::with_id`] and [`Dependency::with_observed`]).
    pub fn new(
        name: impl Into<String>,
        kind: impl Into<String>,
        object: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            kind: kind.into(),
            object: object.into(),
            id: None,
            observed: None,
        }
    }

    /// The same dependency with this `status.id`.
    #[must_use]
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// The same dependency with this `status.resource`.
    #[must_use]
    pub fn with_observed(mut self, observed: &serde_json::Value) -> Self {
        self.observed = Some(observed.to_string());
        self
    }
}

/// The Kubernetes object being reconciled. `S` is the type of `spec.resource`: `String`
/// (JSON text) at the boundary, the plugin's own type inside it.
///
/// A test builds one in a line: [`Object::new`] (namespace `default`, everything else empty)
/// and the `with_*` methods, e.g.
/// `Object::new("www").with_spec(spec).with_credential("apiKey", "k").with_status_id("x")`.
/// `Object::default()` is the same with an empty name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object<S = String> {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`; dependencies and credentials live in the same one.
    pub namespace: String,
    /// `metadata.uid`: distinguishes a recreated object from its predecessor of the same name.
    pub uid: String,
    /// `metadata.generation`: bumped by the apiserver on every spec change.
    pub generation: i64,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
    /// `spec.resource`: the desired state. `None` for imported (unmanaged) objects.
    pub spec: Option<S>,
    /// `status.id`: the external id, once known.
    pub status_id: Option<String>,
    /// The dependencies the host resolved for this call (each exists and is Available).
    pub dependencies: Vec<Dependency>,
    /// The data of the Secret named by `spec.credentialsRef`; empty unless
    /// [`Description::needs_credentials`].
    pub credentials: BTreeMap<String, Vec<u8>>,
}

impl<S> Default for Object<S> {
    fn default() -> Self {
        Self {
            name: String::new(),
            namespace: "default".to_owned(),
            uid: String::new(),
            generation: 0,
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            spec: None,
            status_id: None,
            dependencies: Vec::new(),
            credentials: BTreeMap::new(),
        }
    }
}

impl Object {
    /// An object named `name` in namespace `default`, with no spec, id, dependencies or
    /// credentials (the start of a test object; give it a spec with [`Object::with_spec`]).
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ..Self::default()
        }
    }
}

impl<S> Object<S> {
    /// The same object with this `spec.resource`, of any type: the plugin's own `Spec` for a
    /// call of the typed [`Actuator`](crate::Actuator), JSON text for [`Raw`](crate::Raw).
    pub fn with_spec<T>(self, spec: T) -> Object<T> {
        self.replace_spec(Some(spec))
    }

    /// The same object in namespace `namespace`.
    #[must_use]
    pub fn with_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// The same object with `metadata.uid` `uid`.
    #[must_use]
    pub fn with_uid(mut self, uid: impl Into<String>) -> Self {
        self.uid = uid.into();
        self
    }

    /// The same object at `metadata.generation` `generation`.
    #[must_use]
    pub fn with_generation(mut self, generation: i64) -> Self {
        self.generation = generation;
        self
    }

    /// The same object with one more label.
    #[must_use]
    pub fn with_label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// The same object with one more annotation.
    #[must_use]
    pub fn with_annotation(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.annotations.insert(key.into(), value.into());
        self
    }

    /// The same object with `status.id` `id`.
    #[must_use]
    pub fn with_status_id(mut self, id: impl Into<String>) -> Self {
        self.status_id = Some(id.into());
        self
    }

    /// The same object with one more resolved dependency.
    #[must_use]
    pub fn with_dependency(mut self, dependency: Dependency) -> Self {
        self.dependencies.push(dependency);
        self
    }

    /// The same object with one more key in its credentials Secret.
    #[must_use]
    pub fn with_credential(mut self, key: impl Into<String>, value: impl AsRef<[u8]>) -> Self {
        self.credentials.insert(key.into(), value.as_ref().to_vec());
        self
    }

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

    /// The same object with another spec (or none).
    fn replace_spec<T>(self, spec: Option<T>) -> Object<T> {
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
        Ok(self.replace_spec(spec))
    }
}

/// One external resource. `T` is `String` (JSON text) at the boundary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resource<T = String> {
    /// The external system's identifier; the host stores it in `status.id`.
    pub id: String,
    /// Whatever the actuator needs later (its own format); passed back on every call.
    pub state: T,
}

impl<T> Resource<T> {
    /// The resource `id` with `state`.
    pub fn new(id: impl Into<String>, state: T) -> Self {
        Self {
            id: id.into(),
            state,
        }
    }
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
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DependencyDecl {
    /// Stable name of the dependency, e.g. `zone`; what [`Object::dependency`] looks up.
    pub name: String,
    /// JSON field of `spec.resource` holding the referenced object's name, e.g. `zoneRef`.
    pub field: String,
    /// Kind of the referenced object (same API group as this plugin, or `Secret`).
    pub kind: String,
    /// The host resolves it before create and the reconcilers.
    pub for_create: bool,
    /// The host resolves it before delete.
    pub for_delete: bool,
    /// The host puts a finalizer on the dependency so it cannot go while this object uses it.
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
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Description {
    /// Short, stable plugin name (`[a-z0-9-]+`), used in finalizers and field managers.
    pub name: String,
    /// API group of the managed kind; MUST be a DNS subdomain.
    pub group: String,
    /// API version of the managed kind, e.g. `v1alpha1`.
    pub version: String,
    /// The managed kind, `UpperCamelCase`.
    pub kind: String,
    /// Plural resource name of the kind, lowercase (a DNS label).
    pub plural: String,
    /// `OpenAPI` v3 schema of `spec.resource`, as JSON text.
    pub resource_schema: String,
    /// `OpenAPI` v3 schema of `spec.import.filter`; `None` when import by filter is not supported.
    pub filter_schema: Option<String>,
    /// `OpenAPI` v3 schema of `status.resource`; [`Actuator::observed`](crate::Actuator) MUST match it.
    pub observed_schema: String,
    /// The fields of `spec.resource` that name other objects.
    pub dependencies: Vec<DependencyDecl>,
    /// The objects carry `spec.credentialsRef`, whose Secret data reaches every call.
    pub needs_credentials: bool,
}

/// What the plugin's external system guarantees, so that the host skips calls its generic
/// flow makes to stay leak-safe on any system ([`Actuator::shortcuts`](crate::Actuator);
/// `orchard:shortcuts` in the WIT). Declare only what the system itself enforces: the
/// conformance kit checks both.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Shortcuts {
    /// The system refuses to create a resource whose identifying fields (those
    /// `list_for_adoption` matches on) an existing one has: `create` then answers a failure and
    /// changes nothing. The host skips `list_for_adoption` before a create and calls it only
    /// after a create fails; `list_for_adoption` MUST answer `Some` for every object the plugin
    /// can create. (PowerDNS answers `409 Conflict` for a zone name that exists.)
    pub create_refuses_duplicates: bool,
    /// A `delete` that answers done has removed the resource (`get_by_id` answers `None` from
    /// then on): the host releases the object without reading the resource back.
    pub delete_is_synchronous: bool,
    /// Deleting needs only the resource's id, and a delete of an id whose resource is gone
    /// answers done: the host deletes an object by its `status.id` without reading the
    /// resource first (`get_by_id`), through [`Actuator::delete_by_id`](crate::Actuator),
    /// which the plugin MUST implement. (PowerDNS deletes a zone by its name.)
    pub delete_by_id: bool,
}

/// One API version of a kind that has several ([`Actuator::versions`](crate::Actuator)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiVersion {
    /// A Kubernetes version name (`v1beta1`).
    pub name: String,
    /// `OpenAPI` v3 schema of `spec.resource` at this version, as JSON text.
    pub resource_schema: String,
    /// `OpenAPI` v3 schema of `spec.import.filter` at this version.
    pub filter_schema: Option<String>,
    /// `OpenAPI` v3 schema of `status.resource` at this version.
    pub observed_schema: String,
    /// Objects are stored at this version; exactly one version says so.
    pub storage: bool,
}

/// The parts of one object that change shape between versions
/// ([`Actuator::convert`](crate::Actuator)); the host keeps the rest.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Convertible {
    /// `spec.resource`.
    pub resource: Option<serde_json::Value>,
    /// `spec.import.filter`.
    pub filter: Option<serde_json::Value>,
    /// `status.resource`.
    pub observed: Option<serde_json::Value>,
    /// The object's annotations: keep under `<group>/…` what the other version cannot hold,
    /// so that a round trip loses nothing (the host writes back only those keys).
    pub annotations: std::collections::BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builder_fills_what_it_is_given_and_defaults_the_rest() {
        let obj = Object::new("www")
            .with_spec(r#"{"ttl":60}"#.to_owned())
            .with_namespace("dns")
            .with_uid("u-1")
            .with_generation(3)
            .with_label("team", "a")
            .with_annotation("note", "b")
            .with_status_id("x")
            .with_dependency(
                Dependency::new("zone", "DnsZone", "example")
                    .with_id("example.org.")
                    .with_observed(&serde_json::json!({"serial": 1})),
            )
            .with_credential("apiKey", "k")
            .with_credential("raw", [0xff_u8]);
        assert_eq!(
            obj,
            Object {
                name: "www".into(),
                namespace: "dns".into(),
                uid: "u-1".into(),
                generation: 3,
                labels: BTreeMap::from([("team".into(), "a".into())]),
                annotations: BTreeMap::from([("note".into(), "b".into())]),
                spec: Some(r#"{"ttl":60}"#.into()),
                status_id: Some("x".into()),
                dependencies: vec![Dependency {
                    name: "zone".into(),
                    kind: "DnsZone".into(),
                    object: "example".into(),
                    id: Some("example.org.".into()),
                    observed: Some(r#"{"serial":1}"#.into()),
                }],
                credentials: BTreeMap::from([
                    ("apiKey".into(), b"k".to_vec()),
                    ("raw".into(), vec![0xff]),
                ]),
            }
        );
        assert_eq!(obj.credential("apiKey"), Ok("k".into()));
        assert_eq!(obj.dependency_id("zone"), Ok("example.org."));
        assert!(obj.credential("raw").is_err());
    }

    #[test]
    fn a_new_object_is_the_default_one_with_a_name() {
        let obj = Object::new("a");
        assert_eq!(obj.namespace, "default");
        assert_eq!(
            Object {
                name: "a".into(),
                ..Object::default()
            },
            obj
        );
        let typed: Object<u32> = Object::new("a").with_spec(7);
        assert_eq!(typed.spec(), Ok(&7));
        assert_eq!(
            Object::<u32>::default().spec(),
            Err(Failure::invalid("spec.resource is required"))
        );
    }

    #[test]
    fn a_failure_and_a_json_error_convert_into_a_status() {
        let f = Failure::unrecoverable("no");
        assert_eq!(
            Status::from(f.clone()),
            Status {
                progress: vec![],
                failure: Some(f)
            }
        );
        let e = serde_json::from_str::<u32>("x").unwrap_err();
        assert_eq!(
            Status::from(e).failure.unwrap().message(),
            "JSON: expected value at line 1 column 1"
        );
    }
}
