//! Where the suites find what `make test` built: the target directory, the plugin components
//! and the `orchard` binary. One copy for every suite — `host/tests` includes this file too.

use std::path::PathBuf;

/// The directory of the package under test: `CARGO_MANIFEST_DIR` as cargo sets it when it runs
/// the test, else as it was when the test was compiled. The run-time value comes first because
/// clones of the repository may share one target directory (CI's do, for warm builds): a test
/// binary compiled in one clone and found fresh by cargo in another must read the files of the
/// clone it runs in, not those of a clone that may be gone.
pub fn package_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .filter(|dir| !dir.is_empty())
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
}

/// The workspace root: the nearest directory above the package holding `Cargo.lock`.
pub fn workspace() -> PathBuf {
    let crate_dir = package_dir();
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
