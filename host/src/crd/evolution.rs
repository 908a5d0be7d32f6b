//! Schema evolution: whether replacing a kind's installed CRD by the one a plugin describes
//! would strand the objects already stored at it.
//!
//! Rules (a change breaking any of them is refused before the CRD is applied; the installed
//! CRD, and the plugin version serving it, stay):
//! - every version still stored in etcd (`status.storedVersions`) MUST still be listed;
//! - inside a version both list, a field MUST NOT be removed (unless the new schema keeps
//!   unknown fields there), MUST NOT change its type, and MUST NOT become required;
//! - adding an optional field, a new version, or a description is always allowed.
//!
//! Enum narrowing, tighter patterns and bounds are not checked: they refuse new writes, not
//! the objects already stored.

use std::collections::BTreeSet;

use serde_json::Value;

/// One way the new CRD would strand stored objects, as a person reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Break(pub String);

impl std::fmt::Display for Break {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Every way replacing `installed` (a CRD as the apiserver returns it) by `new` (a CRD as the
/// host builds it) would strand stored objects; empty when the change is safe.
pub fn breaks(installed: &Value, new: &Value) -> Vec<Break> {
    let mut found = Vec::new();
    let versions = |crd: &Value| -> Vec<(String, Value)> {
        crd["spec"]["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| {
                Some((
                    v["name"].as_str()?.to_owned(),
                    v["schema"]["openAPIV3Schema"].clone(),
                ))
            })
            .collect()
    };
    let (old, new) = (versions(installed), versions(new));
    let listed: BTreeSet<&str> = new.iter().map(|(name, _)| name.as_str()).collect();
    for stored in installed["status"]["storedVersions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !listed.contains(stored) {
            found.push(Break(format!(
                "version {stored} is still stored in etcd (status.storedVersions) and the new schema no longer lists it"
            )));
        }
    }
    for (name, before) in &old {
        if let Some((_, after)) = new.iter().find(|(n, _)| n == name) {
            compare(name, "", before, after, &mut found);
        }
    }
    found
}

/// Compares the schema of one field (`path`, empty at the root) in `version`.
fn compare(version: &str, path: &str, before: &Value, after: &Value, found: &mut Vec<Break>) {
    let field = |name: &str| {
        if path.is_empty() {
            name.to_owned()
        } else {
            format!("{path}.{name}")
        }
    };
    let shown = if path.is_empty() { "(root)" } else { path };
    if let (Some(was), Some(is)) = (before["type"].as_str(), after["type"].as_str())
        && was != is
    {
        found.push(Break(format!(
            "{version}: field {shown} changes type from {was} to {is}"
        )));
        return;
    }
    let keeps_unknown = after["x-kubernetes-preserve-unknown-fields"] == true;
    if let Some(properties) = before["properties"].as_object() {
        for (name, schema) in properties {
            match after["properties"].get(name) {
                Some(now) => compare(version, &field(name), schema, now, found),
                None if keeps_unknown => {}
                None => found.push(Break(format!(
                    "{version}: field {} is removed",
                    field(name)
                ))),
            }
        }
    }
    let required = |schema: &Value| -> BTreeSet<String> {
        schema["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r.as_str().map(str::to_owned))
            .collect()
    };
    for name in required(after).difference(&required(before)) {
        found.push(Break(format!(
            "{version}: field {} becomes required",
            field(name)
        )));
    }
    if before["items"].is_object() && after["items"].is_object() {
        compare(
            version,
            &format!("{shown}[]"),
            &before["items"],
            &after["items"],
            found,
        );
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[allow(
        clippy::needless_pass_by_value,
        reason = "test code: called with json! literals"
    )]
    fn crd(versions: Value, stored: &[&str]) -> Value {
        json!({"spec": {"versions": versions}, "status": {"storedVersions": stored}})
    }

    #[allow(
        clippy::needless_pass_by_value,
        reason = "test code: called with json! literals"
    )]
    fn v1(spec: Value) -> Value {
        json!([{"name": "v1alpha1", "schema": {"openAPIV3Schema": {
            "type": "object",
            "properties": {"spec": spec}
        }}}])
    }

    fn said(installed: &Value, new: &Value) -> Vec<String> {
        breaks(installed, new).into_iter().map(|b| b.0).collect()
    }

    #[test]
    fn an_added_optional_field_a_new_version_or_the_same_schema_strands_nothing() {
        let before = crd(
            v1(json!({"type": "object", "properties": {"name": {"type": "string"}}})),
            &["v1alpha1"],
        );
        assert!(said(&before, &before).is_empty());
        let added = crd(
            v1(json!({"type": "object", "properties": {
                "name": {"type": "string"},
                "ttl": {"type": "integer"}
            }})),
            &[],
        );
        assert!(said(&before, &added).is_empty());
        let mut two = added.clone();
        two["spec"]["versions"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "v1beta1", "schema": {"openAPIV3Schema": {"type": "object"}}}));
        assert!(said(&before, &two).is_empty());
    }

    #[test]
    fn a_removed_retyped_or_newly_required_field_is_named_with_its_version_and_path() {
        let before = crd(
            v1(json!({"type": "object", "properties": {
                "resource": {"type": "object", "properties": {
                    "name": {"type": "string"},
                    "nameservers": {"type": "array", "items": {"type": "string"}},
                    "account": {"type": "string"}
                }}
            }})),
            &["v1alpha1"],
        );
        let after = crd(
            v1(json!({"type": "object", "properties": {
                "resource": {"type": "object", "required": ["account"], "properties": {
                    "nameservers": {"type": "array", "items": {"type": "object"}},
                    "account": {"type": "string"}
                }}
            }})),
            &[],
        );
        assert_eq!(
            said(&before, &after),
            [
                "v1alpha1: field spec.resource.name is removed",
                "v1alpha1: field spec.resource.nameservers[] changes type from string to object",
                "v1alpha1: field spec.resource.account becomes required",
            ]
        );
    }

    #[test]
    fn a_field_dropped_where_the_new_schema_keeps_unknown_fields_is_not_a_break() {
        let before = crd(
            v1(json!({"type": "object", "properties": {"legacy": {"type": "string"}}})),
            &["v1alpha1"],
        );
        let after = crd(
            v1(json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})),
            &[],
        );
        assert!(said(&before, &after).is_empty());
    }

    #[test]
    fn a_version_still_stored_must_still_be_listed() {
        let before = crd(v1(json!({"type": "object"})), &["v1alpha1"]);
        let after = crd(
            json!([{"name": "v1beta1", "schema": {"openAPIV3Schema": {"type": "object"}}}]),
            &[],
        );
        assert_eq!(
            said(&before, &after),
            [
                "version v1alpha1 is still stored in etcd (status.storedVersions) and the new schema no longer lists it"
            ]
        );
    }
}
