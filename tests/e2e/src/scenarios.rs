//! The reconciler's scenario set, written once and run against any plugin through
//! [`Subject`]: what a minimal, a full and an updated object of its kind look like, and how to
//! read, create and delete its external resource directly. Every scenario asserts the state of
//! the external system itself, not only the conditions.
//!
//! A suite instantiates the set for its subjects with [`scenario_set!`](crate::scenario_set).

use std::time::Duration;

use anyhow::Context;
use serde_json::Value;

use crate::harness::CONVERGE;
use crate::harness::{Harness, progressing_message};
use crate::poll_until;

/// The plugin under test, as the scenarios need to know it.
#[allow(async_fn_in_trait, reason = "used through generics only, never as dyn")]
pub trait Subject: Sized {
    /// `apiVersion` of its kind.
    const API_VERSION: &'static str;
    /// The kind, e.g. `RabbitVhost`.
    const KIND: &'static str;
    /// The plugin's name (`describe().name`): its guard finalizer is
    /// `orchard.dev/<plugin>-guard`.
    const PLUGIN: &'static str;
    /// The credentials Secret the harness made.
    const SECRET: &'static str;

    /// A harness serving the plugin (with its credentials Secret) and the subject.
    async fn harness(name: &str) -> anyhow::Result<(Harness, Self)>;

    /// Objects the subject's objects need (a queue's vhost), made ready. Runs after the host
    /// started.
    async fn prepare(&mut self, _h: &Harness) -> anyhow::Result<()> {
        Ok(())
    }

    /// The external id of the resource named `name`.
    fn id_of(&self, name: &str) -> String;

    /// `spec.resource` (a YAML flow mapping) of a minimal object for the external name `name`.
    fn minimal(&self, name: &str) -> String;

    /// `spec.resource` of an object setting every field it can.
    fn full(&self, name: &str) -> String;

    /// Checks the external resource and `status.resource` against [`Subject::full`].
    async fn check_full(&self, name: &str, observed: &Value) -> anyhow::Result<()>;

    /// `spec.resource` of the minimal object with its mutable fields changed.
    fn updated(&self, name: &str) -> String;

    /// Checks the external resource and `status.resource` against [`Subject::updated`].
    async fn check_updated(&self, name: &str, observed: &Value) -> anyhow::Result<()>;

    /// The external resource as the external system has it (`None`: it does not exist),
    /// without volatile fields (statistics), so that two reads compare equal when nothing
    /// changed it.
    async fn external(&self, id: &str) -> anyhow::Result<Option<Value>>;

    /// Creates the resource `name` directly in the external system, marked with `marker` (what
    /// [`Subject::filter_by_marker`] matches); returns its id.
    async fn create_external(&self, name: &str, marker: &str) -> anyhow::Result<String>;

    /// Deletes the resource directly in the external system.
    async fn delete_external(&self, id: &str) -> anyhow::Result<()>;

    /// An import filter (YAML flow mapping) matching exactly the resource named `name`.
    fn filter_by_name(&self, name: &str) -> String;

    /// An import filter matching every resource created with `marker`.
    fn filter_by_marker(&self, marker: &str) -> String;

    /// A `spec.resource` for `name` the external system refuses (after the CRD accepted it),
    /// if there is such a thing for this kind.
    fn refused(&self, _name: &str) -> Option<String> {
        None
    }

    /// Checks that a refused spec left nothing behind (or nothing wrong).
    async fn check_refused(&self, _name: &str) -> anyhow::Result<()> {
        Ok(())
    }
}

/// The manifest of a managed object of `S` named `object` with `resource` as its
/// `spec.resource` (and `extra` spec lines before it).
pub fn managed<S: Subject>(object: &str, resource: &str, extra: &str) -> String {
    format!(
        "apiVersion: {}\nkind: {}\nmetadata: {{name: {object}}}\nspec:\n  credentialsRef: {{secretName: {}}}\n{extra}  resource: {resource}\n",
        S::API_VERSION,
        S::KIND,
        S::SECRET
    )
}

fn unmanaged<S: Subject>(object: &str, import: &str, extra: &str) -> String {
    format!(
        "apiVersion: {}\nkind: {}\nmetadata: {{name: {object}}}\nspec:\n  managementPolicy: unmanaged\n  credentialsRef: {{secretName: {}}}\n  import: {import}\n{extra}",
        S::API_VERSION,
        S::KIND,
        S::SECRET
    )
}

/// An external name unique to this scenario.
pub fn name_in(h: &Harness, label: &str) -> String {
    format!("{label}-{}", h.id)
}

