//! PowerDNS stops under the host: a transient failure that heals by itself. A test binary of
//! its own, because stopping PowerDNS would break the scenarios running beside it (cargo runs
//! test binaries one after another).

use orchard_e2e::harness::progressing_message;
use orchard_e2e::pdns::{self, ZONE};

fn zone_yaml(name: &str, zone: &str) -> String {
    format!(
        "apiVersion: pdns.orchard.dev/v1alpha1\nkind: DnsZone\nmetadata: {{name: {name}}}\nspec:\n  credentialsRef: {{secretName: pdns}}\n  resource: {{name: \"{zone}\"}}\n"
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn powerdns_outage_is_transient_and_recovers_by_itself() -> anyhow::Result<()> {
    let (mut s, pdns) = pdns::harness("outage").await?;
    let _host = s.start_host(&[])?;
    let run = orchard_e2e::testenv;
    run("stop-pdns")?;
    let outcome = async {
        let zone = pdns::zone_name(&s, "outage");
        s.apply(&zone_yaml("outage", &zone)).await?;
        let obj = s
            .wait_condition(
                ZONE,
                "outage",
                "Progressing",
                "True",
                Some("TransientError"),
            )
            .await?;
        assert!(
            progressing_message(&obj).contains("transport"),
            "{}",
            progressing_message(&obj)
        );
        run("start-pdns")?;
        s.wait_ready(ZONE, "outage").await?;
        assert!(pdns.zone(&zone).await?.is_some());
        anyhow::Ok(())
    }
    .await;
    // PowerDNS serves the other scenarios: bring it back whatever happened.
    run("start-pdns")?;
    outcome
}
