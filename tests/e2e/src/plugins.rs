//! `Plugin` objects and the host that watches them (`orchard run --watch-plugins`), for the
//! suites that load plugins from the registry while the host runs.

use anyhow::Context;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};

use crate::harness::{CONVERGE, Harness, Host, has_condition};
use crate::oci::Workdir;
use crate::poll_until;

/// The `Plugin` kind (cluster-scoped).
pub fn api(h: &Harness) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: "orchard.dev".into(),
        version: "v1alpha1".into(),
        api_version: "orchard.dev/v1alpha1".into(),
        kind: "Plugin".into(),
        plural: "plugins".into(),
    };
    Api::all_with(h.client.clone(), &resource)
}

/// Starts a host of `h` that serves the Plugins labelled for this scenario (and the harness's
/// own plugin files, if any), pulling from the test registries, its content cache in `wd`.
/// `extra_env` adds flags by their `ORCHARD_*` names.
pub fn start_watching_host(
    h: &mut Harness,
    wd: &Workdir,
    extra_env: &[(&str, &str)],
) -> anyhow::Result<Host> {
    let insecure = format!("{},{}", h.env.registry, h.env.auth_registry);
    let selector = format!("orchard.dev/e2e={}", h.id);
    let cache = wd.path.join("oci-cache").display().to_string();
    let ns = h.ns.clone();
    let mut env = vec![
        ("ORCHARD_WATCH_PLUGINS", "true"),
        ("ORCHARD_INSECURE_REGISTRIES", insecure.as_str()),
        ("ORCHARD_PLUGIN_SELECTOR", selector.as_str()),
        ("ORCHARD_PLUGIN_POLL_INTERVAL", "2s"),
        ("ORCHARD_OCI_CACHE_DIR", cache.as_str()),
        ("POD_NAMESPACE", ns.as_str()),
    ];
    env.extend_from_slice(extra_env);
    h.start_host(&env)
}

/// Applies the Plugin `name` (labelled for this scenario) with `source`, allowed to reach
/// `allowed_hosts`.
pub async fn apply(
    h: &Harness,
    name: &str,
    source: Value,
    allowed_hosts: &[&str],
) -> anyhow::Result<()> {
    let body = json!({
        "apiVersion": "orchard.dev/v1alpha1",
        "kind": "Plugin",
        "metadata": {"name": name, "labels": {"orchard.dev/e2e": h.id}},
        "spec": {"source": source, "allowedHosts": allowed_hosts}
    });
    let api = api(h);
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
pub async fn wait_ready(
    h: &Harness,
    name: &str,
    status: &str,
    reason: &str,
) -> anyhow::Result<DynamicObject> {
    let api = api(h);
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

/// The message of the Plugin's Ready condition ("" without one).
pub fn ready_message(obj: &DynamicObject) -> String {
    obj.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready")
        .and_then(|c| c["message"].as_str())
        .unwrap_or_default()
        .to_owned()
}
