//! The `Plugin` CRD in a host that is already running (`orchard run --watch-plugins`), against
//! the real registry, apiserver, PowerDNS and cosign: a Plugin brings the PowerDNS zone kind to
//! life, a new digest swaps the plugin without a restart, bad versions (tampered, unsigned) are
//! refused while the good one keeps serving, deleting the Plugin stops reconciliation and
//! leaves objects for when it returns; a pull Secret opens a private registry; and a standby
//! of leader election, which loaded the Plugin while it stood by, takes over and serves its
//! kind while the registry cannot be reached.

use anyhow::Context as _;
use base64::Engine as _;
use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject};
use orchard_e2e::harness::{CONVERGE, Harness, HostSpec};
use orchard_e2e::oci::{Workdir, layer_digest, tamper_blob, with_custom_section};
use orchard_e2e::paths::plugin;
use orchard_e2e::pdns::zone_resource;
use orchard_e2e::plugins;
use orchard_e2e::{free_port, poll_until, unique_suffix, wait_host_ready, wait_lease_holder};
use serde_json::{Value, json};

/// A harness whose host serves no static plugin: only Plugins labelled for this scenario.
async fn dynamic_host(
    name: &str,
) -> anyhow::Result<(Harness, orchard_e2e::harness::Host, Workdir)> {
    let spec = HostSpec {
        plugins: vec![],
        kinds: vec![zone_resource()],
        allow_hosts: vec![],
    };
    let mut h = Harness::new(name, spec).await?;
    let wd = Workdir::new(&format!("plugin-crd-{}", h.id))?;
    let host = plugins::start_watching_host(&mut h, &wd, &[])?;
    h.create_secret(
        "pdns",
        &[
            ("url", &h.env.pdns_api_url.clone()),
            ("apiKey", &h.env.pdns_api_key.clone()),
        ],
    )
    .await?;
    Ok((h, host, wd))
}

/// Applies the Plugin `name` with `source`, allowed to reach PowerDNS.
async fn apply_plugin(h: &Harness, name: &str, source: Value) -> anyhow::Result<()> {
    plugins::apply(h, name, source, &[&h.env.pdns_api_url]).await
}

fn zone_yaml(name: &str, zone: &str, account: &str) -> String {
    format!(
        "apiVersion: pdns.orchard.dev/v1alpha1\nkind: DnsZone\nmetadata: {{name: {name}}}\nspec:\n  credentialsRef: {{secretName: pdns}}\n  resource: {{name: \"{zone}\", account: {account}}}\n"
    )
}

/// Waits until the zone's observed `pluginBuild` is `build`.
async fn wait_plugin_build(h: &Harness, name: &str, build: &str) -> anyhow::Result<DynamicObject> {
    let api = h.api("DnsZone");
    poll_until(
        CONVERGE,
        &format!("DnsZone {name} observed by plugin build {build}"),
        || async {
            let obj = api.get(name).await?;
            Ok((obj.data["status"]["resource"]["pluginBuild"] == build).then_some(obj))
        },
    )
    .await
}

