//! A small blocking HTTP client: over `wasi:http` inside a component, over `ureq` when the
//! plugin is linked natively.
//!
//! Inside a component every request goes through the host's allow-list; a denied request
//! fails with [`Error::Denied`], which converts into an `InvalidConfiguration` failure (the
//! admin must allow the host, retrying cannot help).

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::types::Failure;

/// Why a request got no response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The host's allow-list refused the destination.
    Denied(String),
    /// The URL could not be understood.
    InvalidUrl(String),
    /// Connecting, sending or receiving failed.
    Transport(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Denied(url) => write!(f, "request to {url} denied by the host's allow-list"),
            Self::InvalidUrl(url) => write!(f, "invalid URL {url:?}"),
            Self::Transport(e) => write!(f, "HTTP transport error: {e}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        match e {
            Error::Denied(_) | Error::InvalidUrl(_) => Failure::invalid(e),
            Error::Transport(_) => Failure::transient(e),
        }
    }
}

/// HTTP methods the client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `GET`: read a resource.
    Get,
    /// `POST`: create a resource or run an action.
    Post,
    /// `PUT`: replace a resource.
    Put,
    /// `PATCH`: change part of a resource.
    Patch,
    /// `DELETE`: remove a resource.
    Delete,
}

impl Method {
    /// The method's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Post => "POST",
            Self::Put => "PUT",
            Self::Patch => "PATCH",
            Self::Delete => "DELETE",
        }
    }
}

/// A request being built.
#[derive(Debug, Clone)]
pub struct Request {
    /// The HTTP method.
    pub method: Method,
    /// Absolute `http://` or `https://` URL; inside a component its host MUST be on the
    /// plugin's allow-list.
    pub url: String,
    /// Header names and values, in order; names are sent lowercase inside a component.
    pub headers: Vec<(String, String)>,
    /// The request body, if any (`content-length` is set from it).
    pub body: Option<Vec<u8>>,
}

/// A `GET` request.
pub fn get(url: impl Into<String>) -> Request {
    Request::new(Method::Get, url)
}
/// A `POST` request.
pub fn post(url: impl Into<String>) -> Request {
    Request::new(Method::Post, url)
}
/// A `PUT` request.
pub fn put(url: impl Into<String>) -> Request {
    Request::new(Method::Put, url)
}
/// A `PATCH` request.
pub fn patch(url: impl Into<String>) -> Request {
    Request::new(Method::Patch, url)
}
/// A `DELETE` request.
pub fn delete(url: impl Into<String>) -> Request {
    Request::new(Method::Delete, url)
}

impl Request {
    /// A request without headers or body.
    pub fn new(method: Method, url: impl Into<String>) -> Self {
        Self {
            method,
            url: url.into(),
            headers: Vec::new(),
            body: None,
        }
    }

    /// Adds a header.
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sets a JSON body and its content type.
    pub fn json<T: Serialize>(mut self, body: &T) -> Result<Self, Failure> {
        self.body = Some(serde_json::to_vec(body)?);
        Ok(self.header("content-type", "application/json"))
    }

    /// Sends the request and reads the whole response.
    pub fn send(self) -> Result<Response, Error> {
        transport::send(&self)
    }
}

/// A complete response.
#[derive(Debug, Clone)]
pub struct Response {
    /// The HTTP status code.
    pub status: u16,
    /// Header names and values as received (values decoded lossily as UTF-8).
    pub headers: Vec<(String, String)>,
    /// The whole response body.
    pub body: Vec<u8>,
}

impl Response {
    /// 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body parsed as JSON.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, Failure> {
        serde_json::from_slice(&self.body)
            .map_err(|e| Failure::transient(format!("response is not the expected JSON: {e}")))
    }

    /// The response if 2xx, else a failure carrying status and body: 4xx other than 404,
    /// 408, 409 and 429 are `InvalidConfiguration` (the request itself is wrong), the rest
    /// transient.
    pub fn error_for_status(self, what: &str) -> Result<Self, Failure> {
        if self.is_success() {
            return Ok(self);
        }
        let message = format!("{what}: HTTP {}: {}", self.status, self.text().trim());
        Err(match self.status {
            400..=499 if ![404, 408, 409, 429].contains(&self.status) => Failure::invalid(message),
            _ => Failure::transient(message),
        })
    }
}

#[cfg(target_arch = "wasm32")]
mod transport {
    use super::{Error, Method, Request, Response};
    use crate::bindings::wasi::http::outgoing_handler;
    use crate::bindings::wasi::http::types::{
        ErrorCode, Fields, IncomingBody, Method as WasiMethod, OutgoingBody, OutgoingRequest,
        Scheme,
    };
    use crate::bindings::wasi::io::streams::StreamError;

    /// What one `blocking-write-and-flush` accepts (wasi:io).
    const WRITE_CHUNK: usize = 4096;

