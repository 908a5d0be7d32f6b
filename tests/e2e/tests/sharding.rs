//! Sharding against the real apiserver and PowerDNS: three replicas of one ring share 1,000
//! zones; one is killed (`SIGKILL`) in the middle of the creates; the survivors take its buckets when
//! its Lease expires; every zone becomes Available, exists exactly once in PowerDNS, and no
//! zone is ever reconciled by two replicas at once (proved from the hosts' pass traces); every
//! zone was labelled with its bucket in the write that put the plugin's finalizer on.
//! And two replicas serving a Plugin from the real registry (signed with cosign): each its
//! share of the kind, one writer of the Plugin's status, a new digest swapped in by both; and
//! a replica that takes the buckets of one that left while the registry cannot be reached,
//! serving the Plugin's kind over all of them with the version it loaded before.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, ensure};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, ResourceExt};
use orchard_e2e::harness::{CONVERGE, Harness, Host, HostSpec, has_condition};
use orchard_e2e::oci::Workdir;
use orchard_e2e::paths::plugin;
use orchard_e2e::pdns::{self, ZONE};
use orchard_e2e::{TestEnv, free_port, plugins, poll_until, poll_until_every};
use sha2::{Digest, Sha256};

const OBJECTS: usize = 1000;
const LEASE_SECONDS: u64 = 6;
const REPLICAS: [&str; 3] = ["shard-a", "shard-b", "shard-c"];
const BUCKET_LABEL: &str = "orchard.dev/shard-bucket";

fn now_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// The first 8 bytes of SHA-256, big-endian: the ring's hash (docs/sharding.md).
fn ring_hash(text: &str) -> u64 {
    let digest = Sha256::digest(text);
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

/// The bucket of the object `group/kind/namespace/name` (an oracle written from the docs:
/// the ring's hash of that key, modulo 256).
fn bucket_of(key: &str) -> u16 {
    u16::try_from(ring_hash(key) % 256).unwrap_or(u16::MAX)
}

/// The bucket the host must give the zone `namespace/name`.
fn expected_bucket(namespace: &str, name: &str) -> u16 {
    bucket_of(&format!("pdns.orchard.dev/DnsZone/{namespace}/{name}"))
}

/// The holder of every bucket once the ring of `replicas` settled (an oracle written from the
/// docs: 128 points per replica at the hash of `<replica>#<i>`; a bucket belongs to the first
/// point at or after the hash of `bucket-<b>`, going round).
fn settled_holders(replicas: &[&str]) -> Vec<String> {
    let mut points: Vec<(u64, &str)> = replicas
        .iter()
        .flat_map(|r| (0..128).map(move |i| (ring_hash(&format!("{r}#{i}")), *r)))
        .collect();
    points.sort_unstable();
    (0..256)
        .map(|b| {
            let at = ring_hash(&format!("bucket-{b}"));
            let i = points.partition_point(|(p, _)| *p < at);
            points.get(i).unwrap_or(&points[0]).1.to_owned()
        })
        .collect()
}

/// The bucket of a cluster-scoped Plugin (its namespace is empty).
fn expected_plugin_bucket(name: &str) -> u16 {
    bucket_of(&format!("orchard.dev/Plugin//{name}"))
}

/// The bucket table: holder of each bucket (`""`: free).
async fn table(maps: &Api<ConfigMap>, ring: &str) -> anyhow::Result<Option<Vec<String>>> {
    let Some(map) = maps.get_opt(&format!("orchard-shard-{ring}")).await? else {
        return Ok(None);
    };
    let text = map
        .data
        .and_then(|d| d.get("holders").cloned())
        .unwrap_or_default();
    Ok(Some(serde_json::from_str(&text)?))
}

/// Every host's log excerpt, for a failed phase.
fn reports(hosts: &[Host]) -> String {
    let reports: Vec<String> = hosts.iter().map(Host::report).collect();
    format!("host logs:\n{}", reports.join("\n"))
}

/// A pass of one replica over one object, from the pass trace.
#[derive(Debug, Clone)]
struct Pass {
    instance: String,
    begin: u128,
    /// `None`: it never ended (its host was killed).
    end: Option<u128>,
}

/// `Err` (saying why) unless `zone`'s bucket label and pdns-zone's finalizer are both owned
/// by one apply of pdns-zone's finalizer manager, the label by no other writer: a ring's
/// labeller puts the finalizer on in the write that labels (one write where there were two).
fn labelled_with_its_finalizer(zone: &kube::api::DynamicObject) -> Result<(), String> {
    let label = format!("f:{BUCKET_LABEL}");
    let owns_label =
        |fields: &serde_json::Value| fields["f:metadata"]["f:labels"].get(&label).is_some();
    let entries = zone.metadata.managed_fields.as_deref().unwrap_or_default();
    let fields = |e: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry| {
        e.fields_v1
            .as_ref()
            .map(|f| f.0.clone())
            .unwrap_or_default()
    };
    let by_manager = entries.iter().find(|e| {
        e.manager.as_deref() == Some("orchard.dev/pdns-zone/finalizer")
            && e.operation.as_deref() == Some("Apply")
    });
    let Some(entry) = by_manager else {
        return Err(format!(
            "{}: no apply of the finalizer manager",
            zone.name_any()
        ));
    };
    let own = fields(entry);
    if !owns_label(&own)
        || own["f:metadata"]["f:finalizers"]
            .get("v:\"orchard.dev/pdns-zone\"")
            .is_none()
    {
        return Err(format!(
            "{}: the finalizer manager owns {own}",
            zone.name_any()
        ));
    }
    let others: Vec<&str> = entries
        .iter()
        .filter(|e| !std::ptr::eq(*e, entry) && owns_label(&fields(e)))
        .filter_map(|e| e.manager.as_deref())
        .collect();
    if others.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{}: the bucket label is also written by {others:?}",
            zone.name_any()
        ))
    }
}

