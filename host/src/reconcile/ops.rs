//! The seam below the flows: [`ObjectOps`] is the only code that reads or writes the
//! reconciled object, its dependencies and its Events. [`KubeOps`] is the real one (the kube
//! client and the host's caches); the flow tests use a recording fake.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};

use tracing::Instrument;

use super::machinery::cache::KindCache;
use super::machinery::writes::{OwnWrites, Written};
use super::{Error, Names};
use crate::reconcile::StoredMeta;

/// Longest Event note the apiserver accepts (events.k8s.io/v1 `note`: 1 kB).
pub const MAX_EVENT_NOTE: usize = 1024;

/// Marker appended to text that was cut to fit.
pub const TRUNCATED: &str = "…(truncated)";

/// `text` cut to at most `max` bytes (on a char boundary), with [`TRUNCATED`] when cut.
pub fn truncate(text: &str, max: usize) -> String {
    crate::actuator::contract::cut(text, max, TRUNCATED)
}

/// The span of one write of a pass to the apiserver ([`crate::ops::traces`]): which write, on
/// which object of which kind, and how it ended.
fn write_span(write: &'static str, kind: &str, obj: &DynamicObject) -> tracing::Span {
    tracing::info_span!(
        crate::ops::traces::API,
        otel.name = format!("{write} {kind}"),
        otel.kind = "client",
        k8s.namespace.name = %obj.stored_namespace(),
        k8s.object.name = %obj.name_any(),
        otel.status_code = tracing::field::Empty,
        otel.status_description = tracing::field::Empty,
    )
}

/// Runs `write` in `span`, which says whether it failed and why.
async fn traced<T>(
    span: tracing::Span,
    write: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    let result = write.instrument(span.clone()).await;
    if let Err(e) = &result {
        span.record("otel.status_code", "ERROR");
        span.record(
            "otel.status_description",
            crate::ops::traces::short(&e.to_string()),
        );
    }
    result
}

/// The metadata the plugin's finalizer manager owns on an object: our finalizer and the
/// create-pending marker (and, in a shard ring, the object's bucket label, carried as it is).
/// Applying it prunes whatever that manager owned and is not named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnMetadata {
    /// Our finalizer is on the object.
    pub finalizer: bool,
    /// `orchard.dev/create-pending`: a create is in flight since this time.
    pub create_pending: Option<String>,
}

/// An Event the flow publishes on the object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// A `Warning` Event rather than `Normal`.
    pub warning: bool,
    /// `UpperCamelCase` reason of the Event.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
}

impl Note {
    /// A Normal event.
    pub fn normal(reason: &str, message: impl Into<String>) -> Self {
        Self {
            warning: false,
            reason: reason.to_owned(),
            message: message.into(),
        }
    }

    /// A Warning event.
    pub fn warning(reason: &str, message: impl Into<String>) -> Self {
        Self {
            warning: true,
            reason: reason.to_owned(),
            message: message.into(),
        }
    }
}

/// What became of a connection Secret write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretWrite {
    /// The Secret holds the details (with those it held before).
    Written,
    /// A Secret of that name exists and this object does not own it: left untouched.
    NotOurs,
}

