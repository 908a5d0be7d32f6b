//! The status of a pass: Available and Progressing computed from what the pass found (ORC's
//! rules), and the body of the one server-side apply that writes them.

use jiff::Timestamp;
use serde_json::{Value, json};

use crate::actuator::{Availability, Drift, Failure, Progress, Reports};

/// What one pass of the reconciler found out.
#[derive(Debug, Default)]
pub struct Pass {
    /// Work not finished.
    pub progress: Vec<Progress>,
    /// Why the pass failed, if it did.
    pub failure: Option<Failure>,
    /// `observed()` of the resource, when it was fetched.
    pub observed: Option<Value>,
    /// `available()` of the resource, when it was fetched.
    pub availability: Option<Availability>,
    /// The object's finalizer was removed: it may be gone, write nothing.
    pub released: bool,
    /// What `status.id` must be after the pass.
    pub id: StatusId,
    /// What this pass wrote of our own metadata before a create.
    pub own_written: OwnWritten,
    /// The object is paused (`orchard.dev/paused`): nothing was done.
    pub paused: bool,
    /// The object was up to date: the pass ended at phase 3 (no call, no write).
    pub skipped: bool,
    /// What the plugin reported during the pass (connection details, drift).
    pub reports: Reports,
}

/// What a pass wrote of our own metadata (finalizer, create-pending marker) before a create;
/// the object read at its start lacks it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OwnWritten {
    /// Nothing: both were there, or no create was tried.
    #[default]
    Nothing,
    /// Our finalizer (a plugin that can adopt, or a marker already there).
    Finalizer,
    /// Our finalizer and the create-pending marker (a plugin that cannot adopt).
    FinalizerAndMarker,
}

/// What a pass does to `status.id`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum StatusId {
    /// As it was.
    #[default]
    Keep,
    /// Recorded by this pass (in the status write, unless already written at once).
    Set(String),
    /// Forgotten (the resource was deleted outside Orchard; already patched away).
    Clear,
}

impl Pass {
    /// A pass that stopped on progress (waiting).
    pub fn waiting(progress: Vec<Progress>) -> Self {
        Self {
            progress,
            ..Self::default()
        }
    }

    /// A pass that failed.
    pub fn failed(failure: Failure) -> Self {
        Self {
            failure: Some(failure),
            ..Self::default()
        }
    }

    /// Nothing pending and no failure.
    pub fn is_done(&self) -> bool {
        self.progress.is_empty() && self.failure.is_none() && !self.paused
    }

    /// Adds a step's status.
    pub fn absorb(&mut self, status: crate::actuator::Status) {
        self.progress.extend(status.progress);
        if self.failure.is_none() {
            self.failure = status.failure;
        }
    }
}

pub use crate::conditions::Condition;

/// Progressing and Available for a pass (ORC's rules).
pub fn conditions(pass: &Pass, has_id: bool) -> [Condition; 2] {
    if pass.paused {
        let message = "Paused by the annotation orchard.dev/paused: the external resource is not created, changed or deleted until it is removed".to_owned();
        return [
            Condition {
                type_: "Available",
                status: if has_id { "Unknown" } else { "False" },
                reason: "Paused".to_owned(),
                message: message.clone(),
            },
            Condition {
                type_: "Progressing",
                status: "False",
                reason: "Paused".to_owned(),
                message,
            },
        ];
    }
    let progressing = match (&pass.failure, pass.progress.is_empty()) {
        (Some(f), _) => Condition {
            type_: "Progressing",
            status: if f.is_terminal() { "False" } else { "True" },
            reason: f.reason().to_owned(),
            message: f.to_string(),
        },
        (None, false) => Condition {
            type_: "Progressing",
            status: "True",
            reason: "Progressing".to_owned(),
            message: pass
                .progress
                .iter()
                .map(Progress::message)
                .collect::<Vec<_>>()
                .join("; "),
        },
        (None, true) => Condition {
            type_: "Progressing",
            status: "False",
            reason: "Success".to_owned(),
            message: "The external resource is up to date".to_owned(),
        },
    };
    let terminal = pass.failure.as_ref().is_some_and(Failure::is_terminal);
    let available = match pass.availability {
        Some(Availability::Available) if !terminal => Condition {
            type_: "Available",
            status: "True",
            reason: "Success".to_owned(),
            message: "The external resource is available".to_owned(),
        },
        // Not known to be available: say why, in Progressing's words.
        availability => Condition {
            type_: "Available",
            status: match availability {
                Some(Availability::Unknown) | None if has_id && !terminal => "Unknown",
                _ => "False",
            },
            reason: progressing.reason.clone(),
            message: progressing.message.clone(),
        },
    };
    [available, progressing]
}