async fn started<S: Subject>(scenario: &str) -> anyhow::Result<(Harness, S, crate::harness::Host)> {
    let (mut h, mut s) = S::harness(scenario).await?;
    let host = h.start_host(&[])?;
    h.wait_kinds().await?;
    s.prepare(&h).await?;
    Ok((h, s, host))
}

/// Create a minimal object: it becomes ready with `status.id`, the resource exists, the
/// credentials Secret is guarded while the object uses it; deleting the object deletes the
/// resource and then releases the Secret (removes the plugin's guard finalizer).
pub async fn create_minimal<S: Subject>() -> anyhow::Result<()> {
    let (h, s, _host) = started::<S>("create-minimal").await?;
    let name = name_in(&h, "minimal");
    let id = s.id_of(&name);
    h.apply(&managed::<S>("minimal", &s.minimal(&name), ""))
        .await?;
    let obj = h.wait_ready(S::KIND, "minimal").await?;
    assert_eq!(obj.data["status"]["id"], id.as_str());
    assert!(
        obj.data["status"]["resource"].is_object(),
        "no status.resource"
    );
    assert!(
        s.external(&id).await?.is_some(),
        "{id} missing in the external system"
    );
    // (Events are posted after the pass, not within it.)
    h.wait_event("minimal", "Created").await?;

    // The Secret is guarded while the object uses it.
    let secrets = h.secrets();
    secrets
        .delete(S::SECRET, &kube::api::DeleteParams::default())
        .await?;
    let secret = secrets.get(S::SECRET).await?;
    assert!(secret.metadata.deletion_timestamp.is_some());
    let guard = format!("orchard.dev/{}-guard", S::PLUGIN);
    assert!(
        secret
            .metadata
            .finalizers
            .unwrap_or_default()
            .contains(&guard),
        "the Secret lacks {guard}"
    );

    // Deleting the object deletes the resource, then releases the Secret.
    h.delete(S::KIND, "minimal").await?;
    h.wait_gone(S::KIND, "minimal").await?;
    assert!(s.external(&id).await?.is_none(), "{id} still exists");
    // Released by this plugin (the objects a subject needs, like a queue's vhost, may still
    // use it).
    poll_until(CONVERGE, "the Secret to be released", || async {
        let released = match secrets.get_opt(S::SECRET).await? {
            None => true,
            Some(secret) => !secret
                .metadata
                .finalizers
                .unwrap_or_default()
                .contains(&guard),
        };
        Ok(released.then_some(()))
    })
    .await
}

/// Create an object setting every field: the external resource has them all.
pub async fn create_full<S: Subject>() -> anyhow::Result<()> {
    let (h, s, _host) = started::<S>("create-full").await?;
    let name = name_in(&h, "full");
    h.apply(&managed::<S>("full", &s.full(&name), "")).await?;
    let obj = h.wait_ready(S::KIND, "full").await?;
    assert_eq!(obj.data["status"]["id"], s.id_of(&name).as_str());
    assert!(obj.data["status"]["lastSyncTime"].is_string());
    s.check_full(&name, &obj.data["status"]["resource"]).await
}

/// Import by id (unmanaged): the object becomes ready with the resource's observed state;
/// deleting it leaves the resource exactly as it was — an unmanaged object never writes.
pub async fn import_by_id_and_unmanaged_never_writes<S: Subject>() -> anyhow::Result<()> {
    let (h, s, _host) = started::<S>("import-id").await?;
    let name = name_in(&h, "imported");
    let id = s.create_external(&name, "ops").await?;
    let before = s.external(&id).await?.context("created resource missing")?;
    h.apply(&unmanaged::<S>(
        "imported",
        &format!("{{id: \"{id}\"}}"),
        "",
    ))
    .await?;
    let obj = h.wait_ready(S::KIND, "imported").await?;
    assert_eq!(obj.data["status"]["id"], id.as_str());
    assert!(obj.data["status"]["resource"].is_object());
    h.wait_event("imported", "Imported").await?;
    assert_eq!(
        s.external(&id).await?.as_ref(),
        Some(&before),
        "importing changed the resource"
    );

    h.delete(S::KIND, "imported").await?;
    h.wait_gone(S::KIND, "imported").await?;
    let after = s
        .external(&id)
        .await?
        .context("an unmanaged object deleted its resource")?;
    assert_eq!(
        before, after,
        "an unmanaged object changed the external system"
    );
    s.delete_external(&id).await
}

