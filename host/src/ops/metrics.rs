//! Prometheus metrics of the host (`/metrics`), registered once per process.
//!
//! - `orchard_reconciles_total{plugin,kind,result}` and `orchard_reconcile_duration_seconds`;
//! - `orchard_reconcile_errors_total{plugin,kind,reason}`;
//! - `orchard_wasm_call_duration_seconds{plugin,function,outcome}`;
//! - `orchard_wasm_instances_total{plugin}`: instances made (one per pass, plus one after each
//!   failed call); `orchard_wasm_instances_alive{plugin}`: instances alive now (a pass's lives
//!   until the pass ends); `orchard_wasm_instance_waits_total{plugin}`: instances that found
//!   no room in the host's instance pool at once and waited for it; `orchard_wasm_pool_units` and
//!   `orchard_wasm_pool_units_in_use`: the pool's budget and what the instances alive take of
//!   it ([`crate::runtime::admission`]: 16 units per instance the pool holds, 4,096 by
//!   default; an instance of any plugin today takes 16) — at the budget, instances wait; past
//!   their call's deadline they fail as `pool-full`; `orchard_wasm_pool_units_expected`: what
//!   the running kinds' controllers may take at once (each kind's concurrency × its plugin's
//!   units) — above the budget, a busy host's passes wait;
//! - `orchard_queue_depth{plugin}`: objects in the plugin's work queue (due, being passed,
//!   or waiting for a requeue, poll or resync);
//! - `orchard_passes_held_back_total{plugin}`: passes that waited because the cache did not
//!   yet hold the host's own last write to the object ([`crate::reconcile::machinery::writes`]):
//!   a rate well above the rate of writes means the kind's watch lags;
//! - `orchard_passes_on_stale_cache_total{plugin}`: passes that ran on an object older than the
//!   host's own last write to it, the cache not having caught up within 2 s (a watch that
//!   lags or stalls: alerted on);
//! - `orchard_events_dropped_total{plugin}`: Events not posted because the plugin's Event
//!   lanes were full (the apiserver fell behind);
//! - `orchard_plugin_http_connections_total{plugin}`: connections the plugin's outbound HTTP
//!   opened (its requests reuse them: far fewer than requests, unless the destination closes
//!   each one);
//! - `orchard_plugin_http_failures_total{plugin,error}`: the plugin's outbound requests that got
//!   no answer, by why (`denied` by the allow-list, `tls_certificate`, `connection_refused`,
//!   `response_timeout`…: [`crate::runtime::egress`]);
//! - `orchard_plugin_load_failures_total{plugin}`; `orchard_leader` (1 when this host leads);
//!   `orchard_ready` (1 when `/readyz` says ready, as of the scrape);
//! - `orchard_objects{plugin,kind,state}`: the objects by the state their last pass left them
//!   in — `up_to_date`, `progressing`, `retrying` (a transient failure, backoff), `failed`
//!   (terminal: fix the spec), `paused` ([`super::journal`] keeps it);
//! - `orchard_objects_unsettled_oldest_seconds{plugin,kind}`: how long the object that has been
//!   progressing or retrying longest has been so (0: none), computed when scraped;
//! - `orchard_shard_unlabelled_oldest_seconds{plugin,kind}`: in a shard ring, how long the
//!   oldest object of a bucket this replica serves has waited for its bucket label (0: none) —
//!   until it has it, no replica reconciles it ([`crate::shard::label`]); 0 for every kind a
//!   host serves outside a ring;
//! - `orchard_conversions_total{plugin,result}`: objects the conversion webhook converted
//!   (`ok`) or could not (`failed`);
//! - `orchard_storage_migrated_objects_total{plugin}`: objects rewritten at their kind's
//!   storage version ([`crate::crd::migrate`]).

