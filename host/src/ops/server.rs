//! The admin HTTP server: `/healthz` (the process runs), `/readyz` (see [`super::Health`]),
//! `/metrics` (Prometheus text format) and `/objects/<plural>.<group>/<namespace>/<name>`
//! (the object's [`super::journal`], JSON; what `orchard explain` reads).

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use super::Health;

/// Serves until the process ends. Binding errors are returned; connection errors are logged.
pub async fn serve(addr: SocketAddr, health: Arc<Health>) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    tracing::info!(%addr, "admin server listening (/healthz, /readyz, /metrics, /objects)");
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let health = Arc::clone(&health);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let health = Arc::clone(&health);
                    async move { Ok::<_, std::convert::Infallible>(respond(&req, &health)) }
                });
                if let Err(e) = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await
                {
                    tracing::debug!(error = %e, "admin connection");
                }
            });
        }
    });
    Ok(())
}

/// `/objects/<plural>.<group>/<namespace>/<name>`: the object's journal, or 404 saying why
/// there is none.
fn journal(path: &str) -> (StatusCode, String, &'static str) {
    let parts: Vec<&str> = path.trim_start_matches("/objects/").split('/').collect();
    let [kind, namespace, name] = parts[..] else {
        return (
            StatusCode::BAD_REQUEST,
            "expected /objects/<plural>.<group>/<namespace>/<name>".to_owned(),
            "text/plain",
        );
    };
    let journal = super::journal::global();
    let Some(object) = journal.get(kind, namespace, name) else {
        let why = if journal.is_full() {
            "not journaled: the journal is full"
        } else {
            "no pass of this object since this host started"
        };
        return (StatusCode::NOT_FOUND, why.to_owned(), "text/plain");
    };
    match serde_json::to_string(&object) {
        Ok(body) => (StatusCode::OK, body, "application/json"),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            e.to_string(),
            "text/plain",
        ),
    }
}

fn respond<B>(req: &Request<B>, health: &Health) -> Response<Full<Bytes>> {
    let (status, body, content_type) = match req.uri().path() {
        "/healthz" => (StatusCode::OK, "ok".to_owned(), "text/plain"),
        "/readyz" => match health.waiting_for() {
            waits if waits.is_empty() => (StatusCode::OK, "ready".to_owned(), "text/plain"),
            waits => (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("not ready: waiting for {}\n", waits.join("; ")),
                "text/plain",
            ),
        },
        "/metrics" => (
            StatusCode::OK,
            {
                super::journal::global().refresh_metrics(jiff::Timestamp::now());
                super::metrics::global().set_ready(health.is_ready());
                super::metrics::global().encode()
            },
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ),
        path if path.starts_with("/objects/") => journal(path),
        _ => (StatusCode::NOT_FOUND, "not found".to_owned(), "text/plain"),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(value) = content_type.parse() {
        response
            .headers_mut()
            .insert(hyper::header::CONTENT_TYPE, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use http_body_util::BodyExt as _;
    use hyper::{Request, StatusCode};

    use super::{Health, respond};

    async fn readyz(health: &Health) -> (StatusCode, String) {
        let request = Request::builder().uri("/readyz").body(()).unwrap();
        let response = respond(&request, health);
        let status = response.status();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn readyz_answers_503_saying_what_it_waits_for_then_200() {
        let health = Arc::new(Health::default());
        health.set_plugins_loaded();
        let load = health.pending();
        let (status, body) = readyz(&health).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            body,
            "not ready: waiting for 1 load(s) of Plugin objects (the list of Plugins, then each Plugin's first load)\n"
        );
        drop(load);
        assert_eq!(readyz(&health).await, (StatusCode::OK, "ready".to_owned()));
    }
}
