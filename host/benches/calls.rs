//! What a plugin call costs, and what loading a plugin costs (docs/benchmarks.md).
//!
//! - `call/get_by_id/*`: one `get-by-id` on the echo fixture (no I/O), through a fresh store and
//!   instance from the component (`component`) and through the same actuator linked natively
//!   (`native`); the difference is the Wasm boundary. `component_bare_object` is the same call
//!   with an object without spec, labels or annotations: the fixed cost of a fresh instance.
//! - `load/*/compile_cold`: `Runtime::load` with no cache directory (Cranelift compiles the
//!   component every time).
//! - `load/*/cached`: `Runtime::load` from a warm compiled-component cache (hash the bytes,
//!   deserialise the native code, link).
//! - `call/<lang>/observed`: one `observed` (a resource's state in, `status.resource` out, no
//!   I/O) through a fresh store and instance, for the guests written with the Go and C SDKs
//!   (`rabbitmq-exchange`, `pdns-tsig`) beside the Rust `pdns-zone`; their loads are in
//!   `load/*` too.
//! - `call/pdns-zone/{observed,get_by_id_http,create_http}/<build>`: pdns-zone's calls through a
//!   fresh store and instance — `observed` without I/O, `get-by-id` (one GET) and `create` (one
//!   POST with a JSON body) through its HTTP client to a loopback stand-in of the PowerDNS API
//!   (keep-alive, answers a zone), the plugin's connection pool reused between calls. `<build>`
//!   is `current`, and for each directory of `ORCHARD_BENCH_BASELINE_DIRS` (`:`-separated)
//!   that holds a `pdns_zone.wasm`, that build, named after the directory: other builds measured in the same run,
//!   interleaved (before/after a change of the plugin or its SDK; `load/pdns-zone-<dir>/*` too);
//!   with `ORCHARD_BENCH_INTERLEAVED=<n>`, call by call as well (below).
//! - `call/{go-rabbitmq-exchange,python-rabbitmq-vhost}/{observed,get_by_id_http,create_http}/<build>`:
//!   the same for the Go and Python actuators on their standard HTTP clients (net/http through
//!   `orchard.Transport()`, `requests` through the SDK's transport adapter), against a loopback
//!   stand-in of RabbitMQ's management API — `get-by-id` is three GETs for the exchange (it,
//!   its bindings, its policy) and two for the vhost (it, its limits), `create` one PUT with a
//!   JSON body. Their `<build>`s: `current`, and each directory of `ORCHARD_BENCH_BASELINE_DIRS`
//!   that holds `rabbitmq_exchange.wasm` or `rabbitmq_vhost.wasm` (a directory without a
//!   plugin's file is left out of that plugin's groups). With `ORCHARD_BENCH_INTERLEAVED=<n>`,
//!   their builds also take turns call by call, `n` calls each, and the median and quartiles
//!   are printed (for a loaded machine, where criterion's seconds per build see different loads).
//!
//! Needs the plugin components: `make plugins` (or `make bench`, which builds them first).
//! `ORCHARD_PLUGIN_DIR` overrides where they are looked for.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "benchmark code")]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, criterion_group, criterion_main};
use orchard::actuator::{Actuator, Dependency, ExternalResource, ManagedObject, NativeActuator};
use orchard::runtime::{ComponentActuator, EgressPolicy, PluginConfig, Runtime};
use orchard_fixture_echo::Echo;
use serde_json::json;

/// The directory of the built components.
fn plugin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("ORCHARD_PLUGIN_DIR") {
        return dir.into();
    }
    paths::target_dir().join("wasm32-wasip2/plugin")
}

mod loopback {
    // Shared with the egress unit tests (src/runtime/egress.rs) and benches/egress.rs.
    #![allow(dead_code, reason = "this benchmark serves plain HTTP only")]
    include!("support/loopback.rs");
}

/// The suites' one paths module (target directory, plugins, the `orchard` binary).
#[allow(dead_code, reason = "the bench uses the target directory only")]
#[path = "../../tests/e2e/src/paths.rs"]
mod paths;

/// A component's path; stops with a hint when it has not been built.
fn component(file: &str) -> PathBuf {
    let path = plugin_dir().join(file);
    assert!(
        path.is_file(),
        "{} not found: run `make plugins` first (or set ORCHARD_PLUGIN_DIR)",
        path.display()
    );
    path
}

