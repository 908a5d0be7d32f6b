//! The `orchard` command line. Each subcommand is a thin layer over the library.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand, ValueEnum};
use serde_json::{Value, json};

use crate::actuator::{Actuator, ManagedObject};
use crate::app::{
    App, AppConfig, ConversionWebhook, FailPoint, LeaderElection, PluginObjects, ReconcileConfig,
    Sharding, StaticPlugin, WebhookReach,
};
use crate::conformance::inputs::DependencyArg;
use crate::runtime::{CompiledCache, EgressPolicy, Limits, PluginConfig, Runtime, TrustedCas};
use crate::workers::Workers;

/// Orchard: a Kubernetes reconcile host for WebAssembly actuators.
#[derive(Debug, Parser)]
#[command(name = "orchard", version, about)]
pub struct Args {
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "ORCHARD_LOG_FORMAT")]
    log_format: LogFormat,
    /// Worker threads of the host's async runtime: `auto` (one on a node of at most two vCPUs
    /// or a CPU quota of at most two, else one per vCPU; `TOKIO_WORKER_THREADS` decides when
    /// set) or a number.
    #[arg(
        long,
        global = true,
        default_value = "auto",
        env = "ORCHARD_RUNTIME_WORKERS"
    )]
    runtime_workers: Workers,
    #[command(subcommand)]
    command: Command,
}

/// Log output formats.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// Options of the sandbox shared by every command that loads a plugin.
#[derive(Debug, clap::Args)]
pub struct SandboxArgs {
    /// Outbound HTTP destination the plugin may reach (`scheme://host[:port|:*]`); repeat.
    #[arg(
        long = "allow-host",
        env = "ORCHARD_ALLOW_HOSTS",
        value_delimiter = ','
    )]
    pub allow_hosts: Vec<String>,
    /// PEM file of certificate authorities the plugins' HTTPS destinations may chain to,
    /// besides the public (webpki) roots: the cluster's own CA; repeat.
    #[arg(
        long = "plugin-ca-file",
        env = "ORCHARD_PLUGIN_CA_FILES",
        value_delimiter = ',',
        value_hint = clap::ValueHint::FilePath
    )]
    pub plugin_ca_files: Vec<PathBuf>,
    /// Linear memory cap of one plugin instance, in MiB.
    #[arg(long, default_value_t = 64, env = "ORCHARD_PLUGIN_MEMORY_MIB")]
    pub memory_mib: usize,
    /// Deadline of one plugin call, in milliseconds.
    #[arg(long, default_value_t = 10_000, env = "ORCHARD_CALL_TIMEOUT_MS")]
    pub call_timeout_ms: u64,
    /// Directory of the compiled-component cache.
    #[arg(long, env = "ORCHARD_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Plugin instances the host runs at once, over all its kinds (a pass holds one); past
    /// them a pass waits for room within its call's deadline.
    #[arg(
        long,
        default_value_t = crate::runtime::engine::POOL.component_instances,
        env = "ORCHARD_INSTANCE_POOL",
        value_parser = clap::value_parser!(u32).range(1..=i64::from(crate::runtime::engine::MAX_POOL_INSTANCES))
    )]
    pub instance_pool: u32,
    /// How a plugin instance's memory is made ready for the next one: `scan` resets the pages
    /// its calls wrote (the default: every guest language but Python); `copy` resets the first
    /// 16 MiB whole, which can spend less CPU on a host that serves only Python plugins, at
    /// more memory, and slows every other guest's calls (docs/sandbox.md).
    #[arg(
        long,
        value_enum,
        default_value_t = MemoryResetArg::Scan,
        env = "ORCHARD_WASM_MEMORY_RESET"
    )]
    pub wasm_memory_reset: MemoryResetArg,
}

/// The values of `--wasm-memory-reset` ([`crate::runtime::engine::MemoryReset`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MemoryResetArg {
    /// Reset the pages a call wrote.
    Scan,
    /// Reset the first 16 MiB whole.
    Copy,
}

impl From<MemoryResetArg> for crate::runtime::engine::MemoryReset {
    fn from(arg: MemoryResetArg) -> Self {
        match arg {
            MemoryResetArg::Scan => Self::Scan,
            MemoryResetArg::Copy => Self::Copy,
        }
    }
}

impl SandboxArgs {
    /// The plugin configuration these flags describe.
    pub fn plugin_config(&self) -> anyhow::Result<PluginConfig> {
        Ok(PluginConfig {
            limits: Limits {
                memory_bytes: self.memory_mib << 20,
                call_timeout: Duration::from_millis(self.call_timeout_ms),
            },
            egress: EgressPolicy {
                trusted_cas: TrustedCas::from_pem_files(&self.plugin_ca_files)?,
                ..EgressPolicy::allowing(&self.allow_hosts)?
            },
        })
    }

    /// The compiled-component cache directory (`--cache-dir`, or the default).
    pub fn cache_dir(&self) -> Option<PathBuf> {
        self.cache_dir.clone().or_else(CompiledCache::default_dir)
    }