/// The conditions as JSON over the object's `existing` ones ([`crate::conditions`]'s rule
/// for `lastTransitionTime`).
pub fn conditions_json(
    conds: &[Condition],
    existing: &Value,
    generation: i64,
    now: Timestamp,
) -> Value {
    crate::conditions::to_json(conds, existing, Some(generation), now)
}

impl StatusId {
    /// status.id once the pass is written, over the object's `old` status.
    pub fn after(&self, old: &Value) -> Option<String> {
        match self {
            Self::Keep => old["id"].as_str().map(str::to_owned),
            Self::Set(id) => Some(id.clone()),
            Self::Clear => None,
        }
    }

    /// Whether the resource's id is known once the pass is written.
    pub fn recorded(&self, old: &Value) -> bool {
        self.after(old).is_some()
    }
}

/// The body of the status apply for `pass` over the object's `old` status; `None` when it
/// would change nothing (an up-to-date object costs no write).
pub fn body(pass: &Pass, old: &Value, generation: i64, now: Timestamp) -> Option<Value> {
    let id = pass.id.after(old);
    let conditions = conditions(pass, id.is_some());
    let mut status = json!({
        "conditions": conditions_json(&conditions, &old["conditions"], generation, now),
    });
    // status.id is in every apply that knows it: an apply that left it out would prune it.
    if let Some(id) = &id {
        status["id"] = json!(id);
    }
    if let Some(observed) = pass.observed.as_ref().filter(|o| !o.is_null()) {
        status["resource"] = observed.clone();
    } else if pass.observed.is_none() && !old["resource"].is_null() && id.is_some() {
        // Not fetched this pass: keep what was observed last (ORC drops it; a status that
        // flickers between passes wakes every watcher of the object for nothing).
        status["resource"] = old["resource"].clone();
    }
    if pass.is_done() {
        status["lastSyncTime"] = json!(now.to_string());
    } else if let Some(last) = old["lastSyncTime"].as_str() {
        status["lastSyncTime"] = json!(last);
    }
    if !pass.reports.drift.is_empty() {
        status["drift"] = drift_json(&pass.reports.drift, now);
    } else if !old["drift"].is_null() {
        // The last correction stays until the next one.
        status["drift"] = old["drift"].clone();
    }
    // lastSyncTime is `now` on a done pass, so a done pass (a create, a resync, a new plugin
    // version) always records that it synced; any other pass writes only what changed.
    let unchanged = old["conditions"].is_array()
        && old["conditions"] == status["conditions"]
        && old["resource"] == status["resource"]
        && old["id"] == status["id"]
        && old["lastSyncTime"] == status["lastSyncTime"]
        && old["drift"] == status["drift"];
    (!unchanged).then_some(status)
}

/// `status.drift`: the fields of the last correction (sensitive values masked).
fn drift_json(drift: &[Drift], now: Timestamp) -> Value {
    let fields: Vec<Value> = drift.iter().map(Drift::shown).collect();
    json!({"time": now.to_string(), "fields": fields})
}

