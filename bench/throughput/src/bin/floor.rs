//! The `floor` contender of the throughput bench (`bench/run.sh --contenders floor`): the least
//! a leak-safe operator can ask of the apiserver for the bench's `DnsZone` job, so that a run
//! shows the ceiling of the machine next to the real contenders.
//!
//! - one watch on the namespace's `DnsZone`s; every object is handled by a task of its own, no
//!   concurrency limit, at most one task per object at a time (a newer version that arrives
//!   meanwhile waits for that task; only the newest waits);
//! - a new object: one patch adding the finalizer (`bench.orchard.dev/floor`, before anything
//!   exists outside: a zone can never be left behind by a delete), the zone created in PowerDNS
//!   (`POST`) exactly as `bench/kopf/operator.py` does (409 = it exists = adopted), then one
//!   status patch with `status.id` and the `Available` / `Progressing` conditions;
//! - an object being deleted with the finalizer: DELETE the zone (404 is fine), then one patch
//!   removing the finalizer.
//!
//! Nothing else: no Event, no Secret read (the PowerDNS URL and key are given once, by the
//! harness), no GET but after a conflict (the object changed under a precondition) or an
//! API error. PowerDNS 5xx and connection errors are retried after 1 s (as kopf's contender);
//! every PowerDNS call prints a `bench-call` line and every retry a `bench-transient` line on
//! stderr, which the harness counts as it does kopf's. It is ready (`GET /healthz` answers on
//! `--health-addr`) once the watch's first listing is done.
//!
//! With `--writes apply` (`ORCHARD_FLOOR_WRITES=apply`) the finalizer and the status are
//! written by server-side apply with force, as Orchard writes them; with `--status orchard`
//! (`ORCHARD_FLOOR_STATUS`) the status is as large as Orchard's — to measure what each costs
//! the apiserver (docs/benchmarks.md, session 30).

#![forbid(unsafe_code)]

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{Read as _, Write as _};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

/// The finalizer this operator owns.
const FINALIZER: &str = "bench.orchard.dev/floor";

/// How long a transient error waits before the next try (kopf's contender: `delay=1`).
const RETRY: Duration = Duration::from_secs(1);

#[derive(Debug, Parser)]
#[command(name = "orchard-floor", about)]
struct Args {
    /// The namespace whose `DnsZone`s this operator handles.
    #[arg(long)]
    namespace: String,
    /// Where `GET /healthz` answers once the first listing is done (`127.0.0.1:PORT`).
    #[arg(long)]
    health_addr: String,
    /// The PowerDNS API (`http://127.0.0.1:8081`).
    #[arg(long, env = "PDNS_API_URL")]
    pdns_url: String,
    /// The PowerDNS API key (from the environment: not on a command line).
    #[arg(long, env = "PDNS_API_KEY", hide_env_values = true)]
    pdns_key: String,
    /// The PowerDNS server id.
    #[arg(long, default_value = "localhost")]
    pdns_server: String,
    /// How the writes are made: `merge` patches (the floor), or server-side `apply` as Orchard
    /// writes (an experiment: what server-side apply costs the apiserver).
    #[arg(long, env = "ORCHARD_FLOOR_WRITES", default_value = "merge", value_parser = ["merge", "apply"])]
    writes: String,
    /// What the status says: `minimal` (`status.id` and the two conditions, kopf's shape), or
    /// `orchard` (Orchard's: condition messages, `lastSyncTime` and the observed
    /// `status.resource`) — an experiment: what a larger object costs the apiserver.
    #[arg(long, env = "ORCHARD_FLOOR_STATUS", default_value = "minimal", value_parser = ["minimal", "orchard"])]
    status: String,
}

/// The head of a server-side apply of `obj` (`--writes apply`): its kind, name and uid.
fn applied(obj: &DynamicObject) -> Value {
    json!({"apiVersion": "pdns.orchard.dev/v1alpha1", "kind": "DnsZone",
           "metadata": {"name": obj.name_any(), "uid": obj.metadata.uid}})
}

