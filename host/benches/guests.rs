//! What a call and a load cost for guests written in Python and JavaScript, beside Rust
//! (docs/benchmarks.md, "Python and JavaScript guests").
//!
//! The guests are the real plugins: `rabbitmq-vhost` (Python, componentize-py),
//! `rabbitmq-user` (JavaScript, componentize-js) and `pdns-zone` (Rust) for comparison. Their
//! calls measured here do no I/O:
//!
//! - `call/<lang>/observed`: one `observed` (a resource's state in, `status.resource` out)
//!   through a fresh store and instance, as the host makes one for every call;
//! - `call/<lang>/reconcilers`: one `reconcilers` (object with spec and resource in, the SDK
//!   parses both, a list out), also a fresh instance;
//! - `load/<lang>/cached`: `Runtime::load` from a warm compiled-component cache (hash the bytes,
//!   deserialise the native code, link).
//! - `pass/<lang>/{fresh_instances,one_instance}`: the calls of a reconcile pass that do no
//!   I/O — `reconcilers`, `available`, `observed` — with a fresh instance for each call (the
//!   host before issue 13) and on one pass view ([`Actuator::for_pass`]: one instance for the
//!   pass, made at its first call), so the difference is what one instance per pass saves;
//! - `pass/<lang>/first_call_only`: a pass view's first call alone (`observed`): the instance
//!   and one call on it;
//! - `pass/<lang>/one_instance_twice`: the pass's three calls twice on one view: what the
//!   second round adds is what a call costs on a warm instance (the first call of each
//!   function on a fresh instance costs more: docs/benchmarks.md, "Session 11").
//!
//! A cold compile (Cranelift, no cache) of the Python and JavaScript components takes seconds:
//! it is not sampled. The benchmark keeps its compiled components in `<target>/bench-cache`
//! (`ORCHARD_BENCH_CACHE` overrides it) and prints each first load's time, which is the cold
//! compile when that cache is empty (`rm -r target/bench-cache` to measure it again).
//!
//! Needs the components: `make plugins`. `ORCHARD_PLUGIN_DIR` overrides where they are looked
//! for. Run: `cargo bench -p orchard --bench guests`.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "benchmark code")]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use orchard::actuator::{Actuator, ExternalResource, ManagedObject};
use orchard::runtime::{ComponentActuator, PluginConfig, Runtime};
use serde_json::{Value, json};

/// The suites' one paths module (target directory, plugins, the `orchard` binary).
#[allow(dead_code, reason = "the bench uses the target directory only")]
#[path = "../../tests/e2e/src/paths.rs"]
mod paths;

fn plugin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("ORCHARD_PLUGIN_DIR") {
        return dir.into();
    }
    paths::target_dir().join("wasm32-wasip2/plugin")
}

/// A runtime with the benchmark's persistent compiled-component cache.
fn runtime() -> Runtime {
    let dir = std::env::var_os("ORCHARD_BENCH_CACHE")
        .map_or_else(|| paths::target_dir().join("bench-cache"), PathBuf::from);
    Runtime::new(Some(dir)).unwrap()
}

fn component(file: &str) -> PathBuf {
    let path = plugin_dir().join(file);
    assert!(
        path.is_file(),
        "{} not found: run `make plugins` first (or set ORCHARD_PLUGIN_DIR)",
        path.display()
    );
    path
}

/// One guest: its component, an object with a spec and a resource with a state of its kind.
struct Guest {
    lang: &'static str,
    file: &'static str,
    spec: Value,
    resource: ExternalResource,
}

fn guests() -> Vec<Guest> {
    vec![
        Guest {
            lang: "rust",
            file: "pdns_zone.wasm",
            spec: json!({"name": "example.org.", "kind": "Native", "account": "platform",
                         "nameservers": ["ns1.example.org.", "ns2.example.org."]}),
            resource: ExternalResource {
                id: "example.org.".into(),
                state: json!({"id": "example.org.", "name": "example.org.", "kind": "Native",
                              "serial": 2_026_112_901, "account": "platform", "dnssec": false}),
            },
        },
        Guest {
            lang: "python",
            file: "rabbitmq_vhost.wasm",
            spec: json!({"name": "orders", "description": "Orders of team A",
                         "tags": ["prod", "team-a"], "tracing": false, "maxQueues": 20}),
            resource: ExternalResource {
                id: "orders".into(),
                state: json!({"name": "orders", "description": "Orders of team A",
                              "tags": ["prod", "team-a"], "tracing": false,
                              "limits": {"max-queues": 20}}),
            },
        },
        Guest {
            lang: "js",
            file: "rabbitmq_user.wasm",
            spec: json!({"name": "app", "tags": ["monitoring"], "passwordKey": "appPassword",
                         "permissions": [{"vhost": "orders", "read": "^app\\."}]}),
            resource: ExternalResource {
                id: "app".into(),
                state: json!({"name": "app", "tags": ["monitoring"], "hasPassword": true,
                              "permissions": [{"vhost": "orders", "configure": ".*",
                                               "write": ".*", "read": "^app\\."}]}),
            },
        },
    ]
}

