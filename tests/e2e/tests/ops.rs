//! Operations of the host against the real apiserver and PowerDNS: probes and metrics are
//! served and scrape-able; with leader election only the leader reconciles, and a leader
//! killed mid-batch is replaced without duplicating external resources.

use std::time::Duration;

use anyhow::Context;
use orchard_e2e::harness::CONVERGE;
use orchard_e2e::pdns::{self, ZONE};
use orchard_e2e::{free_port, poll_until};

fn zone_yaml(name: &str, zone: &str) -> String {
    format!(
        "apiVersion: pdns.orchard.dev/v1alpha1\nkind: DnsZone\nmetadata: {{name: {name}}}\nspec:\n  credentialsRef: {{secretName: pdns}}\n  resource: {{name: \"{zone}\"}}\n"
    )
}

async fn get(url: &str) -> anyhow::Result<(u16, String)> {
    let response = reqwest::get(url).await?;
    Ok((response.status().as_u16(), response.text().await?))
}

/// The value of the first sample of `series` whose labels contain every `labels` pair.
fn sample(metrics: &str, series: &str, labels: &[&str]) -> Option<f64> {
    metrics
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(series) && l[series.len()..].starts_with(['{', ' ']))
        .find(|l| labels.iter().all(|p| l.contains(p)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test(flavor = "multi_thread")]
async fn probes_and_metrics_are_served_and_count_reconciles_and_plugin_calls() -> anyhow::Result<()>
{
    let (mut s, _pdns) = pdns::harness("metrics").await?;
    let port = free_port()?;
    let admin = format!("127.0.0.1:{port}");
    let _host = s.start_host(&[("ORCHARD_ADMIN_ADDR", admin.as_str())])?;
    let base = format!("http://{admin}");
    poll_until(CONVERGE, "/readyz to answer 200", || async {
        Ok(get(&format!("{base}/readyz"))
            .await
            .ok()
            .filter(|(code, _)| *code == 200))
    })
    .await?;
    assert_eq!(get(&format!("{base}/healthz")).await?.0, 200);

    let zone = pdns::zone_name(&s, "metrics");
    s.apply(&zone_yaml("m", &zone)).await?;
    s.wait_ready(ZONE, "m").await?;
    let zone_labels = ["plugin=\"pdns-zone\"", "kind=\"DnsZone\""];
    // The pass is counted when it ends, a moment after its status write made the object ready
    // (the create marker is removed after it).
    let metrics = poll_until(CONVERGE, "the pass to be counted", || async {
        let (code, metrics) = get(&format!("{base}/metrics")).await?;
        assert_eq!(code, 200);
        let counted = sample(
            &metrics,
            "orchard_reconciles_total",
            &[zone_labels[0], zone_labels[1], "result=\"success\""],
        )
        .is_some();
        Ok(counted.then_some(metrics))
    })
    .await?;
    assert!(
        sample(
            &metrics,
            "orchard_reconciles_total",
            &[zone_labels[0], zone_labels[1], "result=\"success\""]
        )
        .unwrap_or(0.0)
            >= 1.0,
        "{metrics}"
    );
    assert!(
        sample(
            &metrics,
            "orchard_reconcile_duration_seconds_count",
            &zone_labels
        )
        .unwrap_or(0.0)
            >= 1.0
    );
    for function in ["create", "list-for-adoption", "available", "observed"] {
        let f = format!("function=\"{function}\"");
        assert!(
            sample(
                &metrics,
                "orchard_wasm_call_duration_seconds_count",
                &[zone_labels[0], f.as_str()]
            )
            .unwrap_or(0.0)
                >= 1.0,
            "no {function} call counted"
        );
    }
    assert!(sample(&metrics, "orchard_queue_depth", &[zone_labels[0]]).is_some());
    assert_eq!(sample(&metrics, "orchard_leader", &[]), Some(1.0));
    assert_eq!(
        sample(
            &metrics,
            "orchard_plugin_load_failures_total",
            &[zone_labels[0]]
        ),
        Some(0.0)
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_leader_is_replaced_within_the_lease_and_no_zone_is_duplicated()
-> anyhow::Result<()> {
    let (mut s, pdns) = pdns::harness("failover").await?;
    let lease = format!("orchard-{}", s.id);
    let ns = s.ns.clone();
    let (port_a, port_b) = (free_port()?, free_port()?);
    let (admin_a, admin_b) = (format!("127.0.0.1:{port_a}"), format!("127.0.0.1:{port_b}"));
    let common = |instance: &'static str, admin: &str| -> Vec<(&'static str, String)> {
        vec![
            ("ORCHARD_LEADER_ELECT", "true".to_owned()),
            ("ORCHARD_LEASE_NAME", lease.clone()),
            ("POD_NAMESPACE", ns.clone()),
            ("ORCHARD_LEASE_SECONDS", "6".to_owned()),
            ("ORCHARD_INSTANCE", instance.to_owned()),
            ("ORCHARD_ADMIN_ADDR", admin.to_owned()),
        ]
    };
    let env_a = common("host-a", &admin_a);
    let mut a = s.start_host(
        &env_a
            .iter()
            .map(|(k, v)| (*k, v.as_str()))
            .collect::<Vec<_>>(),
    )?;
    let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
        kube::Api::namespaced(s.client.clone(), &s.ns);
    poll_until(CONVERGE, "host-a to hold the lease", || async {
        let holder = leases
            .get_opt(&lease)
            .await?
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity);
        Ok((holder.as_deref() == Some("host-a")).then_some(()))
    })
    .await?;
    let env_b = common("host-b", &admin_b);
    let _b = s.start_host(
        &env_b
            .iter()
            .map(|(k, v)| (*k, v.as_str()))
            .collect::<Vec<_>>(),
    )?;

    // A batch of creates; the leader dies in the middle of it.
    let zones: Vec<String> = (0..6)
        .map(|i| pdns::zone_name(&s, &format!("z{i}")))
        .collect();
    for (i, zone) in zones.iter().enumerate() {
        s.apply(&zone_yaml(&format!("z{i}"), zone)).await?;
    }
    // The standby binds its admin server before it waits for the Lease; it may still be
    // starting.
    let standby = poll_until(CONVERGE, "the standby's /metrics to answer", || async {
        Ok(get(&format!("http://{admin_b}/metrics"))
            .await
            .ok()
            .map(|(_, m)| m))
    })
    .await?;
    assert_eq!(
        sample(&standby, "orchard_leader", &[]),
        Some(0.0),
        "the standby must not lead"
    );
    assert_eq!(
        sample(&standby, "orchard_reconciles_total", &[]),
        None,
        "the standby reconciled: {standby}"
    );
    poll_until(CONVERGE, "the first zone to exist", || async {
        pdns.zone(&zones[0]).await
    })
    .await?;
    a.kill_hard();

    poll_until(
        Duration::from_secs(30),
        "host-b to take the lease",
        || async {
            let holder = leases
                .get_opt(&lease)
                .await?
                .and_then(|l| l.spec)
                .and_then(|s| s.holder_identity);
            Ok((holder.as_deref() == Some("host-b")).then_some(()))
        },
    )
    .await?;
    for i in 0..zones.len() {
        s.wait_ready(ZONE, &format!("z{i}")).await?;
    }
    for zone in &zones {
        let z = pdns
            .zone(zone)
            .await?
            .with_context(|| format!("{zone} missing"))?;
        assert_eq!(z["name"], zone.as_str());
    }
    // Exactly one zone per object: nothing else of this scenario exists in PowerDNS.
    let all = pdns.zones().await?;
    let ours = all
        .iter()
        .filter(|z| {
            z["name"]
                .as_str()
                .is_some_and(|n| n.ends_with(&format!("{}.test.", s.id)))
        })
        .count();
    assert_eq!(ours, zones.len());
    Ok(())
}