/// Everything the flows do to Kubernetes.
#[async_trait]
pub trait ObjectOps: Send + Sync {
    /// MUST server-side apply `meta` to `obj` as the finalizer manager, with the object's uid
    /// as a precondition (so a re-created namesake is never touched).
    async fn apply_metadata(&self, obj: &DynamicObject, meta: &OwnMetadata) -> Result<(), Error>;
    /// MUST set (or, with `None`, remove) `status.id` in a merge patch of its own.
    async fn patch_status_id(&self, obj: &DynamicObject, id: Option<&str>) -> Result<(), Error>;
    /// MUST server-side apply `status` (the whole `status` value) as the status manager.
    async fn apply_status(&self, obj: &DynamicObject, status: &Value) -> Result<(), Error>;
    /// SHOULD publish `note` as an Event on `obj`; a failure is logged, never returned, and
    /// the pass SHOULD NOT wait for the apiserver's answer. The note MUST be cut to
    /// [`MAX_EVENT_NOTE`] rather than dropped.
    async fn publish(&self, obj: &DynamicObject, note: Note);
    /// The cached object `namespace/name` of a dependency kind (`Secret` for credentials).
    fn cached(&self, kind: &str, namespace: &str, name: &str) -> Option<Arc<DynamicObject>>;
    /// MUST put this plugin's guard finalizer on `dep` (of dependency kind `kind`).
    async fn guard(&self, kind: &str, dep: &DynamicObject) -> Result<(), Error>;
    /// MUST write `details` into the Secret `name` of the object's namespace, created owned
    /// by `obj` (its controller) and keeping the details written before; MUST NOT touch a
    /// Secret of that name that `obj` does not own ([`SecretWrite::NotOurs`]).
    async fn write_connection_secret(
        &self,
        obj: &DynamicObject,
        name: &str,
        details: &BTreeMap<String, Vec<u8>>,
    ) -> Result<SecretWrite, Error>;
}

/// [`ObjectOps`] on the real apiserver. Every write of an object of the kind is recorded in the
/// kind's [`OwnWrites`], so that no pass reads the object as it was before it.
pub struct KubeOps {
    client: Client,
    resource: ApiResource,
    names: Names,
    events: super::machinery::events::EventPublisher,
    plugin: String,
    dependencies: HashMap<String, Arc<KindCache>>,
    writes: Arc<OwnWrites>,
}

impl KubeOps {
    /// The operations on objects of `resource`, with the caches of its dependency kinds; each
    /// write of an object of `resource` is recorded in `writes`.
    pub fn new(
        client: Client,
        resource: ApiResource,
        names: Names,
        events: super::machinery::events::EventPublisher,
        plugin: String,
        dependencies: HashMap<String, Arc<KindCache>>,
        writes: Arc<OwnWrites>,
    ) -> Self {
        Self {
            client,
            resource,
            names,
            events,
            plugin,
            dependencies,
            writes,
        }
    }

    fn kube_error(
        &self,
        action: &'static str,
        obj: &DynamicObject,
    ) -> impl FnOnce(kube::Error) -> Error {
        let kind = self.resource.kind.clone();
        let name = obj.name_any();
        move |source| Error::Kube {
            action,
            kind,
            name,
            source,
        }
    }

    /// The span of one write of the pass ([`crate::ops::traces`]): which write, on which
    /// object, and how it ended.
    fn write_span(&self, write: &'static str, obj: &DynamicObject) -> tracing::Span {
        write_span(write, &self.resource.kind, obj)
    }

    /// Patches `obj` (or its `subresource`) and records the write ([`OwnWrites`], rule 1).
    /// The answer is read as a [`Written`]: the host needs its version, not the object.
    async fn patch<P: serde::Serialize>(
        &self,
        obj: &DynamicObject,
        subresource: Option<&str>,
        params: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<(), kube::Error> {
        let request = kube::core::Request::new(DynamicObject::url_path(
            &self.resource,
            Some(&obj.stored_namespace()),
        ));
        let name = obj.name_any();
        let mut request = match subresource {
            Some(sub) => request.patch_subresource(sub, &name, params, patch),
            None => request.patch(&name, params, patch),
        }
        .map_err(kube::Error::BuildRequest)?;
        // The name kube's own `Api::patch` gives the request (its trace span says it).
        request.extensions_mut().insert("patch");
        let written: Written = self.client.request(request).await?;
        self.writes.wrote(&written);
        Ok(())
    }

    fn body(&self, obj: &DynamicObject, mut body: Value) -> Value {
        body["apiVersion"] = json!(self.resource.api_version);
        body["kind"] = json!(self.resource.kind);
        body["metadata"]["name"] = json!(obj.name_any());
        body["metadata"]["uid"] = json!(obj.uid());
        body
    }
}

/// The metadata the finalizer manager applies: every field it owns, since an apply takes
/// off what its manager owned and no longer names — the finalizer, the create-pending marker,
/// and the shard ring's bucket label, which a ring's labeller writes under this manager in
/// the same write as the finalizer (`crate::shard::label`).
fn own_metadata(obj: &DynamicObject, names: &Names, meta: &OwnMetadata) -> Value {
    let finalizers: Vec<&str> = if meta.finalizer {
        vec![&names.finalizer]
    } else {
        vec![]
    };
    let mut body = json!({"metadata": {"finalizers": finalizers}});
    if let Some(since) = &meta.create_pending {
        body["metadata"]["annotations"] = json!({super::annotations::CREATE_PENDING: since});
    }
    if let Some(bucket) = crate::shard::ring::labelled_bucket(obj.labels()) {
        body["metadata"]["labels"] = json!({crate::shard::ring::BUCKET_LABEL: bucket.to_string()});
    }
    body
}

#[async_trait]
impl ObjectOps for KubeOps {
    async fn apply_metadata(&self, obj: &DynamicObject, meta: &OwnMetadata) -> Result<(), Error> {
        let body = own_metadata(obj, &self.names, meta);
        let params = PatchParams::apply(&self.names.finalizer_manager).force();
        traced(self.write_span("apply metadata", obj), async {
            self.patch(obj, None, &params, &Patch::Apply(self.body(obj, body)))
                .await
                .map_err(self.kube_error("apply metadata to", obj))
        })
        .await
    }

