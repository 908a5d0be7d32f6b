//! Status conditions (the `metav1.Condition` shape) as the host writes them: on the objects of
//! the kinds it reconciles (`reconcile::flow::status`) and on Plugin objects
//! (`plugin::status`).
//!
//! One rule for `lastTransitionTime`, the Kubernetes API conventions': it MUST move only when
//! the condition's status changes. Rewriting an unchanged status then changes nothing (no
//! watch event), and a new message under the same status keeps "since when".

use jiff::Timestamp;
use serde_json::{Value, json};

use crate::actuator::contract::{TRUNCATION_MARKER, cut};

/// Longest condition message the host writes (the CRDs accept this much).
pub const MAX_MESSAGE: usize = 32768;

/// One condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    /// `Available`, `Progressing`, `Ready`…
    pub type_: &'static str,
    /// `True`, `False` or `Unknown`.
    pub status: &'static str,
    /// CamelCase reason.
    pub reason: String,
    /// Human-readable message (cut at [`MAX_MESSAGE`]).
    pub message: String,
}

/// `conditions` as JSON over the object's `existing` conditions (a JSON array, or null),
/// for `generation`, at `now`.
pub fn to_json(
    conditions: &[Condition],
    existing: &Value,
    generation: Option<i64>,
    now: Timestamp,
) -> Value {
    // No conditions yet (or not a list): every condition is new and its transition time is now.
    let old = existing.as_array().map(Vec::as_slice).unwrap_or_default();
    Value::Array(
        conditions
            .iter()
            .map(|c| {
                let previous = old.iter().find(|o| o["type"] == c.type_);
                let since = match previous {
                    Some(p) if p["status"] == c.status && p["lastTransitionTime"].is_string() => {
                        p["lastTransitionTime"].clone()
                    }
                    _ => json!(now.to_string()),
                };
                json!({
                    "type": c.type_,
                    "status": c.status,
                    "reason": c.reason,
                    "message": cut(&c.message, MAX_MESSAGE, TRUNCATION_MARKER),
                    "lastTransitionTime": since,
                    "observedGeneration": generation,
                })
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready(status: &'static str, message: &str) -> Condition {
        Condition {
            type_: "Ready",
            status,
            reason: "Serving".into(),
            message: message.into(),
        }
    }

    #[test]
    fn the_transition_time_moves_only_when_the_status_does() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let t1: Timestamp = "2026-01-02T00:00:00Z".parse().unwrap();
        let first = to_json(&[ready("True", "a")], &Value::Null, Some(1), t0);
        let same = to_json(&[ready("True", "a")], &first, Some(2), t1);
        assert_eq!(same[0]["lastTransitionTime"], "2026-01-01T00:00:00Z");
        assert_eq!(same[0]["observedGeneration"], 2);
        let new_message = to_json(&[ready("True", "b")], &same, Some(2), t1);
        assert_eq!(new_message[0]["lastTransitionTime"], "2026-01-01T00:00:00Z");
        assert_eq!(new_message[0]["message"], "b");
        let flipped = to_json(&[ready("False", "b")], &new_message, Some(2), t1);
        assert_eq!(flipped[0]["lastTransitionTime"], "2026-01-02T00:00:00Z");
    }

    #[test]
    fn a_long_message_is_cut_to_what_the_crd_accepts() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let long = "x".repeat(MAX_MESSAGE * 2);
        let json = to_json(&[ready("True", &long)], &Value::Null, Some(1), t0);
        assert!(json[0]["message"].as_str().unwrap().len() <= MAX_MESSAGE);
    }
}
