//! Presence: every host says what it serves, so that a second host over the same objects
//! waits for the first instead of fighting over them (a demo host left running, a leftover
//! host of a crashed test, a second `orchard run` started by mistake).
//!
//! - **Announcement** — each host keeps a `coordination.k8s.io/v1` Lease
//!   `orchard-host-<instance>` in its own namespace, labelled `orchard.dev/presence=host`, its
//!   [`Scope`] in annotations: the kinds it serves (`<plural>.<group>`), its namespaces (or
//!   all), whether it serves Plugin objects (and their selector), its *group*, and its admin
//!   server's URL (what `orchard explain` reads the journal from). A presence
//!   is live while its Lease is unexpired. Two processes with one `--instance` in one
//!   namespace are one host to the others: a restarted host takes its earlier life's Lease
//!   over at once.
//! - **Overlap** ([`Scope::overlap`]) — the scopes of two hosts of different groups overlap
//!   when they share a kind, or both serve Plugin objects of one selector (or one of them of
//!   every selector), in a namespace both serve. The replicas of one leader Lease or one
//!   shard ring form a group: they already share their objects safely.
//! - **Order** ([`decide`]) — a host serves once no live overlapping presence is serving and
//!   none older than it (acquire time, then namespace and name) is waiting: the first host
//!   keeps its objects, a later one waits, and of several waiting the oldest goes first.
//!
//! Phases of [`Presence::announce`]:
//! 1. **write** — this host's Lease, state `waiting`;
//! 2. **look** — the live presences of every namespace (of its own only, when the host may
//!    not list Leases cluster-wide);
//! 3. **decide** — serve, or wait: say once which host it waits for (and again when that
//!    changes), renew, and look again each tick (a failed look or renewal is said and
//!    retried: only the first write and the last may fail the start);
//! 4. **serve** — state `serving`, renewed every third of the lease duration until
//!    [`Presence::release`] deletes it.
//!
//! Contract: presence is a guard against misconfiguration, not a lock. A host MUST NOT
//! reconcile before its announcement decided *serve*; it SHOULD keep renewing while it
//! serves, and does not stop when a renewal fails (leader election and sharding are the
//! locks of replicas; claims keep external resources exclusive). A host that may not write
//! its Lease says so and serves unannounced.

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// The label of every presence Lease.
pub const LABEL: &str = "orchard.dev/presence";
const LABEL_VALUE: &str = "host";
const KINDS: &str = "orchard.dev/kinds";
const NAMESPACES: &str = "orchard.dev/namespaces";
const PLUGIN_OBJECTS: &str = "orchard.dev/plugin-objects";
const GROUP: &str = "orchard.dev/group";
const STATE: &str = "orchard.dev/state";
const ADMIN: &str = "orchard.dev/admin";
const FIELD_MANAGER: &str = "orchard.dev/presence";

/// Errors of presence.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// This host's Lease could not be written (for a reason other than RBAC).
    #[error("presence lease {namespace}/{name}: {source}")]
    Lease {
        /// Namespace of the Lease.
        namespace: String,
        /// Name of the Lease.
        name: String,
        #[source]
        /// The apiserver's answer.
        source: kube::Error,
    },
    /// The other hosts' Leases could not be listed (for a reason other than RBAC).
    #[error("listing the presence leases (label {LABEL}): {0}")]
    List(#[source] kube::Error),
}

/// What one host serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// The kinds, as `<plural>.<group>` (their CRDs' names).
    pub kinds: BTreeSet<String>,
    /// The namespaces, or `None`: all.
    pub namespaces: Option<BTreeSet<String>>,
    /// Plugin objects served, with their label selector (`""`: every Plugin); `None`: none.
    pub plugin_objects: Option<String>,
    /// Hosts of one group share their objects safely: `leader:<ns>/<lease>`,
    /// `ring:<ns>/<ring>`, or the host alone (`host:<ns>/<instance>`).
    pub group: String,
}

/// Where two scopes meet: what a waiting host names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlap {
    /// The kinds both serve (`Plugin objects` among them when both serve those).
    pub kinds: Vec<String>,
    /// The namespaces both serve, or `None`: all.
    pub namespaces: Option<Vec<String>>,
}

impl fmt::Display for Overlap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kinds.join(", "))?;
        match &self.namespaces {
            None => write!(f, " in every namespace"),
            Some(ns) => write!(f, " in namespace {}", ns.join(", ")),
        }
    }
}

