//! The rules against a fake external system behind a fake [`Actuator`]: one well-behaved
//! plugin, and one way to break each rule.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::*;
use crate::actuator::{
    ApiVersion, Availability, CallError, CallResult, Convertible, Description, ExternalResource,
    Failure, Shortcuts, Status,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Break {
    Nothing,
    ImpureDescribe,
    DuplicateCreate,
    AdoptionMisses,
    DeleteErrorsWhenGone,
    DeleteAlwaysFails,
    CreateFails,
    ReconcilerNeverSettles,
    ObservedOffSchema,
    ImportBySuffix,
    UnknownIdFails,
    FlakyCreate,
    /// An upsert: a create for a name that exists writes the spec over it (what create sets
    /// replaces what the reconcilers set) and answers it.
    PutCreate,
    /// An upsert that writes the same content but bumps the resource's revision (etcd's
    /// `put`): only the state shows it.
    PutCreateBumpsRevision,
    /// An upsert that writes its object's ownership over the resource; adoption matches on
    /// the owner, which no answer shows.
    PutCreateTakesOwnership,
    /// A create for a name that exists answers the existing resource untouched.
    CreateAnswersExisting,
    /// get-by-id answers a field that changes on every read (a fetch counter).
    VolatileState,
    /// Two versions, v1 `{name}` and v2 `{title}`, converted both ways.
    Converts,
    /// Two versions, but v2 back to v1 drops every field.
    LossyConversion,
    /// `delete` answers done, but the resource goes only after the next `get-by-id` (an
    /// asynchronous delete).
    AsyncDelete,
}

/// Resources by id; each has the `name` of the object that made it and a `kind`.
#[derive(Debug, Default)]
struct System {
    resources: BTreeMap<String, Value>,
    describes: u32,
    creates: u32,
    reads: u32,
    /// The uid of the object each resource belongs to (`PutCreateTakesOwnership`).
    owners: BTreeMap<String, String>,
    /// Deleted, still found by the next `get-by-id` (`AsyncDelete`).
    deleting: Option<String>,
}

struct Fake {
    breaks: Break,
    /// What `describe` declares (the well-behaved fake keeps both promises).
    shortcuts: Shortcuts,
    system: Mutex<System>,
}

impl Fake {
    fn new(breaks: Break) -> Self {
        Self {
            breaks,
            shortcuts: Shortcuts::default(),
            system: Mutex::new(System::default()),
        }
    }

    fn declaring(self, shortcuts: Shortcuts) -> Self {
        Self { shortcuts, ..self }
    }

    fn with(self, id: &str, state: Value) -> Self {
        self.system
            .lock()
            .unwrap()
            .resources
            .insert(id.into(), state);
        self
    }

    fn ids(&self) -> Vec<String> {
        self.system
            .lock()
            .unwrap()
            .resources
            .keys()
            .cloned()
            .collect()
    }

    fn res(id: &str, state: &Value) -> ExternalResource {
        ExternalResource {
            id: id.to_owned(),
            state: state.clone(),
        }
    }

    fn spec_name(obj: &ManagedObject) -> Option<String> {
        obj.spec.as_ref()?["name"].as_str().map(str::to_owned)
    }
}

#[async_trait]
impl Actuator for Fake {
    fn name(&self) -> &'static str {
        "fake"
    }

    async fn describe(&self) -> CallResult<Description> {
        let mut sys = self.system.lock().unwrap();
        sys.describes += 1;
        let version = if (self.breaks == Break::ImpureDescribe) && sys.describes > 1 {
            "v2"
        } else {
            "v1"
        };
        Ok(Description {
            name: "fake".into(),
            group: "fake.orchard.dev".into(),
            version: version.into(),
            kind: "Thing".into(),
            plural: "things".into(),
            resource_schema: json!({"type": "object", "required": ["name"],
                "properties": {"name": {"type": "string"}, "kind": {"type": "string"}}}),
            filter_schema: Some(
                json!({"type": "object", "properties": {"name": {"type": "string"}}}),
            ),
            observed_schema: json!({"type": "object", "properties": {"name": {"type": "string"}, "kind": {"type": "string"}}}),
            dependencies: vec![],
            needs_credentials: false,
            versions: if matches!(self.breaks, Break::Converts | Break::LossyConversion) {
                let at = |name: &str, storage| ApiVersion {
                    name: name.into(),
                    resource_schema: json!({"type": "object", "required": ["name"],
                        "properties": {"name": {"type": "string"}, "kind": {"type": "string"}}}),
                    filter_schema: Some(
                        json!({"type": "object", "properties": {"name": {"type": "string"}}}),
                    ),
                    observed_schema: json!({"type": "object", "properties": {"name": {"type": "string"}, "kind": {"type": "string"}}}),
                    storage,
                };
                vec![at("v1", true), at("v2", false)]
            } else {
                Vec::new()
            },
            shortcuts: self.shortcuts,
        })
    }

    async fn get_by_id(
        &self,
        _: &ManagedObject,
        id: &str,
    ) -> CallResult<Result<Option<ExternalResource>, Failure>> {
        let mut sys = self.system.lock().unwrap();
        sys.reads += 1;
        let reads = sys.reads;
        if sys.deleting.as_deref() == Some(id) {
            sys.deleting = None;
            let state = sys.resources.remove(id).unwrap_or_default();
            return Ok(Ok(Some(Self::res(id, &state))));
        }
        match sys.resources.get(id) {
            None if (self.breaks == Break::UnknownIdFails) => {
                Ok(Err(Failure::Transient(format!("404 for {id}"))))
            }
            Some(s) if self.breaks == Break::VolatileState => {
                let mut s = s.clone();
                s["reads"] = json!(reads);
                Ok(Ok(Some(Self::res(id, &s))))
            }
            found => Ok(Ok(found.map(|s| Self::res(id, s)))),
        }
    }

    async fn list_for_adoption(
        &self,
        obj: &ManagedObject,
    ) -> CallResult<Result<Option<Vec<ExternalResource>>, Failure>> {
        let Some(name) = Self::spec_name(obj) else {
            return Ok(Ok(None));
        };
        if self.breaks == Break::AdoptionMisses {
            return Ok(Ok(Some(vec![])));
        }
        let sys = self.system.lock().unwrap();
        let owned = |id: &String| {
            self.breaks != Break::PutCreateTakesOwnership || sys.owners.get(id) == Some(&obj.uid)
        };
        Ok(Ok(Some(
            sys.resources
                .iter()
                .filter(|(id, s)| s["name"] == name && owned(id))
                .map(|(id, s)| Self::res(id, s))
                .collect(),
        )))
    }

    async fn list_for_import(
        &self,
        _: &ManagedObject,
        filter: &Value,
    ) -> CallResult<Result<Vec<ExternalResource>, Failure>> {
        let want = filter["name"].as_str().unwrap_or_default().to_owned();
        let sys = self.system.lock().unwrap();
        Ok(Ok(sys
            .resources
            .iter()
            .filter(|(_, s)| {
                let name = s["name"].as_str().unwrap_or_default();
                if self.breaks == Break::ImportBySuffix {
                    name.ends_with(&want)
                } else {
                    name == want
                }
            })
            .map(|(id, s)| Self::res(id, s))
            .collect()))
    }

    async fn create(&self, obj: &ManagedObject) -> CallResult<Result<ExternalResource, Status>> {
        if self.breaks == Break::CreateFails {
            return Ok(Err(Failure::InvalidConfiguration("no".into()).into()));
        }
        let name = Self::spec_name(obj).unwrap_or_default();
        let mut sys = self.system.lock().unwrap();
        sys.creates += 1;
        if self.breaks == Break::FlakyCreate && sys.creates == 1 {
            return Ok(Err(Failure::Transient(
                "HTTP 500: database is locked".into(),
            )
            .into()));
        }
        let existing = sys
            .resources
            .iter()
            .find(|(_, s)| s["name"] == name)
            .map(|(id, s)| (id.clone(), s.clone()));
        if let Some((id, mut state)) = existing.clone() {
            let answers_it = match self.breaks {
                Break::PutCreate => {
                    state = json!({"name": name, "kind": "new"});
                    true
                }
                Break::PutCreateBumpsRevision => {
                    state["revision"] = json!(state["revision"].as_u64().unwrap_or(1) + 1);
                    true
                }
                Break::PutCreateTakesOwnership => {
                    sys.owners.insert(id.clone(), obj.uid.clone());
                    true
                }
                Break::CreateAnswersExisting => true,
                _ => false,
            };
            if answers_it {
                sys.resources.insert(id.clone(), state.clone());
                return Ok(Ok(Self::res(&id, &state)));
            }
        }
        if existing.is_some() && !(self.breaks == Break::DuplicateCreate) {
            return Ok(Err(Failure::InvalidConfiguration(format!(
                "{name} already exists"
            ))
            .into()));
        }
        let id = format!("{name}-{}", sys.creates);
        let state = json!({"name": name, "kind": "new"});
        sys.resources.insert(id.clone(), state.clone());
        sys.owners.insert(id.clone(), obj.uid.clone());
        Ok(Ok(Self::res(&id, &state)))
    }

    async fn delete(&self, _: &ManagedObject, res: &ExternalResource) -> CallResult<Status> {
        if self.breaks == Break::DeleteAlwaysFails {
            return Ok(Failure::Transient("the API is read-only today".into()).into());
        }
        if self.breaks == Break::AsyncDelete {
            let mut sys = self.system.lock().unwrap();
            if sys.resources.contains_key(&res.id) {
                sys.deleting = Some(res.id.clone());
            }
            return Ok(Status::default());
        }
        let gone = self
            .system
            .lock()
            .unwrap()
            .resources
            .remove(&res.id)
            .is_none();
        if gone && (self.breaks == Break::DeleteErrorsWhenGone) {
            return Ok(Failure::Transient(format!("404: {} not found", res.id)).into());
        }
        Ok(Status::default())
    }

    async fn reconcilers(
        &self,
        _: &ManagedObject,
        _: &ExternalResource,
    ) -> CallResult<Result<Vec<String>, Failure>> {
        Ok(Ok(vec!["settings".into()]))
    }

    async fn run_reconciler(
        &self,
        _: &str,
        obj: &ManagedObject,
        res: &ExternalResource,
    ) -> CallResult<Status> {
        let want = obj
            .spec
            .as_ref()
            .map(|s| s["kind"].clone())
            .unwrap_or_default();
        let mut sys = self.system.lock().unwrap();
        let Some(state) = sys.resources.get_mut(&res.id) else {
            return Ok(Failure::Transient("gone".into()).into());
        };
        if self.breaks == Break::ReconcilerNeverSettles {
            state["kind"] = json!(format!("{}+", state["kind"].as_str().unwrap_or_default()));
        } else if state["kind"] == want {
            return Ok(Status::default());
        } else {
            state["kind"] = want;
        }
        Ok(Status {
            progress: vec![crate::actuator::Progress::NeedsRefresh {
                message: "kind updated".into(),
            }],
            failure: None,
        })
    }

    async fn available(
        &self,
        _: &ManagedObject,
        _: &ExternalResource,
    ) -> CallResult<(Availability, Status)> {
        Ok((Availability::Available, Status::default()))
    }

    async fn convert(
        &self,
        obj: &Convertible,
        from: &str,
        to: &str,
    ) -> CallResult<Result<Convertible, Failure>> {
        let mut r = obj.resource.clone().unwrap_or_default();
        let map = r.as_object_mut().unwrap();
        match (from, to) {
            ("v1", "v2") => {
                let name = map.remove("name").unwrap_or_default();
                map.insert("title".into(), name);
            }
            ("v2", "v1") if self.breaks == Break::LossyConversion => map.clear(),
            ("v2", "v1") => {
                let title = map.remove("title").unwrap_or_default();
                map.insert("name".into(), title);
            }
            _ => return Ok(Err(Failure::Unrecoverable(format!("{from} to {to}")))),
        }
        Ok(Ok(Convertible {
            resource: Some(r),
            ..obj.clone()
        }))
    }

    async fn observed(&self, res: &ExternalResource) -> CallResult<Value> {
        if self.breaks == Break::ObservedOffSchema {
            return Ok(json!({"name": 42}));
        }
        Ok(json!({"name": res.state["name"], "kind": res.state["kind"]}))
    }
}

