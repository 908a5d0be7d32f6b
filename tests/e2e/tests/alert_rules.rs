//! The chart's alerts (`deploy/helm/orchard/files/alerts.yaml`), as Prometheus itself reads them:
//! rendered by the real helm into the `PrometheusRule` the chart ships, its `spec` checked by
//! `promtool check rules` and run through the unit tests of `deploy/helm/orchard/tests/` by
//! `promtool test rules` (helm and promtool from `tests/env/build-tools.sh`). No cluster needed.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, ensure};
use orchard_e2e::{run, tool, unique_suffix};
use serde_yaml::Value;

/// The Kubernetes release the chart is rendered for.
const KUBE_VERSION: &str = "v1.34.4";

/// The rule file the unit tests load (`rule_files` of `alerts_test.yaml`), beside them.
const RENDERED: &str = "alerts.rendered.yaml";

fn chart() -> PathBuf {
    orchard_e2e::paths::workspace().join("deploy/helm/orchard")
}

fn promtool() -> anyhow::Result<PathBuf> {
    let promtool = tool("promtool");
    ensure!(
        promtool.is_file(),
        "{} is missing: build it with tests/env/build-tools.sh",
        promtool.display()
    );
    Ok(promtool)
}

/// `helm template` of the chart as release `release` in `orchard-system`, with the
/// `PrometheusRule` on and `sets`: its documents.
fn render(release: &str, sets: &[&str]) -> anyhow::Result<Vec<Value>> {
    let mut cmd = Command::new(tool("helm"));
    cmd.args([
        "template",
        release,
        "-n",
        "orchard-system",
        "--kube-version",
        KUBE_VERSION,
        "--set",
        "metrics.prometheusRule.enabled=true",
    ]);
    for set in sets {
        cmd.args(["--set", set]);
    }
    let rendered = run(cmd.arg(chart()))?;
    rendered
        .split("\n---")
        .filter(|d| d.contains("kind:"))
        .map(|d| Ok(serde_yaml::from_str::<Value>(d)?))
        .collect()
}

fn find<'a>(docs: &'a [Value], kind: &str) -> anyhow::Result<&'a Value> {
    docs.iter()
        .find(|d| d["kind"].as_str() == Some(kind))
        .with_context(|| format!("the chart rendered no {kind}"))
}

/// The `PrometheusRule`'s `spec`: a Prometheus rule file.
fn rule_file(docs: &[Value]) -> anyhow::Result<Value> {
    let spec = find(docs, "PrometheusRule")?["spec"].clone();
    ensure!(
        spec["groups"].as_sequence().is_some_and(|g| !g.is_empty()),
        "the PrometheusRule has no groups: {spec:?}"
    );
    Ok(spec)
}

/// Every rule of the rule file, as (alert name, rule).
fn alerts(rules: &Value) -> Vec<(String, Value)> {
    rules["groups"]
        .as_sequence()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_sequence().cloned().unwrap_or_default())
        .filter_map(|r| Some((r["alert"].as_str()?.to_owned(), r)))
        .collect()
}

fn rule<'a>(alerts: &'a [(String, Value)], name: &str) -> anyhow::Result<&'a Value> {
    alerts
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, r)| r)
        .with_context(|| format!("no alert {name}"))
}

fn text<'a>(rule: &'a Value, path: &[&str]) -> anyhow::Result<&'a str> {
    let mut at = rule;
    for key in path {
        at = &at[*key];
    }
    at.as_str()
        .with_context(|| format!("{} of {:?}: not a string", path.join("."), rule["alert"]))
}

/// A fresh directory holding `rules` as [`RENDERED`] and the chart's unit tests beside it.
fn workdir(rules: &Value) -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("orchard-alert-rules-{}", unique_suffix()));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join(RENDERED), serde_yaml::to_string(rules)?)?;
    for entry in std::fs::read_dir(chart().join("tests"))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "yaml") {
            std::fs::copy(&path, dir.join(path.file_name().context("a file name")?))?;
        }
    }
    Ok(dir)
}

/// `promtool check rules` on the rule file in `dir`: its output.
fn check_rules(dir: &Path) -> anyhow::Result<String> {
    run(Command::new(promtool()?)
        .args(["check", "rules", RENDERED])
        .current_dir(dir))
}

