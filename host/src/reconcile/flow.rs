//! The two flows of the generic reconciler, each an ordered list of named phases.
//!
//! Create / update:
//! 1. `skip_if_up_to_date` — Progressing=False at this generation and no resync due;
//! 2. `ensure_finalizer` — before any external call;
//! 3. `resolve_dependencies` — dependencies and credentials (guard finalizers at the last moment);
//! 4. `locate` — status.id, import.id, import.filter, adoption, else create (behind a marker);
//! 5. `record_id` — status.id in its own patch the moment it is known;
//! 6. `run_reconcilers` — managed only, every one, statuses aggregated;
//! 7. `observe` — available() and observed();
//! 8. `write_status` and `next_action` — one status apply; requeue, resync or wait.
//!
//! Delete:
//! 1. `wait_for_foreign_finalizers`; 2. detach (unmanaged or onDelete=detach);
//! 3. `resolve_dependencies` for delete; 4. `locate_for_delete` (id, else adoption);
//! 5. `delete_external` and poll until gone; 6. `release` the finalizer.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use rand::Rng;
use serde_json::{Value, json};
use tracing::Instrument;

use super::status::{self, Pass};
use super::{Context, Error, has_finalizer};
use crate::actuator::{
    CallError, CallResult, ExternalResource, Failure, ManagedObject, Progress, WaitEvent,
};
use crate::deps::{self, Purpose};

/// Annotation set while a create is in flight; an interrupted create is never repeated blindly.
pub const CREATE_PENDING: &str = "orchard.dev/create-pending";

/// How often an import filter with no match is polled.
const IMPORT_POLL: Duration = Duration::from_secs(5);
/// How often a deletion is polled until the resource is gone.
const DELETE_POLL: Duration = Duration::from_secs(1);
/// Delay before refetching a resource a reconciler changed.
const REFRESH: Duration = Duration::from_millis(50);

/// The entry point kube-runtime calls for every object of the kind.
pub async fn reconcile(obj: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Action, Error> {
    let span = tracing::info_span!("reconcile", plugin = ctx.plugin(), object = %obj.name_any(), namespace = %obj.namespace().unwrap_or_default());
    let metrics = crate::ops::metrics::global();
    let key = format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any());
    metrics.set_queued(ctx.plugin(), &key, false);
    let started = std::time::Instant::now();
    let outcome = reconcile_object(&obj, &ctx).instrument(span).await;
    let result = match &outcome {
        Err(_) => "error",
        Ok((pass, _)) => match &pass.failure {
            Some(f) => f.reason(),
            None if pass.progress.is_empty() => "success",
            None => "progressing",
        },
    };
    metrics.reconciled(
        ctx.plugin(),
        &ctx.description.kind,
        result,
        started.elapsed(),
    );
    let action = outcome.map(|(_, action)| action)?;
    metrics.set_queued(ctx.plugin(), &key, action != Action::await_change());
    Ok(action)
}

async fn reconcile_object(obj: &DynamicObject, ctx: &Context) -> Result<(Pass, Action), Error> {
    let pass = if obj.metadata.deletion_timestamp.is_some() {
        reconcile_delete(obj, ctx).await
    } else {
        // Taken before the pass: a swap during it means another pass with the new version.
        let plugin_version = ctx.plugin_version();
        match skip_if_up_to_date(obj, ctx, plugin_version) {
            Some(action) => return Ok((Pass::default(), action)),
            None => {
                let pass = reconcile_normal(obj, ctx).await;
                ctx.passed(obj, plugin_version);
                pass
            }
        }
    };
    // A refusal of the host's RBAC goes into the object's status (saying which verb on which
    // resource), so that it is seen where the user looks, and is retried with backoff.
    let pass = match pass {
        Err(e) if e.is_forbidden() => {
            tracing::error!(error = %e, "forbidden: the host's RBAC does not allow this");
            Pass::failed(Failure::Transient(format!("forbidden: {e}")))
        }
        other => other?,
    };
    if pass.released {
        ctx.forget(obj);
    } else {
        write_status(obj, ctx, &pass).await?;
    }
    let action = next_action(obj, ctx, &pass);
    Ok((pass, action))
}

