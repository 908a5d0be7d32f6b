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
    /// Every API version of the kind, oldest first, when the plugin serves several
    /// (`conversion.versions`; one of them is `version`, with the schemas above). Empty: the
    /// kind has one version, `version`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub versions: Vec<ApiVersion>,
    /// The calls the plugin's external system lets the host skip (`orchard:shortcuts`);
    /// none: the generic flow.
    #[serde(skip_serializing_if = "Shortcuts::is_none")]
    pub shortcuts: Shortcuts,
}

/// What a plugin's external system guarantees, so that the host skips calls the generic flow
/// makes to stay leak-safe on any system (`wit/deps/orchard-shortcuts`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Shortcuts {
    /// `create` fails, and changes nothing, when a resource with the object's identifying
    /// fields exists: no `list-for-adoption` before a create, only after a failed one.
    pub create_refuses_duplicates: bool,
    /// A `delete` that answers done has removed the resource: no `get-by-id` after it.
    pub delete_is_synchronous: bool,
    /// `delete` needs only the resource's id and answers done for one that is gone: an object
    /// with a `status.id` is deleted by it, without a `get-by-id` first.
    pub delete_by_id: bool,
}

impl Shortcuts {
    /// The generic flow: nothing skipped.
    pub fn is_none(&self) -> bool {
        *self == Self::default()
    }
}

impl Description {
    /// Whether the kind has several API versions, converted by the plugin.
    pub fn converts(&self) -> bool {
        self.versions.len() > 1
    }

    /// The version objects are stored at: the one `versions` marks, else `version`.
    pub fn storage_version(&self) -> &str {
        self.versions
            .iter()
            .find(|v| v.storage)
            .map_or(self.version.as_str(), |v| v.name.as_str())
    }
}

/// One API version of a kind (`conversion.api-version`), its schemas checked.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiVersion {
    /// A Kubernetes version name (`v1beta1`).
    pub name: String,
    /// OpenAPI v3 schema of `spec.resource` at this version.
    pub resource_schema: Value,
    /// OpenAPI v3 schema of `spec.import.filter` at this version.
    pub filter_schema: Option<Value>,
    /// OpenAPI v3 schema of `status.resource` at this version.
    pub observed_schema: Value,
    /// The version objects are stored at (exactly one is).
    pub storage: bool,
}

/// The parts of one object that change shape between versions (`conversion.convertible`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Convertible {
    /// `spec.resource`.
    pub resource: Option<Value>,
    /// `spec.import.filter`.
    pub filter: Option<Value>,
    /// `status.resource`.
    pub observed: Option<Value>,
    /// The object's annotations.
    pub annotations: Vec<(String, String)>,
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
            ..Self::from_envelope(&obj["spec"], &obj["status"])
        }
    }

    /// What an object's `spec` and `status` give of it (`spec.resource`, `status.id`), the
    /// metadata left empty: for a caller that holds the object decoded, which fills the
    /// metadata in from its own (the host's cache) instead of encoding the whole object to
    /// read it back with [`Self::from_manifest`].
    pub fn from_envelope(spec: &Value, status: &Value) -> Self {
        Self {
            spec: spec.get("resource").filter(|v| !v.is_null()).cloned(),
            status_id: status["id"].as_str().map(str::to_owned),
            ..Self::default()
        }
    }
}

/// Most connection details one pass may report.
pub const MAX_CONNECTION_DETAILS: usize = 32;
/// Most bytes of connection-detail values one pass may report.
pub const MAX_CONNECTION_BYTES: usize = 64 << 10;
/// Most drifts one pass may report.
pub const MAX_DRIFTS: usize = 32;
/// Longest drift field name.
pub const MAX_DRIFT_FIELD: usize = 256;
/// Longest drift value kept (longer ones are cut).
pub const MAX_DRIFT_VALUE: usize = 256;

/// A field a reconciler changed back to the spec (the `report.drift` import).
#[derive(Clone, PartialEq, Eq)]
pub struct Drift {
    /// The field, as the plugin names it.
    pub field: String,
    /// The value found (JSON text), cut at [`MAX_DRIFT_VALUE`]; `None`: absent.
    pub observed: Option<String>,
    /// The value set back (JSON text), cut at [`MAX_DRIFT_VALUE`]; `None`: removed.
    pub desired: Option<String>,
    /// The values are secret: shown masked.
    pub sensitive: bool,
}

/// What a drift shows of a value: masked when sensitive.
pub const MASKED: &str = "\"***\"";

impl Drift {
    /// The observed value as it may be shown.
    pub fn shown_observed(&self) -> Option<&str> {
        self.observed
            .as_deref()
            .map(|v| if self.sensitive { MASKED } else { v })
    }
    /// The desired value as it may be shown.
    pub fn shown_desired(&self) -> Option<&str> {
        self.desired
            .as_deref()
            .map(|v| if self.sensitive { MASKED } else { v })
    }

    /// The drift as `status.drift` shows it: the field and its values (JSON text, masked when
    /// sensitive); an absent value is left out.
    pub fn shown(&self) -> Value {
        let mut field = serde_json::json!({"field": self.field});
        if let Some(v) = self.shown_observed() {
            field["observed"] = Value::from(v);
        }
        if let Some(v) = self.shown_desired() {
            field["desired"] = Value::from(v);
        }
        field
    }
}

impl std::fmt::Debug for Drift {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Drift")
            .field("field", &self.field)
            .field("observed", &self.shown_observed())
            .field("desired", &self.shown_desired())
            .field("sensitive", &self.sensitive)
            .finish()
    }
}

