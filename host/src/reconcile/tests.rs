//! Table tests of the flows, below the seam: an in-memory external system behind the
//! [`Actuator`] trait, and a recording fake of [`ObjectOps`] that applies every write to its
//! copy of the object (a one-object apiserver). Each case asserts the exact writes, the
//! actuator calls, the conditions and what comes next. The e2e suites prove the same flows
//! against the real apiserver and external systems.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use kube::ResourceExt;
use kube::api::DynamicObject;
use serde_json::{Value, json};

use super::annotations::CREATE_PENDING;
use super::flow::status::Pass;
use super::flow::{Next, reconcile_object};
use super::machinery::claims::Claims;
use super::machinery::writes::OwnWrites;
use super::ops::{Note, ObjectOps, OwnMetadata};
use super::{Context, Error, Settings, StoredMeta};
use crate::actuator::{
    Actuator, Availability, CallError, CallResult, Description, ExternalResource, Failure,
    ManagedObject, Progress, Shortcuts, Status, WaitEvent,
};

const FINALIZER: &str = "orchard.dev/fake";

// ---------------------------------------------------------------------------------------
// The in-memory external system
// ---------------------------------------------------------------------------------------

/// How the fake plugin's `create` behaves.
#[derive(Debug, Clone, Default, PartialEq)]
enum CreateMode {
    #[default]
    Works,
    /// Returns a failure (created nothing).
    Fails(Failure),
    /// Produces no answer (a trap): whether it created is unknown.
    Traps,
    /// Creates, but answers with this id (e.g. an existing resource's).
    AnswersId(String),
    /// Answers a wait (created nothing, no failure).
    Waits,
}

/// A plugin over an in-memory store of resources `id → state`; ids are `ext-<name>`, and
/// adoption matches by `state.name == spec.resource.name`.
#[derive(Default)]
struct System {
    resources: Mutex<BTreeMap<String, Value>>,
    calls: Mutex<Vec<String>>,
    create: Mutex<CreateMode>,
    /// `list-for-adoption` answers `none` (the plugin cannot adopt).
    cannot_adopt: bool,
    /// `get-by-id` answers with another id.
    wrong_id: Mutex<bool>,
    /// `delete` leaves the resource in place for this many calls of get-by-id.
    slow_delete: Mutex<u32>,
    /// function → how it fails: with this failure as its answer, or (`None`) with no answer
    /// (a trap).
    failing: Mutex<HashMap<&'static str, Option<Failure>>>,
    /// `reconcilers` names these.
    reconcilers: Mutex<Vec<String>>,
    /// `create` reports these connection details.
    create_details: Vec<(&'static str, &'static str)>,
    /// `run-reconciler` reports these drifts: (field, observed, desired, sensitive).
    drifts: Vec<(&'static str, &'static str, &'static str, bool)>,
    /// What the calls reported since the last take.
    reported: Mutex<crate::actuator::Reports>,
    /// The shortcuts the plugin declares; with `create_refuses_duplicates`, `create` refuses
    /// a name that exists (changing nothing).
    shortcuts: Shortcuts,
    /// The resources `delete` was called with, in order.
    deleted: Mutex<Vec<ExternalResource>>,
}

impl System {
    /// A system whose `create` behaves as `mode` says.
    fn creating(mode: CreateMode) -> Self {
        let system = Self::default();
        *system.create.lock().unwrap() = mode;
        system
    }
    fn calls(&self) -> Vec<String> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }
    /// Logs a call, and records it for the pass's journal as the contract asks of every
    /// actuator ([`crate::actuator::calls`]; the fake answers at once).
    fn call(&self, name: &'static str) {
        self.calls.lock().unwrap().push(name.to_owned());
        crate::actuator::calls::record(name, Duration::ZERO, "ok");
    }
    /// How `function` is set to fail, if it is: `Err(Ok(failure))` or `Err(Err(trap))`.
    fn fails(&self, function: &'static str) -> Result<(), CallResult<Failure>> {
        match self.failing.lock().unwrap().get(function) {
            None => Ok(()),
            Some(Some(f)) => Err(Ok(f.clone())),
            Some(None) => Err(Err(CallError::Trap {
                plugin: "fake".into(),
                function,
                message: "unreachable".into(),
            })),
        }
    }
    fn put(&self, id: &str, name: &str) {
        self.resources
            .lock()
            .unwrap()
            .insert(id.to_owned(), json!({"name": name}));
    }
    fn has(&self, id: &str) -> bool {
        self.resources.lock().unwrap().contains_key(id)
    }
    fn res(id: &str, state: &Value) -> ExternalResource {
        ExternalResource {
            id: id.to_owned(),
            state: state.clone(),
        }
    }
    fn spec_name(obj: &ManagedObject) -> String {
        obj.spec
            .as_ref()
            .and_then(|s| s["name"].as_str())
            .unwrap_or_default()
            .to_owned()
    }
}

#[async_trait]
impl Actuator for System {
    fn name(&self) -> &'static str {
        "fake"
    }
    fn take_reports(&self) -> crate::actuator::Reports {
        std::mem::take(&mut *self.reported.lock().unwrap())
    }
    async fn describe(&self) -> CallResult<Description> {
        Ok(description())
    }
    async fn get_by_id(
        &self,
        _: &ManagedObject,
        id: &str,
    ) -> CallResult<Result<Option<ExternalResource>, Failure>> {
        self.call("get-by-id");
        if let Err(e) = self.fails("get-by-id") {
            return e.map(Err);
        }
        let mut slow = self.slow_delete.lock().unwrap();
        let found = self.resources.lock().unwrap().get(id).cloned();
        if *self.wrong_id.lock().unwrap() {
            // What the boundary makes of an answer carrying another id.
            return Err(CallError::Contract {
                plugin: "fake".into(),
                function: "get-by-id",
                rule: crate::actuator::contract::Rule::IdMismatch,
                detail: format!("asked for {id}, answered \"someone-else\""),
            });
        }
        if found.is_none() && *slow > 0 {
            *slow -= 1;
            return Ok(Ok(Some(Self::res(id, &json!({})))));
        }
        Ok(Ok(found.map(|s| Self::res(id, &s))))
    }
    async fn list_for_adoption(
        &self,
        obj: &ManagedObject,
    ) -> CallResult<Result<Option<Vec<ExternalResource>>, Failure>> {
        self.call("list-for-adoption");
        if let Err(e) = self.fails("list-for-adoption") {
            return e.map(Err);
        }
        if self.cannot_adopt {
            return Ok(Ok(None));
        }
        let name = Self::spec_name(obj);
        Ok(Ok(Some(
            self.resources
                .lock()
                .unwrap()
                .iter()
                .filter(|(_, s)| s["name"] == name.as_str())
                .map(|(id, s)| Self::res(id, s))
                .collect(),
        )))
    }
    async fn list_for_import(
        &self,
        _: &ManagedObject,
        filter: &Value,
    ) -> CallResult<Result<Vec<ExternalResource>, Failure>> {
        self.call("list-for-import");
        if let Err(e) = self.fails("list-for-import") {
            return e.map(Err);
        }
        Ok(Ok(self
            .resources
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, s)| s["name"] == filter["name"])
            .map(|(id, s)| Self::res(id, s))
            .collect()))
    }
    async fn create(&self, obj: &ManagedObject) -> CallResult<Result<ExternalResource, Status>> {
        self.call("create");
        let name = Self::spec_name(obj);
        let id = format!("ext-{name}");
        if self.shortcuts.create_refuses_duplicates
            && self
                .resources
                .lock()
                .unwrap()
                .values()
                .any(|s| s["name"] == name.as_str())
        {
            return Ok(Err(
                Failure::InvalidConfiguration(format!("{name} exists")).into()
            ));
        }
        match self.create.lock().unwrap().clone() {
            CreateMode::Works => {
                self.put(&id, &name);
                let mut reported = self.reported.lock().unwrap();
                for (k, v) in &self.create_details {
                    reported.connection_detail((*k).to_owned(), v.as_bytes().to_vec());
                }
                drop(reported);
                Ok(Ok(Self::res(&id, &json!({"name": name}))))
            }
            CreateMode::Fails(f) => Ok(Err(f.into())),
            CreateMode::Traps => Err(CallError::Trap {
                plugin: "fake".into(),
                function: "create",
                message: "unreachable".into(),
            }),
            CreateMode::AnswersId(other) => Ok(Ok(Self::res(&other, &json!({"name": name})))),
            CreateMode::Waits => Ok(Err(Status {
                progress: vec![Progress::WaitingOnExternal {
                    event: WaitEvent::Creation,
                    message: "quota exhausted".into(),
                    poll_after: Duration::from_secs(5),
                }],
                failure: None,
            })),
        }
    }
    async fn delete(&self, _: &ManagedObject, res: &ExternalResource) -> CallResult<Status> {
        self.call("delete");
        self.deleted.lock().unwrap().push(res.clone());
        if let Err(e) = self.fails("delete") {
            return e.map(Status::from);
        }
        self.resources.lock().unwrap().remove(&res.id);
        Ok(Status::default())
    }
    async fn reconcilers(
        &self,
        _: &ManagedObject,
        _: &ExternalResource,
    ) -> CallResult<Result<Vec<String>, Failure>> {
        self.call("reconcilers");
        if let Err(e) = self.fails("reconcilers") {
            return e.map(Err);
        }
        Ok(Ok(self.reconcilers.lock().unwrap().clone()))
    }
    async fn run_reconciler(
        &self,
        _: &str,
        _: &ManagedObject,
        _: &ExternalResource,
    ) -> CallResult<Status> {
        self.call("run-reconciler");
        if let Err(e) = self.fails("run-reconciler") {
            return e.map(Status::from);
        }
        let mut reported = self.reported.lock().unwrap();
        for (field, observed, desired, sensitive) in &self.drifts {
            reported.drift(
                (*field).to_owned(),
                Some((*observed).to_owned()),
                Some((*desired).to_owned()),
                *sensitive,
            );
        }
        Ok(Status::default())
    }
    async fn available(
        &self,
        _: &ManagedObject,
        _: &ExternalResource,
    ) -> CallResult<(Availability, Status)> {
        self.call("available");
        if let Err(e) = self.fails("available") {
            return e.map(|f| (Availability::Unknown, f.into()));
        }
        Ok((Availability::Available, Status::default()))
    }
    async fn observed(&self, res: &ExternalResource) -> CallResult<Value> {
        self.call("observed");
        if let Err(e) = self.fails("observed") {
            return e.map(|f| json!({"unexpected": f.to_string()}));
        }
        Ok(res.state.clone())
    }
}

fn description() -> Description {
    Description {
        name: "fake".into(),
        group: "fake.orchard.dev".into(),
        version: "v1".into(),
        kind: "Thing".into(),
        plural: "things".into(),
        resource_schema: json!({"type": "object"}),
        filter_schema: None,
        observed_schema: json!({"type": "object"}),
        dependencies: vec![],
        needs_credentials: false,
        versions: Vec::new(),
        shortcuts: Shortcuts::default(),
    }
}

// ---------------------------------------------------------------------------------------
// The recording fake of the seam
// ---------------------------------------------------------------------------------------

/// One write the flow made, in order.
#[derive(Debug, Clone, PartialEq)]
enum Write {
    Metadata {
        finalizer: bool,
        marker: bool,
    },
    StatusId(Option<String>),
    Status(Value),
    Event(String),
    /// The guard finalizer put on a dependency of this kind.
    Guard(String),
    /// The connection Secret written, with the keys it holds after the write.
    Secret(String, Vec<String>),
}

/// A Secret of the fake: owned by the object, and its data.
type FakeSecret = (bool, BTreeMap<String, Vec<u8>>);

/// A one-object apiserver: every write is recorded and applied to its copy.
struct Cluster {
    object: Mutex<DynamicObject>,
    writes: Mutex<Vec<Write>>,
    cached: Mutex<HashMap<(String, String), DynamicObject>>,
    /// Refuse this many status applies with 413.
    refuse_status: Mutex<u32>,
    /// Every Event published, whole.
    notes: Mutex<Vec<Note>>,
    /// Secrets of the namespace: name → (owned by the object, data).
    secrets: Mutex<BTreeMap<String, FakeSecret>>,
    /// Fail this many connection-Secret writes (as a 500 would).
    fail_secret: Mutex<u32>,
}

impl Cluster {
    fn new(object: DynamicObject) -> Self {
        Self {
            object: Mutex::new(object),
            writes: Mutex::default(),
            cached: Mutex::default(),
            refuse_status: Mutex::new(0),
            notes: Mutex::default(),
            secrets: Mutex::default(),
            fail_secret: Mutex::new(0),
        }
    }
    fn current(&self) -> DynamicObject {
        self.object.lock().unwrap().clone()
    }
    fn writes(&self) -> Vec<Write> {
        std::mem::take(&mut *self.writes.lock().unwrap())
    }
    fn record(&self, w: Write) {
        self.writes.lock().unwrap().push(w);
    }
}

#[async_trait]
impl ObjectOps for Cluster {
    async fn apply_metadata(&self, _: &DynamicObject, meta: &OwnMetadata) -> Result<(), Error> {
        self.record(Write::Metadata {
            finalizer: meta.finalizer,
            marker: meta.create_pending.is_some(),
        });
        let mut o = self.object.lock().unwrap();
        let mut finalizers: Vec<String> = o
            .finalizers()
            .iter()
            .filter(|f| *f != FINALIZER)
            .cloned()
            .collect();
        if meta.finalizer {
            finalizers.push(FINALIZER.to_owned());
        }
        o.metadata.finalizers = Some(finalizers);
        let annotations = o.metadata.annotations.get_or_insert_default();
        match &meta.create_pending {
            Some(since) => annotations.insert(CREATE_PENDING.to_owned(), since.clone()),
            None => annotations.remove(CREATE_PENDING),
        };
        Ok(())
    }
    async fn patch_status_id(&self, _: &DynamicObject, id: Option<&str>) -> Result<(), Error> {
        self.record(Write::StatusId(id.map(str::to_owned)));
        let mut o = self.object.lock().unwrap();
        if !o.data["status"].is_object() {
            o.data["status"] = json!({});
        }
        o.data["status"]["id"] = json!(id);
        Ok(())
    }
    async fn apply_status(&self, _: &DynamicObject, status: &Value) -> Result<(), Error> {
        {
            let mut refuse = self.refuse_status.lock().unwrap();
            if *refuse > 0 {
                *refuse -= 1;
                return Err(Error::Kube {
                    action: "apply status to",
                    kind: "Thing".into(),
                    name: "a".into(),
                    source: kube::Error::Api(Box::new(kube::core::Status {
                        code: 413,
                        message: "Request entity too large".into(),
                        ..Default::default()
                    })),
                });
            }
        }
        self.record(Write::Status(status.clone()));
        self.object.lock().unwrap().data["status"] = status.clone();
        Ok(())
    }
    async fn publish(&self, _: &DynamicObject, note: Note) {
        self.record(Write::Event(note.reason.clone()));
        self.notes.lock().unwrap().push(note);
    }
    fn cached(&self, kind: &str, _: &str, name: &str) -> Option<Arc<DynamicObject>> {
        self.cached
            .lock()
            .unwrap()
            .get(&(kind.to_owned(), name.to_owned()))
            .cloned()
            .map(Arc::new)
    }
    async fn guard(&self, kind: &str, _: &DynamicObject) -> Result<(), Error> {
        self.record(Write::Guard(kind.to_owned()));
        Ok(())
    }
    async fn write_connection_secret(
        &self,
        _: &DynamicObject,
        name: &str,
        details: &BTreeMap<String, Vec<u8>>,
    ) -> Result<super::ops::SecretWrite, Error> {
        {
            let mut fail = self.fail_secret.lock().unwrap();
            if *fail > 0 {
                *fail -= 1;
                return Err(Error::Kube {
                    action: "apply",
                    kind: "Secret".into(),
                    name: name.into(),
                    source: kube::Error::Api(Box::new(kube::core::Status {
                        code: 500,
                        message: "etcd timeout".into(),
                        ..Default::default()
                    })),
                });
            }
        }
        let mut secrets = self.secrets.lock().unwrap();
        let (owned, data) = secrets
            .entry(name.to_owned())
            .or_insert_with(|| (true, BTreeMap::new()));
        if !*owned {
            return Ok(super::ops::SecretWrite::NotOurs);
        }
        data.extend(details.clone());
        let keys = data.keys().cloned().collect();
        self.record(Write::Secret(name.to_owned(), keys));
        Ok(super::ops::SecretWrite::Written)
    }
}

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

