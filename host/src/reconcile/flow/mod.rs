//! One pass over one object, as an ordered list of named phases. The two flows are in
//! [`normal`] (create / update) and [`delete`]; this module runs them:
//!
//! 1. `decode_envelope` — the spec envelope, once; a malformed one is `InvalidConfiguration`;
//! 2. `hold_if_paused` — an object annotated [`PAUSED`] gets no external call at all (not
//!    even its deletion, unless it detaches): its status says `Paused`, nothing else is
//!    written;
//! 3. `skip_if_up_to_date` — nothing changed since the last pass and no resync is due, and no
//!    new [`RECONCILE_NOW`] value asks for a pass;
//! 4. the flow of the object's state (normal or delete);
//! 5. `publish_reports` — the connection details the plugin reported go into the object's
//!    connection Secret (kept for the next pass if that write fails), a correction of drift
//!    into an Event (and `status.drift`, written with the status);
//! 6. `clear_marker` — the create-pending marker goes once the resource can no longer be lost:
//!    its id is recorded, or (a plugin that can adopt) adoption would find it;
//! 7. `write_status` — one status apply, only when something changed (a refused one is
//!    replaced by a minimal status that says why). It is the pass's last write, so whoever
//!    sees the pass's conditions sees the object as the pass leaves it;
//! 8. `next_action` — backoff, poll, resync or wait for a watch event.
//!
//! Writes never wake the controller for another pass ([`super::machinery::triggers`]): what
//! comes next is decided here alone.
//!
//! The flow uses the seam below it ([`super::ops`]) and the [`super::machinery`] that drives
//! and serves it; nothing there imports the flow. Its modules, dependencies pointing down the
//! list:
//! - [`normal`] and [`delete`]: the two flows, each an ordered list of named phases;
//! - [`deps`]: dependencies and credentials, resolved from the caches;
//! - [`status`]: conditions and the status body;
//! - [`envelope`]: the spec envelope, decoded once per pass;
//! - [`answer`]: the plugin's answer to one call, as the flows use it;
//! - [`trace`]: a test instrument, each pass's begin and end appended to a file.

pub mod answer;
pub mod delete;
pub mod deps;
pub mod envelope;
pub mod normal;
pub mod status;
pub mod trace;

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use kube::ResourceExt;
use kube::api::DynamicObject;
use rand::Rng;
use tracing::Instrument;

use super::annotations::{CREATE_PENDING, PAUSED, RECONCILE_NOW};
use super::ops::{Note, SecretWrite};
use super::{Context, Error, PassRecord, has_finalizer};
use crate::actuator::{Failure, Progress};
use crate::reconcile::StoredMeta;
use envelope::Envelope;
use status::{OwnWritten, Pass, StatusId};

/// Delay before refetching a resource a reconciler changed.
const REFRESH: Duration = Duration::from_millis(50);

/// What the controller does after a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Nothing until a watch event (a trigger) brings the object back.
    Wait,
    /// Another pass after this delay (backoff, poll or resync), unless a trigger comes first.
    After(Duration),
}