fn zone_resource() -> ApiResource {
    ApiResource {
        group: "pdns.orchard.dev".into(),
        version: "v1alpha1".into(),
        api_version: "pdns.orchard.dev/v1alpha1".into(),
        kind: "DnsZone".into(),
        plural: "dnszones".into(),
    }
}

/// One object's bookkeeping, while the watch knows it.
#[derive(Default)]
struct Slot {
    /// A task handles this object now.
    running: bool,
    /// The newest version from the watch that the task has not taken yet.
    pending: Option<DynamicObject>,
    /// The resourceVersions returned by this operator's own last writes. The task that wrote
    /// them held those exact versions, so their watch events bring nothing new: without this,
    /// every object's own finalizer patch would come back as a "new object with the finalizer
    /// and no status" and cost a second POST and status patch.
    ours: VecDeque<String>,
    /// The watch saw the object go.
    gone: bool,
}

/// Why a handling of one version stopped before its end.
enum Failure {
    /// A precondition failed (the object changed since that version): read it again.
    Stale,
    /// A transient API error: try again in [`RETRY`] from this version (the newest known).
    Again(Box<DynamicObject>),
    /// Nothing more to do for this version (the object went, or a permanent error, logged).
    Stop,
}

/// What the task handles next.
enum Next {
    Object(Box<DynamicObject>),
    Reread,
}

struct Operator {
    api: Api<DynamicObject>,
    http: reqwest::Client,
    /// `{url}/api/v1/servers/{server}/zones`.
    zones_url: String,
    key: String,
    slots: Mutex<HashMap<String, Slot>>,
    /// Server-side apply instead of merge patches (`--writes apply`).
    apply: bool,
    /// Orchard's status instead of the minimal one (`--status orchard`).
    orchard_status: bool,
}

impl Operator {
    fn slots(&self) -> MutexGuard<'_, HashMap<String, Slot>> {
        // A panic while holding the lock leaves plain data behind; keep going with it.
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A version from the watch: handled by the object's task, started if none runs.
    fn offer(self: &Arc<Self>, obj: DynamicObject) {
        let name = obj.name_any();
        let mut slots = self.slots();
        let slot = slots.entry(name.clone()).or_default();
        slot.gone = false;
        if obj
            .metadata
            .resource_version
            .as_ref()
            .is_some_and(|rv| slot.ours.contains(rv))
        {
            return;
        }
        slot.pending = Some(obj);
        if !slot.running {
            slot.running = true;
            tokio::spawn(Arc::clone(self).run(name));
        }
    }

    /// The watch saw the object go.
    fn forget(&self, name: &str) {
        let mut slots = self.slots();
        if let Some(slot) = slots.get_mut(name) {
            if slot.running {
                slot.gone = true;
                slot.pending = None;
                slot.ours.clear();
            } else {
                slots.remove(name);
            }
        }
    }

    /// After a relist: objects that went while the watch was down are forgotten.
    fn keep_only(&self, listed: &HashSet<String>) {
        let gone: Vec<String> = self
            .slots()
            .keys()
            .filter(|k| !listed.contains(*k))
            .cloned()
            .collect();
        for name in gone {
            self.forget(&name);
        }
    }

    /// Remembers the version a write of ours returned.
    fn wrote(&self, obj: &DynamicObject) {
        let Some(rv) = obj.metadata.resource_version.clone() else {
            return;
        };
        if let Some(slot) = self.slots().get_mut(&obj.name_any()) {
            if slot.ours.len() >= 4 {
                slot.ours.pop_front();
            }
            slot.ours.push_back(rv);
        }
    }

