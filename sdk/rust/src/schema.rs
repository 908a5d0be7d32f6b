//! CRD schemas derived from types (feature `schemars`): `#[derive(JsonSchema)]` on the `Spec`,
//! `Filter` and observed types, and [`of`] in `describe`.
//!
//! ```ignore
//! #[derive(Deserialize, JsonSchema)]
//! #[serde(rename_all = "camelCase", deny_unknown_fields)]
//! pub struct KeySpec {
//!     #[schemars(length(max = 253), extend("x-kubernetes-validations" = [
//!         {"rule": "self == oldSelf", "message": "name is immutable"}
//!     ]))]
//!     pub name: String,
//! }
//! // in describe(): resource_schema: orchard_sdk::schema::of::<KeySpec>(),
//! ```
//!
//! What a Kubernetes structural schema cannot hold, or the CRD does not need, is taken out of
//! what `schemars` generates (draft 2020-12):
//!
//! - every subschema is inlined (a CRD has no `$ref`), and there is no `$schema`;
//! - the root's `title` and `description` (the Rust type's name and rustdoc: the host describes
//!   `spec.resource`, `spec.import.filter` and `status.resource` itself); the fields' doc
//!   comments stay, as their `description` (`kubectl explain` shows them);
//! - `Option<T>`: `"type": [T, "null"]` (or `anyOf` with `{"type": "null"}`) becomes `T`: a
//!   field is optional by not being `required`, as in a hand-written CRD;
//! - `"additionalProperties": false` (from `#[serde(deny_unknown_fields)]`) next to
//!   `properties`: Kubernetes refuses both together, and prunes unknown fields (or refuses them,
//!   with strict field validation) by itself;
//! - `format`s Kubernetes does not define (e.g. `uint32`, from Rust's unsigned integers, whose
//!   `minimum: 0` stays): kept are the Kubernetes ones (`int32`, `int64`, `date-time`…);
//! - `const` becomes a one-value `enum`.
//!
//! Everything else — `#[schemars(length(…), range(…), regex(pattern = …), extend(…))]`,
//! `#[serde(default = …)]` as `default` (a `#[serde(default)]` field whose
//! `skip_serializing_if` says the default is empty gets none, so the apiserver does not write
//! an empty value into every object), `x-kubernetes-*` extensions through `extend` — is
//! `schemars`'s.

use std::borrow::Cow;

use schemars::generate::{Contract, SchemaSettings};
use schemars::transform::{RestrictFormats, Transform, transform_subschemas};
use schemars::{JsonSchema, Schema};
use serde_json::Value;

/// The `format`s the Kubernetes API server knows in a CRD's schema.
const KUBERNETES_FORMATS: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
    "date-time",
    "int32",
    "int64",
    "float",
    "double",
];

/// The schema of `T` as [`Description`](crate::Description) and
/// [`ApiVersion`](crate::ApiVersion) take it for `resource_schema` and `filter_schema`: what
/// `T` deserialises from, as JSON text (keys sorted).
pub fn of<T: JsonSchema>() -> String {
    value::<T>().to_string()
}

/// [`of`] as a JSON value: to compare with a hand-written schema in a test, or to change it
/// further before `Value::to_string`.
pub fn value<T: JsonSchema>() -> Value {
    generate::<T>(Contract::Deserialize)
}

/// The schema of `T` for `observed_schema` (`status.resource`): what `T` serialises to, with
/// no field `required` — the host writes `status.resource` from what `observed` returned, and
/// a field the plugin leaves out once must not fail the status update.
pub fn observed<T: JsonSchema>() -> String {
    observed_value::<T>().to_string()
}

/// [`observed`] as a JSON value.
pub fn observed_value<T: JsonSchema>() -> Value {
    let mut v = generate::<T>(Contract::Serialize);
    strip_required(&mut v);
    v
}