/// The entry point the controller's workers call for every object of the kind: one pass,
/// with its metrics, trace and span. The pass's future is large (every phase's state); a
/// worker makes one at a time, and a waiting object is only a key in the queue
/// ([`super::machinery::queue`]).
pub async fn reconcile(obj: Arc<DynamicObject>, ctx: Arc<Context>) -> Result<Next, Error> {
    // A root: each pass is a trace of its own (ops::traces), not a child of the controller.
    let span = tracing::info_span!(
        parent: None,
        "reconcile",
        otel.name = format!("reconcile {}", ctx.description.kind),
        plugin = ctx.plugin(),
        object = %obj.name_any(),
        namespace = %obj.stored_namespace(),
        generation = obj.metadata.generation,
        plugin.digest = ctx.actuator.digest(),
        trace_id = tracing::field::Empty,
        outcome = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
        otel.status_description = tracing::field::Empty,
    );
    // In every log line of the pass, to go from the log to the trace.
    if let Some(id) = crate::ops::traces::trace_id(&span) {
        span.record("trace_id", id);
    }
    let metrics = crate::ops::metrics::global();
    let key = format!("{}/{}", obj.stored_namespace(), obj.name_any());
    let started = std::time::Instant::now();
    let trace = ctx.settings.pass_trace.as_deref();
    if let Some(trace) = trace {
        trace.mark(ctx.plugin(), &key, true);
    }
    let at = Timestamp::now();
    let (outcome, calls) =
        crate::actuator::calls::collect(reconcile_object(&obj, &ctx).instrument(span.clone()))
            .await;
    if let Some(trace) = trace {
        trace.mark(ctx.plugin(), &key, false);
    }
    journal(&obj, &ctx, at, started.elapsed(), &outcome, &calls);
    let result = match &outcome {
        Err(_) => "error",
        Ok((pass, _)) => match &pass.failure {
            Some(f) => f.reason(),
            None if pass.progress.is_empty() => "success",
            None => "progressing",
        },
    };
    span.record("outcome", result);
    let failed = match &outcome {
        Err(e) => Some(e.to_string()),
        Ok((pass, _)) => pass.failure.as_ref().map(ToString::to_string),
    };
    if let Some(message) = &failed {
        // What the Ready condition says (already public on the object), cut short.
        span.record("otel.status_code", "ERROR");
        span.record(
            "otel.status_description",
            crate::ops::traces::short(message),
        );
        tracing::info!(parent: &span, error = %message, took_ms = started.elapsed().as_millis(), "pass failed");
    } else {
        tracing::debug!(parent: &span, took_ms = started.elapsed().as_millis(), "pass ended");
    }
    metrics.reconciled(
        ctx.plugin(),
        &ctx.description.kind,
        result,
        started.elapsed(),
    );
    outcome.map(|(_, next)| next)
}

/// Records the pass in the host's journal ([`crate::ops::journal`]): how it ended, its calls,
/// its message and what comes next. A released object is gone: forgotten instead.
fn journal(
    obj: &DynamicObject,
    ctx: &Context,
    at: Timestamp,
    took: Duration,
    outcome: &Result<(Pass, Next), Error>,
    calls: &[crate::actuator::calls::Call],
) {
    use std::borrow::Cow;

    use crate::ops::journal::{CallLine, Entry, NextPass, PassLine};
    let (namespace, name) = (obj.stored_namespace(), obj.name_any());
    let journal = &ctx.settings.journal;
    let (result, message, why, next): (Cow<'static, str>, _, _, _) = match outcome {
        Ok((pass, _)) if pass.released => {
            journal.forget(&ctx.resource, &namespace, &name);
            return;
        }
        // The controller's error policy backs off: when is its business.
        Err(e) => (
            Cow::Borrowed("api-error"),
            Some(e.to_string()),
            "retry",
            None,
        ),
        Ok((pass, next)) => {
            let next = match next {
                Next::Wait => None,
                Next::After(delay) => at
                    .checked_add(took)
                    .and_then(|t| t.checked_add(*delay))
                    .ok(),
            };
            // Without a time, the next pass comes with a change (terminal failures included).
            let timed = |why| if next.is_some() { why } else { "change" };
            let (result, message, why) = if pass.paused {
                ("paused", None, "change")
            } else if pass.skipped {
                ("up-to-date", None, timed("resync"))
            } else if let Some(failure) = &pass.failure {
                (failure.reason(), Some(failure.to_string()), timed("retry"))
            } else if !pass.progress.is_empty() {
                let messages: Vec<String> = pass.progress.iter().map(Progress::message).collect();
                ("progressing", Some(messages.join("; ")), timed("poll"))
            } else {
                ("success", None, timed("resync"))
            };
            (Cow::Borrowed(result), message, why, next)
        }
    };
    journal.record(
        &ctx.resource,
        &namespace,
        &name,
        Entry {
            instance: &ctx.settings.instance,
            plugin: ctx.plugin(),
            kind: &ctx.description.kind,
            line: PassLine {
                at,
                took_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
                outcome: result,
            },
            calls: calls
                .iter()
                .map(|c| CallLine {
                    function: Cow::Borrowed(c.function),
                    took_ms: c.took_ms,
                    outcome: Cow::Borrowed(c.outcome),
                })
                .collect(),
            message,
            next: NextPass {
                at: next,
                why: Cow::Borrowed(why),
            },
            claim: claim(obj, ctx, outcome),
        },
    );
}