    /// A runtime with the configured cache, instance pool and memory reset.
    pub fn runtime(&self) -> anyhow::Result<Runtime> {
        Ok(Runtime::with_options(
            self.cache_dir(),
            crate::runtime::engine::PoolSize::for_instances(self.instance_pool),
            self.wasm_memory_reset.into(),
        )?)
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print what a plugin manages (its `describe()`), as JSON.
    Describe {
        /// The plugin component (.wasm).
        plugin: PathBuf,
        #[command(flatten)]
        sandbox: SandboxArgs,
    },
    /// Call one function of a plugin and print its result as JSON: the plugin author's inner loop.
    Invoke(InvokeArgs),
    /// Check a plugin against the contract on its real external system, rule by rule with
    /// evidence; exits non-zero when a rule fails (docs/conformance.md).
    Conformance(ConformanceArgs),
    /// Print the `CustomResourceDefinition` of a plugin's kind (YAML).
    Crd {
        /// The plugin component (.wasm).
        plugin: PathBuf,
        #[command(flatten)]
        sandbox: SandboxArgs,
    },
    /// Run the host: reconcile the kinds of the given plugins on the current kubeconfig.
    Run(Box<RunArgs>),
    /// Why an object is where it is: its verdict, conditions, the host serving it, its last
    /// passes and their plugin calls, its next pass and its Events.
    Explain(ExplainArgs),
    /// Plugins as OCI artifacts: push, pull, inspect; the Plugin CRD.
    #[command(subcommand)]
    Plugin(PluginCommand),
}

/// `orchard explain`.
#[derive(Debug, clap::Args)]
struct ExplainArgs {
    /// The object, as `KIND/NAME` (kind, plural, singular, short name or `<plural>.<group>`).
    target: String,
    /// Its namespace (default: the kubeconfig context's).
    #[arg(short = 'n', long)]
    namespace: Option<String>,
    /// The admin server of the host serving it, for its passes (default: the one its
    /// presence Lease announces).
    #[arg(long, env = "ORCHARD_ADMIN_URL")]
    admin: Option<String>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    output: Output,
}

impl ExplainArgs {
    async fn run(self) -> anyhow::Result<()> {
        crate::oci::ensure_crypto_provider();
        let client = kube::Client::try_default()
            .await
            .context("connecting to Kubernetes (KUBECONFIG or in-cluster)")?;
        let namespace = self
            .namespace
            .unwrap_or_else(|| client.default_namespace().to_owned());
        let explanation =
            crate::explain::explain(&client, &self.target, &namespace, self.admin.as_deref())
                .await?;
        match self.output {
            Output::Json => print(&serde_json::to_value(&explanation)?),
            Output::Text => write_stdout(
                crate::explain::render(&explanation, jiff::Timestamp::now()).trim_end(),
            ),
        }
    }
}

/// Options of every command that talks to a registry.
#[derive(Debug, clap::Args)]
pub struct RegistryArgs {
    /// A registry (`host[:port]`) reached over plain HTTP instead of HTTPS; repeat.
    #[arg(
        long = "insecure-registry",
        env = "ORCHARD_INSECURE_REGISTRIES",
        value_delimiter = ','
    )]
    pub insecure: Vec<String>,
}

