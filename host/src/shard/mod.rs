//! Sharding: N replicas share the objects of every kind, none reconciling an object another
//! replica reconciles.
//!
//! - **Membership** — each replica renews its own `coordination.k8s.io/v1` Lease
//!   (`orchard-shard-<ring>-<instance>`, labelled `orchard.dev/shard-ring=<ring>`); a replica
//!   is live while its Lease is unexpired. A replica that cannot renew for two thirds of the
//!   lease duration *fences itself* ([`Shard::fenced`]: the host exits), so it has stopped well
//!   before any other replica may treat it as dead.
//! - **Assignment** — an object's stable key hashes to one of 256 buckets ([`ring`]), written
//!   on the object as the label `orchard.dev/shard-bucket` by the replica that serves the
//!   bucket ([`label`]); a hash ring with virtual nodes maps buckets to live replicas.
//! - **Hand-over** — the bucket table ([`table`], one `ConfigMap` per ring, changed only by
//!   compare-and-swap) says who holds each bucket. A replica serves only buckets it holds;
//!   it gives a bucket up only after every pass over its objects has ended (the host *drains*
//!   and acknowledges with [`Shard::drained`]); it takes a bucket only when the bucket is free
//!   or its holder's Lease has expired.
//! - **Watches** — each replica's controllers watch `orchard.dev/shard-bucket in (<held>)`,
//!   so the apiserver filters what it caches.
//!
//! Phases of the coordinator, each tick (a tenth of the lease duration, 200 ms – 2 s):
//! 0. **forget** (once, at join) — clear, by compare-and-swap, what the table gives this
//!    replica from an earlier life (a restarted container keeps its pod's name). A survivor
//!    that saw that life's Lease expire may be about to take those buckets; only a write
//!    orders the two, so a rejoined replica serves only what it claimed anew;
//! 1. **members** — the live replicas: unexpired Leases of the ring, and this one;
//! 2. **plan** — [`table::plan`] against the bucket table;
//! 3. **claim** — take the planned buckets, and hand a dead replica's others to their new
//!    owners, in one compare-and-swap;
//! 4. **publish** — serve the held buckets minus those to release ([`Assignment`]);
//! 5. **release** — once the host acknowledged that publication, clear them in the table.

pub mod label;
pub mod ring;
pub mod table;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::ops::object_name;
use table::Table;

/// The label of a ring's Leases.
pub const RING_LABEL: &str = "orchard.dev/shard-ring";

/// Errors of sharding.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The replica's Lease could not be written.
    #[error("shard lease {namespace}/{name}: {source}")]
    Lease {
        /// Namespace of the Lease.
        namespace: String,
        /// Name of the Lease.
        name: String,
        #[source]
        /// The apiserver's answer.
        source: kube::Error,
    },
    /// The ring's Leases or bucket table could not be read or written.
    #[error("shard ring {ring}: {action}: {source}")]
    Ring {
        /// The ring.
        ring: String,
        /// What was being done.
        action: &'static str,
        #[source]
        /// The apiserver's answer.
        source: kube::Error,
    },
    /// The bucket table's `ConfigMap` holds something else.
    #[error("shard ring {ring}: ConfigMap {namespace}/{name}: {source}")]
    Table {
        /// The ring.
        ring: String,
        /// Namespace of the `ConfigMap`.
        namespace: String,
        /// Name of the `ConfigMap`.
        name: String,
        #[source]
        /// What is wrong with it.
        source: table::DecodeError,
    },
}

/// How a replica joins a ring.
#[derive(Debug, Clone)]
pub struct ShardConfig {
    /// The ring's name (a label value): replicas of one ring share its objects.
    pub ring: String,
    /// Namespace of the Leases and of the bucket table.
    pub namespace: String,
    /// A replica that stops renewing is replaced within this.
    pub lease_duration: Duration,
    /// This replica's name: unique among the ring's live replicas (a pod's name).
    pub instance: String,
}

