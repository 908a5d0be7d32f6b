//! Operations of the host against the real apiserver and PowerDNS: probes and metrics are
//! served and scrape-able; the chart's dashboard and alerts name only metrics a host exports;
//! with leader election only the leader reconciles, and a leader killed mid-batch is replaced
//! without duplicating external resources.

use std::time::Duration;

use anyhow::Context;
use orchard_e2e::harness::CONVERGE;
use orchard_e2e::pdns::{self, ZONE};
use orchard_e2e::{free_port, poll_until, wait_host_ready, wait_lease_holder};

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
    sample_text(metrics, series, labels).and_then(|v| v.parse().ok())
}

/// The value of a counting sample (`_count`, `_total`) as [`sample`] finds it; 0 when absent.
fn count(metrics: &str, series: &str, labels: &[&str]) -> u64 {
    sample_text(metrics, series, labels).map_or(0, |v| v.parse().unwrap_or(u64::MAX))
}

fn sample_text<'m>(metrics: &'m str, series: &str, labels: &[&str]) -> Option<&'m str> {
    metrics
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(series) && l[series.len()..].starts_with(['{', ' ']))
        .find(|l| labels.iter().all(|p| l.contains(p)))
        .and_then(|l| l.rsplit(' ').next())
}

/// Every `orchard_…` metric name in `text`, without the sample suffix (`_total`, `_bucket`,
/// `_count`, `_sum`): the family name a `# TYPE` line gives.
fn metric_names(text: &str) -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("orchard_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(tail.len());
        let name = &tail[..end];
        let family = ["_total", "_bucket", "_count", "_sum"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix))
            .unwrap_or(name);
        names.insert(family.to_owned());
        rest = &tail[end..];
    }
    names
}