#[derive(Debug, Subcommand)]
enum PluginCommand {
    /// Push a component to a registry in the CNCF Wasm layout; prints the pinned reference.
    Push {
        /// The component (.wasm).
        file: PathBuf,
        /// Where to push: `registry/repository:tag`.
        reference: String,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Pull a component (every digest verified) and write it to a file.
    Pull {
        /// `registry/repository:tag` or `…@sha256:…`.
        reference: String,
        /// Output file.
        #[arg(short, long)]
        output: PathBuf,
        /// Require a cosign signature made with this public key (PEM file).
        #[arg(long)]
        verify_key: Option<PathBuf>,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Print an artifact's digests, media types and the WIT world its component exports.
    Inspect {
        /// `registry/repository:tag` or `…@sha256:…`.
        reference: String,
        /// Also check its cosign signature with this public key (PEM file).
        #[arg(long)]
        verify_key: Option<PathBuf>,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Print the `CustomResourceDefinition` of the Plugin kind (YAML).
    Crd,
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// A plugin component (.wasm) to serve; repeat for several. Required unless
    /// --watch-plugins.
    #[arg(
        long = "plugin",
        required_unless_present = "watch_plugins",
        env = "ORCHARD_PLUGINS",
        value_delimiter = ','
    )]
    plugins: Vec<PathBuf>,
    /// Apply the plugins' CRDs (server-side) and wait until they are established; with
    /// --watch-plugins, the Plugin CRD and the CRDs of the Plugins' kinds too.
    #[arg(long, env = "ORCHARD_INSTALL_CRDS")]
    install_crds: bool,
    #[command(flatten)]
    reconcile: ReconcileArgs,
    #[command(flatten)]
    plugin_objects: PluginObjectArgs,
    #[command(flatten)]
    admin: AdminArgs,
    #[command(flatten)]
    leader: LeaderArgs,
    #[command(flatten)]
    shard: ShardArgs,
    #[command(flatten)]
    sandbox: SandboxArgs,
    #[command(flatten)]
    traces: TraceArgs,
    #[command(flatten)]
    conversion: ConversionArgs,
    // ---- bench-only (feature `bench-native`, used by bench/throughput) ----
    /// Serve the `--plugin` whose file stem is this (only `pdns-zone`) with the same actuator
    /// linked into the host instead of its component: the Wasm cost at system level.
    #[cfg(feature = "bench-native")]
    #[arg(long, hide = true)]
    native_plugin: Option<String>,
    // ---- end bench-only ----
}

/// What every kind's controller shares.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Reconcile")]
struct ReconcileArgs {
    /// Reconcile only objects in this namespace; repeat for several (default: all).
    #[arg(long = "namespace", env = "ORCHARD_NAMESPACES", value_delimiter = ',')]
    namespaces: Vec<String>,
    /// Resync period of objects that set no spec.resyncPeriod (e.g. 10m; 0s: never).
    #[arg(long, default_value = "0s", env = "ORCHARD_RESYNC_PERIOD", value_parser = duration)]
    resync_period: Duration,
    /// Reconciles in flight per plugin (the apiserver and the external system, not the host,
    /// are the limit: docs/benchmarks.md).
    #[arg(long, default_value_t = 16, env = "ORCHARD_CONCURRENCY", value_parser = clap::value_parser!(u16).range(1..))]
    concurrency: u16,
    /// This host's name in Events and as the leader Lease's holder.
    #[arg(long, default_value = "orchard", env = "ORCHARD_INSTANCE")]
    instance: String,
    /// Which Events to publish on the objects: `normal` (all) or `warning` (failures only;
    /// one apiserver write less per object created and per object deleted).
    #[arg(long, default_value = "normal", env = "ORCHARD_EVENTS", value_enum)]
    events: crate::reconcile::machinery::events::EventLevel,
    /// Test-only fail point.
    #[arg(long, hide = true, env = "ORCHARD_FAILPOINT", value_enum)]
    failpoint: Option<FailPoint>,
    /// Test instrument: append a line to this file when each pass begins and ends.
    #[arg(long, hide = true, env = "ORCHARD_PASS_TRACE")]
    pass_trace: Option<PathBuf>,
    /// How long reconciles in flight may take to finish after SIGTERM (e.g. 20s).
    #[arg(long, default_value = "20s", env = "ORCHARD_DRAIN_TIMEOUT", value_parser = duration)]
    drain_timeout: Duration,
    /// Longest wait for the apiserver's answer to one request; a request cut off is retried
    /// like any failed one (e.g. 20s).
    #[arg(long, default_value = "20s", env = "ORCHARD_API_TIMEOUT", value_parser = duration)]
    api_timeout: Duration,
}

/// Plugins served from `Plugin` objects.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Plugin objects")]
struct PluginObjectArgs {
    /// Also serve the plugins named by `Plugin` objects (orchard.dev/v1alpha1), loaded from
    /// OCI registries, hot-swapped when they change.
    #[arg(long, env = "ORCHARD_WATCH_PLUGINS")]
    watch_plugins: bool,
    /// Serve only the Plugins matching this label selector (e.g. `tier=edge`), to share
    /// Plugins among several hosts.
    #[arg(long, env = "ORCHARD_PLUGIN_SELECTOR")]
    plugin_selector: Option<String>,
    /// How often a Plugin's tag reference is re-resolved (e.g. 5m; at least 1s).
    #[arg(long, default_value = "5m", env = "ORCHARD_PLUGIN_POLL_INTERVAL", value_parser = duration)]
    plugin_poll_interval: Duration,
    /// Directory of the content-addressed cache of pulled artifacts.
    #[arg(long, env = "ORCHARD_OCI_CACHE_DIR")]
    oci_cache_dir: Option<PathBuf>,
    #[command(flatten)]
    registry: RegistryArgs,
}

/// The admin server.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Admin server")]
struct AdminArgs {
    /// Address of the admin server (/healthz, /readyz, /metrics), e.g. 127.0.0.1:9090
    /// (default: none).
    #[arg(long, env = "ORCHARD_ADMIN_ADDR")]
    admin_addr: Option<std::net::SocketAddr>,
}

/// The conversion webhook, for kinds whose plugin lists several API versions
/// (docs/schema-evolution.md).
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Conversion webhook")]
#[allow(clippy::struct_field_names, reason = "the flags' names")]
struct ConversionArgs {
    /// Serve the apiserver's conversion webhook (HTTPS, /convert) on this address, e.g.
    /// 0.0.0.0:9443 in a pod or 127.0.0.1:0 on a workstation (default: none; a kind with
    /// several versions is then refused).
    #[arg(long, env = "ORCHARD_CONVERSION_WEBHOOK_ADDR")]
    conversion_webhook_addr: Option<std::net::SocketAddr>,
    /// The URL the apiserver calls (default: https://<bound address>/convert).
    #[arg(
        long,
        env = "ORCHARD_CONVERSION_WEBHOOK_URL",
        conflicts_with = "conversion_webhook_service"
    )]
    conversion_webhook_url: Option<String>,
    /// The Service in front of the host's pods the apiserver calls instead, NAMESPACE/NAME:PORT
    /// (the chart sets it).
    #[arg(long, env = "ORCHARD_CONVERSION_WEBHOOK_SERVICE", value_parser = parse_service)]
    conversion_webhook_service: Option<WebhookReach>,
    /// A directory with tls.crt, tls.key and (optionally) ca.crt to serve with, e.g. a mounted
    /// cert-manager Secret (default: a private CA and certificate generated at start).
    #[arg(long, env = "ORCHARD_CONVERSION_WEBHOOK_CERT_DIR")]
    conversion_webhook_cert_dir: Option<PathBuf>,
}

/// `NAMESPACE/NAME:PORT`.
fn parse_service(text: &str) -> Result<WebhookReach, String> {
    let bad =
        || format!("{text:?}: expected NAMESPACE/NAME:PORT, e.g. orchard/orchard-webhook:443");
    let (namespace, rest) = text.split_once('/').ok_or_else(bad)?;
    let (name, port) = rest.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    if namespace.is_empty() || name.is_empty() {
        return Err(bad());
    }
    Ok(WebhookReach::Service {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        port,
    })
}

