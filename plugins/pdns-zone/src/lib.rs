//! PowerDNS zones as Kubernetes objects (`DnsZone.pdns.orchard.dev`).
//!
//! - identity: the zone's canonical name (`example.org.`), which is also its PowerDNS id;
//! - adoption: a zone with the same name;
//! - import filter: `name`, `kind`, `account`, matched exactly;
//! - mutable through the `settings` reconciler: `kind`, `account`, each change back reported as
//!   a drift (old → new); immutable: `name`, `nameservers` (set at creation).

#![forbid(unsafe_code)]

use orchard_sdk::report::Diff;
use orchard_sdk::{Actuator, Availability, Description, Failure, Object, Resource, Status, json};
use pdns_client::{Client, Zone, canonical};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `spec.resource`. Its schema is the CRD's (`orchard_sdk::schema::of`); the fields' notes are
/// `//` comments, not doc comments, so that the CRD stays as it was (a doc comment would become
/// the field's `description`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ZoneSpec {
    // Zone name, e.g. `example.org.`; immutable.
    #[schemars(
        length(max = 253),
        regex(pattern = r"^([a-zA-Z0-9-_]+\.)*[a-zA-Z0-9-_]+\.?$"),
        extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "name is immutable"}])
    )]
    pub name: String,
    // `Native`, `Master` or `Slave`.
    #[serde(default = "native")]
    #[schemars(extend("enum" = KINDS))]
    pub kind: String,
    // Nameservers put in the zone at creation. (`skip_serializing_if`: no `default: []` in the
    // schema, which would make the apiserver write one into every object.)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16), inner(length(max = 253)))]
    pub nameservers: Vec<String>,
    // PowerDNS account the zone belongs to.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 255))]
    pub account: String,
}

/// The zone kinds PowerDNS knows.
pub const KINDS: [&str; 3] = ["Native", "Master", "Slave"];

fn native() -> String {
    "Native".to_owned()
}

/// `spec.import.filter`: at least one field.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("minProperties" = 1))]
pub struct ZoneFilter {
    #[schemars(length(max = 253))]
    pub name: Option<String>,
    #[schemars(extend("enum" = KINDS))]
    pub kind: Option<String>,
    #[schemars(length(max = 255))]
    pub account: Option<String>,
}

/// `status.resource`: what `observed` returns (`orchard_sdk::schema::observed`).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Observed {
    pub name: String,
    pub kind: String,
    #[schemars(schema_with = "integer")]
    pub serial: u64,
    pub account: String,
    pub dnssec: bool,
    #[schemars(schema_with = "integer")]
    pub rrset_count: usize,
    /// The plugin build that made this observation (shows a rollout's progress).
    pub plugin_build: String,
}

/// A counter of `status.resource`: any integer, as the CRD has always said (a Rust unsigned
/// type would add `minimum: 0`).
fn integer(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "integer"})
}

/// The actuator.
#[derive(Default)]
pub struct PdnsZone;

fn resource(zone: Zone) -> Resource<Zone> {
    Resource {
        id: zone.id.clone(),
        state: zone,
    }
}

const SETTINGS: &str = "settings";

/// The kind's API group: `pdns.orchard.dev`, or `ORCHARD_PDNS_ZONE_GROUP` at build time (the
/// upgrade scenarios build the plugin on a group of their own, so that the other suites'
/// `DnsZone` CRD is not upgraded under them).
pub const GROUP: &str = match option_env!("ORCHARD_PDNS_ZONE_GROUP") {
    Some(group) => group,
    None => "pdns.orchard.dev",
};

impl Actuator for PdnsZone {
    type Spec = ZoneSpec;
    type Filter = ZoneFilter;
    type State = Zone;

    fn describe(&self) -> Description {
        Description {
            name: "pdns-zone".into(),
            group: GROUP.into(),
            version: "v1alpha1".into(),
            kind: "DnsZone".into(),
            plural: "dnszones".into(),
            resource_schema: orchard_sdk::schema::of::<ZoneSpec>(),
            filter_schema: Some(orchard_sdk::schema::of::<ZoneFilter>()),
            observed_schema: orchard_sdk::schema::observed::<Observed>(),
            dependencies: vec![],
            needs_credentials: true,
        }
    }

