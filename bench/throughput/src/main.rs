//! Throughput at scale (issue 13): N objects of a kind created at once by parallel clients in a
//! fresh namespace, timed until all are `Available=True` (one watch) and until all are gone
//! after deleting them, for several contenders one after the other in the same run.
//!
//! Started by `bench/run.sh` (which builds what is needed and brings up the test environment);
//! the environment comes from the env file's variables (`KUBECONFIG`, `PDNS_API_URL`, …).
//! Writes `results.json`, `summary.md` and one `<contender>.csv` time series per contender
//! into `--out`.
// The result object is one `json!` literal with more fields than serde_json's default
// macro recursion limit allows.
#![recursion_limit = "256"]
#![forbid(unsafe_code)]
// The report divides counts (objects, requests, KiB) as `f64`; they stay far below 2^52.
#![allow(clippy::cast_precision_loss)]

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

#[derive(Debug, Parser)]
#[command(name = "orchard-throughput", about)]
struct Args {
    /// Objects per contender.
    #[arg(long, default_value_t = 1000)]
    objects: usize,
    /// Objects for the Python-guest contender (default: min(--objects, 200); RabbitMQ creates
    /// vhosts slowly, and the figures are reported per object).
    #[arg(long)]
    python_objects: Option<usize>,
    /// Contenders, in order.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "orchard-component,orchard-native,kopf,orchard-python,floor"
    )]
    contenders: Vec<Contender>,
    /// Parallel clients creating (and deleting) the objects.
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// The `orchard` binary (release build).
    #[arg(long)]
    orchard_bin: PathBuf,
    /// The `orchard` binary built with `--features bench-native` (orchard-native).
    #[arg(long)]
    orchard_native_bin: Option<PathBuf>,
    /// Directory of the plugin components (`pdns_zone.wasm`, `rabbitmq_vhost.wasm`).
    #[arg(long)]
    plugin_dir: PathBuf,
    /// The bench venv (kopf installed).
    #[arg(long)]
    venv: Option<PathBuf>,
    /// The kopf operator.
    #[arg(long, default_value = "bench/kopf/operator.py")]
    kopf_operator: PathBuf,
    /// The kopf-expert operator (issue 25).
    #[arg(long, default_value = "bench/kopf/expert.py")]
    kopf_expert_operator: PathBuf,
    /// The kopf-expert venv (kopf and uvloop: bench/requirements-expert.txt; default: --venv).
    #[arg(long)]
    kopf_expert_venv: Option<PathBuf>,
    /// The metacontroller binary (bench/metacontroller/build.sh).
    #[arg(long)]
    metacontroller_bin: Option<PathBuf>,
    /// metacontroller's CRDs (its manifests/production/metacontroller-crds-v1.yaml), applied
    /// server-side before a metacontroller contender starts.
    #[arg(long)]
    metacontroller_crds: Option<PathBuf>,
    /// The metacontroller contenders' hook server.
    #[arg(long, default_value = "bench/metacontroller/hooks.py")]
    metacontroller_hooks: PathBuf,
    /// The metacontroller contenders' `DecoratorController` (`{{HOOKS}}`: the hook server's
    /// address).
    #[arg(long, default_value = "bench/metacontroller/decorator.json")]
    metacontroller_decorator: PathBuf,
    /// The Python that runs the hook server (standard library only).
    #[arg(long, default_value = "python3")]
    hooks_python: PathBuf,
    /// The `orchard-floor` binary (the floor contender; default: beside this one).
    #[arg(long)]
    floor_bin: Option<PathBuf>,
    /// The test environment's state directory (its `pids/<name>.pid` files give the servers
    /// whose CPU is reported); the env file sets `ORCHARD_TESTENV_DIR`.
    #[arg(long, env = "ORCHARD_TESTENV_DIR")]
    testenv_dir: Option<PathBuf>,
    /// Output directory.
    #[arg(long)]
    out: PathBuf,
    /// Deadline of each phase (all Available, all deleted), in seconds.
    #[arg(long, default_value_t = 900)]
    timeout_s: u64,
    /// Seconds to wait after all are deleted before reading the contender's RSS.
    #[arg(long, default_value_t = 5)]
    settle_s: u64,
    /// The commit measured (for the report).
    #[arg(long, default_value = "")]
    commit: String,
    /// Orchard contenders: once all are Available, stop the host and start a new one over them,
    /// and time until it has reconciled every object once (a restart's resync).
    #[arg(long)]
    restart: bool,
    /// Extra argument for the restarted `orchard run` only; repeat. With a resync period
    /// shorter than the objects' age (e.g. `--restart-arg=--resync-period --restart-arg=1s`)
    /// the new host resyncs every object against the external system, and the harness also
    /// times until each object's `status.lastSyncTime` is past the restart.
    #[arg(long = "restart-arg", allow_hyphen_values = true)]
    restart_flags: Vec<String>,
    /// Extra argument for every `orchard run`; repeat.
    #[arg(long = "orchard-arg", allow_hyphen_values = true)]
    orchard_flags: Vec<String>,
    /// orchard-component: load the `pdns-record` plugin too and, once every zone is Available,
    /// create one `DnsRecord` in each zone (2 × N objects of two kinds), timed until all are
    /// Available; they are deleted (and timed) before the zones.
    #[arg(long)]
    records: bool,
}

/// The job a contender is given.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Job {
    /// `DnsZone` objects, zones in PowerDNS.
    Pdns,
    /// `RabbitVhost` objects, vhosts in RabbitMQ.
    Rabbit,
}

impl Job {
    fn resource(self) -> ApiResource {
        let (group, kind) = match self {
            Job::Pdns => ("pdns.orchard.dev", "DnsZone"),
            Job::Rabbit => ("rabbitmq.orchard.dev", "RabbitVhost"),
        };
        ApiResource {
            group: group.into(),
            version: "v1alpha1".into(),
            api_version: format!("{group}/v1alpha1"),
            kind: kind.into(),
            plural: format!("{}s", kind.to_ascii_lowercase()),
        }
    }
    fn plugin_file(self) -> &'static str {
        match self {
            Job::Pdns => "pdns_zone.wasm",
            Job::Rabbit => "rabbitmq_vhost.wasm",
        }
    }
    fn secret(self) -> &'static str {
        match self {
            Job::Pdns => "pdns",
            Job::Rabbit => "rabbitmq",
        }
    }
    fn external_name(self, run: &str, i: usize) -> String {
        match self {
            Job::Pdns => format!("z{i}.{run}.bench."),
            Job::Rabbit => format!("bench-{run}-{i}"),
        }
    }
    fn manifest(self, run: &str, i: usize) -> DynamicObject {
        DynamicObject::new(&format!("o{i}"), &self.resource()).data(json!({
            "spec": {
                "credentialsRef": {"secretName": self.secret()},
                "resource": {"name": self.external_name(run, i)},
            },
        }))
    }
}

/// `--records`: the `DnsRecord` kind of the `pdns-record` plugin.
fn record_resource() -> ApiResource {
    ApiResource {
        group: "pdns.orchard.dev".into(),
        version: "v1alpha1".into(),
        api_version: "pdns.orchard.dev/v1alpha1".into(),
        kind: "DnsRecord".into(),
        plural: "dnsrecords".into(),
    }
}

/// `--records`: record `r{i}`, an A record `www` in zone `o{i}`.
fn record_manifest(i: usize) -> DynamicObject {
    DynamicObject::new(&format!("r{i}"), &record_resource()).data(json!({
        "spec": {
            "credentialsRef": {"secretName": "pdns"},
            "resource": {"zoneRef": format!("o{i}"), "name": "www", "type": "A", "ttl": 300,
                         "records": ["192.0.2.1"]},
        },
    }))
}

/// Whether this contender runs `--records`.
fn with_records(args: &Args, contender: Contender) -> bool {
    args.records && contender == Contender::OrchardComponent
}

#[derive(Debug, Clone, Copy, PartialEq, clap::ValueEnum)]
enum Contender {
    OrchardComponent,
    /// orchard-component with `--events warning`: no Normal Events, like kopf's defaults.
    OrchardWarning,
    OrchardNative,
    /// orchard-component as three replicas of one shard ring on this machine
    /// ([`SHARD_REPLICAS`]; issue 25): each serves a third of the buckets, every replica's
    /// CPU and memory count.
    OrchardSharded,
    /// kopf at its defaults: kopf 1.45 (`settings.posting.loggers = False`) posts no Events of
    /// its own.
    Kopf,
    /// kopf with its handlers' log lines posted as Events (`settings.posting.loggers = True`),
    /// as Orchard's default `--events normal` posts its own.
    KopfEvents,
    /// What a seasoned kopf author writes (bench/kopf/expert.py, issue 25): credentials from a
    /// kopf index of Secrets, async handlers over one aiohttp session, annotations-only
    /// progress storage, no Event posting, uvloop.
    KopfExpert,
    /// metacontroller (built from its source) at its defaults, a `DecoratorController` over
    /// `DnsZone` whose hooks (bench/metacontroller/hooks.py, one more process) do the job.
    Metacontroller,
    /// The same, tuned: [`METACONTROLLER_TUNED`].
    MetacontrollerTuned,
    OrchardPython,
    /// `orchard-floor` (`src/bin/floor.rs`): the least a leak-safe operator asks of the
    /// apiserver for the `DnsZone` job, i.e. the ceiling of this machine.
    Floor,
}

