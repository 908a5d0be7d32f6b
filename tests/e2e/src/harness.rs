//! The scenario world of every suite: its own namespace, Secrets, the `orchard run` host
//! serving a chosen set of plugins (any language) as a separate process, and helpers that read
//! the apiserver. The suites of a plugin add helpers that read their external system
//! ([`crate::pdns`], [`crate::rabbitmq`]).

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::paths::{orchard_bin, target_dir};
use crate::{TestEnv, poll_until, unique_suffix};

/// How long a scenario waits for the host to converge.
pub const CONVERGE: Duration = Duration::from_mins(1);

/// What one `orchard run` serves: plugin components, the kinds they manage, and the outbound
/// destinations they may reach.
#[derive(Debug, Clone)]
pub struct HostSpec {
    /// Component files (`.wasm`), e.g. from [`crate::paths::plugin`].
    pub plugins: Vec<PathBuf>,
    /// The kinds those plugins serve (their API resources).
    pub kinds: Vec<ApiResource>,
    /// `--allow-host` values.
    pub allow_hosts: Vec<String>,
}

/// An `orchard run` process; killed when dropped.
pub struct Host {
    child: Child,
    /// Its log file.
    pub log: PathBuf,
}

impl Host {
    /// Whether it is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits for the process to exit by itself (e.g. at a fail point).
    pub async fn wait_exit(&mut self, timeout: Duration) -> anyhow::Result<ExitStatus> {
        let child = &mut self.child;
        poll_until(timeout, "the host to exit", || {
            let status = child.try_wait();
            async move { Ok(status?) }
        })
        .await
    }

    /// SIGTERM, as a pod's stop does: the host drains and releases its Leases, then exits.
    pub fn terminate(&mut self) -> anyhow::Result<()> {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .context("running kill -TERM")?;
        anyhow::ensure!(status.success(), "kill -TERM {}: {status}", self.child.id());
        Ok(())
    }

    /// SIGKILL: no graceful shutdown, no lease release.
    pub fn kill_hard(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// An error when the host has exited (a fenced or crashed replica), naming the way it
    /// ended and its log's end.
    pub fn ensure_running(&mut self) -> anyhow::Result<()> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => bail!("the host ended ({status}): {}", self.report()),
            Err(e) => bail!("the host's state: {e}"),
        }
    }

    /// For a failed test: the log's path, its warnings and errors, and its last lines.
    pub fn report(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let warnings: Vec<&str> = lines
            .iter()
            .copied()
            .filter(|l| l.contains(" WARN ") || l.contains(" ERROR ") || l.starts_with("Error"))
            .collect();
        let tail = |l: &[&str], n: usize| l[l.len().saturating_sub(n)..].join("\n");
        format!(
            "{}\n-- its last warnings and errors:\n{}\n-- its last lines:\n{}",
            self.log.display(),
            tail(&warnings, 15),
            tail(&lines, 10)
        )
    }
}

/// Which namespaces a host serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// The harness's namespace only (every host of the suites but one).
    Namespace,
    /// Every namespace.
    Cluster,
}

/// How a host finds the apiserver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Identity {
    /// The admin kubeconfig, installing the CRDs itself.
    Admin,
    /// No kubeconfig: as in a pod (the caller's env names the service host and port), CRDs
    /// installed beforehand.
    InCluster,
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One scenario's world.
pub struct Harness {
    pub env: TestEnv,
    pub client: Client,
    pub ns: String,
    /// A suffix unique to this scenario, for names in external systems.
    pub id: String,
    host: HostSpec,
    hosts_started: u32,
}

/// A kind of group `group`, version `v1alpha1` and the plural `<kind lowercased>s`.
pub fn kind(group: &str, kind: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: "v1alpha1".into(),
        api_version: format!("{group}/v1alpha1"),
        kind: kind.into(),
        plural: format!("{}s", kind.to_ascii_lowercase()),
    }
}

