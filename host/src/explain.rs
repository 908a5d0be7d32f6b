//! `orchard explain KIND/NAME`: why an object is where it is, for a person (or, with `-o json`,
//! a script) — the question every user of an operator asks first.
//!
//! Phases of [`explain`], in order:
//! 1. **kind** — resolve `KIND` (its kind, plural, singular, a short name, or
//!    `<plural>.<group>`) among the cluster's CRDs;
//! 2. **object** — read it: conditions, `status.id`, the host's finalizer, the annotations the
//!    host reads (paused, create pending), deletion;
//! 3. **events** — its Events, newest last;
//! 4. **hosts** — the live presence Leases ([`crate::ops::presence`]) whose scope holds its
//!    kind and namespace — by a plugin file, or by a Plugin object the host serves whose
//!    status lists the kind: who reconciles it (or that nobody does); in a shard ring, the
//!    replica holding the object's bucket (from the ring's bucket table);
//! 5. **journal** — its last passes, their plugin calls and its next pass, from the admin server
//!    of the host serving it (`--admin`, else the one its presence Lease names: in a ring, the
//!    bucket's holder's);
//! 6. **verdict** — one sentence, first in the output.
//!
//! Every phase after the object's read is best effort: what cannot be read is said in its
//! place, and the rest is still shown.

use std::collections::HashMap;
use std::fmt::Write as _;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::{Client, ResourceExt};
use serde::Serialize;
use serde_json::Value;

use crate::ops::journal::ObjectJournal;
use crate::ops::presence::{self, Peer};

/// Why an object could not be explained at all.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `KIND/NAME` is not of that form.
    #[error("expected KIND/NAME (e.g. dnszone/www), got {0:?}")]
    Target(String),
    /// The CRDs could not be listed.
    #[error("listing the CRDs to find kind {kind}: {source}")]
    Crds {
        /// The kind asked for.
        kind: String,
        #[source]
        /// The apiserver's answer.
        source: kube::Error,
    },
    /// No CRD, or several, answer to the kind.
    #[error("kind {kind}: {why}")]
    Kind {
        /// The kind asked for.
        kind: String,
        /// None, or which ones.
        why: String,
    },
    /// The object could not be read.
    #[error("reading {kind} {namespace}/{name}: {source}")]
    Object {
        /// Its kind.
        kind: String,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        #[source]
        /// The apiserver's answer.
        source: kube::Error,
    },
}

/// One condition of the object.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConditionLine {
    /// `Available`, `Progressing`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `True`, `False`, `Unknown`.
    pub status: String,
    /// Its reason.
    pub reason: String,
    /// Its message.
    pub message: String,
    /// The generation it was written at.
    pub observed_generation: Option<i64>,
    /// When its status last changed.
    pub last_transition_time: Option<String>,
}

/// One Event of the object.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventLine {
    /// When it last happened.
    pub at: Option<Timestamp>,
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Its reason.
    pub reason: String,
    /// Its note.
    pub message: String,
    /// How often it happened.
    pub count: i64,
}

/// A host whose scope holds the object.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HostLine {
    /// Its `--instance`.
    pub instance: String,
    /// Its presence Lease, `namespace/name`.
    pub lease: String,
    /// `serving` or `waiting`.
    pub state: String,
    /// Since when it is announced.
    pub since: Timestamp,
    /// Its admin server, when it announced one.
    pub admin: Option<String>,
    /// Its group (`host:…`, `leader:<ns>/<lease>`, `ring:<ns>/<ring>`): hosts of one group
    /// share their objects.
    pub group: String,
    /// The Plugin object through which it serves the kind; `None`: a plugin file of its own.
    pub plugin: Option<String>,
}

/// Where a shard ring puts the object.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardLine {
    /// The ring, `namespace/name`.
    pub ring: String,
    /// The object's bucket (its `orchard.dev/shard-bucket` label, or the bucket its key
    /// hashes to while it has none).
    pub bucket: u16,
    /// The object carries its bucket label: until it does, no replica's controllers see it
    /// (the holder's labeller writes it, with the plugin's finalizer).
    pub labelled: bool,
    /// The replica that holds the bucket now (`None`: free, in a hand-over, or unread).
    pub holder: Option<String>,
}

