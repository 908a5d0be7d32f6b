//! [`ComponentActuator`]: the [`Actuator`] trait over a Wasm component. Every value the guest
//! returns goes through [`crate::actuator::contract`]; every call gets a wall-clock deadline,
//! and the plugin's memory cap, output cap and egress policy.
//!
//! # Instances
//!
//! - The loaded plugin gives every call a fresh store and instance from the `InstancePre`.
//! - [`Actuator::for_pass`] gives one reconcile pass of one object its own view, which serves
//!   all the pass's calls from one instance, made at its first call: the guest's start-up
//!   (a Python or JavaScript runtime) is paid once per pass, not once per call. State the
//!   guest keeps lives for that pass only; objects never share an instance.
//! - An instance whose call failed in any way (trap, deadline, memory cap, broken contract…)
//!   is dropped: the pass's next call starts a fresh one. The deadline, the output budget and
//!   the memory-cap flag are re-armed for every call.
//!
//! # Deadline and scheduling
//!
//! The deadline is measured on the wall clock from the call's start (instantiation
//! included, when the call makes the instance). Two mechanisms enforce it:
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

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::Value;
use tracing::Instrument;
use wasmtime::{Store, Trap, UpdateDeadline};

use super::bindings::optional::conversion;
use super::bindings::{ActuatorPlugin, ActuatorPluginIndices, ActuatorPluginPre, wit};
use super::egress::Egress;
use super::engine;
use super::limits::Limits;
use super::shortcuts::{self, ShortcutsExport};
use super::state::PluginState;
use crate::actuator::contract::{Boundary, RawApiVersion, RawConvertible, RawDescription};
use crate::actuator::{
    Actuator, Availability, CallError, CallResult, Convertible, Dependency, DependencyDecl,
    Description, ExternalResource, Failure, ManagedObject, PassesExpected, Progress, Reports,
    Shortcuts, Status, WaitEvent,
};

/// What loading a plugin made: shared by the plugin and every pass's view of it.
pub(crate) struct Loaded {
    pub(crate) name: Arc<str>,
    pub(crate) pre: ActuatorPluginPre<PluginState>,
    /// Where the `actuator` export is in every instance.
    pub(crate) indices: ActuatorPluginIndices,
    /// Where the optional `conversion` export is (`None`: the kind has one version).
    pub(crate) conversion: Option<conversion::GuestIndices>,
    /// Where the optional `shortcuts` export is (`None`: the generic flow).
    pub(crate) shortcuts: Option<ShortcutsExport>,
    pub(crate) limits: Limits,
    pub(crate) egress: Arc<Egress>,
    pub(crate) digest: String,
    /// The engine's epoch ticker: each instance keeps it ticking while it lives.
    pub(crate) ticker: Arc<engine::Ticker>,
    /// The plugin's instance counters (made, alive, waited).
    pub(crate) instances: crate::ops::metrics::InstanceCounters,
    /// The host's pool budget, and the units one instance of this plugin takes from it.
    pub(crate) admission: Arc<super::admission::Admission>,
    pub(crate) weight: u32,
}

/// A store with its instantiated plugin, kept between the calls of one pass.
struct Live {
    store: Store<PluginState>,
    plugin: ActuatorPlugin,
    optional: OptionalExports,
    /// The epoch advances while the store is alive (dropped after it).
    _ticking: engine::Ticking,
    /// Counted in `orchard_wasm_instances_alive` while it lives.
    _alive: crate::ops::metrics::InstanceAlive,
    /// Its room in the pool. Last: fields drop in order, so the store has given its slots back
    /// to the pool before the units are free for another instance.
    _admitted: super::admission::Admitted,
}

/// The optional exports of one instance, those the plugin has.
struct OptionalExports {
    conversion: Option<conversion::Guest>,
    shortcuts: Option<wasmtime::component::Func>,
}

/// A loaded plugin, or one pass's view of it ([`Actuator::for_pass`]).
pub struct ComponentActuator {
    loaded: Arc<Loaded>,
    /// `Some` for a pass's view: the instance its calls share (`None` until the first call,
    /// and after a failed one).
    pass: Option<Mutex<Option<Live>>>,
    /// What the pass's successful calls reported.
    reports: Mutex<Reports>,
}