/// Object → its passes, from the trace file the three hosts append to.
fn passes(trace: &Path) -> anyhow::Result<HashMap<String, Vec<Pass>>> {
    let text = std::fs::read_to_string(trace)?;
    let mut open: HashMap<(String, String), Vec<u128>> = HashMap::new();
    let mut done: HashMap<String, Vec<Pass>> = HashMap::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let [at, what, instance, _plugin, object] = fields[..] else {
            anyhow::bail!("bad trace line {line:?}");
        };
        let at: u128 = at.parse()?;
        let key = (instance.to_owned(), object.to_owned());
        if what == "begin" {
            open.entry(key).or_default().push(at);
        } else {
            let begin = open
                .get_mut(&key)
                .and_then(Vec::pop)
                .with_context(|| format!("an end without a begin: {line:?}"))?;
            done.entry(object.to_owned()).or_default().push(Pass {
                instance: instance.to_owned(),
                begin,
                end: Some(at),
            });
        }
    }
    for ((instance, object), begins) in open {
        for begin in begins {
            done.entry(object.clone()).or_default().push(Pass {
                instance: instance.clone(),
                begin,
                end: None,
            });
        }
    }
    Ok(done)
}

#[tokio::test(flavor = "multi_thread")]
#[allow(clippy::too_many_lines, reason = "one scenario, its phases in order")]
async fn three_replicas_share_1000_zones_and_a_killed_one_is_taken_over_without_a_duplicate_or_an_overlap()
-> anyhow::Result<()> {
    let env = TestEnv::load()?;
    let spec = HostSpec {
        plugins: vec![plugin("pdns-zone")],
        kinds: vec![pdns::zone_resource()],
        allow_hosts: vec![env.pdns_api_url.clone()],
    };
    let mut s = Harness::new("shards", spec).await?;
    pdns::create_secret(&s, "pdns").await?;
    let pdns = pdns::Api::new(&env)?;
    let ring = format!("r{}", s.id).to_ascii_lowercase().replace('_', "-");
    let trace = env.logs.join(format!("pass-trace-{}.log", s.ns));
    let _ = std::fs::remove_file(&trace);
    let trace_text = trace.display().to_string();
    let lease_seconds = LEASE_SECONDS.to_string();
    let ns = s.ns.clone();

    // Phase 1: three replicas join the ring and split its 256 buckets.
    let mut hosts = Vec::new();
    for name in REPLICAS {
        let env = [
            ("ORCHARD_SHARD_RING", ring.as_str()),
            ("ORCHARD_LEASE_SECONDS", lease_seconds.as_str()),
            ("POD_NAMESPACE", ns.as_str()),
            ("ORCHARD_INSTANCE", name),
            ("ORCHARD_PASS_TRACE", trace_text.as_str()),
        ];
        hosts.push(s.start_host(&env)?);
    }
    s.wait_kinds().await?;
    let maps: Api<ConfigMap> = Api::namespaced(s.client.clone(), &s.ns);
    poll_until(
        Duration::from_mins(1),
        "every bucket held, by all three replicas",
        || {
            let running = hosts.iter_mut().try_for_each(Host::ensure_running);
            let maps = &maps;
            let ring = &ring;
            async move {
                running?;
                let Some(holders) = table(maps, ring).await? else {
                    return Ok(None);
                };
                let by: BTreeSet<&str> = holders.iter().map(String::as_str).collect();
                Ok((by == REPLICAS.into_iter().collect()).then_some(()))
            }
        },
    )
    .await
    .with_context(|| reports(&hosts))?;

    // Phase 2: 1,000 zones created by 16 parallel clients; shard-c is killed at 40 %.
    let zones = s.api(ZONE);
    let created = Arc::new(AtomicUsize::new(0));
    let names: Vec<String> = (0..OBJECTS).map(|i| format!("z{i}")).collect();
    let creating = {
        let (zones, created, ns, id) = (
            zones.clone(),
            Arc::clone(&created),
            s.ns.clone(),
            s.id.clone(),
        );
        let names = names.clone();
        tokio::spawn(async move {
            futures::stream::iter(names)
                .map(|name| {
                    let (zones, created, ns, id) =
                        (zones.clone(), Arc::clone(&created), ns.clone(), id.clone());
                    async move {
                        let obj = serde_json::from_value(serde_json::json!({
                            "apiVersion": "pdns.orchard.dev/v1alpha1",
                            "kind": "DnsZone",
                            "metadata": {"name": name, "namespace": ns},
                            "spec": {
                                "credentialsRef": {"secretName": "pdns"},
                                "resource": {"name": format!("{name}.{id}.test.")},
                            },
                        }))?;
                        zones.create(&PostParams::default(), &obj).await?;
                        created.fetch_add(1, Ordering::SeqCst);
                        anyhow::Ok(())
                    }
                })
                .buffer_unordered(16)
                .collect::<Vec<_>>()
                .await
                .into_iter()
                .collect::<anyhow::Result<Vec<()>>>()
        })
    };
    poll_until(Duration::from_mins(2), "40 % of the creates", || async {
        Ok((created.load(Ordering::SeqCst) >= OBJECTS * 2 / 5).then_some(()))
    })
    .await?;
    let before_kill = table(&maps, &ring).await?.context("the bucket table")?;
    let killed_at = now_nanos();
    let kill_clock = Instant::now();
    hosts[2].kill_hard();
    let victim = REPLICAS[2];

    // Phase 3: its buckets are taken over when its Lease expires.
    // Looked at every 20 ms: when the survivors took over is measured below.
    poll_until_every(
        Duration::from_secs(3 * LEASE_SECONDS),
        Duration::from_millis(20),
        "the killed replica's buckets to be held by the survivors",
        || {
            let running = hosts[..2].iter_mut().try_for_each(Host::ensure_running);
            let maps = &maps;
            let ring = &ring;
            async move {
                running?;
                let holders = table(maps, ring).await?.unwrap_or_default();
                Ok(
                    (!holders.is_empty() && holders.iter().all(|h| h != victim && !h.is_empty()))
                        .then_some(()),
                )
            }
        },
    )
    .await
    .with_context(|| reports(&hosts))?;
    let (takeover, seen_at) = (kill_clock.elapsed(), now_nanos());
    // A replica killed right after it renewed holds its Lease for one full duration; the
    // survivors look again the moment it expires and take its buckets in one write.
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(s.client.clone(), &s.ns);
    let renewed = leases
        .get(&format!("orchard-shard-{ring}-{victim}"))
        .await?
        .spec
        .and_then(|l| l.renew_time)
        .context("the victim's last renewal")?
        .0
        .as_nanosecond();
    let expired = u128::try_from(renewed)? + u128::from(LEASE_SECONDS) * 1_000_000_000;
    let after_expiry = Duration::from_nanos(u64::try_from(seen_at.saturating_sub(expired))?);
    // The survivors wake at the expiry instant; what follows is two apiserver round trips
    // (list the Leases and read the table at once, then swap the table) on an apiserver busy
    // with the creates.
    ensure!(
        after_expiry <= Duration::from_secs(2),
        "took {after_expiry:?} after the victim's lease expired to take its buckets"
    );
    ensure!(
        takeover <= Duration::from_secs(LEASE_SECONDS) + Duration::from_secs(2),
        "took {takeover:?} to take over (lease {LEASE_SECONDS} s)"
    );
    creating.await??;

    // Phase 4: every zone Available, each in the bucket the docs give it.
    let available_clock = Instant::now();
    let all_available = poll_until(
        Duration::from_mins(5),
        "all 1,000 zones Available",
        || async {
            let list = zones.list(&ListParams::default()).await?;
            let ready = list
                .items
                .iter()
                .filter(|z| has_condition(z, "Available", "True", None))
                .count();
            Ok((ready == OBJECTS).then_some(list.items))
        },
    )
    .await
    .with_context(|| reports(&hosts))?;
    eprintln!(
        "all Available {:?} after the creates ended ({:?} after the kill)",
        available_clock.elapsed(),
        kill_clock.elapsed()
    );
    let mut share: BTreeMap<String, usize> = BTreeMap::new();
    for zone in &all_available {
        let bucket = zone.labels().get(BUCKET_LABEL).cloned().unwrap_or_default();
        let expected = expected_bucket(&s.ns, &zone.name_any());
        assert_eq!(
            bucket,
            expected.to_string(),
            "{} is labelled with the wrong bucket",
            zone.name_any()
        );
        let owner = before_kill[usize::from(expected)].clone();
        *share.entry(owner).or_default() += 1;
    }
    let apart: Vec<String> = all_available
        .iter()
        .filter_map(|zone| labelled_with_its_finalizer(zone).err())
        .collect();
    assert!(
        apart.is_empty(),
        "{} of {OBJECTS} zones were not labelled in the write that put the finalizer on: {:?}",
        apart.len(),
        &apart[..apart.len().min(3)]
    );
    for replica in REPLICAS {
        let n = share.get(replica).copied().unwrap_or(0);
        assert!(
            (OBJECTS / 4..=OBJECTS * 42 / 100).contains(&n),
            "{replica} owned {n} of {OBJECTS} zones before the kill: {share:?}"
        );
    }

    // Phase 5: each zone exists exactly once in PowerDNS.
    let suffix = format!(".{}.test.", s.id);
    let ours: Vec<String> = pdns
        .zones()
        .await?
        .iter()
        .filter_map(|z| z["name"].as_str().map(str::to_owned))
        .filter(|n| n.ends_with(&suffix))
        .collect();
    let distinct: BTreeSet<&String> = ours.iter().collect();
    assert_eq!(ours.len(), OBJECTS, "zones in PowerDNS");
    assert_eq!(distinct.len(), OBJECTS, "a zone exists twice");

    // Phase 6: no zone was ever reconciled by two replicas at once; a survivor served only
    // its own buckets, and the victim's zones moved to the bucket's new holder.
    let after = table(&maps, &ring).await?.context("the bucket table")?;
    let traced = passes(&trace)?;
    let mut moved = 0;
    for name in &names {
        let key = format!("{}/{name}", s.ns);
        let mut passes = traced.get(&key).cloned().unwrap_or_default();
        assert!(!passes.is_empty(), "{key} was never reconciled");
        passes.sort_by_key(|p| p.begin);
        for pair in passes.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            let a_end = a.end.unwrap_or(killed_at);
            if a.instance != b.instance {
                assert!(
                    a_end <= b.begin,
                    "{key}: {} began a pass before {}'s ended ({a:?} / {b:?})",
                    b.instance,
                    a.instance
                );
            }
        }
        let bucket = usize::from(expected_bucket(&s.ns, name));
        let (owner, new_owner) = (&before_kill[bucket], &after[bucket]);
        if owner == victim {
            assert!(
                passes
                    .iter()
                    .all(|p| p.instance == victim || p.instance == *new_owner),
                "{key}: {passes:?}"
            );
            moved += usize::from(passes.iter().any(|p| p.instance == victim));
        } else {
            assert!(
                passes.iter().all(|p| p.instance == *owner),
                "{key} (bucket of {owner}): {passes:?}"
            );
        }
    }
    assert!(
        moved > 0,
        "the victim reconciled none of its zones before it died"
    );
    eprintln!(
        "shares before the kill {share:?}; takeover seen {takeover:?} after the kill, \
         {after_expiry:?} after the victim's lease expired; {moved} zones moved from the victim after it had reconciled them; {} passes traced",
        traced.values().map(Vec::len).sum::<usize>()
    );

    // Phase 7: clean up (the survivors delete the zones in PowerDNS).
    delete_every_zone(&zones, &pdns, &suffix, Duration::from_mins(3))
        .await
        .with_context(|| reports(&hosts))?;
    drop(hosts);
    Ok(())
}

