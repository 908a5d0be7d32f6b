//! The create / update flow (ORC's `reconcileNormal`), as ordered phases:
//!
//! 1. `resolve_dependencies` — dependencies and credentials, from the caches (guard
//!    finalizers at the last moment);
//! 2. `locate` — status.id, import.id, import.filter, adoption, else create (a plugin whose
//!    system refuses duplicates creates first and looks for adoption only when the create
//!    fails). Every id a pass takes is claimed first
//!    ([`crate::reconcile::machinery::claims`]): an id another live object holds is refused;
//! 3. `ensure_finalizer` — our finalizer before anything can change the external system or
//!    an id is recorded; before the create of a plugin that cannot adopt it goes in the same
//!    write as the create-pending marker (one that can adopt needs no marker: adoption runs
//!    before every create);
//! 4. `record_id` — status.id in the pass's status write; written on its own at once, right
//!    after a create, when the plugin cannot adopt (nothing else would find the resource
//!    after a crash);
//! 5. `run_reconcilers` — managed only, every one, statuses aggregated;
//! 6. `observe` — `available()` and `observed()`.

use std::time::Duration;

use jiff::Timestamp;
use kube::ResourceExt;
use kube::api::DynamicObject;

use super::answer::{answer, call_failure};
use super::deps::{self, Purpose};
use super::envelope::{Envelope, Import};
use super::status::{OwnWritten, Pass, StatusId};
use crate::actuator::{Actuator, ExternalResource, Failure, ManagedObject, Progress, WaitEvent};
use crate::reconcile::annotations::CREATE_PENDING;
use crate::reconcile::machinery::claims::Holder;
use crate::reconcile::ops::{Note, OwnMetadata};
use crate::reconcile::{Context, Error, has_finalizer};

/// How often an import filter with no match is polled.
pub const IMPORT_POLL: Duration = Duration::from_secs(5);

/// How the pass came by the resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// By status.id.
    Known,
    Imported,
    Adopted,
    Created,
}

/// Runs the flow over `obj`.
pub async fn run(obj: &DynamicObject, ctx: &Context, envelope: &Envelope) -> Result<Pass, Error> {
    let mut mo = match deps::managed_object(ctx, obj, envelope, Purpose::Create).await? {
        Ok(mo) => mo,
        Err(progress) => {
            // Nothing external happens while waiting, but a missing finalizer is put back.
            ensure_finalizer(obj, ctx).await?;
            return Ok(Pass::waiting(progress));
        }
    };

    // Every call of the pass goes to one view of the plugin (one instance for a component).
    let view = ctx.actuator.for_pass();
    let actuator = view.as_deref().unwrap_or(&*ctx.actuator);
    let mut pass = Pass::default();
    let (res, found) = match locate(obj, ctx, actuator, envelope, &mut mo, &mut pass).await? {
        Ok(located) => located,
        Err(ended) => {
            if pass.own_written == OwnWritten::Nothing {
                ensure_finalizer(obj, ctx).await?;
            }
            return Ok(Pass {
                id: pass.id,
                own_written: pass.own_written,
                // A create that waits may have reported its details already.
                reports: actuator.take_reports(),
                ..ended
            });
        }
    };
    if found != Found::Created {
        ensure_finalizer(obj, ctx).await?;
    }
    if mo.status_id.as_deref() != Some(res.id.as_str()) {
        pass.id = StatusId::Set(res.id.clone());
        mo.status_id = Some(res.id.clone());
    }

    if envelope.managed() {
        run_reconcilers(actuator, &mo, &res, &mut pass).await;
    }
    observe(actuator, &mo, &res, &mut pass).await;
    pass.reports = actuator.take_reports();
    Ok(pass)
}