#[allow(clippy::needless_pass_by_value, reason = "callers pass json! literals")]
fn object(name: &str, created: i64, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "fake.orchard.dev/v1", "kind": "Thing",
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"), "generation": 1,
                     "creationTimestamp": jiff::Timestamp::from_second(created).unwrap().to_string()},
        "spec": spec,
    }))
    .unwrap()
}

fn managed(name: &str) -> DynamicObject {
    object(name, 100, json!({"resource": {"name": name}}))
}

struct World {
    system: Arc<System>,
    cluster: Arc<Cluster>,
    ctx: Arc<Context>,
}

impl World {
    fn new(obj: DynamicObject) -> Self {
        Self::with(System::default(), obj)
    }
    fn with(system: System, obj: DynamicObject) -> Self {
        Self::sharing(system, obj, Arc::new(Claims::default()))
    }
    fn sharing(system: System, obj: DynamicObject, claims: Arc<Claims>) -> Self {
        let system = Arc::new(system);
        let cluster = Arc::new(Cluster::new(obj));
        let ctx = Arc::new(context(&system, &cluster, Settings::default(), claims));
        Self {
            system,
            cluster,
            ctx,
        }
    }
    /// Another context over this world's plugin and cluster, with `settings`.
    fn context(&self, settings: Settings) -> Arc<Context> {
        Arc::new(context(
            &self.system,
            &self.cluster,
            settings,
            Arc::new(Claims::default()),
        ))
    }
    /// One pass over the object as the cluster has it now; the watch then shows the result.
    async fn pass(&self) -> (Pass, Next) {
        let obj = self.cluster.current();
        let out = reconcile_object(&obj, &self.ctx).await.unwrap();
        self.ctx.claims.observe(&self.cluster.current());
        out
    }
    /// One pass through the controller's entry point ([`super::flow::reconcile`]: metrics,
    /// calls, journal); what the journal then holds of the object.
    async fn journaled_pass(&self) -> Option<crate::ops::journal::ObjectJournal> {
        let obj = self.cluster.current();
        let _ = super::flow::reconcile(Arc::new(obj.clone()), Arc::clone(&self.ctx)).await;
        self.ctx.claims.observe(&self.cluster.current());
        self.ctx
            .settings
            .journal
            .get(&self.ctx.resource, &obj.stored_namespace(), &obj.name_any())
    }
    fn object(&self) -> DynamicObject {
        self.cluster.current()
    }
    fn set(&self, f: impl FnOnce(&mut DynamicObject)) {
        f(&mut self.cluster.object.lock().unwrap());
    }
    fn delete(&self) {
        self.set(|o| {
            o.metadata.deletion_timestamp = Some(
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()),
            );
        });
    }
}

fn context(
    system: &Arc<System>,
    cluster: &Arc<Cluster>,
    settings: Settings,
    claims: Arc<Claims>,
) -> Context {
    Context::new(
        Arc::clone(system) as Arc<dyn Actuator>,
        Description {
            shortcuts: system.shortcuts,
            ..description()
        },
        settings,
        Arc::clone(cluster) as Arc<dyn ObjectOps>,
        claims,
    )
}

fn base64_of(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

fn condition(obj: &DynamicObject, type_: &str) -> (String, String, String) {
    let c = obj.data["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == type_).cloned())
        .unwrap_or_default();
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
    (s("status"), s("reason"), s("message"))
}

fn kinds(writes: &[Write]) -> Vec<String> {
    writes
        .iter()
        .map(|w| match w {
            Write::Metadata { finalizer, marker } => {
                format!("metadata(finalizer={finalizer}, marker={marker})")
            }
            Write::StatusId(id) => format!("status.id={id:?}"),
            Write::Status(s) => format!("status(id={})", s["id"]),
            Write::Event(reason) => format!("event {reason}"),
            Write::Guard(kind) => format!("guard {kind}"),
            Write::Secret(name, keys) => format!("secret {name} {keys:?}"),
        })
        .collect()
}

/// How many of `kinds` (as [`kinds`] names them) are metadata writes.
fn metadata_writes(kinds: &[String]) -> usize {
    kinds.iter().filter(|w| w.starts_with("metadata")).count()
}

fn objects_writes(writes: &[Write]) -> usize {
    writes
        .iter()
        .filter(|w| {
            matches!(
                w,
                Write::Metadata { .. } | Write::StatusId(_) | Write::Status(_)
            )
        })
        .count()
}

// ---------------------------------------------------------------------------------------
// Create / update
// ---------------------------------------------------------------------------------------

/// The calls of a pass that creates the resource (no reconciler has work).
const CREATING_PASS: [&str; 5] = [
    "list-for-adoption",
    "create",
    "reconcilers",
    "available",
    "observed",
];

/// A new object as a shard ring's labeller leaves it (`crate::shard::label`): its bucket label
/// and our finalizer, put on in one write before any pass.
fn labelled_and_finalized(name: &str) -> DynamicObject {
    let mut obj = managed(name);
    obj.metadata.finalizers = Some(vec![FINALIZER.to_owned()]);
    obj.metadata
        .labels
        .get_or_insert_default()
        .insert(crate::shard::ring::BUCKET_LABEL.to_owned(), "7".to_owned());
    obj
}

#[tokio::test]
async fn a_new_object_is_created_in_two_writes_plus_its_event_one_when_a_ring_finalized_it() {
    // The plugin can adopt: the finalizer alone comes before the create (no marker); a ring's
    // labeller put it on already, so that pass writes the status alone.
    for (what, obj, expected, object_writes) in [
        (
            "new",
            managed("a"),
            &[
                "metadata(finalizer=true, marker=false)",
                "event Created",
                "status(id=\"ext-a\")",
            ][..],
            2,
        ),
        (
            "labelled and finalized by a ring",
            labelled_and_finalized("a"),
            &["event Created", "status(id=\"ext-a\")"][..],
            1,
        ),
    ] {
        let w = World::new(obj);
        let (pass, next) = w.pass().await;
        assert!(pass.is_done(), "{what}: {pass:?}");
        assert_eq!(next, Next::Wait, "{what}");
        let writes = w.cluster.writes();
        assert_eq!(kinds(&writes), expected, "{what}");
        assert_eq!(objects_writes(&writes), object_writes, "{what}");
        assert_eq!(w.system.calls(), CREATING_PASS, "{what}");
        let obj = w.object();
        assert_eq!(obj.data["status"]["id"], "ext-a", "{what}");
        assert!(
            !obj.annotations().contains_key(CREATE_PENDING),
            "{what}: the marker is gone"
        );
        assert_eq!(condition(&obj, "Available").0, "True", "{what}");
        assert_eq!(condition(&obj, "Progressing").1, "Success", "{what}");
    }
}

#[tokio::test]
async fn a_plugin_that_cannot_adopt_gets_its_id_recorded_at_once() {
    // Also when a ring's labeller put the finalizer on: that saves nothing here, the marker
    // must precede the create, and goes with the id.
    for (what, obj) in [
        ("new", managed("a")),
        (
            "labelled and finalized by a ring",
            labelled_and_finalized("a"),
        ),
    ] {
        let w = World::with(
            System {
                cannot_adopt: true,
                ..System::default()
            },
            obj,
        );
        let (pass, _) = w.pass().await;
        assert!(pass.is_done(), "{what}: {pass:?}");
        assert_eq!(
            kinds(&w.cluster.writes()),
            [
                "metadata(finalizer=true, marker=true)",
                "status.id=Some(\"ext-a\")",
                "event Created",
                "metadata(finalizer=true, marker=false)",
                "status(id=\"ext-a\")",
            ],
            "{what}"
        );
        // (Its lookup answers that adoption does not apply, then the create.)
        assert_eq!(w.system.calls(), CREATING_PASS, "{what}");
    }
}

#[tokio::test]
async fn an_up_to_date_object_costs_no_write_and_no_call() {
    let w = World::new(managed("a"));
    w.pass().await;
    w.cluster.writes();
    w.system.calls();
    let (_, next) = w.pass().await;
    assert_eq!(next, Next::Wait);
    assert_eq!(w.cluster.writes(), []);
    assert!(w.system.calls().is_empty());
}

#[tokio::test]
async fn a_finalizer_removed_by_hand_is_put_back_without_touching_the_resource() {
    let w = World::new(managed("a"));
    w.pass().await;
    w.cluster.writes();
    w.system.calls();
    w.set(|o| o.metadata.finalizers = Some(vec![]));
    w.pass().await;
    assert_eq!(
        kinds(&w.cluster.writes())[0],
        "metadata(finalizer=true, marker=false)"
    );
    assert!(w.object().finalizers().contains(&FINALIZER.to_owned()));
    assert_eq!(
        w.system.calls(),
        ["get-by-id", "reconcilers", "available", "observed"],
        "it is looked up by id, never created again"
    );
}

#[tokio::test(start_paused = true)]
async fn a_create_that_keeps_failing_is_called_at_most_seven_times_in_its_first_minute() {
    for mode in [
        CreateMode::Fails(Failure::Transient("quota".into())),
        CreateMode::Traps,
    ] {
        let w = World::with(System::creating(mode.clone()), managed("a"));
        let start = tokio::time::Instant::now();
        let mut creates = 0;
        while start.elapsed() < Duration::from_mins(1) {
            let (pass, next) = w.pass().await;
            creates += w.system.calls().iter().filter(|c| *c == "create").count();
            assert_eq!(
                pass.failure.as_ref().map(Failure::reason),
                Some("TransientError")
            );
            let Next::After(delay) = next else {
                panic!("a transient failure is retried: {next:?}");
            };
            tokio::time::sleep(delay).await;
        }
        assert!(creates <= 7, "{mode:?}: {creates} creates in 60 s");
        assert!(creates >= 5, "{mode:?}: it is retried ({creates})");
        assert_eq!(
            condition(&w.object(), "Progressing").1,
            "TransientError",
            "{mode:?}"
        );
    }
}

#[tokio::test]
async fn a_create_that_failed_cleanly_clears_its_marker() {
    let system = System {
        cannot_adopt: true,
        ..System::creating(CreateMode::Fails(Failure::Transient("quota".into())))
    };
    let w = World::with(system, managed("a"));
    w.pass().await;
    assert_eq!(
        kinds(&w.cluster.writes())[..2],
        [
            "metadata(finalizer=true, marker=true)",
            "metadata(finalizer=true, marker=false)"
        ]
    );
    assert!(!w.object().annotations().contains_key(CREATE_PENDING));
}

#[tokio::test]
async fn a_failed_create_of_a_plugin_that_can_adopt_writes_the_finalizer_once_and_no_marker() {
    let w = World::with(
        System::creating(CreateMode::Fails(Failure::Transient("quota".into()))),
        managed("a"),
    );
    w.pass().await;
    let writes = kinds(&w.cluster.writes());
    assert_eq!(writes[0], "metadata(finalizer=true, marker=false)");
    assert_eq!(metadata_writes(&writes), 1, "{writes:?}");
    assert!(w.object().finalizers().contains(&FINALIZER.to_owned()));
    assert!(!w.object().annotations().contains_key(CREATE_PENDING));
}

#[tokio::test]
async fn an_interrupted_create_is_looked_for_by_adoption_before_creating_again() {
    let w = World::with(System::creating(CreateMode::Traps), managed("a"));
    w.pass().await;
    assert!(
        w.object().finalizers().contains(&FINALIZER.to_owned()),
        "outcome unknown: the finalizer stays"
    );
    let writes = kinds(&w.cluster.writes());
    assert_eq!(
        writes[0], "metadata(finalizer=true, marker=false)",
        "{writes:?}"
    );
    assert_eq!(
        metadata_writes(&writes),
        1,
        "the finalizer once, no marker: {writes:?}"
    );
    // It did create, in fact (the trap came after): the next pass adopts it.
    w.system.put("ext-a", "a");
    *w.system.create.lock().unwrap() = CreateMode::Works;
    w.system.calls();
    w.cluster.writes();
    let (pass, _) = w.pass().await;
    assert!(pass.is_done());
    assert_eq!(
        w.system.calls(),
        ["list-for-adoption", "reconcilers", "available", "observed"]
    );
    assert_eq!(
        kinds(&w.cluster.writes()),
        ["event Adopted", "status(id=\"ext-a\")"]
    );
}

/// `system`, declaring `shortcuts`.
fn declaring(shortcuts: Shortcuts, system: System) -> System {
    System {
        shortcuts,
        ..system
    }
}

/// A plugin whose external system refuses a duplicate create.
fn refusing_duplicates(system: System) -> System {
    declaring(
        Shortcuts {
            create_refuses_duplicates: true,
            ..Shortcuts::default()
        },
        system,
    )
}

#[tokio::test]
async fn a_plugin_whose_system_refuses_duplicates_creates_without_looking_for_adoption_first() {
    let w = World::with(refusing_duplicates(System::default()), managed("a"));
    let (pass, _) = w.pass().await;
    assert!(pass.is_done(), "{pass:?}");
    assert_eq!(
        w.system.calls(),
        ["create", "reconcilers", "available", "observed"]
    );
    // It can adopt (the shortcut's contract): no marker, and the id in the pass's status.
    assert_eq!(
        kinds(&w.cluster.writes()),
        [
            "metadata(finalizer=true, marker=false)",
            "event Created",
            "status(id=\"ext-a\")",
        ]
    );
}

#[tokio::test]
async fn an_interrupted_create_refused_as_a_duplicate_is_adopted_instead_of_made_twice() {
    let w = World::with(
        refusing_duplicates(System::creating(CreateMode::Traps)),
        managed("a"),
    );
    w.pass().await;
    // It did create, in fact (the trap came after): the next create is refused, the lookup
    // after it adopts.
    w.system.put("ext-a", "a");
    *w.system.create.lock().unwrap() = CreateMode::Works;
    w.system.calls();
    w.cluster.writes();
    let (pass, _) = w.pass().await;
    assert!(pass.is_done(), "{pass:?}");
    assert_eq!(
        w.system.calls(),
        [
            "create",
            "list-for-adoption",
            "reconcilers",
            "available",
            "observed"
        ]
    );
    assert_eq!(
        kinds(&w.cluster.writes()),
        ["event Adopted", "status(id=\"ext-a\")"]
    );
    assert_eq!(w.system.resources.lock().unwrap().len(), 1, "one resource");
}

#[tokio::test]
async fn a_refused_create_with_nothing_to_adopt_keeps_the_creates_own_failure() {
    let w = World::with(
        refusing_duplicates(System::creating(CreateMode::Fails(
            Failure::InvalidConfiguration("name: not a DNS name".into()),
        ))),
        managed("a"),
    );
    let (pass, next) = w.pass().await;
    assert!(pass.failure.is_some());
    assert_eq!(next, Next::Wait);
    assert_eq!(w.system.calls(), ["create", "list-for-adoption"]);
    let (_, reason, message) = condition(&w.object(), "Progressing");
    assert_eq!(reason, "InvalidConfiguration");
    assert!(message.contains("not a DNS name"), "{message}");
    assert_eq!(
        kinds(&w.cluster.writes()),
        [
            "metadata(finalizer=true, marker=false)",
            "status(id=null)",
            "event InvalidConfiguration"
        ]
    );
}

#[tokio::test]
async fn a_refused_create_that_several_resources_match_is_terminal_and_adopts_none() {
    let w = World::with(
        refusing_duplicates(System::creating(CreateMode::Fails(Failure::Transient(
            "409".into(),
        )))),
        managed("a"),
    );
    w.system.put("ext-a", "a");
    w.system.put("ext-a2", "a");
    let (pass, next) = w.pass().await;
    assert!(pass.failure.is_some());
    assert_eq!(next, Next::Wait);
    assert_eq!(w.system.calls(), ["create", "list-for-adoption"]);
    let (_, reason, message) = condition(&w.object(), "Progressing");
    assert_eq!(reason, "InvalidConfiguration");
    assert!(message.contains("2 existing resources"), "{message}");
    assert!(w.object().data["status"]["id"].is_null());
    assert!(w.ctx.claims.is_empty(), "nothing claimed");
    assert_eq!(
        kinds(&w.cluster.writes()),
        [
            "metadata(finalizer=true, marker=false)",
            "status(id=null)",
            "event InvalidConfiguration"
        ]
    );
}

#[tokio::test]
async fn a_refused_create_whose_lookup_does_not_apply_keeps_the_creates_own_failure() {
    // (A plugin that declares refused duplicates must look for every object it creates; one
    // that answers `none` anyway gets the create's own failure, not a guess.)
    let w = World::with(
        refusing_duplicates(System {
            cannot_adopt: true,
            ..System::creating(CreateMode::Fails(Failure::Transient("409".into())))
        }),
        managed("a"),
    );
    let (pass, next) = w.pass().await;
    assert!(pass.failure.is_some());
    assert!(matches!(next, Next::After(_)), "{next:?}");
    assert_eq!(w.system.calls(), ["create", "list-for-adoption"]);
    let (_, reason, message) = condition(&w.object(), "Progressing");
    assert_eq!(reason, "TransientError");
    assert!(message.contains("409"), "{message}");
    assert_eq!(
        kinds(&w.cluster.writes()),
        [
            "metadata(finalizer=true, marker=false)",
            "status(id=null)",
            "event TransientError"
        ]
    );
}

#[tokio::test]
async fn a_refused_create_whose_lookup_fails_is_retried_with_the_lookups_failure() {
    let w = World::with(
        refusing_duplicates(System::creating(CreateMode::Fails(Failure::Transient(
            "409".into(),
        )))),
        managed("a"),
    );
    w.system.failing.lock().unwrap().insert(
        "list-for-adoption",
        Some(Failure::Transient("list: 503".into())),
    );
    let (pass, next) = w.pass().await;
    assert!(pass.failure.is_some());
    assert!(matches!(next, Next::After(_)), "{next:?}");
    assert_eq!(w.system.calls(), ["create", "list-for-adoption"]);
    let (_, reason, message) = condition(&w.object(), "Progressing");
    assert_eq!(reason, "TransientError");
    assert!(message.contains("list: 503"), "{message}");
    assert_eq!(metadata_writes(&kinds(&w.cluster.writes())), 1);
}

#[tokio::test]
async fn a_create_that_waits_is_not_looked_for_even_when_duplicates_are_refused() {
    let w = World::with(
        refusing_duplicates(System::creating(CreateMode::Waits)),
        managed("a"),
    );
    let (pass, next) = w.pass().await;
    assert!(pass.failure.is_none(), "{pass:?}");
    assert!(matches!(next, Next::After(_)), "{next:?}");
    assert_eq!(w.system.calls(), ["create"]);
    assert_eq!(
        metadata_writes(&kinds(&w.cluster.writes())),
        1,
        "the finalizer only"
    );
}

#[tokio::test]
async fn a_create_refused_for_another_objects_resource_is_terminal_and_names_it() {
    let claims = Arc::new(Claims::default());
    let first = World::sharing(
        refusing_duplicates(System::default()),
        managed("a"),
        Arc::clone(&claims),
    );
    first.pass().await;
    // A second object naming the same resource: its create is refused, the lookup finds the
    // first object's resource, which is not this one's to adopt.
    let second = World::sharing(
        refusing_duplicates(System::default()),
        object("b", 200, json!({"resource": {"name": "a"}})),
        claims,
    );
    second.system.put("ext-a", "a");
    let (_, next) = second.pass().await;
    assert_eq!(second.system.calls(), ["create", "list-for-adoption"]);
    let (status, reason, message) = condition(&second.object(), "Progressing");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "InvalidConfiguration")
    );
    assert!(message.contains("ns/a"), "{message}");
    assert_eq!(next, Next::Wait);
    assert!(second.object().data["status"]["id"].is_null());
}

