//! Outbound HTTP: the policy, the `WasiHttpHooks` through which every request of a plugin
//! goes, and the plugin's connections.
//!
//! Restrictive by default: an empty allow-list denies everything. A denied request fails in
//! the guest with `HttpRequestDenied` (the SDKs turn it into a clear failure) and is logged
//! here with the plugin's name.
//!
//! Every instance of one plugin sends through that plugin's `Egress`: a keep-alive
//! connection pool per destination, so the requests of a pass (and of the next passes) skip
//! the TCP connect and the TLS handshake after the first. Connections are never shared between
//! plugins, and one is reused only after its exchange is complete (its response body read to
//! the end); a response body a guest drops unread closes its connection.

use std::error::Error as _;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tracing::Instrument;
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks};

/// Errors of this module.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An allow-list entry that is not `scheme://host[:port|:*]`.
    #[error(
        "invalid allowed host {entry:?}: {reason} (expected scheme://host[:port], port may be *)"
    )]
    InvalidAllowedHost {
        /// The entry as configured.
        entry: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A `--plugin-ca-file` that cannot be read.
    #[error("--plugin-ca-file {path}: {source}")]
    CaFileUnreadable {
        /// The file as given.
        path: PathBuf,
        /// Why it cannot be read.
        source: std::io::Error,
    },
    /// A `--plugin-ca-file` without a usable certificate authority.
    #[error("--plugin-ca-file {path}: {reason}")]
    CaFileInvalid {
        /// The file as given.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

/// One allow-list entry: `http://127.0.0.1:8081`, `https://api.example.com`,
/// `http://127.0.0.1:*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedHost {
    /// `http` or `https`.
    pub scheme: String,
    /// Host name or IP address, compared exactly.
    pub host: String,
    /// `None` = any port.
    pub port: Option<u16>,
}

impl FromStr for AllowedHost {
    type Err = Error;

    fn from_str(entry: &str) -> Result<Self, Error> {
        let invalid = |reason| Error::InvalidAllowedHost {
            entry: entry.to_owned(),
            reason,
        };
        let (scheme, rest) = entry
            .split_once("://")
            .ok_or_else(|| invalid("no scheme"))?;
        let scheme = scheme.to_ascii_lowercase();
        let default_port = match scheme.as_str() {
            "http" => 80,
            "https" => 443,
            _ => return Err(invalid("scheme must be http or https")),
        };
        let rest = rest.trim_end_matches('/');
        if rest.contains('/') {
            return Err(invalid("a path is not allowed"));
        }
        let (host, port) = match rest.rsplit_once(':') {
            Some((host, "*")) => (host, None),
            Some((host, port)) if !host.ends_with(']') || rest.starts_with('[') => {
                let port = port.parse().map_err(|_| invalid("port is not a number"))?;
                (host, Some(port))
            }
            _ => (rest, Some(default_port)),
        };
        if host.is_empty() {
            return Err(invalid("host is empty"));
        }
        Ok(Self {
            scheme,
            host: host.to_ascii_lowercase(),
            port,
        })
    }
}

impl AllowedHost {
    fn allows(&self, scheme: &str, host: &str, port: u16) -> bool {
        self.scheme == scheme && self.host == host && self.port.is_none_or(|p| p == port)
    }
}

/// Certificate authorities a plugin's HTTPS destinations may chain to besides the public
/// (webpki) roots: a cluster's own CA, for an API served with an internal certificate
/// (`--plugin-ca-file`). Default: none.
#[derive(Debug, Clone, Default)]
pub struct TrustedCas(Arc<[CertificateDer<'static>]>);

impl TrustedCas {
    /// The certificates of every PEM file in `paths`. Each file MUST hold at least one
    /// certificate, and each certificate MUST be one rustls can use as a trust anchor: a
    /// mistake shows at start-up, naming the file, not as failed requests later.
    pub fn from_pem_files(paths: &[PathBuf]) -> Result<Self, Error> {
        let mut all = Vec::new();
        for path in paths {
            all.extend(Self::read(path)?);
        }
        Ok(Self(all.into()))
    }

    fn read(path: &Path) -> Result<Vec<CertificateDer<'static>>, Error> {
        let invalid = |reason: String| Error::CaFileInvalid {
            path: path.to_owned(),
            reason,
        };
        let pem = std::fs::read(path).map_err(|source| Error::CaFileUnreadable {
            path: path.to_owned(),
            source,
        })?;
        let certs = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid(format!("not PEM: {e}")))?;
        if certs.is_empty() {
            return Err(invalid("no CERTIFICATE block".to_owned()));
        }
        let mut check = rustls::RootCertStore::empty();
        for (i, cert) in certs.iter().enumerate() {
            check
                .add(cert.clone())
                .map_err(|e| invalid(format!("certificate {} is not a usable CA: {e}", i + 1)))?;
        }
        Ok(certs)
    }

    /// How many certificates there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// What a plugin may reach, and how long and how much it may receive.
#[derive(Debug, Clone)]
pub struct EgressPolicy {
    /// Destinations allowed. Default: none.
    pub allowed: Vec<AllowedHost>,
    /// Certificate authorities trusted besides the public roots. Default: none.
    pub trusted_cas: TrustedCas,
    /// Connect timeout. Default: 5 s.
    pub connect_timeout: Duration,
    /// Time to the response head, and between body frames. Default: 30 s.
    pub response_timeout: Duration,
    /// Largest response body accepted. Default: 8 MiB.
    pub max_response_bytes: usize,
}

impl Default for EgressPolicy {
    fn default() -> Self {
        Self {
            allowed: Vec::new(),
            trusted_cas: TrustedCas::default(),
            connect_timeout: Duration::from_secs(5),
            response_timeout: Duration::from_secs(30),
            max_response_bytes: 8 << 20,
        }
    }
}

impl EgressPolicy {
    /// A policy allowing `entries` with default timeouts.
    pub fn allowing<I, S>(entries: I) -> Result<Self, Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Ok(Self {
            allowed: entries
                .into_iter()
                .map(|e| e.as_ref().parse())
                .collect::<Result<_, _>>()?,
            ..Self::default()
        })
    }

    /// Whether a request to this URI may go out.
    pub fn allows(&self, uri: &http::Uri) -> bool {
        let Some(scheme) = uri.scheme_str() else {
            return false;
        };
        let Some(host) = uri.host() else {
            return false;
        };
        let port = uri
            .port_u16()
            .unwrap_or(if scheme == "https" { 443 } else { 80 });
        let host = host.to_ascii_lowercase();
        self.allowed.iter().any(|a| a.allows(scheme, &host, port))
    }
}

/// How long an idle pooled connection is kept.
const POOL_IDLE: Duration = Duration::from_secs(30);

/// Most idle connections kept per destination (the default reconcile concurrency is 16).
const POOL_MAX_IDLE_PER_DESTINATION: usize = 32;

/// One plugin's way out: its policy and its connection pool, shared by all its instances.
/// Public for the benchmarks (`benches/egress.rs`); the host makes one per loaded plugin.
pub struct Egress {
    pub(crate) policy: EgressPolicy,
    plugin: Arc<str>,
    client: Client<HttpsConnector<CountingConnector>, WasiBody>,
}

impl Egress {
    /// The egress of one loaded plugin. TLS as wasmtime-wasi-http's own client: rustls (ring)
    /// with the webpki roots, and the policy's own certificate authorities.
    ///
    /// # Panics
    ///
    /// Never: ring's provider supports the default TLS versions (the one `expect`).
    pub fn new(policy: EgressPolicy, plugin: Arc<str>) -> Self {
        let mut tcp = HttpConnector::new();
        tcp.enforce_http(false); // the TLS layer above takes https
        tcp.set_nodelay(true);
        tcp.set_connect_timeout(Some(policy.connect_timeout));
        let mut roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.into(),
        };
        // Checked usable when read (`TrustedCas::from_pem_files`).
        roots.add_parsable_certificates(policy.trusted_cas.0.iter().cloned());
        // Invariant: ring's provider has cipher suites for TLS 1.2 and 1.3.
        #[allow(clippy::expect_used, reason = "a true invariant")]
        let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("ring supports the default TLS versions");
        let tls = builder.with_root_certificates(roots).with_no_client_auth();
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(CountingConnector {
                tcp,
                plugin: Arc::clone(&plugin),
            });
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE)
            .pool_max_idle_per_host(POOL_MAX_IDLE_PER_DESTINATION)
            .pool_timer(TokioTimer::new())
            .build(connector);
        Self {
            policy,
            plugin,
            client,
        }
    }

    /// Sends `request` on a pooled connection (or a new one). The response head must come
    /// within the connect and first-byte timeouts together (a reused connection has no connect
    /// phase, and the pool connects with the policy's own connect timeout); then each body
    /// frame within the between-bytes timeout; the body is capped at the policy's size. The
    /// allow-list is the hooks' to apply, before this.
    pub async fn send(
        &self,
        request: http::Request<WasiBody>,
        options: RequestOptions,
    ) -> Result<http::Response<WasiBody>, HttpError> {
        let head_within = options
            .connect_timeout
            .unwrap_or(self.policy.connect_timeout)
            + options
                .first_byte_timeout
                .unwrap_or(self.policy.response_timeout);
        let destination = request.uri().clone();
        let failed = |e: HttpError| {
            crate::ops::metrics::global().http_request_failed(&self.plugin, failure_label(&e));
            e
        };
        let response = tokio::time::timeout(head_within, self.client.request(request))
            .await
            .map_err(|_| failed(HttpError::ConnectionReadTimeout))?
            .map_err(|e| {
                if let Some(tls) = tls_cause(&e) {
                    // The guest sees only a code: the reason, with the way out, is logged.
                    tracing::warn!(
                        plugin = %self.plugin,
                        destination = %destination,
                        error = %tls,
                        "TLS with the destination failed (a certificate from the cluster's own CA is trusted once given with --plugin-ca-file)"
                    );
                }
                failed(client_error(&e))
            })?;
        let gap = options
            .between_bytes_timeout
            .unwrap_or(self.policy.response_timeout)
            .max(Duration::from_nanos(1));
        let cap = self.policy.max_response_bytes;
        let plugin = Arc::clone(&self.plugin);
        Ok(response.map(|body| {
            Limited::new(IncomingBody::new(body, gap), cap)
                .map_err(move |e| {
                    let e = match e.downcast::<HttpError>() {
                        Ok(e) => *e,
                        Err(_) => HttpError::HttpResponseBodySize(u64::try_from(cap).ok()),
                    };
                    crate::ops::metrics::global().http_request_failed(&plugin, failure_label(&e));
                    e
                })
                .boxed_unsync()
        }))
    }
}

