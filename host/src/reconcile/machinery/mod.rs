//! The machinery that drives and serves the reconcile flow ([`super::flow`]): the caches the
//! passes read, the work queue and the triggers that start them, the claims and the
//! dependents index they consult, the deletion guards beside them, their Events and backoff.
//! The flow uses the machinery, never the other way round: nothing here imports the flow (the
//! annotation names both read are the leaf [`super::annotations`]).
//!
//! Modules, dependencies pointing down the list:
//! - [`guard`]: the deletion-guard controller of a dependency kind;
//! - [`dependents`]: which objects name which dependency (an index kept from the changes);
//! - [`claims`]: which live object holds which external id (exclusive claims);
//! - [`triggers`]: which watch events start a pass (never the host's own writes);
//! - [`queue`]: the kind's work queue: which objects are due, first come first served;
//! - [`writes`]: the host's own last write per object, so that no pass reads an older one;
//! - [`events`]: Events on the objects, with series, posted beside the passes (never awaited);
//! - [`backoff`]: per-object backoff;
//! - [`cache`]: one cache per kind for the whole host, shared by every controller.

pub mod backoff;
pub mod cache;
pub mod claims;
pub mod dependents;
pub mod events;
pub mod guard;
pub mod queue;
pub mod triggers;
pub mod writes;