/// The create-pending marker an earlier create (of an older host) left on `o`.
fn mark_an_earlier_create(o: &mut DynamicObject) {
    o.metadata.annotations = Some([(CREATE_PENDING.to_owned(), "earlier".to_owned())].into());
}

#[tokio::test]
async fn a_create_retried_after_a_failure_writes_no_metadata_before_it() {
    let w = World::with(
        System::creating(CreateMode::Fails(Failure::Transient("quota".into()))),
        managed("a"),
    );
    w.pass().await;
    w.cluster.writes();
    w.system.calls();
    *w.system.create.lock().unwrap() = CreateMode::Works;
    let (pass, _) = w.pass().await;
    assert!(pass.is_done(), "{pass:?}");
    assert_eq!(w.system.calls(), CREATING_PASS);
    // The finalizer is there since the first pass: the status is the only write to the object.
    let writes = w.cluster.writes();
    assert_eq!(kinds(&writes), ["event Created", "status(id=\"ext-a\")"]);
    assert_eq!(objects_writes(&writes), 1);
}

#[tokio::test]
async fn a_marker_left_without_our_finalizer_gets_the_finalizer_in_one_write_before_the_create() {
    let w = World::with(System::creating(CreateMode::Traps), managed("a"));
    w.set(mark_an_earlier_create);
    w.pass().await;
    let writes = kinds(&w.cluster.writes());
    assert_eq!(
        writes[0], "metadata(finalizer=true, marker=true)",
        "{writes:?}"
    );
    assert_eq!(
        metadata_writes(&writes),
        1,
        "one write before the create: {writes:?}"
    );
    let obj = w.object();
    assert!(obj.finalizers().contains(&FINALIZER.to_owned()));
    assert_eq!(
        obj.annotations().get(CREATE_PENDING).map(String::as_str),
        Some("earlier"),
        "the earlier marker is kept, not replaced"
    );
    // The next create answers: the marker goes with the id.
    *w.system.create.lock().unwrap() = CreateMode::Works;
    w.system.calls();
    let (pass, _) = w.pass().await;
    assert!(pass.is_done(), "{pass:?}");
    assert_eq!(w.system.calls(), CREATING_PASS);
    let writes = w.cluster.writes();
    assert_eq!(
        kinds(&writes),
        [
            "event Created",
            "metadata(finalizer=true, marker=false)",
            "status(id=\"ext-a\")"
        ]
    );
    assert_eq!(objects_writes(&writes), 2);
    assert!(!w.object().annotations().contains_key(CREATE_PENDING));
}

#[tokio::test]
async fn a_marker_left_by_an_earlier_create_goes_once_the_adopted_id_is_recorded() {
    let w = World::new(managed("a"));
    w.set(|o| {
        o.metadata.finalizers = Some(vec![FINALIZER.into()]);
        mark_an_earlier_create(o);
    });
    w.system.put("ext-a", "a");
    let (pass, _) = w.pass().await;
    assert!(pass.is_done(), "{pass:?}");
    assert_eq!(
        kinds(&w.cluster.writes()),
        [
            "event Adopted",
            "metadata(finalizer=true, marker=false)",
            "status(id=\"ext-a\")"
        ]
    );
    assert!(!w.object().annotations().contains_key(CREATE_PENDING));
}

#[tokio::test]
async fn an_interrupted_create_of_a_plugin_that_cannot_adopt_is_never_repeated() {
    let w = World::with(
        System {
            cannot_adopt: true,
            ..System::default()
        },
        managed("a"),
    );
    w.set(|o| {
        o.metadata.finalizers = Some(vec![FINALIZER.into()]);
        mark_an_earlier_create(o);
    });
    let (pass, next) = w.pass().await;
    assert_eq!(
        pass.failure.as_ref().map(Failure::reason),
        Some("UnrecoverableError")
    );
    assert_eq!(next, Next::Wait);
    assert!(!w.system.calls().contains(&"create".to_owned()));
}

#[tokio::test]
async fn a_marker_left_by_an_earlier_create_stays_through_a_new_create_until_its_id_is_recorded() {
    let w = World::new(managed("a"));
    w.set(|o| {
        o.metadata.finalizers = Some(vec![FINALIZER.into()]);
        mark_an_earlier_create(o);
    });
    let (pass, _) = w.pass().await;
    assert!(pass.is_done(), "{pass:?}");
    assert_eq!(w.system.calls(), CREATING_PASS);
    // No metadata write before the create (finalizer and marker are there); the marker goes
    // with the id recorded.
    assert_eq!(
        kinds(&w.cluster.writes()),
        [
            "event Created",
            "metadata(finalizer=true, marker=false)",
            "status(id=\"ext-a\")"
        ]
    );
    assert!(!w.object().annotations().contains_key(CREATE_PENDING));
}

#[tokio::test]
async fn several_adoption_candidates_are_terminal_and_nothing_is_created() {
    let w = World::new(managed("a"));
    w.system.put("ext-a", "a");
    w.system.put("ext-a2", "a");
    let (pass, next) = w.pass().await;
    let (_, reason, message) = condition(&w.object(), "Progressing");
    assert_eq!(reason, "InvalidConfiguration");
    assert!(message.contains("2 existing resources"), "{message}");
    assert_eq!(next, Next::Wait);
    assert!(pass.failure.is_some());
    assert!(!w.system.calls().contains(&"create".to_owned()));
}

#[tokio::test]
async fn adopting_a_resource_another_object_holds_is_terminal_and_names_it() {
    let claims = Arc::new(Claims::default());
    let first = World::sharing(System::default(), managed("a"), Arc::clone(&claims));
    first.pass().await;
    // A second object whose adoption matches the same resource.
    let second = World::sharing(
        System::default(),
        object("b", 200, json!({"resource": {"name": "a"}})),
        claims,
    );
    second.system.put("ext-a", "a");
    let (_, next) = second.pass().await;
    let (status, reason, message) = condition(&second.object(), "Progressing");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "InvalidConfiguration")
    );
    assert!(message.contains("ns/a"), "{message}");
    assert_eq!(next, Next::Wait);
    assert!(second.object().data["status"]["id"].is_null());
    assert!(!second.system.calls().contains(&"create".to_owned()));
}

/// A managed object `name` with our finalizer whose status.id was edited to `id` (an id
/// another object may hold).
fn holding_status_id(name: &str, id: &str) -> DynamicObject {
    let mut obj = managed(name);
    obj.metadata.finalizers = Some(vec![FINALIZER.into()]);
    obj.data["status"] = json!({ "id": id });
    obj
}

#[tokio::test]
async fn a_status_id_edited_to_an_older_objects_id_is_refused_without_calling_the_plugin() {
    let claims = Arc::new(Claims::default());
    let older = World::sharing(System::default(), managed("a"), Arc::clone(&claims));
    older.pass().await;
    let hostile = holding_status_id("b", "ext-a");
    let b = World::sharing(System::default(), hostile, Arc::clone(&claims));
    claims.observe(&b.object());
    let (_, next) = b.pass().await;
    let (_, reason, message) = condition(&b.object(), "Progressing");
    assert_eq!(reason, "InvalidConfiguration");
    assert!(message.contains("ns/a"), "{message}");
    assert_eq!(next, Next::Wait);
    assert!(
        b.system.calls().is_empty(),
        "the other object's resource is not touched"
    );
    assert_eq!(
        b.object().data["status"]["id"],
        "ext-a",
        "status.id stays as it was"
    );
    // The journal (orchard explain) says who holds the id.
    let j = b.journaled_pass().await.expect("journaled");
    assert_eq!(
        j.claim,
        Some(crate::ops::journal::Claim {
            id: "ext-a".into(),
            other: Some("ns/a".into()),
            other_holds_it: true,
        })
    );
}

#[tokio::test]
async fn a_get_by_id_answering_another_id_is_transient_and_keeps_status_id() {
    let w = World::new(managed("a"));
    w.pass().await;
    *w.system.wrong_id.lock().unwrap() = true;
    w.set(|o| o.metadata.generation = Some(2));
    let (pass, next) = w.pass().await;
    assert_eq!(
        pass.failure.as_ref().map(Failure::reason),
        Some("TransientError")
    );
    assert!(
        pass.failure
            .unwrap()
            .to_string()
            .contains("broke the contract")
    );
    assert!(matches!(next, Next::After(_)));
    assert_eq!(w.object().data["status"]["id"], "ext-a");
}