/// The TCP connector of one plugin's pool, counting the connections it opens
/// (`orchard_plugin_http_connections_total`).
#[derive(Clone)]
struct CountingConnector {
    tcp: HttpConnector,
    plugin: Arc<str>,
}

type Connecting = Pin<
    Box<
        dyn Future<
                Output = Result<
                    <HttpConnector as tower::Service<http::Uri>>::Response,
                    <HttpConnector as tower::Service<http::Uri>>::Error,
                >,
            > + Send,
    >,
>;

impl tower::Service<http::Uri> for CountingConnector {
    type Response = <HttpConnector as tower::Service<http::Uri>>::Response;
    type Error = <HttpConnector as tower::Service<http::Uri>>::Error;
    type Future = Connecting;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.tcp.poll_ready(cx)
    }

    fn call(&mut self, destination: http::Uri) -> Self::Future {
        let connecting = self.tcp.call(destination);
        let plugin = Arc::clone(&self.plugin);
        Box::pin(async move {
            let stream = connecting.await?;
            crate::ops::metrics::global().http_connection_opened(&plugin);
            Ok(stream)
        })
    }
}

/// The rustls error behind a failed request, if TLS is what failed. hyper-rustls wraps it in
/// an `io::Error`, whose `source` skips the wrapped error itself: look inside each one.
fn tls_cause(e: &hyper_util::client::legacy::Error) -> Option<&rustls::Error> {
    fn within<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
        if let Some(tls) = e.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        let wrapped = e.downcast_ref::<std::io::Error>()?.get_ref()?;
        within(wrapped)
    }
    let mut source = e.source();
    while let Some(cause) = source {
        if let Some(tls) = within(cause) {
            return Some(tls);
        }
        source = cause.source();
    }
    None
}

