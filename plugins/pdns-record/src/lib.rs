//! PowerDNS record sets as Kubernetes objects (`DnsRecord.pdns.orchard.dev`).
//!
//! A record set lives in a zone: `spec.resource.zoneRef` names a `DnsZone` object, a guarded
//! dependency (the zone cannot be deleted while records use it).
//!
//! - identity: `<zone id>/<name>/<type>`, e.g. `example.org./www.example.org./A`;
//! - adoption: the set with the same zone, name and type;
//! - import filter: `zone`, `name`, `type`, matched exactly;
//! - mutable through the `records` reconciler: `ttl`, `records`, each change back reported as
//!   a drift (old → new).

#![forbid(unsafe_code)]

use orchard_sdk::report::Diff;
use orchard_sdk::{Actuator, DependencyDecl, Description, Failure, Object, Resource, Status, json};
use pdns_client::{Client, RRset, canonical};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `spec.resource`. Its schema is the CRD's (`orchard_sdk::schema::of`); the fields' notes are
/// `//` comments, not doc comments, so that the CRD stays as it was (a doc comment would become
/// the field's `description`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RecordSpec {
    // Name of the `DnsZone` object (same namespace); immutable.
    #[schemars(length(max = 253), extend("x-kubernetes-validations" = [immutable("zoneRef")]))]
    pub zone_ref: String,
    // Owner name, absolute (`www.example.org.`) or relative to the zone (`www`, `@`); immutable.
    #[schemars(length(max = 253), extend("x-kubernetes-validations" = [immutable("name")]))]
    pub name: String,
    // Record type: `A`, `AAAA`, `CNAME`, `TXT`, `MX`…; immutable.
    #[serde(rename = "type")]
    #[schemars(
        length(max = 16),
        regex(pattern = r"^[A-Za-z0-9]+$"),
        extend("x-kubernetes-validations" = [immutable("type")])
    )]
    pub rtype: String,
    #[serde(default = "default_ttl")]
    #[schemars(range(min = 1, max = 2_147_483_647))]
    pub ttl: u32,
    #[schemars(length(min = 1, max = 64), inner(length(max = 4096)))]
    pub records: Vec<String>,
}

fn default_ttl() -> u32 {
    3600
}

/// The CEL rule keeping `field` as it was created.
fn immutable(field: &str) -> serde_json::Value {
    json!({"rule": "self == oldSelf", "message": format!("{field} is immutable")})
}

/// `spec.import.filter`. As in [`RecordSpec`], the notes are `//` comments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RecordFilter {
    // Zone name, e.g. `example.org.`.
    #[schemars(length(max = 253))]
    pub zone: String,
    #[schemars(length(max = 253))]
    pub name: Option<String>,
    #[serde(rename = "type")]
    #[schemars(length(max = 16))]
    pub rtype: Option<String>,
}

/// `status.resource`: what `observed` returns (`orchard_sdk::schema::observed`).
#[derive(Debug, Serialize, JsonSchema)]
pub struct Observed<'a> {
    pub zone: &'a str,
    pub name: &'a str,
    #[serde(rename = "type")]
    pub rtype: &'a str,
    // Any integer, as the CRD has always said (a Rust unsigned type would add `minimum: 0`).
    #[schemars(schema_with = "integer")]
    pub ttl: u32,
    pub records: Vec<&'a str>,
}

fn integer(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "integer"})
}

/// What the actuator remembers of a record set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordState {
    pub zone: String,
    #[serde(flatten)]
    pub rrset: RRset,
}

/// The actuator.
#[derive(Default)]
pub struct PdnsRecord;

const RECORDS: &str = "records";

fn parse_id(id: &str) -> Result<(&str, &str, &str), Failure> {
    let mut parts = id.splitn(3, '/');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(z), Some(n), Some(t)) if !z.is_empty() && !n.is_empty() && !t.is_empty() => {
            Ok((z, n, t))
        }
        _ => Err(Failure::invalid(format!(
            "record id {id:?} is not <zone>/<name>/<type>"
        ))),
    }
}

fn id_of(zone: &str, rrset: &RRset) -> String {
    format!("{zone}/{}/{}", rrset.name, rrset.rtype)
}

/// The absolute owner name of `name` in `zone`.
fn absolute(name: &str, zone: &str) -> String {
    match name.trim() {
        "@" | "" => zone.to_owned(),
        n if n.ends_with('.') => n.to_ascii_lowercase(),
        n if canonical(n).ends_with(&format!(".{zone}")) || canonical(n) == zone => canonical(n),
        n => format!("{}.{zone}", n.to_ascii_lowercase()),
    }
}

