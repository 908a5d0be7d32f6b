//! The journal: for each object, what its last passes did — when, how long, how they ended,
//! the plugin calls of the last one — and when the next is due and why. The admin server
//! serves it (`/objects/<plural>.<group>/<namespace>/<name>`) and `orchard explain` prints it.
//!
//! It also keeps `orchard_objects{plugin,kind,state}` ([`super::metrics`]): each object is
//! counted in the state its last pass left it in ([`state_of`]), and
//! [`Journal::refresh_metrics`] (at each scrape) sets how long the longest-unsettled object of
//! each kind has been progressing or retrying.
//!
//! Contract: bounded. At most [`MAX_OBJECTS`] objects are journaled (the host-wide
//! [`global`] journal; an object past the bound is not, and says so), each with its last
//! [`PASSES`] passes, the calls of the last pass (as few as the reconciler keeps) and a
//! message of at most [`MESSAGE_BYTES`]. An object gone from the cluster is forgotten.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// Objects journaled at most.
pub const MAX_OBJECTS: usize = 200_000;
/// Passes kept per object.
pub const PASSES: usize = 3;
/// The longest message kept.
pub const MESSAGE_BYTES: usize = 512;

/// How one pass ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PassLine {
    /// When it began.
    pub at: Timestamp,
    /// How long it took, in milliseconds.
    pub took_ms: u64,
    /// `success`, `up-to-date` (skipped), `progressing`, `paused`, a failure's reason
    /// (`TransientError`, …) or `api-error`.
    pub outcome: Cow<'static, str>,
}

/// One call of the last pass, as served.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallLine {
    /// The contract's function.
    pub function: Cow<'static, str>,
    /// How long it took, in milliseconds.
    pub took_ms: u64,
    /// `ok`, or why the plugin gave no answer.
    pub outcome: Cow<'static, str>,
}

/// When the next pass comes, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NextPass {
    /// When it is due; `None`: at the next change of the object, a dependency or its Secret.
    pub at: Option<Timestamp>,
    /// `retry` (backoff after a failure), `poll` (waiting on the external system), `resync`,
    /// or `change`.
    pub why: Cow<'static, str>,
}

/// The object's claim on its external id ([`crate::reconcile::machinery::claims`]), as its
/// last pass left it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Claim {
    /// The external id (`status.id`, or the one the pass recorded).
    pub id: String,
    /// Another live object that shows the same id (`namespace/name`), if any.
    pub other: Option<String>,
    /// That other object ranks first (older): it holds the id, this object is refused.
    pub other_holds_it: bool,
}

/// What the journal knows of one object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectJournal {
    /// The host that passed it (its `--instance`).
    pub instance: String,
    /// The plugin serving the kind.
    pub plugin: String,
    /// The kind (`DnsZone`).
    pub kind: String,
    /// The state its last pass left it in ([`state_of`]).
    pub state: Cow<'static, str>,
    /// Since when it has been progressing or retrying, if it is.
    pub unsettled_since: Option<Timestamp>,
    /// Passes since this host started.
    pub passes_total: u64,
    /// The last passes, newest last.
    pub passes: VecDeque<PassLine>,
    /// The plugin calls of the last pass, in order.
    pub calls: Vec<CallLine>,
    /// The last pass's message (a failure, what it waits for), if any.
    pub message: Option<String>,
    /// The next pass.
    pub next: Option<NextPass>,
    /// Its claim on its external id, once it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<Claim>,
}

/// One pass, as the reconciler records it.
#[derive(Debug, Clone)]
pub struct Entry<'a> {
    /// Who ran it.
    pub instance: &'a str,
    /// For which plugin.
    pub plugin: &'a str,
    /// Of which kind (`DnsZone`).
    pub kind: &'a str,
    /// How it ended.
    pub line: PassLine,
    /// Its calls.
    pub calls: Vec<CallLine>,
    /// Its message.
    pub message: Option<String>,
    /// What comes next.
    pub next: NextPass,
    /// The object's claim on its external id after the pass.
    pub claim: Option<Claim>,
}

/// Who passed an object: the same for every object one controller passes, so shared.
#[derive(Debug, PartialEq, Eq)]
struct Origin {
    instance: String,
    plugin: String,
    kind: String,
}

