//! The one decoding layer between what a plugin returns and what the host uses.
//!
//! Both adapters — the Wasm component ([`crate::runtime::ComponentActuator`]) and the natively
//! linked SDK actuator ([`super::NativeActuator`]) — move the raw values of their side into
//! this module's inputs and take its outputs; neither validates on its own. A plugin is
//! untrusted: every value it returns is checked here against the rules below, and a violation
//! is a [`CallError::Contract`] naming the plugin, the function and the [`Rule`].
//!
//! # Guarantees
//!
//! - Names from `describe()` are valid where the host puts them: the plugin name in the
//!   finalizer `orchard.dev/<name>` and field managers, the group/version/plural in URL paths
//!   and the CRD, the kind in the CRD.
//! - Ids are non-empty, short and printable, so `status.id` is always writable.
//! - JSON documents are parsed once and bounded in size, so `status` stays well under the
//!   apiserver's request limit (~3 MiB) and etcd's object limit (1.5 MiB).
//! - Lists are bounded; messages are truncated with a visible marker (never refused);
//!   poll intervals are clamped.
//!
//! # Errors
//!
//! Every function returns [`CallError::Contract`] on a violation; message truncation and
//! poll clamping never fail.

use std::fmt;
use std::time::Duration;

use serde_json::Value;

use super::{
    ApiVersion, CallError, CallResult, Convertible, DependencyDecl, Description, ExternalResource,
    Failure, Progress, Shortcuts, Status,
};

/// The plugin name MUST match `[a-z0-9]([-a-z0-9]*[a-z0-9])?` and be at most this many
/// characters: it goes into the finalizer `orchard.dev/<name>` (a qualified name, 63 at most
/// after the prefix) and into field managers, with room for suffixes.
pub const PLUGIN_NAME_MAX_LEN: usize = 40;
/// The group MUST be a DNS-1123 subdomain (lowercase labels joined by dots, at most this many
/// characters) with at least one dot, as for any CRD.
pub const GROUP_MAX_LEN: usize = 253;
/// The version and the plural MUST be DNS-1123 labels of at most this many characters (the
/// plural goes into the URL path of every request and into the CRD's name).
pub const LABEL_MAX_LEN: usize = 63;
/// The kind MUST match `[A-Z][A-Za-z0-9]*` and be at most this many characters.
pub const KIND_MAX_LEN: usize = 63;
/// Each schema MUST be a JSON object of at most this many bytes (the CRD holds all three).
pub const SCHEMA_MAX_BYTES: usize = 256 << 10;
/// A plugin MUST declare at most this many dependencies.
pub const DEPENDENCIES_MAX: usize = 32;
/// A dependency's name and field MUST be non-empty, printable and at most this many bytes.
pub const DEPENDENCY_NAME_MAX_LEN: usize = 253;
/// An id MUST be non-empty, printable (no control or invisible formatting characters) and at
/// most this many bytes: it is stored in `status.id` and shown in messages.
pub const ID_MAX_BYTES: usize = 253;
/// A resource's `state` MUST be JSON of at most this many bytes.
pub const STATE_MAX_BYTES: usize = 1 << 20;
/// `observed` MUST be a JSON object or `null` of at most this many bytes: it is written to
/// `status.resource`.
pub const OBSERVED_MAX_BYTES: usize = 256 << 10;
/// `list-for-adoption` and `list-for-import` MUST return at most this many entries.
pub const LIST_MAX_ENTRIES: usize = 1000;
/// Most API versions `conversion.versions` may list.
pub const VERSIONS_MAX: usize = 16;
/// Most bytes of the `resource` or `filter` document a conversion answers (the apiserver's own
/// limit on a whole object is 1.5 MiB).
pub const CONVERTED_MAX_BYTES: usize = 1 << 20;
/// Most bytes of annotations (keys and values) a conversion answers: the apiserver's limit.
pub const ANNOTATIONS_MAX_BYTES: usize = 256 << 10;
/// `reconcilers` MUST return at most this many names.
pub const RECONCILERS_MAX: usize = 64;
/// A reconciler name MUST be non-empty, printable and at most this many bytes.
pub const RECONCILER_NAME_MAX_LEN: usize = 253;
/// A status MUST carry at most this many progress entries.
pub const PROGRESS_MAX: usize = 32;
/// A failure or progress message SHOULD be at most this many bytes; a longer one is cut to
/// this size (marker included) and ends with [`TRUNCATION_MARKER`].
pub const MESSAGE_MAX_BYTES: usize = 4 << 10;
/// What ends a message the host cut.
pub const TRUNCATION_MARKER: &str = "…(truncated by the host)";
/// A poll interval SHOULD be at most this long; a longer one is clamped to it.
pub const POLL_AFTER_MAX: Duration = Duration::from_hours(24);

/// A rule of the contract an answer broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rule {
    /// `describe().name`: see [`PLUGIN_NAME_MAX_LEN`].
    PluginName,
    /// `describe().group`: see [`GROUP_MAX_LEN`].
    Group,
    /// `describe().version`: see [`LABEL_MAX_LEN`].
    Version,
    /// `describe().kind`, a dependency's kind, a waited-on object's kind: see [`KIND_MAX_LEN`].
    Kind,
    /// `describe().plural`: see [`LABEL_MAX_LEN`].
    Plural,
    /// A schema of `describe()`: see [`SCHEMA_MAX_BYTES`].
    Schema,
    /// A dependency declaration: see [`DEPENDENCIES_MAX`] and [`DEPENDENCY_NAME_MAX_LEN`].
    Dependency,
    /// An id: see [`ID_MAX_BYTES`].
    Id,
    /// `get-by-id` answered a resource with another id than the one asked for.
    IdMismatch,
    /// A JSON document that does not parse.
    Json,
    /// A `state` over [`STATE_MAX_BYTES`].
    StateSize,
    /// An `observed` over [`OBSERVED_MAX_BYTES`], or not an object or null.
    Observed,
    /// A list over [`LIST_MAX_ENTRIES`].
    ListLength,
    /// `reconcilers`: see [`RECONCILERS_MAX`] and [`RECONCILER_NAME_MAX_LEN`].
    Reconcilers,
    /// A status over [`PROGRESS_MAX`] progress entries.
    ProgressCount,
    /// A waited-on object's name: non-empty, printable, at most 253 bytes.
    ObjectRef,
    /// `conversion.versions`: see [`VERSIONS_MAX`]; names DNS-1123 labels, unique, exactly
    /// one storage version, the description's version listed with its schemas.
    Versions,
    /// `conversion.convert`: documents of the right shape, see [`CONVERTED_MAX_BYTES`] and
    /// [`ANNOTATIONS_MAX_BYTES`].
    Converted,
}