#[test]
fn the_shipped_alert_rules_pass_promtool_check_and_their_unit_tests() -> anyhow::Result<()> {
    let rules = rule_file(&render("orchard", &[])?)?;
    let dir = workdir(&rules)?;
    let checked = check_rules(&dir)?;
    let count = alerts(&rules).len();
    ensure!(
        checked.contains(&format!("SUCCESS: {count} rules found")),
        "promtool check rules: {checked}"
    );
    let tested = run(Command::new(promtool()?)
        .args(["test", "rules", "alerts_test.yaml"])
        .current_dir(&dir))?;
    ensure!(tested.contains("SUCCESS"), "promtool test rules: {tested}");
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

#[test]
fn every_shipped_alert_has_a_unit_test_where_it_fires_and_one_where_it_does_not()
-> anyhow::Result<()> {
    let rules = rule_file(&render("orchard", &[])?)?;
    let tests: Value = serde_yaml::from_str(&std::fs::read_to_string(
        chart().join("tests/alerts_test.yaml"),
    )?)?;
    ensure!(
        tests["rule_files"]
            .as_sequence()
            .is_some_and(|f| f.iter().filter_map(Value::as_str).eq([RENDERED])),
        "alerts_test.yaml must load {RENDERED} alone: {:?}",
        tests["rule_files"]
    );
    let cases: Vec<&Value> = tests["tests"]
        .as_sequence()
        .context("alerts_test.yaml has no tests")?
        .iter()
        .flat_map(|t| t["alert_rule_test"].as_sequence().into_iter().flatten())
        .collect();
    let mut missing = Vec::new();
    for (name, _) in alerts(&rules) {
        let fires: Vec<bool> = cases
            .iter()
            .filter(|c| c["alertname"].as_str() == Some(name.as_str()))
            .map(|c| c["exp_alerts"].as_sequence().is_some_and(|a| !a.is_empty()))
            .collect();
        if !fires.contains(&true) {
            missing.push(format!("{name}: no case where it fires"));
        }
        if !fires.contains(&false) {
            missing.push(format!("{name}: no case where it stays quiet"));
        }
    }
    ensure!(
        missing.is_empty(),
        "alerts_test.yaml: {}",
        missing.join("; ")
    );
    Ok(())
}

#[test]
fn the_alert_thresholds_set_in_values_land_in_the_rendered_exprs_and_summaries()
-> anyhow::Result<()> {
    let rules = rule_file(&render(
        "orchard",
        &[
            "metrics.prometheusRule.stuckMinutes=40",
            "metrics.prometheusRule.errorRatio=0.25",
        ],
    )?)?;
    let alerts = alerts(&rules);
    let stuck = rule(&alerts, "OrchardObjectsStuckProgressing")?;
    let expr = text(stuck, &["expr"])?;
    ensure!(
        expr.trim_end().ends_with("> 2400"),
        "stuckMinutes=40 is 2400 s: {expr}"
    );
    let summary = text(stuck, &["annotations", "summary"])?;
    ensure!(summary.contains("over 40 minutes"), "{summary}");
    let ratio = rule(&alerts, "OrchardReconcileErrorRatio")?;
    let expr = text(ratio, &["expr"])?;
    ensure!(
        expr.trim_end().ends_with("> 0.25"),
        "errorRatio=0.25: {expr}"
    );
    let summary = text(ratio, &["annotations", "summary"])?;
    ensure!(summary.starts_with("Over 25% of "), "{summary}");
    // And the defaults are gone.
    let all = serde_yaml::to_string(&rules)?;
    ensure!(
        !all.contains("> 900") && !all.contains("> 0.1\n"),
        "a default threshold is left: {all}"
    );
    // Still a valid rule file.
    let dir = workdir(&rules)?;
    check_rules(&dir)?;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

#[test]
fn the_host_down_alert_selects_the_job_a_service_monitor_gives_the_charts_metrics_service()
-> anyhow::Result<()> {
    // The Prometheus Operator names a ServiceMonitor's job after the Service it scrapes (unless
    // `jobLabel` names a label of that Service): `up{job=…}` has to name the chart's Service.
    for release in ["orchard", "dns-operators"] {
        let docs = render(release, &["metrics.serviceMonitor.enabled=true"])?;
        let monitor = find(&docs, "ServiceMonitor")?;
        ensure!(
            monitor["spec"]["jobLabel"].is_null(),
            "the ServiceMonitor sets jobLabel: {monitor:?}"
        );
        let selector = monitor["spec"]["selector"]["matchLabels"]
            .as_mapping()
            .context("the ServiceMonitor selects no labels")?;
        let services: Vec<&str> = docs
            .iter()
            .filter(|d| d["kind"].as_str() == Some("Service"))
            .filter(|d| {
                selector
                    .iter()
                    .all(|(k, v)| d["metadata"]["labels"].get(k) == Some(v))
            })
            .filter_map(|d| d["metadata"]["name"].as_str())
            .collect();
        let [service] = services[..] else {
            anyhow::bail!(
                "release {release}: the ServiceMonitor selects the Services {services:?}"
            );
        };
        let alerts = alerts(&rule_file(&docs)?);
        let expr = text(rule(&alerts, "OrchardHostDown")?, &["expr"])?;
        ensure!(
            expr.contains(&format!("up{{job=\"{service}\"}}")),
            "release {release}: the Service is {service}, OrchardHostDown selects {expr}"
        );
    }
    Ok(())
}
