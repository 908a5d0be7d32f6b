//! The worker of one Plugin: runs the phases of `Worker::sync` whenever the Plugin's spec
//! changes, after a failure (with backoff), and every poll interval for a tag reference.
//!
//! Contract:
//! - a Plugin is served only from an artifact whose every digest verified and, when
//!   `spec.source.verification` is set, whose cosign signature verified with that key;
//! - a new digest (or new limits) MUST replace the served version without dropping a reconcile
//!   in flight (the [`ActuatorSlot`] swaps; the kind's controller keeps running) — unless the
//!   kind, the plugin's name, its dependencies or its shortcuts change, which restarts that
//!   controller;
//! - a version that fails (pull, digest, signature, compile, describe, CRD) MUST leave the
//!   previous good version serving, and say why in `Ready=False`;
//! - deleting a Plugin MUST stop its controller and leave its objects, their finalizers and the
//!   external resources as they are, for when it returns;
//! - a kind is served by one plugin at a time ([`KindClaims`]);
//! - a kind's controller that stops MUST have ended when its stop returns (after a drain of
//!   20 s its passes are cut off): a restarted controller of the same kind, or the next
//!   replica of a shard ring, never runs beside it;
//! - in a sharded host ([`PluginShard`](super::config::PluginShard)) the kind's controller
//!   serves this replica's buckets, its objects are labelled with theirs, and only the
//!   holder of the Plugin's own bucket writes its status;
//! - a standby host ([`Role::Standby`]) loads each version as above, keeps it and registers
//!   it for the conversion webhook, and MUST NOT touch the cluster otherwise: no CRD, no
//!   controller, no status.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::config::{PluginHostConfig, Role};
use super::kept::Version;
use super::kind_claims::KindClaims;
use super::status::{self, Report};
use super::{Error, Plugin, PluginSpec};
use crate::actuator::{Actuator, ActuatorSlot, Description};
use crate::oci::verify::SignatureKey;
use crate::oci::{self, Registry};
use crate::ops::{Pending, metrics};
use crate::reconcile::machinery::backoff::Backoff;
use crate::runtime::{EgressPolicy, Limits, PluginConfig};

/// Retries of a failed version: 1 s doubling to 60 s.
const RETRY_MIN: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_mins(1);

/// How long reconciles in flight may take to finish when a kind's controller stops.
const DRAIN: Duration = Duration::from_secs(20);

/// One version of a plugin being served.
struct Serving {
    digest: String,
    pinned: String,
    /// The spec fields the loaded version depends on.
    spec_key: String,
    description: Description,
    /// The kind's controller; `None` in a standby host.
    controller: Option<Controller>,
}

/// The controller of a served version's kind.
struct Controller {
    slot: Arc<ActuatorSlot>,
    /// Bumped after a swap: the kind's controller reconciles every object again.
    rerun: watch::Sender<u64>,
    /// The kind's controller's token (and its labeller's, in a sharded host).
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

/// The controller-level identity of a description: a change restarts the kind's controller.
/// The shortcuts are in it: the flows read them from the controller's description, and a
/// version that drops one (its system no longer refuses duplicates) must not be served by
/// the flow that skips the lookup.
fn controller_shape(d: &Description, spec: &PluginSpec) -> Value {
    json!([
        d.name,
        d.group,
        d.version,
        d.kind,
        d.plural,
        d.needs_credentials,
        d.shortcuts.create_refuses_duplicates,
        d.shortcuts.delete_is_synchronous,
        d.shortcuts.delete_by_id,
        d.dependencies
            .iter()
            .map(|dep| json!([
                dep.name,
                dep.field,
                dep.kind,
                dep.for_create,
                dep.for_delete,
                dep.guard_deletion
            ]))
            .collect::<Vec<_>>(),
        spec.namespace,
        spec.limits.concurrency
    ])
}

/// The worker of one Plugin.
pub struct Worker {
    name: String,
    client: kube::Client,
    config: Arc<PluginHostConfig>,
    registry: Arc<Registry>,
    claims: Arc<KindClaims>,
    serving: Option<Serving>,
    /// The host's shutdown: the kind's controller runs on a child of it.
    stop: CancellationToken,
}

impl Worker {
    /// The worker of the Plugin `name`.
    pub fn new(
        name: String,
        client: kube::Client,
        config: Arc<PluginHostConfig>,
        registry: Arc<Registry>,
        claims: Arc<KindClaims>,
        shutdown: CancellationToken,
    ) -> Self {
        Self {
            name,
            client,
            config,
            registry,
            claims,
            serving: None,
            stop: shutdown,
        }
    }