    /// The object's task: handles the newest pending version until there is none.
    async fn run(self: Arc<Self>, name: String) {
        let mut retry: Option<Next> = None;
        loop {
            let next = {
                let mut slots = self.slots();
                let Some(slot) = slots.get_mut(&name) else {
                    // Only this task removes a running slot; nothing left to do either way.
                    return;
                };
                // Checked again here, not only when the watch delivered it: the watch event
                // of a write of ours can arrive before the write's response was recorded.
                let ours = &slot.ours;
                let pending = slot.pending.take().filter(|obj| {
                    !obj.metadata
                        .resource_version
                        .as_ref()
                        .is_some_and(|rv| ours.contains(rv))
                });
                match pending {
                    Some(obj) => Next::Object(Box::new(obj)),
                    None => match retry.take() {
                        Some(next) if !slot.gone => next,
                        _ => {
                            if slot.gone {
                                slots.remove(&name);
                            } else {
                                slot.running = false;
                            }
                            return;
                        }
                    },
                }
            };
            let obj = match next {
                Next::Object(obj) => *obj,
                Next::Reread => match self.api.get_opt(&name).await {
                    Ok(Some(obj)) => obj,
                    Ok(None) => continue,
                    Err(e) => {
                        eprintln!("floor: {name}: reading it again: {e}");
                        tokio::time::sleep(RETRY).await;
                        retry = Some(Next::Reread);
                        continue;
                    }
                },
            };
            retry = match self.handle(obj).await {
                Ok(()) | Err(Failure::Stop) => None,
                Err(Failure::Stale) => Some(Next::Reread),
                Err(Failure::Again(obj)) => {
                    tokio::time::sleep(RETRY).await;
                    Some(Next::Object(obj))
                }
            };
        }
    }

    /// Takes one version to where it should be: finalizer, zone, status; or, being deleted,
    /// no zone and no finalizer. Every write's returned version is evaluated again: it may hold
    /// another writer's change (a deletion) made since, whose own watch event this task may
    /// then skip as ours (see [`Slot::ours`]).
    async fn handle(&self, mut obj: DynamicObject) -> Result<(), Failure> {
        let name = obj.name_any();
        let Some(zone) = zone_name(&obj) else {
            eprintln!("floor: {name}: no spec.resource.name");
            return Err(Failure::Stop);
        };
        let mut created = false;
        loop {
            let finalizers = obj.finalizers().to_vec();
            let ours = finalizers.iter().any(|f| f == FINALIZER);
            if obj.metadata.deletion_timestamp.is_some() {
                if !ours {
                    return Ok(());
                }
                self.delete_zone(&name, &zone).await?;
                let rest: Vec<&String> = finalizers.iter().filter(|f| *f != FINALIZER).collect();
                obj = self
                    .patch_finalizers(&obj, json!(rest), "removing the finalizer")
                    .await?;
            } else if !ours {
                let mut with = finalizers;
                with.push(FINALIZER.to_owned());
                obj = self
                    .patch_finalizers(&obj, json!(with), "adding the finalizer")
                    .await?;
            } else if is_done(&obj, &zone) {
                return Ok(());
            } else if created {
                // The status written did not read back as done: not this operator's to fix.
                eprintln!("floor: {name}: the status written does not say Available");
                return Err(Failure::Stop);
            } else {
                self.create_zone(&name, &obj, &zone).await?;
                obj = self.write_status(&obj, &zone).await?;
                created = true;
            }
        }
    }

    /// One merge patch of `metadata.finalizers`, under the version's resourceVersion: the list
    /// is written whole, so it must not overwrite another writer's change to it (a conflict
    /// reads the object again instead).
    async fn patch_finalizers(
        &self,
        obj: &DynamicObject,
        finalizers: Value,
        what: &str,
    ) -> Result<DynamicObject, Failure> {
        let name = obj.name_any();
        let result = if self.apply {
            let ours: Vec<&Value> = finalizers
                .as_array()
                .into_iter()
                .flatten()
                .filter(|f| f.as_str() == Some(FINALIZER))
                .collect();
            let mut body = applied(obj);
            body["metadata"]["finalizers"] = json!(ours);
            self.api
                .patch(
                    &name,
                    &PatchParams::apply("floor").force(),
                    &Patch::Apply(&body),
                )
                .await
        } else {
            let patch = json!({"metadata": {
                "resourceVersion": obj.metadata.resource_version,
                "finalizers": finalizers,
            }});
            self.api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
        };
        self.written(result, what, obj)
    }

