//! The plugin controller: serves the kinds of `Plugin` objects in a running host.
//!
//! Contract:
//! - a Plugin is served only from an artifact whose every digest verified and, when
//!   `spec.source.verification` is set, whose cosign signature verified with that key;
//! - a new digest (or new limits) MUST replace the served version without dropping a reconcile
//!   in flight (the [`ActuatorSlot`] swaps; the kind's controller keeps running) — unless the
//!   kind, the plugin's name or its dependencies change, which restarts that controller;
//! - a version that fails (pull, digest, signature, compile, CRD) MUST leave the previous good
//!   version serving, and say why in `Ready=False`;
//! - deleting a Plugin MUST stop its controller and leave its objects, their finalizers and the
//!   external resources as they are, for when it returns;
//! - a kind is served by one plugin at a time.
//!
//! Each Plugin has a worker task that runs the phases of [`Worker::sync`] whenever its spec
//! changes, after a failure (with backoff), and every poll interval for a tag reference.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};
use oci_client::secrets::RegistryAuth;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::Plugin;
use crate::actuator::{Actuator, ActuatorSlot, Description};
use crate::oci::verify::SignatureKey;
use crate::oci::{self, Credentials, Registry, RegistryOptions};
use crate::ops::metrics;
use crate::reconcile::Settings;
use crate::runtime::{EgressPolicy, Limits, PluginConfig, Runtime};

