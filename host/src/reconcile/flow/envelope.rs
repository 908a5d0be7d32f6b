//! The spec envelope of every managed kind, decoded once per pass.
//!
//! The CRD's schema and CEL rules already refuse most malformed envelopes; this layer is
//! what the flows read, so that an object that got past them (an older CRD, a hand-edited
//! one) fails with a clear `InvalidConfiguration` naming the field instead of being read
//! with defaults.

use std::time::Duration;

use serde_json::Value;

/// What `spec.managementPolicy` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Orchard creates, updates and deletes the external resource.
    Managed,
    /// Orchard only reads an imported resource.
    Unmanaged,
}

/// What `spec.managedOptions.onDelete` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnDelete {
    /// Delete the external resource with the object (the default).
    Delete,
    /// Leave it in place.
    Detach,
}

/// `spec.import`: exactly one of id and filter.
#[derive(Debug, Clone, PartialEq)]
pub enum Import {
    /// `spec.import.id`.
    Id(String),
    /// `spec.import.filter`.
    Filter(Value),
}

/// The decoded envelope.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    /// `spec.managementPolicy`: managed or unmanaged.
    pub policy: Policy,
    /// `spec.onDelete`: delete or detach the external resource.
    pub on_delete: OnDelete,
    /// `spec.import`: adopt an existing resource by id or filter.
    pub import: Option<Import>,
    /// `spec.resyncPeriod`; `Some(ZERO)` disables resync, `None` takes the host default.
    pub resync: Option<Duration>,
    /// `spec.credentialsRef.secretName`.
    pub credentials: Option<String>,
    /// `spec.writeConnectionSecretTo.name`: the Secret (same namespace, owned by the object)
    /// that receives the connection details the plugin reports.
    pub connection_secret: Option<String>,
}

impl Envelope {
    /// Whether the object is managed.
    pub fn managed(&self) -> bool {
        self.policy == Policy::Managed
    }

    /// Whether deleting the object leaves the external resource in place.
    pub fn detaches(&self) -> bool {
        !self.managed() || self.on_delete == OnDelete::Detach
    }
}

/// A field of the envelope that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct EnvelopeError {
    /// The field's path, e.g. `spec.resyncPeriod`.
    pub field: &'static str,
    /// What is wrong with it.
    pub problem: String,
}

fn invalid(field: &'static str, problem: impl Into<String>) -> EnvelopeError {
    EnvelopeError {
        field,
        problem: problem.into(),
    }
}

/// An optional string field: absent and null are `None`, anything but a string is an error.
fn string<'a>(value: &'a Value, field: &'static str) -> Result<Option<&'a str>, EnvelopeError> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s)),
        other => Err(invalid(field, format!("must be a string, not {other}"))),
    }
}

/// Decodes the envelope of `spec` (the object's whole `spec`).
pub fn decode(spec: &Value) -> Result<Envelope, EnvelopeError> {
    if !(spec.is_object() || spec.is_null()) {
        return Err(invalid("spec", "must be an object"));
    }
    let policy = match string(&spec["managementPolicy"], "spec.managementPolicy")? {
        None | Some("managed") => Policy::Managed,
        Some("unmanaged") => Policy::Unmanaged,
        Some(other) => {
            return Err(invalid(
                "spec.managementPolicy",
                format!("{other:?} is neither \"managed\" nor \"unmanaged\""),
            ));
        }
    };
    let on_delete = match string(
        &spec["managedOptions"]["onDelete"],
        "spec.managedOptions.onDelete",
    )? {
        None | Some("delete") => OnDelete::Delete,
        Some("detach") => OnDelete::Detach,
        Some(other) => {
            return Err(invalid(
                "spec.managedOptions.onDelete",
                format!("{other:?} is neither \"delete\" nor \"detach\""),
            ));
        }
    };
    let import = match &spec["import"] {
        Value::Null => None,
        Value::Object(fields) => match (fields.get("id"), fields.get("filter")) {
            (Some(id), None) => match string(id, "spec.import.id")? {
                Some(id) if !id.is_empty() => Some(Import::Id(id.to_owned())),
                _ => return Err(invalid("spec.import.id", "must not be empty")),
            },
            (None, Some(filter)) if filter.is_object() => Some(Import::Filter(filter.clone())),
            (None, Some(_)) => return Err(invalid("spec.import.filter", "must be an object")),
            _ => {
                return Err(invalid(
                    "spec.import",
                    "must have exactly one of id and filter",
                ));
            }
        },
        _ => return Err(invalid("spec.import", "must be an object")),
    };
    if policy == Policy::Unmanaged && import.is_none() {
        return Err(invalid(
            "spec.import",
            "is required when managementPolicy is unmanaged (an unmanaged resource is never created)",
        ));
    }
    let resync = match string(&spec["resyncPeriod"], "spec.resyncPeriod")? {
        None => None,
        Some(text) => Some(parse_duration(text).ok_or_else(|| {
            invalid(
                "spec.resyncPeriod",
                format!("{text:?} is not a duration like 90s, 10m or 1h30m"),
            )
        })?),
    };
    let credentials = string(
        &spec["credentialsRef"]["secretName"],
        "spec.credentialsRef.secretName",
    )?
    .map(str::to_owned);
    let connection_secret = match string(
        &spec["writeConnectionSecretTo"]["name"],
        "spec.writeConnectionSecretTo.name",
    )? {
        None => None,
        Some(name) if is_dns_subdomain(name) => Some(name.to_owned()),
        Some(name) => {
            return Err(invalid(
                "spec.writeConnectionSecretTo.name",
                format!(
                    "{name:?} is not a Secret name (lower-case letters, digits, '-' and '.', at most 253)"
                ),
            ));
        }
    };
    Ok(Envelope {
        policy,
        on_delete,
        import,
        resync,
        credentials,
        connection_secret,
    })
}

