//! Shared pieces of Orchard's end-to-end suites.
//!
//! The suites run against the real systems that `tests/env/testenv.sh up` starts on loopback
//! (kube-apiserver + etcd, PowerDNS, an OCI registry, RabbitMQ). That script writes an
//! env file of `KEY=value` lines; [`TestEnv::load`] reads it and hands out clients. Nothing here
//! skips a test when a system is missing: a suite that cannot reach its system fails.
//!
//! See `docs/testing.md` for bringing the environment up and running single tests.

#![allow(
    clippy::missing_panics_doc,
    clippy::expect_used,
    reason = "test support: a panic here is a failed test, with its message"
)]

use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub mod crds;
pub mod harness;
pub mod oci;
pub mod paths;
pub mod pdns;
pub mod plugins;
pub mod proxy;
pub mod rabbitmq;
pub mod scenarios;

use anyhow::{Context, bail, ensure};
use kube::config::{KubeConfigOptions, Kubeconfig};

/// Env var that names the env file explicitly (takes precedence over everything else).
pub const ENV_FILE_VAR: &str = "ORCHARD_TESTENV_ENV";
/// Env var with the state dir of the environment; `<dir>/env` is used when it is set.
pub const DIR_VAR: &str = "ORCHARD_TESTENV_DIR";

/// Timeout applied to every HTTP request made through the helpers here, so that a hung system
/// fails a test instead of hanging it.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The running test environment, as described by its env file.
#[derive(Debug, Clone)]
pub struct TestEnv {
    /// The env file this was loaded from.
    pub env_file: PathBuf,
    /// `ORCHARD_TESTENV_DIR`: the state dir (pki, data, pids, logs, kubeconfigs).
    pub dir: PathBuf,
    /// `KUBECONFIG`: the kubeconfig a shell that sources the env file uses (the admin one).
    pub kubeconfig: PathBuf,
    /// `ORCHARD_ADMIN_KUBECONFIG`: client cert `CN=orchard-admin, O=system:masters`.
    pub admin_kubeconfig: PathBuf,
    /// `ORCHARD_UNPRIVILEGED_KUBECONFIG`: client cert `CN=orchard-unprivileged`, no groups and
    /// no RBAC bindings.
    pub unprivileged_kubeconfig: PathBuf,
    /// `ORCHARD_APISERVER_URL`, e.g. `https://127.0.0.1:40123`.
    pub apiserver_url: String,
    /// `ORCHARD_K8S_VERSION`: the Kubernetes release the apiserver was built from, e.g. `v1.34.4`.
    pub k8s_version: String,
    /// `PDNS_API_URL`, e.g. `http://127.0.0.1:40124` (without `/api/v1`).
    pub pdns_api_url: String,
    /// `PDNS_API_KEY`: value for the `X-API-Key` header.
    pub pdns_api_key: String,
    /// `PDNS_DNS_PORT`: PowerDNS answers DNS (UDP and TCP) on `127.0.0.1:<port>`.
    pub pdns_dns_port: u16,
    /// `ORCHARD_REGISTRY`: `127.0.0.1:<port>` of the OCI registry (plain HTTP, no auth).
    pub registry: String,
    /// `ORCHARD_REGISTRY_DATA`: that registry's storage root (the tamper tests write there).
    pub registry_data: PathBuf,
    /// `ORCHARD_AUTH_REGISTRY`: `127.0.0.1:<port>` of a registry that requires a user.
    pub auth_registry: String,
    /// `ORCHARD_AUTH_REGISTRY_USER` / `_PASSWORD`: its only user.
    pub auth_registry_user: String,
    pub auth_registry_password: String,
    /// RabbitMQ; `None` when the environment was started with `--without-rabbitmq`.
    pub rabbitmq: Option<RabbitMq>,
    /// `ORCHARD_TESTENV_LOGS`: directory with one log file per system.
    pub logs: PathBuf,
    /// The OpenTelemetry Collector; `None` in an environment started before it was part of it.
    pub otlp: Option<Otlp>,
    /// `ORCHARD_TESTENV_CA`: the PEM of the environment's own CA (it signed the apiserver's
    /// and RabbitMQ's HTTPS certificates).
    pub ca_file: PathBuf,
}

