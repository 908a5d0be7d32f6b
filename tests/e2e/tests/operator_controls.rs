//! The operator's controls on one object, against the real apiserver, PowerDNS and `orchard`
//! binary: `orchard.dev/paused` stops every external call (creation and deletion wait), and
//! each new `orchard.dev/reconcile-now` value runs one full pass of an up-to-date object.

use std::time::Duration;

use kube::api::{Patch, PatchParams};
use orchard_e2e::harness::{CONVERGE, Harness};
use orchard_e2e::pdns::{self, ZONE};
use orchard_e2e::poll_until;
use serde_json::{Value, json};

fn zone_yaml(name: &str, zone: &str, annotations: &str) -> String {
    format!(
        "apiVersion: pdns.orchard.dev/v1alpha1\nkind: DnsZone\nmetadata: {{name: {name}, annotations: {{{annotations}}}}}\nspec:\n  credentialsRef: {{secretName: pdns}}\n  resource: {{name: \"{zone}\"}}\n"
    )
}

/// Sets (or, with `null`, removes) one annotation of a zone object.
async fn annotate(h: &Harness, name: &str, key: &str, value: Value) -> anyhow::Result<()> {
    h.api(ZONE)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {key: value}}})),
        )
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_paused_zone_is_neither_created_nor_deleted_until_it_is_unpaused() -> anyhow::Result<()> {
    let (mut h, pdns) = pdns::harness("paused").await?;
    let _host = h.start_host(&[])?;
    let zone = pdns::zone_name(&h, "held");

    // Created paused: it says so, and PowerDNS has nothing.
    h.apply(&zone_yaml("held", &zone, "orchard.dev/paused: \"true\""))
        .await?;
    h.wait_condition(ZONE, "held", "Progressing", "False", Some("Paused"))
        .await?;
    assert!(
        pdns.zone(&zone).await?.is_none(),
        "a paused object created its zone"
    );

    // Unpaused: created at once.
    annotate(&h, "held", "orchard.dev/paused", Value::Null).await?;
    h.wait_ready(ZONE, "held").await?;
    assert!(pdns.zone(&zone).await?.is_some());

    // Paused again, then deleted: the object and its zone stay.
    annotate(&h, "held", "orchard.dev/paused", json!("true")).await?;
    h.wait_condition(ZONE, "held", "Progressing", "False", Some("Paused"))
        .await?;
    h.delete(ZONE, "held").await?;
    // The deletion bumps the generation: the held pass says Paused for it, then nothing moves.
    h.wait_condition(ZONE, "held", "Progressing", "False", Some("Paused"))
        .await?;
    h.assert_unchanged(ZONE, "held", Duration::from_secs(3))
        .await?;
    assert!(
        pdns.zone(&zone).await?.is_some(),
        "a paused object's zone was deleted"
    );

    // Unpaused: the deletion goes through.
    annotate(&h, "held", "orchard.dev/paused", Value::Null).await?;
    h.wait_gone(ZONE, "held").await?;
    assert!(pdns.zone(&zone).await?.is_none());
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn reconcile_now_repairs_an_up_to_date_zone_deleted_outside_orchard() -> anyhow::Result<()> {
    let (mut h, pdns) = pdns::harness("reconcile-now").await?;
    let _host = h.start_host(&[])?;
    let zone = pdns::zone_name(&h, "now");
    h.apply(&zone_yaml("now", &zone, "")).await?;
    h.wait_ready(ZONE, "now").await?;

    // Deleted behind Orchard's back, with no resync configured: nothing notices by itself.
    pdns.delete_zone(&zone).await?;
    annotate(&h, "now", "orchard.dev/reconcile-now", json!("1")).await?;
    poll_until(CONVERGE, "the zone to be created again", || async {
        pdns.zone(&zone).await
    })
    .await?;
    h.wait_event("now", "ExternallyDeleted").await?;
    h.wait_ready(ZONE, "now").await?;
    Ok(())
}