/// The pool's error as the guest's error code: a refused or timed-out connect, a failed TLS
/// handshake (a certificate the client does not trust, an alert from the server, any other
/// TLS failure), or what hyper reported on the connection.
fn client_error(e: &hyper_util::client::legacy::Error) -> HttpError {
    match tls_cause(e) {
        Some(rustls::Error::InvalidCertificate(_)) => return HttpError::TlsCertificateError,
        Some(rustls::Error::AlertReceived(alert)) => {
            return HttpError::TlsAlertReceived {
                alert_id: Some(u8::from(*alert)),
                alert_message: Some(format!("{alert:?}")),
            };
        }
        Some(_) => return HttpError::TlsProtocolError,
        None => {}
    }
    let mut source = e.source();
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::TimedOut => return HttpError::ConnectionTimeout,
                std::io::ErrorKind::ConnectionRefused => return HttpError::ConnectionRefused,
                _ => {}
            }
        }
        if let Some(hyper) = cause.downcast_ref::<hyper::Error>() {
            if hyper.is_timeout() {
                return HttpError::HttpResponseTimeout;
            }
            if hyper.is_incomplete_message() || hyper.is_closed() {
                return HttpError::HttpResponseIncomplete;
            }
        }
        source = cause.source();
    }
    if e.is_connect() {
        let what = e
            .source()
            .map_or_else(|| e.to_string(), ToString::to_string);
        HttpError::Connect(std::io::Error::other(what))
    } else {
        HttpError::HttpProtocolError
    }
}

/// Every `error` label a failed request is counted under: each series starts at zero when a plugin loads,
/// so that a rate or an alert sees the first failure.
pub const FAILURE_LABELS: [&str; 11] = [
    "denied",
    "tls_certificate",
    "tls_alert",
    "tls_protocol",
    "connection_refused",
    "connect_timeout",
    "connect",
    "response_timeout",
    "response_incomplete",
    "response_too_large",
    "other",
];

/// The `error` label of `orchard_plugin_http_failures_total` for a request that failed with `e`.
fn failure_label(e: &HttpError) -> &'static str {
    match e {
        HttpError::HttpRequestDenied => "denied",
        HttpError::TlsCertificateError => "tls_certificate",
        HttpError::TlsAlertReceived { .. } => "tls_alert",
        HttpError::TlsProtocolError => "tls_protocol",
        HttpError::ConnectionRefused => "connection_refused",
        HttpError::ConnectionTimeout => "connect_timeout",
        HttpError::Connect(_) => "connect",
        HttpError::ConnectionReadTimeout | HttpError::HttpResponseTimeout => "response_timeout",
        HttpError::HttpResponseIncomplete => "response_incomplete",
        HttpError::HttpResponseBodySize(_) => "response_too_large",
        _ => "other",
    }
}

