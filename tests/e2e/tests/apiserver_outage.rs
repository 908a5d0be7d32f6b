//! The apiserver stops under the host and comes back: every watch resumes within seconds of
//! its return (the host's watch backoff tops out at 2 s; kube-runtime's default waits up to
//! 30 s, and 39–57 s were measured with it). A test binary of its own, because stopping the
//! apiserver would break the scenarios running beside it (cargo runs test binaries one after
//! another).

use std::time::{Duration, Instant};

use orchard_e2e::harness::CONVERGE;
use orchard_e2e::pdns::{self, ZONE};
use orchard_e2e::poll_until;

fn zone_yaml(name: &str, zone: &str) -> String {
    format!(
        "apiVersion: pdns.orchard.dev/v1alpha1\nkind: DnsZone\nmetadata: {{name: {name}}}\nspec:\n  credentialsRef: {{secretName: pdns}}\n  resource: {{name: \"{zone}\"}}\n"
    )
}

/// How soon after the apiserver's return a new object must be served. The watch backoff alone
/// is 2 s at most; the rest is the relist, one pass, and a noisy 2-core machine.
const RESUMED_WITHIN: Duration = Duration::from_secs(15);

/// How long the apiserver stays down: long enough for every watch to fail and back off to
/// its longest wait.
const OUTAGE: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread")]
async fn after_an_apiserver_outage_the_controllers_resume_within_seconds() -> anyhow::Result<()> {
    let (mut s, pdns) = pdns::harness("apiserver-outage").await?;
    let _host = s.start_host(&[])?;
    let before = pdns::zone_name(&s, "before");
    s.apply(&zone_yaml("before", &before)).await?;
    s.wait_ready(ZONE, "before").await?;

    let run = orchard_e2e::testenv;
    run("stop-apiserver")?;
    let outcome = async {
        // The outage's length is the scenario, not a synchronisation.
        tokio::time::sleep(OUTAGE).await;
        run("start-apiserver")?;
        let back = Instant::now();
        let after = pdns::zone_name(&s, "after");
        // The test's own client may hold a connection from before the outage: retry it.
        poll_until(CONVERGE, "the apiserver to take a new zone", || async {
            Ok(s.apply(&zone_yaml("after", &after)).await.ok())
        })
        .await?;
        s.wait_ready(ZONE, "after").await?;
        let resumed = back.elapsed();
        assert!(
            resumed <= RESUMED_WITHIN,
            "a new object was served {resumed:?} after the apiserver came back"
        );
        assert!(pdns.zone(&after).await?.is_some());
        anyhow::Ok(())
    }
    .await;
    // The apiserver serves every other suite: bring it back whatever happened.
    run("start-apiserver")?;
    outcome
}