/// The OpenTelemetry Collector of the test environment.
#[derive(Debug, Clone)]
pub struct Otlp {
    /// `ORCHARD_OTLP_ENDPOINT`: its OTLP/HTTP base URL, e.g. `http://127.0.0.1:40127` (an
    /// exporter appends `/v1/traces`).
    pub endpoint: String,
    /// `ORCHARD_OTLP_TRACES_FILE`: where its file exporter writes what it receives, one OTLP
    /// JSON `TracesData` per line.
    pub traces_file: PathBuf,
}

/// RabbitMQ of the test environment (absent when `up` ran with `--without-rabbitmq`).
#[derive(Debug, Clone)]
pub struct RabbitMq {
    /// `RABBITMQ_API_URL`: management API base, e.g. `http://127.0.0.1:40125` (without `/api`).
    pub api_url: String,
    /// `RABBITMQ_API_TLS_URL`: the same API over HTTPS, its certificate signed by the
    /// environment's own CA ([`TestEnv::ca_file`]), e.g. `https://127.0.0.1:40126`.
    pub api_tls_url: String,
    /// `RABBITMQ_AMQP_PORT`: AMQP 0-9-1 on `127.0.0.1:<port>`.
    pub amqp_port: u16,
    /// `RABBITMQ_USER`: a user with the `administrator` tag and full rights on vhost `/`.
    pub user: String,
    /// `RABBITMQ_PASSWORD`.
    pub password: String,
}

impl TestEnv {
    /// Where the env file is looked for: `$ORCHARD_TESTENV_ENV`, else `$ORCHARD_TESTENV_DIR/env`,
    /// else `<workspace root>/.testenv/env`.
    pub fn env_file_path() -> PathBuf {
        if let Some(p) = std::env::var_os(ENV_FILE_VAR).filter(|p| !p.is_empty()) {
            return PathBuf::from(p);
        }
        if let Some(d) = std::env::var_os(DIR_VAR).filter(|d| !d.is_empty()) {
            return PathBuf::from(d).join("env");
        }
        paths::workspace().join(".testenv/env")
    }

    /// Load the environment from [`TestEnv::env_file_path`].
    pub fn load() -> anyhow::Result<Self> {
        let path = Self::env_file_path();
        if !path.is_file() {
            bail!(
                "no test environment: env file {} does not exist. Start the environment with \
                 `tests/env/testenv.sh up` (see docs/testing.md), or point {ENV_FILE_VAR} at its env file",
                path.display()
            );
        }
        Self::load_from(&path)
    }

