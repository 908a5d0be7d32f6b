//! The host started in-process — [`orchard::app::App`], the library type `orchard run` wraps —
//! against the test environment's real apiserver (`tests/env/testenv.sh up`, its env sourced:
//! `make test` does both).

mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use orchard::app::{App, AppConfig, ReconcileConfig, Sharding, StaticPlugin};
use orchard::runtime::PluginConfig;
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Polls `check` every 100 ms until it answers `Some`, for at most `within`.
async fn poll<T, F: Future<Output = Option<T>>>(
    what: &str,
    within: Duration,
    mut check: impl FnMut() -> F,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn echoes() -> ApiResource {
    ApiResource {
        group: "fixtures.orchard.dev".into(),
        version: "v1alpha1".into(),
        api_version: "fixtures.orchard.dev/v1alpha1".into(),
        kind: "Echo".into(),
        plural: "echoes".into(),
    }
}

fn available(obj: &DynamicObject) -> bool {
    obj.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Available" && c["status"] == "True")
}

/// Logs to the test's output, and a client of the test apiserver.
#[allow(
    clippy::expect_used,
    reason = "test support: a panic here is a failed test"
)]
async fn test_client() -> kube::Client {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter("info")
        .try_init();
    orchard::oci::ensure_crypto_provider();
    kube::Client::try_default()
        .await
        .expect("the test apiserver")
}

/// Applies the Echo `name` (greeting `greeting`; detached on delete: the echo fixture's
/// resources never go away), retrying while a CRD just established is not served yet (404).
async fn apply_echo(api: &Api<DynamicObject>, name: &str, greeting: &str) {
    let echo = json!({
        "apiVersion": "fixtures.orchard.dev/v1alpha1",
        "kind": "Echo",
        "metadata": {"name": name},
        "spec": {"resource": {"greeting": greeting}, "managedOptions": {"onDelete": "detach"}}
    });
    poll(
        "the Echo to be applied",
        Duration::from_secs(30),
        || async {
            api.patch(name, &PatchParams::apply("app-test"), &Patch::Apply(&echo))
                .await
                .ok()
        },
    )
    .await;
}

/// Cancels `shutdown` and asserts that the host `running` stops cleanly within its drain.
#[allow(
    clippy::expect_used,
    reason = "test support: a panic here is a failed test"
)]
async fn stop_host(
    shutdown: &CancellationToken,
    running: tokio::task::JoinHandle<Result<(), orchard::app::Error>>,
    why: &str,
) {
    shutdown.cancel();
    let stopped = tokio::time::timeout(Duration::from_secs(15), running)
        .await
        .unwrap_or_else(|_| panic!("the host stops within its drain timeout{why}"))
        .expect("the host task does not panic");
    assert!(stopped.is_ok(), "a clean shutdown: {stopped:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_started_in_process_serves_its_kind_and_drains_when_its_token_is_cancelled() {
    assert!(
        std::env::var_os("ORCHARD_APISERVER_URL").is_some(),
        "needs the test environment: `bash tests/env/testenv.sh up`, then source its env file"
    );
    let client = test_client().await;
    let (namespaces, ns) = fresh_namespace(&client, "app").await;

    let config = echo_host(&ns, "app-test");
    let app = App::new(config).with_client(client.clone());
    let health = app.health();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(app.run(shutdown.clone()));

    poll("the host to be ready", Duration::from_mins(1), || async {
        health.is_ready().then_some(())
    })
    .await;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &echoes());
    apply_echo(&api, "in-process", "hello").await;
    poll(
        "the Echo to be Available",
        Duration::from_secs(30),
        || async { api.get("in-process").await.ok().filter(available) },
    )
    .await;
    api.delete("in-process", &DeleteParams::default())
        .await
        .unwrap();
    poll(
        "the Echo's finalizer to be removed",
        Duration::from_secs(30),
        || async {
            api.get_opt("in-process")
                .await
                .ok()
                .and_then(|o| o.is_none().then_some(()))
        },
    )
    .await;
    assert!(
        !running.is_finished(),
        "the host runs until its token is cancelled"
    );

    stop_host(&shutdown, running, "").await;
    namespaces
        .delete(&ns, &DeleteParams::default())
        .await
        .unwrap();
}

/// A new namespace `<prefix>-<millis>`, and the API to delete it with.
#[allow(
    clippy::unwrap_used,
    reason = "test support: a panic here is a failed test"
)]
async fn fresh_namespace(client: &kube::Client, prefix: &str) -> (Api<Namespace>, String) {
    let ns = format!(
        "{prefix}-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
            % 1_000_000_000
    );
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
        )
        .await
        .unwrap();
    (namespaces, ns)
}

