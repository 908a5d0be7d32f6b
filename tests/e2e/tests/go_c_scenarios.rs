//! The reconciler's scenario set against the plugins written with the Go and C SDKs —
//! `rabbitmq-exchange` (Go) and `pdns-tsig` (C) — with the real apiserver, the real RabbitMQ
//! and PowerDNS and the real `orchard` binary. The scenarios are the shared ones of
//! `orchard_e2e::scenarios`; this file says what each kind's objects look like and reads the
//! external system's real state through its own API.

use anyhow::Context;
use orchard_e2e::harness::Harness;
use orchard_e2e::pdns::tsig::{self as tsig_api, TSIG_SECRET};
use orchard_e2e::rabbitmq::{self, Api, quote};
use orchard_e2e::scenario_set;
use orchard_e2e::scenarios::Subject;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

// -- RabbitExchange (Go), in a vhost of its own ---------------------------------------------------

pub struct Exchange {
    api: Api,
    /// The RabbitMQ vhost of the `RabbitVhost` object `vhost` that `prepare` makes.
    vhost: String,
}

const RABBITMQ_API_VERSION: &str = "rabbitmq.orchard.dev/v1alpha1";

fn exchange_yaml(name: &str, extra: &str) -> String {
    format!("{{vhostRef: vhost, name: \"{name}\"{extra}}}")
}

impl Subject for Exchange {
    const API_VERSION: &'static str = RABBITMQ_API_VERSION;
    const KIND: &'static str = "RabbitExchange";
    const PLUGIN: &'static str = "rabbitmq-exchange";
    const SECRET: &'static str = rabbitmq::SECRET;

    async fn harness(name: &str) -> anyhow::Result<(Harness, Self)> {
        let (h, api) = rabbitmq::harness_with(
            &format!("exchange-{name}"),
            &["rabbitmq-vhost", "rabbitmq-exchange"],
            &["RabbitVhost", "RabbitExchange"],
        )
        .await?;
        let vhost = format!("vx-{}", h.id);
        Ok((h, Self { api, vhost }))
    }

