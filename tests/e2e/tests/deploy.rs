//! The deploy artefacts: the Helm chart lints and renders with the real helm, the chart and
//! the kustomize base are accepted by the real apiserver (server-side dry run) and grant the
//! same rules, the shipped CRDs are exactly what the plugins describe, and the image builds
//! from `scratch` and runs `orchard --version` from its own root filesystem.

use std::path::PathBuf;
use std::process::Command;

use anyhow::Context;
use orchard_e2e::TestEnv;
use orchard_e2e::paths::{orchard_bin, plugin};
use orchard_e2e::{run, tool};
use serde_json::Value;

fn repo() -> PathBuf {
    orchard_e2e::paths::workspace()
}

fn helm() -> PathBuf {
    tool("helm")
}

fn docs(yaml: &str) -> anyhow::Result<Vec<Value>> {
    yaml.split("\n---")
        .map(str::trim)
        .filter(|d| !d.is_empty() && d.lines().any(|l| !l.trim_start().starts_with('#')))
        .map(|d| Ok(serde_yaml::from_str::<Value>(d)?))
        .filter(|d| !matches!(d, Ok(Value::Null)))
        .collect()
}

fn server_dry_run(env: &TestEnv, manifests: &[Value]) -> anyhow::Result<()> {
    // Namespaced objects need their namespace to exist, even for a dry run.
    let _ = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&env.admin_kubeconfig)
        .args(["create", "namespace", "orchard-system"])
        .output();
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": manifests});
    let file = env
        .dir
        .join(format!("dry-run-{}.json", orchard_e2e::unique_suffix()));
    std::fs::write(&file, list.to_string())?;
    run(Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&env.admin_kubeconfig)
        .args(["apply", "--dry-run=server", "-n", "orchard-system", "-f"])
        .arg(&file))?;
    Ok(())
}

fn cluster_role_rules(manifests: &[Value]) -> anyhow::Result<Value> {
    Ok(manifests
        .iter()
        .find(|m| m["kind"] == "ClusterRole")
        .context("no ClusterRole")?["rules"]
        .clone())
}

fn kustomize(env: &TestEnv) -> anyhow::Result<Vec<Value>> {
    docs(&run(Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&env.admin_kubeconfig)
        .arg("kustomize")
        .arg(repo().join("deploy/kustomize")))?)
}

#[tokio::test]
async fn the_helm_chart_lints_renders_and_grants_what_the_kustomize_base_grants()
-> anyhow::Result<()> {
    let env = TestEnv::load()?;
    let chart = repo().join("deploy/helm/orchard");
    run(Command::new(helm()).arg("lint").arg(&chart))?;
    let rendered = run(&mut helm_template(
        &env,
        "metrics.serviceMonitor.enabled=true",
    ))?;
    let manifests = docs(&rendered)?;
    let kinds: Vec<&str> = manifests
        .iter()
        .filter_map(|m| m["kind"].as_str())
        .collect();
    for kind in [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "ServiceMonitor",
    ] {
        assert!(kinds.contains(&kind), "{kind} missing from {kinds:?}");
    }
    let deployment = the_deployment(&manifests)?;
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(
        deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"],
        65532
    );
    let args = args_of(container)?;
    assert!(args.contains(&"--leader-elect"), "{args:?}");
    assert!(args.contains(&"--runtime-workers=auto"), "{args:?}");
    // The flag's own default (cli.rs parses it: `the_instance_pool_defaults_to_256…`).
    assert!(args.contains(&"--instance-pool=256"), "{args:?}");
    // The ServiceMonitor's CRD is not in a bare apiserver: dry-run the rest.
    let applicable: Vec<Value> = manifests
        .iter()
        .filter(|m| m["kind"] != "ServiceMonitor")
        .cloned()
        .collect();
    server_dry_run(&env, &applicable)?;
    assert_eq!(
        cluster_role_rules(&manifests)?,
        cluster_role_rules(&kustomize(&env)?)?,
        "chart and kustomize grant different rules"
    );
    Ok(())
}

