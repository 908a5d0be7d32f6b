//! `orchard conformance` (issue 17) against the real PowerDNS and RabbitMQ: every plugin in
//! `plugins/` keeps every rule, and each break of the `conformance-broken` fixture fails,
//! naming the rule it breaks. Also `orchard invoke --dependency` (issue 15, item 5), and the C
//! pdns-tsig's hand-written schemas against its Go twin's derived ones (issue 28).
//!
//! Each scenario runs the built `orchard` binary as a plugin author would and reads its JSON
//! report; the external system is checked afterwards for leftovers.

use anyhow::Context;
use std::path::PathBuf;
use std::process::Command;

use orchard_e2e::paths::{orchard_bin, plugin};
use orchard_e2e::{TestEnv, unique_suffix};
use serde_json::{Value, json};

/// One run of `orchard conformance`: its exit status, the JSON report and stderr.
struct Run {
    success: bool,
    report: Value,
    stderr: String,
}

impl Run {
    fn outcomes(&self) -> Vec<(String, String)> {
        self.report["rules"]
            .as_array()
            .map(|rules| {
                rules
                    .iter()
                    .map(|f| {
                        (
                            f["rule"].as_str().unwrap_or_default().to_owned(),
                            f["outcome"].as_str().unwrap_or_default().to_owned(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    fn failed(&self) -> Vec<String> {
        self.outcomes()
            .into_iter()
            .filter(|(_, o)| o == "fail")
            .map(|(r, _)| r)
            .collect()
    }

    fn outcome(&self, rule: &str) -> String {
        self.outcomes()
            .into_iter()
            .find(|(r, _)| r == rule)
            .map(|(_, o)| o)
            .unwrap_or_default()
    }

    fn evidence(&self, rule: &str) -> String {
        self.report["rules"]
            .as_array()
            .and_then(|rules| rules.iter().find(|f| f["rule"] == rule))
            .map(|f| f["evidence"].to_string())
            .unwrap_or_default()
    }

    /// The `delete` rule checked a declared `delete-is-synchronous` (`orchard:shortcuts`): one
    /// read, right after the delete.
    fn assert_delete_checked_as_synchronous(&self) {
        let evidence = self.evidence("delete");
        assert!(
            evidence.contains("right after the delete (delete-is-synchronous)"),
            "{evidence}"
        );
    }

    /// The `delete` rule checked a declared `delete-by-id`: the delete got the id and no
    /// state, and a second delete of the gone id answered done.
    fn assert_delete_checked_by_id(&self) {
        let evidence = self.evidence("delete");
        assert!(
            evidence.contains("by id, its state null (delete-by-id)")
                && evidence.contains("by id, already gone, answered done (delete-by-id)"),
            "{evidence}"
        );
    }

    /// Every rule passed (but the round trip of a conversion, skipped: the kind has one
    /// version) and the cleanup left nothing.
    fn assert_all_pass(&self) {
        self.assert_all_pass_but_skipped(&[]);
    }

    /// Every rule but those of `skipped` (which must be skipped) passed, and the cleanup
    /// left nothing.
    fn assert_all_pass_but_skipped(&self, skipped: &[&str]) {
        let text = serde_json::to_string_pretty(&self.report).unwrap_or_default();
        assert!(self.success, "{text}\n{}", self.stderr);
        let not_passed: Vec<(String, String)> = self
            .outcomes()
            .into_iter()
            .filter(|(r, o)| {
                o != "pass"
                    && !(o == "skip"
                        && (skipped.contains(&r.as_str()) || r == "conversion-round-trip"))
            })
            .collect();
        assert!(not_passed.is_empty(), "{not_passed:?}\n{text}");
        assert_eq!(self.report["cleanup"]["leftovers"], json!([]), "{text}");
        assert_eq!(self.report["passed"], true, "{text}");
    }
}

/// A manifest written to a temporary file, removed when dropped.
struct Manifest(PathBuf);

impl Manifest {
    fn new(value: &Value) -> anyhow::Result<Self> {
        let path =
            std::env::temp_dir().join(format!("orchard-conformance-{}.json", unique_suffix()));
        std::fs::write(&path, value.to_string())?;
        Ok(Self(path))
    }
}

impl Drop for Manifest {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

struct Conformance {
    plugin: &'static str,
    object: Value,
    credentials: Vec<(String, String)>,
    dependencies: Vec<(&'static str, Value)>,
    filter: Option<Value>,
    allow_host: String,
}

impl Conformance {
    fn pdns(env: &TestEnv, plugin: &'static str, kind: &str, resource: &Value) -> Self {
        Self {
            plugin,
            object: object("pdns.orchard.dev/v1alpha1", kind, resource),
            credentials: vec![
                ("url".into(), env.pdns_api_url.clone()),
                ("apiKey".into(), env.pdns_api_key.clone()),
            ],
            dependencies: vec![],
            filter: None,
            allow_host: env.pdns_api_url.clone(),
        }
    }

    fn rabbitmq(
        env: &TestEnv,
        plugin: &'static str,
        kind: &str,
        resource: &Value,
    ) -> anyhow::Result<Self> {
        let r = env.rabbitmq()?;
        Ok(Self {
            plugin,
            object: object("rabbitmq.orchard.dev/v1alpha1", kind, resource),
            credentials: vec![
                ("url".into(), r.api_url.clone()),
                ("username".into(), r.user.clone()),
                ("password".into(), r.password.clone()),
            ],
            dependencies: vec![],
            filter: None,
            allow_host: r.api_url.clone(),
        })
    }

    fn filter(mut self, filter: Value) -> Self {
        self.filter = Some(filter);
        self
    }

    fn dependency(mut self, name: &'static str, manifest: Value) -> Self {
        self.dependencies.push((name, manifest));
        self
    }

    fn run(&self) -> anyhow::Result<Run> {
        let object = Manifest::new(&self.object)?;
        let deps = self
            .dependencies
            .iter()
            .map(|(n, m)| Ok((*n, Manifest::new(m)?)))
            .collect::<anyhow::Result<Vec<(&str, Manifest)>>>()?;
        let mut cmd = Command::new(orchard_bin());
        cmd.arg("conformance")
            .arg(plugin(self.plugin))
            .arg("--object")
            .arg(&object.0)
            .args(["--output", "json", "--allow-host", &self.allow_host]);
        for (k, v) in &self.credentials {
            cmd.args(["--credential", &format!("{k}={v}")]);
        }
        for (name, m) in &deps {
            cmd.arg("--dependency")
                .arg(format!("{name}={}", m.0.display()));
        }
        if let Some(f) = &self.filter {
            cmd.args(["--import-filter", &f.to_string()]);
        }
        let out = cmd.output()?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let report = serde_json::from_str(&stdout)
            .map_err(|e| anyhow::anyhow!("no JSON report ({e}): {stdout}\n{stderr}"))?;
        Ok(Run {
            success: out.status.success(),
            report,
            stderr,
        })
    }
}

fn object(api_version: &str, kind: &str, resource: &Value) -> Value {
    json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": format!("sample-{}", unique_suffix()), "namespace": "default",
                     "uid": format!("uid-{}", unique_suffix())},
        "spec": {"credentialsRef": {"secretName": "unused"}, "resource": resource},
    })
}

fn zone_name() -> String {
    format!("conf-{}.example.org.", unique_suffix())
}

/// The zones PowerDNS has whose name ends with `name` (the zone and any `dup<N>.` of it).
async fn zones_like(env: &TestEnv, name: &str) -> anyhow::Result<Vec<String>> {
    Ok(orchard_e2e::pdns::Api::new(env)?
        .zones()
        .await?
        .iter()
        .filter_map(|z| z["name"].as_str().map(str::to_owned))
        .filter(|n| n.ends_with(name))
        .collect())
}

#[tokio::test]
async fn pdns_zone_keeps_every_rule_against_powerdns() -> anyhow::Result<()> {
    let env = TestEnv::load()?;
    let name = zone_name();
    let run = Conformance::pdns(
        &env,
        "pdns-zone",
        "DnsZone",
        &json!({"name": name, "kind": "Native", "nameservers": ["ns1.example.org."]}),
    )
    .filter(json!({"name": name, "kind": "Native"}))
    .run()?;
    run.assert_all_pass();
    // pdns-zone declares all three shortcuts: PowerDNS refuses the second create, the zone is
    // gone at the first read after its delete, and it is deleted by its id alone — a second
    // delete of the gone id answers done.
    assert!(
        run.evidence("create-not-repeated")
            .contains("a second create answered"),
        "{}",
        run.evidence("create-not-repeated")
    );
    run.assert_delete_checked_as_synchronous();
    run.assert_delete_checked_by_id();
    assert!(zones_like(&env, &name).await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn pdns_zone_v1beta1_keeps_every_rule_with_its_conversion_round_tripping()
-> anyhow::Result<()> {
    let env = TestEnv::load()?;
    let name = zone_name();
    let mut conformance = Conformance::pdns(
        &env,
        "pdns-zone-evolution-v1beta1",
        "DnsZone",
        &json!({"name": name, "kind": "Native", "nameservers": ["ns1.example.org."]}),
    )
    .filter(json!({"name": name, "kind": "Native"}));
    conformance.object["apiVersion"] = json!("evolution.pdns.orchard.dev/v1alpha1");
    let run = conformance.run()?;
    run.assert_all_pass();
    assert_eq!(
        run.outcome("conversion-round-trip"),
        "pass",
        "{:?}",
        run.outcomes()
    );
    assert!(
        run.evidence("conversion-round-trip")
            .contains("v1alpha1 to v1beta1 and back gives the sample again"),
        "{}",
        run.evidence("conversion-round-trip")
    );
    assert!(zones_like(&env, &name).await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn pdns_record_with_its_zone_dependency_keeps_every_rule() -> anyhow::Result<()> {
    let env = TestEnv::load()?;
    let zone = zone_name();
    let pdns = orchard_e2e::pdns::Api::new(&env)?;
    pdns.create_zone(&zone, "").await?;
    let run = Conformance::pdns(
        &env,
        "pdns-record",
        "DnsRecord",
        &json!({"zoneRef": "the-zone", "name": "www", "type": "A", "ttl": 300,
               "records": ["192.0.2.10"]}),
    )
    .dependency(
        "zone",
        json!({"apiVersion": "pdns.orchard.dev/v1alpha1", "kind": "DnsZone",
               "metadata": {"name": "the-zone", "namespace": "default"},
               "status": {"id": zone, "resource": {"name": zone}}}),
    )
    .filter(json!({"zone": zone, "name": "www", "type": "A"}))
    .run()?;
    let rrsets = pdns.zone(&zone).await?.map(|z| z["rrsets"].clone());
    pdns.delete_zone(&zone).await?;
    run.assert_all_pass();
    let www = format!("www.{zone}");
    assert!(
        !rrsets
            .unwrap_or_default()
            .as_array()
            .is_some_and(|sets| sets.iter().any(|s| s["name"] == www.as_str())),
        "the record set was left behind"
    );
    Ok(())
}

#[tokio::test]
async fn pdns_tsig_in_c_keeps_every_rule() -> anyhow::Result<()> {
    let env = TestEnv::load()?;
    let name = format!("conf-{}", unique_suffix());
    let run = Conformance::pdns(
        &env,
        "pdns-tsig",
        "TsigKey",
        &json!({"name": name, "algorithm": "hmac-sha256"}),
    )
    .filter(json!({"name": name, "algorithm": "hmac-sha256"}))
    .run()?;
    run.assert_all_pass();
    // The C SDK's orc_actuator.shortcuts: pdns-tsig declares all three, checked on PowerDNS.
    run.assert_delete_checked_as_synchronous();
    run.assert_delete_checked_by_id();
    Ok(())
}

/// The same TSIG keys in Go, its HTTP layer a client generated by oapi-codegen.
#[tokio::test]
async fn pdns_tsig_in_go_with_a_generated_client_keeps_every_rule() -> anyhow::Result<()> {
    let env = TestEnv::load()?;
    let name = format!("conf-{}", unique_suffix());
    let run = Conformance::pdns(
        &env,
        "pdns-tsig-go",
        "GoTsigKey",
        &json!({"name": name, "algorithm": "hmac-sha256"}),
    )
    .filter(json!({"name": name, "algorithm": "hmac-sha256"}))
    .run()?;
    run.assert_all_pass();
    // The Go SDK's orchard.ShortcutDeclarer (and orchard.IDDeleter): pdns-tsig-go declares all
    // three, checked on PowerDNS.
    run.assert_delete_checked_as_synchronous();
    run.assert_delete_checked_by_id();
    Ok(())
}

/// C has no reflection: pdns-tsig's schemas are JSON written by hand. Its Go twin derives the
/// same three from struct tags, and the two components describe them identically (only
/// `orchard invoke … describe`: no test environment needed).
#[test]
fn the_c_tsig_actuator_describes_the_schemas_its_go_twin_derives_from_types() -> anyhow::Result<()>
{
    let describe = |crate_name: &str| -> anyhow::Result<Value> {
        let out = orchard_e2e::run(
            Command::new(orchard_bin())
                .arg("invoke")
                .arg(plugin(crate_name))
                .arg("describe"),
        )?;
        serde_json::from_str(&out).with_context(|| format!("{crate_name} describe: {out}"))
    };
    let (c, go) = (describe("pdns-tsig")?, describe("pdns-tsig-go")?);
    for schema in ["resourceSchema", "filterSchema", "observedSchema"] {
        assert!(c[schema].is_object(), "pdns-tsig has no {schema}: {c}");
        assert_eq!(c[schema], go[schema], "{schema}");
    }
    Ok(())
}

fn vhost_root() -> Value {
    json!({"apiVersion": "rabbitmq.orchard.dev/v1alpha1", "kind": "RabbitVhost",
           "metadata": {"name": "root", "namespace": "default"},
           "status": {"id": "/", "resource": {"name": "/"}}})
}

#[tokio::test]
async fn rabbitmq_vhost_in_python_keeps_every_rule() -> anyhow::Result<()> {
    let env = TestEnv::load()?;
    let name = format!("conf-{}", unique_suffix());
    let run = Conformance::rabbitmq(
        &env,
        "rabbitmq-vhost",
        "RabbitVhost",
        &json!({"name": name, "description": "conformance", "tags": ["a"], "maxQueues": 10}),
    )?
    .filter(json!({"name": name}))
    .run()?;
    run.assert_all_pass();
    // It declares delete-is-synchronous and delete-by-id (Python SDK's `export_shortcuts`):
    // checked on RabbitMQ.
    run.assert_delete_checked_as_synchronous();
    run.assert_delete_checked_by_id();
    Ok(())
}

#[tokio::test]
async fn rabbitmq_queue_in_python_with_its_vhost_dependency_keeps_every_rule() -> anyhow::Result<()>
{
    let env = TestEnv::load()?;
    let name = format!("conf-{}", unique_suffix());
    Conformance::rabbitmq(
        &env,
        "rabbitmq-queue",
        "RabbitQueue",
        &json!({"vhostRef": "root", "name": name, "messageTtl": 60000}),
    )?
    .dependency("vhost", vhost_root())
    .filter(json!({"vhost": "/", "name": name}))
    .run()?
    .assert_all_pass();
    Ok(())
}

#[tokio::test]
async fn rabbitmq_user_in_javascript_keeps_every_rule() -> anyhow::Result<()> {
    let env = TestEnv::load()?;
    let name = format!("conf-{}", unique_suffix());
    let run = Conformance::rabbitmq(
        &env,
        "rabbitmq-user",
        "RabbitUser",
        &json!({"name": name, "tags": ["monitoring"], "permissions": [{"vhost": "/", "read": ".*"}]}),
    )?
    .filter(json!({"name": name}))
    .run()?;
    run.assert_all_pass();
    // It declares delete-is-synchronous and delete-by-id (the JavaScript SDK's `shortcuts()`,
    // with `deleteById`): checked on RabbitMQ.
    run.assert_delete_checked_as_synchronous();
    run.assert_delete_checked_by_id();
    Ok(())
}

#[tokio::test]
async fn rabbitmq_exchange_in_go_with_its_vhost_dependency_keeps_every_rule() -> anyhow::Result<()>
{
    let env = TestEnv::load()?;
    let name = format!("conf-{}", unique_suffix());
    Conformance::rabbitmq(
        &env,
        "rabbitmq-exchange",
        "RabbitExchange",
        &json!({"vhostRef": "root", "name": name, "type": "fanout"}),
    )?
    .dependency("vhost", vhost_root())
    .filter(json!({"vhost": "/", "name": name}))
    .run()?
    .assert_all_pass();
    Ok(())
}

/// The fixture with `misbehave` set: the run fails, naming exactly `rule`, and PowerDNS keeps
/// no zone of the sample's name afterwards.
async fn broken(misbehave: &str, rule: &str) -> anyhow::Result<Run> {
    let env = TestEnv::load()?;
    let name = zone_name();
    let run = Conformance::pdns(
        &env,
        "orchard-fixture-conformance-broken",
        "BrokenZone",
        &json!({"name": name, "misbehave": misbehave}),
    )
    .run()?;
    let text = serde_json::to_string_pretty(&run.report)?;
    assert!(!run.success, "{text}");
    assert_eq!(run.failed(), vec![rule.to_owned()], "{text}");
    assert!(
        run.stderr.contains(rule),
        "the error names the rule: {}",
        run.stderr
    );
    assert_eq!(run.report["cleanup"]["leftovers"], json!([]), "{text}");
    assert!(zones_like(&env, &name).await?.is_empty(), "{text}");
    Ok(run)
}

#[tokio::test]
async fn a_create_that_makes_a_second_zone_fails_create_not_repeated_and_both_are_cleaned_up()
-> anyhow::Result<()> {
    let run = broken("duplicate-create", "create-not-repeated").await?;
    assert!(
        run.evidence("create-not-repeated")
            .contains("made another resource, dup2."),
        "{}",
        run.evidence("create-not-repeated")
    );
    // Two duplicates, both deleted: the second create's, and the one the twin object's create
    // made (create-never-overwrites: another resource beside the first is no overwrite).
    assert_eq!(
        run.report["cleanup"]["deleted"].as_array().map(Vec::len),
        Some(2),
        "{}",
        run.report
    );
    assert!(
        run.evidence("create-never-overwrites")
            .contains("not an overwrite"),
        "{}",
        run.evidence("create-never-overwrites")
    );
    Ok(())
}

#[tokio::test]
async fn an_adoption_that_misses_fails_the_kill_point() -> anyhow::Result<()> {
    let run = broken("adoption-misses", "kill-point").await?;
    assert!(
        run.evidence("kill-point")
            .contains("would create a second resource and leak"),
        "{}",
        run.evidence("kill-point")
    );
    Ok(())
}

#[tokio::test]
async fn a_delete_that_errors_when_the_zone_is_gone_fails_delete_idempotent() -> anyhow::Result<()>
{
    let run = broken("delete-errors-when-gone", "delete-idempotent").await?;
    assert!(
        run.evidence("delete-idempotent").contains("404 Not Found"),
        "{}",
        run.evidence("delete-idempotent")
    );
    assert_eq!(run.outcome("get-unknown-id"), "pass");
    Ok(())
}

#[tokio::test]
async fn the_fixture_without_a_break_keeps_every_rule_it_can_be_checked_on() -> anyhow::Result<()> {
    let env = TestEnv::load()?;
    let name = zone_name();
    Conformance::pdns(
        &env,
        "orchard-fixture-conformance-broken",
        "BrokenZone",
        &json!({"name": name}),
    )
    .run()?
    .assert_all_pass_but_skipped(&["import-by-filter"]);
    Ok(())
}

#[tokio::test]
async fn invoke_with_a_zone_dependency_file_reaches_pdns_record() -> anyhow::Result<()> {
    let env = TestEnv::load()?;
    let zone = zone_name();
    let pdns = orchard_e2e::pdns::Api::new(&env)?;
    pdns.create_zone(&zone, "").await?;
    let record = Manifest::new(&object(
        "pdns.orchard.dev/v1alpha1",
        "DnsRecord",
        &json!({"zoneRef": "the-zone", "name": "www", "type": "A", "records": ["192.0.2.1"]}),
    ))?;
    let dep = Manifest::new(&json!({"kind": "DnsZone", "metadata": {"name": "the-zone"},
                                    "status": {"id": zone}}))?;
    let invoke = |extra: &[String]| {
        Command::new(orchard_bin())
            .arg("invoke")
            .arg(plugin("pdns-record"))
            .arg("list-for-adoption")
            .arg("--object")
            .arg(&record.0)
            .args(["--credential", &format!("url={}", env.pdns_api_url)])
            .args(["--credential", &format!("apiKey={}", env.pdns_api_key)])
            .args(["--allow-host", &env.pdns_api_url])
            .args(extra)
            .output()
    };
    let with = invoke(&["--dependency".into(), format!("zone={}", dep.0.display())])?;
    let wrong = invoke(&["--dependency".into(), format!("vhost={}", dep.0.display())])?;
    pdns.delete_zone(&zone).await?;
    let answer: Value = serde_json::from_slice(&with.stdout)?;
    assert_eq!(
        answer,
        json!({"Ok": []}),
        "{answer} {}",
        String::from_utf8_lossy(&with.stderr)
    );
    assert!(!wrong.status.success());
    let err = String::from_utf8_lossy(&wrong.stderr);
    assert!(
        err.contains("--dependency vhost=") && err.contains("declares no dependency \"vhost\""),
        "{err}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn invoke_reads_a_dependency_from_the_cluster_by_kind_and_name() -> anyhow::Result<()> {
    let (mut h, pdns) = orchard_e2e::pdns::harness("conformance-dep").await?;
    let _host = h.start_host(&[])?;
    let zone = format!("dep.{}.test.", h.id);
    h.apply(&format!(
        "apiVersion: pdns.orchard.dev/v1alpha1\nkind: DnsZone\nmetadata: {{name: the-zone}}\nspec:\n  credentialsRef: {{secretName: pdns}}\n  resource: {{name: \"{zone}\"}}\n"
    ))
    .await?;
    h.wait_ready("DnsZone", "the-zone").await?;
    let record = Manifest::new(&json!({
        "apiVersion": "pdns.orchard.dev/v1alpha1", "kind": "DnsRecord",
        "metadata": {"name": "www", "namespace": h.ns},
        "spec": {"resource": {"zoneRef": "the-zone", "name": "www", "type": "A", "records": ["192.0.2.1"]}},
    }))?;
    let invoke = |dependency: &str| {
        Command::new(orchard_bin())
            .env("KUBECONFIG", &h.env.admin_kubeconfig)
            .arg("invoke")
            .arg(plugin("pdns-record"))
            .arg("list-for-adoption")
            .arg("--object")
            .arg(&record.0)
            .args(["--credential", &format!("url={}", h.env.pdns_api_url)])
            .args(["--credential", &format!("apiKey={}", h.env.pdns_api_key)])
            .args(["--allow-host", &h.env.pdns_api_url])
            .args(["--dependency", dependency])
            .output()
    };
    let found = invoke("zone=DnsZone/the-zone")?;
    let missing = invoke("zone=DnsZone/no-such-zone")?;
    h.delete("DnsZone", "the-zone").await?;
    h.wait_gone("DnsZone", "the-zone").await?;
    let answer: Value = serde_json::from_slice(&found.stdout)?;
    assert_eq!(
        answer,
        json!({"Ok": []}),
        "{answer} {}",
        String::from_utf8_lossy(&found.stderr)
    );
    assert!(!missing.status.success());
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(
        err.contains("--dependency zone=DnsZone/no-such-zone") && err.contains("not found"),
        "{err}"
    );
    assert!(pdns.zone(&zone).await?.is_none());
    Ok(())
}

#[tokio::test]
async fn invoke_show_reports_prints_the_drift_a_reconciler_changed_back() -> anyhow::Result<()> {
    let env = TestEnv::load()?;
    let zone = zone_name();
    let pdns = orchard_e2e::pdns::Api::new(&env)?;
    pdns.create_zone(&zone, "intruder").await?;
    let mut manifest = object(
        "pdns.orchard.dev/v1alpha1",
        "DnsZone",
        &json!({"name": zone, "account": "team-a"}),
    );
    manifest["status"] = json!({"id": zone});
    let manifest = Manifest::new(&manifest)?;
    let out = Command::new(orchard_bin())
        .arg("invoke")
        .arg(plugin("pdns-zone"))
        .arg("run-reconciler")
        .args(["--reconciler", "settings", "--show-reports", "--object"])
        .arg(&manifest.0)
        .args(["--credential", &format!("url={}", env.pdns_api_url)])
        .args(["--credential", &format!("apiKey={}", env.pdns_api_key)])
        .args(["--allow-host", &env.pdns_api_url])
        .output()?;
    let account = pdns.zone(&zone).await?.unwrap_or_default()["account"].clone();
    pdns.delete_zone(&zone).await?;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let answer: Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(
        answer,
        json!({"failure": null, "progress": [{"type": "needsRefresh", "message": "zone settings updated"}]}),
        "{err}"
    );
    let reports = err
        .split_once("reports of the call:\n")
        .map(|(_, r)| r)
        .with_context(|| format!("no reports on stderr: {err}"))?;
    let reports: Value = serde_json::from_str(reports)?;
    assert_eq!(
        reports["drift"],
        json!([{"field": "account", "observed": "\"intruder\"", "desired": "\"team-a\""}]),
        "{reports}"
    );
    assert_eq!(account, "team-a", "changed back in PowerDNS");
    Ok(())
}