#[tokio::test]
async fn plugin_lifecycle_load_swap_refuse_bad_versions_stop_and_return() -> anyhow::Result<()> {
    let (h, mut host, wd) = dynamic_host("plugin-lifecycle").await?;
    let env = &h.env;
    let key = wd.cosign_key_pair("release")?;
    let public_key = std::fs::read_to_string(&key)?;
    let repo = format!("{}/e2e/pdns-zone-{}", env.registry, h.id);

    // Two builds of the zone plugin, both signed: v1 observes pluginBuild "0.1.0", v2 "0.1.0+next".
    let v1 = wd.push(env, &plugin("pdns-zone"), &format!("{repo}:v1"))?;
    let v2 = wd.push(env, &plugin("pdns-zone-next"), &format!("{repo}:v2"))?;
    wd.cosign_sign("release", &v1)?;
    wd.cosign_sign("release", &v2)?;
    let zones = format!("zones-{}", h.id);
    let digest = |pinned: &str| pinned.split('@').nth(1).unwrap_or_default().to_owned();
    let verified = |reference: &str| json!({"reference": reference, "verification": {"publicKey": public_key}});

    // 1. A Plugin brings the kind to life in the running host.
    apply_plugin(&h, &zones, verified(&v1)).await?;
    let plugin_obj = plugins::wait_ready(&h, &zones, "True", "Serving").await?;
    assert_eq!(
        plugin_obj.data["status"]["resolvedDigest"],
        digest(&v1).as_str()
    );
    assert_eq!(
        plugin_obj.data["status"]["kinds"],
        json!(["DnsZone.pdns.orchard.dev/v1alpha1"])
    );

    let zone = format!("lifecycle-{}.example.org.", h.id);
    h.apply(&zone_yaml("lifecycle", &zone, "v1")).await?;
    h.wait_ready("DnsZone", "lifecycle").await?;
    wait_plugin_build(&h, "lifecycle", "0.1.0").await?;

    // 2. A new digest swaps the plugin without a restart; objects are re-observed by it.
    apply_plugin(&h, &zones, verified(&v2)).await?;
    let plugin_obj = plugins::wait_ready(&h, &zones, "True", "Serving").await?;
    assert_eq!(
        plugin_obj.data["status"]["resolvedDigest"],
        digest(&v2).as_str()
    );
    wait_plugin_build(&h, "lifecycle", "0.1.0+next").await?;
    assert!(host.is_running(), "the host kept running through the swap");

    // 3. A tampered artifact is refused; v2 keeps serving.
    let tampered_file = wd.write(
        "tampered.wasm",
        &with_custom_section(
            &std::fs::read(plugin("pdns-zone"))?,
            &format!("tampered-{}", h.id),
        ),
    )?;
    let tampered = wd.push(env, &tampered_file, &format!("{repo}:tampered"))?;
    wd.cosign_sign("release", &tampered)?;
    tamper_blob(env, &layer_digest(env, &tampered).await?)?;
    apply_plugin(&h, &zones, verified(&tampered)).await?;
    let refused = plugins::wait_ready(&h, &zones, "False", "DigestMismatch").await?;
    let message = plugins::ready_message(&refused);
    assert!(
        message.contains("digest mismatch") && message.contains(&digest(&v2)),
        "{message}"
    );
    assert_eq!(
        refused.data["status"]["resolvedDigest"],
        digest(&v2).as_str()
    );

    // 4. An unsigned artifact is refused when verification is required; v2 keeps serving.
    let unsigned_file = wd.write(
        "unsigned.wasm",
        &with_custom_section(
            &std::fs::read(plugin("pdns-zone"))?,
            &format!("unsigned-{}", h.id),
        ),
    )?;
    let unsigned = wd.push(env, &unsigned_file, &format!("{repo}:unsigned"))?;
    apply_plugin(&h, &zones, verified(&unsigned)).await?;
    let refused = plugins::wait_ready(&h, &zones, "False", "SignatureInvalid").await?;
    let message = plugins::ready_message(&refused);
    assert!(
        message.contains("not signed") && message.contains("still serving"),
        "{message}"
    );

    // … and still serving: a change to the zone reaches PowerDNS through v2.
    h.apply(&zone_yaml("lifecycle", &zone, "v2-still-serving"))
        .await?;
    poll_until(CONVERGE, "PowerDNS to show the new account", || async {
        let z: Value = orchard_e2e::http()?
            .get(format!(
                "{}/api/v1/servers/localhost/zones/{zone}",
                env.pdns_api_url
            ))
            .header("X-API-Key", &env.pdns_api_key)
            .send()
            .await?
            .json()
            .await?;
        Ok((z["account"] == "v2-still-serving").then_some(()))
    })
    .await?;

    // 5. Deleting the Plugin stops reconciliation; objects and finalizers stay.
    plugins::api(&h)
        .delete(&zones, &DeleteParams::default())
        .await?;
    poll_until(CONVERGE, "the host to stop serving the kind", || async {
        let log = std::fs::read_to_string(&host.log)?;
        Ok(log
            .contains("plugin stopped; objects and finalizers left in place")
            .then_some(()))
    })
    .await?;
    let orphan_zone = format!("orphan-{}.example.org.", h.id);
    h.apply(&zone_yaml("orphan", &orphan_zone, "none")).await?;
    // A negative check: nothing may act on the new object within this window.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let orphan = h.get("DnsZone", "orphan").await?;
    assert!(
        orphan.metadata.finalizers.is_none(),
        "no host serves the kind: {:?}",
        orphan.metadata.finalizers
    );
    let kept = h.finalizers("DnsZone", "lifecycle").await?;
    assert_eq!(kept, ["orchard.dev/pdns-zone"]);

    // 6. The Plugin returns (from the local cache): the waiting object is served.
    apply_plugin(&h, &zones, verified(&v2)).await?;
    plugins::wait_ready(&h, &zones, "True", "Serving").await?;
    let log = std::fs::read_to_string(&host.log)?;
    assert!(
        log.lines().any(|l| l.contains("plugin pulled")
            && l.contains(&digest(&v2))
            && l.contains("from_cache=true")),
        "the returning version came from the content cache"
    );
    h.wait_ready("DnsZone", "orphan").await?;

    // Clean up the zones in PowerDNS through the plugin.
    for name in ["lifecycle", "orphan"] {
        h.delete("DnsZone", name).await?;
        h.wait_gone("DnsZone", name).await?;
    }
    assert!(host.is_running());
    Ok(())
}