    /// PowerDNS refuses a zone name that exists (`409 Conflict`, nothing changed), deletes a
    /// zone at once (`204`, then `404`) and by its id alone (a gone one answers `404`, which
    /// is done): the host skips the lookup before a create, and the reads before and after a
    /// delete.
    fn shortcuts(&self) -> orchard_sdk::Shortcuts {
        orchard_sdk::Shortcuts {
            create_refuses_duplicates: true,
            delete_is_synchronous: true,
            delete_by_id: true,
        }
    }

    #[cfg(feature = "v1beta1")]
    fn versions(&self) -> Vec<orchard_sdk::ApiVersion> {
        versions::all(&self.describe())
    }

    #[cfg(feature = "v1beta1")]
    fn convert(
        &self,
        obj: orchard_sdk::Convertible,
        from: &str,
        to: &str,
    ) -> Result<orchard_sdk::Convertible, Failure> {
        versions::convert(obj, from, to)
    }

    fn get_by_id(
        &self,
        obj: &Object<ZoneSpec>,
        id: &str,
    ) -> Result<Option<Resource<Zone>>, Failure> {
        Ok(Client::for_object(obj)?.zone(id)?.map(resource))
    }

    fn list_for_adoption(
        &self,
        obj: &Object<ZoneSpec>,
    ) -> Result<Option<Vec<Resource<Zone>>>, Failure> {
        let Some(spec) = &obj.spec else {
            return Ok(None);
        };
        let name = canonical(&spec.name);
        // The name is the zone's identity in PowerDNS: at most one zone can match.
        Ok(Some(
            Client::for_object(obj)?
                .zone(&name)?
                .into_iter()
                .map(resource)
                .collect(),
        ))
    }

    fn list_for_import(
        &self,
        obj: &Object<ZoneSpec>,
        filter: &ZoneFilter,
    ) -> Result<Vec<Resource<Zone>>, Failure> {
        let name = filter.name.as_deref().map(canonical);
        let zones = Client::for_object(obj)?.zones()?;
        Ok(zones
            .into_iter()
            .filter(|z| name.as_ref().is_none_or(|n| &z.name == n))
            .filter(|z| {
                filter
                    .kind
                    .as_ref()
                    .is_none_or(|k| z.kind.eq_ignore_ascii_case(k))
            })
            .filter(|z| filter.account.as_ref().is_none_or(|a| &z.account == a))
            .map(resource)
            .collect())
    }

    fn create(&self, obj: &Object<ZoneSpec>) -> Result<Resource<Zone>, Status> {
        let spec = obj.spec()?;
        let client = Client::for_object(obj)?;
        let nameservers: Vec<String> = spec.nameservers.iter().map(|n| canonical(n)).collect();
        // One request creates the zone with every setting: nothing fallible follows it.
        let zone = client.create_zone(&json!({
            "name": canonical(&spec.name),
            "kind": spec.kind,
            "nameservers": nameservers,
            "account": spec.account,
        }))?;
        Ok(resource(zone))
    }

    fn delete(&self, obj: &Object<ZoneSpec>, res: &Resource<Zone>) -> Result<Status, Failure> {
        self.delete_by_id(obj, &res.id)
    }

    fn delete_by_id(&self, obj: &Object<ZoneSpec>, id: &str) -> Result<Status, Failure> {
        Client::for_object(obj)?.delete_zone(id)?;
        Ok(Status::done())
    }

    fn reconcilers(
        &self,
        _: &Object<ZoneSpec>,
        _: &Resource<Zone>,
    ) -> Result<Vec<String>, Failure> {
        Ok(vec![SETTINGS.to_owned()])
    }

    fn run_reconciler(
        &self,
        name: &str,
        obj: &Object<ZoneSpec>,
        res: &Resource<Zone>,
    ) -> Result<Status, Failure> {
        if name != SETTINGS {
            return Err(Failure::unrecoverable(format!(
                "no reconciler named {name:?}"
            )));
        }
        let spec = obj.spec()?;
        let zone = &res.state;
        let mut diff = Diff::new();
        // PowerDNS answers `Native`, `Master`…; a spec may say `native`.
        if !zone.kind.eq_ignore_ascii_case(&spec.kind) {
            diff = diff.changed("kind", &zone.kind, &spec.kind);
        }
        let diff = diff.field("account", &zone.account, &spec.account);
        if diff.is_empty() {
            return Ok(Status::done());
        }
        Client::for_object(obj)?.update_zone(
            &res.id,
            &json!({"kind": spec.kind, "account": spec.account}),
        )?;
        // Reported once changed back: a failed update reports no drift.
        diff.report();
        Ok(Status::needs_refresh("zone settings updated"))
    }