/// Phase 3: our finalizer (unmanaged objects carry it too, so that their delete runs the
/// flow: ORC's rule).
async fn ensure_finalizer(obj: &DynamicObject, ctx: &Context) -> Result<(), Error> {
    if has_finalizer(obj, &ctx.names.finalizer) {
        return Ok(());
    }
    // The apply names every field the manager owns: a marker of an earlier create stays.
    ctx.ops
        .apply_metadata(
            obj,
            &OwnMetadata {
                finalizer: true,
                create_pending: obj.annotations().get(CREATE_PENDING).cloned(),
            },
        )
        .await
}

fn taken(what: &str, id: &str, other: &Holder) -> Failure {
    Failure::InvalidConfiguration(format!(
        "{what} {id}, which {} already holds; two objects must never manage one external resource",
        other.key
    ))
}

/// Phase 2: find the external resource — or import, adopt, or create it. `Err(pass)` ends
/// the pass (waiting or failed).
async fn locate(
    obj: &DynamicObject,
    ctx: &Context,
    actuator: &dyn Actuator,
    envelope: &Envelope,
    mo: &mut ManagedObject,
    pass: &mut Pass,
) -> Result<Result<(ExternalResource, Found), Pass>, Error> {
    // status.id: the resource we already know — unless an older object holds it (someone
    // edited this status.id): then it is not ours to touch.
    if let Some(id) = mo.status_id.clone() {
        if envelope.managed()
            && let Some(other) = ctx.claims.senior_holder(obj, &id)
        {
            return Ok(Err(Pass::failed(taken("status.id is", &id, &other))));
        }
        match answer(actuator.get_by_id(mo, &id).await) {
            // (An answer with another id is refused at the boundary: `contract::Rule::IdMismatch`.)
            Err(f) => return Ok(Err(Pass::failed(f))),
            Ok(Some(res)) => return Ok(Ok((res, Found::Known))),
            Ok(None) if !envelope.managed() => {
                return Ok(Err(Pass::failed(Failure::Unrecoverable(format!(
                    "the imported resource {id} has been deleted from the external system"
                )))));
            }
            Ok(None) => {
                // Managed and gone: forget the id at once, then recreate it below.
                ctx.ops.patch_status_id(obj, None).await?;
                ctx.ops
                    .publish(
                        obj,
                        Note::warning(
                            "ExternallyDeleted",
                            format!("{id} was deleted outside Orchard; recreating it"),
                        ),
                    )
                    .await;
                ctx.claims.forget(obj);
                pass.id = StatusId::Clear;
                mo.status_id = None;
            }
        }
    }

    match &envelope.import {
        Some(Import::Id(id)) => {
            if let Err(other) = ctx.claims.reserve(obj, id) {
                return Ok(Err(Pass::failed(taken("spec.import.id names", id, &other))));
            }
            return Ok(match answer(actuator.get_by_id(mo, id).await) {
                Err(f) => Err(Pass::failed(f)),
                Ok(Some(res)) => {
                    ctx.ops
                        .publish(
                            obj,
                            Note::normal("Imported", format!("imported {}", res.id)),
                        )
                        .await;
                    Ok((res, Found::Imported))
                }
                Ok(None) => Err(Pass::failed(Failure::InvalidConfiguration(format!(
                    "spec.import.id: {id} does not exist"
                )))),
            });
        }
        Some(Import::Filter(filter)) => {
            let found = match answer(actuator.list_for_import(mo, filter).await) {
                Err(f) => return Ok(Err(Pass::failed(f))),
                Ok(found) => found,
            };
            return Ok(match <[ExternalResource; 1]>::try_from(found) {
                Ok([res]) => {
                    if let Err(other) = ctx.claims.reserve(obj, &res.id) {
                        Err(Pass::failed(taken(
                            "spec.import.filter matches",
                            &res.id,
                            &other,
                        )))
                    } else {
                        ctx.ops
                            .publish(
                                obj,
                                Note::normal("Imported", format!("imported {} by filter", res.id)),
                            )
                            .await;
                        Ok((res, Found::Imported))
                    }
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
            });
        }
        None => {}
    }
    if !envelope.managed() {
        // The envelope decoder refuses this; kept so that no path creates for an unmanaged
        // object.
        return Ok(Err(Pass::failed(Failure::InvalidConfiguration(
            "spec.import: not creating an unmanaged resource".to_owned(),
        ))));
    }

    // Adoption: a resource this object created before its id could be written. Where the
    // external system refuses duplicates, the create itself finds out: the lookup runs only
    // after a create that fails (below), and the plugin can adopt by the shortcut's contract.
    let refuses_duplicates = ctx.description.shortcuts.create_refuses_duplicates;
    let can_adopt = refuses_duplicates
        || match look_for_adoption(obj, ctx, actuator, mo).await {
            Adoption::Adopted(res) => return Ok(Ok((res, Found::Adopted))),
            Adoption::Ended(ended) => return Ok(Err(ended)),
            Adoption::Nothing => true,
            Adoption::NotApplicable if obj.annotations().contains_key(CREATE_PENDING) => {
                return Ok(Err(Pass::failed(Failure::Unrecoverable(format!(
                    "an earlier create was interrupted and this plugin cannot look for what it may have created; \
                     check the external system, then remove the {CREATE_PENDING} annotation"
                )))));
            }
            Adoption::NotApplicable => false,
        };

    // Create, after our finalizer. A plugin that can adopt needs nothing more: adoption runs
    // before every create, so the resource of a create whose id was never recorded is found,
    // not made twice. One that cannot is marked in the same write (the next pass then stops
    // instead of creating blindly) and has its id recorded at once, right after the create.
    // A marker already there (an earlier create of this plugin) stays until an id is recorded.
    let earlier_marker = obj.annotations().get(CREATE_PENDING).cloned();
    let create_pending = match &earlier_marker {
        None if !can_adopt => Some(Timestamp::now().to_string()),
        other => other.clone(),
    };
    if create_pending != earlier_marker || !has_finalizer(obj, &ctx.names.finalizer) {
        ctx.ops
            .apply_metadata(
                obj,
                &OwnMetadata {
                    finalizer: true,
                    create_pending: create_pending.clone(),
                },
            )
            .await?;
        pass.own_written = if earlier_marker.is_none() && create_pending.is_some() {
            OwnWritten::FinalizerAndMarker
        } else {
            OwnWritten::Finalizer
        };
    }
    let marked = create_pending.is_some();
    match actuator.create(mo).await {
        // No answer: whether something was created is unknown. The next pass looks for it by
        // adoption before it creates again; a marker stays (its plugin cannot look: the next
        // pass stops).
        // (What this pass wrote of our metadata is carried by `run`.)
        Err(e) => Ok(Err(Pass::failed(call_failure(&e)))),
        Ok(Err(status)) => {
            // The contract: a create that returns a status created nothing.
            if marked {
                clear_create_pending(obj, ctx).await?;
            }
            // Refused, perhaps as a duplicate: of what this object created before its id was
            // written (adopted now), or of another's (the lookup says whose).
            if refuses_duplicates && status.failure.is_some() {
                match look_for_adoption(obj, ctx, actuator, mo).await {
                    Adoption::Adopted(res) => return Ok(Ok((res, Found::Adopted))),
                    Adoption::Ended(ended) => return Ok(Err(ended)),
                    // Not a duplicate: the create's own failure stands.
                    Adoption::Nothing | Adoption::NotApplicable => {}
                }
            }
            let mut failed = Pass::default();
            failed.absorb(status);
            Ok(Err(failed))
        }
        Ok(Ok(res)) => {
            if ctx.settings.abort_after_create {
                tracing::error!(id = %res.id, "fail point abort-after-create: aborting before status.id is written");
                std::process::abort();
            }
            if let Err(other) = ctx.claims.reserve(obj, &res.id) {
                // The plugin answered with a resource another object holds: it is not ours
                // (deleting it would destroy the other object's resource).
                if marked {
                    clear_create_pending(obj, ctx).await?;
                }
                return Ok(Err(Pass::failed(taken(
                    "create answered the existing resource",
                    &res.id,
                    &other,
                ))));
            }
            if !can_adopt {
                // Nothing would find this resource after a crash: record its id at once.
                ctx.ops.patch_status_id(obj, Some(&res.id)).await?;
            }
            ctx.ops
                .publish(obj, Note::normal("Created", format!("created {}", res.id)))
                .await;
            Ok(Ok((res, Found::Created)))
        }
    }
}

/// What `list-for-adoption` found for this object.
enum Adoption {
    /// One resource, now claimed by this object.
    Adopted(ExternalResource),
    /// The lookup ended the pass: its call failed, several resources match, or another
    /// object holds the match.
    Ended(Pass),
    /// Nothing matches.
    Nothing,
    /// The plugin does not look for this object (`list-for-adoption` answered none).
    NotApplicable,
}

/// Looks for a resource this object created before its id could be written, and claims it.
async fn look_for_adoption(
    obj: &DynamicObject,
    ctx: &Context,
    actuator: &dyn Actuator,
    mo: &ManagedObject,
) -> Adoption {
    let found = match answer(actuator.list_for_adoption(mo).await) {
        Err(f) => return Adoption::Ended(Pass::failed(f)),
        Ok(None) => return Adoption::NotApplicable,
        Ok(Some(found)) => found,
    };
    match <[ExternalResource; 1]>::try_from(found) {
        Ok([res]) => {
            if let Err(other) = ctx.claims.reserve(obj, &res.id) {
                return Adoption::Ended(Pass::failed(taken(
                    "this object matches the existing resource",
                    &res.id,
                    &other,
                )));
            }
            ctx.ops
                .publish(
                    obj,
                    Note::normal("Adopted", format!("adopted existing {}", res.id)),
                )
                .await;
            Adoption::Adopted(res)
        }
        Err(found) if found.is_empty() => Adoption::Nothing,
        Err(found) => Adoption::Ended(Pass::failed(Failure::InvalidConfiguration(format!(
            "{} existing resources match this object ({}); refusing to guess which to adopt",
            found.len(),
            ids(&found)
        )))),
    }
}

fn ids(list: &[ExternalResource]) -> String {
    const SHOWN: usize = 5;
    let text = list
        .iter()
        .take(SHOWN)
        .map(|r| r.id.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    if list.len() > SHOWN {
        format!("{text} and {} more", list.len() - SHOWN)
    } else {
        text
    }
}

/// The marker goes and the finalizer stays (one apply of the finalizer manager's fields).
pub(super) async fn clear_create_pending(obj: &DynamicObject, ctx: &Context) -> Result<(), Error> {
    ctx.ops
        .apply_metadata(
            obj,
            &OwnMetadata {
                finalizer: true,
                create_pending: None,
            },
        )
        .await
}

/// Phase 5: every reconciler, in order, even after one fails; statuses aggregated.
async fn run_reconcilers(
    actuator: &dyn Actuator,
    mo: &ManagedObject,
    res: &ExternalResource,
    pass: &mut Pass,
) {
    let names = match answer(actuator.reconcilers(mo, res).await) {
        Err(f) => return pass.failure = Some(f),
        Ok(names) => names,
    };
    for name in names {
        match actuator.run_reconciler(&name, mo, res).await {
            Err(e) => pass.absorb(call_failure(&e).into()),
            Ok(status) => pass.absorb(status),
        }
    }
}

/// Phase 6: availability and observed state of the resource.
async fn observe(
    actuator: &dyn Actuator,
    mo: &ManagedObject,
    res: &ExternalResource,
    pass: &mut Pass,
) {
    match actuator.available(mo, res).await {
        Err(e) => pass.absorb(call_failure(&e).into()),
        Ok((availability, status)) => {
            pass.availability = Some(availability);
            pass.absorb(status);
        }
    }
    match actuator.observed(res).await {
        Err(e) => pass.absorb(call_failure(&e).into()),
        Ok(observed) => pass.observed = Some(observed),
    }
}
