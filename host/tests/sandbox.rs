//! The sandbox contains misbehaving plugins: each fault costs one call, typed and named, and
//! the next call — to the same plugin or another — succeeds.

mod support;

use std::time::Duration;

use orchard::actuator::{Actuator, CallError, ManagedObject};
use orchard::runtime::{ComponentActuator, EgressPolicy, Limits, PluginConfig, Runtime};
use support::{LoopbackServer, plugin_path};

fn runtime() -> (Runtime, tempfile::TempDir) {
    let cache = tempfile::tempdir().unwrap();
    (Runtime::new(Some(cache.path().to_owned())).unwrap(), cache)
}

fn faulty(rt: &Runtime, config: PluginConfig) -> ComponentActuator {
    rt.load_file(
        &plugin_path("orchard-fixture-faulty"),
        Some("faulty"),
        config,
    )
    .unwrap()
}

fn tight() -> PluginConfig {
    PluginConfig {
        limits: Limits {
            memory_bytes: 16 << 20,
            call_timeout: Duration::from_millis(300),
        },
        egress: EgressPolicy::default(),
    }
}

fn obj() -> ManagedObject {
    ManagedObject {
        name: "fault".into(),
        namespace: "default".into(),
        ..ManagedObject::default()
    }
}

/// After a fault: the same plugin answers a good call, and so does another plugin.
async fn both_plugins_still_answer(rt: &Runtime, plugin: &ComponentActuator) {
    let ok = plugin
        .get_by_id(&obj(), "ok")
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(ok.id, "ok");
    let other = rt
        .load_file(&plugin_path("pdns-zone"), None, PluginConfig::default())
        .unwrap();
    assert_eq!(other.describe().await.unwrap().kind, "DnsZone");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_trap_fails_that_call_with_plugin_and_function_named() {
    let (rt, _cache) = runtime();
    let plugin = faulty(&rt, tight());
    let err = plugin.get_by_id(&obj(), "trap").await.unwrap_err();
    assert!(matches!(err, CallError::Trap { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("faulty") && text.contains("get-by-id") && text.contains("unreachable"),
        "{text}"
    );
    both_plugins_still_answer(&rt, &plugin).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_endless_loop_is_stopped_at_the_call_deadline() {
    let (rt, _cache) = runtime();
    let plugin = faulty(&rt, tight());
    let started = std::time::Instant::now();
    let err = plugin.get_by_id(&obj(), "loop").await.unwrap_err();
    assert!(
        matches!(
            err,
            CallError::Deadline {
                timeout_ms: 300,
                function: "get-by-id",
                ..
            }
        ),
        "{err:?}"
    );
    // Stopped by the deadline, not by something slower.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    both_plugins_still_answer(&rt, &plugin).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn unbounded_memory_growth_stops_at_the_memory_cap() {
    let (rt, _cache) = runtime();
    let plugin = faulty(&rt, tight());
    let err = plugin.get_by_id(&obj(), "grow").await.unwrap_err();
    assert!(
        matches!(err, CallError::MemoryCap { limit_bytes, .. } if limit_bytes == 16 << 20),
        "{err:?}"
    );
    both_plugins_still_answer(&rt, &plugin).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_json_from_a_plugin_is_an_error_naming_the_field() {
    let (rt, _cache) = runtime();
    let plugin = faulty(&rt, tight());
    let err = plugin.get_by_id(&obj(), "bad-json").await.unwrap_err();
    match &err {
        CallError::MalformedOutput {
            field, function, ..
        } => {
            assert_eq!(*field, "external-resource.state");
            assert_eq!(*function, "get-by-id");
        }
        other => panic!("expected MalformedOutput, got {other:?}"),
    }
    both_plugins_still_answer(&rt, &plugin).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_host_outside_the_allow_list_is_refused_and_never_contacted() {
    let server = LoopbackServer::start("secret").await;
    let (rt, _cache) = runtime();
    // Allowed: another port of the same address. The server's own port is not.
    let config = PluginConfig {
        egress: EgressPolicy::allowing(["http://127.0.0.1:1"]).unwrap(),
        ..tight()
    };
    let plugin = faulty(&rt, config);
    let failure = plugin
        .get_by_id(&obj(), &format!("fetch:{}/", server.url))
        .await
        .unwrap()
        .unwrap_err();
    assert!(failure.is_terminal(), "{failure:?}");
    assert!(
        failure
            .to_string()
            .contains("denied by the host's allow-list"),
        "{failure}"
    );
    assert_eq!(server.request_count(), 0);
    both_plugins_still_answer(&rt, &plugin).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_allowed_host_is_reached_over_wasi_http() {
    let server = LoopbackServer::start("hello from loopback").await;
    let (rt, _cache) = runtime();
    let config = PluginConfig {
        egress: EgressPolicy::allowing([server.url.as_str()]).unwrap(),
        ..tight()
    };
    let plugin = faulty(&rt, config);
    let res = plugin
        .get_by_id(&obj(), &format!("fetch:{}/path", server.url))
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(res.state["status"], 200);
    assert_eq!(res.state["body"], "hello from loopback");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_port_wildcard_reaches_any_port_of_the_allowed_host() {
    let server = LoopbackServer::start("wild").await;
    let (rt, _cache) = runtime();
    let config = PluginConfig {
        egress: EgressPolicy::allowing(["http://127.0.0.1:*"]).unwrap(),
        ..tight()
    };
    let plugin = faulty(&rt, config);
    let res = plugin
        .get_by_id(&obj(), &format!("fetch:{}/", server.url))
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(res.state["body"], "wild");
}

#[tokio::test(flavor = "multi_thread")]
async fn compiled_components_are_cached_and_served_from_the_cache() {
    let (rt, cache) = runtime();
    let path = plugin_path("pdns-zone");
    rt.load_file(&path, None, PluginConfig::default()).unwrap();
    let artifacts: Vec<_> = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(artifacts.len(), 1, "{artifacts:?}");
    assert_eq!(artifacts[0].extension().unwrap(), "cwasm");
    // A second runtime (a restarted host) loads from the cache and works.
    let again = Runtime::new(Some(cache.path().to_owned())).unwrap();
    let plugin = again
        .load_file(&path, None, PluginConfig::default())
        .unwrap();
    assert_eq!(plugin.describe().await.unwrap().name, "pdns-zone");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_corrupt_cache_entry_is_discarded_and_recompiled() {
    let (rt, cache) = runtime();
    let path = plugin_path("pdns-zone");
    rt.load_file(&path, None, PluginConfig::default()).unwrap();
    let artifact = std::fs::read_dir(cache.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::write(&artifact, b"not a compiled component").unwrap();
    let plugin = rt.load_file(&path, None, PluginConfig::default()).unwrap();
    assert_eq!(plugin.describe().await.unwrap().kind, "DnsZone");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_component_of_another_world_is_refused_with_a_clear_error() {
    let (rt, _cache) = runtime();
    let err = rt
        .load(
            "not-a-plugin",
            b"\0asm\x0d\0\x01\0",
            PluginConfig::default(),
        )
        .err()
        .expect("loading an empty component must fail");
    assert!(err.to_string().contains("not-a-plugin"), "{err}");
}
