//! [`NativeActuator`]: an `orchard-sdk` actuator linked into the host as a Rust library.
//!
//! It goes through the same JSON-text face ([`orchard_sdk::Raw`]) as the component, so the
//! difference between the two measures the Wasm boundary alone. Used by benchmarks and flow
//! tests; production plugins are components.
//!
//! The SDK's calls block (its HTTP client is synchronous): the calls that may do I/O run on
//! tokio's blocking pool, as a native operator would run them on threads, so they never hold
//! one of the runtime's worker threads the way a component's (async) calls do not either.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use orchard_sdk as sdk;
use serde_json::Value;

use super::contract::{Boundary, RawDescription};
use super::{
    Actuator, Availability, CallError, CallResult, DependencyDecl, Description, ExternalResource,
    Failure, ManagedObject, Progress, Status, WaitEvent,
};

/// An SDK actuator called natively (calls that may do I/O run on the blocking pool).
pub struct NativeActuator<A: sdk::Actuator> {
    name: String,
    raw: Arc<sdk::Raw<A>>,
}

impl<A: sdk::Actuator> NativeActuator<A> {
    /// Wraps `A::default()`.
    pub fn new() -> Self {
        let raw = sdk::Raw(A::default());
        Self {
            name: raw.describe().name,
            raw: Arc::new(raw),
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

impl<A: sdk::Actuator + Send + Sync + 'static> NativeActuator<A> {
    /// Runs `call` on the blocking pool; a panic in it is a trap of that call.
    async fn blocking<T: Send + 'static>(
        &self,
        function: &'static str,
        call: impl FnOnce(&sdk::Raw<A>) -> T + Send + 'static,
    ) -> CallResult<T> {
        let raw = Arc::clone(&self.raw);
        tokio::task::spawn_blocking(move || call(&raw))
            .await
            .map_err(|e| CallError::Trap {
                plugin: self.name.clone(),
                function,
                message: format!("the native plugin panicked: {e}"),
            })
    }
}

#[async_trait]
impl<A: sdk::Actuator + Send + Sync + 'static> Actuator for NativeActuator<A> {
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
        const F: &str = "get-by-id";
        let (o, owned_id) = (object(obj), id.to_owned());
        let answer = self
            .blocking(F, move |raw| raw.get_by_id(o, &owned_id))
            .await?;
        let b = self.boundary(F);
        Ok(match answer {
            Ok(Some(r)) => Ok(Some(b.resource_for_id(id, r.id, &r.state)?)),
            Ok(None) => Ok(None),
            Err(f) => Err(b.failure(failure(f))),
        })
    }

    async fn list_for_adoption(
        &self,
        obj: &ManagedObject,
    ) -> CallResult<Result<Option<Vec<ExternalResource>>, Failure>> {
        const F: &str = "list-for-adoption";
        let o = object(obj);
        let answer = self
            .blocking(F, move |raw| raw.list_for_adoption(o))
            .await?;
        let b = self.boundary(F);
        Ok(match answer {
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
        const F: &str = "list-for-import";
        let (o, filter) = (object(obj), filter.to_string());
        let answer = self
            .blocking(F, move |raw| raw.list_for_import(o, &filter))
            .await?;
        let b = self.boundary(F);
        Ok(match answer {
            Ok(list) => Ok(b.resources(list, parts)?),
            Err(f) => Err(b.failure(failure(f))),
        })
    }

    async fn create(&self, obj: &ManagedObject) -> CallResult<Result<ExternalResource, Status>> {
        const F: &str = "create";
        let o = object(obj);
        let answer = self.blocking(F, move |raw| raw.create(o)).await?;
        let b = self.boundary(F);
        Ok(match answer {
            Ok(r) => Ok(b.resource(r.id, &r.state)?),
            Err(s) => Err(b.status(status(s))?),
        })
    }

    async fn delete(&self, obj: &ManagedObject, res: &ExternalResource) -> CallResult<Status> {
        let (o, r) = (object(obj), resource(res));
        let s = self
            .blocking("delete", move |raw| raw.delete(o, &r))
            .await?;
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
        let (name, o, r) = (name.to_owned(), object(obj), resource(res));
        let s = self
            .blocking("run-reconciler", move |raw| {
                raw.run_reconciler(&name, o, &r)
            })
            .await?;
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
