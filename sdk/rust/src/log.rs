//! Logs from the plugin into the host's `tracing`, tagged there with plugin and object.
//! Natively linked plugins log nowhere (their host has its own tracing).

/// Severity of a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Step-by-step detail, normally filtered out.
    Trace,
    /// Detail useful when debugging one plugin.
    Debug,
    /// Normal operation worth recording.
    Info,
    /// Something unexpected the plugin recovered from.
    Warn,
    /// A failure the plugin could not handle.
    Error,
}

/// Sends one line to the host.
pub fn log(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    {
        use crate::bindings::orchard::actuator::log::{Level as L, log as host_log};
        let level = match level {
            Level::Trace => L::Trace,
            Level::Debug => L::Debug,
            Level::Info => L::Info,
            Level::Warn => L::Warn,
            Level::Error => L::Error,
        };
        host_log(level, message);
    }
    #[cfg(not(target_arch = "wasm32"))]
    let _ = (level, message);
}

/// `log(Level::Debug, …)`.
pub fn debug(message: &str) {
    log(Level::Debug, message);
}
/// `log(Level::Info, …)`.
pub fn info(message: &str) {
    log(Level::Info, message);
}
/// `log(Level::Warn, …)`.
pub fn warn(message: &str) {
    log(Level::Warn, message);
}
