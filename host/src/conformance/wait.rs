//! Waiting on the external system the way the host does: an answer with progress is asked
//! again after its `poll-after` (capped), until the run's wait budget is spent.

use std::time::Duration;

use tokio::time::Instant;

use crate::actuator::{Actuator, ManagedObject, Progress, Status};

/// How long a run may wait on the external system in one phase, and the longest pause
/// between two polls.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// The most one phase waits (create, delete, convergence of the reconcilers).
    pub total: Duration,
    /// The longest pause between two polls (a longer `poll-after` is shortened to it).
    pub max_poll: Duration,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            total: Duration::from_mins(1),
            max_poll: Duration::from_secs(2),
        }
    }
}

impl Budget {
    /// The deadline of a phase that starts now.
    pub fn deadline(&self) -> Instant {
        Instant::now() + self.total
    }

    /// The pause before asking again after `status`; `None` when it cannot be waited on
    /// here (a wait on another Kubernetes object: no host resolves it) or the deadline is
    /// past.
    pub fn pause(&self, status: &Status, deadline: Instant) -> Option<Duration> {
        let mut pause = Duration::from_millis(200);
        for p in &status.progress {
            match p {
                Progress::WaitingOnExternal { poll_after, .. } => {
                    pause = pause.max((*poll_after).min(self.max_poll));
                }
                Progress::WaitingOnObject { .. } => return None,
                Progress::NeedsRefresh { .. } => {}
            }
        }
        (Instant::now() + pause < deadline).then_some(pause)
    }
}

/// What [`wait_gone`] saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GoneAnswer {
    /// `get-by-id` answered none.
    Gone,
    /// Still there (or no answer) when the budget ran out: why.
    Still(String),
}

/// Polls `get-by-id` until it answers none, within the budget.
pub async fn wait_gone(
    actuator: &dyn Actuator,
    obj: &ManagedObject,
    id: &str,
    budget: &Budget,
) -> GoneAnswer {
    let deadline = budget.deadline();
    loop {
        let last = match actuator.get_by_id(obj, id).await {
            Ok(Ok(None)) => return GoneAnswer::Gone,
            Ok(Ok(Some(_))) => format!(
                "get-by-id {id} still finds it after {}s",
                budget.total.as_secs()
            ),
            Ok(Err(f)) => format!("get-by-id {id} failed: {} {f}", f.reason()),
            Err(e) => format!("get-by-id {id}: {e}"),
        };
        let pause = Duration::from_millis(500).min(budget.max_poll);
        if Instant::now() + pause >= deadline {
            return GoneAnswer::Still(last);
        }
        tokio::time::sleep(pause).await;
    }
}