    /// Load the environment from a given env file.
    pub fn load_from(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading test env file {}", path.display()))?;
        let vars = parse_env_file(&text)
            .with_context(|| format!("parsing test env file {}", path.display()))?;
        let get = |key: &str| -> anyhow::Result<String> {
            vars.get(key).cloned().with_context(|| {
                format!(
                    "test env file {} has no {key}; rerun `tests/env/testenv.sh up`",
                    path.display()
                )
            })
        };
        let port = |key: &str| -> anyhow::Result<u16> {
            get(key)?
                .parse()
                .with_context(|| format!("{key} in {} is not a port", path.display()))
        };
        let rabbitmq = if vars.contains_key("RABBITMQ_API_URL") {
            Some(RabbitMq {
                api_url: get("RABBITMQ_API_URL")?,
                api_tls_url: get("RABBITMQ_API_TLS_URL")?,
                amqp_port: port("RABBITMQ_AMQP_PORT")?,
                user: get("RABBITMQ_USER")?,
                password: get("RABBITMQ_PASSWORD")?,
            })
        } else {
            None
        };
        Ok(Self {
            env_file: path.to_path_buf(),
            dir: get("ORCHARD_TESTENV_DIR")?.into(),
            kubeconfig: get("KUBECONFIG")?.into(),
            admin_kubeconfig: get("ORCHARD_ADMIN_KUBECONFIG")?.into(),
            unprivileged_kubeconfig: get("ORCHARD_UNPRIVILEGED_KUBECONFIG")?.into(),
            apiserver_url: get("ORCHARD_APISERVER_URL")?,
            k8s_version: get("ORCHARD_K8S_VERSION")?,
            pdns_api_url: get("PDNS_API_URL")?,
            pdns_api_key: get("PDNS_API_KEY")?,
            pdns_dns_port: port("PDNS_DNS_PORT")?,
            registry: get("ORCHARD_REGISTRY")?,
            registry_data: get("ORCHARD_REGISTRY_DATA")?.into(),
            auth_registry: get("ORCHARD_AUTH_REGISTRY")?,
            auth_registry_user: get("ORCHARD_AUTH_REGISTRY_USER")?,
            auth_registry_password: get("ORCHARD_AUTH_REGISTRY_PASSWORD")?,
            rabbitmq,
            otlp: match (
                vars.get("ORCHARD_OTLP_ENDPOINT"),
                vars.get("ORCHARD_OTLP_TRACES_FILE"),
            ) {
                (Some(endpoint), Some(file)) => Some(Otlp {
                    endpoint: endpoint.clone(),
                    traces_file: file.into(),
                }),
                _ => None,
            },
            logs: get("ORCHARD_TESTENV_LOGS")?.into(),
            ca_file: get("ORCHARD_TESTENV_CA")?.into(),
        })
    }

    /// A client authenticated as `orchard-admin` (group `system:masters`).
    pub async fn admin_client(&self) -> anyhow::Result<kube::Client> {
        kube_client(&self.admin_kubeconfig).await
    }

    /// A client authenticated as `orchard-unprivileged` (no groups, no bindings: RBAC refuses it).
    pub async fn unprivileged_client(&self) -> anyhow::Result<kube::Client> {
        kube_client(&self.unprivileged_kubeconfig).await
    }

    /// An HTTP client for the PowerDNS API that sends `X-API-Key` on every request. Use it with
    /// [`TestEnv::pdns_server_url`].
    pub fn pdns(&self) -> anyhow::Result<reqwest::Client> {
        let mut headers = reqwest::header::HeaderMap::new();
        let mut key = reqwest::header::HeaderValue::from_str(&self.pdns_api_key)
            .context("PDNS_API_KEY is not a valid header value")?;
        key.set_sensitive(true);
        headers.insert("X-API-Key", key);
        Ok(reqwest::Client::builder()
            .default_headers(headers)
            .timeout(REQUEST_TIMEOUT)
            .build()?)
    }

    /// `<PDNS_API_URL>/api/v1/servers/localhost`, the base of the zone endpoints.
    pub fn pdns_server_url(&self) -> String {
        format!(
            "{}/api/v1/servers/localhost",
            self.pdns_api_url.trim_end_matches('/')
        )
    }

    /// `http://<ORCHARD_REGISTRY>`, the base of the registry's `/v2/` API.
    pub fn registry_url(&self) -> String {
        format!("http://{}", self.registry)
    }

    /// RabbitMQ, or an error saying the environment was started without it.
    pub fn rabbitmq(&self) -> anyhow::Result<&RabbitMq> {
        self.rabbitmq.as_ref().with_context(|| {
            format!(
                "the test environment ({}) runs without RabbitMQ; `tests/env/testenv.sh up` \
                 (without --without-rabbitmq) restarts it with RabbitMQ",
                self.env_file.display()
            )
        })
    }
}

/// A plain HTTP client with the helpers' request timeout (for the registry and RabbitMQ).
pub fn http() -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .build()?)
}

