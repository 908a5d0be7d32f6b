//! The deploy manifests' RBAC is sufficient and minimal: the host runs with the
//! `ServiceAccount` of `deploy/kustomize`, its token from the `TokenRequest` API and the in-cluster
//! configuration a pod sees, and the PowerDNS create / update / delete scenarios pass. With
//! one rule removed, the host reports "forbidden" naming the verb and resource, and keeps
//! running.
//!
//! One test function: the service-account directory is a fixed path, shared by both halves.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail, ensure};
use orchard_e2e::harness::{CONVERGE, progressing_message};
use orchard_e2e::pdns::{self, RECORD, ZONE};
use orchard_e2e::poll_until;
use serde_json::{Value, json};

const SA_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
const NS: &str = "orchard-system";

fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> anyhow::Result<String> {
    use std::io::Write;
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .context("stdin")?
            .write_all(input.as_bytes())?;
    }
    drop(child.stdin.take());
    let out = child.wait_with_output()?;
    ensure!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?)
}

/// The manifests of `deploy/kustomize`, rendered by kubectl.
fn rendered(kubeconfig: &Path) -> anyhow::Result<Vec<Value>> {
    let dir = orchard_e2e::paths::workspace().join("deploy/kustomize");
    let yaml = kubectl(kubeconfig, &["kustomize", &dir.display().to_string()], None)?;
    yaml.split("\n---\n")
        .map(|doc| Ok(serde_yaml::from_str::<Value>(doc)?))
        .collect()
}

/// Installs the CRDs and an identity `sa` bound to the manifests' roles, with `rules` as the
/// `ClusterRole`; returns its token from the `TokenRequest` API.
fn install_identity(
    kubeconfig: &Path,
    manifests: &[Value],
    sa: &str,
    rules: &Value,
) -> anyhow::Result<String> {
    let mut docs = vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})];
    for m in manifests {
        let kind = m["kind"].as_str().unwrap_or_default();
        let mut m = m.clone();
        match kind {
            "CustomResourceDefinition" => {}
            "ServiceAccount" | "Role" | "RoleBinding" | "ClusterRoleBinding" | "ClusterRole" => {
                m["metadata"]["name"] = json!(sa);
                if kind == "ClusterRole" {
                    m["rules"] = rules.clone();
                }
                if kind.ends_with("Binding") {
                    m["roleRef"]["name"] = json!(sa);
                    m["subjects"][0]["name"] = json!(sa);
                }
            }
            _ => continue,
        }
        docs.push(m);
    }
    let list = json!({"apiVersion": "v1", "kind": "List", "items": docs});
    kubectl(
        kubeconfig,
        &["apply", "--server-side", "--force-conflicts", "-f", "-"],
        Some(&list.to_string()),
    )?;
    let token = kubectl(
        kubeconfig,
        &["create", "token", sa, "-n", NS, "--duration", "1h"],
        None,
    )?;
    Ok(token.trim().to_owned())
}

/// Removes the service-account directory this test wrote, when dropped.
struct Unmount;

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(SA_DIR);
    }
}

/// Writes what the kubelet mounts into a pod.
fn mount_service_account(token: &str, ca: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(SA_DIR)?;
    std::fs::write(Path::new(SA_DIR).join("token"), token)?;
    std::fs::copy(ca, Path::new(SA_DIR).join("ca.crt"))?;
    std::fs::write(Path::new(SA_DIR).join("namespace"), NS)?;
    Ok(())
}