/// Why a version of a plugin is not served. The message is what `Ready=False` shows.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The spec is invalid.
    #[error("{field}: {message}")]
    Spec {
        field: &'static str,
        message: String,
    },
    /// The pull Secret could not be read.
    #[error("pull secret {namespace}/{name}: {message}")]
    PullSecret {
        namespace: String,
        name: String,
        message: String,
    },
    /// Resolving, pulling or verifying the artifact failed.
    #[error(transparent)]
    Oci(#[from] oci::Error),
    /// The component does not compile or instantiate.
    #[error("loading the component: {0}")]
    Load(#[source] crate::runtime::Error),
    /// The compile task itself failed (it panicked or the runtime shut down).
    #[error("loading the component: the compile task failed: {0}")]
    LoadTask(#[source] tokio::task::JoinError),
    /// `describe()` failed or broke the contract (a name Kubernetes or the host refuses).
    #[error("describe(): {0}")]
    Describe(#[source] crate::actuator::CallError),
    /// Another Plugin serves the same kind.
    #[error("kind {kind} is already served by plugin {owner}")]
    KindConflict { kind: String, owner: String },
    /// The kind's CRD could not be installed or validated.
    #[error(transparent)]
    Crd(#[from] crate::crd::InstallError),
    /// The Kubernetes API failed.
    #[error("{0}")]
    Kube(#[from] kube::Error),
}

impl Error {
    /// The condition reason for this failure.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Spec { .. } => "InvalidSpec",
            Self::PullSecret { .. } => "PullSecretUnavailable",
            Self::Oci(oci::Error::DigestMismatch { .. }) => "DigestMismatch",
            Self::Oci(oci::Error::Signature { .. }) => "SignatureInvalid",
            Self::Oci(oci::Error::Layout { .. }) => "NotAWasmArtifact",
            Self::Oci(_) => "PullFailed",
            Self::Load(_) | Self::LoadTask(_) => "LoadFailed",
            Self::Describe(_) => "InvalidDescription",
            Self::KindConflict { .. } => "KindConflict",
            Self::Crd(_) => "CrdFailed",
            Self::Kube(_) => "KubernetesError",
        }
    }
}

/// Host-wide settings of dynamically loaded plugins.
#[derive(Clone)]
pub struct PluginHostConfig {
    pub runtime: Runtime,
    pub registry: RegistryOptions,
    /// Sandbox defaults (a Plugin's `limits` override them; its `allowedHosts` replace them).
    pub defaults: PluginConfig,
    /// Settings of the kinds' controllers (namespace, resync, concurrency…).
    pub settings: Settings,
    /// Namespace of pull Secrets that name none (the host's own).
    pub host_namespace: String,
    /// How often a tag reference is re-resolved.
    pub poll_interval: Duration,
    /// Serve only Plugins matching this label selector.
    pub selector: Option<String>,
    /// Install the CRDs of the Plugins' kinds (otherwise only check they are installed).
    pub install_crds: bool,
}

/// Kinds (CRD names) and the Plugin serving each.
type Claims = Arc<Mutex<HashMap<String, String>>>;

/// Serves the kinds of `Plugin` objects.
pub struct PluginHost {
    client: Client,
    config: Arc<PluginHostConfig>,
    registry: Arc<Registry>,
    claims: Claims,
}

impl PluginHost {
    /// A host of Plugins; `static_kinds` are served by `--plugin` flags and cannot be claimed.
    pub fn new(client: Client, config: PluginHostConfig, static_kinds: &[Description]) -> Self {
        let registry = Arc::new(Registry::new(config.registry.clone()));
        let claims = static_kinds
            .iter()
            .map(|d| (crate::crd::crd_name(d), format!("--plugin {}", d.name)))
            .collect();
        Self {
            client,
            config: Arc::new(config),
            registry,
            claims: Arc::new(Mutex::new(claims)),
        }
    }

    /// Watches Plugins until `shutdown`, then stops every kind's controller (draining
    /// in-flight reconciles).
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) {
        let api: Api<Plugin> = Api::all(self.client.clone());
        let mut watch_config = watcher::Config::default();
        if let Some(selector) = &self.config.selector {
            watch_config = watch_config.labels(selector);
        }
        let events = watcher::watcher(api, watch_config).default_backoff();
        let mut events = std::pin::pin!(events);
        let mut shutdown = std::pin::pin!(shutdown);
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut workers: HashMap<String, watch::Sender<Option<Arc<Plugin>>>> = HashMap::new();
        let mut tasks = tokio::task::JoinSet::new();
        let mut listed: Option<HashSet<String>> = None;
        loop {
            let event = tokio::select! {
                () = &mut shutdown => break,
                event = events.next() => event,
            };
            let event = match event {
                None => break,
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "watching Plugins failed; retrying");
                    continue;
                }
                Some(Ok(event)) => event,
            };
            let mut apply = |plugin: Plugin| {
                let name = plugin.name_any();
                let plugin = Some(Arc::new(plugin));
                // A worker that ended (its Plugin was deleted) is replaced by a new one.
                match workers.get(&name).filter(|tx| !tx.is_closed()) {
                    Some(tx) => {
                        tx.send_replace(plugin);
                    }
                    None => {
                        let (tx, rx) = watch::channel(plugin);
                        workers.insert(name.clone(), tx);
                        let worker = Worker {
                            name,
                            client: self.client.clone(),
                            config: Arc::clone(&self.config),
                            registry: Arc::clone(&self.registry),
                            claims: Arc::clone(&self.claims),
                            serving: None,
                        };
                        tasks.spawn(worker.run(rx, stop_rx.clone()));
                    }
                }
            };
            match event {
                Event::Init => listed = Some(HashSet::new()),
                Event::InitApply(plugin) => {
                    if let Some(listed) = listed.as_mut() {
                        listed.insert(plugin.name_any());
                    }
                    apply(plugin);
                }
                Event::InitDone => {
                    // A re-list: Plugins deleted while the watch was down are gone from it.
                    if let Some(listed) = listed.take() {
                        workers.retain(|name, tx| {
                            let keep = listed.contains(name);
                            if !keep {
                                tx.send_replace(None);
                            }
                            keep
                        });
                    }
                }
                Event::Apply(plugin) => apply(plugin),
                Event::Delete(plugin) => {
                    // The worker stops serving and ends; a Plugin of the same name created
                    // later gets a new worker.
                    if let Some(tx) = workers.remove(&plugin.name_any()) {
                        tx.send_replace(None);
                    }
                }
            }
        }
        let _ = stop_tx.send(true);
        while tasks.join_next().await.is_some() {}
    }
}

