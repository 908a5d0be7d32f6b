//! Events (`events.k8s.io/v1`) on the objects, with series: the same event on the same object
//! within six minutes patches the first one's `series` instead of creating another.
//!
//! kube-runtime's `Recorder` keeps series too, but with a full copy of every event it published
//! for six minutes, and walks all of them at every publish: at 10,000 objects that was ≈ 20,000
//! events held (tens of MiB) and an O(n) scan per Event. Here the memory of a series is a hash
//! of its key, the Event's name and a count, and the memory is bounded ([`SERIES_CAP`]).
//!
//! Publishing never waits on the apiserver (client-go's broadcaster does not either): the
//! Event is decided at once and queued for one of [`LANES`] lanes that post concurrently, an
//! object's Events in order. A pass that created a resource writes its status next, not after
//! a round trip for its `Created` Event.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Client;
use kube::Resource;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How long an event is continued as a series (kube-runtime's and client-go's value).
pub const SERIES_TTL: SignedDuration = SignedDuration::from_mins(6);

/// Series remembered at most; past it, expired ones go, then the oldest half.
pub const SERIES_CAP: usize = 2048;

/// What one event says about one object.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EventKey<'a> {
    /// `Normal` or `Warning`.
    pub type_: &'a str,
    /// Why (a CamelCase reason).
    pub reason: &'a str,
    /// The object's uid (or its name when it has none).
    pub regarding: &'a str,
}

/// A series remembered.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Series {
    name: String,
    count: i32,
    last: Timestamp,
}

/// What publishing an event means now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Occurrence {
    /// A new Event object, named so.
    First(String),
    /// Another occurrence of the Event `name`: its series count is now `count`.
    Again {
        /// The Event continued.
        name: String,
        /// Occurrences so far (2 for the first repeat).
        count: i32,
    },
}

/// The series of recent events, bounded.
#[derive(Debug, Default)]
pub struct SeriesCache {
    series: Mutex<HashMap<u64, Series>>,
}

fn digest(key: &EventKey<'_>) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut hasher);
    hasher.finish()
}

impl SeriesCache {
    /// Records an occurrence of `key` at `now`; `fresh_name` names a first occurrence.
    pub fn observe(&self, key: &EventKey<'_>, now: Timestamp, fresh_name: String) -> Occurrence {
        let mut series = self
            .series
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let id = digest(key);
        if let Some(s) = series.get_mut(&id)
            && s.last + SERIES_TTL > now
        {
            s.count = s.count.saturating_add(1);
            s.last = now;
            return Occurrence::Again {
                name: s.name.clone(),
                count: s.count,
            };
        }
        if series.len() >= SERIES_CAP {
            series.retain(|_, s| s.last + SERIES_TTL > now);
            if series.len() >= SERIES_CAP {
                let mut ages: Vec<Timestamp> = series.values().map(|s| s.last).collect();
                ages.sort_unstable();
                let cut = ages[ages.len() / 2];
                series.retain(|_, s| s.last > cut);
            }
        }
        series.insert(
            id,
            Series {
                name: fresh_name.clone(),
                count: 1,
                last: now,
            },
        );
        Occurrence::First(fresh_name)
    }

    /// Series remembered now.
    pub fn len(&self) -> usize {
        self.series
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }

    /// Whether none is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Lanes that post one publisher's Events concurrently. An object's Events always take the
/// same lane, so that a series' first Event is created before its next occurrence patches it.
pub const LANES: usize = 4;

/// Events one lane holds at most. Past it an Event is dropped (counted in
/// `orchard_events_dropped_total` and logged), as client-go's broadcaster drops past its queue:
/// a pass never waits on the apiserver for an Event.
pub const LANE_CAPACITY: usize = 256;

/// How long the lanes keep posting what was queued after their controller stopped.
pub const DRAIN: Duration = Duration::from_secs(2);

/// One write of an Event, decided when it was published.
#[derive(Debug)]
enum Posting {
    /// A new Event object.
    Create(Box<Event>),
    /// Another occurrence of the Event `name`; its note becomes this occurrence's (the
    /// latest message and trace id are what `kubectl describe` shows).
    Continue {
        namespace: String,
        name: String,
        count: i32,
        at: Timestamp,
        note: String,
    },
}

impl Posting {
    fn event_name(&self) -> &str {
        match self {
            Posting::Create(event) => event.metadata.name.as_deref().unwrap_or_default(),
            Posting::Continue { name, .. } => name,
        }
    }
}

/// Which Events the host publishes (`orchard run --events`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum EventLevel {
    /// Every Event: `Normal` ones (`Created`, `Deleted`, `Adopted`, …) and `Warning` ones.
    #[default]
    Normal,
    /// `Warning` Events only (failures, dropped reports): one write less per object created
    /// and per object deleted, for hosts that create and delete objects by the thousand.
    Warning,
}