/// A realistic object: full metadata and a spec of ten fields.
fn object() -> ManagedObject {
    ManagedObject {
        name: "example-org".into(),
        namespace: "dns-prod".into(),
        uid: "5f0c6a3e-8d1b-4c2a-9a77-3b1de4f0c912".into(),
        generation: 3,
        labels: BTreeMap::from([
            ("app.kubernetes.io/part-of".into(), "website".into()),
            ("team".into(), "platform".into()),
        ]),
        annotations: BTreeMap::from([("orchard.dev/owner".into(), "platform@example.org".into())]),
        spec: Some(json!({
            "name": "example.org.",
            "kind": "Native",
            "account": "platform",
            "nameservers": ["ns1.example.org.", "ns2.example.org."],
            "ttl": 3600,
            "soaEditApi": "DEFAULT",
            "dnssec": false,
            "masters": [],
            "catalog": "",
            "description": "Public zone of the company website",
        })),
        status_id: Some("example.org.".into()),
        dependencies: Vec::new(),
        credentials: BTreeMap::new(),
    }
}

fn tokio() -> tokio::runtime::Runtime {
    // Current-thread, like one reconcile worker; time is needed by the call deadline.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn calls(c: &mut Criterion) {
    let rt = tokio();
    let runtime = Runtime::new(None).unwrap();
    eprintln!("allocation strategy: {:?}", runtime.allocation());
    let wasm = runtime
        .load_file(
            &component("orchard_fixture_echo.wasm"),
            None,
            PluginConfig::default(),
        )
        .unwrap();
    let native = NativeActuator::<Echo>::new();
    let obj = object();

    // Both answer the same thing.
    let a = rt
        .block_on(wasm.get_by_id(&obj, "example.org."))
        .unwrap()
        .unwrap();
    let b = rt
        .block_on(native.get_by_id(&obj, "example.org."))
        .unwrap()
        .unwrap();
    assert_eq!(a, b);
    assert_eq!(a.as_ref().map(|r| &r.state), obj.spec.as_ref());

    let mut group = c.benchmark_group("call/get_by_id");
    group.warm_up_time(Duration::from_secs(2));
    group.measurement_time(Duration::from_secs(5));
    group.bench_function("component", |bench| {
        bench
            .to_async(&rt)
            .iter(|| async { wasm.get_by_id(&obj, "example.org.").await.unwrap() });
    });
    // The fixed cost of a fresh instance: the same call with an object that has no spec,
    // labels or annotations (next to nothing to copy in, parse or write out).
    let bare = ManagedObject {
        name: "example-org".into(),
        ..ManagedObject::default()
    };
    group.bench_function("component_bare_object", |bench| {
        bench
            .to_async(&rt)
            .iter(|| async { wasm.get_by_id(&bare, "example.org.").await.unwrap() });
    });
    group.bench_function("native", |bench| {
        bench
            .to_async(&rt)
            .iter(|| async { native.get_by_id(&obj, "example.org.").await.unwrap() });
    });
    group.finish();
}

/// The guests of the per-call comparison: language, component, a resource of its kind.
fn guests() -> Vec<(&'static str, &'static str, ExternalResource)> {
    vec![
        (
            "rust",
            "pdns_zone.wasm",
            ExternalResource {
                id: "example.org.".into(),
                state: json!({"id": "example.org.", "name": "example.org.", "kind": "Native",
                              "serial": 2_026_112_901, "account": "platform", "dnssec": false}),
            },
        ),
        (
            "go",
            "rabbitmq_exchange.wasm",
            ExternalResource {
                id: "orders/events".into(),
                state: json!({"vhost": "orders", "name": "events", "type": "topic",
                              "durable": true, "autoDelete": false, "internal": false,
                              "arguments": {}, "bindings": [{"exchange": "amq.topic",
                              "routingKey": "orders.#", "propertiesKey": "orders.%23"}],
                              "policy": {"alternate-exchange": "unrouted"}}),
            },
        ),
        (
            "c",
            "pdns_tsig.wasm",
            ExternalResource {
                id: "transfer.example.org.".into(),
                state: json!({"name": "transfer.example.org", "algorithm": "hmac-sha256"}),
            },
        ),
    ]
}

