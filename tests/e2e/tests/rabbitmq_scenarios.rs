//! The reconciler's scenario set against the RabbitMQ plugins — `rabbitmq-vhost` and
//! `rabbitmq-queue` in Python, `rabbitmq-user` in JavaScript — with the real apiserver, the
//! real RabbitMQ and the real `orchard` binary. The scenarios are the shared ones of
//! `orchard_e2e::scenarios`; this file says what each kind's objects look like and reads
//! RabbitMQ's real state through its management API.

use anyhow::Context;
use std::time::Duration;

use orchard_e2e::harness::{Harness, HostSpec, kind, progressing_message};
use orchard_e2e::paths::plugin;
use orchard_e2e::rabbitmq::{self, Api, GROUP, quote};
use orchard_e2e::scenario_set;
use orchard_e2e::scenarios::{Subject, managed, name_in};
use orchard_e2e::{TestEnv, free_port, host_metrics, metric_sum, poll_until};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const API_VERSION: &str = "rabbitmq.orchard.dev/v1alpha1";

fn sorted_strings(v: &Value) -> Vec<String> {
    let mut out: Vec<String> = v
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t.as_str().map(str::to_owned))
        .collect();
    out.sort();
    out
}

// -- RabbitVhost (Python) ------------------------------------------------------------------------

pub struct Vhost {
    api: Api,
}

impl Subject for Vhost {
    const API_VERSION: &'static str = API_VERSION;
    const KIND: &'static str = "RabbitVhost";
    const PLUGIN: &'static str = "rabbitmq-vhost";
    const SECRET: &'static str = rabbitmq::SECRET;

    async fn harness(name: &str) -> anyhow::Result<(Harness, Self)> {
        let (h, api) = rabbitmq::harness(&format!("vhost-{name}")).await?;
        Ok((h, Self { api }))
    }

    fn id_of(&self, name: &str) -> String {
        name.to_owned()
    }

    fn minimal(&self, name: &str) -> String {
        format!("{{name: \"{name}\"}}")
    }

    fn full(&self, name: &str) -> String {
        format!(
            "{{name: \"{name}\", description: \"Orders of team A\", tags: [team-a, prod], tracing: true, maxConnections: 100, maxQueues: 20}}"
        )
    }

    async fn check_full(&self, name: &str, observed: &Value) -> anyhow::Result<()> {
        let v = self.api.vhost(name).await?.context("vhost missing")?;
        assert_eq!(v["description"], "Orders of team A");
        assert_eq!(sorted_strings(&v["tags"]), ["prod", "team-a"]);
        assert_eq!(v["tracing"], true);
        assert_eq!(
            self.api.vhost_limits(name).await?,
            json!({"max-connections": 100, "max-queues": 20})
        );
        assert_eq!(observed["maxQueues"], 20);
        assert_eq!(observed["maxConnections"], 100);
        assert_eq!(observed["tracing"], true);
        Ok(())
    }

    fn updated(&self, name: &str) -> String {
        format!("{{name: \"{name}\", description: changed, tags: [x], maxQueues: 5}}")
    }

    async fn check_updated(&self, name: &str, observed: &Value) -> anyhow::Result<()> {
        let v = self.api.vhost(name).await?.context("vhost missing")?;
        assert_eq!(v["description"], "changed");
        assert_eq!(sorted_strings(&v["tags"]), ["x"]);
        assert_eq!(self.api.vhost_limits(name).await?, json!({"max-queues": 5}));
        assert_eq!(observed["description"], "changed");
        assert_eq!(observed["maxQueues"], 5);
        Ok(())
    }

    async fn external(&self, id: &str) -> anyhow::Result<Option<Value>> {
        let Some(v) = self.api.vhost(id).await? else {
            return Ok(None);
        };
        Ok(Some(json!({
            "name": v["name"],
            "description": v["description"],
            "tags": sorted_strings(&v["tags"]),
            "tracing": v["tracing"],
            "limits": self.api.vhost_limits(id).await?,
        })))
    }

