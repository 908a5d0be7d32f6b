//! A small client of the PowerDNS Authoritative HTTP API (`/api/v1`), over the Orchard SDK's
//! HTTP client so that it works inside a component and natively.
//!
//! Credentials come from the object's credentials Secret: `url` (e.g.
//! `http://127.0.0.1:8081`), `apiKey`, and optionally `serverId` (default `localhost`).

#![forbid(unsafe_code)]

use orchard_sdk::http::{self, Request, Response};
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

    fn request(&self, req: Request) -> Request {
        req.header("X-API-Key", &self.api_key)
            .header("accept", "application/json")
    }

    fn send(&self, req: Request, what: &str) -> Result<Response, Failure> {
        let response = self.request(req).send()?;
        response.error_for_status(what)
    }

    fn zone_url(&self, id: &str) -> String {
        format!("{}/zones/{}", self.base, id)
    }

    /// The zone with this id, with its record sets; `None` when it does not exist.
    pub fn zone(&self, id: &str) -> Result<Option<Zone>, Failure> {
        let response = self.request(http::get(self.zone_url(id))).send()?;
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
        self.send(http::get(format!("{}/zones", self.base)), "list zones")?
            .json()
    }

    /// Creates a zone; returns it as created.
    pub fn create_zone(&self, body: &serde_json::Value) -> Result<Zone, Failure> {
        let req = http::post(format!("{}/zones", self.base)).json(body)?;
        self.send(req, "create zone")?.json()
    }

    /// Changes zone settings (kind, account…).
    pub fn update_zone(&self, id: &str, body: &serde_json::Value) -> Result<(), Failure> {
        let req = http::put(self.zone_url(id)).json(body)?;
        self.send(req, &format!("update zone {id}")).map(drop)
    }

    /// Deletes a zone; done when it is already gone.
    pub fn delete_zone(&self, id: &str) -> Result<(), Failure> {
        let response = self.request(http::delete(self.zone_url(id))).send()?;
        if matches!(response.status, 404 | 422) {
            return Ok(());
        }
        response
            .error_for_status(&format!("delete zone {id}"))
            .map(drop)
    }

    /// Replaces or deletes record sets (`changetype` REPLACE / DELETE).
    pub fn patch_rrsets(&self, zone: &str, rrsets: &serde_json::Value) -> Result<(), Failure> {
        let req =
            http::patch(self.zone_url(zone)).json(&serde_json::json!({ "rrsets": rrsets }))?;
        self.send(req, &format!("patch record sets of zone {zone}"))
            .map(drop)
    }
}
