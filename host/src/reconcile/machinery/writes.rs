//! The host's own last write to each object of the kind, so that no pass runs on a cached
//! object older than that write (read your own writes).
//!
//! Why: a pass reads the object from the cache, which the watch fills a few milliseconds after
//! the apiserver answered a write. A pass that starts in between — a dependency changed, a
//! timer came due — sees the object as it was before the host's last pass, without the
//! `status.id` that pass recorded; its status apply (server-side apply, which prunes what the
//! manager no longer sets) then removed `status.id`, and it looked for a resource to adopt, or
//! created, that its predecessor had already made.
//!
//! Rules:
//! 1. Every write the host makes to an object of the kind MUST be recorded
//!    ([`OwnWrites::wrote`]) with the `resourceVersion` the apiserver answered.
//! 2. A worker MUST NOT pass an object whose cached `resourceVersion` is older than the one
//!    recorded for it ([`OwnWrites::check`]); the object waits for the cache, and the
//!    watch event that brings the write in MUST wake it ([`OwnWrites::cached`]). A cache that
//!    does not catch up within [`CATCH_UP`] (a watch that stalls) no longer holds it back: the
//!    pass runs on what the cache holds, as it would without this rule. A worker let through
//!    MUST pass the object as the cache holds it after the check: the event may have brought
//!    the write in (and taken the entry away) between its lookup and the check.
//! 3. An entry goes once the cache holds the write, or the object is gone: what is kept is
//!    bounded by the objects written and not yet seen again.
//!
//! `resourceVersion`s are compared as integers: the kube-apiserver's are etcd revisions, which
//! only grow. A version that is not an integer (another storage) never holds a pass back.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::DynamicObject;
use tokio::time::Instant;

use crate::reconcile::StoredMeta;

/// How long a pass waits at most for the cache to hold the host's own last write.
pub const CATCH_UP: Duration = Duration::from_secs(2);

/// What [`OwnWrites::check`] found of a cached object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// As new as the host's last write to it, or newer: pass it.
    Current,
    /// Older: its pass waits for the cache.
    Behind,
    /// Older still after [`CATCH_UP`]: passed as cached (a watch that lags; counted).
    WaitedOut,
}

/// One object's last own write.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// The `resourceVersion` the apiserver answered.
    version: u64,
    /// Since when a pass waits for the cache to hold it, if one does.
    waiting_since: Option<Instant>,
}

/// The host's own last write per object (uid) of one kind (see the module's rules).
#[derive(Debug, Default)]
pub struct OwnWrites {
    entries: Mutex<HashMap<String, Entry>>,
}

/// What the host reads of the apiserver's answer to its own write: the object's identity,
/// version and deletion state, nothing else.
///
/// Why: the answer is the whole object, `managedFields` included (the bulk of it after a
/// server-side apply). Decoded as a `DynamicObject` it was a tree of every field, built and
/// dropped at once; here serde skips what is not named below without building anything.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
pub struct Written {
    /// The object's metadata, as far as it is read.
    #[serde(default)]
    pub metadata: WrittenMeta,
}

/// The metadata of a [`Written`] object.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WrittenMeta {
    /// `metadata.uid`.
    pub uid: Option<String>,
    /// `metadata.resourceVersion`: the version the write made.
    pub resource_version: Option<String>,
    /// `metadata.deletionTimestamp`.
    pub deletion_timestamp: Option<Time>,
    /// `metadata.finalizers`.
    pub finalizers: Option<Vec<String>>,
}

impl From<&DynamicObject> for Written {
    fn from(obj: &DynamicObject) -> Self {
        let m = &obj.metadata;
        Self {
            metadata: WrittenMeta {
                uid: m.uid.clone(),
                resource_version: m.resource_version.clone(),
                deletion_timestamp: m.deletion_timestamp.clone(),
                finalizers: m.finalizers.clone(),
            },
        }
    }
}

/// A `resourceVersion` as an integer, if it is one.
fn version_of(resource_version: Option<&str>) -> Option<u64> {
    resource_version?.parse().ok()
}