/// A fresh-instance `observed` of each guest (no I/O): the Go runtime's start, the C SDK's
/// JSON, against the Rust SDK's.
fn guest_calls(c: &mut Criterion) {
    let rt = tokio();
    let runtime = Runtime::new(None).unwrap();
    for (lang, file, res) in guests() {
        let actuator = runtime
            .load_file(&component(file), None, PluginConfig::default())
            .unwrap();
        let observed = rt.block_on(actuator.observed(&res)).unwrap();
        assert!(observed.is_object(), "{lang}: observed {observed}");
        let mut group = c.benchmark_group(format!("call/{lang}"));
        group.warm_up_time(Duration::from_secs(2));
        group.measurement_time(Duration::from_secs(5));
        group.bench_function("observed", |bench| {
            bench
                .to_async(&rt)
                .iter(|| async { actuator.observed(&res).await.unwrap() });
        });
        group.finish();
    }
}

/// The builds of the plugin in `file` to measure: the current one (`current`), and the one in
/// each directory of `ORCHARD_BENCH_BASELINE_DIRS` that holds `file`, named after the
/// directory.
fn builds(file: &str) -> Vec<(String, PathBuf)> {
    let mut builds = vec![("current".to_owned(), component(file))];
    if let Some(dirs) = std::env::var_os("ORCHARD_BENCH_BASELINE_DIRS") {
        for dir in std::env::split_paths(&dirs) {
            let path = dir.join(file);
            if path.is_file() {
                let name = dir.file_name().unwrap().to_string_lossy().into_owned();
                builds.push((name, path));
            }
        }
    }
    builds
}

/// `200` with `body` as JSON, on a keep-alive connection.
fn json_answer(body: &'static str) -> loopback::Response {
    let mut response = http::Response::new(http_body_util::Full::new(bytes::Bytes::from_static(
        body.as_bytes(),
    )));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// The zone the stand-in answers every request with.
const ZONE: &str = r#"{"id":"example.org.","name":"example.org.","kind":"Native","serial":2026112901,"account":"platform","dnssec":false,"rrsets":[]}"#;

/// A keep-alive HTTP server on loopback answering every request with [`ZONE`]; its URL, and
/// the number of connections it accepted.
async fn zone_server() -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let accepted = loopback::serve(listener, |_request| async { json_answer(ZONE) });
    (url, accepted)
}

/// pdns-zone's calls, of each build, in one run: `observed` (no I/O), and `get-by-id` and
/// `create` through its HTTP client to a loopback stand-in of the API.
fn pdns_zone_calls(c: &mut Criterion) {
    let rt = tokio();
    let runtime = Runtime::new(None).unwrap();
    let (url, accepted) = rt.block_on(zone_server());
    let mut obj = object();
    obj.spec = Some(json!({
        "name": "example.org.",
        "kind": "Native",
        "account": "platform",
        "nameservers": ["ns1.example.org.", "ns2.example.org."],
    }));
    obj.credentials = BTreeMap::from([
        ("url".to_owned(), url.clone().into_bytes()),
        ("apiKey".to_owned(), b"bench".to_vec()),
    ]);
    let zone = ExternalResource {
        id: "example.org.".into(),
        state: serde_json::from_str(ZONE).unwrap(),
    };
    let builds = load_builds(&runtime, "pdns_zone.wasm", &url);
    for (build, actuator) in &builds {
        let got = rt
            .block_on(actuator.get_by_id(&obj, "example.org."))
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(got.id, "example.org.", "{build}");
        let created = rt.block_on(actuator.create(&obj)).unwrap().unwrap();
        assert_eq!(created.id, "example.org.", "{build}");
    }
    interleaved(&rt, "pdns-zone", &builds, &obj, &zone);
    bench_builds(c, &rt, "pdns-zone", &builds, &obj, &zone);
    // Each build's pool keeps its connection: a few connections for every call of the run.
    eprintln!(
        "pdns-zone stand-in: {} connections accepted",
        accepted.load(Ordering::Relaxed)
    );
}