/// A response body whose frames must each come within `gap` of the one before.
struct IncomingBody {
    body: hyper::body::Incoming,
    gap: Duration,
    next_by: Pin<Box<tokio::time::Sleep>>,
}

impl IncomingBody {
    fn new(body: hyper::body::Incoming, gap: Duration) -> Self {
        Self {
            body,
            gap,
            next_by: Box::pin(tokio::time::sleep(gap)),
        }
    }
}

impl hyper::body::Body for IncomingBody {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, HttpError>>> {
        match Pin::new(&mut self.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let next_by = tokio::time::Instant::now() + self.gap;
                self.next_by.as_mut().reset(next_by);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(if e.is_timeout() {
                HttpError::HttpResponseTimeout
            } else {
                HttpError::from(e)
            }))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match self.next_by.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(HttpError::ConnectionReadTimeout))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// The hooks of one store: the plugin's egress.
pub(crate) struct EgressHooks {
    pub(crate) egress: Arc<Egress>,
    /// Set for the calls that MUST NOT do I/O (`conversion`): every request is denied.
    pub(crate) sealed: bool,
}

type SendFuture = Box<
    dyn Future<
            Output = Result<
                (
                    http::Response<WasiBody>,
                    Box<dyn Future<Output = Result<(), HttpError>> + Send>,
                ),
                HttpError,
            >,
        > + Send,
>;

impl WasiHttpHooks for EgressHooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> SendFuture {
        let egress = Arc::clone(&self.egress);
        let policy = &egress.policy;
        let request = request.map(|body| GuestBody::wrap(body, policy));
        // Called from the plugin call's host function: the current span is the call's, and
        // the request is a child of it even when wasi-http drives it from a task of its own.
        let span = request_span(&request);
        if self.sealed {
            span.in_scope(|| tracing::warn!(plugin = %egress.plugin, uri = %request.uri(), "outbound request denied: a conversion may not do I/O"));
            return denied(&egress, &span);
        }
        if !policy.allows(request.uri()) {
            span.in_scope(|| tracing::warn!(plugin = %egress.plugin, uri = %request.uri(), "outbound request denied by the allow-list (allow it with --allow-host, or spec.allowedHosts of the Plugin object)"));
            return denied(&egress, &span);
        }
        // The guest may ask for shorter timeouts, never longer ones.
        let shorter =
            |guest: Option<Duration>, ours: Duration| Some(guest.map_or(ours, |g| g.min(ours)));
        let options = RequestOptions {
            connect_timeout: shorter(
                options.and_then(|o| o.connect_timeout),
                policy.connect_timeout,
            ),
            first_byte_timeout: shorter(
                options.and_then(|o| o.first_byte_timeout),
                policy.response_timeout,
            ),
            between_bytes_timeout: shorter(
                options.and_then(|o| o.between_bytes_timeout),
                policy.response_timeout,
            ),
        };
        let answered = span.clone();
        Box::new(
            async move {
                let response = egress.send(request, options).await.inspect_err(|e| {
                    tracing::debug!(plugin = %egress.plugin, error = %e, "outbound request failed");
                    answered.record("error.type", failure_label(e));
                    answered.record("otel.status_code", "ERROR");
                })?;
                answered.record("http.response.status_code", response.status().as_u16());
                if let Some(size) = content_length(response.headers()) {
                    answered.record("http.response.body.size", size);
                }
                if response.status().is_client_error() || response.status().is_server_error() {
                    answered.record("otel.status_code", "ERROR");
                }
                // The pool's own tasks drive the connection: nothing is left for the caller to.
                let io = async { Ok(()) };
                Ok((
                    response,
                    Box::new(io) as Box<dyn Future<Output = Result<(), HttpError>> + Send>,
                ))
            }
            .instrument(span),
        )
    }
}

/// The answer to a denied request: `HttpRequestDenied`, counted and recorded on its span. The
/// request's body (a [`GuestBody`]) is drained, not closed, when the request is dropped here.
fn denied(egress: &Egress, span: &tracing::Span) -> SendFuture {
    let denied = HttpError::HttpRequestDenied;
    crate::ops::metrics::global().http_request_failed(&egress.plugin, failure_label(&denied));
    span.record("error.type", failure_label(&denied));
    span.record("otel.status_code", "ERROR");
    Box::new(async { Err(denied) })
}

/// The body of a guest's request, which the guest writes while the request is under way. When
/// the host drops it before its end — the request was denied, or the exchange ended without it
/// (a server that answered before reading it, a connection that failed) — the rest is taken in
/// and dropped on a task of its own instead of closing the guest's stream.
///
/// A guest may write and finish the body while it waits for the response, and wstd's
/// `Client::send` does both at once, failing the whole request on the first error of either:
/// a stream closed under its body write would hide the answer — a transient stream error
/// instead of the terminal `HttpRequestDenied`, or instead of the server's response. Drained
/// at most up to the policy's body cap and for at most its response timeout; after that the
/// guest's writes fail as they did before.
struct GuestBody {
    /// `None` once the body has ended.
    body: Option<WasiBody>,
    cap: usize,
    within: Duration,
}

