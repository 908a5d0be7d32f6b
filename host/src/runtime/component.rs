//! [`ComponentActuator`]: the [`Actuator`] trait over a Wasm component. Every call gets a
//! fresh store and instance from the `InstancePre` (no state leaks between objects), a
//! wall-clock deadline, and the plugin's memory cap, output cap and egress policy. Every
//! value the guest returns goes through [`crate::actuator::contract`].
//!
//! # Deadline and scheduling
//!
//! The deadline is measured on the wall clock from the call's start (instantiation
//! included). Two mechanisms enforce it:
//!
//! - the epoch-deadline callback runs at every epoch tick ([`engine::EPOCH_TICK`]) while the
//!   guest computes: past the deadline it interrupts the guest (`Trap::Interrupt`, reported as
//!   [`CallError::Deadline`]); before it, the guest yields to the async runtime, so a spinning
//!   guest holds its worker thread for at most one tick at a time. Within the last tick
//!   before the deadline the callback runs at every loop back-edge and call instead (no
//!   yield), so the guest is stopped as the deadline passes, not at the tick after it — the
//!   guest runs slower for at most that one tick;
//! - a tokio timeout one tick after the deadline stops a guest that waits on I/O (it is not
//!   running Wasm, so no epoch check happens).
//!
//! A drifting ticker only delays the check by its drift; it does not add up over the call.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::Value;
use wasmtime::{Store, Trap, UpdateDeadline};

use super::bindings::{ActuatorPlugin, ActuatorPluginPre, wit};
use super::egress::EgressPolicy;
use super::engine;
use super::limits::Limits;
use super::state::PluginState;
use crate::actuator::contract::{Boundary, RawDescription};
use crate::actuator::{
    Actuator, Availability, CallError, CallResult, Dependency, DependencyDecl, Description,
    ExternalResource, Failure, ManagedObject, Progress, Status, WaitEvent,
};

/// A loaded plugin.
pub struct ComponentActuator {
    pub(crate) name: Arc<str>,
    pub(crate) pre: ActuatorPluginPre<PluginState>,
    pub(crate) limits: Limits,
    pub(crate) egress: Arc<EgressPolicy>,
    pub(crate) digest: String,
}

impl ComponentActuator {
    /// `sha256:<hex>` of the component.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// The plugin's limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    async fn instance(
        &self,
        function: &'static str,
        object: &str,
        deadline: Instant,
    ) -> CallResult<(Store<PluginState>, ActuatorPlugin)> {
        let state = PluginState::new(
            Arc::clone(&self.name),
            object.to_owned(),
            Arc::clone(&self.egress),
            self.limits.memory_bytes,
        );
        let mut store = Store::new(self.pre.engine(), state);
        store.limiter(|s| &mut s.memory);
        // The callback runs at the next tick, then at every tick.
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |_| {
            let now = Instant::now();
            Ok(if now >= deadline {
                UpdateDeadline::Interrupt
            } else if deadline - now <= engine::EPOCH_TICK {
                // The next tick may come up to a tick past the deadline: check at every
                // epoch check point (delta 0) until it passes.
                UpdateDeadline::Continue(0)
            } else {
                // tokio's own yield: the task goes to the back of the queue and the runtime
                // polls its I/O and timer drivers before resuming it.
                UpdateDeadline::YieldCustom(1, Box::pin(tokio::task::yield_now()))
            })
        });
        let plugin = self
            .pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| self.classify(function, &store, &e, "instantiate"))?;
        Ok((store, plugin))
    }

    fn deadline_error(&self, function: &'static str) -> CallError {
        CallError::Deadline {
            plugin: self.name.to_string(),
            function,
            timeout_ms: self.limits.call_timeout.as_millis(),
        }
    }

    fn classify(
        &self,
        function: &'static str,
        store: &Store<PluginState>,
        error: &wasmtime::Error,
        phase: &str,
    ) -> CallError {
        let plugin = self.name.to_string();
        if store.data().memory.hit {
            return CallError::MemoryCap {
                plugin,
                function,
                limit_bytes: self.limits.memory_bytes,
            };
        }
        match error.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => self.deadline_error(function),
            Some(trap) => CallError::Trap {
                plugin,
                function,
                message: trap.to_string(),
            },
            None if phase == "instantiate" => CallError::Instantiate {
                plugin,
                function,
                message: format!("{error:#}"),
            },
            None => CallError::Trap {
                plugin,
                function,
                message: error.root_cause().to_string(),
            },
        }
    }

    /// Runs `function` on a fresh instance under the call's deadline (module docs) and
    /// classifies any failure.
    async fn call<R>(
        &self,
        function: &'static str,
        object: &str,
        run: impl AsyncFnOnce(&ActuatorPlugin, &mut Store<PluginState>) -> wasmtime::Result<R>,
    ) -> CallResult<R> {
        let started = Instant::now();
        let deadline = started + self.limits.call_timeout;
        let call = async {
            let (mut store, plugin) = self.instance(function, object, deadline).await?;
            let outcome = run(&plugin, &mut store).await;
            outcome.map_err(|e| self.classify(function, &store, &e, "call"))
        };
        let result = tokio::time::timeout_at((deadline + engine::EPOCH_TICK).into(), call)
            .await
            .unwrap_or_else(|_| Err(self.deadline_error(function)));
        if let Err(e) = &result {
            tracing::debug!(plugin = %self.name, object, function, error = %e, "plugin call failed");
        }
        crate::ops::metrics::global().wasm_call(
            &self.name,
            function,
            result.is_ok(),
            started.elapsed(),
        );
        result
    }

    fn boundary(&self, function: &'static str) -> Boundary<'_> {
        Boundary::new(&self.name, function)
    }
}