#[tokio::test]
async fn the_helm_chart_renders_a_sharded_deployment_with_and_without_plugin_objects()
-> anyhow::Result<()> {
    let env = TestEnv::load()?;
    for (values, watches_plugins) in [
        (
            "sharding.enabled=true,sharding.ring=edge,pluginObjects.enabled=false,replicas=3",
            false,
        ),
        ("sharding.enabled=true,sharding.ring=edge,replicas=3", true),
    ] {
        let rendered = run(&mut helm_template(&env, values))?;
        let manifests = docs(&rendered)?;
        let deployment = the_deployment(&manifests)?;
        assert_eq!(deployment["spec"]["replicas"], 3);
        let args = args_of(&deployment["spec"]["template"]["spec"]["containers"][0])?;
        assert!(args.contains(&"--shard-ring=edge"), "{values}: {args:?}");
        assert!(!args.contains(&"--leader-elect"), "{values}: {args:?}");
        assert_eq!(
            args.contains(&"--watch-plugins"),
            watches_plugins,
            "{values}: {args:?}"
        );
        let role = manifests
            .iter()
            .find(|m| m["kind"] == "Role")
            .context("no Role")?;
        let resources: Vec<&str> = role["rules"]
            .as_array()
            .context("rules")?
            .iter()
            .flat_map(|r| r["resources"].as_array().into_iter().flatten())
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(resources, ["leases", "configmaps"], "{values}: {role}");
        server_dry_run(&env, &manifests)?;
    }
    Ok(())
}