    async fn patch_status_id(&self, obj: &DynamicObject, id: Option<&str>) -> Result<(), Error> {
        let body = json!({"metadata": {"uid": obj.uid()}, "status": {"id": id}});
        traced(self.write_span("patch status.id", obj), async {
            self.patch(
                obj,
                Some("status"),
                &PatchParams::default(),
                &Patch::Merge(&body),
            )
            .await
            .map_err(self.kube_error("patch status.id of", obj))
        })
        .await
    }

    async fn apply_status(&self, obj: &DynamicObject, status: &Value) -> Result<(), Error> {
        let params = PatchParams::apply(&self.names.status_manager).force();
        let body = self.body(obj, json!({"status": status}));
        traced(self.write_span("apply status", obj), async {
            self.patch(obj, Some("status"), &params, &Patch::Apply(body))
                .await
                .map_err(self.kube_error("apply status to", obj))
        })
        .await
    }

    async fn publish(&self, obj: &DynamicObject, note: Note) {
        // The pass's trace id, when it is exported: `kubectl describe` leads to the trace.
        let message = match crate::ops::traces::current_trace_id() {
            Some(id) => {
                let suffix = format!(" (trace {id})");
                truncate(&note.message, MAX_EVENT_NOTE - suffix.len()) + &suffix
            }
            None => truncate(&note.message, MAX_EVENT_NOTE),
        };
        let event = super::machinery::events::EventNote {
            warning: note.warning,
            reason: &note.reason,
            message: &message,
        };
        if let Err(e) = self.events.publish(&event, &obj.object_ref(&self.resource)) {
            crate::ops::metrics::global().event_dropped(&self.plugin);
            tracing::warn!(plugin = %self.plugin, object = %obj.name_any(), reason = %note.reason, error = %e, "Event dropped");
        }
    }

    fn cached(&self, kind: &str, namespace: &str, name: &str) -> Option<Arc<DynamicObject>> {
        self.dependencies.get(kind)?.get(namespace, name)
    }

    async fn write_connection_secret(
        &self,
        obj: &DynamicObject,
        name: &str,
        details: &BTreeMap<String, Vec<u8>>,
    ) -> Result<SecretWrite, Error> {
        traced(
            self.write_span("write connection Secret of", obj),
            self.write_secret(obj, name, details),
        )
        .await
    }

