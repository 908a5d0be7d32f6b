//! A plugin's kind gains an API version, against the real apiserver, PowerDNS and the host's
//! conversion webhook: zones made at `v1alpha1`; the host restarted on the next build of the
//! plugin (v1alpha1 and v1beta1, stored at v1beta1, converted by the plugin in the sandbox);
//! the old zones read at `v1beta1` in its shape, a zone made at `v1beta1` read at `v1alpha1`
//! with nothing lost, every object migrated to the storage version and `storedVersions`
//! dropping `v1alpha1`; nothing re-created in PowerDNS; and a downgrade that would strand the
//! `v1beta1` objects refused.
//!
//! And, with a fault fixture loaded from the registry as `Plugin` objects: a `convert` that
//! traps fails the apiserver's request naming the plugin while the host serves on, and a
//! `Plugin` upgrade that would drop a stored version is refused on the Plugin object with the
//! old version still serving; and a standby replica of leader election — which the chart's
//! Service sends conversions to as well — converts a Plugin's kind as soon as it is ready.
//!
//! The scenarios' plugin builds are on groups of their own (`evolution.pdns.orchard.dev`,
//! `convertible.fixtures.orchard.dev`; `make rust-plugins`), so that the other suites'
//! `DnsZone` and `Faulty` CRDs are never upgraded under them.

use anyhow::Context;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams};
use orchard_e2e::crds;
use orchard_e2e::harness::{CONVERGE, Harness, HostSpec};
use orchard_e2e::oci::Workdir;
use orchard_e2e::paths::plugin;
use orchard_e2e::pdns::{self, zone_name};
use orchard_e2e::{
    free_port, lease_holder, plugins, poll_until, wait_host_ready, wait_lease_holder,
};
use serde_json::{Value, json};

const GROUP: &str = "evolution.pdns.orchard.dev";
const CRD: &str = "dnszones.evolution.pdns.orchard.dev";
const WEBHOOK: (&str, &str) = ("ORCHARD_CONVERSION_WEBHOOK_ADDR", "127.0.0.1:0");

fn zones_at(version: &str) -> ApiResource {
    ApiResource {
        group: GROUP.into(),
        version: version.into(),
        api_version: format!("{GROUP}/{version}"),
        kind: "DnsZone".into(),
        plural: "dnszones".into(),
    }
}

fn api_at(h: &Harness, version: &str) -> Api<DynamicObject> {
    Api::namespaced_with(h.client.clone(), &h.ns, &zones_at(version))
}

async fn apply(api: &Api<DynamicObject>, manifest: Value) -> anyhow::Result<()> {
    let name = manifest["metadata"]["name"]
        .as_str()
        .context("no name")?
        .to_owned();
    poll_until(CONVERGE, &format!("{name} to be applied"), || {
        let (api, manifest, name) = (api.clone(), manifest.clone(), name.clone());
        async move {
            match api
                .patch(
                    &name,
                    &PatchParams::apply("e2e").force(),
                    &Patch::Apply(&manifest),
                )
                .await
            {
                Ok(_) => Ok(Some(())),
                // The kind or the version is not served yet.
                Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
                Err(e) => Err(e.into()),
            }
        }
    })
    .await
}