impl Rule {
    /// The rule's stable name, as shown in errors and conditions.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PluginName => "plugin-name",
            Self::Group => "group",
            Self::Version => "version",
            Self::Kind => "kind",
            Self::Plural => "plural",
            Self::Schema => "schema",
            Self::Dependency => "dependency",
            Self::Id => "id",
            Self::IdMismatch => "id-mismatch",
            Self::Json => "json",
            Self::StateSize => "state-size",
            Self::Observed => "observed",
            Self::ListLength => "list-length",
            Self::Reconcilers => "reconcilers",
            Self::ProgressCount => "progress-count",
            Self::ObjectRef => "object-ref",
            Self::Versions => "versions",
            Self::Converted => "converted",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `describe()` as a plugin returned it: names as text, schemas as JSON text.
#[derive(Debug, Clone, PartialEq)]
pub struct RawDescription {
    /// Short plugin name, not yet checked against `[a-z0-9-]+`.
    pub name: String,
    /// API group, not yet checked.
    pub group: String,
    /// API version, not yet checked.
    pub version: String,
    /// Kind, not yet checked.
    pub kind: String,
    /// Plural, not yet checked.
    pub plural: String,
    /// Schema of `spec.resource`, JSON text not yet parsed.
    pub resource_schema: String,
    /// Schema of `spec.import.filter`, JSON text not yet parsed.
    pub filter_schema: Option<String>,
    /// Schema of `status.resource`, JSON text not yet parsed.
    pub observed_schema: String,
    /// Declared dependencies, not yet checked.
    pub dependencies: Vec<DependencyDecl>,
    /// Whether the objects carry `spec.credentialsRef`.
    pub needs_credentials: bool,
}

/// One entry of `conversion.versions()` as a plugin returned it.
#[derive(Debug, Clone, PartialEq)]
pub struct RawApiVersion {
    /// The version's name, not yet checked.
    pub name: String,
    /// Schema of `spec.resource`, JSON text not yet parsed.
    pub resource_schema: String,
    /// Schema of `spec.import.filter`, JSON text not yet parsed.
    pub filter_schema: Option<String>,
    /// Schema of `status.resource`, JSON text not yet parsed.
    pub observed_schema: String,
    /// Whether it is the storage version.
    pub storage: bool,
}

/// What `conversion.convert` answered: documents as JSON text, not yet parsed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RawConvertible {
    /// `spec.resource`.
    pub resource: Option<String>,
    /// `spec.import.filter`.
    pub filter: Option<String>,
    /// `status.resource`.
    pub observed: Option<String>,
    /// Annotations.
    pub annotations: Vec<(String, String)>,
}

/// One call's view of the contract: who answered (`plugin`) and to what (`function`), so that
/// every violation names both.
#[derive(Debug, Clone, Copy)]
pub struct Boundary<'a> {
    /// The plugin that answered.
    pub plugin: &'a str,
    /// The contract function it answered.
    pub function: &'static str,
}

impl<'a> Boundary<'a> {
    /// The boundary of `function` of `plugin`.
    pub fn new(plugin: &'a str, function: &'static str) -> Self {
        Self { plugin, function }
    }

    fn violation(&self, rule: Rule, detail: impl Into<String>) -> CallError {
        CallError::Contract {
            plugin: self.plugin.to_owned(),
            function: self.function,
            rule,
            detail: detail.into(),
        }
    }

    /// Validates `describe()`.
    ///
    /// # Errors
    ///
    /// The first rule broken, in the order name, group, version, kind, plural, schemas,
    /// dependencies.
    pub fn description(&self, d: RawDescription) -> CallResult<Description> {
        if !is_dns_label(&d.name, PLUGIN_NAME_MAX_LEN) {
            return Err(self.violation(
                Rule::PluginName,
                format!(
                    "name {} must match [a-z0-9]([-a-z0-9]*[a-z0-9])? and be at most {PLUGIN_NAME_MAX_LEN} characters",
                    preview(&d.name)
                ),
            ));
        }
        if !is_dns_subdomain(&d.group) || !d.group.contains('.') {
            return Err(self.violation(
                Rule::Group,
                format!(
                    "group {} must be a DNS-1123 subdomain with at least one dot",
                    preview(&d.group)
                ),
            ));
        }
        if !is_dns_label(&d.version, LABEL_MAX_LEN) {
            return Err(self.violation(
                Rule::Version,
                format!("version {} must be a DNS-1123 label", preview(&d.version)),
            ));
        }
        self.kind("kind", &d.kind)?;
        if !is_dns_label(&d.plural, LABEL_MAX_LEN) {
            return Err(self.violation(
                Rule::Plural,
                format!(
                    "plural {} must be a DNS-1123 label (it goes into URL paths)",
                    preview(&d.plural)
                ),
            ));
        }
        let resource_schema = self.schema("resource-schema", &d.resource_schema)?;
        let observed_schema = self.schema("observed-schema", &d.observed_schema)?;
        let filter_schema = d
            .filter_schema
            .as_deref()
            .map(|s| self.schema("filter-schema", s))
            .transpose()?;
        if d.dependencies.len() > DEPENDENCIES_MAX {
            return Err(self.violation(
                Rule::Dependency,
                format!(
                    "{} dependencies declared, at most {DEPENDENCIES_MAX}",
                    d.dependencies.len()
                ),
            ));
        }
        for (i, dep) in d.dependencies.iter().enumerate() {
            for (what, value) in [("name", &dep.name), ("field", &dep.field)] {
                if value.is_empty()
                    || value.len() > DEPENDENCY_NAME_MAX_LEN
                    || first_unprintable(value).is_some()
                {
                    return Err(self.violation(
                        Rule::Dependency,
                        format!(
                            "dependency {i}: {what} {} must be non-empty, printable and at most {DEPENDENCY_NAME_MAX_LEN} bytes",
                            preview(value)
                        ),
                    ));
                }
            }
            self.kind(&format!("dependency {i} ({}): kind", dep.name), &dep.kind)?;
        }
        Ok(Description {
            name: d.name,
            group: d.group,
            version: d.version,
            kind: d.kind,
            plural: d.plural,
            resource_schema,
            filter_schema,
            observed_schema,
            dependencies: d.dependencies,
            needs_credentials: d.needs_credentials,
            versions: Vec::new(),
            shortcuts: Shortcuts::default(),
        })
    }