impl Contender {
    fn name(self) -> &'static str {
        match self {
            Self::OrchardComponent => "orchard-component",
            Self::OrchardNative => "orchard-native",
            Self::OrchardWarning => "orchard-warning",
            Self::OrchardSharded => "orchard-sharded",
            Self::Kopf => "kopf",
            Self::KopfEvents => "kopf-events",
            Self::KopfExpert => "kopf-expert",
            Self::Metacontroller => "metacontroller",
            Self::MetacontrollerTuned => "metacontroller-tuned",
            Self::OrchardPython => "orchard-python",
            Self::Floor => "floor",
        }
    }
    fn short(self) -> &'static str {
        match self {
            Self::OrchardComponent => "oc",
            Self::OrchardNative => "on",
            Self::OrchardWarning => "ow",
            Self::OrchardSharded => "osh",
            Self::Kopf => "kopf",
            Self::KopfEvents => "kopfe",
            Self::KopfExpert => "kopfx",
            Self::Metacontroller => "mc",
            Self::MetacontrollerTuned => "mct",
            Self::OrchardPython => "op",
            Self::Floor => "fl",
        }
    }
    /// Whether the contender posts an Event when it creates or deletes: Orchard at its default
    /// `--events normal` (unless `--orchard-arg` says `--events warning`), kopf with its
    /// handlers' logs posted.
    fn posts_normal_events(self, orchard_flags: &[String]) -> bool {
        let warning_only = orchard_flags.iter().any(|f| f == "--events=warning")
            || orchard_flags
                .windows(2)
                .any(|w| w[0] == "--events" && w[1] == "warning");
        match self {
            Self::OrchardComponent
            | Self::OrchardNative
            | Self::OrchardSharded
            | Self::OrchardPython => !warning_only,
            Self::KopfEvents => true,
            Self::OrchardWarning
            | Self::Kopf
            | Self::KopfExpert
            | Self::Metacontroller
            | Self::MetacontrollerTuned
            | Self::Floor => false,
        }
    }
    fn job(self) -> Job {
        match self {
            Self::OrchardPython => Job::Rabbit,
            _ => Job::Pdns,
        }
    }
    fn is_metacontroller(self) -> bool {
        matches!(self, Self::Metacontroller | Self::MetacontrollerTuned)
    }
    fn is_orchard(self) -> bool {
        matches!(
            self,
            Self::OrchardComponent
                | Self::OrchardWarning
                | Self::OrchardNative
                | Self::OrchardSharded
                | Self::OrchardPython
        )
    }
}

/// orchard-sharded's replicas: the ring's size `docs/sharding.md` starts with.
const SHARD_REPLICAS: usize = 3;

/// metacontroller-tuned's flags (its defaults: `--client-go-qps 5 --client-go-burst 10
/// --workers 5`): the client's rate limit out of the way (kopf and Orchard have none of that
/// kind), and more sync workers (each blocks on its hook call and its writes).
const METACONTROLLER_TUNED: [&str; 3] = [
    "--client-go-qps=1000",
    "--client-go-burst=2000",
    "--workers=32",
];

/// The test environment, from the env file's variables.
struct Env {
    kubeconfig: PathBuf,
    pdns_url: String,
    pdns_key: String,
    rabbit: Option<(String, String, String)>,
}

fn var(name: &str) -> anyhow::Result<String> {
    std::env::var(name).with_context(|| {
        format!("{name} is not set: source the test environment's env file (bench/run.sh does)")
    })
}

impl Env {
    fn load() -> anyhow::Result<Self> {
        let rabbit = match (
            std::env::var("RABBITMQ_API_URL"),
            std::env::var("RABBITMQ_USER"),
            std::env::var("RABBITMQ_PASSWORD"),
        ) {
            (Ok(u), Ok(n), Ok(p)) => Some((u, n, p)),
            _ => None,
        };
        Ok(Self {
            kubeconfig: PathBuf::from(
                std::env::var("ORCHARD_ADMIN_KUBECONFIG").or_else(|_| var("KUBECONFIG"))?,
            ),
            pdns_url: var("PDNS_API_URL")?.trim_end_matches('/').to_owned(),
            pdns_key: var("PDNS_API_KEY")?,
            rabbit,
        })
    }

    async fn config(&self) -> anyhow::Result<kube::Config> {
        let kubeconfig = kube::config::Kubeconfig::read_from(&self.kubeconfig)?;
        Ok(kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await?)
    }
}

// ------------------------------------------------------------------------------------------
// /proc and /metrics

#[derive(Debug, Default, Clone, Copy)]
struct ProcStat {
    cpu_s: f64,
    rss_kib: u64,
    hwm_kib: u64,
}

/// Whether `obj` had a done pass at or after `since` (its `status.lastSyncTime`).
fn synced_since(obj: &DynamicObject, since: jiff::Timestamp) -> bool {
    obj.data["status"]["lastSyncTime"]
        .as_str()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .is_some_and(|t| t >= since)
}

/// KiB as MiB, one decimal.
fn mib(kib: u64) -> f64 {
    (kib as f64 / 1024.0 * 10.0).round() / 10.0
}

fn proc_stat(pid: u32) -> Option<ProcStat> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // After the command: field 3 (state) is index 0; utime is field 14, stime 15.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    Some(ProcStat {
        cpu_s: (utime + stime) / 100.0, // USER_HZ is 100 on Linux
        rss_kib: kib("VmRSS:"),
        hwm_kib: kib("VmHWM:"),
    })
}

/// The sum over several processes (a contender and its helpers: metacontroller's hook server).
fn procs_stat(pids: &[u32]) -> Option<ProcStat> {
    let mut sum: Option<ProcStat> = None;
    for &pid in pids {
        let s = proc_stat(pid)?;
        let t = sum.get_or_insert_with(ProcStat::default);
        t.cpu_s += s.cpu_s;
        t.rss_kib += s.rss_kib;
        t.hwm_kib += s.hwm_kib;
    }
    sum
}

/// The test environment's servers whose CPU each contender's job costs, by their names in
/// `<testenv dir>/pids/<name>.pid` (`tests/env/testenv.sh`).
const SERVERS: [&str; 3] = ["kube-apiserver", "etcd", "pdns"];

/// CPU seconds (utime + stime) of the test environment's servers now, by name; `None` where
/// there is no pid file or its process is gone (not the one the environment started).
type ServerCpu = BTreeMap<&'static str, Option<f64>>;

fn server_cpu(dir: Option<&Path>) -> ServerCpu {
    SERVERS
        .iter()
        .map(|&name| (name, dir.and_then(|d| recorded_cpu(d, name))))
        .collect()
}

/// The CPU seconds of the process in `pids/<name>.pid` (`<pid> <starttime>`), if it is still
/// the process recorded there: a pid reused by another process has another start time.
fn recorded_cpu(dir: &Path, name: &str) -> Option<f64> {
    let text = std::fs::read_to_string(dir.join("pids").join(format!("{name}.pid"))).ok()?;
    let mut words = text.split_whitespace();
    let pid: u32 = words.next()?.parse().ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    // Field 22 (starttime); after the command, field 3 is index 0.
    if let Some(start) = words.next()
        && fields.get(19) != Some(&start)
    {
        return None;
    }
    Some(proc_stat(pid)?.cpu_s)
}

/// Each server's CPU seconds between two readings (`None` where either is missing).
fn server_cpu_spent(before: &ServerCpu, after: &ServerCpu) -> ServerCpu {
    SERVERS
        .iter()
        .map(|&name| {
            let spent = match (before.get(name), after.get(name)) {
                (Some(Some(b)), Some(Some(a))) => Some(((a - b) * 100.0).round() / 100.0),
                _ => None,
            };
            (name, spent)
        })
        .collect()
}

/// kube-apiserver + etcd CPU milliseconds per object over a phase (`None` unless both known).
fn apiserver_etcd_ms(spent: &ServerCpu, n: usize) -> Option<f64> {
    let a = spent.get("kube-apiserver").copied().flatten()?;
    let e = spent.get("etcd").copied().flatten()?;
    Some(((a + e) / n as f64 * 1e5).round() / 100.0)
}

/// One Prometheus sample: name, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

fn parse_prometheus(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (head, value) = match line.rfind('}') {
            Some(i) => (&line[..=i], line[i + 1..].trim()),
            None => match line.split_once(' ') {
                Some((h, v)) => (h, v.trim()),
                None => continue,
            },
        };
        let value = value.split_whitespace().next().unwrap_or("");
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        let (name, labels) = match head.split_once('{') {
            Some((n, l)) => (n, l.trim_end_matches('}')),
            None => (head, ""),
        };
        let mut map = BTreeMap::new();
        // label="value" pairs; values here contain no escaped quotes we care about.
        let mut rest = labels;
        while let Some(eq) = rest.find("=\"") {
            let key = rest[..eq].trim_start_matches(',').trim().to_owned();
            let after = &rest[eq + 2..];
            let Some(end) = after.find('"') else { break };
            map.insert(key, after[..end].to_owned());
            rest = &after[end + 1..];
        }
        out.push((name.to_owned(), map, value));
    }
    out
}

