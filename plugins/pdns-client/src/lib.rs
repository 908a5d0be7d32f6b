//! A small client of the PowerDNS Authoritative HTTP API (`/api/v1`): standard [`http`]
//! requests sent with wstd's HTTP client inside a component (through the host's `wasi:http`:
//! its allow-list, timeouts and caps), and with the SDK's native transport when the actuator
//! is linked natively (benchmarks).
//!
//! Credentials come from the object's credentials Secret: `url` (e.g.
//! `http://127.0.0.1:8081`), `apiKey`, and optionally `serverId` (default `localhost`).

#![forbid(unsafe_code)]

use http::{Method, Request, header};
use orchard_sdk::http::{Error as HttpError, Response};
use orchard_sdk::{Failure, Object};
use serde::{Deserialize, Serialize};

/// One zone as the API returns it (the fields the actuators use).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Zone {
    pub id: String,
    pub name: String,
    pub kind: String,
    #[serde(default)]
    pub serial: u64,
    #[serde(default)]
    pub account: String,
    #[serde(default)]
    pub dnssec: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rrsets: Vec<RRset>,
}

/// One record set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RRset {
    pub name: String,
    #[serde(rename = "type")]
    pub rtype: String,
    #[serde(default)]
    pub ttl: u32,
    #[serde(default)]
    pub records: Vec<Record>,
}

/// One record of a set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub content: String,
    #[serde(default)]
    pub disabled: bool,
}

/// A connection to one PowerDNS server.
pub struct Client {
    base: String,
    api_key: String,
}

/// A DNS name in canonical form: lower case, with the trailing dot.
pub fn canonical(name: &str) -> String {
    let name = name.trim().to_ascii_lowercase();
    if name.ends_with('.') {
        name
    } else {
        format!("{name}.")
    }
}

impl Client {
    /// The server named by the object's credentials.
    pub fn for_object<S>(obj: &Object<S>) -> Result<Self, Failure> {
        let url = obj.credential("url")?;
        let api_key = obj.credential("apiKey")?;
        let server = obj
            .credential("serverId")
            .unwrap_or_else(|_| "localhost".to_owned());
        Ok(Self {
            base: format!("{}/api/v1/servers/{server}", url.trim_end_matches('/')),
            api_key,
        })
    }

    /// A request to the API: its key, JSON accepted, and `body` as JSON when there is one.
    fn request(
        &self,
        method: Method,
        url: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<Request<Vec<u8>>, Failure> {
        let uri = orchard_sdk::http::parse_url(url)?;
        let body = body.map(serde_json::to_vec).transpose()?;
        let mut request = Request::builder()
            .method(method)
            .uri(uri)
            .header("X-API-Key", self.api_key.as_str())
            .header(header::ACCEPT, "application/json");
        if let Some(body) = &body {
            request = request
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::CONTENT_LENGTH, body.len());
        }
        request
            .body(body.unwrap_or_default())
            .map_err(|e| Failure::invalid(format!("request to {url}: {e}")))
    }

    fn zone_url(&self, id: &str) -> String {
        format!("{}/zones/{}", self.base, id)
    }

    /// The zone with this id, with its record sets; `None` when it does not exist.
    pub fn zone(&self, id: &str) -> Result<Option<Zone>, Failure> {
        let response = exchange(self.request(Method::GET, &self.zone_url(id), None)?)?;
        // PowerDNS answers 404 for an unknown zone, 422 for an id that cannot be a zone.
        if matches!(response.status, 404 | 422) {
            return Ok(None);
        }
        response
            .error_for_status(&format!("get zone {id}"))?
            .json()
            .map(Some)
    }

    /// Every zone (without record sets).
    pub fn zones(&self) -> Result<Vec<Zone>, Failure> {
        let req = self.request(Method::GET, &format!("{}/zones", self.base), None)?;
        send(req, "list zones")?.json()
    }

    /// Creates a zone; returns it as created.
    pub fn create_zone(&self, body: &serde_json::Value) -> Result<Zone, Failure> {
        let req = self.request(Method::POST, &format!("{}/zones", self.base), Some(body))?;
        send(req, "create zone")?.json()
    }

    /// Changes zone settings (kind, account…).
    pub fn update_zone(&self, id: &str, body: &serde_json::Value) -> Result<(), Failure> {
        let req = self.request(Method::PUT, &self.zone_url(id), Some(body))?;
        send(req, &format!("update zone {id}")).map(drop)
    }

    /// Deletes a zone; done when it is already gone.
    pub fn delete_zone(&self, id: &str) -> Result<(), Failure> {
        let response = exchange(self.request(Method::DELETE, &self.zone_url(id), None)?)?;
        if matches!(response.status, 404 | 422) {
            return Ok(());
        }
        response
            .error_for_status(&format!("delete zone {id}"))
            .map(drop)
    }

    /// Replaces or deletes record sets (`changetype` REPLACE / DELETE).
    pub fn patch_rrsets(&self, zone: &str, rrsets: &serde_json::Value) -> Result<(), Failure> {
        let body = serde_json::json!({ "rrsets": rrsets });
        let req = self.request(Method::PATCH, &self.zone_url(zone), Some(&body))?;
        send(req, &format!("patch record sets of zone {zone}")).map(drop)
    }
}

/// Sends a request and reads the whole answer, which must be a success (2xx): else the failure
/// that `what` is, by status.
fn send(request: Request<Vec<u8>>, what: &str) -> Result<Response, Failure> {
    exchange(request)?.error_for_status(what)
}

/// One exchange with wstd's HTTP client, inside a component: the request, then the whole
/// response body. Its errors become the SDK's (`HttpRequestDenied` is `Denied`, terminal), and
/// those a [`Failure`] with `?`.
#[cfg(target_arch = "wasm32")]
fn exchange(request: Request<Vec<u8>>) -> Result<Response, HttpError> {
    let url = request.uri().to_string();
    wstd::runtime::block_on(async move {
        let response = wstd::http::Client::new().send(request).await?;
        let (head, mut body) = response.into_parts();
        let body = body.contents().await?.to_vec();
        Ok(http::Response::from_parts(head, body))
    })
    .map(Response::from)
    .map_err(|e| HttpError::from_wstd(&url, &e))
}

/// Linked natively (benchmarks), the SDK's transport.
#[cfg(not(target_arch = "wasm32"))]
fn exchange(request: Request<Vec<u8>>) -> Result<Response, HttpError> {
    orchard_sdk::http::send(request).map(Response::from)
}
