//! OpenTelemetry traces of the reconcile passes, exported over OTLP/HTTP (protobuf). Off unless
//! an endpoint is given (`--otlp-endpoint`, or the standard `OTEL_EXPORTER_OTLP_ENDPOINT`).
//!
//! One trace per pass. Its root is the pass's `reconcile` span (never a child of the
//! controller's long-lived span, so every pass is a trace of its own); below it:
//! - one [`CALL`] span per plugin call (function, outcome, deadline, time used),
//! - one [`HTTP`] span per outbound request of that call (method, host, port, status, sizes),
//! - one [`API`] span per write of the pass to the apiserver (finalizer and annotations,
//!   `status.id`, status, connection Secret).
//!
//! Only the host's own spans and events (target `orchard`, level info and up) are exported;
//! kube's and wasmtime's spans stay with the log filter.
//!
//! Contract of every span here: it MUST NOT carry a header value, a body, a credential or a
//! spec field (sizes come from `Content-Length`); an object is named by kind, namespace and
//! name only.
//!
//! The standard variables apply: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `…_HEADERS`,
//! `…_TIMEOUT`, `OTEL_SERVICE_NAME` (default `orchard`), `OTEL_RESOURCE_ATTRIBUTES`,
//! `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG` (unless `--trace-sample-ratio` is given) and
//! `OTEL_BSP_*` (the batch's delay and size). Spans are exported from a thread of their own in
//! batches; a collector that is down costs dropped spans and one warning, never a pass.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use tracing::Subscriber;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

/// Name of the span of one plugin call (its `otel.name` says which function).
pub const CALL: &str = "plugin call";
/// Name of the span of one outbound request of a plugin (`otel.name`: `HTTP <method>`).
pub const HTTP: &str = "http";
/// Name of the span of one write of a pass to the apiserver (`otel.name` says which).
pub const API: &str = "kubernetes";

/// The answer of a collector is read up to this many bytes (it is a status, not data).
const MAX_ANSWER: usize = 64 * 1024;

/// Errors of setting the exporter up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The exporter refused its configuration (an endpoint or `OTEL_*` value).
    #[error("OTLP endpoint {endpoint}: {source}")]
    Exporter {
        /// The endpoint given.
        endpoint: String,
        /// Why.
        source: opentelemetry_otlp::ExporterBuildError,
    },
    /// Started outside the host's runtime (a bug of the caller).
    #[error("OTLP export needs a Tokio runtime (the host's)")]
    NoRuntime,
    /// The TLS configuration of the client could not be built.
    #[error("TLS for the OTLP exporter: {0}")]
    Tls(#[from] rustls::Error),
}

/// What to export, where.
#[derive(Debug, Clone)]
pub struct Config {
    /// The collector's OTLP/HTTP base URL (`/v1/traces` is appended), e.g.
    /// `http://otel-collector:4318`.
    pub endpoint: String,
    /// Fraction of passes traced (parent-based ratio sampler); `None`: the SDK's default,
    /// which honours `OTEL_TRACES_SAMPLER` and traces every pass otherwise.
    pub sample_ratio: Option<f64>,
}

/// The running exporter; [`Telemetry::shutdown`] flushes what is batched.
#[derive(Debug)]
pub struct Telemetry {
    provider: SdkTracerProvider,
}

impl Telemetry {
    /// Builds the exporter and its batch processor. MUST be called inside the host's Tokio
    /// runtime: the exports are sent on it.
    pub fn start(config: &Config) -> Result<Self, Error> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| Error::NoRuntime)?;
        let endpoint = config.endpoint.trim_end_matches('/');
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(format!("{endpoint}/v1/traces"))
            .with_http_client(Client::new(runtime)?)
            .build()
            .map_err(|source| Error::Exporter {
                endpoint: config.endpoint.clone(),
                source,
            })?;
        let mut resource = Resource::builder();
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name("orchard");
        }
        let resource = resource
            .with_attribute(opentelemetry::KeyValue::new(
                "service.version",
                env!("CARGO_PKG_VERSION"),
            ))
            .build();
        let mut provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource);
        if let Some(ratio) = config.sample_ratio {
            provider = provider.with_sampler(Sampler::ParentBased(Box::new(
                Sampler::TraceIdRatioBased(ratio),
            )));
        }
        Ok(Self {
            provider: provider.build(),
        })
    }

    /// The layer that turns the host's spans into OpenTelemetry spans (the host's own only).
    pub fn layer<S>(&self) -> impl Layer<S> + use<S>
    where
        S: Subscriber + for<'span> LookupSpan<'span>,
    {
        let own = tracing_subscriber::filter::Targets::new()
            .with_target(env!("CARGO_CRATE_NAME"), tracing::Level::INFO);
        tracing_opentelemetry::layer()
            .with_tracer(self.provider.tracer("orchard"))
            .with_threads(false)
            .with_filter(own)
    }

    /// Exports what is batched and stops the exporter (on a blocking thread: the SDK waits
    /// for its export thread, which sends on this runtime).
    pub async fn shutdown(self) {
        let provider = self.provider;
        let flushed = tokio::task::spawn_blocking(move || provider.shutdown()).await;
        if let Ok(Err(e)) = flushed {
            tracing::warn!(error = %e, "the last traces were not exported");
        }
    }
}

