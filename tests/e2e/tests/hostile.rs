//! A hostile plugin against the real apiserver: what it returns is bounded and validated at
//! the boundary, and the object shows why — never a status-write loop, never a stored bad id.
//! (The sandbox's own limits — deadline, memory, output — are in `host/tests/sandbox.rs`.)

use std::time::Duration;

use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use orchard_e2e::harness::CONVERGE;
use orchard_e2e::harness::{Harness, HostSpec, progressing_message};
use orchard_e2e::paths::plugin;
use orchard_e2e::poll_until;
use serde_json::json;

fn faulty() -> ApiResource {
    ApiResource {
        group: "fixtures.orchard.dev".into(),
        version: "v1alpha1".into(),
        api_version: "fixtures.orchard.dev/v1alpha1".into(),
        kind: "Faulty".into(),
        plural: "faulties".into(),
    }
}

async fn harness(name: &str) -> anyhow::Result<Harness> {
    Harness::new(
        name,
        HostSpec {
            plugins: vec![plugin("orchard-fixture-faulty")],
            kinds: vec![faulty()],
            allow_hosts: vec![],
        },
    )
    .await
}

/// The object's resourceVersion does not move for `period` (no retry loop, no status write).
async fn assert_quiet(h: &Harness, name: &str, period: Duration) -> anyhow::Result<DynamicObject> {
    let before = h.get("Faulty", name).await?;
    let until = tokio::time::Instant::now() + period;
    while tokio::time::Instant::now() < until {
        let now = h.get("Faulty", name).await?;
        assert_eq!(
            now.metadata.resource_version, before.metadata.resource_version,
            "{name} keeps being written"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(before)
}

#[tokio::test(flavor = "multi_thread")]
async fn an_observed_of_megabytes_is_a_condition_naming_the_rule_not_a_status_loop()
-> anyhow::Result<()> {
    let mut h = harness("huge-observed").await?;
    let _host = h.start_host(&[])?;
    h.wait_kinds().await?;
    h.apply(
        "apiVersion: fixtures.orchard.dev/v1alpha1\nkind: Faulty\nmetadata: {name: big}\nspec:\n  managementPolicy: unmanaged\n  import: {id: huge-observed}\n",
    )
    .await?;
    let obj = h
        .wait_condition(
            "Faulty",
            "big",
            "Progressing",
            "True",
            Some("TransientError"),
        )
        .await?;
    let message = progressing_message(&obj);
    assert!(
        message.contains("observed") && message.contains("broke the contract"),
        "{message}"
    );
    assert_eq!(obj.data["status"]["id"], "huge-observed");
    assert!(obj.data["status"]["resource"].is_null());
    // Backoff (1 s, 2 s, …) and an unchanged status: nothing is rewritten.
    assert_quiet(&h, "big", Duration::from_secs(3)).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_id_with_control_characters_is_never_stored_in_status() -> anyhow::Result<()> {
    let mut h = harness("control-id").await?;
    let _host = h.start_host(&[])?;
    h.wait_kinds().await?;
    h.apply(
        "apiVersion: fixtures.orchard.dev/v1alpha1\nkind: Faulty\nmetadata: {name: control-id}\nspec:\n  resource: {}\n",
    )
    .await?;
    // The create answered an id the host refuses; whether it made something is unknown and
    // this plugin cannot adopt: the next pass stops rather than create blindly again.
    let obj = h
        .wait_condition(
            "Faulty",
            "control-id",
            "Progressing",
            "False",
            Some("UnrecoverableError"),
        )
        .await?;
    assert!(obj.data["status"]["id"].is_null(), "{obj:?}");
    assert!(
        obj.metadata
            .annotations
            .unwrap_or_default()
            .contains_key("orchard.dev/create-pending")
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn delete_with_several_adoption_candidates_is_terminal_without_a_loop() -> anyhow::Result<()>
{
    let mut h = harness("adopt-2").await?;
    let _host = h.start_host(&[])?;
    h.wait_kinds().await?;
    h.apply(
        "apiVersion: fixtures.orchard.dev/v1alpha1\nkind: Faulty\nmetadata: {name: adopt-2}\nspec:\n  resource: {}\n",
    )
    .await?;
    h.wait_condition(
        "Faulty",
        "adopt-2",
        "Progressing",
        "False",
        Some("InvalidConfiguration"),
    )
    .await?;
    h.delete("Faulty", "adopt-2").await?;
    poll_until(CONVERGE, "the delete flow's terminal condition", || async {
        let obj = h.get("Faulty", "adopt-2").await?;
        Ok(progressing_message(&obj)
            .contains("delete them by hand")
            .then_some(()))
    })
    .await?;
    let obj = assert_quiet(&h, "adopt-2", Duration::from_secs(3)).await?;
    assert!(obj.metadata.deletion_timestamp.is_some());
    assert!(
        obj.metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"orchard.dev/faulty".to_owned())
    );
    // What the message asks of the user: the resources are dealt with, the finalizer goes.
    h.api("Faulty")
        .patch(
            "adopt-2",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await?;
    h.wait_gone("Faulty", "adopt-2").await?;
    Ok(())
}
