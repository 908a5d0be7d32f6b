//! Which watch events of the kind start a pass.
//!
//! The host's own writes (finalizer, marker, status.id, status) MUST NOT wake the controller
//! for another pass: that is what made a failing create spin past its backoff. An event
//! starts a pass only when something changed that the host did not write:
//! - the generation (the spec);
//! - the deletion timestamp;
//! - anyone else's finalizers (dependents' guards going away unblock a delete);
//! - our finalizer went missing on a live object (someone removed it: put it back);
//! - the annotations of the operator controls (`orchard.dev/*` except the host's marker).
//!
//! Timers (backoff, polls, resync) are the controller's own and are not affected.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use kube::ResourceExt;
use kube::api::DynamicObject;

use crate::reconcile::StoredMeta;
use crate::reconcile::annotations::CREATE_PENDING;

/// What of an object can start a pass.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Key {
    generation: Option<i64>,
    deleting: bool,
    foreign_finalizers: Vec<String>,
    missing_finalizer: bool,
    controls: BTreeMap<String, String>,
}

impl Key {
    fn of(obj: &DynamicObject, finalizer: &str) -> Self {
        let mut foreign: Vec<String> = obj
            .finalizers()
            .iter()
            .filter(|f| *f != finalizer)
            .cloned()
            .collect();
        foreign.sort();
        let deleting = obj.metadata.deletion_timestamp.is_some();
        Self {
            generation: obj.metadata.generation,
            deleting,
            foreign_finalizers: foreign,
            missing_finalizer: !deleting && !obj.finalizers().iter().any(|f| f == finalizer),
            controls: obj
                .annotations()
                .iter()
                .filter(|(k, _)| k.starts_with("orchard.dev/") && *k != CREATE_PENDING)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }
}

/// The last key seen per object (uid).
#[derive(Debug)]
pub struct Triggers {
    finalizer: String,
    seen: Mutex<HashMap<String, Key>>,
}

impl Triggers {
    /// Triggers of a kind whose finalizer is `finalizer`.
    pub fn new(finalizer: &str) -> Self {
        Self {
            finalizer: finalizer.to_owned(),
            seen: Mutex::default(),
        }
    }

    /// Whether this event of `obj` starts a pass (the first sight of an object always does).
    pub fn admit(&self, obj: &DynamicObject) -> bool {
        let key = Key::of(obj, &self.finalizer);
        let uid = obj.stored_uid();
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(previous) = seen.insert(uid, key.clone()) else {
            return true;
        };
        if previous == key {
            return false;
        }
        // The host putting its finalizer on is its own write, not a trigger.
        let fixed = Key {
            missing_finalizer: true,
            ..key.clone()
        };
        !(previous.missing_finalizer && !key.missing_finalizer && previous == fixed)
    }

    /// `obj` is gone: forget it (bounded bookkeeping).
    pub fn forget(&self, obj: &DynamicObject) {
        self.seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&obj.stored_uid());
    }

    /// Objects remembered (for tests).
    pub fn len(&self) -> usize {
        self.seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }

    /// Whether none is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const F: &str = "orchard.dev/p";

    #[allow(clippy::needless_pass_by_value, reason = "callers pass json! literals")]
    fn obj(generation: i64, finalizers: &[&str], annotations: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "x.dev/v1", "kind": "Thing",
            "metadata": {"name": "a", "namespace": "ns", "uid": "u1", "generation": generation,
                         "finalizers": finalizers, "annotations": annotations},
        }))
        .unwrap()
    }
    use serde_json::Value;

    #[test]
    fn the_hosts_own_writes_do_not_start_a_pass() {
        let t = Triggers::new(F);
        assert!(t.admit(&obj(1, &[], json!({}))), "first sight");
        assert!(!t.admit(&obj(1, &[F], json!({}))), "finalizer put on");
        assert!(
            !t.admit(&obj(1, &[F], json!({CREATE_PENDING: "now"}))),
            "marker set"
        );
        let mut with_status = obj(1, &[F], json!({}));
        with_status.data["status"] = json!({"id": "x", "conditions": []});
        assert!(!t.admit(&with_status), "marker cleared, status written");
    }

    #[test]
    fn real_changes_start_a_pass() {
        let t = Triggers::new(F);
        t.admit(&obj(1, &[F], json!({})));
        assert!(t.admit(&obj(2, &[F], json!({}))), "spec changed");
        assert!(
            t.admit(&obj(2, &[], json!({}))),
            "our finalizer removed by hand"
        );
        t.admit(&obj(2, &[F], json!({})));
        assert!(
            t.admit(&obj(2, &[F, "x/guard"], json!({}))),
            "a foreign finalizer"
        );
        assert!(t.admit(&obj(2, &[F], json!({}))), "and its removal");
        assert!(
            t.admit(&obj(2, &[F], json!({"orchard.dev/reconcile-now": "1"}))),
            "an operator control"
        );
        let mut deleting = obj(2, &[F], json!({"orchard.dev/reconcile-now": "1"}));
        deleting.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
        );
        assert!(t.admit(&deleting), "deletion");
    }

    #[test]
    fn forgotten_objects_are_not_remembered() {
        let t = Triggers::new(F);
        let o = obj(1, &[F], json!({}));
        t.admit(&o);
        t.forget(&o);
        assert!(t.is_empty());
    }
}