/// `apiserver_request_total` summed by "VERB resource[/subresource]".
async fn apiserver_requests(client: &Client) -> anyhow::Result<BTreeMap<String, f64>> {
    let req = http::Request::get("/metrics").body(Vec::new())?;
    let text = client.request_text(req).await?;
    let mut out = BTreeMap::new();
    for (name, labels, value) in parse_prometheus(&text) {
        if name != "apiserver_request_total" {
            continue;
        }
        let resource = labels.get("resource").cloned().unwrap_or_default();
        if resource.is_empty() {
            continue;
        }
        let mut key = format!(
            "{} {resource}",
            labels.get("verb").cloned().unwrap_or_default()
        );
        if let Some(sub) = labels.get("subresource").filter(|s| !s.is_empty()) {
            key = format!("{key}/{sub}");
        }
        *out.entry(key).or_insert(0.0) += value;
    }
    Ok(out)
}

/// The Orchard host's metrics that the report uses.
#[derive(Debug, Default, Clone)]
struct HostMetrics {
    calls: BTreeMap<String, f64>,
    reconciles: BTreeMap<String, f64>,
    errors: BTreeMap<String, f64>,
    /// `orchard_plugin_http_connections_total`, all plugins.
    http_connections: f64,
}

/// An Orchard contender's metrics, summed over its replicas; none for the others.
async fn contender_metrics(
    http: &reqwest::Client,
    p: &Process,
    contender: Contender,
) -> anyhow::Result<HostMetrics> {
    let mut sum = HostMetrics::default();
    if !contender.is_orchard() {
        return Ok(sum);
    }
    for admin in p.admin.iter().chain(&p.replica_admins) {
        let m = host_metrics(http, admin).await?;
        for (into, from) in [
            (&mut sum.calls, m.calls),
            (&mut sum.reconciles, m.reconciles),
            (&mut sum.errors, m.errors),
        ] {
            for (k, v) in from {
                *into.entry(k).or_insert(0.0) += v;
            }
        }
        sum.http_connections += m.http_connections;
    }
    Ok(sum)
}

async fn host_metrics(http: &reqwest::Client, admin: &str) -> anyhow::Result<HostMetrics> {
    let text = http
        .get(format!("http://{admin}/metrics"))
        .send()
        .await?
        .text()
        .await?;
    let mut m = HostMetrics::default();
    for (name, labels, value) in parse_prometheus(&text) {
        let label = |k: &str| labels.get(k).cloned().unwrap_or_default();
        match name.as_str() {
            "orchard_wasm_call_duration_seconds_count" => {
                let key = format!("{} {}", label("function"), label("outcome"));
                *m.calls.entry(key).or_insert(0.0) += value;
            }
            "orchard_reconciles_total" => {
                *m.reconciles.entry(label("result")).or_insert(0.0) += value;
            }
            "orchard_reconcile_errors_total" => {
                *m.errors.entry(label("reason")).or_insert(0.0) += value;
            }
            "orchard_plugin_http_connections_total" => m.http_connections += value,
            _ => {}
        }
    }
    Ok(m)
}

fn delta(after: &BTreeMap<String, f64>, before: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .filter(|(_, v)| *v > 0.0)
        .collect()
}

// ------------------------------------------------------------------------------------------
// external systems

/// How many of this run's resources exist in the external system.
async fn external_count(
    http: &reqwest::Client,
    env: &Env,
    job: Job,
    run: &str,
) -> anyhow::Result<usize> {
    match job {
        Job::Pdns => {
            let zones: Vec<Value> = http
                .get(format!("{}/api/v1/servers/localhost/zones", env.pdns_url))
                .header("X-API-Key", &env.pdns_key)
                .send()
                .await?
                .error_for_status()?
                .json()
                .await?;
            let suffix = format!(".{run}.bench.");
            Ok(zones
                .iter()
                .filter(|z| z["name"].as_str().is_some_and(|n| n.ends_with(&suffix)))
                .count())
        }
        Job::Rabbit => {
            let (url, user, password) = env.rabbit.as_ref().context("no RabbitMQ in the env")?;
            let vhosts: Vec<Value> = http
                .get(format!("{}/api/vhosts", url.trim_end_matches('/')))
                .basic_auth(user, Some(password))
                .send()
                .await?
                .error_for_status()?
                .json()
                .await?;
            let prefix = format!("bench-{run}-");
            Ok(vhosts
                .iter()
                .filter(|v| v["name"].as_str().is_some_and(|n| n.starts_with(&prefix)))
                .count())
        }
    }
}

// ------------------------------------------------------------------------------------------
// contender processes

struct Process {
    child: Child,
    /// Processes of the contender beside the main one (metacontroller's hook server): their
    /// CPU and memory are the contender's too.
    helpers: Vec<Child>,
    /// metacontroller: its hook server's address.
    hooks: Option<String>,
    /// Orchard's admin address.
    admin: Option<String>,
    /// orchard-sharded: the admin addresses of the other replicas (the helpers).
    replica_admins: Vec<String>,
    log: PathBuf,
}