/// One version of a plugin being served.
struct Serving {
    digest: String,
    pinned: String,
    /// The spec fields the loaded version depends on.
    spec_key: String,
    description: Description,
    slot: Arc<ActuatorSlot>,
    /// Bumped after a swap: the kind's controller reconciles every object again.
    rerun: watch::Sender<u64>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

/// The controller-level identity of a description: a change restarts the kind's controller.
fn controller_shape(d: &Description, spec: &super::PluginSpec) -> Value {
    json!([
        d.name,
        d.group,
        d.version,
        d.kind,
        d.plural,
        d.needs_credentials,
        serde_json::to_value(&d.dependencies).unwrap_or_default(),
        spec.namespace,
        spec.limits.concurrency
    ])
}

/// The worker of one Plugin.
struct Worker {
    name: String,
    client: Client,
    config: Arc<PluginHostConfig>,
    registry: Arc<Registry>,
    claims: Claims,
    serving: Option<Serving>,
}

impl Worker {
    async fn run(
        mut self,
        mut spec: watch::Receiver<Option<Arc<Plugin>>>,
        mut stop: watch::Receiver<bool>,
    ) {
        let mut failures = 0u32;
        loop {
            let current = spec.borrow_and_update().clone();
            let Some(plugin) = current else {
                self.stop_serving("the Plugin was deleted").await;
                return;
            };
            let next = match self.sync(&plugin).await {
                Ok(()) => {
                    failures = 0;
                    let by_digest = oci::parse_reference(&plugin.spec.source.reference)
                        .is_ok_and(|r| r.digest().is_some());
                    (!by_digest).then_some(self.config.poll_interval)
                }
                Err(e) => {
                    failures = failures.saturating_add(1);
                    metrics::global().plugin_load_failed(&self.name);
                    tracing::warn!(plugin = %self.name, reason = e.reason(), error = %e, "plugin not served");
                    self.report_failure(&plugin, &e).await;
                    Some(backoff(failures))
                }
            };
            let wait = async {
                match next {
                    Some(delay) => tokio::time::sleep(delay).await,
                    None => std::future::pending().await,
                }
            };
            let stopping = async {
                let _ = stop.wait_for(|stop| *stop).await;
            };
            let host_stops = tokio::select! {
                changed = spec.changed() => changed.is_err(),
                () = wait => false,
                () = stopping => true,
            };
            if host_stops {
                self.stop_serving("the host is shutting down").await;
                return;
            }
        }
    }

