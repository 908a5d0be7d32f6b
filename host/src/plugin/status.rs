//! The Plugin's status: one `Ready` condition, the digest served and its kinds — written with
//! one server-side apply, only when it changes.

use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use super::Plugin;
use crate::conditions::{self, Condition};

/// Field manager of the Plugin status.
const MANAGER: &str = "orchard.dev/plugin-host";

/// What `status` should say.
#[derive(Debug)]
pub struct Report<'a> {
    /// `True` (serving) or `False`.
    pub ready: &'static str,
    /// `Serving`, or the failure's reason.
    pub reason: &'static str,
    /// What an admin reads.
    pub message: String,
    /// The manifest digest being served, if any.
    pub digest: Option<&'a str>,
    /// Kinds served (`Kind.group/version`).
    pub kinds: Vec<String>,
}

/// Writes `report` into `plugin`'s status unless it says so already.
pub async fn write(
    client: &Client,
    plugin: &Plugin,
    report: &Report<'_>,
) -> Result<(), kube::Error> {
    let status = plugin.status.as_ref();
    let previous = status.and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"));
    let generation = plugin.metadata.generation;
    let unchanged = previous.is_some_and(|c| {
        c.status == report.ready
            && c.reason == report.reason
            && c.message == report.message
            && c.observed_generation == generation
    }) && status.and_then(|s| s.resolved_digest.as_deref()) == report.digest
        && status.is_some_and(|s| s.kinds == report.kinds);
    if unchanged {
        return Ok(());
    }
    // No status yet: no previous conditions (conditions, plain strings, always serialise).
    let existing = status
        .and_then(|s| serde_json::to_value(&s.conditions).ok())
        .unwrap_or_default();
    let now = jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .unwrap_or_else(|_| jiff::Timestamp::now());
    let ready = Condition {
        type_: "Ready",
        status: report.ready,
        reason: report.reason.to_owned(),
        message: report.message.clone(),
    };
    let body = json!({
        "apiVersion": "orchard.dev/v1alpha1",
        "kind": "Plugin",
        "status": {
            "conditions": conditions::to_json(&[ready], &existing, generation, now),
            "resolvedDigest": report.digest,
            "kinds": report.kinds,
            "observedGeneration": generation,
        }
    });
    let api: Api<Plugin> = Api::all(client.clone());
    api.patch_status(
        &plugin.name_any(),
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await?;
    Ok(())
}
