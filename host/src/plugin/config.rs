//! What every Plugin's worker shares: the host-wide settings of dynamically loaded plugins. A
//! leaf, so that the host (which makes workers) and the workers (which read it) do not import
//! each other.

use std::time::Duration;

use crate::oci::RegistryOptions;
use crate::reconcile::Settings;
use crate::runtime::{PluginConfig, Runtime};

/// Host-wide settings of dynamically loaded plugins.
#[derive(Clone)]
pub struct PluginHostConfig {
    /// The Wasm runtime the components load into.
    pub runtime: Runtime,
    /// Registries reached over HTTP, and the content cache.
    pub registry: RegistryOptions,
    /// Sandbox defaults (a Plugin's `limits` override them; its `allowedHosts` replace them).
    pub defaults: PluginConfig,
    /// Settings of the kinds' controllers (namespace, resync, concurrency…).
    pub settings: Settings,
    /// Namespace of pull Secrets that name none (the host's own).
    pub host_namespace: String,
    /// How often a tag reference is re-resolved.
    pub poll_interval: Duration,
    /// Serve only Plugins matching this label selector.
    pub selector: Option<String>,
    /// Install the CRDs of the Plugins' kinds (otherwise only check they are installed).
    pub install_crds: bool,
    /// The conversion webhook the CRDs of kinds with several versions name.
    pub webhook: Option<crate::crd::Webhook>,
}
