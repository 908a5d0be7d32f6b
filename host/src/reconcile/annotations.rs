//! The annotations the host reads and writes on the objects it reconciles: the operator's
//! controls (pause, reconcile now) and the host's own create-in-flight marker. A leaf: the
//! flows, the triggers, the seam and `orchard explain` all name them from here.

/// Annotation set while a create is in flight; an interrupted create is never repeated blindly.
pub const CREATE_PENDING: &str = "orchard.dev/create-pending";

/// Annotation of the operator: `"true"` stops every external call for the object (create,
/// update, delete) until it is removed or set to anything else.
pub const PAUSED: &str = "orchard.dev/paused";

/// Annotation of the operator: each new value (e.g. a timestamp, `kubectl annotate
/// --overwrite`) asks for one full pass now, even of an up-to-date object or one in a
/// terminal state.
pub const RECONCILE_NOW: &str = "orchard.dev/reconcile-now";