/// Everything `orchard explain` found.
// Four independent facts of the object, each a field of the JSON output.
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// The kind (`DnsZone`).
    pub kind: String,
    /// Its resource, `<plural>.<group>`.
    pub resource: String,
    /// The object's namespace.
    pub namespace: String,
    /// The object's name.
    pub name: String,
    /// Its generation.
    pub generation: i64,
    /// One sentence: where it is and why.
    pub verdict: String,
    /// Its conditions.
    pub conditions: Vec<ConditionLine>,
    /// `status.id`: the external resource it is bound to.
    pub external_id: Option<String>,
    /// Whether it carries a host's finalizer (`orchard.dev/…`).
    pub finalizer: bool,
    /// `orchard.dev/paused: "true"`.
    pub paused: bool,
    /// A create was started and its outcome is not recorded yet.
    pub create_pending: bool,
    /// Being deleted.
    pub deleting: bool,
    /// Its Events, newest last.
    pub events: Vec<EventLine>,
    /// The hosts whose scope holds it (`None`: the presence Leases could not be read).
    pub hosts: Option<Vec<HostLine>>,
    /// Its bucket and that bucket's holder, when a shard ring serves it.
    pub shard: Option<ShardLine>,
    /// Its journal, from a host's admin server.
    pub journal: Option<ObjectJournal>,
    /// Why some part is missing (presence, Events, journal).
    pub notes: Vec<String>,
}

/// The Events shown at most.
const EVENTS: usize = 10;

/// Runs the phases of the module docs for `target` (`KIND/NAME`) in `namespace`; `admin` is
/// the admin server to read the journal from (else the serving host's).
pub async fn explain(
    client: &Client,
    target: &str,
    namespace: &str,
    admin: Option<&str>,
) -> Result<Explanation, Error> {
    let (kind, name) = target
        .split_once('/')
        .filter(|(k, n)| !k.is_empty() && !n.is_empty())
        .ok_or_else(|| Error::Target(target.to_owned()))?;
    // Phase 1: kind.
    let (resource, crd) = resolve_kind(client, kind).await?;
    // Phase 2: object.
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    let obj = api.get(name).await.map_err(|source| Error::Object {
        kind: resource.kind.clone(),
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        source,
    })?;
    let mut e = from_object(&obj, &resource, &crd, namespace);
    // Phase 3: events.
    match events(client, &obj, namespace).await {
        Ok(events) => e.events = events,
        Err(err) => e.notes.push(format!("Events: {err}")),
    }
    // Phase 4: hosts, and in a shard ring the one holding the object's bucket.
    match hosts(client, &crd, &resource, namespace, &mut e.notes).await {
        Ok(hosts) => e.hosts = Some(hosts),
        Err(err) => e.notes.push(format!("hosts: the presence Leases: {err}")),
    }
    e.shard = shard(client, &obj, &resource, e.hosts.as_deref(), &mut e.notes).await;
    // Phase 5: journal.
    let admin = admin
        .map(str::to_owned)
        .or_else(|| journal_host(&e).and_then(|h| h.admin.clone()));
    match admin {
        None => e.notes.push(
            "passes: no admin server known (the serving host has none, or give --admin URL)"
                .to_owned(),
        ),
        Some(url) => match fetch_journal(&url, &crd, namespace, name).await {
            Ok(journal) => e.journal = Some(journal),
            Err(why) => e.notes.push(format!("passes ({url}): {why}")),
        },
    }
    // Phase 6: verdict.
    e.verdict = verdict(&e);
    Ok(e)
}

/// The CRD of `kind`, as kube's dynamic API needs it, and its name.
async fn resolve_kind(client: &Client, kind: &str) -> Result<(ApiResource, String), Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let list = crds
        .list(&ListParams::default())
        .await
        .map_err(|source| Error::Crds {
            kind: kind.to_owned(),
            source,
        })?;
    let wanted = kind.to_ascii_lowercase();
    let matches: Vec<&CustomResourceDefinition> = list
        .items
        .iter()
        .filter(|crd| {
            let names = &crd.spec.names;
            crd.name_any() == wanted
                || names.kind.to_ascii_lowercase() == wanted
                || names.plural == wanted
                || names.singular.as_deref() == Some(wanted.as_str())
                || names.short_names.iter().flatten().any(|s| *s == wanted)
        })
        .collect();
    let crd = match matches[..] {
        [one] => one,
        [] => {
            return Err(Error::Kind {
                kind: kind.to_owned(),
                why: "no CRD of this cluster has this kind, plural, singular or short name"
                    .to_owned(),
            });
        }
        _ => {
            let names: Vec<String> = matches.iter().map(|c| c.name_any()).collect();
            return Err(Error::Kind {
                kind: kind.to_owned(),
                why: format!(
                    "several CRDs answer to it ({}): give one of these",
                    names.join(", ")
                ),
            });
        }
    };
    let version = crd
        .spec
        .versions
        .iter()
        .find(|v| v.storage)
        .or_else(|| crd.spec.versions.first())
        .map(|v| v.name.clone())
        .unwrap_or_default();
    let group = crd.spec.group.clone();
    Ok((
        ApiResource {
            api_version: format!("{group}/{version}"),
            group,
            version,
            kind: crd.spec.names.kind.clone(),
            plural: crd.spec.names.plural.clone(),
        },
        crd.name_any(),
    ))
}

