//! Smoke tests of the test environment itself: each system that `tests/env/testenv.sh up` starts
//! does the basic things later suites rely on. They run against the real systems and fail (never
//! skip) when a system is down or the env file is missing.
//!
//! Run: `tests/env/testenv.sh up && cargo test -p orchard-e2e --test smoke`.

use std::time::Duration;

use anyhow::{Context, bail, ensure};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use orchard_e2e::{TestEnv, http, poll_until, unique_suffix};
use serde_json::{Value, json};

const FIELD_MANAGER: &str = "orchard-e2e-smoke";
const WAIT: Duration = Duration::from_secs(30);

fn is_status(e: &anyhow::Error, code: u16) -> bool {
    matches!(e.downcast_ref::<kube::Error>(), Some(kube::Error::Api(s)) if s.code == code)
}

#[tokio::test]
async fn apiserver_establishes_a_crd_and_serves_its_status_subresource() -> anyhow::Result<()> {
    let env = TestEnv::load()?;
    let client = env.admin_client().await?;

    // A group of its own per run, so reruns and parallel runs never share a CRD.
    let group = format!("{}.smoke.orchard.test", unique_suffix());
    let crd_name = format!("widgets.{group}");
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": crd_name },
        "spec": {
            "group": group,
            "names": { "kind": "Widget", "listKind": "WidgetList", "plural": "widgets", "singular": "widget" },
            "scope": "Namespaced",
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "subresources": { "status": {} },
                "schema": { "openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": { "type": "object", "properties": { "size": { "type": "integer" } } },
                        "status": { "type": "object", "properties": {
                            "phase": { "type": "string" },
                            "observedGeneration": { "type": "integer" }
                        } }
                    }
                } }
            }]
        }
    }))?;

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let apply = PatchParams::apply(FIELD_MANAGER).force();
    crds.patch(&crd_name, &apply, &Patch::Apply(&crd))
        .await
        .context("server-side apply of the CRD")?;

    let result = async {
        poll_until(WAIT, "the CRD to become Established", || async {
            let crd = crds.get(&crd_name).await?;
            let established = crd
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            Ok(established.then_some(()))
        })
        .await?;

        let gvk = GroupVersionKind::gvk(&group, "v1", "Widget");
        let ar = ApiResource::from_gvk_with_plural(&gvk, "widgets");
        let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
        let name = format!("w-{}", unique_suffix());
        let obj = DynamicObject::new(&name, &ar)
            .within("default")
            .data(json!({ "spec": { "size": 3 } }));

        // Established means the apiserver serves the resource; tolerate the short window in which
        // the REST handler for a brand-new group is still being installed.
        let created = poll_until(WAIT, "creating a Widget", || async {
            match widgets.create(&PostParams::default(), &obj).await {
                Ok(o) => Ok(Some(o)),
                Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
                Err(e) => Err(e.into()),
            }
        })
        .await?;
        ensure!(
            created.data["spec"]["size"] == 3,
            "created object lost its spec: {:?}",
            created.data
        );

        let read = widgets
            .get(&name)
            .await
            .context("reading the Widget back")?;
        ensure!(
            read.data["spec"]["size"] == 3,
            "read object has spec {:?}",
            read.data["spec"]
        );
        ensure!(
            read.data.get("status").is_none(),
            "fresh object already has a status"
        );

        // Server-side apply of the status subresource, then read it back.
        let status_patch = json!({
            "apiVersion": ar.api_version,
            "kind": "Widget",
            "status": { "phase": "Ready", "observedGeneration": 1 }
        });
        let patched = widgets
            .patch_status(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&status_patch),
            )
            .await
            .context("server-side apply of the status subresource")?;
        ensure!(
            patched.data["status"]["phase"] == "Ready",
            "apply returned {:?}",
            patched.data
        );

        let status = widgets
            .get_status(&name)
            .await
            .context("reading the status subresource")?;
        ensure!(
            status.data["status"] == json!({ "phase": "Ready", "observedGeneration": 1 }),
            "status read back as {:?}",
            status.data["status"]
        );
        ensure!(
            status.data["spec"]["size"] == 3,
            "status write changed the spec: {:?}",
            status.data
        );
        anyhow::Ok(())
    }
    .await;

    // Clean up whatever happened (deleting the CRD deletes its objects).
    let cleanup = crds.delete(&crd_name, &DeleteParams::default()).await;
    result?;
    cleanup.context("deleting the CRD")?;
    Ok(())
}