/// A Kubernetes object name (RFC 1123 subdomain).
fn is_dns_subdomain(name: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !name.is_empty()
        && name.len() <= 253
        && name.starts_with(alnum)
        && name.ends_with(alnum)
        && name.chars().all(|c| alnum(c) || c == '-' || c == '.')
}

/// `90s`, `10m`, `1h30m`, `500ms` (Kubernetes' duration syntax without the rarer units).
pub fn parse_duration(text: &str) -> Option<Duration> {
    let mut total = Duration::ZERO;
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let (number, tail) = rest.split_at(digits);
        let number: f64 = number.parse().ok()?;
        let (unit, tail) = if let Some(t) = tail.strip_prefix("ms") {
            (0.001, t)
        } else if let Some(t) = tail.strip_prefix('s') {
            (1.0, t)
        } else if let Some(t) = tail.strip_prefix('m') {
            (60.0, t)
        } else if let Some(t) = tail.strip_prefix('h') {
            (3600.0, t)
        } else {
            return None;
        };
        total += Duration::try_from_secs_f64(number * unit).ok()?;
        rest = tail;
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn durations_parse_like_kubernetes_durations() {
        assert_eq!(parse_duration("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h30m"), Some(Duration::from_mins(90)));
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("0s"), Some(Duration::ZERO));
        assert_eq!(parse_duration("10"), None);
        assert_eq!(parse_duration("10x"), None);
        assert_eq!(parse_duration(""), None);
    }

    #[test]
    fn an_empty_spec_is_managed_and_deletes() {
        let e = decode(&json!({"resource": {"name": "x"}})).unwrap();
        assert_eq!(
            (e.policy, e.on_delete, e.import, e.resync),
            (Policy::Managed, OnDelete::Delete, None, None)
        );
    }

    #[test]
    fn an_unmanaged_import_by_id_detaches() {
        let e = decode(&json!({"managementPolicy": "unmanaged", "import": {"id": "abc"}})).unwrap();
        assert_eq!(e.import, Some(Import::Id("abc".into())));
        assert!(e.detaches());
    }

    #[test]
    fn malformed_fields_are_named_in_the_error() {
        let cases = [
            (
                json!({"managementPolicy": "sometimes"}),
                "spec.managementPolicy",
            ),
            (json!({"managementPolicy": 3}), "spec.managementPolicy"),
            (
                json!({"managedOptions": {"onDelete": "orphan"}}),
                "spec.managedOptions.onDelete",
            ),
            (json!({"resyncPeriod": "often"}), "spec.resyncPeriod"),
            (json!({"import": {"id": "a", "filter": {}}}), "spec.import"),
            (json!({"import": {"id": ""}}), "spec.import.id"),
            (
                json!({"import": {"filter": "name=x"}}),
                "spec.import.filter",
            ),
            (json!({"managementPolicy": "unmanaged"}), "spec.import"),
            (
                json!({"credentialsRef": {"secretName": 1}}),
                "spec.credentialsRef.secretName",
            ),
            (json!("spec"), "spec"),
        ];
        for (spec, field) in cases {
            let e = decode(&spec).unwrap_err();
            assert_eq!(e.field, field, "{spec}");
            assert!(e.to_string().starts_with(field), "{e}");
        }
    }
}
