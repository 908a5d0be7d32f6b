//! `DnsZone`'s API versions (served by the build with feature `v1beta1`): `v1alpha1`, the
//! version every call sees, and `v1beta1`, the storage version, whose `nameservers` (a list of
//! names) becomes `nameServers: [{host, ttl}]`.
//!
//! A round trip loses nothing: what v1alpha1 cannot hold (the ttls) waits in the annotation
//! `<group>/v1beta1-nameserver-ttls` while the object is at v1alpha1, and comes back from it at
//! v1beta1. The ttl is kept, not applied yet: PowerDNS sets a zone's NS records from the names
//! alone.

use std::collections::BTreeMap;

use orchard_sdk::{ApiVersion, Convertible, Description, Failure, json};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

/// Where a v1alpha1 object keeps the v1beta1 ttls of its name servers (JSON: host → ttl):
/// `<group>/v1beta1-nameserver-ttls`, a key under the kind's group (the only ones the host
/// lets a conversion write).
pub fn ttls_key() -> String {
    format!("{}/v1beta1-nameserver-ttls", crate::GROUP)
}

/// `spec.resource` at v1beta1 (its schema only: every call sees v1alpha1): [`ZoneSpec`] with
/// `nameServers: [{host, ttl}]` in place of `nameservers`. As in `ZoneSpec`, the notes are `//`
/// comments where the CRD has no `description`.
///
/// [`ZoneSpec`]: crate::ZoneSpec
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ZoneSpecV1beta1 {
    #[schemars(
        length(max = 253),
        regex(pattern = r"^([a-zA-Z0-9-_]+\.)*[a-zA-Z0-9-_]+\.?$"),
        extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "name is immutable"}])
    )]
    pub name: String,
    #[serde(default = "crate::native")]
    #[schemars(extend("enum" = crate::KINDS))]
    pub kind: String,
    /// Name servers put in the zone at creation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub name_servers: Vec<NameServer>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 255))]
    pub account: String,
}

// One of `ZoneSpecV1beta1::name_servers` (a `//` comment: a doc comment would be its `description`).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct NameServer {
    #[schemars(length(max = 253))]
    pub host: String,
    // Kept, not applied yet (the module's documentation).
    #[schemars(range(max = 2_147_483_647))]
    pub ttl: Option<u32>,
}

/// Both versions; `v1alpha1` with the schemas of `d` (the description), `v1beta1` with
/// [`ZoneSpecV1beta1`]'s.
pub fn all(d: &Description) -> Vec<ApiVersion> {
    vec![
        ApiVersion {
            name: "v1alpha1".into(),
            resource_schema: d.resource_schema.clone(),
            filter_schema: d.filter_schema.clone(),
            observed_schema: d.observed_schema.clone(),
            storage: false,
        },
        ApiVersion {
            name: "v1beta1".into(),
            resource_schema: orchard_sdk::schema::of::<ZoneSpecV1beta1>(),
            filter_schema: d.filter_schema.clone(),
            observed_schema: d.observed_schema.clone(),
            storage: true,
        },
    ]
}

