//! The delete flow (ORC's `reconcileDelete`), as ordered phases:
//!
//! 1. `wait_for_foreign_finalizers` — dependents' guards (and anyone else's) go first;
//! 2. `detach` — unmanaged or `onDelete: detach`: release, the resource stays;
//! 3. `resolve_dependencies` for delete (a dependency that is gone does not block);
//! 4. `locate_for_delete` — by status.id, else by adoption (an orphan of an interrupted
//!    create); never a resource another live object holds
//!    ([`crate::reconcile::machinery::claims`]). A plugin that deletes by id is not asked
//!    for the resource first: `delete` gets the status.id and a null state;
//! 5. `delete_external`, then poll until it is gone (not read back when the plugin's system
//!    deletes synchronously);
//! 6. `release` — our finalizer goes; nothing else is written.

use std::time::Duration;

use kube::ResourceExt;
use kube::api::DynamicObject;

use super::answer::{answer, call_failure};
use super::deps::{self, Purpose};
use super::envelope::Envelope;
use super::status::Pass;
use crate::actuator::{Actuator, ExternalResource, Failure, ManagedObject, Progress, WaitEvent};
use crate::reconcile::ops::{Note, OwnMetadata};
use crate::reconcile::{Context, Error, has_finalizer};

/// How often a deletion is polled until the resource is gone.
pub const DELETE_POLL: Duration = Duration::from_secs(1);

/// Safety-net poll while other finalizers block the delete (their removal is a trigger).
pub const FOREIGN_FINALIZER_POLL: Duration = Duration::from_secs(30);

/// Runs the flow over `obj`, which is being deleted.
pub async fn run(obj: &DynamicObject, ctx: &Context, envelope: &Envelope) -> Result<Pass, Error> {
    if !has_finalizer(obj, &ctx.names.finalizer) {
        return Ok(Pass {
            released: true,
            ..Pass::default()
        });
    }
    let foreign: Vec<&str> = obj
        .finalizers()
        .iter()
        .filter(|f| **f != ctx.names.finalizer)
        .map(String::as_str)
        .collect();
    if !foreign.is_empty() {
        return Ok(Pass::waiting(vec![Progress::WaitingOnExternal {
            event: WaitEvent::Deletion,
            message: format!(
                "Waiting for finalizers to be removed: {}",
                foreign.join(", ")
            ),
            poll_after: FOREIGN_FINALIZER_POLL,
        }]));
    }
    if envelope.detaches() {
        ctx.ops
            .publish(
                obj,
                Note::normal("Detached", "left the external resource in place"),
            )
            .await;
        return release(obj, ctx).await;
    }

    let mo = match deps::managed_object(ctx, obj, envelope, Purpose::Delete).await? {
        Ok(mo) => mo,
        Err(progress) => return Ok(Pass::waiting(progress)),
    };

    // Every call of the pass goes to one view of the plugin (one instance for a component).
    let view = ctx.actuator.for_pass();
    let actuator = view.as_deref().unwrap_or(&*ctx.actuator);
    let res = match locate_for_delete(obj, ctx, actuator, &mo).await {
        Err(failure) => return Ok(Pass::failed(failure)),
        Ok(Located::Gone) => {
            ctx.ops
                .publish(
                    obj,
                    Note::normal("Deleted", "the external resource is gone"),
                )
                .await;
            return release(obj, ctx).await;
        }
        Ok(Located::HeldByOther { id, holder }) => {
            ctx.ops
                .publish(
                    obj,
                    Note::warning(
                        "LeftInPlace",
                        format!("left {id} in place: {holder} holds it"),
                    ),
                )
                .await;
            return release(obj, ctx).await;
        }
        Ok(Located::Found(res)) => res,
    };

    let mut pass = Pass::default();
    match actuator.delete(&mo, &res).await {
        Err(e) => return Ok(Pass::failed(call_failure(&e))),
        Ok(status) => pass.absorb(status),
    }
    if !pass.is_done() {
        return Ok(pass);
    }
    // Gone already? Then release now; else poll until it is. (A plugin's system that deletes
    // synchronously has: done is gone, it is not read back.)
    if !ctx.description.shortcuts.delete_is_synchronous {
        match answer(actuator.get_by_id(&mo, &res.id).await) {
            Ok(None) => {}
            Err(f) => return Ok(Pass::failed(blocked(ctx, "get-by-id", &f))),
            Ok(Some(_)) => {
                return Ok(Pass::waiting(vec![Progress::WaitingOnExternal {
                    event: WaitEvent::Deletion,
                    message: format!("Waiting for {} to be deleted", res.id),
                    poll_after: DELETE_POLL,
                }]));
            }
        }
    }
    ctx.ops
        .publish(obj, Note::normal("Deleted", format!("deleted {}", res.id)))
        .await;
    release(obj, ctx).await
}