    /// Brings the served version in line with the Plugin's spec: the phases in order.
    async fn sync(&mut self, plugin: &Plugin) -> Result<(), Error> {
        let spec = &plugin.spec;
        let reference = spec.source.reference.as_str();
        let spec_key = serde_json::to_string(&(
            &spec.allowed_hosts,
            &spec.limits,
            &spec.namespace,
            &spec.source.verification,
        ))
        .unwrap_or_default();

        // Phase 1: credentials.
        let auth = self.credentials(plugin).await?;

        // Phase 2: resolve the reference to a manifest digest.
        let digest = self.registry.resolve(reference, &auth).await?;
        if let Some(serving) = &self.serving
            && serving.digest == digest
            && serving.spec_key == spec_key
        {
            return self.report_ready(plugin).await;
        }

        // Phase 3: pull (every digest verified; cached by digest).
        let pinned = oci::parse_reference(reference)?
            .clone_with_digest(digest.clone())
            .whole();
        let artifact = self.registry.pull(&pinned, &auth).await?;
        tracing::info!(plugin = %self.name, pinned = %artifact.pinned, from_cache = artifact.from_cache, "plugin pulled");

        // Phase 4: verify the signature, when required.
        if let Some(verification) = &spec.source.verification {
            let key =
                SignatureKey::from_pem(verification.public_key.as_bytes()).map_err(|message| {
                    Error::Spec {
                        field: "spec.source.verification.publicKey",
                        message,
                    }
                })?;
            key.verify(&artifact.pinned, &auth, &self.registry.options().insecure)
                .await?;
        }

        // Phase 5: compile (off the async threads: a Python component takes seconds).
        let config = sandbox(spec, &self.config.defaults)?;
        let runtime = self.config.runtime.clone();
        let name = self.name.clone();
        let bytes = artifact.bytes;
        let actuator = tokio::task::spawn_blocking(move || runtime.load(&name, &bytes, config))
            .await
            .map_err(Error::LoadTask)?
            .map_err(Error::Load)?;
        let actuator: Arc<dyn Actuator> = Arc::new(actuator);

        // Phase 6: describe, and claim the kind.
        let description = actuator.describe().await.map_err(Error::Describe)?;
        self.claim(&description)?;

        // Phase 7: install (or validate) the kind's CRD.
        crate::crd::ensure(&self.client, &description, self.config.install_crds).await?;

        // Phase 8: serve — swap in place, or (re)start the kind's controller.
        let shape = controller_shape(&description, spec);
        match self.serving.take() {
            Some(mut serving)
                if controller_shape(&serving.description, spec) == shape
                    && !serving.task.is_finished() =>
            {
                serving.slot.swap(actuator);
                serving.rerun.send_modify(|n| *n += 1);
                tracing::info!(plugin = %self.name, from = %serving.digest, to = %digest, "plugin swapped");
                serving.digest = digest;
                serving.pinned = artifact.pinned;
                serving.spec_key = spec_key;
                serving.description = description;
                self.serving = Some(serving);
            }
            previous => {
                if let Some(previous) = previous {
                    let old = crate::crd::crd_name(&previous.description);
                    previous.shutdown().await;
                    if old != crate::crd::crd_name(&description) {
                        self.release(&old);
                    }
                }
                self.serving = Some(self.start(
                    actuator,
                    description,
                    spec,
                    digest,
                    artifact.pinned,
                    spec_key,
                ));
            }
        }
        metrics::global().plugin_loaded(&self.name);

        // Phase 9: report.
        self.report_ready(plugin).await
    }

    /// Starts the controller of the plugin's kind behind a swappable slot.
    fn start(
        &self,
        actuator: Arc<dyn Actuator>,
        description: Description,
        spec: &super::PluginSpec,
        digest: String,
        pinned: String,
        spec_key: String,
    ) -> Serving {
        let slot = Arc::new(ActuatorSlot::new(actuator));
        let mut settings = self.config.settings.clone();
        if let Some(namespace) = &spec.namespace {
            settings.namespace = Some(namespace.clone());
        }
        if let Some(concurrency) = spec.limits.concurrency {
            settings.concurrency = concurrency;
        }
        let (rerun, reruns) = watch::channel(0);
        settings.reconcile_all = Some(reruns);
        let (stop, mut stopped) = watch::channel(false);
        let shutdown = async move {
            let _ = stopped.wait_for(|stop| *stop).await;
        };
        let (client, served, plugin) = (
            self.client.clone(),
            Arc::clone(&slot) as Arc<dyn Actuator>,
            self.name.clone(),
        );
        let for_task = description.clone();
        let task = tokio::spawn(async move {
            if let Err(e) =
                crate::reconcile::run(client, served, for_task, settings, shutdown).await
            {
                tracing::error!(plugin = %plugin, error = %e, "the kind's controller stopped");
            }
        });
        tracing::info!(plugin = %self.name, kind = %description.kind, digest = %digest, "plugin serving");
        Serving {
            digest,
            pinned,
            spec_key,
            description,
            slot,
            rerun,
            stop,
            task,
        }
    }

    async fn stop_serving(&mut self, why: &str) {
        if let Some(serving) = self.serving.take() {
            let kind = crate::crd::crd_name(&serving.description);
            serving.shutdown().await;
            self.release(&kind);
            tracing::info!(plugin = %self.name, kind = %kind, why, "plugin stopped; objects and finalizers left in place");
        }
    }

    fn claim(&self, description: &Description) -> Result<(), Error> {
        let kind = crate::crd::crd_name(description);
        let mut claims = self.claims.lock().unwrap_or_else(|e| e.into_inner());
        match claims.get(&kind) {
            Some(owner) if *owner != self.name => Err(Error::KindConflict {
                kind,
                owner: owner.clone(),
            }),
            _ => {
                claims.insert(kind, self.name.clone());
                Ok(())
            }
        }
    }