#[tokio::test(flavor = "multi_thread")]
async fn the_charts_dashboard_and_alerts_name_only_metrics_a_reconciling_host_exports()
-> anyhow::Result<()> {
    // What the chart ships, rendered by the real helm.
    let (mut s, _pdns) = pdns::harness("dashboards").await?;
    let chart = orchard_e2e::paths::workspace().join("deploy/helm/orchard");
    let rendered = orchard_e2e::run(
        std::process::Command::new(orchard_e2e::tool("helm"))
            .args([
                "template",
                "orchard",
                "-n",
                "orchard-system",
                "--kube-version",
            ])
            .arg(&s.env.k8s_version)
            .args([
                "--set",
                "metrics.prometheusRule.enabled=true,metrics.grafanaDashboard.enabled=true",
                "--show-only",
                "templates/prometheusrule.yaml",
                "--show-only",
                "templates/dashboard.yaml",
            ])
            .arg(&chart),
    )?;
    let mut exprs = Vec::new();
    for doc in rendered.split("\n---").filter(|d| d.contains("kind:")) {
        let doc: serde_json::Value = serde_yaml::from_str(doc)?;
        match doc["kind"].as_str() {
            Some("PrometheusRule") => {
                for group in doc["spec"]["groups"].as_array().context("groups")? {
                    for rule in group["rules"].as_array().context("rules")? {
                        exprs.push(rule["expr"].as_str().context("expr")?.to_owned());
                    }
                }
            }
            Some("ConfigMap") => {
                let dashboard: serde_json::Value = serde_json::from_str(
                    doc["data"]["orchard.json"]
                        .as_str()
                        .context("orchard.json")?,
                )?;
                for panel in dashboard["panels"].as_array().context("panels")? {
                    for target in panel["targets"].as_array().context("targets")? {
                        exprs.push(target["expr"].as_str().context("expr")?.to_owned());
                    }
                }
            }
            other => anyhow::bail!("unexpected {other:?}"),
        }
    }
    assert!(exprs.len() >= 20, "rules and panels: {exprs:?}");
    let named = metric_names(&exprs.join("\n"));

    // What a host that reconciled a zone exports.
    let admin = format!("127.0.0.1:{}", free_port()?);
    let _host = s.start_host(&[("ORCHARD_ADMIN_ADDR", admin.as_str())])?;
    let zone = pdns::zone_name(&s, "dashboards");
    s.apply(&zone_yaml("d", &zone)).await?;
    s.wait_ready(ZONE, "d").await?;
    let url = format!("http://{admin}/metrics");
    let metrics = poll_until(CONVERGE, "the zone to be counted up to date", || async {
        let (_, metrics) = get(&url).await?;
        let counted = sample(
            &metrics,
            "orchard_objects",
            &["kind=\"DnsZone\"", "state=\"up_to_date\""],
        );
        Ok(counted.filter(|n| *n >= 1.0).map(|_| metrics))
    })
    .await?;
    let exported: std::collections::BTreeSet<String> = metrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .map(str::to_owned)
        .collect();
    let missing: Vec<&String> = named.difference(&exported).collect();
    assert!(
        missing.is_empty(),
        "the dashboard or alerts name metrics the host does not export: {missing:?} (exported: {exported:?})"
    );
    assert_eq!(sample(&metrics, "orchard_ready", &[]), Some(1.0));
    assert_eq!(
        sample(
            &metrics,
            "orchard_objects_unsettled_oldest_seconds",
            &["kind=\"DnsZone\""]
        ),
        Some(0.0),
        "nothing unsettled"
    );
    // The pass's instance ended with the pass: an idle host holds none of the pool, and gave
    // back the units its instance took.
    poll_until(
        CONVERGE,
        "no plugin instance alive on the idle host",
        || async {
            let (_, metrics) = get(&url).await?;
            let alive = sample(&metrics, "orchard_wasm_instances_alive", &[]);
            let taken = sample(&metrics, "orchard_wasm_pool_units_in_use", &[]);
            Ok((alive == Some(0.0) && taken == Some(0.0)).then_some(()))
        },
    )
    .await?;
    assert_eq!(
        sample(&metrics, "orchard_wasm_pool_units", &[]),
        Some(4096.0)
    );
    assert_eq!(
        sample(&metrics, "orchard_wasm_instance_waits_total", &[]),
        Some(0.0),
        "one zone never fills the pool"
    );
    // Each kind's controller expects up to its concurrency (16) of instances of 16 units.
    assert_eq!(
        sample(&metrics, "orchard_wasm_pool_units_expected", &[]),
        Some(256.0 * f64::from(u32::try_from(s.plugins().len())?)),
        "{} plugins at the default concurrency",
        s.plugins().len()
    );
    s.delete(ZONE, "d").await?;
    s.wait_gone(ZONE, "d").await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn probes_and_metrics_are_served_and_count_reconciles_and_plugin_calls_the_shortcuts_skip()
-> anyhow::Result<()> {
    let (mut s, _pdns) = pdns::harness("metrics").await?;
    let port = free_port()?;
    let admin = format!("127.0.0.1:{port}");
    let _host = s.start_host(&[("ORCHARD_ADMIN_ADDR", admin.as_str())])?;
    let base = format!("http://{admin}");
    wait_host_ready(&admin, CONVERGE).await?;
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
    let calls = |metrics: &str, function: &str| {
        let f = format!("function=\"{function}\"");
        count(
            metrics,
            "orchard_wasm_call_duration_seconds_count",
            &[zone_labels[0], f.as_str()],
        )
    };
    for function in ["create", "available", "observed"] {
        assert!(calls(&metrics, function) >= 1, "no {function} call counted");
    }
    // pdns-zone declares both shortcuts (`orchard:shortcuts`: PowerDNS refuses a zone name that
    // exists and deletes at once): no lookup before its create…
    assert_eq!(calls(&metrics, "list-for-adoption"), 0, "{metrics}");
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

    // …and its delete pass deletes the zone by its status.id: no read before the delete
    // (delete-by-id) nor after it (delete-is-synchronous). (The host's own writes start no
    // pass: one pass created the zone, one deletes it.)
    s.delete(ZONE, "m").await?;
    s.wait_gone(ZONE, "m").await?;
    let (_, metrics) = get(&format!("{base}/metrics")).await?;
    assert_eq!(
        (
            calls(&metrics, "create"),
            calls(&metrics, "list-for-adoption"),
            calls(&metrics, "get-by-id"),
            calls(&metrics, "delete"),
        ),
        (1, 0, 0, 1),
        "create, list-for-adoption, get-by-id, delete: {metrics}"
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
    wait_lease_holder(&s.client, &s.ns, &lease, "host-a", CONVERGE).await?;
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

    wait_lease_holder(&s.client, &s.ns, &lease, "host-b", Duration::from_secs(30)).await?;
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