/// Longest text a span attribute carries (an error message, cut on a char boundary).
pub const MAX_TEXT: usize = 256;

/// `text`, at most [`MAX_TEXT`] bytes.
pub fn short(text: &str) -> &str {
    let mut end = text.len().min(MAX_TEXT);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The trace id of `span` as 32 hex digits, when it is exported (sampled); `None` without
/// tracing.
pub fn trace_id(span: &tracing::Span) -> Option<String> {
    let context = span.context();
    let span_context = context.span().span_context().clone();
    (span_context.is_valid() && span_context.is_sampled())
        .then(|| span_context.trace_id().to_string())
}

/// The trace id of the current span ([`trace_id`]).
pub fn current_trace_id() -> Option<String> {
    trace_id(&tracing::Span::current())
}

/// The text log's field formatter: every field as `name=value` (the message bare), except
/// the attributes that are for the trace only — OpenTelemetry's dotted names (`otel.name`,
/// `http.request.method`, `k8s.resource`, …) — so a traced span costs the log no width.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogFields;

impl<'writer> tracing_subscriber::fmt::FormatFields<'writer> for LogFields {
    fn format_fields<R: tracing_subscriber::field::RecordFields>(
        &self,
        mut writer: tracing_subscriber::fmt::format::Writer<'writer>,
        fields: R,
    ) -> std::fmt::Result {
        let mut visitor = LogVisitor {
            writer: &mut writer,
            first: true,
            result: Ok(()),
        };
        fields.record(&mut visitor);
        visitor.result
    }

    fn add_fields(
        &self,
        current: &'writer mut tracing_subscriber::fmt::FormattedFields<Self>,
        fields: &tracing::span::Record<'_>,
    ) -> std::fmt::Result {
        let mut visitor = LogVisitor {
            first: current.fields.is_empty(),
            writer: &mut current.as_writer(),
            result: Ok(()),
        };
        fields.record(&mut visitor);
        visitor.result
    }
}

struct LogVisitor<'a, 'writer> {
    writer: &'a mut tracing_subscriber::fmt::format::Writer<'writer>,
    first: bool,
    result: std::fmt::Result,
}

impl tracing::field::Visit for LogVisitor<'_, '_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if self.result.is_err() || field.name().contains('.') {
            return;
        }
        let gap = if self.first { "" } else { " " };
        self.first = false;
        self.result = if field.name() == "message" {
            write!(self.writer, "{gap}{value:?}")
        } else {
            write!(self.writer, "{gap}{}={value:?}", field.name())
        };
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "message" {
            self.record_debug(field, &format_args!("{value}"));
        } else {
            self.record_debug(field, &value);
        }
    }
}

/// The exporter's HTTP client: hyper on the host's runtime (the stack kube and the plugins'
/// egress already use) instead of a second HTTP client crate. The SDK's export thread awaits
/// the spawned request.
#[derive(Debug, Clone)]
struct Client {
    inner: hyper_util::client::legacy::Client<
        hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
        Full<Bytes>,
    >,
    runtime: tokio::runtime::Handle,
}

/// Said once per outage: a collector that is down must not flood the log.
static EXPORT_FAILING: AtomicBool = AtomicBool::new(false);

