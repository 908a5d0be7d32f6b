//! The host as a library type. [`App`] wires the admin server, the static plugins, leader
//! election, CRD installation, the kinds' controllers and the Plugin host, and drains them on
//! shutdown. `orchard run` builds an [`AppConfig`] from its flags (`cli.rs`); tests start an
//! `App` in-process against a test apiserver and stop it with its [`CancellationToken`].
//!
//! Phases of [`App::run`], in order:
//! 1. **admin** — bind the admin server (`/healthz`, `/readyz`, `/metrics`), when configured;
//! 2. **load** — load every static plugin and call its `describe()`; a failure stops the host;
//! 3. **connect** — the Kubernetes client (the one given, else KUBECONFIG / in-cluster);
//!    a replica of a leader election or a shard ring that watches Plugins starts loading
//!    them, standing by ([`crate::plugin::config::Role::Standby`]: converting their kinds,
//!    ready to take over) until it serves them (phase 7 hands over); only then is the host
//!    ready as far as loading goes (`/readyz` never says ready before the conversion webhook
//!    listens and a standby's loads are counted);
//! 4. **lead** — acquire the leader Lease, when configured (a shutdown while waiting ends
//!    cleanly);
//! 5. **announce** — this host's presence ([`crate::ops::presence`]): when another host
//!    already serves one of its kinds in one of its namespaces, wait until it stops (saying
//!    which host it is); a shutdown while waiting ends cleanly;
//! 6. **install** — the plugins' CRDs (and the Plugin CRD when Plugins are watched), when
//!    configured;
//! 7. **serve** — one controller per (namespace, static plugin), and the Plugin host;
//! 8. **wait** — for the shutdown token or a lost Lease;
//! 9. **drain** — cancel every controller, let reconciles in flight finish (at most
//!    [`AppConfig::drain_timeout`]), release the Leases.
//!
//! With sharding ([`AppConfig::sharding`]) phase 4 joins the shard ring instead of electing a
//! leader, and phases 7–9 run per *assignment* (the buckets this replica serves): serve them —
//! the static plugins' controllers and a Plugin host of the assignment's own; when the
//! assignment changes, drain every controller (no timeout for the static ones; a Plugin's
//! kind is cut off after its drain: a bucket is given up only once no pass over its objects
//! runs), acknowledge, and serve the new one. On shutdown the replica drains and gives its
//! buckets back ([`crate::shard::Shard::leave`]).
//!
//! Contract: a lost Lease (leader or shard) MUST end the host at once with
//! [`Error::LostLease`] / [`Error::Fenced`] — another replica may already reconcile —
//! without waiting for reconciles in flight.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::actuator::{Actuator, CallError, Description};
use crate::ops::{Health, leader::Leadership, metrics};
use crate::reconcile::{Settings, machinery::cache::Caches};
use crate::runtime::{PluginConfig, Runtime};

