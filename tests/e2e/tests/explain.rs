//! `orchard explain` against the real apiserver and a real host: an object's verdict, the
//! host that serves it (from its presence Lease), its last passes and their plugin calls
//! (from that host's admin server, found through the Lease), its Events — and, once paused
//! or once its host has stopped, the verdict says so.

use std::process::Command;

use anyhow::{Context, ensure};
use kube::api::{Patch, PatchParams};
use orchard_e2e::harness::{CONVERGE, Harness};
use orchard_e2e::paths::orchard_bin;
use orchard_e2e::pdns::{self, ZONE};
use orchard_e2e::{free_port, poll_until};
use serde_json::{Value, json};

/// The contract's functions a pass may call.
const FUNCTIONS: [&str; 7] = [
    "get-by-id",
    "list-for-adoption",
    "create",
    "reconcilers",
    "run-reconciler",
    "available",
    "observed",
];

fn zone_yaml(name: &str, zone: &str) -> String {
    format!(
        "apiVersion: pdns.orchard.dev/v1alpha1\nkind: DnsZone\nmetadata: {{name: {name}}}\nspec:\n  credentialsRef: {{secretName: pdns}}\n  resource: {{name: \"{zone}\"}}\n"
    )
}

/// `orchard explain ARGS…` as a user runs it (the admin kubeconfig, no `--admin`).
fn explain(s: &Harness, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(orchard_bin())
        .arg("explain")
        .args(args)
        .args(["-n", &s.ns])
        .env("KUBECONFIG", &s.env.admin_kubeconfig)
        .env_remove("ORCHARD_ADMIN_URL")
        .output()
        .context("running orchard explain")?;
    let stdout = String::from_utf8(out.stdout)?;
    ensure!(
        out.status.success(),
        "orchard explain {args:?}: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(stdout)
}

#[tokio::test(flavor = "multi_thread")]
async fn explain_shows_the_verdict_the_serving_host_the_last_passes_and_calls_and_the_events()
-> anyhow::Result<()> {
    let (mut s, pdns) = pdns::harness("explain").await?;
    let admin = format!("127.0.0.1:{}", free_port()?);
    let mut host = s.start_host(&[("ORCHARD_ADMIN_ADDR", admin.as_str())])?;
    let zone = pdns::zone_name(&s, "explain");
    s.apply(&zone_yaml("z", &zone)).await?;
    s.wait_ready(ZONE, "z").await?;

    // JSON, for a script: the facts, typed. The pass is journaled when it ends, a moment after
    // its status write made the object ready.
    let json: Value = poll_until(
        CONVERGE,
        "explain to show the last pass's calls",
        || async {
            let json: Value = serde_json::from_str(&explain(
                &s,
                &["dnszones.pdns.orchard.dev/z", "-o", "json"],
            )?)?;
            let called = json["journal"]["calls"]
                .as_array()
                .is_some_and(|c| !c.is_empty());
            Ok(called.then_some(json))
        },
    )
    .await?;
    ensure!(json["verdict"] == "available and up to date", "{json}");
    ensure!(json["hosts"][0]["state"] == "serving", "{json}");
    ensure!(json["hosts"][0]["instance"] == s.ns.as_str(), "{json}");
    ensure!(
        json["hosts"][0]["admin"] == format!("http://{admin}"),
        "{json}"
    );
    ensure!(json["journal"]["instance"] == s.ns.as_str(), "{json}");
    ensure!(json["journal"]["plugin"] == "pdns-zone", "{json}");
    ensure!(
        json["journal"]["passes"][0]["outcome"].is_string(),
        "{json}"
    );
    for call in json["journal"]["calls"].as_array().into_iter().flatten() {
        let function = call["function"].as_str().unwrap_or_default();
        ensure!(
            FUNCTIONS.contains(&function),
            "not a contract function: {call}"
        );
        ensure!(call["outcome"] == "ok" && call["tookMs"].is_u64(), "{call}");
    }

    // Text, for a person: the verdict first, then who serves it, what the passes did.
    let text = explain(&s, &["dnszone/z"])?;
    let lines: Vec<&str> = text.lines().collect();
    ensure!(
        lines[0]
            == format!(
                "DnsZone {}/z (dnszones.pdns.orchard.dev), generation 1",
                s.ns
            ),
        "{text}"
    );
    ensure!(lines[1] == "  available and up to date", "{text}");
    ensure!(text.contains(&format!("External id:    {zone}")), "{text}");
    ensure!(
        text.contains(&format!("{} — serving since", s.ns)) && text.contains(&admin),
        "the serving host and its admin server: {text}"
    );
    ensure!(
        text.contains("Last passes (by") && text.contains("Plugin calls of the last pass"),
        "{text}"
    );
    ensure!(
        text.contains("Events (newest last):") && text.contains("Created"),
        "{text}"
    );
    ensure!(
        json["finalizer"] == true && json["paused"] == false,
        "{json}"
    );

    // Paused: the verdict says no call is made.
    s.api(ZONE)
        .patch(
            "z",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"orchard.dev/paused": "true"}}})),
        )
        .await?;
    s.wait_condition(ZONE, "z", "Progressing", "False", Some("Paused"))
        .await?;
    let paused = explain(&s, &["dnszone/z"])?;
    ensure!(
        paused
            .lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("  paused (annotation orchard.dev/paused=true)")),
        "{paused}"
    );

    // Its host stopped: nobody serves it now, and the verdict says that first.
    host.terminate()?;
    ensure!(host.wait_exit(CONVERGE).await?.success());
    let orphan = poll_until(
        CONVERGE,
        "explain to see that no host serves the kind",
        || async {
            let text = explain(&s, &["dnszone/z"])?;
            Ok(text.contains("no Orchard host serves").then_some(text))
        },
    )
    .await?;
    ensure!(
        orphan.lines().nth(1)
            == Some(&*format!(
                "  no Orchard host serves dnszones.pdns.orchard.dev in namespace {}: nothing reconciles it",
                s.ns
            )),
        "{orphan}"
    );

    // A kind nobody knows is a clear error naming it.
    let unknown = Command::new(orchard_bin())
        .args(["explain", "nosuchkind/z", "-n", &s.ns])
        .env("KUBECONFIG", &s.env.admin_kubeconfig)
        .output()?;
    ensure!(!unknown.status.success());
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    ensure!(stderr.contains("kind nosuchkind: no CRD"), "{stderr}");

    // Clean up: unpaused and served again, the zone goes from PowerDNS.
    let _host = s.start_host(&[])?;
    s.api(ZONE)
        .patch(
            "z",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"orchard.dev/paused": null}}})),
        )
        .await?;
    s.delete(ZONE, "z").await?;
    s.wait_gone(ZONE, "z").await?;
    ensure!(pdns.zone(&zone).await?.is_none());
    Ok(())
}