impl GuestBody {
    fn wrap(body: WasiBody, policy: &EgressPolicy) -> WasiBody {
        Self {
            body: Some(body),
            cap: policy.max_response_bytes,
            within: policy.response_timeout,
        }
        .boxed_unsync()
    }
}

impl hyper::body::Body for GuestBody {
    type Data = Bytes;
    type Error = HttpError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, HttpError>>> {
        let Some(body) = self.body.as_mut() else {
            return Poll::Ready(None);
        };
        let frame = Pin::new(body).poll_frame(cx);
        if matches!(frame, Poll::Ready(None)) {
            self.body = None;
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.body
            .as_ref()
            .is_none_or(hyper::body::Body::is_end_stream)
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.as_ref().map_or_else(
            || hyper::body::SizeHint::with_exact(0),
            hyper::body::Body::size_hint,
        )
    }
}

impl Drop for GuestBody {
    fn drop(&mut self) {
        let Some(mut body) = self.body.take() else {
            return;
        };
        if hyper::body::Body::is_end_stream(&body) {
            return;
        }
        // Dropped outside a runtime, the body just closes (nothing could drain it).
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (cap, within) = (self.cap, self.within);
        runtime.spawn(async move {
            let to_the_end = async {
                let mut taken = 0_usize;
                while let Some(Ok(frame)) = body.frame().await {
                    taken = taken.saturating_add(frame.data_ref().map_or(0, Bytes::len));
                    if taken > cap {
                        break;
                    }
                }
            };
            // Either way the body is dropped here: at its end, over the cap, or out of time.
            let _ = tokio::time::timeout(within, to_the_end).await;
        });
    }
}

/// The span of one outbound request ([`crate::ops::traces`]): method, destination and sizes, never a
/// header value or a body.
fn request_span(request: &http::Request<WasiBody>) -> tracing::Span {
    let uri = request.uri();
    let method = request.method().as_str();
    tracing::info_span!(
        crate::ops::traces::HTTP,
        otel.name = format!("HTTP {method}"),
        otel.kind = "client",
        http.request.method = method,
        url.scheme = uri.scheme_str(),
        server.address = uri.host(),
        server.port = uri.port_u16(),
        http.request.body.size = content_length(request.headers()),
        http.response.status_code = tracing::field::Empty,
        http.response.body.size = tracing::field::Empty,
        error.type = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    )
}

/// `Content-Length`, when the message says it.
fn content_length(headers: &http::HeaderMap) -> Option<u64> {
    headers
        .get(http::header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "test code")]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn every_failure_label_is_one_whose_series_starts_at_zero() {
        let failures = [
            HttpError::HttpRequestDenied,
            HttpError::TlsCertificateError,
            HttpError::TlsProtocolError,
            HttpError::ConnectionRefused,
            HttpError::ConnectionTimeout,
            HttpError::Connect(std::io::Error::other("x")),
            HttpError::ConnectionReadTimeout,
            HttpError::HttpResponseTimeout,
            HttpError::HttpResponseIncomplete,
            HttpError::HttpResponseBodySize(Some(1)),
            HttpError::HttpProtocolError,
        ];
        for e in &failures {
            assert!(FAILURE_LABELS.contains(&failure_label(e)), "{e:?}");
        }
    }

    /// How a test server answers a request.
    #[derive(Clone, Copy)]
    enum Answer {
        /// `200` with this body, on a keep-alive connection.
        Body(&'static str),
        /// `200 ok`, then the connection is closed (`Connection: close`).
        Close,
        /// Nothing: the connection is held open without an answer.
        Never,
    }

    /// A server on loopback answering every request as `answer` says; returns its URL and the
    /// number of connections it accepted.
    async fn server(answer: Answer) -> (String, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        (url, loopback::serve(listener, respond(answer)))
    }

    /// What a server answering as `answer` says does with each request.
    fn respond(
        answer: Answer,
    ) -> impl Fn(http::request::Parts) -> BoxFuture<'static, loopback::Response> + Clone + Send + Sync
    {
        move |_request| {
            Box::pin(async move {
                match answer {
                    Answer::Body(body) => hyper::Response::new(http_body_util::Full::new(
                        Bytes::from_static(body.as_bytes()),
                    )),
                    Answer::Close => hyper::Response::builder()
                        .header(http::header::CONNECTION, "close")
                        .body(http_body_util::Full::new(Bytes::from_static(b"ok")))
                        .unwrap(),
                    Answer::Never => std::future::pending().await,
                }
            })
        }
    }

