//! The plugin calls of one reconcile pass, as `orchard explain` shows them: the reconciler
//! runs a pass inside [`collect`]; every call an actuator makes during it is [`record`]ed
//! (function, duration, outcome). Outside a pass (`orchard invoke`, conformance) recording
//! does nothing.
//!
//! Contract: an implementation of [`super::Actuator`] SHOULD record each call it makes once,
//! when it ends; at most [`MAX_CALLS`] calls of a pass are kept (a plugin cannot grow the
//! record).

use std::cell::RefCell;
use std::time::Duration;

use serde::Serialize;

/// The calls of one pass kept at most.
pub const MAX_CALLS: usize = 16;

/// One plugin call of a pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Call {
    /// The contract's function (`get-by-id`, `create`, …).
    pub function: &'static str,
    /// How long it took, in milliseconds.
    pub took_ms: u64,
    /// `ok` when the plugin answered (its answer may still be a failure), else why not
    /// (`deadline`, `memory-cap`, `trap`, `contract`, `instantiate`, `pool-full`).
    pub outcome: &'static str,
}

tokio::task_local! {
    static CALLS: RefCell<Vec<Call>>;
}

/// Runs `pass`, returning its output and the calls recorded during it.
pub async fn collect<F: Future>(pass: F) -> (F::Output, Vec<Call>) {
    CALLS
        .scope(RefCell::new(Vec::new()), async {
            let output = pass.await;
            let calls = CALLS.with(|c| std::mem::take(&mut *c.borrow_mut()));
            (output, calls)
        })
        .await
}

/// Records a call of the pass running now, if any.
pub fn record(function: &'static str, took: Duration, outcome: &'static str) {
    let _ = CALLS.try_with(|calls| {
        let mut calls = calls.borrow_mut();
        if calls.len() < MAX_CALLS {
            calls.push(Call {
                function,
                took_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
                outcome,
            });
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_calls_of_a_pass_are_collected_in_order_and_bounded_and_none_outside_one() {
        record("describe", Duration::ZERO, "ok");
        let ((), calls) = collect(async {
            record("get-by-id", Duration::from_millis(3), "ok");
            tokio::task::yield_now().await;
            for _ in 0..MAX_CALLS {
                record("create", Duration::from_millis(1), "trap");
            }
        })
        .await;
        assert_eq!(calls.len(), MAX_CALLS);
        assert_eq!(
            calls[0],
            Call {
                function: "get-by-id",
                took_ms: 3,
                outcome: "ok"
            }
        );
        assert_eq!(calls[1].outcome, "trap");
        let ((), none) = collect(async {}).await;
        assert!(none.is_empty(), "a pass starts with no calls");
    }
}
