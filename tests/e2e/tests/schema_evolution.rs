//! A plugin's kind gains an API version, against the real apiserver, PowerDNS and the host's
//! conversion webhook: zones made at `v1alpha1`; the host restarted on the next build of the
//! plugin (v1alpha1 and v1beta1, stored at v1beta1, converted by the plugin in the sandbox);
//! the old zones read at `v1beta1` in its shape, a zone made at `v1beta1` read at `v1alpha1`
//! with nothing lost, every object migrated to the storage version and `storedVersions`
//! dropping `v1alpha1`; nothing re-created in PowerDNS; and a downgrade that would strand the
//! `v1beta1` objects refused.
//!
//! The scenario's plugin builds are on a group of their own (`evolution.pdns.orchard.dev`,
//! `make rust-plugins`), so that the other suites' `DnsZone` CRD is never upgraded under them.

use anyhow::Context;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams};
use orchard_e2e::harness::{CONVERGE, Harness, HostSpec};
use orchard_e2e::paths::plugin;
use orchard_e2e::pdns::{self, zone_name};
use orchard_e2e::poll_until;
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

async fn crd(h: &Harness) -> anyhow::Result<Option<CustomResourceDefinition>> {
    let crds: Api<CustomResourceDefinition> = Api::all(h.client.clone());
    Ok(crds.get_opt(CRD).await?)
}

/// A clean slate: the scenario's CRD from an earlier run (on this apiserver) gone.
async fn remove_crd(h: &Harness) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(h.client.clone());
    if let Some(installed) = crds.get_opt(CRD).await? {
        // An earlier run's objects keep their finalizers (their host is gone): drop them, read
        // at the storage version (no conversion: that run's webhook is gone too).
        crds.patch(
            CRD,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"conversion": {"strategy": "None", "webhook": null}}})),
        )
        .await?;
        if let Some(storage) = installed.spec.versions.iter().find(|v| v.storage) {
            let all: Api<DynamicObject> = Api::all_with(h.client.clone(), &zones_at(&storage.name));
            // The apiserver serves the new strategy a moment after the patch.
            let objects = poll_until(CONVERGE, "the earlier run's objects to be listed", || {
                let all = all.clone();
                async move { Ok(all.list(&kube::api::ListParams::default()).await.ok()) }
            })
            .await?;
            for obj in objects {
                let ns = obj.metadata.namespace.clone().unwrap_or_default();
                let name = obj.metadata.name.clone().unwrap_or_default();
                let api: Api<DynamicObject> =
                    Api::namespaced_with(h.client.clone(), &ns, &zones_at(&storage.name));
                poll_until(
                    CONVERGE,
                    &format!("{ns}/{name} to lose its finalizers"),
                    || {
                        let (api, name) = (api.clone(), name.clone());
                        async move {
                            let patch = json!({"metadata": {"finalizers": null}});
                            Ok(api
                                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                                .await
                                .ok())
                        }
                    },
                )
                .await?;
            }
        }
        crds.delete(CRD, &DeleteParams::default()).await?;
    }
    poll_until(CONVERGE, "the scenario's CRD to be gone", || async {
        Ok(crd(h).await?.is_none().then_some(()))
    })
    .await
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

async fn available(h: &Harness, name: &str) -> anyhow::Result<DynamicObject> {
    let api = api_at(h, "v1alpha1");
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
    remove_crd(&h).await?;
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
        let obj = available(&h, name).await?;
        ids.push(
            obj.data["status"]["id"]
                .as_str()
                .context("no status.id")?
                .to_owned(),
        );
    }
    assert_eq!(
        crd(&h).await?.and_then(|c| c.status?.stored_versions),
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
    let at_alpha = available(&h, "c").await?;
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
        let stored = crd(&h).await?.and_then(|c| c.status?.stored_versions);
        Ok((stored == Some(vec!["v1beta1".to_owned()])).then_some(()))
    })
    .await
    .with_context(|| host.report())?;
    let log = std::fs::read_to_string(&host.log)?;
    assert!(log.contains("storage migration done"), "{}", host.report());

    // Nothing re-created: the same ids, one Created Event each, the zones still in PowerDNS.
    for (name, id) in ["a", "b"].iter().zip(&ids) {
        let obj = available(&h, name).await?;
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
    let served = crd(&h).await?.context("CRD gone")?;
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
    remove_crd(&h).await?;
    Ok(())
}
