//! Two hosts over the same objects: a second host — unscoped, as a demo host or a leftover
//! `orchard run` would be — started beside a test's host waits, names the host it waits for,
//! and reconciles nothing while the test's host keeps reconciling its objects; a second host
//! of the same scope takes over once the first has crashed and its presence expired.
//!
//! One test in a binary of its own: were the unscoped host to serve, it would reconcile every
//! namespace's objects, so no other suite may run beside it (cargo runs test binaries one after
//! another).

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::ResourceExt;
use orchard_e2e::harness::{CONVERGE, Host};
use orchard_e2e::pdns::{self, ZONE};
use orchard_e2e::poll_until;

/// Short, so that a crashed host's presence expires within the scenario.
const LEASE_SECONDS: &str = "3";

fn zone_yaml(name: &str, zone: &str, account: &str) -> String {
    format!(
        "apiVersion: pdns.orchard.dev/v1alpha1\nkind: DnsZone\nmetadata: {{name: {name}}}\nspec:\n  credentialsRef: {{secretName: pdns}}\n  resource: {{name: \"{zone}\", account: {account}}}\n"
    )
}

/// The lines of a pass trace (none when the host never opened it: it never served).
fn passes(trace: &Path) -> usize {
    std::fs::read_to_string(trace).map_or(0, |t| t.lines().count())
}

/// `extra_env` of a host from owned values.
fn as_env<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// Waits until `host`'s log has a line containing every one of `needles`.
async fn wait_log(host: &mut Host, what: &str, needles: &[&str]) -> anyhow::Result<String> {
    let log = host.log.clone();
    poll_until(CONVERGE, what, || {
        let running = host.ensure_running();
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        async move {
            running?;
            Ok(text
                .lines()
                .find(|l| needles.iter().all(|n| l.contains(n)))
                .map(str::to_owned))
        }
    })
    .await
    .with_context(|| host.report())
}

/// The state annotation of a host's presence Lease, if it has one.
async fn presence_state(leases: &Api<Lease>, instance: &str) -> anyhow::Result<Option<String>> {
    Ok(leases
        .get_opt(&format!("orchard-host-{instance}"))
        .await?
        .and_then(|l| l.annotations().get("orchard.dev/state").cloned()))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_unscoped_host_waits_for_the_tests_host_and_a_successor_takes_over_after_a_crash()
-> anyhow::Result<()> {
    let (mut s, pdns) = pdns::harness("presence").await?;
    let ns = s.ns.clone();
    let leases: Api<Lease> = Api::namespaced(s.client.clone(), &ns);
    let trace = |who: &str| s.env.logs.join(format!("pass-trace-{ns}-{who}.log"));
    let (first_trace, intruder_trace, second_trace) =
        (trace("first"), trace("intruder"), trace("second"));
    for t in [&first_trace, &intruder_trace, &second_trace] {
        let _ = std::fs::remove_file(t);
    }
    let env_of = |instance: &str, trace: &Path| {
        vec![
            ("ORCHARD_INSTANCE", instance.to_owned()),
            ("POD_NAMESPACE", ns.clone()),
            ("ORCHARD_LEASE_SECONDS", LEASE_SECONDS.to_owned()),
            ("ORCHARD_PASS_TRACE", trace.display().to_string()),
        ]
    };

    // 1. The test's host serves its namespace; its presence says so.
    let mut first = s.start_host(&as_env(&env_of(&ns, &first_trace)))?;
    let zone = pdns::zone_name(&s, "kept");
    s.apply(&zone_yaml("kept", &zone, "first")).await?;
    s.wait_ready(ZONE, "kept").await?;
    ensure!(presence_state(&leases, &ns).await?.as_deref() == Some("serving"));

    // 2. An unscoped host starts beside it: it waits, naming the host, the kind and the
    //    namespace, and stays up.
    let intruder_name = format!("intruder-{}", s.id);
    let mut intruder = s.start_unscoped_host(&as_env(&env_of(&intruder_name, &intruder_trace)))?;
    let lease_of_first = format!("Lease {ns}/orchard-host-{ns}");
    wait_log(
        &mut intruder,
        "the unscoped host to say which host it waits for",
        &[
            "another Orchard host serves",
            "dnszones.pdns.orchard.dev",
            &format!("in namespace {ns}"),
            &lease_of_first,
            "waiting until it stops",
        ],
    )
    .await?;
    ensure!(presence_state(&leases, &intruder_name).await?.as_deref() == Some("waiting"));

    // 3. The test's host still owns its objects: an update and a new object are reconciled,
    //    by it alone.
    s.apply(&zone_yaml("kept", &zone, "updated")).await?;
    let new_zone = pdns::zone_name(&s, "new");
    s.apply(&zone_yaml("new", &new_zone, "first")).await?;
    s.wait_ready(ZONE, "new").await?;
    poll_until(CONVERGE, "the update to reach PowerDNS", || async {
        let account = pdns.zone(&zone).await?.map(|z| z["account"].clone());
        Ok((account == Some("updated".into())).then_some(()))
    })
    .await?;
    intruder.ensure_running()?;
    ensure!(
        passes(&intruder_trace) == 0,
        "the waiting host reconciled: {}",
        intruder.report()
    );
    ensure!(passes(&first_trace) > 0, "the test's host never passed");

    // 4. Stopped while waiting, it ends cleanly and takes its presence with it.
    intruder.terminate()?;
    let status = intruder.wait_exit(CONVERGE).await?;
    ensure!(status.success(), "the waiting host ended with {status}");
    ensure!(
        leases
            .get_opt(&format!("orchard-host-{intruder_name}"))
            .await?
            .is_none(),
        "the stopped host left its presence Lease"
    );

    // 5. A successor of the same scope waits too, and serves once the first has crashed and
    //    its presence expired (no release: SIGKILL).
    let second_name = format!("second-{}", s.id);
    let mut second = s.start_host(&as_env(&env_of(&second_name, &second_trace)))?;
    wait_log(
        &mut second,
        "the successor to wait for the first host",
        &["another Orchard host serves", &lease_of_first],
    )
    .await?;
    first.kill_hard();
    wait_log(
        &mut second,
        "the successor to serve once the first host's presence expired",
        &["the host waited for stopped: serving"],
    )
    .await?;
    s.apply(&zone_yaml("kept", &zone, "second")).await?;
    poll_until(
        Duration::from_mins(1),
        "the successor's update to reach PowerDNS",
        || async {
            let account = pdns.zone(&zone).await?.map(|z| z["account"].clone());
            Ok((account == Some("second".into())).then_some(()))
        },
    )
    .await
    .with_context(|| second.report())?;
    ensure!(passes(&second_trace) > 0, "the successor never passed");

    s.delete(ZONE, "kept").await?;
    s.delete(ZONE, "new").await?;
    s.wait_gone(ZONE, "kept").await?;
    s.wait_gone(ZONE, "new").await?;
    ensure!(pdns.zone(&zone).await?.is_none() && pdns.zone(&new_zone).await?.is_none());
    Ok(())
}
