//! The call deadline under the host's own load (issue 12), in release: how far past its
//! deadline a spinning guest is stopped, and how long other objects' calls take meanwhile,
//! while the host's async runtime (2 worker threads, as on a 2-core pod) is kept busy with
//! other objects' calls of another plugin.
//!
//! `cargo bench -p orchard --bench deadline` (after `make plugins`). Prints one table; no
//! pass/fail — the bounds are asserted by `host/tests/sandbox.rs`, the numbers go to
//! `docs/benchmarks.md`.

#![allow(
    clippy::expect_used,
    reason = "a bench: a failed setup ends the run with its message"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use orchard::actuator::{Actuator, ManagedObject};
use orchard::runtime::{ComponentActuator, EgressPolicy, Limits, PluginConfig, Runtime};

/// The suites' one paths module (target directory, plugins, the `orchard` binary).
#[allow(dead_code, reason = "the bench uses the plugin paths only")]
#[path = "../../tests/e2e/src/paths.rs"]
mod paths;

const DEADLINE: Duration = Duration::from_millis(300);
const SPINS: usize = 10;
/// Other objects' calls kept in flight while a guest spins (the default `--concurrency`).
const BACKGROUND: usize = 16;

fn load(rt: &Runtime, crate_name: &str, name: &str) -> ComponentActuator {
    let path = paths::plugin(crate_name);
    assert!(path.is_file(), "{} missing: `make plugins`", path.display());
    let config = PluginConfig {
        limits: Limits {
            memory_bytes: 16 << 20,
            call_timeout: DEADLINE,
        },
        egress: EgressPolicy::default(),
    };
    rt.load_file(&path, Some(name), config)
        .expect("the fixture loads")
}

fn object(name: &str) -> ManagedObject {
    ManagedObject {
        name: name.into(),
        namespace: "default".into(),
        ..ManagedObject::default()
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "an index into a short list"
    )]
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

fn main() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let rt = Runtime::new(Some(dir.path().to_owned())).expect("the runtime");
    let faulty = Arc::new(load(&rt, "orchard-fixture-faulty", "faulty"));
    let echo = Arc::new(load(&rt, "orchard-fixture-echo", "echo"));
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");

    tokio.block_on(async {
        // Warm both plugins' instance pools.
        let _ = echo.get_by_id(&object("warm"), "ok").await;
        let _ = faulty.get_by_id(&object("warm"), "ok").await;

        // Background: other objects' calls, back to back, as a busy host makes them.
        let stop = Arc::new(AtomicBool::new(false));
        // Only calls started while guests spin count (not the pool's warm-up before).
        let measuring = Arc::new(AtomicBool::new(false));
        let mut background = Vec::new();
        for i in 0..BACKGROUND {
            let (echo, stop, measuring) =
                (Arc::clone(&echo), Arc::clone(&stop), Arc::clone(&measuring));
            background.push(tokio::spawn(async move {
                let obj = object(&format!("other-{i}"));
                let mut latencies = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let counts = measuring.load(Ordering::Relaxed);
                    let t = Instant::now();
                    let _ = echo.get_by_id(&obj, "ok").await;
                    if counts {
                        latencies.push(t.elapsed());
                    }
                    // A reconcile awaits the apiserver between plugin calls; an echo call
                    // alone completes without ever suspending, and would hold its worker.
                    tokio::task::yield_now().await;
                }
                latencies
            }));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        measuring.store(true, Ordering::Relaxed);

        let mut overshoot = Vec::new();
        for _ in 0..SPINS {
            let t = Instant::now();
            let result = faulty.get_by_id(&object("spinner"), "loop").await;
            assert!(result.is_err(), "the spinning call must hit its deadline");
            overshoot.push(t.elapsed().saturating_sub(DEADLINE));
        }
        stop.store(true, Ordering::Relaxed);
        let mut quick = Vec::new();
        for task in background {
            quick.extend(task.await.expect("a background task"));
        }
        overshoot.sort();
        quick.sort();
        println!(
            "deadline {DEADLINE:?}, {SPINS} spinning calls, {BACKGROUND} other objects' calls in flight on 2 workers"
        );
        println!(
            "spin stopped past its deadline: median {:?}, worst {:?}",
            percentile(&overshoot, 0.5),
            percentile(&overshoot, 1.0)
        );
        println!(
            "other objects' calls meanwhile ({} calls): median {:?}, p99 {:?}, worst {:?}",
            quick.len(),
            percentile(&quick, 0.5),
            percentile(&quick, 0.99),
            percentile(&quick, 1.0)
        );
    });
}
