//! What the kit created, so that it deletes exactly that — also when a rule failed midway —
//! and nothing else.
//!
//! # Contract
//!
//! - An id is recorded the moment an answer shows the kit made it: `create`'s answer, or a
//!   resource `list-for-adoption` finds after the kit's first create that it did not find
//!   before (a duplicate the plugin made).
//! - The cleanup deletes through the plugin (`get-by-id`, then `delete`, then `get-by-id`
//!   polled until none within the wait budget) and reports every id it could not delete.
//! - Nothing the kit did not record is ever deleted.

use super::report::{Cleanup, Leftover};
use super::wait::{Budget, GoneAnswer, retry, transient, transient_status, wait_gone};
use crate::actuator::{Actuator, ExternalResource, ManagedObject};

/// The resources the kit created.
#[derive(Debug, Default)]
pub struct Ledger {
    entries: Vec<Entry>,
    /// Deleted by a phase through [`Ledger::remove`] (duplicates), for the report.
    removed: Vec<String>,
}

#[derive(Debug)]
struct Entry {
    resource: ExternalResource,
    gone: bool,
}

impl Ledger {
    /// Records `res` (once per id).
    pub fn record(&mut self, res: &ExternalResource) {
        if !self.contains(&res.id) {
            tracing::info!(id = %res.id, "conformance: recorded a created resource");
            self.entries.push(Entry {
                resource: res.clone(),
                gone: false,
            });
        }
    }

    /// Whether `id` is recorded.
    pub fn contains(&self, id: &str) -> bool {
        self.entries.iter().any(|e| e.resource.id == id)
    }

    /// Marks `id` as deleted (by a phase).
    pub fn gone(&mut self, id: &str) {
        for e in &mut self.entries {
            if e.resource.id == id {
                e.gone = true;
            }
        }
    }

    /// Deletes one recorded resource now (a duplicate that must not disturb the phases after
    /// the one that found it); the cleanup reports it as deleted.
    pub async fn remove(
        &mut self,
        actuator: &dyn Actuator,
        sample: &ManagedObject,
        id: &str,
        budget: &Budget,
    ) -> Result<(), String> {
        let Some(entry) = self.entries.iter().find(|e| e.resource.id == id) else {
            return Err(format!("{id} is not one the kit created"));
        };
        let obj = ManagedObject {
            status_id: Some(id.to_owned()),
            ..sample.clone()
        };
        match retry(
            budget,
            async || actuator.delete(&obj, &entry.resource).await,
            transient_status,
        )
        .await
        {
            Err(e) => return Err(format!("delete: {e}")),
            Ok(s) if s.failure.is_some() => {
                return Err(format!(
                    "delete failed: {}",
                    s.failure.map(|f| f.to_string()).unwrap_or_default()
                ));
            }
            Ok(_) => {}
        }
        match wait_gone(actuator, &obj, id, budget).await {
            GoneAnswer::Gone => {
                self.gone(id);
                self.removed.push(id.to_owned());
                Ok(())
            }
            GoneAnswer::Still(why) => Err(why),
        }
    }

    /// Deletes every recorded resource not known to be gone; `sample` is the object they
    /// were created for (its credentials and dependencies reach the calls).
    pub async fn clean(
        &self,
        actuator: &dyn Actuator,
        sample: &ManagedObject,
        budget: &Budget,
    ) -> Cleanup {
        let mut out = Cleanup {
            deleted: self.removed.clone(),
            ..Cleanup::default()
        };
        for e in &self.entries {
            let id = &e.resource.id;
            let obj = ManagedObject {
                status_id: Some(id.clone()),
                ..sample.clone()
            };
            if self.removed.contains(id) {
                continue;
            }
            if e.gone {
                out.already_gone.push(id.clone());
                continue;
            }
            let res = match retry(
                budget,
                async || actuator.get_by_id(&obj, id).await,
                transient,
            )
            .await
            {
                Ok(Ok(None)) => {
                    out.already_gone.push(id.clone());
                    continue;
                }
                Ok(Ok(Some(res))) => res,
                // The answer is unknown: try the delete with what create answered.
                Ok(Err(_)) | Err(_) => e.resource.clone(),
            };
            let leftover = |reason: String| Leftover {
                id: id.clone(),
                reason,
            };
            match retry(
                budget,
                async || actuator.delete(&obj, &res).await,
                transient_status,
            )
            .await
            {
                Err(err) => out.leftovers.push(leftover(format!("delete: {err}"))),
                Ok(status) if status.failure.is_some() => out.leftovers.push(leftover(format!(
                    "delete failed: {}",
                    status.failure.map(|f| f.to_string()).unwrap_or_default()
                ))),
                Ok(_) => match wait_gone(actuator, &obj, id, budget).await {
                    GoneAnswer::Gone => out.deleted.push(id.clone()),
                    GoneAnswer::Still(why) => out.leftovers.push(leftover(why)),
                },
            }
        }
        for l in &out.leftovers {
            tracing::warn!(id = %l.id, reason = %l.reason, "conformance: could not delete a resource it created");
        }
        out
    }
}