fn find(
    client: &Client,
    zone: &str,
    name: &str,
    rtype: &str,
) -> Result<Option<Resource<RecordState>>, Failure> {
    let Some(z) = client.zone(zone)? else {
        return Ok(None);
    };
    Ok(z.rrsets
        .into_iter()
        .find(|r| r.name == name && r.rtype.eq_ignore_ascii_case(rtype))
        .map(|rrset| Resource {
            id: id_of(zone, &rrset),
            state: RecordState {
                zone: zone.to_owned(),
                rrset,
            },
        }))
}

struct Desired {
    zone: String,
    name: String,
    rtype: String,
}

fn desired(obj: &Object<RecordSpec>) -> Result<Desired, Failure> {
    let spec = obj.spec()?;
    let zone = obj.dependency_id("zone")?.to_owned();
    Ok(Desired {
        name: absolute(&spec.name, &zone),
        rtype: spec.rtype.to_ascii_uppercase(),
        zone,
    })
}

fn replace(client: &Client, d: &Desired, spec: &RecordSpec) -> Result<(), Failure> {
    let records: Vec<_> = spec
        .records
        .iter()
        .map(|c| json!({"content": c, "disabled": false}))
        .collect();
    client.patch_rrsets(
        &d.zone,
        &json!([{ "name": d.name, "type": d.rtype, "ttl": spec.ttl, "changetype": "REPLACE", "records": records }]),
    )
}

impl Actuator for PdnsRecord {
    type Spec = RecordSpec;
    type Filter = RecordFilter;
    type State = RecordState;

    fn describe(&self) -> Description {
        Description {
            name: "pdns-record".into(),
            group: "pdns.orchard.dev".into(),
            version: "v1alpha1".into(),
            kind: "DnsRecord".into(),
            plural: "dnsrecords".into(),
            resource_schema: orchard_sdk::schema::of::<RecordSpec>(),
            filter_schema: Some(orchard_sdk::schema::of::<RecordFilter>()),
            observed_schema: orchard_sdk::schema::observed::<Observed<'static>>(),
            dependencies: vec![DependencyDecl {
                for_delete: true,
                ..DependencyDecl::guarded("zone", "zoneRef", "DnsZone")
            }],
            needs_credentials: true,
        }
    }

    fn get_by_id(
        &self,
        obj: &Object<RecordSpec>,
        id: &str,
    ) -> Result<Option<Resource<RecordState>>, Failure> {
        let (zone, name, rtype) = parse_id(id)?;
        find(&Client::for_object(obj)?, zone, name, rtype)
    }

    fn list_for_adoption(
        &self,
        obj: &Object<RecordSpec>,
    ) -> Result<Option<Vec<Resource<RecordState>>>, Failure> {
        if obj.spec.is_none() {
            return Ok(None);
        }
        let d = desired(obj)?;
        Ok(Some(
            find(&Client::for_object(obj)?, &d.zone, &d.name, &d.rtype)?
                .into_iter()
                .collect(),
        ))
    }

    fn list_for_import(
        &self,
        obj: &Object<RecordSpec>,
        f: &RecordFilter,
    ) -> Result<Vec<Resource<RecordState>>, Failure> {
        let zone = canonical(&f.zone);
        let name = f.name.as_deref().map(|n| absolute(n, &zone));
        let Some(z) = Client::for_object(obj)?.zone(&zone)? else {
            return Ok(vec![]);
        };
        Ok(z.rrsets
            .into_iter()
            .filter(|r| name.as_ref().is_none_or(|n| &r.name == n))
            .filter(|r| {
                f.rtype
                    .as_ref()
                    .is_none_or(|t| r.rtype.eq_ignore_ascii_case(t))
            })
            .map(|rrset| Resource {
                id: id_of(&zone, &rrset),
                state: RecordState {
                    zone: zone.clone(),
                    rrset,
                },
            })
            .collect())
    }

    fn create(&self, obj: &Object<RecordSpec>) -> Result<Resource<RecordState>, Status> {
        let spec = obj.spec()?;
        let d = desired(obj)?;
        let client = Client::for_object(obj)?;
        // One PATCH creates the set with its TTL and records: nothing fallible follows it.
        replace(&client, &d, spec)?;
        let rrset = RRset {
            name: d.name.clone(),
            rtype: d.rtype.clone(),
            ttl: spec.ttl,
            records: spec
                .records
                .iter()
                .map(|c| pdns_client::Record {
                    content: c.clone(),
                    disabled: false,
                })
                .collect(),
        };
        Ok(Resource {
            id: id_of(&d.zone, &rrset),
            state: RecordState {
                zone: d.zone,
                rrset,
            },
        })
    }