fn strip_required(v: &mut Value) {
    match v {
        Value::Object(obj) => {
            obj.remove("required");
            for (k, child) in obj.iter_mut() {
                // Only subschemas: `enum`, `default` and the extensions hold values.
                if matches!(
                    k.as_str(),
                    "properties" | "items" | "additionalProperties" | "anyOf" | "oneOf" | "allOf"
                ) {
                    strip_required_in(child, k == "properties");
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(strip_required),
        _ => {}
    }
}

fn strip_required_in(v: &mut Value, is_properties: bool) {
    match v {
        Value::Object(props) if is_properties => props.values_mut().for_each(strip_required),
        other => strip_required(other),
    }
}

fn generate<T: JsonSchema>(contract: Contract) -> Value {
    let formats = {
        let mut f = RestrictFormats::default();
        f.infer_from_meta_schema = false;
        f.allowed_formats = KUBERNETES_FORMATS
            .iter()
            .map(|f| Cow::Borrowed(*f))
            .collect();
        f
    };
    let generator = SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
            s.contract = contract;
        })
        .with_transform(Kubernetes)
        .with_transform(formats)
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>();
    if let Some(root) = schema.as_object_mut() {
        root.remove("title");
        root.remove("description");
    }
    schema.to_value()
}

/// The structural-schema rules of the module's documentation, on every subschema.
#[derive(Debug, Clone, Copy)]
struct Kubernetes;

impl Transform for Kubernetes {
    fn transform(&mut self, schema: &mut Schema) {
        transform_subschemas(self, schema);
        let Some(obj) = schema.as_object_mut() else {
            return;
        };
        // Option<T> with a simple T: "type": [T, "null"].
        if let Some(Value::Array(types)) = obj.get("type") {
            let types: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
            if let [one] = types.as_slice() {
                obj.insert("type".into(), one.clone());
            } else {
                obj.insert("type".into(), Value::Array(types));
            }
        }
        // Option<T> with T an object (or another composite): anyOf [T, {"type": "null"}].
        if let Some(Value::Array(any_of)) = obj.get("anyOf") {
            let null = serde_json::json!({"type": "null"});
            let rest: Vec<&Value> = any_of.iter().filter(|s| **s != null).collect();
            if let ([Value::Object(inner)], true) = (rest.as_slice(), rest.len() < any_of.len()) {
                let inner = inner.clone();
                obj.remove("anyOf");
                for (k, v) in inner {
                    obj.entry(k).or_insert(v);
                }
            }
        }
        if obj.get("additionalProperties") == Some(&Value::Bool(false))
            && obj.contains_key("properties")
        {
            obj.remove("additionalProperties");
        }
        if let Some(value) = obj.remove("const") {
            obj.insert("enum".into(), Value::Array(vec![value]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(serde::Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    #[allow(dead_code, reason = "only the schema is used")]
    /// Root docs: not in the schema.
    struct Spec {
        /// The name.
        #[schemars(length(max = 253), extend("x-kubernetes-validations" = [{"rule": "self == oldSelf"}]))]
        name: String,
        #[serde(default = "three")]
        count: u32,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tags: Vec<String>,
        inner: Option<Inner>,
        label: Option<String>,
    }

    fn three() -> u32 {
        3
    }

    #[derive(serde::Deserialize, serde::Serialize, JsonSchema)]
    #[allow(dead_code, reason = "only the schema is used")]
    struct Inner {
        #[schemars(range(max = 10))]
        level: i32,
    }

    #[test]
    fn a_derived_schema_is_structural_and_keeps_the_kubernetes_extensions() {
        assert_eq!(
            value::<Spec>(),
            json!({
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string", "description": "The name.", "maxLength": 253,
                             "x-kubernetes-validations": [{"rule": "self == oldSelf"}]},
                    "count": {"type": "integer", "minimum": 0, "default": 3},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "inner": {"type": "object", "required": ["level"], "properties": {
                        "level": {"type": "integer", "format": "int32", "maximum": 10}
                    }},
                    "label": {"type": "string"}
                }
            })
        );
    }

    #[derive(serde::Serialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    #[allow(dead_code, reason = "only the schema is used")]
    struct Seen {
        /// Its id.
        id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        parent: Option<Inner>,
    }

    #[test]
    fn an_observed_schema_requires_nothing() {
        assert_eq!(
            observed_value::<Seen>(),
            json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "Its id."},
                    "parent": {"type": "object", "properties": {
                        "level": {"type": "integer", "format": "int32", "maximum": 10}
                    }}
                }
            })
        );
    }
}