impl Scope {
    /// Where `self` and `other` serve the same objects, if anywhere. Scopes of one group
    /// never overlap.
    pub fn overlap(&self, other: &Scope) -> Option<Overlap> {
        if self.group == other.group {
            return None;
        }
        let namespaces = match (&self.namespaces, &other.namespaces) {
            (None, None) => None,
            (Some(one), None) | (None, Some(one)) => Some(one.iter().cloned().collect()),
            (Some(a), Some(b)) => {
                let both: Vec<String> = a.intersection(b).cloned().collect();
                if both.is_empty() {
                    return None;
                }
                Some(both)
            }
        };
        let mut kinds: Vec<String> = self.kinds.intersection(&other.kinds).cloned().collect();
        if let (Some(a), Some(b)) = (&self.plugin_objects, &other.plugin_objects) {
            // Two different selectors are how hosts share Plugins: disjoint by intent.
            if a.is_empty() || b.is_empty() || a == b {
                kinds.push("Plugin objects".to_owned());
            }
        }
        (!kinds.is_empty()).then_some(Overlap { kinds, namespaces })
    }
}

/// Whether a host serves, or waits for another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Announced, not serving yet.
    Waiting,
    /// Reconciling its scope.
    Serving,
}

impl State {
    /// `waiting` or `serving`, as the Lease's annotation says.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Waiting => "waiting",
            Self::Serving => "serving",
        }
    }
}

/// One host's presence, as its Lease says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// The host's `--instance` (the Lease's holder).
    pub instance: String,
    /// What it serves.
    pub scope: Scope,
    /// Serving or waiting.
    pub state: State,
    /// When it announced itself.
    pub acquired: jiff::Timestamp,
    /// Its presence ends at this time unless renewed.
    pub expires: jiff::Timestamp,
    /// Its admin server (`http://…`), when it has one others can reach.
    pub admin: Option<String>,
}

impl Peer {
    /// The one decoding of a presence Lease; `None` for a Lease that is not one.
    pub fn from_lease(lease: &Lease) -> Option<Self> {
        if lease.labels().get(LABEL).map(String::as_str) != Some(LABEL_VALUE) {
            return None;
        }
        let notes = lease.annotations();
        let spec = lease.spec.as_ref()?;
        let renewed = spec.renew_time.as_ref()?.0;
        let seconds = i64::from(spec.lease_duration_seconds?);
        let list = |text: &str| -> BTreeSet<String> {
            text.split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        };
        let namespaces = match notes.get(NAMESPACES).map(String::as_str) {
            None | Some("*") => None,
            Some(text) => Some(list(text)),
        };
        Some(Self {
            namespace: lease.namespace().unwrap_or_default(),
            name: lease.name_any(),
            instance: spec.holder_identity.clone().unwrap_or_default(),
            scope: Scope {
                kinds: list(notes.get(KINDS).map_or("", String::as_str)),
                namespaces,
                plugin_objects: notes.get(PLUGIN_OBJECTS).cloned(),
                group: notes.get(GROUP).cloned().unwrap_or_default(),
            },
            state: match notes.get(STATE).map(String::as_str) {
                Some("serving") => State::Serving,
                _ => State::Waiting,
            },
            acquired: spec.acquire_time.as_ref().map_or(renewed, |t| t.0),
            expires: renewed
                .checked_add(jiff::SignedDuration::from_secs(seconds))
                .ok()?,
            admin: notes.get(ADMIN).cloned(),
        })
    }

    fn older_than(&self, other: &Peer) -> bool {
        (self.acquired, &self.namespace, &self.name)
            < (other.acquired, &other.namespace, &other.name)
    }

    fn is(&self, other: &Peer) -> bool {
        self.namespace == other.namespace && self.name == other.name
    }
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "host {} (Lease {}/{}, {} since {})",
            self.instance,
            self.namespace,
            self.name,
            self.state.as_str(),
            self.acquired
        )
    }
}

/// What a host does with what it sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nobody else serves its objects.
    Serve,
    /// Wait for `host`, which serves (or waits longer for) these objects.
    Wait {
        /// The host waited for.
        host: Box<Peer>,
        /// What both would serve.
        overlap: Overlap,
    },
}

