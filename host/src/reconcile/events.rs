//! Events (`events.k8s.io/v1`) on the objects, with series: the same event on the same object
//! within six minutes patches the first one's `series` instead of creating another.
//!
//! kube-runtime's `Recorder` does the same but keeps a full copy of every event it published
//! for six minutes, and walks all of them at every publish: at 10,000 objects that was ≈ 20,000
//! events held (tens of MiB) and an O(n) scan per Event. Here the memory of a series is a hash
//! of its key, the Event's name and a count, and the memory is bounded ([`SERIES_CAP`]).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

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

/// Publishes Events as one controller instance.
pub struct EventPublisher {
    client: Client,
    controller: String,
    instance: String,
    series: SeriesCache,
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
    /// A publisher reporting as `controller` / `instance`.
    pub fn new(client: Client, controller: String, instance: String) -> Self {
        Self {
            client,
            controller,
            instance,
            series: SeriesCache::default(),
        }
    }

    /// Publishes `note` about `regarding`: a new Event, or the next of its series.
    pub async fn publish(
        &self,
        note: &EventNote<'_>,
        regarding: &ObjectReference,
    ) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        let type_ = if note.warning { "Warning" } else { "Normal" };
        let name = regarding.name.as_deref().unwrap_or(&self.controller);
        let namespace = regarding.namespace.as_deref().unwrap_or("default");
        let key = EventKey {
            type_,
            reason: note.reason,
            regarding: regarding.uid.as_deref().unwrap_or(name),
        };
        let fresh = format!("{name}.{:x}", now.as_nanosecond());
        let events: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        match self.series.observe(&key, now, fresh) {
            Occurrence::First(event_name) => {
                let event = Event {
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
                };
                events
                    .create(&PostParams::default(), &event)
                    .await
                    .map(drop)
            }
            Occurrence::Again { name, count } => {
                let patch = json!({
                    "series": { "count": count, "lastObservedTime": MicroTime(now) },
                });
                events
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map(drop)
            }
        }
    }
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
