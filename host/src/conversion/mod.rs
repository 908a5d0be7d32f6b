//! The apiserver's conversion webhook for the kinds whose plugin lists several API versions
//! (`conversion` in `wit/actuator.wit`): [`review`] answers one `ConversionReview` (v1) by
//! calling the plugin's `convert` in the sandbox for every object, and [`server`] serves it
//! over HTTPS.
//!
//! # Contract
//!
//! - The host keeps the envelope: only `spec.resource`, `spec.import.filter`,
//!   `status.resource`, `apiVersion` and the annotations under the kind's group change.
//! - A failed, trapping or contract-breaking conversion answers `Failed` with a message naming
//!   the plugin, the object and the failure (the apiserver fails that request); the host goes
//!   on, and every other kind is converted as before.
//! - One review's objects share one instance of the plugin (its start-up is paid once).

pub mod server;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use serde_json::{Map, Value, json};

use crate::actuator::{Actuator, Convertible, Description};

/// Why a review could not be read: answered to the apiserver as a failure.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The body is not a `ConversionReview`.
    #[error("not a ConversionReview v1: {0}")]
    Review(String),
    /// No plugin serving this host converts the object's kind.
    #[error("{object}: no plugin on this host converts kind {kind} of group {group}")]
    NoPlugin {
        /// `namespace/name`.
        object: String,
        /// The object's API group.
        group: String,
        /// The object's kind.
        kind: String,
    },
    /// The plugin refused or failed the conversion.
    #[error("plugin {plugin}: converting {object} from {from} to {to}: {why}")]
    Convert {
        /// The plugin that converts the kind.
        plugin: String,
        /// `Kind namespace/name`.
        object: String,
        /// The object's version.
        from: String,
        /// The version asked for.
        to: String,
        /// The failure, trap or broken rule.
        why: String,
    },
}

/// The plugins that convert, by group and kind.
#[derive(Default)]
pub struct Registry {
    plugins: RwLock<HashMap<(String, String), Arc<dyn Actuator>>>,
}

impl Registry {
    /// Serves the conversions of `d`'s kind with `actuator` (replacing the one before, as a
    /// Plugin upgrade does); a kind with one version is removed.
    pub fn register(&self, d: &Description, actuator: Arc<dyn Actuator>) {
        let key = (d.group.clone(), d.kind.clone());
        let mut plugins = self
            .plugins
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if d.converts() {
            plugins.insert(key, actuator);
        } else {
            plugins.remove(&key);
        }
    }

    fn get(&self, group: &str, kind: &str) -> Option<Arc<dyn Actuator>> {
        self.plugins
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&(group.to_owned(), kind.to_owned()))
            .cloned()
    }
}

/// The process's registry (as the metrics and the journal are the process's).
pub fn registry() -> &'static Registry {
    static REGISTRY: std::sync::OnceLock<Registry> = std::sync::OnceLock::new();
    REGISTRY.get_or_init(Registry::default)
}

/// The answer to one `ConversionReview` request body: always a `ConversionReview`, `Success`
/// with every object converted, or `Failed` naming what failed.
pub async fn review(body: &[u8], registry: &Registry) -> Value {
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let uid = request["request"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let result = convert_all(&request, registry).await;
    let response = match result {
        Ok(objects) => json!({
            "uid": uid,
            "convertedObjects": objects,
            "result": {"status": "Success"}
        }),
        Err(e) => {
            tracing::warn!(error = %e, "conversion failed");
            json!({
                "uid": uid,
                "convertedObjects": [],
                "result": {"status": "Failed", "message": e.to_string()}
            })
        }
    };
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "response": response
    })
}

/// A plugin and its view for one review (`None`: it has none; call it itself).
type PluginView = (Arc<dyn Actuator>, Option<Box<dyn Actuator>>);