/// The Event was not queued: its lane was full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the Event lane is full ({LANE_CAPACITY} Events waiting): the apiserver is behind")]
pub struct LaneFull;

/// Publishes Events as one controller instance. Which Event a note is (a new one, or the next
/// of a series) is decided at once; the write is queued for one of the [`EventLanes`].
pub struct EventPublisher {
    controller: String,
    instance: String,
    level: EventLevel,
    series: SeriesCache,
    lanes: Vec<mpsc::Sender<Posting>>,
}

/// The tasks that post what an [`EventPublisher`] queued ([`EventLanes::run`]).
pub struct EventLanes {
    plugin: String,
    lanes: Vec<mpsc::Receiver<Posting>>,
}

/// One event to publish.
#[derive(Debug, Clone)]
pub struct EventNote<'a> {
    /// A warning (else normal).
    pub warning: bool,
    /// The reason (also the action).
    pub reason: &'a str,
    /// The human-readable note.
    pub message: &'a str,
}

impl EventPublisher {
    /// A publisher of the Events of `level` reporting as `controller` / `instance`, and the
    /// lanes that post them (their logs name `plugin`): run them with [`EventLanes::run`].
    pub fn new(
        controller: String,
        instance: String,
        level: EventLevel,
        plugin: String,
    ) -> (Self, EventLanes) {
        let (senders, receivers) = (0..LANES).map(|_| mpsc::channel(LANE_CAPACITY)).unzip();
        let publisher = Self {
            controller,
            instance,
            level,
            series: SeriesCache::default(),
            lanes: senders,
        };
        let lanes = EventLanes {
            plugin,
            lanes: receivers,
        };
        (publisher, lanes)
    }

    /// Queues `note` about `regarding`: a new Event, or the next of its series. Never waits;
    /// [`LaneFull`] when the Event is dropped. A `Normal` note is left out at
    /// [`EventLevel::Warning`].
    pub fn publish(
        &self,
        note: &EventNote<'_>,
        regarding: &ObjectReference,
    ) -> Result<(), LaneFull> {
        if !note.warning && self.level == EventLevel::Warning {
            return Ok(());
        }
        let now = Timestamp::now();
        let type_ = if note.warning { "Warning" } else { "Normal" };
        let name = regarding.name.as_deref().unwrap_or(&self.controller);
        let namespace = regarding.namespace.as_deref().unwrap_or("default");
        let regarding_id = regarding.uid.as_deref().unwrap_or(name);
        let key = EventKey {
            type_,
            reason: note.reason,
            regarding: regarding_id,
        };
        let fresh = format!("{name}.{:x}", now.as_nanosecond());
        let posting = match self.series.observe(&key, now, fresh) {
            Occurrence::First(event_name) => Posting::Create(Box::new(Event {
                metadata: kube::api::ObjectMeta {
                    name: Some(event_name),
                    namespace: Some(namespace.to_owned()),
                    ..Default::default()
                },
                action: Some(note.reason.to_owned()),
                reason: Some(note.reason.to_owned()),
                note: Some(note.message.to_owned()),
                type_: Some(type_.to_owned()),
                event_time: Some(MicroTime(now)),
                regarding: Some(regarding.clone()),
                reporting_controller: Some(self.controller.clone()),
                reporting_instance: Some(self.instance.clone()),
                ..Default::default()
            })),
            Occurrence::Again { name, count } => Posting::Continue {
                namespace: namespace.to_owned(),
                name,
                count,
                at: now,
                note: note.message.to_owned(),
            },
        };
        self.lanes[lane_of(regarding_id)]
            .try_send(posting)
            .map_err(|_| LaneFull)
    }
}

