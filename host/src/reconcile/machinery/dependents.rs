//! Which objects of a plugin's kind name which dependency: an index kept from the kind's own
//! changes, so that a dependency's change finds its dependents in time proportional to them,
//! not to the kind.
//!
//! Why: scanning the kind's cache at each dependency change costs (dependencies × dependents)
//! when a cache replays — measured, a host restarted over 5,000 zones and 5,000 records took
//! 12 s to be ready, its record controller scanning 5,000 records for each of 5,000 zones.
//!
//! Rules:
//! - an object MUST be indexed before its pass is triggered, so a dependency change that
//!   comes after the pass read the dependency finds it;
//! - objects the dependency owns MUST NOT count as its dependents (that would deadlock its
//!   deletion: they go with it).

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

use kube::ResourceExt;
use kube::api::DynamicObject;

use super::queue::Key;
use crate::actuator::Description;

/// The kind name under which the credentials Secret is tracked.
pub const SECRET: &str = "Secret";

/// The name an object's spec gives for each dependency kind: `(kind, name)` pairs.
pub fn references(d: &Description, obj: &DynamicObject) -> Vec<(String, String)> {
    let spec = &obj.data["spec"];
    let mut refs: Vec<(String, String)> = d
        .dependencies
        .iter()
        .filter_map(|decl| {
            spec["resource"][&decl.field]
                .as_str()
                .map(|name| (decl.kind.clone(), name.to_owned()))
        })
        .collect();
    if let Some(name) = spec["credentialsRef"]["secretName"]
        .as_str()
        .filter(|_| d.needs_credentials)
    {
        refs.push((SECRET.to_owned(), name.to_owned()));
    }
    refs
}

/// A dependency: kind, namespace, name.
type Dependency = (String, String, String);

/// What is indexed of one object: the dependencies it names and the uids of its owners.
#[derive(Debug, Default, PartialEq)]
struct Entry {
    names: Vec<Dependency>,
    owners: Vec<String>,
}

#[derive(Debug, Default)]
struct State {
    /// Dependency → the objects naming it.
    by_dependency: HashMap<Dependency, HashSet<Key>>,
    /// Object → what it names (to unindex it when it changes or goes).
    entries: HashMap<Key, Entry>,
}

impl State {
    fn remove(&mut self, key: &Key) {
        let Some(old) = self.entries.remove(key) else {
            return;
        };
        for dep in old.names {
            if let Some(users) = self.by_dependency.get_mut(&dep) {
                users.remove(key);
                if users.is_empty() {
                    self.by_dependency.remove(&dep);
                }
            }
        }
    }
}

/// The index of one plugin's kind (see the module's rules).
#[derive(Debug)]
pub struct DependentsIndex {
    description: Description,
    state: Mutex<State>,
}

impl DependentsIndex {
    /// An empty index of the objects `description` manages.
    pub fn new(description: Description) -> Self {
        Self {
            description,
            state: Mutex::default(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every critical section leaves the maps consistent: a poisoned lock holds a usable index.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `obj` was created or changed.
    pub fn observe(&self, obj: &DynamicObject) {
        let key = Key::of(obj);
        let namespace = key.namespace.clone();
        let entry = Entry {
            names: references(&self.description, obj)
                .into_iter()
                .map(|(kind, name)| (kind, namespace.clone(), name))
                .collect(),
            owners: obj
                .owner_references()
                .iter()
                .map(|o| o.uid.clone())
                .collect(),
        };
        let mut state = self.state();
        if state.entries.get(&key) == Some(&entry) {
            return;
        }
        state.remove(&key);
        if entry.names.is_empty() {
            return;
        }
        for dep in &entry.names {
            state
                .by_dependency
                .entry(dep.clone())
                .or_default()
                .insert(key.clone());
        }
        state.entries.insert(key, entry);
    }

    /// `obj` is gone.
    pub fn forget(&self, obj: &DynamicObject) {
        self.state().remove(&Key::of(obj));
    }

    /// The objects that name `dep` (of `kind`), but those `dep` owns.
    pub fn of(&self, kind: &str, dep: &DynamicObject) -> Vec<Key> {
        let uid = dep.uid().unwrap_or_default();
        let dependency = (
            kind.to_owned(),
            dep.namespace().unwrap_or_default(),
            dep.name_any(),
        );
        let state = self.state();
        let Some(users) = state.by_dependency.get(&dependency) else {
            return Vec::new();
        };
        users
            .iter()
            .filter(|key| {
                state
                    .entries
                    .get(*key)
                    .is_none_or(|e| !e.owners.contains(&uid))
            })
            .cloned()
            .collect()
    }

    /// How many objects name at least one dependency.
    pub fn len(&self) -> usize {
        self.state().entries.len()
    }

    /// Whether no object names a dependency.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
