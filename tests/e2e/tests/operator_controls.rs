//! The operator's controls on one object, against the real apiserver, PowerDNS, RabbitMQ and
//! the `orchard` binary: `orchard.dev/paused` stops every external call (creation, deletion and
//! a drift fix wait), each new `orchard.dev/reconcile-now` value runs one full pass of an
//! up-to-date object, a drift the plugin changes back is an Event and `status.drift`, and a
//! generated password lands in the connection Secret and nowhere else.

use std::time::Duration;

use kube::api::{Api, ListParams, Patch, PatchParams};
use orchard_e2e::harness::{CONVERGE, Harness};
use orchard_e2e::pdns::{self, ZONE};
use orchard_e2e::{poll_until, rabbitmq};
use serde_json::{Value, json};

fn zone_yaml(name: &str, zone: &str, annotations: &str) -> String {
    format!(
        "apiVersion: pdns.orchard.dev/v1alpha1\nkind: DnsZone\nmetadata: {{name: {name}, annotations: {{{annotations}}}}}\nspec:\n  credentialsRef: {{secretName: pdns}}\n  resource: {{name: \"{zone}\"}}\n"
    )
}

/// Sets (or, with `null`, removes) one annotation of a zone object.
async fn annotate(h: &Harness, name: &str, key: &str, value: Value) -> anyhow::Result<()> {
    annotate_kind(h, ZONE, name, key, value).await
}

