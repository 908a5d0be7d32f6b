//! Exclusive claims: which live object of a kind holds which external id.
//!
//! The index is fed from the kind's watch (every object's `status.id`) and from the flow
//! itself (an id is *reserved* the moment a pass decides to adopt, import or record it, before
//! the write reaches the cache), so two passes racing for one resource cannot both win.
//!
//! Rules (the flows enforce them):
//! - a managed object MUST NOT adopt, import or record an id that another live object holds;
//! - when two objects show the same `status.id` (someone edited one), the older object (by
//!   creation time, then namespace/name) holds it; the other is refused;
//! - a delete MUST NOT delete an external resource whose id another live object holds;
//! - unmanaged objects never write, so they may import an id that others hold.

use crate::reconcile::StoredMeta;
use std::collections::HashMap;
use std::sync::Mutex;

use jiff::Timestamp;
use kube::ResourceExt;
use kube::api::DynamicObject;

/// An object that holds an id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// `metadata.uid` of the holder.
    pub uid: String,
    /// `namespace/name`.
    pub key: String,
    /// Its `metadata.creationTimestamp`, when known; with `key`, the order in which holders rank.
    pub created: Option<Timestamp>,
    /// Whether it manages the resource (not an import).
    pub managed: bool,
}

impl Holder {
    /// The holder `obj` would be.
    pub fn of(obj: &DynamicObject) -> Self {
        Self {
            uid: obj.stored_uid(),
            key: format!("{}/{}", obj.stored_namespace(), obj.name_any()),
            created: obj.metadata.creation_timestamp.as_ref().map(|t| t.0),
            managed: obj.data["spec"]["managementPolicy"].as_str() != Some("unmanaged"),
        }
    }

    fn seniority(&self) -> (Option<Timestamp>, &str) {
        // `None` sorts first; an object without a creation time is a test fixture.
        (self.created, self.key.as_str())
    }
}

#[derive(Debug, Default)]
struct Index {
    /// id → the live objects whose cached status.id it is.
    by_id: HashMap<String, Vec<Holder>>,
    /// uid → the id its cached status.id holds.
    by_uid: HashMap<String, String>,
    /// uid → an id a pass took and has not yet seen in the cache.
    reserved: HashMap<String, (String, Holder)>,
}

impl Index {
    fn remove_uid(&mut self, uid: &str) {
        if let Some(id) = self.by_uid.remove(uid)
            && let Some(holders) = self.by_id.get_mut(&id)
        {
            holders.retain(|h| h.uid != uid);
            if holders.is_empty() {
                self.by_id.remove(&id);
            }
        }
    }

    /// Every holder of `id`: cached and reserved.
    fn holders<'a>(&'a self, id: &'a str) -> impl Iterator<Item = &'a Holder> + 'a {
        let cached = self.by_id.get(id).into_iter().flatten();
        let reserved = self
            .reserved
            .values()
            .filter(move |(r, _)| r == id)
            .map(|(_, h)| h);
        cached.chain(reserved)
    }
}

/// The claims of one kind.
#[derive(Debug, Default)]
pub struct Claims {
    index: Mutex<Index>,
}

impl Claims {
    fn lock(&self) -> std::sync::MutexGuard<'_, Index> {
        // A poisoned lock means a panic while editing the maps; the worst left behind is a
        // stale entry, which the next watch event of that object replaces.
        self.index
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The watch saw `obj` (created or changed): its cached claim is its status.id.
    pub fn observe(&self, obj: &DynamicObject) {
        let holder = Holder::of(obj);
        let mut index = self.lock();
        index.remove_uid(&holder.uid);
        if obj.metadata.deletion_timestamp.is_some() {
            // Being deleted: no longer a live holder.
            index.reserved.remove(&holder.uid);
            return;
        }
        if let Some(id) = obj.data["status"]["id"].as_str() {
            if index
                .reserved
                .get(&holder.uid)
                .is_some_and(|(r, _)| r == id)
            {
                index.reserved.remove(&holder.uid);
            }
            index
                .by_id
                .entry(id.to_owned())
                .or_default()
                .push(holder.clone());
            index.by_uid.insert(holder.uid, id.to_owned());
        }
    }

    /// The watch saw `obj` go, or the host released it.
    pub fn forget(&self, obj: &DynamicObject) {
        let uid = obj.stored_uid();
        let mut index = self.lock();
        index.remove_uid(&uid);
        index.reserved.remove(&uid);
    }

    /// A pass of `obj` ended without recording what it reserved.
    pub fn unreserve(&self, obj: &DynamicObject) {
        self.lock().reserved.remove(&obj.stored_uid());
    }