/// The lane of the object `regarding` (its uid, or its name).
fn lane_of(regarding: &str) -> usize {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    regarding.hash(&mut hasher);
    // The remainder is below LANES.
    usize::try_from(hasher.finish() % LANES as u64).unwrap_or(0)
}

impl EventLanes {
    /// Posts the queued Events through `client`, each lane in order, until `stop` is
    /// cancelled; then what was queued by then, for at most [`DRAIN`].
    pub async fn run(self, client: Client, stop: CancellationToken) {
        let Self { plugin, lanes } = self;
        let lanes = lanes
            .into_iter()
            .map(|rx| lane(&client, &plugin, rx, &stop));
        futures::future::join_all(lanes).await;
    }
}

async fn lane(
    client: &Client,
    plugin: &str,
    mut rx: mpsc::Receiver<Posting>,
    stop: &CancellationToken,
) {
    loop {
        let posting = tokio::select! {
            biased;
            posting = rx.recv() => match posting {
                Some(posting) => posting,
                None => return,
            },
            () = stop.cancelled() => break,
        };
        post(client, plugin, posting).await;
    }
    let drain = async {
        while let Ok(posting) = rx.try_recv() {
            post(client, plugin, posting).await;
        }
    };
    if tokio::time::timeout(DRAIN, drain).await.is_err() {
        tracing::warn!(
            plugin,
            left = rx.len(),
            "stopped before every queued Event was posted"
        );
    }
}

/// One Event write; a failure is logged (an Event is never worth a retry).
async fn post(client: &Client, plugin: &str, posting: Posting) {
    let event = posting.event_name().to_owned();
    if let Err(e) = write(client, posting).await {
        tracing::warn!(plugin, event, error = %e, "could not publish event");
    }
}