    fn kind(&self, what: &str, kind: &str) -> CallResult<()> {
        if is_kind(kind) {
            return Ok(());
        }
        Err(self.violation(
            Rule::Kind,
            format!(
                "{what} {} must match [A-Z][A-Za-z0-9]* and be at most {KIND_MAX_LEN} characters",
                preview(kind)
            ),
        ))
    }

    fn schema(&self, field: &str, text: &str) -> CallResult<Value> {
        if text.len() > SCHEMA_MAX_BYTES {
            return Err(self.violation(
                Rule::Schema,
                format!(
                    "{field} is {} bytes, at most {SCHEMA_MAX_BYTES}",
                    text.len()
                ),
            ));
        }
        let value: Value = serde_json::from_str(text)
            .map_err(|e| self.violation(Rule::Json, format!("{field}: {e}")))?;
        if !value.is_object() {
            return Err(self.violation(Rule::Schema, format!("{field} must be a JSON object")));
        }
        Ok(value)
    }

    /// Validates `conversion.versions()` against the description `d` it completes.
    ///
    /// # Errors
    ///
    /// [`Rule::Versions`] (count, names, storage, the description's version) or the schema
    /// rules of `describe`.
    pub fn versions(
        &self,
        d: &Description,
        raw: Vec<RawApiVersion>,
    ) -> CallResult<Vec<ApiVersion>> {
        if raw.is_empty() {
            // The export is there, the kind has one version (an SDK exports it always).
            return Ok(Vec::new());
        }
        if raw.len() > VERSIONS_MAX {
            return Err(self.violation(
                Rule::Versions,
                format!("{} versions listed, at most {VERSIONS_MAX}", raw.len()),
            ));
        }
        let mut versions: Vec<ApiVersion> = Vec::with_capacity(raw.len());
        for v in raw {
            if !is_dns_label(&v.name, LABEL_MAX_LEN) {
                return Err(self.violation(
                    Rule::Versions,
                    format!("version {} must be a DNS-1123 label", preview(&v.name)),
                ));
            }
            if versions.iter().any(|seen| seen.name == v.name) {
                return Err(self.violation(
                    Rule::Versions,
                    format!("version {} is listed twice", v.name),
                ));
            }
            let field = |what: &str| format!("version {}: {what}", v.name);
            versions.push(ApiVersion {
                resource_schema: self.schema(&field("resource-schema"), &v.resource_schema)?,
                observed_schema: self.schema(&field("observed-schema"), &v.observed_schema)?,
                filter_schema: v
                    .filter_schema
                    .as_deref()
                    .map(|f| self.schema(&field("filter-schema"), f))
                    .transpose()?,
                name: v.name,
                storage: v.storage,
            });
        }
        let storage: Vec<&str> = versions
            .iter()
            .filter(|v| v.storage)
            .map(|v| v.name.as_str())
            .collect();
        if storage.len() != 1 {
            return Err(self.violation(
                Rule::Versions,
                format!(
                    "exactly one version must be the storage version, {} are ({})",
                    storage.len(),
                    storage.join(", ")
                ),
            ));
        }
        match versions.iter().find(|v| v.name == d.version) {
            None => Err(self.violation(
                Rule::Versions,
                format!(
                    "the description's version {} is not listed (the host calls the actuator at it)",
                    d.version
                ),
            )),
            Some(v)
                if v.resource_schema != d.resource_schema
                    || v.observed_schema != d.observed_schema
                    || v.filter_schema != d.filter_schema =>
            {
                Err(self.violation(
                    Rule::Versions,
                    format!(
                        "version {} lists other schemas than the description's, which is at that version",
                        d.version
                    ),
                ))
            }
            Some(_) => Ok(versions),
        }
    }

    /// Validates what `conversion.convert` answered.
    ///
    /// # Errors
    ///
    /// [`Rule::Json`] for a document that does not parse, [`Rule::Converted`] for one over
    /// its bound or of the wrong type, annotations over [`ANNOTATIONS_MAX_BYTES`].
    pub fn converted(&self, raw: RawConvertible) -> CallResult<Convertible> {
        let document =
            |what: &str, text: Option<String>, max: usize| -> CallResult<Option<Value>> {
                let Some(text) = text else { return Ok(None) };
                if text.len() > max {
                    return Err(self.violation(
                        Rule::Converted,
                        format!("{what} is {} bytes, at most {max}", text.len()),
                    ));
                }
                let value: Value = serde_json::from_str(&text)
                    .map_err(|e| self.violation(Rule::Json, format!("{what}: {e}")))?;
                if !value.is_object() {
                    return Err(
                        self.violation(Rule::Converted, format!("{what} must be a JSON object"))
                    );
                }
                Ok(Some(value))
            };
        let annotations: usize = raw.annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
        if annotations > ANNOTATIONS_MAX_BYTES {
            return Err(self.violation(
                Rule::Converted,
                format!("annotations are {annotations} bytes, at most {ANNOTATIONS_MAX_BYTES}"),
            ));
        }
        Ok(Convertible {
            resource: document("resource", raw.resource, CONVERTED_MAX_BYTES)?,
            filter: document("filter", raw.filter, CONVERTED_MAX_BYTES)?,
            observed: document("observed", raw.observed, OBSERVED_MAX_BYTES)?,
            annotations: raw.annotations,
        })
    }