/// Sets (or, with `null`, removes) one annotation of an object of `kind`.
async fn annotate_kind(
    h: &Harness,
    kind: &str,
    name: &str,
    key: &str,
    value: Value,
) -> anyhow::Result<()> {
    h.api(kind)
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

/// Every Event of the harness's namespace, as `reason: note` lines.
async fn events(h: &Harness) -> anyhow::Result<Vec<String>> {
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(h.client.clone(), &h.ns);
    Ok(events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .map(|e| {
            format!(
                "{}: {}",
                e.reason.unwrap_or_default(),
                e.note.unwrap_or_default()
            )
        })
        .collect())
}

fn zone_with_account(name: &str, zone: &str, account: &str) -> String {
    format!(
        "apiVersion: pdns.orchard.dev/v1alpha1\nkind: DnsZone\nmetadata: {{name: {name}}}\nspec:\n  credentialsRef: {{secretName: pdns}}\n  resource: {{name: \"{zone}\", account: {account}}}\n"
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_zone_account_changed_outside_is_changed_back_with_a_drift_event_naming_the_field()
-> anyhow::Result<()> {
    let (mut h, pdns) = pdns::harness("drift").await?;
    let _host = h.start_host(&[])?;
    let zone = pdns::zone_name(&h, "drift");
    h.apply(&zone_with_account("drift", &zone, "team-a"))
        .await?;
    h.wait_ready(ZONE, "drift").await?;

    pdns.set_account(&zone, "intruder").await?;
    annotate(&h, "drift", "orchard.dev/reconcile-now", json!("1")).await?;
    h.wait_event("drift", "DriftCorrected").await?;
    let corrected = events(&h).await?;
    assert!(
        corrected
            .iter()
            .any(|e| e
                == "DriftCorrected: changed back to the spec: account: \"intruder\" → \"team-a\""),
        "{corrected:#?}"
    );
    let obj = poll_until(CONVERGE, "status.drift", || async {
        let obj = h.get(ZONE, "drift").await?;
        Ok((!obj.data["status"]["drift"].is_null()).then_some(obj))
    })
    .await?;
    assert_eq!(
        obj.data["status"]["drift"]["fields"],
        json!([{"field": "account", "observed": "\"intruder\"", "desired": "\"team-a\""}])
    );
    let found = pdns.zone(&zone).await?.unwrap_or_default();
    assert_eq!(found["account"], "team-a", "changed back in PowerDNS");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_paused_zone_keeps_its_drift_until_it_is_unpaused() -> anyhow::Result<()> {
    let (mut h, pdns) = pdns::harness("paused-drift").await?;
    let _host = h.start_host(&[])?;
    let zone = pdns::zone_name(&h, "held-drift");
    h.apply(&zone_with_account("held", &zone, "team-a")).await?;
    h.wait_ready(ZONE, "held").await?;
    annotate(&h, "held", "orchard.dev/paused", json!("true")).await?;
    h.wait_condition(ZONE, "held", "Progressing", "False", Some("Paused"))
        .await?;

    pdns.set_account(&zone, "intruder").await?;
    annotate(&h, "held", "orchard.dev/reconcile-now", json!("1")).await?;
    // The annotation change is a trigger: the pass holds, nothing moves.
    h.assert_unchanged(ZONE, "held", Duration::from_secs(3))
        .await?;
    let found = pdns.zone(&zone).await?.unwrap_or_default();
    assert_eq!(found["account"], "intruder", "a paused zone was changed");
    assert!(
        !h.event_reasons("held")
            .await?
            .contains(&"DriftCorrected".to_owned())
    );

    annotate(&h, "held", "orchard.dev/paused", Value::Null).await?;
    h.wait_event("held", "DriftCorrected").await?;
    let found = pdns.zone(&zone).await?.unwrap_or_default();
    assert_eq!(found["account"], "team-a");
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_generated_rabbitmq_password_is_in_the_connection_secret_and_nowhere_else()
-> anyhow::Result<()> {
    let (mut h, rabbit) = rabbitmq::harness("connection").await?;
    let host = h.start_host(&[])?;
    let user = format!("{}-app", h.ns);
    let manifest = format!(
        "apiVersion: rabbitmq.orchard.dev/v1alpha1\nkind: RabbitUser\nmetadata: {{name: app}}\nspec:\n  credentialsRef: {{secretName: rabbitmq}}\n  writeConnectionSecretTo: {{name: app-connection}}\n  resource: {{name: \"{user}\", tags: [monitoring], generatePassword: true}}\n"
    );
    // On an apiserver that served the kind before, the host re-applies its CRD (with
    // writeConnectionSecretTo) as it starts: until then the field is refused.
    poll_until(CONVERGE, "the RabbitUser CRD of this host", || async {
        match h.apply(&manifest).await {
            Ok(_) => Ok(Some(())),
            Err(e) if e.to_string().contains("field not declared in schema") => Ok(None),
            Err(e) => Err(e),
        }
    })
    .await?;
    h.wait_ready("RabbitUser", "app").await?;

    let secret = poll_until(CONVERGE, "the connection Secret", || async {
        h.secrets()
            .get_opt("app-connection")
            .await
            .map_err(Into::into)
    })
    .await?;
    let data = secret.data.clone().unwrap_or_default();
    let text = |k: &str| String::from_utf8(data[k].0.clone()).unwrap_or_default();
    assert_eq!(text("username"), user);
    let password = text("password");
    assert!(
        password.len() >= 20,
        "a strong password: {} chars",
        password.len()
    );
    assert!(
        rabbit.authenticates(&user, &password).await?,
        "RabbitMQ takes the password of the connection Secret"
    );
    // Owned by the object: it goes with it.
    let owners = secret.metadata.owner_references.clone().unwrap_or_default();
    let obj = h.get("RabbitUser", "app").await?;
    assert!(
        owners
            .iter()
            .any(|o| Some(o.uid.as_str()) == obj.metadata.uid.as_deref()),
        "{owners:?}"
    );

    // Nowhere else: not in the object (status included), its Events, or the host's log.
    let object_text = serde_json::to_string(&obj)?;
    assert!(
        !object_text.contains(&password),
        "the object carries the password"
    );
    h.wait_event("app", "ConnectionSecretWritten").await?;
    let all_events = events(&h).await?;
    assert!(
        all_events.iter().all(|e| !e.contains(&password)),
        "an Event carries the password"
    );
    assert!(
        all_events.iter().any(|e| e
            .starts_with("ConnectionSecretWritten: wrote password, url, username")
            || e.starts_with("ConnectionSecretWritten: wrote password, username")),
        "{all_events:#?}"
    );
    let log = std::fs::read_to_string(&host.log)?;
    assert!(
        !log.contains(&password),
        "the host's log carries the password"
    );
    // A later pass does not change it.
    annotate_kind(
        &h,
        "RabbitUser",
        "app",
        "orchard.dev/reconcile-now",
        json!("1"),
    )
    .await?;
    h.wait_ready("RabbitUser", "app").await?;
    assert!(rabbit.authenticates(&user, &password).await?);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn reconcile_now_revives_an_imported_zone_that_was_terminal_once_it_exists_again()
-> anyhow::Result<()> {
    let (mut h, pdns) = pdns::harness("revive").await?;
    let _host = h.start_host(&[])?;
    let zone = pdns::zone_name(&h, "revive");
    pdns.create_zone(&zone, "ops").await?;
    h.apply(&format!(
        "apiVersion: pdns.orchard.dev/v1alpha1\nkind: DnsZone\nmetadata: {{name: revive}}\nspec:\n  managementPolicy: unmanaged\n  credentialsRef: {{secretName: pdns}}\n  import: {{id: \"{zone}\"}}\n"
    ))
    .await?;
    h.wait_ready(ZONE, "revive").await?;

    // Deleted outside: terminal (an unmanaged resource is never created), nothing retries it.
    pdns.delete_zone(&zone).await?;
    annotate(&h, "revive", "orchard.dev/reconcile-now", json!("1")).await?;
    h.wait_condition(
        ZONE,
        "revive",
        "Progressing",
        "False",
        Some("UnrecoverableError"),
    )
    .await?;
    // Fixed outside Kubernetes: no input of the object changed, so it stays terminal ...
    pdns.create_zone(&zone, "ops").await?;
    h.assert_unchanged(ZONE, "revive", Duration::from_secs(3))
        .await?;
    // ... until the operator asks.
    annotate(&h, "revive", "orchard.dev/reconcile-now", json!("2")).await?;
    h.wait_condition(ZONE, "revive", "Progressing", "False", Some("Success"))
        .await?;
    h.wait_ready(ZONE, "revive").await?;
    h.delete(ZONE, "revive").await?;
    h.wait_gone(ZONE, "revive").await?;
    assert!(
        pdns.zone(&zone).await?.is_some(),
        "an unmanaged zone was deleted"
    );
    pdns.delete_zone(&zone).await?;
    Ok(())
}