#[tokio::test]
async fn a_managed_resource_deleted_outside_is_forgotten_and_created_again() {
    let w = World::new(managed("a"));
    w.pass().await;
    w.cluster.writes();
    w.system.resources.lock().unwrap().clear();
    w.set(|o| o.metadata.generation = Some(2));
    let (pass, _) = w.pass().await;
    assert!(pass.is_done(), "{pass:?}");
    let writes = kinds(&w.cluster.writes());
    assert_eq!(writes[..2], ["status.id=None", "event ExternallyDeleted"]);
    assert!(writes.contains(&"event Created".to_owned()));
    assert!(w.system.has("ext-a"));
    assert_eq!(w.object().data["status"]["id"], "ext-a");
}

#[tokio::test]
async fn an_unmanaged_resource_deleted_outside_is_unrecoverable() {
    let w = World::new(object(
        "u",
        100,
        json!({"managementPolicy": "unmanaged", "import": {"id": "ext-x"}}),
    ));
    w.system.put("ext-x", "x");
    w.pass().await;
    assert_eq!(w.object().data["status"]["id"], "ext-x");
    w.system.resources.lock().unwrap().clear();
    w.set(|o| o.metadata.generation = Some(2));
    let (pass, _) = w.pass().await;
    assert_eq!(
        pass.failure.as_ref().map(Failure::reason),
        Some("UnrecoverableError")
    );
}

#[tokio::test]
async fn import_by_id_finds_it_or_is_terminal_and_never_creates() {
    let w = World::new(object(
        "u",
        100,
        json!({"managementPolicy": "unmanaged", "import": {"id": "ext-x"}}),
    ));
    let (pass, _) = w.pass().await;
    assert_eq!(
        pass.failure.as_ref().map(Failure::reason),
        Some("InvalidConfiguration")
    );
    assert!(
        condition(&w.object(), "Progressing")
            .2
            .contains("spec.import.id")
    );
    w.system.put("ext-x", "x");
    w.set(|o| o.metadata.generation = Some(2));
    let (pass, _) = w.pass().await;
    assert!(pass.is_done());
    assert_eq!(w.object().data["status"]["id"], "ext-x");
    assert_eq!(
        w.system.calls(),
        ["get-by-id", "get-by-id", "available", "observed"],
        "unmanaged: no reconcilers, no create"
    );
}

#[tokio::test]
async fn import_by_filter_waits_for_one_match_and_refuses_several() {
    let w = World::new(object(
        "u",
        100,
        json!({"managementPolicy": "unmanaged", "import": {"filter": {"name": "x"}}}),
    ));
    let (_, next) = w.pass().await;
    assert_eq!(next, Next::After(super::flow::normal::IMPORT_POLL));
    assert_eq!(condition(&w.object(), "Progressing").0, "True");
    w.system.put("ext-x", "x");
    w.pass().await;
    assert_eq!(w.object().data["status"]["id"], "ext-x");

    let several = World::new(object(
        "v",
        100,
        json!({"managementPolicy": "unmanaged", "import": {"filter": {"name": "y"}}}),
    ));
    several.system.put("ext-y1", "y");
    several.system.put("ext-y2", "y");
    let (pass, next) = several.pass().await;
    assert_eq!(
        pass.failure.as_ref().map(Failure::reason),
        Some("InvalidConfiguration")
    );
    assert_eq!(next, Next::Wait);
}

#[tokio::test]
async fn unmanaged_imports_may_share_a_resource_with_its_managed_owner() {
    let claims = Arc::new(Claims::default());
    let owner = World::sharing(System::default(), managed("a"), Arc::clone(&claims));
    owner.pass().await;
    let reader = World::sharing(
        System::default(),
        object(
            "r",
            200,
            json!({"managementPolicy": "unmanaged", "import": {"id": "ext-a"}}),
        ),
        claims,
    );
    reader.system.put("ext-a", "a");
    let (pass, _) = reader.pass().await;
    assert!(pass.is_done(), "{pass:?}");
}

#[tokio::test]
async fn a_malformed_envelope_is_invalid_configuration_naming_the_field() {
    let w = World::new(object(
        "a",
        100,
        json!({"resyncPeriod": "often", "resource": {"name": "a"}}),
    ));
    let (pass, next) = w.pass().await;
    assert_eq!(next, Next::Wait);
    assert!(
        pass.failure
            .unwrap()
            .to_string()
            .starts_with("spec.resyncPeriod")
    );
    assert!(w.system.calls().is_empty());
}

#[tokio::test]
async fn a_refused_status_write_is_replaced_by_a_minimal_status_that_says_why() {
    let w = World::new(managed("a"));
    *w.cluster.refuse_status.lock().unwrap() = 1;
    let (pass, next) = w.pass().await;
    assert!(matches!(next, Next::After(_)), "backs off: {next:?}");
    assert_eq!(
        pass.failure.as_ref().map(Failure::reason),
        Some("TransientError")
    );
    let obj = w.object();
    assert_eq!(obj.data["status"]["id"], "ext-a", "the id is kept");
    assert!(obj.data["status"]["resource"].is_null());
    assert!(
        condition(&obj, "Progressing")
            .2
            .contains("refused the status write")
    );
}

#[tokio::test]
async fn a_terminal_failure_is_retried_when_an_input_changes() {
    let mut d = description();
    d.needs_credentials = true;
    let w = World::new(object(
        "a",
        100,
        json!({"resource": {"name": "a"}, "credentialsRef": {"secretName": "creds"}}),
    ));
    let ctx = Context::new(
        Arc::clone(&w.system) as Arc<dyn Actuator>,
        d,
        Settings::default(),
        Arc::clone(&w.cluster) as Arc<dyn ObjectOps>,
        Arc::new(Claims::default()),
    );
    let secret = |rv: &str| -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "creds", "namespace": "ns", "resourceVersion": rv},
            "data": {"apiKey": base64_of(rv)}}))
        .unwrap()
    };
    w.cluster
        .cached
        .lock()
        .unwrap()
        .insert(("Secret".into(), "creds".into()), secret("1"));
    *w.system.create.lock().unwrap() =
        CreateMode::Fails(Failure::InvalidConfiguration("bad key".into()));
    let run = || async { reconcile_object(&w.cluster.current(), &ctx).await.unwrap() };
    run().await;
    assert_eq!(
        condition(&w.object(), "Progressing").1,
        "InvalidConfiguration"
    );
    w.system.calls();
    run().await;
    assert!(
        w.system.calls().is_empty(),
        "terminal: skipped while nothing changed"
    );
    *w.system.create.lock().unwrap() = CreateMode::Works;
    w.cluster
        .cached
        .lock()
        .unwrap()
        .insert(("Secret".into(), "creds".into()), secret("2"));
    let (pass, _) = run().await;
    assert!(pass.is_done(), "{pass:?}");
    assert!(w.system.calls().contains(&"create".to_owned()));
}

#[tokio::test]
async fn create_answering_an_id_another_object_holds_is_terminal() {
    let claims = Arc::new(Claims::default());
    let a = World::sharing(System::default(), managed("a"), Arc::clone(&claims));
    a.pass().await;
    let b = World::sharing(
        System::creating(CreateMode::AnswersId("ext-a".into())),
        managed("b"),
        claims,
    );
    let (pass, _) = b.pass().await;
    assert_eq!(
        pass.failure.as_ref().map(Failure::reason),
        Some("InvalidConfiguration")
    );
    assert!(b.object().data["status"]["id"].is_null());
    assert!(!b.object().annotations().contains_key(CREATE_PENDING));
    // It can adopt: the finalizer alone before the create, no marker to clear after it.
    let writes = kinds(&b.cluster.writes());
    assert_eq!(
        writes[0], "metadata(finalizer=true, marker=false)",
        "{writes:?}"
    );
    assert_eq!(metadata_writes(&writes), 1, "{writes:?}");
}

#[tokio::test]
async fn create_answering_an_id_another_object_holds_clears_the_marker_of_a_plugin_that_cannot_adopt()
 {
    let claims = Arc::new(Claims::default());
    let a = World::sharing(System::default(), managed("a"), Arc::clone(&claims));
    a.pass().await;
    let system = System {
        cannot_adopt: true,
        ..System::default()
    };
    *system.create.lock().unwrap() = CreateMode::AnswersId("ext-a".into());
    let b = World::sharing(system, managed("b"), claims);
    let (pass, _) = b.pass().await;
    assert_eq!(
        pass.failure.as_ref().map(Failure::reason),
        Some("InvalidConfiguration")
    );
    let writes = kinds(&b.cluster.writes());
    assert_eq!(
        writes[..2],
        [
            "metadata(finalizer=true, marker=true)",
            "metadata(finalizer=true, marker=false)"
        ],
        "{writes:?}"
    );
    assert!(
        !writes.iter().any(|w| w.starts_with("status.id")),
        "no id recorded: {writes:?}"
    );
    assert!(b.object().data["status"]["id"].is_null());
    assert!(!b.object().annotations().contains_key(CREATE_PENDING));
}

// ---------------------------------------------------------------------------------------
// Delete
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn delete_removes_the_resource_then_releases_the_finalizer_only() {
    let w = World::new(managed("a"));
    w.pass().await;
    w.cluster.writes();
    w.system.calls();
    w.delete();
    let (pass, next) = w.pass().await;
    assert!(pass.released);
    assert_eq!(next, Next::Wait);
    assert_eq!(
        kinds(&w.cluster.writes()),
        ["event Deleted", "metadata(finalizer=false, marker=false)"]
    );
    assert_eq!(w.system.calls(), ["get-by-id", "delete", "get-by-id"]);
    assert!(!w.system.has("ext-a"));
    assert_eq!(w.ctx.remembered(), 0, "bookkeeping of the object is gone");
    assert!(w.ctx.claims.is_empty());
}

/// A plugin whose external system deletes synchronously.
fn deleting_synchronously(system: System) -> System {
    declaring(
        Shortcuts {
            delete_is_synchronous: true,
            ..Shortcuts::default()
        },
        system,
    )
}

#[tokio::test]
async fn a_synchronous_delete_releases_without_reading_the_resource_back() {
    let w = World::with(deleting_synchronously(System::default()), managed("a"));
    w.pass().await;
    w.cluster.writes();
    w.system.calls();
    w.delete();
    let (pass, _) = w.pass().await;
    assert!(pass.released);
    assert_eq!(w.system.calls(), ["get-by-id", "delete"]);
    assert_eq!(
        kinds(&w.cluster.writes()),
        ["event Deleted", "metadata(finalizer=false, marker=false)"]
    );
    assert!(!w.system.has("ext-a"));
}

/// A plugin that deletes by id, synchronously (as pdns-zone declares).
fn deleting_by_id(system: System) -> System {
    declaring(
        Shortcuts {
            delete_is_synchronous: true,
            delete_by_id: true,
            ..Shortcuts::default()
        },
        system,
    )
}

#[tokio::test]
async fn a_plugin_that_deletes_by_id_is_called_with_the_status_id_and_no_read_before_or_after() {
    let w = World::with(deleting_by_id(System::default()), managed("a"));
    w.pass().await;
    w.cluster.writes();
    w.system.calls();
    w.delete();
    let (pass, _) = w.pass().await;
    assert!(pass.released);
    assert_eq!(w.system.calls(), ["delete"]);
    assert_eq!(
        *w.system.deleted.lock().unwrap(),
        [System::res("ext-a", &Value::Null)],
        "the status.id, no state read"
    );
    assert_eq!(
        kinds(&w.cluster.writes()),
        ["event Deleted", "metadata(finalizer=false, marker=false)"]
    );
    assert!(!w.system.has("ext-a"));
}

#[tokio::test]
async fn a_delete_by_id_of_a_resource_already_gone_releases_the_object() {
    let w = World::with(deleting_by_id(System::default()), managed("a"));
    w.pass().await;
    w.system.resources.lock().unwrap().remove("ext-a");
    w.cluster.writes();
    w.system.calls();
    w.delete();
    let (pass, _) = w.pass().await;
    assert!(pass.released);
    assert_eq!(w.system.calls(), ["delete"]);
    assert_eq!(
        kinds(&w.cluster.writes()),
        ["event Deleted", "metadata(finalizer=false, marker=false)"]
    );
}

#[tokio::test]
async fn a_delete_that_fails_keeps_the_finalizer_whether_it_is_read_first_or_by_id() {
    // (label, the shortcuts declared, the calls of the failed delete pass)
    type Declaring = fn(System) -> System;
    let cases: [(&str, Declaring, &[&str]); 2] = [
        (
            "synchronous",
            deleting_synchronously,
            &["get-by-id", "delete"],
        ),
        ("by id", deleting_by_id, &["delete"]),
    ];
    for (label, declared, calls) in cases {
        let w = World::with(declared(System::default()), managed("a"));
        w.pass().await;
        w.cluster.writes();
        w.system.calls();
        w.system
            .failing
            .lock()
            .unwrap()
            .insert("delete", Some(Failure::Transient("busy".into())));
        w.delete();
        let (pass, _) = w.pass().await;
        assert!(!pass.released, "{label}");
        assert!(
            w.object().finalizers().contains(&FINALIZER.to_owned()),
            "{label}"
        );
        assert!(w.system.has("ext-a"), "{label}");
        assert_eq!(w.system.calls(), calls, "{label}");
        let writes = kinds(&w.cluster.writes());
        assert_eq!(
            metadata_writes(&writes),
            0,
            "{label}: the finalizer stays: {writes:?}"
        );
    }
}

#[tokio::test]
async fn a_plugin_that_deletes_by_id_asynchronously_is_read_back_until_the_resource_is_gone() {
    let w = World::with(
        declaring(
            Shortcuts {
                delete_by_id: true,
                ..Shortcuts::default()
            },
            System::default(),
        ),
        managed("a"),
    );
    w.pass().await;
    *w.system.slow_delete.lock().unwrap() = 1;
    w.cluster.writes();
    w.system.calls();
    w.delete();
    let (_, next) = w.pass().await;
    assert_eq!(next, Next::After(super::flow::delete::DELETE_POLL));
    assert_eq!(w.system.calls(), ["delete", "get-by-id"], "no read before");
    let writes = kinds(&w.cluster.writes());
    assert_eq!(
        metadata_writes(&writes),
        0,
        "the finalizer stays while it goes: {writes:?}"
    );
    let (pass, _) = w.pass().await;
    assert!(pass.released);
    // As in the generic flow, a poll deletes again (idempotent) before it reads: by id here.
    assert_eq!(w.system.calls(), ["delete", "get-by-id"], "the poll");
    assert_eq!(
        kinds(&w.cluster.writes()),
        ["event Deleted", "metadata(finalizer=false, marker=false)"]
    );
}