impl ConversionArgs {
    fn config(self) -> Option<ConversionWebhook> {
        let reach = self
            .conversion_webhook_service
            .or(self.conversion_webhook_url.map(WebhookReach::Url));
        self.conversion_webhook_addr.map(|addr| ConversionWebhook {
            addr,
            reach,
            cert_dir: self.conversion_webhook_cert_dir,
        })
    }
}

/// Traces of the passes (docs/observability.md).
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Traces (OpenTelemetry)")]
struct TraceArgs {
    /// Export a trace of every reconcile pass over OTLP/HTTP (protobuf) to this collector
    /// base URL, e.g. `http://otel-collector:4318` (`/v1/traces` is appended). Unset: no traces.
    /// The other standard OTEL_* variables apply (docs/observability.md).
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT", value_parser = otlp_endpoint)]
    otlp_endpoint: Option<String>,
    /// Fraction of passes traced, 0 to 1 (default: `OTEL_TRACES_SAMPLER`, else every pass).
    #[arg(long, env = "ORCHARD_TRACE_SAMPLE_RATIO", value_parser = ratio)]
    trace_sample_ratio: Option<f64>,
}

impl TraceArgs {
    fn config(&self) -> Option<crate::ops::traces::Config> {
        // The SDK's standard off switch.
        if std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.eq_ignore_ascii_case("true")) {
            return None;
        }
        Some(crate::ops::traces::Config {
            endpoint: self.otlp_endpoint.clone()?,
            sample_ratio: self.trace_sample_ratio,
        })
    }
}

/// An `http://` or `https://` URL with a host.
fn otlp_endpoint(text: &str) -> Result<String, String> {
    match text.parse::<http::Uri>() {
        Ok(uri) if matches!(uri.scheme_str(), Some("http" | "https")) && uri.host().is_some() => {
            Ok(text.to_owned())
        }
        _ => Err(format!(
            "{text:?} is not an OTLP/HTTP endpoint (e.g. http://otel-collector:4318)"
        )),
    }
}

/// A fraction between 0 and 1.
fn ratio(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(format!(
            "{text:?} is not a fraction between 0 and 1 (e.g. 0.1)"
        )),
    }
}

/// Leader election.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Leader election")]
struct LeaderArgs {
    /// Reconcile only while holding the leader Lease (for several replicas).
    #[arg(long, env = "ORCHARD_LEADER_ELECT")]
    leader_elect: bool,
    /// Name of the leader Lease.
    #[arg(long, default_value = "orchard-leader", env = "ORCHARD_LEASE_NAME")]
    lease_name: String,
    /// The host's namespace: the leader Lease's, and that of pull Secrets that name none
    /// (in a pod: its own namespace).
    #[arg(long, default_value = "default", env = "POD_NAMESPACE")]
    lease_namespace: String,
    /// Lease duration in seconds: a dead leader is replaced within it.
    #[arg(long, default_value_t = 15, env = "ORCHARD_LEASE_SECONDS", value_parser = clap::value_parser!(u64).range(3..=3600))]
    lease_seconds: u64,
}

/// Sharding.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Sharding")]
struct ShardArgs {
    /// Share the objects of every kind with the other replicas of this ring (a label value):
    /// each replica reconciles only the objects of its buckets (docs/sharding.md), of the
    /// --plugin files' kinds and the Plugins' alike. Uses --lease-seconds and the host's
    /// namespace; --instance must be unique (the pod's name).
    #[arg(
        long,
        env = "ORCHARD_SHARD_RING",
        value_parser = ring_name,
        conflicts_with = "leader_elect"
    )]
    shard_ring: Option<String>,
}

/// A ring name: a label value of 1–40 characters `[a-z0-9-]`, starting and ending alphanumeric.
fn ring_name(text: &str) -> Result<String, String> {
    let ok = (1..=40).contains(&text.len())
        && text
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !text.starts_with('-')
        && !text.ends_with('-');
    if ok {
        Ok(text.to_owned())
    } else {
        Err(format!(
            "{text:?} is not a ring name: 1-40 characters of a-z, 0-9 and '-', not starting or ending with '-'"
        ))
    }
}

/// A duration flag (`500ms`, `10s`, `5m`, `1h`).
fn duration(text: &str) -> Result<Duration, String> {
    crate::reconcile::parse_duration(text)
        .ok_or_else(|| format!("{text:?} is not a duration (e.g. 500ms, 10s, 5m, 1h)"))
}

/// Functions `orchard invoke` can call.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Function {
    Describe,
    GetById,
    ListForAdoption,
    ListForImport,
    Create,
    Delete,
    Reconcilers,
    RunReconciler,
    Available,
    Observed,
    /// `conversion.convert`: the `--object` manifest at `--to` (its whole object, as the
    /// conversion webhook answers it).
    Convert,
}