#[tokio::test]
async fn a_pull_secret_opens_a_private_registry_and_its_absence_says_why() -> anyhow::Result<()> {
    let (h, _host, wd) = dynamic_host("plugin-private").await?;
    let env = &h.env;
    let repository = format!("e2e/private-zone-{}", unique_suffix());
    let reference = format!("{}/{repository}:v1", env.auth_registry);
    // Push with the docker config of the test's working directory.
    let auth = base64::engine::general_purpose::STANDARD.encode(format!(
        "{}:{}",
        env.auth_registry_user, env.auth_registry_password
    ));
    let config = json!({"auths": {env.auth_registry.clone(): {"auth": auth}}}).to_string();
    std::fs::create_dir_all(wd.path.join("docker"))?;
    std::fs::write(wd.path.join("docker/config.json"), &config)?;
    let pinned = wd.push(env, &plugin("pdns-zone"), &reference)?;

    let private = format!("private-{}", h.id);
    // Without credentials the registry refuses: Ready=False says so.
    apply_plugin(&h, &private, json!({"reference": pinned})).await?;
    let refused = plugins::wait_ready(&h, &private, "False", "PullFailed").await?;
    let message = plugins::ready_message(&refused);
    assert!(message.contains(&repository), "{message}");
    assert!(
        refused.data["status"]["kinds"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "nothing is served"
    );

    // With a dockerconfigjson Secret in the host's namespace, it loads.
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(h.client.clone(), &h.ns);
    secrets
        .create(
            &kube::api::PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "registry"},
                "type": "kubernetes.io/dockerconfigjson",
                "stringData": {".dockerconfigjson": config}
            }))?,
        )
        .await?;
    apply_plugin(
        &h,
        &private,
        json!({"reference": pinned, "pullSecret": {"name": "registry"}}),
    )
    .await?;
    let ready = plugins::wait_ready(&h, &private, "True", "Serving").await?;
    assert_eq!(
        ready.data["status"]["kinds"],
        json!(["DnsZone.pdns.orchard.dev/v1alpha1"])
    );
    plugins::api(&h)
        .delete(&private, &DeleteParams::default())
        .await?;
    Ok(())
}