/// Deletes every zone of `zones` and waits (at most `within`) until they are gone, then
/// checks that PowerDNS holds none whose name ends in `suffix`.
async fn delete_every_zone(
    zones: &Api<kube::api::DynamicObject>,
    pdns: &pdns::Api,
    suffix: &str,
    within: Duration,
) -> anyhow::Result<()> {
    zones
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await?;
    poll_until(within, "every zone deleted", || async {
        Ok(zones
            .list(&ListParams::default())
            .await?
            .items
            .is_empty()
            .then_some(()))
    })
    .await?;
    let left = pdns
        .zones()
        .await?
        .iter()
        .filter(|z| z["name"].as_str().is_some_and(|n| n.ends_with(suffix)))
        .count();
    ensure!(left == 0, "{left} zones left in PowerDNS");
    Ok(())
}

/// Zones of the Plugin scenario: enough that both replicas hold some.
const PLUGIN_ZONES: usize = 40;

/// The start of a scenario of Plugins served by a ring: a harness whose hosts serve no static
/// plugin, the PowerDNS Secret, PowerDNS's API, and a work directory.
async fn plugin_scenario(name: &str) -> anyhow::Result<(Harness, TestEnv, pdns::Api, Workdir)> {
    let spec = HostSpec {
        plugins: vec![],
        kinds: vec![pdns::zone_resource()],
        allow_hosts: vec![],
    };
    let s = Harness::new(name, spec).await?;
    let env = s.env.clone();
    pdns::create_secret(&s, "pdns").await?;
    let pdns = pdns::Api::new(&env)?;
    let wd = Workdir::new(&format!("{name}-{}", s.id))?;
    Ok((s, env, pdns, wd))
}

