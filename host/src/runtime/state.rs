//! What one store holds: the WASI context (no files, no environment, no sockets), the HTTP
//! context with the plugin's egress hooks, the memory cap, and the names logs are tagged with.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use wasmtime::component::ResourceTable;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::bindings::log;
use super::egress::{EgressHooks, EgressPolicy};
use super::limits::MemoryCap;

/// Store data of one call.
pub(crate) struct PluginState {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    table: ResourceTable,
    egress: EgressHooks,
    pub(crate) memory: MemoryCap,
    plugin: Arc<str>,
    object: String,
}

/// Most resources a guest may hold at once (streams, requests, pollables).
const MAX_RESOURCES: usize = 4096;

impl PluginState {
    pub(crate) fn new(
        plugin: Arc<str>,
        object: String,
        egress: Arc<EgressPolicy>,
        memory_limit: usize,
    ) -> Self {
        // WasiCtxBuilder starts empty (no args, env, or preopens); sockets are closed
        // explicitly: all outbound traffic must go through wasi:http and its allow-list.
        let mut wasi = WasiCtxBuilder::new();
        wasi.allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .stdout(GuestOutput::new(&plugin, "stdout"))
            .stderr(GuestOutput::new(&plugin, "stderr"));
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_RESOURCES);
        Self {
            wasi: wasi.build(),
            http: WasiHttpCtx::new(),
            table,
            egress: EgressHooks {
                policy: egress,
                plugin: Arc::clone(&plugin),
            },
            memory: MemoryCap {
                limit: memory_limit,
                hit: false,
            },
            plugin,
            object,
        }
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

/// Longest log line kept from a guest; the rest is cut.
const MAX_LINE: usize = 16 * 1024;

impl log::Host for PluginState {
    fn log(&mut self, level: log::Level, message: String) {
        let message = truncate(&message);
        let (plugin, object) = (&*self.plugin, self.object.as_str());
        match level {
            log::Level::Trace => tracing::trace!(plugin, object, "{message}"),
            log::Level::Debug => tracing::debug!(plugin, object, "{message}"),
            log::Level::Info => tracing::info!(plugin, object, "{message}"),
            log::Level::Warn => tracing::warn!(plugin, object, "{message}"),
            log::Level::Error => tracing::error!(plugin, object, "{message}"),
        }
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

/// Guest stdout / stderr: each line becomes a tracing event tagged with the plugin.
#[derive(Clone)]
struct GuestOutput {
    plugin: Arc<str>,
    stream: &'static str,
}

impl GuestOutput {
    fn new(plugin: &Arc<str>, stream: &'static str) -> Self {
        Self {
            plugin: Arc::clone(plugin),
            stream,
        }
    }
}

impl IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestOutput {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(LineWriter {
            out: self.clone(),
            line: Vec::new(),
        })
    }
}

struct LineWriter {
    out: GuestOutput,
    line: Vec<u8>,
}

impl LineWriter {
    fn emit(&mut self) {
        let text = String::from_utf8_lossy(&self.line);
        tracing::info!(plugin = %self.out.plugin, stream = self.out.stream, "{}", truncate(text.trim_end()));
        self.line.clear();
    }
}

impl tokio::io::AsyncWrite for LineWriter {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        for &b in buf {
            if b == b'\n' {
                self.emit();
            } else if self.line.len() < MAX_LINE {
                self.line.push(b);
            }
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if !self.line.is_empty() {
            self.emit();
        }
        Poll::Ready(Ok(()))
    }
}