async fn kube_client(kubeconfig: &Path) -> anyhow::Result<kube::Client> {
    let kc = Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("reading kubeconfig {}", kubeconfig.display()))?;
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .with_context(|| format!("loading kubeconfig {}", kubeconfig.display()))?;
    config.connect_timeout = Some(Duration::from_secs(5));
    config.read_timeout = Some(REQUEST_TIMEOUT);
    config.write_timeout = Some(REQUEST_TIMEOUT);
    // A workspace build unifies rustls with both crypto providers (the host's sigstore brings
    // aws-lc-rs): name one, as the host does.
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    kube::Client::try_from(config).context("building kube client")
}

/// Parse `KEY=value` lines (blank lines and `#` comments ignored, optional `export `, values
/// optionally in single or double quotes without escapes).
pub fn parse_env_file(text: &str) -> anyhow::Result<HashMap<String, String>> {
    let mut vars = HashMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((key, value)) = line.split_once('=') else {
            bail!("line {}: expected KEY=value, got {line:?}", n + 1);
        };
        let value = ['\'', '"']
            .iter()
            .find_map(|q| value.strip_prefix(*q).and_then(|v| v.strip_suffix(*q)))
            .unwrap_or(value);
        vars.insert(key.trim().to_owned(), value.to_owned());
    }
    Ok(vars)
}

/// Poll `check` until it yields `Ok(Some(value))` or `timeout` passes.
///
/// `Ok(None)` means "not yet"; `Err(_)` also means "not yet" (systems are often briefly not
/// ready), but the last error is reported if the deadline passes. Polls back off from 50 ms to
/// 500 ms. Use this instead of sleeping: it waits exactly as long as needed and fails with a
/// message naming what was awaited.
pub async fn poll_until<T, F, Fut>(timeout: Duration, what: &str, check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    poll(timeout, Duration::from_millis(500), what, check).await
}

/// [`poll_until`] looking every `every` (no slower): where the moment a condition came true
/// is measured.
pub async fn poll_until_every<T, F, Fut>(
    timeout: Duration,
    every: Duration,
    what: &str,
    check: F,
) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    poll(timeout, every, what, check).await
}

/// Checks from 50 ms apart, the gap doubling up to `slowest`, until `check` gives a value or
/// `timeout` passed.
async fn poll<T, F, Fut>(
    timeout: Duration,
    slowest: Duration,
    what: &str,
    mut check: F,
) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    let mut interval = Duration::from_millis(50).min(slowest);
    let mut last_error = None;
    loop {
        match check().await {
            Ok(Some(value)) => return Ok(value),
            Ok(None) => {}
            Err(e) => last_error = Some(e),
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return Err(match last_error {
                Some(e) => e.context(format!("timed out after {timeout:?} waiting for {what}")),
                None => anyhow::anyhow!("timed out after {timeout:?} waiting for {what}"),
            });
        }
        tokio::time::sleep(interval.min(deadline - now)).await;
        interval = (interval * 2).min(slowest);
    }
}

/// Runs `tests/env/testenv.sh <cmd>` (e.g. `stop-pdns`, `start-apiserver`) for the outage
/// scenarios, which break one system of the environment on purpose.
pub fn testenv(cmd: &str) -> anyhow::Result<()> {
    let script = paths::workspace().join("tests/env/testenv.sh");
    let status = Command::new("bash").arg(&script).arg(cmd).status()?;
    ensure!(status.success(), "testenv.sh {cmd} failed");
    Ok(())
}

/// A loopback port free a moment ago (for a host's `--admin-addr`).
pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Waits (at most `within`) until the host whose admin address is `admin`
/// (`ORCHARD_ADMIN_ADDR`) says it is ready: `/readyz` answers 200.
pub async fn wait_host_ready(admin: &str, within: Duration) -> anyhow::Result<()> {
    let client = http()?;
    let url = format!("http://{admin}/readyz");
    poll_until(within, &format!("{url} to answer 200"), || async {
        let ready = client
            .get(&url)
            .send()
            .await
            .ok()
            .filter(|r| r.status().as_u16() == 200);
        Ok(ready.map(drop))
    })
    .await
}

