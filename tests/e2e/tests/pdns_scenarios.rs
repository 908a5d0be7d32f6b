//! The reconciler's scenarios end to end: the real apiserver, the real PowerDNS, the real
//! `orchard` binary with the PowerDNS plugins compiled to Wasm. Every scenario asserts the
//! state of PowerDNS itself, not only the conditions.

use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams};
use orchard_e2e::poll_until;
use orchard_e2e::scenario::{CONVERGE, Scenario};
use serde_json::json;

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

fn unmanaged_yaml(name: &str, import: &str, extra: &str) -> String {
    format!(
        "apiVersion: pdns.orchard.dev/v1alpha1\nkind: DnsZone\nmetadata: {{name: {name}}}\nspec:\n  managementPolicy: unmanaged\n  credentialsRef: {{secretName: pdns}}\n  import: {import}\n{extra}"
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn create_minimal_and_the_credentials_secret_cannot_go_while_in_use() -> anyhow::Result<()> {
    let mut s = Scenario::new("create-minimal").await?;
    let _host = s.start_host(&[])?;
    let zone = s.zone_name("minimal");
    s.apply(&zone_yaml("minimal", &zone, "")).await?;
    let obj = s.wait_ready(&s.zones, "minimal").await?;
    assert_eq!(obj.data["status"]["id"], zone);
    assert_eq!(obj.data["status"]["resource"]["name"], zone);
    let pdns = s
        .pdns_zone(&zone)
        .await?
        .context("zone missing in PowerDNS")?;
    assert_eq!(pdns["kind"], "Native");
    assert!(
        s.event_reasons("minimal")
            .await?
            .contains(&"Created".to_owned())
    );

    // The Secret is guarded while the zone uses it.
    let secrets: Api<Secret> = Api::namespaced(s.client.clone(), &s.ns);
    secrets.delete("pdns", &DeleteParams::default()).await?;
    let secret = secrets.get("pdns").await?;
    assert!(secret.metadata.deletion_timestamp.is_some());
    assert!(
        secret
            .metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"orchard.dev/pdns-zone-guard".to_owned())
    );

    // Deleting the zone deletes it in PowerDNS, then releases the Secret.
    s.delete(&s.zones, "minimal").await?;
    s.wait_gone(&s.zones, "minimal").await?;
    assert!(
        s.pdns_zone(&zone).await?.is_none(),
        "zone still in PowerDNS"
    );
    poll_until(CONVERGE, "the Secret to be released", || async {
        Ok(secrets.get_opt("pdns").await?.is_none().then_some(()))
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn create_full() -> anyhow::Result<()> {
    let mut s = Scenario::new("create-full").await?;
    let _host = s.start_host(&[])?;
    let zone = s.zone_name("full");
    let ns1 = format!("ns1.{zone}");
    s.apply(&zone_yaml(
        "full",
        &zone,
        &format!(", kind: Master, account: team-a, nameservers: [\"{ns1}\"]"),
    ))
    .await?;
    let obj = s.wait_ready(&s.zones, "full").await?;
    let observed = &obj.data["status"]["resource"];
    assert_eq!(observed["kind"], "Master");
    assert_eq!(observed["account"], "team-a");
    let pdns = s.pdns_zone(&zone).await?.context("zone missing")?;
    assert_eq!(pdns["kind"], "Master");
    assert_eq!(pdns["account"], "team-a");
    let ns = s
        .pdns_rrset(&zone, &zone, "NS")
        .await?
        .context("no NS record set")?;
    assert_eq!(ns["records"][0]["content"], ns1);
    assert!(obj.data["status"]["lastSyncTime"].is_string());
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn dependency_record_waits_for_its_zone_and_the_zone_waits_for_its_records()
-> anyhow::Result<()> {
    let mut s = Scenario::new("dependency").await?;
    let _host = s.start_host(&[])?;
    let zone = s.zone_name("dep");
    let www = format!("www.{zone}");

    // The record comes first: it waits for its zone.
    s.apply(&record_yaml("www", "dep", 300, &["192.0.2.1"]))
        .await?;
    let waiting = s
        .wait_condition(
            &s.records,
            "www",
            "Progressing",
            "True",
            Some("Progressing"),
        )
        .await?;
    assert!(
        Scenario::progressing_message(&waiting).contains("DnsZone/dep"),
        "{}",
        Scenario::progressing_message(&waiting)
    );
    assert_eq!(
        waiting.data["status"]["conditions"][0]["status"], "False",
        "not Available while waiting"
    );

    s.apply(&zone_yaml("dep", &zone, "")).await?;
    let record = s.wait_ready(&s.records, "www").await?;
    assert_eq!(record.data["status"]["id"], format!("{zone}/{www}/A"));
    let rrset = s
        .pdns_rrset(&zone, &www, "A")
        .await?
        .context("record set missing")?;
    assert_eq!(rrset["records"][0]["content"], "192.0.2.1");
    assert_eq!(rrset["ttl"], 300);

    // The zone cannot go while the record uses it.
    s.delete(&s.zones, "dep").await?;
    let blocked = s
        .wait_condition(&s.zones, "dep", "Progressing", "True", None)
        .await?;
    assert!(Scenario::progressing_message(&blocked).contains("orchard.dev/pdns-record-guard"));
    assert!(
        s.pdns_zone(&zone).await?.is_some(),
        "zone deleted while a record used it"
    );

    s.delete(&s.records, "www").await?;
    s.wait_gone(&s.records, "www").await?;
    s.wait_gone(&s.zones, "dep").await?;
    assert!(s.pdns_zone(&zone).await?.is_none());
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn import_by_id_and_unmanaged_never_writes_to_powerdns() -> anyhow::Result<()> {
    let mut s = Scenario::new("import-id").await?;
    let zone = s.zone_name("imported");
    s.pdns_create_zone(&zone, "ops").await?;
    let before = s.pdns_zone(&zone).await?.context("zone")?;
    let _host = s.start_host(&[])?;
    s.apply(&unmanaged_yaml(
        "imported",
        &format!("{{id: \"{zone}\"}}"),
        "",
    ))
    .await?;
    let obj = s.wait_ready(&s.zones, "imported").await?;
    assert_eq!(obj.data["status"]["id"], zone);
    assert_eq!(obj.data["status"]["resource"]["account"], "ops");
    assert!(
        s.event_reasons("imported")
            .await?
            .contains(&"Imported".to_owned())
    );

    // Deleting an unmanaged object leaves PowerDNS exactly as it was.
    s.delete(&s.zones, "imported").await?;
    s.wait_gone(&s.zones, "imported").await?;
    let after = s
        .pdns_zone(&zone)
        .await?
        .context("unmanaged zone was deleted")?;
    assert_eq!(before, after, "an unmanaged object changed PowerDNS");
    s.pdns_delete_zone(&zone).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn import_by_filter_polls_until_one_matches_and_fails_on_several() -> anyhow::Result<()> {
    let mut s = Scenario::new("import-filter").await?;
    let _host = s.start_host(&[])?;
    let zone = s.zone_name("later");
    s.apply(&unmanaged_yaml(
        "later",
        &format!("{{filter: {{name: \"{zone}\"}}}}"),
        "",
    ))
    .await?;
    let waiting = s
        .wait_condition(
            &s.zones,
            "later",
            "Progressing",
            "True",
            Some("Progressing"),
        )
        .await?;
    assert!(Scenario::progressing_message(&waiting).contains("import.filter"));
    s.pdns_create_zone(&zone, "").await?;
    let obj = s.wait_ready(&s.zones, "later").await?;
    assert_eq!(obj.data["status"]["id"], zone);

    // Two zones of one account: the filter is ambiguous, a terminal error.
    let account = format!("acct-{}", s.id);
    let (a, b) = (s.zone_name("a"), s.zone_name("b"));
    s.pdns_create_zone(&a, &account).await?;
    s.pdns_create_zone(&b, &account).await?;
    s.apply(&unmanaged_yaml(
        "ambiguous",
        &format!("{{filter: {{account: \"{account}\"}}}}"),
        "",
    ))
    .await?;
    let failed = s
        .wait_condition(
            &s.zones,
            "ambiguous",
            "Progressing",
            "False",
            Some("InvalidConfiguration"),
        )
        .await?;
    assert!(Scenario::progressing_message(&failed).contains("matches 2 resources"));
    for z in [&zone, &a, &b] {
        s.pdns_delete_zone(z).await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn import_of_a_missing_id_is_terminal() -> anyhow::Result<()> {
    let mut s = Scenario::new("import-missing").await?;
    let _host = s.start_host(&[])?;
    let zone = s.zone_name("nowhere");
    s.apply(&unmanaged_yaml(
        "nowhere",
        &format!("{{id: \"{zone}\"}}"),
        "",
    ))
    .await?;
    let obj = s
        .wait_condition(
            &s.zones,
            "nowhere",
            "Progressing",
            "False",
            Some("InvalidConfiguration"),
        )
        .await?;
    assert!(Scenario::progressing_message(&obj).contains("does not exist"));
    assert!(obj.data["status"]["id"].is_null());
    assert!(
        s.pdns_zone(&zone).await?.is_none(),
        "an import created a zone"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn update_then_revert() -> anyhow::Result<()> {
    let mut s = Scenario::new("update").await?;
    let _host = s.start_host(&[])?;
    let zone = s.zone_name("upd");
    let www = format!("www.{zone}");
    s.apply(&zone_yaml("upd", &zone, "")).await?;
    s.apply(&record_yaml("www", "upd", 300, &["192.0.2.1"]))
        .await?;
    s.wait_ready(&s.records, "www").await?;

    s.apply(&record_yaml("www", "upd", 600, &["192.0.2.2", "192.0.2.3"]))
        .await?;
    s.wait_ready(&s.records, "www").await?;
    let rrset = s.pdns_rrset(&zone, &www, "A").await?.context("rrset")?;
    assert_eq!(rrset["ttl"], 600);
    let mut contents: Vec<_> = rrset["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["content"].clone())
        .collect();
    contents.sort_by_key(|v| v.to_string());
    assert_eq!(contents, vec![json!("192.0.2.2"), json!("192.0.2.3")]);
    s.apply(&zone_yaml("upd", &zone, ", account: changed"))
        .await?;
    s.wait_ready(&s.zones, "upd").await?;
    assert_eq!(
        s.pdns_zone(&zone).await?.context("zone")?["account"],
        "changed"
    );

    s.apply(&record_yaml("www", "upd", 300, &["192.0.2.1"]))
        .await?;
    let obj = s.wait_ready(&s.records, "www").await?;
    assert_eq!(obj.data["status"]["resource"]["ttl"], 300);
    let rrset = s.pdns_rrset(&zone, &www, "A").await?.context("rrset")?;
    assert_eq!(
        (
            rrset["ttl"].clone(),
            rrset["records"].as_array().unwrap().len()
        ),
        (json!(300), 1)
    );
    assert_eq!(rrset["records"][0]["content"], "192.0.2.1");
    s.apply(&zone_yaml("upd", &zone, "")).await?;
    s.wait_ready(&s.zones, "upd").await?;
    assert_eq!(s.pdns_zone(&zone).await?.context("zone")?["account"], "");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn external_deletion_of_a_managed_zone_recreates_it() -> anyhow::Result<()> {
    let mut s = Scenario::new("ext-del").await?;
    let _host = s.start_host(&[])?;
    let zone = s.zone_name("drift");
    s.apply(&zone_yaml("drift", &zone, "").replace("spec:\n", "spec:\n  resyncPeriod: 1s\n"))
        .await?;
    s.wait_ready(&s.zones, "drift").await?;
    s.pdns_delete_zone(&zone).await?;
    // PowerDNS zone ids are their names, so the new zone has the same id; what proves the
    // recreation is the zone's return and the ExternallyDeleted event.
    poll_until(CONVERGE, "the zone to be recreated", || async {
        Ok(s.pdns_zone(&zone).await?)
    })
    .await?;
    poll_until(CONVERGE, "an ExternallyDeleted event", || async {
        Ok(s.event_reasons("drift")
            .await?
            .contains(&"ExternallyDeleted".to_owned())
            .then_some(()))
    })
    .await?;
    // status.id is cleared, then written again once the zone is recreated.
    poll_until(CONVERGE, "status.id to be written again", || async {
        let obj = s.zones.get("drift").await?;
        Ok((obj.data["status"]["id"] == zone.as_str()).then_some(()))
    })
    .await?;
    s.wait_ready(&s.zones, "drift").await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn external_deletion_of_an_unmanaged_zone_is_terminal() -> anyhow::Result<()> {
    let mut s = Scenario::new("ext-del-unmanaged").await?;
    let zone = s.zone_name("theirs");
    s.pdns_create_zone(&zone, "").await?;
    let _host = s.start_host(&[])?;
    s.apply(&unmanaged_yaml(
        "theirs",
        &format!("{{id: \"{zone}\"}}"),
        "  resyncPeriod: 1s\n",
    ))
    .await?;
    s.wait_ready(&s.zones, "theirs").await?;
    s.pdns_delete_zone(&zone).await?;
    let obj = s
        .wait_condition(
            &s.zones,
            "theirs",
            "Progressing",
            "False",
            Some("UnrecoverableError"),
        )
        .await?;
    assert!(Scenario::progressing_message(&obj).contains("deleted from the external system"));
    assert!(
        s.pdns_zone(&zone).await?.is_none(),
        "an unmanaged object recreated a zone"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn on_delete_detach_leaves_the_zone_in_powerdns() -> anyhow::Result<()> {
    let mut s = Scenario::new("detach").await?;
    let _host = s.start_host(&[])?;
    let zone = s.zone_name("kept");
    s.apply(
        &zone_yaml("kept", &zone, "")
            .replace("spec:\n", "spec:\n  managedOptions: {onDelete: detach}\n"),
    )
    .await?;
    s.wait_ready(&s.zones, "kept").await?;
    s.delete(&s.zones, "kept").await?;
    s.wait_gone(&s.zones, "kept").await?;
    assert!(
        s.pdns_zone(&zone).await?.is_some(),
        "detach deleted the zone"
    );
    s.pdns_delete_zone(&zone).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn crash_between_create_and_status_id_adopts_instead_of_duplicating() -> anyhow::Result<()> {
    let mut s = Scenario::new("crash").await?;
    let zone = s.zone_name("crash");
    let mut crashing = s.start_host(&[("ORCHARD_FAILPOINT", "abort-after-create")])?;
    s.apply(&zone_yaml("crash", &zone, "")).await?;
    let status = crashing.wait_exit(CONVERGE).await?;
    assert!(!status.success(), "the fail point must kill the host");
    // The zone exists in PowerDNS, but the object never learnt its id.
    assert!(
        s.pdns_zone(&zone).await?.is_some(),
        "create did not reach PowerDNS"
    );
    let obj = s.zones.get("crash").await?;
    assert!(obj.data["status"]["id"].is_null());
    assert!(
        obj.metadata
            .annotations
            .unwrap_or_default()
            .contains_key("orchard.dev/create-pending")
    );

    let _host = s.start_host(&[])?;
    let obj = s.wait_ready(&s.zones, "crash").await?;
    assert_eq!(obj.data["status"]["id"], zone);
    assert!(
        !obj.metadata
            .annotations
            .unwrap_or_default()
            .contains_key("orchard.dev/create-pending")
    );
    let reasons = s.event_reasons("crash").await?;
    assert!(reasons.contains(&"Adopted".to_owned()), "{reasons:?}");
    assert!(
        !reasons.contains(&"Created".to_owned()),
        "created twice: {reasons:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_specs_are_rejected_by_cel_or_fail_once_without_retries() -> anyhow::Result<()> {
    let mut s = Scenario::new("invalid").await?;
    let _host = s.start_host(&[])?;
    let zone = s.zone_name("inv");

    // CEL: managed needs a resource; unmanaged needs an import and no resource.
    let err = s
        .apply("apiVersion: pdns.orchard.dev/v1alpha1\nkind: DnsZone\nmetadata: {name: bare}\nspec: {credentialsRef: {secretName: pdns}}\n")
        .await
        .expect_err("a managed object without resource must be rejected");
    assert!(
        err.to_string()
            .contains("resource must be specified when policy is managed"),
        "{err}"
    );
    let err = s
        .apply(&unmanaged_yaml(
            "both",
            "{id: x}",
            &format!("  resource: {{name: \"{zone}\"}}\n"),
        ))
        .await
        .expect_err("unmanaged with a resource must be rejected");
    assert!(
        err.to_string()
            .contains("resource may not be specified when policy is unmanaged"),
        "{err}"
    );

    // managementPolicy is immutable.
    s.apply(&zone_yaml("inv", &zone, "")).await?;
    s.wait_ready(&s.zones, "inv").await?;
    let err = s
        .apply(&zone_yaml("inv", &zone, "").replace(
            "spec:\n",
            "spec:\n  managementPolicy: unmanaged\n  import: {id: x}\n",
        ))
        .await
        .expect_err("changing managementPolicy must be rejected");
    assert!(
        err.to_string().contains("managementPolicy is immutable"),
        "{err}"
    );

    // PowerDNS refuses the record: terminal, and nothing retries it.
    s.apply(&record_yaml("bad", "inv", 300, &["not-an-address"]))
        .await?;
    let failed = s
        .wait_condition(
            &s.records,
            "bad",
            "Progressing",
            "False",
            Some("InvalidConfiguration"),
        )
        .await?;
    let version = failed.metadata.resource_version.clone();
    let observe_until = tokio::time::Instant::now() + Duration::from_secs(4);
    while tokio::time::Instant::now() < observe_until {
        let now = s.records.get("bad").await?;
        assert_eq!(
            now.metadata.resource_version, version,
            "a terminal failure was retried"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(
        s.pdns_rrset(&zone, &format!("www.{zone}"), "A")
            .await?
            .is_none()
    );
    Ok(())
}