impl Harness {
    /// A fresh namespace `e2e-<name>-<suffix>` for a host serving `host`.
    pub async fn new(name: &str, host: HostSpec) -> anyhow::Result<Self> {
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
        Ok(Self {
            env,
            client,
            ns,
            id,
            host,
            hosts_started: 0,
        })
    }

    /// Serves these plugin files from the next host this harness starts on: an upgrade by
    /// restart, as a Deployment's rollout to a new image does.
    pub fn set_plugins(&mut self, plugins: Vec<PathBuf>) {
        self.host.plugins = plugins;
    }

    /// The plugins a started host loads (`--plugin`), one kind each.
    pub fn plugins(&self) -> &[PathBuf] {
        &self.host.plugins
    }

    /// The API of one of the served kinds in this namespace.
    pub fn api(&self, kind: &str) -> Api<DynamicObject> {
        let resource = self
            .host
            .kinds
            .iter()
            .find(|r| r.kind == kind)
            .unwrap_or_else(|| panic!("kind {kind} is not served by this harness"));
        Api::namespaced_with(self.client.clone(), &self.ns, resource)
    }

    /// Secrets of this namespace.
    pub fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    /// Creates a Secret with these string entries.
    pub async fn create_secret(&self, name: &str, data: &[(&str, &str)]) -> anyhow::Result<()> {
        let data: serde_json::Map<String, Value> = data
            .iter()
            .map(|(k, v)| ((*k).to_owned(), json!(v)))
            .collect();
        let secret = json!({"metadata": {"name": name}, "stringData": data});
        self.secrets()
            .create(&PostParams::default(), &serde_json::from_value(secret)?)
            .await
            .with_context(|| format!("creating Secret {name}"))?;
        Ok(())
    }

    /// Starts `orchard run` for this harness's plugins, scoped to this namespace, as the
    /// admin; `extra_env` adds or overrides its environment (flags by their `ORCHARD_*` names).
    pub fn start_host(&mut self, extra_env: &[(&str, &str)]) -> anyhow::Result<Host> {
        self.launch(Identity::Admin, Scope::Namespace, extra_env)
    }

    /// Starts `orchard run` like [`Harness::start_host`] but for every namespace: the one
    /// scenario of a cluster-wide host beside a test's host (`tests/presence.rs`). Were it to
    /// serve, it would reconcile every suite's objects: its suite MUST be a test binary of its
    /// own, with one test (cargo runs test binaries one after another).
    pub fn start_unscoped_host(&mut self, extra_env: &[(&str, &str)]) -> anyhow::Result<Host> {
        self.launch(Identity::Admin, Scope::Cluster, extra_env)
    }

    /// Starts `orchard run` like [`Harness::start_host`] but with no kubeconfig at all: the
    /// host finds its identity as in a pod (`extra_env` sets `KUBERNETES_SERVICE_HOST/PORT`;
    /// the token and CA are in the service-account directory), and does not install CRDs.
    pub fn start_host_in_cluster(&mut self, extra_env: &[(&str, &str)]) -> anyhow::Result<Host> {
        self.launch(Identity::InCluster, Scope::Namespace, extra_env)
    }