/// Import by filter: polls while nothing matches, imports the one that appears; a filter
/// matching two resources is a terminal error.
pub async fn import_by_filter_polls_until_one_matches_and_fails_on_several<S: Subject>()
-> anyhow::Result<()> {
    let (h, s, _host) = started::<S>("import-filter").await?;
    let name = name_in(&h, "later");
    h.apply(&unmanaged::<S>(
        "later",
        &format!("{{filter: {}}}", s.filter_by_name(&name)),
        "",
    ))
    .await?;
    let waiting = h
        .wait_condition(S::KIND, "later", "Progressing", "True", Some("Progressing"))
        .await?;
    assert!(
        progressing_message(&waiting).contains("import.filter"),
        "{}",
        progressing_message(&waiting)
    );
    let id = s.create_external(&name, "single").await?;
    let obj = h.wait_ready(S::KIND, "later").await?;
    assert_eq!(obj.data["status"]["id"], id.as_str());
    // Out of the way of the next filter (an unmanaged object leaves its resource).
    h.delete(S::KIND, "later").await?;
    h.wait_gone(S::KIND, "later").await?;
    s.delete_external(&id).await?;

    let marker = format!("m{}", h.id);
    let (a, b) = (name_in(&h, "a"), name_in(&h, "b"));
    let ids = [
        s.create_external(&a, &marker).await?,
        s.create_external(&b, &marker).await?,
    ];
    h.apply(&unmanaged::<S>(
        "ambiguous",
        &format!("{{filter: {}}}", s.filter_by_marker(&marker)),
        "",
    ))
    .await?;
    let failed = h
        .wait_condition(
            S::KIND,
            "ambiguous",
            "Progressing",
            "False",
            Some("InvalidConfiguration"),
        )
        .await?;
    assert!(
        progressing_message(&failed).contains("matches 2 resources"),
        "{}",
        progressing_message(&failed)
    );
    for id in &ids {
        s.delete_external(id).await?;
    }
    Ok(())
}

/// Import of an id that does not exist: terminal, and nothing is created.
pub async fn import_of_a_missing_id_is_terminal<S: Subject>() -> anyhow::Result<()> {
    let (h, s, _host) = started::<S>("import-missing").await?;
    let id = s.id_of(&name_in(&h, "nowhere"));
    h.apply(&unmanaged::<S>("nowhere", &format!("{{id: \"{id}\"}}"), ""))
        .await?;
    let obj = h
        .wait_condition(
            S::KIND,
            "nowhere",
            "Progressing",
            "False",
            Some("InvalidConfiguration"),
        )
        .await?;
    assert!(
        progressing_message(&obj).contains("does not exist"),
        "{}",
        progressing_message(&obj)
    );
    assert!(obj.data["status"]["id"].is_null());
    assert!(s.external(&id).await?.is_none(), "an import created {id}");
    Ok(())
}

/// Update through the reconcilers, then revert: the external resource follows both ways.
pub async fn update_then_revert<S: Subject>() -> anyhow::Result<()> {
    let (h, s, _host) = started::<S>("update").await?;
    let name = name_in(&h, "upd");
    let id = s.id_of(&name);
    h.apply(&managed::<S>("upd", &s.minimal(&name), "")).await?;
    h.wait_ready(S::KIND, "upd").await?;
    let original = s.external(&id).await?.context("resource missing")?;

    h.apply(&managed::<S>("upd", &s.updated(&name), "")).await?;
    let obj = h.wait_ready(S::KIND, "upd").await?;
    s.check_updated(&name, &obj.data["status"]["resource"])
        .await?;
    assert_ne!(
        s.external(&id).await?.as_ref(),
        Some(&original),
        "the update changed nothing"
    );

    h.apply(&managed::<S>("upd", &s.minimal(&name), "")).await?;
    h.wait_ready(S::KIND, "upd").await?;
    // The revert reaches the external system (the object is ready after its reconcilers ran).
    let reverted = poll_until(
        CONVERGE,
        "the revert to reach the external system",
        || async {
            let now = s.external(&id).await?;
            Ok((now.as_ref() == Some(&original)).then_some(now))
        },
    )
    .await;
    assert!(
        reverted.is_ok(),
        "not reverted: {:?} != {original:?}",
        s.external(&id).await?
    );
    Ok(())
}