/// The write of one posting. The apiserver's answer (the Event) is not read: serde skips it
/// without building it.
async fn write(client: &Client, posting: Posting) -> Result<(), kube::Error> {
    // Each request carries the verb kube's own `Api` methods give it (its trace span says it).
    let request = match posting {
        Posting::Create(event) => {
            let namespace = event.metadata.namespace.as_deref().unwrap_or("default");
            let body = serde_json::to_vec(&event).map_err(kube::Error::SerdeError)?;
            let mut request = kube::core::Request::new(Event::url_path(&(), Some(namespace)))
                .create(&PostParams::default(), body)
                .map_err(kube::Error::BuildRequest)?;
            request.extensions_mut().insert("create");
            request
        }
        Posting::Continue {
            namespace,
            name,
            count,
            at,
            note,
        } => {
            let patch = json!({
                "note": note,
                "series": { "count": count, "lastObservedTime": MicroTime(at) },
            });
            let mut request = kube::core::Request::new(Event::url_path(&(), Some(&namespace)))
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .map_err(kube::Error::BuildRequest)?;
            request.extensions_mut().insert("patch");
            request
        }
    };
    client
        .request::<serde::de::IgnoredAny>(request)
        .await
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    fn key(uid: &str) -> EventKey<'_> {
        EventKey {
            type_: "Warning",
            reason: "CreateFailed",
            regarding: uid,
        }
    }

    #[test]
    fn the_same_event_within_six_minutes_continues_the_first_one_s_series() {
        let cache = SeriesCache::default();
        assert_eq!(
            cache.observe(&key("u1"), at(0), "z.1".into()),
            Occurrence::First("z.1".into())
        );
        assert_eq!(
            cache.observe(&key("u1"), at(60), "z.2".into()),
            Occurrence::Again {
                name: "z.1".into(),
                count: 2
            }
        );
        assert_eq!(
            cache.observe(&key("u1"), at(400), "z.3".into()),
            Occurrence::Again {
                name: "z.1".into(),
                count: 3
            }
        );
        // Six minutes after the last occurrence: a new Event.
        assert_eq!(
            cache.observe(&key("u1"), at(400 + 361), "z.4".into()),
            Occurrence::First("z.4".into())
        );
        // Another object, or another reason, is another series.
        assert_eq!(
            cache.observe(&key("u2"), at(401), "y.1".into()),
            Occurrence::First("y.1".into())
        );
    }

    fn reference(uid: &str) -> ObjectReference {
        ObjectReference {
            kind: Some("DnsZone".into()),
            name: Some(format!("zone-{uid}")),
            namespace: Some("ns".into()),
            uid: Some(uid.into()),
            ..ObjectReference::default()
        }
    }

    fn note(reason: &str) -> EventNote<'_> {
        EventNote {
            warning: false,
            reason,
            message: "m",
        }
    }

    #[test]
    fn publishing_queues_an_objects_events_in_order_on_one_lane_without_waiting() {
        let (publisher, mut lanes) =
            EventPublisher::new("c".into(), "i".into(), EventLevel::Normal, "p".into());
        let zone = reference("u1");
        publisher.publish(&note("Created"), &zone).unwrap();
        publisher.publish(&note("Deleted"), &zone).unwrap();
        publisher.publish(&note("Created"), &zone).unwrap();
        let lane = &mut lanes.lanes[lane_of("u1")];
        let Ok(Posting::Create(first)) = lane.try_recv() else {
            panic!("the first Created is a new Event");
        };
        assert_eq!(first.reason.as_deref(), Some("Created"));
        assert_eq!(first.regarding.as_ref(), Some(&zone));
        let Ok(Posting::Create(second)) = lane.try_recv() else {
            panic!("Deleted is another Event");
        };
        assert_eq!(second.reason.as_deref(), Some("Deleted"));
        match lane.try_recv() {
            Ok(Posting::Continue { name, count, .. }) => {
                assert_eq!(Some(name), first.metadata.name, "the series of the first");
                assert_eq!(count, 2);
            }
            other => panic!("the second Created continues the first's series: {other:?}"),
        }
        assert!(lanes.lanes.iter_mut().all(|l| l.try_recv().is_err()));
    }

    #[test]
    fn at_the_warning_level_only_warnings_are_queued() {
        let (publisher, mut lanes) =
            EventPublisher::new("c".into(), "i".into(), EventLevel::Warning, "p".into());
        let zone = reference("u1");
        publisher.publish(&note("Created"), &zone).unwrap();
        let failed = EventNote {
            warning: true,
            reason: "TransientError",
            message: "m",
        };
        publisher.publish(&failed, &zone).unwrap();
        let lane = &mut lanes.lanes[lane_of("u1")];
        let Ok(Posting::Create(event)) = lane.try_recv() else {
            panic!("the warning is queued");
        };
        assert_eq!(event.reason.as_deref(), Some("TransientError"));
        assert_eq!(event.type_.as_deref(), Some("Warning"));
        assert!(lane.try_recv().is_err(), "the Normal Event is not");
    }

    #[test]
    fn a_full_lane_drops_the_event_and_leaves_the_other_lanes_open() {
        let (publisher, mut lanes) =
            EventPublisher::new("c".into(), "i".into(), EventLevel::Normal, "p".into());
        let zone = reference("u1");
        let reasons: Vec<String> = (0..=LANE_CAPACITY).map(|i| format!("Reason{i}")).collect();
        for reason in &reasons[..LANE_CAPACITY] {
            publisher.publish(&note(reason), &zone).unwrap();
        }
        assert_eq!(
            publisher.publish(&note(&reasons[LANE_CAPACITY]), &zone),
            Err(LaneFull)
        );
        let elsewhere = (2..100)
            .map(|i| format!("u{i}"))
            .find(|uid| lane_of(uid) != lane_of("u1"))
            .unwrap();
        publisher
            .publish(&note("Created"), &reference(&elsewhere))
            .unwrap();
        assert_eq!(lanes.lanes[lane_of("u1")].len(), LANE_CAPACITY);
        assert!(matches!(
            lanes.lanes[lane_of(&elsewhere)].try_recv(),
            Ok(Posting::Create(_))
        ));
    }

    #[test]
    fn the_series_remembered_are_bounded() {
        let cache = SeriesCache::default();
        let uids: Vec<String> = (0..3 * SERIES_CAP).map(|i| format!("u{i}")).collect();
        for (i, uid) in uids.iter().enumerate() {
            let now = at(i64::try_from(i).unwrap() / 100);
            cache.observe(&key(uid), now, format!("e{i}"));
            assert!(cache.len() <= SERIES_CAP, "{} series at {i}", cache.len());
        }
        // The newest are still continued.
        let last = uids.last().unwrap();
        let now = at(i64::try_from(uids.len()).unwrap() / 100);
        assert!(matches!(
            cache.observe(&key(last), now, "x".into()),
            Occurrence::Again { .. }
        ));
    }
}