impl Process {
    fn pids(&self) -> Vec<u32> {
        std::iter::once(self.child.id())
            .chain(self.helpers.iter().map(Child::id))
            .collect()
    }

    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    async fn stop(mut self) {
        for pid in self.pids() {
            let _ = Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
        let until = Instant::now() + Duration::from_secs(25);
        while Instant::now() < until {
            if !self.alive() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if self.alive() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        for helper in &mut self.helpers {
            if matches!(helper.try_wait(), Ok(None)) {
                let _ = helper.kill();
            }
            let _ = helper.wait();
        }
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn start(
    args: &Args,
    env: &Env,
    contender: Contender,
    ns: &str,
    log: &Path,
    extra: &[String],
    hooks_port: Option<u16>,
) -> anyhow::Result<Process> {
    let out = std::fs::File::create(log)?;
    let port = match hooks_port {
        Some(p) => p,
        None => free_port()?,
    };
    let job = contender.job();
    let mut helpers = Vec::new();
    let mut replica_admins = Vec::new();
    let mut hooks_addr = None;
    let (mut cmd, admin) = if contender.is_orchard() {
        let bin = match contender {
            Contender::OrchardNative => args
                .orchard_native_bin
                .clone()
                .context("orchard-native needs --orchard-native-bin")?,
            _ => args.orchard_bin.clone(),
        };
        let mut plugins = vec![args.plugin_dir.join(job.plugin_file())];
        if with_records(args, contender) {
            plugins.push(args.plugin_dir.join("pdns_record.wasm"));
        }
        for plugin in &plugins {
            if !plugin.is_file() {
                bail!("{} is missing: `make plugins`", plugin.display());
            }
            // Compile into the cache first, so that the start is not the cold compile.
            let described = Command::new(&bin)
                .arg("describe")
                .arg(plugin)
                .env("RUST_LOG", "warn")
                .stdout(Stdio::null())
                .status()
                .with_context(|| format!("running {}", bin.display()))?;
            if !described.success() {
                bail!("{} describe {} failed", bin.display(), plugin.display());
            }
        }
        let allow = match job {
            Job::Pdns => env.pdns_url.clone(),
            Job::Rabbit => env.rabbit.as_ref().context("no RabbitMQ")?.0.clone(),
        };
        let orchard = |admin: &str| {
            let mut cmd = Command::new(&bin);
            cmd.arg("run");
            for plugin in &plugins {
                cmd.arg("--plugin").arg(plugin);
            }
            cmd.args(["--install-crds", "--allow-host", &allow])
                .args(["--admin-addr", admin, "--namespace", ns])
                .args(&args.orchard_flags)
                .args(extra)
                .env("RUST_LOG", "info")
                .env("NO_COLOR", "1")
                .env("KUBECONFIG", &env.kubeconfig);
            if contender == Contender::OrchardNative {
                cmd.args(["--native-plugin", "pdns-zone"]);
            }
            if contender == Contender::OrchardWarning {
                cmd.args(["--events", "warning"]);
            }
            cmd
        };
        let admin = format!("127.0.0.1:{port}");
        let mut cmd = orchard(&admin);
        if contender == Contender::OrchardSharded {
            // One ring in the contender's namespace (its Leases there too); replica 0 is the
            // main process, the others are helpers, each with its own admin port and log.
            let ring = |cmd: &mut Command, replica: usize| {
                cmd.args(["--shard-ring", "bench", "--lease-namespace", ns])
                    .arg("--instance")
                    .arg(format!("{ns}-r{replica}"));
            };
            ring(&mut cmd, 0);
            for replica in 1..SHARD_REPLICAS {
                let admin = format!("127.0.0.1:{}", free_port()?);
                let mut replica_cmd = orchard(&admin);
                ring(&mut replica_cmd, replica);
                let out = std::fs::File::create(log.with_extension(format!("r{replica}.log")))?;
                replica_cmd
                    .stdin(Stdio::null())
                    .stdout(out.try_clone()?)
                    .stderr(out);
                helpers.push(replica_cmd.spawn().context("starting a shard replica")?);
                replica_admins.push(admin);
            }
        }
        (cmd, Some(admin))
    } else if contender == Contender::Floor {
        let bin = match &args.floor_bin {
            Some(bin) => bin.clone(),
            None => std::env::current_exe()?.with_file_name("orchard-floor"),
        };
        let health = format!("127.0.0.1:{port}");
        let mut cmd = Command::new(&bin);
        cmd.args(["--namespace", ns, "--health-addr", &health])
            .env("PDNS_API_URL", &env.pdns_url)
            .env("PDNS_API_KEY", &env.pdns_key);
        (cmd, Some(health))
    } else if contender.is_metacontroller() {
        // The hook server first (its own process, its CPU counted as the contender's), then
        // metacontroller over the DecoratorController that points at it (`prepare_metacontroller`).
        let hooks = format!("127.0.0.1:{port}");
        hooks_addr = Some(hooks.clone());
        let mut hook_cmd = Command::new(&args.hooks_python);
        hook_cmd
            .arg(&args.metacontroller_hooks)
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out.try_clone()?);
        helpers.push(hook_cmd.spawn().context("starting the hook server")?);
        let bin = args
            .metacontroller_bin
            .clone()
            .context("metacontroller needs --metacontroller-bin")?;
        let health = format!("127.0.0.1:{}", free_port()?);
        let mut cmd = Command::new(&bin);
        cmd.arg(format!("--health-probe-bind-address={health}"))
            .arg(format!("--metrics-address=127.0.0.1:{}", free_port()?))
            .arg("--pprof-address=0");
        if contender == Contender::MetacontrollerTuned {
            cmd.args(METACONTROLLER_TUNED);
        }
        (cmd, Some(health))
    } else {
        let (venv, operator) = if contender == Contender::KopfExpert {
            let venv = args.kopf_expert_venv.clone().or_else(|| args.venv.clone());
            (venv, &args.kopf_expert_operator)
        } else {
            (args.venv.clone(), &args.kopf_operator)
        };
        let venv = venv.context("kopf needs --venv")?;
        let mut cmd = Command::new(venv.join("bin/kopf"));
        cmd.args(["run", "--standalone", "--namespace", ns])
            .arg(format!("--liveness=http://127.0.0.1:{port}/healthz"))
            .arg(operator);
        if contender == Contender::KopfEvents {
            cmd.env("ORCHARD_BENCH_KOPF_EVENTS", "1");
        }
        (cmd, Some(format!("127.0.0.1:{port}")))
    };
    cmd.env("KUBECONFIG", &env.kubeconfig)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out);
    let child = cmd
        .spawn()
        .with_context(|| format!("starting {}", contender.name()))?;
    Ok(Process {
        child,
        helpers,
        hooks: hooks_addr,
        admin,
        replica_admins,
        log: log.to_owned(),
    })
}

/// Waits until the contender says it is ready (Orchard `/readyz`, kopf's liveness endpoint,
/// the floor's `/healthz` once its first listing is done).
async fn wait_ready(
    http: &reqwest::Client,
    p: &mut Process,
    contender: Contender,
) -> anyhow::Result<()> {
    let path = if contender.is_orchard() || contender.is_metacontroller() {
        "readyz"
    } else {
        "healthz"
    };
    let urls: Vec<String> = p
        .admin
        .iter()
        .chain(&p.replica_admins)
        .map(|admin| format!("http://{admin}/{path}"))
        .collect();
    let until = Instant::now() + Duration::from_mins(3);
    while Instant::now() < until {
        if !p.alive() {
            bail!("{} exited; log: {}", contender.name(), p.log.display());
        }
        let mut ready = !urls.is_empty();
        for url in &urls {
            ready &= http
                .get(url)
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
        }
        if ready && (!contender.is_metacontroller() || metacontroller_started(p, http).await) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    bail!(
        "{} not ready within 180 s; log: {}",
        contender.name(),
        p.log.display()
    )
}

/// metacontroller: its `/readyz` says nothing of the controllers it runs. Ready once its log
/// says the `DecoratorController`'s caches synced (its workers start then) and the hook server
/// answers.
async fn metacontroller_started(p: &mut Process, http: &reqwest::Client) -> bool {
    if p.helpers
        .iter_mut()
        .any(|h| !matches!(h.try_wait(), Ok(None)))
    {
        return false;
    }
    let text = std::fs::read_to_string(&p.log).unwrap_or_default();
    let synced = text.lines().any(|l| {
        l.contains("orchard-bench-dnszone")
            && (l.contains("Caches are synced") || l.contains("caches populated"))
    });
    let hooks_ok = match &p.hooks {
        Some(addr) => http
            .get(format!("http://{addr}/healthz"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success()),
        None => text.contains("hooks: serving on"),
    };
    synced && hooks_ok
}

/// metacontroller: its CRDs applied server-side (from its own manifests), and the
/// `DecoratorController` over `DnsZone` pointing at the hook server at `hooks`.
async fn prepare_metacontroller(args: &Args, client: &Client, hooks: &str) -> anyhow::Result<()> {
    use kube::api::{Patch, PatchParams};
    let path = args
        .metacontroller_crds
        .as_ref()
        .context("metacontroller needs --metacontroller-crds")?;
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let apply = PatchParams::apply("orchard-bench").force();
    let mut names = Vec::new();
    // One CRD per YAML document (no serde dependency here for a multi-document reader).
    for doc in text.split("\n---") {
        let value: Value = serde_yaml::from_str(doc)?;
        if value.is_null() {
            continue;
        }
        let crd: CustomResourceDefinition = serde_json::from_value(value)?;
        let name = crd.name_any();
        crds.patch(&name, &apply, &Patch::Apply(&crd))
            .await
            .with_context(|| format!("applying the CRD {name}"))?;
        names.push(name);
    }
    for name in &names {
        let until = Instant::now() + Duration::from_mins(1);
        loop {
            let crd = crds.get(name).await?;
            let established = crd
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                break;
            }
            if Instant::now() > until {
                bail!("CRD {name} not established");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let decorator_text = std::fs::read_to_string(&args.metacontroller_decorator)
        .with_context(|| format!("reading {}", args.metacontroller_decorator.display()))?
        .replace("{{HOOKS}}", hooks);
    let decorator: DynamicObject = serde_json::from_str(&decorator_text)?;
    let api = decorators(client);
    let name = decorator.name_any();
    let _ = api.delete(&name, &DeleteParams::default()).await;
    let until = Instant::now() + Duration::from_secs(30);
    while api.get_opt(&name).await?.is_some() {
        if Instant::now() > until {
            bail!("the DecoratorController {name} left by an earlier run is still there");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    api.create(&PostParams::default(), &decorator).await?;
    Ok(())
}

fn decorators(client: &Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &ApiResource {
            group: "metacontroller.k8s.io".into(),
            version: "v1alpha1".into(),
            api_version: "metacontroller.k8s.io/v1alpha1".into(),
            kind: "DecoratorController".into(),
            plural: "decoratorcontrollers".into(),
        },
    )
}

// ------------------------------------------------------------------------------------------
// the job

fn available(obj: &DynamicObject) -> bool {
    obj.data["status"]["conditions"]
        .as_array()
        .is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Available" && c["status"] == "True")
        })
}

/// What the watch has seen: object name → Available.
#[derive(Default)]
struct Seen {
    objects: HashMap<String, bool>,
    /// Watch events that added or changed an object: every write that changed one.
    applied: usize,
    init: Option<HashMap<String, bool>>,
}

impl Seen {
    fn apply(&mut self, event: watcher::Event<DynamicObject>) {
        match event {
            watcher::Event::Apply(o) => {
                self.applied += 1;
                self.objects.insert(o.name_any(), available(&o));
            }
            watcher::Event::Delete(o) => {
                self.objects.remove(&o.name_any());
            }
            watcher::Event::Init => self.init = Some(HashMap::new()),
            watcher::Event::InitApply(o) => {
                if let Some(init) = self.init.as_mut() {
                    init.insert(o.name_any(), available(&o));
                }
            }
            watcher::Event::InitDone => {
                if let Some(init) = self.init.take() {
                    self.objects = init;
                }
            }
        }
    }
    fn available(&self) -> usize {
        self.objects.values().filter(|a| **a).count()
    }
}

/// Requests the harness itself made on the kind (subtracted from the apiserver's counts).
#[derive(Debug, Default)]
struct Own {
    posts: usize,
    deletes: usize,
    retries: usize,
}

/// Runs `op` for every index from `clients` parallel clients (each its own connection pool).
async fn fan_out(
    config: &kube::Config,
    clients: usize,
    n: usize,
    op: impl Fn(Api<DynamicObject>, usize) -> futures::future::BoxFuture<'static, kube::Result<()>>
    + Send
    + Sync
    + Clone
    + 'static,
    api_of: impl Fn(Client) -> Api<DynamicObject>,
) -> anyhow::Result<(usize, usize)> {
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..clients {
        let api = api_of(Client::try_from(config.clone())?);
        let op = op.clone();
        tasks.spawn(async move {
            let (mut calls, mut retries) = (0, 0);
            for i in (c..n).step_by(clients) {
                let mut attempt = 0;
                loop {
                    calls += 1;
                    match op(api.clone(), i).await {
                        Ok(()) => break,
                        Err(e) if attempt < 10 => {
                            attempt += 1;
                            retries += 1;
                            eprintln!("  (harness: object {i}: {e}; retrying)");
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                        Err(e) => return Err(anyhow::Error::from(e)),
                    }
                }
            }
            anyhow::Ok((calls, retries))
        });
    }
    let (mut calls, mut retries) = (0, 0);
    while let Some(done) = tasks.join_next().await {
        let (c, r) = done??;
        calls += c;
        retries += r;
    }
    Ok((calls, retries))
}

#[derive(Debug, Default)]
struct Phase {
    /// Seconds to the goal (None: deadline passed).
    done_s: Option<f64>,
    /// Seconds until every request of the harness returned.
    requests_s: f64,
}

/// Drives the watch until `goal(seen)`, printing progress and recording the time series.
#[allow(clippy::too_many_arguments)]
async fn watch_until(
    stream: &mut futures::stream::BoxStream<
        'static,
        watcher::Result<watcher::Event<DynamicObject>>,
    >,
    seen: &mut Seen,
    started: Instant,
    deadline: Duration,
    label: &str,
    phase: &str,
    n: usize,
    series: &mut Vec<(f64, String, usize, usize)>,
    pids: &[u32],
    peak_rss: &mut u64,
    mut requests: Option<&mut tokio::task::JoinHandle<anyhow::Result<(usize, usize)>>>,
    requests_out: &mut Option<(usize, usize)>,
    requests_s: &mut f64,
    goal: impl Fn(&Seen) -> bool,
) -> anyhow::Result<Option<f64>> {
    #[allow(clippy::large_enum_variant)] // one short-lived value per loop turn
    enum Step {
        Event(Option<watcher::Result<watcher::Event<DynamicObject>>>),
        Requests(Result<anyhow::Result<(usize, usize)>, tokio::task::JoinError>),
        Tick,
    }
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut last_print = Instant::now();
    let mut last = (usize::MAX, usize::MAX);
    loop {
        let now = (seen.available(), seen.objects.len());
        if now != last {
            series.push((
                started.elapsed().as_secs_f64(),
                phase.to_owned(),
                now.0,
                now.1,
            ));
            last = now;
        }
        if goal(seen) && requests.is_none() {
            return Ok(Some(started.elapsed().as_secs_f64()));
        }
        if started.elapsed() > deadline {
            println!(
                "[{label}] {phase}: deadline of {} s passed ({} available, {} exist, of {n})",
                deadline.as_secs(),
                now.0,
                now.1
            );
            return Ok(None);
        }
        let pending = async {
            match requests.as_mut() {
                Some(handle) => handle.await,
                None => std::future::pending().await,
            }
        };
        let step = tokio::select! {
            event = stream.next() => Step::Event(event),
            done = pending => Step::Requests(done),
            _ = tick.tick() => Step::Tick,
        };
        match step {
            Step::Event(Some(Ok(e))) => seen.apply(e),
            Step::Event(Some(Err(e))) => eprintln!("  (harness watch: {e})"),
            Step::Event(None) => bail!("the watch ended"),
            Step::Requests(done) => {
                *requests_out = Some(done??);
                *requests_s = started.elapsed().as_secs_f64();
                requests = None;
            }
            Step::Tick => {
                if let Some(s) = procs_stat(pids) {
                    *peak_rss = (*peak_rss).max(s.rss_kib);
                }
                if last_print.elapsed() >= Duration::from_secs(1) {
                    last_print = Instant::now();
                    let rss = procs_stat(pids).map_or(0, |s| s.rss_kib / 1024);
                    println!(
                        "[{label}] {phase} {:6.1} s: {:>6} available, {:>6} exist, of {n}  (rss {rss} MiB)",
                        started.elapsed().as_secs_f64(),
                        now.0,
                        now.1
                    );
                }
            }
        }
    }
}

type Events = futures::stream::BoxStream<'static, watcher::Result<watcher::Event<DynamicObject>>>;

/// A watch of `api` with its initial listing done, and what it listed.
async fn listed(
    api: &Api<DynamicObject>,
    resource: &ApiResource,
) -> anyhow::Result<(Events, Seen)> {
    let mut stream = watcher(api.clone(), watcher::Config::default()).boxed();
    let mut seen = Seen::default();
    loop {
        match stream.next().await {
            Some(Ok(e)) => {
                let done = matches!(e, watcher::Event::InitDone);
                seen.apply(e);
                if done {
                    return Ok((stream, seen));
                }
            }
            Some(Err(e)) => bail!("watching {}: {e}", resource.plural),
            None => bail!("the watch ended"),
        }
    }
}

/// `--records`: where the records of one contender go, and how they are watched.
struct RecordJob<'a> {
    config: &'a kube::Config,
    clients: usize,
    ns: &'a str,
    n: usize,
    label: &'a str,
    deadline: Duration,
}

/// `--records`: creates one record per zone from `clients` parallel clients (`create`) or
/// deletes them, and watches until all are Available (or gone). Seconds to the goal, and the
/// harness's own requests.
async fn record_phase(
    job: &RecordJob<'_>,
    create: bool,
    records: &mut (Events, Seen),
    series: &mut Vec<(f64, String, usize, usize)>,
    (pids, peak_rss): (&[u32], &mut u64),
) -> anyhow::Result<(Option<f64>, usize)> {
    let RecordJob {
        config,
        clients,
        ns,
        n,
        label,
        deadline,
    } = *job;
    let started = Instant::now();
    let ns_of = ns.to_owned();
    let mut requests = tokio::spawn({
        let config = config.clone();
        async move {
            fan_out(
                &config,
                clients,
                n,
                move |api, i| {
                    Box::pin(async move {
                        let done = if create {
                            api.create(&PostParams::default(), &record_manifest(i))
                                .await
                                .map(drop)
                        } else {
                            api.delete(&format!("r{i}"), &DeleteParams::default())
                                .await
                                .map(drop)
                        };
                        match done {
                            Err(kube::Error::Api(e)) if e.code == 409 || e.code == 404 => Ok(()),
                            other => other,
                        }
                    })
                },
                move |c| Api::namespaced_with(c, &ns_of, &record_resource()),
            )
            .await
        }
    });
    let (mut made, mut requests_s) = (None, 0.0);
    let phase = if create { "records" } else { "records-delete" };
    let done = watch_until(
        &mut records.0,
        &mut records.1,
        started,
        deadline,
        label,
        phase,
        n,
        series,
        pids,
        peak_rss,
        Some(&mut requests),
        &mut made,
        &mut requests_s,
        |s| {
            if create {
                s.available() >= n
            } else {
                s.objects.is_empty()
            }
        },
    )
    .await?;
    let verb = if create { "Available" } else { "deleted" };
    match done {
        Some(t) => println!(
            "[{label}] all {n} DnsRecords {verb} in {t:.2} s ({:.1}/s)",
            n as f64 / t
        ),
        None => println!("[{label}] NOT all DnsRecords {verb}"),
    }
    Ok((done, made.map_or(0, |(calls, _)| calls)))
}

/// One contender's result.
async fn run_contender(
    args: &Args,
    env: &Env,
    contender: Contender,
    suffix: &str,
) -> anyhow::Result<Value> {
    let label = contender.name();
    let job = contender.job();
    let n = match job {
        Job::Rabbit => args.python_objects.unwrap_or(args.objects.min(200)),
        Job::Pdns => args.objects,
    };
    let run = format!("{}-{suffix}", contender.short());
    let ns = format!("bench-{run}");
    let config = env.config().await?;
    let client = Client::try_from(config.clone())?;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()?;
    let resource = job.resource();
    println!("\n== {label}: {n} {} in namespace {ns}", resource.kind);

    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}}))?,
        )
        .await
        .with_context(|| format!("creating namespace {ns}"))?;
    let secret = match job {
        Job::Pdns => json!({"url": env.pdns_url, "apiKey": env.pdns_key}),
        Job::Rabbit => {
            let (url, user, password) = env.rabbit.as_ref().context("no RabbitMQ in the env")?;
            json!({"url": url, "username": user, "password": password})
        }
    };
    Api::<Secret>::namespaced(client.clone(), &ns)
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": job.secret()}, "stringData": secret}),
            )?,
        )
        .await?;
    if !contender.is_orchard() {
        ensure_crd(args, &client, job).await?;
    }

    let log = args.out.join(format!("{label}.log"));
    let mut hooks_port = None;
    if contender.is_metacontroller() {
        let port = free_port()?;
        prepare_metacontroller(args, &client, &format!("127.0.0.1:{port}")).await?;
        hooks_port = Some(port);
    }
    let mut process = start(args, env, contender, &ns, &log, &[], hooks_port)?;
    wait_ready(&http, &mut process, contender).await?;
    let mut pids = process.pids();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);
    // The watch is established (its initial list done) before the first create.
    let (mut stream, mut seen) = listed(&api, &resource).await?;

    // The apiserver sets up a custom resource's storage and validation at its first write (2 s
    // here): one dry-run create before the clock, so the first contender of a run does not pay
    // for it.
    let warm_up = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    api.create(&warm_up, &job.manifest(&run, n))
        .await
        .with_context(|| format!("a dry-run create of {}", resource.plural))?;
    let api_before = apiserver_requests(&client).await?;
    let mut host_before = contender_metrics(&http, &process, contender).await?;
    let proc_before = procs_stat(&pids).unwrap_or_default();
    let mut peak_rss = proc_before.rss_kib;
    let mut series = Vec::new();
    let deadline = Duration::from_secs(args.timeout_s);
    let mut own = Own::default();
    let testenv = args.testenv_dir.as_deref();
    let harness_pid = std::process::id();

    // ---- create
    let servers_before = server_cpu(testenv);
    let harness_before = proc_stat(harness_pid).unwrap_or_default().cpu_s;
    let started = Instant::now();
    let run_id = run.clone();
    let ns_of = ns.clone();
    let res = resource.clone();
    let mut creating = tokio::spawn({
        let config = config.clone();
        let clients = args.clients;
        async move {
            fan_out(
                &config,
                clients,
                n,
                move |api, i| {
                    let obj = job.manifest(&run_id, i);
                    Box::pin(async move {
                        match api.create(&PostParams::default(), &obj).await {
                            Ok(_) => Ok(()),
                            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
                            Err(e) => Err(e),
                        }
                    })
                },
                move |c| Api::namespaced_with(c, &ns_of, &res),
            )
            .await
        }
    });
    let mut created = None;
    let mut create = Phase::default();
    create.done_s = watch_until(
        &mut stream,
        &mut seen,
        started,
        deadline,
        label,
        "create",
        n,
        &mut series,
        &pids,
        &mut peak_rss,
        Some(&mut creating),
        &mut created,
        &mut create.requests_s,
        |s| s.available() >= n,
    )
    .await?;
    let servers_available = server_cpu(testenv);
    let harness_available = proc_stat(harness_pid).unwrap_or_default().cpu_s;
    if let Some((calls, retries)) = created {
        own.posts = calls;
        own.retries += retries;
    }
    match create.done_s {
        Some(t) => println!(
            "[{label}] all {n} Available in {t:.2} s ({:.1}/s)",
            n as f64 / t
        ),
        None => println!("[{label}] NOT all Available"),
    }
    let proc_available = procs_stat(&pids).unwrap_or_default();
    let applied_create = seen.applied;
    let api_mid = apiserver_requests(&client).await?;
    let host_mid = contender_metrics(&http, &process, contender).await?;
    let external_created = external_count(&http, env, job, &run).await?;

    // ---- records (--records): one DnsRecord per zone, 2 × N objects of two kinds.
    let records_api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns, &record_resource());
    let mut records = None;
    let mut records_report = Value::Null;
    let mut record_requests = (0, 0);
    let record_job = RecordJob {
        config: &config,
        clients: args.clients,
        ns: &ns,
        n,
        label,
        deadline,
    };
    if with_records(args, contender) {
        let mut watched = listed(&records_api, &record_resource()).await?;
        let (done, posts) = record_phase(
            &record_job,
            true,
            &mut watched,
            &mut series,
            (&pids, &mut peak_rss),
        )
        .await?;
        record_requests.0 = posts;
        let proc = procs_stat(&pids).unwrap_or_default();
        records_report = json!({
            "records": n,
            "available_s": done,
            "available_per_s": done.map(|t| n as f64 / t),
            "rss_all_available_mib": mib(proc.rss_kib),
        });
        records = Some(watched);
    }

    // ---- restart (--restart, Orchard only): a new host over the N objects, timed until it
    // reconciled each once.
    let mut resync = Value::Null;
    // CPU seconds of a host stopped by the restart, counted into the job's.
    let mut cpu_offset = 0.0;
    if args.restart && contender.is_orchard() {
        let cpu_first = procs_stat(&pids).unwrap_or_default().cpu_s;
        cpu_offset = cpu_first;
        process.stop().await;
        let log = args.out.join(format!("{label}-restarted.log"));
        let started_restart = Instant::now();
        let restarted_at = jiff::Timestamp::now();
        process = start(args, env, contender, &ns, &log, &args.restart_flags, None)?;
        pids = process.pids();
        wait_ready(&http, &mut process, contender).await?;
        let ready_s = started_restart.elapsed().as_secs_f64();
        // Resynced against the external system: a done pass since the restart.
        let full = !args.restart_flags.is_empty();
        let mut synced: std::collections::HashSet<String> = std::collections::HashSet::new();
        let (mut peak, mut passed_s, mut synced_s) = (0, None, None);
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        // Every object of the host: the zones, and their records with `--records`.
        let objects = if records.is_some() { 2 * n } else { n };
        while passed_s.is_none() || (full && synced_s.is_none()) {
            tokio::select! {
                event = stream.next() => match event {
                    Some(Ok(event)) => {
                        if let watcher::Event::Apply(o) = &event
                            && synced_since(o, restarted_at)
                        {
                            synced.insert(o.name_any());
                        }
                        seen.apply(event);
                        if full && synced_s.is_none() && synced.len() >= n {
                            synced_s = Some(started_restart.elapsed().as_secs_f64());
                        }
                    }
                    Some(Err(e)) => bail!("watching {}: {e}", resource.plural),
                    None => bail!("the watch ended"),
                },
                _ = tick.tick() => {
                    let passes: f64 = contender_metrics(&http, &process, contender).await?.reconciles.values().sum();
                    peak = peak.max(procs_stat(&pids).unwrap_or_default().rss_kib);
                    if passed_s.is_none() && passes >= objects as f64 {
                        passed_s = Some(started_restart.elapsed().as_secs_f64());
                    }
                    if started_restart.elapsed() > deadline {
                        bail!("[{label}] after the restart: {passes} passes, {} of {n} objects resynced, in {deadline:?}", synced.len());
                    }
                }
            }
        }
        let passed_s = passed_s.unwrap_or_default();
        let after = procs_stat(&pids).unwrap_or_default();
        println!(
            "[{label}] restarted: ready in {ready_s:.2} s, every object passed once in {passed_s:.2} s ({:.1}/s), resynced with the external system: {}, rss {} MiB",
            n as f64 / passed_s,
            synced_s.map_or_else(
                || "not asked".to_owned(),
                |t| format!("{t:.2} s ({:.1}/s)", n as f64 / t)
            ),
            after.rss_kib / 1024
        );
        resync = json!({
            "restart_args": args.restart_flags,
            "ready_s": ready_s,
            "all_passed_s": passed_s,
            "objects": objects,
            "passed_per_s": objects as f64 / passed_s,
            "all_resynced_s": synced_s,
            "resynced_per_s": synced_s.map(|t| n as f64 / t),
            "rss_all_reconciled_mib": mib(after.rss_kib),
            "rss_peak_mib": mib(peak.max(after.hwm_kib)),
            "cpu_s": after.cpu_s,
            "cpu_s_first_process": cpu_first,
        });
        // The new process's counters start at zero: the job's counts are the first process's
        // up to here plus the second's.
        for (counts, mid) in [
            (&mut host_before.calls, &host_mid.calls),
            (&mut host_before.reconciles, &host_mid.reconciles),
            (&mut host_before.errors, &host_mid.errors),
        ] {
            for (key, value) in mid {
                *counts.entry(key.clone()).or_insert(0.0) -= value;
            }
        }
        host_before.http_connections -= host_mid.http_connections;
    }

    // ---- delete (the records first: a zone cannot go while a record uses it)
    let servers_delete_start = server_cpu(testenv);
    let harness_delete_start = proc_stat(harness_pid).unwrap_or_default().cpu_s;
    if let Some(mut watched) = records.take() {
        let (done, deletes) = record_phase(
            &record_job,
            false,
            &mut watched,
            &mut series,
            (&pids, &mut peak_rss),
        )
        .await?;
        record_requests.1 = deletes;
        records_report["deleted_s"] = json!(done);
        records_report["deleted_per_s"] = json!(done.map(|t| n as f64 / t));
        records_report["rss_all_deleted_mib"] =
            json!(mib(procs_stat(&pids).unwrap_or_default().rss_kib));
    }
    let started_delete = Instant::now();
    let ns_of = ns.clone();
    let res = resource.clone();
    let mut deleting = tokio::spawn({
        let config = config.clone();
        let clients = args.clients;
        async move {
            fan_out(
                &config,
                clients,
                n,
                move |api, i| {
                    Box::pin(async move {
                        match api.delete(&format!("o{i}"), &DeleteParams::default()).await {
                            Ok(_) => Ok(()),
                            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
                            Err(e) => Err(e),
                        }
                    })
                },
                move |c| Api::namespaced_with(c, &ns_of, &res),
            )
            .await
        }
    });
    let mut deleted = None;
    let mut delete = Phase::default();
    delete.done_s = watch_until(
        &mut stream,
        &mut seen,
        started_delete,
        deadline,
        label,
        "delete",
        n,
        &mut series,
        &pids,
        &mut peak_rss,
        Some(&mut deleting),
        &mut deleted,
        &mut delete.requests_s,
        |s| s.objects.is_empty(),
    )
    .await?;
    let servers_deleted = server_cpu(testenv);
    let harness_deleted = proc_stat(harness_pid).unwrap_or_default().cpu_s;
    if let Some((calls, retries)) = deleted {
        own.deletes = calls;
        own.retries += retries;
    }
    match delete.done_s {
        Some(t) => println!(
            "[{label}] all {n} deleted in {t:.2} s ({:.1}/s)",
            n as f64 / t
        ),
        None => println!("[{label}] NOT all deleted"),
    }
    let proc_deleted = procs_stat(&pids).unwrap_or_default();
    let api_after = apiserver_requests(&client).await?;
    let host_after = contender_metrics(&http, &process, contender).await?;
    let external_left = external_count(&http, env, job, &run).await?;
    let applied_total = seen.applied;
    drop(stream);
    // Events recorded in the namespace (exact, unlike the apiserver's global counters).
    let events = Api::<k8s_openapi::api::core::v1::Event>::namespaced(client.clone(), &ns)
        .list(&kube::api::ListParams::default())
        .await?
        .items;
    let event_objects = events.len();
    let event_count: i64 = events
        .iter()
        .map(|e| {
            e.series
                .as_ref()
                .and_then(|s| s.count)
                .or(e.count)
                .map_or(1, i64::from)
        })
        .sum();
    tokio::time::sleep(Duration::from_secs(args.settle_s)).await;
    let proc_settled = procs_stat(&pids).unwrap_or_default();
    process.stop().await;
    if contender.is_metacontroller() {
        let _ = decorators(&client)
            .delete("orchard-bench-dnszone", &DeleteParams::default())
            .await;
    }
    let _ = Api::<Namespace>::all(client.clone())
        .delete(&ns, &DeleteParams::default())
        .await;

    // ---- report
    let plural = &resource.plural;
    let mut requests = delta(&api_after, &api_before);
    for (key, own) in [
        (format!("POST {plural}"), own.posts),
        (format!("DELETE {plural}"), own.deletes),
        ("POST dnsrecords".to_owned(), record_requests.0),
        ("DELETE dnsrecords".to_owned(), record_requests.1),
    ] {
        if let Some(v) = requests.get_mut(&key) {
            *v = (*v - own as f64).max(0.0);
        }
    }
    requests.retain(|_, v| *v > 0.0);
    // `+ 0.0`: an empty sum of f64 is -0.0, which would print as "-0.0".
    let per = |v: f64| (v / n as f64 * 100.0).round() / 100.0 + 0.0;
    let is_write = |k: &str| {
        ["POST ", "PUT ", "PATCH ", "APPLY ", "DELETE "]
            .iter()
            .any(|w| k.starts_with(w))
    };
    let writes: f64 = requests
        .iter()
        .filter(|(k, _)| is_write(k))
        .map(|(_, v)| v)
        .sum();
    let gets: f64 = requests
        .iter()
        .filter(|(k, _)| k.starts_with("GET "))
        .map(|(_, v)| v)
        .sum();
    let create_writes: f64 = {
        let mut d = delta(&api_mid, &api_before);
        if let Some(v) = d.get_mut(&format!("POST {plural}")) {
            *v = (*v - own.posts as f64).max(0.0);
        }
        // With --records, their creates fall after the middle reading: counted with the delete.
        d.iter().filter(|(k, _)| is_write(k)).map(|(_, v)| v).sum()
    };

    let (calls, reconciles, errors, calls_total, transient) = if contender.is_orchard() {
        let calls = delta(&host_after.calls, &host_before.calls);
        let reconciles = delta(&host_after.reconciles, &host_before.reconciles);
        let errors = delta(&host_after.errors, &host_before.errors);
        let calls_total: f64 = calls.values().sum();
        let transient: f64 = errors.values().sum::<f64>()
            + calls
                .iter()
                .filter(|(k, _)| k.ends_with(" error"))
                .map(|(_, v)| v)
                .sum::<f64>();
        (calls, reconciles, errors, calls_total, transient)
    } else {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        // Occurrences, not lines: kopf's handler threads print concurrently, and two of their
        // lines can come out as one ("bench-call POSTbench-call POST").
        let count = |w: &str| text.matches(w).count() as f64;
        let mut calls = BTreeMap::new();
        calls.insert("POST (handler)".to_owned(), count("bench-call POST"));
        calls.insert("DELETE (handler)".to_owned(), count("bench-call DELETE"));
        let total = count("bench-call ");
        (
            calls,
            BTreeMap::new(),
            BTreeMap::new(),
            total,
            count("bench-transient"),
        )
    };
    let _ = host_mid;

    // CPU of the shared servers over each phase: what this contender's job cost them (the
    // harness's own requests and watch included, the same for every contender).
    let spent_create = server_cpu_spent(&servers_before, &servers_available);
    let spent_delete = server_cpu_spent(&servers_delete_start, &servers_deleted);
    let ms_per_object = |spent: &ServerCpu| -> BTreeMap<&'static str, Option<f64>> {
        spent
            .iter()
            .map(|(k, v)| (*k, v.map(|s| (s / n as f64 * 1e5).round() / 100.0)))
            .collect()
    };
    let round2 = |s: f64| (s * 100.0).round() / 100.0;

    // time series
    let csv = args.out.join(format!("{label}.csv"));
    let mut f = std::fs::File::create(&csv)?;
    writeln!(f, "t_s,phase,available,existing")?;
    for (t, phase, a, e) in &series {
        writeln!(f, "{t:.3},{phase},{a},{e}")?;
    }

    let records_ok = records_report.is_null()
        || (!records_report["available_s"].is_null() && !records_report["deleted_s"].is_null());
    // A contender meant to post Normal Events that posted none is not the contender named
    // (kopf's defaults changed under the bench once).
    let events_ok = !contender.posts_normal_events(&args.orchard_flags) || event_objects > 0;
    if !events_ok {
        eprintln!(
            "bench: {label} posted no Event for {n} objects, though it is meant to (its log: {})",
            log.display()
        );
    }
    let ok = create.done_s.is_some()
        && records_ok
        && events_ok
        && delete.done_s.is_some()
        && external_created == n
        && external_left == 0;
    // Why a run is not ok, in one line: the smoke in `make test` prints it last.
    let not_ok = (!ok).then(|| {
        let done = |t: Option<f64>| t.map_or_else(|| "never".to_owned(), |t| format!("{t:.2} s"));
        format!(
            "all Available {}, all deleted {}, records ok {records_ok}, events ok {events_ok}, \
             external resources {external_created} of {n} after create and {external_left} left \
             after delete (log: {})",
            done(create.done_s),
            done(delete.done_s),
            log.display()
        )
    });
    if let Some(why) = &not_ok {
        eprintln!("[{label}] not ok: {why}");
    }
    // Orchard: connections its plugins' outbound HTTP opened (keep-alive pools).
    let http_connections = contender
        .is_orchard()
        .then(|| per(host_after.http_connections - host_before.http_connections));
    // The shard ring's (and leader election's, and presence's) cost on the apiserver.
    let lease_writes_per_s = {
        let leases: f64 = requests
            .iter()
            .filter(|(k, _)| is_write(k) && k.ends_with(" leases"))
            .map(|(_, v)| v)
            .sum();
        let job_s = create.done_s.unwrap_or_default() + delete.done_s.unwrap_or_default();
        (job_s > 0.0).then(|| (leases / job_s * 100.0).round() / 100.0)
    };
    let mut result = json!({
        "contender": label,
        "kind": resource.kind,
        "objects": n,
        "clients": args.clients,
        "ok": ok,
        "not_ok": not_ok,
        "available_s": create.done_s,
        "create_requests_s": create.requests_s,
        "deleted_s": delete.done_s,
        "delete_requests_s": delete.requests_s,
        "available_per_s": create.done_s.map(|t| n as f64 / t),
        "deleted_per_s": delete.done_s.map(|t| n as f64 / t),
        "external_after_create": external_created,
        "external_left_after_delete": external_left,
        "rss_start_mib": mib(proc_before.rss_kib),
        "rss_peak_mib": mib(proc_settled.hwm_kib.max(peak_rss)),
        "rss_peak_during_job_mib": mib(peak_rss),
        "rss_all_available_mib": mib(proc_available.rss_kib),
        "rss_all_deleted_mib": mib(proc_deleted.rss_kib),
        "rss_after_settle_mib": mib(proc_settled.rss_kib),
        "cpu_s_job": ((proc_deleted.cpu_s + cpu_offset - proc_before.cpu_s) * 100.0).round() / 100.0,
        "cpu_s_total": proc_settled.cpu_s + cpu_offset,
        "cpu_ms_per_object": ((proc_deleted.cpu_s + cpu_offset - proc_before.cpu_s) / n as f64 * 1e4).round() / 10.0,
        "apiserver_requests": requests,
        "apiserver_writes_per_object": per(writes),
        "apiserver_writes_per_object_create": per(create_writes),
        "apiserver_writes_per_object_delete": per(writes - create_writes),
        "apiserver_gets_per_object": per(gets),
        "apiserver_requests_per_object": per(requests.values().sum()),
        "lease_writes_per_s": lease_writes_per_s,
        "object_changes_per_object": per(applied_total as f64),
        "object_changes_per_object_create": per(applied_create as f64),
        "events_per_object": per(event_objects as f64),
        "event_occurrences_per_object": per(event_count as f64),
        "harness_requests": {"posts": own.posts, "deletes": own.deletes, "retries": own.retries},
        "actuator_calls": calls,
        "actuator_calls_per_object": per(calls_total),
        "reconciles": reconciles,
        "reconciles_per_object": contender.is_orchard().then(|| per(reconciles.values().sum::<f64>())),
        "reconcile_errors": errors,
        "transient_errors": transient,
        "restart": resync,
        "log": log,
        "series": csv,
    });
    result["plugin_http_connections_per_object"] = json!(http_connections);
    result["dns_records"] = records_report;
    // Apart: one `json!` this long exceeds the macro recursion limit.
    let servers = json!({
        "server_cpu_s": {"create": spent_create, "delete": spent_delete},
        "server_cpu_ms_per_object": {
            "create": ms_per_object(&spent_create),
            "delete": ms_per_object(&spent_delete),
        },
        "apiserver_etcd_cpu_ms_per_object_create": apiserver_etcd_ms(&spent_create, n),
        "apiserver_etcd_cpu_ms_per_object_delete": apiserver_etcd_ms(&spent_delete, n),
        "harness_cpu_s": {
            "create": round2(harness_available - harness_before),
            "delete": round2(harness_deleted - harness_delete_start),
        },
    });
    if let (Value::Object(result), Value::Object(servers)) = (&mut result, servers) {
        result.extend(servers);
    }
    Ok(result)
}