/// Phase 2's facts, read from the object.
fn from_object(
    obj: &DynamicObject,
    resource: &ApiResource,
    crd: &str,
    namespace: &str,
) -> Explanation {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let conditions = obj.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| ConditionLine {
            kind: text(&c["type"]),
            status: text(&c["status"]),
            reason: text(&c["reason"]),
            message: text(&c["message"]),
            observed_generation: c["observedGeneration"].as_i64(),
            last_transition_time: c["lastTransitionTime"].as_str().map(str::to_owned),
        })
        .collect();
    let annotations = obj.annotations();
    Explanation {
        kind: resource.kind.clone(),
        resource: crd.to_owned(),
        namespace: namespace.to_owned(),
        name: obj.name_any(),
        generation: obj.metadata.generation.unwrap_or(0),
        verdict: String::new(),
        conditions,
        external_id: obj.data["status"]["id"].as_str().map(str::to_owned),
        finalizer: obj
            .finalizers()
            .iter()
            .any(|f| f.starts_with("orchard.dev/")),
        paused: annotations
            .get(crate::reconcile::annotations::PAUSED)
            .is_some_and(|v| v == "true"),
        create_pending: annotations.contains_key(crate::reconcile::annotations::CREATE_PENDING),
        deleting: obj.metadata.deletion_timestamp.is_some(),
        events: Vec::new(),
        hosts: None,
        shard: None,
        journal: None,
        notes: Vec::new(),
    }
}

/// The object's Events (those written through events.k8s.io too: one store), newest last.
async fn events(
    client: &Client,
    obj: &DynamicObject,
    namespace: &str,
) -> Result<Vec<EventLine>, kube::Error> {
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    let uid = obj.metadata.uid.clone().unwrap_or_default();
    let list = api
        .list(&ListParams::default().fields(&format!("involvedObject.uid={uid}")))
        .await?;
    let mut lines: Vec<EventLine> = list
        .items
        .into_iter()
        .map(|ev| {
            let at = ev
                .series
                .as_ref()
                .and_then(|s| s.last_observed_time.as_ref().map(|t| t.0))
                .or(ev.last_timestamp.as_ref().map(|t| t.0))
                .or(ev.event_time.as_ref().map(|t| t.0))
                .or(ev.metadata.creation_timestamp.as_ref().map(|t| t.0));
            EventLine {
                at,
                kind: ev.type_.unwrap_or_default(),
                reason: ev.reason.unwrap_or_default(),
                message: ev.message.unwrap_or_default(),
                count: ev
                    .series
                    .as_ref()
                    .and_then(|s| s.count)
                    .or(ev.count)
                    .map_or(1, i64::from),
            }
        })
        .collect();
    lines.sort_by_key(|l| l.at);
    let skip = lines.len().saturating_sub(EVENTS);
    Ok(lines.split_off(skip))
}

/// The live hosts whose scope holds `crd` (`resource`) in `namespace`: among their plugin
/// files' kinds, or served through a Plugin object matching their Plugin selector. A Plugin
/// list that cannot be read is said in `notes` (those hosts are left out).
async fn hosts(
    client: &Client,
    crd: &str,
    resource: &ApiResource,
    namespace: &str,
    notes: &mut Vec<String>,
) -> Result<Vec<HostLine>, kube::Error> {
    let leases: Api<Lease> = Api::all(client.clone());
    let list = leases
        .list(&ListParams::default().labels(&format!("{}=host", presence::LABEL)))
        .await?;
    let now = Timestamp::now();
    // Plugin selector → the Plugin it brings the kind by, asked once per selector.
    let mut by_plugins: HashMap<String, Option<String>> = HashMap::new();
    let mut hosts = Vec::new();
    for p in list.items.iter().filter_map(Peer::from_lease) {
        let in_namespace = p
            .scope
            .namespaces
            .as_ref()
            .is_none_or(|ns| ns.contains(namespace));
        if p.expires <= now || !in_namespace {
            continue;
        }
        let plugin = if p.scope.kinds.contains(crd) {
            None
        } else if let Some(selector) = &p.scope.plugin_objects {
            if !by_plugins.contains_key(selector) {
                let found = plugin_serving(client, selector, resource, namespace)
                    .await
                    .unwrap_or_else(|err| {
                        notes.push(format!("Plugins ({}): {err}", shown_selector(selector)));
                        None
                    });
                by_plugins.insert(selector.clone(), found);
            }
            match by_plugins.get(selector).cloned().flatten() {
                Some(name) => Some(name),
                None => continue,
            }
        } else {
            continue;
        };
        hosts.push(HostLine {
            lease: format!("{}/{}", p.namespace, p.name),
            state: p.state.as_str().to_owned(),
            since: p.acquired,
            admin: p.admin.clone(),
            group: p.scope.group.clone(),
            plugin,
            instance: p.instance,
        });
    }
    // The serving host first, then the oldest waiting.
    hosts.sort_by_key(|h| (h.state != "serving", h.since));
    Ok(hosts)
}

