//! Registry credentials of a Plugin: its pull Secret's `.dockerconfigjson` (anonymous without
//! one). Credential helpers a Secret names are never run (`oci::auth`).

use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::Api;
use oci_client::secrets::RegistryAuth;

use super::{Error, Plugin};
use crate::oci::{self, Credentials};

/// The credentials `plugin` pulls with; a pull Secret that names no namespace is read from
/// `host_namespace`.
pub async fn credentials(
    client: &Client,
    plugin: &Plugin,
    host_namespace: &str,
) -> Result<RegistryAuth, Error> {
    let reference = oci::parse_reference(&plugin.spec.source.reference)?;
    let Some(secret) = &plugin.spec.source.pull_secret else {
        return Ok(RegistryAuth::Anonymous);
    };
    let namespace = secret
        .namespace
        .clone()
        .unwrap_or_else(|| host_namespace.to_owned());
    let failed = |message: String| Error::PullSecret {
        namespace: namespace.clone(),
        name: secret.name.clone(),
        message,
    };
    let api: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let found = api
        .get_opt(&secret.name)
        .await
        .map_err(|e| failed(e.to_string()))?
        .ok_or_else(|| failed("not found".to_owned()))?;
    let json = found
        .data
        .and_then(|mut data| data.remove(".dockerconfigjson"))
        .ok_or_else(|| failed("has no .dockerconfigjson key".to_owned()))?;
    Ok(Credentials::DockerConfigJson(json.0).for_registry(reference.resolve_registry())?)
}