/// Waits until the object `name` of `api` is Available.
async fn available(api: &Api<DynamicObject>, name: &str) -> anyhow::Result<DynamicObject> {
    poll_until(CONVERGE, &format!("{name} to be Available"), || {
        let api = api.clone();
        async move {
            let obj = api.get(name).await?;
            let ok = obj.data["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Available" && c["status"] == "True");
            Ok(ok.then_some(obj))
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_zone_kind_gains_v1beta1_by_a_plugin_upgrade_converting_and_migrating_every_zone()
-> anyhow::Result<()> {
    let env = orchard_e2e::TestEnv::load()?;
    let mut h = Harness::new(
        "evolution",
        HostSpec {
            plugins: vec![plugin("pdns-zone-evolution-v1alpha1")],
            kinds: vec![zones_at("v1alpha1")],
            allow_hosts: vec![env.pdns_api_url.clone()],
        },
    )
    .await?;
    crds::remove(&h.client, CRD).await?;
    pdns::create_secret(&h, "pdns").await?;
    let pdns_api = pdns::Api::new(&env)?;

    // Today's plugin: two zones at v1alpha1.
    let mut host = h.start_host(&[WEBHOOK])?;
    let alpha = api_at(&h, "v1alpha1");
    let (a, b) = (zone_name(&h, "a"), zone_name(&h, "b"));
    for (name, zone) in [("a", &a), ("b", &b)] {
        apply(
            &alpha,
            json!({
                "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "DnsZone",
                "metadata": {"name": name},
                "spec": {"credentialsRef": {"secretName": "pdns"},
                         "resource": {"name": zone, "nameservers": [format!("ns1.{zone}"), format!("ns2.{zone}")]}}
            }),
        )
        .await?;
    }
    let mut ids = Vec::new();
    for name in ["a", "b"] {
        let obj = available(&api_at(&h, "v1alpha1"), name).await?;
        ids.push(
            obj.data["status"]["id"]
                .as_str()
                .context("no status.id")?
                .to_owned(),
        );
    }
    assert_eq!(
        crds::get(&h.client, CRD)
            .await?
            .and_then(|c| c.status?.stored_versions),
        Some(vec!["v1alpha1".to_owned()])
    );

    // The upgrade: the host restarted on the plugin's next build.
    host.terminate()?;
    host.wait_exit(CONVERGE).await?;
    h.set_plugins(vec![plugin("pdns-zone-evolution-v1beta1")]);
    let mut host = h.start_host(&[WEBHOOK])?;
    let beta = api_at(&h, "v1beta1");

    // The old zones read at v1beta1, through the webhook, in its shape.
    let read = poll_until(CONVERGE, "zone a to be served at v1beta1", || {
        let beta = beta.clone();
        async move {
            match beta.get("a").await {
                Ok(obj) => Ok(Some(obj)),
                Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
                Err(e) => Err(e.into()),
            }
        }
    })
    .await
    .with_context(|| host.report())?;
    assert_eq!(
        read.types.as_ref().map(|t| t.api_version.as_str()),
        Some(&*format!("{GROUP}/v1beta1"))
    );
    let resource = &read.data["spec"]["resource"];
    assert_eq!(resource["name"], a.as_str());
    assert_eq!(
        resource["nameServers"],
        json!([{"host": format!("ns1.{a}")}, {"host": format!("ns2.{a}")}])
    );
    assert!(resource.get("nameservers").is_none(), "{resource}");
    assert_eq!(
        read.data["status"]["id"],
        ids[0].as_str(),
        "the envelope is the host's"
    );

    // A zone made at v1beta1, with a ttl v1alpha1 cannot hold, reads at v1alpha1 and back.
    let c = zone_name(&h, "c");
    apply(
        &beta,
        json!({
            "apiVersion": format!("{GROUP}/v1beta1"), "kind": "DnsZone",
            "metadata": {"name": "c"},
            "spec": {"credentialsRef": {"secretName": "pdns"},
                     "resource": {"name": c, "nameServers": [{"host": format!("ns1.{c}"), "ttl": 300}]}}
        }),
    )
    .await?;
    let at_alpha = available(&alpha, "c").await?;
    assert_eq!(
        at_alpha.data["spec"]["resource"]["nameservers"],
        json!([format!("ns1.{c}")])
    );
    assert_eq!(
        at_alpha
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(&format!("{GROUP}/v1beta1-nameserver-ttls")).cloned()),
        Some(format!(r#"{{"ns1.{c}":300}}"#))
    );
    let at_beta = beta.get("c").await?;
    assert_eq!(
        at_beta.data["spec"]["resource"]["nameServers"],
        json!([{"host": format!("ns1.{c}"), "ttl": 300}])
    );
    assert!(
        at_beta
            .metadata
            .annotations
            .as_ref()
            .is_none_or(|a| !a.contains_key(&format!("{GROUP}/v1beta1-nameserver-ttls"))),
        "the ttl is a field at v1beta1, not an annotation: {:?}",
        at_beta.metadata.annotations
    );
    assert!(pdns_api.zone(&c).await?.is_some(), "zone c is in PowerDNS");

    // `orchard invoke … convert` answers what the webhook does, on a manifest from a file.
    let file = env.logs.join(format!("evolution-{}-c.json", h.id));
    std::fs::write(&file, serde_json::to_vec(&at_alpha)?)?;
    let out = orchard_e2e::run(
        std::process::Command::new(orchard_e2e::paths::orchard_bin())
            .args([
                "invoke",
                &plugin("pdns-zone-evolution-v1beta1").display().to_string(),
            ])
            .args([
                "convert",
                "--to",
                "v1beta1",
                "--object",
                &file.display().to_string(),
            ]),
    )?;
    let converted: Value = serde_json::from_str(&out)?;
    assert_eq!(converted["apiVersion"], format!("{GROUP}/v1beta1"));
    assert_eq!(
        converted["spec"]["resource"]["nameServers"],
        json!([{"host": format!("ns1.{c}"), "ttl": 300}])
    );

    // The storage migration: every object rewritten at v1beta1, v1alpha1 no longer stored.
    poll_until(CONVERGE, "storedVersions to drop v1alpha1", || async {
        let stored = crds::get(&h.client, CRD)
            .await?
            .and_then(|c| c.status?.stored_versions);
        Ok((stored == Some(vec!["v1beta1".to_owned()])).then_some(()))
    })
    .await
    .with_context(|| host.report())?;
    // The host logs that it is done after the write that dropped v1alpha1: poll for the line.
    poll_until(
        CONVERGE,
        "the host to log the storage migration done",
        || async {
            let log = std::fs::read_to_string(&host.log)?;
            Ok(log.contains("storage migration done").then_some(()))
        },
    )
    .await
    .with_context(|| host.report())?;

    // Nothing re-created: the same ids, one Created Event each, the zones still in PowerDNS.
    for (name, id) in ["a", "b"].iter().zip(&ids) {
        let obj = available(&api_at(&h, "v1alpha1"), name).await?;
        assert_eq!(obj.data["status"]["id"].as_str(), Some(id.as_str()));
        let created = h
            .event_reasons(name)
            .await?
            .iter()
            .filter(|r| *r == "Created")
            .count();
        assert_eq!(created, 1, "{name} was created once");
        assert!(pdns_api.zone(id).await?.is_some(), "{id} is in PowerDNS");
    }

    // A downgrade that would strand the v1beta1 objects is refused: the host says why and
    // exits; the installed CRD keeps serving v1beta1.
    host.terminate()?;
    host.wait_exit(CONVERGE).await?;
    h.set_plugins(vec![plugin("pdns-zone-evolution-v1alpha1")]);
    let mut old = h.start_host(&[WEBHOOK])?;
    old.wait_exit(CONVERGE).await?;
    let log = std::fs::read_to_string(&old.log)?;
    assert!(
        log.contains("version v1beta1 is still stored in etcd (status.storedVersions) and the new schema no longer lists it"),
        "{log}"
    );
    let served = crds::get(&h.client, CRD).await?.context("CRD gone")?;
    assert!(
        served
            .spec
            .versions
            .iter()
            .any(|v| v.name == "v1beta1" && v.storage)
    );

    // Clean up at the new version: the zones go from PowerDNS, then the scenario's CRD.
    h.set_plugins(vec![plugin("pdns-zone-evolution-v1beta1")]);
    let _host = h.start_host(&[WEBHOOK])?;
    for name in ["a", "b", "c"] {
        // Until the new host names its webhook in the CRD, the apiserver dials the last one's.
        poll_until(CONVERGE, &format!("{name} to be deleted"), || {
            let alpha = alpha.clone();
            async move { Ok(alpha.delete(name, &DeleteParams::default()).await.ok()) }
        })
        .await?;
    }
    for name in ["a", "b", "c"] {
        poll_until(CONVERGE, &format!("{name} to be gone"), || {
            let alpha = alpha.clone();
            async move { Ok(alpha.get_opt(name).await?.is_none().then_some(())) }
        })
        .await?;
    }
    for zone in [&a, &b, &c] {
        assert!(
            pdns_api.zone(zone).await?.is_none(),
            "{zone} left in PowerDNS"
        );
    }
    crds::remove(&h.client, CRD).await?;
    Ok(())
}

const FAULTY_GROUP: &str = "convertible.fixtures.orchard.dev";
const FAULTY_CRD: &str = "faulties.convertible.fixtures.orchard.dev";

/// The scenarios of the convertible fixture share its one CRD (each removes it first and
/// names its own webhook in it): they take turns.
static FAULTY_CRD_TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn faulties_at(version: &str) -> ApiResource {
    ApiResource {
        group: FAULTY_GROUP.into(),
        version: version.into(),
        api_version: format!("{FAULTY_GROUP}/{version}"),
        kind: "Faulty".into(),
        plural: "faulties".into(),
    }
}

fn echoes() -> ApiResource {
    ApiResource {
        group: "fixtures.orchard.dev".into(),
        version: "v1alpha1".into(),
        api_version: "fixtures.orchard.dev/v1alpha1".into(),
        kind: "Echo".into(),
        plural: "echoes".into(),
    }
}

/// A `Faulty` of the convertible group at `version` with `resource` as its document (the
/// fixture creates it as the resource `ok`).
fn faulty(version: &str, name: &str, resource: &Value) -> Value {
    json!({
        "apiVersion": format!("{FAULTY_GROUP}/{version}"), "kind": "Faulty",
        "metadata": {"name": name},
        "spec": {"resource": resource}
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_trapping_convert_fails_one_request_and_a_plugin_upgrade_dropping_a_stored_version_is_refused_while_the_old_serves()
-> anyhow::Result<()> {
    let mut h = Harness::new(
        "convert-trap",
        HostSpec {
            plugins: vec![],
            kinds: vec![faulties_at("v1alpha1"), echoes()],
            allow_hosts: vec![],
        },
    )
    .await?;
    let _turn = FAULTY_CRD_TURN.lock().await;
    crds::remove(&h.client, FAULTY_CRD).await?;
    let wd = Workdir::new(&format!("convert-trap-{}", h.id))?;
    let mut host = plugins::start_watching_host(&mut h, &wd, &[WEBHOOK])?;

    // Two Plugins from the registry: the fixture at two versions (stored at v1beta1), and echo.
    let repo = format!("{}/e2e/faulty-convertible-{}", h.env.registry, h.id);
    let two_versions = wd.push(
        &h.env,
        &plugin("faulty-convertible-v1beta1"),
        &format!("{repo}:v1beta1"),
    )?;
    let one_version = wd.push(
        &h.env,
        &plugin("faulty-convertible-v1alpha1"),
        &format!("{repo}:v1alpha1"),
    )?;
    let echo = wd.push(
        &h.env,
        &plugin("orchard-fixture-echo"),
        &format!("{}/e2e/echo-{}:v1", h.env.registry, h.id),
    )?;
    let (faulty_plugin, echo_plugin) = (format!("faulty-{}", h.id), format!("echo-{}", h.id));
    plugins::apply(&h, &faulty_plugin, json!({"reference": two_versions}), &[]).await?;
    plugins::apply(&h, &echo_plugin, json!({"reference": echo}), &[]).await?;
    let serving = plugins::wait_ready(&h, &faulty_plugin, "True", "Serving").await?;
    plugins::wait_ready(&h, &echo_plugin, "True", "Serving").await?;

    // An object made at v1alpha1 is stored at v1beta1 through the plugin's convert, and served.
    let (alpha, beta) = (
        Api::<DynamicObject>::namespaced_with(h.client.clone(), &h.ns, &faulties_at("v1alpha1")),
        Api::<DynamicObject>::namespaced_with(h.client.clone(), &h.ns, &faulties_at("v1beta1")),
    );
    apply(&alpha, faulty("v1alpha1", "fine", &json!({"note": "kept"}))).await?;
    h.wait_ready("Faulty", "fine")
        .await
        .with_context(|| host.report())?;
    let fine = beta.get("fine").await?;
    assert_eq!(fine.data["spec"]["resource"]["note"], "kept");
    assert_eq!(fine.data["spec"]["resource"]["convertedTo"], "v1beta1");

    // A convert that traps fails that one request, naming the plugin, the object and the trap.
    let trap = faulty("v1alpha1", "trap", &json!({"convert": "trap"}));
    let refused = alpha
        .patch(
            "trap",
            &PatchParams::apply("e2e").force(),
            &Patch::Apply(&trap),
        )
        .await;
    let message = match refused {
        Err(kube::Error::Api(e)) => e.message,
        other => panic!("a trapping conversion must fail the request, got {other:?}"),
    };
    assert!(
        message.contains(&format!(
            "plugin {faulty_plugin}: converting Faulty {}/trap from v1alpha1 to v1beta1",
            h.ns
        )) && message.contains("trapped"),
        "{message}"
    );
    assert!(alpha.get_opt("trap").await?.is_none(), "nothing was stored");

    // The host serves on: the next conversions of the kind work (a write at v1beta1 read at
    // v1alpha1), and so does the other kind.
    apply(&beta, faulty("v1beta1", "fine", &json!({"note": "beta"}))).await?;
    let at_alpha = alpha.get("fine").await?;
    assert_eq!(at_alpha.data["spec"]["resource"]["note"], "beta");
    assert_eq!(at_alpha.data["spec"]["resource"]["convertedTo"], "v1alpha1");
    h.apply(
        "apiVersion: fixtures.orchard.dev/v1alpha1\nkind: Echo\nmetadata: {name: after-trap}\nspec:\n  resource: {said: hello}\n",
    )
    .await?;
    h.wait_ready("Echo", "after-trap").await?;
    assert!(host.is_running(), "{}", host.report());

    // A Plugin upgrade to the one-version build would strand the objects stored at v1beta1:
    // refused on the Plugin object, naming the version; the old build keeps serving.
    plugins::apply(&h, &faulty_plugin, json!({"reference": one_version}), &[]).await?;
    let refused = plugins::wait_ready(&h, &faulty_plugin, "False", "IncompatibleSchema").await?;
    let message = plugins::ready_message(&refused);
    assert!(
        message.contains("version v1beta1 is still stored in etcd (status.storedVersions) and the new schema no longer lists it"),
        "{message}"
    );
    assert_eq!(
        refused.data["status"]["resolvedDigest"], serving.data["status"]["resolvedDigest"],
        "the serving build is the old one"
    );
    let crd = crds::get(&h.client, FAULTY_CRD)
        .await?
        .context("the CRD is gone")?;
    assert!(
        crd.spec
            .versions
            .iter()
            .any(|v| v.name == "v1beta1" && v.storage && v.served),
        "the CRD keeps serving v1beta1: {:?}",
        crd.spec.versions
    );
    apply(
        &beta,
        faulty("v1beta1", "fine", &json!({"note": "after-refusal"})),
    )
    .await?;
    let at_alpha = alpha.get("fine").await?;
    assert_eq!(
        at_alpha.data["spec"]["resource"]["note"], "after-refusal",
        "converted by the old build"
    );
    h.wait_ready("Faulty", "fine").await?;

    // Clean up: the Plugins, then the objects without their finalizers (the fixtures'
    // resources never go away, so a delete through the host would wait forever), then the CRD.
    for name in [&faulty_plugin, &echo_plugin] {
        plugins::api(&h)
            .delete(name, &DeleteParams::default())
            .await?;
    }
    assert!(host.is_running(), "{}", host.report());
    host.terminate()?;
    host.wait_exit(CONVERGE).await?;
    h.api("Echo")
        .patch(
            "after-trap",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await?;
    crds::remove(&h.client, FAULTY_CRD).await?;
    Ok(())
}

/// A directory with `tls.crt`, `tls.key` and `ca.crt` for `127.0.0.1`: what the chart mounts
/// from one Secret in every replica, so that either replica's webhook is trusted by the one
/// `caBundle` the CRD carries.
fn shared_webhook_cert(dir: &std::path::Path) -> anyhow::Result<()> {
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = rcgen::CertifiedIssuer::self_signed(ca, rcgen::KeyPair::generate()?)?;
    let key = rcgen::KeyPair::generate()?;
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])?.signed_by(&key, &ca)?;
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("tls.crt"), cert.pem())?;
    std::fs::write(dir.join("tls.key"), key.serialize_pem())?;
    std::fs::write(dir.join("ca.crt"), ca.pem())?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_standby_replica_converts_a_plugins_kind_as_soon_as_it_is_ready() -> anyhow::Result<()> {
    let mut h = Harness::new(
        "convert-standby",
        HostSpec {
            plugins: vec![],
            kinds: vec![faulties_at("v1alpha1")],
            allow_hosts: vec![],
        },
    )
    .await?;
    let _turn = FAULTY_CRD_TURN.lock().await;
    crds::remove(&h.client, FAULTY_CRD).await?;
    let (wd_a, wd_b) = (
        Workdir::new(&format!("convert-standby-a-{}", h.id))?,
        Workdir::new(&format!("convert-standby-b-{}", h.id))?,
    );
    let certs = wd_a.path.join("webhook-cert");
    shared_webhook_cert(&certs)?;
    let certs = certs.display().to_string();
    let (webhook_a, webhook_b, admin_b) = (free_port()?, free_port()?, free_port()?);
    // The CRD names the standby's webhook: every conversion of the kind goes to it, as the
    // chart's Service sends some of them to a standby.
    let url = format!("https://127.0.0.1:{webhook_b}/convert");
    let lease = format!("orchard-{}", h.id);
    let replica = |instance: &str, webhook: u16, admin: Option<u16>| {
        let mut env = vec![
            ("ORCHARD_LEADER_ELECT", "true".to_owned()),
            ("ORCHARD_LEASE_NAME", lease.clone()),
            ("ORCHARD_INSTANCE", instance.to_owned()),
            (
                "ORCHARD_CONVERSION_WEBHOOK_ADDR",
                format!("127.0.0.1:{webhook}"),
            ),
            ("ORCHARD_CONVERSION_WEBHOOK_URL", url.clone()),
            ("ORCHARD_CONVERSION_WEBHOOK_CERT_DIR", certs.clone()),
        ];
        if let Some(admin) = admin {
            env.push(("ORCHARD_ADMIN_ADDR", format!("127.0.0.1:{admin}")));
        }
        env
    };
    let env_a = replica("replica-a", webhook_a, None);
    let env_a: Vec<(&str, &str)> = env_a.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut a = plugins::start_watching_host(&mut h, &wd_a, &env_a)?;
    wait_lease_holder(&h.client, &h.ns, &lease, "replica-a", CONVERGE)
        .await
        .with_context(|| a.report())?;

    // The leader serves the fixture at two versions (stored at v1beta1) from the registry.
    let reference = wd_a.push(
        &h.env,
        &plugin("faulty-convertible-v1beta1"),
        &format!("{}/e2e/faulty-standby-{}:v1beta1", h.env.registry, h.id),
    )?;
    let name = format!("faulty-standby-{}", h.id);
    plugins::apply(&h, &name, json!({"reference": reference}), &[]).await?;
    plugins::wait_ready(&h, &name, "True", "Serving")
        .await
        .with_context(|| a.report())?;

    // The standby: ready only once it can convert the Plugin's kind.
    let env_b = replica("replica-b", webhook_b, Some(admin_b));
    let env_b: Vec<(&str, &str)> = env_b.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut b = plugins::start_watching_host(&mut h, &wd_b, &env_b)?;
    wait_host_ready(&format!("127.0.0.1:{admin_b}"), CONVERGE)
        .await
        .with_context(|| b.report())?;

    // At once, through the standby's webhook: an object written at v1alpha1 is stored at
    // v1beta1, and read back at v1alpha1.
    let (alpha, beta) = (
        Api::<DynamicObject>::namespaced_with(h.client.clone(), &h.ns, &faulties_at("v1alpha1")),
        Api::<DynamicObject>::namespaced_with(h.client.clone(), &h.ns, &faulties_at("v1beta1")),
    );
    alpha
        .patch(
            "fine",
            &PatchParams::apply("e2e").force(),
            &Patch::Apply(faulty("v1alpha1", "fine", &json!({"note": "kept"}))),
        )
        .await
        .with_context(|| format!("a write converted by the standby\n{}", b.report()))?;
    let stored = beta.get("fine").await?;
    assert_eq!(stored.data["spec"]["resource"]["note"], "kept");
    assert_eq!(stored.data["spec"]["resource"]["convertedTo"], "v1beta1");
    let read = alpha.get("fine").await?;
    assert_eq!(read.data["spec"]["resource"]["convertedTo"], "v1alpha1");
    assert_eq!(
        lease_holder(&h.client, &h.ns, &lease).await?.as_deref(),
        Some("replica-a"),
        "the standby converted without leading"
    );
    let log_b = std::fs::read_to_string(&b.log)?;
    assert!(
        log_b.contains("plugin loaded, standing by (converting only)")
            && !log_b.contains("plugin serving"),
        "the standby loads the Plugin, converts and serves nothing: {}",
        b.report()
    );
    h.wait_ready("Faulty", "fine")
        .await
        .with_context(|| a.report())?;

    // Clean up: the Plugin, both replicas, the object without its finalizer (the fixture's
    // resource never goes away), the CRD.
    plugins::api(&h)
        .delete(&name, &DeleteParams::default())
        .await?;
    for host in [&mut a, &mut b] {
        assert!(host.is_running(), "{}", host.report());
        host.terminate()?;
        host.wait_exit(CONVERGE).await?;
    }
    beta.patch(
        "fine",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await?;
    crds::remove(&h.client, FAULTY_CRD).await?;
    Ok(())
}