    fn available(
        &self,
        _: &Object<ZoneSpec>,
        _: &Resource<Zone>,
    ) -> Result<(Availability, Status), Failure> {
        // A PowerDNS zone serves as soon as it exists.
        Ok((Availability::Available, Status::done()))
    }

    fn observed(&self, res: &Resource<Zone>) -> Result<serde_json::Value, Failure> {
        let z = &res.state;
        Ok(serde_json::to_value(Observed {
            name: z.name.clone(),
            kind: z.kind.clone(),
            serial: z.serial,
            account: z.account.clone(),
            dnssec: z.dnssec,
            rrset_count: z.rrsets.len(),
            plugin_build: plugin_build(),
        })?)
    }
}

/// `<crate version>[+<ORCHARD_PLUGIN_BUILD at build time>]`: tells apart two builds of the same
/// version during a rollout (the hot-swap tests build a `+next` one).
fn plugin_build() -> String {
    match option_env!("ORCHARD_PLUGIN_BUILD") {
        Some(build) if !build.is_empty() => format!("{}+{build}", env!("CARGO_PKG_VERSION")),
        _ => env!("CARGO_PKG_VERSION").to_owned(),
    }
}

/// Its API versions: served by the `v1beta1` build.
pub mod versions;

orchard_sdk::export_actuator!(PdnsZone);

#[cfg(test)]
mod tests {
    use super::*;
    use orchard_sdk::Raw;

    fn spec(kind: &str, account: &str) -> ZoneSpec {
        ZoneSpec {
            name: "example.org.".into(),
            kind: kind.into(),
            nameservers: vec![],
            account: account.into(),
        }
    }

    fn zone(kind: &str, account: &str) -> Resource<Zone> {
        Resource::new(
            "example.org.",
            Zone {
                id: "example.org.".into(),
                name: "example.org.".into(),
                kind: kind.into(),
                serial: 1,
                account: account.into(),
                dnssec: false,
                rrsets: vec![],
            },
        )
    }