fn shown_selector(selector: &str) -> &str {
    if selector.is_empty() {
        "every Plugin"
    } else {
        selector
    }
}

/// The Plugin, among those matching `selector` (`""`: all), that serves `resource`'s kind in
/// `namespace`: its status lists the kind and its `spec.namespace`, if any, is `namespace`.
async fn plugin_serving(
    client: &Client,
    selector: &str,
    resource: &ApiResource,
    namespace: &str,
) -> Result<Option<String>, kube::Error> {
    let api: Api<crate::plugin::Plugin> = Api::all(client.clone());
    let mut params = ListParams::default();
    if !selector.is_empty() {
        params = params.labels(selector);
    }
    let list = api.list(&params).await?;
    Ok(list
        .items
        .iter()
        .find(|p| {
            p.status
                .as_ref()
                .is_some_and(|s| lists_kind(&s.kinds, resource))
                && p.spec.namespace.as_deref().is_none_or(|ns| ns == namespace)
        })
        .map(ResourceExt::name_any))
}

/// Whether a Plugin's `status.kinds` (`Kind.group/version` each) names `resource`'s kind.
fn lists_kind(kinds: &[String], resource: &ApiResource) -> bool {
    let prefix = format!("{}.{}/", resource.kind, resource.group);
    kinds.iter().any(|k| k.starts_with(&prefix))
}

/// The object's bucket and its holder, when the serving hosts are a shard ring's replicas:
/// the bucket its label names, or — not labelled yet — the one its key hashes to. A table
/// that cannot be read is said in `notes`.
async fn shard(
    client: &Client,
    obj: &DynamicObject,
    resource: &ApiResource,
    hosts: Option<&[HostLine]>,
    notes: &mut Vec<String>,
) -> Option<ShardLine> {
    let labelled = crate::shard::ring::labelled_bucket(obj.labels());
    let bucket = labelled.unwrap_or_else(|| {
        crate::shard::ring::bucket_of(
            &resource.group,
            &resource.kind,
            &obj.namespace().unwrap_or_default(),
            &obj.name_any(),
        )
    });
    let ring = hosts?
        .iter()
        .find(|h| h.state == "serving")?
        .group
        .strip_prefix("ring:")?;
    let (namespace, name) = ring.split_once('/')?;
    let holder = crate::shard::holder_of(client, namespace, name, bucket)
        .await
        .unwrap_or_else(|err| {
            notes.push(format!("shard: {err}"));
            None
        });
    Some(ShardLine {
        ring: ring.to_owned(),
        bucket,
        labelled: labelled.is_some(),
        holder,
    })
}

/// The host whose journal tells the object's passes: the holder of its bucket in a shard
/// ring, else the first serving host.
fn journal_host(e: &Explanation) -> Option<&HostLine> {
    let mut serving = e.hosts.iter().flatten().filter(|h| h.state == "serving");
    match e.shard.as_ref().and_then(|s| s.holder.as_deref()) {
        Some(holder) => serving.find(|h| h.instance == holder),
        None => serving.next(),
    }
}

/// `GET <admin>/objects/<crd>/<namespace>/<name>`.
async fn fetch_journal(
    admin: &str,
    crd: &str,
    namespace: &str,
    name: &str,
) -> Result<ObjectJournal, String> {
    use http_body_util::{BodyExt, Empty};
    let url = format!(
        "{}/objects/{crd}/{namespace}/{name}",
        admin.trim_end_matches('/')
    );
    let uri: hyper::Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Empty<bytes::Bytes>>();
    let answer = tokio::time::timeout(std::time::Duration::from_secs(5), client.get(uri))
        .await
        .map_err(|_| "no answer within 5 s".to_owned())?
        .map_err(|e| format!("could not reach it: {e}"))?;
    let status = answer.status();
    let body = answer
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("reading its answer: {e}"))?
        .to_bytes();
    if !status.is_success() {
        return Err(String::from_utf8_lossy(&body).trim().to_owned());
    }
    serde_json::from_slice(&body).map_err(|e| format!("its answer is not a journal: {e}"))
}