#[tokio::test]
async fn a_plugin_that_deletes_by_id_finds_the_orphan_of_an_interrupted_create_by_adoption() {
    let w = World::with(deleting_by_id(System::default()), managed("a"));
    w.system.put("ext-a", "a");
    w.set(|o| o.metadata.finalizers = Some(vec![FINALIZER.into()]));
    w.delete();
    let (pass, _) = w.pass().await;
    assert!(pass.released);
    assert_eq!(w.system.calls(), ["list-for-adoption", "delete"]);
    assert_eq!(
        *w.system.deleted.lock().unwrap(),
        [System::res("ext-a", &json!({"name": "a"}))],
        "without a status.id the resource is found, and passed as found"
    );
    assert!(!w.system.has("ext-a"));
    assert_eq!(
        kinds(&w.cluster.writes()),
        ["event Deleted", "metadata(finalizer=false, marker=false)"]
    );
}

#[tokio::test]
async fn a_plugin_that_deletes_by_id_never_deletes_a_status_id_another_object_holds() {
    let claims = Arc::new(Claims::default());
    let a = World::sharing(System::default(), managed("a"), Arc::clone(&claims));
    a.pass().await;
    let hostile = holding_status_id("b", "ext-a");
    let system = deleting_by_id(System::default());
    system.put("ext-a", "a");
    let b = World::sharing(system, hostile, Arc::clone(&claims));
    claims.observe(&b.object());
    b.delete();
    let (pass, _) = b.pass().await;
    assert!(pass.released);
    assert_eq!(
        b.system.calls(),
        ["list-for-adoption"],
        "looked for its own, never deleted the id another holds"
    );
    assert!(b.system.has("ext-a"));
    assert_eq!(
        kinds(&b.cluster.writes()),
        [
            "event LeftInPlace",
            "metadata(finalizer=false, marker=false)"
        ]
    );
}

#[tokio::test]
async fn delete_polls_until_the_resource_is_gone() {
    let w = World::new(managed("a"));
    w.pass().await;
    *w.system.slow_delete.lock().unwrap() = 1;
    w.delete();
    let (_, next) = w.pass().await;
    assert_eq!(next, Next::After(super::flow::delete::DELETE_POLL));
    assert!(w.object().finalizers().contains(&FINALIZER.to_owned()));
    let (pass, _) = w.pass().await;
    assert!(pass.released);
}

#[tokio::test]
async fn delete_waits_for_foreign_finalizers() {
    let w = World::new(managed("a"));
    w.pass().await;
    w.set(|o| {
        o.metadata
            .finalizers
            .get_or_insert_default()
            .push("x.dev/guard".into());
    });
    w.delete();
    w.system.calls();
    let (pass, _) = w.pass().await;
    assert!(!pass.released);
    assert!(w.system.calls().is_empty());
    assert!(
        condition(&w.object(), "Progressing")
            .2
            .contains("x.dev/guard")
    );
}

#[tokio::test]
async fn detach_leaves_the_resource_in_place() {
    let w = World::new(object(
        "a",
        100,
        json!({"resource": {"name": "a"}, "managedOptions": {"onDelete": "detach"}}),
    ));
    w.pass().await;
    w.system.calls();
    w.delete();
    let (pass, _) = w.pass().await;
    assert!(pass.released);
    assert!(w.system.calls().is_empty());
    assert!(w.system.has("ext-a"));
}

#[tokio::test]
async fn delete_without_status_id_finds_the_orphan_of_an_interrupted_create() {
    let w = World::new(managed("a"));
    w.system.put("ext-a", "a");
    w.set(|o| o.metadata.finalizers = Some(vec![FINALIZER.into()]));
    w.delete();
    let (pass, _) = w.pass().await;
    assert!(pass.released);
    assert_eq!(
        w.system.calls(),
        ["list-for-adoption", "delete", "get-by-id"]
    );
    assert!(!w.system.has("ext-a"));
}

#[tokio::test]
async fn delete_with_several_adoption_candidates_is_terminal_and_deletes_nothing() {
    let w = World::new(managed("a"));
    w.system.put("ext-a1", "a");
    w.system.put("ext-a2", "a");
    w.set(|o| o.metadata.finalizers = Some(vec![FINALIZER.into()]));
    w.delete();
    let (pass, next) = w.pass().await;
    assert!(!pass.released);
    assert_eq!(next, Next::Wait, "terminal: no loop");
    assert_eq!(w.system.calls(), ["list-for-adoption"]);
    assert_eq!(
        condition(&w.object(), "Progressing").1,
        "InvalidConfiguration"
    );
}

#[tokio::test]
async fn a_delete_blocked_by_a_failing_lookup_says_so_in_its_condition_and_an_event() {
    let cases = [
        // No status.id: the delete looks for the resource by adoption.
        (
            "list-for-adoption",
            Failure::InvalidConfiguration("spec.name: missing".into()),
        ),
        // A status.id: by get-by-id.
        ("get-by-id", Failure::Transient("connection refused".into())),
    ];
    for (function, failure) in cases {
        let w = World::new(managed("a"));
        if function == "get-by-id" {
            w.pass().await;
        } else {
            w.set(|o| o.metadata.finalizers = Some(vec![FINALIZER.into()]));
        }
        w.cluster.writes();
        w.system.calls();
        w.system
            .failing
            .lock()
            .unwrap()
            .insert(function, Some(failure.clone()));
        w.delete();
        let (pass, next) = w.pass().await;
        assert!(!pass.released, "{function}: the finalizer stays");
        assert_eq!(w.system.calls(), [function], "nothing deleted");
        let (status, reason, message) = condition(&w.object(), "Progressing");
        assert_eq!(reason, failure.reason(), "{function}: the class is kept");
        assert!(
            message.starts_with(&format!(
                "deletion is blocked: {function} failed: {failure}"
            )) && message.contains(FINALIZER)
                && message.contains("onDelete: detach"),
            "{function}: {message}"
        );
        assert!(
            kinds(&w.cluster.writes()).contains(&format!("event {}", failure.reason())),
            "{function}: a warning Event"
        );
        if failure.is_terminal() {
            assert_eq!(status, "False");
            assert_eq!(next, Next::Wait, "terminal: no loop");
        } else {
            assert_eq!(status, "True");
            assert!(matches!(next, Next::After(_)), "retried with backoff");
        }
    }
}

#[tokio::test]
async fn deleting_an_object_whose_status_id_another_holds_deletes_only_its_own_resource() {
    let claims = Arc::new(Claims::default());
    let a = World::sharing(System::default(), managed("a"), Arc::clone(&claims));
    a.pass().await;
    // b created its own resource, then someone edited b's status.id to a's.
    let system = System::default();
    system.put("ext-a", "a");
    let b = World::sharing(system, managed("b"), Arc::clone(&claims));
    b.pass().await;
    assert!(b.system.has("ext-b"));
    b.set(|o| o.data["status"]["id"] = json!("ext-a"));
    claims.observe(&b.object());
    b.delete();
    b.system.calls();
    let (pass, _) = b.pass().await;
    assert!(pass.released);
    assert!(b.system.has("ext-a"), "the other object's resource stays");
    assert!(!b.system.has("ext-b"), "its own resource is not leaked");
}

#[tokio::test]
async fn deleting_an_object_whose_only_resource_another_holds_leaves_it_in_place() {
    let claims = Arc::new(Claims::default());
    let a = World::sharing(System::default(), managed("a"), Arc::clone(&claims));
    a.pass().await;
    let hostile = holding_status_id("b", "ext-a");
    let system = System::default();
    system.put("ext-a", "a");
    let b = World::sharing(system, hostile, Arc::clone(&claims));
    claims.observe(&b.object());
    b.delete();
    let (pass, _) = b.pass().await;
    assert!(pass.released);
    assert!(!b.system.calls().contains(&"delete".to_owned()));
    assert!(kinds(&b.cluster.writes()).contains(&"event LeftInPlace".to_owned()));
}

// ---------------------------------------------------------------------------------------
// Failures of each actuator call
// ---------------------------------------------------------------------------------------

/// The object set up so that a pass reaches `function`.
fn reaching(function: &str) -> World {
    let w = match function {
        "list-for-import" => World::new(object(
            "u",
            100,
            json!({"managementPolicy": "unmanaged", "import": {"filter": {"name": "x"}}}),
        )),
        _ => World::new(managed("a")),
    };
    *w.system.reconcilers.lock().unwrap() = vec!["settings".into()];
    if matches!(function, "get-by-id" | "delete") {
        w.system.put("ext-a", "a");
        w.set(|o| {
            o.metadata.finalizers = Some(vec![FINALIZER.into()]);
            o.data["status"] = json!({"id": "ext-a"});
        });
    }
    if function == "delete" {
        w.delete();
    }
    w
}

#[tokio::test]
async fn every_actuator_calls_failure_is_shown_and_retried_by_its_kind() {
    let functions = [
        "get-by-id",
        "list-for-adoption",
        "list-for-import",
        "create",
        "delete",
        "reconcilers",
        "run-reconciler",
        "available",
        "observed",
    ];
    let failures = [
        (
            Some(Failure::Transient("down".into())),
            "TransientError",
            "True",
        ),
        (
            Some(Failure::InvalidConfiguration("bad".into())),
            "InvalidConfiguration",
            "False",
        ),
        (
            Some(Failure::Unrecoverable("gone".into())),
            "UnrecoverableError",
            "False",
        ),
        (None, "TransientError", "True"),
    ];
    for function in functions {
        for (failure, reason, progressing) in &failures {
            if function == "observed" && failure.is_some() {
                continue; // observed() answers JSON, it has no failure of its own
            }
            let w = reaching(function);
            if function == "create" {
                *w.system.create.lock().unwrap() = match failure {
                    Some(f) => CreateMode::Fails(f.clone()),
                    None => CreateMode::Traps,
                };
            } else {
                w.system
                    .failing
                    .lock()
                    .unwrap()
                    .insert(function, failure.clone());
            }
            let case = format!("{function} failing with {failure:?}");
            let (pass, next) = w.pass().await;
            assert!(
                w.system.calls().contains(&function.to_owned()),
                "{case}: not reached"
            );
            assert_eq!(
                pass.failure.as_ref().map(Failure::reason),
                Some(*reason),
                "{case}"
            );
            let (status, got, _) = condition(&w.object(), "Progressing");
            assert_eq!(
                (status.as_str(), got.as_str()),
                (*progressing, *reason),
                "{case}"
            );
            match next {
                Next::After(_) => assert_eq!(
                    *progressing, "True",
                    "{case}: a terminal failure is retried"
                ),
                Next::Wait => assert_eq!(
                    *progressing, "False",
                    "{case}: a transient failure is not retried"
                ),
            }
            assert!(!pass.released, "{case}: the finalizer stays");
            if matches!(function, "get-by-id" | "list-for-adoption") {
                assert!(
                    !w.system.has("ext-a") || function == "get-by-id",
                    "{case}: created after a failed lookup"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Dependencies and plugin versions
// ---------------------------------------------------------------------------------------

fn secret(data: &str) -> DynamicObject {
    serde_json::from_value(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "creds", "namespace": "ns", "resourceVersion": "1"},
        "data": {"apiKey": base64_of(data)}}))
    .unwrap()
}

#[tokio::test]
async fn a_missing_credentials_secret_waits_without_a_plugin_call_then_creates_with_its_data() {
    let mut d = description();
    d.needs_credentials = true;
    let w = World::new(object(
        "a",
        100,
        json!({"resource": {"name": "a"}, "credentialsRef": {"secretName": "creds"}}),
    ));
    let ctx = Context::new(
        Arc::clone(&w.system) as Arc<dyn Actuator>,
        d,
        Settings::default(),
        Arc::clone(&w.cluster) as Arc<dyn ObjectOps>,
        Arc::new(Claims::default()),
    );
    let (pass, next) = reconcile_object(&w.cluster.current(), &ctx).await.unwrap();
    assert_eq!(next, Next::Wait, "a watch on the Secret brings it back");
    assert!(!pass.is_done());
    assert!(w.system.calls().is_empty());
    assert_eq!(
        kinds(&w.cluster.writes()),
        ["metadata(finalizer=true, marker=false)", "status(id=null)"]
    );
    assert!(
        condition(&w.object(), "Progressing")
            .2
            .contains("Secret/creds")
    );

    w.cluster
        .cached
        .lock()
        .unwrap()
        .insert(("Secret".into(), "creds".into()), secret("key"));
    let (pass, _) = reconcile_object(&w.cluster.current(), &ctx).await.unwrap();
    assert!(pass.is_done(), "{pass:?}");
    let writes = w.cluster.writes();
    assert_eq!(
        kinds(&writes)[0],
        "guard Secret",
        "the Secret is guarded at its first use"
    );
    // The finalizer went on while it waited: the create costs the status write alone.
    assert_eq!(objects_writes(&writes), 1, "{:?}", kinds(&writes));
    assert!(w.system.calls().contains(&"create".to_owned()));
}

#[tokio::test]
async fn a_new_plugin_version_re_observes_an_up_to_date_object_once() {
    let (versions, rx) = tokio::sync::watch::channel(0u64);
    let w = World::new(managed("a"));
    let ctx = Context::new(
        Arc::clone(&w.system) as Arc<dyn Actuator>,
        description(),
        Settings {
            reconcile_all: Some(rx),
            ..Settings::default()
        },
        Arc::clone(&w.cluster) as Arc<dyn ObjectOps>,
        Arc::new(Claims::default()),
    );
    reconcile_object(&w.cluster.current(), &ctx).await.unwrap();
    w.system.calls();
    reconcile_object(&w.cluster.current(), &ctx).await.unwrap();
    assert!(w.system.calls().is_empty(), "up to date");
    versions.send(1).unwrap();
    reconcile_object(&w.cluster.current(), &ctx).await.unwrap();
    assert_eq!(
        w.system.calls(),
        ["get-by-id", "reconcilers", "available", "observed"],
        "the new version looks at it"
    );
    reconcile_object(&w.cluster.current(), &ctx).await.unwrap();
    assert!(w.system.calls().is_empty(), "once");
}

// ---------------------------------------------------------------------------------------
// Operator controls: pause, reconcile now
// ---------------------------------------------------------------------------------------

fn annotate(w: &World, key: &str, value: Option<&str>) {
    w.set(|o| {
        let annotations = o.metadata.annotations.get_or_insert_default();
        match value {
            Some(v) => annotations.insert(key.to_owned(), v.to_owned()),
            None => annotations.remove(key),
        };
    });
}

#[tokio::test]
async fn a_paused_object_gets_no_plugin_call_and_says_paused_until_unpaused() {
    let w = World::new(managed("a"));
    annotate(&w, super::annotations::PAUSED, Some("true"));
    let (pass, next) = w.pass().await;
    assert!(pass.paused);
    assert_eq!(next, Next::Wait);
    assert!(w.system.calls().is_empty(), "no call while paused");
    assert_eq!(kinds(&w.cluster.writes()), ["status(id=null)"]);
    let (status, reason, message) = condition(&w.object(), "Progressing");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "Paused"));
    assert!(message.contains("orchard.dev/paused"), "{message}");
    assert!(!w.system.has("ext-a"));
    // Another trigger while paused writes nothing new.
    w.pass().await;
    assert_eq!(w.cluster.writes(), []);

    // Unpaused (the annotation's change is a trigger): the pass the pause held back.
    annotate(&w, super::annotations::PAUSED, None);
    w.pass().await;
    assert_eq!(
        kinds(&w.cluster.writes()),
        [
            "metadata(finalizer=true, marker=false)",
            "event Created",
            "status(id=\"ext-a\")"
        ],
        "unpaused: the create the pause held back, as any create"
    );
    assert!(w.system.calls().contains(&"create".to_owned()));
    assert!(w.system.has("ext-a"));
    assert_eq!(condition(&w.object(), "Progressing").1, "Success");
}