    /// A one-connection HTTP server answering `status` to the first request; returns its URL
    /// and, once joined, the request line and body it received.
    fn one_answer(status: u16) -> (String, std::thread::JoinHandle<String>) {
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
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            write!(
                reader.get_mut(),
                "HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            )
            .unwrap();
            format!("{}{}", request.trim_end(), String::from_utf8(body).unwrap())
        });
        (url, server)
    }

    /// The CRD does not change with the schemas now derived from the types: they are, byte for
    /// byte, the hand-written ones of before (`orchard crd` prints the same CRD).
    #[test]
    fn the_derived_schemas_are_the_hand_written_ones_byte_for_byte() {
        let d = PdnsZone.describe();
        assert_eq!(
            d.resource_schema,
            json!({
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string", "maxLength": 253, "pattern": "^([a-zA-Z0-9-_]+\\.)*[a-zA-Z0-9-_]+\\.?$",
                             "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "name is immutable"}]},
                    "kind": {"type": "string", "enum": ["Native", "Master", "Slave"], "default": "Native"},
                    "nameservers": {"type": "array", "maxItems": 16, "items": {"type": "string", "maxLength": 253}},
                    "account": {"type": "string", "maxLength": 255}
                }
            })
            .to_string()
        );
        assert_eq!(
            d.filter_schema,
            Some(
                json!({
                    "type": "object",
                    "minProperties": 1,
                    "properties": {
                        "name": {"type": "string", "maxLength": 253},
                        "kind": {"type": "string", "enum": ["Native", "Master", "Slave"]},
                        "account": {"type": "string", "maxLength": 255}
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
                    "name": {"type": "string"},
                    "kind": {"type": "string"},
                    "serial": {"type": "integer"},
                    "account": {"type": "string"},
                    "dnssec": {"type": "boolean"},
                    "rrsetCount": {"type": "integer"},
                    "pluginBuild": {"type": "string", "description": "The plugin build that made this observation (shows a rollout's progress)."}
                }
            })
            .to_string()
        );
        // What observed() returns is what the schema says.
        let observed = PdnsZone.observed(&zone("Native", "a")).unwrap();
        let fields: Vec<&String> = observed.as_object().unwrap().keys().collect();
        assert_eq!(
            fields,
            [
                "account",
                "dnssec",
                "kind",
                "name",
                "pluginBuild",
                "rrsetCount",
                "serial"
            ]
        );
    }

    #[test]
    fn settings_as_desired_need_no_call() {
        let obj = Object::new("z").with_spec(spec("native", "a"));
        let got = PdnsZone.run_reconciler(SETTINGS, &obj, &zone("Native", "a"));
        assert_eq!(got, Ok(Status::done()));
        assert!(orchard_sdk::report::take().is_empty());
    }

    #[test]
    fn settings_changed_back_are_reported_as_drifts_old_to_new() {
        let (url, server) = one_answer(204);
        let obj = Object::new("z")
            .with_spec(spec("Master", "b"))
            .with_credential("url", url)
            .with_credential("apiKey", "k");
        let got = PdnsZone.run_reconciler(SETTINGS, &obj, &zone("Native", "a"));
        assert_eq!(got, Ok(Status::needs_refresh("zone settings updated")));
        let request = server.join().unwrap();
        assert!(
            request.starts_with("PUT /api/v1/servers/localhost/zones/example.org. "),
            "{request}"
        );
        let reports = orchard_sdk::report::take();
        assert_eq!(reports.drift_fields(), ["kind", "account"]);
        let d = &reports.drifts[0];
        assert_eq!(
            (d.observed.as_deref(), d.desired.as_deref(), d.sensitive),
            (Some(r#""Native""#), Some(r#""Master""#), false)
        );
        assert!(reports.connection_details.is_empty());
    }

    #[test]
    fn a_failed_change_reports_no_drift() {
        let (url, server) = one_answer(500);
        let obj = Object::new("z")
            .with_spec(spec("Native", "b"))
            .with_credential("url", url)
            .with_credential("apiKey", "k");
        assert!(
            PdnsZone
                .run_reconciler(SETTINGS, &obj, &zone("Native", "a"))
                .is_err()
        );
        server.join().unwrap();
        assert!(orchard_sdk::report::take().is_empty());
    }

    #[test]
    fn a_change_without_credentials_is_an_invalid_configuration() {
        let obj = Object::new("z").with_spec(spec("Master", "a"));
        let want = Err(Failure::invalid(r#"credentials Secret has no key "url""#));
        assert_eq!(
            PdnsZone.run_reconciler(SETTINGS, &obj, &zone("Native", "a")),
            want
        );
        assert_eq!(PdnsZone.delete(&obj, &zone("Native", "a")), want);
        let no_key = obj.with_credential("url", "http://127.0.0.1:1");
        assert_eq!(
            PdnsZone.create(&no_key).map(|r| r.id),
            Err(Failure::invalid(r#"credentials Secret has no key "apiKey""#).into())
        );
    }

    #[test]
    fn through_the_json_face_failures_become_statuses() {
        let raw = Raw(PdnsZone);
        let obj = || Object::new("z").with_spec(r#"{"name":"example.org."}"#.to_owned());
        let res = zone("Native", "").to_raw().unwrap();
        assert!(raw.run_reconciler(SETTINGS, obj(), &res).is_done());
        assert_eq!(
            raw.run_reconciler("ttl", obj(), &res),
            Failure::unrecoverable(r#"no reconciler named "ttl""#).into()
        );
        assert_eq!(
            raw.available(obj(), &res),
            (Availability::Available, Status::done())
        );
        let typo = Object::new("z").with_spec(r#"{"name":"example.org.","acount":"a"}"#.to_owned());
        let status = raw.delete(typo, &res);
        assert!(
            status
                .failure
                .as_ref()
                .is_some_and(|f| matches!(f, Failure::InvalidConfiguration(m) if m.contains("unknown field `acount`"))),
            "{status:?}"
        );
    }
}