impl ComponentActuator {
    pub(crate) fn new(loaded: Loaded) -> Self {
        Self {
            loaded: Arc::new(loaded),
            pass: None,
            reports: Mutex::default(),
        }
    }

    /// A view whose calls share one instance, made at its first call ([`Actuator::for_pass`]).
    fn view(&self) -> Self {
        Self {
            loaded: Arc::clone(&self.loaded),
            pass: Some(Mutex::new(None)),
            reports: Mutex::default(),
        }
    }

    /// `sha256:<hex>` of the component.
    pub fn digest(&self) -> &str {
        &self.loaded.digest
    }

    /// The plugin's limits.
    pub fn limits(&self) -> &Limits {
        &self.loaded.limits
    }

    async fn instantiate(
        &self,
        function: &'static str,
        object: &str,
        deadline: Instant,
    ) -> CallResult<Live> {
        let l = &self.loaded;
        // Room in the pool first: past it instantiation would fail. Declared before the store,
        // it is dropped after it on every path.
        let admitted = l
            .admission
            .admit(l.weight, deadline, || l.instances.waited())
            .await
            .map_err(|full| CallError::PoolFull {
                plugin: l.name.to_string(),
                function,
                waited_ms: full.waited.as_millis(),
                pool: l.admission.instances(),
            })?;
        let state = PluginState::new(
            Arc::clone(&l.name),
            object.to_owned(),
            Arc::clone(&l.egress),
            &l.limits,
        );
        let ticking = l.ticker.ticking();
        let mut store = Store::new(l.pre.engine(), state);
        store.limiter(|s| &mut s.memory);
        // Instantiation runs guest code (start functions): it is under the deadline too.
        store.data_mut().arm(deadline);
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|cx| {
            let deadline = cx.data().deadline;
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
        let alive = l.instances.made();
        let instance = l
            .pre
            .instance_pre()
            .instantiate_async(&mut store)
            .await
            .map_err(|e| self.classify(function, &store, &e, "instantiate"))?;
        let plugin = l
            .indices
            .load(&mut store, &instance)
            .map_err(|e| self.classify(function, &store, &e, "instantiate"))?;
        let conversion = l
            .conversion
            .as_ref()
            .map(|c| c.load(&mut store, &instance))
            .transpose()
            .map_err(|e| self.classify(function, &store, &e, "instantiate"))?;
        let shortcuts = l
            .shortcuts
            .as_ref()
            .map(|c| c.load(&mut store, &instance))
            .transpose()
            .map_err(|e| self.classify(function, &store, &e, "instantiate"))?;
        Ok(Live {
            store,
            plugin,
            optional: OptionalExports {
                conversion,
                shortcuts,
            },
            _ticking: ticking,
            _alive: alive,
            _admitted: admitted,
        })
    }

    fn deadline_error(&self, function: &'static str) -> CallError {
        CallError::Deadline {
            plugin: self.loaded.name.to_string(),
            function,
            timeout_ms: self.loaded.limits.call_timeout.as_millis(),
        }
    }

    fn classify(
        &self,
        function: &'static str,
        store: &Store<PluginState>,
        error: &wasmtime::Error,
        phase: &str,
    ) -> CallError {
        let plugin = self.loaded.name.to_string();
        if store.data().memory.hit {
            return CallError::MemoryCap {
                plugin,
                function,
                limit_bytes: self.loaded.limits.memory_bytes,
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

    /// The pass's instance, if it has a healthy one; taken out while a call uses it, so a
    /// call that does not finish (deadline, dropped future) leaves none behind.
    fn take_live(&self) -> Option<Live> {
        let slot = self.pass.as_ref()?;
        slot.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    /// Keeps `live` for the pass's next call (the loaded plugin keeps nothing).
    fn keep_live(&self, live: Live) {
        if let Some(slot) = &self.pass {
            *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(live);
        }
    }

    /// Runs `function` under the call's deadline (module docs) on the pass's instance or a
    /// fresh one, and classifies any failure. `check` validates the answer: an instance whose
    /// answer broke the contract is not kept either.
    async fn call<R, T>(
        &self,
        function: &'static str,
        object: &str,
        run: impl AsyncFnOnce(
            &ActuatorPlugin,
            &OptionalExports,
            &mut Store<PluginState>,
        ) -> wasmtime::Result<R>,
        check: impl FnOnce(R) -> CallResult<T>,
    ) -> CallResult<T> {
        let started = Instant::now();
        let deadline = started + self.loaded.limits.call_timeout;
        let call = async {
            // The epoch callback runs at the next tick, then at every tick.
            let mut live = match self.take_live() {
                Some(mut live) => {
                    live.store.data_mut().arm(deadline);
                    live.store.set_epoch_deadline(1);
                    live
                }
                None => self.instantiate(function, object, deadline).await?,
            };
            if PURE.contains(&function) {
                live.store.data_mut().seal_egress();
            }
            let outcome = run(&live.plugin, &live.optional, &mut live.store).await;
            let answer = outcome
                .map_err(|e| self.classify(function, &live.store, &e, "call"))
                .and_then(check)?;
            // Only a call that answered well reports; the plugin without a pass keeps none
            // (`orchard invoke`, conformance: each call stands alone).
            let reported = std::mem::take(&mut live.store.data_mut().reports);
            if self.pass.is_some() && !reported.is_empty() {
                self.reports
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .absorb(reported);
            }
            self.keep_live(live);
            Ok(answer)
        };
        let span = tracing::info_span!(
            crate::ops::traces::CALL,
            otel.name = function,
            plugin = %self.loaded.name,
            plugin.digest = %self.loaded.digest,
            function,
            object,
            deadline_ms = duration_ms(self.loaded.limits.call_timeout),
            took_ms = tracing::field::Empty,
            outcome = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
            otel.status_description = tracing::field::Empty,
        );
        let result = tokio::time::timeout_at(
            (deadline + engine::EPOCH_TICK).into(),
            call.instrument(span.clone()),
        )
        .await
        .unwrap_or_else(|_| Err(self.deadline_error(function)));
        if let Err(e) = &result {
            tracing::debug!(plugin = %self.loaded.name, object, function, error = %e, "plugin call failed");
            span.record("otel.status_code", "ERROR");
            span.record(
                "otel.status_description",
                crate::ops::traces::short(&e.to_string()),
            );
        }
        let took = started.elapsed();
        let outcome = result.as_ref().map_or_else(CallError::kind, |_| "ok");
        span.record("took_ms", duration_ms(took));
        span.record("outcome", outcome);
        crate::ops::metrics::global().wasm_call(&self.loaded.name, function, outcome, took);
        crate::actuator::calls::record(function, took, outcome);
        result
    }

    fn boundary(&self, function: &'static str) -> Boundary<'_> {
        Boundary::new(&self.loaded.name, function)
    }
}

/// The functions that MUST NOT do I/O: no outbound request leaves during them.
const PURE: [&str; 3] = ["versions", "convert", "shortcuts"];

/// Milliseconds, for span attributes.
fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn parts(r: wit::ExternalResource) -> (String, String) {
    (r.id, r.state)
}

#[async_trait]
impl Actuator for ComponentActuator {
    fn name(&self) -> &str {
        &self.loaded.name
    }

    fn digest(&self) -> Option<&str> {
        Some(&self.loaded.digest)
    }

    fn for_pass(&self) -> Option<Box<dyn Actuator>> {
        Some(Box::new(self.view()))
    }

    /// Each pass holds one instance: `at_once` instances of this plugin's weight, counted
    /// against the host's instance pool.
    fn expect_passes(&self, at_once: u16) -> PassesExpected {
        let l = &self.loaded;
        PassesExpected::holding(l.admission.expect(&l.name, u32::from(at_once), l.weight))
    }

    fn take_reports(&self) -> Reports {
        std::mem::take(&mut *self.reports.lock().unwrap_or_else(PoisonError::into_inner))
    }

    async fn describe(&self) -> CallResult<Description> {
        const F: &str = "describe";
        const V: &str = "versions";
        const S: &str = "shortcuts";
        // The three pure calls share one instance (a pass's view), not one instance each.
        let one = self.view();
        let b = self.boundary(F);
        let description = one
            .call(
                F,
                "",
                async |p, _, s| p.orchard_actuator_actuator().call_describe(s).await,
                |d| {
                    b.description(RawDescription {
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
                },
            )
            .await?;
        let versions = if self.loaded.conversion.is_none() {
            Vec::new()
        } else {
            let b = self.boundary(V);
            one.call(
                V,
                "",
                async |_, o, s| match &o.conversion {
                    Some(c) => c.call_versions(s).await,
                    // Loaded with the export, so every instance has it.
                    None => Err(wasmtime::format_err!(
                        "the instance has no conversion export"
                    )),
                },
                |versions| {
                    b.versions(
                        &description,
                        versions
                            .into_iter()
                            .map(|v| RawApiVersion {
                                name: v.name,
                                resource_schema: v.resource_schema,
                                filter_schema: v.filter_schema,
                                observed_schema: v.observed_schema,
                                storage: v.storage,
                            })
                            .collect(),
                    )
                },
            )
            .await?
        };
        let shortcuts = if self.loaded.shortcuts.is_none() {
            Shortcuts::default()
        } else {
            one.call(
                S,
                "",
                async |_, o, s| match &o.shortcuts {
                    Some(func) => shortcuts::call(func, s).await,
                    // Loaded with the export, so every instance has it.
                    None => Err(wasmtime::format_err!(
                        "the instance has no shortcuts export"
                    )),
                },
                |names| {
                    let (declared, unknown) = shortcuts::from_names(&names);
                    if !unknown.is_empty() {
                        tracing::warn!(
                            plugin = %self.loaded.name,
                            unknown = %unknown.join(", "),
                            "the plugin declares shortcuts this host does not know; it gets the generic flow for them"
                        );
                    }
                    Ok(declared)
                },
            )
            .await?
        };
        Ok(Description {
            versions,
            shortcuts,
            ..description
        })
    }

    async fn convert(
        &self,
        obj: &Convertible,
        from: &str,
        to: &str,
    ) -> CallResult<Result<Convertible, Failure>> {
        const F: &str = "convert";
        if self.loaded.conversion.is_none() {
            return Ok(Err(Failure::Unrecoverable(format!(
                "plugin {} serves one API version and converts nothing (asked {from} to {to})",
                self.loaded.name
            ))));
        }
        let b = self.boundary(F);
        let text = |v: &Option<Value>| v.as_ref().map(Value::to_string);
        let input = conversion::Convertible {
            resource: text(&obj.resource),
            filter: text(&obj.filter),
            observed: text(&obj.observed),
            annotations: obj.annotations.clone(),
        };
        self.call(
            F,
            "",
            async |_, o, s| match &o.conversion {
                Some(c) => c.call_convert(s, &input, from, to).await,
                None => Err(wasmtime::format_err!(
                    "the instance has no conversion export"
                )),
            },
            |answer| match answer {
                Ok(c) => b
                    .converted(RawConvertible {
                        resource: c.resource,
                        filter: c.filter,
                        observed: c.observed,
                        annotations: c.annotations,
                    })
                    .map(Ok),
                Err(f) => Ok(Err(failure(f))),
            },
        )
        .await
    }

    async fn get_by_id(
        &self,
        obj: &ManagedObject,
        id: &str,
    ) -> CallResult<Result<Option<ExternalResource>, Failure>> {
        const F: &str = "get-by-id";
        let (o, b) = (object(obj), self.boundary(F));
        self.call(
            F,
            &obj.name,
            async |p, _, s| {
                p.orchard_actuator_actuator()
                    .call_get_by_id(s, &o, id)
                    .await
            },
            |r| {
                Ok(match r {
                    Ok(Some(r)) => Ok(Some(b.resource_for_id(id, r.id, &r.state)?)),
                    Ok(None) => Ok(None),
                    Err(f) => Err(b.failure(failure(f))),
                })
            },
        )
        .await
    }

    async fn list_for_adoption(
        &self,
        obj: &ManagedObject,
    ) -> CallResult<Result<Option<Vec<ExternalResource>>, Failure>> {
        const F: &str = "list-for-adoption";
        let (o, b) = (object(obj), self.boundary(F));
        self.call(
            F,
            &obj.name,
            async |p, _, s| {
                p.orchard_actuator_actuator()
                    .call_list_for_adoption(s, &o)
                    .await
            },
            |r| {
                Ok(match r {
                    Ok(Some(list)) => Ok(Some(b.resources(list, parts)?)),
                    Ok(None) => Ok(None),
                    Err(f) => Err(b.failure(failure(f))),
                })
            },
        )
        .await
    }

    async fn list_for_import(
        &self,
        obj: &ManagedObject,
        filter: &Value,
    ) -> CallResult<Result<Vec<ExternalResource>, Failure>> {
        const F: &str = "list-for-import";
        let (o, b) = (object(obj), self.boundary(F));
        let filter = filter.to_string();
        self.call(
            F,
            &obj.name,
            async |p, _, s| {
                p.orchard_actuator_actuator()
                    .call_list_for_import(s, &o, &filter)
                    .await
            },
            |r| {
                Ok(match r {
                    Ok(list) => Ok(b.resources(list, parts)?),
                    Err(f) => Err(b.failure(failure(f))),
                })
            },
        )
        .await
    }

    async fn create(&self, obj: &ManagedObject) -> CallResult<Result<ExternalResource, Status>> {
        const F: &str = "create";
        let (o, b) = (object(obj), self.boundary(F));
        self.call(
            F,
            &obj.name,
            async |p, _, s| p.orchard_actuator_actuator().call_create(s, &o).await,
            |r| {
                Ok(match r {
                    Ok(r) => Ok(b.resource(r.id, &r.state)?),
                    Err(s) => Err(b.status(status(s))?),
                })
            },
        )
        .await
    }

    async fn delete(&self, obj: &ManagedObject, res: &ExternalResource) -> CallResult<Status> {
        const F: &str = "delete";
        let (o, r, b) = (object(obj), resource(res), self.boundary(F));
        self.call(
            F,
            &obj.name,
            async |p, _, s| p.orchard_actuator_actuator().call_delete(s, &o, &r).await,
            |s| b.status(status(s)),
        )
        .await
    }

    async fn reconcilers(
        &self,
        obj: &ManagedObject,
        res: &ExternalResource,
    ) -> CallResult<Result<Vec<String>, Failure>> {
        const F: &str = "reconcilers";
        let (o, r, b) = (object(obj), resource(res), self.boundary(F));
        self.call(
            F,
            &obj.name,
            async |p, _, s| {
                p.orchard_actuator_actuator()
                    .call_reconcilers(s, &o, &r)
                    .await
            },
            |out| {
                Ok(match out {
                    Ok(names) => Ok(b.reconcilers(names)?),
                    Err(f) => Err(b.failure(failure(f))),
                })
            },
        )
        .await
    }

    async fn run_reconciler(
        &self,
        name: &str,
        obj: &ManagedObject,
        res: &ExternalResource,
    ) -> CallResult<Status> {
        const F: &str = "run-reconciler";
        let (o, r, b) = (object(obj), resource(res), self.boundary(F));
        self.call(
            F,
            &obj.name,
            async |p, _, s| {
                p.orchard_actuator_actuator()
                    .call_run_reconciler(s, name, &o, &r)
                    .await
            },
            |s| b.status(status(s)),
        )
        .await
    }

    async fn available(
        &self,
        obj: &ManagedObject,
        res: &ExternalResource,
    ) -> CallResult<(Availability, Status)> {
        const F: &str = "available";
        let (o, r, b) = (object(obj), resource(res), self.boundary(F));
        self.call(
            F,
            &obj.name,
            async |p, _, s| {
                p.orchard_actuator_actuator()
                    .call_available(s, &o, &r)
                    .await
            },
            |(a, s)| {
                let a = match a {
                    wit::Availability::Available => Availability::Available,
                    wit::Availability::Unavailable => Availability::Unavailable,
                    wit::Availability::Unknown => Availability::Unknown,
                };
                Ok((a, b.status(status(s))?))
            },
        )
        .await
    }

    async fn observed(&self, res: &ExternalResource) -> CallResult<Value> {
        const F: &str = "observed";
        let (r, b) = (resource(res), self.boundary(F));
        self.call(
            F,
            &res.id,
            async |p, _, s| p.orchard_actuator_actuator().call_observed(s, &r).await,
            |text| b.observed(&text),
        )
        .await
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