    fn release(&self, kind: &str) {
        let mut claims = self.claims.lock().unwrap_or_else(|e| e.into_inner());
        if claims.get(kind) == Some(&self.name) {
            claims.remove(kind);
        }
    }

    /// The registry credentials of the Plugin's pull Secret (anonymous without one).
    async fn credentials(&self, plugin: &Plugin) -> Result<RegistryAuth, Error> {
        let reference = oci::parse_reference(&plugin.spec.source.reference)?;
        let Some(secret) = &plugin.spec.source.pull_secret else {
            return Ok(RegistryAuth::Anonymous);
        };
        let namespace = secret
            .namespace
            .clone()
            .unwrap_or_else(|| self.config.host_namespace.clone());
        let failed = |message: String| Error::PullSecret {
            namespace: namespace.clone(),
            name: secret.name.clone(),
            message,
        };
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &namespace);
        let found = api
            .get_opt(&secret.name)
            .await
            .map_err(|e| failed(e.to_string()))?
            .ok_or_else(|| failed("not found".to_owned()))?;
        let json = found
            .data
            .unwrap_or_default()
            .remove(".dockerconfigjson")
            .ok_or_else(|| failed("has no .dockerconfigjson key".to_owned()))?;
        Ok(Credentials::DockerConfigJson(json.0).for_registry(reference.resolve_registry())?)
    }

    async fn report_ready(&self, plugin: &Plugin) -> Result<(), Error> {
        let Some(serving) = &self.serving else {
            return Ok(());
        };
        let kind = serving.kind();
        let message = format!("serving {kind} from {}", serving.pinned);
        let kinds = vec![kind];
        self.write_status(
            plugin,
            "True",
            "Serving",
            &message,
            Some(&serving.digest),
            &kinds,
        )
        .await
    }

    async fn report_failure(&self, plugin: &Plugin, error: &Error) {
        let (message, digest, kinds) = match &self.serving {
            Some(serving) => (
                format!(
                    "{error}; still serving the previous version {}",
                    serving.digest
                ),
                Some(serving.digest.as_str()),
                vec![serving.kind()],
            ),
            None => (error.to_string(), None, Vec::new()),
        };
        if let Err(e) = self
            .write_status(plugin, "False", error.reason(), &message, digest, &kinds)
            .await
        {
            tracing::warn!(plugin = %self.name, error = %e, "could not write the Plugin's status");
        }
    }

    /// Server-side applies the status; the transition time moves only when the status does.
    async fn write_status(
        &self,
        plugin: &Plugin,
        status: &str,
        reason: &str,
        message: &str,
        digest: Option<&str>,
        kinds: &[String],
    ) -> Result<(), Error> {
        let previous = plugin
            .status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"));
        let generation = plugin.metadata.generation;
        let unchanged = previous.is_some_and(|c| {
            c.status == status
                && c.reason == reason
                && c.message == message
                && c.observed_generation == generation
        }) && plugin
            .status
            .as_ref()
            .and_then(|s| s.resolved_digest.as_deref())
            == digest;
        if unchanged {
            return Ok(());
        }
        let transition = previous
            .filter(|c| c.status == status)
            .map(|c| c.last_transition_time.clone())
            .unwrap_or_else(|| {
                jiff::Timestamp::now()
                    .round(jiff::Unit::Second)
                    .map(|t| t.to_string())
                    .unwrap_or_default()
            });
        let body = json!({
            "apiVersion": "orchard.dev/v1alpha1",
            "kind": "Plugin",
            "status": {
                "conditions": [{
                    "type": "Ready",
                    "status": status,
                    "reason": reason,
                    "message": message,
                    "lastTransitionTime": transition,
                    "observedGeneration": generation,
                }],
                "resolvedDigest": digest,
                "kinds": kinds,
                "observedGeneration": generation,
            }
        });
        let api: Api<Plugin> = Api::all(self.client.clone());
        api.patch_status(
            &plugin.name_any(),
            &PatchParams::apply("orchard.dev/plugin-host").force(),
            &Patch::Apply(&body),
        )
        .await?;
        Ok(())
    }
}

