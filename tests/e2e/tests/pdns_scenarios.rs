//! The reconciler's scenario set against the PowerDNS plugins (Rust, compiled to Wasm) with
//! the real apiserver, the real PowerDNS and the real `orchard` binary: the shared scenarios
//! of `orchard_e2e::scenarios` for `DnsZone`, and what only records have — a dependency on
//! their zone, and updates of record sets. Every scenario asserts PowerDNS's own state.

use std::time::Duration;

use anyhow::Context;
use kube::ResourceExt;
use orchard_e2e::harness::{Harness, progressing_message};
use orchard_e2e::pdns::{self, RECORD, ZONE};
use orchard_e2e::scenario_set;
use orchard_e2e::scenarios::Subject;
use serde_json::{Value, json};

// -- DnsZone through the shared scenario set --------------------------------------------------

/// `DnsZone`: a zone's id is its name; the `account` field marks who made it.
pub struct Zone {
    api: pdns::Api,
}

impl Subject for Zone {
    const API_VERSION: &'static str = "pdns.orchard.dev/v1alpha1";
    const KIND: &'static str = ZONE;
    const PLUGIN: &'static str = "pdns-zone";
    const SECRET: &'static str = pdns::SECRET;

    async fn harness(name: &str) -> anyhow::Result<(Harness, Self)> {
        let (h, api) = pdns::harness(&format!("zone-{name}")).await?;
        Ok((h, Self { api }))
    }

    fn id_of(&self, name: &str) -> String {
        format!("{name}.test.")
    }

    fn minimal(&self, name: &str) -> String {
        format!("{{name: \"{}\"}}", self.id_of(name))
    }

    fn full(&self, name: &str) -> String {
        let zone = self.id_of(name);
        format!(
            "{{name: \"{zone}\", kind: Master, account: team-a, nameservers: [\"ns1.{zone}\"]}}"
        )
    }

    async fn check_full(&self, name: &str, observed: &Value) -> anyhow::Result<()> {
        let zone = self.id_of(name);
        let z = self.api.zone(&zone).await?.context("zone missing")?;
        assert_eq!(z["kind"], "Master");
        assert_eq!(z["account"], "team-a");
        let ns = self
            .api
            .rrset(&zone, &zone, "NS")
            .await?
            .context("no NS record set")?;
        assert_eq!(ns["records"][0]["content"], format!("ns1.{zone}"));
        assert_eq!(observed["kind"], "Master");
        assert_eq!(observed["account"], "team-a");
        Ok(())
    }

    fn updated(&self, name: &str) -> String {
        format!("{{name: \"{}\", account: changed}}", self.id_of(name))
    }

    async fn check_updated(&self, name: &str, observed: &Value) -> anyhow::Result<()> {
        let z = self
            .api
            .zone(&self.id_of(name))
            .await?
            .context("zone missing")?;
        assert_eq!(z["account"], "changed");
        assert_eq!(observed["account"], "changed");
        Ok(())
    }

    async fn external(&self, id: &str) -> anyhow::Result<Option<Value>> {
        self.api.zone(id).await
    }

    async fn create_external(&self, name: &str, marker: &str) -> anyhow::Result<String> {
        let zone = self.id_of(name);
        self.api.create_zone(&zone, marker).await?;
        Ok(zone)
    }

    async fn delete_external(&self, id: &str) -> anyhow::Result<()> {
        self.api.delete_zone(id).await
    }

    fn filter_by_name(&self, name: &str) -> String {
        format!("{{name: \"{}\"}}", self.id_of(name))
    }

    fn filter_by_marker(&self, marker: &str) -> String {
        format!("{{account: \"{marker}\"}}")
    }
}

scenario_set!(zone, super::Zone);

// -- DnsRecord: what only records have ---------------------------------------------------------

fn zone_yaml(name: &str, zone: &str, extra: &str) -> String {
    format!(
        "apiVersion: pdns.orchard.dev/v1alpha1\nkind: DnsZone\nmetadata: {{name: {name}}}\nspec:\n  credentialsRef: {{secretName: pdns}}\n  resource: {{name: \"{zone}\"{extra}}}\n"
    )
}

