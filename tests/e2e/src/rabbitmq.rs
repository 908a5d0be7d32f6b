//! The RabbitMQ side of the RabbitMQ suites: the plugins and kinds a host serves, a harness
//! with the credentials Secret, and a client of the real management API (`/api`) to read and
//! change RabbitMQ's state as someone outside Orchard would.

use std::fmt::Write as _;

use anyhow::{Context, bail};
use serde_json::Value;

use crate::harness::{Harness, HostSpec, kind};
use crate::paths::plugin;
use crate::{RabbitMq, TestEnv, http};

/// API group of the RabbitMQ kinds.
pub const GROUP: &str = "rabbitmq.orchard.dev";
/// Name of the credentials Secret every scenario creates.
pub const SECRET: &str = "rabbitmq";

/// The host of the RabbitMQ suites: the vhost and queue plugins (Python) and the user plugin
/// (JavaScript), allowed to reach RabbitMQ's management API only.
pub fn host_spec(env: &TestEnv) -> anyhow::Result<HostSpec> {
    let rabbitmq = env.rabbitmq()?;
    Ok(HostSpec {
        plugins: vec![
            plugin("rabbitmq-vhost"),
            plugin("rabbitmq-queue"),
            plugin("rabbitmq-user"),
        ],
        kinds: vec![
            kind(GROUP, "RabbitVhost"),
            kind(GROUP, "RabbitQueue"),
            kind(GROUP, "RabbitUser"),
        ],
        allow_hosts: vec![rabbitmq.api_url.clone()],
    })
}

/// A harness serving the RabbitMQ plugins, with the Secret `rabbitmq` (`url`, `username`,
/// `password` of the environment's administrator, and `appPassword` for users).
pub async fn harness(name: &str) -> anyhow::Result<(Harness, Api)> {
    let env = TestEnv::load()?;
    let host = host_spec(&env)?;
    let h = Harness::new(name, host).await?;
    let r = env.rabbitmq()?;
    h.create_secret(
        SECRET,
        &[
            ("url", &r.api_url),
            ("username", &r.user),
            ("password", &r.password),
            ("appPassword", "first-password"),
        ],
    )
    .await?;
    Ok((h, Api::new(r)?))
}

/// A client of the management API with the administrator's credentials.
#[derive(Clone)]
pub struct Api {
    base: String,
    user: String,
    password: String,
    http: reqwest::Client,
}