    fn delete(
        &self,
        obj: &Object<RecordSpec>,
        res: &Resource<RecordState>,
    ) -> Result<Status, Failure> {
        let client = Client::for_object(obj)?;
        if client.zone(&res.state.zone)?.is_none() {
            return Ok(Status::done()); // the zone, and so the set, is gone
        }
        let r = &res.state.rrset;
        client.patch_rrsets(
            &res.state.zone,
            &json!([{ "name": r.name, "type": r.rtype, "changetype": "DELETE" }]),
        )?;
        Ok(Status::done())
    }

    fn reconcilers(
        &self,
        _: &Object<RecordSpec>,
        _: &Resource<RecordState>,
    ) -> Result<Vec<String>, Failure> {
        Ok(vec![RECORDS.to_owned()])
    }

    fn run_reconciler(
        &self,
        name: &str,
        obj: &Object<RecordSpec>,
        res: &Resource<RecordState>,
    ) -> Result<Status, Failure> {
        if name != RECORDS {
            return Err(Failure::unrecoverable(format!(
                "no reconciler named {name:?}"
            )));
        }
        let spec = obj.spec()?;
        let mut want: Vec<&str> = spec.records.iter().map(String::as_str).collect();
        let mut have: Vec<&str> = res
            .state
            .rrset
            .records
            .iter()
            .map(|r| r.content.as_str())
            .collect();
        want.sort_unstable();
        have.sort_unstable();
        let diff = Diff::new()
            .field("ttl", res.state.rrset.ttl, spec.ttl)
            .field("records", &have, &want);
        if diff.is_empty() {
            return Ok(Status::done());
        }
        let d = Desired {
            zone: res.state.zone.clone(),
            name: res.state.rrset.name.clone(),
            rtype: res.state.rrset.rtype.clone(),
        };
        replace(&Client::for_object(obj)?, &d, spec)?;
        diff.report();
        Ok(Status::needs_refresh("records updated"))
    }

    fn observed(&self, res: &Resource<RecordState>) -> Result<serde_json::Value, Failure> {
        let r = &res.state.rrset;
        let observed = Observed {
            zone: &res.state.zone,
            name: &r.name,
            rtype: &r.rtype,
            ttl: r.ttl,
            records: r.records.iter().map(|r| r.content.as_str()).collect(),
        };
        Ok(serde_json::to_value(observed)?)
    }
}

