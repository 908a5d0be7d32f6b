//! What one store holds: the WASI context (no files, no sockets, one environment variable: the
//! call deadline, [`CALL_DEADLINE_ENV`]), the HTTP context with the plugin's egress hooks, the
//! memory cap, and the guest's output (stdout, stderr and the `log` interface) with its per-call
//! cap.

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::bindings::{log, report};
use super::egress::{Egress, EgressHooks};
use super::limits::{Limits, MAX_OUTPUT_BYTES_PER_CALL, MAX_OUTPUT_LINES_PER_CALL, MemoryCap};
use crate::actuator::Reports;

/// Store data of one instance: of one call, or of the calls of one pass
/// ([`PluginState::arm`] re-arms the per-call parts).
pub(crate) struct PluginState {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    table: ResourceTable,
    egress: EgressHooks,
    pub(crate) memory: MemoryCap,
    output: Arc<Mutex<Output>>,
    /// When the current call must have ended (read by the epoch-deadline callback).
    pub(crate) deadline: Instant,
    /// What the current call reported (the `report` import), bounded.
    pub(crate) reports: Reports,
}

/// Most resources a guest may hold at once (streams, requests, pollables).
const MAX_RESOURCES: usize = 4096;

/// The one variable of a guest's WASI environment (`wasi:cli/environment`): the plugin's call
/// deadline, in milliseconds. The WIT carries no deadline; this is how a guest learns it.
///
/// # Contract
///
/// - The host MUST set it in the environment of every instance it makes, to the plugin's call
///   deadline ([`Limits::call_timeout`]: `spec.limits.callTimeoutMs`, else
///   `--call-timeout-ms`) as a decimal integer of milliseconds, at least 1. The deadline is
///   the same for every export (lifecycle calls, reconcilers, conversion) and every call, so
///   one value holds for every call an instance serves (the calls of one pass share it).
/// - The host measures the deadline from the call's start as it sees it (instantiation
///   included, for an instance's first call) and stops the call at it whatever the guest does.
///   A guest's own call start plus this budget is therefore at or after the host's deadline,
///   never before it: a guest SHOULD give each call a deadline of its own start
///   plus this budget less a margin (the Go SDK keeps a tenth, at most 500 ms), to give up
///   cleanly (a transient failure of its own) rather than be stopped.
/// - A guest SHOULD fall back to its own default when the variable is absent or not a
///   positive integer (an older host), and MUST NOT expect any other variable.
pub const CALL_DEADLINE_ENV: &str = "ORCHARD_CALL_DEADLINE_MS";

/// The guest's whole environment ([`CALL_DEADLINE_ENV`]) for a plugin whose calls have
/// `call_timeout` each.
fn guest_env(call_timeout: Duration) -> [(&'static str, String); 1] {
    // At least 1: a sub-millisecond deadline (not one the Plugin CRD allows) must not read as
    // "no deadline".
    let ms = call_timeout.as_millis().max(1);
    [(CALL_DEADLINE_ENV, ms.to_string())]
}

impl PluginState {
    pub(crate) fn new(
        plugin: Arc<str>,
        object: String,
        egress: Arc<Egress>,
        limits: &Limits,
    ) -> Self {
        // WasiCtxBuilder starts empty (no args, env, or preopens); the environment gets the
        // call deadline only (CALL_DEADLINE_ENV); sockets are closed explicitly: all outbound
        // traffic must go through wasi:http and its allow-list.
        let output = Arc::new(Mutex::new(Output::new(plugin, object)));
        let mut wasi = WasiCtxBuilder::new();
        wasi.envs(&guest_env(limits.call_timeout))
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .stdout(GuestStream::new(&output, Stream::Stdout))
            .stderr(GuestStream::new(&output, Stream::Stderr));
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_RESOURCES);
        Self {
            wasi: wasi.build(),
            http: WasiHttpCtx::new(),
            table,
            egress: EgressHooks {
                egress,
                sealed: false,
            },
            memory: MemoryCap {
                limit: limits.memory_bytes,
                hit: false,
            },
            output,
            deadline: Instant::now(),
            reports: Reports::default(),
        }
    }

    /// Starts a call that must end by `deadline`: a fresh output budget (what the last call
    /// dropped is reported now) and a clear memory-cap flag.
    pub(crate) fn arm(&mut self, deadline: Instant) {
        self.deadline = deadline;
        self.egress.sealed = false;
        self.reports = Reports::default();
        self.memory.hit = false;
        lock(&self.output).next_call();
    }
}

