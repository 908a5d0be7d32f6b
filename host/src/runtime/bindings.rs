//! Host bindings of world `actuator-plugin`, generated from `wit/`, and of the optional
//! exports: `conversion` (world `versioned-actuator-plugin`) and `orchard:shortcuts/shortcuts`
//! (world `shortcut-actuator-plugin`), looked up by name so that components without them
//! still load. wasi:http and wasi:io come from wasmtime's own WASI
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

/// The name of the optional `shortcuts` export.
pub const SHORTCUTS_EXPORT: &str = "orchard:shortcuts/shortcuts@0.1.0";

/// The optional exports from the world that has both (`shortcut-actuator-plugin` includes
/// `versioned-actuator-plugin`): their imports and shared types are those above. Each is
/// looked up on its own, so a component may have either. Only `conversion` is used through
/// these bindings: `shortcuts` is read by flag name (`super::shortcuts`), so that its flags
/// can grow.
pub mod optional {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "orchard:actuator/shortcut-actuator-plugin",
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
