//! The host started in-process — [`orchard::app::App`], the library type `orchard run` wraps —
//! against the test environment's real apiserver (`tests/env/testenv.sh up`, its env sourced:
//! `make test` does both).

mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use orchard::app::{App, AppConfig, ReconcileConfig, StaticPlugin};
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_started_in_process_serves_its_kind_and_drains_when_its_token_is_cancelled() {
    assert!(
        std::env::var_os("ORCHARD_APISERVER_URL").is_some(),
        "needs the test environment: `bash tests/env/testenv.sh up`, then source its env file"
    );
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter("info")
        .try_init();
    orchard::oci::ensure_crypto_provider();
    let client = kube::Client::try_default()
        .await
        .expect("the test apiserver");
    let ns = format!(
        "app-{}",
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

    let config = AppConfig {
        static_plugins: vec![StaticPlugin {
            path: support::plugin_path("orchard-fixture-echo"),
            #[cfg(feature = "bench-native")]
            native: false,
        }],
        plugin_objects: None,
        sandbox: PluginConfig::default(),
        compiled_cache_dir: None,
        reconcile: ReconcileConfig {
            namespaces: vec![ns.clone()],
            default_resync: None,
            concurrency: 4,
            instance: "app-test".into(),
            fail_point: None,
        },
        install_crds: true,
        admin_addr: None,
        leader_election: None,
        host_namespace: ns.clone(),
        drain_timeout: Duration::from_secs(10),
    };
    let app = App::new(config).with_client(client.clone());
    let health = app.health();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(app.run(shutdown.clone()));

    poll("the host to be ready", Duration::from_mins(1), || async {
        health.is_ready().then_some(())
    })
    .await;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &echoes());
    let echo = json!({
        "apiVersion": "fixtures.orchard.dev/v1alpha1",
        "kind": "Echo",
        "metadata": {"name": "in-process"},
        // The echo fixture's resources never go away (get-by-id answers from its arguments):
        // detach, so that deleting the object only removes the finalizer.
        "spec": {"resource": {"greeting": "hello"}, "managedOptions": {"onDelete": "detach"}}
    });
    // A CRD just established may not be served for a moment yet (404): retry then.
    poll(
        "the Echo to be applied",
        Duration::from_secs(30),
        || async {
            api.patch(
                "in-process",
                &PatchParams::apply("app-test"),
                &Patch::Apply(&echo),
            )
            .await
            .ok()
        },
    )
    .await;
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

    shutdown.cancel();
    let stopped = tokio::time::timeout(Duration::from_secs(15), running)
        .await
        .expect("the host stops within its drain timeout")
        .expect("the host task does not panic");
    assert!(stopped.is_ok(), "a clean shutdown: {stopped:?}");
    namespaces
        .delete(&ns, &DeleteParams::default())
        .await
        .unwrap();
}
