//! The PowerDNS side of the TSIG key suite: a harness serving a TSIG key plugin (the C
//! `pdns-tsig` or the Go `pdns-tsig-go`) with its credentials Secret, and a client of
//! PowerDNS's real `/tsigkeys` API to read and change the keys as someone outside Orchard
//! would.

use anyhow::bail;
use serde_json::{Value, json};

use crate::TestEnv;
use crate::harness::{Harness, HostSpec, kind};
use crate::paths::plugin;

pub use super::SECRET;

/// API group of the PowerDNS kinds.
pub const GROUP: &str = "pdns.orchard.dev";
/// The secret under the Secret's key `tsigKey` (base64 of 32 bytes).
pub const TSIG_SECRET: &str = "b3JjaGFyZC10c2lnLWtleS1mb3ItdGhlLWUyZS10ZXN0cw==";
/// A value under the Secret's key `badKey` that PowerDNS refuses (not base64).
pub const BAD_SECRET: &str = "not base64!";

/// A harness serving the `pdns-tsig` plugin (kind `TsigKey`): [`harness_for`].
pub async fn harness(name: &str) -> anyhow::Result<(Harness, Api)> {
    harness_for(name, "pdns-tsig", "TsigKey").await
}

/// A harness serving the TSIG key plugin `plugin_name` (its kind `kind_name`), allowed to
/// reach the PowerDNS API only, with the Secret `pdns` (`url`, `apiKey`, `tsigKey`, `badKey`).
pub async fn harness_for(
    name: &str,
    plugin_name: &str,
    kind_name: &str,
) -> anyhow::Result<(Harness, Api)> {
    let env = TestEnv::load()?;
    let host = HostSpec {
        plugins: vec![plugin(plugin_name)],
        kinds: vec![kind(GROUP, kind_name)],
        allow_hosts: vec![env.pdns_api_url.clone()],
    };
    let h = Harness::new(name, host).await?;
    h.create_secret(
        SECRET,
        &[
            ("url", &env.pdns_api_url),
            ("apiKey", &env.pdns_api_key),
            ("tsigKey", TSIG_SECRET),
            ("badKey", BAD_SECRET),
        ],
    )
    .await?;
    Ok((h, Api::new(&env)?))
}

/// A client of PowerDNS's TSIG key endpoints.
#[derive(Clone)]
pub struct Api {
    base: String,
    http: reqwest::Client,
}

impl Api {
    /// A client of the environment's PowerDNS.
    pub fn new(env: &TestEnv) -> anyhow::Result<Self> {
        Ok(Self {
            base: format!("{}/tsigkeys", env.pdns_server_url()),
            http: env.pdns()?,
        })
    }

    /// A key with its secret, `None` when it does not exist.
    pub async fn key(&self, id: &str) -> anyhow::Result<Option<Value>> {
        let response = self.http.get(format!("{}/{id}", self.base)).send().await?;
        match response.status().as_u16() {
            404 => Ok(None),
            200 => Ok(Some(response.json().await?)),
            other => bail!(
                "PowerDNS GET tsigkeys/{id}: HTTP {other}: {}",
                response.text().await?
            ),
        }
    }

    /// Every key (without secrets), as PowerDNS lists them.
    pub async fn keys(&self) -> anyhow::Result<Vec<Value>> {
        let response = self.http.get(&self.base).send().await?;
        if !response.status().is_success() {
            bail!("PowerDNS GET tsigkeys: HTTP {}", response.status());
        }
        Ok(response.json().await?)
    }

    /// Creates a key (PowerDNS generates the secret); returns its id.
    pub async fn create(&self, name: &str, algorithm: &str) -> anyhow::Result<String> {
        let response = self
            .http
            .post(&self.base)
            .json(&json!({"name": name, "algorithm": algorithm}))
            .send()
            .await?;
        if !response.status().is_success() {
            bail!(
                "PowerDNS POST tsigkeys {name}: HTTP {}: {}",
                response.status(),
                response.text().await?
            );
        }
        let key: Value = response.json().await?;
        Ok(key["id"].as_str().unwrap_or_default().to_owned())
    }

    /// Deletes a key; done when it is already gone.
    pub async fn delete(&self, id: &str) -> anyhow::Result<()> {
        let response = self
            .http
            .delete(format!("{}/{id}", self.base))
            .send()
            .await?;
        if !response.status().is_success() && response.status().as_u16() != 404 {
            bail!("PowerDNS DELETE tsigkeys/{id}: HTTP {}", response.status());
        }
        Ok(())
    }
}
