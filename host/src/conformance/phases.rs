//! The phases of a run, one per [`Rule`], in [`Rule::ALL`]'s order, over one sample object
//! and the one resource the kit creates for it.
//!
//! A phase never returns early out of the run: it answers a [`Verdict`]; a failed
//! precondition (describe did not answer, the sample already exists, adoption could not be
//! asked) sets a stop reason that skips the phases after it. The cleanup runs after the last
//! phase whatever happened ([`Kit::cleanup`]).

use serde_json::Value;

use super::ledger::Ledger;
use super::report::{Cleanup, Evidence, Verdict};
use super::rules::Rule;
use super::schema::Schema;
use super::wait::{
    Budget, GoneAnswer, retry, transient, transient_create, transient_status, wait_gone,
};
use crate::actuator::contract::{Boundary, RawDescription};
use crate::actuator::{
    Actuator, CallError, Convertible, Description, ExternalResource, Failure, ManagedObject,
    Progress, Shortcuts, Status,
};

/// Longest JSON shown in one line of evidence.
const SHOWN_JSON: usize = 300;
/// Most passes of the reconcilers before they must have converged.
const MAX_PASSES: usize = 10;

/// One run's state.
pub struct Kit<'a> {
    actuator: &'a dyn Actuator,
    /// The sample as the host sees it before create (no `status.id`).
    sample: ManagedObject,
    filter: Option<Value>,
    budget: Budget,
    description: Option<Description>,
    /// Why the phases still to come cannot run.
    stop: Option<String>,
    /// `list-for-adoption` answered an empty list before create: anything it finds later
    /// was made by this run.
    clean_slate: bool,
    /// The resource under test, as last fetched.
    resource: Option<ExternalResource>,
    /// The `delete` phase saw it go.
    deleted: bool,
    ledger: Ledger,
}

fn failure(f: &Failure) -> String {
    format!("{}: {f}", f.reason())
}

fn call(e: &CallError) -> String {
    format!("no answer: {e}")
}

fn status(s: &Status) -> String {
    if s.is_done() {
        return "done".to_owned();
    }
    let mut parts: Vec<String> = s
        .progress
        .iter()
        .map(|p| match p {
            Progress::NeedsRefresh { message } => format!("needs-refresh {message:?}"),
            Progress::WaitingOnExternal { message, .. } => {
                format!("waiting-on-external {message:?}")
            }
            Progress::WaitingOnObject { kind, name, .. } => {
                format!("waiting-on-object {kind}/{name}")
            }
        })
        .collect();
    if let Some(f) = &s.failure {
        parts.push(format!("failure {}", failure(f)));
    }
    parts.join(", ")
}

fn ids(list: &[ExternalResource]) -> String {
    if list.is_empty() {
        return "[]".to_owned();
    }
    let ids: Vec<&str> = list.iter().map(|r| r.id.as_str()).collect();
    format!("[{}]", ids.join(", "))
}

fn shown(v: &Value) -> String {
    crate::actuator::contract::cut(&v.to_string(), SHOWN_JSON, "…")
}

fn raw(d: &Description) -> RawDescription {
    RawDescription {
        name: d.name.clone(),
        group: d.group.clone(),
        version: d.version.clone(),
        kind: d.kind.clone(),
        plural: d.plural.clone(),
        resource_schema: d.resource_schema.to_string(),
        filter_schema: d.filter_schema.as_ref().map(Value::to_string),
        observed_schema: d.observed_schema.to_string(),
        dependencies: d.dependencies.clone(),
        needs_credentials: d.needs_credentials,
    }
}

/// The top-level keys whose values differ between two JSON documents.
fn changed_keys(before: &Value, after: &Value) -> Vec<String> {
    match (before.as_object(), after.as_object()) {
        (Some(b), Some(a)) => {
            let mut keys: Vec<String> = b
                .keys()
                .chain(a.keys())
                .filter(|k| b.get(*k) != a.get(*k))
                .cloned()
                .collect();
            keys.sort();
            keys.dedup();
            keys
        }
        _ => vec!["(the whole document)".to_owned()],
    }
}

/// Whether two conversions answer the same annotations (in any order).
fn same_annotations(a: &Convertible, b: &Convertible) -> bool {
    let sorted = |c: &Convertible| {
        let mut v = c.annotations.clone();
        v.sort();
        v
    };
    sorted(a) == sorted(b)
}

/// What `get-by-id` and `observed` answer for one resource at one moment.
#[derive(Debug, Clone)]
struct Snapshot {
    state: Value,
    observed: Value,
}

/// The top-level keys of `what` that changed from `before` to `after`, leaving out the
/// `volatile` ones (those that changed between two reads with nothing in between). `None`
/// when the documents are not objects and one of them changes by itself: nothing to compare.
fn overwritten(
    what: &str,
    before: &Value,
    again: &Value,
    after: &Value,
    ev: &mut Evidence,
) -> Option<String> {
    let volatile = if before == again {
        Vec::new()
    } else {
        changed_keys(before, again)
    };
    if before.as_object().is_none() && !volatile.is_empty() {
        ev.note(format!(
            "{what} changes between two reads and is not an object: it is not compared"
        ));
        return None;
    }
    if !volatile.is_empty() {
        ev.note(format!(
            "{what} field(s) {} change between two reads: not compared",
            volatile.join(", ")
        ));
    }
    let changed: Vec<String> = changed_keys(again, after)
        .into_iter()
        .filter(|k| !volatile.contains(k))
        .collect();
    (again != after && !changed.is_empty()).then(|| {
        format!(
            "its {what} changed in: {} (before {}, after {})",
            changed.join(", "),
            shown(again),
            shown(after)
        )
    })
}

