// What the egress unit tests (`src/runtime/egress.rs`) and the benchmarks (`benches/egress.rs`,
// `benches/calls.rs`) need against servers on loopback: one way to serve HTTP/1.1, a private
// certificate authority, a GET. Each includes this file.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use http_body_util::BodyExt as _;

/// A loopback server's answer to a request (`Connection: close` in it closes the connection
/// after it).
pub type Response = http::Response<http_body_util::Full<Bytes>>;

/// Serves HTTP/1.1 on `listener` (keep-alive) until the runtime stops, answering each request
/// with `answer` of its head, once its body has been read to the end (as a server does);
/// returns the number of connections accepted so far. Call it inside a tokio runtime.
#[allow(clippy::unwrap_used, reason = "test support")]
pub fn serve<A, F>(listener: tokio::net::TcpListener, answer: A) -> Arc<AtomicUsize>
where
    A: Fn(http::request::Parts) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response> + Send + 'static,
{
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&accepted);
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(serve_connection(stream, answer.clone()));
        }
    });
    accepted
}

/// Serves one connection (a TCP stream, or a TLS stream over one) as [`serve`] does.
pub async fn serve_connection<Io, A, F>(io: Io, answer: A)
where
    Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    A: Fn(http::request::Parts) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response> + Send + 'static,
{
    let service = hyper::service::service_fn(move |request: http::Request<hyper::body::Incoming>| {
        let answer = answer.clone();
        async move {
            let (head, body) = request.into_parts();
            let _ = body.collect().await;
            Ok::<_, std::convert::Infallible>(answer(head).await)
        }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(hyper_util::rt::TokioIo::new(io), service)
        .await;
}

/// A certificate authority (PEM) and the TLS configuration of a server for 127.0.0.1 whose
/// certificate it signed.
#[allow(clippy::unwrap_used, reason = "test support")]
pub fn private_pki() -> (String, Arc<rustls::ServerConfig>) {
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "orchard test CA");
    let ca = rcgen::CertifiedIssuer::self_signed(ca, rcgen::KeyPair::generate().unwrap()).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &*ca)
        .unwrap();
    let server = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![leaf.der().clone()],
        rustls::pki_types::PrivatePkcs8KeyDer::from(key.serialize_der()).into(),
    )
    .unwrap();
    (ca.pem(), Arc::new(server))
}

/// A GET of `<url>/api` without a body, as a guest's request reaches the egress.
#[allow(clippy::unwrap_used, reason = "test support")]
pub fn get_request(url: &str) -> http::Request<wasmtime_wasi_http::WasiBody> {
    http::Request::get(format!("{url}/api"))
        .body(
            http_body_util::Empty::new()
                .map_err(|never| match never {})
                .boxed_unsync(),
        )
        .unwrap()
}