    pub(super) fn send(req: &Request) -> Result<Response, Error> {
        let (scheme, authority, path) = split_url(&req.url)?;
        let transport =
            |e: String| Error::Transport(format!("{} {}: {e}", req.method.as_str(), req.url));

        let mut entries: Vec<(String, Vec<u8>)> = req
            .headers
            .iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v.as_bytes().to_vec()))
            .collect();
        if let Some(body) = &req.body {
            entries.push(("content-length".into(), body.len().to_string().into_bytes()));
        }
        let fields =
            Fields::from_list(&entries).map_err(|e| transport(format!("header: {e:?}")))?;
        let request = OutgoingRequest::new(fields);
        let method = match req.method {
            Method::Get => WasiMethod::Get,
            Method::Post => WasiMethod::Post,
            Method::Put => WasiMethod::Put,
            Method::Patch => WasiMethod::Patch,
            Method::Delete => WasiMethod::Delete,
        };
        let invalid = |()| Error::InvalidUrl(req.url.clone());
        request.set_method(&method).map_err(invalid)?;
        request.set_scheme(Some(&scheme)).map_err(invalid)?;
        request.set_authority(Some(authority)).map_err(invalid)?;
        request.set_path_with_query(Some(path)).map_err(invalid)?;

        let body = request
            .body()
            .map_err(|()| transport("request body taken".into()))?;
        let payload = req.body.as_deref().unwrap_or_default();
        // A body that fits one buffered chunk is written and finished before the request is
        // handed over (the reliable order); a larger one streams while the host sends it.
        let response = if payload.len() <= WRITE_CHUNK {
            write_body(&body, payload).map_err(transport)?;
            OutgoingBody::finish(body, None).map_err(|e| transport(format!("{e:?}")))?;
            outgoing_handler::handle(request, None)
        } else {
            let response = outgoing_handler::handle(request, None);
            write_body(&body, payload).map_err(transport)?;
            OutgoingBody::finish(body, None).map_err(|e| transport(format!("{e:?}")))?;
            response
        };
        let response = response.map_err(|e| error_code(&req.url, e))?;
        response.subscribe().block();
        let incoming = match response.get() {
            Some(Ok(Ok(r))) => r,
            Some(Ok(Err(e))) => return Err(error_code(&req.url, e)),
            Some(Err(())) | None => return Err(transport("response already taken".into())),
        };

        let status = incoming.status();
        let headers = incoming
            .headers()
            .entries()
            .into_iter()
            .map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned()))
            .collect();
        let body = incoming
            .consume()
            .map_err(|()| transport("body taken".into()))?;
        let mut bytes = Vec::new();
        {
            let stream = body
                .stream()
                .map_err(|()| transport("body stream taken".into()))?;
            loop {
                match stream.blocking_read(64 * 1024) {
                    Ok(chunk) => bytes.extend_from_slice(&chunk),
                    Err(StreamError::Closed) => break,
                    Err(StreamError::LastOperationFailed(e)) => {
                        return Err(transport(e.to_debug_string()));
                    }
                }
            }
        }
        IncomingBody::finish(body);
        Ok(Response {
            status,
            headers,
            body: bytes,
        })
    }

    fn write_body(body: &OutgoingBody, payload: &[u8]) -> Result<(), String> {
        if payload.is_empty() {
            return Ok(());
        }
        let stream = body.write().map_err(|()| "body stream taken".to_owned())?;
        for chunk in payload.chunks(WRITE_CHUNK) {
            stream
                .blocking_write_and_flush(chunk)
                .map_err(|e| format!("writing body: {e:?}"))?;
        }
        Ok(())
    }

    fn error_code(url: &str, e: ErrorCode) -> Error {
        match e {
            ErrorCode::HttpRequestDenied => Error::Denied(url.to_owned()),
            other => Error::Transport(format!("{url}: {other:?}")),
        }
    }

    fn split_url(url: &str) -> Result<(Scheme, &str, &str), Error> {
        let (scheme, rest) = if let Some(rest) = url.strip_prefix("http://") {
            (Scheme::Http, rest)
        } else if let Some(rest) = url.strip_prefix("https://") {
            (Scheme::Https, rest)
        } else {
            return Err(Error::InvalidUrl(url.to_owned()));
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, "/"),
        };
        if authority.is_empty() {
            return Err(Error::InvalidUrl(url.to_owned()));
        }
        Ok((scheme, authority, path))
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod transport {
    use super::{Error, Request, Response};

    pub(super) fn send(req: &Request) -> Result<Response, Error> {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .new_agent();
        let mut builder = ureq::http::Request::builder()
            .method(req.method.as_str())
            .uri(&req.url);
        for (k, v) in &req.headers {
            builder = builder.header(k, v);
        }
        let request = builder
            .body(req.body.clone().unwrap_or_default())
            .map_err(|_| Error::InvalidUrl(req.url.clone()))?;
        let mut response = agent
            .run(request)
            .map_err(|e| Error::Transport(format!("{} {}: {e}", req.method.as_str(), req.url)))?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        let body = response
            .body_mut()
            .read_to_vec()
            .map_err(|e| Error::Transport(format!("{}: {e}", req.url)))?;
        Ok(Response {
            status,
            headers,
            body,
        })
    }
}