#[tokio::test]
async fn deleting_a_paused_object_waits_with_its_finalizer_and_its_resource() {
    let w = World::new(managed("a"));
    w.pass().await;
    annotate(&w, super::annotations::PAUSED, Some("true"));
    w.delete();
    w.system.calls();
    w.cluster.writes();
    let (pass, next) = w.pass().await;
    assert!(!pass.released);
    assert_eq!(next, Next::Wait);
    assert!(w.system.calls().is_empty());
    assert_eq!(
        kinds(&w.cluster.writes()),
        ["status(id=\"ext-a\")"],
        "only the Paused status"
    );
    assert!(
        w.system.has("ext-a"),
        "a paused object's resource is never deleted"
    );
    assert!(w.object().finalizers().contains(&FINALIZER.to_owned()));

    annotate(&w, super::annotations::PAUSED, Some("false"));
    let (pass, _) = w.pass().await;
    assert!(pass.released);
    assert!(!w.system.has("ext-a"));
    assert_eq!(w.system.calls(), ["get-by-id", "delete", "get-by-id"]);
    assert_eq!(
        kinds(&w.cluster.writes()),
        ["event Deleted", "metadata(finalizer=false, marker=false)"]
    );
}

#[tokio::test]
async fn a_paused_object_that_detaches_is_released_at_once() {
    let w = World::new(object(
        "a",
        100,
        json!({"resource": {"name": "a"}, "managedOptions": {"onDelete": "detach"}}),
    ));
    w.pass().await;
    annotate(&w, super::annotations::PAUSED, Some("true"));
    w.delete();
    w.system.calls();
    w.cluster.writes();
    let (pass, _) = w.pass().await;
    assert!(pass.released);
    assert!(w.system.calls().is_empty());
    assert!(w.system.has("ext-a"));
    assert_eq!(
        kinds(&w.cluster.writes()),
        ["event Detached", "metadata(finalizer=false, marker=false)"],
        "the detach flow as unpaused: released without a status write"
    );
}

#[tokio::test]
async fn each_new_reconcile_now_value_runs_one_full_pass_of_an_up_to_date_object() {
    let w = World::new(managed("a"));
    w.pass().await;
    w.system.calls();
    w.pass().await;
    assert!(w.system.calls().is_empty(), "up to date");

    w.cluster.writes();
    annotate(
        &w,
        super::annotations::RECONCILE_NOW,
        Some("2026-12-01T14:00:00Z"),
    );
    w.pass().await;
    assert_eq!(
        w.system.calls(),
        ["get-by-id", "reconcilers", "available", "observed"]
    );
    assert_eq!(
        kinds(&w.cluster.writes()),
        ["status(id=\"ext-a\")"],
        "a done pass records its lastSyncTime, nothing else"
    );
    w.pass().await;
    assert!(w.system.calls().is_empty(), "the same value asks once");
    assert_eq!(w.cluster.writes(), []);

    annotate(
        &w,
        super::annotations::RECONCILE_NOW,
        Some("2026-12-01T14:05:00Z"),
    );
    w.pass().await;
    assert!(!w.system.calls().is_empty(), "a new value asks again");
}

#[tokio::test]
async fn a_reconcile_now_value_retries_a_terminal_failure() {
    let w = World::new(managed("a"));
    *w.system.create.lock().unwrap() =
        CreateMode::Fails(Failure::InvalidConfiguration("quota: ask ops".into()));
    let (_, next) = w.pass().await;
    assert_eq!(next, Next::Wait);
    w.system.calls();
    w.pass().await;
    assert!(
        w.system.calls().is_empty(),
        "terminal: not retried by itself"
    );

    *w.system.create.lock().unwrap() = CreateMode::Works;
    annotate(&w, super::annotations::RECONCILE_NOW, Some("1"));
    w.pass().await;
    assert_eq!(
        w.system.calls().iter().filter(|c| *c == "create").count(),
        1,
        "one create, now"
    );
    assert_eq!(condition(&w.object(), "Progressing").1, "Success");
}

// ---------------------------------------------------------------------------------------
// Pass views
// ---------------------------------------------------------------------------------------

/// A plugin with pass views: the plugin itself refuses every call (it panics), its views
/// pass them on to the system and count themselves.
struct Viewed {
    system: Arc<System>,
    views: Mutex<u32>,
}

/// One pass's view of [`Viewed`].
struct View(Arc<System>);

macro_rules! outside_the_view {
    () => {
        panic!("a plugin call outside the pass's view")
    };
}

#[async_trait]
impl Actuator for Viewed {
    fn name(&self) -> &'static str {
        "fake"
    }
    fn for_pass(&self) -> Option<Box<dyn Actuator>> {
        *self.views.lock().unwrap() += 1;
        Some(Box::new(View(Arc::clone(&self.system))))
    }
    async fn describe(&self) -> CallResult<Description> {
        Ok(description())
    }
    async fn get_by_id(
        &self,
        _: &ManagedObject,
        _: &str,
    ) -> CallResult<Result<Option<ExternalResource>, Failure>> {
        outside_the_view!()
    }
    async fn list_for_adoption(
        &self,
        _: &ManagedObject,
    ) -> CallResult<Result<Option<Vec<ExternalResource>>, Failure>> {
        outside_the_view!()
    }
    async fn list_for_import(
        &self,
        _: &ManagedObject,
        _: &Value,
    ) -> CallResult<Result<Vec<ExternalResource>, Failure>> {
        outside_the_view!()
    }
    async fn create(&self, _: &ManagedObject) -> CallResult<Result<ExternalResource, Status>> {
        outside_the_view!()
    }
    async fn delete(&self, _: &ManagedObject, _: &ExternalResource) -> CallResult<Status> {
        outside_the_view!()
    }
    async fn reconcilers(
        &self,
        _: &ManagedObject,
        _: &ExternalResource,
    ) -> CallResult<Result<Vec<String>, Failure>> {
        outside_the_view!()
    }
    async fn run_reconciler(
        &self,
        _: &str,
        _: &ManagedObject,
        _: &ExternalResource,
    ) -> CallResult<Status> {
        outside_the_view!()
    }
    async fn available(
        &self,
        _: &ManagedObject,
        _: &ExternalResource,
    ) -> CallResult<(Availability, Status)> {
        outside_the_view!()
    }
    async fn observed(&self, _: &ExternalResource) -> CallResult<Value> {
        outside_the_view!()
    }
}

#[async_trait]
impl Actuator for View {
    fn name(&self) -> &'static str {
        "fake"
    }
    async fn describe(&self) -> CallResult<Description> {
        self.0.describe().await
    }
    async fn get_by_id(
        &self,
        obj: &ManagedObject,
        id: &str,
    ) -> CallResult<Result<Option<ExternalResource>, Failure>> {
        self.0.get_by_id(obj, id).await
    }
    async fn list_for_adoption(
        &self,
        obj: &ManagedObject,
    ) -> CallResult<Result<Option<Vec<ExternalResource>>, Failure>> {
        self.0.list_for_adoption(obj).await
    }
    async fn list_for_import(
        &self,
        obj: &ManagedObject,
        filter: &Value,
    ) -> CallResult<Result<Vec<ExternalResource>, Failure>> {
        self.0.list_for_import(obj, filter).await
    }
    async fn create(&self, obj: &ManagedObject) -> CallResult<Result<ExternalResource, Status>> {
        self.0.create(obj).await
    }
    async fn delete(&self, obj: &ManagedObject, res: &ExternalResource) -> CallResult<Status> {
        self.0.delete(obj, res).await
    }
    async fn reconcilers(
        &self,
        obj: &ManagedObject,
        res: &ExternalResource,
    ) -> CallResult<Result<Vec<String>, Failure>> {
        self.0.reconcilers(obj, res).await
    }
    async fn run_reconciler(
        &self,
        name: &str,
        obj: &ManagedObject,
        res: &ExternalResource,
    ) -> CallResult<Status> {
        self.0.run_reconciler(name, obj, res).await
    }
    async fn available(
        &self,
        obj: &ManagedObject,
        res: &ExternalResource,
    ) -> CallResult<(Availability, Status)> {
        self.0.available(obj, res).await
    }
    async fn observed(&self, res: &ExternalResource) -> CallResult<Value> {
        self.0.observed(res).await
    }
}

#[tokio::test]
async fn every_call_of_a_pass_goes_to_one_view_made_for_that_pass() {
    let system = Arc::new(System {
        reconcilers: Mutex::new(vec!["settings".into()]),
        ..System::default()
    });
    let viewed = Arc::new(Viewed {
        system: Arc::clone(&system),
        views: Mutex::new(0),
    });
    let cluster = Arc::new(Cluster::new(managed("a")));
    let ctx = Context::new(
        Arc::clone(&viewed) as Arc<dyn Actuator>,
        description(),
        Settings::default(),
        Arc::clone(&cluster) as Arc<dyn ObjectOps>,
        Arc::new(Claims::default()),
    );
    // Create: adoption, create, reconcilers, availability and observed state in one view.
    let (created, _) = reconcile_object(&cluster.current(), &ctx).await.unwrap();
    assert!(created.is_done(), "{created:?}");
    assert_eq!(*viewed.views.lock().unwrap(), 1);
    assert_eq!(
        system.calls(),
        [
            "list-for-adoption",
            "create",
            "reconcilers",
            "run-reconciler",
            "available",
            "observed"
        ]
    );

    // Delete: get-by-id, delete and the check that it is gone in the next one.
    cluster.object.lock().unwrap().metadata.deletion_timestamp = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()),
    );
    let (deleted, _) = reconcile_object(&cluster.current(), &ctx).await.unwrap();
    assert!(deleted.released, "{deleted:?}");
    assert_eq!(*viewed.views.lock().unwrap(), 2);
    assert_eq!(system.calls(), ["get-by-id", "delete", "get-by-id"]);
}

// ---------------------------------------------------------------------------------------
// Connection details and drift
// ---------------------------------------------------------------------------------------

fn with_connection_secret(name: &str) -> DynamicObject {
    object(
        name,
        100,
        json!({"resource": {"name": name}, "writeConnectionSecretTo": {"name": format!("{name}-conn")}}),
    )
}

fn everything_but_the_secret(w: &World) -> String {
    let notes: Vec<String> = w
        .cluster
        .notes
        .lock()
        .unwrap()
        .iter()
        .map(|n| format!("{} {}", n.reason, n.message))
        .collect();
    format!("{} {notes:?}", serde_json::to_string(&w.object()).unwrap())
}

#[tokio::test]
async fn connection_details_of_a_create_go_into_the_objects_secret_and_nowhere_else() {
    let w = World::with(
        System {
            create_details: vec![("username", "app"), ("password", "s3cret-Pa55")],
            ..System::default()
        },
        with_connection_secret("a"),
    );
    let (pass, _) = w.pass().await;
    assert!(pass.is_done(), "{pass:?}");
    let writes = kinds(&w.cluster.writes());
    assert_eq!(
        writes,
        [
            "metadata(finalizer=true, marker=false)",
            "event Created",
            "secret a-conn [\"password\", \"username\"]",
            "event ConnectionSecretWritten",
            "status(id=\"ext-a\")",
        ]
    );
    let secrets = w.cluster.secrets.lock().unwrap();
    assert_eq!(secrets["a-conn"].1["password"], b"s3cret-Pa55");
    drop(secrets);
    let seen = everything_but_the_secret(&w);
    assert!(!seen.contains("s3cret-Pa55"), "{seen}");
    assert!(
        seen.contains("wrote password, username to Secret a-conn"),
        "{seen}"
    );
}

#[tokio::test]
async fn connection_details_without_a_secret_named_are_a_warning_naming_only_the_keys() {
    let w = World::with(
        System {
            create_details: vec![("password", "s3cret-Pa55")],
            ..System::default()
        },
        managed("a"),
    );
    let (pass, _) = w.pass().await;
    assert!(pass.is_done(), "{pass:?}");
    assert!(w.cluster.secrets.lock().unwrap().is_empty());
    let seen = everything_but_the_secret(&w);
    assert!(
        seen.contains("ConnectionDetailsDropped") && seen.contains("(password)"),
        "{seen}"
    );
    assert!(!seen.contains("s3cret-Pa55"), "{seen}");
}

#[tokio::test]
async fn connection_details_whose_write_failed_are_written_at_the_next_pass() {
    let w = World::with(
        System {
            create_details: vec![("password", "s3cret-Pa55")],
            ..System::default()
        },
        with_connection_secret("a"),
    );
    *w.cluster.fail_secret.lock().unwrap() = 1;
    let (pass, next) = w.pass().await;
    assert_eq!(
        pass.failure.as_ref().map(Failure::reason),
        Some("TransientError"),
        "{pass:?}"
    );
    assert!(matches!(next, Next::After(_)), "retried with backoff");
    assert_eq!(
        w.ctx.remembered(),
        2,
        "a pass record and the pending details"
    );
    let (_, reason, message) = condition(&w.object(), "Progressing");
    assert_eq!(reason, "TransientError");
    assert!(message.contains("(password) to Secret a-conn"), "{message}");
    assert!(!message.contains("s3cret"), "{message}");
    // The next pass creates nothing and reports nothing new: the kept details are written.
    w.cluster.writes();
    w.system.calls();
    let (pass, _) = w.pass().await;
    assert!(pass.is_done(), "{pass:?}");
    assert!(!w.system.calls().contains(&"create".to_owned()));
    assert_eq!(
        w.cluster.secrets.lock().unwrap()["a-conn"].1["password"],
        b"s3cret-Pa55"
    );
    assert_eq!(w.ctx.remembered(), 1, "nothing pending any more");
}

