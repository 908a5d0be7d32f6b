//! HTTP for plugins: standard [`::http`] requests sent with `wstd`'s client inside a
//! component, with `ureq` when the plugin is linked natively; and what a failed request or an
//! unwelcome answer means for the call.
//!
//! The SDK has no HTTP client of its own: this module is an adapter.
//!
//! - Plugins that use wstd themselves (`wstd::http::Client`, async) turn its errors into this
//!   module's [`Error`] with `Error::from_wstd` (inside a component), and that into a
//!   [`Failure`] with `?`.
//! - [`send`] is the same exchange, blocking, with the whole response read: standard types in
//!   and out.
//! - [`Request`] (`http::get(url).header(..).json(..)?.send()?`) is a small builder over
//!   [`send`], and [`Response::error_for_status`] classifies an answer.
//!
//! Inside a component every request goes through the host's `wasi:http`: its allow-list, its
//! timeouts and its caps (the response body's size among them). A denied request fails with
//! [`Error::Denied`], which converts into an `InvalidConfiguration` failure (the admin must
//! allow the host, retrying cannot help).

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

    /// Sends the request and reads the whole response ([`send`]).
    pub fn send(self) -> Result<Response, Error> {
        let method = self.method.as_str();
        let mut builder = ::http::Request::builder()
            .method(method)
            .uri(self.url.as_str());
        for (name, value) in &self.headers {
            builder = builder.header(name.as_str(), value.as_str());
        }
        if let Some(body) = &self.body {
            builder = builder.header(::http::header::CONTENT_LENGTH, body.len());
        }
        let request = builder.body(self.body.unwrap_or_default()).map_err(|e| {
            match parse_url(&self.url) {
                Err(invalid) => invalid,
                Ok(_) => Error::Transport(format!("{method} {}: {e}", self.url)),
            }
        })?;
        send(request).map(Response::from)
    }
}

/// Sends `request` and reads the whole response: with wstd's client inside a component, with
/// `ureq` when linked natively. The URL MUST be absolute, `http://` or `https://`.
///
/// Only a request without a response fails: a 4xx or 5xx answer is a [`::http::Response`] like
/// any other (see [`Response::error_for_status`]).
pub fn send(request: ::http::Request<Vec<u8>>) -> Result<::http::Response<Vec<u8>>, Error> {
    parse_url(&request.uri().to_string())?;
    transport::send(request)
}

/// `url` as a URI if it is an absolute `http://` or `https://` URL with a host, else
/// [`Error::InvalidUrl`] (wasi:http would take a URL without scheme as `https`, and refuse
/// another scheme as a protocol error: a transient failure for what is a configuration one).
pub fn parse_url(url: &str) -> Result<::http::Uri, Error> {
    let uri: ::http::Uri = url.parse().map_err(|_| Error::InvalidUrl(url.to_owned()))?;
    match (uri.scheme_str(), uri.host()) {
        (Some("http" | "https"), Some(host)) if !host.is_empty() => Ok(uri),
        _ => Err(Error::InvalidUrl(url.to_owned())),
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

impl From<::http::Response<Vec<u8>>> for Response {
    fn from(response: ::http::Response<Vec<u8>>) -> Self {
        let (head, body) = response.into_parts();
        Self {
            status: head.status.as_u16(),
            headers: head
                .headers
                .iter()
                .map(|(name, value)| {
                    (
                        name.as_str().to_owned(),
                        String::from_utf8_lossy(value.as_bytes()).into_owned(),
                    )
                })
                .collect(),
            body,
        }
    }
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
impl Error {
    /// What a failed exchange of wstd's client (`wstd::http::Client::send`, or reading the
    /// response's body) means: the host's `HttpRequestDenied` is [`Error::Denied`] (terminal,
    /// as before wstd), every other failure [`Error::Transport`] with its `wasi:http` error
    /// code when there is one.
    pub fn from_wstd(url: &str, error: &wstd::http::Error) -> Self {
        match error.downcast_ref::<wstd::http::ErrorCode>() {
            Some(wstd::http::ErrorCode::HttpRequestDenied) => Self::Denied(url.to_owned()),
            Some(code) => Self::Transport(format!("{url}: {code:?}")),
            None => Self::Transport(format!("{url}: {error:#}")),
        }
    }
}

#[cfg(target_arch = "wasm32")]
mod transport {
    use super::Error;

    pub(super) fn send(
        request: ::http::Request<Vec<u8>>,
    ) -> Result<::http::Response<Vec<u8>>, Error> {
        let url = request.uri().to_string();
        wstd::runtime::block_on(async move {
            let response = wstd::http::Client::new().send(request).await?;
            let (head, mut body) = response.into_parts();
            let body = body.contents().await?.to_vec();
            Ok(::http::Response::from_parts(head, body))
        })
        .map_err(|e| Error::from_wstd(&url, &e))
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod transport {
    use super::Error;

    pub(super) fn send(
        request: ::http::Request<Vec<u8>>,
    ) -> Result<::http::Response<Vec<u8>>, Error> {
        let what = format!("{} {}", request.method(), request.uri());
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .new_agent();
        let response = agent
            .run(request)
            .map_err(|e| Error::Transport(format!("{what}: {e}")))?;
        let (head, mut body) = response.into_parts();
        let body = body
            .read_to_vec()
            .map_err(|e| Error::Transport(format!("{what}: {e}")))?;
        Ok(::http::Response::from_parts(head, body))
    }
}