    /// Another live object that holds `id` before `obj` does: the one `obj` must yield to.
    /// `None` when `obj` may hold it.
    pub fn senior_holder(&self, obj: &DynamicObject, id: &str) -> Option<Holder> {
        let me = Holder::of(obj);
        let index = self.lock();
        index
            .holders(id)
            .filter(|h| h.uid != me.uid && h.managed)
            .filter(|h| h.seniority() < me.seniority())
            .min_by(|a, b| a.seniority().cmp(&b.seniority()))
            .cloned()
    }

    /// Any other live object holding `id`.
    pub fn other_holder(&self, obj: &DynamicObject, id: &str) -> Option<Holder> {
        let uid = obj.stored_uid();
        let index = self.lock();
        index
            .holders(id)
            .filter(|h| h.uid != uid)
            .min_by(|a, b| a.seniority().cmp(&b.seniority()))
            .cloned()
    }

    /// Reserves `id` for `obj` unless another live object holds it, in one step so that two
    /// passes cannot both take it. Unmanaged objects never write: they never conflict.
    pub fn reserve(&self, obj: &DynamicObject, id: &str) -> Result<(), Holder> {
        let me = Holder::of(obj);
        let mut index = self.lock();
        if me.managed
            && let Some(other) = index.holders(id).find(|h| h.uid != me.uid)
        {
            return Err(other.clone());
        }
        let already = index.by_uid.get(&me.uid).is_some_and(|held| held == id);
        if !already {
            index.reserved.insert(me.uid.clone(), (id.to_owned(), me));
        }
        Ok(())
    }

    /// Number of ids held or reserved (for tests and metrics).
    pub fn len(&self) -> usize {
        let index = self.lock();
        index.by_id.len() + index.reserved.len()
    }

    /// Whether no id is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(name: &str, created: i64, id: Option<&str>, managed: bool) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "x.dev/v1", "kind": "Thing",
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                         "creationTimestamp": jiff::Timestamp::from_second(created).unwrap().to_string()},
            "spec": {"managementPolicy": if managed { "managed" } else { "unmanaged" }},
            "status": {"id": id},
        }))
        .unwrap()
    }

    #[test]
    fn a_reserved_id_cannot_be_reserved_by_another_managed_object() {
        let claims = Claims::default();
        let (a, b) = (obj("a", 1, None, true), obj("b", 2, None, true));
        claims.reserve(&a, "x").unwrap();
        assert_eq!(claims.reserve(&b, "x").unwrap_err().key, "ns/a");
        claims.reserve(&a, "x").unwrap();
    }

    #[test]
    fn a_reservation_survives_unrelated_watch_events_until_the_id_is_cached() {
        let claims = Claims::default();
        let (a, b) = (obj("a", 1, None, true), obj("b", 2, None, true));
        claims.reserve(&a, "x").unwrap();
        claims.observe(&a); // e.g. the marker write, before status.id
        assert!(claims.reserve(&b, "x").is_err());
        claims.observe(&obj("a", 1, Some("x"), true));
        assert!(claims.reserve(&b, "x").is_err());
        assert_eq!(claims.len(), 1);
        claims.unreserve(&a);
        claims.forget(&a);
        claims.reserve(&b, "x").unwrap();
    }

    #[test]
    fn unmanaged_objects_may_share_an_id() {
        let claims = Claims::default();
        claims.reserve(&obj("a", 1, None, true), "x").unwrap();
        claims.reserve(&obj("b", 2, None, false), "x").unwrap();
        claims.reserve(&obj("c", 3, None, false), "x").unwrap();
    }

    #[test]
    fn of_two_objects_showing_one_id_the_older_holds_it() {
        let claims = Claims::default();
        let (old, new) = (
            obj("old", 1, Some("x"), true),
            obj("new", 2, Some("x"), true),
        );
        claims.observe(&new);
        claims.observe(&old);
        assert_eq!(claims.senior_holder(&new, "x").unwrap().key, "ns/old");
        assert_eq!(claims.senior_holder(&old, "x"), None);
        assert_eq!(claims.other_holder(&old, "x").unwrap().key, "ns/new");
    }

    #[test]
    fn a_forgotten_or_deleting_object_holds_nothing() {
        let claims = Claims::default();
        let a = obj("a", 1, Some("x"), true);
        claims.observe(&a);
        assert_eq!(claims.len(), 1);
        claims.forget(&a);
        assert!(claims.is_empty());
        let mut deleting = a.clone();
        deleting.metadata.deletion_timestamp = a.metadata.creation_timestamp.clone();
        claims.observe(&deleting);
        assert!(claims.is_empty());
    }

    #[test]
    fn a_changed_status_id_moves_the_claim() {
        let claims = Claims::default();
        claims.observe(&obj("a", 1, Some("x"), true));
        claims.observe(&obj("a", 1, Some("y"), true));
        let b = obj("b", 2, None, true);
        claims.reserve(&b, "x").unwrap();
        assert!(claims.reserve(&b, "y").is_err());
    }
}