fn spec(obj: &DynamicObject) -> &Value {
    &obj.data["spec"]
}

fn managed(obj: &DynamicObject) -> bool {
    spec(obj)["managementPolicy"].as_str() != Some("unmanaged")
}

/// An actuator call that produced no answer is a transient failure of this pass.
fn call_failure(e: CallError) -> Failure {
    tracing::warn!(error = %e, "plugin call failed");
    Failure::Transient(e.to_string())
}

/// The actuator's answer, with a call that produced none folded into a transient failure.
fn answer<T>(result: CallResult<Result<T, Failure>>) -> Result<T, Failure> {
    result
        .map_err(call_failure)
        .and_then(std::convert::identity)
}

// ---------------------------------------------------------------------------------------
// Create / update
// ---------------------------------------------------------------------------------------

async fn reconcile_normal(obj: &DynamicObject, ctx: &Context) -> Result<Pass, Error> {
    ensure_finalizer(obj, ctx).await?;

    let mut mo = ManagedObject::from_manifest(&serde_json::to_value(obj).unwrap_or_default());
    match deps::resolve(ctx, obj, Purpose::Create).await? {
        deps::Resolution::Waiting(progress) => return Ok(Pass::waiting(progress)),
        deps::Resolution::Ready {
            dependencies,
            credentials,
        } => {
            mo.dependencies = dependencies;
            mo.credentials = credentials;
        }
    }

    let res = match locate(obj, ctx, &mut mo).await? {
        Ok(res) => res,
        Err(pass) => return Ok(pass),
    };
    record_id(obj, ctx, &mut mo, &res).await?;

    let mut pass = Pass::default();
    if managed(obj) {
        run_reconcilers(ctx, &mo, &res, &mut pass).await;
    }
    observe(ctx, &mo, &res, &mut pass).await;
    Ok(pass)
}

/// Phase 1: an object whose Progressing is False at its current generation is up to date
/// until its resync is due — unless the plugin was swapped since its last pass (the new
/// version re-observes it). Filtering here rather than in a watch predicate covers every
/// trigger, and spares the external system a stampede when the host restarts.
fn skip_if_up_to_date(obj: &DynamicObject, ctx: &Context, plugin_version: u64) -> Option<Action> {
    if !ctx.passed_with(obj, plugin_version) {
        return None;
    }
    let conditions = obj.data["status"]["conditions"].as_array()?;
    let progressing = conditions.iter().find(|c| c["type"] == "Progressing")?;
    let generation = obj.metadata.generation.unwrap_or(0);
    if progressing["status"] != "False"
        || progressing["observedGeneration"].as_i64() != Some(generation)
    {
        return None;
    }
    let Some(period) = resync_period(obj, ctx) else {
        return Some(Action::await_change());
    };
    let last: Option<Timestamp> = obj.data["status"]["lastSyncTime"]
        .as_str()
        .and_then(|t| t.parse().ok());
    let elapsed = last.map(|t| Timestamp::now().duration_since(t).unsigned_abs())?;
    (elapsed < period).then(|| Action::requeue(period - elapsed))
}

fn resync_period(obj: &DynamicObject, ctx: &Context) -> Option<Duration> {
    let period = match spec(obj)["resyncPeriod"].as_str() {
        Some(text) => parse_duration(text),
        None => ctx.settings.default_resync,
    };
    period.filter(|p| !p.is_zero())
}

/// `90s`, `10m`, `1h30m`, `500ms`.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let mut total = Duration::ZERO;
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let (number, tail) = rest.split_at(digits);
        let number: f64 = number.parse().ok()?;
        let (unit, tail) = if let Some(t) = tail.strip_prefix("ms") {
            (0.001, t)
        } else if let Some(t) = tail.strip_prefix('s') {
            (1.0, t)
        } else if let Some(t) = tail.strip_prefix('m') {
            (60.0, t)
        } else if let Some(t) = tail.strip_prefix('h') {
            (3600.0, t)
        } else {
            return None;
        };
        total += Duration::from_secs_f64(number * unit);
        rest = tail;
    }
    Some(total)
}

