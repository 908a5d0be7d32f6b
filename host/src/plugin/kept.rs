//! The versions of Plugins a replica loaded, kept across its Plugin hosts: a shard ring starts
//! a Plugin host per assignment, and a standby host hands over to a serving one
//! ([`super::config::Role`]). A leaf, shared by the host's configuration and the workers.
//!
//! Contract:
//! - a new Plugin host MUST NOT need the registry to serve what the replica served before: a
//!   kept version whose reference and spec fields are the Plugin's is served again when the
//!   registry cannot be reached (as a single host keeps serving its loaded version through a
//!   registry outage), and reused without a pull, a signature check or a compile when the
//!   reference still resolves to its digest;
//! - a kept version was loaded as any other (every digest and, when asked, the signature
//!   verified): keeping it never lets a version in that was not;
//! - a deleted Plugin's version is forgotten, also when it was deleted while no Plugin host of
//!   the replica ran (a host forgets what its list of Plugins no longer holds).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::actuator::Actuator;

/// One loaded version of a Plugin.
#[derive(Clone)]
pub struct Version {
    /// The manifest digest the reference resolved to.
    pub digest: String,
    /// The reference pinned to that digest.
    pub pinned: String,
    /// The spec fields the loaded version depends on (allowed hosts, limits, namespace,
    /// verification), as the worker keys them.
    pub spec_key: String,
    /// The loaded component.
    pub actuator: Arc<dyn Actuator>,
}

/// The last version each Plugin of this replica loaded, by Plugin name.
#[derive(Clone, Default)]
pub struct KeptVersions(Arc<Mutex<HashMap<String, (String, Version)>>>);

impl KeptVersions {
    /// Keeps `version`, loaded from `reference`, as the Plugin `plugin`'s.
    pub fn keep(&self, plugin: &str, reference: &str, version: Version) {
        self.lock()
            .insert(plugin.to_owned(), (reference.to_owned(), version));
    }

    /// The version kept for `plugin`, when it was loaded from `reference` with `spec_key`.
    pub fn get(&self, plugin: &str, reference: &str, spec_key: &str) -> Option<Version> {
        self.lock()
            .get(plugin)
            .filter(|(from, version)| from == reference && version.spec_key == spec_key)
            .map(|(_, version)| version.clone())
    }

    /// Forgets the version of `plugin` (deleted).
    pub fn forget(&self, plugin: &str) {
        self.lock().remove(plugin);
    }

    /// Forgets the versions of every Plugin `listed` does not hold (a complete list of the
    /// Plugins the replica serves).
    pub fn forget_unlisted(&self, listed: &std::collections::HashSet<String>) {
        self.lock().retain(|plugin, _| listed.contains(plugin));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (String, Version)>> {
        // A panic while the map is held cannot leave it half-written (one insert or remove):
        // a poisoned lock is still a whole map.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actuator::NativeActuator;

    fn version(digest: &str, spec_key: &str) -> Version {
        Version {
            digest: digest.into(),
            pinned: format!("registry.test/zones@{digest}"),
            spec_key: spec_key.into(),
            actuator: Arc::new(NativeActuator::<orchard_fixture_echo::Echo>::new()),
        }
    }

    #[test]
    fn a_kept_version_is_found_only_for_the_same_reference_and_spec_fields() {
        let kept = KeptVersions::default();
        kept.keep("zones", "registry.test/zones:v1", version("sha256:a", "k1"));
        let found = kept.get("zones", "registry.test/zones:v1", "k1");
        assert_eq!(found.map(|v| v.digest), Some("sha256:a".to_owned()));
        assert!(
            kept.get("zones", "registry.test/zones:v2", "k1").is_none(),
            "another reference"
        );
        assert!(
            kept.get("zones", "registry.test/zones:v1", "k2").is_none(),
            "other limits or allowed hosts"
        );
        assert!(
            kept.get("records", "registry.test/zones:v1", "k1")
                .is_none()
        );
    }

    #[test]
    fn the_last_load_replaces_a_kept_version_and_a_deleted_plugin_is_forgotten() {
        let kept = KeptVersions::default();
        kept.keep("zones", "registry.test/zones:v1", version("sha256:a", "k"));
        kept.keep("zones", "registry.test/zones:v1", version("sha256:b", "k"));
        let found = kept.get("zones", "registry.test/zones:v1", "k");
        assert_eq!(found.map(|v| v.digest), Some("sha256:b".to_owned()));
        kept.forget("zones");
        assert!(kept.get("zones", "registry.test/zones:v1", "k").is_none());
    }

    #[test]
    fn a_list_of_plugins_forgets_the_versions_of_those_it_no_longer_holds() {
        let kept = KeptVersions::default();
        kept.keep("zones", "registry.test/zones:v1", version("sha256:a", "k"));
        kept.keep(
            "records",
            "registry.test/records:v1",
            version("sha256:b", "k"),
        );
        kept.forget_unlisted(&["records".to_owned()].into_iter().collect());
        assert!(kept.get("zones", "registry.test/zones:v1", "k").is_none());
        assert!(
            kept.get("records", "registry.test/records:v1", "k")
                .is_some()
        );
    }
}
