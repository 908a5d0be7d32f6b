//! The scenarios' own CRDs: a clean slate on an apiserver that earlier runs used.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::json;

use crate::harness::CONVERGE;
use crate::poll_until;

/// The CRD `name`, if installed.
pub async fn get(
    client: &kube::Client,
    name: &str,
) -> anyhow::Result<Option<CustomResourceDefinition>> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    Ok(crds.get_opt(name).await?)
}

/// Removes the CRD `name` and every object of it, and waits until it is gone. An earlier
/// run's objects keep their finalizers (their host is gone): they are dropped, the objects
/// read at the storage version with the conversion switched off (that run's webhook is gone
/// too).
pub async fn remove(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    if let Some(installed) = crds.get_opt(name).await? {
        crds.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"conversion": {"strategy": "None", "webhook": null}}})),
        )
        .await?;
        if let Some(storage) = installed.spec.versions.iter().find(|v| v.storage) {
            let group = &installed.spec.group;
            let resource = ApiResource {
                group: group.clone(),
                version: storage.name.clone(),
                api_version: format!("{group}/{}", storage.name),
                kind: installed.spec.names.kind.clone(),
                plural: installed.spec.names.plural.clone(),
            };
            let all: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
            // The apiserver serves the new strategy a moment after the patch.
            let objects = poll_until(CONVERGE, "the earlier run's objects to be listed", || {
                let all = all.clone();
                async move { Ok(all.list(&ListParams::default()).await.ok()) }
            })
            .await?;
            for obj in objects {
                let ns = obj.metadata.namespace.clone().unwrap_or_default();
                let name = obj.metadata.name.clone().unwrap_or_default();
                let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &resource);
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
        crds.delete(name, &DeleteParams::default()).await?;
    }
    poll_until(CONVERGE, &format!("CRD {name} to be gone"), || async {
        Ok(get(client, name).await?.is_none().then_some(()))
    })
    .await
}