use std::sync::OnceLock;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReconcileLabels {
    plugin: String,
    kind: String,
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    plugin: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    plugin: String,
    kind: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    plugin: String,
    function: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PluginLabels {
    plugin: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpFailureLabels {
    plugin: String,
    error: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ObjectLabels {
    plugin: String,
    kind: String,
    state: &'static str,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

fn seconds_buckets() -> Histogram {
    // 100 µs … ~6.5 s
    Histogram::new(exponential_buckets(0.0001, 2.0, 17))
}

/// The host's metrics.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<ReconcileLabels, Counter>,
    reconcile_duration: Histograms<KindLabels>,
    errors: Family<ErrorLabels, Counter>,
    wasm_calls: Histograms<CallLabels>,
    wasm_instances: Family<PluginLabels, Counter>,
    wasm_instances_alive: Family<PluginLabels, Gauge>,
    wasm_instance_waits: Family<PluginLabels, Counter>,
    wasm_pool_units: Gauge,
    wasm_pool_units_in_use: Gauge,
    wasm_pool_units_expected: Gauge,
    queue_depth: Family<PluginLabels, Gauge>,
    held_back: Family<PluginLabels, Counter>,
    stale_passes: Family<PluginLabels, Counter>,
    load_failures: Family<PluginLabels, Counter>,
    events_dropped: Family<PluginLabels, Counter>,
    http_connections: Family<PluginLabels, Counter>,
    http_failures: Family<HttpFailureLabels, Counter>,
    leader: Gauge,
    ready: Gauge,
    objects: Family<ObjectLabels, Gauge>,
    unsettled_oldest: Family<KindLabels, Gauge>,
    unlabelled_oldest: Family<KindLabels, Gauge>,
    conversions: Family<ConversionLabels, Counter>,
    migrated: Family<PluginLabels, Counter>,
}

/// Labels of `orchard_conversions_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConversionLabels {
    plugin: String,
    result: &'static str,
}

/// The instance counters of one plugin, looked up once (when it is loaded) instead of by label
/// at every instance ([`Metrics::wasm_instances`]).
#[derive(Debug, Clone)]
pub struct InstanceCounters {
    made: Counter,
    alive: Gauge,
    waited: Counter,
}

impl InstanceCounters {
    /// An instance found no room in the pool at once: it waits.
    pub fn waited(&self) {
        self.waited.inc();
    }

    /// An instance is being made: counted, and alive until the returned guard is dropped (with
    /// the instance's store).
    pub fn made(&self) -> InstanceAlive {
        self.made.inc();
        self.alive.inc();
        InstanceAlive {
            alive: self.alive.clone(),
        }
    }
}

/// One plugin instance counted in `orchard_wasm_instances_alive` until dropped.
#[derive(Debug)]
#[must_use = "the instance counts as alive only while the guard lives"]
pub struct InstanceAlive {
    alive: Gauge,
}

impl Drop for InstanceAlive {
    fn drop(&mut self) {
        self.alive.dec();
    }
}

/// The process's metrics.
pub fn global() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(Metrics::new)
}

impl Metrics {
    fn new() -> Self {
        let mut registry = Registry::with_prefix("orchard");
        let reconciles = Family::<ReconcileLabels, Counter>::default();
        registry.register("reconciles", "Reconciles by result", reconciles.clone());
        let reconcile_duration: Histograms<KindLabels> =
            Family::new_with_constructor(seconds_buckets);
        registry.register(
            "reconcile_duration_seconds",
            "Duration of one reconcile",
            reconcile_duration.clone(),
        );
        let errors = Family::<ErrorLabels, Counter>::default();
        registry.register(
            "reconcile_errors",
            "Failed reconciles by condition reason",
            errors.clone(),
        );
        let wasm_calls: Histograms<CallLabels> = Family::new_with_constructor(seconds_buckets);
        registry.register(
            "wasm_call_duration_seconds",
            "Duration of one plugin call",
            wasm_calls.clone(),
        );
        let wasm_instances = Family::<PluginLabels, Counter>::default();
        registry.register(
            "wasm_instances",
            "Plugin instances made",
            wasm_instances.clone(),
        );
        let wasm_instances_alive = Family::<PluginLabels, Gauge>::default();
        registry.register(
            "wasm_instances_alive",
            "Plugin instances alive now",
            wasm_instances_alive.clone(),
        );
        let wasm_instance_waits = Family::<PluginLabels, Counter>::default();
        registry.register(
            "wasm_instance_waits",
            "Plugin instances that waited for room in the host's instance pool",
            wasm_instance_waits.clone(),
        );
        let wasm_pool_units = Gauge::default();
        registry.register(
            "wasm_pool_units",
            "The host's instance pool, in units (a core instance each)",
            wasm_pool_units.clone(),
        );
        let wasm_pool_units_in_use = Gauge::default();
        registry.register(
            "wasm_pool_units_in_use",
            "Units of the instance pool the plugin instances alive take",
            wasm_pool_units_in_use.clone(),
        );
        let wasm_pool_units_expected = Gauge::default();
        registry.register(
            "wasm_pool_units_expected",
            "Units of the instance pool the running kinds' controllers may take at once (concurrency × weight)",
            wasm_pool_units_expected.clone(),
        );
        let queue_depth = Family::<PluginLabels, Gauge>::default();
        registry.register(
            "queue_depth",
            "Objects waiting for a scheduled reconcile",
            queue_depth.clone(),
        );
        let held_back = Family::<PluginLabels, Counter>::default();
        registry.register(
            "passes_held_back",
            "Passes that waited for the cache to hold the host's own last write",
            held_back.clone(),
        );
        let stale_passes = Family::<PluginLabels, Counter>::default();
        registry.register(
            "passes_on_stale_cache",
            "Passes that ran on an object older than the host's own last write to it",
            stale_passes.clone(),
        );
        let load_failures = Family::<PluginLabels, Counter>::default();
        registry.register(
            "plugin_load_failures",
            "Plugins that failed to load",
            load_failures.clone(),
        );
        let events_dropped = Family::<PluginLabels, Counter>::default();
        registry.register(
            "events_dropped",
            "Events not posted because the Event lanes were full",
            events_dropped.clone(),
        );
        let http_connections = Family::<PluginLabels, Counter>::default();
        registry.register(
            "plugin_http_connections",
            "Connections opened by plugins' outbound HTTP",
            http_connections.clone(),
        );
        let http_failures = Family::<HttpFailureLabels, Counter>::default();
        registry.register(
            "plugin_http_failures",
            "Plugins' outbound requests without an answer, by why",
            http_failures.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 when this host holds the leader lease",
            leader.clone(),
        );
        let ready = Gauge::default();
        registry.register(
            "ready",
            "1 when the host is ready (/readyz), as of the scrape",
            ready.clone(),
        );
        let objects = Family::<ObjectLabels, Gauge>::default();
        registry.register(
            "objects",
            "Objects by the state their last pass left them in",
            objects.clone(),
        );
        let unsettled_oldest = Family::<KindLabels, Gauge>::default();
        registry.register(
            "objects_unsettled_oldest_seconds",
            "How long the longest progressing or retrying object has been so",
            unsettled_oldest.clone(),
        );
        let unlabelled_oldest = Family::<KindLabels, Gauge>::default();
        registry.register(
            "shard_unlabelled_oldest_seconds",
            "How long the oldest object of a bucket this replica serves has waited for its shard bucket label (0: none)",
            unlabelled_oldest.clone(),
        );
        let conversions = Family::<ConversionLabels, Counter>::default();
        registry.register(
            "conversions",
            "Objects the conversion webhook converted, by result",
            conversions.clone(),
        );
        let migrated = Family::<PluginLabels, Counter>::default();
        registry.register(
            "storage_migrated_objects",
            "Objects rewritten at their kind's storage version",
            migrated.clone(),
        );
        Self {
            registry,
            reconciles,
            reconcile_duration,
            errors,
            wasm_calls,
            wasm_instances,
            wasm_instances_alive,
            wasm_instance_waits,
            wasm_pool_units,
            wasm_pool_units_in_use,
            wasm_pool_units_expected,
            queue_depth,
            held_back,
            stale_passes,
            load_failures,
            events_dropped,
            http_connections,
            http_failures,
            leader,
            ready,
            objects,
            unsettled_oldest,
            unlabelled_oldest,
            conversions,
            migrated,
        }
    }

    /// An object of `plugin`'s `kind` went from state `from` to state `to` (`None`: not
    /// counted, i.e. new or gone).
    pub fn object_state(
        &self,
        plugin: &str,
        kind: &str,
        from: Option<&'static str>,
        to: Option<&'static str>,
    ) {
        let gauge = |state| {
            self.objects.get_or_create(&ObjectLabels {
                plugin: plugin.to_owned(),
                kind: kind.to_owned(),
                state,
            })
        };
        if let Some(state) = from {
            gauge(state).dec();
        }
        if let Some(state) = to {
            gauge(state).inc();
        }
    }

    /// The longest an object of `plugin`'s `kind` has been progressing or retrying.
    pub fn set_unsettled_oldest(&self, plugin: &str, kind: &str, seconds: i64) {
        self.unsettled_oldest
            .get_or_create(&KindLabels {
                plugin: plugin.to_owned(),
                kind: kind.to_owned(),
            })
            .set(seconds);
    }

    /// The longest an object of `plugin`'s `kind`, in a bucket this replica serves, has waited
    /// for its shard bucket label.
    pub fn set_unlabelled_oldest(&self, plugin: &str, kind: &str, seconds: i64) {
        self.unlabelled_oldest
            .get_or_create(&KindLabels {
                plugin: plugin.to_owned(),
                kind: kind.to_owned(),
            })
            .set(seconds);
    }

    /// One reconcile finished with `result` (`success`, `progressing`, a condition reason, or `error`).
    pub fn reconciled(&self, plugin: &str, kind: &str, result: &str, elapsed: Duration) {
        let labels = KindLabels {
            plugin: plugin.to_owned(),
            kind: kind.to_owned(),
        };
        self.reconcile_duration
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
        self.reconciles
            .get_or_create(&ReconcileLabels {
                plugin: plugin.to_owned(),
                kind: kind.to_owned(),
                result: result.to_owned(),
            })
            .inc();
        if !matches!(result, "success" | "progressing") {
            self.errors
                .get_or_create(&ErrorLabels {
                    plugin: plugin.to_owned(),
                    kind: kind.to_owned(),
                    reason: result.to_owned(),
                })
                .inc();
        }
    }

    /// One plugin call finished: `ok`, or why it gave no answer (`deadline`, `memory-cap`,
    /// `trap`, `contract`, `instantiate`, `pool-full`).
    pub fn wasm_call(&self, plugin: &str, function: &str, outcome: &str, elapsed: Duration) {
        self.wasm_calls
            .get_or_create(&CallLabels {
                plugin: plugin.to_owned(),
                function: function.to_owned(),
                outcome: outcome.to_owned(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// The instance counters of `plugin` (`orchard_wasm_instances_total`,
    /// `orchard_wasm_instances_alive`, `orchard_wasm_instance_waits_total`), all exported at 0
    /// from now on.
    pub fn wasm_instances(&self, plugin: &str) -> InstanceCounters {
        let labels = PluginLabels {
            plugin: plugin.to_owned(),
        };
        InstanceCounters {
            made: self.wasm_instances.get_or_create(&labels).clone(),
            alive: self.wasm_instances_alive.get_or_create(&labels).clone(),
            waited: self.wasm_instance_waits.get_or_create(&labels).clone(),
        }
    }

    /// The instance pool's gauges: its budget (set to `units`); the units in use, and those the
    /// running controllers expect to take at once.
    pub fn wasm_pool(&self, units: u32) -> (Gauge, Gauge) {
        self.wasm_pool_units.set(i64::from(units));
        (
            self.wasm_pool_units_in_use.clone(),
            self.wasm_pool_units_expected.clone(),
        )
    }

    /// A pass of `plugin` waited for the cache to hold the host's own last write.
    pub fn pass_held_back(&self, plugin: &str) {
        self.held_back
            .get_or_create(&PluginLabels {
                plugin: plugin.to_owned(),
            })
            .inc();
    }

    /// A pass of `plugin` ran on an object older than the host's own last write to it: the
    /// cache had not caught up within its limit.
    pub fn pass_on_stale_cache(&self, plugin: &str) {
        self.stale_passes
            .get_or_create(&PluginLabels {
                plugin: plugin.to_owned(),
            })
            .inc();
    }

    /// The objects `plugin`'s work queue holds: due, being passed, or waiting for a time.
    pub fn set_queue_depth(&self, plugin: &str, depth: usize) {
        self.queue_depth
            .get_or_create(&PluginLabels {
                plugin: plugin.to_owned(),
            })
            .set(i64::try_from(depth).unwrap_or(i64::MAX));
    }

    /// A plugin loaded: its counters of failures start at zero — its load failures, dropped
    /// Events and outbound HTTP failures by each of `http_failures` — so that the series exist
    /// to alert on and a rate sees the first one.
    pub fn plugin_loaded(&self, plugin: &str, http_failures: &[&'static str]) {
        let labels = PluginLabels {
            plugin: plugin.to_owned(),
        };
        let _ = self.load_failures.get_or_create(&labels);
        let _ = self.events_dropped.get_or_create(&labels);
        let _ = self.held_back.get_or_create(&labels);
        let _ = self.stale_passes.get_or_create(&labels);
        for &error in http_failures {
            let _ = self.http_failures.get_or_create(&HttpFailureLabels {
                plugin: plugin.to_owned(),
                error,
            });
        }
    }

    /// `plugin` serves `kind`: its failing passes by each reason in `reasons`, its objects by
    /// each state, the age of its longest-unsettled object and of its oldest object waiting
    /// for a shard label start at zero.
    pub fn kind_served(&self, plugin: &str, kind: &str, reasons: &[&str]) {
        for reason in reasons {
            let _ = self.errors.get_or_create(&ErrorLabels {
                plugin: plugin.to_owned(),
                kind: kind.to_owned(),
                reason: (*reason).to_owned(),
            });
        }
        for state in ["up_to_date", "progressing", "retrying", "failed", "paused"] {
            let _ = self.objects.get_or_create(&ObjectLabels {
                plugin: plugin.to_owned(),
                kind: kind.to_owned(),
                state,
            });
        }
        let _ = self.unsettled_oldest.get_or_create(&KindLabels {
            plugin: plugin.to_owned(),
            kind: kind.to_owned(),
        });
        // 0 outside a shard ring: nothing waits for a label there.
        let _ = self.unlabelled_oldest.get_or_create(&KindLabels {
            plugin: plugin.to_owned(),
            kind: kind.to_owned(),
        });
    }

    /// A plugin failed to load.
    pub fn plugin_load_failed(&self, plugin: &str) {
        self.load_failures
            .get_or_create(&PluginLabels {
                plugin: plugin.to_owned(),
            })
            .inc();
    }

    /// The conversion webhook converted `n` objects of `plugin` (`ok`), or failed one.
    pub fn converted(&self, plugin: &str, ok: bool, n: u64) {
        self.conversions
            .get_or_create(&ConversionLabels {
                plugin: plugin.to_owned(),
                result: if ok { "ok" } else { "failed" },
            })
            .inc_by(n);
    }

    /// `n` objects of `plugin` were rewritten at the storage version.
    pub fn migrated(&self, plugin: &str, n: u64) {
        self.migrated
            .get_or_create(&PluginLabels {
                plugin: plugin.to_owned(),
            })
            .inc_by(n);
    }

    /// An Event of `plugin` was dropped: its lane was full.
    pub fn event_dropped(&self, plugin: &str) {
        self.events_dropped
            .get_or_create(&PluginLabels {
                plugin: plugin.to_owned(),
            })
            .inc();
    }

    /// `plugin`'s outbound HTTP opened a connection.
    pub fn http_connection_opened(&self, plugin: &str) {
        self.http_connections
            .get_or_create(&PluginLabels {
                plugin: plugin.to_owned(),
            })
            .inc();
    }

    /// An outbound request of `plugin` got no answer, for the reason `error` names.
    pub fn http_request_failed(&self, plugin: &str, error: &'static str) {
        self.http_failures
            .get_or_create(&HttpFailureLabels {
                plugin: plugin.to_owned(),
                error,
            })
            .inc();
    }

    /// Whether the host is ready, as `/readyz` says.
    pub fn set_ready(&self, ready: bool) {
        self.ready.set(i64::from(ready));
    }

    /// This host became (or stopped being) the leader.
    pub fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::error!(error = %e, "could not encode metrics");
        }
        out
    }
}