impl ShardConfig {
    fn lease_name(&self) -> String {
        object_name(&format!("orchard-shard-{}-{}", self.ring, self.instance))
    }

    fn table_name(&self) -> String {
        table_name(&self.ring)
    }

    fn tick(&self) -> Duration {
        (self.lease_duration / 10).clamp(Duration::from_millis(200), Duration::from_secs(2))
    }

    fn lease_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs().max(3)).unwrap_or(i32::MAX)
    }
}

/// The name of the ring `ring`'s bucket table (a `ConfigMap` in the ring's namespace).
pub fn table_name(ring: &str) -> String {
    object_name(&format!("orchard-shard-{ring}"))
}

/// Who holds `bucket` in the ring `ring` of `namespace` now, read from its bucket table
/// (`None`: the bucket is free, or the ring has no table yet). For readers outside the ring
/// (`orchard explain`); a replica keeps its own view.
pub async fn holder_of(
    client: &Client,
    namespace: &str,
    ring: &str,
    bucket: u16,
) -> Result<Option<String>, Error> {
    let name = table_name(ring);
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let map = maps.get_opt(&name).await.map_err(|source| Error::Ring {
        ring: ring.to_owned(),
        action: "reading the bucket table",
        source,
    })?;
    let Some(text) = map
        .and_then(|m| m.data)
        .and_then(|mut d| d.remove(table::KEY))
    else {
        return Ok(None);
    };
    let table = Table::decode(&text).map_err(|source| Error::Table {
        ring: ring.to_owned(),
        namespace: namespace.to_owned(),
        name,
        source,
    })?;
    Ok(table.holder(bucket).map(str::to_owned))
}

/// The buckets this replica serves now. Each publication has a new epoch; the host
/// acknowledges an epoch once nothing outside its buckets runs any more.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assignment {
    /// Bumped by every publication.
    pub epoch: u64,
    /// The buckets to serve (empty: serve nothing).
    pub buckets: BTreeSet<u16>,
}

impl Assignment {
    /// The label selector of the objects to serve, when there are any.
    pub fn selector(&self) -> Option<String> {
        (!self.buckets.is_empty()).then(|| ring::selector(&self.buckets))
    }
}

/// A replica's membership of a ring.
pub struct Shard {
    config: ShardConfig,
    client: Client,
    assignment: watch::Receiver<Assignment>,
    drained: watch::Sender<u64>,
    fenced: CancellationToken,
    stop: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Shard {
    /// Joins the ring: writes this replica's Lease (which MUST succeed) and starts renewing
    /// it and coordinating the buckets.
    pub async fn join(client: Client, config: ShardConfig) -> Result<Self, Error> {
        let leases: Api<Lease> = Api::namespaced(client.clone(), &config.namespace);
        renew(&leases, &config).await?;
        let (publish, assignment) = watch::channel(Assignment::default());
        let (drained, acks) = watch::channel(0);
        let (fenced, stop) = (CancellationToken::new(), CancellationToken::new());
        let renewer = tokio::spawn(keep_renewing(
            leases,
            config.clone(),
            fenced.clone(),
            stop.clone(),
        ));
        let coordinator = Coordinator {
            config: config.clone(),
            leases: Api::namespaced(client.clone(), &config.namespace),
            tables: Api::namespaced(client.clone(), &config.namespace),
            publish,
            acks,
            next_expiry: None,
            forgotten_earlier_life: false,
        };
        let coordinating = tokio::spawn(coordinator.run(stop.clone()));
        tracing::info!(ring = %config.ring, instance = %config.instance, "joined the shard ring");
        Ok(Self {
            config,
            client,
            assignment,
            drained,
            fenced,
            stop,
            tasks: vec![renewer, coordinating],
        })
    }

    /// The buckets to serve, as they change.
    pub fn assignment(&self) -> watch::Receiver<Assignment> {
        self.assignment.clone()
    }

    /// The host acknowledges `epoch`: every pass over an object outside its buckets ended.
    pub fn drained(&self, epoch: u64) {
        self.drained.send_replace(epoch);
    }

    /// Resolves when this replica could not renew its Lease in time: it MUST stop serving at
    /// once (another replica may take its buckets soon).
    pub async fn fenced(&self) {
        self.fenced.cancelled().await;
    }

    /// Leaves the ring after the host stopped serving: gives every held bucket back and
    /// deletes the Lease, so the others take over at once instead of after its expiry.
    pub async fn leave(self) {
        self.stop.cancel();
        for task in self.tasks {
            let _ = task.await;
        }
        let tables: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.config.namespace);
        let limit = self.config.lease_duration / 3;
        for _ in 0..5 {
            let give_back = update_table(&tables, &self.config, |t| {
                for b in t.held_by(&self.config.instance) {
                    t.set(b, None);
                }
            });
            match tokio::time::timeout(limit, give_back).await {
                Ok(Ok(_)) => break,
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "could not give the buckets back; retrying");
                }
                Err(_) => tracing::warn!("giving the buckets back timed out; retrying"),
            }
        }
        let leases: Api<Lease> = Api::namespaced(self.client, &self.config.namespace);
        if let Err(e) = leases
            .delete(&self.config.lease_name(), &DeleteParams::default())
            .await
        {
            tracing::warn!(error = %e, "could not delete the shard lease");
        }
        tracing::info!(ring = %self.config.ring, "left the shard ring");
    }
}