impl<'a> Kit<'a> {
    /// A run of `actuator` on `sample` (its `status.id` is ignored).
    pub fn new(
        actuator: &'a dyn Actuator,
        sample: ManagedObject,
        filter: Option<Value>,
        budget: Budget,
    ) -> Self {
        Self {
            actuator,
            sample: ManagedObject {
                status_id: None,
                ..sample
            },
            filter,
            budget,
            description: None,
            stop: None,
            clean_slate: false,
            resource: None,
            deleted: false,
            ledger: Ledger::default(),
        }
    }

    /// The plugin's description, once `describe` answered.
    pub fn description(&self) -> Option<&Description> {
        self.description.as_ref()
    }

    /// What the plugin declares of `orchard:shortcuts` (none before `describe` answered).
    fn shortcuts(&self) -> Shortcuts {
        self.description().map(|d| d.shortcuts).unwrap_or_default()
    }

    /// What the host passes `delete` for `res`: the resource as read, or — for a plugin that
    /// deletes by id — its id alone.
    fn delete_target(&self, res: &ExternalResource) -> ExternalResource {
        if self.shortcuts().delete_by_id {
            by_id(&res.id)
        } else {
            res.clone()
        }
    }

    /// The sample with the created id in `status.id`, as the host calls after it wrote it.
    fn managed(&self, id: &str) -> ManagedObject {
        ManagedObject {
            status_id: Some(id.to_owned()),
            ..self.sample.clone()
        }
    }

    /// The sample as an unmanaged (imported) object: no spec, no id, no dependencies.
    fn unmanaged(&self) -> ManagedObject {
        ManagedObject {
            spec: None,
            status_id: None,
            dependencies: Vec::new(),
            ..self.sample.clone()
        }
    }

    /// A second object naming the same resource as the sample: another `metadata.name` and
    /// uid, the same spec, credentials and dependencies, no `status.id`.
    fn twin(&self) -> ManagedObject {
        let base: String = self.sample.name.chars().take(240).collect();
        ManagedObject {
            name: format!("{base}-twin"),
            uid: format!("{}-twin", self.sample.uid),
            status_id: None,
            ..self.sample.clone()
        }
    }

    /// `get-by-id` and `observed` of `id` now.
    async fn snapshot(&self, id: &str) -> Result<Snapshot, String> {
        let res = self.fetch(id).await?;
        let observed = self
            .actuator
            .observed(&res)
            .await
            .map_err(|e| format!("observed: {}", call(&e)))?;
        Ok(Snapshot {
            state: res.state,
            observed,
        })
    }

    /// Whether the sample's `list-for-adoption` finds `id` (`None`: it cannot tell — adoption
    /// does not apply or did not answer); records what this run made.
    async fn adopts(&mut self, id: &str) -> Option<bool> {
        match retry(
            &self.budget,
            async || self.actuator.list_for_adoption(&self.sample).await,
            transient,
        )
        .await
        {
            Ok(Ok(Some(list))) => {
                self.record_new(&list);
                Some(list.iter().any(|r| r.id == id))
            }
            _ => None,
        }
    }

    /// Records every resource in `list` this run made (anything found after a clean slate).
    fn record_new(&mut self, list: &[ExternalResource]) {
        if self.clean_slate {
            for r in list {
                self.ledger.record(r);
            }
        }
    }

    /// Runs the phase of `rule`.
    pub async fn check(&mut self, rule: Rule) -> Verdict {
        if let Some(why) = &self.stop {
            return Evidence::default().skip(why.clone());
        }
        let needs_resource = !matches!(
            rule,
            Rule::DescribePure
                | Rule::DescribeValid
                | Rule::ConversionRoundTrip
                | Rule::AdoptionBeforeCreate
                | Rule::Create
        );
        let Some(res) = self.resource.clone().filter(|_| needs_resource) else {
            return match rule {
                Rule::DescribePure => self.describe_pure().await,
                Rule::DescribeValid => self.describe_valid(),
                Rule::ConversionRoundTrip => self.conversion_round_trip().await,
                Rule::AdoptionBeforeCreate => self.adoption_before_create().await,
                Rule::Create => self.create().await,
                _ => Evidence::default().skip("no resource: create did not succeed"),
            };
        };
        let needs_deleted = matches!(rule, Rule::DeleteIdempotent | Rule::GetUnknownId);
        if needs_deleted && !self.deleted {
            return Evidence::default().skip("the delete phase did not succeed");
        }
        if self.deleted && !needs_deleted {
            return Evidence::default().skip("the resource is deleted");
        }
        match rule {
            Rule::GetAfterCreate => self.get_after_create(&res).await,
            Rule::KillPoint => self.kill_point(&res).await,
            Rule::CreateNotRepeated => self.create_not_repeated(&res).await,
            Rule::ReconcileIdempotent => self.reconcile_idempotent(res).await,
            Rule::ObservedSchema => self.observed_schema(&res).await,
            Rule::CreateNeverOverwrites => self.create_never_overwrites(&res).await,
            Rule::ImportById => self.import_by_id(&res).await,
            Rule::ImportByFilter => self.import_by_filter(&res).await,
            Rule::Delete => self.delete(&res).await,
            Rule::DeleteIdempotent => self.delete_idempotent(&res).await,
            Rule::GetUnknownId => self.get_unknown_id(&res).await,
            Rule::DescribePure
            | Rule::DescribeValid
            | Rule::ConversionRoundTrip
            | Rule::AdoptionBeforeCreate
            | Rule::Create => Evidence::default().skip("runs before the resource exists"),
        }
    }