impl OwnWrites {
    fn entries(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        // Each critical section below leaves the map whole: a poisoned lock still holds it.
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The apiserver answered a write of the host with `written` (rule 1). An object being
    /// deleted that has no finalizer left is gone, or about to be: no pass follows, and its
    /// deletion event may come before this answer, so nothing is kept for it (rule 3).
    pub fn wrote(&self, written: &Written) {
        let meta = &written.metadata;
        let released =
            meta.deletion_timestamp.is_some() && meta.finalizers.as_ref().is_none_or(Vec::is_empty);
        let Some(version) = version_of(meta.resource_version.as_deref()).filter(|_| !released)
        else {
            return;
        };
        let mut entries = self.entries();
        let uid = meta.uid.clone().unwrap_or_default();
        let entry = entries.entry(uid).or_insert(Entry {
            version,
            waiting_since: None,
        });
        entry.version = entry.version.max(version);
    }

    /// Whether `cached` may be passed, or must wait for the cache to hold the host's last write
    /// to it (rule 2).
    pub fn check(&self, cached: &DynamicObject) -> Freshness {
        let uid = cached.stored_uid();
        let mut entries = self.entries();
        let Some(entry) = entries.get_mut(&uid) else {
            return Freshness::Current;
        };
        let behind = version_of(cached.metadata.resource_version.as_deref())
            .is_some_and(|v| v < entry.version);
        let now = Instant::now();
        let waited_out = entry
            .waiting_since
            .is_some_and(|since| now.duration_since(since) >= CATCH_UP);
        if !behind {
            entries.remove(&uid);
            return Freshness::Current;
        }
        if waited_out {
            tracing::warn!(
                uid = %uid,
                cached = ?cached.metadata.resource_version,
                written = entry.version,
                "the cache did not catch up with the host's own write: passing the object as cached"
            );
            entries.remove(&uid);
            return Freshness::WaitedOut;
        }
        entry.waiting_since.get_or_insert(now);
        Freshness::Behind
    }

    /// The cache now holds `obj` (a watch event); whether a pass waited for it, and so must be
    /// woken (rule 2). The entry goes once the cache holds the write (rule 3).
    pub fn cached(&self, obj: &DynamicObject) -> bool {
        let uid = obj.stored_uid();
        let mut entries = self.entries();
        let Some(entry) = entries.get(&uid).copied() else {
            return false;
        };
        let caught_up =
            version_of(obj.metadata.resource_version.as_deref()).is_none_or(|v| v >= entry.version);
        if !caught_up {
            return false;
        }
        entries.remove(&uid);
        entry.waiting_since.is_some()
    }

    /// `obj` is gone (rule 3).
    pub fn forget(&self, obj: &DynamicObject) {
        self.entries().remove(&obj.stored_uid());
    }

    /// Objects with a write the cache does not hold yet.
    pub fn len(&self) -> usize {
        self.entries().len()
    }

    /// Whether the cache holds every write of the host.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(version: &str) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "x.dev/v1", "kind": "Thing",
            "metadata": {"name": "a", "namespace": "ns", "uid": "u1", "resourceVersion": version},
        }))
        .unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn an_object_cached_before_the_hosts_last_write_is_held_back_until_the_watch_brings_it() {
        let writes = OwnWrites::default();
        writes.wrote(&Written::from(&at("12")));
        writes.wrote(&Written::from(&at("15")));
        assert_eq!(
            Freshness::Behind,
            writes.check(&at("12")),
            "older than the last write"
        );
        assert!(
            !writes.cached(&at("14")),
            "an event older than the last write wakes nothing"
        );
        assert_eq!(Freshness::Behind, writes.check(&at("14")));
        assert!(
            writes.cached(&at("15")),
            "the write's own event wakes the pass"
        );
        assert!(writes.is_empty(), "the entry goes once the cache holds it");
        assert_eq!(Freshness::Current, writes.check(&at("15")));
    }

    #[tokio::test(start_paused = true)]
    async fn an_object_as_new_as_the_hosts_last_write_or_newer_passes_at_once() {
        let writes = OwnWrites::default();
        writes.wrote(&Written::from(&at("12")));
        assert_eq!(Freshness::Current, writes.check(&at("12")));
        assert!(writes.is_empty());
        writes.wrote(&Written::from(&at("12")));
        assert_eq!(
            Freshness::Current,
            writes.check(&at("20")),
            "someone wrote after the host"
        );
        assert!(!writes.cached(&at("20")), "no pass waited: nothing to wake");
    }

    #[tokio::test(start_paused = true)]
    async fn a_cache_that_does_not_catch_up_holds_a_pass_back_no_longer_than_the_limit() {
        let writes = OwnWrites::default();
        writes.wrote(&Written::from(&at("12")));
        assert_eq!(Freshness::Behind, writes.check(&at("10")));
        tokio::time::advance(CATCH_UP.saturating_sub(Duration::from_millis(1))).await;
        assert_eq!(
            Freshness::Behind,
            writes.check(&at("10")),
            "within the limit it still waits"
        );
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(
            Freshness::WaitedOut,
            writes.check(&at("10")),
            "past the limit the pass runs, counted"
        );
        assert!(writes.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn the_write_that_releases_a_deleted_object_keeps_nothing() {
        let writes = OwnWrites::default();
        let mut released = at("20");
        released.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
        );
        writes.wrote(&Written::from(&released));
        assert!(
            writes.is_empty(),
            "its deletion event may already have come"
        );
        released.metadata.finalizers = Some(vec!["orchard.dev/other".to_owned()]);
        writes.wrote(&Written::from(&released));
        assert_eq!(
            writes.len(),
            1,
            "another finalizer holds it: passes may follow"
        );
    }

    #[test]
    fn the_answer_to_a_write_is_read_for_its_identity_version_and_deletion_alone() {
        // An apiserver's answer to a status apply, managedFields and all.
        let answer = r#"{"apiVersion":"pdns.orchard.dev/v1alpha1","kind":"DnsZone",
            "metadata":{"name":"z","namespace":"ns","uid":"u1","resourceVersion":"4711",
              "generation":1,"creationTimestamp":"2026-12-06T10:00:00Z",
              "deletionTimestamp":"2026-12-06T10:00:05Z","finalizers":["orchard.dev/pdns-zone"],
              "managedFields":[{"manager":"orchard.dev/pdns-zone/status","operation":"Apply",
                "apiVersion":"pdns.orchard.dev/v1alpha1","time":"2026-12-06T10:00:01Z",
                "fieldsType":"FieldsV1","fieldsV1":{"f:status":{"f:id":{},"f:conditions":{}}},
                "subresource":"status"}]},
            "spec":{"name":"z.example."},"status":{"id":"z.example.","conditions":[]}}"#;
        let written: Written = serde_json::from_str(answer).unwrap();
        assert_eq!(written.metadata.uid.as_deref(), Some("u1"));
        assert_eq!(written.metadata.resource_version.as_deref(), Some("4711"));
        assert!(written.metadata.deletion_timestamp.is_some());
        assert_eq!(
            written.metadata.finalizers,
            Some(vec!["orchard.dev/pdns-zone".to_owned()])
        );
        let partial: Written =
            serde_json::from_str(r#"{"metadata":{"uid":"u1","name":"z"}}"#).unwrap();
        assert_eq!(
            partial.metadata,
            WrittenMeta {
                uid: Some("u1".to_owned()),
                ..WrittenMeta::default()
            },
            "a field the answer leaves out is None"
        );
        let bare: Written = serde_json::from_str(r#"{"kind":"DnsZone"}"#).unwrap();
        assert_eq!(
            bare,
            Written::default(),
            "an answer without metadata records nothing"
        );
        let writes = OwnWrites::default();
        writes.wrote(&bare);
        assert!(writes.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn versions_that_are_not_integers_never_hold_a_pass_back_and_a_gone_object_is_forgotten()
    {
        let writes = OwnWrites::default();
        writes.wrote(&Written::from(&at("opaque-1")));
        assert!(writes.is_empty(), "not recorded");
        writes.wrote(&Written::from(&at("12")));
        assert_eq!(Freshness::Current, writes.check(&at("opaque-0")));
        writes.wrote(&Written::from(&at("12")));
        writes.forget(&at("10"));
        assert!(writes.is_empty());
        assert_eq!(Freshness::Current, writes.check(&at("10")));
    }
}