/// The exchange, its bindings and its policy, and the vhost and its limits, as RabbitMQ's
/// management API answers them.
const EXCHANGE: &str = r#"{"name":"events","vhost":"orders","type":"topic","durable":true,"auto_delete":false,"internal":false,"arguments":{}}"#;
const BINDINGS: &str = r#"[{"source":"amq.topic","vhost":"orders","destination":"events","destination_type":"exchange","routing_key":"orders.#","arguments":{},"properties_key":"orders.%23"}]"#;
const POLICY: &str = r#"{"vhost":"orders","name":"orchard.exchange.events","pattern":"^events$","apply-to":"exchanges","definition":{"alternate-exchange":"unrouted"},"priority":100}"#;
const VHOST: &str = r#"{"name":"orders","description":"Orders of the web shop","tags":["shop","prod"],"tracing":false,"default_queue_type":"classic","metadata":{"description":"Orders of the web shop","tags":["shop","prod"]}}"#;
const VHOST_LIMITS: &str =
    r#"[{"vhost":"orders","value":{"max-connections":100,"max-queues":10}}]"#;

/// A keep-alive stand-in of RabbitMQ's management API on loopback: the GETs of the exchange,
/// its bindings and policy, and of the vhost and its limits, answered as above; a PUT `201`
/// without a body (as RabbitMQ answers a declaration); anything else `404`. Its URL, and the
/// number of connections it accepted.
async fn rabbitmq_server() -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let accepted = loopback::serve(listener, |request: http::request::Parts| async move {
        let body = match (request.method.as_str(), request.uri.path()) {
            ("GET", "/api/exchanges/orders/events") => EXCHANGE,
            ("GET", "/api/exchanges/orders/events/bindings/destination") => BINDINGS,
            ("GET", "/api/policies/orders/orchard.exchange.events") => POLICY,
            ("GET", "/api/vhosts/orders") => VHOST,
            ("GET", "/api/vhost-limits/orders") => VHOST_LIMITS,
            ("PUT", _) => {
                let mut created = loopback::Response::default();
                *created.status_mut() = http::StatusCode::CREATED;
                return created;
            }
            _ => {
                let mut missing =
                    json_answer(r#"{"error":"Object Not Found","reason":"Not Found"}"#);
                *missing.status_mut() = http::StatusCode::NOT_FOUND;
                return missing;
            }
        };
        json_answer(body)
    });
    (url, accepted)
}

/// A RabbitMQ actuator of the comparison: its group's name, component, an object to create
/// (which `get-by-id` also takes) and the resource it reads back.
struct RabbitGuest {
    name: &'static str,
    file: &'static str,
    object: ManagedObject,
    resource: ExternalResource,
}

/// The Go exchange and the Python vhost, with credentials for the stand-in at `url`.
fn rabbitmq_guests(url: &str) -> Vec<RabbitGuest> {
    let base = ManagedObject {
        namespace: "shop".into(),
        uid: "0c9f4f5e-0d6b-4a57-a1e5-6b8f0c2d1a33".into(),
        generation: 1,
        credentials: BTreeMap::from([
            ("url".to_owned(), url.as_bytes().to_vec()),
            ("username".to_owned(), b"bench".to_vec()),
            ("password".to_owned(), b"bench".to_vec()),
        ]),
        ..ManagedObject::default()
    };
    vec![
        RabbitGuest {
            name: "go-rabbitmq-exchange",
            file: "rabbitmq_exchange.wasm",
            object: ManagedObject {
                name: "events".into(),
                spec: Some(
                    json!({"vhostRef": "orders", "name": "events", "type": "topic",
                                  "durable": true, "bindings": [{"exchange": "amq.topic",
                                  "routingKey": "orders.#"}], "alternateExchange": "unrouted"}),
                ),
                status_id: Some("orders/events".into()),
                dependencies: vec![Dependency {
                    name: "vhost".into(),
                    kind: "RabbitVhost".into(),
                    object: "orders".into(),
                    id: Some("orders".into()),
                    observed: None,
                }],
                ..base.clone()
            },
            resource: ExternalResource {
                id: "orders/events".into(),
                state: json!({"vhost": "orders", "name": "events", "type": "topic",
                              "durable": true, "autoDelete": false, "internal": false,
                              "arguments": {}, "bindings": [{"exchange": "amq.topic",
                              "routingKey": "orders.#", "propertiesKey": "orders.%23"}],
                              "policy": {"alternate-exchange": "unrouted"}}),
            },
        },
        RabbitGuest {
            name: "python-rabbitmq-vhost",
            file: "rabbitmq_vhost.wasm",
            object: ManagedObject {
                name: "orders".into(),
                spec: Some(
                    json!({"name": "orders", "description": "Orders of the web shop",
                                  "tags": ["prod", "shop"], "tracing": false,
                                  "maxConnections": 100, "maxQueues": 10}),
                ),
                status_id: Some("orders".into()),
                ..base
            },
            resource: ExternalResource {
                id: "orders".into(),
                state: json!({"name": "orders", "description": "Orders of the web shop",
                              "tags": ["prod", "shop"], "tracing": false,
                              "limits": {"max-connections": 100, "max-queues": 10}}),
            },
        },
    ]
}