#[tokio::test]
async fn the_helm_chart_gives_the_plugins_the_clusters_ca_from_a_config_map() -> anyhow::Result<()>
{
    let env = TestEnv::load()?;
    let rendered = run(&mut helm_template(
        &env,
        "sandbox.trustedCA.configMap=corp-ca,sandbox.trustedCA.key=bundle.pem",
    ))?;
    let manifests = docs(&rendered)?;
    let pod = &the_deployment(&manifests)?["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let args = args_of(container)?;
    assert!(
        args.contains(&"--plugin-ca-file=/etc/orchard/plugin-ca/bundle.pem"),
        "{args:?}"
    );
    let mounted = container["volumeMounts"]
        .as_array()
        .context("mounts")?
        .iter()
        .any(|m| m["name"] == "plugin-ca" && m["mountPath"] == "/etc/orchard/plugin-ca");
    assert!(mounted, "{container}");
    let volume = pod["volumes"]
        .as_array()
        .context("volumes")?
        .iter()
        .find(|v| v["name"] == "plugin-ca")
        .context("no plugin-ca volume")?;
    assert_eq!(volume["configMap"]["name"], "corp-ca");
    server_dry_run(&env, &manifests)?;

    // Without the value: no flag, no volume.
    let plain = run(&mut helm_template(&env, "replicas=2"))?;
    assert!(!plain.contains("plugin-ca"), "{plain}");
    Ok(())
}

#[tokio::test]
async fn the_helm_chart_turns_traces_on_with_the_standard_otlp_variables_only_when_asked()
-> anyhow::Result<()> {
    let env = TestEnv::load()?;
    let rendered = run(&mut helm_template(
        &env,
        "traces.otlpEndpoint=http://otel-collector.observability:4318,traces.sampleRatio=0.25",
    ))?;
    let manifests = docs(&rendered)?;
    let container = &the_deployment(&manifests)?["spec"]["template"]["spec"]["containers"][0];
    let value = |name: &str| {
        container["env"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e["name"] == name)
            .map(|e| e["value"].clone())
    };
    assert_eq!(
        value("OTEL_EXPORTER_OTLP_ENDPOINT"),
        Some(Value::from("http://otel-collector.observability:4318"))
    );
    assert_eq!(value("OTEL_SERVICE_NAME"), Some(Value::from("orchard")));
    assert_eq!(
        value("ORCHARD_TRACE_SAMPLE_RATIO"),
        Some(Value::from("0.25"))
    );
    server_dry_run(&env, &manifests)?;

    let plain = run(&mut helm_template(&env, "replicas=2"))?;
    assert!(!plain.contains("OTEL_"), "no traces by default: {plain}");
    Ok(())
}

#[tokio::test]
async fn the_helm_chart_serves_the_conversion_webhook_and_grants_the_storage_migration_only_when_asked()
-> anyhow::Result<()> {
    let env = TestEnv::load()?;
    let rendered = run(&mut helm_template(
        &env,
        "conversionWebhook.enabled=true,conversionWebhook.certSecret=orchard-webhook-tls,pluginObjects.installCRDs=true",
    ))?;
    let manifests = docs(&rendered)?;
    let pod = &the_deployment(&manifests)?["spec"]["template"]["spec"];
    let args = args_of(&pod["containers"][0])?;
    for flag in [
        "--conversion-webhook-addr=0.0.0.0:9443",
        "--conversion-webhook-service=orchard-system/orchard-webhook:443",
        "--conversion-webhook-cert-dir=/etc/orchard/webhook-cert",
    ] {
        assert!(args.contains(&flag), "{flag} missing: {args:?}");
    }
    let secret = pod["volumes"]
        .as_array()
        .context("volumes")?
        .iter()
        .find(|v| v["name"] == "webhook-cert")
        .context("no webhook-cert volume")?;
    assert_eq!(secret["secret"]["secretName"], "orchard-webhook-tls");
    assert!(
        manifests
            .iter()
            .any(|m| m["kind"] == "Service" && m["metadata"]["name"] == "orchard-webhook"),
        "no webhook Service: {rendered}"
    );
    // The storage migration replaces each object (update on the kinds) and then sets the
    // CRD's storedVersions (patch on customresourcedefinitions/status).
    let grants = |rules: &Value, resource: &str, verb: &str| {
        rules.as_array().into_iter().flatten().any(|r| {
            r["resources"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|x| x == resource)
                && r["verbs"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|v| v == verb)
        })
    };
    let rules = cluster_role_rules(&manifests)?;
    for resource in ["dnszones", "dnsrecords"] {
        assert!(
            grants(&rules, resource, "update"),
            "no update on {resource}: {rules:#}"
        );
    }
    assert!(
        grants(&rules, "customresourcedefinitions/status", "patch"),
        "{rules:#}"
    );
    server_dry_run(&env, &manifests)?;

    // Without the webhook: no flag, no Service, and the kinds are never updated whole.
    let plain = docs(&run(&mut helm_template(
        &env,
        "pluginObjects.installCRDs=true",
    ))?)?;
    let rules = cluster_role_rules(&plain)?;
    assert!(!grants(&rules, "dnszones", "update"), "{rules:#}");
    assert!(
        !grants(&rules, "customresourcedefinitions/status", "patch"),
        "{rules:#}"
    );
    let args = args_of(&the_deployment(&plain)?["spec"]["template"]["spec"]["containers"][0])?;
    assert!(
        !args.iter().any(|a| a.starts_with("--conversion-webhook")),
        "{args:?}"
    );
    // A webhook without its Secret is refused at render time, naming the value.
    let refused = helm_template(&env, "conversionWebhook.enabled=true").output()?;
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("conversionWebhook.certSecret"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    Ok(())
}

/// The one Deployment among rendered manifests.
fn the_deployment(manifests: &[Value]) -> anyhow::Result<&Value> {
    manifests
        .iter()
        .find(|m| m["kind"] == "Deployment")
        .context("no Deployment rendered")
}

/// A container's arguments.
fn args_of(container: &Value) -> anyhow::Result<Vec<&str>> {
    Ok(container["args"]
        .as_array()
        .context("the container has no args")?
        .iter()
        .filter_map(Value::as_str)
        .collect())
}

/// `helm template` of the chart as release `orchard` in `orchard-system`, with `sets`.
fn helm_template(env: &TestEnv, sets: &str) -> Command {
    let mut cmd = Command::new(helm());
    cmd.args([
        "template",
        "orchard",
        "-n",
        "orchard-system",
        "--kube-version",
        &env_version(env),
        "--set",
        sets,
    ])
    .arg(repo().join("deploy/helm/orchard"));
    cmd
}

fn env_version(env: &TestEnv) -> String {
    std::fs::read_to_string(&env.env_file)
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| {
                l.strip_prefix("ORCHARD_K8S_VERSION=")
                    .map(|v| v.trim_matches('"').to_owned())
            })
        })
        .unwrap_or_else(|| "v1.34.4".to_owned())
}

