//! Schema evolution: whether replacing a kind's installed CRD by the one a plugin describes
//! would strand the objects already stored at it.
//!
//! Rules (a change breaking any of them is refused before the CRD is applied; the installed
//! CRD, and the plugin version serving it, stay):
//! - every version still stored in etcd (`status.storedVersions`) MUST still be listed;
//! - inside a version both list, a field MUST NOT be removed (unless the new schema keeps
//!   unknown fields there, or holds it as a map entry of the same type), MUST NOT change its
//!   type, and MUST NOT become required;
//! - where the installed schema keeps unknown fields (`x-kubernetes-preserve-unknown-fields`)
//!   or map entries (`additionalProperties`), the new one MUST keep them too: the apiserver
//!   prunes what a schema does not keep from every object it reads, the stored ones included;
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

/// Whether `schema` keeps the fields it does not list (the apiserver does not prune them).
fn keeps_unknown(schema: &Value) -> bool {
    schema["x-kubernetes-preserve-unknown-fields"] == true
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
    // A map's entries (`additionalProperties`), which the new schema may hold as well.
    let entries = after["additionalProperties"]
        .is_object()
        .then_some(&after["additionalProperties"]);
    if keeps_unknown(before) && !keeps_unknown(after) && entries.is_none() {
        found.push(Break(format!(
            "{version}: field {shown} no longer keeps unknown fields (x-kubernetes-preserve-unknown-fields): those stored are removed"
        )));
    }
    if let Some(properties) = before["properties"].as_object() {
        for (name, schema) in properties {
            match (after["properties"].get(name), entries) {
                (Some(now), _) => compare(version, &field(name), schema, now, found),
                (None, _) if keeps_unknown(after) => {}
                // Still stored, as an entry of the map: its type must hold.
                (None, Some(entry)) => compare(version, &field(name), schema, entry, found),
                (None, None) => found.push(Break(format!(
                    "{version}: field {} is removed",
                    field(name)
                ))),
            }
        }
    }
    if before["additionalProperties"].is_object() {
        match entries {
            Some(entry) => compare(
                version,
                &format!("{shown}.*"),
                &before["additionalProperties"],
                entry,
                found,
            ),
            None if keeps_unknown(after) => {}
            None => found.push(Break(format!(
                "{version}: field {shown} no longer keeps its entries (additionalProperties): those stored are removed"
            ))),
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

    /// A CRD as the apiserver returns it: `versions` and `status.storedVersions`.
    #[allow(
        clippy::needless_pass_by_value,
        reason = "test code: called with json! literals"
    )]
    fn crd(versions: Value, stored: &[&str]) -> Value {
        json!({"spec": {"versions": versions}, "status": {"storedVersions": stored}})
    }

    /// One entry of `spec.versions`: `name`, whose root holds `spec` (the schema given).
    #[allow(
        clippy::needless_pass_by_value,
        reason = "test code: called with json! literals"
    )]
    fn version(name: &str, spec: Value) -> Value {
        json!({"name": name, "schema": {"openAPIV3Schema": {
            "type": "object",
            "properties": {"spec": spec}
        }}})
    }

    /// A CRD with `v1alpha1` alone, its `spec` of the schema given.
    fn v1(spec: Value, stored: &[&str]) -> Value {
        crd(json!([version("v1alpha1", spec)]), stored)
    }

    /// An object schema of these `properties`.
    #[allow(
        clippy::needless_pass_by_value,
        reason = "test code: called with json! literals"
    )]
    fn object(properties: Value) -> Value {
        json!({"type": "object", "properties": properties})
    }

    /// A row: a change, and every break it must be refused with (none: it is allowed).
    struct Case {
        /// What the row shows, as a behaviour sentence.
        name: &'static str,
        installed: Value,
        new: Value,
        breaks: &'static [&'static str],
    }

    #[allow(
        clippy::too_many_lines,
        reason = "the table: one row per allowed or refused change"
    )]
    fn cases() -> Vec<Case> {
        let name = || object(json!({"name": {"type": "string"}}));
        let zone = || {
            object(json!({"resource": object(json!({
                "name": {"type": "string"},
                "nameservers": {"type": "array", "items": {"type": "string"}},
                "account": {"type": "string"}
            }))}))
        };
        let servers = |item: Value| object(json!({"servers": {"type": "array", "items": item}}));
        vec![
            // Allowed.
            Case {
                name: "the same schema strands nothing",
                installed: v1(zone(), &["v1alpha1"]),
                new: v1(zone(), &[]),
                breaks: &[],
            },
            Case {
                name: "an added optional field strands nothing",
                installed: v1(name(), &["v1alpha1"]),
                new: v1(
                    object(json!({"name": {"type": "string"}, "ttl": {"type": "integer"}})),
                    &[],
                ),
                breaks: &[],
            },
            Case {
                name: "an added optional object with required fields inside strands nothing",
                installed: v1(name(), &["v1alpha1"]),
                new: v1(
                    object(json!({
                        "name": {"type": "string"},
                        "tls": {"type": "object", "required": ["cert"],
                                "properties": {"cert": {"type": "string"}}}
                    })),
                    &[],
                ),
                breaks: &[],
            },
            Case {
                name: "a new version strands nothing",
                installed: v1(name(), &["v1alpha1"]),
                new: crd(
                    json!([
                        version("v1alpha1", name()),
                        version(
                            "v1beta1",
                            object(json!({
                                "title": {"type": "string"}
                            }))
                        )
                    ]),
                    &[],
                ),
                breaks: &[],
            },
            Case {
                name: "an added description strands nothing",
                installed: v1(name(), &["v1alpha1"]),
                new: v1(
                    object(json!({"name": {"type": "string", "description": "The zone."}})),
                    &[],
                ),
                breaks: &[],
            },
            Case {
                name: "an enum narrowed, a tighter pattern or bound is not a break: they refuse new writes, not the objects stored",
                installed: v1(
                    object(json!({
                        "kind": {"type": "string", "enum": ["Native", "Master", "Slave"]},
                        "name": {"type": "string"}
                    })),
                    &["v1alpha1"],
                ),
                new: v1(
                    object(json!({
                        "kind": {"type": "string", "enum": ["Native"]},
                        "name": {"type": "string", "maxLength": 8, "pattern": "^[a-z]+$"}
                    })),
                    &[],
                ),
                breaks: &[],
            },
            Case {
                name: "a field dropped where the new schema keeps unknown fields is not a break",
                installed: v1(object(json!({"legacy": {"type": "string"}})), &["v1alpha1"]),
                new: v1(
                    json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
                    &[],
                ),
                breaks: &[],
            },
            Case {
                name: "a field that becomes an entry of a map of its type is kept",
                installed: v1(
                    object(json!({"labels": object(json!({"team": {"type": "string"}}))})),
                    &["v1alpha1"],
                ),
                new: v1(
                    object(json!({"labels": {"type": "object",
                                             "additionalProperties": {"type": "string"}}})),
                    &[],
                ),
                breaks: &[],
            },
            Case {
                name: "a version no longer listed that was never stored may go",
                installed: crd(
                    json!([version("v1alpha1", name()), version("v1beta1", name())]),
                    &["v1beta1"],
                ),
                new: crd(json!([version("v1beta1", name())]), &[]),
                breaks: &[],
            },
            // Refused.
            Case {
                name: "a version still stored must still be listed",
                installed: v1(json!({"type": "object"}), &["v1alpha1"]),
                new: crd(json!([version("v1beta1", json!({"type": "object"}))]), &[]),
                breaks: &[
                    "version v1alpha1 is still stored in etcd (status.storedVersions) and the new schema no longer lists it",
                ],
            },
            Case {
                name: "every stored version dropped is named, and the versions kept are still compared",
                installed: crd(
                    json!([version("v1alpha1", name()), version("v1beta1", name())]),
                    &["v1alpha1", "v1beta1"],
                ),
                new: crd(json!([version("v1beta1", object(json!({})))]), &[]),
                breaks: &[
                    "version v1alpha1 is still stored in etcd (status.storedVersions) and the new schema no longer lists it",
                    "v1beta1: field spec.name is removed",
                ],
            },
            Case {
                name: "a removed field is named with its version and path",
                installed: v1(zone(), &["v1alpha1"]),
                new: v1(
                    object(json!({"resource": object(json!({
                        "nameservers": {"type": "array", "items": {"type": "string"}},
                        "account": {"type": "string"}
                    }))})),
                    &[],
                ),
                breaks: &["v1alpha1: field spec.resource.name is removed"],
            },
            Case {
                name: "a retyped field is named with both types, and what is inside it is not compared",
                installed: v1(zone(), &["v1alpha1"]),
                new: v1(
                    object(json!({"resource": object(json!({
                        "name": {"type": "string"},
                        "nameservers": {"type": "string"},
                        "account": {"type": "string"}
                    }))})),
                    &[],
                ),
                breaks: &[
                    "v1alpha1: field spec.resource.nameservers changes type from array to string",
                ],
            },
            Case {
                name: "a newly required field is named",
                installed: v1(zone(), &["v1alpha1"]),
                new: {
                    let mut z = zone();
                    z["properties"]["resource"]["required"] = json!(["account"]);
                    v1(z, &[])
                },
                breaks: &["v1alpha1: field spec.resource.account becomes required"],
            },
            Case {
                name: "a new field required at once is named",
                installed: v1(name(), &["v1alpha1"]),
                new: v1(
                    json!({"type": "object", "required": ["ttl"], "properties": {
                        "name": {"type": "string"}, "ttl": {"type": "integer"}
                    }}),
                    &[],
                ),
                breaks: &["v1alpha1: field spec.ttl becomes required"],
            },
            Case {
                name: "a removed, retyped or newly required field is named with its version and path",
                installed: v1(zone(), &["v1alpha1"]),
                new: v1(
                    object(json!({"resource": {
                        "type": "object", "required": ["account"], "properties": {
                            "nameservers": {"type": "array", "items": {"type": "object"}},
                            "account": {"type": "string"}
                        }
                    }})),
                    &[],
                ),
                breaks: &[
                    "v1alpha1: field spec.resource.name is removed",
                    "v1alpha1: field spec.resource.nameservers[] changes type from string to object",
                    "v1alpha1: field spec.resource.account becomes required",
                ],
            },
            Case {
                name: "a field removed from the objects of an array is named with [] in its path",
                installed: v1(
                    servers(object(
                        json!({"host": {"type": "string"}, "ttl": {"type": "integer"}}),
                    )),
                    &["v1alpha1"],
                ),
                new: v1(servers(object(json!({"host": {"type": "string"}}))), &[]),
                breaks: &["v1alpha1: field spec.servers[].ttl is removed"],
            },
            Case {
                name: "a field of an array's objects retyped or made required is named with [] in its path",
                installed: v1(
                    servers(object(
                        json!({"host": {"type": "string"}, "ttl": {"type": "integer"}}),
                    )),
                    &["v1alpha1"],
                ),
                new: v1(
                    servers(
                        json!({"type": "object", "required": ["host"], "properties": {
                            "host": {"type": "string"}, "ttl": {"type": "string"}
                        }}),
                    ),
                    &[],
                ),
                breaks: &[
                    "v1alpha1: field spec.servers[].ttl changes type from integer to string",
                    "v1alpha1: field spec.servers[].host becomes required",
                ],
            },
            Case {
                name: "a retyped item of an array of arrays is named with [][]",
                installed: v1(
                    object(json!({"matrix": {"type": "array", "items": {
                        "type": "array", "items": {"type": "integer"}
                    }}})),
                    &["v1alpha1"],
                ),
                new: v1(
                    object(json!({"matrix": {"type": "array", "items": {
                        "type": "array", "items": {"type": "number"}
                    }}})),
                    &[],
                ),
                breaks: &["v1alpha1: field spec.matrix[][] changes type from integer to number"],
            },
            Case {
                name: "a field removed deep in nested objects is named with its full path",
                installed: v1(
                    object(
                        json!({"a": object(json!({"b": object(json!({"c": {"type": "string"}}))}))}),
                    ),
                    &["v1alpha1"],
                ),
                new: v1(
                    object(json!({"a": object(json!({"b": object(json!({}))}))})),
                    &[],
                ),
                breaks: &["v1alpha1: field spec.a.b.c is removed"],
            },
            Case {
                name: "a field removed where only the parent above keeps unknown fields is a break",
                installed: v1(
                    object(json!({"a": object(json!({"b": {"type": "string"}}))})),
                    &["v1alpha1"],
                ),
                new: v1(
                    json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                           "properties": {"a": object(json!({}))}}),
                    &[],
                ),
                breaks: &["v1alpha1: field spec.a.b is removed"],
            },
            Case {
                name: "a field that no longer keeps unknown fields is named: the apiserver prunes them from stored objects",
                installed: v1(
                    object(
                        json!({"extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}),
                    ),
                    &["v1alpha1"],
                ),
                new: v1(
                    object(json!({"extra": object(json!({"known": {"type": "string"}}))})),
                    &[],
                ),
                breaks: &[
                    "v1alpha1: field spec.extra no longer keeps unknown fields (x-kubernetes-preserve-unknown-fields): those stored are removed",
                ],
            },
            Case {
                name: "a map whose entries are retyped is named with .* in its path",
                installed: v1(
                    object(
                        json!({"labels": {"type": "object", "additionalProperties": {"type": "string"}}}),
                    ),
                    &["v1alpha1"],
                ),
                new: v1(
                    object(
                        json!({"labels": {"type": "object", "additionalProperties": {"type": "integer"}}}),
                    ),
                    &[],
                ),
                breaks: &["v1alpha1: field spec.labels.* changes type from string to integer"],
            },
            Case {
                name: "a map that becomes an object of fixed fields is named: its other entries are pruned",
                installed: v1(
                    object(
                        json!({"labels": {"type": "object", "additionalProperties": {"type": "string"}}}),
                    ),
                    &["v1alpha1"],
                ),
                new: v1(
                    object(json!({"labels": object(json!({"team": {"type": "string"}}))})),
                    &[],
                ),
                breaks: &[
                    "v1alpha1: field spec.labels no longer keeps its entries (additionalProperties): those stored are removed",
                ],
            },
            Case {
                name: "a field that becomes an entry of a map of another type is named",
                installed: v1(
                    object(json!({"limits": object(json!({"cpu": {"type": "integer"}}))})),
                    &["v1alpha1"],
                ),
                new: v1(
                    object(
                        json!({"limits": {"type": "object", "additionalProperties": {"type": "string"}}}),
                    ),
                    &[],
                ),
                breaks: &["v1alpha1: field spec.limits.cpu changes type from integer to string"],
            },
            Case {
                name: "a field removed in one of two versions is named with that version only",
                installed: crd(
                    json!([
                        version("v1alpha1", name()),
                        version(
                            "v1beta1",
                            object(json!({
                                "title": {"type": "string"}
                            }))
                        )
                    ]),
                    &["v1beta1"],
                ),
                new: crd(
                    json!([
                        version("v1alpha1", name()),
                        version("v1beta1", object(json!({})))
                    ]),
                    &[],
                ),
                breaks: &["v1beta1: field spec.title is removed"],
            },
        ]
    }

    #[test]
    fn every_schema_change_is_allowed_or_refused_as_the_table_says() {
        for case in cases() {
            let said: Vec<String> = breaks(&case.installed, &case.new)
                .into_iter()
                .map(|b| b.0)
                .collect();
            assert_eq!(said, case.breaks, "{}", case.name);
        }
    }

    #[test]
    fn the_table_names_each_row_once() {
        let names: Vec<&str> = cases().iter().map(|c| c.name).collect();
        let unique: BTreeSet<&str> = names.iter().copied().collect();
        assert_eq!(unique.len(), names.len(), "{names:?}");
    }
}