/// One path segment, percent-encoded (`/` too), as the management API wants vhost names.
pub fn quote(segment: &str) -> String {
    let mut out = String::new();
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            // Writing into a String cannot fail.
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

impl Api {
    /// A client of the environment's RabbitMQ.
    pub fn new(r: &RabbitMq) -> anyhow::Result<Self> {
        Ok(Self {
            base: format!("{}/api", r.api_url.trim_end_matches('/')),
            user: r.user.clone(),
            password: r.password.clone(),
            http: http()?,
        })
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base))
            .basic_auth(&self.user, Some(&self.password))
    }

    /// The JSON at `path`; `None` on 404.
    pub async fn get(&self, path: &str) -> anyhow::Result<Option<Value>> {
        let response = self.request(reqwest::Method::GET, path).send().await?;
        match response.status().as_u16() {
            404 => Ok(None),
            200 => Ok(Some(response.json().await?)),
            other => bail!(
                "RabbitMQ GET {path}: HTTP {other}: {}",
                response.text().await?
            ),
        }
    }

    /// A PUT (or POST) that must succeed.
    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: &Value,
    ) -> anyhow::Result<()> {
        let response = self
            .request(method.clone(), path)
            .json(body)
            .send()
            .await
            .with_context(|| format!("RabbitMQ {method} {path}"))?;
        if !response.status().is_success() {
            bail!(
                "RabbitMQ {method} {path}: HTTP {}: {}",
                response.status(),
                response.text().await?
            );
        }
        Ok(())
    }

    /// A PUT that must succeed.
    pub async fn put(&self, path: &str, body: &Value) -> anyhow::Result<()> {
        self.send(reqwest::Method::PUT, path, body).await
    }

    /// A DELETE; done when it is already gone.
    pub async fn delete(&self, path: &str) -> anyhow::Result<()> {
        let response = self.request(reqwest::Method::DELETE, path).send().await?;
        if !response.status().is_success() && response.status().as_u16() != 404 {
            bail!("RabbitMQ DELETE {path}: HTTP {}", response.status());
        }
        Ok(())
    }

    /// A vhost, `None` when it does not exist.
    pub async fn vhost(&self, name: &str) -> anyhow::Result<Option<Value>> {
        self.get(&format!("/vhosts/{}", quote(name))).await
    }

    /// Creates a vhost (the administrator gets full permissions on it).
    pub async fn create_vhost(
        &self,
        name: &str,
        description: &str,
        tags: &str,
    ) -> anyhow::Result<()> {
        self.put(
            &format!("/vhosts/{}", quote(name)),
            &serde_json::json!({"description": description, "tags": tags}),
        )
        .await
    }

    /// Deletes a vhost with everything in it.
    pub async fn delete_vhost(&self, name: &str) -> anyhow::Result<()> {
        self.delete(&format!("/vhosts/{}", quote(name))).await
    }

    /// The limits of a vhost, e.g. `{"max-queues": 10}` (empty object when none).
    pub async fn vhost_limits(&self, name: &str) -> anyhow::Result<Value> {
        let found = self
            .get(&format!("/vhost-limits/{}", quote(name)))
            .await?
            .unwrap_or_default();
        Ok(found[0]["value"].clone())
    }

    /// A queue, `None` when it (or its vhost) does not exist.
    pub async fn queue(&self, vhost: &str, name: &str) -> anyhow::Result<Option<Value>> {
        self.get(&format!("/queues/{}/{}", quote(vhost), quote(name)))
            .await
    }

    /// Declares a queue.
    pub async fn create_queue(&self, vhost: &str, name: &str, body: &Value) -> anyhow::Result<()> {
        self.put(&format!("/queues/{}/{}", quote(vhost), quote(name)), body)
            .await
    }

    /// Deletes a queue.
    pub async fn delete_queue(&self, vhost: &str, name: &str) -> anyhow::Result<()> {
        self.delete(&format!("/queues/{}/{}", quote(vhost), quote(name)))
            .await
    }

    /// `(exchange, routing key)` of the queue's bindings, sorted, without the default one.
    pub async fn bindings(&self, vhost: &str, name: &str) -> anyhow::Result<Vec<(String, String)>> {
        let found = self
            .get(&format!(
                "/queues/{}/{}/bindings",
                quote(vhost),
                quote(name)
            ))
            .await?
            .unwrap_or_default();
        let mut out: Vec<(String, String)> = found
            .as_array()
            .into_iter()
            .flatten()
            .filter(|b| b["source"] != "")
            .map(|b| {
                (
                    b["source"].as_str().unwrap_or_default().to_owned(),
                    b["routing_key"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        out.sort();
        Ok(out)
    }

    /// A policy of a vhost.
    pub async fn policy(&self, vhost: &str, name: &str) -> anyhow::Result<Option<Value>> {
        self.get(&format!("/policies/{}/{}", quote(vhost), quote(name)))
            .await
    }

    /// A user, `None` when it does not exist.
    pub async fn user(&self, name: &str) -> anyhow::Result<Option<Value>> {
        self.get(&format!("/users/{}", quote(name))).await
    }

    /// Creates a user with a password and tags (comma-separated).
    pub async fn create_user(&self, name: &str, password: &str, tags: &str) -> anyhow::Result<()> {
        self.put(
            &format!("/users/{}", quote(name)),
            &serde_json::json!({"password": password, "tags": tags}),
        )
        .await
    }

    /// Deletes a user.
    pub async fn delete_user(&self, name: &str) -> anyhow::Result<()> {
        self.delete(&format!("/users/{}", quote(name))).await
    }

    /// The user's permissions per vhost: `vhost -> (configure, write, read)`.
    pub async fn permissions(
        &self,
        user: &str,
    ) -> anyhow::Result<Vec<(String, String, String, String)>> {
        let found = self
            .get(&format!("/users/{}/permissions", quote(user)))
            .await?
            .unwrap_or_default();
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let mut out: Vec<_> = found
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| {
                (
                    text(&p["vhost"]),
                    text(&p["configure"]),
                    text(&p["write"]),
                    text(&p["read"]),
                )
            })
            .collect();
        out.sort();
        Ok(out)
    }

    /// Whether `user` can authenticate with `password` (GET /api/whoami as that user; the
    /// user needs a management tag such as `monitoring`).
    pub async fn authenticates(&self, user: &str, password: &str) -> anyhow::Result<bool> {
        let response = self
            .http
            .get(format!("{}/whoami", self.base))
            .basic_auth(user, Some(password))
            .send()
            .await?;
        Ok(response.status().is_success())
    }
}

/// A harness serving `plugins` (file stems, e.g. `rabbitmq-exchange`) for `kinds` of the
/// RabbitMQ group, allowed to reach RabbitMQ's management API only, with the Secret
/// `rabbitmq` of [`harness`].
pub async fn harness_with(
    name: &str,
    plugins: &[&str],
    kinds: &[&str],
) -> anyhow::Result<(Harness, Api)> {
    let env = TestEnv::load()?;
    let r = env.rabbitmq()?;
    let host = HostSpec {
        plugins: plugins.iter().map(|p| plugin(p)).collect(),
        kinds: kinds.iter().map(|k| kind(GROUP, k)).collect(),
        allow_hosts: vec![r.api_url.clone()],
    };
    let h = Harness::new(name, host).await?;
    h.create_secret(
        SECRET,
        &[
            ("url", &r.api_url),
            ("username", &r.user),
            ("password", &r.password),
        ],
    )
    .await?;
    Ok((h, Api::new(r)?))
}

impl Api {
    /// An exchange, `None` when it (or its vhost) does not exist.
    pub async fn exchange(&self, vhost: &str, name: &str) -> anyhow::Result<Option<Value>> {
        self.get(&format!("/exchanges/{}/{}", quote(vhost), quote(name)))
            .await
    }

    /// Declares an exchange.
    pub async fn create_exchange(
        &self,
        vhost: &str,
        name: &str,
        body: &Value,
    ) -> anyhow::Result<()> {
        self.put(
            &format!("/exchanges/{}/{}", quote(vhost), quote(name)),
            body,
        )
        .await
    }

    /// Deletes an exchange.
    pub async fn delete_exchange(&self, vhost: &str, name: &str) -> anyhow::Result<()> {
        self.delete(&format!("/exchanges/{}/{}", quote(vhost), quote(name)))
            .await
    }

    /// `(source exchange, routing key)` of the bindings whose destination is the exchange,
    /// sorted.
    pub async fn exchange_bindings(
        &self,
        vhost: &str,
        name: &str,
    ) -> anyhow::Result<Vec<(String, String)>> {
        let found = self
            .get(&format!(
                "/exchanges/{}/{}/bindings/destination",
                quote(vhost),
                quote(name)
            ))
            .await?
            .unwrap_or_default();
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let mut out: Vec<(String, String)> = found
            .as_array()
            .into_iter()
            .flatten()
            .map(|b| (text(&b["source"]), text(&b["routing_key"])))
            .collect();
        out.sort();
        Ok(out)
    }
}