impl PluginState {
    /// Denies every outbound request until the next [`PluginState::arm`]: for the calls that
    /// MUST NOT do I/O.
    pub(crate) fn seal_egress(&mut self) {
        self.egress.sealed = true;
    }
}

impl WasiView for PluginState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for PluginState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.egress,
        }
    }
}

/// Longest line kept from a guest; the rest of the line is dropped (and counted).
const MAX_LINE: usize = 16 * 1024;

impl report::Host for PluginState {
    fn connection_detail(&mut self, key: String, value: Vec<u8>) {
        self.reports.connection_detail(key, value);
    }

    fn drift(
        &mut self,
        field: String,
        observed: Option<String>,
        desired: Option<String>,
        sensitive: bool,
    ) {
        self.reports.drift(field, observed, desired, sensitive);
    }
}

impl log::Host for PluginState {
    fn log(&mut self, level: log::Level, message: String) {
        lock(&self.output).log(level, &message);
    }
}

fn lock(output: &Mutex<Output>) -> std::sync::MutexGuard<'_, Output> {
    // A panic while logging cannot leave `Output` inconsistent (counters and buffers only).
    output.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Which guest stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    fn as_str(self) -> &'static str {
        match self {
            Self::Stdout => "stdout",
            Self::Stderr => "stderr",
        }
    }
}

/// All guest output of one call: lines become tracing events tagged with plugin and object,
/// until the call's budget ([`MAX_OUTPUT_BYTES_PER_CALL`], [`MAX_OUTPUT_LINES_PER_CALL`]) is
/// spent; the rest is counted. When the store goes (the call ended, finished or not),
/// unfinished lines are logged and one line says how much was dropped.
struct Output {
    plugin: Arc<str>,
    object: String,
    bytes: usize,
    lines: usize,
    dropped_bytes: usize,
    dropped_lines: usize,
    /// The unfinished line of stdout and of stderr.
    partial: [Vec<u8>; 2],
    /// Bytes of the unfinished line past [`MAX_LINE`], dropped.
    partial_cut: [usize; 2],
}

impl Output {
    fn new(plugin: Arc<str>, object: String) -> Self {
        Self {
            plugin,
            object,
            bytes: 0,
            lines: 0,
            dropped_bytes: 0,
            dropped_lines: 0,
            partial: [Vec::new(), Vec::new()],
            partial_cut: [0, 0],
        }
    }

    fn exhausted(&self) -> bool {
        self.lines >= MAX_OUTPUT_LINES_PER_CALL || self.bytes >= MAX_OUTPUT_BYTES_PER_CALL
    }

    /// Takes one line (of `len` bytes as the guest wrote it) from the budget, or counts it
    /// dropped. Once the budget is spent every later line is dropped, so what is logged is
    /// the beginning of the output, in order.
    fn admit(&mut self, len: usize) -> bool {
        if self.exhausted() || self.bytes + len > MAX_OUTPUT_BYTES_PER_CALL {
            // A line that does not fit closes the budget.
            self.bytes = MAX_OUTPUT_BYTES_PER_CALL;
            self.dropped_lines += 1;
            self.dropped_bytes += len;
            return false;
        }
        self.lines += 1;
        self.bytes += len;
        true
    }