    /// Checks an id.
    ///
    /// # Errors
    ///
    /// [`Rule::Id`] when it is empty, too long or not printable.
    pub fn id(&self, id: &str) -> CallResult<()> {
        if id.is_empty() {
            return Err(self.violation(Rule::Id, "empty id"));
        }
        if id.len() > ID_MAX_BYTES {
            return Err(self.violation(
                Rule::Id,
                format!(
                    "id of {} bytes, at most {ID_MAX_BYTES}: {}",
                    id.len(),
                    preview(id)
                ),
            ));
        }
        if let Some((at, c)) = first_unprintable(id) {
            return Err(self.violation(
                Rule::Id,
                format!(
                    "id {} has the unprintable character U+{:04X} at byte {at}",
                    preview(id),
                    u32::from(c)
                ),
            ));
        }
        Ok(())
    }

    /// Decodes an external resource: a valid id and a bounded JSON state.
    ///
    /// # Errors
    ///
    /// [`Rule::Id`], [`Rule::StateSize`] or [`Rule::Json`].
    pub fn resource(&self, id: String, state: &str) -> CallResult<ExternalResource> {
        self.id(&id)?;
        if state.len() > STATE_MAX_BYTES {
            return Err(self.violation(
                Rule::StateSize,
                format!("state of {} bytes, at most {STATE_MAX_BYTES}", state.len()),
            ));
        }
        let state = serde_json::from_str(state)
            .map_err(|e| self.violation(Rule::Json, format!("external-resource.state: {e}")))?;
        Ok(ExternalResource { id, state })
    }

    /// Decodes the answer of `get-by-id(asked)`: a resource whose id is the one asked for.
    ///
    /// # Errors
    ///
    /// As [`Self::resource`], and [`Rule::IdMismatch`].
    pub fn resource_for_id(
        &self,
        asked: &str,
        id: String,
        state: &str,
    ) -> CallResult<ExternalResource> {
        self.id(&id)?;
        if id != asked {
            return Err(self.violation(
                Rule::IdMismatch,
                format!(
                    "asked for id {}, answered id {}",
                    preview(asked),
                    preview(&id)
                ),
            ));
        }
        self.resource(id, state)
    }

    /// Decodes a list of resources of at most [`LIST_MAX_ENTRIES`].
    ///
    /// # Errors
    ///
    /// [`Rule::ListLength`], or what [`Self::resource`] refuses (naming the entry).
    pub fn resources<T>(
        &self,
        list: Vec<T>,
        parts: impl Fn(T) -> (String, String),
    ) -> CallResult<Vec<ExternalResource>> {
        if list.len() > LIST_MAX_ENTRIES {
            return Err(self.violation(
                Rule::ListLength,
                format!("{} entries, at most {LIST_MAX_ENTRIES}", list.len()),
            ));
        }
        list.into_iter()
            .enumerate()
            .map(|(i, entry)| {
                let (id, state) = parts(entry);
                self.resource(id, &state).map_err(|e| match e {
                    CallError::Contract {
                        plugin,
                        function,
                        rule,
                        detail,
                    } => CallError::Contract {
                        plugin,
                        function,
                        rule,
                        detail: format!("entry {i}: {detail}"),
                    },
                    other => other,
                })
            })
            .collect()
    }

    /// Decodes `observed()`: a JSON object or `null`, bounded for `status.resource`.
    ///
    /// # Errors
    ///
    /// [`Rule::Observed`] or [`Rule::Json`].
    pub fn observed(&self, text: &str) -> CallResult<Value> {
        if text.len() > OBSERVED_MAX_BYTES {
            return Err(self.violation(
                Rule::Observed,
                format!(
                    "observed is {} bytes, at most {OBSERVED_MAX_BYTES} (it is written to status.resource)",
                    text.len()
                ),
            ));
        }
        let value: Value = serde_json::from_str(text)
            .map_err(|e| self.violation(Rule::Json, format!("observed: {e}")))?;
        if !(value.is_object() || value.is_null()) {
            return Err(self.violation(Rule::Observed, "observed must be a JSON object or null"));
        }
        Ok(value)
    }

    /// Checks the names of `reconcilers()`.
    ///
    /// # Errors
    ///
    /// [`Rule::Reconcilers`].
    pub fn reconcilers(&self, names: Vec<String>) -> CallResult<Vec<String>> {
        if names.len() > RECONCILERS_MAX {
            return Err(self.violation(
                Rule::Reconcilers,
                format!("{} names, at most {RECONCILERS_MAX}", names.len()),
            ));
        }
        if let Some((i, name)) = names.iter().enumerate().find(|(_, n)| {
            n.is_empty() || n.len() > RECONCILER_NAME_MAX_LEN || first_unprintable(n).is_some()
        }) {
            return Err(self.violation(
                Rule::Reconcilers,
                format!(
                    "name {i} ({}) must be non-empty, printable and at most {RECONCILER_NAME_MAX_LEN} bytes",
                    preview(name)
                ),
            ));
        }
        Ok(names)
    }

    /// Bounds a failure: its message is truncated to [`MESSAGE_MAX_BYTES`].
    pub fn failure(&self, f: Failure) -> Failure {
        match f {
            Failure::Transient(m) => Failure::Transient(truncate_message(m)),
            Failure::InvalidConfiguration(m) => Failure::InvalidConfiguration(truncate_message(m)),
            Failure::Unrecoverable(m) => Failure::Unrecoverable(truncate_message(m)),
        }
    }

    /// Validates and bounds a status: at most [`PROGRESS_MAX`] entries, messages truncated,
    /// poll intervals clamped to [`POLL_AFTER_MAX`], waited-on objects well named.
    ///
    /// # Errors
    ///
    /// [`Rule::ProgressCount`], [`Rule::Kind`] or [`Rule::ObjectRef`].
    pub fn status(&self, s: Status) -> CallResult<Status> {
        if s.progress.len() > PROGRESS_MAX {
            return Err(self.violation(
                Rule::ProgressCount,
                format!(
                    "{} progress entries, at most {PROGRESS_MAX}",
                    s.progress.len()
                ),
            ));
        }
        let progress = s
            .progress
            .into_iter()
            .map(|p| {
                Ok(match p {
                    Progress::WaitingOnExternal {
                        event,
                        message,
                        poll_after,
                    } => Progress::WaitingOnExternal {
                        event,
                        message: truncate_message(message),
                        poll_after: poll_after.min(POLL_AFTER_MAX),
                    },
                    Progress::WaitingOnObject { kind, name, event } => {
                        self.kind("waiting-on-object: kind", &kind)?;
                        if name.is_empty()
                            || name.len() > GROUP_MAX_LEN
                            || first_unprintable(&name).is_some()
                        {
                            return Err(self.violation(
                                Rule::ObjectRef,
                                format!(
                                    "waiting-on-object: name {} must be non-empty, printable and at most {GROUP_MAX_LEN} bytes",
                                    preview(&name)
                                ),
                            ));
                        }
                        Progress::WaitingOnObject { kind, name, event }
                    }
                    Progress::NeedsRefresh { message } => Progress::NeedsRefresh {
                        message: truncate_message(message),
                    },
                })
            })
            .collect::<CallResult<_>>()?;
        Ok(Status {
            progress,
            failure: s.failure.map(|f| self.failure(f)),
        })
    }
}