/// `obj` from `from` to `to`; only `spec.resource` changes shape (the filter and the observed
/// state are the same at both versions).
pub fn convert(mut obj: Convertible, from: &str, to: &str) -> Result<Convertible, Failure> {
    match (from, to) {
        ("v1alpha1", "v1beta1") => {
            let key = ttls_key();
            let ttls: BTreeMap<String, u32> = match obj.annotations.remove(&key) {
                Some(text) => serde_json::from_str(&text).map_err(|e| {
                    Failure::invalid(format!(
                        "annotation {key} is not a JSON map of host to ttl: {e}"
                    ))
                })?,
                None => BTreeMap::new(),
            };
            if let Some(Value::Object(r)) = &mut obj.resource
                && let Some(names) = r.remove("nameservers")
            {
                let servers: Vec<Value> = names
                    .as_array()
                    .ok_or_else(|| Failure::invalid("spec.resource.nameservers is not a list"))?
                    .iter()
                    .map(|name| {
                        let host = name.as_str().unwrap_or_default();
                        match ttls.get(host) {
                            Some(ttl) => json!({"host": host, "ttl": ttl}),
                            None => json!({"host": host}),
                        }
                    })
                    .collect();
                r.insert("nameServers".into(), Value::Array(servers));
            }
            Ok(obj)
        }
        ("v1beta1", "v1alpha1") => {
            obj.annotations.remove(&ttls_key());
            if let Some(Value::Object(r)) = &mut obj.resource
                && let Some(servers) = r.remove("nameServers")
            {
                let servers = servers
                    .as_array()
                    .ok_or_else(|| Failure::invalid("spec.resource.nameServers is not a list"))?;
                let mut names = Vec::with_capacity(servers.len());
                let mut ttls = BTreeMap::new();
                for s in servers {
                    let host = s["host"].as_str().ok_or_else(|| {
                        Failure::invalid("spec.resource.nameServers[].host is missing")
                    })?;
                    names.push(json!(host));
                    if let Some(ttl) = s["ttl"].as_u64() {
                        ttls.insert(host.to_owned(), ttl);
                    }
                }
                r.insert("nameservers".into(), Value::Array(names));
                if !ttls.is_empty() {
                    obj.annotations
                        .insert(ttls_key(), serde_json::to_string(&ttls).unwrap_or_default());
                }
            }
            Ok(obj)
        }
        (a, b) if a == b => Ok(obj),
        _ => Err(Failure::unrecoverable(format!(
            "DnsZone has versions v1alpha1 and v1beta1; cannot convert {from} to {to}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(resource: Value, annotations: &[(&str, &str)]) -> Convertible {
        Convertible {
            resource: Some(resource),
            annotations: annotations
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            ..Convertible::default()
        }
    }

    #[test]
    fn a_v1alpha1_zone_reads_at_v1beta1_with_its_name_servers_as_hosts_and_back() {
        let alpha = at(
            json!({"name": "a.org.", "nameservers": ["ns1.a.org.", "ns2.a.org."]}),
            &[("x/y", "z")],
        );
        let beta = convert(alpha.clone(), "v1alpha1", "v1beta1").unwrap();
        assert_eq!(
            beta.resource,
            Some(
                json!({"name": "a.org.", "nameServers": [{"host": "ns1.a.org."}, {"host": "ns2.a.org."}]})
            )
        );
        assert_eq!(convert(beta, "v1beta1", "v1alpha1").unwrap(), alpha);
    }

    #[test]
    fn ttls_wait_in_an_annotation_at_v1alpha1_and_come_back_at_v1beta1() {
        let beta = at(
            json!({"name": "a.org.", "nameServers": [{"host": "ns1.a.org.", "ttl": 300}, {"host": "ns2.a.org."}]}),
            &[],
        );
        let alpha = convert(beta.clone(), "v1beta1", "v1alpha1").unwrap();
        assert_eq!(
            alpha.resource,
            Some(json!({"name": "a.org.", "nameservers": ["ns1.a.org.", "ns2.a.org."]}))
        );
        assert_eq!(
            alpha.annotations.get(&ttls_key()).map(String::as_str),
            Some(r#"{"ns1.a.org.":300}"#)
        );
        assert_eq!(convert(alpha, "v1alpha1", "v1beta1").unwrap(), beta);
    }

    #[test]
    fn an_unknown_version_and_a_broken_annotation_are_failures_naming_them() {
        let e = convert(at(json!({}), &[]), "v1alpha1", "v2").unwrap_err();
        assert!(
            e.to_string().contains("cannot convert v1alpha1 to v2"),
            "{e}"
        );
        let e = convert(
            at(json!({"nameservers": []}), &[(&ttls_key(), "[")]),
            "v1alpha1",
            "v1beta1",
        )
        .unwrap_err();
        assert!(e.to_string().contains(&ttls_key()), "{e}");
    }

    /// v1beta1's schema, now derived from `ZoneSpecV1beta1`, is byte for byte the one made
    /// before by editing v1alpha1's.
    #[test]
    fn the_derived_v1beta1_schema_is_the_one_made_by_hand_byte_for_byte() {
        let d = orchard_sdk::Actuator::describe(&crate::PdnsZone);
        let mut beta: Value = serde_json::from_str(&d.resource_schema).unwrap();
        let props = beta["properties"].as_object_mut().unwrap();
        props.remove("nameservers");
        props.insert(
            "nameServers".into(),
            json!({
                "type": "array",
                "maxItems": 16,
                "description": "Name servers put in the zone at creation.",
                "items": {
                    "type": "object",
                    "required": ["host"],
                    "properties": {
                        "host": {"type": "string", "maxLength": 253},
                        "ttl": {"type": "integer", "minimum": 0, "maximum": 2_147_483_647}
                    }
                }
            }),
        );
        assert_eq!(all(&d)[1].resource_schema, beta.to_string());
    }

    #[test]
    fn v1beta1_is_the_storage_version_and_v1alpha1_keeps_the_description_schemas() {
        let d = orchard_sdk::Actuator::describe(&crate::PdnsZone);
        let v = all(&d);
        assert_eq!(
            v.iter()
                .map(|v| (v.name.as_str(), v.storage))
                .collect::<Vec<_>>(),
            [("v1alpha1", false), ("v1beta1", true)]
        );
        assert_eq!(v[0].resource_schema, d.resource_schema);
        assert!(
            v[1].resource_schema.contains("nameServers")
                && !v[1].resource_schema.contains("\"nameservers\"")
        );
    }
}
