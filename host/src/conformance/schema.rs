//! The plugin's OpenAPI v3 schemas (the CRD's structural dialect) checked as JSON Schema.
//!
//! A structural schema is JSON Schema draft 4 plus a few keywords the apiserver gives meaning
//! to; before compiling, `nullable: true` becomes `null` among the allowed types and
//! `x-kubernetes-int-or-string` drops the type, so that a value the apiserver accepts is not
//! refused here. Formats are not checked (the apiserver checks few of them, loosely). Other
//! `x-kubernetes-*` keywords (CEL rules, list types) are not evaluated: they are the
//! apiserver's.

use serde_json::Value;

/// A compiled schema.
pub struct Schema(jsonschema::Validator);

impl Schema {
    /// Compiles `schema` (OpenAPI v3, structural); the error says why it does not compile.
    pub fn compile(schema: &Value) -> Result<Self, String> {
        let mut schema = schema.clone();
        lower(&mut schema);
        jsonschema::options()
            .with_draft(jsonschema::Draft::Draft4)
            .should_validate_formats(false)
            .build(&schema)
            .map(Self)
            .map_err(|e| e.to_string())
    }

    /// Every way `value` breaks the schema, as `<path>: <message>` (at most 10).
    pub fn errors(&self, value: &Value) -> Vec<String> {
        self.0
            .iter_errors(value)
            .take(10)
            .map(|e| {
                let path = e.instance_path().to_string();
                format!("{}: {e}", if path.is_empty() { "/" } else { &path })
            })
            .collect()
    }
}

/// Rewrites the OpenAPI keywords that change what a value may be into JSON Schema.
fn lower(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            if map.remove("x-kubernetes-int-or-string") == Some(Value::Bool(true)) {
                map.remove("type");
            }
            if map.remove("nullable") == Some(Value::Bool(true))
                && let Some(Value::String(t)) = map.get("type").cloned()
            {
                map.insert("type".into(), serde_json::json!([t, "null"]));
            }
            map.values_mut().for_each(lower);
        }
        Value::Array(items) => items.iter_mut().for_each(lower),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_value_of_the_wrong_type_is_reported_with_its_path() {
        let s = Schema::compile(
            &json!({"type": "object", "properties": {"serial": {"type": "integer"}}}),
        )
        .unwrap();
        assert!(s.errors(&json!({"serial": 3})).is_empty());
        let errors = s.errors(&json!({"serial": "3"}));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].starts_with("/serial: "), "{errors:?}");
    }

    #[test]
    fn nullable_and_int_or_string_mean_what_the_apiserver_makes_of_them() {
        let s = Schema::compile(&json!({"type": "object", "properties": {
            "a": {"type": "string", "nullable": true},
            "b": {"type": "integer", "x-kubernetes-int-or-string": true},
        }}))
        .unwrap();
        assert!(s.errors(&json!({"a": null, "b": "50%"})).is_empty());
    }

    #[test]
    fn kubernetes_extensions_and_formats_do_not_stop_a_schema_from_compiling() {
        let s = Schema::compile(
            &json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
            "properties": {"n": {"type": "string", "format": "int-or-whatever",
                                 "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}}}),
        )
        .unwrap();
        assert!(s.errors(&json!({"n": "x", "extra": 1})).is_empty());
    }

    #[test]
    fn a_schema_that_is_not_a_schema_does_not_compile() {
        assert!(Schema::compile(&json!({"type": 12})).is_err());
    }
}