/// What [`locate_for_delete`] found.
enum Located {
    Found(ExternalResource),
    /// Nothing to delete.
    Gone,
    /// The only candidate is held by another live object: not ours to delete.
    HeldByOther {
        id: String,
        holder: String,
    },
}

/// Phase 4: by status.id (read with `get-by-id`, unless the plugin deletes by id), else by
/// adoption. A status.id another live object holds (someone edited ours) is skipped for what
/// adoption finds of our own.
async fn locate_for_delete(
    obj: &DynamicObject,
    ctx: &Context,
    actuator: &dyn Actuator,
    mo: &ManagedObject,
) -> Result<Located, Failure> {
    let mut held = None;
    if let Some(id) = &mo.status_id {
        match ctx.claims.other_holder(obj, id) {
            // The plugin deletes by id (and answers done for one that is gone): not read first.
            None if ctx.description.shortcuts.delete_by_id => {
                return Ok(Located::Found(ExternalResource {
                    id: id.clone(),
                    state: serde_json::Value::Null,
                }));
            }
            None => {
                let found = answer(actuator.get_by_id(mo, id).await)
                    .map_err(|f| blocked(ctx, "get-by-id", &f))?;
                return Ok(match found {
                    Some(res) => Located::Found(res),
                    None => Located::Gone,
                });
            }
            Some(holder) => held = Some((id.clone(), holder.key)),
        }
    }
    let found = answer(actuator.list_for_adoption(mo).await)
        .map_err(|f| blocked(ctx, "list-for-adoption", &f))?;
    // `None`: adoption does not apply to this object, so nothing to delete by name.
    let candidates: Vec<ExternalResource> = found
        .unwrap_or_default()
        .into_iter()
        .filter(|r| {
            let other = ctx.claims.other_holder(obj, &r.id);
            if let Some(other) = &other {
                held.get_or_insert((r.id.clone(), other.key.clone()));
            }
            other.is_none()
        })
        .collect();
    match <[ExternalResource; 1]>::try_from(candidates) {
        Ok([res]) => Ok(Located::Found(res)),
        Err(list) if list.is_empty() => Ok(match held {
            Some((id, holder)) => Located::HeldByOther { id, holder },
            None => Located::Gone,
        }),
        Err(list) => Err(Failure::InvalidConfiguration(format!(
            "{} external resources match this object ({}); delete them by hand, then remove the finalizer {}",
            list.len(),
            list.iter()
                .take(5)
                .map(|r| r.id.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            ctx.names.finalizer,
        ))),
    }
}

/// A failure of `function` while deleting, said as what it is: the deletion waits on it (the
/// finalizer stays), with the way out. The failure keeps its class (terminal or not).
fn blocked(ctx: &Context, function: &str, failure: &Failure) -> Failure {
    let message = format!(
        "deletion is blocked: {function} failed: {failure}; the finalizer {} stays until it succeeds (or the object detaches: onDelete: detach)",
        ctx.names.finalizer
    );
    tracing::warn!(
        plugin = ctx.plugin(),
        function,
        reason = failure.reason(),
        "{message}"
    );
    match failure {
        Failure::Transient(_) => Failure::Transient(message),
        Failure::InvalidConfiguration(_) => Failure::InvalidConfiguration(message),
        Failure::Unrecoverable(_) => Failure::Unrecoverable(message),
    }
}

/// Phase 6: drops our finalizer (an apply with no finalizers under our manager prunes only
/// ours, and the marker with it).
async fn release(obj: &DynamicObject, ctx: &Context) -> Result<Pass, Error> {
    ctx.ops
        .apply_metadata(
            obj,
            &OwnMetadata {
                finalizer: false,
                create_pending: None,
            },
        )
        .await?;
    Ok(Pass {
        released: true,
        ..Pass::default()
    })
}