/// Writes this replica's Lease: holder, duration and a fresh renew time.
async fn renew(leases: &Api<Lease>, config: &ShardConfig) -> Result<(), Error> {
    let name = config.lease_name();
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(jiff::Timestamp::now());
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": { "name": name, "labels": { RING_LABEL: config.ring } },
        "spec": {
            "holderIdentity": config.instance,
            "leaseDurationSeconds": config.lease_seconds(),
            "renewTime": now,
        },
    });
    leases
        .patch(
            &name,
            &PatchParams::apply("orchard.dev/shard").force(),
            &Patch::Apply(lease),
        )
        .await
        .map(drop)
        .map_err(|source| Error::Lease {
            namespace: config.namespace.clone(),
            name,
            source,
        })
}

/// Renews the Lease every third of its duration (a failed renewal is retried every tenth);
/// fences the replica when two thirds of it passed without a renewal — also while an attempt
/// hangs on a slow apiserver: no attempt outlives the fence.
async fn keep_renewing(
    leases: Api<Lease>,
    config: ShardConfig,
    fenced: CancellationToken,
    stop: CancellationToken,
) {
    let every = config.lease_duration / 3;
    let retry = config.tick();
    let fence_after = config.lease_duration * 2 / 3;
    let mut renewed = Instant::now();
    let mut wait = every;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(wait.min(fence_after.saturating_sub(renewed.elapsed()))) => {}
        }
        let left = fence_after.saturating_sub(renewed.elapsed());
        let attempt = Instant::now();
        let outcome = tokio::select! {
            () = stop.cancelled() => return,
            outcome = tokio::time::timeout(left, renew(&leases, &config)) => outcome,
        };
        match outcome {
            Ok(Ok(())) => {
                renewed = attempt;
                wait = every;
                continue;
            }
            Ok(Err(e)) => {
                tracing::warn!(ring = %config.ring, error = %e, "shard lease renewal failed; retrying");
            }
            Err(_) => tracing::warn!(ring = %config.ring, "shard lease renewal timed out"),
        }
        if renewed.elapsed() >= fence_after {
            tracing::error!(ring = %config.ring, "could not renew the shard lease in time: fencing this replica");
            fenced.cancel();
            return;
        }
        wait = retry;
    }
}