/// The order of the module docs: `me` serves unless a live peer of another group with an
/// overlapping scope serves, or waits and is older.
pub fn decide(me: &Peer, others: &[Peer], now: jiff::Timestamp) -> Decision {
    let mut blockers: Vec<(&Peer, Overlap)> = others
        .iter()
        .filter(|p| !p.is(me) && p.expires > now)
        .filter(|p| p.state == State::Serving || p.older_than(me))
        .filter_map(|p| me.scope.overlap(&p.scope).map(|o| (p, o)))
        .collect();
    // The one to name: a serving host before a waiting one, the oldest first.
    blockers.sort_by(|(a, _), (b, _)| {
        (a.state != State::Serving, a.acquired, &a.namespace, &a.name).cmp(&(
            b.state != State::Serving,
            b.acquired,
            &b.namespace,
            &b.name,
        ))
    });
    match blockers.into_iter().next() {
        None => Decision::Serve,
        Some((host, overlap)) => Decision::Wait {
            host: Box::new(host.clone()),
            overlap,
        },
    }
}

/// How a host announces itself.
#[derive(Debug, Clone)]
pub struct PresenceConfig {
    /// The host's namespace: its Lease's.
    pub namespace: String,
    /// The host's `--instance`.
    pub instance: String,
    /// What it serves.
    pub scope: Scope,
    /// A host that stops renewing is not waited for after this.
    pub lease_duration: Duration,
    /// Its admin server's URL, announced for `orchard explain`.
    pub admin: Option<String>,
}

impl PresenceConfig {
    fn lease_name(&self) -> String {
        super::object_name(&format!("orchard-host-{}", self.instance))
    }

    fn tick(&self) -> Duration {
        (self.lease_duration / 10).clamp(Duration::from_millis(200), Duration::from_secs(2))
    }
}

/// A host's announced presence; [`Presence::release`] ends it.
pub struct Presence {
    leases: Api<Lease>,
    name: String,
    stop: CancellationToken,
    renewing: Option<tokio::task::JoinHandle<()>>,
}

impl Presence {
    /// Runs the phases of the module docs until this host may serve; `Ok(None)` when
    /// `shutdown` came first (the Lease is deleted then).
    pub async fn announce(
        client: Client,
        config: PresenceConfig,
        shutdown: &CancellationToken,
    ) -> Result<Option<Self>, Error> {
        let leases: Api<Lease> = Api::namespaced(client.clone(), &config.namespace);
        let name = config.lease_name();
        let mut writer = Writer {
            leases: leases.clone(),
            config: config.clone(),
            name: name.clone(),
            acquired: MicroTime(jiff::Timestamp::now()),
        };
        // Phase 1: write.
        if !writer.write(State::Waiting).await? {
            return Ok(Some(Self::unannounced(leases, name)));
        }
        let me = Peer {
            namespace: config.namespace.clone(),
            name: name.clone(),
            instance: config.instance.clone(),
            scope: config.scope.clone(),
            state: State::Waiting,
            acquired: writer.acquired.0,
            expires: jiff::Timestamp::MAX,
            admin: config.admin.clone(),
        };
        let mut lister = Lister::new(client, &config.namespace);
        let mut waiting_for: Option<String> = None;
        let mut written = tokio::time::Instant::now();
        loop {
            // Phases 2 and 3: look, decide.
            // An apiserver that does not answer decides nothing: look again at the next tick.
            let decision = match lister.peers().await {
                Ok(peers) => Some(decide(&me, &peers, jiff::Timestamp::now())),
                Err(e) => {
                    tracing::warn!(error = %e, "could not look for other hosts; looking again");
                    None
                }
            };
            match decision {
                None => {}
                Some(Decision::Serve) => break,
                Some(Decision::Wait { host, overlap }) => {
                    let said = format!("{}/{}", host.namespace, host.name);
                    if waiting_for.as_deref() != Some(said.as_str()) {
                        tracing::warn!(
                            instance = %config.instance,
                            "another Orchard host serves {overlap}: {host}; waiting until it stops \
                             (scope this host with --namespace, or give both hosts one \
                             --leader-elect Lease)"
                        );
                        waiting_for = Some(said);
                    }
                }
            }
            tokio::select! {
                () = shutdown.cancelled() => {
                    writer.delete().await;
                    return Ok(None);
                }
                () = tokio::time::sleep(config.tick()) => {}
            }
            if written.elapsed() >= config.lease_duration / 3 {
                if let Err(e) = writer.write(State::Waiting).await {
                    tracing::warn!(error = %e, "presence lease renewal failed; retrying");
                }
                written = tokio::time::Instant::now();
            }
        }
        if waiting_for.is_some() {
            tracing::info!(instance = %config.instance, "the host waited for stopped: serving");
        }
        // Phase 4: serve.
        writer.write(State::Serving).await?;
        let stop = CancellationToken::new();
        let renewing = tokio::spawn(writer.keep_renewing(stop.clone()));
        Ok(Some(Self {
            leases,
            name,
            stop,
            renewing: Some(renewing),
        }))
    }