    async fn describe_pure(&mut self) -> Verdict {
        let mut ev = Evidence::default();
        let (first, second) = (
            self.actuator.describe().await,
            self.actuator.describe().await,
        );
        match (first, second) {
            (Ok(a), Ok(b)) => {
                let same = a == b;
                let diff = changed_keys(
                    &serde_json::to_value(&a).unwrap_or_default(),
                    &serde_json::to_value(&b).unwrap_or_default(),
                );
                self.description = Some(a);
                if same {
                    ev.note("two describe() calls answered the same description");
                    ev.pass()
                } else {
                    ev.fail(format!(
                        "two describe() calls differ in: {}",
                        diff.join(", ")
                    ))
                }
            }
            (Err(e), _) | (_, Err(e)) => {
                self.stop = Some("describe did not answer".to_owned());
                ev.fail(format!("describe: {}", call(&e)))
            }
        }
    }

    fn describe_valid(&mut self) -> Verdict {
        let mut ev = Evidence::default();
        let Some(d) = self.description.clone() else {
            return ev.skip("describe did not answer");
        };
        let mut broken = Vec::new();
        match Boundary::new(&d.name, "describe").description(raw(&d)) {
            Ok(_) => ev.note(format!(
                "{}.{} {} (plugin {}) passes the host's boundary (actuator::contract)",
                d.kind, d.group, d.version, d.name
            )),
            Err(e) => broken.push(e.to_string()),
        }
        let schemas = [
            ("resource-schema", Some(&d.resource_schema)),
            ("filter-schema", d.filter_schema.as_ref()),
            ("observed-schema", Some(&d.observed_schema)),
        ];
        for (what, schema) in schemas {
            let Some(schema) = schema else { continue };
            match Schema::compile(schema) {
                Err(e) => broken.push(format!("{what} does not compile as JSON Schema: {e}")),
                Ok(s) if what == "resource-schema" => {
                    let spec = self.sample.spec.clone().unwrap_or(Value::Null);
                    let errors = s.errors(&spec);
                    if errors.is_empty() {
                        ev.note("the sample's spec.resource matches resource-schema");
                    } else {
                        broken.push(format!(
                            "the sample's spec.resource does not match resource-schema: {}",
                            errors.join("; ")
                        ));
                    }
                }
                Ok(_) => {}
            }
        }
        if !broken.iter().any(|b| b.contains("does not compile")) {
            ev.note("the schemas compile as JSON Schema");
        }
        if d.needs_credentials && self.sample.credentials.is_empty() {
            ev.note("the plugin needs credentials and none were given (--credential)");
        }
        if broken.is_empty() {
            ev.pass()
        } else {
            ev.fail(broken.join("; "))
        }
    }

    async fn adoption_before_create(&mut self) -> Verdict {
        let mut ev = Evidence::default();
        match retry(
            &self.budget,
            async || self.actuator.list_for_adoption(&self.sample).await,
            transient,
        )
        .await
        {
            Ok(Ok(Some(list))) if list.is_empty() => {
                self.clean_slate = true;
                ev.note("list-for-adoption (no status.id) answered [] before create");
                ev.pass()
            }
            Ok(Ok(Some(list))) => {
                self.stop = Some(format!(
                    "the sample names resources that exist already ({}); the kit only touches what it creates: pick a name nothing uses",
                    ids(&list)
                ));
                ev.fail(format!(
                    "list-for-adoption found {} before anything was created",
                    ids(&list)
                ))
            }
            Ok(Ok(None)) => {
                ev.note("list-for-adoption answered none: this plugin does not adopt (the kill-point rule judges it)");
                ev.pass()
            }
            Ok(Err(f)) => {
                self.stop =
                    Some("whether the sample exists is unknown: nothing was created".to_owned());
                ev.fail(format!("list-for-adoption failed: {}", failure(&f)))
            }
            Err(e) => {
                self.stop =
                    Some("whether the sample exists is unknown: nothing was created".to_owned());
                ev.fail(format!("list-for-adoption: {}", call(&e)))
            }
        }
    }

    async fn create(&mut self) -> Verdict {
        let mut ev = Evidence::default();
        let deadline = self.budget.deadline();
        loop {
            match retry(
                &self.budget,
                async || self.actuator.create(&self.sample).await,
                transient_create,
            )
            .await
            {
                Ok(Ok(res)) => {
                    self.ledger.record(&res);
                    ev.note(format!("create answered id {}", res.id));
                    self.resource = Some(res);
                    return ev.pass();
                }
                Ok(Err(s)) if s.failure.is_some() => {
                    return ev.fail(format!("create failed: {}", status(&s)));
                }
                Ok(Err(s)) => {
                    ev.note(format!("create answered {} (nothing created)", status(&s)));
                    match self.budget.pause(&s, deadline) {
                        Some(pause) => tokio::time::sleep(pause).await,
                        None => {
                            return ev.fail(
                                "create kept answering progress past the wait budget (or waits on an object no host resolves here)",
                            );
                        }
                    }
                }
                Err(e) => return ev.fail(format!("create: {}", call(&e))),
            }
        }
    }