    fn log(&mut self, level: log::Level, message: &str) {
        if !self.admit(message.len()) {
            return;
        }
        let message = truncate(message);
        let (plugin, object) = (&*self.plugin, self.object.as_str());
        match level {
            log::Level::Trace => tracing::trace!(plugin, object, "{message}"),
            log::Level::Debug => tracing::debug!(plugin, object, "{message}"),
            log::Level::Info => tracing::info!(plugin, object, "{message}"),
            log::Level::Warn => tracing::warn!(plugin, object, "{message}"),
            log::Level::Error => tracing::error!(plugin, object, "{message}"),
        }
    }

    fn write(&mut self, stream: Stream, buf: &[u8]) {
        let i = stream as usize;
        for piece in buf.split_inclusive(|&b| b == b'\n') {
            let (text, ends_line) = match piece.split_last() {
                Some((b'\n', text)) => (text, true),
                _ => (piece, false),
            };
            if self.exhausted() {
                // Nothing more is logged: count, do not buffer.
                self.dropped_bytes += piece.len();
                self.dropped_lines += usize::from(ends_line);
                continue;
            }
            let room = MAX_LINE.saturating_sub(self.partial[i].len());
            let kept = text.len().min(room);
            self.partial[i].extend_from_slice(&text[..kept]);
            self.partial_cut[i] += text.len() - kept;
            if ends_line {
                self.end_line(stream);
            }
        }
    }

    /// Logs the unfinished line of `stream` (if the budget allows) and starts a new one.
    fn end_line(&mut self, stream: Stream) {
        let i = stream as usize;
        let line = std::mem::take(&mut self.partial[i]);
        let cut = std::mem::take(&mut self.partial_cut[i]);
        if !self.admit(line.len() + cut) {
            return;
        }
        self.dropped_bytes += cut;
        let text = String::from_utf8_lossy(&line);
        tracing::info!(
            plugin = %self.plugin,
            object = %self.object,
            stream = stream.as_str(),
            "{}",
            text.trim_end_matches('\r')
        );
    }

    /// A new call on the same instance: reports what the last one dropped, and gives the
    /// new one the whole budget. Unfinished lines stay (the guest may go on writing them).
    fn next_call(&mut self) {
        self.report_dropped();
        self.bytes = 0;
        self.lines = 0;
        self.dropped_bytes = 0;
        self.dropped_lines = 0;
    }

    fn report_dropped(&self) {
        if self.dropped_lines > 0 || self.dropped_bytes > 0 {
            tracing::warn!(
                plugin = %self.plugin,
                object = %self.object,
                dropped_lines = self.dropped_lines,
                dropped_bytes = self.dropped_bytes,
                "guest output over the per-call cap ({MAX_OUTPUT_BYTES_PER_CALL} bytes, {MAX_OUTPUT_LINES_PER_CALL} lines): dropped {} lines, {} bytes",
                self.dropped_lines,
                self.dropped_bytes
            );
        }
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        for stream in [Stream::Stdout, Stream::Stderr] {
            let i = stream as usize;
            if !self.partial[i].is_empty() || self.partial_cut[i] > 0 {
                self.end_line(stream);
            }
        }
        self.report_dropped();
    }
}

