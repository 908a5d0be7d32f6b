//! Seeing what an object does, against the real apiserver, PowerDNS and OpenTelemetry
//! Collector: `orchard explain` gives an object's verdict, the host that serves it (from its
//! presence Lease), its last passes and their plugin calls (from that host's admin server,
//! found through the Lease), its Events — and, once paused, waiting, retried or once its host
//! has stopped, the verdict says so; a traced host exports each pass as one trace.

use std::process::Command;

use anyhow::{Context, ensure};
use kube::api::{Patch, PatchParams};
use orchard_e2e::harness::{CONVERGE, Harness};
use orchard_e2e::paths::orchard_bin;
use orchard_e2e::pdns::{self, ZONE};
use orchard_e2e::{free_port, poll_until};
use serde_json::{Value, json};

/// The contract's functions a pass may call.
const FUNCTIONS: [&str; 7] = [
    "get-by-id",
    "list-for-adoption",
    "create",
    "reconcilers",
    "run-reconciler",
    "available",
    "observed",
];

fn zone_yaml(name: &str, zone: &str) -> String {
    format!(
        "apiVersion: pdns.orchard.dev/v1alpha1\nkind: DnsZone\nmetadata: {{name: {name}}}\nspec:\n  credentialsRef: {{secretName: pdns}}\n  resource: {{name: \"{zone}\"}}\n"
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn explain_shows_the_verdict_the_serving_host_the_last_passes_and_calls_and_the_events()
-> anyhow::Result<()> {
    let (mut s, pdns) = pdns::harness("explain").await?;
    let admin = format!("127.0.0.1:{}", free_port()?);
    let mut host = s.start_host(&[("ORCHARD_ADMIN_ADDR", admin.as_str())])?;
    let zone = pdns::zone_name(&s, "explain");
    s.apply(&zone_yaml("z", &zone)).await?;
    s.wait_ready(ZONE, "z").await?;

    // JSON, for a script: the facts, typed. The pass is journaled when it ends, a moment after
    // its status write made the object ready.
    let json: Value = poll_until(
        CONVERGE,
        "explain to show the last pass's calls",
        || async {
            let json: Value = serde_json::from_str(&s.explain(&[
                "dnszones.pdns.orchard.dev/z",
                "-o",
                "json",
            ])?)?;
            let called = json["journal"]["calls"]
                .as_array()
                .is_some_and(|c| !c.is_empty());
            Ok(called.then_some(json))
        },
    )
    .await?;
    ensure!(json["verdict"] == "available and up to date", "{json}");
    ensure!(json["hosts"][0]["state"] == "serving", "{json}");
    ensure!(json["hosts"][0]["instance"] == s.ns.as_str(), "{json}");
    ensure!(
        json["hosts"][0]["admin"] == format!("http://{admin}"),
        "{json}"
    );
    ensure!(json["journal"]["instance"] == s.ns.as_str(), "{json}");
    ensure!(json["journal"]["plugin"] == "pdns-zone", "{json}");
    ensure!(
        json["journal"]["passes"][0]["outcome"].is_string(),
        "{json}"
    );
    for call in json["journal"]["calls"].as_array().into_iter().flatten() {
        let function = call["function"].as_str().unwrap_or_default();
        ensure!(
            FUNCTIONS.contains(&function),
            "not a contract function: {call}"
        );
        ensure!(call["outcome"] == "ok" && call["tookMs"].is_u64(), "{call}");
    }

    // Text, for a person: the verdict first, then who serves it, what the passes did. Events
    // are posted beside the pass, so the Created one may land a moment after the journal.
    let text = poll_until(CONVERGE, "explain to show the Created event", || async {
        let text = s.explain(&["dnszone/z"])?;
        let created = text
            .split_once("Events (newest last):")
            .is_some_and(|(_, events)| events.contains("Created"));
        Ok(created.then_some(text))
    })
    .await?;
    let lines: Vec<&str> = text.lines().collect();
    ensure!(
        lines[0]
            == format!(
                "DnsZone {}/z (dnszones.pdns.orchard.dev), generation 1",
                s.ns
            ),
        "{text}"
    );
    ensure!(lines[1] == "  available and up to date", "{text}");
    ensure!(text.contains(&format!("External id:    {zone}")), "{text}");
    ensure!(
        text.contains(&format!("{} — serving since", s.ns)) && text.contains(&admin),
        "the serving host and its admin server: {text}"
    );
    ensure!(
        text.contains("Last passes (by") && text.contains("Plugin calls of the last pass"),
        "{text}"
    );
    ensure!(
        text.contains("Events (newest last):") && text.contains("Created"),
        "{text}"
    );
    ensure!(
        json["finalizer"] == true && json["paused"] == false,
        "{json}"
    );

    // Paused: the verdict says no call is made.
    s.api(ZONE)
        .patch(
            "z",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"orchard.dev/paused": "true"}}})),
        )
        .await?;
    s.wait_condition(ZONE, "z", "Progressing", "False", Some("Paused"))
        .await?;
    let paused = s.explain(&["dnszone/z"])?;
    ensure!(
        paused
            .lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("  paused (annotation orchard.dev/paused=true)")),
        "{paused}"
    );

    // Its host stopped: nobody serves it now, and the verdict says that first.
    host.terminate()?;
    ensure!(host.wait_exit(CONVERGE).await?.success());
    let orphan = poll_until(
        CONVERGE,
        "explain to see that no host serves the kind",
        || async {
            let text = s.explain(&["dnszone/z"])?;
            Ok(text.contains("no Orchard host serves").then_some(text))
        },
    )
    .await?;
    ensure!(
        orphan.lines().nth(1)
            == Some(&*format!(
                "  no Orchard host serves dnszones.pdns.orchard.dev in namespace {}: nothing reconciles it",
                s.ns
            )),
        "{orphan}"
    );

    // A kind nobody knows is a clear error naming it.
    let unknown = Command::new(orchard_bin())
        .args(["explain", "nosuchkind/z", "-n", &s.ns])
        .env("KUBECONFIG", &s.env.admin_kubeconfig)
        .output()?;
    ensure!(!unknown.status.success());
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    ensure!(stderr.contains("kind nosuchkind: no CRD"), "{stderr}");

    // Clean up: unpaused and served again, the zone goes from PowerDNS.
    let _host = s.start_host(&[])?;
    s.api(ZONE)
        .patch(
            "z",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"orchard.dev/paused": null}}})),
        )
        .await?;
    s.delete(ZONE, "z").await?;
    s.wait_gone(ZONE, "z").await?;
    ensure!(pdns.zone(&zone).await?.is_none());
    Ok(())
}