fn record_yaml(name: &str, zone_ref: &str, ttl: u32, records: &[&str]) -> String {
    format!(
        "apiVersion: pdns.orchard.dev/v1alpha1\nkind: DnsRecord\nmetadata: {{name: {name}}}\nspec:\n  credentialsRef: {{secretName: pdns}}\n  resource: {{zoneRef: {zone_ref}, name: www, type: A, ttl: {ttl}, records: {records:?}}}\n"
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_record_waits_for_its_zone_and_the_zone_cannot_go_while_records_use_it()
-> anyhow::Result<()> {
    let (mut h, pdns) = pdns::harness("dependency").await?;
    let _host = h.start_host(&[])?;
    let zone = pdns::zone_name(&h, "dep");
    let www = format!("www.{zone}");

    // The record comes first: it waits for its zone.
    h.apply(&record_yaml("www", "dep", 300, &["192.0.2.1"]))
        .await?;
    let waiting = h
        .wait_condition(RECORD, "www", "Progressing", "True", Some("Progressing"))
        .await?;
    let message = progressing_message(&waiting);
    assert!(message.contains("DnsZone/dep"), "{message}");
    assert_eq!(
        waiting.data["status"]["conditions"][0]["status"], "False",
        "not Available while waiting"
    );

    h.apply(&zone_yaml("dep", &zone, "")).await?;
    let record = h.wait_ready(RECORD, "www").await?;
    assert_eq!(record.data["status"]["id"], format!("{zone}/{www}/A"));
    let rrset = pdns
        .rrset(&zone, &www, "A")
        .await?
        .context("record set missing")?;
    assert_eq!(rrset["records"][0]["content"], "192.0.2.1");
    assert_eq!(rrset["ttl"], 300);

    // The zone cannot go while the record uses it.
    h.delete(ZONE, "dep").await?;
    let blocked = h
        .wait_condition(ZONE, "dep", "Progressing", "True", None)
        .await?;
    assert!(progressing_message(&blocked).contains("orchard.dev/pdns-record-guard"));
    assert!(
        pdns.zone(&zone).await?.is_some(),
        "zone deleted while a record used it"
    );

    h.delete(RECORD, "www").await?;
    h.wait_gone(RECORD, "www").await?;
    h.wait_gone(ZONE, "dep").await?;
    assert!(pdns.zone(&zone).await?.is_none());
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn another_controllers_finalizer_and_annotations_outlive_orchards_create_and_delete()
-> anyhow::Result<()> {
    // Orchard's finalizer joins and leaves the list another controller keeps, never writes
    // the list over; its writes leave other annotations alone.
    const OTHER: &str = "example.com/backup";
    let team = |obj: &kube::api::DynamicObject| obj.annotations().get("team").cloned();
    let (mut h, pdns) = pdns::harness("other-finalizer").await?;
    let _host = h.start_host(&[])?;
    let zone = pdns::zone_name(&h, "shared");
    h.apply(&format!(
        "apiVersion: pdns.orchard.dev/v1alpha1\nkind: DnsZone\nmetadata:\n  name: shared\n  finalizers: [{OTHER}]\n  annotations: {{team: dns}}\nspec:\n  credentialsRef: {{secretName: pdns}}\n  resource: {{name: \"{zone}\"}}\n"
    ))
    .await?;
    let ready = h.wait_ready(ZONE, "shared").await?;
    assert_eq!(
        ready.metadata.finalizers.clone().unwrap_or_default(),
        [OTHER, "orchard.dev/pdns-zone"]
    );
    assert_eq!(team(&ready).as_deref(), Some("dns"));
    assert!(pdns.zone(&zone).await?.is_some());

    // Deleted: the other controller's finalizer goes first (ORC's rule); meanwhile the zone
    // stays and so do both finalizers and the annotation.
    h.delete(ZONE, "shared").await?;
    let waiting = h
        .wait_condition(ZONE, "shared", "Progressing", "True", None)
        .await?;
    assert!(
        progressing_message(&waiting).contains(OTHER),
        "{}",
        progressing_message(&waiting)
    );
    assert!(pdns.zone(&zone).await?.is_some(), "deleted before its turn");
    assert_eq!(
        h.finalizers(ZONE, "shared").await?,
        [OTHER, "orchard.dev/pdns-zone"]
    );
    assert_eq!(team(&waiting).as_deref(), Some("dns"));

    // The other controller lets go of its own: Orchard deletes the zone, then the object goes.
    h.api(ZONE)
        .patch(
            "shared",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                json!({"metadata": {"finalizers": ["orchard.dev/pdns-zone"]}}),
            ),
        )
        .await?;
    h.wait_gone(ZONE, "shared").await?;
    assert!(pdns.zone(&zone).await?.is_none(), "the zone was deleted");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_record_set_update_then_revert_reaches_powerdns() -> anyhow::Result<()> {
    let (mut h, pdns) = pdns::harness("record-update").await?;
    let _host = h.start_host(&[])?;
    let zone = pdns::zone_name(&h, "upd");
    let www = format!("www.{zone}");
    h.apply(&zone_yaml("upd", &zone, "")).await?;
    h.apply(&record_yaml("www", "upd", 300, &["192.0.2.1"]))
        .await?;
    h.wait_ready(RECORD, "www").await?;

    h.apply(&record_yaml("www", "upd", 600, &["192.0.2.2", "192.0.2.3"]))
        .await?;
    h.wait_ready(RECORD, "www").await?;
    let rrset = pdns.rrset(&zone, &www, "A").await?.context("rrset")?;
    assert_eq!(rrset["ttl"], 600);
    let mut contents: Vec<_> = rrset["records"]
        .as_array()
        .context("records")?
        .iter()
        .map(|r| r["content"].clone())
        .collect();
    contents.sort_by_key(ToString::to_string);
    assert_eq!(contents, vec![json!("192.0.2.2"), json!("192.0.2.3")]);

    h.apply(&record_yaml("www", "upd", 300, &["192.0.2.1"]))
        .await?;
    let obj = h.wait_ready(RECORD, "www").await?;
    assert_eq!(obj.data["status"]["resource"]["ttl"], 300);
    let rrset = pdns.rrset(&zone, &www, "A").await?.context("rrset")?;
    assert_eq!(rrset["ttl"], 300);
    assert_eq!(rrset["records"].as_array().map(Vec::len), Some(1));
    assert_eq!(rrset["records"][0]["content"], "192.0.2.1");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_record_powerdns_refuses_fails_once_without_retries() -> anyhow::Result<()> {
    let (mut h, pdns) = pdns::harness("record-refused").await?;
    let _host = h.start_host(&[])?;
    let zone = pdns::zone_name(&h, "inv");
    h.apply(&zone_yaml("inv", &zone, "")).await?;
    h.wait_ready(ZONE, "inv").await?;
    h.apply(&record_yaml("bad", "inv", 300, &["not-an-address"]))
        .await?;
    h.wait_condition(
        RECORD,
        "bad",
        "Progressing",
        "False",
        Some("InvalidConfiguration"),
    )
    .await?;
    h.assert_unchanged(RECORD, "bad", Duration::from_secs(4))
        .await?;
    assert!(
        pdns.rrset(&zone, &format!("www.{zone}"), "A")
            .await?
            .is_none()
    );
    Ok(())
}
