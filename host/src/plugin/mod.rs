//! The `Plugin` kind (`orchard.dev/v1alpha1`, cluster-scoped): a plugin loaded from an OCI
//! artifact by a running host, and the controller that serves it.
//!
//! Modules, dependencies pointing down the list:
//! - [`host`]: watches Plugins and gives each its worker;
//! - [`worker`]: one Plugin — the phases of its sync, hot swap, stop;
//! - [`kind_claims`]: which plugin serves which kind;
//! - [`pull_secret`]: registry credentials from a Plugin's pull Secret;
//! - [`status`]: the Plugin's `Ready` condition, digest and kinds;
//! - [`config`]: the host-wide settings every worker shares;
//! - [`kept`]: the versions a replica loaded, kept across its Plugin hosts;
//! - `error`: why a version is not served (its reason is the condition's).

pub mod config;
mod error;
pub mod host;
pub mod kept;
pub mod kind_claims;
pub mod pull_secret;
pub mod status;
pub mod worker;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use config::PluginHostConfig;
pub use error::Error;
pub use host::PluginHost;

/// A plugin served by the host: where its artifact is, how it is verified, what it may do.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "orchard.dev",
    version = "v1alpha1",
    kind = "Plugin",
    status = "PluginStatus",
    shortname = "orp",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Kinds","type":"string","jsonPath":".status.kinds"}"#,
    printcolumn = r#"{"name":"Digest","type":"string","priority":1,"jsonPath":".status.resolvedDigest"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct PluginSpec {
    /// Where the component comes from.
    pub source: PluginSource,
    /// Outbound HTTP destinations the plugin may reach (`scheme://host[:port|:*]`).
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Sandbox limits and concurrency.
    #[serde(default)]
    pub limits: PluginLimits,
    /// Reconcile objects of this namespace only (default: the host's scope).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// An OCI artifact in the CNCF Wasm layout.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PluginSource {
    /// `registry/repository:tag` or `registry/repository@sha256:…` (pin by digest in
    /// production; a tag is re-resolved every poll interval of the host).
    #[schemars(length(min = 1, max = 1024))]
    pub reference: String,
    /// A `kubernetes.io/dockerconfigjson` Secret with the registry's credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_secret: Option<SecretReference>,
    /// When set, the artifact MUST carry a cosign signature made with this key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<Verification>,
}

/// A Secret in a namespace (the Plugin is cluster-scoped).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretReference {
    #[allow(
        missing_docs,
        reason = "a doc comment here becomes a description in the Plugin CRD schema: add it together with regenerated deploy/*/crds/plugins.orchard.dev.yaml"
    )]
    pub name: String,
    /// Default: the host's own namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// Signature requirements.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    /// The cosign public key (PEM), as written by `cosign generate-key-pair`.
    pub public_key: String,
}

/// Per-plugin sandbox limits (each defaults to the host's flag).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PluginLimits {
    /// Linear memory cap of one instance, in MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 4096))]
    pub memory_mib: Option<u32>,
    /// Deadline of one call, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 600_000))]
    pub call_timeout_ms: Option<u64>,
    /// Reconciles in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 256))]
    pub concurrency: Option<u16>,
}

/// What the host made of the Plugin.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PluginStatus {
    /// `Ready`: the plugin is loaded and its kind reconciled.
    #[serde(default)]
    pub conditions: Vec<PluginCondition>,
    /// The manifest digest being served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_digest: Option<String>,
    /// Kinds served (`Kind.group/version`).
    #[serde(default)]
    pub kinds: Vec<String>,
    #[allow(
        missing_docs,
        reason = "a doc comment here becomes a description in the Plugin CRD schema: add it together with regenerated deploy/*/crds/plugins.orchard.dev.yaml"
    )]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// A condition (the `metav1.Condition` shape).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PluginCondition {
    #[allow(
        missing_docs,
        reason = "a doc comment here becomes a description in the Plugin CRD schema: add it together with regenerated deploy/*/crds/plugins.orchard.dev.yaml"
    )]
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    #[allow(
        missing_docs,
        reason = "a doc comment here becomes a description in the Plugin CRD schema: add it together with regenerated deploy/*/crds/plugins.orchard.dev.yaml"
    )]
    pub reason: String,
    #[allow(
        missing_docs,
        reason = "a doc comment here becomes a description in the Plugin CRD schema: add it together with regenerated deploy/*/crds/plugins.orchard.dev.yaml"
    )]
    pub message: String,
    /// RFC 3339.
    pub last_transition_time: String,
    #[allow(
        missing_docs,
        reason = "a doc comment here becomes a description in the Plugin CRD schema: add it together with regenerated deploy/*/crds/plugins.orchard.dev.yaml"
    )]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// The CRD of the `Plugin` kind.
pub fn crd()
-> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    use kube::CustomResourceExt;
    Plugin::crd()
}

/// Applies the `Plugin` CRD (server-side) and waits until it is established.
pub async fn install_crd(client: &kube::Client) -> Result<(), crate::crd::InstallError> {
    let crd = serde_json::to_value(crd()).map_err(|source| crate::crd::InstallError::Encode {
        name: "plugins.orchard.dev".to_owned(),
        source,
    })?;
    crate::crd::apply_crd(client, &crd, true).await
}