/// A zone whose credentials Secret does not exist yet, and one whose Secret points at an
/// address nothing serves (every pass fails, transiently): `orchard explain` says which
/// Secret it waits for and that the other is retried with backoff, with its next pass.
#[tokio::test(flavor = "multi_thread")]
async fn explain_says_what_a_zone_waits_for_and_when_a_failing_one_is_retried() -> anyhow::Result<()>
{
    // The host may reach that address (allowed), but nothing listens there.
    let env = orchard_e2e::TestEnv::load()?;
    let closed = format!("http://127.0.0.1:{}", free_port()?);
    let mut spec = pdns::host_spec(&env);
    spec.allow_hosts.push(closed.clone());
    let mut s = Harness::new("explain-wait", spec).await?;
    let admin = format!("127.0.0.1:{}", free_port()?);
    let _host = s.start_host(&[("ORCHARD_ADMIN_ADDR", admin.as_str())])?;

    let waiting = format!(
        "apiVersion: pdns.orchard.dev/v1alpha1\nkind: DnsZone\nmetadata: {{name: w}}\nspec:\n  credentialsRef: {{secretName: not-yet}}\n  resource: {{name: \"{}\"}}\n",
        pdns::zone_name(&s, "waiting")
    );
    s.apply(&waiting).await?;
    s.wait_condition(ZONE, "w", "Progressing", "True", None)
        .await?;
    let text = poll_until(CONVERGE, "explain to show the wait", || async {
        let text = s.explain(&["dnszone/w"])?;
        Ok(text.contains("Next pass:").then_some(text))
    })
    .await?;
    let verdict = text.lines().nth(1).unwrap_or_default();
    ensure!(
        verdict.contains("Waiting for Secret/not-yet to be created"),
        "the verdict names the Secret: {text}"
    );
    ensure!(
        text.contains(
            "Next pass:      at the next change of the object, a dependency or its Secret"
        ),
        "a wait has no timer: {text}"
    );

    // Nothing listens on that port: each pass fails before PowerDNS, and is retried.
    s.create_secret("closed", &[("url", &closed), ("apiKey", "k")])
        .await?;
    let failing = format!(
        "apiVersion: pdns.orchard.dev/v1alpha1\nkind: DnsZone\nmetadata: {{name: b}}\nspec:\n  credentialsRef: {{secretName: closed}}\n  resource: {{name: \"{}\"}}\n",
        pdns::zone_name(&s, "backoff")
    );
    s.apply(&failing).await?;
    s.wait_condition(ZONE, "b", "Progressing", "True", Some("TransientError"))
        .await?;
    let json: Value = poll_until(CONVERGE, "explain to show the retry", || async {
        let json: Value = serde_json::from_str(&s.explain(&["dnszone/b", "-o", "json"])?)?;
        Ok((json["journal"]["next"]["why"] == "retry").then_some(json))
    })
    .await?;
    ensure!(
        json["verdict"]
            .as_str()
            .is_some_and(|v| v.starts_with("failing, retried with backoff: ")),
        "{json}"
    );
    ensure!(
        json["journal"]["next"]["at"].is_string(),
        "a retry has a time: {json}"
    );
    ensure!(
        json["journal"]["passes"][0]["outcome"] == "TransientError",
        "{json}"
    );
    let text = s.explain(&["dnszone/b"])?;
    ensure!(
        text.lines()
            .any(|l| l.starts_with("Next pass:      retry, in ")
                || l.starts_with("Next pass:      retry, 0s ago")),
        "{text}"
    );
    Ok(())
}