/// Phase 6: the one sentence.
pub fn verdict(e: &Explanation) -> String {
    let condition = |kind: &str| e.conditions.iter().find(|c| c.kind == kind);
    let progressing = condition("Progressing");
    let available = condition("Available");
    let said = |c: Option<&ConditionLine>| {
        c.map(|c| format!("{} ({}): {}", c.status, c.reason, c.message))
            .unwrap_or_default()
    };
    if let Some(hosts) = &e.hosts
        && !hosts.iter().any(|h| h.state == "serving")
    {
        let waiting = if hosts.is_empty() {
            String::new()
        } else {
            format!(" ({} waiting)", hosts.len())
        };
        return format!(
            "no Orchard host serves {} in namespace {}{waiting}: nothing reconciles it",
            e.resource, e.namespace
        );
    }
    if e.paused {
        return format!(
            "paused (annotation {}=true): no call to the external system{} until it is removed",
            crate::reconcile::annotations::PAUSED,
            if e.deleting {
                ", not even its deletion,"
            } else {
                ""
            }
        );
    }
    if e.deleting {
        return match progressing {
            Some(p) => format!("being deleted: {}", p.message),
            None => {
                "being deleted: waiting for the host to delete the external resource".to_owned()
            }
        };
    }
    if let Some(shard) = e.shard.as_ref().filter(|s| !s.labelled) {
        let labeller = shard.holder.as_deref().map_or_else(
            || "no replica holds the bucket now (handed over)".to_owned(),
            |h| format!("{h}'s labeller writes it, with the plugin's finalizer"),
        );
        return format!(
            "not labelled with its shard bucket yet ({} {}, ring {}): no replica reconciles \
             it until it is; {labeller}",
            crate::shard::ring::BUCKET_LABEL,
            shard.bucket,
            shard.ring
        );
    }
    let Some(p) = progressing else {
        return "not passed yet: its status has no conditions".to_owned();
    };
    if p.observed_generation.is_some_and(|g| g < e.generation) {
        return format!(
            "generation {} not passed yet (its conditions are of generation {})",
            e.generation,
            p.observed_generation.unwrap_or_default()
        );
    }
    match (p.status.as_str(), p.reason.as_str()) {
        ("False", "Success") if available.is_some_and(|a| a.status == "True") => {
            "available and up to date".to_owned()
        }
        ("False", "Success") => format!("up to date but not available: {}", said(available)),
        ("False", reason @ ("InvalidConfiguration" | "UnrecoverableError")) => format!(
            "failed for good ({reason}): {} — fix the spec: the host passes it again only when \
             its spec, a dependency or its Secret changes",
            p.message
        ),
        ("True", "TransientError") => {
            format!("failing, retried with backoff: {}", p.message)
        }
        ("True", "Progressing") => format!("progressing: {}", p.message),
        ("True", reason) => format!("progressing ({reason}): {}", p.message),
        _ => format!(
            "Available {}, Progressing {}",
            said(available),
            said(Some(p))
        ),
    }
}