    async fn prepare(&mut self, h: &Harness) -> anyhow::Result<()> {
        h.apply(&format!(
            "apiVersion: {RABBITMQ_API_VERSION}\nkind: RabbitVhost\nmetadata: {{name: vhost}}\nspec:\n  credentialsRef: {{secretName: rabbitmq}}\n  resource: {{name: \"{}\"}}\n",
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
        exchange_yaml(name, "")
    }

    fn full(&self, name: &str) -> String {
        exchange_yaml(
            name,
            ", type: topic, durable: false, internal: true, arguments: {x-note: orders}, bindings: [{exchange: amq.topic, routingKey: \"orders.#\"}, {exchange: amq.direct, routingKey: orders}], alternateExchange: amq.fanout",
        )
    }

    async fn check_full(&self, name: &str, observed: &Value) -> anyhow::Result<()> {
        let e = self
            .api
            .exchange(&self.vhost, name)
            .await?
            .context("exchange missing")?;
        assert_eq!(e["type"], "topic");
        assert_eq!(e["durable"], false);
        assert_eq!(e["internal"], true);
        assert_eq!(e["arguments"], json!({"x-note": "orders"}));
        assert_eq!(
            self.api.exchange_bindings(&self.vhost, name).await?,
            [
                ("amq.direct".to_owned(), "orders".to_owned()),
                ("amq.topic".to_owned(), "orders.#".to_owned())
            ]
        );
        let policy = self
            .api
            .policy(&self.vhost, &format!("orchard.exchange.{name}"))
            .await?
            .context("policy missing")?;
        assert_eq!(
            policy["definition"],
            json!({"alternate-exchange": "amq.fanout"})
        );
        assert_eq!(policy["apply-to"], "exchanges");
        assert_eq!(observed["type"], "topic");
        assert_eq!(observed["internal"], true);
        assert_eq!(observed["alternateExchange"], "amq.fanout");
        assert_eq!(observed["bindings"].as_array().map(Vec::len), Some(2));
        Ok(())
    }

    fn updated(&self, name: &str) -> String {
        exchange_yaml(
            name,
            ", bindings: [{exchange: amq.topic, routingKey: \"a.*\"}], alternateExchange: amq.direct",
        )
    }

    async fn check_updated(&self, name: &str, observed: &Value) -> anyhow::Result<()> {
        assert_eq!(
            self.api.exchange_bindings(&self.vhost, name).await?,
            [("amq.topic".to_owned(), "a.*".to_owned())]
        );
        let policy = self
            .api
            .policy(&self.vhost, &format!("orchard.exchange.{name}"))
            .await?
            .context("policy missing")?;
        assert_eq!(
            policy["definition"],
            json!({"alternate-exchange": "amq.direct"})
        );
        assert_eq!(observed["alternateExchange"], "amq.direct");
        assert_eq!(observed["bindings"][0]["routingKey"], "a.*");
        Ok(())
    }

    async fn external(&self, id: &str) -> anyhow::Result<Option<Value>> {
        let (vhost, name) = id.split_once('/').context("exchange id")?;
        assert_eq!(vhost, quote(&self.vhost), "an exchange of another vhost");
        let Some(e) = self.api.exchange(&self.vhost, name).await? else {
            return Ok(None);
        };
        let policy = self
            .api
            .policy(&self.vhost, &format!("orchard.exchange.{name}"))
            .await?;
        Ok(Some(json!({
            "name": e["name"],
            "type": e["type"],
            "durable": e["durable"],
            "autoDelete": e["auto_delete"],
            "internal": e["internal"],
            "arguments": e["arguments"],
            "bindings": self.api.exchange_bindings(&self.vhost, name).await?,
            "policy": policy.map(|p| p["definition"].clone()),
        })))
    }

    async fn create_external(&self, name: &str, _marker: &str) -> anyhow::Result<String> {
        // The marker filter is `{vhost, type: fanout, durable: false}`: every exchange made
        // here is a transient fanout exchange, which none of the vhost's amq.* ones is.
        self.api
            .create_exchange(
                &self.vhost,
                name,
                &json!({"type": "fanout", "durable": false}),
            )
            .await?;
        Ok(self.id_of(name))
    }

    async fn delete_external(&self, id: &str) -> anyhow::Result<()> {
        let (_, name) = id.split_once('/').context("exchange id")?;
        self.api.delete_exchange(&self.vhost, name).await
    }

    fn filter_by_name(&self, name: &str) -> String {
        format!("{{vhost: \"{}\", name: \"{name}\"}}", self.vhost)
    }

    fn filter_by_marker(&self, _marker: &str) -> String {
        format!(
            "{{vhost: \"{}\", type: fanout, durable: false}}",
            self.vhost
        )
    }

    fn refused(&self, name: &str) -> Option<String> {
        // The CRD accepts plugin exchange types (x-...); RabbitMQ refuses one it does not have
        // (HTTP 400 "unknown exchange type").
        Some(exchange_yaml(
            &format!("{name}-refused"),
            ", type: x-not-installed",
        ))
    }

    async fn check_refused(&self, name: &str) -> anyhow::Result<()> {
        let refused = format!("{name}-refused");
        assert!(
            self.api.exchange(&self.vhost, &refused).await?.is_none(),
            "a refused exchange exists"
        );
        Ok(())
    }
}

// -- TsigKey (C) ----------------------------------------------------------------------------------

pub struct Tsig {
    api: tsig_api::Api,
}

/// The algorithm of the keys `create_external` makes for the ambiguous-filter marker (the only
/// scenario whose marker starts with `m`): no other scenario makes hmac-sha224 keys, so the
/// marker filter `{algorithm: hmac-sha224}` matches exactly the two it made. (TSIG keys have no
/// free-form field to carry a marker, and they are global to the PowerDNS server.)
const MARKER_ALGORITHM: &str = "hmac-sha224";

fn marker_algorithm(marker: &str) -> &'static str {
    if marker.starts_with('m') {
        MARKER_ALGORITHM
    } else {
        "hmac-sha256"
    }
}

fn digest(secret: &Value) -> String {
    hex::encode(Sha256::digest(
        secret.as_str().unwrap_or_default().as_bytes(),
    ))
}

impl Subject for Tsig {
    const API_VERSION: &'static str = "pdns.orchard.dev/v1alpha1";
    const KIND: &'static str = "TsigKey";
    const PLUGIN: &'static str = "pdns-tsig";
    const SECRET: &'static str = tsig_api::SECRET;

    async fn harness(name: &str) -> anyhow::Result<(Harness, Self)> {
        let (h, api) = tsig_api::harness(&format!("tsig-{name}")).await?;
        if name == "import-filter" {
            // Keys of the marker algorithm left by an earlier, failed run would make the
            // ambiguous filter match more than two.
            for key in api.keys().await? {
                if key["algorithm"] == MARKER_ALGORITHM {
                    api.delete(key["id"].as_str().unwrap_or_default()).await?;
                }
            }
        }
        Ok((h, Self { api }))
    }

    fn id_of(&self, name: &str) -> String {
        format!("{name}.")
    }

    fn minimal(&self, name: &str) -> String {
        format!("{{name: \"{name}\"}}")
    }

    fn full(&self, name: &str) -> String {
        format!("{{name: \"{name}\", algorithm: hmac-sha512, keyFrom: tsigKey}}")
    }

    async fn check_full(&self, name: &str, observed: &Value) -> anyhow::Result<()> {
        let k = self
            .api
            .key(&self.id_of(name))
            .await?
            .context("TSIG key missing")?;
        assert_eq!(k["algorithm"], "hmac-sha512");
        assert_eq!(k["key"], TSIG_SECRET, "the key is not the Secret's");
        assert_eq!(observed["algorithm"], "hmac-sha512");
        assert_eq!(observed["name"], name);
        assert!(
            !observed.to_string().contains(TSIG_SECRET),
            "status.resource shows the secret"
        );
        Ok(())
    }