    /// Serves the Plugin `spec` says until it is `None` (deleted) or the host shuts down;
    /// then stops the kind's controller, letting reconciles in flight finish. `first_load`
    /// (readiness waiting for this Plugin) is dropped once its first load ended.
    pub async fn run(
        mut self,
        mut spec: watch::Receiver<Option<Arc<Plugin>>>,
        mut first_load: Option<Pending>,
    ) {
        let backoff = Backoff::new(RETRY_MIN, RETRY_MAX);
        loop {
            let current = spec.borrow_and_update().clone();
            let Some(plugin) = current else {
                self.stop_serving("the Plugin was deleted").await;
                self.config.kept.forget(&self.name);
                return;
            };
            let next = match self.sync(&plugin).await {
                Ok(()) => {
                    backoff.reset(&self.name);
                    let by_digest = oci::parse_reference(&plugin.spec.source.reference)
                        .is_ok_and(|r| r.digest().is_some());
                    (!by_digest).then_some(self.config.poll_interval)
                }
                Err(e) => {
                    metrics::global().plugin_load_failed(&self.name);
                    tracing::warn!(plugin = %self.name, reason = e.reason(), error = %e, "plugin not served");
                    self.report_failure(&plugin, &e).await;
                    Some(backoff.next(&self.name))
                }
            };
            // The first load ended, well or not: readiness waits no longer for it.
            drop(first_load.take());
            let wait = async {
                match next {
                    Some(delay) => tokio::time::sleep(delay).await,
                    None => std::future::pending().await,
                }
            };
            let host_stops = tokio::select! {
                changed = spec.changed() => changed.is_err(),
                () = wait => false,
                () = self.stop.cancelled() => true,
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
        // Cannot fail: plain structs, strings and numbers (no map with non-string keys).
        .unwrap_or_default();

        // Phase 1: credentials.
        let auth =
            super::pull_secret::credentials(&self.client, plugin, &self.config.host_namespace)
                .await?;

        // Phase 2: resolve the reference to a manifest digest. A worker serving nothing yet
        // whose replica loaded this Plugin before (an earlier Plugin host of a shard ring, a
        // standby host) serves that version while the registry cannot be reached, as a
        // single host keeps its loaded version through an outage; the resolve is retried.
        let kept = self.config.kept.get(&self.name, reference, &spec_key);
        let digest = match self.registry.resolve(reference, &auth).await {
            Ok(digest) => digest,
            Err(e) => {
                if self.serving.is_none()
                    && let Some(kept) = kept
                {
                    tracing::warn!(plugin = %self.name, error = %e, digest = %kept.digest, "the reference could not be resolved: serving the version this replica loaded before");
                    self.serve(plugin, reference, kept).await?;
                }
                return Err(e.into());
            }
        };
        if let Some(serving) = &self.serving
            && serving.digest == digest
            && serving.spec_key == spec_key
        {
            return self.report_ready(plugin).await;
        }
        // The version this replica loaded before: no pull, no signature check, no compile.
        if let Some(kept) = kept.filter(|k| k.digest == digest) {
            return self.serve(plugin, reference, kept).await;
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
        let version = Version {
            digest,
            pinned: artifact.pinned,
            spec_key,
            actuator: Arc::new(actuator),
        };
        self.serve(plugin, reference, version).await
    }

    /// Phases 6–9 of [`Worker::sync`]: serves `version`, loaded from `reference`.
    async fn serve(
        &mut self,
        plugin: &Plugin,
        reference: &str,
        version: Version,
    ) -> Result<(), Error> {
        let spec = &plugin.spec;
        let Version {
            digest,
            pinned,
            spec_key,
            actuator,
        } = version.clone();

        // Phase 6: describe, and claim the kind.
        let description = actuator.describe().await.map_err(Error::Describe)?;
        self.claims
            .claim(&crate::crd::crd_name(&description), &self.name)?;

        // Phase 7: install (or validate) the kind's CRD — a serving host's part.
        let serves = self.config.role == Role::Serve;
        if serves {
            crate::crd::ensure(
                &self.client,
                &description,
                self.config.install_crds,
                self.config.webhook.as_ref(),
            )
            .await?;
        }
        // Its conversions, from now on (the CRD names the webhook once it lists versions) —
        // unless the host is ending: a standby host ends when the serving one takes over,
        // whose loads must not be overwritten by this older one (nothing awaits between this
        // check and the registration).
        if self.stop.is_cancelled() {
            return Ok(());
        }
        crate::conversion::registry().register(&description, Arc::clone(&actuator));
        if serves && self.config.install_crds {
            crate::crd::migrate::spawn(&self.client, &description);
        }

        // Phase 8: serve — swap in place, or (re)start the kind's controller (none in a
        // standby host).
        let shape = controller_shape(&description, spec);
        match self.serving.take() {
            Some(mut serving)
                if controller_shape(&serving.description, spec) == shape
                    && serving
                        .controller
                        .as_ref()
                        .is_some_and(|c| !c.task.is_finished()) =>
            {
                if let Some(controller) = &serving.controller {
                    controller.slot.swap(actuator);
                    controller.rerun.send_modify(|n| *n += 1);
                }
                tracing::info!(plugin = %self.name, from = %serving.digest, to = %digest, "plugin swapped");
                serving.digest = digest;
                serving.pinned = pinned;
                serving.spec_key = spec_key;
                serving.description = description;
                self.serving = Some(serving);
            }
            previous => {
                if let Some(previous) = previous {
                    let old = crate::crd::crd_name(&previous.description);
                    previous.shutdown().await;
                    if old != crate::crd::crd_name(&description) {
                        self.claims.release(&old, &self.name);
                    }
                }
                let controller = if serves {
                    Some(self.start(actuator, &description, spec, &digest))
                } else {
                    tracing::info!(plugin = %self.name, kind = %description.kind, digest = %digest, "plugin loaded, standing by (converting only)");
                    None
                };
                self.serving = Some(Serving {
                    digest,
                    pinned,
                    spec_key,
                    description,
                    controller,
                });
            }
        }
        self.config.kept.keep(&self.name, reference, version);
        metrics::global().plugin_loaded(&self.name, &crate::runtime::egress::FAILURE_LABELS);

        // Phase 9: report.
        self.report_ready(plugin).await
    }

    /// Starts the controller of the plugin's kind behind a swappable slot.
    fn start(
        &self,
        actuator: Arc<dyn Actuator>,
        description: &Description,
        spec: &PluginSpec,
        digest: &str,
    ) -> Controller {
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
        let stop = self.stop.child_token();
        let (client, served, plugin, for_task, token) = (
            self.client.clone(),
            Arc::clone(&slot) as Arc<dyn Actuator>,
            self.name.clone(),
            description.clone(),
            stop.clone(),
        );
        // The labeller ends with the controller, however it ends: it puts the plugin's
        // finalizer on, which only a running controller takes off.
        let labeller = stop.child_token();
        if let Some(shard) = &self.config.shard {
            // The kind's objects carry their bucket, which the controllers' selector reads (the
            // label goes on with the plugin's finalizer, in one write).
            tokio::spawn(crate::shard::label::run(
                self.client.clone(),
                crate::crd::api_resource(description),
                description.name.clone(),
                settings.namespace.clone(),
                shard.assignment.clone(),
                labeller.clone(),
            ));
        }
        let task = tokio::spawn(async move {
            let _end_labeller = labeller.drop_guard();
            if let Err(e) = crate::reconcile::run(client, served, for_task, settings, token).await {
                tracing::error!(plugin = %plugin, error = %e, "the kind's controller stopped");
            }
        });
        tracing::info!(plugin = %self.name, kind = %description.kind, digest = %digest, "plugin serving");
        Controller {
            slot,
            rerun,
            stop,
            task,
        }
    }

    async fn stop_serving(&mut self, why: &str) {
        if let Some(serving) = self.serving.take() {
            let kind = crate::crd::crd_name(&serving.description);
            let served = serving.controller.is_some();
            serving.shutdown().await;
            self.claims.release(&kind, &self.name);
            if served {
                tracing::info!(plugin = %self.name, kind = %kind, why, "plugin stopped; objects and finalizers left in place");
            } else {
                tracing::info!(plugin = %self.name, kind = %kind, why, "plugin unloaded (it stood by)");
            }
        }
    }

    /// Whether this host writes the Plugin's status ([`Role::writes_status`]).
    fn writes_status(&self) -> bool {
        self.config
            .role
            .writes_status(self.config.shard.as_ref(), &self.name)
    }

    /// Whose view a status message is: said in a shard ring, where each replica loads the
    /// Plugin itself and one writes.
    fn seen_by(&self) -> String {
        self.config
            .shard
            .as_ref()
            .map(|shard| format!(" (as seen by replica {})", shard.instance))
            .unwrap_or_default()
    }

    async fn report_ready(&self, plugin: &Plugin) -> Result<(), Error> {
        let Some(serving) = &self.serving else {
            return Ok(());
        };
        if !self.writes_status() {
            return Ok(());
        }
        let kind = serving.kind();
        let report = Report {
            ready: "True",
            reason: "Serving",
            message: format!("serving {kind} from {}{}", serving.pinned, self.seen_by()),
            digest: Some(&serving.digest),
            kinds: vec![kind],
        };
        Ok(status::write(&self.client, plugin, &report).await?)
    }

    async fn report_failure(&self, plugin: &Plugin, error: &Error) {
        if !self.writes_status() {
            return;
        }
        let report = match &self.serving {
            Some(serving) => Report {
                ready: "False",
                reason: error.reason(),
                message: format!(
                    "{error}; still serving the previous version {}{}",
                    serving.digest,
                    self.seen_by()
                ),
                digest: Some(&serving.digest),
                kinds: vec![serving.kind()],
            },
            None => Report {
                ready: "False",
                reason: error.reason(),
                message: format!("{error}{}", self.seen_by()),
                digest: None,
                kinds: Vec::new(),
            },
        };
        if let Err(e) = status::write(&self.client, plugin, &report).await {
            tracing::warn!(plugin = %self.name, error = %e, "could not write the Plugin's status");
        }
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
        if let Some(controller) = self.controller {
            controller.stop.cancel();
            end_controller(controller.task, DRAIN, &self.description.kind).await;
        }
    }
}

/// Waits up to `drain` for a stopped controller's `task` to end. Past it the task is aborted —
/// its passes end at their next await, as in a crash, which the flow is built to survive
/// (the finalizer first, `status.id` at once, adoption before create) — and awaited: when
/// this returns nothing of the controller runs, so neither a restarted controller of the kind
/// nor the replica taking its buckets ever runs beside it.
async fn end_controller(mut task: tokio::task::JoinHandle<()>, drain: Duration, kind: &str) {
    if tokio::time::timeout(drain, &mut task).await.is_ok() {
        return;
    }
    tracing::warn!(
        kind,
        drain_s = drain.as_secs(),
        "reconciles in flight did not finish in time after the controller stopped: cut off"
    );
    task.abort();
    // Its outcome is the abort itself (or a last-moment end): nothing to report.
    let _ = task.await;
}

/// The sandbox of a Plugin: the host's defaults, overridden by its `limits`; its
/// `allowedHosts` replace the host's list when set.
fn sandbox(spec: &PluginSpec, defaults: &PluginConfig) -> Result<PluginConfig, Error> {
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
    let mut egress = defaults.egress.clone();
    if !spec.allowed_hosts.is_empty() {
        // Only the list: the host's trusted CAs and timeouts stay.
        egress.allowed = EgressPolicy::allowing(&spec.allowed_hosts)
            .map_err(|e| Error::Spec {
                field: "spec.allowedHosts",
                message: e.to_string(),
            })?
            .allowed;
    }
    Ok(PluginConfig { limits, egress })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plugin_s_limits_override_the_host_defaults_and_its_hosts_replace_them() {
        let ca = rcgen::generate_simple_self_signed(vec!["ca.example".to_owned()]).unwrap();
        let ca_file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(ca_file.path(), ca.cert.pem()).unwrap();
        let defaults = PluginConfig {
            limits: Limits {
                memory_bytes: 64 << 20,
                call_timeout: Duration::from_secs(10),
            },
            egress: EgressPolicy {
                trusted_cas: crate::runtime::TrustedCas::from_pem_files(&[ca_file
                    .path()
                    .to_owned()])
                .unwrap(),
                ..EgressPolicy::allowing(&["http://default.example:80".to_owned()]).unwrap()
            },
        };
        let mut spec = PluginSpec::default();
        let same = sandbox(&spec, &defaults).unwrap();
        assert_eq!(same.limits.memory_bytes, 64 << 20);
        assert_eq!(same.limits.call_timeout, Duration::from_secs(10));

        spec.limits.memory_mib = Some(16);
        spec.limits.call_timeout_ms = Some(250);
        spec.allowed_hosts = vec!["https://api.example:443".to_owned()];
        let own = sandbox(&spec, &defaults).unwrap();
        assert_eq!(own.limits.memory_bytes, 16 << 20);
        assert_eq!(own.limits.call_timeout, Duration::from_millis(250));
        assert_eq!(
            own.egress.allowed,
            ["https://api.example:443"
                .parse::<crate::runtime::AllowedHost>()
                .unwrap()]
        );
        // The host's trusted CAs and timeouts stay with a plugin's own hosts.
        assert_eq!(own.egress.trusted_cas.len(), 1);
        assert_eq!(
            own.egress.response_timeout,
            defaults.egress.response_timeout
        );

        spec.allowed_hosts = vec!["not a url".to_owned()];
        let err = sandbox(&spec, &defaults).map(drop).unwrap_err();
        assert_eq!(err.reason(), "InvalidSpec");
        assert!(err.to_string().starts_with("spec.allowedHosts: "), "{err}");
    }

    #[test]
    fn a_version_that_changes_its_shortcuts_restarts_the_kinds_controller_and_a_new_schema_does_not()
     {
        let spec = PluginSpec::default();
        let d = Description {
            name: "p".into(),
            group: "p.dev".into(),
            version: "v1".into(),
            kind: "Thing".into(),
            plural: "things".into(),
            resource_schema: json!({"type": "object"}),
            filter_schema: None,
            observed_schema: json!({"type": "object"}),
            dependencies: vec![],
            needs_credentials: false,
            versions: vec![],
            shortcuts: crate::actuator::Shortcuts {
                create_refuses_duplicates: true,
                delete_is_synchronous: true,
                delete_by_id: true,
            },
        };
        let wider_schema = Description {
            resource_schema: json!({"type": "object", "properties": {"ttl": {"type": "integer"}}}),
            ..d.clone()
        };
        assert_eq!(
            controller_shape(&d, &spec),
            controller_shape(&wider_schema, &spec),
            "swapped in place"
        );
        let upsert = Description {
            shortcuts: crate::actuator::Shortcuts {
                create_refuses_duplicates: false,
                ..d.shortcuts
            },
            ..d.clone()
        };
        assert_ne!(
            controller_shape(&d, &spec),
            controller_shape(&upsert, &spec)
        );
    }

    /// Sets its flag when dropped: the future holding it ended or was cut off.
    struct Ended(Arc<std::sync::atomic::AtomicBool>);

    impl Drop for Ended {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_controller_that_does_not_end_within_the_drain_is_cut_off_before_its_stop_returns() {
        let ended = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let guard = Ended(Arc::clone(&ended));
        let task = tokio::spawn(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
        });
        let started = tokio::time::Instant::now();
        end_controller(task, DRAIN, "Thing").await;
        assert!(
            ended.load(std::sync::atomic::Ordering::SeqCst),
            "the pass was cut off"
        );
        assert_eq!(started.elapsed(), DRAIN, "after the drain, not before");
    }

    #[tokio::test(start_paused = true)]
    async fn a_controller_that_ends_within_the_drain_is_waited_for_and_not_cut_off() {
        let finished = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = Arc::clone(&finished);
        let task = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(3)).await;
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        let started = tokio::time::Instant::now();
        end_controller(task, DRAIN, "Thing").await;
        assert!(
            finished.load(std::sync::atomic::Ordering::SeqCst),
            "it ran to its end"
        );
        assert_eq!(started.elapsed(), Duration::from_secs(3));
    }

    #[test]
    fn failed_versions_are_retried_from_a_second_doubling_up_to_a_minute() {
        let backoff = Backoff::new(RETRY_MIN, RETRY_MAX);
        let delays: Vec<u64> = (1..=9).map(|_| backoff.next("p").as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
    }
}