#[tokio::test]
async fn the_kustomize_base_is_accepted_by_the_apiserver() -> anyhow::Result<()> {
    let env = TestEnv::load()?;
    let manifests = kustomize(&env)?;
    server_dry_run(&env, &manifests)?;
    Ok(())
}

#[test]
fn the_shipped_crds_are_what_the_plugins_describe() -> anyhow::Result<()> {
    for (crate_name, file) in [
        ("pdns-zone", "dnszones.pdns.orchard.dev.yaml"),
        ("pdns-record", "dnsrecords.pdns.orchard.dev.yaml"),
    ] {
        let described = run(Command::new(orchard_bin())
            .arg("crd")
            .arg(plugin(crate_name)))?;
        for dir in ["deploy/kustomize/crds", "deploy/helm/orchard/crds"] {
            let shipped = std::fs::read_to_string(repo().join(dir).join(file))?;
            assert_eq!(
                shipped, described,
                "{dir}/{file} is stale: regenerate it with `orchard crd`"
            );
        }
    }
    let plugin_crd = run(Command::new(orchard_bin()).args(["plugin", "crd"]))?;
    for dir in ["deploy/kustomize/crds", "deploy/helm/orchard/crds"] {
        let shipped = std::fs::read_to_string(repo().join(dir).join("plugins.orchard.dev.yaml"))?;
        assert_eq!(
            shipped, plugin_crd,
            "{dir}/plugins.orchard.dev.yaml is stale: regenerate it with `orchard plugin crd`"
        );
    }
    Ok(())
}

#[test]
fn the_image_builds_from_scratch_and_runs_orchard_from_its_own_root_filesystem()
-> anyhow::Result<()> {
    let work = tempfile_dir()?;
    let context = work.join("context");
    run(Command::new("bash")
        .arg(repo().join("deploy/image/rootfs.sh"))
        .arg(orchard_bin())
        .arg(plugin("pdns-zone").parent().context("plugin dir")?)
        .arg(context.join("rootfs")))?;
    let tag = format!("localhost/orchard-e2e:{}", orchard_e2e::unique_suffix());
    let buildah = |args: &[&str]| {
        run(Command::new("buildah")
            .args(["--storage-driver", "vfs"])
            .args(args))
    };
    buildah(&[
        "bud",
        "-q",
        "-t",
        &tag,
        "-f",
        &repo().join("deploy/Dockerfile").display().to_string(),
        &context.display().to_string(),
    ])?;
    let config: Value = serde_json::from_str(&buildah(&["inspect", "--type", "image", &tag])?)?;
    assert_eq!(config["OCIv1"]["config"]["User"], "65532:65532");
    // No container runtime works in this sandbox: run the binary from the image's own root
    // filesystem instead, which proves the image holds everything it needs.
    let container = buildah(&["from", "-q", &tag])?.trim().to_owned();
    let mount = buildah(&["mount", &container])?.trim().to_owned();
    let version = run(Command::new("chroot").args([
        "--userspec=65532:65532",
        &mount,
        "/usr/local/bin/orchard",
        "--version",
    ]));
    let _ = buildah(&["rm", &container]);
    let _ = buildah(&["rmi", &tag]);
    let _ = std::fs::remove_dir_all(&work);
    assert!(
        version?.starts_with("orchard "),
        "unexpected --version output"
    );
    Ok(())
}

fn tempfile_dir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("orchard-image-{}", orchard_e2e::unique_suffix()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
