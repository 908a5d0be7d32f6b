//! Host bindings of world `actuator-plugin`, generated from `wit/`, and of the optional
//! `conversion` export of world `versioned-actuator-plugin` (looked up by name, so that
//! components without it still load). wasi:http and wasi:io come from wasmtime's own WASI
//! crates.

#![allow(missing_docs, clippy::all, reason = "bindgen-generated code")]

wasmtime::component::bindgen!({
    path: "../wit",
    world: "orchard:actuator/actuator-plugin",
    exports: { default: async },
    with: {
        "wasi:http": wasmtime_wasi_http::p2::bindings::http,
        "wasi:io": wasmtime_wasi::p2::bindings::io,
        "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
    },
    require_store_data_send: true,
});

pub use self::orchard::actuator::log;
pub use self::orchard::actuator::report;
pub use self::orchard::actuator::types as wit;

/// The name of the optional `conversion` export.
pub const CONVERSION_EXPORT: &str = "orchard:actuator/conversion@0.1.2";

/// The `conversion` export alone: its imports and shared types are those above.
pub mod versioned {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "orchard:actuator/versioned-actuator-plugin",
        exports: { default: async },
        with: {
            "wasi:http": wasmtime_wasi_http::p2::bindings::http,
            "wasi:io": wasmtime_wasi::p2::bindings::io,
            "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
            "orchard:actuator/types": super::orchard::actuator::types,
            "orchard:actuator/log": super::orchard::actuator::log,
            "orchard:actuator/report": super::orchard::actuator::report,
        },
        require_store_data_send: true,
    });

    pub use self::exports::orchard::actuator::conversion;
}