#[derive(Debug, clap::Args)]
struct InvokeArgs {
    /// The plugin component (.wasm).
    plugin: PathBuf,
    /// The function to call.
    #[arg(value_enum)]
    function: Function,
    /// The managed object (a Kubernetes manifest, YAML or JSON).
    #[arg(long)]
    object: Option<PathBuf>,
    /// The external id (default: the object's status.id). Functions that take a resource
    /// fetch it with get-by-id first.
    #[arg(long)]
    id: Option<String>,
    /// The import filter, JSON (default: the object's spec.import.filter).
    #[arg(long)]
    filter: Option<String>,
    /// The reconciler to run (run-reconciler).
    #[arg(long)]
    reconciler: Option<String>,
    /// The API version to convert the object to (convert), e.g. v1beta1.
    #[arg(long)]
    to: Option<String>,
    /// A credentials entry `KEY=VALUE`, as if from the credentials Secret; repeat.
    #[arg(long = "credential")]
    credentials: Vec<String>,
    /// A dependency `NAME=FILE` (a manifest of the referenced object: its kind, name,
    /// status.id and status.resource reach the plugin) or `NAME=Kind/name` (read from the
    /// current kubeconfig's cluster, in the object's namespace); repeat.
    #[arg(long = "dependency")]
    dependencies: Vec<DependencyArg>,
    /// Also print, on stderr, what the plugin reported during the call (the `report`
    /// import): its drifts as `status.drift` shows them, sensitive values and every
    /// connection detail's value masked.
    #[arg(long)]
    show_reports: bool,
    #[command(flatten)]
    sandbox: SandboxArgs,
}

/// How `orchard conformance` prints its report.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Output {
    /// For a person (conformance: a table, one row per rule, evidence below it).
    Text,
    /// The report as JSON.
    Json,
}

#[derive(Debug, clap::Args)]
struct ConformanceArgs {
    /// The plugin component (.wasm).
    plugin: PathBuf,
    /// The sample object (a Kubernetes manifest, YAML or JSON) whose resource the kit
    /// creates, checks and deletes; nothing of that name may exist yet.
    #[arg(long)]
    object: PathBuf,
    /// A credentials entry `KEY=VALUE`, as if from the credentials Secret; repeat.
    #[arg(long = "credential")]
    credentials: Vec<String>,
    /// A dependency `NAME=FILE` or `NAME=Kind/name`, as for `invoke`; repeat.
    #[arg(long = "dependency")]
    dependencies: Vec<DependencyArg>,
    /// The import filter, JSON, for the import-by-filter rule (default: the sample's
    /// spec.import.filter; without one the rule is skipped). It must match the resource
    /// the sample creates.
    #[arg(long)]
    import_filter: Option<String>,
    /// How long one phase may wait on the external system (e.g. 60s).
    #[arg(long, default_value = "60s", value_parser = duration)]
    wait: Duration,
    /// Report format on stdout.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    output: Output,
    #[command(flatten)]
    sandbox: SandboxArgs,
}

impl Args {
    /// The async runtime the command runs on (`--runtime-workers`).
    pub fn async_runtime(&self) -> std::io::Result<tokio::runtime::Runtime> {
        self.runtime_workers.runtime()
    }

    /// Runs the command; errors are printed with their causes.
    pub async fn run(self) -> ExitCode {
        let traces = match &self.command {
            Command::Run(run) => run.traces.config(),
            _ => None,
        };
        let telemetry = match init_tracing(self.log_format, traces.as_ref()) {
            Ok(telemetry) => telemetry,
            Err(e) => {
                eprintln!("error: {}", error_chain(&e.into()));
                return ExitCode::FAILURE;
            }
        };
        // rustls is built with two crypto providers (kube's ring, sigstore's aws-lc-rs): every
        // TLS client of the process uses ring.
        crate::oci::ensure_crypto_provider();
        let outcome = self.command.run().await;
        if let Some(telemetry) = telemetry {
            telemetry.shutdown().await;
        }
        match outcome {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {}", error_chain(&e));
                ExitCode::FAILURE
            }
        }
    }
}

/// The error and its causes, leaving out a cause whose text the message before already shows
/// (typed errors often print their source in their own message).
fn error_chain(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !out.contains(&text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
    }
    out
}

/// The log on stderr (`RUST_LOG`'s filter) and, with a trace config, the OpenTelemetry export
/// of the host's own spans beside it (its own filter: a quiet log still exports its traces).
fn init_tracing(
    format: LogFormat,
    traces: Option<&crate::ops::traces::Config>,
) -> Result<Option<crate::ops::traces::Telemetry>, crate::ops::traces::Error> {
    use tracing_subscriber::prelude::*;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        // sigstore logs every missing signature layer as a warning; the host reports the outcome.
        tracing_subscriber::EnvFilter::new(
            "info,wasmtime_cranelift=warn,cranelift_codegen=warn,sigstore=error",
        )
    });
    let log = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let log = match format {
        LogFormat::Text => log.fmt_fields(crate::ops::traces::LogFields).boxed(),
        LogFormat::Json => log.json().boxed(),
    };
    let telemetry = traces
        .map(crate::ops::traces::Telemetry::start)
        .transpose()?;
    let export = telemetry.as_ref().map(crate::ops::traces::Telemetry::layer);
    let _ = tracing_subscriber::registry()
        .with(log.with_filter(filter))
        .with(export)
        .try_init();
    Ok(telemetry)
}

fn print(value: &Value) -> anyhow::Result<()> {
    write_stdout(&serde_json::to_string_pretty(value)?)
}

/// Writes to stdout; a closed pipe (`| head`) is not an error.
fn write_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