/// Waits (at most `within`) until the leader Lease `name` of `namespace` is held by `holder`.
pub async fn wait_lease_holder(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    holder: &str,
    within: Duration,
) -> anyhow::Result<()> {
    poll_until(
        within,
        &format!("{holder} to hold the Lease {name}"),
        || async {
            let held = lease_holder(client, namespace, name).await?;
            Ok((held.as_deref() == Some(holder)).then_some(()))
        },
    )
    .await
}

/// The holder of the leader Lease `name` of `namespace`, if any.
pub async fn lease_holder(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> anyhow::Result<Option<String>> {
    let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
        kube::Api::namespaced(client.clone(), namespace);
    Ok(leases
        .get_opt(name)
        .await?
        .and_then(|l| l.spec?.holder_identity))
}

/// The text of a host's `/metrics`, from its admin address (`ORCHARD_ADMIN_ADDR`).
pub async fn host_metrics(admin: &str) -> anyhow::Result<String> {
    Ok(reqwest::get(format!("http://{admin}/metrics"))
        .await?
        .error_for_status()?
        .text()
        .await?)
}

/// The sum of the samples of the Prometheus `series` in `metrics` (the text format) whose
/// labels contain every one of `labels` (e.g. `function="create"`).
pub fn metric_sum(metrics: &str, series: &str, labels: &[&str]) -> f64 {
    metrics
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(series) && l[series.len()..].starts_with(['{', ' ']))
        .filter(|l| labels.iter().all(|p| l.contains(p)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// A short lowercase alphanumeric suffix, unique per call (process id, clock and a counter), for
/// object names that must not collide with earlier runs. Starts with a letter, so it can be used
/// as or inside DNS labels and Kubernetes names.
pub fn unique_suffix() -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    #[allow(
        clippy::cast_possible_truncation,
        reason = "the low bits of the time are what varies"
    )]
    let mixed = (nanos as u64) ^ (u64::from(std::process::id()) << 40) ^ u64::from(n);
    format!("t{:x}{n:x}", mixed & 0xffff_ffff_ffff)
}

/// An interop tool built by `tests/env/build-tools.sh` (`helm`, `cosign`, `oras`).
pub fn tool(name: &str) -> PathBuf {
    let cache = std::env::var_os("ORCHARD_TESTENV_CACHE").map_or_else(
        || {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/orchard-testenv")
        },
        PathBuf::from,
    );
    cache.join("tools").join(name)
}

/// Runs `cmd`; its stdout when it succeeds, an error with both outputs when it fails.
pub fn run(cmd: &mut Command) -> anyhow::Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("starting {}", cmd.get_program().display()))?;
    ensure!(
        out.status.success(),
        "{cmd:?} failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?)
}

/// Runs `cmd` expecting it to fail; its stderr.
pub fn run_failing(cmd: &mut Command) -> anyhow::Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("starting {}", cmd.get_program().display()))?;
    ensure!(
        !out.status.success(),
        "{cmd:?} succeeded but was expected to fail: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    Ok(String::from_utf8_lossy(&out.stderr).into_owned())
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_file_lines_are_parsed_with_comments_quotes_and_export() -> anyhow::Result<()> {
        let vars = parse_env_file("# c\n\nA=1\nexport B='x y'\nC=\"z\"\nD=a=b\n")?;
        assert_eq!(vars["A"], "1");
        assert_eq!(vars["B"], "x y");
        assert_eq!(vars["C"], "z");
        assert_eq!(vars["D"], "a=b");
        Ok(())
    }

    #[test]
    fn unique_suffixes_differ_and_are_dns_safe() {
        let a = unique_suffix();
        let b = unique_suffix();
        assert_ne!(a, b);
        assert!(a.starts_with('t'));
        assert!(
            a.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        );
    }
}