/// The object's claim on its external id after the pass: the id it holds or was refused, and
/// another live object that shows the same id.
fn claim(
    obj: &DynamicObject,
    ctx: &Context,
    outcome: &Result<(Pass, Next), Error>,
) -> Option<crate::ops::journal::Claim> {
    let id = match outcome.as_ref().map(|(pass, _)| &pass.id) {
        Ok(StatusId::Set(id)) => id.clone(),
        Ok(StatusId::Clear) => return None,
        Ok(StatusId::Keep) | Err(_) => obj.data["status"]["id"].as_str()?.to_owned(),
    };
    let other = ctx.claims.other_holder(obj, &id);
    let other_holds_it = ctx.claims.senior_holder(obj, &id).is_some();
    Some(crate::ops::journal::Claim {
        id,
        other: other.map(|h| h.key),
        other_holds_it,
    })
}

/// One pass: what it found and what comes next. `Err` only when the Kubernetes API failed
/// (the controller's error policy backs off).
pub async fn reconcile_object(obj: &DynamicObject, ctx: &Context) -> Result<(Pass, Next), Error> {
    let deleting = obj.metadata.deletion_timestamp.is_some();
    let envelope = envelope::decode(&obj.data["spec"]);
    // Taken before the pass: a swap during it means another pass with the new version.
    let plugin_version = ctx.plugin_version();
    let inputs = deps::inputs_fingerprint(ctx.ops.as_ref(), &ctx.description, obj);
    let requested = reconcile_now_key(obj);
    if is_paused(obj) && !(deleting && envelope.as_ref().is_ok_and(Envelope::detaches)) {
        return hold_if_paused(obj, ctx).await;
    }
    if !deleting
        && let Ok(envelope) = &envelope
        && let Some(action) =
            skip_if_up_to_date(obj, ctx, envelope, plugin_version, inputs, requested)
    {
        return Ok((
            Pass {
                skipped: true,
                ..Pass::default()
            },
            action,
        ));
    }

    let pass = match &envelope {
        Err(e) => Ok(Pass::failed(Failure::InvalidConfiguration(e.to_string()))),
        Ok(envelope) if deleting => delete::run(obj, ctx, envelope).await,
        Ok(envelope) => normal::run(obj, ctx, envelope).await,
    };
    // A refusal of the host's RBAC goes into the object's status (saying which verb on which
    // resource), so that it is seen where the user looks, and is retried with backoff.
    let mut pass = match pass {
        Err(e) if e.is_forbidden() => {
            tracing::error!(error = %e, "forbidden: the host's RBAC does not allow this");
            Pass::failed(Failure::Transient(format!("forbidden: {e}")))
        }
        other => other?,
    };
    if pass.released {
        ctx.forget(obj);
        return Ok((pass, Next::Wait));
    }
    if !deleting {
        ctx.record_pass(
            obj,
            PassRecord {
                version: plugin_version,
                inputs,
                requested,
            },
        );
    }
    if let Ok(envelope) = &envelope {
        publish_reports(obj, ctx, envelope, &mut pass).await?;
    }
    clear_marker(obj, ctx, &pass).await?;
    write_status(obj, ctx, &mut pass).await?;
    if !matches!(pass.id, StatusId::Set(_)) {
        ctx.claims.unreserve(obj);
    }
    let resync = envelope.ok().and_then(|e| resync_period(&e, ctx));
    let action = next_action(obj, ctx, &pass, resync);
    Ok((pass, action))
}

/// Whether the operator paused the object ([`PAUSED`]).
pub(crate) fn is_paused(obj: &impl kube::Resource) -> bool {
    obj.annotations().get(PAUSED).is_some_and(|v| v == "true")
}

/// A digest of the object's [`RECONCILE_NOW`] value (0 without one).
fn reconcile_now_key(obj: &DynamicObject) -> u64 {
    use std::hash::{Hash, Hasher};
    obj.annotations().get(RECONCILE_NOW).map_or(0, |v| {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        v.hash(&mut hasher);
        // 0 means "none": a value hashing to it still counts as one.
        hasher.finish().max(1)
    })
}

/// Phase 2: a paused object shows `Paused` and is otherwise left alone — no plugin call, no
/// finalizer or marker write, no pass recorded (so unpausing runs a full pass at once: the
/// annotation's change is a trigger).
async fn hold_if_paused(obj: &DynamicObject, ctx: &Context) -> Result<(Pass, Next), Error> {
    let mut pass = Pass {
        paused: true,
        ..Pass::default()
    };
    write_status(obj, ctx, &mut pass).await?;
    Ok((pass, Next::Wait))
}