/// Why the host stopped, or could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The admin server could not bind its address.
    #[error("binding the admin server to {addr}: {source}")]
    Admin {
        /// The address asked for.
        addr: SocketAddr,
        #[source]
        /// Why it could not be bound.
        source: std::io::Error,
    },
    /// The Wasm runtime could not be set up, or a static plugin did not load.
    #[error("loading plugin {path}: {source}")]
    Load {
        /// The plugin file.
        path: PathBuf,
        #[source]
        /// Why it did not load.
        source: crate::runtime::Error,
    },
    /// A static plugin's `describe()` failed or broke the contract.
    #[error("loading plugin {path}: {source}")]
    Describe {
        /// The plugin file.
        path: PathBuf,
        #[source]
        /// Why `describe` gave no answer.
        source: CallError,
    },
    /// The Wasm runtime could not be set up.
    #[error(transparent)]
    Runtime(crate::runtime::Error),
    /// No Kubernetes client could be built.
    #[error("connecting to Kubernetes (KUBECONFIG or in-cluster): {0}")]
    Connect(#[source] kube::Error),
    /// Leader election failed.
    #[error(transparent)]
    Leader(#[from] crate::ops::leader::Error),
    /// A CRD could not be installed.
    #[error(transparent)]
    Crd(#[from] crate::crd::InstallError),
    /// A kind's controller could not start (e.g. a dependency kind is not served).
    #[error(transparent)]
    Controller(#[from] crate::reconcile::Error),
    /// A controller task panicked.
    #[error("a controller task panicked: {0}")]
    Panicked(#[source] tokio::task::JoinError),
    /// Another replica holds the leader Lease now.
    #[error("lost the leader lease {namespace}/{name}; exiting")]
    LostLease {
        /// Namespace of the Lease.
        namespace: String,
        /// Name of the Lease.
        name: String,
    },
    /// Joining the shard ring failed.
    #[error(transparent)]
    Shard(#[from] crate::shard::Error),
    /// The shard Lease could not be renewed in time: other replicas take its buckets.
    #[error("could not renew the shard lease of ring {ring} in time; exiting")]
    Fenced {
        /// The ring.
        ring: String,
    },
    /// Two options that do not go together.
    #[error("{0}")]
    Unsupported(&'static str),
    /// This host's presence could not be announced.
    #[error(transparent)]
    Presence(#[from] crate::ops::presence::Error),
    /// The conversion webhook could not start.
    #[error("conversion webhook: {0}")]
    Webhook(#[source] crate::conversion::server::ServerError),
    /// The pass trace could not be opened.
    #[error("opening the pass trace {path}: {source}")]
    PassTrace {
        /// The file.
        path: PathBuf,
        #[source]
        /// Why.
        source: std::io::Error,
    },
}

/// A plugin served from a file (`orchard run --plugin`).
#[derive(Debug, Clone)]
pub struct StaticPlugin {
    /// The component (.wasm); the plugin's name is its file stem.
    pub path: PathBuf,
    /// Bench only (feature `bench-native`): serve `pdns-zone` with the same actuator linked
    /// into the host instead of its component.
    #[cfg(feature = "bench-native")]
    pub native: bool,
}

/// What every kind's controller shares.
#[derive(Debug, Clone)]
pub struct ReconcileConfig {
    /// Only these namespaces (all when empty).
    pub namespaces: Vec<String>,
    /// Resync period of objects that set none (`None`: no resync).
    pub default_resync: Option<Duration>,
    /// Reconciles in flight per plugin.
    pub concurrency: u16,
    /// This host's name in Events and as the Lease holder.
    pub instance: String,
    /// Which Events are published.
    pub events: crate::reconcile::machinery::events::EventLevel,
    /// Test-only fail point.
    pub fail_point: Option<FailPoint>,
    /// Test instrument: append every pass's begin and end to this file.
    pub pass_trace: Option<PathBuf>,
}

/// Test-only fail points (`--failpoint`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FailPoint {
    /// Abort the process right after a successful create, before `status.id` is written
    /// (proves that adoption prevents a leak).
    AbortAfterCreate,
}

/// Plugins served from `Plugin` objects (`--watch-plugins`).
#[derive(Debug, Clone)]
pub struct PluginObjects {
    /// Serve only the Plugins matching this label selector.
    pub selector: Option<String>,
    /// How often a tag reference is re-resolved (at least 1 s).
    pub poll_interval: Duration,
    /// Registries reached over plain HTTP.
    pub insecure_registries: Vec<String>,
    /// The content-addressed cache of pulled artifacts.
    pub oci_cache_dir: Option<PathBuf>,
}

/// Leader election (`--leader-elect`).
#[derive(Debug, Clone)]
pub struct LeaderElection {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// A dead leader is replaced within this.
    pub lease_duration: Duration,
}

/// Sharding (`--shard-ring`): replicas share the objects of every kind.
#[derive(Debug, Clone)]
pub struct Sharding {
    /// The ring's name.
    pub ring: String,
    /// A replica that stops renewing its Lease loses its buckets within this.
    pub lease_duration: Duration,
}

/// Everything [`App`] needs; `orchard run`'s flags build one.
#[derive(Debug, Clone)]
pub struct AppConfig {
    /// Plugins served from files.
    pub static_plugins: Vec<StaticPlugin>,
    /// Plugins served from `Plugin` objects, if any.
    pub plugin_objects: Option<PluginObjects>,
    /// The sandbox of static plugins, and the defaults of Plugin objects.
    pub sandbox: PluginConfig,
    /// The compiled-component cache (`None`: no cache).
    pub compiled_cache_dir: Option<PathBuf>,
    /// Plugin instances the host runs at once, over all its kinds (`--instance-pool`).
    pub instance_pool: u32,
    /// How a plugin instance's memory is made ready for the next (`--wasm-memory-reset`).
    pub memory_reset: crate::runtime::engine::MemoryReset,
    /// The controllers' settings.
    pub reconcile: ReconcileConfig,
    /// Apply the CRDs of the plugins (and of the Plugin kind when watched).
    pub install_crds: bool,
    /// Address of the admin server, if any.
    pub admin_addr: Option<SocketAddr>,
    /// Reconcile only while holding this Lease.
    pub leader_election: Option<LeaderElection>,
    /// Share the objects with the other replicas of a ring (not with leader election nor
    /// Plugin objects).
    pub sharding: Option<Sharding>,
    /// The host's own namespace: its presence Lease's, and pull Secrets that name none are
    /// read from it.
    pub host_namespace: String,
    /// A host that stops renewing its presence Lease is not waited for after this.
    pub presence_lease: Duration,
    /// How long reconciles in flight may take to finish after shutdown.
    pub drain_timeout: Duration,
    /// Longest wait for the apiserver's answer to one request (its headers: a watch answers
    /// at once and streams on), so that no pass, drain or hand-over hangs on a lost request.
    pub api_timeout: Duration,
    /// The conversion webhook, for the kinds whose plugin lists several versions (`None`:
    /// such a kind's CRD is refused).
    pub conversion_webhook: Option<ConversionWebhook>,
}

/// Where the conversion webhook listens, how the apiserver reaches it, and its certificate.
#[derive(Debug, Clone)]
pub struct ConversionWebhook {
    /// The address it binds (port 0: any).
    pub addr: SocketAddr,
    /// How the apiserver reaches it; `None`: `https://<bound address>/convert`.
    pub reach: Option<WebhookReach>,
    /// `tls.crt`, `tls.key` (and `ca.crt`) to serve with; `None`: generated at start.
    pub cert_dir: Option<PathBuf>,
}

/// How the apiserver reaches the conversion webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebhookReach {
    /// A URL (`https://…/convert`).
    Url(String),
    /// A Service in front of the host's pods (`namespace`, `name`, `port`; path `/convert`).
    Service {
        /// The Service's namespace.
        namespace: String,
        /// The Service's name.
        name: String,
        /// The Service's port.
        port: u16,
    },
}

impl ConversionWebhook {
    /// Serves the webhook (phase 2b) and answers the `clientConfig` the CRDs name it by.
    async fn start(&self) -> Result<crate::crd::Webhook, Error> {
        use crate::conversion::server::{self, Tls};
        let reach_names = |bound: SocketAddr| -> Vec<String> {
            match &self.reach {
                Some(WebhookReach::Service {
                    namespace, name, ..
                }) => vec![
                    format!("{name}.{namespace}.svc"),
                    format!("{name}.{namespace}.svc.cluster.local"),
                ],
                Some(WebhookReach::Url(url)) => url
                    .parse::<http::Uri>()
                    .ok()
                    .and_then(|u| u.host().map(|h| h.trim_matches(['[', ']']).to_owned()))
                    .into_iter()
                    .collect(),
                None => vec![bound.ip().to_string()],
            }
        };
        // The names are known before binding except for a bare address: bind first.
        let tls = if let Some(dir) = &self.cert_dir {
            Tls::from_dir(dir)
        } else {
            Tls::generate(reach_names(self.addr))
        }
        .map_err(Error::Webhook)?;
        let bound = server::serve(self.addr, &tls, crate::conversion::registry())
            .await
            .map_err(Error::Webhook)?;
        let target = match &self.reach {
            Some(WebhookReach::Url(url)) => serde_json::json!({"url": url}),
            Some(WebhookReach::Service {
                namespace,
                name,
                port,
            }) => serde_json::json!({"service": {
                "namespace": namespace, "name": name, "port": port, "path": "/convert"
            }}),
            None => serde_json::json!({"url": format!("https://{bound}/convert")}),
        };
        let mut client_config = target;
        client_config["caBundle"] = serde_json::json!(tls.ca_bundle());
        Ok(crate::crd::Webhook { client_config })
    }
}

/// A configured host, not yet running.
pub struct App {
    config: AppConfig,
    client: Option<kube::Client>,
    health: Arc<Health>,
}

impl App {
    /// A host with `config`; it connects to the cluster of KUBECONFIG / in-cluster config
    /// unless [`App::with_client`] gives it a client.
    pub fn new(config: AppConfig) -> Self {
        Self {
            config,
            client: None,
            health: Arc::default(),
        }
    }

    /// Uses `client` instead of connecting itself.
    #[must_use]
    pub fn with_client(mut self, client: kube::Client) -> Self {
        self.client = Some(client);
        self
    }

    /// The host's readiness, as `/readyz` reports it.
    pub fn health(&self) -> Arc<Health> {
        Arc::clone(&self.health)
    }

    /// Runs the phases of the module docs until `shutdown` is cancelled (or the Lease is
    /// lost), then drains.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), Error> {
        let Self {
            config,
            client,
            health,
        } = self;

        // Phase 1: admin.
        if let Some(addr) = config.admin_addr {
            crate::ops::server::serve(addr, Arc::clone(&health))
                .await
                .map_err(|source| Error::Admin { addr, source })?;
        }

        // Phase 2: load.
        let runtime = Runtime::with_options(
            config.compiled_cache_dir.clone(),
            crate::runtime::engine::PoolSize::for_instances(config.instance_pool),
            config.memory_reset,
        )
        .map_err(Error::Runtime)?;
        let mut plugins = Vec::with_capacity(config.static_plugins.len());
        for plugin in &config.static_plugins {
            let loaded = load(&runtime, plugin, &config.sandbox).await;
            match loaded {
                Ok(loaded) => {
                    metrics::global()
                        .plugin_loaded(&loaded.1.name, &crate::runtime::egress::FAILURE_LABELS);
                    plugins.push(loaded);
                }
                Err(e) => {
                    metrics::global().plugin_load_failed(&stem(&plugin.path));
                    return Err(e);
                }
            }
        }

        // Phase 2b: the conversion webhook, served before any wait (the apiserver calls it
        // for every read at a version other than the stored one, whoever leads).
        let webhook = match &config.conversion_webhook {
            Some(w) => Some(w.start().await?),
            None => None,
        };
        for (actuator, description) in &plugins {
            crate::conversion::registry().register(description, Arc::clone(actuator));
        }

        // Phase 3: connect (rustls has two providers compiled in: pick kube's, ring).
        crate::oci::ensure_crypto_provider();
        let client = match client {
            Some(client) => client,
            None => connect(config.api_timeout).await?,
        };
        if config.sharding.is_some() && config.leader_election.is_some() {
            return Err(Error::Unsupported(
                "sharding and leader election exclude each other: a ring needs no leader",
            ));
        }
        let kept = crate::plugin::kept::KeptVersions::default();
        let served = Served {
            client: &client,
            runtime: &runtime,
            plugins: &plugins,
            webhook: webhook.as_ref(),
            kept: &kept,
        };
        let standby = StandbyHost::start(&config, &served, &health);
        // Ready, as far as loading goes, only now: the static plugins loaded, the webhook
        // listening, and a standby's Plugin host counted among the loads `/readyz` waits for
        // (it holds one from its making). Said any earlier, a replica started beside a leader
        // answered ready before its webhook listened, and a conversion sent to it at once was
        // refused.
        health.set_plugins_loaded();
        // Phase 4: lead (or join the shard ring).
        let mut shard = None;
        if let Some(sharding) = &config.sharding {
            shard = Some(
                crate::shard::Shard::join(
                    client.clone(),
                    crate::shard::ShardConfig {
                        ring: sharding.ring.clone(),
                        namespace: config.host_namespace.clone(),
                        lease_duration: sharding.lease_duration,
                        instance: config.reconcile.instance.clone(),
                    },
                )
                .await?,
            );
        }
        let mut leadership = None;
        if let Some(lease) = &config.leader_election {
            let acquire = Leadership::acquire(
                client.clone(),
                &lease.namespace,
                &lease.name,
                &config.reconcile.instance,
                lease.lease_duration,
            );
            tokio::select! {
                held = acquire => leadership = Some(held?),
                () = shutdown.cancelled() => return Ok(()),
            }
        }
        metrics::global().set_leader(true);

        // Phase 5: announce.
        let presence = crate::ops::presence::PresenceConfig {
            namespace: config.host_namespace.clone(),
            instance: config.reconcile.instance.clone(),
            scope: config.scope(&plugins),
            lease_duration: config.presence_lease,
            admin: config.admin_addr.map(announced_admin),
        };
        let presence =
            match crate::ops::presence::Presence::announce(client.clone(), presence, &shutdown)
                .await
            {
                Ok(Some(presence)) => presence,
                outcome => {
                    // Shut down while waiting for another host, or the Lease failed: serve
                    // nothing; hand back what phase 4 took.
                    if let Some(shard) = shard {
                        shard.leave().await;
                    }
                    if let Some(leadership) = leadership {
                        leadership.release().await;
                    }
                    return outcome.map(drop).map_err(Error::from);
                }
            };
        let outcome = serve(
            &config, &served, &health, shard, leadership, standby, &shutdown,
        )
        .await;
        presence.release().await;
        outcome
    }
}

/// Phases 6–9 of the module docs, once this host may serve.
async fn serve(
    config: &AppConfig,
    served: &Served<'_>,
    health: &Arc<Health>,
    shard: Option<crate::shard::Shard>,
    mut leadership: Option<Leadership>,
    standby: Option<StandbyHost>,
    shutdown: &CancellationToken,
) -> Result<(), Error> {
    let Served {
        client,
        plugins,
        webhook,
        ..
    } = *served;
    // Phase 6: install.
    health.set_installing(true);
    if config.install_crds {
        for (_, description) in plugins {
            crate::crd::install(client, description, webhook).await?;
            crate::crd::migrate::spawn(client, description);
        }
        if config.plugin_objects.is_some() {
            crate::plugin::install_crd(client).await?;
        }
    }

    // Phase 7: serve.
    let mut base = config.reconcile.settings(health);
    if let Some(path) = &config.reconcile.pass_trace {
        let trace =
            crate::reconcile::flow::trace::PassTrace::open(path, &config.reconcile.instance)
                .map_err(|source| Error::PassTrace {
                    path: path.clone(),
                    source,
                })?;
        base.pass_trace = Some(Arc::new(trace));
    }
    if config.plugin_objects.is_some() && config.reconcile.namespaces.len() > 1 {
        tracing::warn!(
            "Plugins are served in the first --namespace only (or their own spec.namespace)"
        );
    }
    if let Some(shard) = shard {
        health.set_installing(false);
        return serve_shards(shard, served, config, &base, standby, shutdown).await;
    }
    let stop = shutdown.child_token();
    let mut tasks = tokio::task::JoinSet::new();
    spawn_controllers(&mut tasks, client, plugins, &config.reconcile, &base, &stop);
    health.set_installing(false);
    if let Some(host_config) = plugin_host_config(config, served, &base, None) {
        spawn_plugin_host(&mut tasks, client, host_config, plugins, standby, &stop).await;
    }
    tracing::info!(
        plugins = plugins.len(),
        watch_plugins = config.plugin_objects.is_some(),
        runtime_workers = runtime_workers(),
        "orchard is running"
    );

    // Phase 8: wait.
    let lost = async {
        match leadership.as_mut() {
            Some(l) => l.lost().await,
            None => std::future::pending().await,
        }
    };
    let lost_lease = tokio::select! {
        () = shutdown.cancelled() => false,
        () = lost => true,
        // A controller that ends on its own (e.g. a dependency kind that is not served)
        // stops the host with its error.
        Some(done) = tasks.join_next(), if !tasks.is_empty() => {
            stop.cancel();
            done.map_err(Error::Panicked)??;
            false
        }
    };
    metrics::global().set_leader(false);
    if lost_lease {
        stop.cancel();
        // A lease is only lost when leader election runs, so its name is always known.
        let lease = config
            .leader_election
            .as_ref()
            .map(|l| (l.namespace.clone(), l.name.clone()))
            .unwrap_or_default();
        return Err(Error::LostLease {
            namespace: lease.0,
            name: lease.1,
        });
    }

    // Phase 9: drain.
    tracing::info!("shutting down: finishing in-flight reconciles");
    stop.cancel();
    let drained = async {
        while let Some(done) = tasks.join_next().await {
            done.map_err(Error::Panicked)??;
        }
        Ok::<(), Error>(())
    };
    if let Ok(result) = tokio::time::timeout(config.drain_timeout, drained).await {
        result?;
    } else {
        tracing::warn!(
            timeout_s = config.drain_timeout.as_secs(),
            "in-flight reconciles did not finish in time"
        );
    }
    if let Some(leadership) = leadership {
        leadership.release().await;
    }
    Ok(())
}

impl AppConfig {
    /// What this host serves, as its presence Lease says: its static kinds, its namespaces,
    /// its Plugin objects, and the group its replicas form.
    fn scope(&self, plugins: &[(Arc<dyn Actuator>, Description)]) -> crate::ops::presence::Scope {
        let ns = &self.host_namespace;
        let group = if let Some(lease) = &self.leader_election {
            format!("leader:{}/{}", lease.namespace, lease.name)
        } else if let Some(sharding) = &self.sharding {
            format!("ring:{ns}/{}", sharding.ring)
        } else {
            format!("host:{ns}/{}", self.reconcile.instance)
        };
        crate::ops::presence::Scope {
            kinds: plugins
                .iter()
                .map(|(_, d)| crate::crd::crd_name(d))
                .collect(),
            namespaces: (!self.reconcile.namespaces.is_empty())
                .then(|| self.reconcile.namespaces.iter().cloned().collect()),
            plugin_objects: self
                .plugin_objects
                .as_ref()
                .map(|o| o.selector.clone().unwrap_or_default()),
            group,
        }
    }
}

impl ReconcileConfig {
    /// The settings every controller starts from: the one place they are built.
    pub fn settings(&self, health: &Arc<Health>) -> Settings {
        Settings {
            namespace: None,
            default_resync: self.default_resync.filter(|d| !d.is_zero()),
            concurrency: self.concurrency,
            abort_after_create: self.fail_point == Some(FailPoint::AbortAfterCreate),
            instance: self.instance.clone(),
            events: self.events,
            health: Arc::clone(health),
            reconcile_all: None,
            // One cache per kind for the whole host: every plugin and dependency watch
            // shares it.
            caches: Arc::new(Caches::default()),
            shard_selector: None,
            pass_trace: None,
            journal: crate::ops::journal::global(),
        }
    }

    /// The namespaces controllers watch: each configured one, or all (`None`).
    fn scopes(&self) -> Vec<Option<String>> {
        if self.namespaces.is_empty() {
            vec![None]
        } else {
            self.namespaces.iter().cloned().map(Some).collect()
        }
    }
}

/// One controller per (namespace, plugin), with `base` settings, stopped by `stop`.
fn spawn_controllers(
    tasks: &mut tokio::task::JoinSet<Result<(), crate::reconcile::Error>>,
    client: &kube::Client,
    plugins: &[(Arc<dyn Actuator>, Description)],
    reconcile: &ReconcileConfig,
    base: &Settings,
    stop: &CancellationToken,
) {
    let scopes = reconcile.scopes();
    base.health.expect_controllers(scopes.len() * plugins.len());
    for namespace in scopes {
        for (actuator, description) in plugins {
            let settings = Settings {
                namespace: namespace.clone(),
                ..base.clone()
            };
            tasks.spawn(crate::reconcile::run(
                client.clone(),
                Arc::clone(actuator),
                description.clone(),
                settings,
                stop.clone(),
            ));
        }
    }
}

/// Waits until every task of `tasks` ended; the first error (or panic) is the result.
async fn join_all(
    tasks: &mut tokio::task::JoinSet<Result<(), crate::reconcile::Error>>,
) -> Result<(), Error> {
    let mut result = Ok(());
    while let Some(done) = tasks.join_next().await {
        let outcome = match done {
            Err(panic) => Err(Error::Panicked(panic)),
            Ok(Err(e)) => Err(Error::Controller(e)),
            Ok(Ok(())) => Ok(()),
        };
        if result.is_ok() {
            result = outcome;
        }
    }
    result
}

/// The Plugin host's settings, when Plugins are watched: its kinds' controllers run with
/// `settings` (the host's own, or one assignment's in a shard ring, with `shard`).
fn plugin_host_config(
    config: &AppConfig,
    served: &Served<'_>,
    settings: &Settings,
    shard: Option<crate::plugin::config::PluginShard>,
) -> Option<crate::plugin::PluginHostConfig> {
    let objects = config.plugin_objects.as_ref()?;
    Some(crate::plugin::PluginHostConfig {
        runtime: served.runtime.clone(),
        registry: crate::oci::RegistryOptions {
            insecure: objects.insecure_registries.clone(),
            cache_dir: objects.oci_cache_dir.clone(),
        },
        defaults: config.sandbox.clone(),
        settings: Settings {
            namespace: config.reconcile.namespaces.first().cloned(),
            // The fail point is for static plugins' scenarios only.
            abort_after_create: false,
            ..settings.clone()
        },
        host_namespace: config.host_namespace.clone(),
        poll_interval: objects.poll_interval.max(Duration::from_secs(1)),
        selector: objects.selector.clone(),
        install_crds: config.install_crds,
        webhook: served.webhook.cloned(),
        shard,
        role: crate::plugin::config::Role::Serve,
        kept: served.kept.clone(),
    })
}

/// Starts the Plugin host of `host_config` among `tasks`, until `stop`; the static `plugins`'
/// kinds cannot be claimed by a Plugin. It takes over from `standby`, which has ended when
/// this returns.
async fn spawn_plugin_host(
    tasks: &mut tokio::task::JoinSet<Result<(), crate::reconcile::Error>>,
    client: &kube::Client,
    host_config: crate::plugin::PluginHostConfig,
    plugins: &[(Arc<dyn Actuator>, Description)],
    standby: Option<StandbyHost>,
    stop: &CancellationToken,
) {
    let statics: Vec<_> = plugins.iter().map(|(_, d)| d.clone()).collect();
    // Made first: from here on it holds readiness back until its Plugins are loaded, so the
    // replica stays unready from the standby host's end until then.
    let host = crate::plugin::PluginHost::new(client.clone(), host_config, &statics);
    if let Some(standby) = standby {
        standby.end().await;
    }
    let stop = stop.clone();
    tasks.spawn(async move {
        host.run(stop).await;
        Ok(())
    });
}

/// The Plugin host of a replica that does not serve Plugins yet — a standby of leader
/// election, a replica of a shard ring before its first buckets: it loads every Plugin and
/// keeps it loaded ([`crate::plugin::config::Role::Standby`]), so that the conversion
/// webhook this replica serves through the Service converts their kinds too, and so that
/// the serving Plugin host that takes over (`spawn_plugin_host`) needs no pull, no compile
/// and no registry at all to serve them. Dropped, it is aborted.
struct StandbyHost {
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl StandbyHost {
    /// Starts it when this host needs one: Plugins watched, and a phase 4 that may wait (a
    /// leader election, a shard ring).
    fn start(config: &AppConfig, served: &Served<'_>, health: &Arc<Health>) -> Option<Self> {
        if config.leader_election.is_none() && config.sharding.is_none() {
            return None;
        }
        let mut host_config =
            plugin_host_config(config, served, &config.reconcile.settings(health), None)?;
        host_config.role = crate::plugin::config::Role::Standby;
        let statics: Vec<_> = served.plugins.iter().map(|(_, d)| d.clone()).collect();
        let host = crate::plugin::PluginHost::new(served.client.clone(), host_config, &statics);
        let stop = CancellationToken::new();
        let task = tokio::spawn(host.run(stop.clone()));
        tracing::info!("loading the Plugins, standing by until this replica serves them");
        Some(Self {
            stop,
            task: Some(task),
        })
    }

    /// Ends it: when this returns, none of its workers registers a conversion any more (the
    /// serving host's registrations are never overwritten by an older load).
    async fn end(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            task.abort();
            // Its outcome is the abort itself: nothing to report.
            let _ = task.await;
        }
    }
}

impl Drop for StandbyHost {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// What a host serves, as phases 1–3 made it.
struct Served<'a> {
    client: &'a kube::Client,
    runtime: &'a Runtime,
    plugins: &'a [(Arc<dyn Actuator>, Description)],
    webhook: Option<&'a crate::crd::Webhook>,
    /// The versions of Plugins this replica loaded, for each Plugin host it starts.
    kept: &'a crate::plugin::kept::KeptVersions,
}

/// What ends one assignment of a sharded host.
enum Turn {
    Shutdown,
    Fenced,
    Reassigned,
    ControllerEnded(Result<Result<(), crate::reconcile::Error>, tokio::task::JoinError>),
}

/// Phases 7–9 of a sharded host (module docs): serve each assignment of the ring until
/// shutdown, draining fully between two. Plugins are served like static plugins: each
/// assignment has a Plugin host of its own, whose kinds' controllers serve its buckets and
/// which ends — every controller drained — with it.
async fn serve_shards(
    shard: crate::shard::Shard,
    served: &Served<'_>,
    config: &AppConfig,
    base: &Settings,
    mut standby: Option<StandbyHost>,
    shutdown: &CancellationToken,
) -> Result<(), Error> {
    let Served {
        client, plugins, ..
    } = *served;
    let mut assignment = shard.assignment();
    // The labellers run across assignments: they follow the assignment themselves.
    let labellers = shutdown.child_token();
    for namespace in config.reconcile.scopes() {
        for (_, description) in plugins {
            tokio::spawn(crate::shard::label::run(
                client.clone(),
                crate::crd::api_resource(description),
                description.name.clone(),
                namespace.clone(),
                shard.assignment(),
                labellers.clone(),
            ));
        }
    }
    let _stop_labellers = labellers.drop_guard();
    tracing::info!(
        plugins = plugins.len(),
        runtime_workers = runtime_workers(),
        "orchard is running, sharded"
    );
    loop {
        let current = assignment.borrow_and_update().clone();
        let stop = shutdown.child_token();
        let mut tasks = tokio::task::JoinSet::new();
        // Every controller of the previous assignment ended (drained below): readiness counts
        // this assignment's alone.
        base.health.controllers_drained();
        if let Some(selector) = current.selector() {
            let settings = Settings {
                shard_selector: Some(selector),
                // A fresh cache per assignment: the share of each kind changed.
                caches: Arc::new(Caches::default()),
                ..base.clone()
            };
            spawn_controllers(
                &mut tasks,
                client,
                plugins,
                &config.reconcile,
                &settings,
                &stop,
            );
            let plugin_shard = crate::plugin::config::PluginShard {
                assignment: shard.assignment(),
                instance: config.reconcile.instance.clone(),
            };
            if let Some(host_config) =
                plugin_host_config(config, served, &settings, Some(plugin_shard))
            {
                let standby = standby.take();
                spawn_plugin_host(&mut tasks, client, host_config, plugins, standby, &stop).await;
            }
        }
        // Nothing outside `current` runs any more: the previous assignment drained fully.
        shard.drained(current.epoch);
        let turn = tokio::select! {
            () = shutdown.cancelled() => Turn::Shutdown,
            () = shard.fenced() => Turn::Fenced,
            changed = assignment.changed() => {
                if changed.is_ok() { Turn::Reassigned } else { Turn::Shutdown }
            }
            Some(done) = tasks.join_next(), if !tasks.is_empty() => Turn::ControllerEnded(done),
        };
        stop.cancel();
        match turn {
            Turn::Fenced => {
                return Err(Error::Fenced {
                    ring: config
                        .sharding
                        .as_ref()
                        .map(|s| s.ring.clone())
                        .unwrap_or_default(),
                });
            }
            Turn::Reassigned => {
                tracing::info!(
                    epoch = current.epoch,
                    "buckets changed: draining before the next assignment"
                );
                join_all(&mut tasks).await?;
            }
            Turn::ControllerEnded(done) => {
                done.map_err(Error::Panicked)??;
                join_all(&mut tasks).await?;
                shard.leave().await;
                return Ok(());
            }
            Turn::Shutdown => {
                tracing::info!("shutting down: finishing in-flight reconciles");
                if let Ok(result) =
                    tokio::time::timeout(config.drain_timeout, join_all(&mut tasks)).await
                {
                    result?;
                    shard.leave().await;
                } else {
                    // Passes still run: the buckets stay ours until the Lease expires.
                    tracing::warn!(
                        timeout_s = config.drain_timeout.as_secs(),
                        "in-flight reconciles did not finish in time; the buckets are left to expire"
                    );
                }
                return Ok(());
            }
        }
    }
}

/// A client of the cluster of KUBECONFIG / the in-cluster config whose every request is cut
/// off after `timeout` without an answer (kube's own read timeout is minutes long, for
/// watches).
async fn connect(timeout: Duration) -> Result<kube::Client, Error> {
    let config = kube::Config::infer()
        .await
        .map_err(|e| Error::Connect(kube::Error::InferConfig(e)))?;
    client_with_timeout(config, timeout).map_err(Error::Connect)
}

/// A client of `config` whose requests are cut off after `timeout` without an answer.
pub fn client_with_timeout(
    config: kube::Config,
    timeout: Duration,
) -> Result<kube::Client, kube::Error> {
    let builder = kube::client::ClientBuilder::try_from(config)?;
    Ok(builder
        .with_layer(&tower::timeout::TimeoutLayer::new(timeout))
        .build())
}

/// The admin server's URL as other processes reach it: its address, or — bound to every
/// interface — the pod's IP (`POD_IP`, the chart sets it) or loopback.
fn announced_admin(addr: SocketAddr) -> String {
    let host = if addr.ip().is_unspecified() {
        std::env::var("POD_IP")
            .ok()
            .and_then(|ip| ip.parse::<std::net::IpAddr>().ok())
            .unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST))
    } else {
        addr.ip()
    };
    format!("http://{}", SocketAddr::new(host, addr.port()))
}

/// The plugin name a file gives (its stem, `_` as `-`).
fn stem(path: &std::path::Path) -> String {
    path.file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("plugin")
        .replace('_', "-")
}

/// Loads a static plugin and asks what it manages.
async fn load(
    runtime: &Runtime,
    plugin: &StaticPlugin,
    sandbox: &PluginConfig,
) -> Result<(Arc<dyn Actuator>, Description), Error> {
    let path = &plugin.path;
    // ---- bench-only (feature `bench-native`): the natively linked actuator ----
    #[cfg(feature = "bench-native")]
    if plugin.native && stem(path) == "pdns-zone" {
        let actuator: Arc<dyn Actuator> =
            Arc::new(crate::actuator::NativeActuator::<pdns_zone::PdnsZone>::new());
        let description = actuator
            .describe()
            .await
            .map_err(|source| Error::Describe {
                path: path.clone(),
                source,
            })?;
        return Ok((actuator, description));
    }
    // ---- end bench-only ----
    let actuator: Arc<dyn Actuator> = Arc::new(
        runtime
            .load_file(path, None, sandbox.clone())
            .map_err(|source| Error::Load {
                path: path.clone(),
                source,
            })?,
    );
    let description = actuator
        .describe()
        .await
        .map_err(|source| Error::Describe {
            path: path.clone(),
            source,
        })?;
    Ok((actuator, description))
}

/// The worker threads of the async runtime the host runs on (`--runtime-workers`), for the
/// start-up line.
fn runtime_workers() -> usize {
    tokio::runtime::Handle::current().metrics().num_workers()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[tokio::test]
    async fn a_request_the_apiserver_never_answers_fails_after_the_api_timeout() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // Accepts every connection and never answers.
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        crate::oci::ensure_crypto_provider();
        let config = kube::Config::new(format!("http://{addr}").parse().unwrap());
        let client = super::client_with_timeout(config, Duration::from_millis(300)).unwrap();
        let outcome =
            tokio::time::timeout(Duration::from_secs(30), client.apiserver_version()).await;
        let error = outcome
            .expect("the request hung past the api timeout")
            .unwrap_err();
        assert!(error.to_string().contains("timed out"), "{error}");
    }
}