    /// One status merge patch: `status.id` and the conditions, in the shape of kopf's
    /// contender (the CRD's conditions schema; the harness reads `Available`).
    async fn write_status(
        &self,
        obj: &DynamicObject,
        zone: &str,
    ) -> Result<DynamicObject, Failure> {
        let name = obj.name_any();
        let at = jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        let generation = obj.metadata.generation;
        let condition = |type_: &str, status: &str, message: &str| {
            let message = if self.orchard_status { message } else { "" };
            json!({"type": type_, "status": status, "reason": "Success", "message": message,
                   "lastTransitionTime": at, "observedGeneration": generation})
        };
        let mut patch = json!({"status": {
            "id": zone,
            "conditions": [
                condition("Available", "True", "The external resource is available"),
                condition("Progressing", "False", "The external resource is up to date"),
            ],
        }});
        if self.orchard_status {
            // What pdns-zone's `observed` answers for a new zone, and a sync time as Orchard
            // writes it (nanoseconds).
            patch["status"]["lastSyncTime"] = json!(jiff::Timestamp::now().to_string());
            patch["status"]["resource"] = json!({"account": "", "dnssec": false, "kind": "Native",
                "name": zone, "pluginBuild": "0.1.0", "rrsetCount": 1, "serial": 2_026_120_701});
        }
        let result = if self.apply {
            let mut body = applied(obj);
            body["status"] = patch["status"].take();
            self.api
                .patch_status(
                    &name,
                    &PatchParams::apply("floor-status").force(),
                    &Patch::Apply(&body),
                )
                .await
        } else {
            self.api
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
        };
        self.written(result, "writing the status", obj)
    }

    /// The object a patch of `obj` wrote (remembered, so that its own watch event is not
    /// handled again), or the failure of `what`.
    fn written(
        &self,
        result: Result<DynamicObject, kube::Error>,
        what: &str,
        obj: &DynamicObject,
    ) -> Result<DynamicObject, Failure> {
        match result {
            Ok(written) => {
                self.wrote(&written);
                Ok(written)
            }
            Err(e) => Err(api_failure(&obj.name_any(), what, &e, obj)),
        }
    }

    /// POSTs the zone, as kopf's contender does; 201 and 409 are done, 5xx and connection
    /// errors are retried, anything else stops (logged).
    async fn create_zone(
        &self,
        name: &str,
        obj: &DynamicObject,
        zone: &str,
    ) -> Result<(), Failure> {
        let res = &obj.data["spec"]["resource"];
        let body = json!({
            "name": zone,
            "kind": res["kind"].as_str().unwrap_or("Native"),
            "nameservers": res.get("nameservers").cloned().unwrap_or_else(|| json!([])),
            "account": res["account"].as_str().unwrap_or(""),
        });
        self.pdns(name, "POST", &[201, 409], || {
            self.http.post(&self.zones_url).json(&body)
        })
        .await
    }

    /// DELETEs the zone; 204 and 404 are done.
    async fn delete_zone(&self, name: &str, zone: &str) -> Result<(), Failure> {
        let url = format!("{}/{zone}", self.zones_url);
        self.pdns(name, "DELETE", &[204, 404], || self.http.delete(&url))
            .await
    }