impl Origin {
    fn is(&self, entry: &Entry<'_>) -> bool {
        self.instance == entry.instance && self.plugin == entry.plugin && self.kind == entry.kind
    }
}

/// What the journal keeps of one object: [`ObjectJournal`] without a copy of what every
/// object of a controller shares. (At 100,000 objects the journal is a tenth of the host's
/// memory; the three names alone were ≈ 150 bytes of each object's ≈ 1,300.)
#[derive(Debug)]
struct Record {
    origin: Arc<Origin>,
    /// `""` before the first pass is counted.
    state: &'static str,
    unsettled_since: Option<Timestamp>,
    passes_total: u64,
    passes: VecDeque<PassLine>,
    calls: Box<[CallLine]>,
    message: Option<Box<str>>,
    next: Option<NextPass>,
    claim: Option<Claim>,
}

impl Record {
    fn view(&self) -> ObjectJournal {
        ObjectJournal {
            instance: self.origin.instance.clone(),
            plugin: self.origin.plugin.clone(),
            kind: self.origin.kind.clone(),
            state: Cow::Borrowed(self.state),
            unsettled_since: self.unsettled_since,
            passes_total: self.passes_total,
            passes: self.passes.clone(),
            calls: self.calls.to_vec(),
            message: self.message.as_deref().map(str::to_owned),
            next: self.next.clone(),
            claim: self.claim.clone(),
        }
    }
}

/// The journaled objects of one kind, by `namespace/name`.
#[derive(Debug, Default)]
struct KindJournal {
    objects: HashMap<Box<str>, Record>,
    /// The origin of the last pass recorded: the one to share with the next.
    origin: Option<Arc<Origin>>,
}

impl KindJournal {
    fn origin(&mut self, entry: &Entry<'_>) -> Arc<Origin> {
        match &self.origin {
            Some(origin) if origin.is(entry) => Arc::clone(origin),
            _ => {
                let origin = Arc::new(Origin {
                    instance: entry.instance.to_owned(),
                    plugin: entry.plugin.to_owned(),
                    kind: entry.kind.to_owned(),
                });
                self.origin = Some(Arc::clone(&origin));
                origin
            }
        }
    }
}

#[derive(Debug, Default)]
struct Objects {
    /// By kind (`<plural>.<group>`).
    kinds: HashMap<Box<str>, KindJournal>,
    /// Objects journaled, over every kind.
    len: usize,
}

/// The journal of every object a host passed.
#[derive(Debug, Default)]
pub struct Journal {
    objects: Mutex<Objects>,
    /// Every (plugin, kind) whose unsettled age was published: reset to 0 when none is left.
    published: Mutex<HashSet<(String, String)>>,
}

/// The state a pass's outcome leaves an object in, as `orchard_objects` counts it.
pub fn state_of(outcome: &str) -> &'static str {
    match outcome {
        "success" | "up-to-date" => "up_to_date",
        "progressing" => "progressing",
        "InvalidConfiguration" | "UnrecoverableError" => "failed",
        "paused" => "paused",
        // TransientError, api-error.
        _ => "retrying",
    }
}

fn is_unsettled(state: &str) -> bool {
    matches!(state, "progressing" | "retrying")
}

/// An object's key within its kind.
fn object_key(namespace: &str, name: &str) -> Box<str> {
    format!("{namespace}/{name}").into_boxed_str()
}

/// The host's journal: the one the admin server serves, and every controller of the host
/// records into (through [`crate::reconcile::Settings`]).
pub fn global() -> Arc<Journal> {
    static JOURNAL: OnceLock<Arc<Journal>> = OnceLock::new();
    Arc::clone(JOURNAL.get_or_init(Arc::default))
}