    fn unannounced(leases: Api<Lease>, name: String) -> Self {
        Self {
            leases,
            name,
            stop: CancellationToken::new(),
            renewing: None,
        }
    }

    /// Ends the presence: stops renewing and deletes the Lease, so a waiting host goes on at
    /// once instead of after its expiry.
    pub async fn release(self) {
        self.stop.cancel();
        let Some(renewing) = self.renewing else {
            return;
        };
        let _ = renewing.await;
        delete(&self.leases, &self.name).await;
    }
}

/// Writes this host's Lease.
struct Writer {
    leases: Api<Lease>,
    config: PresenceConfig,
    name: String,
    acquired: MicroTime,
}

impl Writer {
    /// Writes the Lease with `state` and a fresh renew time; `Ok(false)` when RBAC forbids it
    /// (said once, as a warning: the host serves unannounced).
    async fn write(&mut self, state: State) -> Result<bool, Error> {
        let scope = &self.config.scope;
        let join = |set: &BTreeSet<String>| set.iter().cloned().collect::<Vec<_>>().join(",");
        let mut annotations = json!({
            KINDS: join(&scope.kinds),
            NAMESPACES: scope.namespaces.as_ref().map_or_else(|| "*".to_owned(), join),
            GROUP: scope.group,
            STATE: state.as_str(),
        });
        if let Some(selector) = &scope.plugin_objects {
            annotations[PLUGIN_OBJECTS] = json!(selector);
        }
        if let Some(admin) = &self.config.admin {
            annotations[ADMIN] = json!(admin);
        }
        let lease = json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": self.name,
                "labels": { LABEL: LABEL_VALUE },
                "annotations": annotations,
            },
            "spec": {
                "holderIdentity": self.config.instance,
                "leaseDurationSeconds": i32::try_from(self.config.lease_duration.as_secs().max(3)).unwrap_or(i32::MAX),
                "acquireTime": self.acquired,
                "renewTime": MicroTime(jiff::Timestamp::now()),
            },
        });
        match self
            .leases
            .patch(
                &self.name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(lease),
            )
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(e)) if e.code == 403 => {
                tracing::warn!(
                    lease = %format!("{}/{}", self.config.namespace, self.name),
                    error = %e.message,
                    "may not write this host's presence Lease: serving unannounced, other hosts \
                     cannot see this one (grant create and patch on leases in its namespace)"
                );
                Ok(false)
            }
            Err(source) => Err(Error::Lease {
                namespace: self.config.namespace.clone(),
                name: self.name.clone(),
                source,
            }),
        }
    }

    /// Renews every third of the lease duration until `stop`; a failure is said and retried.
    async fn keep_renewing(mut self, stop: CancellationToken) {
        let every = self.config.lease_duration / 3;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
            if let Err(e) = self.write(State::Serving).await {
                tracing::warn!(error = %e, "presence lease renewal failed; retrying");
            }
        }
    }

    async fn delete(&self) {
        delete(&self.leases, &self.name).await;
    }
}

/// Deletes a presence Lease (one already gone is fine).
async fn delete(leases: &Api<Lease>, name: &str) {
    match leases.delete(name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => tracing::warn!(lease = %name, error = %e, "could not delete the presence lease"),
    }
}

/// Lists the presence Leases: of every namespace, or of the host's own once the apiserver
/// forbade the cluster-wide list.
struct Lister {
    all: Api<Lease>,
    own: Api<Lease>,
    namespace: String,
    only_own: bool,
}

impl Lister {
    fn new(client: Client, namespace: &str) -> Self {
        Self {
            all: Api::all(client.clone()),
            own: Api::namespaced(client, namespace),
            namespace: namespace.to_owned(),
            only_own: false,
        }
    }

