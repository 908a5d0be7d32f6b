//! The `Plugin` CRD in a host that is already running (`orchard run --watch-plugins`), against
//! the real registry, apiserver, PowerDNS and cosign: a Plugin brings the PowerDNS zone kind to
//! life, a new digest swaps the plugin without a restart, bad versions (tampered, unsigned) are
//! refused while the good one keeps serving, deleting the Plugin stops reconciliation and
//! leaves objects for when it returns; a pull Secret opens a private registry.

use base64::Engine as _;
use std::time::Duration;

use anyhow::Context;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams};
use orchard_e2e::harness::CONVERGE;
use orchard_e2e::harness::{Harness, HostSpec, has_condition};
use orchard_e2e::oci::{Workdir, layer_digest, tamper_blob, with_custom_section};
use orchard_e2e::paths::plugin;
use orchard_e2e::pdns::zone_resource;
use orchard_e2e::{poll_until, unique_suffix};
use serde_json::{Value, json};

fn plugins_api(h: &Harness) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: "orchard.dev".into(),
        version: "v1alpha1".into(),
        api_version: "orchard.dev/v1alpha1".into(),
        kind: "Plugin".into(),
        plural: "plugins".into(),
    };
    Api::all_with(h.client.clone(), &resource)
}

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
    let insecure = format!("{},{}", h.env.registry, h.env.auth_registry);
    let selector = format!("orchard.dev/e2e={}", h.id);
    let cache = wd.path.join("oci-cache").display().to_string();
    let host = h.start_host(&[
        ("ORCHARD_WATCH_PLUGINS", "true"),
        ("ORCHARD_INSECURE_REGISTRIES", &insecure),
        ("ORCHARD_PLUGIN_SELECTOR", &selector),
        ("ORCHARD_PLUGIN_POLL_INTERVAL", "2s"),
        ("ORCHARD_OCI_CACHE_DIR", &cache),
        ("POD_NAMESPACE", &h.ns.clone()),
    ])?;
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

/// Applies the Plugin `name` (labelled for this scenario) with `source`.
async fn apply_plugin(h: &Harness, name: &str, source: Value) -> anyhow::Result<()> {
    let body = json!({
        "apiVersion": "orchard.dev/v1alpha1",
        "kind": "Plugin",
        "metadata": {"name": name, "labels": {"orchard.dev/e2e": h.id}},
        "spec": {"source": source, "allowedHosts": [h.env.pdns_api_url]}
    });
    let api = plugins_api(h);
    // The host installs the Plugin CRD when it starts: until then the kind is not served.
    poll_until(CONVERGE, "the Plugin kind to be served", || async {
        Ok(api
            .patch(
                name,
                &PatchParams::apply("e2e").force(),
                &Patch::Apply(&body),
            )
            .await
            .ok()
            .map(drop))
    })
    .await
}

/// Waits until the Plugin's Ready condition has `status` and `reason`, for its generation.
async fn wait_plugin(
    h: &Harness,
    name: &str,
    status: &str,
    reason: &str,
) -> anyhow::Result<DynamicObject> {
    let api = plugins_api(h);
    poll_until(
        CONVERGE,
        &format!("Plugin {name}: Ready={status} {reason}"),
        || async {
            let obj = api.get(name).await?;
            let observed =
                obj.data["status"]["observedGeneration"].as_i64() == obj.metadata.generation;
            Ok((observed && has_condition(&obj, "Ready", status, Some(reason))).then_some(obj))
        },
    )
    .await
    .with_context(|| format!("host log: {}", h.env.logs.display()))
}

fn ready_message(obj: &DynamicObject) -> String {
    obj.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready")
        .and_then(|c| c["message"].as_str())
        .unwrap_or_default()
        .to_owned()
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
    let plugin_obj = wait_plugin(&h, &zones, "True", "Serving").await?;
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
    let plugin_obj = wait_plugin(&h, &zones, "True", "Serving").await?;
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
    let refused = wait_plugin(&h, &zones, "False", "DigestMismatch").await?;
    let message = ready_message(&refused);
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
    let refused = wait_plugin(&h, &zones, "False", "SignatureInvalid").await?;
    let message = ready_message(&refused);
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
    plugins_api(&h)
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
    wait_plugin(&h, &zones, "True", "Serving").await?;
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
    let refused = wait_plugin(&h, &private, "False", "PullFailed").await?;
    let message = ready_message(&refused);
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
    let ready = wait_plugin(&h, &private, "True", "Serving").await?;
    assert_eq!(
        ready.data["status"]["kinds"],
        json!(["DnsZone.pdns.orchard.dev/v1alpha1"])
    );
    plugins_api(&h)
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
    let refused = wait_plugin(&h, &name, "False", "InvalidDescription").await?;
    let message = ready_message(&refused);
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
    plugins_api(&h)
        .delete(&name, &DeleteParams::default())
        .await?;
    Ok(())
}