/// Phase 3: an object whose Progressing is False at its current generation is up to date
/// until its resync is due — unless the plugin was swapped since its last pass, our finalizer
/// is missing (put it back), or, after a terminal failure, a dependency or the credentials
/// Secret changed (the cause may be fixed there). Filtering here rather than in a watch
/// predicate covers every trigger, and spares the external system a stampede when the host
/// restarts.
fn skip_if_up_to_date(
    obj: &DynamicObject,
    ctx: &Context,
    envelope: &Envelope,
    plugin_version: u64,
    inputs: u64,
    requested: u64,
) -> Option<Next> {
    let record = ctx.pass_record(obj);
    if plugin_version != 0 && record.map(|r| r.version) != Some(plugin_version) {
        return None;
    }
    // A reconcile-now value this host has not passed with (after a restart: once).
    if requested != 0 && record.map(|r| r.requested) != Some(requested) {
        return None;
    }
    if !has_finalizer(obj, &ctx.names.finalizer) && !envelope.detaches() {
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
    if progressing["reason"] == "Paused" {
        // Unpaused: the pass the pause held back.
        return None;
    }
    if progressing["reason"] != "Success" {
        // Terminal: retried only when its inputs changed since the pass that failed (after a
        // restart the host does not know them: it looks once).
        return (record.map(|r| r.inputs) == Some(inputs)).then_some(Next::Wait);
    }
    let Some(period) = resync_period(envelope, ctx) else {
        return Some(Next::Wait);
    };
    let last: Option<Timestamp> = obj.data["status"]["lastSyncTime"]
        .as_str()
        .and_then(|t| t.parse().ok());
    let elapsed = last.map(|t| Timestamp::now().duration_since(t).unsigned_abs())?;
    // Due when the period has fully elapsed: `checked_sub` is `None` past it, zero at it.
    period
        .checked_sub(elapsed)
        .filter(|left| !left.is_zero())
        .map(Next::After)
}

fn resync_period(envelope: &Envelope, ctx: &Context) -> Option<Duration> {
    envelope
        .resync
        .or(ctx.settings.default_resync)
        .filter(|p| !p.is_zero())
}

/// Phase 7: one server-side apply of the status subresource, when anything changed. If the
/// apiserver refuses it (too large, invalid), a minimal status says why and the pass counts
/// as a transient failure (backoff), so the object never shows an id and no condition.
async fn write_status(obj: &DynamicObject, ctx: &Context, pass: &mut Pass) -> Result<(), Error> {
    let now = Timestamp::now();
    let old = &obj.data["status"];
    let generation = obj.metadata.generation.unwrap_or(0);
    let Some(body) = status::body(pass, old, generation, now) else {
        return Ok(());
    };
    match ctx.ops.apply_status(obj, &body).await {
        Ok(()) => {}
        Err(e) if e.is_refused() => {
            let why = e.api_message();
            tracing::warn!(plugin = ctx.plugin(), object = %obj.name_any(), error = %e, "status write refused; writing a minimal status");
            let minimal = status::refused_body(pass, old, generation, now, &why);
            ctx.ops.apply_status(obj, &minimal).await?;
            pass.failure = Some(Failure::Transient(format!(
                "the apiserver refused the status write: {why}"
            )));
        }
        Err(e) => return Err(e),
    }
    if let Some(failure) = &pass.failure {
        let previous = old["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Progressing"))
            .map(|c| c["message"].clone());
        if previous.as_ref().and_then(|m| m.as_str()) != Some(failure.to_string().as_str()) {
            ctx.ops
                .publish(obj, Note::warning(failure.reason(), failure.to_string()))
                .await;
        }
    }
    Ok(())
}

