//! What every Plugin's worker shares: the host-wide settings of dynamically loaded plugins. A
//! leaf, so that the host (which makes workers) and the workers (which read it) do not import
//! each other.

use std::time::Duration;

use tokio::sync::watch;

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
    /// A sharded host's share of the Plugins' kinds (`--shard-ring`); `None`: all of them.
    pub shard: Option<PluginShard>,
    /// What the host does with each Plugin it loads.
    pub role: Role,
    /// The versions this replica loaded, kept across its Plugin hosts.
    pub kept: super::kept::KeptVersions,
}

/// What a Plugin host does with the Plugins it loads.
///
/// Contract: every replica of a host serves the conversion webhook — the apiserver calls it
/// through a Service, whichever replica leads or holds buckets — so every replica MUST load
/// the Plugins whose kinds it may be asked to convert, serving them or not; and a replica
/// that may take over SHOULD hold them loaded already, so that it takes over without a
/// pull or a compile, and while the registry cannot be reached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Role {
    /// Serve them: install each kind's CRD, run its controller, write the Plugin's status,
    /// convert its objects.
    #[default]
    Serve,
    /// Stand by: load each Plugin, keep it loaded ([`super::kept`]) and convert its kind's
    /// objects, nothing else — no CRD, no controller, no status. A replica that does not
    /// serve yet (a standby of leader election; a replica of a shard ring before its first
    /// buckets) runs such a host until a serving one replaces it.
    Standby,
}

impl Role {
    /// Whether a host of this role writes the status of the Plugin `name`: a serving host
    /// does — in a shard ring (`shard`) only the replica holding the Plugin's own bucket —,
    /// a standby never (the serving replica's view is the status).
    pub fn writes_status(self, shard: Option<&PluginShard>, name: &str) -> bool {
        self == Self::Serve && shard.is_none_or(|shard| shard.writes_status(name))
    }
}

/// What a replica of a shard ring needs to serve Plugins' kinds: every replica loads every
/// Plugin and serves its own buckets of the kind (the controllers' selector is in
/// [`PluginHostConfig::settings`]).
///
/// Contract: a Plugin's status MUST have one writer, or replicas whose views differ (one
/// could not pull, another could) would overwrite each other's conditions. The writer is the
/// replica that holds the bucket of the Plugin object itself ([`PluginShard::writes_status`]),
/// as it would if `Plugin` were a kind of its own.
#[derive(Clone, Debug)]
pub struct PluginShard {
    /// The ring's assignment of buckets to this replica, as it changes.
    pub assignment: watch::Receiver<crate::shard::Assignment>,
    /// This replica's name in the ring (`--instance`), said in the status it writes.
    pub instance: String,
}

impl PluginShard {
    /// Whether this replica writes the status of the Plugin `name` now: it holds the
    /// Plugin's own bucket.
    pub fn writes_status(&self, name: &str) -> bool {
        use kube::Resource as _;
        let (group, kind) = (super::Plugin::group(&()), super::Plugin::kind(&()));
        let bucket = crate::shard::ring::bucket_of(&group, &kind, "", name);
        self.assignment.borrow().buckets.contains(&bucket)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(buckets: impl IntoIterator<Item = u16>) -> PluginShard {
        let (_, assignment) = watch::channel(crate::shard::Assignment {
            epoch: 1,
            buckets: buckets.into_iter().collect(),
        });
        PluginShard {
            assignment,
            instance: "orchard-0".into(),
        }
    }

    #[test]
    fn only_the_replica_holding_the_plugins_own_bucket_writes_its_status() {
        let bucket = crate::shard::ring::bucket_of("orchard.dev", "Plugin", "", "zones");
        let other = (bucket + 1) % crate::shard::ring::BUCKETS;
        assert!(shard([bucket]).writes_status("zones"));
        assert!(shard([other, bucket]).writes_status("zones"));
        assert!(!shard([other]).writes_status("zones"));
        assert!(
            !shard([]).writes_status("zones"),
            "a replica serving nothing writes nothing"
        );
    }

    #[test]
    fn a_standby_host_never_writes_a_plugins_status_and_a_serving_one_does_unless_another_replica_holds_its_bucket()
     {
        let bucket = crate::shard::ring::bucket_of("orchard.dev", "Plugin", "", "zones");
        let other = (bucket + 1) % crate::shard::ring::BUCKETS;
        assert!(Role::Serve.writes_status(None, "zones"));
        assert!(Role::Serve.writes_status(Some(&shard([bucket])), "zones"));
        assert!(!Role::Serve.writes_status(Some(&shard([other])), "zones"));
        assert!(!Role::Standby.writes_status(None, "zones"));
        assert!(!Role::Standby.writes_status(Some(&shard([bucket])), "zones"));
    }

    #[test]
    fn the_status_writer_follows_the_assignment_as_it_changes() {
        let bucket = crate::shard::ring::bucket_of("orchard.dev", "Plugin", "", "zones");
        let (publish, assignment) = watch::channel(crate::shard::Assignment::default());
        let shard = PluginShard {
            assignment,
            instance: "orchard-0".into(),
        };
        assert!(!shard.writes_status("zones"));
        publish.send_replace(crate::shard::Assignment {
            epoch: 2,
            buckets: [bucket].into_iter().collect(),
        });
        assert!(shard.writes_status("zones"));
    }
}