fn options(name: &str) -> Options {
    Options {
        object: ManagedObject {
            name: "sample".into(),
            namespace: "default".into(),
            spec: Some(json!({"name": name, "kind": "wanted"})),
            ..ManagedObject::default()
        },
        import_filter: Some(json!({"name": name})),
        budget: Budget::default(),
    }
}

async fn report(fake: &Fake) -> Report {
    run(fake, options("zone-a")).await.unwrap()
}

fn outcome(r: &Report, rule: Rule) -> Outcome {
    r.finding(rule).unwrap().outcome
}

fn evidence(r: &Report, rule: Rule) -> String {
    r.finding(rule).unwrap().evidence.join(" | ")
}

#[tokio::test(start_paused = true)]
async fn a_well_behaved_plugin_passes_every_rule_and_leaves_nothing_behind() {
    let fake = Fake::new(Break::Nothing);
    let r = report(&fake).await;
    assert!(r.passed, "{}", r.table());
    // Every rule passes, but the round trip of a conversion: its kind has one version.
    assert!(
        r.rules
            .iter()
            .all(|f| f.outcome == Outcome::Pass || f.rule == Rule::ConversionRoundTrip),
        "{}",
        r.table()
    );
    assert_eq!(outcome(&r, Rule::ConversionRoundTrip), Outcome::Skip);
    assert_eq!(r.rules.len(), Rule::ALL.len());
    assert!(fake.ids().is_empty(), "left: {:?}", fake.ids());
    assert_eq!(r.cleanup.already_gone, vec!["zone-a-1".to_owned()]);
    assert_eq!(r.kind.as_deref(), Some("Thing.fake.orchard.dev"));
}