/// What an Event says of a correction: `field: observed → desired`, for each field.
pub fn drift_message(drift: &[Drift]) -> String {
    let shown = |v: Option<&str>| v.unwrap_or("(absent)").to_owned();
    let fields: Vec<String> = drift
        .iter()
        .map(|d| {
            format!(
                "{}: {} → {}",
                d.field,
                shown(d.shown_observed()),
                shown(d.shown_desired())
            )
        })
        .collect();
    format!("changed back to the spec: {}", fields.join("; "))
}

/// The minimal status written when the apiserver refused the full one: the id and the
/// conditions, saying why.
pub fn refused_body(pass: &Pass, old: &Value, generation: i64, now: Timestamp, why: &str) -> Value {
    let refused = Pass {
        failure: Some(Failure::Transient(format!(
            "the apiserver refused the status write: {why}"
        ))),
        id: pass.id.clone(),
        ..Pass::default()
    };
    let id = pass.id.after(old);
    let conditions = conditions(&refused, id.is_some());
    let mut status = json!({
        "conditions": conditions_json(&conditions, &old["conditions"], generation, now),
    });
    if let Some(id) = id {
        status["id"] = json!(id);
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actuator::WaitEvent;

    fn cond<'a>(c: &'a [Condition; 2], t: &str) -> &'a Condition {
        c.iter().find(|c| c.type_ == t).unwrap()
    }

    #[test]
    fn a_finished_available_pass_is_available_and_not_progressing() {
        let pass = Pass {
            availability: Some(Availability::Available),
            ..Pass::default()
        };
        let c = conditions(&pass, true);
        assert_eq!(
            (cond(&c, "Available").status, cond(&c, "Progressing").status),
            ("True", "False")
        );
        assert_eq!(cond(&c, "Progressing").reason, "Success");
    }

    #[test]
    fn a_terminal_failure_stops_progressing_and_forces_unavailable() {
        let pass = Pass {
            failure: Some(Failure::InvalidConfiguration("bad name".into())),
            availability: Some(Availability::Available),
            ..Pass::default()
        };
        let c = conditions(&pass, true);
        assert_eq!(cond(&c, "Progressing").status, "False");
        assert_eq!(cond(&c, "Progressing").reason, "InvalidConfiguration");
        assert_eq!(cond(&c, "Available").status, "False");
        assert_eq!(cond(&c, "Available").message, "bad name");
    }

    #[test]
    fn a_transient_failure_keeps_progressing_with_its_reason() {
        let c = conditions(
            &Pass::failed(Failure::Transient("connection refused".into())),
            true,
        );
        assert_eq!(cond(&c, "Progressing").status, "True");
        assert_eq!(cond(&c, "Progressing").reason, "TransientError");
        assert_eq!(cond(&c, "Available").status, "Unknown");
    }

    #[test]
    fn waiting_without_an_id_is_unavailable_with_the_waiting_message() {
        let pass = Pass::waiting(vec![Progress::WaitingOnObject {
            kind: "DnsZone".into(),
            name: "zone".into(),
            event: WaitEvent::Ready,
        }]);
        let c = conditions(&pass, false);
        assert_eq!(cond(&c, "Available").status, "False");
        assert_eq!(
            cond(&c, "Progressing").message,
            "Waiting for DnsZone/zone to be available"
        );
    }

    #[test]
    fn an_unchanged_condition_keeps_its_transition_time() {
        let pass = Pass {
            availability: Some(Availability::Available),
            ..Pass::default()
        };
        let c = conditions(&pass, true);
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let t1: Timestamp = "2026-01-02T00:00:00Z".parse().unwrap();
        let first = conditions_json(&c, &Value::Null, 1, t0);
        let second = conditions_json(&c, &first, 2, t1);
        assert_eq!(second[0]["lastTransitionTime"], "2026-01-01T00:00:00Z");
        assert_eq!(second[0]["observedGeneration"], 2);
        let changed = conditions(&Pass::failed(Failure::Transient("x".into())), true);
        let third = conditions_json(&changed, &second, 2, t1);
        assert_eq!(third[0]["lastTransitionTime"], "2026-01-02T00:00:00Z");
    }
}