    async fn peers(&mut self) -> Result<Vec<Peer>, Error> {
        let params = ListParams::default().labels(&format!("{LABEL}={LABEL_VALUE}"));
        if !self.only_own {
            match self.all.list(&params).await {
                Ok(list) => return Ok(list.items.iter().filter_map(Peer::from_lease).collect()),
                Err(kube::Error::Api(e)) if e.code == 403 => {
                    tracing::warn!(
                        error = %e.message,
                        "may not list Leases in every namespace: looking for other hosts in {} only",
                        self.namespace
                    );
                    self.only_own = true;
                }
                Err(e) => return Err(Error::List(e)),
            }
        }
        match self.own.list(&params).await {
            Ok(list) => Ok(list.items.iter().filter_map(Peer::from_lease).collect()),
            Err(kube::Error::Api(e)) if e.code == 403 => Ok(Vec::new()),
            Err(e) => Err(Error::List(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(group: &str, kinds: &[&str], namespaces: Option<&[&str]>) -> Scope {
        Scope {
            kinds: kinds.iter().map(|k| (*k).to_owned()).collect(),
            namespaces: namespaces.map(|ns| ns.iter().map(|n| (*n).to_owned()).collect()),
            plugin_objects: None,
            group: group.to_owned(),
        }
    }

    fn at(seconds: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    fn peer(name: &str, scope: Scope, state: State, acquired: i64) -> Peer {
        Peer {
            namespace: "default".into(),
            name: name.into(),
            instance: name.into(),
            scope,
            state,
            acquired: at(acquired),
            expires: at(100),
            admin: None,
        }
    }

    const ZONES: &str = "dnszones.pdns.orchard.dev";
    const QUEUES: &str = "queues.rabbitmq.orchard.dev";

    #[test]
    fn an_unscoped_host_overlaps_a_scoped_one_in_the_scoped_namespaces() {
        let all = scope("host:a", &[ZONES, QUEUES], None);
        let test = scope("host:b", &[ZONES], Some(&["e2e-1"]));
        let overlap = all.overlap(&test).unwrap();
        assert_eq!(overlap.kinds, [ZONES]);
        assert_eq!(overlap.namespaces, Some(vec!["e2e-1".to_owned()]));
        assert_eq!(test.overlap(&all), Some(overlap.clone()));
        assert_eq!(
            overlap.to_string(),
            "dnszones.pdns.orchard.dev in namespace e2e-1"
        );
        let other_all = scope("host:c", &[ZONES], None);
        assert_eq!(
            all.overlap(&other_all).unwrap().to_string(),
            "dnszones.pdns.orchard.dev in every namespace"
        );
    }

    #[test]
    fn hosts_of_other_namespaces_or_other_kinds_or_one_group_do_not_overlap() {
        let a = scope("host:a", &[ZONES], Some(&["e2e-1", "e2e-2"]));
        assert_eq!(
            a.overlap(&scope("host:b", &[ZONES], Some(&["e2e-3"]))),
            None
        );
        assert_eq!(a.overlap(&scope("host:b", &[QUEUES], None)), None);
        assert_eq!(
            a.overlap(&scope("host:a", &[ZONES], None)),
            None,
            "one group"
        );
        let ring = scope("ring:default/main", &[ZONES], None);
        assert_eq!(ring.overlap(&ring.clone()), None);
        assert!(
            a.overlap(&scope("host:b", &[ZONES], Some(&["e2e-2"])))
                .is_some()
        );
    }

    #[test]
    fn plugin_objects_overlap_unless_two_different_selectors_share_them() {
        let with = |group: &str, selector: &str| Scope {
            plugin_objects: Some(selector.to_owned()),
            ..scope(group, &[], None)
        };
        let kinds = |a: &Scope, b: &Scope| a.overlap(b).map(|o| o.kinds);
        assert_eq!(
            kinds(&with("host:a", ""), &with("host:b", "tier=edge")),
            Some(vec!["Plugin objects".to_owned()])
        );
        assert!(kinds(&with("host:a", "tier=edge"), &with("host:b", "tier=edge")).is_some());
        assert_eq!(
            kinds(&with("host:a", "tier=edge"), &with("host:b", "tier=core")),
            None
        );
        assert_eq!(
            kinds(&with("host:a", ""), &scope("host:b", &[ZONES], None)),
            None
        );
    }

    #[test]
    fn a_later_host_waits_for_the_one_serving_and_names_it() {
        let test = peer(
            "test",
            scope("host:t", &[ZONES], Some(&["e2e-1"])),
            State::Serving,
            0,
        );
        let second = peer("second", scope("host:s", &[ZONES], None), State::Waiting, 5);
        match decide(&second, &[test.clone(), second.clone()], at(10)) {
            Decision::Wait { host, overlap } => {
                assert_eq!(*host, test);
                assert_eq!(overlap.namespaces, Some(vec!["e2e-1".to_owned()]));
            }
            Decision::Serve => panic!("the second host must wait"),
        }
        // The first host, seeing the second waiting and younger, keeps serving.
        assert_eq!(
            decide(&test, &[test.clone(), second], at(10)),
            Decision::Serve
        );
    }

    #[test]
    fn a_serving_host_blocks_even_an_older_one_and_an_expired_one_blocks_nobody() {
        let old = peer("old", scope("host:o", &[ZONES], None), State::Waiting, 0);
        let serving = peer("new", scope("host:n", &[ZONES], None), State::Serving, 5);
        assert!(matches!(
            decide(&old, std::slice::from_ref(&serving), at(10)),
            Decision::Wait { .. }
        ));
        let expired = Peer {
            expires: at(9),
            ..serving
        };
        assert_eq!(decide(&old, &[expired], at(10)), Decision::Serve);
    }

    #[test]
    fn of_two_hosts_waiting_the_older_goes_first_and_ties_break_by_name() {
        let a = peer("a", scope("host:a", &[ZONES], None), State::Waiting, 0);
        let b = peer("b", scope("host:b", &[ZONES], None), State::Waiting, 0);
        let both = [a.clone(), b.clone()];
        assert_eq!(decide(&a, &both, at(10)), Decision::Serve);
        assert!(matches!(decide(&b, &both, at(10)), Decision::Wait { .. }));
        let earlier_b = Peer {
            acquired: at(-1),
            ..b
        };
        assert!(matches!(
            decide(&a, &[a.clone(), earlier_b.clone()], at(10)),
            Decision::Wait { .. }
        ));
        assert_eq!(
            decide(&earlier_b, &[a, earlier_b.clone()], at(10)),
            Decision::Serve
        );
    }

    #[test]
    fn a_serving_host_is_named_before_a_waiting_one() {
        let me = peer("me", scope("host:m", &[ZONES], None), State::Waiting, 10);
        let waiting = peer("w", scope("host:w", &[ZONES], None), State::Waiting, 0);
        let serving = peer("s", scope("host:s", &[ZONES], None), State::Serving, 5);
        match decide(&me, &[waiting, serving.clone()], at(20)) {
            Decision::Wait { host, .. } => assert_eq!(*host, serving),
            Decision::Serve => panic!("must wait"),
        }
    }

    #[test]
    fn a_lease_decodes_into_the_scope_it_was_written_with_and_other_leases_are_skipped() {
        let lease: Lease = serde_json::from_value(json!({
            "metadata": {
                "name": "orchard-host-a", "namespace": "ops",
                "labels": { LABEL: LABEL_VALUE },
                "annotations": {
                    KINDS: format!("{ZONES},{QUEUES}"), NAMESPACES: "x,y",
                    PLUGIN_OBJECTS: "", GROUP: "host:ops/a", STATE: "serving",
                    ADMIN: "http://10.0.0.7:9090",
                },
            },
            "spec": {
                "holderIdentity": "a", "leaseDurationSeconds": 15,
                "acquireTime": "2027-01-15T08:00:00.000000Z",
                "renewTime": "2027-01-15T08:00:10.000000Z",
            },
        }))
        .unwrap();
        let peer = Peer::from_lease(&lease).unwrap();
        assert_eq!(peer.scope.kinds.len(), 2);
        assert_eq!(peer.scope.namespaces.as_ref().map(BTreeSet::len), Some(2));
        assert_eq!(peer.scope.plugin_objects.as_deref(), Some(""));
        assert_eq!(peer.state, State::Serving);
        assert_eq!(peer.admin.as_deref(), Some("http://10.0.0.7:9090"));
        assert_eq!(peer.expires.to_string(), "2027-01-15T08:00:25Z");
        assert_eq!(
            peer.to_string(),
            "host a (Lease ops/orchard-host-a, serving since 2027-01-15T08:00:00Z)"
        );
        let mut leader = lease.clone();
        leader.metadata.labels = None;
        assert_eq!(Peer::from_lease(&leader), None);
    }
}