    async fn create_external(&self, name: &str, marker: &str) -> anyhow::Result<String> {
        self.api.create_vhost(name, marker, "").await?;
        Ok(name.to_owned())
    }

    async fn delete_external(&self, id: &str) -> anyhow::Result<()> {
        self.api.delete_vhost(id).await
    }

    fn filter_by_name(&self, name: &str) -> String {
        format!("{{name: \"{name}\"}}")
    }

    fn filter_by_marker(&self, marker: &str) -> String {
        format!("{{description: \"{marker}\"}}")
    }
}

// -- RabbitQueue (Python), in a vhost of its own -------------------------------------------------

pub struct Queue {
    api: Api,
    /// The RabbitMQ vhost of the `RabbitVhost` object `vhost` that `prepare` makes.
    vhost: String,
}

fn queue_yaml(vhost_ref: &str, name: &str, extra: &str) -> String {
    format!("{{vhostRef: {vhost_ref}, name: \"{name}\"{extra}}}")
}

impl Subject for Queue {
    const API_VERSION: &'static str = API_VERSION;
    const KIND: &'static str = "RabbitQueue";
    const PLUGIN: &'static str = "rabbitmq-queue";
    const SECRET: &'static str = rabbitmq::SECRET;

    async fn harness(name: &str) -> anyhow::Result<(Harness, Self)> {
        let (h, api) = rabbitmq::harness(&format!("queue-{name}")).await?;
        let vhost = format!("vh-{}", h.id);
        Ok((h, Self { api, vhost }))
    }

    async fn prepare(&mut self, h: &Harness) -> anyhow::Result<()> {
        h.apply(&format!(
            "apiVersion: {API_VERSION}\nkind: RabbitVhost\nmetadata: {{name: vhost}}\nspec:\n  credentialsRef: {{secretName: rabbitmq}}\n  resource: {{name: \"{}\"}}\n",
            self.vhost
        ))
        .await?;
        h.wait_ready("RabbitVhost", "vhost").await?;
        Ok(())
    }

    fn id_of(&self, name: &str) -> String {
        format!("{}/{}", quote(&self.vhost), quote(name))
    }

    fn minimal(&self, name: &str) -> String {
        queue_yaml("vhost", name, "")
    }

    fn full(&self, name: &str) -> String {
        queue_yaml(
            "vhost",
            name,
            ", type: quorum, arguments: {x-delivery-limit: 5}, bindings: [{exchange: amq.topic, routingKey: \"orders.#\"}, {exchange: amq.direct, routingKey: orders}], maxLength: 1000, messageTtl: 60000",
        )
    }

    async fn check_full(&self, name: &str, observed: &Value) -> anyhow::Result<()> {
        let q = self
            .api
            .queue(&self.vhost, name)
            .await?
            .context("queue missing")?;
        assert_eq!(q["type"], "quorum");
        assert_eq!(q["durable"], true);
        assert_eq!(q["arguments"]["x-delivery-limit"], 5);
        assert_eq!(
            self.api.bindings(&self.vhost, name).await?,
            [
                ("amq.direct".to_owned(), "orders".to_owned()),
                ("amq.topic".to_owned(), "orders.#".to_owned())
            ]
        );
        let policy = self
            .api
            .policy(&self.vhost, &format!("orchard.queue.{name}"))
            .await?
            .context("policy missing")?;
        assert_eq!(
            policy["definition"],
            json!({"max-length": 1000, "message-ttl": 60000})
        );
        assert_eq!(policy["apply-to"], "queues");
        assert_eq!(observed["type"], "quorum");
        assert_eq!(observed["maxLength"], 1000);
        assert_eq!(observed["bindings"].as_array().map(Vec::len), Some(2));
        Ok(())
    }

    fn updated(&self, name: &str) -> String {
        queue_yaml(
            "vhost",
            name,
            ", bindings: [{exchange: amq.topic, routingKey: \"a.*\"}], maxLength: 10",
        )
    }