#[tokio::test]
async fn a_connection_secret_the_object_does_not_own_is_never_touched() {
    let w = World::with(
        System {
            create_details: vec![("password", "s3cret-Pa55")],
            ..System::default()
        },
        with_connection_secret("a"),
    );
    w.cluster.secrets.lock().unwrap().insert(
        "a-conn".into(),
        (
            false,
            BTreeMap::from([("tls.key".into(), b"theirs".to_vec())]),
        ),
    );
    let (pass, next) = w.pass().await;
    assert_eq!(
        pass.failure.as_ref().map(Failure::reason),
        Some("InvalidConfiguration")
    );
    assert_eq!(next, Next::Wait, "terminal until the spec changes");
    let secrets = w.cluster.secrets.lock().unwrap();
    assert_eq!(secrets["a-conn"].1.len(), 1, "left as it was");
    drop(secrets);
    let (_, _, message) = condition(&w.object(), "Progressing");
    assert!(
        message.starts_with("spec.writeConnectionSecretTo.name: Secret a-conn exists and this object does not own it"),
        "{message}"
    );
}

#[tokio::test]
async fn a_corrected_drift_is_an_event_and_status_drift_with_secret_values_masked() {
    let w = World::with(
        System {
            reconcilers: Mutex::new(vec!["settings".into()]),
            drifts: vec![
                ("kind", "\"Master\"", "\"Native\"", false),
                ("apiToken", "\"old-t0ken\"", "\"new-t0ken\"", true),
            ],
            ..System::default()
        },
        managed("a"),
    );
    let (pass, _) = w.pass().await;
    assert!(pass.is_done(), "{pass:?}");
    let obj = w.object();
    let drift = &obj.data["status"]["drift"];
    assert_eq!(
        drift["fields"],
        json!([
            {"field": "kind", "observed": "\"Master\"", "desired": "\"Native\""},
            {"field": "apiToken", "observed": "\"***\"", "desired": "\"***\""}
        ])
    );
    assert!(drift["time"].is_string());
    let notes = w.cluster.notes.lock().unwrap().clone();
    let corrected = notes.iter().find(|n| n.reason == "DriftCorrected").unwrap();
    assert_eq!(
        corrected.message,
        "changed back to the spec: kind: \"Master\" → \"Native\"; apiToken: \"***\" → \"***\""
    );
    let seen = everything_but_the_secret(&w);
    assert!(!seen.contains("t0ken"), "{seen}");
}

// ---------------------------------------------------------------------------------------
// The pass trace and the own view's changes (sharding)
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn the_pass_trace_brackets_every_pass_and_changes_no_write_or_call() {
    // (case, how the object is before the pass)
    type Setup = fn(&World);
    let cases: [(&str, Setup); 4] = [
        ("a new object", |_| {}),
        ("an object paused", |w| {
            w.set(|o| {
                o.annotations_mut()
                    .insert("orchard.dev/paused".into(), "true".into());
            });
        }),
        ("an object deleted", World::delete),
        ("an invalid spec", |w| {
            w.set(|o| o.data["spec"] = json!({"managementPolicy": 7}));
        }),
    ];
    for (case, setup) in cases {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace");
        let trace = Arc::new(super::flow::trace::PassTrace::open(&path, "host-1").unwrap());
        let (plain, traced) = (World::new(managed("a")), World::new(managed("a")));
        setup(&plain);
        setup(&traced);
        let ctx = traced.context(Settings {
            pass_trace: Some(trace),
            ..Settings::default()
        });
        for _ in 0..2 {
            plain.pass().await;
            super::flow::reconcile(Arc::new(traced.object()), Arc::clone(&ctx))
                .await
                .unwrap();
        }
        assert_eq!(
            kinds(&traced.cluster.writes()),
            kinds(&plain.cluster.writes()),
            "{case}"
        );
        assert_eq!(traced.system.calls(), plain.system.calls(), "{case}");
        let text = std::fs::read_to_string(&path).unwrap();
        let marks: Vec<(&str, &str)> = text
            .lines()
            .map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                assert_eq!(f[2..], ["host-1", "fake", "ns/a"], "{case}: {l}");
                (f[0], f[1])
            })
            .collect();
        let what: Vec<&str> = marks.iter().map(|m| m.1).collect();
        assert_eq!(what, ["begin", "end", "begin", "end"], "{case}");
        assert!(marks.windows(2).all(|p| p[0].0 <= p[1].0), "{case}: {text}");
    }
}

#[test]
fn the_own_view_feeds_the_claims_only_when_not_sharded() {
    use super::machinery::cache::Change;
    use super::machinery::triggers::Triggers;
    let mut holder = managed("a");
    holder.data["status"] = json!({"id": "r-1"});
    let holder = Arc::new(holder);
    // (sharded, change, claims held after it, object to reconcile)
    let cases = [
        (false, Change::Applied(Arc::clone(&holder)), 1, true),
        (true, Change::Applied(Arc::clone(&holder)), 0, true),
        (false, Change::Deleted(Arc::clone(&holder)), 0, false),
        (true, Change::Deleted(Arc::clone(&holder)), 1, false),
    ];
    for (sharded, change, held, reconciles) in cases {
        let claims = Claims::default();
        let triggers = Triggers::new("orchard.dev/fake");
        // The claims index as the skeleton (sharded) or the own view (not) left it.
        claims.observe(&holder);
        if !matches!(change, Change::Deleted(_)) {
            claims.forget(&holder);
        }
        let label = format!("sharded={sharded} {change:?}");
        let out = super::own_change(change, &claims, &triggers, sharded);
        assert_eq!(claims.len(), held, "{label}");
        assert_eq!(out.is_some(), reconciles, "{label}");
    }
}

