//! # orchard-sdk
//!
//! Write an Orchard actuator in Rust: implement [`Actuator`] with your own `Spec`, `Filter`
//! and `State` types (serde), then export it:
//!
//! ```ignore
//! #[derive(Default)]
//! struct Zone;
//! impl orchard_sdk::Actuator for Zone { /* … */ }
//! orchard_sdk::export_actuator!(Zone);
//! ```
//!
//! Built for `wasm32-wasip2` the crate is a component implementing `wit/actuator.wit`;
//! built natively (as an rlib) the same actuator can be linked into a host through
//! [`Raw`], which is how Orchard measures the cost of the Wasm boundary.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod actuator;
pub mod handler;
pub mod http;
pub mod log;
pub mod report;
#[cfg(feature = "schemars")]
pub mod schema;
pub mod types;

#[cfg(target_arch = "wasm32")]
pub mod export;

pub use actuator::{Actuator, Raw};
pub use handler::{ResourceHandler, ensure};
pub use serde_json::{self, json};
pub use types::*;

/// Bindings generated from `wit/actuator.wit` (world `shortcut-actuator-plugin`: every Rust
/// plugin exports `conversion` — one whose kind has one version lists no versions — and
/// `orchard:shortcuts` — one that declares none gets the generic flow).
#[cfg(target_arch = "wasm32")]
#[allow(
    missing_docs,
    clippy::all,
    clippy::pedantic,
    reason = "bindgen-generated code"
)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "orchard:actuator/shortcut-actuator-plugin",
        pub_export_macro: true,
        export_macro_name: "__export_actuator_plugin",
        default_bindings_module: "::orchard_sdk::bindings",
        generate_all,
    });
}

/// Exports an [`Actuator`] as the component's `orchard:actuator/actuator` interface.
/// Expands to nothing when the crate is built natively.
#[cfg(target_arch = "wasm32")]
#[macro_export]
macro_rules! export_actuator {
    ($ty:ty) => {
        type __OrchardExported = $crate::export::Exported<$ty>;
        $crate::bindings::__export_actuator_plugin!(__OrchardExported with_types_in $crate::bindings);
    };
}

/// Exports an [`Actuator`] as the component's `orchard:actuator/actuator` interface.
/// Expands to nothing when the crate is built natively.
#[cfg(not(target_arch = "wasm32"))]
#[macro_export]
macro_rules! export_actuator {
    ($ty:ty) => {};
}