/// Phase 2: our finalizer, by server-side apply, before any external call.
async fn ensure_finalizer(obj: &DynamicObject, ctx: &Context) -> Result<(), Error> {
    if has_finalizer(obj, &ctx.names.finalizer) {
        return Ok(());
    }
    let body = json!({"metadata": {"uid": obj.uid(), "finalizers": [ctx.names.finalizer]}});
    ctx.apply(obj, &ctx.names.finalizer_manager, body, false)
        .await
}

/// Phase 4: find the external resource — or import, adopt, or create it. `Err(pass)` ends
/// the pass (waiting or failed).
async fn locate(
    obj: &DynamicObject,
    ctx: &Context,
    mo: &mut ManagedObject,
) -> Result<Result<ExternalResource, Pass>, Error> {
    let actuator = &ctx.actuator;
    let policy_managed = managed(obj);

    // status.id: the resource we already know.
    if let Some(id) = mo.status_id.clone() {
        match answer(actuator.get_by_id(mo, &id).await) {
            Err(f) => return Ok(Err(Pass::failed(f))),
            Ok(Some(res)) => return Ok(Ok(res)),
            Ok(None) if !policy_managed => {
                return Ok(Err(Pass::failed(Failure::Unrecoverable(format!(
                    "the imported resource {id} has been deleted from the external system"
                )))));
            }
            Ok(None) => {
                // Managed and gone: forget the id and recreate it below.
                ctx.merge(obj, json!({"status": {"id": null}}), true)
                    .await?;
                ctx.event(
                    obj,
                    EventType::Warning,
                    "ExternallyDeleted",
                    format!("{id} was deleted outside Orchard; recreating it"),
                )
                .await;
                mo.status_id = None;
            }
        }
    }

    let import = &spec(obj)["import"];
    if let Some(id) = import["id"].as_str() {
        return Ok(match answer(actuator.get_by_id(mo, id).await) {
            Err(f) => Err(Pass::failed(f)),
            Ok(Some(res)) => {
                ctx.event(
                    obj,
                    EventType::Normal,
                    "Imported",
                    format!("imported {}", res.id),
                )
                .await;
                Ok(res)
            }
            Ok(None) => Err(Pass::failed(Failure::InvalidConfiguration(format!(
                "spec.import.id: {id} does not exist"
            )))),
        });
    }
    if !import["filter"].is_null() {
        return Ok(
            match answer(actuator.list_for_import(mo, &import["filter"]).await) {
                Err(f) => Err(Pass::failed(f)),
                Ok(found) => match <[ExternalResource; 1]>::try_from(found) {
                    Ok([res]) => {
                        ctx.event(
                            obj,
                            EventType::Normal,
                            "Imported",
                            format!("imported {} by filter", res.id),
                        )
                        .await;
                        Ok(res)
                    }
                    Err(found) if found.is_empty() => {
                        Err(Pass::waiting(vec![Progress::WaitingOnExternal {
                            event: WaitEvent::Creation,
                            message: "Waiting for a resource matching spec.import.filter to exist"
                                .to_owned(),
                            poll_after: IMPORT_POLL,
                        }]))
                    }
                    Err(found) => Err(Pass::failed(Failure::InvalidConfiguration(format!(
                        "spec.import.filter matches {} resources ({}); it must match exactly one",
                        found.len(),
                        ids(&found)
                    )))),
                },
            },
        );
    }
    if !policy_managed {
        return Ok(Err(Pass::failed(Failure::InvalidConfiguration(
            "not creating an unmanaged resource: spec.import is required".to_owned(),
        ))));
    }

    // Adoption: a resource this object created before its id could be written.
    let adoptable = match answer(actuator.list_for_adoption(mo).await) {
        Err(f) => return Ok(Err(Pass::failed(f))),
        Ok(list) => list,
    };
    match adoptable.map(<[ExternalResource; 1]>::try_from) {
        Some(Ok([res])) => {
            ctx.event(
                obj,
                EventType::Normal,
                "Adopted",
                format!("adopted existing {}", res.id),
            )
            .await;
            return Ok(Ok(res));
        }
        Some(Err(found)) if !found.is_empty() => {
            return Ok(Err(Pass::failed(Failure::InvalidConfiguration(format!(
                "{} existing resources match this object ({}); refusing to guess which to adopt",
                found.len(),
                ids(&found)
            )))));
        }
        None if obj.annotations().contains_key(CREATE_PENDING) => {
            return Ok(Err(Pass::failed(Failure::Unrecoverable(format!(
                "an earlier create was interrupted and this plugin cannot look for what it may have created; \
                 check the external system, then remove the {CREATE_PENDING} annotation"
            )))));
        }
        _ => {}
    }

    // Create, behind the marker.
    ctx.merge(
        obj,
        json!({"metadata": {"annotations": {CREATE_PENDING: Timestamp::now().to_string()}}}),
        false,
    )
    .await?;
    match actuator.create(mo).await {
        Err(e) => Ok(Err(Pass::failed(call_failure(e)))),
        Ok(Err(status)) => {
            // The contract: a create that returns a status created nothing.
            clear_create_pending(obj, ctx).await?;
            let mut pass = Pass::default();
            pass.absorb(status);
            Ok(Err(pass))
        }
        Ok(Ok(res)) => {
            if ctx.settings.abort_after_create {
                tracing::error!(id = %res.id, "fail point abort-after-create: aborting before status.id is written");
                std::process::abort();
            }
            ctx.event(
                obj,
                EventType::Normal,
                "Created",
                format!("created {}", res.id),
            )
            .await;
            Ok(Ok(res))
        }
    }
}