/// A managed resource deleted behind Orchard's back is recreated (same id).
pub async fn external_deletion_of_a_managed_resource_recreates_it<S: Subject>() -> anyhow::Result<()>
{
    let (h, s, _host) = started::<S>("ext-del").await?;
    let name = name_in(&h, "drift");
    let id = s.id_of(&name);
    h.apply(&managed::<S>(
        "drift",
        &s.minimal(&name),
        "  resyncPeriod: 1s\n",
    ))
    .await?;
    h.wait_ready(S::KIND, "drift").await?;
    s.delete_external(&id).await?;
    poll_until(CONVERGE, "the resource to be recreated", || async {
        s.external(&id).await
    })
    .await?;
    h.wait_event("drift", "ExternallyDeleted").await?;
    // status.id is cleared, then written again once the resource is recreated.
    poll_until(CONVERGE, "status.id to be written again", || async {
        let obj = h.get(S::KIND, "drift").await?;
        Ok((obj.data["status"]["id"] == id.as_str()).then_some(()))
    })
    .await?;
    h.wait_ready(S::KIND, "drift").await?;
    Ok(())
}

/// An imported resource deleted behind Orchard's back is a terminal error, never recreated.
pub async fn external_deletion_of_an_unmanaged_resource_is_terminal<S: Subject>()
-> anyhow::Result<()> {
    let (h, s, _host) = started::<S>("ext-del-unmanaged").await?;
    let name = name_in(&h, "theirs");
    let id = s.create_external(&name, "theirs").await?;
    h.apply(&unmanaged::<S>(
        "theirs",
        &format!("{{id: \"{id}\"}}"),
        "  resyncPeriod: 1s\n",
    ))
    .await?;
    h.wait_ready(S::KIND, "theirs").await?;
    s.delete_external(&id).await?;
    let obj = h
        .wait_condition(
            S::KIND,
            "theirs",
            "Progressing",
            "False",
            Some("UnrecoverableError"),
        )
        .await?;
    assert!(
        progressing_message(&obj).contains("deleted from the external system"),
        "{}",
        progressing_message(&obj)
    );
    assert!(
        s.external(&id).await?.is_none(),
        "an unmanaged object recreated {id}"
    );
    Ok(())
}

/// `onDelete: detach`: deleting the object leaves the resource.
pub async fn on_delete_detach_leaves_the_resource<S: Subject>() -> anyhow::Result<()> {
    let (h, s, _host) = started::<S>("detach").await?;
    let name = name_in(&h, "kept");
    let id = s.id_of(&name);
    h.apply(&managed::<S>(
        "kept",
        &s.minimal(&name),
        "  managedOptions: {onDelete: detach}\n",
    ))
    .await?;
    h.wait_ready(S::KIND, "kept").await?;
    h.delete(S::KIND, "kept").await?;
    h.wait_gone(S::KIND, "kept").await?;
    assert!(s.external(&id).await?.is_some(), "detach deleted {id}");
    s.delete_external(&id).await
}

/// A crash between create and the write of `status.id`: the next host adopts the resource
/// (matched on its identifying fields) instead of creating a duplicate.
pub async fn crash_between_create_and_status_id_adopts<S: Subject>() -> anyhow::Result<()> {
    let (mut h, mut s) = S::harness("crash").await?;
    let name = name_in(&h, "crash");
    let id = s.id_of(&name);
    {
        // What the object needs comes first, with a host that does not crash.
        let _host = h.start_host(&[])?;
        h.wait_kinds().await?;
        s.prepare(&h).await?;
    }
    {
        let mut crashing = h.start_host(&[("ORCHARD_FAILPOINT", "abort-after-create")])?;
        h.apply(&managed::<S>("crash", &s.minimal(&name), ""))
            .await?;
        poll_until(CONVERGE, "the fail point to stop the host", || {
            let running = crashing.is_running();
            async move { Ok((!running).then_some(())) }
        })
        .await?;
    }
    assert!(
        s.external(&id).await?.is_some(),
        "create did not reach the external system"
    );
    let obj = h.get(S::KIND, "crash").await?;
    assert!(obj.data["status"]["id"].is_null());

    let _host = h.start_host(&[])?;
    let obj = h.wait_ready(S::KIND, "crash").await?;
    assert_eq!(obj.data["status"]["id"], id.as_str());
    h.wait_event("crash", "Adopted").await?;
    let reasons = h.event_reasons("crash").await?;
    assert!(
        !reasons.contains(&"Created".to_owned()),
        "created twice: {reasons:?}"
    );
    Ok(())
}