    /// The one launcher of `orchard run` in the suites. Each harness's hosts are one host to
    /// the others (`--instance` is the namespace, unless `extra_env` says otherwise): a host
    /// restarted by a scenario takes its earlier life's presence over at once.
    fn launch(
        &mut self,
        identity: Identity,
        scope: Scope,
        extra_env: &[(&str, &str)],
    ) -> anyhow::Result<Host> {
        warm_cache(&self.host.plugins)?;
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
        cmd.arg("run");
        for plugin in &self.host.plugins {
            if !plugin.is_file() {
                bail!(
                    "plugin {} is missing: build the plugins first (`make plugins`)",
                    plugin.display()
                );
            }
            cmd.arg("--plugin").arg(plugin);
        }
        for allowed in &self.host.allow_hosts {
            cmd.args(["--allow-host", allowed]);
        }
        if scope == Scope::Namespace {
            cmd.args(["--namespace", &self.ns]);
        }
        match identity {
            Identity::Admin => {
                cmd.arg("--install-crds")
                    .env("KUBECONFIG", &self.env.admin_kubeconfig);
            }
            Identity::InCluster => {
                cmd.env_remove("KUBECONFIG")
                    .env("HOME", target_dir().join("orchard-home"));
            }
        }
        cmd.env("ORCHARD_INSTANCE", &self.ns)
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

    /// `orchard explain ARGS… -n <this namespace>` as a user runs it: the admin kubeconfig,
    /// no `--admin` (the admin server is found as the command finds it); its stdout.
    pub fn explain(&self, args: &[&str]) -> anyhow::Result<String> {
        let out = Command::new(orchard_bin())
            .arg("explain")
            .args(args)
            .args(["-n", &self.ns])
            .env("KUBECONFIG", &self.env.admin_kubeconfig)
            .env_remove("ORCHARD_ADMIN_URL")
            .output()
            .context("running orchard explain")?;
        let stdout = String::from_utf8(out.stdout)?;
        if !out.status.success() {
            bail!(
                "orchard explain {args:?}: {}\n{stdout}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(stdout)
    }

    /// Waits until every served kind is served by the apiserver (a host started with
    /// `--install-crds` installs them; the first run on an apiserver has to wait for it).
    pub async fn wait_kinds(&self) -> anyhow::Result<()> {
        for resource in &self.host.kinds {
            let api = self.api(&resource.kind);
            poll_until(
                CONVERGE,
                &format!("the CRD of {} to be served", resource.kind),
                || async {
                    Ok(api
                        .list(&kube::api::ListParams::default())
                        .await
                        .ok()
                        .map(drop))
                },
            )
            .await
            .with_context(|| self.host_log_hint())?;
        }
        Ok(())
    }

    /// Server-side applies a manifest (YAML) of a served kind into this namespace.
    pub async fn apply(&self, yaml: &str) -> anyhow::Result<DynamicObject> {
        let value: Value = serde_yaml::from_str(yaml)?;
        let kind = value["kind"].as_str().context("manifest without a kind")?;
        let name = value["metadata"]["name"]
            .as_str()
            .context("manifest without a name")?;
        let api = self.api(kind);
        // Until the host has installed the CRDs, the kind is not served (404): retry then.
        let deadline = tokio::time::Instant::now() + CONVERGE;
        loop {
            match api
                .patch(
                    name,
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
    pub async fn delete(&self, kind: &str, name: &str) -> anyhow::Result<()> {
        self.api(kind)
            .delete(name, &DeleteParams::default())
            .await?;
        Ok(())
    }

    /// The object, now.
    pub async fn get(&self, kind: &str, name: &str) -> anyhow::Result<DynamicObject> {
        Ok(self.api(kind).get(name).await?)
    }

    /// Waits until condition `type_` of the object has `status` (and `reason`, if given) at
    /// the object's generation.
    pub async fn wait_condition(
        &self,
        kind: &str,
        name: &str,
        type_: &str,
        status: &str,
        reason: Option<&str>,
    ) -> anyhow::Result<DynamicObject> {
        let api = self.api(kind);
        let what = format!("{kind} {name}: {type_}={status} {}", reason.unwrap_or(""));
        poll_until(CONVERGE, &what, || async {
            let obj = api.get(name).await?;
            Ok(has_condition(&obj, type_, status, reason).then_some(obj))
        })
        .await
    }

    /// Waits until the object is Available=True and Progressing=False (Success).
    pub async fn wait_ready(&self, kind: &str, name: &str) -> anyhow::Result<DynamicObject> {
        let api = self.api(kind);
        poll_until(CONVERGE, &format!("{kind} {name} to be ready"), || async {
            let obj = api.get(name).await?;
            let ready = has_condition(&obj, "Progressing", "False", Some("Success"))
                && has_condition(&obj, "Available", "True", None);
            Ok(ready.then_some(obj))
        })
        .await
        .with_context(|| self.host_log_hint())
    }

    /// Waits until the object no longer exists.
    pub async fn wait_gone(&self, kind: &str, name: &str) -> anyhow::Result<()> {
        let api = self.api(kind);
        poll_until(CONVERGE, &format!("{kind} {name} to be gone"), || async {
            Ok(api.get_opt(name).await?.is_none().then_some(()))
        })
        .await
    }

    /// Waits until an Event with `reason` was recorded for the object.
    pub async fn wait_event(&self, name: &str, reason: &str) -> anyhow::Result<()> {
        poll_until(CONVERGE, &format!("a {reason} event of {name}"), || async {
            Ok(self
                .event_reasons(name)
                .await?
                .iter()
                .any(|r| r == reason)
                .then_some(()))
        })
        .await
    }

    /// The Events recorded for an object, as `reason` strings.
    pub async fn event_reasons(&self, name: &str) -> anyhow::Result<Vec<String>> {
        let events: Api<k8s_openapi::api::events::v1::Event> =
            Api::namespaced(self.client.clone(), &self.ns);
        Ok(events
            .list(&kube::api::ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
            .filter_map(|e| e.reason)
            .collect())
    }

    /// Asserts that the object does not change (no retry, no status write) for `period`:
    /// polls its resourceVersion, which any write would bump.
    pub async fn assert_unchanged(
        &self,
        kind: &str,
        name: &str,
        period: Duration,
    ) -> anyhow::Result<()> {
        let api = self.api(kind);
        let version = api.get(name).await?.metadata.resource_version;
        let until = tokio::time::Instant::now() + period;
        while tokio::time::Instant::now() < until {
            let now = api.get(name).await?.metadata.resource_version;
            anyhow::ensure!(
                now == version,
                "{kind} {name} changed: a terminal failure was retried"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Ok(())
    }

    /// The object's finalizers.
    pub async fn finalizers(&self, kind: &str, name: &str) -> anyhow::Result<Vec<String>> {
        Ok(self.get(kind, name).await?.finalizers().to_vec())
    }

    fn host_log_hint(&self) -> String {
        format!(
            "host logs: {}/host-{}-*.log",
            self.env.logs.display(),
            self.ns
        )
    }
}

/// Compiles each plugin once per test process into the hosts' compiled-component cache, with
/// `orchard describe`, before any host loads it: compiling a Python or JavaScript component
/// takes tens of seconds on a cold cache, which must not eat into a scenario's deadlines.
/// Concurrent tests wait for each other here.
fn warm_cache(plugins: &[PathBuf]) -> anyhow::Result<()> {
    static WARM: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    let mut warm = WARM
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for plugin in plugins {
        if warm.contains(plugin) {
            continue;
        }
        let out = Command::new(orchard_bin())
            .arg("describe")
            .arg(plugin)
            .env("ORCHARD_CACHE_DIR", target_dir().join("orchard-cache"))
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running orchard describe {}", plugin.display()))?;
        if !out.status.success() {
            bail!(
                "orchard describe {} failed: {}",
                plugin.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        warm.push(plugin.clone());
    }
    Ok(())
}

/// Whether the object has condition `type_` with `status` (and `reason`) at its generation.
pub fn has_condition(obj: &DynamicObject, type_: &str, status: &str, reason: Option<&str>) -> bool {
    let generation = obj.metadata.generation;
    obj.data["status"]["conditions"]
        .as_array()
        .is_some_and(|c| {
            c.iter().any(|c| {
                c["type"] == type_
                    && c["status"] == status
                    && reason.is_none_or(|r| c["reason"] == r)
                    && c["observedGeneration"].as_i64() == generation
            })
        })
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