    /// One PowerDNS call, retried after [`RETRY`] while it answers 5xx or cannot connect.
    async fn pdns(
        &self,
        name: &str,
        method: &str,
        done: &[u16],
        request: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<(), Failure> {
        loop {
            eprintln!("bench-call {method}");
            match request().header("X-API-Key", &self.key).send().await {
                Ok(r) if done.contains(&r.status().as_u16()) => return Ok(()),
                Ok(r) if r.status().is_server_error() => {
                    eprintln!("bench-transient {method} {name}: {}", r.status());
                }
                Ok(r) => {
                    let status = r.status();
                    let text = r.text().await.unwrap_or_default();
                    eprintln!("floor: {name}: PowerDNS {method}: {status} {text:.200}");
                    return Err(Failure::Stop);
                }
                Err(e) => eprintln!("bench-transient {method} {name}: {e}"),
            }
            tokio::time::sleep(RETRY).await;
        }
    }
}

/// The zone's canonical name (with the final dot), from `spec.resource.name`.
fn zone_name(obj: &DynamicObject) -> Option<String> {
    let name = obj.data["spec"]["resource"]["name"].as_str()?;
    Some(if name.ends_with('.') {
        name.to_owned()
    } else {
        format!("{name}.")
    })
}

/// Whether the status already says this zone is Available.
fn is_done(obj: &DynamicObject, zone: &str) -> bool {
    let status = &obj.data["status"];
    status["id"] == zone
        && status["conditions"].as_array().is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Available" && c["status"] == "True")
        })
}

/// What an API error means for the task (logged once).
fn api_failure(name: &str, what: &str, e: &kube::Error, obj: &DynamicObject) -> Failure {
    match e {
        kube::Error::Api(s) if s.code == 404 => Failure::Stop,
        kube::Error::Api(s) if s.code == 409 => Failure::Stale,
        kube::Error::Api(s) if s.code < 500 && s.code != 429 => {
            eprintln!("floor: {name}: {what}: {e}");
            Failure::Stop
        }
        _ => {
            eprintln!("floor: {name}: {what}: {e}; retrying");
            Failure::Again(Box::new(obj.clone()))
        }
    }
}

/// Answers every request on `addr` with 200 (the harness's readiness poll), from a thread.
fn serve_health(addr: &str) -> anyhow::Result<()> {
    let listener = std::net::TcpListener::bind(addr).with_context(|| format!("binding {addr}"))?;
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut buf = [0_u8; 1024];
            let _ = conn.read(&mut buf);
            let _ = conn.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\nconnection: close\r\n\r\nok\n",
            );
        }
    });
    Ok(())
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("floor: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> anyhow::Result<()> {
    let args = Args::parse();
    // Built beside the host, rustls has two providers compiled in; kube's is ring.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = Client::try_default()
        .await
        .context("a client from KUBECONFIG")?;
    let api = Api::namespaced_with(client, &args.namespace, &zone_resource());
    let op = Arc::new(Operator {
        api: api.clone(),
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()?,
        zones_url: format!(
            "{}/api/v1/servers/{}/zones",
            args.pdns_url.trim_end_matches('/'),
            args.pdns_server
        ),
        key: args.pdns_key,
        slots: Mutex::new(HashMap::new()),
        apply: args.writes == "apply",
        orchard_status: args.status == "orchard",
    });
    let mut events = watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut listing: Option<HashSet<String>> = None;
    let mut ready = false;
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Apply(obj)) => op.offer(obj),
            Ok(watcher::Event::InitApply(obj)) => {
                if let Some(names) = listing.as_mut() {
                    names.insert(obj.name_any());
                }
                op.offer(obj);
            }
            Ok(watcher::Event::Delete(obj)) => op.forget(&obj.name_any()),
            Ok(watcher::Event::Init) => listing = Some(HashSet::new()),
            Ok(watcher::Event::InitDone) => {
                if let Some(names) = listing.take() {
                    op.keep_only(&names);
                }
                if !ready {
                    ready = true;
                    serve_health(&args.health_addr)?;
                    eprintln!("floor: ready, watching dnszones in {}", args.namespace);
                }
            }
            Err(e) => eprintln!("floor: watch: {e}"),
        }
    }
    bail!("the watch ended")
}