impl Journal {
    fn objects(&self) -> std::sync::MutexGuard<'_, Objects> {
        // Poisoned only by a panic inside one of these short updates: the map is whole.
        self.objects.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a pass of object `namespace/name` of `kind` (`<plural>.<group>`).
    pub fn record(&self, kind: &str, namespace: &str, name: &str, entry: Entry<'_>) {
        let mut objects = self.objects();
        let full = objects.len >= MAX_OBJECTS;
        let key = object_key(namespace, name);
        let known = objects
            .kinds
            .get(kind)
            .is_some_and(|k| k.objects.contains_key(&key));
        if !known && full {
            return;
        }
        if !known {
            objects.len += 1;
        }
        let journal = objects.kinds.entry(kind.into()).or_default();
        let origin = journal.origin(&entry);
        let record = journal.objects.entry(key).or_insert_with(|| Record {
            origin: Arc::clone(&origin),
            state: "",
            unsettled_since: None,
            passes_total: 0,
            passes: VecDeque::with_capacity(PASSES),
            calls: Box::default(),
            message: None,
            next: None,
            claim: None,
        });
        let state = state_of(&entry.line.outcome);
        if record.state != state || record.origin != origin {
            let before = (!record.state.is_empty()).then_some(record.state);
            let metrics = super::metrics::global();
            if let Some(before) = before.filter(|_| record.origin != origin) {
                // Counted under another plugin or kind before: moved, not double-counted.
                metrics.object_state(
                    &record.origin.plugin,
                    &record.origin.kind,
                    Some(before),
                    None,
                );
                metrics.object_state(entry.plugin, entry.kind, None, Some(state));
            } else {
                metrics.object_state(entry.plugin, entry.kind, before, Some(state));
            }
            record.state = state;
        }
        record.origin = origin;
        record.unsettled_since = if is_unsettled(state) {
            record.unsettled_since.or(Some(entry.line.at))
        } else {
            None
        };
        record.passes_total += 1;
        if record.passes.len() == PASSES {
            record.passes.pop_front();
        }
        record.passes.push_back(entry.line);
        // A skipped pass calls nothing: the calls of the last real pass stay.
        if !entry.calls.is_empty() || record.passes_total == 1 {
            record.calls = entry.calls.into_boxed_slice();
        }
        record.message = entry.message.map(|m| bounded(&m).into_boxed_str());
        record.next = Some(entry.next);
        record.claim = entry.claim;
    }

    /// Forgets an object that is gone.
    pub fn forget(&self, kind: &str, namespace: &str, name: &str) {
        let mut objects = self.objects();
        let Some(journal) = objects.kinds.get_mut(kind) else {
            return;
        };
        let Some(gone) = journal.objects.remove(&*object_key(namespace, name)) else {
            return;
        };
        if journal.objects.is_empty() {
            objects.kinds.remove(kind);
        }
        objects.len -= 1;
        if !gone.state.is_empty() {
            super::metrics::global().object_state(
                &gone.origin.plugin,
                &gone.origin.kind,
                Some(gone.state),
                None,
            );
        }
    }

    /// Sets `orchard_objects_unsettled_oldest_seconds` of every kind from the journal (called
    /// at each scrape: one walk over the journaled objects).
    pub fn refresh_metrics(&self, now: Timestamp) {
        let mut oldest: BTreeMap<(String, String), i64> = BTreeMap::new();
        for record in self
            .objects()
            .kinds
            .values()
            .flat_map(|k| k.objects.values())
        {
            let age = record
                .unsettled_since
                .map_or(0, |since| now.duration_since(since).as_secs().max(0));
            let slot = oldest
                .entry((record.origin.plugin.clone(), record.origin.kind.clone()))
                .or_default();
            *slot = (*slot).max(age);
        }
        let mut published = self
            .published
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for pair in published.iter() {
            oldest.entry(pair.clone()).or_default();
        }
        for ((plugin, kind), age) in oldest {
            super::metrics::global().set_unsettled_oldest(&plugin, &kind, age);
            published.insert((plugin, kind));
        }
    }

    /// What is known of one object.
    pub fn get(&self, kind: &str, namespace: &str, name: &str) -> Option<ObjectJournal> {
        self.objects()
            .kinds
            .get(kind)?
            .objects
            .get(&*object_key(namespace, name))
            .map(Record::view)
    }

    /// Whether the journal is full (a new object is not journaled).
    pub fn is_full(&self) -> bool {
        self.objects().len >= MAX_OBJECTS
    }
}

