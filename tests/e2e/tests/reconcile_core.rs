//! The reconcile core against the real apiserver (and the real PowerDNS where a resource is
//! involved): a failing create backs off, exclusive claims hold, a finalizer removed by hand
//! comes back, the create marker is gone after create, and a pass right after a create reads
//! the host's own writes.

use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use orchard_e2e::harness::{CONVERGE, progressing_message};
use orchard_e2e::harness::{Harness, HostSpec};
use orchard_e2e::paths::plugin;
use orchard_e2e::pdns::{self, ZONE};
use orchard_e2e::{free_port, host_metrics, metric_sum, poll_until};
use serde_json::json;

fn zone_yaml(name: &str, zone: &str) -> String {
    format!(
        "apiVersion: pdns.orchard.dev/v1alpha1\nkind: DnsZone\nmetadata: {{name: {name}}}\nspec:\n  credentialsRef: {{secretName: pdns}}\n  resource: {{name: \"{zone}\"}}\n"
    )
}

/// A scenario world for a host serving the echo fixture (no external system).
async fn echo_harness(name: &str) -> anyhow::Result<Harness> {
    let echo = ApiResource {
        group: "fixtures.orchard.dev".into(),
        version: "v1alpha1".into(),
        api_version: "fixtures.orchard.dev/v1alpha1".into(),
        kind: "Echo".into(),
        plural: "echoes".into(),
    };
    Harness::new(
        name,
        HostSpec {
            plugins: vec![plugin("orchard-fixture-echo")],
            kinds: vec![echo],
            allow_hosts: vec![],
        },
    )
    .await
}