fn ids(list: &[ExternalResource]) -> String {
    list.iter()
        .map(|r| r.id.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

async fn clear_create_pending(obj: &DynamicObject, ctx: &Context) -> Result<(), Error> {
    ctx.merge(
        obj,
        json!({"metadata": {"annotations": {CREATE_PENDING: null}}}),
        false,
    )
    .await
}

/// Phase 5: status.id in its own patch, the moment it is known, then the marker goes.
async fn record_id(
    obj: &DynamicObject,
    ctx: &Context,
    mo: &mut ManagedObject,
    res: &ExternalResource,
) -> Result<(), Error> {
    if mo.status_id.as_deref() != Some(res.id.as_str()) {
        ctx.merge(obj, json!({"status": {"id": res.id}}), true)
            .await?;
        mo.status_id = Some(res.id.clone());
    }
    if obj.annotations().contains_key(CREATE_PENDING) {
        clear_create_pending(obj, ctx).await?;
    }
    Ok(())
}

/// Phase 6: every reconciler, in order, even after one fails; statuses aggregated.
async fn run_reconcilers(
    ctx: &Context,
    mo: &ManagedObject,
    res: &ExternalResource,
    pass: &mut Pass,
) {
    let names = match answer(ctx.actuator.reconcilers(mo, res).await) {
        Err(f) => return pass.failure = Some(f),
        Ok(names) => names,
    };
    for name in names {
        match ctx.actuator.run_reconciler(&name, mo, res).await {
            Err(e) => pass.absorb(call_failure(e).into()),
            Ok(status) => pass.absorb(status),
        }
    }
}

/// Phase 7: availability and observed state of the resource.
async fn observe(ctx: &Context, mo: &ManagedObject, res: &ExternalResource, pass: &mut Pass) {
    match ctx.actuator.available(mo, res).await {
        Err(e) => pass.absorb(call_failure(e).into()),
        Ok((availability, status)) => {
            pass.availability = Some(availability);
            pass.absorb(status);
        }
    }
    match ctx.actuator.observed(res).await {
        Err(e) => pass.absorb(call_failure(e).into()),
        Ok(observed) => pass.observed = Some(observed),
    }
}

// ---------------------------------------------------------------------------------------
// Delete
// ---------------------------------------------------------------------------------------

async fn reconcile_delete(obj: &DynamicObject, ctx: &Context) -> Result<Pass, Error> {
    if !has_finalizer(obj, &ctx.names.finalizer) {
        return Ok(Pass {
            released: true,
            ..Pass::default()
        });
    }
    // Dependents' guard finalizers (and anyone else's) go first: that orders deletion.
    let foreign: Vec<&String> = obj
        .finalizers()
        .iter()
        .filter(|f| **f != ctx.names.finalizer)
        .collect();
    if !foreign.is_empty() {
        let names = foreign
            .iter()
            .map(|f| f.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        return Ok(Pass::waiting(vec![Progress::WaitingOnExternal {
            event: WaitEvent::Deletion,
            message: format!("Waiting for finalizers to be removed: {names}"),
            // A watch brings the object back when they go; the poll is a safety net.
            poll_after: Duration::from_secs(30),
        }]));
    }
    let detach =
        !managed(obj) || spec(obj)["managedOptions"]["onDelete"].as_str() == Some("detach");
    if detach {
        ctx.event(
            obj,
            EventType::Normal,
            "Detached",
            "left the external resource in place".to_owned(),
        )
        .await;
        return release(obj, ctx).await;
    }

    let mut mo = ManagedObject::from_manifest(&serde_json::to_value(obj).unwrap_or_default());
    match deps::resolve(ctx, obj, Purpose::Delete).await? {
        deps::Resolution::Waiting(progress) => return Ok(Pass::waiting(progress)),
        deps::Resolution::Ready {
            dependencies,
            credentials,
        } => {
            mo.dependencies = dependencies;
            mo.credentials = credentials;
        }
    }

    let res = match locate_for_delete(ctx, &mo).await {
        Err(failure) => return Ok(Pass::failed(failure)),
        Ok(None) => {
            ctx.event(
                obj,
                EventType::Normal,
                "Deleted",
                "the external resource is gone".to_owned(),
            )
            .await;
            return release(obj, ctx).await;
        }
        Ok(Some(res)) => res,
    };

    let mut pass = Pass::default();
    match ctx.actuator.delete(&mo, &res).await {
        Err(e) => return Ok(Pass::failed(call_failure(e))),
        Ok(status) => pass.absorb(status),
    }
    if !pass.is_done() {
        return Ok(pass);
    }
    // Gone already? Then release now; else poll until it is.
    match answer(ctx.actuator.get_by_id(&mo, &res.id).await) {
        Ok(None) => {
            ctx.event(
                obj,
                EventType::Normal,
                "Deleted",
                format!("deleted {}", res.id),
            )
            .await;
            release(obj, ctx).await
        }
        Err(f) => Ok(Pass::failed(f)),
        Ok(Some(_)) => Ok(Pass::waiting(vec![Progress::WaitingOnExternal {
            event: WaitEvent::Deletion,
            message: format!("Waiting for {} to be deleted", res.id),
            poll_after: DELETE_POLL,
        }])),
    }
}

/// By status.id, else by adoption (an orphan of an interrupted create). `None`: nothing to delete.
async fn locate_for_delete(
    ctx: &Context,
    mo: &ManagedObject,
) -> Result<Option<ExternalResource>, Failure> {
    if let Some(id) = &mo.status_id {
        return answer(ctx.actuator.get_by_id(mo, id).await);
    }
    let found = answer(ctx.actuator.list_for_adoption(mo).await)?;
    match found.map(<[ExternalResource; 1]>::try_from) {
        None => Ok(None),
        Some(Ok([res])) => Ok(Some(res)),
        Some(Err(list)) if list.is_empty() => Ok(None),
        Some(Err(list)) => Err(Failure::InvalidConfiguration(format!(
            "{} external resources match this object ({}); delete them by hand",
            list.len(),
            ids(&list)
        ))),
    }
}

/// Drops our finalizer: an apply with no finalizers under our manager prunes only ours.
async fn release(obj: &DynamicObject, ctx: &Context) -> Result<Pass, Error> {
    let body = json!({"metadata": {"uid": obj.uid(), "finalizers": []}});
    ctx.apply(obj, &ctx.names.finalizer_manager, body, false)
        .await?;
    ctx.backoff.reset(&obj.uid().unwrap_or_default());
    Ok(Pass {
        released: true,
        ..Pass::default()
    })
}

// ---------------------------------------------------------------------------------------
// Status and what comes next
// ---------------------------------------------------------------------------------------

/// Phase 8a: one server-side apply of the status subresource.
async fn write_status(obj: &DynamicObject, ctx: &Context, pass: &Pass) -> Result<(), Error> {
    let now = Timestamp::now();
    let old = &obj.data["status"];
    let generation = obj.metadata.generation.unwrap_or(0);
    let conditions = status::conditions(pass, old["id"].is_string());
    let mut status = json!({
        "conditions": status::conditions_json(&conditions, &old["conditions"], generation, now),
    });
    if let Some(observed) = pass.observed.as_ref().filter(|o| !o.is_null()) {
        status["resource"] = observed.clone();
    }
    if pass.is_done() {
        status["lastSyncTime"] = json!(now.to_string());
    } else if let Some(last) = old["lastSyncTime"].as_str() {
        status["lastSyncTime"] = json!(last);
    }
    if old["conditions"]
        .as_array()
        .is_some_and(|_| unchanged(old, &status))
    {
        return Ok(());
    }
    ctx.apply(
        obj,
        &ctx.names.status_manager,
        json!({"status": status}),
        true,
    )
    .await?;
    if let Some(failure) = &pass.failure {
        let previous_message = old["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Progressing"))
            .map(|c| c["message"].clone());
        if previous_message != Some(json!(failure.to_string())) {
            ctx.event(
                obj,
                EventType::Warning,
                failure.reason(),
                failure.to_string(),
            )
            .await;
        }
    }
    Ok(())
}

/// Whether writing `new` would change nothing but lastSyncTime of a still-synced object.
fn unchanged(old: &Value, new: &Value) -> bool {
    old["conditions"] == new["conditions"]
        && old["resource"] == new["resource"]
        && old["lastSyncTime"] == new["lastSyncTime"]
}

/// Phase 8b: when to come back.
fn next_action(obj: &DynamicObject, ctx: &Context, pass: &Pass) -> Action {
    let key = obj.uid().unwrap_or_default();
    if pass.released {
        return Action::await_change();
    }
    if let Some(failure) = &pass.failure {
        if failure.is_terminal() {
            ctx.backoff.reset(&key);
            return Action::await_change();
        }
        return Action::requeue(ctx.backoff.next(&key));
    }
    ctx.backoff.reset(&key);
    let polls = pass.progress.iter().filter_map(|p| match p {
        Progress::WaitingOnExternal { poll_after, .. } => Some(*poll_after),
        Progress::NeedsRefresh { .. } => Some(REFRESH),
        Progress::WaitingOnObject { .. } => None,
    });
    if let Some(soonest) = polls.min() {
        return Action::requeue(soonest);
    }
    if !pass.progress.is_empty() {
        return Action::await_change(); // a watch on the awaited object brings us back
    }
    match (
        obj.metadata.deletion_timestamp.is_none(),
        resync_period(obj, ctx),
    ) {
        (true, Some(period)) => Action::requeue(jitter(period)),
        _ => Action::await_change(),
    }
}

/// `period` plus 0–20 %, so that objects created together do not resync together.
fn jitter(period: Duration) -> Duration {
    period.mul_f64(1.0 + rand::rng().random_range(0.0..0.2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_like_kubernetes_durations() {
        assert_eq!(parse_duration("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("0s"), Some(Duration::ZERO));
        assert_eq!(parse_duration("10"), None);
        assert_eq!(parse_duration("10x"), None);
        assert_eq!(parse_duration(""), None);
    }

    #[test]
    fn jitter_adds_between_zero_and_twenty_percent() {
        for _ in 0..100 {
            let d = jitter(Duration::from_secs(100));
            assert!(
                d >= Duration::from_secs(100) && d <= Duration::from_secs(120),
                "{d:?}"
            );
        }
    }
}