/// Cuts `message` to at most [`MESSAGE_MAX_BYTES`] (at a character boundary), the last bytes
/// being [`TRUNCATION_MARKER`]. Shorter messages are returned as they are.
pub fn truncate_message(message: String) -> String {
    if message.len() <= MESSAGE_MAX_BYTES {
        return message;
    }
    cut(&message, MESSAGE_MAX_BYTES, TRUNCATION_MARKER)
}

/// `text` cut to at most `max` bytes at a character boundary, ending with `marker` when cut.
pub fn cut(text: &str, max: usize, marker: &str) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max.saturating_sub(marker.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{marker}", &text[..end])
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?` of at most `max` characters.
fn is_dns_label(s: &str, max: usize) -> bool {
    let b = s.as_bytes();
    let inner = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            b.len() <= max
                && inner(first)
                && inner(last)
                && b.iter().all(|c| inner(c) || *c == b'-')
        }
        _ => false,
    }
}

/// DNS-1123 labels joined by dots, at most [`GROUP_MAX_LEN`] characters.
fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= GROUP_MAX_LEN && s.split('.').all(|label| is_dns_label(label, LABEL_MAX_LEN))
}

/// `[A-Z][A-Za-z0-9]*` of at most [`KIND_MAX_LEN`] characters.
fn is_kind(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() <= KIND_MAX_LEN
        && b.first().is_some_and(u8::is_ascii_uppercase)
        && b.iter().all(u8::is_ascii_alphanumeric)
}

/// The first character that would not print as itself: control characters (C0, DEL, C1),
/// and the invisible formatting characters that disguise text (zero-width, bidi overrides,
/// line/paragraph separators, BOM).
fn first_unprintable(s: &str) -> Option<(usize, char)> {
    s.char_indices().find(|&(_, c)| {
        c.is_control()
            || matches!(c, '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
    })
}

/// A value for an error message: quoted and escaped, cut after 64 characters.
fn preview(s: &str) -> String {
    const MAX: usize = 64;
    let cut: String = s.chars().take(MAX).collect();
    if cut.len() < s.len() {
        format!("{cut:?}…")
    } else {
        format!("{cut:?}")
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "test code")]
mod tests {
    use super::*;
    use crate::actuator::WaitEvent;

    fn b() -> Boundary<'static> {
        Boundary::new("faulty", "describe")
    }

    fn good_description() -> RawDescription {
        RawDescription {
            name: "pdns-zone".into(),
            group: "pdns.orchard.dev".into(),
            version: "v1alpha1".into(),
            kind: "DnsZone".into(),
            plural: "dnszones".into(),
            resource_schema: r#"{"type":"object"}"#.into(),
            filter_schema: Some(r#"{"type":"object"}"#.into()),
            observed_schema: r#"{"type":"object"}"#.into(),
            dependencies: vec![DependencyDecl {
                name: "zone".into(),
                field: "zoneRef".into(),
                kind: "DnsZone".into(),
                for_create: true,
                for_delete: false,
                guard_deletion: true,
            }],
            needs_credentials: false,
        }
    }

    fn rule_of(r: CallResult<impl fmt::Debug>) -> Option<Rule> {
        match r {
            Ok(_) => None,
            Err(CallError::Contract { rule, .. }) => Some(rule),
            Err(other) => panic!("not a contract error: {other:?}"),
        }
    }

    #[test]
    fn a_valid_description_passes_with_its_schemas_parsed() {
        let d = b().description(good_description()).unwrap();
        assert_eq!(d.name, "pdns-zone");
        assert_eq!(d.resource_schema["type"], "object");
        assert!(d.filter_schema.is_some());
    }

    #[test]
    fn every_description_rule_refuses_what_it_must() {
        type Edit = fn(&mut RawDescription);
        let cases: &[(&str, Edit, Option<Rule>)] = &[
            (
                "name with underscore and capital",
                |d| d.name = "Bad_Name".into(),
                Some(Rule::PluginName),
            ),
            (
                "empty name",
                |d| d.name = String::new(),
                Some(Rule::PluginName),
            ),
            (
                "name starting with a dash",
                |d| d.name = "-zone".into(),
                Some(Rule::PluginName),
            ),
            (
                "name ending with a dash",
                |d| d.name = "zone-".into(),
                Some(Rule::PluginName),
            ),
            (
                "name of 41 characters",
                |d| d.name = "a".repeat(41),
                Some(Rule::PluginName),
            ),
            ("name of 40 characters", |d| d.name = "a".repeat(40), None),
            ("digits-only name", |d| d.name = "0".into(), None),
            (
                "group without a dot",
                |d| d.group = "orchard".into(),
                Some(Rule::Group),
            ),
            (
                "group with a capital",
                |d| d.group = "Pdns.orchard.dev".into(),
                Some(Rule::Group),
            ),
            (
                "group with an empty label",
                |d| d.group = "pdns..dev".into(),
                Some(Rule::Group),
            ),
            (
                "group with a slash",
                |d| d.group = "a/b.dev".into(),
                Some(Rule::Group),
            ),
            (
                "group of 254 characters",
                |d| d.group = format!("{}.dev", "a.".repeat(125)),
                Some(Rule::Group),
            ),
            (
                "version with a dot",
                |d| d.version = "v1.0".into(),
                Some(Rule::Version),
            ),
            (
                "empty version",
                |d| d.version = String::new(),
                Some(Rule::Version),
            ),
            (
                "kind in lower case",
                |d| d.kind = "dnsZone".into(),
                Some(Rule::Kind),
            ),
            (
                "kind with a dash",
                |d| d.kind = "Dns-Zone".into(),
                Some(Rule::Kind),
            ),
            (
                "kind of 64 characters",
                |d| d.kind = format!("K{}", "a".repeat(63)),
                Some(Rule::Kind),
            ),
            (
                "kind of 63 characters",
                |d| d.kind = format!("K{}", "a".repeat(62)),
                None,
            ),
            (
                "plural escaping the URL path",
                |d| d.plural = "../x".into(),
                Some(Rule::Plural),
            ),
            (
                "plural with a capital",
                |d| d.plural = "DnsZones".into(),
                Some(Rule::Plural),
            ),
            (
                "plural of 64 characters",
                |d| d.plural = "a".repeat(64),
                Some(Rule::Plural),
            ),
            (
                "schema that is an array",
                |d| d.resource_schema = "[]".into(),
                Some(Rule::Schema),
            ),
            (
                "schema that does not parse",
                |d| d.observed_schema = "{".into(),
                Some(Rule::Json),
            ),
            (
                "filter schema that is a string",
                |d| d.filter_schema = Some(r#""x""#.into()),
                Some(Rule::Schema),
            ),
            (
                "schema over the size limit",
                |d| d.resource_schema = format!(r#"{{"d":"{}"}}"#, "x".repeat(SCHEMA_MAX_BYTES)),
                Some(Rule::Schema),
            ),
            (
                "dependency without a name",
                |d| d.dependencies[0].name = String::new(),
                Some(Rule::Dependency),
            ),
            (
                "dependency without a field",
                |d| d.dependencies[0].field = String::new(),
                Some(Rule::Dependency),
            ),
            (
                "dependency field with a newline",
                |d| d.dependencies[0].field = "a\nb".into(),
                Some(Rule::Dependency),
            ),
            (
                "dependency name of 254 bytes",
                |d| d.dependencies[0].name = "a".repeat(254),
                Some(Rule::Dependency),
            ),
            (
                "dependency of an invalid kind",
                |d| d.dependencies[0].kind = "secret".into(),
                Some(Rule::Kind),
            ),
            (
                "33 dependencies",
                |d| d.dependencies = vec![d.dependencies[0].clone(); 33],
                Some(Rule::Dependency),
            ),
        ];
        for (case, edit, expected) in cases {
            let mut d = good_description();
            edit(&mut d);
            assert_eq!(rule_of(b().description(d)), *expected, "{case}");
        }
    }

    #[test]
    fn a_contract_error_names_plugin_function_and_rule() {
        let mut d = good_description();
        d.plural = "../x".into();
        let text = b().description(d).unwrap_err().to_string();
        assert_eq!(
            text,
            "plugin faulty: describe broke the contract (rule plural): plural \"../x\" must be a DNS-1123 label (it goes into URL paths)"
        );
    }

    #[test]
    fn every_id_rule_refuses_what_it_must() {
        let cases: &[(&str, String, Option<Rule>)] = &[
            ("a plain id", "zone-1".into(), None),
            (
                "an id with spaces and unicode",
                "example.org. zöne".into(),
                None,
            ),
            ("an id of 253 bytes", "a".repeat(ID_MAX_BYTES), None),
            ("an empty id", String::new(), Some(Rule::Id)),
            (
                "an id of 254 bytes",
                "a".repeat(ID_MAX_BYTES + 1),
                Some(Rule::Id),
            ),
            ("an id with a newline", "a\nb".into(), Some(Rule::Id)),
            (
                "an id with an escape sequence",
                "a\u{1b}[31m".into(),
                Some(Rule::Id),
            ),
            ("an id with DEL", "a\u{7f}".into(), Some(Rule::Id)),
            ("an id with a C1 control", "a\u{85}".into(), Some(Rule::Id)),
            (
                "an id with a bidi override",
                "a\u{202e}b".into(),
                Some(Rule::Id),
            ),
            (
                "an id with a zero-width space",
                "a\u{200b}b".into(),
                Some(Rule::Id),
            ),
        ];
        for (case, id, expected) in cases {
            let got = rule_of(Boundary::new("p", "create").resource(id.clone(), "{}"));
            assert_eq!(got, *expected, "{case}");
        }
    }

    #[test]
    fn an_error_about_a_long_id_shows_only_its_beginning() {
        let err = Boundary::new("p", "create")
            .resource("x".repeat(5000), "{}")
            .unwrap_err()
            .to_string();
        assert!(err.len() < 300, "{err}");
        assert!(err.contains("5000 bytes"), "{err}");
    }

    #[test]
    fn get_by_id_answering_another_id_is_a_contract_violation() {
        let b = Boundary::new("p", "get-by-id");
        assert_eq!(
            rule_of(b.resource_for_id("zone-1", "zone-2".into(), "{}")),
            Some(Rule::IdMismatch)
        );
        assert_eq!(
            rule_of(b.resource_for_id("zone-1", "zone-1".into(), "{}")),
            None
        );
        // An invalid id is reported as such, before the mismatch.
        assert_eq!(
            rule_of(b.resource_for_id("zone-1", String::new(), "{}")),
            Some(Rule::Id)
        );
    }

    #[test]
    fn every_state_rule_refuses_what_it_must() {
        let big = format!(r#""{}""#, "x".repeat(STATE_MAX_BYTES - 2));
        let too_big = format!(r#""{}""#, "x".repeat(STATE_MAX_BYTES - 1));
        let cases: &[(&str, &str, Option<Rule>)] = &[
            ("an object", r#"{"a":1}"#, None),
            ("any JSON value", "[1,2]", None),
            ("exactly the limit", &big, None),
            ("one byte over the limit", &too_big, Some(Rule::StateSize)),
            ("text that does not parse", "{not json", Some(Rule::Json)),
            ("empty text", "", Some(Rule::Json)),
        ];
        for (case, state, expected) in cases {
            let got = rule_of(Boundary::new("p", "get-by-id").resource("id".into(), state));
            assert_eq!(got, *expected, "{case}");
        }
    }

    #[test]
    fn every_observed_rule_refuses_what_it_must() {
        let too_big = format!(r#"{{"a":"{}"}}"#, "x".repeat(OBSERVED_MAX_BYTES));
        let cases: &[(&str, &str, Option<Rule>)] = &[
            ("an object", r#"{"a":1}"#, None),
            ("null", "null", None),
            ("an array", "[1]", Some(Rule::Observed)),
            ("a number", "1", Some(Rule::Observed)),
            ("over the limit", &too_big, Some(Rule::Observed)),
            ("text that does not parse", "{", Some(Rule::Json)),
        ];
        for (case, text, expected) in cases {
            let got = rule_of(Boundary::new("p", "observed").observed(text));
            assert_eq!(got, *expected, "{case}");
        }
    }

    #[test]
    fn every_list_rule_refuses_what_it_must() {
        let b = Boundary::new("p", "list-for-adoption");
        let list = |n: usize| -> Vec<(String, String)> {
            (0..n).map(|i| (format!("r{i}"), "{}".to_owned())).collect()
        };
        assert_eq!(rule_of(b.resources(list(LIST_MAX_ENTRIES), |e| e)), None);
        assert_eq!(
            rule_of(b.resources(list(LIST_MAX_ENTRIES + 1), |e| e)),
            Some(Rule::ListLength)
        );
        let mut bad = list(3);
        bad[2].0 = "a\tb".into();
        let err = b.resources(bad, |e| e).unwrap_err().to_string();
        assert!(err.contains("entry 2") && err.contains("rule id"), "{err}");
    }

    #[test]
    fn every_reconcilers_rule_refuses_what_it_must() {
        let names = |n: usize| -> Vec<String> { (0..n).map(|i| format!("step-{i}")).collect() };
        let cases: &[(&str, Vec<String>, Option<Rule>)] = &[
            ("64 names", names(RECONCILERS_MAX), None),
            ("none", vec![], None),
            (
                "65 names",
                names(RECONCILERS_MAX + 1),
                Some(Rule::Reconcilers),
            ),
            (
                "an empty name",
                vec![String::new()],
                Some(Rule::Reconcilers),
            ),
            (
                "a name of 254 bytes",
                vec!["a".repeat(254)],
                Some(Rule::Reconcilers),
            ),
            (
                "a name with a control character",
                vec!["a\u{0}".into()],
                Some(Rule::Reconcilers),
            ),
        ];
        for (case, list, expected) in cases {
            let got = rule_of(Boundary::new("p", "reconcilers").reconcilers(list.clone()));
            assert_eq!(got, *expected, "{case}");
        }
    }

    fn external(message: &str, poll_after: Duration) -> Progress {
        Progress::WaitingOnExternal {
            event: WaitEvent::Ready,
            message: message.into(),
            poll_after,
        }
    }

    #[test]
    fn every_status_rule_refuses_what_it_must() {
        let object = |kind: &str, name: &str| Progress::WaitingOnObject {
            kind: kind.into(),
            name: name.into(),
            event: WaitEvent::Ready,
        };
        let cases: &[(&str, Vec<Progress>, Option<Rule>)] = &[
            (
                "32 entries",
                vec![external("m", Duration::ZERO); PROGRESS_MAX],
                None,
            ),
            (
                "33 entries",
                vec![external("m", Duration::ZERO); PROGRESS_MAX + 1],
                Some(Rule::ProgressCount),
            ),
            (
                "a waited-on object",
                vec![object("DnsZone", "zone-a")],
                None,
            ),
            (
                "a waited-on object of a bad kind",
                vec![object("dns zone", "zone-a")],
                Some(Rule::Kind),
            ),
            (
                "a waited-on object without a name",
                vec![object("DnsZone", "")],
                Some(Rule::ObjectRef),
            ),
            (
                "a waited-on object with a newline in its name",
                vec![object("DnsZone", "a\nb")],
                Some(Rule::ObjectRef),
            ),
        ];
        for (case, progress, expected) in cases {
            let s = Status {
                progress: progress.clone(),
                failure: None,
            };
            let got = rule_of(Boundary::new("p", "create").status(s));
            assert_eq!(got, *expected, "{case}");
        }
    }

    #[test]
    fn poll_after_is_clamped_to_a_day() {
        let s = Status {
            progress: vec![
                external("far", Duration::from_hours(1200)),
                external("near", Duration::from_secs(5)),
            ],
            failure: None,
        };
        let s = Boundary::new("p", "create").status(s).unwrap();
        assert_eq!(s.progress[0], external("far", POLL_AFTER_MAX));
        assert_eq!(s.progress[1], external("near", Duration::from_secs(5)));
    }

    #[test]
    fn long_messages_are_truncated_with_a_visible_marker_not_refused() {
        let b = Boundary::new("p", "create");
        let long = "é".repeat(5000);
        let s = Status {
            progress: vec![
                external(&long, Duration::ZERO),
                Progress::NeedsRefresh {
                    message: long.clone(),
                },
            ],
            failure: Some(Failure::Transient(long.clone())),
        };
        let s = b.status(s).unwrap();
        let messages: Vec<String> = s
            .progress
            .iter()
            .map(Progress::message)
            .chain(s.failure.as_ref().map(ToString::to_string))
            .collect();
        assert_eq!(messages.len(), 3);
        for m in messages {
            assert!(m.len() <= MESSAGE_MAX_BYTES, "{}", m.len());
            assert!(m.ends_with(TRUNCATION_MARKER));
            assert!(m.starts_with("éé"));
        }
        // Short messages and every failure kind keep their text and kind.
        assert_eq!(
            b.failure(Failure::Unrecoverable("short".into())),
            Failure::Unrecoverable("short".into())
        );
        assert!(matches!(
            b.failure(Failure::InvalidConfiguration("x".repeat(MESSAGE_MAX_BYTES + 1))),
            Failure::InvalidConfiguration(m) if m.ends_with(TRUNCATION_MARKER)
        ));
        assert_eq!(
            truncate_message("x".repeat(MESSAGE_MAX_BYTES)).len(),
            MESSAGE_MAX_BYTES
        );
    }

    /// A version of `good_description()`'s kind: object schemas, `v1alpha1`'s the
    /// description's own.
    fn api_version(name: &str, storage: bool) -> RawApiVersion {
        RawApiVersion {
            name: name.into(),
            resource_schema: r#"{"type":"object"}"#.into(),
            filter_schema: Some(r#"{"type":"object"}"#.into()),
            observed_schema: r#"{"type":"object"}"#.into(),
            storage,
        }
    }

    /// `v1alpha1` (the description's) and `v1beta1`, the storage version, of another shape.
    fn good_versions() -> Vec<RawApiVersion> {
        let mut beta = api_version("v1beta1", true);
        beta.resource_schema =
            r#"{"type":"object","properties":{"nameServers":{"type":"array"}}}"#.into();
        vec![api_version("v1alpha1", false), beta]
    }

    #[test]
    fn valid_versions_pass_with_their_schemas_parsed_and_the_storage_one_marked() {
        let d = b().description(good_description()).unwrap();
        let v = Boundary::new("faulty", "versions")
            .versions(&d, good_versions())
            .unwrap();
        assert_eq!(
            v.iter()
                .map(|v| (v.name.as_str(), v.storage))
                .collect::<Vec<_>>(),
            [("v1alpha1", false), ("v1beta1", true)]
        );
        assert_eq!(
            v[1].resource_schema["properties"]["nameServers"]["type"],
            "array"
        );
        assert_eq!(v[0].filter_schema, d.filter_schema);
    }

    #[test]
    fn an_empty_version_list_means_the_kind_has_one_version() {
        let d = b().description(good_description()).unwrap();
        let v = Boundary::new("faulty", "versions")
            .versions(&d, Vec::new())
            .unwrap();
        assert!(v.is_empty());
    }

    #[test]
    fn every_versions_rule_refuses_what_it_must_naming_the_plugin_and_the_version() {
        type Edit = fn(&mut Vec<RawApiVersion>);
        /// The rule and the beginning of the detail a row is refused with (none: it passes).
        type Refusal = Option<(Rule, &'static str)>;
        let cases: &[(&str, Edit, Refusal)] = &[
            (
                "16 versions, the most allowed",
                |v| v.extend((3..=16).map(|i| api_version(&format!("v{i}"), false))),
                None,
            ),
            (
                "17 versions",
                |v| v.extend((3..=17).map(|i| api_version(&format!("v{i}"), false))),
                Some((Rule::Versions, "17 versions listed, at most 16")),
            ),
            (
                "a version listed twice",
                |v| v.push(api_version("v1beta1", false)),
                Some((Rule::Versions, "version v1beta1 is listed twice")),
            ),
            (
                "a version name that is not a DNS-1123 label",
                |v| v[1].name = "V1.Beta".into(),
                Some((
                    Rule::Versions,
                    "version \"V1.Beta\" must be a DNS-1123 label",
                )),
            ),
            (
                "an empty version name",
                |v| v[1].name = String::new(),
                Some((Rule::Versions, "version \"\" must be a DNS-1123 label")),
            ),
            (
                "no storage version",
                |v| v[1].storage = false,
                Some((
                    Rule::Versions,
                    "exactly one version must be the storage version, 0 are ()",
                )),
            ),
            (
                "two storage versions",
                |v| v[0].storage = true,
                Some((
                    Rule::Versions,
                    "exactly one version must be the storage version, 2 are (v1alpha1, v1beta1)",
                )),
            ),
            (
                "the description's version at storage",
                |v| {
                    v[0].storage = true;
                    v[1].storage = false;
                },
                None,
            ),
            (
                "the description's version not listed",
                |v| v[0].name = "v1alpha2".into(),
                Some((
                    Rule::Versions,
                    "the description's version v1alpha1 is not listed (the host calls the actuator at it)",
                )),
            ),
            (
                "the description's version with another resource schema",
                |v| v[0].resource_schema = r#"{"type":"object","maxProperties":3}"#.into(),
                Some((
                    Rule::Versions,
                    "version v1alpha1 lists other schemas than the description's, which is at that version",
                )),
            ),
            (
                "the description's version with another observed schema",
                |v| v[0].observed_schema = r#"{"type":"object","properties":{}}"#.into(),
                Some((
                    Rule::Versions,
                    "version v1alpha1 lists other schemas than the description's, which is at that version",
                )),
            ),
            (
                "the description's version without its filter schema",
                |v| v[0].filter_schema = None,
                Some((
                    Rule::Versions,
                    "version v1alpha1 lists other schemas than the description's, which is at that version",
                )),
            ),
            (
                "the description's schemas written with other spacing",
                |v| v[0].resource_schema = r#"{ "type" : "object" }"#.into(),
                None,
            ),
            (
                "another version's resource schema that does not parse",
                |v| v[1].resource_schema = "{".into(),
                Some((Rule::Json, "version v1beta1: resource-schema: ")),
            ),
            (
                "another version's observed schema that is an array",
                |v| v[1].observed_schema = "[]".into(),
                Some((
                    Rule::Schema,
                    "version v1beta1: observed-schema must be a JSON object",
                )),
            ),
            (
                "another version's filter schema that is a string",
                |v| v[1].filter_schema = Some(r#""x""#.into()),
                Some((
                    Rule::Schema,
                    "version v1beta1: filter-schema must be a JSON object",
                )),
            ),
            (
                "another version's schema over the size limit",
                |v| {
                    v[1].resource_schema = format!(r#"{{"d":"{}"}}"#, "x".repeat(SCHEMA_MAX_BYTES));
                },
                Some((
                    Rule::Schema,
                    "version v1beta1: resource-schema is 262152 bytes, at most 262144",
                )),
            ),
        ];
        let d = b().description(good_description()).unwrap();
        for (case, edit, expected) in cases {
            let mut v = good_versions();
            edit(&mut v);
            let got = Boundary::new("faulty", "versions").versions(&d, v);
            match (got, expected) {
                (Ok(_), None) => {}
                (Err(e), Some((rule, detail))) => {
                    let text = e.to_string();
                    let head =
                        format!("plugin faulty: versions broke the contract (rule {rule}): ");
                    assert!(
                        text.strip_prefix(&head)
                            .is_some_and(|rest| rest.starts_with(detail)),
                        "{case}: {text}"
                    );
                }
                (got, expected) => panic!("{case}: got {got:?}, expected {expected:?}"),
            }
        }
    }
}