    async fn get_after_create(&mut self, res: &ExternalResource) -> Verdict {
        let mut ev = Evidence::default();
        match self
            .actuator
            .get_by_id(&self.managed(&res.id), &res.id)
            .await
        {
            Ok(Ok(Some(found))) if found.id == res.id => {
                ev.note(format!("get-by-id {} found it", res.id));
                self.resource = Some(found);
                ev.pass()
            }
            Ok(Ok(Some(found))) => ev.fail(format!(
                "get-by-id {} answered another id, {}",
                res.id, found.id
            )),
            Ok(Ok(None)) => ev.fail(format!(
                "get-by-id {} answered none right after create answered it",
                res.id
            )),
            Ok(Err(f)) => ev.fail(format!("get-by-id {} failed: {}", res.id, failure(&f))),
            Err(e) => ev.fail(format!("get-by-id {}: {}", res.id, call(&e))),
        }
    }

    async fn kill_point(&mut self, res: &ExternalResource) -> Verdict {
        let mut ev = Evidence::default();
        ev.note(format!(
            "create's answer ({}) thrown away, as if the host died before writing status.id",
            res.id
        ));
        match retry(&self.budget, async || self.actuator.list_for_adoption(&self.sample).await, transient).await {
            Ok(Ok(Some(list))) => {
                self.record_new(&list);
                ev.note(format!("list-for-adoption (no status.id) found {}", ids(&list)));
                match list.as_slice() {
                    [one] if one.id == res.id => {
                        ev.note(format!(
                            "the host's retried flow adopts {} instead of creating again",
                            one.id
                        ));
                        ev.pass()
                    }
                    [] => ev.fail(format!(
                        "adoption missed: the retried flow would create a second resource and leak {}",
                        res.id
                    )),
                    [other] => ev.fail(format!(
                        "adoption found {}, not the created {}: the host would adopt another resource and leak {}",
                        other.id, res.id, res.id
                    )),
                    _ => ev.fail(format!(
                        "{} resources match: the host refuses to guess which to adopt (InvalidConfiguration), the object is stuck",
                        list.len()
                    )),
                }
            }
            Ok(Ok(None)) => ev.fail(format!(
                "list-for-adoption answered none (adoption does not apply): after a crash here the host stops with UnrecoverableError and {} needs a human",
                res.id
            )),
            Ok(Err(f)) => ev.fail(format!("list-for-adoption failed: {}", failure(&f))),
            Err(e) => ev.fail(format!("list-for-adoption: {}", call(&e))),
        }
    }

    async fn create_not_repeated(&mut self, res: &ExternalResource) -> Verdict {
        let mut ev = Evidence::default();
        let refuses_duplicates = self.shortcuts().create_refuses_duplicates;
        match self.actuator.create(&self.sample).await {
            Ok(Ok(again)) if again.id == res.id && refuses_duplicates => {
                return ev.fail(format!(
                    "a second create answered the existing resource {} instead of a failure: the plugin declares create-refuses-duplicates (orchard:shortcuts), so the host would skip the lookup before every create on a promise create does not keep",
                    again.id
                ));
            }
            Ok(Ok(again)) if again.id == res.id => {
                ev.note(format!(
                    "a second create answered the existing resource {}",
                    again.id
                ));
            }
            Ok(Ok(again)) => {
                self.ledger.record(&again);
                // Removed at once, so that the rules after this one see one resource only.
                let removed = self
                    .ledger
                    .remove(self.actuator, &self.sample, &again.id, &self.budget)
                    .await
                    .map_or_else(
                        |why| format!("could not delete it: {why}"),
                        |()| "deleted it".to_owned(),
                    );
                return ev.fail(format!(
                    "a second create made another resource, {}, besides {}: create is repeated blindly (the kit {removed})",
                    again.id, res.id
                ));
            }
            Ok(Err(s)) => ev.note(format!(
                "a second create answered {} (nothing created)",
                status(&s)
            )),
            Err(e) => {
                return ev.fail(format!(
                    "a second create gave no answer, so whether it made a second resource is unknown: {}",
                    call(&e)
                ));
            }
        }
        // Whether adoption finds the first resource is the kill point's rule; this one only
        // looks for another resource the second create made without answering it.
        match retry(
            &self.budget,
            async || self.actuator.list_for_adoption(&self.sample).await,
            transient,
        )
        .await
        {
            Ok(Ok(Some(list))) => {
                self.record_new(&list);
                let others: Vec<ExternalResource> =
                    list.iter().filter(|r| r.id != res.id).cloned().collect();
                if others.is_empty() {
                    ev.note(format!(
                        "list-for-adoption finds no resource besides {}: {}",
                        res.id,
                        ids(&list)
                    ));
                    ev.pass()
                } else {
                    ev.fail(format!(
                        "after the second create list-for-adoption also finds {}: a second resource",
                        ids(&others)
                    ))
                }
            }
            Ok(Ok(None)) => {
                ev.note("list-for-adoption answered none: duplicates cannot be looked for");
                ev.pass()
            }
            Ok(Err(f)) => ev.fail(format!("list-for-adoption failed: {}", failure(&f))),
            Err(e) => ev.fail(format!("list-for-adoption: {}", call(&e))),
        }
    }