async fn convert_all(request: &Value, registry: &Registry) -> Result<Vec<Value>, Error> {
    let req = &request["request"];
    if request["kind"] != "ConversionReview" || !req.is_object() {
        return Err(Error::Review("no request".to_owned()));
    }
    let desired = req["desiredAPIVersion"]
        .as_str()
        .ok_or_else(|| Error::Review("request.desiredAPIVersion missing".to_owned()))?;
    let objects = req["objects"]
        .as_array()
        .ok_or_else(|| Error::Review("request.objects missing".to_owned()))?;
    // One view per plugin for the whole review: its objects share one instance.
    let mut views: HashMap<(String, String), PluginView> = HashMap::new();
    let mut converted = Vec::with_capacity(objects.len());
    for obj in objects {
        let from = obj["apiVersion"].as_str().unwrap_or_default();
        let kind = obj["kind"].as_str().unwrap_or_default();
        let name = object_name(obj);
        if from == desired {
            converted.push(obj.clone());
            continue;
        }
        let (group, from_version) = split(from);
        let (_, to_version) = split(desired);
        let key = (group.to_owned(), kind.to_owned());
        if !views.contains_key(&key) {
            let actuator = registry.get(group, kind).ok_or_else(|| Error::NoPlugin {
                object: name.clone(),
                group: group.to_owned(),
                kind: kind.to_owned(),
            })?;
            let view = actuator.for_pass();
            views.insert(key.clone(), (actuator, view));
        }
        let (actuator, view) = &views[&key];
        let plugin: &dyn Actuator = view.as_deref().unwrap_or(actuator.as_ref());
        let failed = |why: String| Error::Convert {
            plugin: plugin.name().to_owned(),
            object: format!("{kind} {name}"),
            from: from_version.to_owned(),
            to: to_version.to_owned(),
            why,
        };
        let why = match plugin.convert(&parts(obj), from_version, to_version).await {
            Ok(Ok(answer)) => {
                crate::ops::metrics::global().converted(plugin.name(), true, 1);
                converted.push(assemble(obj, desired, group, answer));
                continue;
            }
            Ok(Err(f)) => format!("{} failure: {f}", f.reason()),
            Err(e) => e.to_string(),
        };
        crate::ops::metrics::global().converted(plugin.name(), false, 1);
        return Err(failed(why));
    }
    Ok(converted)
}

/// `namespace/name` of an object, for messages.
fn object_name(obj: &Value) -> String {
    let meta = &obj["metadata"];
    let name = meta["name"].as_str().unwrap_or("<no name>");
    match meta["namespace"].as_str() {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_owned(),
    }
}

/// `group/version` → (group, version).
fn split(api_version: &str) -> (&str, &str) {
    api_version.split_once('/').unwrap_or(("", api_version))
}

/// The parts of `obj` a conversion changes.
pub fn parts(obj: &Value) -> Convertible {
    let doc = |v: &Value| (!v.is_null()).then(|| v.clone());
    Convertible {
        resource: doc(&obj["spec"]["resource"]),
        filter: doc(&obj["spec"]["import"]["filter"]),
        observed: doc(&obj["status"]["resource"]),
        annotations: obj["metadata"]["annotations"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
            .collect(),
    }
}

/// Whether an annotation key is the kind's own (`<group>/…` or `<sub>.<group>/…`): the only
/// ones a conversion writes.
fn owned_key(key: &str, group: &str) -> bool {
    key.split_once('/').is_some_and(|(prefix, _)| {
        prefix == group || prefix.strip_suffix(group).is_some_and(|p| p.ends_with('.'))
    })
}

/// `obj` at `api_version` with the converted parts of `c`; everything else as it was.
pub fn assemble(obj: &Value, api_version: &str, group: &str, c: Convertible) -> Value {
    let mut out = obj.clone();
    out["apiVersion"] = json!(api_version);
    let set = |parent: &mut Value, key: &str, value: Option<Value>| match (parent, value) {
        (Value::Object(map), Some(v)) => {
            map.insert(key.to_owned(), v);
        }
        (Value::Object(map), None) => {
            map.remove(key);
        }
        _ => {}
    };
    if out["spec"].is_object() {
        set(&mut out["spec"], "resource", c.resource);
        if out["spec"]["import"].is_object() {
            set(&mut out["spec"]["import"], "filter", c.filter);
        }
    }
    if out["status"].is_object() {
        set(&mut out["status"], "resource", c.observed);
    }
    let mut annotations: Map<String, Value> = obj["metadata"]["annotations"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    annotations.retain(|k, _| !owned_key(k, group));
    for (k, v) in c.annotations {
        if owned_key(&k, group) {
            annotations.insert(k, json!(v));
        }
    }
    if let Some(meta) = out["metadata"].as_object_mut() {
        if annotations.is_empty() {
            meta.remove("annotations");
        } else {
            meta.insert("annotations".to_owned(), Value::Object(annotations));
        }
    }
    out
}

#[cfg(test)]
mod tests;