/// Invalid specs: the CRD's CEL rules refuse what the host could never handle; a spec the
/// external system refuses fails terminally once, without retries.
pub async fn invalid_specs_are_rejected_or_fail_once_without_retries<S: Subject>()
-> anyhow::Result<()> {
    let (h, s, _host) = started::<S>("invalid").await?;
    let name = name_in(&h, "inv");
    let bare = format!(
        "apiVersion: {}\nkind: {}\nmetadata: {{name: bare}}\nspec: {{credentialsRef: {{secretName: {}}}}}\n",
        S::API_VERSION,
        S::KIND,
        S::SECRET
    );
    let err = h
        .apply(&bare)
        .await
        .expect_err("a managed object without resource must be rejected");
    assert!(
        err.to_string()
            .contains("resource must be specified when policy is managed"),
        "{err}"
    );
    let both = unmanaged::<S>(
        "both",
        "{id: x}",
        &format!("  resource: {}\n", s.minimal(&name)),
    );
    let err = h
        .apply(&both)
        .await
        .expect_err("unmanaged with a resource must be rejected");
    assert!(
        err.to_string()
            .contains("resource may not be specified when policy is unmanaged"),
        "{err}"
    );

    // managementPolicy is immutable.
    h.apply(&managed::<S>("inv", &s.minimal(&name), "")).await?;
    h.wait_ready(S::KIND, "inv").await?;
    let err = h
        .apply(&managed::<S>(
            "inv",
            &s.minimal(&name),
            "  managementPolicy: unmanaged\n  import: {id: x}\n",
        ))
        .await
        .expect_err("changing managementPolicy must be rejected");
    assert!(
        err.to_string().contains("managementPolicy is immutable"),
        "{err}"
    );

    // The external system refuses the spec: terminal, and nothing retries it.
    if let Some(refused) = s.refused(&name) {
        h.apply(&managed::<S>("refused", &refused, "")).await?;
        h.wait_condition(
            S::KIND,
            "refused",
            "Progressing",
            "False",
            Some("InvalidConfiguration"),
        )
        .await?;
        h.assert_unchanged(S::KIND, "refused", Duration::from_secs(4))
            .await?;
        s.check_refused(&name).await?;
    }
    Ok(())
}

/// Instantiates the scenario set as `#[tokio::test]`s in a module per subject:
/// `scenario_set!(vhost, orchard_e2e::rabbitmq_subjects::Vhost);` gives `vhost::create_minimal`…
#[macro_export]
macro_rules! scenario_set {
    ($module:ident, $subject:ty) => {
        mod $module {
            use $crate::scenarios as s;
            #[tokio::test(flavor = "multi_thread")]
            async fn create_minimal() -> anyhow::Result<()> {
                s::create_minimal::<$subject>().await
            }
            #[tokio::test(flavor = "multi_thread")]
            async fn create_full() -> anyhow::Result<()> {
                s::create_full::<$subject>().await
            }
            #[tokio::test(flavor = "multi_thread")]
            async fn import_by_id_and_unmanaged_never_writes() -> anyhow::Result<()> {
                s::import_by_id_and_unmanaged_never_writes::<$subject>().await
            }
            #[tokio::test(flavor = "multi_thread")]
            async fn import_by_filter_polls_until_one_matches_and_fails_on_several()
            -> anyhow::Result<()> {
                s::import_by_filter_polls_until_one_matches_and_fails_on_several::<$subject>().await
            }
            #[tokio::test(flavor = "multi_thread")]
            async fn import_of_a_missing_id_is_terminal() -> anyhow::Result<()> {
                s::import_of_a_missing_id_is_terminal::<$subject>().await
            }
            #[tokio::test(flavor = "multi_thread")]
            async fn update_then_revert() -> anyhow::Result<()> {
                s::update_then_revert::<$subject>().await
            }
            #[tokio::test(flavor = "multi_thread")]
            async fn external_deletion_of_a_managed_resource_recreates_it() -> anyhow::Result<()> {
                s::external_deletion_of_a_managed_resource_recreates_it::<$subject>().await
            }
            #[tokio::test(flavor = "multi_thread")]
            async fn external_deletion_of_an_unmanaged_resource_is_terminal() -> anyhow::Result<()>
            {
                s::external_deletion_of_an_unmanaged_resource_is_terminal::<$subject>().await
            }
            #[tokio::test(flavor = "multi_thread")]
            async fn on_delete_detach_leaves_the_resource() -> anyhow::Result<()> {
                s::on_delete_detach_leaves_the_resource::<$subject>().await
            }
            #[tokio::test(flavor = "multi_thread")]
            async fn crash_between_create_and_status_id_adopts() -> anyhow::Result<()> {
                s::crash_between_create_and_status_id_adopts::<$subject>().await
            }
            #[tokio::test(flavor = "multi_thread")]
            async fn invalid_specs_are_rejected_or_fail_once_without_retries() -> anyhow::Result<()>
            {
                s::invalid_specs_are_rejected_or_fail_once_without_retries::<$subject>().await
            }
        }
    };
}