    async fn create_never_overwrites(&mut self, res: &ExternalResource) -> Verdict {
        let mut ev = Evidence::default();
        // Two reads before: what changes between them by itself is no overwrite.
        let (before, again) = match (self.snapshot(&res.id).await, self.snapshot(&res.id).await) {
            (Ok(b), Ok(a)) => (b, a),
            (Err(why), _) | (_, Err(why)) => return ev.fail(why),
        };
        let adopted_before = self.adopts(&res.id).await;
        let twin = self.twin();
        ev.note(format!(
            "a second object, {}/{} (uid {:?}), with the same spec.resource and no status.id, calls create while {} exists",
            twin.namespace, twin.name, twin.uid, res.id
        ));
        match self.actuator.create(&twin).await {
            Ok(Ok(other)) if other.id == res.id => {
                ev.note(format!(
                    "create answered the existing resource {}",
                    other.id
                ));
            }
            Ok(Ok(other)) => {
                self.ledger.record(&other);
                let removed = self
                    .ledger
                    .remove(self.actuator, &twin, &other.id, &self.budget)
                    .await
                    .map_or_else(
                        |why| format!("could not delete it: {why}"),
                        |()| "deleted it".to_owned(),
                    );
                ev.note(format!(
                    "create made another resource, {}, beside {} (the kit {removed}): not an overwrite",
                    other.id, res.id
                ));
            }
            Ok(Err(s)) => ev.note(format!("create answered {} (nothing created)", status(&s))),
            Err(e) => {
                return ev.fail(format!(
                    "the second object's create gave no answer, so whether it overwrote {} is unknown: {}",
                    res.id,
                    call(&e)
                ));
            }
        }
        let found = match retry(
            &self.budget,
            async || {
                self.actuator
                    .get_by_id(&self.managed(&res.id), &res.id)
                    .await
            },
            transient,
        )
        .await
        {
            Ok(Ok(Some(found))) if found.id == res.id => found,
            Ok(Ok(Some(found))) => {
                return ev.fail(format!(
                    "after the second object's create, get-by-id {} answers another id, {}",
                    res.id, found.id
                ));
            }
            Ok(Ok(None)) => {
                return ev.fail(format!(
                    "after the second object's create, get-by-id {} answers none: create replaced or removed the existing resource",
                    res.id
                ));
            }
            Ok(Err(f)) => return ev.fail(format!("get-by-id {} failed: {}", res.id, failure(&f))),
            Err(e) => return ev.fail(format!("get-by-id {}: {}", res.id, call(&e))),
        };
        let after = match self.actuator.observed(&found).await {
            Ok(observed) => Snapshot {
                state: found.state.clone(),
                observed,
            },
            Err(e) => return ev.fail(format!("observed: {}", call(&e))),
        };
        self.resource = Some(found);
        let mut broken = Vec::new();
        let documents = [
            (
                "state (get-by-id)",
                &before.state,
                &again.state,
                &after.state,
            ),
            (
                "observed state",
                &before.observed,
                &again.observed,
                &after.observed,
            ),
        ];
        for (what, b, a, now) in documents {
            if let Some(why) = overwritten(what, b, a, now, &mut ev) {
                broken.push(why);
            }
        }
        if adopted_before == Some(true) && self.adopts(&res.id).await == Some(false) {
            broken.push(format!(
                "the sample's list-for-adoption no longer finds {}: the second object's create took it over",
                res.id
            ));
        }
        if broken.is_empty() {
            ev.note(format!(
                "get-by-id and observed of {} answer the same as before: create left it untouched",
                res.id
            ));
            ev.pass()
        } else {
            ev.fail(format!(
                "create overwrote {}, which existed under the same name: {}",
                res.id,
                broken.join("; ")
            ))
        }
    }

    /// One pass of every reconciler on `res`: each name with its status.
    async fn pass(&self, res: &ExternalResource) -> Result<Vec<(String, Status)>, String> {
        let obj = self.managed(&res.id);
        let names = match retry(
            &self.budget,
            async || self.actuator.reconcilers(&obj, res).await,
            transient,
        )
        .await
        {
            Ok(Ok(names)) => names,
            Ok(Err(f)) => return Err(format!("reconcilers failed: {}", failure(&f))),
            Err(e) => return Err(format!("reconcilers: {}", call(&e))),
        };
        let mut out = Vec::new();
        for name in names {
            match retry(
                &self.budget,
                async || self.actuator.run_reconciler(&name, &obj, res).await,
                transient_status,
            )
            .await
            {
                Ok(s) => out.push((name, s)),
                Err(e) => return Err(format!("run-reconciler {name}: {}", call(&e))),
            }
        }
        Ok(out)
    }

    async fn fetch(&self, id: &str) -> Result<ExternalResource, String> {
        match retry(
            &self.budget,
            async || self.actuator.get_by_id(&self.managed(id), id).await,
            transient,
        )
        .await
        {
            Ok(Ok(Some(res))) => Ok(res),
            Ok(Ok(None)) => Err(format!("get-by-id {id} answered none")),
            Ok(Err(f)) => Err(format!("get-by-id {id} failed: {}", failure(&f))),
            Err(e) => Err(format!("get-by-id {id}: {}", call(&e))),
        }
    }

