//! Where the suites find what `make test` built: the target directory, the plugin components
//! and the `orchard` binary. One copy for every suite — `host/tests` includes this file too.

use std::path::PathBuf;

/// The workspace root: the nearest directory above the crate holding `Cargo.lock`.
pub fn workspace() -> PathBuf {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    crate_dir
        .ancestors()
        .find(|dir| dir.join("Cargo.lock").is_file())
        .map_or(crate_dir.clone(), PathBuf::from)
}

/// Cargo's target directory (`CARGO_TARGET_DIR`, else the workspace's `target/`).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| workspace().join("target"), PathBuf::from)
}

/// A plugin component built by `make plugins`, by crate or plugin name (`pdns-zone`).
pub fn plugin(crate_name: &str) -> PathBuf {
    target_dir()
        .join("wasm32-wasip2/plugin")
        .join(format!("{}.wasm", crate_name.replace('-', "_")))
}

/// The `orchard` binary under test (`ORCHARD_BIN`, else `target/debug/orchard`).
pub fn orchard_bin() -> PathBuf {
    std::env::var_os("ORCHARD_BIN")
        .map_or_else(|| target_dir().join("debug/orchard"), PathBuf::from)
}
