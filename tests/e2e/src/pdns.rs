//! The PowerDNS side of the PowerDNS suites: the plugins and kinds a host serves, a harness
//! with the credentials Secret, and a client of the real PowerDNS HTTP API to read and change
//! its state as someone outside Orchard would.

use std::time::Duration;

use anyhow::bail;
use kube::api::ApiResource;
use serde_json::{Value, json};

pub mod tsig;

use crate::harness::{Harness, HostSpec};
use crate::paths::plugin;
use crate::{TestEnv, poll_until};

/// The zone kind.
pub const ZONE: &str = "DnsZone";
/// The record kind.
pub const RECORD: &str = "DnsRecord";
/// Name of the credentials Secret every scenario creates.
pub const SECRET: &str = "pdns";

/// `DnsZone`'s API resource.
pub fn zone_resource() -> ApiResource {
    ApiResource {
        group: "pdns.orchard.dev".into(),
        version: "v1alpha1".into(),
        api_version: "pdns.orchard.dev/v1alpha1".into(),
        kind: ZONE.into(),
        plural: "dnszones".into(),
    }
}

/// `DnsRecord`'s API resource.
pub fn record_resource() -> ApiResource {
    ApiResource {
        kind: RECORD.into(),
        plural: "dnsrecords".into(),
        ..zone_resource()
    }
}

/// The host of the PowerDNS suites: the zone and record plugins (Rust), allowed to reach
/// PowerDNS's API only.
pub fn host_spec(env: &TestEnv) -> HostSpec {
    HostSpec {
        plugins: vec![plugin("pdns-zone"), plugin("pdns-record")],
        kinds: vec![zone_resource(), record_resource()],
        allow_hosts: vec![env.pdns_api_url.clone()],
    }
}

/// A harness serving the PowerDNS plugins, with the Secret `pdns` (`url`, `apiKey`).
pub async fn harness(name: &str) -> anyhow::Result<(Harness, Api)> {
    let env = TestEnv::load()?;
    let h = Harness::new(name, host_spec(&env)).await?;
    create_secret(&h, SECRET).await?;
    Ok((h, Api::new(&env)?))
}

/// Creates a PowerDNS credentials Secret named `name` in the harness's namespace.
pub async fn create_secret(h: &Harness, name: &str) -> anyhow::Result<()> {
    h.create_secret(
        name,
        &[
            ("url", &h.env.pdns_api_url),
            ("apiKey", &h.env.pdns_api_key),
        ],
    )
    .await
}

/// A zone name unique to this scenario: `<label>.<id>.test.`.
pub fn zone_name(h: &Harness, label: &str) -> String {
    format!("{label}.{}.test.", h.id)
}

/// A client of PowerDNS's HTTP API with the environment's key.
#[derive(Clone)]
pub struct Api {
    zones_url: String,
    http: reqwest::Client,
}

impl Api {
    /// A client of the environment's PowerDNS.
    pub fn new(env: &TestEnv) -> anyhow::Result<Self> {
        Ok(Self {
            zones_url: format!("{}/zones", env.pdns_server_url()),
            http: env.pdns()?,
        })
    }

    /// Sends the request `build` makes and answers PowerDNS's response. A 5xx — its sqlite
    /// backend busy with another suite's write ("database is locked") — is retried for a few
    /// seconds, as the plugins retry it; any other status is the caller's to judge.
    async fn send(
        &self,
        what: &str,
        build: impl Fn() -> reqwest::RequestBuilder,
    ) -> anyhow::Result<reqwest::Response> {
        poll_until(
            Duration::from_secs(10),
            &format!("PowerDNS to {what}"),
            || {
                let request = build();
                async move {
                    let response = request.send().await?;
                    let status = response.status();
                    if status.is_server_error() {
                        bail!("HTTP {status}: {}", response.text().await?);
                    }
                    Ok(Some(response))
                }
            },
        )
        .await
    }

    /// The zone as PowerDNS has it (with record sets), `None` when it does not exist.
    pub async fn zone(&self, name: &str) -> anyhow::Result<Option<Value>> {
        let url = format!("{}/{name}", self.zones_url);
        let response = self
            .send(&format!("GET zone {name}"), || self.http.get(&url))
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

    /// Every zone PowerDNS has (without record sets).
    pub async fn zones(&self) -> anyhow::Result<Vec<Value>> {
        let response = self
            .send("list zones", || self.http.get(&self.zones_url))
            .await?;
        if !response.status().is_success() {
            bail!("PowerDNS GET zones: HTTP {}", response.status());
        }
        Ok(response.json().await?)
    }

    /// Creates a zone directly in PowerDNS (as someone outside Orchard would).
    pub async fn create_zone(&self, name: &str, account: &str) -> anyhow::Result<()> {
        let body = json!({"name": name, "kind": "Native", "nameservers": [], "account": account});
        let response = self
            .send(&format!("create zone {name}"), || {
                self.http.post(&self.zones_url).json(&body)
            })
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

    /// Changes a zone's account directly in PowerDNS (drift, as someone outside Orchard).
    pub async fn set_account(&self, name: &str, account: &str) -> anyhow::Result<()> {
        let url = format!("{}/{name}", self.zones_url);
        let body = json!({"account": account});
        let response = self
            .send(&format!("set the account of zone {name}"), || {
                self.http.put(&url).json(&body)
            })
            .await?;
        if !response.status().is_success() {
            bail!(
                "PowerDNS set the account of zone {name}: HTTP {}: {}",
                response.status(),
                response.text().await?
            );
        }
        Ok(())
    }

    /// Deletes a zone directly in PowerDNS.
    pub async fn delete_zone(&self, name: &str) -> anyhow::Result<()> {
        let url = format!("{}/{name}", self.zones_url);
        let response = self
            .send(&format!("delete zone {name}"), || self.http.delete(&url))
            .await?;
        if !response.status().is_success() {
            bail!("PowerDNS delete zone {name}: HTTP {}", response.status());
        }
        Ok(())
    }

    /// The record set `name`/`type_` of `zone` in PowerDNS.
    pub async fn rrset(
        &self,
        zone: &str,
        name: &str,
        type_: &str,
    ) -> anyhow::Result<Option<Value>> {
        let Some(z) = self.zone(zone).await? else {
            return Ok(None);
        };
        Ok(z["rrsets"].as_array().and_then(|sets| {
            sets.iter()
                .find(|r| r["name"] == name && r["type"] == type_)
                .cloned()
        }))
    }
}