    async fn reconcile_idempotent(&mut self, mut res: ExternalResource) -> Verdict {
        let mut ev = Evidence::default();
        let deadline = self.budget.deadline();
        // Converge first: create may leave work to the reconcilers.
        let mut passes = 0;
        loop {
            passes += 1;
            let statuses = match self.pass(&res).await {
                Ok(s) => s,
                Err(why) => return ev.fail(why),
            };
            if statuses.is_empty() {
                ev.note("the plugin has no reconcilers");
                return ev.pass();
            }
            if let Some((name, s)) = statuses.iter().find(|(_, s)| s.failure.is_some()) {
                return ev.fail(format!("pass {passes}: {name} answered {}", status(s)));
            }
            let pending: Vec<&(String, Status)> =
                statuses.iter().filter(|(_, s)| !s.is_done()).collect();
            if pending.is_empty() {
                ev.note(format!(
                    "pass {passes} converged: {} answered done",
                    statuses
                        .iter()
                        .map(|(n, _)| n.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
                break;
            }
            for (name, s) in &pending {
                ev.note(format!("pass {passes}: {name} answered {}", status(s)));
            }
            if passes >= MAX_PASSES {
                return ev.fail(format!(
                    "the reconcilers did not converge in {MAX_PASSES} passes: they change the resource on every pass"
                ));
            }
            let mut merged = Status::default();
            for (_, s) in pending {
                merged.progress.extend(s.progress.iter().cloned());
            }
            match self.budget.pause(&merged, deadline) {
                Some(pause)
                    if merged
                        .progress
                        .iter()
                        .all(|p| matches!(p, Progress::NeedsRefresh { .. })) =>
                {
                    let _ = pause;
                }
                Some(pause) => tokio::time::sleep(pause).await,
                None => {
                    return ev.fail(
                        "the reconcilers kept waiting past the wait budget (or on an object no host resolves here)",
                    );
                }
            }
            res = match self.fetch(&res.id).await {
                Ok(r) => r,
                Err(why) => return ev.fail(why),
            };
        }
        let before = match self.fetch(&res.id).await {
            Ok(r) => r,
            Err(why) => return ev.fail(why),
        };
        let observed_before = match self.actuator.observed(&before).await {
            Ok(v) => v,
            Err(e) => return ev.fail(format!("observed: {}", call(&e))),
        };
        let second = match self.pass(&before).await {
            Ok(s) => s,
            Err(why) => return ev.fail(format!("second pass: {why}")),
        };
        let changed: Vec<String> = second
            .iter()
            .filter(|(_, s)| !s.is_done())
            .map(|(n, s)| format!("{n} answered {}", status(s)))
            .collect();
        let after = match self.fetch(&res.id).await {
            Ok(r) => r,
            Err(why) => return ev.fail(why),
        };
        let observed_after = match self.actuator.observed(&after).await {
            Ok(v) => v,
            Err(e) => return ev.fail(format!("observed: {}", call(&e))),
        };
        self.resource = Some(after);
        if !changed.is_empty() {
            return ev.fail(format!(
                "the second pass is not a no-op: {}",
                changed.join("; ")
            ));
        }
        if observed_before != observed_after {
            return ev.fail(format!(
                "the second pass answered done but the observed state changed in: {} (before {}, after {})",
                changed_keys(&observed_before, &observed_after).join(", "),
                shown(&observed_before),
                shown(&observed_after)
            ));
        }
        ev.note(
            "a second pass answered done for every reconciler; the observed state is unchanged",
        );
        ev.pass()
    }

    async fn observed_schema(&mut self, res: &ExternalResource) -> Verdict {
        let mut ev = Evidence::default();
        let Some(d) = &self.description else {
            return ev.skip("describe did not answer");
        };
        let schema = match Schema::compile(&d.observed_schema) {
            Ok(s) => s,
            Err(e) => return ev.fail(format!("observed-schema does not compile: {e}")),
        };
        let observed = match self.actuator.observed(res).await {
            Ok(v) => v,
            Err(e) => return ev.fail(format!("observed: {}", call(&e))),
        };
        ev.note(format!("observed answered {}", shown(&observed)));
        let errors = schema.errors(&observed);
        if errors.is_empty() {
            ev.note("it matches observed-schema");
            ev.pass()
        } else {
            ev.fail(format!(
                "it does not match observed-schema: {}",
                errors.join("; ")
            ))
        }
    }

    async fn import_by_id(&mut self, res: &ExternalResource) -> Verdict {
        let mut ev = Evidence::default();
        match retry(
            &self.budget,
            async || self.actuator.get_by_id(&self.unmanaged(), &res.id).await,
            transient,
        )
        .await
        {
            Ok(Ok(Some(found))) if found.id == res.id => {
                ev.note(format!(
                    "get-by-id {} for an unmanaged object (no spec) found it",
                    res.id
                ));
                ev.pass()
            }
            Ok(Ok(Some(found))) => ev.fail(format!(
                "get-by-id {} for an unmanaged object answered another id, {}",
                res.id, found.id
            )),
            Ok(Ok(None)) => ev.fail(format!(
                "get-by-id {} for an unmanaged object (no spec) answered none",
                res.id
            )),
            Ok(Err(f)) => ev.fail(format!(
                "get-by-id {} for an unmanaged object failed: {}",
                res.id,
                failure(&f)
            )),
            Err(e) => ev.fail(format!("get-by-id {}: {}", res.id, call(&e))),
        }
    }

    async fn import_by_filter(&mut self, res: &ExternalResource) -> Verdict {
        let mut ev = Evidence::default();
        let Some(d) = &self.description else {
            return ev.skip("describe did not answer");
        };
        let Some(filter_schema) = &d.filter_schema else {
            return ev.skip("the plugin does not import by filter (no filter-schema)");
        };
        let Some(filter) = self.filter.clone() else {
            return ev
                .skip("no filter given (--import-filter, or spec.import.filter in the sample)");
        };
        match Schema::compile(filter_schema) {
            Ok(s) => {
                let errors = s.errors(&filter);
                if !errors.is_empty() {
                    return ev.fail(format!(
                        "the filter {} does not match filter-schema: {}",
                        shown(&filter),
                        errors.join("; ")
                    ));
                }
            }
            Err(e) => return ev.fail(format!("filter-schema does not compile: {e}")),
        }
        let obj = self.unmanaged();
        match retry(
            &self.budget,
            async || self.actuator.list_for_import(&obj, &filter).await,
            transient,
        )
        .await
        {
            Ok(Ok(list)) if matches!(list.as_slice(), [one] if one.id == res.id) => {
                ev.note(format!(
                    "list-for-import {} found exactly [{}]",
                    shown(&filter),
                    res.id
                ));
            }
            Ok(Ok(list)) => {
                return ev.fail(format!(
                    "list-for-import {} found {}, not exactly [{}]",
                    shown(&filter),
                    ids(&list),
                    res.id
                ));
            }
            Ok(Err(f)) => return ev.fail(format!("list-for-import failed: {}", failure(&f))),
            Err(e) => return ev.fail(format!("list-for-import: {}", call(&e))),
        }
        // Near misses: one string field without its first character (a suffix of the real
        // value) must not find the resource.
        let fields: Vec<(String, String)> = filter
            .as_object()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                    .filter(|(_, v)| v.chars().count() >= 2)
                    .collect()
            })
            .unwrap_or_default();
        let mut missed = Vec::new();
        for (field, value) in fields {
            let mut near = filter.clone();
            let cut: String = value.chars().skip(1).collect();
            near[&field] = Value::String(cut);
            match retry(
                &self.budget,
                async || self.actuator.list_for_import(&obj, &near).await,
                transient,
            )
            .await
            {
                Ok(Ok(list)) if list.iter().any(|r| r.id == res.id) => missed.push(format!(
                    "the near miss {} also found {}",
                    shown(&near),
                    res.id
                )),
                Ok(Ok(list)) => ev.note(format!(
                    "the near miss {} found {}",
                    shown(&near),
                    ids(&list)
                )),
                Ok(Err(f)) => ev.note(format!(
                    "the near miss {} was refused: {}",
                    shown(&near),
                    failure(&f)
                )),
                Err(e) => missed.push(format!("the near miss {}: {}", shown(&near), call(&e))),
            }
        }
        if missed.is_empty() {
            ev.pass()
        } else {
            ev.fail(format!(
                "fields are not matched exactly: {}",
                missed.join("; ")
            ))
        }
    }

    async fn delete(&mut self, res: &ExternalResource) -> Verdict {
        let mut ev = Evidence::default();
        let obj = self.managed(&res.id);
        let shortcuts = self.shortcuts();
        let target = self.delete_target(res);
        if shortcuts.delete_by_id {
            ev.note(format!(
                "delete {} by id, its state null (delete-by-id)",
                res.id
            ));
        }
        match retry(
            &self.budget,
            async || self.actuator.delete(&obj, &target).await,
            transient_status,
        )
        .await
        {
            Ok(s) if s.failure.is_some() => {
                return ev.fail(format!("delete {} answered {}", res.id, status(&s)));
            }
            Ok(s) if !s.progress.is_empty() && shortcuts.delete_is_synchronous => {
                return ev.fail(format!(
                    "delete {} answered {}: the plugin declares delete-is-synchronous (orchard:shortcuts), so a delete answers done or a failure",
                    res.id,
                    status(&s)
                ));
            }
            Ok(s) => ev.note(format!("delete {} answered {}", res.id, status(&s))),
            Err(e) => return ev.fail(format!("delete {}: {}", res.id, call(&e))),
        }
        if shortcuts.delete_is_synchronous {
            // Read once, at once: the host releases the object without reading it back.
            match self.actuator.get_by_id(&obj, &res.id).await {
                Ok(Ok(None)) => {
                    self.ledger.gone(&res.id);
                    self.deleted = true;
                    ev.note(format!(
                        "get-by-id {} answers none right after the delete (delete-is-synchronous)",
                        res.id
                    ));
                }
                Ok(Ok(Some(_))) => {
                    return ev.fail(format!(
                        "get-by-id {} still finds it right after the delete answered done: the plugin declares delete-is-synchronous (orchard:shortcuts), so the host would release the object while the resource exists",
                        res.id
                    ));
                }
                Ok(Err(f)) => {
                    return ev.fail(format!("get-by-id {} failed: {}", res.id, failure(&f)));
                }
                Err(e) => return ev.fail(format!("get-by-id {}: {}", res.id, call(&e))),
            }
        } else {
            match wait_gone(self.actuator, &obj, &res.id, &self.budget).await {
                GoneAnswer::Gone => {
                    self.ledger.gone(&res.id);
                    self.deleted = true;
                    ev.note(format!("get-by-id {} answers none", res.id));
                }
                GoneAnswer::Still(why) => return ev.fail(why),
            }
        }
        if shortcuts.delete_by_id {
            // The host deletes by id without reading first, so it also deletes ids whose
            // resource is gone (after a crash before the finalizer went): that MUST be done,
            // or the object would keep its finalizer for ever.
            return match self.actuator.delete(&obj, &by_id(&res.id)).await {
                Ok(s) if s.failure.is_none() && s.progress.is_empty() => {
                    ev.note(format!(
                        "a delete of {} by id, already gone, answered done (delete-by-id)",
                        res.id
                    ));
                    ev.pass()
                }
                Ok(s) => ev.fail(format!(
                    "a delete of {} by id, already gone, answered {}: the plugin declares delete-by-id (orchard:shortcuts), so the host deletes ids it did not read and a gone one MUST answer done",
                    res.id,
                    status(&s)
                )),
                Err(e) => ev.fail(format!(
                    "a delete of {} by id, already gone: {}",
                    res.id,
                    call(&e)
                )),
            };
        }
        ev.pass()
    }

    async fn delete_idempotent(&mut self, res: &ExternalResource) -> Verdict {
        let mut ev = Evidence::default();
        match retry(
            &self.budget,
            async || {
                let target = self.delete_target(res);
                self.actuator.delete(&self.managed(&res.id), &target).await
            },
            transient_status,
        )
        .await
        {
            Ok(s) if s.failure.is_some() => ev.fail(format!(
                "a second delete of {} (already gone) answered {}",
                res.id,
                status(&s)
            )),
            Ok(s) => {
                ev.note(format!(
                    "a second delete of {} (already gone) answered {}",
                    res.id,
                    status(&s)
                ));
                ev.pass()
            }
            Err(e) => ev.fail(format!("a second delete of {}: {}", res.id, call(&e))),
        }
    }

    async fn conversion_round_trip(&mut self) -> Verdict {
        let mut ev = Evidence::default();
        let Some(d) = self.description.clone() else {
            return ev.skip("describe did not answer");
        };
        if !d.converts() {
            return ev.skip("the kind has one API version");
        }
        let sample = Convertible {
            resource: self.sample.spec.clone(),
            annotations: self
                .sample
                .annotations
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            ..Convertible::default()
        };
        let mut broken = Vec::new();
        for other in d.versions.iter().filter(|v| v.name != d.version) {
            let (from, to) = (d.version.as_str(), other.name.as_str());
            let there = match self.actuator.convert(&sample, from, to).await {
                Ok(Ok(c)) => c,
                Ok(Err(f)) => {
                    broken.push(format!("convert {from} to {to} failed: {}", failure(&f)));
                    continue;
                }
                Err(e) => {
                    broken.push(format!("convert {from} to {to}: {}", call(&e)));
                    continue;
                }
            };
            match self.actuator.convert(&there, to, from).await {
                Ok(Ok(back)) if back.resource == sample.resource && same_annotations(&back, &sample) => {
                    ev.note(format!(
                        "{from} to {to} and back gives the sample again (at {to}: {})",
                        shown(&there.resource.clone().unwrap_or_default())
                    ));
                }
                Ok(Ok(back)) => broken.push(format!(
                    "{from} to {to} and back loses or changes fields: sent {}, got back {} (annotations {:?})",
                    shown(&sample.resource.clone().unwrap_or_default()),
                    shown(&back.resource.clone().unwrap_or_default()),
                    back.annotations
                )),
                Ok(Err(f)) => {
                    broken.push(format!("convert {to} back to {from} failed: {}", failure(&f)));
                }
                Err(e) => broken.push(format!("convert {to} back to {from}: {}", call(&e))),
            }
        }
        if broken.is_empty() {
            ev.pass()
        } else {
            ev.fail(broken.join("; "))
        }
    }

    async fn get_unknown_id(&mut self, res: &ExternalResource) -> Verdict {
        let mut ev = Evidence::default();
        match retry(
            &self.budget,
            async || self.actuator.get_by_id(&self.sample, &res.id).await,
            transient,
        )
        .await
        {
            Ok(Ok(None)) => {
                ev.note(format!("get-by-id {} (deleted) answered ok(none)", res.id));
                ev.pass()
            }
            Ok(Ok(Some(found))) => ev.fail(format!(
                "get-by-id {} (deleted) still finds {}",
                res.id, found.id
            )),
            Ok(Err(f)) => ev.fail(format!(
                "get-by-id {} (deleted) answered a failure instead of ok(none): {}",
                res.id,
                failure(&f)
            )),
            Err(e) => ev.fail(format!("get-by-id {}: {}", res.id, call(&e))),
        }
    }

    /// Deletes everything this run created and is still there (also after a failed rule);
    /// first looks with `list-for-adoption` for what a failed call may have made.
    pub async fn cleanup(&mut self) -> Cleanup {
        if self.clean_slate
            && let Ok(Ok(Some(list))) = self.actuator.list_for_adoption(&self.sample).await
        {
            self.record_new(&list);
        }
        let sample = self.sample.clone();
        self.ledger
            .clean(self.actuator, &sample, &self.budget)
            .await
    }
}

/// The resource the host passes to `delete` for a plugin that declares delete-by-id: its id,
/// no state read (JSON `null`).
fn by_id(id: &str) -> ExternalResource {
    ExternalResource {
        id: id.to_owned(),
        state: Value::Null,
    }
}