/// A host config serving the echo fixture in `ns` as `instance`.
fn echo_host(ns: &str, instance: &str) -> AppConfig {
    AppConfig {
        static_plugins: vec![StaticPlugin {
            path: support::plugin_path("orchard-fixture-echo"),
            #[cfg(feature = "bench-native")]
            native: false,
        }],
        plugin_objects: None,
        sandbox: PluginConfig::default(),
        compiled_cache_dir: None,
        instance_pool: orchard::runtime::engine::POOL.component_instances,
        memory_reset: orchard::runtime::engine::MemoryReset::default(),
        reconcile: ReconcileConfig {
            namespaces: vec![ns.to_owned()],
            default_resync: None,
            concurrency: 4,
            instance: instance.into(),
            events: orchard::reconcile::machinery::events::EventLevel::Normal,
            fail_point: None,
            pass_trace: None,
        },
        install_crds: true,
        admin_addr: None,
        leader_election: None,
        sharding: None,
        host_namespace: ns.to_owned(),
        presence_lease: Duration::from_secs(15),
        drain_timeout: Duration::from_secs(10),
        api_timeout: Duration::from_secs(20),
        conversion_webhook: None,
    }
}

/// [`echo_host`] as replica `instance` of ring `ring`.
fn sharded(ns: &str, instance: &str, ring: &str) -> AppConfig {
    AppConfig {
        // Long: a hand-over faster than this did not wait for an expiry.
        sharding: Some(Sharding {
            ring: ring.into(),
            lease_duration: Duration::from_secs(30),
        }),
        ..echo_host(ns, instance)
    }
}

/// The bucket table's holders, when it exists.
async fn holders(client: &kube::Client, ns: &str, ring: &str) -> Option<Vec<String>> {
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), ns);
    let map = maps
        .get_opt(&format!("orchard-shard-{ring}"))
        .await
        .ok()??;
    serde_json::from_str(map.data?.get("holders")?).ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_leaves_gives_its_buckets_back_and_the_other_serves_them_at_once() {
    let client = test_client().await;
    let (namespaces, ns) = fresh_namespace(&client, "app-shard").await;
    let ring = "pair";
    let (stop_a, stop_b) = (CancellationToken::new(), CancellationToken::new());
    let a = tokio::spawn(
        App::new(sharded(&ns, "replica-a", ring))
            .with_client(client.clone())
            .run(stop_a.clone()),
    );
    poll(
        "replica-a to hold every bucket",
        Duration::from_mins(1),
        || async {
            holders(&client, &ns, ring)
                .await
                .filter(|h| h.iter().all(|x| x == "replica-a"))
        },
    )
    .await;
    let b = tokio::spawn(
        App::new(sharded(&ns, "replica-b", ring))
            .with_client(client.clone())
            .run(stop_b.clone()),
    );
    let split = poll(
        "the two replicas to split the buckets",
        Duration::from_mins(1),
        || async {
            holders(&client, &ns, ring).await.filter(|h| {
                h.iter().all(|x| x == "replica-a" || x == "replica-b")
                    && h.iter().any(|x| x == "replica-a")
                    && h.iter().any(|x| x == "replica-b")
            })
        },
    )
    .await;

    // Objects in both replicas' buckets become Available, each labelled with its bucket.
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &echoes());
    let names: Vec<String> = (0..12).map(|i| format!("e{i}")).collect();
    for name in &names {
        apply_echo(&api, name, name).await;
    }
    let bucket =
        |name: &str| orchard::shard::ring::bucket_of("fixtures.orchard.dev", "Echo", &ns, name);
    for name in &names {
        let obj = poll(
            "the Echo to be Available",
            Duration::from_mins(1),
            || async { api.get(name).await.ok().filter(available) },
        )
        .await;
        assert_eq!(
            obj.metadata.labels.unwrap_or_default()["orchard.dev/shard-bucket"],
            bucket(name).to_string()
        );
    }
    assert!(
        names
            .iter()
            .any(|n| split[usize::from(bucket(n))] == "replica-a"),
        "no object landed in replica-a's buckets: pick more names"
    );

    // replica-a leaves: it drains, gives its buckets back and deletes its Lease; replica-b
    // takes them at its next tick, far sooner than the 30 s lease would expire.
    let left = Instant::now();
    stop_a.cancel();
    let stopped = tokio::time::timeout(Duration::from_secs(20), a)
        .await
        .expect("replica-a stops within its drain timeout")
        .expect("no panic");
    assert!(stopped.is_ok(), "{stopped:?}");
    poll(
        "replica-b to hold every bucket",
        Duration::from_secs(10),
        || async {
            holders(&client, &ns, ring)
                .await
                .filter(|h| h.iter().all(|x| x == "replica-b"))
        },
    )
    .await;
    assert!(
        left.elapsed() < Duration::from_secs(15),
        "{:?}",
        left.elapsed()
    );
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), &ns);
    assert!(
        leases
            .get_opt("orchard-shard-pair-replica-a")
            .await
            .unwrap()
            .is_none(),
        "replica-a's Lease is gone"
    );
    // A new object in one of replica-a's former buckets is served by replica-b.
    let orphan = (0..200)
        .map(|i| format!("late{i}"))
        .find(|n| split[usize::from(bucket(n))] == "replica-a")
        .expect("a name in replica-a's buckets");
    apply_echo(&api, &orphan, &orphan).await;
    poll(
        "the late Echo to be Available",
        Duration::from_mins(1),
        || async { api.get(&orphan).await.ok().filter(available) },
    )
    .await;

    // Detached on delete: replica-b only drops the finalizers.
    api.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .unwrap();
    poll("every Echo to be gone", Duration::from_mins(1), || async {
        api.list(&ListParams::default())
            .await
            .ok()
            .filter(|l| l.items.is_empty())
    })
    .await;

    stop_b.cancel();
    let stopped = tokio::time::timeout(Duration::from_secs(20), b)
        .await
        .expect("replica-b stops")
        .expect("no panic");
    assert!(stopped.is_ok(), "{stopped:?}");
    assert!(
        holders(&client, &ns, ring)
            .await
            .unwrap()
            .iter()
            .all(String::is_empty),
        "the last replica to leave gives every bucket back"
    );
    namespaces
        .delete(&ns, &DeleteParams::default())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_a_resync_shorter_than_a_round_every_object_still_gets_its_turn() {
    let client = test_client().await;
    let (namespaces, ns) = fresh_namespace(&client, "app-fair").await;
    // One pass at a time and a resync every 100 ms: far more passes come due than can be
    // made. With kube's own bound the same few objects won every turn and the others were
    // never resynced.
    let mut config = echo_host(&ns, "fair");
    config.reconcile.concurrency = 1;
    config.reconcile.default_resync = Some(Duration::from_millis(100));
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(
        App::new(config)
            .with_client(client.clone())
            .run(shutdown.clone()),
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &echoes());
    let names: Vec<String> = (0..120).map(|i| format!("f{i}")).collect();
    for name in &names {
        apply_echo(&api, name, name).await;
    }
    poll(
        "every Echo to be Available",
        Duration::from_mins(2),
        || async {
            let list = api.list(&ListParams::default()).await.ok()?;
            (list.items.iter().filter(|o| available(o)).count() == names.len()).then_some(())
        },
    )
    .await;

    // From now on, every object must be resynced (its lastSyncTime moves past `since`).
    let since = jiff::Timestamp::now();
    let resynced = |o: &DynamicObject| {
        o.data["status"]["lastSyncTime"]
            .as_str()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            .is_some_and(|t| t > since)
    };
    let left = poll(
        "every Echo to be resynced",
        Duration::from_mins(1),
        || async {
            let list = api.list(&ListParams::default()).await.ok()?;
            let stale = list.items.iter().filter(|o| !resynced(o)).count();
            (stale == 0).then_some(stale)
        },
    )
    .await;
    assert_eq!(left, 0);

    stop_host(
        &shutdown,
        running,
        ": passes waiting for a turn end at once",
    )
    .await;
    namespaces
        .delete(&ns, &DeleteParams::default())
        .await
        .unwrap();
}