#[tokio::test(start_paused = true)]
async fn a_create_that_makes_a_second_resource_fails_create_not_repeated_and_the_cleanup_deletes_both()
 {
    let fake = Fake::new(Break::DuplicateCreate);
    let r = report(&fake).await;
    assert_eq!(r.failed(), vec![Rule::CreateNotRepeated], "{}", r.table());
    assert!(
        evidence(&r, Rule::CreateNotRepeated).contains("made another resource, zone-a-2"),
        "{}",
        r.table()
    );
    // The second object's create makes a third (create-never-overwrites removes it at once:
    // another resource is no overwrite).
    assert_eq!(
        r.cleanup.deleted,
        vec!["zone-a-2".to_owned(), "zone-a-3".to_owned()]
    );
    assert!(
        evidence(&r, Rule::CreateNeverOverwrites).contains("made another resource, zone-a-3"),
        "{}",
        r.table()
    );
    assert!(fake.ids().is_empty(), "left: {:?}", fake.ids());
    assert!(!r.passed);
}

#[tokio::test(start_paused = true)]
async fn an_adoption_that_misses_fails_the_kill_point_naming_the_leak() {
    let fake = Fake::new(Break::AdoptionMisses);
    let r = report(&fake).await;
    assert_eq!(r.failed(), vec![Rule::KillPoint], "{}", r.table());
    assert!(
        evidence(&r, Rule::KillPoint).contains("would create a second resource and leak zone-a-1"),
        "{}",
        r.table()
    );
    assert!(fake.ids().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_delete_that_errors_when_the_resource_is_gone_fails_delete_idempotent() {
    let fake = Fake::new(Break::DeleteErrorsWhenGone);
    let r = report(&fake).await;
    assert_eq!(r.failed(), vec![Rule::DeleteIdempotent], "{}", r.table());
    assert!(
        evidence(&r, Rule::DeleteIdempotent).contains("404: zone-a-1 not found"),
        "{}",
        r.table()
    );
    assert_eq!(
        r.finding(Rule::DeleteIdempotent).unwrap().level,
        Level::Should
    );
}

#[tokio::test(start_paused = true)]
async fn a_reconciler_that_changes_the_resource_on_every_pass_fails_reconcile_idempotent() {
    let fake = Fake::new(Break::ReconcilerNeverSettles);
    let r = report(&fake).await;
    assert_eq!(r.failed(), vec![Rule::ReconcileIdempotent], "{}", r.table());
    assert!(
        evidence(&r, Rule::ReconcileIdempotent).contains("did not converge"),
        "{}",
        r.table()
    );
    assert!(fake.ids().is_empty());
}

#[tokio::test(start_paused = true)]
async fn an_observed_state_off_its_schema_fails_observed_schema_with_the_path() {
    let fake = Fake::new(Break::ObservedOffSchema);
    let r = report(&fake).await;
    assert_eq!(r.failed(), vec![Rule::ObservedSchema], "{}", r.table());
    assert!(
        evidence(&r, Rule::ObservedSchema).contains("/name: "),
        "{}",
        r.table()
    );
}

#[tokio::test(start_paused = true)]
async fn an_import_that_matches_suffixes_fails_import_by_filter() {
    let fake = Fake::new(Break::ImportBySuffix);
    let r = report(&fake).await;
    assert_eq!(r.failed(), vec![Rule::ImportByFilter], "{}", r.table());
    assert!(
        evidence(&r, Rule::ImportByFilter).contains(r#"the near miss {"name":"one-a"} also found"#),
        "{}",
        r.table()
    );
}

#[tokio::test(start_paused = true)]
async fn an_impure_describe_fails_describe_pure_naming_the_field() {
    let fake = Fake::new(Break::ImpureDescribe);
    let r = report(&fake).await;
    assert_eq!(r.failed(), vec![Rule::DescribePure], "{}", r.table());
    assert!(evidence(&r, Rule::DescribePure).contains("version"));
}

#[tokio::test(start_paused = true)]
async fn an_error_for_an_unknown_id_fails_get_unknown_id() {
    let fake = Fake::new(Break::UnknownIdFails);
    let r = report(&fake).await;
    // The delete phase polls get-by-id for none too, so it cannot see the resource go.
    assert!(r.failed().contains(&Rule::Delete), "{}", r.table());
    assert_eq!(outcome(&r, Rule::GetUnknownId), Outcome::Skip);
}

#[tokio::test(start_paused = true)]
async fn a_sample_that_exists_already_stops_the_run_before_any_create_and_is_not_deleted() {
    let fake = Fake::new(Break::Nothing).with("theirs", json!({"name": "zone-a", "kind": "x"}));
    let r = report(&fake).await;
    assert_eq!(
        r.failed(),
        vec![Rule::AdoptionBeforeCreate],
        "{}",
        r.table()
    );
    assert!(
        r.rules[4..].iter().all(|f| f.outcome == Outcome::Skip),
        "{}",
        r.table()
    );
    assert_eq!(fake.ids(), vec!["theirs".to_owned()]);
    assert_eq!(r.cleanup, Cleanup::default());
}

#[tokio::test(start_paused = true)]
async fn a_failing_create_skips_the_rules_that_need_the_resource() {
    let fake = Fake::new(Break::CreateFails);
    let r = report(&fake).await;
    assert_eq!(r.failed(), vec![Rule::Create], "{}", r.table());
    assert!(r.rules[5..].iter().all(|f| f.outcome == Outcome::Skip));
    assert!(evidence(&r, Rule::KillPoint).contains("create did not succeed"));
}

#[tokio::test(start_paused = true)]
async fn what_the_cleanup_cannot_delete_is_reported_as_a_leftover_by_id() {
    let fake = Fake::new(Break::DeleteAlwaysFails);
    let r = report(&fake).await;
    assert_eq!(r.failed(), vec![Rule::Delete], "{}", r.table());
    assert_eq!(r.cleanup.leftovers.len(), 1, "{}", r.table());
    assert_eq!(r.cleanup.leftovers[0].id, "zone-a-1");
    assert!(r.table().contains("LEFTOVER zone-a-1"), "{}", r.table());
    assert!(!r.passed);
}

#[tokio::test(start_paused = true)]
async fn a_sample_without_spec_is_refused_before_any_call() {
    let fake = Fake::new(Break::Nothing);
    let mut o = options("x");
    o.object.spec = None;
    let err = run(&fake, o).await.unwrap_err();
    assert!(matches!(err, Error::NoSpec { .. }), "{err}");
    assert_eq!(fake.system.lock().unwrap().describes, 0);
}

#[tokio::test(start_paused = true)]
async fn without_a_filter_import_by_filter_is_skipped_with_the_flag_to_give() {
    let fake = Fake::new(Break::Nothing);
    let mut o = options("zone-a");
    o.import_filter = None;
    let r = run(&fake, o).await.unwrap();
    assert_eq!(outcome(&r, Rule::ImportByFilter), Outcome::Skip);
    assert!(evidence(&r, Rule::ImportByFilter).contains("--import-filter"));
    assert!(r.passed);
}

#[tokio::test(start_paused = true)]
async fn the_json_report_names_rules_levels_and_outcomes() {
    let fake = Fake::new(Break::AdoptionMisses);
    let r = report(&fake).await;
    let v = serde_json::to_value(&r).unwrap();
    let kill = v["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "kill-point")
        .unwrap();
    assert_eq!(kill["level"], "MUST");
    assert_eq!(kill["outcome"], "fail");
    assert_eq!(v["passed"], false);
    assert!(r.table().contains("kill-point"));
}

/// A call error renders as evidence and does not stop the run.
#[test]
fn a_call_error_is_evidence() {
    let e = CallError::Trap {
        plugin: "fake".into(),
        function: "create",
        message: "unreachable".into(),
    };
    assert!(e.to_string().contains("trapped"));
}

#[tokio::test(start_paused = true)]
async fn a_transient_failure_is_asked_again_as_the_host_would_and_is_no_verdict() {
    let fake = Fake::new(Break::FlakyCreate);
    let r = report(&fake).await;
    assert!(r.passed, "{}", r.table());
    assert!(
        evidence(&r, Rule::Create).contains("create answered id zone-a-2"),
        "{}",
        r.table()
    );
}

#[tokio::test(start_paused = true)]
async fn a_sample_off_the_resource_schema_fails_describe_valid_with_the_path() {
    let fake = Fake::new(Break::Nothing);
    let mut o = options("zone-a");
    o.object.spec = Some(json!({"name": "zone-a", "kind": 7}));
    let r = run(&fake, o).await.unwrap();
    assert!(r.failed().contains(&Rule::DescribeValid), "{}", r.table());
    assert!(
        evidence(&r, Rule::DescribeValid).contains("/kind: "),
        "{}",
        r.table()
    );
    assert!(fake.ids().is_empty(), "left: {:?}", fake.ids());
}

#[tokio::test(start_paused = true)]
async fn a_put_style_create_fails_create_never_overwrites_naming_what_it_changed() {
    let fake = Fake::new(Break::PutCreate);
    let r = report(&fake).await;
    // The second create of the same object answers the same id: create-not-repeated cannot
    // tell an upsert from a create that knows its resource.
    assert_eq!(
        r.failed(),
        vec![Rule::CreateNeverOverwrites],
        "{}",
        r.table()
    );
    let ev = evidence(&r, Rule::CreateNeverOverwrites);
    assert!(ev.contains("sample-twin"), "{ev}");
    assert!(
        ev.contains("create overwrote zone-a-1, which existed under the same name"),
        "{ev}"
    );
    assert!(
        ev.contains(r#"observed state changed in: kind (before {"kind":"wanted","name":"zone-a"}, after {"kind":"new","name":"zone-a"})"#),
        "{ev}"
    );
    assert!(fake.ids().is_empty(), "left: {:?}", fake.ids());
    assert!(!r.passed);
}

#[tokio::test(start_paused = true)]
async fn an_upsert_that_only_bumps_the_revision_fails_create_never_overwrites_on_the_state() {
    let fake = Fake::new(Break::PutCreateBumpsRevision);
    let r = report(&fake).await;
    assert_eq!(
        r.failed(),
        vec![Rule::CreateNeverOverwrites],
        "{}",
        r.table()
    );
    let ev = evidence(&r, Rule::CreateNeverOverwrites);
    assert!(
        ev.contains("its state (get-by-id) changed in: revision"),
        "{ev}"
    );
    assert!(!ev.contains("observed state changed"), "{ev}");
}

#[tokio::test(start_paused = true)]
async fn an_upsert_that_takes_the_resource_over_fails_create_never_overwrites_through_adoption() {
    let fake = Fake::new(Break::PutCreateTakesOwnership);
    let r = report(&fake).await;
    assert_eq!(
        r.failed(),
        vec![Rule::CreateNeverOverwrites],
        "{}",
        r.table()
    );
    let ev = evidence(&r, Rule::CreateNeverOverwrites);
    assert!(
        ev.contains("the sample's list-for-adoption no longer finds zone-a-1: the second object's create took it over"),
        "{ev}"
    );
    assert!(fake.ids().is_empty(), "left: {:?}", fake.ids());
}

#[tokio::test(start_paused = true)]
async fn a_create_that_answers_the_existing_resource_untouched_keeps_every_rule() {
    let fake = Fake::new(Break::CreateAnswersExisting);
    let r = report(&fake).await;
    assert!(r.passed, "{}", r.table());
    assert!(
        evidence(&r, Rule::CreateNeverOverwrites)
            .contains("create answered the existing resource zone-a-1"),
        "{}",
        r.table()
    );
}

#[tokio::test(start_paused = true)]
async fn a_refused_create_of_the_second_object_passes_create_never_overwrites() {
    let fake = Fake::new(Break::Nothing);
    let r = report(&fake).await;
    let ev = evidence(&r, Rule::CreateNeverOverwrites);
    assert_eq!(
        outcome(&r, Rule::CreateNeverOverwrites),
        Outcome::Pass,
        "{ev}"
    );
    assert!(
        ev.contains("zone-a already exists") && ev.contains("(nothing created)"),
        "{ev}"
    );
    assert!(ev.contains("create left it untouched"), "{ev}");
}

#[tokio::test(start_paused = true)]
async fn a_state_field_that_changes_on_every_read_is_not_taken_for_an_overwrite() {
    let fake = Fake::new(Break::VolatileState);
    let r = report(&fake).await;
    assert!(r.passed, "{}", r.table());
    assert!(
        evidence(&r, Rule::CreateNeverOverwrites)
            .contains("state (get-by-id) field(s) reads change between two reads: not compared"),
        "{}",
        r.table()
    );
}

#[tokio::test(start_paused = true)]
async fn a_conversion_that_round_trips_passes_and_a_kind_with_one_version_skips_it() {
    let r = report(&Fake::new(Break::Converts)).await;
    assert!(r.passed, "{}", r.table());
    assert_eq!(outcome(&r, Rule::ConversionRoundTrip), Outcome::Pass);
    assert!(
        evidence(&r, Rule::ConversionRoundTrip)
            .contains(r#"v1 to v2 and back gives the sample again (at v2: {"kind":"wanted","title":"zone-a"})"#),
        "{}",
        r.table()
    );
    let one = report(&Fake::new(Break::Nothing)).await;
    assert_eq!(outcome(&one, Rule::ConversionRoundTrip), Outcome::Skip);
}

#[tokio::test(start_paused = true)]
async fn a_conversion_that_loses_fields_fails_conversion_round_trip_showing_both() {
    let r = report(&Fake::new(Break::LossyConversion)).await;
    assert_eq!(r.failed(), vec![Rule::ConversionRoundTrip], "{}", r.table());
    let ev = evidence(&r, Rule::ConversionRoundTrip);
    assert!(
        ev.contains(
            r#"v1 to v2 and back loses or changes fields: sent {"kind":"wanted","name":"zone-a"}, got back {}"#
        ),
        "{ev}"
    );
}

/// Both shortcuts of `orchard:shortcuts` that skip reads after a call.
const BOTH: Shortcuts = Shortcuts {
    create_refuses_duplicates: true,
    delete_is_synchronous: true,
    delete_by_id: false,
};

/// Deleting by id, synchronously (pdns-zone's declaration of the delete).
const BY_ID: Shortcuts = Shortcuts {
    create_refuses_duplicates: false,
    delete_is_synchronous: true,
    delete_by_id: true,
};

#[tokio::test(start_paused = true)]
async fn a_plugin_that_deletes_by_id_is_checked_deleting_by_id_and_again_once_gone() {
    let fake = Fake::new(Break::Nothing).declaring(BY_ID);
    let r = report(&fake).await;
    assert!(r.passed, "{}", r.table());
    let ev = evidence(&r, Rule::Delete);
    assert!(
        ev.contains("by id, its state null (delete-by-id)")
            && ev.contains("already gone, answered done (delete-by-id)"),
        "{ev}"
    );
    assert!(fake.ids().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_delete_that_errors_for_a_gone_id_breaks_a_declared_delete_by_id() {
    // Only a SHOULD for the generic flow (above), a MUST for a plugin deleting by id: the
    // host deletes ids it did not read, so a gone one failing would keep the finalizer.
    let fake = Fake::new(Break::DeleteErrorsWhenGone).declaring(BY_ID);
    let r = report(&fake).await;
    assert!(!r.passed, "{}", r.table());
    assert_eq!(
        r.failed(),
        vec![Rule::Delete, Rule::DeleteIdempotent],
        "{}",
        r.table()
    );
    assert!(
        evidence(&r, Rule::Delete).contains(
            "the plugin declares delete-by-id (orchard:shortcuts), so the host deletes ids it did not read and a gone one MUST answer done"
        ),
        "{}",
        r.table()
    );
}

#[tokio::test(start_paused = true)]
async fn a_plugin_that_keeps_the_shortcuts_it_declares_passes_every_rule() {
    let fake = Fake::new(Break::Nothing).declaring(BOTH);
    let r = report(&fake).await;
    assert!(r.passed, "{}", r.table());
    assert!(
        evidence(&r, Rule::Delete).contains("right after the delete (delete-is-synchronous)"),
        "{}",
        r.table()
    );
    assert!(fake.ids().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_create_that_answers_the_existing_resource_breaks_a_declared_create_refuses_duplicates() {
    let fake = Fake::new(Break::CreateAnswersExisting).declaring(Shortcuts {
        create_refuses_duplicates: true,
        ..Shortcuts::default()
    });
    let r = report(&fake).await;
    assert_eq!(r.failed(), vec![Rule::CreateNotRepeated], "{}", r.table());
    assert!(
        evidence(&r, Rule::CreateNotRepeated).contains("declares create-refuses-duplicates"),
        "{}",
        r.table()
    );
}

#[tokio::test(start_paused = true)]
async fn an_asynchronous_delete_passes_undeclared_and_breaks_a_declared_delete_is_synchronous() {
    let r = report(&Fake::new(Break::AsyncDelete)).await;
    assert!(r.passed, "{}", r.table());
    let fake = Fake::new(Break::AsyncDelete).declaring(Shortcuts {
        delete_is_synchronous: true,
        ..Shortcuts::default()
    });
    let r = report(&fake).await;
    assert_eq!(r.failed(), vec![Rule::Delete], "{}", r.table());
    assert!(
        evidence(&r, Rule::Delete).contains("still finds it right after the delete"),
        "{}",
        r.table()
    );
    assert!(fake.ids().is_empty(), "the cleanup removes it");
}