/// Installs the CRD of the job's kind (from the plugin, `orchard crd`) when it is missing: the
/// kopf and floor contenders work on Orchard's CRD.
async fn ensure_crd(args: &Args, client: &Client, job: Job) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let r = job.resource();
    let name = format!("{}.{}", r.plural, r.group);
    if crds.get_opt(&name).await?.is_none() {
        let out = Command::new(&args.orchard_bin)
            .arg("crd")
            .arg(args.plugin_dir.join(job.plugin_file()))
            .stderr(Stdio::inherit())
            .output()?;
        if !out.status.success() {
            bail!("orchard crd failed");
        }
        let crd: CustomResourceDefinition = serde_yaml::from_slice(&out.stdout)?;
        crds.create(&PostParams::default(), &crd).await?;
    }
    let until = Instant::now() + Duration::from_mins(1);
    while Instant::now() < until {
        let crd = crds.get(&name).await?;
        let established = crd
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        if established {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    bail!("CRD {name} not established")
}

fn fmt_opt(v: &Value, digits: usize) -> String {
    v.as_f64()
        .map_or_else(|| "—".to_owned(), |f| format!("{f:.digits$}"))
}

fn summary(results: &[Value], header: &str) -> String {
    let mut s = String::new();
    s.push_str(header);
    s.push_str("\n\n| contender | kind | N | all Available | all deleted | Available/s | deleted/s | peak RSS | RSS after delete | CPU s | apiserver+etcd CPU ms/object (create / delete) | API writes/object (create + delete) | GETs/object | object changes/object | Events/object | actuator calls/object | reconciles/object | transient errors | ok |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in results {
        // Writing to a String cannot fail.
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} s | {} s | {} | {} | {} MiB | {} MiB | {} | {} / {} | {} ({} + {}) | {} | {} | {} | {} | {} | {} | {} |",
            r["contender"].as_str().unwrap_or(""),
            r["kind"].as_str().unwrap_or(""),
            r["objects"],
            fmt_opt(&r["available_s"], 2),
            fmt_opt(&r["deleted_s"], 2),
            fmt_opt(&r["available_per_s"], 1),
            fmt_opt(&r["deleted_per_s"], 1),
            r["rss_peak_mib"],
            r["rss_after_settle_mib"],
            r["cpu_s_job"],
            fmt_opt(&r["apiserver_etcd_cpu_ms_per_object_create"], 2),
            fmt_opt(&r["apiserver_etcd_cpu_ms_per_object_delete"], 2),
            r["apiserver_writes_per_object"],
            r["apiserver_writes_per_object_create"],
            r["apiserver_writes_per_object_delete"],
            r["apiserver_gets_per_object"],
            r["object_changes_per_object"],
            r["event_occurrences_per_object"],
            r["actuator_calls_per_object"],
            r["reconciles_per_object"],
            r["transient_errors"],
            if r["ok"] == true { "yes" } else { "**no**" },
        );
    }
    let rate = |name: &str, key: &str| {
        results
            .iter()
            .find(|r| r["contender"] == name)
            .and_then(|r| r[key].as_f64())
    };
    let mut ratio = |what: &str, a: &str, b: &str, key: &str| {
        if let (Some(x), Some(y)) = (rate(a, key), rate(b, key)) {
            let _ = write!(s, "\n- {what}: {a} / {b} = **{:.2}**", x / y);
        }
    };
    // Like for like first: both with their Normal Events, then neither (kopf's defaults); then
    // the Wasm cost (component / native). The floor is the ceiling of this machine for the job:
    // the most any operator gets over kopf here (issue 13 asks for 2), and how far below it
    // each contender is.
    let mut pairs = vec![
        ("orchard-component", "kopf-events"),
        ("orchard-warning", "kopf"),
        ("orchard-component", "kopf"),
        ("orchard-component", "orchard-native"),
        ("floor", "kopf"),
        ("orchard-component", "kopf-expert"),
        ("orchard-component", "metacontroller"),
        ("orchard-component", "metacontroller-tuned"),
        ("orchard-sharded", "orchard-component"),
    ];
    pairs.extend(
        [
            "orchard-component",
            "orchard-warning",
            "orchard-native",
            "orchard-sharded",
            "kopf",
            "kopf-events",
            "kopf-expert",
            "metacontroller",
            "metacontroller-tuned",
        ]
        .map(|c| (c, "floor")),
    );
    for (a, b) in pairs {
        ratio("objects/s to Available", a, b, "available_per_s");
        ratio("objects/s deleted", a, b, "deleted_per_s");
    }
    // The servers' CPU per object, each (the table has apiserver + etcd).
    for r in results {
        let per = &r["server_cpu_ms_per_object"];
        if per.is_null() {
            continue;
        }
        let _ = write!(
            s,
            "\n- {}: server CPU ms/object (create / delete):",
            r["contender"].as_str().unwrap_or("")
        );
        for name in SERVERS {
            let _ = write!(
                s,
                " {name} {} / {},",
                fmt_opt(&per["create"][name], 2),
                fmt_opt(&per["delete"][name], 2)
            );
        }
        let n = r["objects"].as_f64().unwrap_or(1.0).max(1.0);
        let harness = |phase: &str| {
            r["harness_cpu_s"][phase]
                .as_f64()
                .map_or_else(|| "—".to_owned(), |c| format!("{:.2}", c / n * 1e3))
        };
        let _ = write!(
            s,
            " the harness {} / {}",
            harness("create"),
            harness("delete")
        );
    }
    s.push('\n');
    s
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run().await {
        Ok(true) => std::process::ExitCode::SUCCESS,
        Ok(false) => std::process::ExitCode::from(2),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> anyhow::Result<bool> {
    let args = Args::parse();
    // Built beside the host, rustls has two providers compiled in; kube's is ring.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let env = Env::load()?;
    std::fs::create_dir_all(&args.out)?;
    let suffix = format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_secs()
            % 0xff_ffff
    );
    let mut results = Vec::new();
    let mut all_ok = true;
    for &contender in &args.contenders {
        let result = match run_contender(&args, &env, contender, &suffix).await {
            Ok(r) => r,
            Err(e) => {
                eprintln!("[{}] failed: {e:#}", contender.name());
                json!({"contender": contender.name(), "ok": false, "error": format!("{e:#}")})
            }
        };
        all_ok &= result["ok"] == true;
        results.push(result);
        // Written after every contender, so that a later failure keeps the earlier results.
        let report = json!({
            "commit": args.commit,
            "objects": args.objects,
            "clients": args.clients,
            "results": results,
        });
        std::fs::write(
            args.out.join("results.json"),
            serde_json::to_string_pretty(&report)?,
        )?;
    }
    let header = format!(
        "Throughput run: commit `{}`, {} clients",
        args.commit, args.clients
    );
    let text = summary(&results, &header);
    std::fs::write(args.out.join("summary.md"), &text)?;
    println!("\n{text}");
    println!("results: {}", args.out.join("results.json").display());
    Ok(all_ok)
}

#[cfg(test)]
mod tests {
    use super::Contender;
    use clap::ValueEnum;

    #[test]
    fn every_contender_reports_under_the_name_it_is_selected_by() {
        for contender in Contender::value_variants() {
            let selected = contender
                .to_possible_value()
                .expect("no contender is hidden");
            assert_eq!(contender.name(), selected.get_name());
        }
    }
}
