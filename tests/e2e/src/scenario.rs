//! A scenario of the PowerDNS suites: its own namespace, a credentials Secret, the `orchard`
//! host running against it as a separate process, and helpers that read the real state of
//! the apiserver and of PowerDNS.

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::{TestEnv, poll_until, unique_suffix};

/// How long a scenario waits for the host to converge.
pub const CONVERGE: Duration = Duration::from_secs(60);

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Cargo's target directory.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"))
}

/// A plugin component built by `make plugins`.
pub fn plugin(crate_name: &str) -> PathBuf {
    target_dir()
        .join("wasm32-wasip2/plugin")
        .join(format!("{}.wasm", crate_name.replace('-', "_")))
}

/// The `orchard` binary under test (`ORCHARD_BIN`, else `target/debug/orchard`).
pub fn orchard_bin() -> PathBuf {
    std::env::var_os("ORCHARD_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("debug/orchard"))
}

/// The `orchard run` process of a scenario; killed when dropped.
pub struct Host {
    child: Child,
    /// Its log file.
    pub log: PathBuf,
}

impl Host {
    /// Waits for the process to exit by itself (e.g. at a fail point).
    pub async fn wait_exit(&mut self, timeout: Duration) -> anyhow::Result<ExitStatus> {
        let child = &mut self.child;
        poll_until(timeout, "the host to exit", || {
            let status = child.try_wait();
            async move { Ok(status?) }
        })
        .await
    }

    /// SIGKILL: no graceful shutdown, no lease release.
    pub fn kill_hard(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Whether it is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// DnsZone / DnsRecord API resources.
pub fn zone_resource() -> ApiResource {
    ApiResource {
        group: "pdns.orchard.dev".into(),
        version: "v1alpha1".into(),
        api_version: "pdns.orchard.dev/v1alpha1".into(),
        kind: "DnsZone".into(),
        plural: "dnszones".into(),
    }
}

/// See [`zone_resource`].
pub fn record_resource() -> ApiResource {
    ApiResource {
        kind: "DnsRecord".into(),
        plural: "dnsrecords".into(),
        ..zone_resource()
    }
}

/// One scenario's world.
pub struct Scenario {
    pub env: TestEnv,
    pub client: Client,
    pub ns: String,
    /// A suffix unique to this scenario, for names in PowerDNS.
    pub id: String,
    pub zones: Api<DynamicObject>,
    pub records: Api<DynamicObject>,
    pub pdns: reqwest::Client,
    hosts_started: u32,
}

impl Scenario {
    /// A fresh namespace `e2e-<name>-<suffix>` holding the Secret `pdns`.
    pub async fn new(name: &str) -> anyhow::Result<Self> {
        let env = TestEnv::load()?;
        let client = env.admin_client().await?;
        let id = unique_suffix();
        let ns = format!("e2e-{name}-{id}").replace('_', "-");
        let namespaces: Api<Namespace> = Api::all(client.clone());
        namespaces
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": ns}}))?,
            )
            .await
            .with_context(|| format!("creating namespace {ns}"))?;
        let s = Self {
            zones: Api::namespaced_with(client.clone(), &ns, &zone_resource()),
            records: Api::namespaced_with(client.clone(), &ns, &record_resource()),
            pdns: env.pdns()?,
            client,
            ns,
            id,
            env,
            hosts_started: 0,
        };
        s.create_secret("pdns").await?;
        Ok(s)
    }

    /// Creates a credentials Secret for PowerDNS named `name`.
    pub async fn create_secret(&self, name: &str) -> anyhow::Result<()> {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &self.ns);
        let secret = json!({
            "metadata": {"name": name},
            "stringData": {"url": self.env.pdns_api_url, "apiKey": self.env.pdns_api_key}
        });
        secrets
            .create(&PostParams::default(), &serde_json::from_value(secret)?)
            .await?;
        Ok(())
    }

    /// Starts `orchard run` for the PowerDNS plugins, scoped to this namespace, as the admin.
    pub fn start_host(&mut self, extra_env: &[(&str, &str)]) -> anyhow::Result<Host> {
        let kubeconfig = self.env.admin_kubeconfig.display().to_string();
        let mut env = vec![("KUBECONFIG", kubeconfig.as_str())];
        env.extend_from_slice(extra_env);
        self.spawn_host(&env, true)
    }

    /// Starts `orchard run` like [`Scenario::start_host`] but with no kubeconfig at all: the
    /// host finds its identity as in a pod (`extra_env` sets `KUBERNETES_SERVICE_HOST/PORT`;
    /// the token and CA are in the service-account directory).
    pub fn start_host_in_cluster(&mut self, extra_env: &[(&str, &str)]) -> anyhow::Result<Host> {
        self.spawn_host(extra_env, false)
    }

    fn spawn_host(
        &mut self,
        extra_env: &[(&str, &str)],
        install_crds: bool,
    ) -> anyhow::Result<Host> {
        self.hosts_started += 1;
        let log = self
            .env
            .logs
            .join(format!("host-{}-{}.log", self.ns, self.hosts_started));
        let out = std::fs::File::create(&log)?;
        let bin = orchard_bin();
        if !bin.is_file() {
            bail!(
                "{} is missing: build it first (`cargo build -p orchard`)",
                bin.display()
            );
        }
        let mut cmd = Command::new(&bin);
        cmd.arg("run")
            .arg("--plugin")
            .arg(plugin("pdns-zone"))
            .arg("--plugin")
            .arg(plugin("pdns-record"))
            .args([
                "--allow-host",
                &self.env.pdns_api_url,
                "--namespace",
                &self.ns,
            ])
            .args(install_crds.then_some("--install-crds"))
            .env_remove("KUBECONFIG")
            .env("HOME", target_dir().join("orchard-home"))
            .env("ORCHARD_CACHE_DIR", target_dir().join("orchard-cache"))
            .env("RUST_LOG", "info,orchard=debug")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        Ok(Host { child, log })
    }

    /// Server-side applies a manifest (YAML) into this namespace.
    pub async fn apply(&self, yaml: &str) -> anyhow::Result<DynamicObject> {
        let value: Value = serde_yaml::from_str(yaml)?;
        let api = if value["kind"] == "DnsRecord" {
            &self.records
        } else {
            &self.zones
        };
        let name = value["metadata"]["name"]
            .as_str()
            .context("manifest without a name")?
            .to_owned();
        // Until the host has installed the CRDs, the kind is not served (404): retry then.
        let deadline = tokio::time::Instant::now() + CONVERGE;
        loop {
            match api
                .patch(
                    &name,
                    &PatchParams::apply("e2e").force(),
                    &Patch::Apply(&value),
                )
                .await
            {
                Err(kube::Error::Api(e))
                    if e.code == 404 && tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                other => return Ok(other?),
            }
        }
    }

    /// Deletes an object (without waiting for it to go).
    pub async fn delete(&self, api: &Api<DynamicObject>, name: &str) -> anyhow::Result<()> {
        api.delete(name, &DeleteParams::default()).await?;
        Ok(())
    }

    /// Waits until condition `type_` of the object has `status` (and `reason`, if given).
    pub async fn wait_condition(
        &self,
        api: &Api<DynamicObject>,
        name: &str,
        type_: &str,
        status: &str,
        reason: Option<&str>,
    ) -> anyhow::Result<DynamicObject> {
        let what = format!("{name}: {type_}={status} {}", reason.unwrap_or(""));
        poll_until(CONVERGE, &what, || async {
            let obj = api.get(name).await?;
            let generation = obj.metadata.generation;
            let ok = obj.data["status"]["conditions"]
                .as_array()
                .is_some_and(|c| {
                    c.iter().any(|c| {
                        c["type"] == type_
                            && c["status"] == status
                            && reason.is_none_or(|r| c["reason"] == r)
                            && c["observedGeneration"].as_i64() == generation
                    })
                });
            Ok(ok.then_some(obj))
        })
        .await
    }

    /// Waits until the object is Available=True and Progressing=False at its generation.
    pub async fn wait_ready(
        &self,
        api: &Api<DynamicObject>,
        name: &str,
    ) -> anyhow::Result<DynamicObject> {
        self.wait_condition(api, name, "Progressing", "False", Some("Success"))
            .await?;
        self.wait_condition(api, name, "Available", "True", None)
            .await
    }

    /// Waits until the object no longer exists.
    pub async fn wait_gone(&self, api: &Api<DynamicObject>, name: &str) -> anyhow::Result<()> {
        poll_until(CONVERGE, &format!("{name} to be gone"), || async {
            Ok(api.get_opt(name).await?.is_none().then_some(()))
        })
        .await
    }

    /// A zone name unique to this scenario: `<label>.<id>.test.`.
    pub fn zone_name(&self, label: &str) -> String {
        format!("{label}.{}.test.", self.id)
    }

    fn pdns_zones_url(&self) -> String {
        format!("{}/zones", self.env.pdns_server_url())
    }

    /// The zone as PowerDNS has it (with record sets), `None` when it does not exist.
    pub async fn pdns_zone(&self, name: &str) -> anyhow::Result<Option<Value>> {
        let response = self
            .pdns
            .get(format!("{}/{name}", self.pdns_zones_url()))
            .send()
            .await?;
        match response.status().as_u16() {
            404 | 422 => Ok(None),
            200 => Ok(Some(response.json().await?)),
            other => bail!(
                "PowerDNS GET zone {name}: HTTP {other}: {}",
                response.text().await?
            ),
        }
    }

    /// Creates a zone directly in PowerDNS (as someone outside Orchard would).
    pub async fn pdns_create_zone(&self, name: &str, account: &str) -> anyhow::Result<()> {
        let response = self
            .pdns
            .post(self.pdns_zones_url())
            .json(&json!({"name": name, "kind": "Native", "nameservers": [], "account": account}))
            .send()
            .await?;
        if !response.status().is_success() {
            bail!(
                "PowerDNS create zone {name}: HTTP {}: {}",
                response.status(),
                response.text().await?
            );
        }
        Ok(())
    }

    /// Deletes a zone directly in PowerDNS. A 5xx (its sqlite backend busy with another
    /// suite's write) is retried for a few seconds; so is any other failure, which is then
    /// reported with its status.
    pub async fn pdns_delete_zone(&self, name: &str) -> anyhow::Result<()> {
        let url = format!("{}/{name}", self.pdns_zones_url());
        poll_until(
            Duration::from_secs(10),
            &format!("PowerDNS to delete zone {name}"),
            || async {
                let response = self.pdns.delete(&url).send().await?;
                let status = response.status();
                if status.is_server_error() {
                    return Ok(None);
                }
                if !status.is_success() {
                    bail!("PowerDNS delete zone {name}: HTTP {status}");
                }
                Ok(Some(()))
            },
        )
        .await
    }

    /// The record set `name`/`type_` of `zone` in PowerDNS.
    pub async fn pdns_rrset(
        &self,
        zone: &str,
        name: &str,
        type_: &str,
    ) -> anyhow::Result<Option<Value>> {
        let Some(z) = self.pdns_zone(zone).await? else {
            return Ok(None);
        };
        Ok(z["rrsets"].as_array().and_then(|sets| {
            sets.iter()
                .find(|r| r["name"] == name && r["type"] == type_)
                .cloned()
        }))
    }

    /// The Events recorded for an object, as `reason` strings.
    pub async fn event_reasons(&self, name: &str) -> anyhow::Result<Vec<String>> {
        let events: Api<k8s_openapi::api::events::v1::Event> =
            Api::namespaced(self.client.clone(), &self.ns);
        Ok(events
            .list(&Default::default())
            .await?
            .items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
            .filter_map(|e| e.reason)
            .collect())
    }

    /// The Progressing condition's message.
    pub fn progressing_message(obj: &DynamicObject) -> String {
        obj.data["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Progressing"))
            .and_then(|c| c["message"].as_str())
            .unwrap_or_default()
            .to_owned()
    }

    /// The object's finalizers.
    pub async fn finalizers(
        &self,
        api: &Api<DynamicObject>,
        name: &str,
    ) -> anyhow::Result<Vec<String>> {
        Ok(api.get(name).await?.finalizers().to_vec())
    }
}