#[test]
fn the_own_views_subscribers_decide_from_spec_and_id_what_they_decide_from_the_whole_object() {
    use super::machinery::cache::{CachedObject, Change, Reads};
    use super::machinery::dependents::DependentsIndex;
    use super::machinery::triggers::Triggers;
    let (d, zone) = zone_user();
    // A served thing as the watch gives it: its status holds more than the id.
    let served = |mut thing: Value| -> Value {
        thing["metadata"]["uid"] = json!("uid-thing");
        thing["metadata"]["finalizers"] = json!(["orchard.dev/fake"]);
        thing["status"]["conditions"] = json!([{"type": "Available", "status": "True"}]);
        thing["status"]["resource"] = json!({"serial": 1});
        thing
    };
    let managed = served(thing("t", "ns", "z", false));
    let mut unmanaged = managed.clone();
    unmanaged["spec"]["managementPolicy"] = json!("unmanaged");
    let mut deleting = managed.clone();
    deleting["metadata"]["deletionTimestamp"] = json!("2026-12-08T00:00:00Z");
    deleting["metadata"]["finalizers"] = json!(["orchard.dev/fake", "other.dev/keep"]);
    let mut paused = managed.clone();
    paused["metadata"]["annotations"] = json!({"orchard.dev/paused": "true"});
    let mut owned = served(thing("t", "ns", "z", true));
    owned["status"]["id"] = json!("id-owned");
    // The next event of each row: the host's own status write (a condition changed).
    let status_written = |mut thing: Value| -> Value {
        thing["status"]["conditions"][0]["status"] = json!("False");
        thing
    };
    let probe: DynamicObject = serde_json::from_value(thing("probe", "ns", "z", false)).unwrap();
    // (case, the object, whether it holds its id (an object being deleted holds none), whether
    // it is a dependent of zone z (one its zone owns is not))
    for (case, manifest, holds, depends) in [
        ("managed", managed, true, true),
        ("unmanaged", unmanaged, true, true),
        ("deleting", deleting, false, true),
        ("paused", paused, true, true),
        ("owned by its zone", owned, true, false),
    ] {
        let decide = |reads: Reads| {
            let read = |m: &Value| -> Arc<DynamicObject> {
                let cached: CachedObject = serde_json::from_value(m.clone()).unwrap();
                Arc::new(cached.read(reads))
            };
            let (first, next) = (read(&manifest), read(&status_written(manifest.clone())));
            let (claims, triggers) = (Claims::default(), Triggers::new("orchard.dev/fake"));
            let index = DependentsIndex::new(d.clone());
            index.observe(&first);
            let reconciles = [first, next].map(|obj| {
                super::own_change(Change::Applied(obj), &claims, &triggers, false).is_some()
            });
            let id = manifest["status"]["id"].as_str().unwrap();
            let dependents: Vec<String> = index
                .of("Zone", &zone)
                .into_iter()
                .map(|k| k.name)
                .collect();
            (
                reconciles,
                claims.other_holder(&probe, id),
                claims.senior_holder(&probe, id),
                dependents,
            )
        };
        let whole = decide(Reads::Whole);
        assert_eq!(decide(Reads::SpecAndId), whole, "{case}");
        // What they decide is not vacuous: the first sight reconciles, the host's own
        // status write does not, and the id has its holder unless the object is going.
        assert_eq!(whole.0, [true, false], "{case}");
        assert_eq!(
            whole.1.map(|h| h.key),
            holds.then(|| "ns/t".to_owned()),
            "{case}"
        );
        assert_eq!(
            whole.3,
            if depends {
                vec!["t".to_owned()]
            } else {
                vec![]
            },
            "{case}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Dependents: the index of the controller and of the guards
// ---------------------------------------------------------------------------------------

/// A plugin whose objects name a `Zone` in `spec.resource.zoneRef`, and zone `ns/z`.
fn zone_user() -> (Description, DynamicObject) {
    let mut d = description();
    d.dependencies = vec![crate::actuator::DependencyDecl {
        name: "zone".into(),
        field: "zoneRef".into(),
        kind: "Zone".into(),
        for_create: true,
        for_delete: false,
        guard_deletion: true,
    }];
    let zone = serde_json::from_value(json!({
        "apiVersion": "fake.orchard.dev/v1", "kind": "Zone",
        "metadata": {"name": "z", "namespace": "ns", "uid": "zone-uid"},
    }))
    .unwrap();
    (d, zone)
}

/// A `Thing` naming zone `zone_ref`, owned by zone `ns/z` or not.
fn thing(name: &str, namespace: &str, zone_ref: &str, owned: bool) -> Value {
    let owners = if owned {
        json!([{"apiVersion": "fake.orchard.dev/v1", "kind": "Zone", "name": "z", "uid": "zone-uid"}])
    } else {
        json!([])
    };
    json!({
        "apiVersion": "fake.orchard.dev/v1", "kind": "Thing",
        "metadata": {"name": name, "namespace": namespace, "ownerReferences": owners},
        "spec": {"resource": {"zoneRef": zone_ref}},
        "status": {"id": format!("id-{name}")},
    })
}

/// (name, namespace, the zone it names, owned by the zone): only the first is a dependent of
/// zone `ns/z`.
const THINGS: [(&str, &str, &str, bool); 4] = [
    ("uses-it", "ns", "z", false),
    ("other-namespace", "other", "z", false),
    ("other-zone", "ns", "y", false),
    ("owned-by-it", "ns", "z", true),
];

#[test]
fn the_dependents_index_finds_the_objects_naming_a_dependency_and_follows_their_changes() {
    use super::machinery::dependents::DependentsIndex;
    let (d, zone) = zone_user();
    let object = |name: &str, namespace: &str, zone_ref: &str, owned: bool| -> DynamicObject {
        serde_json::from_value(thing(name, namespace, zone_ref, owned)).unwrap()
    };
    let index = DependentsIndex::new(d);
    for (name, namespace, zone_ref, owned) in THINGS {
        index.observe(&object(name, namespace, zone_ref, owned));
    }
    let names = |index: &DependentsIndex| -> Vec<String> {
        let mut names: Vec<String> = index
            .of("Zone", &zone)
            .into_iter()
            .map(|k| k.name)
            .collect();
        names.sort();
        names
    };
    assert_eq!(names(&index), ["uses-it"]);
    // "other-zone" moves to z; "uses-it" moves away.
    index.observe(&object("other-zone", "ns", "z", false));
    index.observe(&object("uses-it", "ns", "y", false));
    assert_eq!(names(&index), ["other-zone"]);
    // Every object gone: nothing left behind.
    for (name, namespace, ..) in THINGS {
        index.forget(&object(name, namespace, "", false));
    }
    assert!(index.is_empty());
    assert!(names(&index).is_empty());
}

#[test]
fn a_guarded_dependency_is_released_only_while_deleting_and_once_no_dependent_uses_it() {
    use super::machinery::dependents::DependentsIndex;
    use super::machinery::guard::{Verdict, verdict};
    const GUARD: &str = "orchard.dev/fake-guard";
    let (d, zone) = zone_user();
    let deleting = |finalizers: &[&str]| {
        let mut z = zone.clone();
        z.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::now(),
        ));
        z.metadata.finalizers = Some(finalizers.iter().map(|f| (*f).to_owned()).collect());
        z
    };
    let user: DynamicObject = serde_json::from_value(thing("uses-it", "ns", "z", false)).unwrap();
    let owned: DynamicObject =
        serde_json::from_value(thing("owned-by-it", "ns", "z", true)).unwrap();
    // (case, the dependency, the dependents indexed, verdict)
    let mut guarded = zone.clone();
    guarded.metadata.finalizers = Some(vec![GUARD.to_owned()]);
    let cases: [(&str, DynamicObject, Vec<&DynamicObject>, Verdict); 5] = [
        (
            "not being deleted",
            guarded,
            vec![&user],
            Verdict::Untouched,
        ),
        (
            "deleting, guarded by another plugin",
            deleting(&["other"]),
            vec![],
            Verdict::Untouched,
        ),
        (
            "deleting, in use",
            deleting(&[GUARD]),
            vec![&user, &owned],
            Verdict::InUse(1),
        ),
        (
            "deleting, used only by what it owns",
            deleting(&[GUARD]),
            vec![&owned],
            Verdict::Release,
        ),
        (
            "deleting, unused",
            deleting(&[GUARD]),
            vec![],
            Verdict::Release,
        ),
    ];
    for (case, dep, users, expected) in cases {
        let index = DependentsIndex::new(d.clone());
        for u in users {
            index.observe(u);
        }
        assert_eq!(verdict(&dep, GUARD, "Zone", &index), expected, "{case}");
    }
}

// ---------------------------------------------------------------------------------------
// Workers: a pass per object the queue gives, and what the queue holds after it
// ---------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_worker_passes_the_object_as_cached_and_schedules_what_the_pass_asks_for() {
    use super::machinery::queue::{Key, WorkQueue};
    use tokio_util::sync::CancellationToken;
    // (case, setup, the object is in the cache, the worker's pass is a plain pass, queued after)
    type Setup = fn(&World);
    let cases: [(&str, Setup, bool, bool, Option<usize>); 3] = [
        ("a new object", |_| {}, true, true, None),
        (
            "an object gone from the cache",
            |_| {},
            false,
            false,
            Some(0),
        ),
        (
            "an object whose status the apiserver refuses twice (an API error)",
            |w| *w.cluster.refuse_status.lock().unwrap() = 2,
            true,
            false,
            Some(1),
        ),
    ];
    for (case, setup, cached, plain_pass, queued) in cases {
        let (plain, w) = (World::new(managed("a")), World::new(managed("a")));
        let (_, next) = plain.pass().await;
        setup(&w);
        let ctx = w.context(Settings::default());
        let (queue, stop) = (WorkQueue::default(), CancellationToken::new());
        let key = Key::of(&w.object());
        queue.trigger(key.clone());
        // The first lookup stops the worker: it ends once that pass is done.
        let lookup = |_: &Key| {
            stop.cancel();
            cached.then(|| Arc::new(w.object()))
        };
        super::work(&queue, lookup, &OwnWrites::default(), &ctx, &stop).await;
        if plain_pass {
            assert_eq!(
                kinds(&w.cluster.writes()),
                kinds(&plain.cluster.writes()),
                "{case}"
            );
            assert_eq!(w.system.calls(), plain.system.calls(), "{case}");
        } else if !cached {
            assert!(w.cluster.writes().is_empty(), "{case}");
            assert!(w.system.calls().is_empty(), "{case}");
        }
        let expected = queued.unwrap_or(usize::from(next != Next::Wait));
        assert_eq!(queue.len(), expected, "{case}: entries left in the queue");
        // Whatever is queued waits for its time: none is due at once.
        let running = CancellationToken::new();
        let due = tokio::select! {
            biased;
            k = queue.next(&running) => k,
            () = tokio::task::yield_now() => None,
        };
        assert_eq!(due, None, "{case}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_worker_holds_back_an_object_cached_before_the_hosts_own_last_write_until_the_watch_brings_it()
 {
    use super::machinery::queue::{Key, WorkQueue};
    use tokio_util::sync::CancellationToken;
    let w = World::new(managed("a"));
    let ctx = w.context(Settings::default());
    let at = |version: &str| {
        let mut obj = w.object();
        obj.metadata.resource_version = Some(version.to_owned());
        obj
    };
    let writes = OwnWrites::default();
    // The host's last pass wrote the object (its status with status.id) at version 12; the
    // cache still holds version 10 when a dependency's change brings the object due.
    writes.wrote(&super::machinery::writes::Written::from(&at("12")));
    let queue = WorkQueue::default();
    let key = Key::of(&w.object());
    let stop = CancellationToken::new();
    queue.trigger(key.clone());
    let stale = |_: &Key| {
        stop.cancel();
        Some(Arc::new(at("10")))
    };
    super::work(&queue, stale, &writes, &ctx, &stop).await;
    assert!(
        w.system.calls().is_empty(),
        "no plugin call on a stale object"
    );
    assert!(w.cluster.writes().is_empty(), "no write on a stale object");
    assert_eq!(queue.len(), 1, "it waits in the queue");
    let idle = CancellationToken::new();
    let due = tokio::select! {
        biased;
        k = queue.next(&idle) => k,
        () = tokio::task::yield_now() => None,
    };
    assert_eq!(due, None, "it is not due before the cache holds the write");
    let held_back = format!(
        "orchard_passes_held_back_total{{plugin=\"{}\"}}",
        ctx.plugin()
    );
    assert!(
        crate::ops::metrics::global()
            .encode()
            .lines()
            .any(|l| l.starts_with(&held_back) && !l.ends_with(" 0")),
        "the held-back pass is counted"
    );

    // The watch brings version 12: the controller's feed wakes the object, and it is passed.
    assert!(!writes.cached(&at("11")), "an older event wakes nothing");
    assert!(
        writes.cached(&at("12")),
        "the write's own event wakes the pass"
    );
    queue.trigger(key.clone());
    let stop = CancellationToken::new();
    let fresh = |_: &Key| {
        stop.cancel();
        Some(Arc::new(at("12")))
    };
    super::work(&queue, fresh, &writes, &ctx, &stop).await;
    assert!(!w.system.calls().is_empty(), "the fresh object is passed");
    assert!(writes.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_worker_passes_an_object_as_cached_once_the_cache_has_lagged_past_its_limit_and_counts_it()
 {
    use super::machinery::queue::{Key, WorkQueue};
    use tokio_util::sync::CancellationToken;
    let w = World::new(managed("a"));
    let ctx = w.context(Settings::default());
    let stale = {
        let mut obj = w.object();
        obj.metadata.resource_version = Some("10".to_owned());
        obj
    };
    let writes = OwnWrites::default();
    let mut written = stale.clone();
    written.metadata.resource_version = Some("12".to_owned());
    writes.wrote(&super::machinery::writes::Written::from(&written));
    let queue = WorkQueue::default();
    let key = Key::of(&stale);
    let run_once = || async {
        let stop = CancellationToken::new();
        queue.trigger(key.clone());
        let lookup = |_: &Key| {
            stop.cancel();
            Some(Arc::new(stale.clone()))
        };
        super::work(&queue, lookup, &writes, &ctx, &stop).await;
    };
    let counted = || {
        let series = format!(
            "orchard_passes_on_stale_cache_total{{plugin=\"{}\"}} ",
            ctx.plugin()
        );
        crate::ops::metrics::global()
            .encode()
            .lines()
            .find_map(|l| l.strip_prefix(&series)?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let before = counted();
    run_once().await;
    assert!(w.system.calls().is_empty(), "held back at first");
    assert!(w.cluster.writes().is_empty());
    tokio::time::advance(super::machinery::writes::CATCH_UP).await;
    run_once().await;
    // Passed as cached, as it would be without the rule: a new object is created.
    assert_eq!(
        w.system.calls(),
        [
            "list-for-adoption",
            "create",
            "reconcilers",
            "available",
            "observed"
        ]
    );
    assert_eq!(
        kinds(&w.cluster.writes()),
        [
            "metadata(finalizer=true, marker=false)",
            "event Created",
            "status(id=\"ext-a\")"
        ]
    );
    assert!(counted() - before >= 1.0, "the late cache is counted");
    assert!(writes.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_worker_let_through_passes_the_object_as_the_cache_holds_it_after_the_check() {
    use super::machinery::queue::{Key, WorkQueue};
    use tokio_util::sync::CancellationToken;
    // The watch brought the host's write in (and took its entry away) between the worker's
    // first lookup and its check: the first copy predates the write, lacks status.id.
    let w = World::new(managed("a"));
    let (_, _) = w.pass().await;
    let fresh = w.object();
    assert!(
        fresh.data["status"]["id"].is_string(),
        "the first pass recorded the id"
    );
    let mut stale = fresh.clone();
    stale.data["status"] = json!({});
    let ctx = w.context(Settings::default());
    let (queue, stop) = (WorkQueue::default(), CancellationToken::new());
    let key = Key::of(&fresh);
    queue.trigger(key.clone());
    // (The first pass's calls and writes.)
    w.system.calls();
    w.cluster.writes();
    let lookups = std::sync::atomic::AtomicUsize::new(0);
    let lookup = |_: &Key| {
        stop.cancel();
        let first = lookups.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0;
        Some(Arc::new(if first { stale.clone() } else { fresh.clone() }))
    };
    super::work(&queue, lookup, &OwnWrites::default(), &ctx, &stop).await;
    // As the cache holds it, the object is up to date: skipped, no call, no write (the first
    // copy, with neither id nor conditions, would have been created again).
    assert_eq!(w.system.calls(), Vec::<String>::new());
    assert!(w.cluster.writes().is_empty());
}

// ---------------------------------------------------------------------------------------
// The journal: each way a pass ends, as `orchard explain` reads it
// ---------------------------------------------------------------------------------------

/// The functions a journal entry lists.
fn journaled_calls(j: &crate::ops::journal::ObjectJournal) -> Vec<&str> {
    j.calls.iter().map(|c| &*c.function).collect()
}

#[tokio::test]
async fn each_way_a_pass_ends_is_journaled_with_its_calls_and_next_pass_at_no_extra_write_or_call()
{
    // Created: success, the calls of the creating pass, next at a change.
    let w = World::new(managed("a"));
    let j = w.journaled_pass().await.expect("journaled");
    assert_eq!(
        kinds(&w.cluster.writes()),
        [
            "metadata(finalizer=true, marker=false)",
            "event Created",
            "status(id=\"ext-a\")",
        ]
    );
    assert_eq!(w.system.calls(), CREATING_PASS);
    assert_eq!(
        (&*j.passes[0].outcome, &*j.state),
        ("success", "up_to_date")
    );
    assert_eq!(journaled_calls(&j), CREATING_PASS);
    assert!(j.calls.iter().all(|c| c.outcome == "ok"));
    let next = j.next.as_ref().unwrap();
    assert_eq!((next.at, &*next.why), (None, "change"));
    assert_eq!(
        (j.instance.as_str(), j.plugin.as_str(), j.kind.as_str()),
        ("orchard", "fake", "Thing")
    );
    assert_eq!(
        j.claim,
        Some(crate::ops::journal::Claim {
            id: "ext-a".into(),
            other: None,
            other_holds_it: false,
        }),
        "the id it recorded, held alone"
    );

    // Up to date: skipped, no write, no call; the creating pass's calls stay.
    let j = w.journaled_pass().await.unwrap();
    assert_eq!(w.cluster.writes(), []);
    assert!(w.system.calls().is_empty());
    assert_eq!((j.passes_total, &*j.passes[1].outcome), (2, "up-to-date"));
    assert_eq!(journaled_calls(&j), CREATING_PASS);

    // Paused: one status write, no call.
    annotate(&w, super::annotations::PAUSED, Some("true"));
    let j = w.journaled_pass().await.unwrap();
    assert_eq!(kinds(&w.cluster.writes()), ["status(id=\"ext-a\")"]);
    assert!(w.system.calls().is_empty());
    assert_eq!((&*j.passes[2].outcome, &*j.state), ("paused", "paused"));
    assert_eq!(j.passes.len(), crate::ops::journal::PASSES, "bounded");

    // Deleted: released, and forgotten.
    annotate(&w, super::annotations::PAUSED, None);
    w.delete();
    assert_eq!(w.journaled_pass().await, None);
    assert_eq!(w.system.calls(), ["get-by-id", "delete", "get-by-id"]);
    assert_eq!(
        kinds(&w.cluster.writes()),
        ["event Deleted", "metadata(finalizer=false, marker=false)"]
    );

    // A transient failure: retried at a time, unsettled since this pass, its message kept.
    let failing = World::with(
        System::creating(CreateMode::Fails(Failure::Transient(
            "PowerDNS is down".into(),
        ))),
        managed("f"),
    );
    let j = failing.journaled_pass().await.unwrap();
    assert_eq!(failing.system.calls(), ["list-for-adoption", "create"]);
    assert_eq!(metadata_writes(&kinds(&failing.cluster.writes())), 1);
    assert_eq!(
        (&*j.passes[0].outcome, &*j.state),
        ("TransientError", "retrying")
    );
    assert_eq!(j.message.as_deref(), Some("PowerDNS is down"));
    let next = j.next.as_ref().unwrap();
    assert!(next.at.is_some() && next.why == "retry", "{next:?}");
    assert_eq!(j.unsettled_since, Some(j.passes[0].at));

    // A terminal failure: no call, and the next pass only at a change.
    let terminal = World::new(object(
        "t",
        100,
        json!({"resyncPeriod": "often", "resource": {"name": "t"}}),
    ));
    let j = terminal.journaled_pass().await.unwrap();
    assert!(terminal.system.calls().is_empty());
    assert_eq!(
        (&*j.passes[0].outcome, &*j.state),
        ("InvalidConfiguration", "failed")
    );
    let next = j.next.as_ref().unwrap();
    assert_eq!((next.at, &*next.why), (None, "change"));
    assert!(
        j.message
            .as_deref()
            .unwrap()
            .starts_with("spec.resyncPeriod")
    );

    // Waiting on the external system: progressing, polled at a time.
    let importing = World::new(object(
        "u",
        100,
        json!({"managementPolicy": "unmanaged", "import": {"filter": {"name": "x"}}}),
    ));
    let j = importing.journaled_pass().await.unwrap();
    assert_eq!(importing.system.calls(), ["list-for-import"]);
    assert_eq!(
        (&*j.passes[0].outcome, &*j.state),
        ("progressing", "progressing")
    );
    let next = j.next.as_ref().unwrap();
    assert!(next.at.is_some() && next.why == "poll", "{next:?}");

    // The apiserver refused the status and its minimal replacement: an API error, retried by
    // the controller's backoff.
    let refused = World::new(managed("r"));
    *refused.cluster.refuse_status.lock().unwrap() = 2;
    let j = refused.journaled_pass().await.unwrap();
    assert_eq!(refused.system.calls(), CREATING_PASS);
    assert_eq!(
        (&*j.passes[0].outcome, &*j.state),
        ("api-error", "retrying")
    );
    assert!(
        j.message.as_deref().unwrap().contains("413"),
        "{:?}",
        j.message
    );
    let next = j.next.as_ref().unwrap();
    assert_eq!((next.at, &*next.why), (None, "retry"));
}

/// Every pass is a trace of its own (a root span, never the controller's child) naming its
/// object, plugin and outcome; a failed pass is an error span that says why ([`crate::ops::traces`]).
#[tokio::test]
async fn every_pass_is_a_trace_of_its_own_naming_its_object_and_outcome_and_a_failure_says_why() {
    use opentelemetry::trace::Status;
    use tracing_subscriber::prelude::*;

    let (telemetry, spans) = crate::ops::traces::recorded::telemetry();
    let _traced =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(telemetry.layer()));
    let controller = tracing::info_span!("controller").entered();

    let w = World::new(managed("a"));
    w.journaled_pass().await;
    let quota = World::with(
        System::creating(CreateMode::Fails(Failure::Transient("quota".into()))),
        managed("b"),
    );
    quota.journaled_pass().await;
    drop(controller);

    let passes: Vec<_> = spans
        .take()
        .into_iter()
        .filter(|s| s.name == "reconcile Thing")
        .collect();
    assert_eq!(passes.len(), 2, "{passes:#?}");
    assert_ne!(
        passes[0].span_context.trace_id(),
        passes[1].span_context.trace_id()
    );
    let attribute = |span: &opentelemetry_sdk::trace::SpanData, key: &str| {
        span.attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| kv.value.to_string())
    };
    for (pass, object, outcome) in [
        (&passes[0], "a", "success"),
        (&passes[1], "b", "TransientError"),
    ] {
        assert_eq!(
            pass.parent_span_id,
            opentelemetry::trace::SpanId::INVALID,
            "a root, not the controller's child"
        );
        assert_eq!(attribute(pass, "object").as_deref(), Some(object));
        assert_eq!(attribute(pass, "plugin").as_deref(), Some("fake"));
        assert_eq!(attribute(pass, "outcome").as_deref(), Some(outcome));
    }
    assert_eq!(passes[0].status, Status::Unset);
    assert!(
        matches!(&passes[1].status, Status::Error { description } if description.contains("quota")),
        "{:?}",
        passes[1].status
    );
}
