// What the egress unit tests (`src/runtime/egress.rs`) and the egress benchmark both need
// against servers on loopback: a private certificate authority, a GET. Both include this file.

use std::sync::Arc;

use http_body_util::BodyExt as _;

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