#[tokio::test]
async fn a_plugin_whose_describe_breaks_the_contract_is_refused_naming_the_rule()
-> anyhow::Result<()> {
    let (h, mut host, wd) = dynamic_host("plugin-bad-describe").await?;
    let reference = format!("{}/e2e/bad-describe-{}:v1", h.env.registry, h.id);
    let pinned = wd.push(&h.env, &plugin("orchard-fixture-bad-describe"), &reference)?;
    let name = format!("bad-{}", h.id);
    apply_plugin(&h, &name, json!({"reference": pinned})).await?;
    let refused = plugins::wait_ready(&h, &name, "False", "InvalidDescription").await?;
    let message = plugins::ready_message(&refused);
    assert!(
        message.contains("rule plugin-name") && message.contains("\"Bad_Name\""),
        "{message}"
    );
    assert!(
        refused.data["status"]["kinds"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "nothing is served"
    );
    assert!(host.is_running(), "one bad plugin does not stop the host");
    plugins::api(&h)
        .delete(&name, &DeleteParams::default())
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_standby_takes_over_a_plugins_kind_while_the_registry_is_down() -> anyhow::Result<()> {
    let spec = HostSpec {
        plugins: vec![],
        kinds: vec![zone_resource()],
        allow_hosts: vec![],
    };
    let mut h = Harness::new("standby-outage", spec).await?;
    h.create_secret(
        "pdns",
        &[
            ("url", &h.env.pdns_api_url.clone()),
            ("apiKey", &h.env.pdns_api_key.clone()),
        ],
    )
    .await?;
    let wd = Workdir::new(&format!("standby-outage-{}", h.id))?;
    // The registry as the replicas reach it: through a proxy the scenario cuts; by tag, so
    // the new leader resolves it again.
    let proxy = orchard_e2e::proxy::Proxy::start(&h.env.registry).await?;
    let path = format!("e2e/pdns-zone-standby-{}:v1", h.id);
    wd.push(
        &h.env,
        &plugin("pdns-zone"),
        &format!("{}/{path}", h.env.registry),
    )?;
    let reference = format!("{}/{path}", proxy.addr);

    let lease = format!("orchard-{}", h.id);
    let insecure = format!("{},{}", h.env.registry, proxy.addr);
    let admin_b = free_port()?;
    let replica = |instance: &str, admin: Option<u16>| {
        let mut env = vec![
            ("ORCHARD_LEADER_ELECT", "true".to_owned()),
            ("ORCHARD_LEASE_NAME", lease.clone()),
            ("ORCHARD_LEASE_SECONDS", "6".to_owned()),
            ("ORCHARD_INSTANCE", instance.to_owned()),
            ("ORCHARD_INSECURE_REGISTRIES", insecure.clone()),
            (
                "ORCHARD_OCI_CACHE_DIR",
                wd.path
                    .join(format!("oci-cache-{instance}"))
                    .display()
                    .to_string(),
            ),
        ];
        if let Some(admin) = admin {
            env.push(("ORCHARD_ADMIN_ADDR", format!("127.0.0.1:{admin}")));
        }
        env
    };

    // The leader serves the Plugin's kind.
    let env_a = replica("standby-a", None);
    let env_a: Vec<(&str, &str)> = env_a.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut a = plugins::start_watching_host(&mut h, &wd, &env_a)?;
    wait_lease_holder(&h.client, &h.ns, &lease, "standby-a", CONVERGE)
        .await
        .with_context(|| a.report())?;
    let name = format!("zones-{}", h.id);
    apply_plugin(&h, &name, json!({"reference": reference})).await?;
    plugins::wait_ready(&h, &name, "True", "Serving")
        .await
        .with_context(|| a.report())?;
    h.wait_kinds().await?;
    let zone = format!("before-{}.test.", h.id);
    h.apply(&zone_yaml("before", &zone, "standby")).await?;
    h.wait_ready("DnsZone", "before")
        .await
        .with_context(|| a.report())?;

    // The standby: ready once it has loaded the Plugin.
    let env_b = replica("standby-b", Some(admin_b));
    let env_b: Vec<(&str, &str)> = env_b.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut b = plugins::start_watching_host(&mut h, &wd, &env_b)?;
    wait_host_ready(&format!("127.0.0.1:{admin_b}"), CONVERGE)
        .await
        .with_context(|| b.report())?;
    assert!(
        std::fs::read_to_string(&b.log)?.contains("plugin loaded, standing by (converting only)"),
        "{}",
        b.report()
    );

    // The registry goes away; the leader leaves; the standby takes over and serves the kind
    // with the version it loaded while it stood by: a new zone, and the old one's delete.
    proxy.cut().await;
    a.terminate()?;
    a.wait_exit(CONVERGE).await?;
    wait_lease_holder(&h.client, &h.ns, &lease, "standby-b", CONVERGE)
        .await
        .with_context(|| b.report())?;
    let after = format!("after-{}.test.", h.id);
    h.apply(&zone_yaml("after", &after, "standby")).await?;
    h.wait_ready("DnsZone", "after")
        .await
        .with_context(|| b.report())?;
    assert!(
        std::fs::read_to_string(&b.log)?.contains(
            "the reference could not be resolved: serving the version this replica loaded before"
        ),
        "{}",
        b.report()
    );
    for zone in ["before", "after"] {
        h.delete("DnsZone", zone).await?;
        h.wait_gone("DnsZone", zone)
            .await
            .with_context(|| b.report())?;
    }
    plugins::api(&h)
        .delete(&name, &DeleteParams::default())
        .await?;
    assert!(b.is_running(), "{}", b.report());
    Ok(())
}