/// Starts `replicas` of the shard ring `ring`, each watching the scenario's Plugins with a
/// content cache of its own (as two pods have) and the environment `extra` gives it.
fn start_plugin_ring(
    s: &mut Harness,
    wd: &Workdir,
    ring: &str,
    replicas: &[&str],
    extra: impl Fn(&str) -> anyhow::Result<Vec<(&'static str, String)>>,
) -> anyhow::Result<Vec<Host>> {
    let mut hosts = Vec::new();
    for name in replicas {
        let cache = wd.path.join(format!("oci-cache-{name}"));
        let mut env = vec![
            ("ORCHARD_SHARD_RING", ring.to_owned()),
            ("ORCHARD_LEASE_SECONDS", LEASE_SECONDS.to_string()),
            ("ORCHARD_INSTANCE", (*name).to_owned()),
            ("ORCHARD_OCI_CACHE_DIR", cache.display().to_string()),
        ];
        env.extend(extra(name)?);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        hosts.push(plugins::start_watching_host(s, wd, &env)?);
    }
    Ok(hosts)
}

/// The end of a Plugin scenario: every zone deleted through the `hosts` (none left in
/// PowerDNS), then the Plugin `plugin`.
async fn end_plugin_scenario(
    s: &Harness,
    pdns: &pdns::Api,
    plugin: &str,
    hosts: &[Host],
) -> anyhow::Result<()> {
    let suffix = format!(".{}.test.", s.id);
    delete_every_zone(&s.api(ZONE), pdns, &suffix, Duration::from_mins(2))
        .await
        .with_context(|| reports(hosts))?;
    plugins::api(s)
        .delete(plugin, &DeleteParams::default())
        .await?;
    Ok(())
}

/// Creates the zones `names` in the namespace of `s`, each `<name>.<scenario id>.test.` in
/// PowerDNS.
async fn create_zones(s: &Harness, names: impl IntoIterator<Item = String>) -> anyhow::Result<()> {
    let zones = s.api(ZONE);
    for zone in names {
        let obj = serde_json::from_value(serde_json::json!({
            "apiVersion": "pdns.orchard.dev/v1alpha1",
            "kind": "DnsZone",
            "metadata": {"name": zone, "namespace": s.ns},
            "spec": {
                "credentialsRef": {"secretName": "pdns"},
                "resource": {"name": format!("{zone}.{}.test.", s.id)},
            },
        }))?;
        zones.create(&PostParams::default(), &obj).await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
#[allow(clippy::too_many_lines, reason = "one scenario, its phases in order")]
async fn two_replicas_serve_a_signed_plugin_each_its_share_with_one_status_writer_and_both_swap_it()
-> anyhow::Result<()> {
    let (mut s, env, pdns, wd) = plugin_scenario("shard-plugins").await?;
    let key = wd.cosign_key_pair("release")?;
    let public_key = std::fs::read_to_string(&key)?;
    let repo = format!("{}/e2e/pdns-zone-{}", env.registry, s.id);
    // Two signed builds: v1 observes pluginBuild "0.1.0", v2 "0.1.0+next".
    let v1 = wd.push(&env, &plugin("pdns-zone"), &format!("{repo}:v1"))?;
    let v2 = wd.push(&env, &plugin("pdns-zone-next"), &format!("{repo}:v2"))?;
    wd.cosign_sign("release", &v1)?;
    wd.cosign_sign("release", &v2)?;
    let digest = |pinned: &str| pinned.split('@').nth(1).unwrap_or_default().to_owned();
    let verified = |reference: &str| serde_json::json!({"reference": reference, "verification": {"publicKey": public_key}});

    // Phase 1: two replicas of one ring, both watching this scenario's Plugins.
    let ring = format!("p{}", s.id).to_ascii_lowercase().replace('_', "-");
    let trace = env.logs.join(format!("pass-trace-{}.log", s.ns));
    let _ = std::fs::remove_file(&trace);
    let trace_text = trace.display().to_string();
    let replicas = ["plugins-a", "plugins-b"];
    // An admin server each, for `explain`.
    let mut hosts = start_plugin_ring(&mut s, &wd, &ring, &replicas, |_| {
        Ok(vec![
            ("ORCHARD_PASS_TRACE", trace_text.clone()),
            ("ORCHARD_ADMIN_ADDR", format!("127.0.0.1:{}", free_port()?)),
        ])
    })?;
    // Settled: every bucket with the holder the ring gives it, so nothing moves below.
    let maps: Api<ConfigMap> = Api::namespaced(s.client.clone(), &s.ns);
    let holders = settled_holders(&replicas);
    poll_until(
        Duration::from_mins(1),
        "the ring of both replicas settled",
        || {
            let running = hosts.iter_mut().try_for_each(Host::ensure_running);
            let (maps, ring, holders) = (&maps, &ring, &holders);
            async move {
                running?;
                Ok((table(maps, ring).await?.as_ref() == Some(holders)).then_some(()))
            }
        },
    )
    .await
    .with_context(|| reports(&hosts))?;

    // Phase 2: the Plugin is served, and its status written by the holder of its bucket.
    let name = format!("zones-{}", s.id);
    let writer = &holders[usize::from(expected_plugin_bucket(&name))];
    plugins::apply(&s, &name, verified(&v1), &[&env.pdns_api_url]).await?;
    let served = plugins::wait_ready(&s, &name, "True", "Serving")
        .await
        .with_context(|| reports(&hosts))?;
    assert_eq!(
        served.data["status"]["resolvedDigest"],
        digest(&v1).as_str()
    );
    let message = plugins::ready_message(&served);
    assert!(
        message.ends_with(&format!("(as seen by replica {writer})")),
        "the status of {name} was not written by {writer}, the holder of its bucket: {message}"
    );
    // Pinned by digest, the Plugin is not polled: from now on only a second writer (the
    // other replica, whose message differs) would change it, over and over.
    let written = served.metadata.resource_version.clone();

    // Phase 3: zones of both shares become Available, each reconciled by its bucket's holder.
    s.wait_kinds().await?;
    let zones = s.api(ZONE);
    let names: Vec<String> = (0..PLUGIN_ZONES).map(|i| format!("p{i}")).collect();
    create_zones(&s, names.iter().cloned()).await?;
    let observed_by = |build: &'static str| {
        let zones = zones.clone();
        move || {
            let zones = zones.clone();
            async move {
                let list = zones.list(&ListParams::default()).await?;
                let done = list
                    .items
                    .iter()
                    .filter(|z| {
                        has_condition(z, "Available", "True", None)
                            && z.data["status"]["resource"]["pluginBuild"] == build
                    })
                    .count();
                Ok((done == PLUGIN_ZONES).then_some(list.items))
            }
        }
    };
    let available = poll_until(
        Duration::from_mins(3),
        "every zone Available, observed by v1",
        observed_by("0.1.0"),
    )
    .await
    .with_context(|| reports(&hosts))?;
    let mut share: BTreeMap<&str, usize> = BTreeMap::new();
    for zone in &available {
        let expected = expected_bucket(&s.ns, &zone.name_any());
        assert_eq!(
            zone.labels().get(BUCKET_LABEL).map(String::as_str),
            Some(expected.to_string().as_str()),
            "{} is labelled with the wrong bucket",
            zone.name_any()
        );
        *share
            .entry(holders[usize::from(expected)].as_str())
            .or_default() += 1;
    }
    assert_eq!(
        share.keys().copied().collect::<Vec<_>>(),
        replicas,
        "both replicas hold zones of the kind: {share:?}"
    );
    assert_eq!(
        plugins::api(&s).get(&name).await?.metadata.resource_version,
        written,
        "the Plugin's status was written again while the zones were served: two writers"
    );
    let traced = passes(&trace)?;
    for zone in &names {
        let key = format!("{}/{zone}", s.ns);
        let owner = &holders[usize::from(expected_bucket(&s.ns, zone))];
        let passes = traced.get(&key).cloned().unwrap_or_default();
        assert!(!passes.is_empty(), "{key} was never reconciled");
        assert!(
            passes.iter().all(|p| p.instance == *owner),
            "{key} (bucket of {owner}) was reconciled by another replica: {passes:?}"
        );
    }

    // Phase 4: `orchard explain` finds both replicas serving the kind through the Plugin, and
    // reads a zone's passes from the holder of its bucket, for a zone of each replica.
    for replica in replicas {
        let zone = names
            .iter()
            .find(|z| holders[usize::from(expected_bucket(&s.ns, z))] == replica)
            .context("a zone of each replica")?;
        let json: serde_json::Value =
            serde_json::from_str(&s.explain(&[&format!("dnszone/{zone}"), "-o", "json"])?)?;
        let hosts = json["hosts"].as_array().context("hosts")?;
        ensure!(
            hosts.len() == 2
                && hosts
                    .iter()
                    .all(|h| h["state"] == "serving" && h["plugin"] == name.as_str()),
            "both replicas serve {zone}'s kind through Plugin {name}: {json}"
        );
        ensure!(
            json["shard"]["bucket"] == expected_bucket(&s.ns, zone)
                && json["shard"]["holder"] == replica,
            "{zone} is in a bucket of {replica}: {json}"
        );
        ensure!(
            json["journal"]["instance"] == replica
                && json["journal"]["passesTotal"].as_u64() > Some(0),
            "{zone}'s passes are read from {replica}, which made them: {json}"
        );
        ensure!(
            json["verdict"]
                .as_str()
                .is_some_and(|v| v.starts_with("available")),
            "{json}"
        );
    }

    // Phase 5: a new digest is swapped in by both replicas: every zone is observed by v2.
    plugins::apply(&s, &name, verified(&v2), &[&env.pdns_api_url]).await?;
    poll_until(Duration::from_mins(2), "the Plugin serving v2", || {
        let s = &s;
        let (name, v2) = (&name, digest(&v2));
        async move {
            let obj = plugins::api(s).get(name).await?;
            Ok((obj.data["status"]["resolvedDigest"] == v2.as_str()).then_some(()))
        }
    })
    .await
    .with_context(|| reports(&hosts))?;
    poll_until(
        Duration::from_mins(2),
        "every zone observed by v2, on both replicas",
        observed_by("0.1.0+next"),
    )
    .await
    .with_context(|| reports(&hosts))?;
    for host in &mut hosts {
        host.ensure_running()?;
    }

    // Phase 6: deleted through both replicas; nothing left in PowerDNS.
    end_plugin_scenario(&s, &pdns, &name, &hosts).await?;
    drop(hosts);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replica_taking_over_buckets_while_the_registry_is_down_serves_them_with_the_plugin_it_loaded()
-> anyhow::Result<()> {
    let (mut s, env, pdns, wd) = plugin_scenario("shard-outage").await?;
    // The registry as the replicas reach it: through a proxy the scenario cuts. By tag, so
    // each Plugin host of a replica resolves it again.
    let proxy = orchard_e2e::proxy::Proxy::start(&env.registry).await?;
    let path = format!("e2e/pdns-zone-outage-{}:v1", s.id);
    wd.push(
        &env,
        &plugin("pdns-zone"),
        &format!("{}/{path}", env.registry),
    )?;
    let reference = format!("{}/{path}", proxy.addr);

    // Two replicas of one ring serve the Plugin, each its share.
    let ring = format!("o{}", s.id).to_ascii_lowercase().replace('_', "-");
    let insecure = format!("{},{}", env.registry, proxy.addr);
    let replicas = ["outage-a", "outage-b"];
    let mut hosts = start_plugin_ring(&mut s, &wd, &ring, &replicas, |_| {
        Ok(vec![("ORCHARD_INSECURE_REGISTRIES", insecure.clone())])
    })?;
    let maps: Api<ConfigMap> = Api::namespaced(s.client.clone(), &s.ns);
    let settled = |holders: Vec<String>| {
        let (maps, ring) = (maps.clone(), ring.clone());
        move || {
            let (maps, ring, holders) = (maps.clone(), ring.clone(), holders.clone());
            async move { Ok((table(&maps, &ring).await?.as_ref() == Some(&holders)).then_some(())) }
        }
    };
    poll_until(
        Duration::from_mins(1),
        "the ring of both replicas settled",
        settled(settled_holders(&replicas)),
    )
    .await
    .with_context(|| reports(&hosts))?;
    let name = format!("zones-{}", s.id);
    plugins::apply(
        &s,
        &name,
        serde_json::json!({"reference": reference}),
        &[&env.pdns_api_url],
    )
    .await?;
    plugins::wait_ready(&s, &name, "True", "Serving")
        .await
        .with_context(|| reports(&hosts))?;
    s.wait_kinds().await?;
    let zones = s.api(ZONE);
    let all_available = |n: usize| {
        let zones = zones.clone();
        move || {
            let zones = zones.clone();
            async move {
                let list = zones.list(&ListParams::default()).await?;
                let available = list
                    .items
                    .iter()
                    .filter(|z| has_condition(z, "Available", "True", None))
                    .count();
                Ok((available == n).then_some(()))
            }
        }
    };
    create_zones(&s, (0..20).map(|i| format!("o{i}"))).await?;
    poll_until(CONVERGE, "the first 20 zones Available", all_available(20))
        .await
        .with_context(|| reports(&hosts))?;

    // The registry goes away; then outage-b leaves and outage-a takes every bucket — its
    // Plugin host of the new assignment cannot resolve the Plugin's tag.
    proxy.cut().await;
    let mut b = hosts.pop().context("two replicas")?;
    b.terminate()?;
    b.wait_exit(CONVERGE).await?;
    poll_until(
        Duration::from_mins(1),
        "outage-a to hold every bucket",
        settled(settled_holders(&["outage-a"])),
    )
    .await
    .with_context(|| reports(&hosts))?;

    // Zones of every bucket, half of them outage-b's before, become Available through
    // outage-a, on the version it loaded before the outage.
    create_zones(&s, (20..40).map(|i| format!("o{i}"))).await?;
    poll_until(CONVERGE, "all 40 zones Available", all_available(40))
        .await
        .with_context(|| reports(&hosts))?;
    let log = std::fs::read_to_string(&hosts[0].log)?;
    assert!(
        log.contains(
            "the reference could not be resolved: serving the version this replica loaded before"
        ),
        "{}",
        reports(&hosts)
    );
    hosts[0].ensure_running()?;

    end_plugin_scenario(&s, &pdns, &name, &hosts).await?;
    drop(hosts);
    Ok(())
}