fn truncate(s: &str) -> &str {
    if s.len() <= MAX_LINE {
        return s;
    }
    let mut end = MAX_LINE;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Guest stdout / stderr: a synchronous stream into the call's [`Output`] (no background
/// task, so every byte is accounted for by the time the call returns).
#[derive(Clone)]
struct GuestStream {
    output: Arc<Mutex<Output>>,
    stream: Stream,
}

impl GuestStream {
    fn new(output: &Arc<Mutex<Output>>, stream: Stream) -> Self {
        Self {
            output: Arc::clone(output),
            stream,
        }
    }
}

impl IsTerminal for GuestStream {
    fn is_terminal(&self) -> bool {
        false
    }
}

/// What one write may carry (the guest asks with `check-write`).
const WRITE_CHUNK: usize = 64 * 1024;

impl StdoutStream for GuestStream {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl OutputStream for GuestStream {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        lock(&self.output).write(self.stream, &bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(WRITE_CHUNK)
    }
}

#[async_trait::async_trait]
impl Pollable for GuestStream {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for GuestStream {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        lock(&self.output).write(self.stream, buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output() -> Output {
        Output::new("p".into(), "o".into())
    }

    /// What the guest reads through `wasi:cli/environment.get-environment`.
    fn environment_of(limits: &Limits) -> Vec<(String, String)> {
        use super::super::egress::EgressPolicy;
        use wasmtime_wasi::cli::WasiCliView;
        use wasmtime_wasi::p2::bindings::cli::environment::Host;
        let egress = Arc::new(Egress::new(EgressPolicy::default(), "p".into()));
        let mut state = PluginState::new("p".into(), "o".into(), egress, limits);
        state
            .cli()
            .get_environment()
            .expect("the environment is a plain list")
    }

    #[test]
    fn an_instance_environment_carries_the_plugins_call_deadline_and_nothing_else() {
        let limits = Limits {
            call_timeout: Duration::from_millis(2500),
            ..Limits::default()
        };
        assert_eq!(
            environment_of(&limits),
            [(CALL_DEADLINE_ENV.to_owned(), "2500".to_owned())]
        );
        assert_eq!(
            environment_of(&Limits::default()),
            [(CALL_DEADLINE_ENV.to_owned(), "10000".to_owned())]
        );
    }

    #[test]
    fn a_sub_millisecond_call_deadline_is_given_as_one_millisecond_not_zero() {
        assert_eq!(
            guest_env(Duration::from_micros(300)),
            [(CALL_DEADLINE_ENV, "1".to_owned())]
        );
    }

    #[test]
    fn output_is_logged_until_the_line_budget_then_counted() {
        let mut out = output();
        for _ in 0..MAX_OUTPUT_LINES_PER_CALL + 50 {
            out.write(Stream::Stdout, b"line\n");
        }
        assert_eq!(out.lines, MAX_OUTPUT_LINES_PER_CALL);
        assert_eq!(out.dropped_lines, 50);
        assert_eq!(out.dropped_bytes, 50 * 5);
    }

    #[test]
    fn output_is_logged_until_the_byte_budget_then_counted() {
        let mut out = output();
        let line = vec![b'x'; 1000];
        for _ in 0..100 {
            out.write(Stream::Stderr, &line);
            out.write(Stream::Stderr, b"\n");
        }
        // 65 lines of 1000 bytes fit in 64 KiB; the 66th closes the budget.
        assert_eq!(out.lines, 65);
        assert_eq!(out.dropped_lines, 35);
        assert_eq!(out.dropped_bytes, 35 * 1000 + 34);
    }

    #[test]
    fn the_log_interface_shares_the_budget_of_stdout_and_stderr() {
        let mut out = output();
        for _ in 0..MAX_OUTPUT_LINES_PER_CALL {
            out.write(Stream::Stdout, b"a\n");
        }
        out.log(log::Level::Info, "one too many");
        assert_eq!(out.dropped_lines, 1);
        assert_eq!(out.dropped_bytes, "one too many".len());
    }

    #[test]
    fn a_line_split_over_writes_is_one_line_and_an_unfinished_one_is_kept() {
        let mut out = output();
        out.write(Stream::Stdout, b"hel");
        out.write(Stream::Stdout, b"lo\nwor");
        assert_eq!(out.lines, 1);
        assert_eq!(out.partial[0], b"wor");
        out.end_line(Stream::Stdout);
        assert_eq!(out.lines, 2);
    }

    #[test]
    fn an_overlong_line_is_cut_and_its_rest_counted_as_dropped() {
        let mut out = output();
        out.write(Stream::Stdout, &vec![b'y'; MAX_LINE + 10]);
        out.write(Stream::Stdout, b"\n");
        assert_eq!(out.lines, 1);
        assert_eq!(out.dropped_bytes, 10);
        assert_eq!(out.dropped_lines, 0);
    }
}