/// When `lease` expires, if it has a holder.
fn expiry(lease: &Lease) -> Option<(String, jiff::Timestamp)> {
    let spec = lease.spec.as_ref()?;
    let holder = spec.holder_identity.clone()?;
    let renewed = spec.renew_time.as_ref()?.0;
    let seconds = i64::from(spec.lease_duration_seconds?);
    let expires = renewed
        .checked_add(jiff::SignedDuration::from_secs(seconds))
        .ok()?;
    Some((holder, expires))
}

/// The holder of `lease`, if the lease is unexpired at `now`.
fn live_holder(lease: &Lease, now: jiff::Timestamp) -> Option<String> {
    expiry(lease).and_then(|(holder, expires)| (expires > now).then_some(holder))
}

/// Reads the bucket table (creating it empty if there is none) with its resourceVersion.
async fn read_table(
    tables: &Api<ConfigMap>,
    config: &ShardConfig,
) -> Result<(Table, String), Error> {
    let name = config.table_name();
    let ring_error = |action, source| Error::Ring {
        ring: config.ring.clone(),
        action,
        source,
    };
    loop {
        if let Some(map) = tables
            .get_opt(&name)
            .await
            .map_err(|e| ring_error("reading the bucket table", e))?
        {
            let text = map
                .data
                .as_ref()
                .and_then(|d| d.get(table::KEY))
                .map_or("", String::as_str);
            let table = if text.is_empty() {
                Table::default()
            } else {
                Table::decode(text).map_err(|source| Error::Table {
                    ring: config.ring.clone(),
                    namespace: config.namespace.clone(),
                    name: name.clone(),
                    source,
                })?
            };
            return Ok((table, map.resource_version().unwrap_or_default()));
        }
        let fresh: ConfigMap = serde_json::from_value(json!({
            "metadata": { "name": name, "labels": { RING_LABEL: config.ring } },
            "data": { table::KEY: Table::default().encode() },
        }))
        .map_err(|e| ring_error("building the bucket table", kube::Error::SerdeError(e)))?;
        match tables.create(&PostParams::default(), &fresh).await {
            // Created here, or by another replica at the same moment: read it again.
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(ring_error("creating the bucket table", e)),
        }
    }
}

/// Writes `table` over the version `version` read; `Ok(false)` when someone wrote in between.
async fn write_table(
    tables: &Api<ConfigMap>,
    config: &ShardConfig,
    table: &Table,
    version: &str,
) -> Result<bool, Error> {
    let name = config.table_name();
    let map: ConfigMap = serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "resourceVersion": version,
            "labels": { RING_LABEL: config.ring },
        },
        "data": { table::KEY: table.encode() },
    }))
    .map_err(|e| Error::Ring {
        ring: config.ring.clone(),
        action: "building the bucket table",
        source: kube::Error::SerdeError(e),
    })?;
    match tables.replace(&name, &PostParams::default(), &map).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
        Err(source) => Err(Error::Ring {
            ring: config.ring.clone(),
            action: "writing the bucket table",
            source,
        }),
    }
}

/// Reads, changes and writes the table until the write wins; returns the table written.
async fn update_table(
    tables: &Api<ConfigMap>,
    config: &ShardConfig,
    change: impl Fn(&mut Table),
) -> Result<Table, Error> {
    loop {
        let (mut table, version) = read_table(tables, config).await?;
        change(&mut table);
        if write_table(tables, config, &table, &version).await? {
            return Ok(table);
        }
    }
}

/// The coordinator of one replica: the phases of the module docs, every tick.
struct Coordinator {
    config: ShardConfig,
    leases: Api<Lease>,
    tables: Api<ConfigMap>,
    publish: watch::Sender<Assignment>,
    acks: watch::Receiver<u64>,
    /// When the first live Lease of another replica expires: the coordinator looks again
    /// right then (not a step's length later), so a dead replica's buckets are taken the
    /// moment they may be.
    next_expiry: Option<tokio::time::Instant>,
    /// Phase 0 is done.
    forgotten_earlier_life: bool,
}