    fn updated(&self, name: &str) -> String {
        format!("{{name: \"{name}\", algorithm: hmac-sha384}}")
    }

    async fn check_updated(&self, name: &str, observed: &Value) -> anyhow::Result<()> {
        let k = self
            .api
            .key(&self.id_of(name))
            .await?
            .context("TSIG key missing")?;
        assert_eq!(k["algorithm"], "hmac-sha384");
        let rows = self
            .api
            .keys()
            .await?
            .into_iter()
            .filter(|k| k["name"] == name)
            .count();
        assert_eq!(rows, 1, "PowerDNS lists the key {rows} times");
        assert_eq!(observed["algorithm"], "hmac-sha384");
        Ok(())
    }

    async fn external(&self, id: &str) -> anyhow::Result<Option<Value>> {
        let Some(k) = self.api.key(id).await? else {
            return Ok(None);
        };
        let rows: Vec<Value> = self
            .api
            .keys()
            .await?
            .into_iter()
            .filter(|r| r["id"] == id)
            .map(|r| r["algorithm"].clone())
            .collect();
        Ok(Some(json!({
            "name": k["name"],
            "algorithm": k["algorithm"],
            "secret": digest(&k["key"]),
            "rows": rows,
        })))
    }

    async fn create_external(&self, name: &str, marker: &str) -> anyhow::Result<String> {
        self.api.create(name, marker_algorithm(marker)).await
    }

    async fn delete_external(&self, id: &str) -> anyhow::Result<()> {
        self.api.delete(id).await
    }

    fn filter_by_name(&self, name: &str) -> String {
        format!("{{name: \"{name}\"}}")
    }

    fn filter_by_marker(&self, marker: &str) -> String {
        format!("{{algorithm: {}}}", marker_algorithm(marker))
    }

    fn refused(&self, name: &str) -> Option<String> {
        // PowerDNS refuses a secret that is not base64 (HTTP 422).
        Some(format!("{{name: \"{name}-refused\", keyFrom: badKey}}"))
    }

    async fn check_refused(&self, name: &str) -> anyhow::Result<()> {
        assert!(
            self.api
                .key(&self.id_of(&format!("{name}-refused")))
                .await?
                .is_none(),
            "a refused key exists"
        );
        Ok(())
    }
}

scenario_set!(exchange, crate::Exchange);
scenario_set!(tsig, crate::Tsig);

#[test]
fn the_marker_algorithm_is_only_for_the_ambiguous_filter() {
    assert_eq!(marker_algorithm("m123"), MARKER_ALGORITHM);
    for marker in ["ops", "single", "theirs"] {
        assert_ne!(marker_algorithm(marker), MARKER_ALGORITHM);
    }
}

/// The Go runtime's collector must not run inside `cabi_realloc` (a GC cycle there reads the
/// clock, which traps the call: "cannot leave component instance"). An object of 50,000 labels
/// makes the host lower enough strings through `cabi_realloc` to start one; the Go SDK keeps
/// the collector off there, so the call answers.
#[test]
fn the_go_sdk_survives_an_object_large_enough_to_collect_garbage_while_lowering()
-> anyhow::Result<()> {
    let env = orchard_e2e::TestEnv::load()?;
    let r = env.rabbitmq()?;
    let labels: serde_json::Map<String, Value> = (0..50_000)
        .map(|i| (format!("label-{i}"), json!("v".repeat(40))))
        .collect();
    let object = json!({
        "apiVersion": RABBITMQ_API_VERSION, "kind": "RabbitExchange",
        "metadata": {"name": "large", "namespace": "default", "labels": labels},
        "spec": {"credentialsRef": {"secretName": "rabbitmq"},
                 "resource": {"vhostRef": "vhost", "name": "amq.topic"}},
    });
    let path = std::env::temp_dir().join(format!(
        "orchard-large-object-{}.json",
        orchard_e2e::unique_suffix()
    ));
    std::fs::write(&path, object.to_string())?;
    let out = orchard_e2e::run(
        std::process::Command::new(orchard_e2e::paths::orchard_bin())
            .arg("invoke")
            .arg(orchard_e2e::paths::plugin("rabbitmq-exchange"))
            .args(["get-by-id", "--id", "%2F/amq.topic", "--object"])
            .arg(&path)
            .args(["--credential", &format!("url={}", r.api_url)])
            .args(["--credential", &format!("username={}", r.user)])
            .args(["--credential", &format!("password={}", r.password)])
            .args(["--allow-host", &r.api_url]),
    );
    std::fs::remove_file(&path)?;
    let answer: Value = serde_json::from_str(&out?)?;
    assert_eq!(answer["Ok"]["id"], "%2F/amq.topic", "{answer}");
    assert_eq!(answer["Ok"]["state"]["type"], "topic", "{answer}");
    Ok(())
}