fn parts(r: wit::ExternalResource) -> (String, String) {
    (r.id, r.state)
}

#[async_trait]
impl Actuator for ComponentActuator {
    fn name(&self) -> &str {
        &self.name
    }

    async fn describe(&self) -> CallResult<Description> {
        const F: &str = "describe";
        let d = self
            .call(F, "", async |p, s| {
                p.orchard_actuator_actuator().call_describe(s).await
            })
            .await?;
        self.boundary(F).description(RawDescription {
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
        let o = object(obj);
        let r = self
            .call(F, &obj.name, async |p, s| {
                p.orchard_actuator_actuator()
                    .call_get_by_id(s, &o, id)
                    .await
            })
            .await?;
        let b = self.boundary(F);
        Ok(match r {
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
        let r = self
            .call(F, &obj.name, async |p, s| {
                p.orchard_actuator_actuator()
                    .call_list_for_adoption(s, &o)
                    .await
            })
            .await?;
        let b = self.boundary(F);
        Ok(match r {
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
        let o = object(obj);
        let filter = filter.to_string();
        let r = self
            .call(F, &obj.name, async |p, s| {
                p.orchard_actuator_actuator()
                    .call_list_for_import(s, &o, &filter)
                    .await
            })
            .await?;
        let b = self.boundary(F);
        Ok(match r {
            Ok(list) => Ok(b.resources(list, parts)?),
            Err(f) => Err(b.failure(failure(f))),
        })
    }

    async fn create(&self, obj: &ManagedObject) -> CallResult<Result<ExternalResource, Status>> {
        const F: &str = "create";
        let o = object(obj);
        let r = self
            .call(F, &obj.name, async |p, s| {
                p.orchard_actuator_actuator().call_create(s, &o).await
            })
            .await?;
        let b = self.boundary(F);
        Ok(match r {
            Ok(r) => Ok(b.resource(r.id, &r.state)?),
            Err(s) => Err(b.status(status(s))?),
        })
    }

    async fn delete(&self, obj: &ManagedObject, res: &ExternalResource) -> CallResult<Status> {
        let (o, r) = (object(obj), resource(res));
        let s = self
            .call("delete", &obj.name, async |p, s| {
                p.orchard_actuator_actuator().call_delete(s, &o, &r).await
            })
            .await?;
        self.boundary("delete").status(status(s))
    }

    async fn reconcilers(
        &self,
        obj: &ManagedObject,
        res: &ExternalResource,
    ) -> CallResult<Result<Vec<String>, Failure>> {
        let (o, r) = (object(obj), resource(res));
        let out = self
            .call("reconcilers", &obj.name, async |p, s| {
                p.orchard_actuator_actuator()
                    .call_reconcilers(s, &o, &r)
                    .await
            })
            .await?;
        let b = self.boundary("reconcilers");
        Ok(match out {
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
        let (o, r) = (object(obj), resource(res));
        let s = self
            .call("run-reconciler", &obj.name, async |p, s| {
                p.orchard_actuator_actuator()
                    .call_run_reconciler(s, name, &o, &r)
                    .await
            })
            .await?;
        self.boundary("run-reconciler").status(status(s))
    }

    async fn available(
        &self,
        obj: &ManagedObject,
        res: &ExternalResource,
    ) -> CallResult<(Availability, Status)> {
        let (o, r) = (object(obj), resource(res));
        let (a, s) = self
            .call("available", &obj.name, async |p, s| {
                p.orchard_actuator_actuator()
                    .call_available(s, &o, &r)
                    .await
            })
            .await?;
        let a = match a {
            wit::Availability::Available => Availability::Available,
            wit::Availability::Unavailable => Availability::Unavailable,
            wit::Availability::Unknown => Availability::Unknown,
        };
        Ok((a, self.boundary("available").status(status(s))?))
    }

    async fn observed(&self, res: &ExternalResource) -> CallResult<Value> {
        const F: &str = "observed";
        let r = resource(res);
        let text = self
            .call(F, &res.id, async |p, s| {
                p.orchard_actuator_actuator().call_observed(s, &r).await
            })
            .await?;
        self.boundary(F).observed(&text)
    }
}

fn object(o: &ManagedObject) -> wit::ManagedObject {
    wit::ManagedObject {
        name: o.name.clone(),
        namespace: o.namespace.clone(),
        uid: o.uid.clone(),
        generation: o.generation,
        labels: o.labels.clone().into_iter().collect(),
        annotations: o.annotations.clone().into_iter().collect(),
        spec: o.spec.as_ref().map(Value::to_string),
        status_id: o.status_id.clone(),
        dependencies: o.dependencies.iter().map(dependency).collect(),
        credentials: o.credentials.clone().into_iter().collect(),
    }
}

fn dependency(d: &Dependency) -> wit::Dependency {
    wit::Dependency {
        name: d.name.clone(),
        kind: d.kind.clone(),
        object: d.object.clone(),
        id: d.id.clone(),
        observed: d.observed.as_ref().map(Value::to_string),
    }
}

fn resource(r: &ExternalResource) -> wit::ExternalResource {
    wit::ExternalResource {
        id: r.id.clone(),
        state: r.state.to_string(),
    }
}

fn failure(f: wit::Failure) -> Failure {
    match f {
        wit::Failure::Transient(m) => Failure::Transient(m),
        wit::Failure::InvalidConfiguration(m) => Failure::InvalidConfiguration(m),
        wit::Failure::Unrecoverable(m) => Failure::Unrecoverable(m),
    }
}

fn event(e: wit::WaitEvent) -> WaitEvent {
    match e {
        wit::WaitEvent::Creation => WaitEvent::Creation,
        wit::WaitEvent::Ready => WaitEvent::Ready,
        wit::WaitEvent::Deletion => WaitEvent::Deletion,
        wit::WaitEvent::Update => WaitEvent::Update,
    }
}

fn status(s: wit::Status) -> Status {
    Status {
        progress: s
            .progress
            .into_iter()
            .map(|p| match p {
                wit::Progress::WaitingOnExternal(w) => Progress::WaitingOnExternal {
                    event: event(w.event),
                    message: w.message,
                    poll_after: Duration::from_millis(u64::from(w.poll_after_ms)),
                },
                wit::Progress::WaitingOnObject(w) => Progress::WaitingOnObject {
                    kind: w.target.kind,
                    name: w.target.name,
                    event: event(w.event),
                },
                wit::Progress::NeedsRefresh(message) => Progress::NeedsRefresh { message },
            })
            .collect(),
        failure: s.failure.map(failure),
    }
}