    mod loopback {
        // Shared with benches/egress.rs and benches/calls.rs.
        include!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/benches/support/loopback.rs"
        ));
    }
    use loopback::{get_request, private_pki};

    type BoxFuture<'a, T> = std::pin::Pin<Box<dyn Future<Output = T> + Send + 'a>>;

    /// An HTTPS server on loopback answering `ok` on keep-alive connections; returns its URL
    /// and the number of TLS handshakes it completed.
    async fn tls_server(config: Arc<rustls::ServerConfig>) -> (String, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}", listener.local_addr().unwrap());
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        let handshakes = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&handshakes);
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let (acceptor, counter) = (acceptor.clone(), Arc::clone(&counter));
                tokio::spawn(async move {
                    // A client that does not trust the certificate aborts the handshake.
                    if let Ok(tls) = acceptor.accept(stream).await {
                        counter.fetch_add(1, Ordering::SeqCst);
                        loopback::serve_connection(tls, respond(Answer::Body("ok"))).await;
                    }
                });
            }
        });
        (url, handshakes)
    }

    /// A PEM file holding `pem`.
    fn pem_file(pem: &str) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), pem).unwrap();
        file
    }

    fn egress(url: &str) -> Arc<Egress> {
        Arc::new(Egress::new(
            EgressPolicy::allowing([url]).unwrap(),
            "test-plugin".into(),
        ))
    }

    /// One GET through a new store's hooks (as each pass's instance has): status and body.
    async fn get(egress: &Arc<Egress>, url: &str) -> Result<(u16, Bytes), HttpError> {
        let mut hooks = EgressHooks {
            egress: Arc::clone(egress),
            sealed: false,
        };
        let sent = hooks.send_request(get_request(url), None, Box::new(async { Ok(()) }));
        let (response, _io) = Box::into_pin(sent).await?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await?.to_bytes();
        Ok((status, body))
    }

    /// Three GETs answered `ok`, from three instances of one plugin: the connections the
    /// server accepted.
    async fn connections_for_three_gets(answer: Answer) -> usize {
        let (url, accepted) = server(answer).await;
        let egress = egress(&url);
        for _ in 0..3 {
            assert_eq!(get(&egress, &url).await.unwrap(), (200, Bytes::from("ok")));
        }
        accepted.load(Ordering::SeqCst)
    }

    #[tokio::test]
    async fn the_instances_of_one_plugin_reuse_one_connection() {
        assert_eq!(connections_for_three_gets(Answer::Body("ok")).await, 1);
    }

    #[tokio::test]
    async fn the_connections_a_plugin_opens_are_counted_by_plugin() {
        let opened = || {
            let metrics = crate::ops::metrics::global().encode();
            metrics
                .lines()
                .find_map(|l| {
                    l.strip_prefix(
                        "orchard_plugin_http_connections_total{plugin=\"counted-plugin\"} ",
                    )
                })
                .map_or(0, |v| v.parse::<u64>().unwrap())
        };
        let (url, _) = server(Answer::Body("ok")).await;
        let egress = Arc::new(Egress::new(
            EgressPolicy::allowing([url.as_str()]).unwrap(),
            "counted-plugin".into(),
        ));
        for _ in 0..3 {
            get(&egress, &url).await.unwrap();
        }
        assert_eq!(opened(), 1);
    }

    #[tokio::test]
    async fn the_requests_of_a_plugin_that_got_no_answer_are_counted_by_why() {
        let failures = |error: &str| {
            let line = format!(
                "orchard_plugin_http_failures_total{{plugin=\"failing-plugin\",error=\"{error}\"}} "
            );
            crate::ops::metrics::global()
                .encode()
                .lines()
                .find_map(|l| l.strip_prefix(line.as_str()).map(str::to_owned))
                .map_or(0, |v| v.parse::<u64>().unwrap())
        };
        let (_, config) = private_pki();
        let (url, _) = tls_server(config).await;
        let untrusting = Arc::new(Egress::new(
            EgressPolicy::allowing([url.as_str()]).unwrap(),
            "failing-plugin".into(),
        ));
        let denying = Arc::new(Egress::new(
            EgressPolicy::default(),
            "failing-plugin".into(),
        ));
        for _ in 0..2 {
            get(&untrusting, &url).await.unwrap_err();
        }
        get(&denying, &url).await.unwrap_err();
        assert_eq!(failures("tls_certificate"), 2);
        assert_eq!(failures("denied"), 1);
    }

    #[tokio::test]
    async fn two_plugins_never_share_a_connection() {
        let (url, accepted) = server(Answer::Body("ok")).await;
        for plugin in [egress(&url), egress(&url)] {
            get(&plugin, &url).await.unwrap();
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_destination_that_closes_every_connection_answers_every_request() {
        assert_eq!(connections_for_three_gets(Answer::Close).await, 3);
    }

    #[tokio::test]
    async fn a_response_head_that_does_not_come_in_time_fails_the_request() {
        let (url, _) = server(Answer::Never).await;
        let egress = Arc::new(Egress::new(
            EgressPolicy {
                connect_timeout: Duration::from_millis(100),
                response_timeout: Duration::from_millis(100),
                ..EgressPolicy::allowing([url.as_str()]).unwrap()
            },
            "test-plugin".into(),
        ));
        let err = get(&egress, &url).await.unwrap_err();
        assert!(matches!(err, HttpError::ConnectionReadTimeout), "{err:?}");
    }

    #[tokio::test]
    async fn a_response_body_over_the_cap_fails_with_the_cap() {
        let (url, _) = server(Answer::Body("0123456789abcdef0123456789abcdef")).await;
        let egress = Arc::new(Egress::new(
            EgressPolicy {
                max_response_bytes: 16,
                ..EgressPolicy::allowing([url.as_str()]).unwrap()
            },
            "test-plugin".into(),
        ));
        let err = get(&egress, &url).await.unwrap_err();
        assert!(
            matches!(err, HttpError::HttpResponseBodySize(Some(16))),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn a_refused_connect_is_reported_as_refused() {
        // A port just bound and released: nothing listens there.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}");
        let err = get(&egress(&url), &url).await.unwrap_err();
        assert!(matches!(err, HttpError::ConnectionRefused), "{err:?}");
    }

    #[tokio::test]
    async fn a_destination_off_the_allow_list_is_denied_without_a_connection() {
        let (url, accepted) = server(Answer::Body("ok")).await;
        let egress = Arc::new(Egress::new(EgressPolicy::default(), "test-plugin".into()));
        let err = get(&egress, &url).await.unwrap_err();
        assert!(matches!(err, HttpError::HttpRequestDenied), "{err:?}");
        assert_eq!(accepted.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn a_denied_request_whose_body_is_written_and_finished_after_it_was_sent_still_answers_denied()
     {
        use wasmtime_wasi::p2::Pollable;
        use wasmtime_wasi_http::p2::body::{HostOutgoingBody, StreamContext};

        let (url, accepted) = server(Answer::Body("ok")).await;
        // Off the allow-list, and on it but sealed (a conversion).
        for (policy, sealed) in [
            (EgressPolicy::default(), false),
            (EgressPolicy::allowing([url.as_str()]).unwrap(), true),
        ] {
            let mut hooks = EgressHooks {
                egress: Arc::new(Egress::new(policy, "test-plugin".into())),
                sealed,
            };
            // The guest's `outgoing-body` as wasmtime-wasi-http makes it (room for one chunk),
            // used as wstd's client does: the request handed over first, then the body written
            // and finished while the response is awaited.
            let (mut outgoing, body) = HostOutgoingBody::new(StreamContext::Request, None, 1, 64);
            let request = http::Request::post(format!("{url}/zones"))
                .body(body)
                .unwrap();
            let sent = hooks.send_request(request, None, Box::new(async { Ok(()) }));
            let mut stream = outgoing.take_output_stream().unwrap();
            // More chunks than the body's channel holds: they go through only if taken in.
            for chunk in ["{\"name\":", "\"example.org.\",", "\"kind\":\"Native\"}"] {
                tokio::time::timeout(Duration::from_secs(5), stream.ready())
                    .await
                    .unwrap();
                assert!(stream.check_write().unwrap() > 0);
                stream.write(Bytes::from_static(chunk.as_bytes())).unwrap();
                stream.flush().unwrap();
            }
            drop(stream);
            outgoing.finish(None).unwrap();
            let answer = Box::into_pin(sent).await;
            assert!(
                matches!(answer, Err(HttpError::HttpRequestDenied)),
                "sealed {sealed}: {:?}",
                answer.err()
            );
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn a_body_still_being_written_when_the_server_has_answered_and_closed_is_taken_in() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        use wasmtime_wasi::p2::Pollable;
        use wasmtime_wasi_http::p2::body::{HostOutgoingBody, StreamContext};

        // A server that answers as soon as it has the request's head, then closes the
        // connection without reading the body (as some servers answer an error early).
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                let mut chunk = [0_u8; 1024];
                let n = socket.read(&mut chunk).await.unwrap();
                head.extend_from_slice(&chunk[..n]);
            }
            let answer = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok";
            socket.write_all(answer.as_bytes()).await.unwrap();
        });
        let mut hooks = EgressHooks {
            egress: egress(&url),
            sealed: false,
        };
        let (mut outgoing, body) = HostOutgoingBody::new(StreamContext::Request, None, 1, 64);
        let request = http::Request::post(format!("{url}/zones"))
            .body(body)
            .unwrap();
        let sent = hooks.send_request(request, None, Box::new(async { Ok(()) }));
        let (response, _io) = Box::into_pin(sent).await.unwrap();
        let answer = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(answer, "ok");
        // The exchange is over and its connection closed: the guest's writes still go through.
        let mut stream = outgoing.take_output_stream().unwrap();
        for _ in 0..10 {
            tokio::time::timeout(Duration::from_secs(5), stream.ready())
                .await
                .unwrap();
            assert!(stream.check_write().unwrap() > 0);
            stream.write(Bytes::from_static(b"0123456789")).unwrap();
            stream.flush().unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        drop(stream);
        outgoing.finish(None).unwrap();
    }

    /// The egress of a plugin allowed to reach `url`, trusting the CAs of `ca_files`.
    fn egress_trusting(url: &str, ca_files: &[PathBuf]) -> Arc<Egress> {
        let policy = EgressPolicy {
            trusted_cas: TrustedCas::from_pem_files(ca_files).unwrap(),
            ..EgressPolicy::allowing([url]).unwrap()
        };
        Arc::new(Egress::new(policy, "test-plugin".into()))
    }

    #[tokio::test]
    async fn an_https_destination_signed_by_a_trusted_ca_answers_many_requests_after_one_handshake()
    {
        let (ca, config) = private_pki();
        let (url, handshakes) = tls_server(config).await;
        let ca_file = pem_file(&ca);
        let egress = egress_trusting(&url, &[ca_file.path().to_owned()]);
        for _ in 0..3 {
            assert_eq!(get(&egress, &url).await.unwrap(), (200, Bytes::from("ok")));
        }
        assert_eq!(handshakes.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn an_https_destination_signed_by_a_ca_not_trusted_fails_with_a_certificate_error() {
        let (_, config) = private_pki();
        let (url, handshakes) = tls_server(config).await;
        // Another CA than the server's, and the public roots: neither signed its certificate.
        let (other_ca, _) = private_pki();
        let other = pem_file(&other_ca);
        for egress in [
            egress(&url),
            egress_trusting(&url, &[other.path().to_owned()]),
        ] {
            let err = get(&egress, &url).await.unwrap_err();
            assert!(matches!(err, HttpError::TlsCertificateError), "{err:?}");
        }
        assert_eq!(handshakes.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_ca_file_is_read_with_every_certificate_it_holds() {
        let (first, _) = private_pki();
        let (second, _) = private_pki();
        let both = pem_file(&format!("{first}{second}"));
        let one = pem_file(&first);
        let cas =
            TrustedCas::from_pem_files(&[both.path().to_owned(), one.path().to_owned()]).unwrap();
        assert_eq!(cas.len(), 3);
        assert!(TrustedCas::from_pem_files(&[]).unwrap().is_empty());
    }

    #[test]
    fn a_ca_file_that_is_missing_or_holds_no_usable_certificate_is_refused_naming_it() {
        let missing = PathBuf::from("/nonexistent/orchard-ca.pem");
        let err = TrustedCas::from_pem_files(std::slice::from_ref(&missing)).unwrap_err();
        assert!(matches!(err, Error::CaFileUnreadable { .. }), "{err:?}");
        assert!(
            err.to_string()
                .starts_with("--plugin-ca-file /nonexistent/orchard-ca.pem: "),
            "{err}"
        );

        let (ca, _) = private_pki();
        let key_only = pem_file(
            "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF\n-----END PRIVATE KEY-----\n",
        );
        let not_a_certificate = pem_file(
            "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n",
        );
        let good = pem_file(&ca);
        for (file, says) in [
            (&key_only, "no CERTIFICATE block"),
            (&not_a_certificate, "certificate 1 is not a usable CA"),
        ] {
            let files = [good.path().to_owned(), file.path().to_owned()];
            let err = TrustedCas::from_pem_files(&files).unwrap_err();
            let text = err.to_string();
            assert!(matches!(err, Error::CaFileInvalid { .. }), "{err:?}");
            assert!(text.contains(&file.path().display().to_string()), "{text}");
            assert!(text.contains(says), "{text}");
        }
    }

    fn uri(s: &str) -> http::Uri {
        s.parse().unwrap()
    }

    #[test]
    fn an_empty_policy_denies_everything() {
        assert!(!EgressPolicy::default().allows(&uri("http://127.0.0.1:8081/api")));
    }

    #[test]
    fn an_entry_allows_only_its_scheme_host_and_port() {
        let p = EgressPolicy::allowing(["http://127.0.0.1:8081"]).unwrap();
        assert!(p.allows(&uri("http://127.0.0.1:8081/api/v1/servers")));
        assert!(!p.allows(&uri("https://127.0.0.1:8081/")));
        assert!(!p.allows(&uri("http://127.0.0.1:8082/")));
        assert!(!p.allows(&uri("http://localhost:8081/")));
    }

    #[test]
    fn a_port_wildcard_allows_any_port_of_the_host() {
        let p = EgressPolicy::allowing(["http://127.0.0.1:*"]).unwrap();
        assert!(p.allows(&uri("http://127.0.0.1:1/")));
        assert!(p.allows(&uri("http://127.0.0.1/")));
        assert!(!p.allows(&uri("http://127.0.0.2:1/")));
    }

    #[test]
    fn an_entry_without_port_means_the_scheme_default() {
        let p = EgressPolicy::allowing(["https://API.example.com/"]).unwrap();
        assert!(p.allows(&uri("https://api.example.com/x")));
        assert!(!p.allows(&uri("https://api.example.com:8443/x")));
    }

    #[test]
    fn malformed_entries_are_rejected_with_the_entry_named() {
        for bad in [
            "127.0.0.1:80",
            "ftp://x",
            "http://",
            "http://x:port",
            "http://x/path",
        ] {
            let err = bad.parse::<AllowedHost>().unwrap_err().to_string();
            assert!(err.contains(bad), "{err}");
        }
    }
}