fn zone_yaml(name: &str, zone: &str, extra: &str) -> String {
    format!(
        "apiVersion: pdns.orchard.dev/v1alpha1\nkind: DnsZone\nmetadata: {{name: {name}}}\nspec:\n  credentialsRef: {{secretName: pdns}}\n  resource: {{name: \"{zone}\"{extra}}}\n"
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn the_deploy_rbac_is_sufficient_and_a_missing_rule_is_reported_as_forbidden()
-> anyhow::Result<()> {
    let (mut s, pdns) = pdns::harness("rbac").await?;
    if Path::new(SA_DIR).join("token").exists()
        && std::env::var_os("KUBERNETES_SERVICE_HOST").is_some()
    {
        bail!("refusing to overwrite the service account of the pod this test runs in");
    }
    let admin = s.env.admin_kubeconfig.clone();
    let manifests = rendered(&admin)?;
    let role = manifests
        .iter()
        .find(|m| m["kind"] == "ClusterRole")
        .context("no ClusterRole in deploy/kustomize")?;
    let port = s
        .env
        .apiserver_url
        .rsplit(':')
        .next()
        .context("apiserver port")?
        .trim_end_matches('/')
        .to_owned();
    let lease = format!("orchard-{}", s.id);
    let in_pod = [
        ("KUBERNETES_SERVICE_HOST", "127.0.0.1"),
        ("KUBERNETES_SERVICE_PORT", port.as_str()),
        ("POD_NAMESPACE", NS),
        ("ORCHARD_LEADER_ELECT", "true"),
        ("ORCHARD_LEASE_NAME", lease.as_str()),
    ];
    let ca = s.env.dir.join("pki/ca.crt");
    let _unmount = Unmount;

    // 1. The manifests' identity, exactly as a pod sees it.
    let token = install_identity(&admin, &manifests, "orchard-e2e", &role["rules"])?;
    mount_service_account(&token, &ca)?;
    let host = s.start_host_in_cluster(&in_pod)?;
    let zone = pdns::zone_name(&s, "rbac");
    s.apply(&zone_yaml("z", &zone, "")).await?;
    s.wait_ready(ZONE, "z")
        .await
        .with_context(|| format!("host log: {}", host.log.display()))?;
    assert!(pdns.zone(&zone).await?.is_some());
    s.apply(&zone_yaml("z", &zone, ", account: rbac")).await?;
    s.wait_ready(ZONE, "z").await?;
    assert_eq!(pdns.zone(&zone).await?.context("zone")?["account"], "rbac");
    s.apply("apiVersion: pdns.orchard.dev/v1alpha1\nkind: DnsRecord\nmetadata: {name: www}\nspec:\n  credentialsRef: {secretName: pdns}\n  resource: {zoneRef: z, name: www, type: A, records: [192.0.2.7]}\n")
    .await?;
    s.wait_ready(RECORD, "www").await?;
    s.delete(RECORD, "www").await?;
    s.delete(ZONE, "z").await?;
    s.wait_gone(ZONE, "z").await?;
    assert!(pdns.zone(&zone).await?.is_none());
    drop(host);

    // 2. Without `patch` on Secrets (needed for the deletion guard on the credentials).
    let mut rules = role["rules"].clone();
    for rule in rules.as_array_mut().context("rules")? {
        if rule["resources"] == json!(["secrets"]) {
            rule["verbs"] = json!(["get", "list", "watch"]);
        }
    }
    let token = install_identity(&admin, &manifests, "orchard-e2e-restricted", &rules)?;
    mount_service_account(&token, &ca)?;
    let mut host = s.start_host_in_cluster(&in_pod)?;
    // A Secret nobody guards yet: the guard finalizer must be added, which needs the patch.
    pdns::create_secret(&s, "pdns-fresh").await?;
    let zone = pdns::zone_name(&s, "forbidden");
    s.apply(&zone_yaml("f", &zone, "").replace("secretName: pdns}", "secretName: pdns-fresh}"))
        .await?;
    let obj = s
        .wait_condition(ZONE, "f", "Progressing", "True", Some("TransientError"))
        .await?;
    let message = progressing_message(&obj);
    assert!(
        message.contains("forbidden") && message.contains("patch") && message.contains("secrets"),
        "{message}"
    );
    assert!(
        pdns.zone(&zone).await?.is_none(),
        "created without its guard in place"
    );
    // Still running (no crash loop), and still retrying with backoff.
    poll_until(CONVERGE, "a second forbidden attempt", || async {
        let log = std::fs::read_to_string(&host.log)?;
        Ok((log.matches("forbidden").count() >= 2).then_some(()))
    })
    .await?;
    assert!(host.is_running(), "the host exited: {}", host.log.display());
    Ok(())
}