/// Phase 5: what the plugin reported. Connection details go into the Secret the object
/// names, owned by the object (never into status, Events or logs: only their keys are
/// named); a failed write keeps them for the next pass, a transient failure of this one.
/// Drift is an Event naming the fields (the status write records it too); dropped reports
/// are a Warning naming what was dropped.
async fn publish_reports(
    obj: &DynamicObject,
    ctx: &Context,
    envelope: &Envelope,
    pass: &mut Pass,
) -> Result<(), Error> {
    let connection = std::mem::take(&mut pass.reports.connection);
    let details = ctx.take_pending_details(obj, connection);
    if !details.is_empty() {
        let keys = details
            .keys()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(", ");
        match &envelope.connection_secret {
            None => {
                ctx.ops
                    .publish(
                        obj,
                        Note::warning(
                            "ConnectionDetailsDropped",
                            format!("the plugin reported connection details ({keys}), but spec.writeConnectionSecretTo is not set: they are not kept"),
                        ),
                    )
                    .await;
            }
            Some(name) => match ctx.ops.write_connection_secret(obj, name, &details).await {
                Ok(SecretWrite::Written) => {
                    ctx.ops
                        .publish(
                            obj,
                            Note::normal(
                                "ConnectionSecretWritten",
                                format!("wrote {keys} to Secret {name}"),
                            ),
                        )
                        .await;
                }
                Ok(SecretWrite::NotOurs) => {
                    ctx.keep_pending_details(obj, details);
                    pass.failure.get_or_insert(Failure::InvalidConfiguration(format!(
                        "spec.writeConnectionSecretTo.name: Secret {name} exists and this object does not own it; name another Secret (the connection details ({keys}) are kept until then)"
                    )));
                }
                Err(e) if e.is_forbidden() => return Err(e),
                Err(e) => {
                    tracing::warn!(plugin = ctx.plugin(), secret = %name, error = %e, "writing the connection Secret failed; retried at the next pass");
                    ctx.keep_pending_details(obj, details);
                    pass.failure.get_or_insert(Failure::Transient(format!(
                        "writing the connection details ({keys}) to Secret {name}: {e}"
                    )));
                }
            },
        }
    }
    if !pass.reports.drift.is_empty() {
        let message = status::drift_message(&pass.reports.drift);
        ctx.ops
            .publish(obj, Note::normal("DriftCorrected", message))
            .await;
    }
    if !pass.reports.dropped.is_empty() {
        let dropped = pass.reports.dropped.join("; ");
        tracing::warn!(plugin = ctx.plugin(), %dropped, "plugin reports dropped");
        ctx.ops
            .publish(obj, Note::warning("ReportsDropped", dropped))
            .await;
    }
    Ok(())
}

/// Phase 6: the marker of an earlier (or this pass's) create goes once the pass knows the
/// resource. That is safe before the status write: a plugin that cannot adopt had its id
/// written at once, right after the create; for one that can, adoption finds the resource if
/// the host dies before the status write.
async fn clear_marker(obj: &DynamicObject, ctx: &Context, pass: &Pass) -> Result<(), Error> {
    if pass.id.recorded(&obj.data["status"])
        && (pass.own_written == OwnWritten::FinalizerAndMarker
            || obj.annotations().contains_key(CREATE_PENDING))
    {
        normal::clear_create_pending(obj, ctx).await?;
    }
    Ok(())
}

/// Phase 8: when to come back.
fn next_action(obj: &DynamicObject, ctx: &Context, pass: &Pass, resync: Option<Duration>) -> Next {
    let key = obj.stored_uid();
    if let Some(failure) = &pass.failure {
        if failure.is_terminal() {
            ctx.backoff.reset(&key);
            return Next::Wait;
        }
        return Next::After(ctx.backoff.next(&key));
    }
    ctx.backoff.reset(&key);
    let polls = pass.progress.iter().filter_map(|p| match p {
        Progress::WaitingOnExternal { poll_after, .. } => Some(*poll_after),
        Progress::NeedsRefresh { .. } => Some(REFRESH),
        Progress::WaitingOnObject { .. } => None,
    });
    if let Some(soonest) = polls.min() {
        return Next::After(soonest);
    }
    if !pass.progress.is_empty() {
        return Next::Wait; // a watch on the awaited object brings us back
    }
    match (obj.metadata.deletion_timestamp.is_none(), resync) {
        (true, Some(period)) => Next::After(jitter(period)),
        _ => Next::Wait,
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
    fn jitter_adds_between_zero_and_twenty_percent() {
        for _ in 0..100 {
            let d = jitter(Duration::from_secs(100));
            assert!(
                d >= Duration::from_secs(100) && d <= Duration::from_mins(2),
                "{d:?}"
            );
        }
    }
}
