//! # Orchard
//!
//! A Kubernetes reconcile host. The host owns watches, the work queue, finalizers, status,
//! dependencies and retries; *actuators* — sandboxed WebAssembly components implementing
//! `wit/actuator.wit` — own everything specific to one kind of external resource.
//!
//! - [`actuator`]: the contract as an async Rust trait, and its values;
//! - [`runtime`]: the wasmtime sandbox that turns a component into an [`actuator::Actuator`];
//! - [`oci`]: plugins as OCI artifacts (pull, push, cache, cosign verification);
//! - [`plugin`]: the `Plugin` CRD and the controller that hot-loads plugins from it;
//! - [`cli`]: the `orchard` command line.

pub mod actuator;
pub mod cli;
pub mod crd;
pub mod oci;
pub mod ops;
pub mod plugin;
pub mod reconcile;
pub mod runtime;