/// The explanation as a person reads it.
pub fn render(e: &Explanation, now: Timestamp) -> String {
    let mut out = String::new();
    let ago = |t: Timestamp| {
        let seconds = now.duration_since(t).as_secs();
        match seconds {
            s if s < 0 => format!("in {}s", -s),
            s if s < 120 => format!("{s}s ago"),
            s if s < 7200 => format!("{}m ago", s / 60),
            s => format!("{}h ago", s / 3600),
        }
    };
    let _ = writeln!(
        out,
        "{} {}/{} ({}), generation {}",
        e.kind, e.namespace, e.name, e.resource, e.generation
    );
    let _ = writeln!(out, "  {}", e.verdict);
    let _ = writeln!(out);
    let yes = |b: bool| if b { "yes" } else { "no" };
    let _ = writeln!(
        out,
        "External id:    {}",
        e.external_id.as_deref().unwrap_or("(none recorded)")
    );
    let _ = writeln!(
        out,
        "Finalizer: {}   Paused: {}   Create pending: {}   Deleting: {}",
        yes(e.finalizer),
        yes(e.paused),
        yes(e.create_pending),
        yes(e.deleting)
    );
    if let Some(c) = e.journal.as_ref().and_then(|j| j.claim.as_ref()) {
        let claim = match (&c.other, c.other_holds_it) {
            (None, _) => format!("holds {} (no other object shows it)", c.id),
            (Some(other), true) => format!(
                "refused: {} is held by {other} (older); this object never writes or deletes it",
                c.id
            ),
            (Some(other), false) => format!(
                "holds {} ({other}, newer, shows it too and is refused)",
                c.id
            ),
        };
        let _ = writeln!(out, "Claim:          {claim}");
    }
    let _ = writeln!(out, "\nConditions:");
    if e.conditions.is_empty() {
        let _ = writeln!(out, "  (none)");
    }
    for c in &e.conditions {
        let generation = c
            .observed_generation
            .map(|g| format!(", generation {g}"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {:<12} {:<6} {:<22} {}{}",
            c.kind, c.status, c.reason, c.message, generation
        );
    }
    let _ = writeln!(out, "\nServed by:");
    match &e.hosts {
        None => {
            let _ = writeln!(out, "  (unknown: see below)");
        }
        Some(hosts) if hosts.is_empty() => {
            let _ = writeln!(out, "  no live host announces {} here", e.resource);
        }
        Some(hosts) => {
            for h in hosts {
                let _ = writeln!(
                    out,
                    "  {} — {}{} since {} (Lease {}{})",
                    h.instance,
                    h.state,
                    h.plugin
                        .as_deref()
                        .map(|p| format!(" through Plugin {p}"))
                        .unwrap_or_default(),
                    ago(h.since),
                    h.lease,
                    h.admin
                        .as_deref()
                        .map(|a| format!(", admin {a}"))
                        .unwrap_or_default()
                );
            }
        }
    }
    if let Some(shard) = &e.shard {
        let holder = shard.holder.as_deref().map_or_else(
            || "no replica holds it now (handed over)".to_owned(),
            |h| {
                if shard.labelled {
                    format!("{h} reconciles it")
                } else {
                    format!("{h} labels it, then reconciles it")
                }
            },
        );
        let unlabelled = if shard.labelled {
            ""
        } else {
            " (not labelled yet)"
        };
        let _ = writeln!(
            out,
            "  bucket {}{unlabelled} of ring {}: {holder}",
            shard.bucket, shard.ring
        );
    }
    if let Some(j) = &e.journal {
        let _ = writeln!(
            out,
            "\nLast passes (by {}, plugin {}; {} since it started, newest last):",
            j.instance, j.plugin, j.passes_total
        );
        let since = j
            .unsettled_since
            .map(|t| format!(" since {}", ago(t)))
            .unwrap_or_default();
        let _ = writeln!(out, "  state: {}{since}", j.state);
        for p in &j.passes {
            let _ = writeln!(
                out,
                "  {:<10} {:>6} ms  {}",
                ago(p.at),
                p.took_ms,
                p.outcome
            );
        }
        if let Some(message) = &j.message {
            let _ = writeln!(out, "  message: {message}");
        }
        let _ = writeln!(out, "\nPlugin calls of the last pass that called it:");
        if j.calls.is_empty() {
            let _ = writeln!(out, "  (none)");
        }
        for c in &j.calls {
            let _ = writeln!(
                out,
                "  {:<18} {:>6} ms  {}",
                c.function, c.took_ms, c.outcome
            );
        }
        let next = match &j.next {
            None => "unknown".to_owned(),
            Some(n) => match (n.at, &*n.why) {
                (None, "retry") => "a retry, with backoff".to_owned(),
                (None, _) => {
                    "at the next change of the object, a dependency or its Secret".to_owned()
                }
                (Some(at), why) => format!("{why}, {} ({at})", ago(at)),
            },
        };
        let _ = writeln!(out, "\nNext pass:      {next}");
    }
    let _ = writeln!(out, "\nEvents (newest last):");
    if e.events.is_empty() {
        let _ = writeln!(out, "  (none)");
    }
    for ev in &e.events {
        let count = if ev.count > 1 {
            format!(" (×{})", ev.count)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "  {:<10} {:<8} {:<20} {}{count}",
            ev.at.map(ago).unwrap_or_default(),
            ev.kind,
            ev.reason,
            ev.message
        );
    }
    for note in &e.notes {
        let _ = writeln!(out, "\nNote: {note}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition(kind: &str, status: &str, reason: &str, message: &str) -> ConditionLine {
        ConditionLine {
            kind: kind.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
            observed_generation: Some(2),
            last_transition_time: None,
        }
    }

    fn serving() -> HostLine {
        HostLine {
            instance: "host-a".into(),
            lease: "ops/orchard-host-host-a".into(),
            state: "serving".into(),
            since: Timestamp::UNIX_EPOCH,
            admin: None,
            group: "host:ops/host-a".into(),
            plugin: None,
        }
    }

    fn explanation(conditions: Vec<ConditionLine>) -> Explanation {
        Explanation {
            kind: "DnsZone".into(),
            resource: "dnszones.pdns.orchard.dev".into(),
            namespace: "team-a".into(),
            name: "www".into(),
            generation: 2,
            verdict: String::new(),
            conditions,
            external_id: Some("www.example.".into()),
            finalizer: true,
            paused: false,
            create_pending: false,
            deleting: false,
            events: Vec::new(),
            hosts: Some(vec![serving()]),
            shard: None,
            journal: None,
            notes: Vec::new(),
        }
    }

    #[test]
    fn an_available_object_at_its_generation_is_up_to_date() {
        let e = explanation(vec![
            condition("Available", "True", "Success", "ok"),
            condition("Progressing", "False", "Success", "ok"),
        ]);
        assert_eq!(verdict(&e), "available and up to date");
    }

    #[test]
    fn a_failing_object_says_whether_it_is_retried_and_why() {
        let transient = explanation(vec![condition(
            "Progressing",
            "True",
            "TransientError",
            "PowerDNS answered 503",
        )]);
        assert_eq!(
            verdict(&transient),
            "failing, retried with backoff: PowerDNS answered 503"
        );
        let terminal = explanation(vec![condition(
            "Progressing",
            "False",
            "InvalidConfiguration",
            "spec.resource.name: not a zone name",
        )]);
        let said = verdict(&terminal);
        assert!(said.starts_with("failed for good (InvalidConfiguration): spec.resource.name"));
        assert!(said.contains("fix the spec"));
        let waiting = explanation(vec![condition(
            "Progressing",
            "True",
            "Progressing",
            "Waiting for DnsZone/z to be available",
        )]);
        assert_eq!(
            verdict(&waiting),
            "progressing: Waiting for DnsZone/z to be available"
        );
    }

    #[test]
    fn an_object_nobody_serves_says_so_before_its_stale_conditions() {
        let mut e = explanation(vec![condition("Progressing", "False", "Success", "ok")]);
        e.hosts = Some(Vec::new());
        assert_eq!(
            verdict(&e),
            "no Orchard host serves dnszones.pdns.orchard.dev in namespace team-a: nothing reconciles it"
        );
        e.hosts = Some(vec![HostLine {
            state: "waiting".into(),
            ..serving()
        }]);
        assert!(verdict(&e).ends_with("(1 waiting): nothing reconciles it"));
    }

    #[test]
    fn paused_new_and_unpassed_generations_are_said_plainly() {
        let mut e = explanation(vec![condition("Progressing", "False", "Success", "ok")]);
        e.generation = 3;
        assert_eq!(
            verdict(&e),
            "generation 3 not passed yet (its conditions are of generation 2)"
        );
        e.paused = true;
        assert!(verdict(&e).starts_with("paused (annotation orchard.dev/paused=true)"));
        let fresh = explanation(Vec::new());
        assert_eq!(
            verdict(&fresh),
            "not passed yet: its status has no conditions"
        );
    }

    #[test]
    fn the_rendering_leads_with_the_verdict_and_shows_hosts_passes_and_calls() {
        use crate::ops::journal::{CallLine, NextPass, PassLine};
        let mut e = explanation(vec![condition("Progressing", "False", "Success", "ok")]);
        e.verdict = "available and up to date".into();
        let now = Timestamp::from_second(100).unwrap();
        e.journal = Some(ObjectJournal {
            instance: "host-a".into(),
            plugin: "pdns-zone".into(),
            kind: "DnsZone".into(),
            state: "up_to_date".into(),
            unsettled_since: None,
            passes_total: 2,
            passes: [PassLine {
                at: Timestamp::from_second(90).unwrap(),
                took_ms: 12,
                outcome: "success".into(),
            }]
            .into(),
            calls: vec![CallLine {
                function: "create".into(),
                took_ms: 7,
                outcome: "ok".into(),
            }],
            message: None,
            next: Some(NextPass {
                at: None,
                why: "change".into(),
            }),
            claim: Some(crate::ops::journal::Claim {
                id: "z.example.".into(),
                other: None,
                other_holds_it: false,
            }),
        });
        let text = render(&e, now);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "DnsZone team-a/www (dnszones.pdns.orchard.dev), generation 2"
        );
        assert_eq!(lines[1], "  available and up to date");
        assert!(text.contains("host-a — serving since"), "{text}");
        assert!(
            text.contains("10s ago") && text.contains("success"),
            "{text}"
        );
        assert!(text.contains("create") && text.contains("7 ms"), "{text}");
        assert!(text.contains("at the next change of the object"), "{text}");
        assert!(
            text.contains("Claim:          holds z.example. (no other object shows it)"),
            "{text}"
        );
    }

    fn replica(instance: &str, admin: &str) -> HostLine {
        HostLine {
            instance: instance.into(),
            lease: format!("ops/orchard-host-{instance}"),
            admin: Some(admin.into()),
            group: "ring:ops/main".into(),
            plugin: Some("zones".into()),
            ..serving()
        }
    }

    #[test]
    fn a_plugins_status_kinds_name_the_kind_by_kind_and_group_whatever_the_version() {
        let resource = ApiResource {
            group: "pdns.orchard.dev".into(),
            version: "v1alpha1".into(),
            api_version: "pdns.orchard.dev/v1alpha1".into(),
            kind: "DnsZone".into(),
            plural: "dnszones".into(),
        };
        let kinds = |k: &[&str]| k.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert!(lists_kind(
            &kinds(&["DnsZone.pdns.orchard.dev/v1alpha1"]),
            &resource
        ));
        assert!(lists_kind(
            &kinds(&["DnsZone.pdns.orchard.dev/v1"]),
            &resource
        ));
        assert!(!lists_kind(
            &kinds(&["DnsZoneX.pdns.orchard.dev/v1alpha1"]),
            &resource
        ));
        assert!(!lists_kind(
            &kinds(&["DnsZone.pdns.orchard.dev.evil/v1"]),
            &resource
        ));
        assert!(!lists_kind(
            &kinds(&["DnsRecord.pdns.orchard.dev/v1alpha1"]),
            &resource
        ));
        assert!(!lists_kind(&[], &resource));
    }

    #[test]
    fn in_a_shard_ring_the_journal_is_read_from_the_holder_of_the_objects_bucket() {
        let mut e = explanation(Vec::new());
        e.hosts = Some(vec![
            replica("orchard-0", "http://10.0.0.1:8080"),
            replica("orchard-1", "http://10.0.0.2:8080"),
        ]);
        assert_eq!(
            journal_host(&e).map(|h| h.instance.as_str()),
            Some("orchard-0"),
            "no bucket known: the first serving host"
        );
        e.shard = Some(ShardLine {
            ring: "ops/main".into(),
            bucket: 17,
            labelled: true,
            holder: Some("orchard-1".into()),
        });
        assert_eq!(
            journal_host(&e).and_then(|h| h.admin.as_deref()),
            Some("http://10.0.0.2:8080")
        );
        e.shard = Some(ShardLine {
            holder: Some("orchard-9".into()),
            ..e.shard.clone().unwrap()
        });
        assert!(
            journal_host(&e).is_none(),
            "a holder that announces no presence: no journal rather than another replica's"
        );
    }

    /// `e` served by the two replicas of ring `ops/main`, its bucket 17 held by `orchard-1`.
    fn in_ring(e: &mut Explanation, labelled: bool) {
        e.hosts = Some(vec![
            replica("orchard-0", "http://10.0.0.1:8080"),
            replica("orchard-1", "http://10.0.0.2:8080"),
        ]);
        e.shard = Some(ShardLine {
            ring: "ops/main".into(),
            bucket: 17,
            labelled,
            holder: Some("orchard-1".into()),
        });
    }

    #[test]
    fn the_rendering_names_the_plugin_a_host_serves_the_kind_by_and_the_bucket_s_holder() {
        let mut e = explanation(vec![condition("Available", "True", "Success", "ok")]);
        in_ring(&mut e, true);
        let text = render(&e, Timestamp::UNIX_EPOCH);
        assert!(
            text.contains("orchard-0 — serving through Plugin zones since"),
            "{text}"
        );
        assert!(
            text.contains("  bucket 17 of ring ops/main: orchard-1 reconciles it"),
            "{text}"
        );
        e.shard = Some(ShardLine {
            holder: None,
            ..e.shard.clone().unwrap()
        });
        let text = render(&e, Timestamp::UNIX_EPOCH);
        assert!(
            text.contains("bucket 17 of ring ops/main: no replica holds it now"),
            "{text}"
        );
    }

    #[test]
    fn an_object_a_ring_has_not_labelled_yet_says_which_replica_labels_it() {
        let mut e = explanation(vec![]);
        in_ring(&mut e, false);
        assert_eq!(
            verdict(&e),
            "not labelled with its shard bucket yet (orchard.dev/shard-bucket 17, ring ops/main): \
             no replica reconciles it until it is; orchard-1's labeller writes it, with the \
             plugin's finalizer"
        );
        let text = render(&e, Timestamp::UNIX_EPOCH);
        assert!(
            text.contains(
                "  bucket 17 (not labelled yet) of ring ops/main: orchard-1 labels it, then reconciles it"
            ),
            "{text}"
        );
        // Labelled, the verdict is the conditions' again.
        e.shard = Some(ShardLine {
            labelled: true,
            ..e.shard.clone().unwrap()
        });
        assert_eq!(verdict(&e), "not passed yet: its status has no conditions");
    }
}
