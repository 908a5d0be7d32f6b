//! [`NativeActuator`]: an `orchard-sdk` actuator linked into the host as a Rust library.
//!
//! It goes through the same JSON-text face ([`orchard_sdk::Raw`]) as the component, so the
//! difference between the two measures the Wasm boundary alone. Used by benchmarks and flow
//! tests; production plugins are components.

use std::time::Duration;

use async_trait::async_trait;
use orchard_sdk as sdk;
use serde_json::Value;

use super::contract::{Boundary, RawDescription};
use super::{
    Actuator, Availability, CallResult, DependencyDecl, Description, ExternalResource, Failure,
    ManagedObject, Progress, Status, WaitEvent,
};

/// An SDK actuator called natively (blocking calls run on the caller's thread).
pub struct NativeActuator<A: sdk::Actuator> {
    name: String,
    raw: sdk::Raw<A>,
}

impl<A: sdk::Actuator> NativeActuator<A> {
    /// Wraps `A::default()`.
    pub fn new() -> Self {
        let raw = sdk::Raw(A::default());
        Self {
            name: raw.describe().name,
            raw,
        }
    }

    fn boundary(&self, function: &'static str) -> Boundary<'_> {
        Boundary::new(&self.name, function)
    }
}

impl<A: sdk::Actuator> Default for NativeActuator<A> {
    fn default() -> Self {
        Self::new()
    }
}

fn parts(r: sdk::Resource) -> (String, String) {
    (r.id, r.state)
}

fn object(o: &ManagedObject) -> sdk::Object {
    sdk::Object {
        name: o.name.clone(),
        namespace: o.namespace.clone(),
        uid: o.uid.clone(),
        generation: o.generation,
        labels: o.labels.clone(),
        annotations: o.annotations.clone(),
        spec: o.spec.as_ref().map(Value::to_string),
        status_id: o.status_id.clone(),
        dependencies: o
            .dependencies
            .iter()
            .map(|d| sdk::Dependency {
                name: d.name.clone(),
                kind: d.kind.clone(),
                object: d.object.clone(),
                id: d.id.clone(),
                observed: d.observed.as_ref().map(Value::to_string),
            })
            .collect(),
        credentials: o.credentials.clone(),
    }
}

fn resource(r: &ExternalResource) -> sdk::Resource {
    sdk::Resource {
        id: r.id.clone(),
        state: r.state.to_string(),
    }
}

fn failure(f: sdk::Failure) -> Failure {
    match f {
        sdk::Failure::Transient(m) => Failure::Transient(m),
        sdk::Failure::InvalidConfiguration(m) => Failure::InvalidConfiguration(m),
        sdk::Failure::Unrecoverable(m) => Failure::Unrecoverable(m),
    }
}

fn event(e: sdk::WaitEvent) -> WaitEvent {
    match e {
        sdk::WaitEvent::Creation => WaitEvent::Creation,
        sdk::WaitEvent::Ready => WaitEvent::Ready,
        sdk::WaitEvent::Deletion => WaitEvent::Deletion,
        sdk::WaitEvent::Update => WaitEvent::Update,
    }
}

fn status(s: sdk::Status) -> Status {
    Status {
        progress: s
            .progress
            .into_iter()
            .map(|p| match p {
                sdk::Progress::WaitingOnExternal {
                    event: e,
                    message,
                    poll_after,
                } => Progress::WaitingOnExternal {
                    event: event(e),
                    message,
                    poll_after: Duration::from_millis(
                        poll_after.as_millis().try_into().unwrap_or(u64::MAX),
                    ),
                },
                sdk::Progress::WaitingOnObject {
                    kind,
                    name,
                    event: e,
                } => Progress::WaitingOnObject {
                    kind,
                    name,
                    event: event(e),
                },
                sdk::Progress::NeedsRefresh(message) => Progress::NeedsRefresh { message },
            })
            .collect(),
        failure: s.failure.map(failure),
    }
}

#[async_trait]
impl<A: sdk::Actuator + Send + Sync> Actuator for NativeActuator<A> {
    fn name(&self) -> &str {
        &self.name
    }