    async fn check_updated(&self, name: &str, observed: &Value) -> anyhow::Result<()> {
        assert_eq!(
            self.api.bindings(&self.vhost, name).await?,
            [("amq.topic".to_owned(), "a.*".to_owned())]
        );
        let policy = self
            .api
            .policy(&self.vhost, &format!("orchard.queue.{name}"))
            .await?
            .context("policy missing")?;
        assert_eq!(policy["definition"], json!({"max-length": 10}));
        assert_eq!(observed["maxLength"], 10);
        Ok(())
    }

    async fn external(&self, id: &str) -> anyhow::Result<Option<Value>> {
        let (vhost, name) = id.split_once('/').context("queue id")?;
        assert_eq!(vhost, quote(&self.vhost), "a queue of another vhost");
        let Some(q) = self.api.queue(&self.vhost, name).await? else {
            return Ok(None);
        };
        let policy = self
            .api
            .policy(&self.vhost, &format!("orchard.queue.{name}"))
            .await?;
        Ok(Some(json!({
            "name": q["name"],
            "type": q["type"],
            "durable": q["durable"],
            "autoDelete": q["auto_delete"],
            "arguments": q["arguments"],
            "bindings": self.api.bindings(&self.vhost, name).await?,
            "policy": policy.map(|p| p["definition"].clone()),
        })))
    }

    async fn create_external(&self, name: &str, _marker: &str) -> anyhow::Result<String> {
        // The marker filter is `{vhost, type: quorum}`: every queue made here is a quorum queue.
        self.api
            .create_queue(
                &self.vhost,
                name,
                &json!({"durable": true, "arguments": {"x-queue-type": "quorum"}}),
            )
            .await?;
        Ok(self.id_of(name))
    }

    async fn delete_external(&self, id: &str) -> anyhow::Result<()> {
        let (_, name) = id.split_once('/').context("queue id")?;
        self.api.delete_queue(&self.vhost, name).await
    }

    fn filter_by_name(&self, name: &str) -> String {
        format!("{{vhost: \"{}\", name: \"{name}\"}}", self.vhost)
    }

    fn filter_by_marker(&self, _marker: &str) -> String {
        format!("{{vhost: \"{}\", type: quorum}}", self.vhost)
    }

    fn refused(&self, name: &str) -> Option<String> {
        // RabbitMQ refuses auto-delete quorum queues (HTTP 400).
        Some(queue_yaml(
            "vhost",
            &format!("{name}-refused"),
            ", type: quorum, autoDelete: true",
        ))
    }

    async fn check_refused(&self, name: &str) -> anyhow::Result<()> {
        let refused = format!("{name}-refused");
        assert!(
            self.api.queue(&self.vhost, &refused).await?.is_none(),
            "a refused queue exists"
        );
        Ok(())
    }
}

// -- RabbitUser (JavaScript) ---------------------------------------------------------------------

pub struct User {
    api: Api,
}

const FIRST_PASSWORD: &str = "first-password";