/// The Go and Python RabbitMQ actuators' calls, of each build, in one run: `observed` (no
/// I/O), `get-by-id` (three GETs for the exchange, two for the vhost) and `create` (one PUT)
/// through their standard HTTP clients to a loopback stand-in of the management API.
/// Compiled components are cached under the target directory (`bench-compiled`): the Python
/// components take seconds to compile, and a run filtered to other groups still loads them.
fn rabbitmq_calls(c: &mut Criterion) {
    let rt = tokio();
    let runtime = Runtime::new(Some(paths::target_dir().join("bench-compiled"))).unwrap();
    let (url, accepted) = rt.block_on(rabbitmq_server());
    for guest in rabbitmq_guests(&url) {
        let (name, obj, res) = (guest.name, &guest.object, &guest.resource);
        let builds = load_builds(&runtime, guest.file, &url);
        for (build, actuator) in &builds {
            // Each build reads back the same resource and creates the same way.
            let got = rt
                .block_on(actuator.get_by_id(obj, &res.id))
                .unwrap()
                .unwrap()
                .unwrap();
            assert_eq!(got, *res, "{name}/{build}: get-by-id");
            let created = rt.block_on(actuator.create(obj)).unwrap().unwrap();
            assert_eq!(created.id, res.id, "{name}/{build}: create");
            let observed = rt.block_on(actuator.observed(res)).unwrap();
            assert!(observed.is_object(), "{name}/{build}: observed {observed}");
        }
        interleaved(&rt, name, &builds, obj, res);
        bench_builds(c, &rt, name, &builds, obj, res);
    }
    eprintln!(
        "RabbitMQ stand-in: {} connections accepted",
        accepted.load(Ordering::Relaxed)
    );
}

/// With `ORCHARD_BENCH_INTERLEAVED=<n>` ([`interleaved_rounds`]): each call of an actuator with
/// an HTTP API `n` times per build, the builds taking turns call by call, and the median and
/// quartiles of each build printed.
fn interleaved(
    rt: &tokio::runtime::Runtime,
    name: &str,
    builds: &[(String, ComponentActuator)],
    obj: &ManagedObject,
    res: &ExternalResource,
) {
    let Some(rounds) = interleaved_rounds() else {
        return;
    };
    for call in ["observed", "get_by_id_http", "create_http"] {
        let mut times = vec![Vec::with_capacity(rounds); builds.len()];
        for round in 0..rounds {
            // Each round starts with the next build: none is always first or last.
            for i in (0..builds.len()).map(|i| (i + round) % builds.len()) {
                let start = Instant::now();
                rt.block_on(http_call(call, &builds[i].1, obj, res));
                times[i].push(start.elapsed());
            }
        }
        for ((build, _), times) in builds.iter().zip(&mut times) {
            times.sort_unstable();
            let at = |q: usize| times[(times.len() - 1) * q / 4].as_secs_f64() * 1e6;
            eprintln!(
                "interleaved call/{name}/{call}/{build}: median {:.0} µs (quartiles {:.0}–{:.0}, {rounds} calls)",
                at(2),
                at(1),
                at(3)
            );
        }
    }
}