/// What a plugin reported beside its answers during one pass (the `report` import), bounded.
/// Its `Debug` never shows a connection-detail value.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Reports {
    /// Connection details: key → value (a later value of a key replaced an earlier one).
    pub connection: BTreeMap<String, Vec<u8>>,
    /// Fields changed back to the spec, in the order reported.
    pub drift: Vec<Drift>,
    /// Why reports were dropped (bounds, bad keys), naming keys and fields, never values.
    pub dropped: Vec<String>,
}

impl std::fmt::Debug for Reports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reports")
            .field(
                "connection_keys",
                &self.connection.keys().collect::<Vec<_>>(),
            )
            .field("drift", &self.drift)
            .field("dropped", &self.dropped)
            .finish_non_exhaustive()
    }
}

impl Reports {
    /// Whether nothing was reported.
    pub fn is_empty(&self) -> bool {
        self.connection.is_empty() && self.drift.is_empty() && self.dropped.is_empty()
    }

    /// What may be shown of these reports (`orchard invoke --show-reports`): every drift as
    /// `status.drift` shows it, each connection detail by its key with the value masked (a
    /// connection detail is never shown), and why reports were dropped.
    pub fn shown(&self) -> Value {
        let connection: serde_json::Map<String, Value> = self
            .connection
            .keys()
            .map(|k| (k.clone(), Value::from("***")))
            .collect();
        serde_json::json!({
            "drift": self.drift.iter().map(Drift::shown).collect::<Vec<_>>(),
            "connectionDetails": connection,
            "dropped": self.dropped,
        })
    }

    /// Takes a connection detail within the bounds, or says why not.
    pub fn connection_detail(&mut self, key: String, value: Vec<u8>) {
        let valid_key = !key.is_empty()
            && key.len() <= 253
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
        if !valid_key {
            let shown = crate::actuator::contract::cut(&format!("{key:?}"), 64, "…");
            self.note(format!(
                "connection detail {shown}: not a Secret key ([-._a-zA-Z0-9]+, at most 253)"
            ));
            return;
        }
        let others: usize = self
            .connection
            .iter()
            .filter(|(k, _)| **k != key)
            .map(|(_, v)| v.len())
            .sum();
        let is_new = !self.connection.contains_key(&key);
        if is_new && self.connection.len() >= MAX_CONNECTION_DETAILS {
            self.note(format!(
                "connection detail {key:?}: over {MAX_CONNECTION_DETAILS} details"
            ));
        } else if others + value.len() > MAX_CONNECTION_BYTES {
            self.note(format!(
                "connection detail {key:?}: over {MAX_CONNECTION_BYTES} bytes of values"
            ));
        } else {
            self.connection.insert(key, value);
        }
    }

    /// Takes a drift within the bounds (values cut), or says why not.
    pub fn drift(
        &mut self,
        field: String,
        observed: Option<String>,
        desired: Option<String>,
        sensitive: bool,
    ) {
        if field.is_empty() || field.len() > MAX_DRIFT_FIELD || field.chars().any(char::is_control)
        {
            let shown = crate::actuator::contract::cut(&format!("{field:?}"), 64, "…");
            self.note(format!(
                "drift {shown}: not a field name (1 to {MAX_DRIFT_FIELD} characters, no control characters)"
            ));
            return;
        }
        if self.drift.len() >= MAX_DRIFTS {
            self.note(format!("drift {field:?}: over {MAX_DRIFTS} drifts"));
            return;
        }
        let cut = |v: String| crate::actuator::contract::cut(&v, MAX_DRIFT_VALUE, "…");
        self.drift.push(Drift {
            field,
            observed: observed.map(cut),
            desired: desired.map(cut),
            sensitive,
        });
    }

    /// Adds `other`'s reports after these (the bounds still hold).
    pub fn absorb(&mut self, other: Self) {
        for (k, v) in other.connection {
            self.connection_detail(k, v);
        }
        for d in other.drift {
            self.drift(d.field, d.observed, d.desired, d.sensitive);
        }
        for note in other.dropped {
            self.note(note);
        }
    }

    /// Remembers why a report was dropped (the first [`MAX_DRIFTS`] reasons).
    fn note(&mut self, why: String) {
        if self.dropped.len() < MAX_DRIFTS {
            self.dropped.push(why);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shown_reports_mask_sensitive_drift_and_every_connection_value() {
        let mut reports = Reports::default();
        reports.drift(
            "account".into(),
            Some(r#""intruder""#.into()),
            Some(r#""team-a""#.into()),
            false,
        );
        reports.drift(
            "password".into(),
            Some(r#""old-secret""#.into()),
            None,
            true,
        );
        reports.connection_detail("password".into(), b"s3cret".to_vec());
        reports.connection_detail("bad key".into(), b"v".to_vec());
        let shown = reports.shown();
        assert_eq!(
            shown,
            json!({
                "drift": [
                    {"field": "account", "observed": "\"intruder\"", "desired": "\"team-a\""},
                    {"field": "password", "observed": "\"***\""}
                ],
                "connectionDetails": {"password": "***"},
                "dropped": ["connection detail \"bad key\": not a Secret key ([-._a-zA-Z0-9]+, at most 253)"]
            })
        );
        let text = shown.to_string();
        assert!(
            !text.contains("s3cret") && !text.contains("old-secret"),
            "{text}"
        );
    }
}
