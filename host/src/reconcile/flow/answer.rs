//! The plugin's answer to one call, as the flows use it: a call that produced no answer (a
//! trap, a deadline, a broken contract) is a transient failure of the pass, never the host's.

use crate::actuator::{CallError, CallResult, Failure};

/// An actuator call that produced no answer is a transient failure of this pass.
pub fn call_failure(e: &CallError) -> Failure {
    tracing::warn!(plugin = e.plugin(), error = %e, "plugin call failed");
    Failure::Transient(e.to_string())
}

/// The actuator's answer, with a call that produced none folded into a transient failure.
pub fn answer<T>(result: CallResult<Result<T, Failure>>) -> Result<T, Failure> {
    result
        .map_err(|e| call_failure(&e))
        .and_then(std::convert::identity)
}
