//! Host bindings of world `actuator-plugin`, generated from `wit/`.
//! wasi:http and wasi:io come from wasmtime's own WASI crates.

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
