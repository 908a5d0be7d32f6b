//! A test instrument (`orchard run --pass-trace FILE`): one line when a pass begins and one
//! when it ends, `<unix-nanos> <begin|end> <instance> <plugin> <namespace>/<name>`, appended with a
//! single write each so that several hosts may share one file. The sharding e2e reads it to
//! prove that no object was ever reconciled by two replicas at once.

use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// An open pass trace.
#[derive(Debug)]
pub struct PassTrace {
    instance: String,
    file: Mutex<std::fs::File>,
}

impl PassTrace {
    /// Appends to `path` (created if missing) as host `instance`.
    pub fn open(path: &Path, instance: &str) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Self {
            instance: instance.to_owned(),
            file: Mutex::new(file),
        })
    }

    /// Records that a pass of `plugin` over `key` begins (`true`) or ends.
    pub fn mark(&self, plugin: &str, key: &str, begins: bool) {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let what = if begins { "begin" } else { "end" };
        let line = format!("{nanos} {what} {} {plugin} {key}\n", self.instance);
        let mut file = self
            .file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Err(e) = file.write_all(line.as_bytes()) {
            tracing::warn!(error = %e, "could not write the pass trace");
        }
    }
}