#[tokio::test]
async fn unprivileged_identity_is_refused_to_list_pods_while_the_admin_may() -> anyhow::Result<()> {
    let env = TestEnv::load()?;

    let admin: Api<Pod> = Api::namespaced(env.admin_client().await?, "default");
    admin
        .list(&ListParams::default())
        .await
        .context("admin listing pods")?;

    let unprivileged: Api<Pod> = Api::namespaced(env.unprivileged_client().await?, "default");
    match unprivileged.list(&ListParams::default()).await {
        Ok(_) => bail!("the unprivileged identity was allowed to list pods"),
        Err(e) => {
            let e = anyhow::Error::from(e);
            ensure!(is_status(&e, 403), "expected 403 Forbidden, got: {e:#}");
        }
    }
    Ok(())
}

#[tokio::test]
async fn apiserver_reports_the_kubernetes_version_named_in_the_env_file() -> anyhow::Result<()> {
    let env = TestEnv::load()?;
    let info = env
        .admin_client()
        .await?
        .apiserver_version()
        .await
        .context("GET /version")?;
    ensure!(
        info.git_version == env.k8s_version,
        "apiserver reports {} but ORCHARD_K8S_VERSION is {}",
        info.git_version,
        env.k8s_version
    );
    Ok(())
}

#[tokio::test]
async fn powerdns_creates_reads_and_deletes_a_zone() -> anyhow::Result<()> {
    let env = TestEnv::load()?;
    let pdns = env.pdns()?;
    let zones = format!("{}/zones", env.pdns_server_url());
    let zone = format!("{}.smoke.orchard.test.", unique_suffix());

    let resp = pdns
        .post(&zones)
        .json(&json!({ "name": zone, "kind": "Native", "nameservers": ["ns1.orchard.test."] }))
        .send()
        .await
        .context("POST zone")?;
    let status = resp.status();
    let created: Value = resp.json().await.context("zone creation response")?;
    ensure!(
        status.as_u16() == 201,
        "creating the zone returned {status}: {created}"
    );
    let id = created["id"]
        .as_str()
        .context("created zone has no id")?
        .to_owned();
    ensure!(
        created["name"] == zone.as_str(),
        "created zone is named {}",
        created["name"]
    );

    let url = format!("{zones}/{id}");
    let resp = pdns.get(&url).send().await.context("GET zone")?;
    ensure!(
        resp.status().as_u16() == 200,
        "reading the zone returned {}",
        resp.status()
    );
    let read: Value = resp.json().await?;
    ensure!(
        read["name"] == zone.as_str(),
        "read zone is named {}",
        read["name"]
    );
    let rrsets = read["rrsets"].as_array().context("zone has no rrsets")?;
    for rtype in ["SOA", "NS"] {
        ensure!(
            rrsets
                .iter()
                .any(|r| r["type"] == rtype && r["name"] == zone.as_str()),
            "zone has no {rtype} record at its apex: {rrsets:?}"
        );
    }

    let resp = pdns.delete(&url).send().await.context("DELETE zone")?;
    ensure!(
        resp.status().as_u16() == 204,
        "deleting the zone returned {}",
        resp.status()
    );

    let resp = pdns.get(&url).send().await.context("GET deleted zone")?;
    ensure!(
        resp.status().as_u16() == 404,
        "deleted zone still reads as {}",
        resp.status()
    );
    Ok(())
}