/// The builds of the plugin in `file` ([`builds`]), loaded with `url` on their allow-list.
fn load_builds(runtime: &Runtime, file: &str, url: &str) -> Vec<(String, ComponentActuator)> {
    builds(file)
        .into_iter()
        .map(|(build, path)| {
            let config = PluginConfig {
                egress: EgressPolicy::allowing([url]).unwrap(),
                ..PluginConfig::default()
            };
            (build, runtime.load_file(&path, None, config).unwrap())
        })
        .collect()
}

/// The criterion groups `call/<name>/<call>` of an actuator with an HTTP API, one function
/// per build, the builds interleaved: each measured right after the other, under the same load.
fn bench_builds(
    c: &mut Criterion,
    rt: &tokio::runtime::Runtime,
    name: &str,
    builds: &[(String, ComponentActuator)],
    obj: &ManagedObject,
    res: &ExternalResource,
) {
    for call in ["observed", "get_by_id_http", "create_http"] {
        let mut group = c.benchmark_group(format!("call/{name}/{call}"));
        group.warm_up_time(Duration::from_secs(2));
        group.measurement_time(Duration::from_secs(5));
        for (build, actuator) in builds {
            group.bench_function(build.as_str(), |bench| {
                bench
                    .to_async(rt)
                    .iter(|| http_call(call, actuator, obj, res));
            });
        }
        group.finish();
    }
}

/// One measured call of an actuator with an HTTP API: `observed` (no I/O), `get_by_id_http`
/// (a read of `res` by its id) or `create_http`.
async fn http_call(
    call: &str,
    actuator: &ComponentActuator,
    obj: &ManagedObject,
    res: &ExternalResource,
) {
    match call {
        "observed" => {
            actuator.observed(res).await.unwrap();
        }
        "get_by_id_http" => {
            actuator.get_by_id(obj, &res.id).await.unwrap().unwrap();
        }
        _ => {
            actuator.create(obj).await.unwrap().unwrap();
        }
    }
}

/// `ORCHARD_BENCH_INTERLEAVED=<n>`: before their criterion groups, the calls of pdns-zone and the
/// RabbitMQ actuators also run `n` times each with the builds taking turns call by call, and the median and
/// quartiles of each build are printed: on a loaded machine every build then sees the same
/// load, where criterion measures one build for seconds before the next.
fn interleaved_rounds() -> Option<usize> {
    std::env::var("ORCHARD_BENCH_INTERLEAVED")
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|&n| n > 0)
}

fn loads(c: &mut Criterion) {
    let cold = Runtime::new(None).unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let cached = Runtime::new(Some(cache_dir.path().to_owned())).unwrap();

    let mut components = vec![
        ("echo".to_owned(), component("orchard_fixture_echo.wasm")),
        ("pdns-zone".to_owned(), component("pdns_zone.wasm")),
        (
            "go-rabbitmq-exchange".to_owned(),
            component("rabbitmq_exchange.wasm"),
        ),
        ("c-pdns-tsig".to_owned(), component("pdns_tsig.wasm")),
    ];
    for (build, path) in builds("pdns_zone.wasm").into_iter().skip(1) {
        components.push((format!("pdns-zone-{build}"), path));
    }
    for (name, path) in components {
        let file = path.display();
        let bytes = std::fs::read(&path).unwrap();
        eprintln!("{file}: {} bytes", bytes.len());
        let mut group = c.benchmark_group(format!("load/{name}"));
        // Compiling takes tens of milliseconds: few samples, each of one iteration.
        group.sampling_mode(SamplingMode::Flat);
        group.sample_size(10);
        group.warm_up_time(Duration::from_secs(1));
        group.measurement_time(Duration::from_secs(4));
        group.bench_function("compile_cold", |bench| {
            bench.iter(|| cold.load(&name, &bytes, PluginConfig::default()).unwrap());
        });

        // Fill the cache, then measure loads that hit it.
        cached.load(&name, &bytes, PluginConfig::default()).unwrap();
        let artifacts = std::fs::read_dir(cache_dir.path()).unwrap().count();
        assert!(artifacts > 0, "the compiled cache stayed empty");
        group.sample_size(30);
        group.measurement_time(Duration::from_secs(3));
        group.bench_function("cached", |bench| {
            bench.iter(|| cached.load(&name, &bytes, PluginConfig::default()).unwrap());
        });
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default();
    targets = calls, guest_calls, pdns_zone_calls, rabbitmq_calls, loads
}
criterion_main!(benches);
