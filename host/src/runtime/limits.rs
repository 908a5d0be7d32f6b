//! Per-plugin sandbox limits and the memory limiter that enforces them.

use std::time::Duration;

/// Limits of one plugin's calls. Defaults are restrictive; raise them per plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Linear memory one instance may grow to. Default: 64 MiB.
    pub memory_bytes: usize,
    /// Wall-clock deadline of one call, CPU and I/O together. Default: 10 s.
    pub call_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_bytes: 64 << 20,
            call_timeout: Duration::from_secs(10),
        }
    }
}

/// A `ResourceLimiter` that refuses growth past the cap and remembers that it did, so the
/// failed call can be reported as a memory cap rather than a generic trap.
#[derive(Debug)]
pub(crate) struct MemoryCap {
    pub(crate) limit: usize,
    pub(crate) hit: bool,
}

/// Generous but finite: tables hold function references, not data.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

impl wasmtime::ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.limit {
            self.hit = true;
            wasmtime::bail!(
                "memory cap of {} bytes reached (asked for {desired})",
                self.limit
            );
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

/// Most bytes of guest output (stdout, stderr and the `log` interface together) logged per
/// call; the rest is dropped and counted in one line at the end of the call.
pub const MAX_OUTPUT_BYTES_PER_CALL: usize = 64 << 10;

/// Most lines of guest output (stdout, stderr and the `log` interface together) logged per
/// call; the rest is dropped and counted in one line at the end of the call.
pub const MAX_OUTPUT_LINES_PER_CALL: usize = 200;