fn object(spec: &Value, id: &str) -> ManagedObject {
    ManagedObject {
        name: "example".into(),
        namespace: "prod".into(),
        uid: "5f0c6a3e-8d1b-4c2a-9a77-3b1de4f0c912".into(),
        generation: 3,
        labels: BTreeMap::from([("team".into(), "platform".into())]),
        annotations: BTreeMap::new(),
        spec: Some(spec.clone()),
        status_id: Some(id.into()),
        dependencies: Vec::new(),
        credentials: BTreeMap::from([
            ("url".into(), b"http://127.0.0.1:15672".to_vec()),
            ("username".into(), b"admin".to_vec()),
            ("password".into(), b"secret".to_vec()),
        ]),
    }
}

fn tokio() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn calls(c: &mut Criterion) {
    let rt = tokio();
    let runtime = runtime();
    eprintln!("allocation strategy: {:?}", runtime.allocation());
    for guest in guests() {
        let path = component(guest.file);
        let started = Instant::now();
        let actuator: ComponentActuator = runtime
            .load_file(&path, None, PluginConfig::default())
            .unwrap();
        eprintln!(
            "{} ({}): {} bytes, first load {:.2} s",
            guest.lang,
            guest.file,
            std::fs::metadata(&path).unwrap().len(),
            started.elapsed().as_secs_f64()
        );
        let obj = object(&guest.spec, &guest.resource.id);
        let res = &guest.resource;
        // Both calls answer, without failing.
        let observed = rt.block_on(actuator.observed(res)).unwrap();
        assert!(observed.is_object(), "{}: observed {observed}", guest.lang);
        let names = rt.block_on(actuator.reconcilers(&obj, res)).unwrap();
        assert!(names.is_ok(), "{}: reconcilers {names:?}", guest.lang);

        let mut group = c.benchmark_group(format!("call/{}", guest.lang));
        group.warm_up_time(Duration::from_secs(2));
        group.measurement_time(Duration::from_secs(5));
        group.bench_function("observed", |bench| {
            bench
                .to_async(&rt)
                .iter(|| async { actuator.observed(res).await.unwrap() });
        });
        group.bench_function("reconcilers", |bench| {
            bench
                .to_async(&rt)
                .iter(|| async { actuator.reconcilers(&obj, res).await.unwrap() });
        });
        group.finish();
    }
}

/// The calls of a pass that do no I/O, on `actuator`.
async fn pass_calls(actuator: &dyn Actuator, obj: &ManagedObject, res: &ExternalResource) {
    actuator.reconcilers(obj, res).await.unwrap().unwrap();
    actuator.available(obj, res).await.unwrap();
    actuator.observed(res).await.unwrap();
}

fn passes(c: &mut Criterion) {
    let rt = tokio();
    let runtime = runtime();
    for guest in guests() {
        let actuator: ComponentActuator = runtime
            .load_file(&component(guest.file), None, PluginConfig::default())
            .unwrap();
        let obj = object(&guest.spec, &guest.resource.id);
        let res = &guest.resource;
        let mut group = c.benchmark_group(format!("pass/{}", guest.lang));
        group.warm_up_time(Duration::from_secs(2));
        group.measurement_time(Duration::from_secs(5));
        group.bench_function("fresh_instances", |bench| {
            bench
                .to_async(&rt)
                .iter(|| async { pass_calls(&actuator, &obj, res).await });
        });
        group.bench_function("one_instance", |bench| {
            bench.to_async(&rt).iter(|| async {
                let view = actuator.for_pass().unwrap();
                pass_calls(&*view, &obj, res).await;
            });
        });
        group.bench_function("one_instance_twice", |bench| {
            bench.to_async(&rt).iter(|| async {
                let view = actuator.for_pass().unwrap();
                pass_calls(&*view, &obj, res).await;
                pass_calls(&*view, &obj, res).await;
            });
        });
        group.bench_function("first_call_only", |bench| {
            bench.to_async(&rt).iter(|| async {
                let view = actuator.for_pass().unwrap();
                view.observed(res).await.unwrap();
            });
        });
        group.finish();
    }
}

fn loads(c: &mut Criterion) {
    let cached = runtime();
    for guest in guests() {
        let bytes = std::fs::read(component(guest.file)).unwrap();
        // Fill the cache, then measure loads that hit it.
        cached
            .load(guest.lang, &bytes, PluginConfig::default())
            .unwrap();
        let mut group = c.benchmark_group(format!("load/{}", guest.lang));
        group.sampling_mode(SamplingMode::Flat);
        group.sample_size(20);
        group.warm_up_time(Duration::from_secs(1));
        group.measurement_time(Duration::from_secs(3));
        group.bench_function("cached", |bench| {
            bench.iter(|| {
                cached
                    .load(guest.lang, &bytes, PluginConfig::default())
                    .unwrap()
            });
        });
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default();
    targets = calls, passes, loads
}
criterion_main!(benches);
