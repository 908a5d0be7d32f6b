//! What a plugin's outbound request costs through its connection pool, against a new
//! connection per request (what wasmtime-wasi-http's default sender does: a TCP connect and,
//! for https, a new rustls configuration with the whole webpki root store and a full
//! handshake) — docs/benchmarks.md, "Session 11".
//!
//! - `egress/https/pooled`: one GET to a loopback HTTPS server whose certificate a private CA
//!   signed (trusted with `TrustedCas`, as `--plugin-ca-file` does), through one `Egress`:
//!   the first request connects, every later one reuses the connection.
//! - `egress/https/new_connection_per_request`: the same GET through a new `Egress` each
//!   time: root store, TCP connect and TLS handshake every request.
//! - `egress/http/*`: the same over plain HTTP (the TCP connect alone).
//!
//! Loopback has no network latency: a remote API adds one to three round trips per new
//! connection on top of what this measures (the CPU of both ends).

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "benchmark code")]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use http_body_util::BodyExt;
use orchard::runtime::egress::Egress;
use orchard::runtime::{EgressPolicy, TrustedCas};
use wasmtime_wasi_http::RequestOptions;

mod loopback {
    // Shared with the egress unit tests (src/runtime/egress.rs) and benches/calls.rs.
    include!("support/loopback.rs");
}
use loopback::{get_request, private_pki};

/// A keep-alive server on loopback answering `ok` (over TLS with `tls`); returns its URL.
async fn server(tls: Option<Arc<rustls::ServerConfig>>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let scheme = if tls.is_some() { "https" } else { "http" };
    let url = format!("{scheme}://{}", listener.local_addr().unwrap());
    let ok = |_request| async {
        hyper::Response::new(http_body_util::Full::new(Bytes::from_static(b"ok")))
    };
    let Some(tls) = tls else {
        loopback::serve(listener, ok);
        return url;
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(tls) = acceptor.accept(stream).await {
                    loopback::serve_connection(tls, ok).await;
                }
            });
        }
    });
    url
}

/// One GET through `egress`, its body read to the end (which returns the connection to the
/// pool).
async fn get(egress: &Egress, url: &str) {
    let response = egress
        .send(get_request(url), RequestOptions::default())
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, "ok");
}

fn requests(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (ca, config) = private_pki();
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca).unwrap();
    let policy = EgressPolicy {
        trusted_cas: TrustedCas::from_pem_files(&[ca_file]).unwrap(),
        ..EgressPolicy::default()
    };
    for (scheme, tls) in [("https", Some(config)), ("http", None)] {
        let url = rt.block_on(server(tls));
        let pooled = Egress::new(policy.clone(), "bench".into());
        let mut group = c.benchmark_group(format!("egress/{scheme}"));
        group.warm_up_time(Duration::from_secs(2));
        group.measurement_time(Duration::from_secs(5));
        group.bench_function("pooled", |bench| {
            bench.to_async(&rt).iter(|| get(&pooled, &url));
        });
        group.bench_function("new_connection_per_request", |bench| {
            bench.to_async(&rt).iter(|| async {
                get(&Egress::new(policy.clone(), "bench".into()), &url).await;
            });
        });
        group.finish();
    }
}

criterion_group!(benches, requests);
criterion_main!(benches);
