//! # Orchard
//!
//! A Kubernetes reconcile host. The host owns watches, the work queue, finalizers, status,
//! dependencies and retries; *actuators* — sandboxed WebAssembly components implementing
//! `wit/actuator.wit` — own everything specific to one kind of external resource.
//!
//! Modules, dependencies pointing down the list (`docs/architecture.md` has the map):
//! - [`cli`]: the `orchard` command line — flags into typed configuration, nothing more;
//! - [`workers`]: the host's async runtime and its worker threads;
//! - [`app`]: the host as a library type ([`app::App`]): wiring, shutdown, drain;
//! - [`plugin`]: the `Plugin` CRD and the controller that hot-loads plugins from it;
//! - [`explain`]: `orchard explain` — why an object is where it is;
//! - [`shard`]: sharding across replicas (membership Leases, bucket ring and table, labels);
//! - [`reconcile`]: the generic reconciler, one controller per kind: its `flow` (ORC's phases)
//!   over its `machinery` (caches, work queue, triggers, claims, guards, Events);
//! - [`crd`]: the CRD of a plugin's kind, and its installation;
//! - [`conditions`]: status conditions, one rule for their transition time;
//! - [`oci`]: plugins as OCI artifacts (pull, push, cache, cosign verification);
//! - [`runtime`]: the wasmtime sandbox that turns a component into an [`actuator::Actuator`];
//! - [`actuator`]: the contract as an async Rust trait, its values, and the one validated
//!   boundary every plugin output passes;
//! - [`ops`]: health, metrics, the admin server, leader election;
//! - [`conformance`]: the conformance kit (`orchard conformance`), over the actuator trait.

#![deny(missing_docs)]

pub mod actuator;
pub mod app;
pub mod cli;
pub mod conditions;
pub mod conformance;
pub mod conversion;
pub mod crd;
pub mod explain;
pub mod oci;
pub mod ops;
pub mod plugin;
pub mod reconcile;
pub mod runtime;
pub mod shard;
pub mod workers;