impl Serving {
    /// `Kind.group/version`, as `status.kinds` lists it.
    fn kind(&self) -> String {
        let d = &self.description;
        format!("{}.{}/{}", d.kind, d.group, d.version)
    }

    /// Stops the kind's controller, letting reconciles in flight finish.
    async fn shutdown(self) {
        let _ = self.stop.send(true);
        if tokio::time::timeout(Duration::from_secs(20), self.task)
            .await
            .is_err()
        {
            tracing::warn!(kind = %self.description.kind, "reconciles in flight did not finish within 20 s");
        }
    }
}

/// The sandbox of a Plugin: the host's defaults, overridden by its `limits`; its
/// `allowedHosts` replace the host's list when set.
fn sandbox(spec: &super::PluginSpec, defaults: &PluginConfig) -> Result<PluginConfig, Error> {
    let limits = Limits {
        memory_bytes: spec
            .limits
            .memory_mib
            .map_or(defaults.limits.memory_bytes, |mib| (mib as usize) << 20),
        call_timeout: spec
            .limits
            .call_timeout_ms
            .map_or(defaults.limits.call_timeout, Duration::from_millis),
    };
    let egress = if spec.allowed_hosts.is_empty() {
        defaults.egress.clone()
    } else {
        EgressPolicy::allowing(&spec.allowed_hosts).map_err(|e| Error::Spec {
            field: "spec.allowedHosts",
            message: e.to_string(),
        })?
    };
    Ok(PluginConfig { limits, egress })
}

/// 1 s, 2 s, 4 s … 60 s.
fn backoff(failures: u32) -> Duration {
    Duration::from_secs(1u64 << failures.saturating_sub(1).min(6)).min(Duration::from_secs(60))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plugin_s_limits_override_the_host_defaults_and_its_hosts_replace_them() {
        let defaults = PluginConfig {
            limits: Limits {
                memory_bytes: 64 << 20,
                call_timeout: Duration::from_secs(10),
            },
            egress: EgressPolicy::allowing(&["http://default.example:80".to_owned()]).unwrap(),
        };
        let mut spec = super::super::PluginSpec::default();
        let same = sandbox(&spec, &defaults).unwrap();
        assert_eq!(same.limits.memory_bytes, 64 << 20);
        assert_eq!(same.limits.call_timeout, Duration::from_secs(10));

        spec.limits.memory_mib = Some(16);
        spec.limits.call_timeout_ms = Some(250);
        spec.allowed_hosts = vec!["https://api.example:443".to_owned()];
        let own = sandbox(&spec, &defaults).unwrap();
        assert_eq!(own.limits.memory_bytes, 16 << 20);
        assert_eq!(own.limits.call_timeout, Duration::from_millis(250));
        assert_ne!(
            format!("{:?}", own.egress),
            format!("{:?}", defaults.egress)
        );

        spec.allowed_hosts = vec!["not a url".to_owned()];
        let err = sandbox(&spec, &defaults).map(drop).unwrap_err();
        assert_eq!(err.reason(), "InvalidSpec");
        assert!(err.to_string().starts_with("spec.allowedHosts: "), "{err}");
    }

    #[test]
    fn failures_back_off_exponentially_up_to_a_minute() {
        let delays: Vec<u64> = (1..=9).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
    }

    #[test]
    fn each_failure_has_a_reason_an_admin_can_filter_on() {
        let mismatch = Error::Oci(oci::Error::DigestMismatch {
            reference: "r".into(),
            what: "layer",
            expected: "a".into(),
            actual: "b".into(),
        });
        assert_eq!(mismatch.reason(), "DigestMismatch");
        let unsigned = Error::Oci(oci::Error::Signature {
            reference: "r".into(),
            reason: "not signed".into(),
        });
        assert_eq!(unsigned.reason(), "SignatureInvalid");
        assert!(unsigned.to_string().contains("not signed"));
    }
}