impl Command {
    async fn run(self) -> anyhow::Result<()> {
        match self {
            Self::Describe { plugin, sandbox } => {
                let actuator =
                    sandbox
                        .runtime()?
                        .load_file(&plugin, None, sandbox.plugin_config()?)?;
                print(&serde_json::to_value(actuator.describe().await?)?)
            }
            Self::Invoke(args) => args.run().await,
            Self::Conformance(args) => args.run().await,
            Self::Crd { plugin, sandbox } => {
                let actuator =
                    sandbox
                        .runtime()?
                        .load_file(&plugin, None, sandbox.plugin_config()?)?;
                let crd = crate::crd::crd(&actuator.describe().await?);
                write_stdout(serde_yaml::to_string(&crd)?.trim_end())
            }
            Self::Run(args) => (*args).run().await,
            Self::Explain(args) => args.run().await,
            Self::Plugin(command) => command.run().await,
        }
    }
}

impl RegistryArgs {
    fn registry(&self) -> crate::oci::Registry {
        crate::oci::Registry::new(crate::oci::RegistryOptions {
            insecure: self.insecure.clone(),
            cache_dir: None,
        })
    }
}

/// The local docker config's credentials for the registry of `reference`.
fn local_auth(reference: &str) -> anyhow::Result<oci_client::secrets::RegistryAuth> {
    let parsed = crate::oci::parse_reference(reference)?;
    Ok(crate::oci::Credentials::LocalDockerConfig.for_registry(parsed.resolve_registry())?)
}

async fn verify_with(
    key: &std::path::Path,
    artifact: &crate::oci::Artifact,
    registry: &RegistryArgs,
) -> anyhow::Result<()> {
    let pem = std::fs::read(key).with_context(|| format!("reading {}", key.display()))?;
    let key = crate::oci::verify::SignatureKey::from_pem(&pem)
        .map_err(|e| anyhow::anyhow!("--verify-key {}: {e}", key.display()))?;
    key.verify(
        &artifact.pinned,
        &local_auth(&artifact.pinned)?,
        &registry.insecure,
    )
    .await?;
    Ok(())
}

impl PluginCommand {
    async fn run(self) -> anyhow::Result<()> {
        match self {
            Self::Push {
                file,
                reference,
                registry,
            } => {
                let bytes =
                    std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
                if crate::oci::ComponentWorld::of(&bytes).is_none() {
                    bail!("{} is not a Wasm component", file.display());
                }
                let auth = local_auth(&reference)?;
                let title = file.file_name().and_then(|n| n.to_str());
                let pushed = registry
                    .registry()
                    .push(&bytes, &reference, &auth, title)
                    .await?;
                write_stdout(&pushed.pinned)
            }
            Self::Pull {
                reference,
                output,
                verify_key,
                registry,
            } => {
                let auth = local_auth(&reference)?;
                let artifact = registry.registry().pull(&reference, &auth).await?;
                if let Some(key) = &verify_key {
                    verify_with(key, &artifact, &registry).await?;
                }
                std::fs::write(&output, &artifact.bytes)
                    .with_context(|| format!("writing {}", output.display()))?;
                write_stdout(&artifact.pinned)
            }
            Self::Inspect {
                reference,
                verify_key,
                registry,
            } => {
                let auth = local_auth(&reference)?;
                let artifact = registry.registry().pull(&reference, &auth).await?;
                let signature = match &verify_key {
                    Some(key) => {
                        verify_with(key, &artifact, &registry).await?;
                        json!("verified")
                    }
                    None => Value::Null,
                };
                let world = crate::oci::ComponentWorld::of(&artifact.bytes);
                print(&json!({
                    "reference": artifact.pinned,
                    "manifestDigest": artifact.manifest_digest,
                    "config": {"mediaType": artifact.config_media_type, "content": artifact.config},
                    "layer": {
                        "mediaType": artifact.layer.media_type,
                        "digest": artifact.layer.digest,
                        "size": artifact.layer.size,
                    },
                    "world": world,
                    "signature": signature,
                }))
            }
            Self::Crd => write_stdout(serde_yaml::to_string(&crate::plugin::crd())?.trim_end()),
        }
    }
}

/// `--credential KEY=VALUE` flags into the object's credentials.
fn add_credentials(obj: &mut ManagedObject, entries: &[String]) -> anyhow::Result<()> {
    for entry in entries {
        let (k, v) = entry
            .split_once('=')
            .with_context(|| format!("--credential {entry:?}: expected KEY=VALUE"))?;
        obj.credentials.insert(k.to_owned(), v.as_bytes().to_vec());
    }
    Ok(())
}

impl ConformanceArgs {
    async fn run(self) -> anyhow::Result<()> {
        use crate::conformance::{self, Error, inputs};
        let actuator =
            self.sandbox
                .runtime()?
                .load_file(&self.plugin, None, self.sandbox.plugin_config()?)?;
        let manifest = inputs::read_manifest(&self.object)?;
        let mut obj = ManagedObject::from_manifest(&manifest);
        add_credentials(&mut obj, &self.credentials)?;
        let d = actuator.describe().await?;
        let missing = inputs::fill(&mut obj, &d, &self.dependencies).await?;
        if let Some(decl) = missing.first() {
            return Err(Error::MissingDependency {
                name: decl.name.clone(),
                field: decl.field.clone(),
                kind: decl.kind.clone(),
            }
            .into());
        }
        let import_filter = match &self.import_filter {
            Some(f) => Some(serde_json::from_str(f).context("--import-filter is not JSON")?),
            None => Some(manifest["spec"]["import"]["filter"].clone()).filter(|f| !f.is_null()),
        };
        let report = conformance::run(
            &actuator,
            conformance::Options {
                object: obj,
                import_filter,
                budget: conformance::Budget {
                    total: self.wait,
                    ..conformance::Budget::default()
                },
            },
        )
        .await?;
        match self.output {
            Output::Text => write_stdout(&report.table())?,
            Output::Json => print(&serde_json::to_value(&report)?)?,
        }
        let failed: Vec<&str> = report.failed().iter().map(|r| r.as_str()).collect();
        if !failed.is_empty() {
            bail!(
                "{} broke {} rule(s): {}",
                report.plugin,
                failed.len(),
                failed.join(", ")
            );
        }
        if !report.cleanup.leftovers.is_empty() {
            let ids: Vec<&str> = report
                .cleanup
                .leftovers
                .iter()
                .map(|l| l.id.as_str())
                .collect();
            bail!(
                "{} left resources behind: {}",
                report.plugin,
                ids.join(", ")
            );
        }
        Ok(())
    }
}