/// A CRD replacement that would strand the objects stored at the installed schema — a field
/// removed or retyped, a stored version dropped — is refused with every break named, and the
/// installed CRD stays as it was; an added optional field is applied.
#[tokio::test]
async fn a_crd_change_that_would_strand_stored_objects_is_refused_and_the_installed_one_stays() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use orchard::crd::{InstallError, apply_crd};

    let client = test_client().await;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let group = format!("evo{nanos:x}.test.orchard.dev");
    let name = format!("widgets.{group}");
    let crd = |version: &str, fields: serde_json::Value| {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": name},
            "spec": {
                "group": group,
                "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                "versions": [{"name": version, "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": {"type": "object", "properties": fields}}
                }}}]
            }
        })
    };
    let first = json!({"size": {"type": "string"}, "color": {"type": "string"}});
    apply_crd(&client, &crd("v1", first), true).await.unwrap();

    let err = apply_crd(
        &client,
        &crd("v1", json!({"size": {"type": "integer"}})),
        true,
    )
    .await
    .unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, InstallError::Strands { .. }), "{message}");
    assert!(
        message.contains("v1: field spec.size changes type from string to integer")
            && message.contains("v1: field spec.color is removed"),
        "{message}"
    );
    let dropped = apply_crd(&client, &crd("v2", json!({})), true)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        dropped.contains("version v1 is still stored in etcd"),
        "{dropped}"
    );
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let installed = serde_json::to_value(crds.get(&name).await.unwrap()).unwrap();
    let spec = &installed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    assert_eq!(
        (
            spec["properties"]["size"]["type"].as_str(),
            spec["properties"]["color"]["type"].as_str()
        ),
        (Some("string"), Some("string")),
        "the installed schema stays"
    );

    let added = json!({"size": {"type": "string"}, "color": {"type": "string"}, "shape": {"type": "string"}});
    apply_crd(&client, &crd("v1", added), true).await.unwrap();
    let installed = serde_json::to_value(crds.get(&name).await.unwrap()).unwrap();
    assert!(
        installed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            ["properties"]["shape"]
            .is_object(),
        "an added optional field is applied"
    );
    crds.delete(&name, &DeleteParams::default()).await.unwrap();
}