/// One span of the collector's file, flattened.
#[derive(Debug, Clone)]
struct Span {
    trace: String,
    id: String,
    parent: String,
    name: String,
    start: u128,
    end: u128,
    attributes: std::collections::BTreeMap<String, String>,
    /// OTLP status code: 0 unset, 1 ok, 2 error.
    status: i64,
    status_message: String,
}

/// An OTLP JSON attribute value as text (OTLP JSON writes 64-bit integers as strings).
fn attribute_text(value: &Value) -> String {
    match value {
        Value::Object(map) => map.values().next().map_or_else(String::new, |v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }),
        other => other.to_string(),
    }
}

/// Every span of trace `trace` in the collector's file (one OTLP JSON `TracesData` per line).
fn spans_of(file: &std::path::Path, trace: &str) -> anyhow::Result<Vec<Span>> {
    // The collector creates the file at its first export.
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", file.display())),
    };
    let nanos = |v: &Value| -> u128 {
        v.as_str()
            .and_then(|s| s.parse().ok())
            .or_else(|| v.as_u64().map(u128::from))
            .unwrap_or_default()
    };
    let mut spans = Vec::new();
    // The last line may be half written.
    for data in text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
    {
        let resource_spans = data["resourceSpans"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for scope in resource_spans
            .iter()
            .flat_map(|r| r["scopeSpans"].as_array().cloned().unwrap_or_default())
        {
            for span in scope["spans"].as_array().into_iter().flatten() {
                if span["traceId"] != trace {
                    continue;
                }
                spans.push(Span {
                    trace: trace.to_owned(),
                    id: span["spanId"].as_str().unwrap_or_default().to_owned(),
                    parent: span["parentSpanId"].as_str().unwrap_or_default().to_owned(),
                    name: span["name"].as_str().unwrap_or_default().to_owned(),
                    start: nanos(&span["startTimeUnixNano"]),
                    end: nanos(&span["endTimeUnixNano"]),
                    attributes: span["attributes"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|a| {
                            (
                                a["key"].as_str().unwrap_or_default().to_owned(),
                                attribute_text(&a["value"]),
                            )
                        })
                        .collect(),
                    status: span["status"]["code"].as_i64().unwrap_or_default(),
                    status_message: span["status"]["message"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                });
            }
        }
    }
    Ok(spans)
}

/// The one span named `name` whose parent is `parent` (a missing or doubled one is an error
/// showing the whole trace).
fn child<'a>(spans: &'a [Span], parent: &str, name: &str) -> anyhow::Result<&'a Span> {
    let found: Vec<&Span> = spans
        .iter()
        .filter(|s| s.parent == parent && s.name == name)
        .collect();
    match found.as_slice() {
        [one] => Ok(one),
        _ => anyhow::bail!(
            "{} spans {name:?} under {parent:?} in trace {}: {spans:#?}",
            found.len(),
            spans.first().map_or("", |s| s.trace.as_str())
        ),
    }
}