fn read_manifest(path: &PathBuf) -> anyhow::Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_yaml::from_str(&text).with_context(|| format!("parsing {} as YAML", path.display()))
}

impl InvokeArgs {
    async fn run(self) -> anyhow::Result<()> {
        let loaded =
            self.sandbox
                .runtime()?
                .load_file(&self.plugin, None, self.sandbox.plugin_config()?)?;
        // One pass's view, as the host makes for each pass: the call (and the get-by-id before
        // it) share one instance, and what the plugin reports is kept for `--show-reports`.
        let pass = loaded.for_pass();
        let actuator: &dyn crate::actuator::Actuator = pass.as_deref().unwrap_or(&loaded);
        let manifest = self.object.as_ref().map(read_manifest).transpose()?;
        // No `--object`: the call gets an empty object (no spec), which is what the user asked.
        let mut obj = manifest
            .as_ref()
            .map(ManagedObject::from_manifest)
            .unwrap_or_default();
        add_credentials(&mut obj, &self.credentials)?;
        if !self.dependencies.is_empty() {
            let d = actuator.describe().await?;
            for decl in crate::conformance::inputs::fill(&mut obj, &d, &self.dependencies).await? {
                tracing::warn!(
                    dependency = %decl.name,
                    "the object's spec.resource.{} names a {} that no --dependency {}=… gives: the plugin will not see it",
                    decl.field, decl.kind, decl.name
                );
            }
        }
        let id = self.id.clone().or_else(|| obj.status_id.clone());
        let needs_id = || {
            id.clone()
                .context("this function needs --id (or status.id in --object)")
        };

        let out = match self.function {
            Function::Describe => serde_json::to_value(actuator.describe().await?)?,
            Function::GetById => json!(actuator.get_by_id(&obj, &needs_id()?).await?),
            Function::ListForAdoption => json!(actuator.list_for_adoption(&obj).await?),
            Function::ListForImport => {
                let filter: Value = match (&self.filter, &manifest) {
                    (Some(f), _) => serde_json::from_str(f).context("--filter is not JSON")?,
                    (None, Some(m)) if !m["spec"]["import"]["filter"].is_null() => {
                        m["spec"]["import"]["filter"].clone()
                    }
                    _ => {
                        bail!("list-for-import needs --filter (or spec.import.filter in --object)")
                    }
                };
                json!(actuator.list_for_import(&obj, &filter).await?)
            }
            Function::Create => json!(actuator.create(&obj).await?),
            Function::Convert => {
                let manifest = manifest.as_ref().context("convert needs --object")?;
                let to = self.to.as_deref().context("convert needs --to VERSION")?;
                let api_version = manifest["apiVersion"].as_str().unwrap_or_default();
                let (group, from) = api_version
                    .split_once('/')
                    .context("the object's apiVersion is not GROUP/VERSION")?;
                match actuator
                    .convert(&crate::conversion::parts(manifest), from, to)
                    .await?
                {
                    Ok(c) => {
                        crate::conversion::assemble(manifest, &format!("{group}/{to}"), group, c)
                    }
                    Err(f) => bail!("convert {from} to {to} failed: {} failure: {f}", f.reason()),
                }
            }
            Function::Delete
            | Function::Reconcilers
            | Function::RunReconciler
            | Function::Available
            | Function::Observed => {
                let id = needs_id()?;
                let res = match actuator.get_by_id(&obj, &id).await? {
                    Ok(Some(res)) => res,
                    Ok(None) => bail!("get-by-id {id}: the resource does not exist"),
                    Err(f) => bail!("get-by-id {id} failed: {f}"),
                };
                match self.function {
                    Function::Delete => json!(actuator.delete(&obj, &res).await?),
                    Function::Reconcilers => json!(actuator.reconcilers(&obj, &res).await?),
                    Function::RunReconciler => {
                        let name = self
                            .reconciler
                            .as_deref()
                            .context("run-reconciler needs --reconciler")?;
                        json!(actuator.run_reconciler(name, &obj, &res).await?)
                    }
                    Function::Available => json!(actuator.available(&obj, &res).await?),
                    _ => actuator.observed(&res).await?,
                }
            }
        };
        if self.show_reports {
            let reports = serde_json::to_string_pretty(&actuator.take_reports().shown())?;
            eprintln!("reports of the call:\n{reports}");
        }
        print(&out)
    }
}