impl Coordinator {
    async fn run(mut self, stop: CancellationToken) {
        // A round never waits on one apiserver call for long (the client's own read timeout
        // is minutes, for watches): any step may be cut short, each write being a swap.
        let limit = self.config.lease_duration / 3;
        loop {
            let again = match tokio::time::timeout(limit, self.step()).await {
                Ok(Ok(again)) => again,
                Ok(Err(e)) => {
                    tracing::warn!(ring = %self.config.ring, error = %e, "shard coordination failed; retrying");
                    false
                }
                Err(_) => {
                    tracing::warn!(ring = %self.config.ring, limit_ms = limit.as_millis(), "shard coordination round timed out; retrying");
                    false
                }
            };
            if again {
                continue;
            }
            let tick = tokio::time::Instant::now() + self.config.tick();
            let wake = self
                .next_expiry
                .map_or(tick, |e| tick.min(e + Duration::from_millis(5)));
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep_until(wake) => {}
                // The host drained: a release may proceed at once.
                Ok(()) = self.acks.changed() => {}
            }
        }
    }

    /// Phase 1: the live replicas (this one always among them: it fences itself before it
    /// could be seen as dead), and when the first other one's Lease expires. Also
    /// deletes Leases long expired (replicas that are gone).
    async fn members(&self) -> Result<(BTreeSet<String>, Option<tokio::time::Instant>), Error> {
        let leases = self
            .leases
            .list(&ListParams::default().labels(&format!("{RING_LABEL}={}", self.config.ring)))
            .await
            .map_err(|source| Error::Ring {
                ring: self.config.ring.clone(),
                action: "listing the ring's leases",
                source,
            })?;
        let now = jiff::Timestamp::now();
        let forgotten = now
            .checked_sub(jiff::SignedDuration::from_secs(
                10 * i64::from(self.config.lease_seconds()),
            ))
            .unwrap_or(now);
        let mut live = BTreeSet::from([self.config.instance.clone()]);
        let clock = tokio::time::Instant::now();
        let mut next_expiry: Option<tokio::time::Instant> = None;
        for lease in &leases.items {
            if let Some((holder, expires)) = expiry(lease).filter(|(_, e)| *e > now) {
                if holder != self.config.instance {
                    let left = Duration::try_from(expires.duration_since(now)).unwrap_or_default();
                    let at = clock + left;
                    next_expiry = Some(next_expiry.map_or(at, |n| n.min(at)));
                }
                live.insert(holder);
            } else if live_holder(lease, forgotten).is_none()
                && lease
                    .spec
                    .as_ref()
                    .and_then(|s| s.holder_identity.as_deref())
                    != Some(self.config.instance.as_str())
            {
                let _ = self
                    .leases
                    .delete(&lease.name_any(), &DeleteParams::default())
                    .await;
            }
        }
        Ok((live, next_expiry))
    }

    /// One tick; `Ok(true)` when it wrote the table (and should look again at once).
    async fn step(&mut self) -> Result<bool, Error> {
        let me = self.config.instance.clone();
        // Phase 0: forget.
        if !self.forgotten_earlier_life {
            let (mut table, version) = read_table(&self.tables, &self.config).await?;
            let earlier = table.held_by(&me);
            if !earlier.is_empty() {
                for bucket in &earlier {
                    table.set(*bucket, None);
                }
                if !write_table(&self.tables, &self.config, &table, &version).await? {
                    return Ok(true);
                }
                tracing::info!(ring = %self.config.ring, buckets = earlier.len(), "cleared the buckets of an earlier life of this replica");
            }
            self.forgotten_earlier_life = true;
        }
        // Phase 1: members (the table is read meanwhile: one round trip, not two, between
        // a dead replica's expiry and the claim of its buckets).
        let (members, table) = tokio::join!(self.members(), read_table(&self.tables, &self.config));
        let (live, next_expiry) = members?;
        self.next_expiry = next_expiry;
        let (mut table, version) = table?;
        // Phase 2: plan.
        let plan = table::plan(&me, &live, &table);
        // Phase 3: claim.
        if plan.takes() {
            plan.apply_takes(&me, &mut table);
            if !write_table(&self.tables, &self.config, &table, &version).await? {
                return Ok(true);
            }
            tracing::info!(ring = %self.config.ring, claimed = plan.claim.len(), handed = plan.hand.len(), live = live.len(), "claimed buckets");
        }
        // Phase 4: publish.
        let serving: BTreeSet<u16> = table
            .held_by(&me)
            .difference(&plan.release)
            .copied()
            .collect();
        let current = self.publish.borrow().clone();
        if serving != current.buckets {
            let next = Assignment {
                epoch: current.epoch + 1,
                buckets: serving,
            };
            tracing::info!(ring = %self.config.ring, epoch = next.epoch, buckets = next.buckets.len(), "serving a new set of buckets");
            self.publish.send_replace(next);
        }
        // Phase 5: release, once the host serves none of them any more.
        let published = self.publish.borrow().epoch;
        if !plan.release.is_empty() && *self.acks.borrow() >= published {
            let (mut table, version) = read_table(&self.tables, &self.config).await?;
            for bucket in &plan.release {
                if table.holder(*bucket) == Some(me.as_str()) {
                    table.set(*bucket, None);
                }
            }
            if write_table(&self.tables, &self.config, &table, &version).await? {
                tracing::info!(ring = %self.config.ring, released = plan.release.len(), "released buckets");
            }
            return Ok(true);
        }
        Ok(plan.takes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: &str, renewed: jiff::Timestamp, seconds: i32) -> Lease {
        serde_json::from_value(json!({
            "metadata": {"name": "l"},
            "spec": {
                "holderIdentity": holder,
                "leaseDurationSeconds": seconds,
                "renewTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(renewed),
            }
        }))
        .unwrap()
    }

    #[test]
    fn a_lease_is_live_until_its_duration_after_the_last_renewal() {
        let t0: jiff::Timestamp = "2026-12-01T00:00:00Z".parse().unwrap();
        let l = lease("orchard-1", t0, 6);
        let at = |s: i64| t0.checked_add(jiff::SignedDuration::from_secs(s)).unwrap();
        assert_eq!(live_holder(&l, at(5)).as_deref(), Some("orchard-1"));
        assert_eq!(live_holder(&l, at(6)), None);
        let no_holder: Lease =
            serde_json::from_value(json!({"metadata": {"name": "l"}, "spec": {}})).unwrap();
        assert_eq!(live_holder(&no_holder, t0), None);
    }

    #[test]
    fn names_are_valid_object_names() {
        assert_eq!(
            object_name("orchard-shard-Main_Ring-pod.1"),
            "orchard-shard-main-ring-pod.1"
        );
        assert_eq!(object_name("-x-"), "x");
    }

    #[test]
    fn an_empty_assignment_selects_nothing() {
        assert_eq!(Assignment::default().selector(), None);
        let a = Assignment {
            epoch: 1,
            buckets: [4, 2].into_iter().collect(),
        };
        assert_eq!(a.selector().unwrap(), "orchard.dev/shard-bucket in (2,4)");
    }

    #[test]
    fn the_coordinator_ticks_at_a_tenth_of_the_lease_within_bounds() {
        let config = |seconds| ShardConfig {
            ring: "r".into(),
            namespace: "ns".into(),
            lease_duration: Duration::from_secs(seconds),
            instance: "a".into(),
        };
        assert_eq!(config(15).tick(), Duration::from_millis(1500));
        assert_eq!(config(1).tick(), Duration::from_millis(200));
        assert_eq!(config(600).tick(), Duration::from_secs(2));
        assert_eq!(config(1).lease_seconds(), 3);
    }
}