/// The trace id an Event note ends with: `… (trace <32 hex digits>)`.
fn trace_of(note: &str) -> anyhow::Result<String> {
    let id = note
        .rsplit_once("(trace ")
        .and_then(|(_, rest)| rest.strip_suffix(')'))
        .with_context(|| format!("no trace id in the Event note {note:?}"))?;
    ensure!(
        id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()),
        "not a trace id: {id:?}"
    );
    Ok(id.to_owned())
}

/// The note of the Event `reason` on object `name`, once it is there.
async fn event_note(s: &Harness, name: &str, reason: &str) -> anyhow::Result<String> {
    let events: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(s.client.clone(), &s.ns);
    poll_until(
        CONVERGE,
        &format!("the {reason} Event on {name}"),
        || async {
            Ok(events
                .list(&kube::api::ListParams::default())
                .await?
                .items
                .into_iter()
                .find(|e| {
                    e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                        && e.reason.as_deref() == Some(reason)
                })
                .and_then(|e| e.note))
        },
    )
    .await
}

/// The spans of `trace` once the collector holds its span `last` (the root: it ends after
/// its children, which were exported with it or before; the batch goes every 100 ms here).
async fn trace_with(
    otlp: &orchard_e2e::Otlp,
    trace: &str,
    last: &str,
) -> anyhow::Result<Vec<Span>> {
    poll_until(
        CONVERGE,
        &format!("the collector to hold span {last:?} of trace {trace}"),
        || async {
            let spans = spans_of(&otlp.traces_file, trace)?;
            Ok(spans.iter().any(|s| s.name == last).then_some(spans))
        },
    )
    .await
}

