//! The conversion webhook's HTTPS server: `POST /convert` answers a `ConversionReview`
//! ([`super::review`]). Its certificate comes from a directory (`tls.crt`, `tls.key`, and
//! `ca.crt` when a CA signed it: a cert-manager Secret mounted as is) or is generated at start
//! (a private CA and a serving certificate for the names the apiserver dials); either way the
//! CA goes into the CRDs' `caBundle` ([`Tls::ca_bundle`]).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;

use super::Registry;

/// Largest `ConversionReview` body read (the apiserver sends a list's page at once).
pub const MAX_REVIEW_BYTES: usize = 64 << 20;

/// Why the webhook cannot serve.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// A certificate file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The certificate or key is not PEM of the right kind.
    #[error("{what}: {detail}")]
    Pem {
        /// The file.
        what: String,
        /// What is wrong with it.
        detail: String,
    },
    /// The certificate could not be generated.
    #[error("generating the webhook's certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// rustls refused the certificate and key.
    #[error("the webhook's certificate and key: {0}")]
    Tls(#[from] rustls::Error),
    /// The address could not be bound.
    #[error("binding the conversion webhook to {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The webhook's serving certificate and the CA the apiserver trusts it by.
#[derive(Clone)]
#[allow(clippy::struct_field_names, reason = "three PEM documents")]
pub struct Tls {
    cert_pem: String,
    key_pem: String,
    ca_pem: String,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("Tls").finish_non_exhaustive()
    }
}

impl Tls {
    /// A private CA and a certificate it signs for `names` (DNS names or IP addresses).
    ///
    /// # Errors
    ///
    /// [`ServerError::Generate`].
    pub fn generate(names: Vec<String>) -> Result<Self, ServerError> {
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, "orchard conversion webhook CA");
        let ca_key = rcgen::KeyPair::generate()?;
        let ca = rcgen::CertifiedIssuer::self_signed(ca, ca_key)?;
        let leaf = rcgen::CertificateParams::new(names)?;
        let leaf_key = rcgen::KeyPair::generate()?;
        let cert = leaf.signed_by(&leaf_key, &ca)?;
        Ok(Self {
            cert_pem: cert.pem(),
            key_pem: leaf_key.serialize_pem(),
            ca_pem: ca.pem(),
        })
    }

    /// `tls.crt`, `tls.key` and, when present, `ca.crt` of `dir` (without it, `tls.crt` is
    /// its own CA).
    ///
    /// # Errors
    ///
    /// [`ServerError::Read`] naming the file.
    pub fn from_dir(dir: &Path) -> Result<Self, ServerError> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read_to_string(&path).map_err(|source| ServerError::Read {
                path: path.display().to_string(),
                source,
            })
        };
        let cert_pem = read("tls.crt")?;
        let key_pem = read("tls.key")?;
        let ca_pem = if dir.join("ca.crt").exists() {
            read("ca.crt")?
        } else {
            cert_pem.clone()
        };
        Ok(Self {
            cert_pem,
            key_pem,
            ca_pem,
        })
    }

    /// The CA, base64 PEM, as a CRD's `spec.conversion.webhook.clientConfig.caBundle`.
    pub fn ca_bundle(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.ca_pem)
    }

    fn server_config(&self) -> Result<rustls::ServerConfig, ServerError> {
        let pem = |what: &str, e: rustls::pki_types::pem::Error| ServerError::Pem {
            what: what.to_owned(),
            detail: e.to_string(),
        };
        let certs = CertificateDer::pem_slice_iter(self.cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| pem("tls.crt", e))?;
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes())
            .map_err(|e| pem("tls.key", e))?;
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }
}

/// Binds `addr` and serves `POST /convert` until the process ends; returns the bound address
/// (port 0 picks one). Connection errors are logged.
///
/// # Errors
///
/// [`ServerError::Bind`], or a certificate rustls refuses.
pub async fn serve(
    addr: SocketAddr,
    tls: &Tls,
    registry: &'static Registry,
) -> Result<SocketAddr, ServerError> {
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls.server_config()?));
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| ServerError::Bind { addr, source })?;
    tracing::info!(addr = %bound, "conversion webhook listening (/convert)");
    tokio::spawn(async move {
        loop {
            let Ok((stream, peer)) = listener.accept().await else {
                continue;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let stream = match acceptor.accept(stream).await {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::debug!(%peer, error = %e, "conversion webhook TLS handshake");
                        return;
                    }
                };
                let service = hyper::service::service_fn(move |req| async move {
                    Ok::<_, std::convert::Infallible>(respond(req, registry).await)
                });
                if let Err(e) = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await
                {
                    tracing::debug!(%peer, error = %e, "conversion webhook connection");
                }
            });
        }
    });
    Ok(bound)
}

async fn respond(
    req: Request<hyper::body::Incoming>,
    registry: &'static Registry,
) -> Response<Full<Bytes>> {
    let plain = |status: StatusCode, text: &str| {
        let mut r = Response::new(Full::new(Bytes::from(text.to_owned())));
        *r.status_mut() = status;
        r
    };
    if req.uri().path() != "/convert" {
        return plain(
            StatusCode::NOT_FOUND,
            "the conversion webhook serves /convert",
        );
    }
    if req.method() != hyper::Method::POST {
        return plain(StatusCode::METHOD_NOT_ALLOWED, "POST a ConversionReview");
    }
    let body = match Limited::new(req.into_body(), MAX_REVIEW_BYTES)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return plain(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("reading the ConversionReview (at most {MAX_REVIEW_BYTES} bytes): {e}"),
            );
        }
    };
    let answer = super::review(&body, registry).await;
    let mut r = Response::new(Full::new(Bytes::from(answer.to_string())));
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}