    async fn describe(&self) -> CallResult<Description> {
        let d = self.raw.describe();
        self.boundary("describe").description(RawDescription {
            name: d.name,
            group: d.group,
            version: d.version,
            kind: d.kind,
            plural: d.plural,
            resource_schema: d.resource_schema,
            filter_schema: d.filter_schema,
            observed_schema: d.observed_schema,
            dependencies: d
                .dependencies
                .into_iter()
                .map(|d| DependencyDecl {
                    name: d.name,
                    field: d.field,
                    kind: d.kind,
                    for_create: d.for_create,
                    for_delete: d.for_delete,
                    guard_deletion: d.guard_deletion,
                })
                .collect(),
            needs_credentials: d.needs_credentials,
        })
    }

    async fn get_by_id(
        &self,
        obj: &ManagedObject,
        id: &str,
    ) -> CallResult<Result<Option<ExternalResource>, Failure>> {
        let b = self.boundary("get-by-id");
        Ok(match self.raw.get_by_id(object(obj), id) {
            Ok(Some(r)) => Ok(Some(b.resource_for_id(id, r.id, &r.state)?)),
            Ok(None) => Ok(None),
            Err(f) => Err(b.failure(failure(f))),
        })
    }

    async fn list_for_adoption(
        &self,
        obj: &ManagedObject,
    ) -> CallResult<Result<Option<Vec<ExternalResource>>, Failure>> {
        let b = self.boundary("list-for-adoption");
        Ok(match self.raw.list_for_adoption(object(obj)) {
            Ok(Some(list)) => Ok(Some(b.resources(list, parts)?)),
            Ok(None) => Ok(None),
            Err(f) => Err(b.failure(failure(f))),
        })
    }

    async fn list_for_import(
        &self,
        obj: &ManagedObject,
        filter: &Value,
    ) -> CallResult<Result<Vec<ExternalResource>, Failure>> {
        let b = self.boundary("list-for-import");
        Ok(
            match self.raw.list_for_import(object(obj), &filter.to_string()) {
                Ok(list) => Ok(b.resources(list, parts)?),
                Err(f) => Err(b.failure(failure(f))),
            },
        )
    }

    async fn create(&self, obj: &ManagedObject) -> CallResult<Result<ExternalResource, Status>> {
        let b = self.boundary("create");
        Ok(match self.raw.create(object(obj)) {
            Ok(r) => Ok(b.resource(r.id, &r.state)?),
            Err(s) => Err(b.status(status(s))?),
        })
    }

    async fn delete(&self, obj: &ManagedObject, res: &ExternalResource) -> CallResult<Status> {
        let s = self.raw.delete(object(obj), &resource(res));
        self.boundary("delete").status(status(s))
    }

    async fn reconcilers(
        &self,
        obj: &ManagedObject,
        res: &ExternalResource,
    ) -> CallResult<Result<Vec<String>, Failure>> {
        let b = self.boundary("reconcilers");
        Ok(match self.raw.reconcilers(object(obj), &resource(res)) {
            Ok(names) => Ok(b.reconcilers(names)?),
            Err(f) => Err(b.failure(failure(f))),
        })
    }

    async fn run_reconciler(
        &self,
        name: &str,
        obj: &ManagedObject,
        res: &ExternalResource,
    ) -> CallResult<Status> {
        let s = self.raw.run_reconciler(name, object(obj), &resource(res));
        self.boundary("run-reconciler").status(status(s))
    }

    async fn available(
        &self,
        obj: &ManagedObject,
        res: &ExternalResource,
    ) -> CallResult<(Availability, Status)> {
        let (a, s) = self.raw.available(object(obj), &resource(res));
        let a = match a {
            sdk::Availability::Available => Availability::Available,
            sdk::Availability::Unavailable => Availability::Unavailable,
            sdk::Availability::Unknown => Availability::Unknown,
        };
        Ok((a, self.boundary("available").status(status(s))?))
    }

    async fn observed(&self, res: &ExternalResource) -> CallResult<Value> {
        let text = self.raw.observed(&resource(res));
        self.boundary("observed").observed(&text)
    }
}
