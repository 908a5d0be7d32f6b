//! Waiting on the external system the way the host does: an answer with progress is asked
//! again after its `poll-after` (capped), until the run's wait budget is spent.

use std::time::Duration;

use tokio::time::Instant;

use crate::actuator::{Actuator, CallResult, Failure, ManagedObject, Progress, Status};

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

/// How often a call whose answer is a transient failure is made again.
pub const TRANSIENT_TRIES: u32 = 5;

/// Makes `call` again while `transient` says its answer is a transient failure (the host
/// would retry it with backoff: it is no verdict on the contract), at most
/// [`TRANSIENT_TRIES`] times within the budget; answers the last answer.
pub async fn retry<T>(
    budget: &Budget,
    mut call: impl AsyncFnMut() -> T,
    transient: impl Fn(&T) -> bool,
) -> T {
    let deadline = budget.deadline();
    let pause = Duration::from_millis(500).min(budget.max_poll);
    let mut tries = 1;
    loop {
        let answer = call().await;
        if !transient(&answer) || tries >= TRANSIENT_TRIES || Instant::now() + pause >= deadline {
            return answer;
        }
        tries += 1;
        tracing::info!(
            try_ = tries,
            "conformance: a transient failure, asking again"
        );
        tokio::time::sleep(pause).await;
    }
}

/// A `Result<_, Failure>` answer that is a transient failure.
pub fn transient<T>(answer: &CallResult<Result<T, Failure>>) -> bool {
    matches!(answer, Ok(Err(Failure::Transient(_))))
}

/// A status answer with a transient failure.
pub fn transient_status(answer: &CallResult<Status>) -> bool {
    matches!(answer, Ok(s) if matches!(s.failure, Some(Failure::Transient(_))))
}

/// A `create` answer with a transient failure (it created nothing).
pub fn transient_create<T>(answer: &CallResult<Result<T, Status>>) -> bool {
    matches!(answer, Ok(Err(s)) if matches!(s.failure, Some(Failure::Transient(_))))
}