    async fn guard(&self, kind: &str, dep: &DynamicObject) -> Result<(), Error> {
        let Some(cache) = self.dependencies.get(kind) else {
            return Ok(());
        };
        traced(
            write_span("guard", &cache.resource.kind, dep),
            super::machinery::guard::apply_guard(
                &self.client,
                &cache.resource,
                &self.names.guard_manager,
                dep,
                json!([self.names.guard_finalizer]),
            ),
        )
        .await
    }
}

impl KubeOps {
    /// [`ObjectOps::write_connection_secret`], untraced.
    async fn write_secret(
        &self,
        obj: &DynamicObject,
        name: &str,
        details: &BTreeMap<String, Vec<u8>>,
    ) -> Result<SecretWrite, Error> {
        use k8s_openapi::ByteString;
        use k8s_openapi::api::core::v1::Secret;
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &obj.stored_namespace());
        let error = |action| {
            let name = name.to_owned();
            move |source| Error::Kube {
                action,
                kind: "Secret".into(),
                name,
                source,
            }
        };
        let mut data = BTreeMap::new();
        if let Some(existing) = secrets.get_opt(name).await.map_err(error("get"))? {
            if !existing
                .owner_references()
                .iter()
                .any(|o| o.uid == obj.uid().unwrap_or_default())
            {
                return Ok(SecretWrite::NotOurs);
            }
            // An apply names every key it owns: keep what earlier passes wrote.
            data = existing.data.unwrap_or_default();
        }
        for (k, v) in details {
            data.insert(k.clone(), ByteString(v.clone()));
        }
        let Some(owner) = obj.controller_owner_ref(&self.resource) else {
            // A cached object always has a name and a uid.
            return Ok(SecretWrite::NotOurs);
        };
        let secret = Secret {
            metadata: kube::api::ObjectMeta {
                name: Some(name.to_owned()),
                owner_references: Some(vec![owner]),
                ..Default::default()
            },
            type_: Some("Opaque".into()),
            data: Some(data),
            ..Default::default()
        };
        let params = PatchParams::apply(&self.names.connection_manager).force();
        secrets
            .patch(name, &params, &Patch::Apply(&secret))
            .await
            .map_err(error("apply"))?;
        Ok(SecretWrite::Written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_cut_with_a_marker_and_short_text_is_kept() {
        assert_eq!(truncate("short", 10), "short");
        let cut = truncate(&"é".repeat(1000), MAX_EVENT_NOTE);
        assert!(cut.len() <= MAX_EVENT_NOTE, "{}", cut.len());
        assert!(cut.ends_with(TRUNCATED));
    }

    fn zone(labels: serde_json::Value) -> DynamicObject {
        let mut metadata = json!({"name": "z", "namespace": "ns", "uid": "u1"});
        metadata["labels"] = labels;
        serde_json::from_value(json!({
            "apiVersion": "pdns.orchard.dev/v1alpha1", "kind": "DnsZone",
            "metadata": metadata,
        }))
        .unwrap()
    }

    #[test]
    fn the_finalizer_managers_apply_names_the_bucket_label_so_that_it_stays_on() {
        let names = Names::new("pdns-zone");
        let meta = OwnMetadata {
            finalizer: true,
            create_pending: Some("2026-12-07T18:00:00Z".into()),
        };
        let body = own_metadata(
            &zone(json!({"orchard.dev/shard-bucket": "42", "app": "x"})),
            &names,
            &meta,
        );
        assert_eq!(
            body,
            json!({"metadata": {
                "finalizers": ["orchard.dev/pdns-zone"],
                "annotations": {"orchard.dev/create-pending": "2026-12-07T18:00:00Z"},
                "labels": {"orchard.dev/shard-bucket": "42"},
            }})
        );
        // Released: no finalizer, the label still named; no bucket label: none named.
        let released = own_metadata(
            &zone(json!({"orchard.dev/shard-bucket": "42"})),
            &names,
            &OwnMetadata {
                finalizer: false,
                create_pending: None,
            },
        );
        assert_eq!(released["metadata"]["finalizers"], json!([]));
        assert_eq!(
            released["metadata"]["labels"],
            json!({"orchard.dev/shard-bucket": "42"})
        );
        for labels in [json!({}), json!({"orchard.dev/shard-bucket": "0042"})] {
            let body = own_metadata(&zone(labels), &names, &meta);
            assert!(body["metadata"].get("labels").is_none(), "{body}");
        }
    }
}