fn annotations(obj: &DynamicObject) -> Vec<String> {
    obj.metadata
        .annotations
        .clone()
        .unwrap_or_default()
        .into_keys()
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_create_that_keeps_failing_is_called_at_most_seven_times_in_its_first_minute()
-> anyhow::Result<()> {
    let mut h = echo_harness("failing-create").await?;
    let admin = format!("127.0.0.1:{}", free_port()?);
    let _host = h.start_host(&[("ORCHARD_ADMIN_ADDR", admin.as_str())])?;
    h.wait_kinds().await?;
    h.apply(
        "apiVersion: fixtures.orchard.dev/v1alpha1\nkind: Echo\nmetadata: {name: failing}\nspec:\n  resource: {failCreate: \"the external system is out of quota\"}\n",
    )
    .await?;
    let started = tokio::time::Instant::now();
    let obj = h
        .wait_condition(
            "Echo",
            "failing",
            "Progressing",
            "True",
            Some("TransientError"),
        )
        .await?;
    assert!(
        orchard_e2e::harness::progressing_message(&obj).contains("out of quota"),
        "{obj:?}"
    );
    // Count the create calls the host made in the object's first minute.
    tokio::time::sleep_until(started + Duration::from_mins(1)).await;
    let metrics = host_metrics(&admin).await?;
    // (The plugin label is the component's file name.)
    let creates = metric_sum(
        &metrics,
        "orchard_wasm_call_duration_seconds_count",
        &["echo\"", "function=\"create\""],
    );
    assert!(
        (3.0..=7.0).contains(&creates),
        "{creates} create calls in 60 s"
    );
    Ok(())
}

/// Zones nudged again and again (`orchard.dev/reconcile-now`) while their first pass creates
/// them: a nudge that lands during that pass brings another pass right after it, before the
/// watch has brought in the pass's own status write. That pass MUST read it (`status.id`), not
/// the copy the cache held before: on the older copy it took its own zone for someone else's
/// and created again (PowerDNS: 409, then adopted its own zone), and its status apply could
/// drop `status.id`; a plugin that cannot adopt found its own create-pending marker without an
/// id and failed terminally.
#[tokio::test(flavor = "multi_thread")]
async fn passes_nudged_during_a_create_read_the_hosts_own_writes_not_an_older_copy()
-> anyhow::Result<()> {
    const ZONES: u32 = 12;
    const NUDGES: u32 = 15;
    let (mut s, pdns) = pdns::harness("own-writes").await?;
    let admin = format!("127.0.0.1:{}", free_port()?);
    let _host = s.start_host(&[("ORCHARD_ADMIN_ADDR", admin.as_str())])?;
    s.wait_kinds().await?;
    let zones = s.api(ZONE);
    let names: Vec<String> = (0..ZONES).map(|i| format!("nudged-{i}")).collect();
    for name in &names {
        s.apply(&zone_yaml(name, &pdns::zone_name(&s, name)))
            .await?;
        // As fast as the apiserver takes them: some land while the create's pass runs.
        for n in 0..NUDGES {
            let nudge =
                json!({"metadata": {"annotations": {"orchard.dev/reconcile-now": n.to_string()}}});
            zones
                .patch(name, &PatchParams::default(), &Patch::Merge(nudge))
                .await?;
        }
    }
    for name in &names {
        let obj = s.wait_ready(ZONE, name).await?;
        assert!(obj.data["status"]["id"].is_string(), "{name}: {obj:?}");
        let zone = pdns::zone_name(&s, name);
        assert!(
            pdns.zone(&zone).await?.is_some(),
            "{zone} is not in PowerDNS"
        );
    }
    let metrics = host_metrics(&admin).await?;
    let calls = |function: &str| {
        let f = format!("function=\"{function}\"");
        metric_sum(
            &metrics,
            "orchard_wasm_call_duration_seconds_count",
            &["plugin=\"pdns-zone\"", f.as_str()],
        )
    };
    // (Counts: whole numbers, exact in an f64.) pdns-zone creates first and looks for its
    // zone only after a refused create: a pass on the older copy makes both calls again.
    assert!(
        (calls("create") - f64::from(ZONES)).abs() < 0.5,
        "{} creates for {ZONES} zones",
        calls("create")
    );
    assert!(
        calls("list-for-adoption") < 0.5,
        "{} lookups",
        calls("list-for-adoption")
    );
    let failed = metric_sum(
        &metrics,
        "orchard_reconcile_errors_total",
        &["plugin=\"pdns-zone\""],
    );
    assert!(failed < 0.5, "{failed} passes failed:\n{metrics}");
    for name in &names {
        let reasons = s.event_reasons(name).await?;
        assert!(
            reasons.iter().all(|r| r == "Created"),
            "{name}: only its Created event, got {reasons:?}"
        );
    }
    for name in &names {
        s.delete(ZONE, name).await?;
    }
    for name in &names {
        s.wait_gone(ZONE, name).await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_zone_adopting_the_same_powerdns_zone_is_refused_and_nothing_is_deleted()
-> anyhow::Result<()> {
    let (mut s, pdns) = pdns::harness("claim-adoption").await?;
    let _host = s.start_host(&[])?;
    let zone = pdns::zone_name(&s, "claimed");
    s.apply(&zone_yaml("first", &zone)).await?;
    let first = s.wait_ready(ZONE, "first").await?;
    assert!(
        !annotations(&first).contains(&"orchard.dev/create-pending".to_owned()),
        "the create marker is gone once status.id is recorded"
    );

    s.apply(&zone_yaml("second", &zone)).await?;
    let second = s
        .wait_condition(
            ZONE,
            "second",
            "Progressing",
            "False",
            Some("InvalidConfiguration"),
        )
        .await?;
    let message = progressing_message(&second);
    assert!(message.contains(&format!("{}/first", s.ns)), "{message}");
    assert!(second.data["status"]["id"].is_null());

    s.delete(ZONE, "second").await?;
    s.wait_gone(ZONE, "second").await?;
    assert!(
        pdns.zone(&zone).await?.is_some(),
        "deleting the refused object deleted the other's zone"
    );
    s.wait_ready(ZONE, "first").await?;
    s.delete(ZONE, "first").await?;
    s.wait_gone(ZONE, "first").await?;
    assert!(pdns.zone(&zone).await?.is_none(), "the zone leaked");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_imported_zone_cannot_be_adopted_by_a_managed_object() -> anyhow::Result<()> {
    let (mut s, pdns) = pdns::harness("claim-import").await?;
    let zone = pdns::zone_name(&s, "imported");
    pdns.create_zone(&zone, "someone").await?;
    let _host = s.start_host(&[])?;
    s.apply(&format!(
        "apiVersion: pdns.orchard.dev/v1alpha1\nkind: DnsZone\nmetadata: {{name: reader}}\nspec:\n  managementPolicy: unmanaged\n  credentialsRef: {{secretName: pdns}}\n  import: {{id: \"{zone}\"}}\n"
    ))
    .await?;
    s.wait_ready(ZONE, "reader").await?;
    s.apply(&zone_yaml("taker", &zone)).await?;
    let taker = s
        .wait_condition(
            ZONE,
            "taker",
            "Progressing",
            "False",
            Some("InvalidConfiguration"),
        )
        .await?;
    assert!(
        progressing_message(&taker).contains(&format!("{}/reader", s.ns)),
        "{taker:?}"
    );
    s.delete(ZONE, "taker").await?;
    s.wait_gone(ZONE, "taker").await?;
    assert!(
        pdns.zone(&zone).await?.is_some(),
        "the imported zone was deleted"
    );
    pdns.delete_zone(&zone).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_status_id_edited_to_another_zones_id_never_deletes_that_zone() -> anyhow::Result<()> {
    let (mut s, pdns) = pdns::harness("claim-edit").await?;
    let _host = s.start_host(&[])?;
    let (zone_a, zone_b) = (pdns::zone_name(&s, "a"), pdns::zone_name(&s, "b"));
    s.apply(&zone_yaml("a", &zone_a)).await?;
    s.apply(&zone_yaml("b", &zone_b)).await?;
    s.wait_ready(ZONE, "a").await?;
    s.wait_ready(ZONE, "b").await?;
    // A hostile (or mistaken) edit: b claims a's zone.
    s.api(ZONE)
        .patch_status(
            "b",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"id": zone_a}})),
        )
        .await?;
    s.delete(ZONE, "b").await?;
    s.wait_gone(ZONE, "b").await?;
    assert!(pdns.zone(&zone_a).await?.is_some(), "a's zone was deleted");
    assert!(pdns.zone(&zone_b).await?.is_none(), "b's own zone leaked");
    s.wait_ready(ZONE, "a").await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_finalizer_removed_by_hand_comes_back() -> anyhow::Result<()> {
    let (mut s, pdns) = pdns::harness("finalizer").await?;
    let _host = s.start_host(&[])?;
    let zone = pdns::zone_name(&s, "fin");
    s.apply(&zone_yaml("fin", &zone)).await?;
    s.wait_ready(ZONE, "fin").await?;
    let zones = s.api(ZONE);
    zones
        .patch(
            "fin",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await?;
    poll_until(CONVERGE, "the finalizer to come back", || async {
        let obj = zones.get("fin").await?;
        Ok(obj
            .metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"orchard.dev/pdns-zone".to_owned())
            .then_some(()))
    })
    .await?;
    s.delete(ZONE, "fin").await?;
    s.wait_gone(ZONE, "fin").await?;
    assert!(pdns.zone(&zone).await?.is_none(), "the zone leaked");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failure_message_longer_than_an_event_allows_is_cut_not_dropped() -> anyhow::Result<()> {
    let mut h = echo_harness("long-message").await?;
    let _host = h.start_host(&[])?;
    h.wait_kinds().await?;
    let message = format!("quota exceeded: {}", "x".repeat(3000));
    h.apply(&format!(
        "apiVersion: fixtures.orchard.dev/v1alpha1\nkind: Echo\nmetadata: {{name: long}}\nspec:\n  resource: {{failCreate: \"{message}\"}}\n"
    ))
    .await?;
    h.wait_condition(
        "Echo",
        "long",
        "Progressing",
        "True",
        Some("TransientError"),
    )
    .await?;
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(h.client.clone(), &h.ns);
    let note = poll_until(CONVERGE, "the failure's Event", || async {
        Ok(events
            .list(&kube::api::ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("long"))
            .find(|e| e.reason.as_deref() == Some("TransientError"))
            .and_then(|e| e.note))
    })
    .await?;
    assert!(note.len() <= 1024, "{} bytes", note.len());
    assert!(
        note.starts_with("plugin") || note.contains("quota exceeded"),
        "{note}"
    );
    assert!(note.ends_with("…(truncated)"), "{note}");
    Ok(())
}