/// `text` cut to [`MESSAGE_BYTES`] at a character boundary.
fn bounded(text: &str) -> String {
    if text.len() <= MESSAGE_BYTES {
        return text.to_owned();
    }
    let mut end = MESSAGE_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(outcome: &str, calls: &[CallLine], message: Option<&str>) -> Entry<'static> {
        Entry {
            instance: "host-a",
            plugin: "pdns-zone",
            kind: "Zone",
            line: PassLine {
                at: Timestamp::UNIX_EPOCH,
                took_ms: 5,
                outcome: Cow::Owned(outcome.to_owned()),
            },
            calls: calls.to_vec(),
            message: message.map(str::to_owned),
            next: NextPass {
                at: None,
                why: Cow::Borrowed("change"),
            },
            claim: None,
        }
    }

    fn create() -> CallLine {
        CallLine {
            function: Cow::Borrowed("create"),
            took_ms: 4,
            outcome: Cow::Borrowed("ok"),
        }
    }

    #[test]
    fn the_journal_keeps_the_last_passes_and_the_calls_of_the_last_pass_that_called() {
        let journal = Journal::default();
        let calls = [create()];
        journal.record(
            "z.g",
            "ns",
            "a",
            entry("progressing", &calls, Some("waiting")),
        );
        for _ in 0..PASSES {
            journal.record("z.g", "ns", "a", entry("up-to-date", &[], None));
        }
        let a = journal.get("z.g", "ns", "a").unwrap();
        assert_eq!(a.passes_total, 1 + PASSES as u64);
        assert_eq!(a.passes.len(), PASSES);
        assert!(a.passes.iter().all(|p| p.outcome == "up-to-date"));
        assert_eq!(a.calls, [create()], "a skipped pass keeps them");
        assert_eq!(a.message, None);
        assert_eq!(journal.get("z.g", "other", "a"), None);
        journal.forget("z.g", "ns", "a");
        assert_eq!(journal.get("z.g", "ns", "a"), None);
    }

    #[test]
    fn an_object_is_unsettled_from_its_first_failing_or_progressing_pass_until_it_settles() {
        let journal = Journal::default();
        let at = |seconds, outcome: &str| Entry {
            line: PassLine {
                at: Timestamp::from_second(seconds).unwrap(),
                took_ms: 1,
                outcome: Cow::Owned(outcome.to_owned()),
            },
            ..entry(outcome, &[], None)
        };
        journal.record("z.g", "ns", "a", at(10, "progressing"));
        journal.record("z.g", "ns", "a", at(20, "TransientError"));
        let a = journal.get("z.g", "ns", "a").unwrap();
        assert_eq!(a.state, "retrying");
        assert_eq!(a.unsettled_since, Some(Timestamp::from_second(10).unwrap()));
        journal.record("z.g", "ns", "a", at(30, "success"));
        let a = journal.get("z.g", "ns", "a").unwrap();
        assert_eq!((&*a.state, a.unsettled_since), ("up_to_date", None));
        for (outcome, state) in [
            ("up-to-date", "up_to_date"),
            ("api-error", "retrying"),
            ("InvalidConfiguration", "failed"),
            ("UnrecoverableError", "failed"),
            ("paused", "paused"),
        ] {
            assert_eq!(state_of(outcome), state);
        }
    }

    #[test]
    fn the_objects_of_one_controller_share_its_names_and_a_forgotten_kind_leaves_nothing() {
        let journal = Journal::default();
        for name in ["a", "b"] {
            journal.record("z.g", "ns", name, entry("success", &[create()], None));
        }
        {
            let objects = journal.objects();
            let kind = &objects.kinds["z.g"];
            let (a, b) = (&kind.objects["ns/a"], &kind.objects["ns/b"]);
            assert!(Arc::ptr_eq(&a.origin, &b.origin));
            assert_eq!(objects.len, 2);
        }
        let a = journal.get("z.g", "ns", "a").unwrap();
        assert_eq!(
            (&*a.instance, &*a.plugin, &*a.kind, &*a.state),
            ("host-a", "pdns-zone", "Zone", "up_to_date")
        );
        journal.forget("z.g", "ns", "a");
        journal.forget("z.g", "ns", "b");
        journal.forget("z.g", "ns", "b");
        let objects = journal.objects();
        assert!(objects.kinds.is_empty());
        assert_eq!(objects.len, 0);
    }

    #[test]
    fn a_long_message_is_cut_at_a_character_boundary() {
        let journal = Journal::default();
        let long = "é".repeat(MESSAGE_BYTES);
        journal.record("z.g", "ns", "a", entry("TransientError", &[], Some(&long)));
        let message = journal.get("z.g", "ns", "a").unwrap().message.unwrap();
        assert!(message.len() <= MESSAGE_BYTES + '…'.len_utf8());
        assert!(message.ends_with('…'));
    }
}