impl Client {
    /// An `https` collector is verified against the public web roots (in a cluster the
    /// collector is usually plain `http` on the pod network).
    fn new(runtime: tokio::runtime::Handle) -> Result<Self, Error> {
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.into(),
        };
        let tls = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .build();
        let inner =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .pool_idle_timeout(Duration::from_secs(30))
                .build(https);
        Ok(Self { inner, runtime })
    }
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for Client {
    async fn send_bytes(
        &self,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<Bytes>, opentelemetry_http::HttpError> {
        let client = self.inner.clone();
        let uri = request.uri().clone();
        let send = async move {
            let response = client.request(request.map(Full::new)).await?;
            let (parts, body) = response.into_parts();
            let body = Limited::new(body, MAX_ANSWER)
                .collect()
                .await
                .map_err(|e| std::io::Error::other(e.to_string()))?
                .to_bytes();
            Ok::<_, opentelemetry_http::HttpError>(http::Response::from_parts(parts, body))
        };
        let answer = self.runtime.spawn(send).await?;
        let ok = matches!(&answer, Ok(response) if response.status().is_success());
        if ok {
            if EXPORT_FAILING.swap(false, Ordering::Relaxed) {
                tracing::info!(%uri, "traces are exported again");
            }
        } else if !EXPORT_FAILING.swap(true, Ordering::Relaxed) {
            let why = match &answer {
                Ok(response) => format!("HTTP {}", response.status()),
                Err(e) => e.to_string(),
            };
            tracing::warn!(%uri, error = %why, "traces are not exported (dropped until the collector answers)");
        }
        answer
    }
}

/// An exporter that keeps what it is given, for the tests of what the host's spans say.
#[cfg(test)]
pub(crate) mod recorded {
    use std::sync::{Arc, Mutex};

    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};

    use super::Telemetry;

    /// The spans ended so far, in the order they ended.
    #[derive(Debug, Clone, Default)]
    pub(crate) struct Spans(Arc<Mutex<Vec<SpanData>>>);

    impl Spans {
        pub(crate) fn take(&self) -> Vec<SpanData> {
            std::mem::take(&mut *self.0.lock().unwrap())
        }
    }

    impl SpanExporter for Spans {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            self.0.lock().unwrap().extend(batch);
            Ok(())
        }
    }

    /// A telemetry whose spans are exported at once (as each ends) into [`Spans`].
    pub(crate) fn telemetry() -> (Telemetry, Spans) {
        let spans = Spans::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(spans.clone())
            .build();
        (Telemetry { provider }, spans)
    }
}

#[cfg(test)]
mod tests {
    use tracing_subscriber::prelude::*;

    use super::*;

    #[test]
    fn a_long_attribute_is_cut_on_a_char_boundary() {
        assert_eq!(short("short"), "short");
        let long = "é".repeat(200);
        let cut = short(&long);
        assert!(
            cut.len() <= MAX_TEXT && cut.len() >= MAX_TEXT - 1,
            "{}",
            cut.len()
        );
        assert!(long.starts_with(cut));
    }

    #[test]
    fn a_span_has_a_trace_id_only_while_it_is_exported() {
        assert_eq!(
            trace_id(&tracing::info_span!("untraced")),
            None,
            "no exporter: no id"
        );
        let (telemetry, spans) = recorded::telemetry();
        let subscriber = tracing_subscriber::registry().with(telemetry.layer());
        let (root, child) = tracing::subscriber::with_default(subscriber, || {
            let root = tracing::info_span!(parent: None, "pass");
            let child = tracing::info_span!(parent: &root, CALL, otel.name = "create");
            let ids = (trace_id(&root), trace_id(&child));
            drop((child, root));
            ids
        });
        let root = root.expect("an exported span has a trace id");
        assert_eq!(root.len(), 32);
        assert_eq!(
            child.as_deref(),
            Some(root.as_str()),
            "a child is in its parent's trace"
        );
        let names: Vec<_> = spans.take().into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["create", "pass"], "the child ends first");
    }

    #[test]
    fn only_the_host_s_own_spans_are_exported() {
        let (telemetry, spans) = recorded::telemetry();
        let subscriber = tracing_subscriber::registry().with(telemetry.layer());
        tracing::subscriber::with_default(subscriber, || {
            drop(tracing::info_span!(target: "kube_client", "HTTP").entered());
            drop(tracing::debug_span!("below the level").entered());
            drop(tracing::info_span!("ours").entered());
        });
        let names: Vec<_> = spans.take().into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["ours"]);
    }

    #[test]
    fn the_log_leaves_out_the_attributes_that_are_for_the_trace_only() {
        #[derive(Clone, Default)]
        struct Buffer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl std::io::Write for Buffer {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buffer = Buffer::default();
        let out = buffer.clone();
        let log = tracing_subscriber::fmt::layer()
            .fmt_fields(LogFields)
            .without_time()
            .with_ansi(false)
            .with_writer(move || out.clone());
        tracing::subscriber::with_default(tracing_subscriber::registry().with(log), || {
            let span = tracing::info_span!(
                "reconcile",
                otel.name = "reconcile Thing",
                object = "a",
                trace_id = tracing::field::Empty,
            );
            span.record("trace_id", "4bf92f");
            span.in_scope(|| {
                tracing::info!(http.request.method = "GET", reason = "Quota", "pass failed");
            });
        });
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        assert_eq!(
            text.trim(),
            r#"INFO reconcile{object="a" trace_id="4bf92f"}: orchard::ops::traces::tests: pass failed reason="Quota""#
        );
    }

    #[test]
    fn an_endpoint_outside_a_runtime_is_a_clear_error() {
        let config = Config {
            endpoint: "http://127.0.0.1:4318".into(),
            sample_ratio: None,
        };
        assert!(matches!(Telemetry::start(&config), Err(Error::NoRuntime)));
    }
}