impl RunArgs {
    /// The host these flags describe.
    fn config(self) -> anyhow::Result<AppConfig> {
        let Self {
            plugins,
            install_crds,
            reconcile,
            plugin_objects,
            admin,
            leader,
            shard,
            sandbox,
            traces: _,
            conversion,
            #[cfg(feature = "bench-native")]
            native_plugin,
        } = self;
        let static_plugins = plugins
            .into_iter()
            .map(|path| StaticPlugin {
                #[cfg(feature = "bench-native")]
                native: native_plugin.as_deref() == Some("pdns-zone"),
                path,
            })
            .collect();
        Ok(AppConfig {
            static_plugins,
            plugin_objects: plugin_objects.watch_plugins.then(|| PluginObjects {
                selector: plugin_objects.plugin_selector,
                poll_interval: plugin_objects.plugin_poll_interval,
                insecure_registries: plugin_objects.registry.insecure,
                oci_cache_dir: plugin_objects.oci_cache_dir.or_else(default_oci_cache_dir),
            }),
            compiled_cache_dir: sandbox.cache_dir(),
            instance_pool: sandbox.instance_pool,
            memory_reset: sandbox.wasm_memory_reset.into(),
            sandbox: sandbox.plugin_config()?,
            reconcile: ReconcileConfig {
                namespaces: reconcile.namespaces,
                default_resync: Some(reconcile.resync_period).filter(|d| !d.is_zero()),
                concurrency: reconcile.concurrency,
                instance: reconcile.instance,
                events: reconcile.events,
                fail_point: reconcile.failpoint,
                pass_trace: reconcile.pass_trace,
            },
            install_crds,
            admin_addr: admin.admin_addr,
            leader_election: leader.leader_elect.then(|| LeaderElection {
                namespace: leader.lease_namespace.clone(),
                name: leader.lease_name,
                lease_duration: Duration::from_secs(leader.lease_seconds),
            }),
            sharding: shard.shard_ring.map(|ring| Sharding {
                ring,
                lease_duration: Duration::from_secs(leader.lease_seconds),
            }),
            host_namespace: leader.lease_namespace,
            presence_lease: Duration::from_secs(leader.lease_seconds),
            drain_timeout: reconcile.drain_timeout,
            api_timeout: reconcile.api_timeout,
            conversion_webhook: conversion.config(),
        })
    }

    async fn run(self) -> anyhow::Result<()> {
        let app = App::new(self.config()?);
        let shutdown = tokio_util::sync::CancellationToken::new();
        let on_signal = shutdown.clone();
        tokio::spawn(async move {
            shutdown_signal().await;
            on_signal.cancel();
        });
        Ok(app.run(shutdown).await?)
    }
}

/// `$XDG_CACHE_HOME/orchard/oci` or `~/.cache/orchard/oci`.
fn default_oci_cache_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|d| d.join("orchard").join("oci"))
}

/// SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        else {
            let _ = ctrl_c.await;
            return;
        };
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::SandboxArgs;

    #[derive(Debug, Parser)]
    struct Sandbox {
        #[command(flatten)]
        sandbox: SandboxArgs,
    }

    fn run_args(args: &[&str]) -> Result<super::Args, clap::Error> {
        super::Args::try_parse_from(["orchard", "run"].into_iter().chain(args.iter().copied()))
    }

    #[test]
    fn a_shard_ring_serves_plugin_objects_too_but_never_under_a_leader() {
        run_args(&["--shard-ring", "main", "--watch-plugins"]).unwrap();
        run_args(&["--shard-ring", "main", "--plugin", "p.wasm"]).unwrap();
        let err =
            run_args(&["--shard-ring", "main", "--watch-plugins", "--leader-elect"]).unwrap_err();
        assert_eq!(
            err.kind(),
            clap::error::ErrorKind::ArgumentConflict,
            "{err}"
        );
        assert!(err.to_string().contains("--shard-ring"), "{err}");
    }

    fn instance_pool(args: &[&str]) -> Result<u32, clap::Error> {
        Sandbox::try_parse_from(std::iter::once("orchard").chain(args.iter().copied()))
            .map(|s| s.sandbox.instance_pool)
    }

    #[test]
    fn the_wasm_memory_reset_defaults_to_scan_and_takes_copy() {
        use crate::runtime::engine::MemoryReset;
        let reset = |args: &[&str]| {
            Sandbox::try_parse_from(std::iter::once("orchard").chain(args.iter().copied()))
                .map(|s| MemoryReset::from(s.sandbox.wasm_memory_reset))
        };
        assert_eq!(reset(&[]).unwrap(), MemoryReset::Scan);
        assert_eq!(
            reset(&["--wasm-memory-reset", "scan"]).unwrap(),
            MemoryReset::Scan
        );
        assert_eq!(
            reset(&["--wasm-memory-reset", "copy"]).unwrap(),
            MemoryReset::Copy
        );
        let err = reset(&["--wasm-memory-reset", "memset"]).unwrap_err();
        assert!(
            err.to_string().contains("--wasm-memory-reset") && err.to_string().contains("copy"),
            "{err}"
        );
    }

    #[test]
    fn the_instance_pool_defaults_to_256_and_takes_1_to_1024() {
        assert_eq!(instance_pool(&[]).unwrap(), 256);
        assert_eq!(instance_pool(&["--instance-pool", "1"]).unwrap(), 1);
        assert_eq!(instance_pool(&["--instance-pool", "1024"]).unwrap(), 1024);
        for bad in ["0", "1025", "lots"] {
            let err = instance_pool(&["--instance-pool", bad]).unwrap_err();
            assert!(err.to_string().contains("--instance-pool"), "{err}");
        }
    }
}