fn decode_base64(text: &str) -> Option<Vec<u8>> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.bytes().filter(|&c| c != b'=') {
        let v = u32::try_from(ALPHABET.iter().position(|&a| a == c)?).ok()?;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(u8::try_from((acc >> bits) & 0xff).ok()?);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// Which password RabbitMQ's salted SHA-256 hash stands for: `none`, `first-password` or
/// `other` (the hash itself changes with its salt on every write).
fn password_of(user: &Value) -> String {
    let hash = user["password_hash"].as_str().unwrap_or_default();
    if hash.is_empty() {
        return "none".into();
    }
    let Some(bytes) = decode_base64(hash).filter(|b| b.len() == 36) else {
        return "other".into();
    };
    let digest = Sha256::new()
        .chain_update(&bytes[..4])
        .chain_update(FIRST_PASSWORD.as_bytes())
        .finalize();
    if digest.as_slice() == &bytes[4..] {
        FIRST_PASSWORD.into()
    } else {
        "other".into()
    }
}

impl Subject for User {
    const API_VERSION: &'static str = API_VERSION;
    const KIND: &'static str = "RabbitUser";
    const PLUGIN: &'static str = "rabbitmq-user";
    const SECRET: &'static str = rabbitmq::SECRET;

    async fn harness(name: &str) -> anyhow::Result<(Harness, Self)> {
        let (h, api) = rabbitmq::harness(&format!("user-{name}")).await?;
        Ok((h, Self { api }))
    }

    fn id_of(&self, name: &str) -> String {
        name.to_owned()
    }

    fn minimal(&self, name: &str) -> String {
        format!("{{name: \"{name}\"}}")
    }

    fn full(&self, name: &str) -> String {
        format!(
            "{{name: \"{name}\", tags: [monitoring, policymaker], passwordKey: appPassword, permissions: [{{vhost: \"/\", configure: \"^app\\\\.\", read: \".*\"}}]}}"
        )
    }

    async fn check_full(&self, name: &str, observed: &Value) -> anyhow::Result<()> {
        let u = self.api.user(name).await?.context("user missing")?;
        assert_eq!(sorted_strings(&u["tags"]), ["monitoring", "policymaker"]);
        assert_eq!(password_of(&u), FIRST_PASSWORD);
        assert!(
            self.api.authenticates(name, FIRST_PASSWORD).await?,
            "the user cannot log in with its password"
        );
        assert_eq!(
            self.api.permissions(name).await?,
            [("/".into(), "^app\\.".into(), ".*".into(), ".*".into())]
        );
        assert_eq!(observed["hasPassword"], true);
        let hash = u["password_hash"].as_str().unwrap_or_default();
        assert!(
            !observed.to_string().contains(hash),
            "status.resource shows the hash"
        );
        Ok(())
    }

    fn updated(&self, name: &str) -> String {
        format!(
            "{{name: \"{name}\", tags: [monitoring], passwordKey: appPassword, permissions: [{{vhost: \"/\", read: \"^x$\"}}]}}"
        )
    }

    async fn check_updated(&self, name: &str, observed: &Value) -> anyhow::Result<()> {
        let u = self.api.user(name).await?.context("user missing")?;
        assert_eq!(sorted_strings(&u["tags"]), ["monitoring"]);
        assert_eq!(password_of(&u), FIRST_PASSWORD);
        assert_eq!(
            self.api.permissions(name).await?,
            [("/".into(), ".*".into(), ".*".into(), "^x$".into())]
        );
        assert_eq!(observed["hasPassword"], true);
        Ok(())
    }

    async fn external(&self, id: &str) -> anyhow::Result<Option<Value>> {
        let Some(u) = self.api.user(id).await? else {
            return Ok(None);
        };
        Ok(Some(json!({
            "name": u["name"],
            "tags": sorted_strings(&u["tags"]),
            "password": password_of(&u),
            "permissions": self.api.permissions(id).await?,
        })))
    }

    async fn create_external(&self, name: &str, marker: &str) -> anyhow::Result<String> {
        self.api
            .create_user(name, "external-password", marker)
            .await?;
        Ok(name.to_owned())
    }

    async fn delete_external(&self, id: &str) -> anyhow::Result<()> {
        self.api.delete_user(id).await
    }

    fn filter_by_name(&self, name: &str) -> String {
        format!("{{name: \"{name}\"}}")
    }

    fn filter_by_marker(&self, marker: &str) -> String {
        format!("{{tag: \"{marker}\"}}")
    }

    fn refused(&self, name: &str) -> Option<String> {
        // RabbitMQ refuses a permission that is not a valid regular expression (HTTP 400).
        Some(format!(
            "{{name: \"{name}-refused\", permissions: [{{vhost: \"/\", configure: \"(\"}}]}}"
        ))
    }

    async fn check_refused(&self, name: &str) -> anyhow::Result<()> {
        let refused = format!("{name}-refused");
        assert!(
            self.api.permissions(&refused).await?.is_empty(),
            "a refused permission was set"
        );
        self.api.delete_user(&refused).await
    }
}

scenario_set!(vhost, crate::Vhost);
scenario_set!(queue, crate::Queue);
scenario_set!(user, crate::User);

/// A queue applied before its vhost waits for it; the vhost cannot go while the queue uses
/// it; deleting the queue releases the vhost.
#[tokio::test(flavor = "multi_thread")]
async fn dependency_queue_waits_for_its_vhost_and_the_vhost_waits_for_its_queues()
-> anyhow::Result<()> {
    let (mut h, api) = rabbitmq::harness("dependency").await?;
    let _host = h.start_host(&[])?;
    h.wait_kinds().await?;
    let vhost = format!("dep-{}", h.id);
    h.apply(&format!(
        "apiVersion: {API_VERSION}\nkind: RabbitQueue\nmetadata: {{name: orders}}\nspec:\n  credentialsRef: {{secretName: rabbitmq}}\n  resource: {{vhostRef: dep, name: orders}}\n"
    ))
    .await?;
    let waiting = h
        .wait_condition(
            "RabbitQueue",
            "orders",
            "Progressing",
            "True",
            Some("Progressing"),
        )
        .await?;
    assert!(
        progressing_message(&waiting).contains("RabbitVhost/dep"),
        "{}",
        progressing_message(&waiting)
    );
    assert!(
        orchard_e2e::harness::has_condition(&waiting, "Available", "False", None),
        "not Available while waiting"
    );

    h.apply(&format!(
        "apiVersion: {API_VERSION}\nkind: RabbitVhost\nmetadata: {{name: dep}}\nspec:\n  credentialsRef: {{secretName: rabbitmq}}\n  resource: {{name: \"{vhost}\"}}\n"
    ))
    .await?;
    let queue = h.wait_ready("RabbitQueue", "orders").await?;
    assert_eq!(
        queue.data["status"]["id"],
        format!("{}/orders", quote(&vhost))
    );
    assert!(
        api.queue(&vhost, "orders").await?.is_some(),
        "queue missing in RabbitMQ"
    );

    // The vhost cannot go while the queue uses it.
    h.delete("RabbitVhost", "dep").await?;
    let blocked = h
        .wait_condition("RabbitVhost", "dep", "Progressing", "True", None)
        .await?;
    assert!(
        progressing_message(&blocked).contains("orchard.dev/rabbitmq-queue-guard"),
        "{}",
        progressing_message(&blocked)
    );
    assert!(
        api.vhost(&vhost).await?.is_some(),
        "vhost deleted while a queue used it"
    );

    h.delete("RabbitQueue", "orders").await?;
    h.wait_gone("RabbitQueue", "orders").await?;
    h.wait_gone("RabbitVhost", "dep").await?;
    assert!(
        api.vhost(&vhost).await?.is_none(),
        "vhost still in RabbitMQ"
    );
    Ok(())
}

/// The requests of a plugin's instances share kept-alive connections to RabbitMQ (which keeps
/// them open): three vhosts created and deleted one after the other, every request on one
/// connection. Before the pool every request opened its own.
#[tokio::test(flavor = "multi_thread")]
async fn a_plugins_requests_to_rabbitmq_share_one_kept_alive_connection() -> anyhow::Result<()> {
    let (mut h, s) = Vhost::harness("pooled").await?;
    let admin = format!("127.0.0.1:{}", free_port()?);
    let _host = h.start_host(&[("ORCHARD_ADMIN_ADDR", admin.as_str())])?;
    h.wait_kinds().await?;
    let objects = ["pooled-a", "pooled-b", "pooled-c"];
    // One at a time: one request in flight at any moment, so one connection serves them all.
    for object in objects {
        let name = name_in(&h, object);
        h.apply(&managed::<Vhost>(object, &s.minimal(&name), ""))
            .await?;
        h.wait_ready(Vhost::KIND, object).await?;
    }
    for object in objects {
        h.delete(Vhost::KIND, object).await?;
        h.wait_gone(Vhost::KIND, object).await?;
    }
    let metrics = host_metrics(&admin).await?;
    // Each of these calls sends at least one request to RabbitMQ: per vhost at least
    // `list-for-adoption` and `create`, and its `delete` (by id: no `get-by-id` before it).
    let calls: f64 = ["list-for-adoption", "create", "get-by-id", "delete"]
        .iter()
        .map(|f| {
            metric_sum(
                &metrics,
                "orchard_wasm_call_duration_seconds_count",
                &[&format!("function=\"{f}\"")],
            )
        })
        .sum();
    let opened = metric_sum(&metrics, "orchard_plugin_http_connections_total", &[]);
    assert!(calls >= 9.0, "{calls} calls that reach RabbitMQ");
    assert!(
        (1.0..=2.0).contains(&opened),
        "{opened} connections opened for {calls} calls that reach RabbitMQ"
    );
    Ok(())
}

/// RabbitMQ's management API served over HTTPS with a certificate of the cluster's own CA (the
/// test environment's), as an in-cluster service often is: a host that does not trust that CA
/// fails the handshake, creates nothing and says why on the object; the same object goes
/// Available once the host trusts the CA (`--plugin-ca-file`), and its deletion goes through
/// the same HTTPS API.
#[tokio::test(flavor = "multi_thread")]
async fn a_vhost_behind_https_of_the_clusters_own_ca_is_reached_once_the_host_trusts_that_ca()
-> anyhow::Result<()> {
    let env = TestEnv::load()?;
    let r = env.rabbitmq()?;
    let host = HostSpec {
        plugins: vec![plugin(Vhost::PLUGIN)],
        kinds: vec![kind(GROUP, Vhost::KIND)],
        allow_hosts: vec![r.api_tls_url.clone()],
    };
    let mut h = Harness::new("vhost-private-ca", host).await?;
    h.create_secret(
        rabbitmq::SECRET,
        &[
            ("url", &r.api_tls_url),
            ("username", &r.user),
            ("password", &r.password),
        ],
    )
    .await?;
    let api = Api::new(r)?;
    let name = name_in(&h, "private-ca");
    let object = managed::<Vhost>("private-ca", &format!("{{name: \"{name}\"}}"), "");

    let admin = format!("127.0.0.1:{}", free_port()?);
    let untrusting = h.start_host(&[("ORCHARD_ADMIN_ADDR", admin.as_str())])?;
    h.wait_kinds().await?;
    h.apply(&object).await?;
    let refused = poll_until(Duration::from_mins(1), "the certificate error", || async {
        let obj = h.get(Vhost::KIND, "private-ca").await?;
        let message = progressing_message(&obj);
        Ok(message.contains("TlsCertificateError").then_some(message))
    })
    .await?;
    assert!(refused.contains(&r.api_tls_url), "{refused}");
    assert!(api.vhost(&name).await?.is_none(), "created without TLS");
    let metrics = host_metrics(&admin).await?;
    let refusals = metric_sum(
        &metrics,
        "orchard_plugin_http_failures_total",
        &["error=\"tls_certificate\""],
    );
    assert!(refusals >= 1.0, "{refusals} certificate failures counted");
    drop(untrusting);

    let ca = env.ca_file.display().to_string();
    let _trusting = h.start_host(&[("ORCHARD_PLUGIN_CA_FILES", ca.as_str())])?;
    h.wait_ready(Vhost::KIND, "private-ca").await?;
    assert!(api.vhost(&name).await?.is_some(), "vhost {name} missing");
    h.delete(Vhost::KIND, "private-ca").await?;
    h.wait_gone(Vhost::KIND, "private-ca").await?;
    assert!(api.vhost(&name).await?.is_none(), "vhost {name} left");
    Ok(())
}

#[test]
fn the_kinds_are_in_the_rabbitmq_group() {
    assert_eq!(GROUP, "rabbitmq.orchard.dev");
    assert_eq!(decode_base64("YWJj").as_deref(), Some(b"abc".as_slice()));
}