/// Monolithic blob upload: `POST /v2/<repo>/blobs/uploads/` then `PUT <location>?digest=...`.
async fn push_blob(
    client: &reqwest::Client,
    base: &str,
    repo: &str,
    bytes: &[u8],
) -> anyhow::Result<String> {
    let digest = orchard_e2e::sha256(bytes);
    let resp = client
        .post(format!("{base}/v2/{repo}/blobs/uploads/"))
        .send()
        .await
        .context("POST blob upload")?;
    ensure!(
        resp.status().as_u16() == 202,
        "starting an upload returned {}",
        resp.status()
    );
    let location = resp
        .headers()
        .get(reqwest::header::LOCATION)
        .context("upload response has no Location")?
        .to_str()?
        .to_owned();
    let mut url = if location.starts_with('/') {
        format!("{base}{location}")
    } else {
        location
    };
    url.push(if url.contains('?') { '&' } else { '?' });
    url.push_str("digest=");
    url.push_str(&digest);
    let resp = client
        .put(url)
        .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
        .body(bytes.to_vec())
        .send()
        .await
        .context("PUT blob")?;
    ensure!(
        resp.status().as_u16() == 201,
        "completing the upload returned {}",
        resp.status()
    );
    let returned = resp
        .headers()
        .get("Docker-Content-Digest")
        .map(|v| v.to_str().unwrap_or_default().to_owned());
    ensure!(
        returned.as_deref() == Some(digest.as_str()),
        "registry says digest {returned:?}, expected {digest}"
    );
    Ok(digest)
}

async fn pull(client: &reqwest::Client, url: &str, accept: &str) -> anyhow::Result<Vec<u8>> {
    let resp = client
        .get(url)
        .header(reqwest::header::ACCEPT, accept)
        .send()
        .await
        .with_context(|| format!("GET {url}"))?;
    ensure!(
        resp.status().as_u16() == 200,
        "GET {url} returned {}",
        resp.status()
    );
    Ok(resp.bytes().await?.to_vec())
}

#[tokio::test]
async fn registry_round_trips_a_blob_and_a_manifest_by_digest() -> anyhow::Result<()> {
    const MANIFEST_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
    let env = TestEnv::load()?;
    let client = http()?;
    let base = env.registry_url();
    let run = unique_suffix();
    let repo = format!("smoke/{run}");

    let resp = client
        .get(format!("{base}/v2/"))
        .send()
        .await
        .context("GET /v2/")?;
    ensure!(
        resp.status().is_success(),
        "GET /v2/ returned {}",
        resp.status()
    );

    let config = serde_json::to_vec(
        &json!({ "architecture": "wasm", "os": "wasip2", "rootfs": { "type": "layers", "diff_ids": [] } }),
    )?;
    let layer = format!("orchard smoke layer {run}\n")
        .repeat(64)
        .into_bytes();
    let config_digest = push_blob(&client, &base, &repo, &config).await?;
    let layer_digest = push_blob(&client, &base, &repo, &layer).await?;

    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "config": { "mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": config.len() },
        "layers": [{ "mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer_digest, "size": layer.len() }]
    }))?;
    let manifest_digest = orchard_e2e::sha256(&manifest);
    let resp = client
        .put(format!("{base}/v2/{repo}/manifests/v1"))
        .header(reqwest::header::CONTENT_TYPE, MANIFEST_TYPE)
        .body(manifest.clone())
        .send()
        .await
        .context("PUT manifest")?;
    let status = resp.status();
    let returned = resp
        .headers()
        .get("Docker-Content-Digest")
        .map(|v| v.to_str().unwrap_or_default().to_owned());
    ensure!(
        status.as_u16() == 201,
        "pushing the manifest returned {status}: {}",
        resp.text().await.unwrap_or_default()
    );
    ensure!(
        returned.as_deref() == Some(manifest_digest.as_str()),
        "registry says manifest digest {returned:?}, expected {manifest_digest}"
    );

    let pulled_layer = pull(
        &client,
        &format!("{base}/v2/{repo}/blobs/{layer_digest}"),
        "*/*",
    )
    .await?;
    ensure!(
        pulled_layer == layer,
        "pulled layer differs from the pushed one"
    );
    ensure!(
        orchard_e2e::sha256(&pulled_layer) == layer_digest,
        "pulled layer has the wrong sha256"
    );
    let pulled_config = pull(
        &client,
        &format!("{base}/v2/{repo}/blobs/{config_digest}"),
        "*/*",
    )
    .await?;
    ensure!(
        pulled_config == config,
        "pulled config differs from the pushed one"
    );

    let pulled_manifest = pull(
        &client,
        &format!("{base}/v2/{repo}/manifests/{manifest_digest}"),
        MANIFEST_TYPE,
    )
    .await?;
    ensure!(
        pulled_manifest == manifest,
        "pulled manifest differs from the pushed one"
    );
    ensure!(
        orchard_e2e::sha256(&pulled_manifest) == manifest_digest,
        "pulled manifest has the wrong sha256"
    );
    Ok(())
}