orchard_sdk::export_actuator!(PdnsRecord);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_names_are_made_absolute_in_their_zone() {
        assert_eq!(absolute("www", "example.org."), "www.example.org.");
        assert_eq!(absolute("@", "example.org."), "example.org.");
        assert_eq!(
            absolute("WWW.example.org.", "example.org."),
            "www.example.org."
        );
        assert_eq!(
            absolute("www.example.org", "example.org."),
            "www.example.org."
        );
    }

    fn spec(records: &[&str], ttl: u32) -> RecordSpec {
        RecordSpec {
            zone_ref: "example".into(),
            name: "www".into(),
            rtype: "A".into(),
            ttl,
            records: records.iter().map(|&r| r.to_owned()).collect(),
        }
    }

    fn state(records: &[&str], ttl: u32) -> Resource<RecordState> {
        Resource::new(
            "example.org./www.example.org./A",
            RecordState {
                zone: "example.org.".into(),
                rrset: RRset {
                    name: "www.example.org.".into(),
                    rtype: "A".into(),
                    ttl,
                    records: records
                        .iter()
                        .map(|&c| pdns_client::Record {
                            content: c.to_owned(),
                            disabled: false,
                        })
                        .collect(),
                },
            },
        )
    }

    /// The CRD does not change with the schemas now derived from the types: they are, byte for
    /// byte, the hand-written ones of before (`orchard crd` prints the same CRD).
    #[test]
    fn the_derived_schemas_are_the_hand_written_ones_byte_for_byte() {
        let d = PdnsRecord.describe();
        assert_eq!(
            d.resource_schema,
            json!({
                "type": "object",
                "required": ["zoneRef", "name", "type", "records"],
                "properties": {
                    "zoneRef": {"type": "string", "maxLength": 253,
                                "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "zoneRef is immutable"}]},
                    "name": {"type": "string", "maxLength": 253,
                             "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "name is immutable"}]},
                    "type": {"type": "string", "maxLength": 16, "pattern": "^[A-Za-z0-9]+$",
                             "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "type is immutable"}]},
                    "ttl": {"type": "integer", "minimum": 1, "maximum": i32::MAX, "default": 3600},
                    "records": {"type": "array", "minItems": 1, "maxItems": 64, "items": {"type": "string", "maxLength": 4096}}
                }
            })
            .to_string()
        );
        assert_eq!(
            d.filter_schema,
            Some(
                json!({
                    "type": "object",
                    "required": ["zone"],
                    "properties": {
                        "zone": {"type": "string", "maxLength": 253},
                        "name": {"type": "string", "maxLength": 253},
                        "type": {"type": "string", "maxLength": 16}
                    }
                })
                .to_string()
            )
        );
        assert_eq!(
            d.observed_schema,
            json!({
                "type": "object",
                "properties": {
                    "zone": {"type": "string"},
                    "name": {"type": "string"},
                    "type": {"type": "string"},
                    "ttl": {"type": "integer"},
                    "records": {"type": "array", "items": {"type": "string"}}
                }
            })
            .to_string()
        );
        // What observed() returns is what the schema says.
        let observed = PdnsRecord.observed(&state(&["192.0.2.1"], 60)).unwrap();
        assert_eq!(
            observed,
            json!({"zone": "example.org.", "name": "www.example.org.", "type": "A", "ttl": 60,
                   "records": ["192.0.2.1"]})
        );
    }

    #[test]
    fn records_as_desired_in_any_order_need_no_call() {
        let obj = Object::new("www").with_spec(spec(&["192.0.2.2", "192.0.2.1"], 60));
        let got = PdnsRecord.run_reconciler(RECORDS, &obj, &state(&["192.0.2.1", "192.0.2.2"], 60));
        assert_eq!(got, Ok(Status::done()));
    }

    #[test]
    fn create_needs_the_zone_then_the_credentials() {
        let obj = Object::new("www").with_spec(spec(&["192.0.2.1"], 60));
        assert_eq!(
            PdnsRecord.create(&obj).map(|r| r.id),
            Err(Failure::transient("dependency zone was not resolved").into())
        );
        let obj = obj.with_dependency(
            orchard_sdk::Dependency::new("zone", "DnsZone", "example").with_id("example.org."),
        );
        assert_eq!(
            PdnsRecord.create(&obj).map(|r| r.id),
            Err(Failure::invalid(r#"credentials Secret has no key "url""#).into())
        );
        assert_eq!(
            PdnsRecord.run_reconciler(RECORDS, &obj, &state(&["192.0.2.9"], 60)),
            Err(Failure::invalid(r#"credentials Secret has no key "url""#))
        );
        assert!(orchard_sdk::report::take().is_empty());
    }

    #[test]
    fn records_changed_back_are_reported_as_drifts_old_to_new() {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream);
            let (mut request, mut line, mut length) = (String::new(), String::new(), 0);
            reader.read_line(&mut request).unwrap();
            while reader.read_line(&mut line).unwrap() > 2 {
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
                line.clear();
            }
            reader.read_exact(&mut vec![0; length]).unwrap();
            let answer = "HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n";
            reader.get_mut().write_all(answer.as_bytes()).unwrap();
            request
        });
        let obj = Object::new("www")
            .with_spec(spec(&["192.0.2.1", "192.0.2.3"], 300))
            .with_credential("url", url)
            .with_credential("apiKey", "k");
        let got = PdnsRecord.run_reconciler(RECORDS, &obj, &state(&["192.0.2.2", "192.0.2.1"], 60));
        assert_eq!(got, Ok(Status::needs_refresh("records updated")));
        assert!(
            server
                .join()
                .unwrap()
                .starts_with("PATCH /api/v1/servers/localhost/zones/example.org. ")
        );
        let reports = orchard_sdk::report::take();
        let got: Vec<_> = reports
            .drifts
            .iter()
            .map(|d| {
                (
                    d.field.as_str(),
                    d.observed.as_deref(),
                    d.desired.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("ttl", Some("60"), Some("300")),
                (
                    "records",
                    Some(r#"["192.0.2.1","192.0.2.2"]"#),
                    Some(r#"["192.0.2.1","192.0.2.3"]"#)
                ),
            ]
        );
    }

    #[test]
    fn ids_round_trip_through_zone_name_and_type() {
        let rrset = RRset {
            name: "www.example.org.".into(),
            rtype: "A".into(),
            ttl: 60,
            records: vec![],
        };
        let id = id_of("example.org.", &rrset);
        assert_eq!(
            parse_id(&id).unwrap(),
            ("example.org.", "www.example.org.", "A")
        );
        assert!(parse_id("example.org.").is_err());
    }
}