/// With `OTEL_EXPORTER_OTLP_ENDPOINT` set, a zone's create is one trace in the real
/// collector: the pass, its plugin calls, each call's HTTP request to PowerDNS, and the
/// status write after the create; the Event and the host's log carry the trace id. A
/// create PowerDNS refuses shows the refused request and the error reason in its trace.
#[tokio::test(flavor = "multi_thread")]
async fn a_traced_zone_create_is_one_trace_from_the_pass_to_each_call_request_and_write()
-> anyhow::Result<()> {
    let (mut s, pdns) = pdns::harness("traces").await?;
    let otlp = s.env.otlp.clone().context(
        "the test environment has no OpenTelemetry Collector: restart it (tests/env/testenv.sh down && up)",
    )?;
    let host = s.start_host(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.endpoint.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ])?;
    let zone = pdns::zone_name(&s, "traced");
    s.apply(&zone_yaml("z", &zone)).await?;
    s.wait_ready(ZONE, "z").await?;
    ensure!(pdns.zone(&zone).await?.is_some());

    let trace = trace_of(&event_note(&s, "z", "Created").await?)?;
    let spans = trace_with(&otlp, &trace, "reconcile DnsZone").await?;
    let root = child(&spans, "", "reconcile DnsZone")?;
    for (key, value) in [
        ("object", "z"),
        ("namespace", s.ns.as_str()),
        ("plugin", "pdns-zone"),
        ("generation", "1"),
    ] {
        ensure!(
            root.attributes.get(key).map(String::as_str) == Some(value),
            "{key} of the pass: {root:#?}"
        );
    }
    ensure!(
        root.attributes
            .get("plugin.digest")
            .is_some_and(|d| d.starts_with("sha256:")),
        "{root:#?}"
    );
    ensure!(root.status != 2, "the pass succeeded: {root:#?}");
    let create = child(&spans, &root.id, "create")?;
    ensure!(
        create.attributes.get("outcome").map(String::as_str) == Some("ok"),
        "{create:#?}"
    );
    let post = child(&spans, &create.id, "HTTP POST")?;
    ensure!(
        post.attributes
            .get("http.response.status_code")
            .map(String::as_str)
            == Some("201"),
        "{post:#?}"
    );
    ensure!(
        post.attributes.get("server.address").map(String::as_str) == Some("127.0.0.1"),
        "{post:#?}"
    );
    ensure!(
        !post
            .attributes
            .keys()
            .any(|k| k.contains("header") || k.contains("body.content")),
        "never a header or a body: {post:#?}"
    );
    let status = child(&spans, &root.id, "apply status DnsZone")?;
    ensure!(
        create.end <= status.start && status.end <= root.end,
        "the status is written after the create, within the pass: {spans:#?}"
    );

    // PowerDNS refuses the zone (a nameserver that is not a host name): the create's request
    // fails with 422, and the pass's error says why.
    let refused = pdns::zone_name(&s, "refused");
    s.apply(&format!(
        "apiVersion: pdns.orchard.dev/v1alpha1\nkind: DnsZone\nmetadata: {{name: r}}\nspec:\n  credentialsRef: {{secretName: pdns}}\n  resource: {{name: \"{refused}\", nameservers: [\"not a host name\"]}}\n"
    ))
    .await?;
    s.wait_condition(
        ZONE,
        "r",
        "Progressing",
        "False",
        Some("InvalidConfiguration"),
    )
    .await?;
    let trace = trace_of(&event_note(&s, "r", "InvalidConfiguration").await?)?;
    let spans = trace_with(&otlp, &trace, "reconcile DnsZone").await?;
    let root = child(&spans, "", "reconcile DnsZone")?;
    ensure!(
        root.status == 2
            && root.attributes.get("outcome").map(String::as_str) == Some("InvalidConfiguration")
            && root.status_message.contains("HTTP 422"),
        "the pass failed, saying why: {root:#?}"
    );
    let create = child(&spans, &root.id, "create")?;
    let post = child(&spans, &create.id, "HTTP POST")?;
    ensure!(
        post.attributes
            .get("http.response.status_code")
            .map(String::as_str)
            == Some("422")
            && post.status == 2,
        "{post:#?}"
    );
    ensure!(pdns.zone(&refused).await?.is_none());
    let log = std::fs::read_to_string(&host.log)?;
    ensure!(
        log.lines().any(|l| l.contains("pass failed")
            && l.contains("object=r ")
            && l.contains(&format!("trace_id=\"{trace}\""))),
        "the failed pass's log line carries its trace id ({})",
        host.log.display()
    );

    s.delete(ZONE, "z").await?;
    s.delete(ZONE, "r").await?;
    s.wait_gone(ZONE, "z").await?;
    s.wait_gone(ZONE, "r").await?;
    Ok(())
}
