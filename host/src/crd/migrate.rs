//! Storage migration: once a kind's storage version changed, every stored object is rewritten
//! at it, then the CRD's `status.storedVersions` drops every other version — so that a later
//! plugin may stop listing them ([`super::evolution`] refuses to drop a version still stored).
//!
//! Phases of [`migrate`], in order:
//! 1. **check** — read the CRD: nothing to do when `storedVersions` is the storage version
//!    alone;
//! 2. **rewrite** — list the kind in every namespace, in pages of [`PAGE`], and replace each
//!    object unchanged: the apiserver encodes it at the storage version (a conflict re-reads
//!    that object; one deleted meanwhile is skipped);
//! 3. **record** — set `status.storedVersions` to the storage version alone.
//!
//! It is idempotent: interrupted, the next run (the host runs it at each start, and after each
//! Plugin upgrade, while another version is stored) does it again from the start.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::actuator::Description;

/// Objects listed (and rewritten) per page.
pub const PAGE: u32 = 500;

/// Tries per object when its writes conflict with another writer's.
const CONFLICT_TRIES: u32 = 5;

/// Why a migration stopped (it is tried again at the next start).
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// The CRD could not be read.
    #[error("reading CRD {crd}: {source}")]
    Crd {
        /// The CRD.
        crd: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// A page of objects could not be listed.
    #[error("listing {crd} at {version}: {source}")]
    List {
        /// The CRD.
        crd: String,
        /// The storage version.
        version: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// An object could not be rewritten.
    #[error("rewriting {object} at the storage version: {source}")]
    Rewrite {
        /// `namespace/name`.
        object: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// `status.storedVersions` could not be written.
    #[error("setting status.storedVersions of CRD {crd} to [{version}]: {source}")]
    StoredVersions {
        /// The CRD.
        crd: String,
        /// The storage version.
        version: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

/// What a migration did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migrated {
    /// The versions stored before.
    pub from: Vec<String>,
    /// Objects rewritten.
    pub objects: u64,
}

/// Migrates the objects of `d`'s kind to its storage version; `None` when they all are.
///
/// # Errors
///
/// [`MigrateError`], naming the CRD or the object.
pub async fn migrate(
    client: &kube::Client,
    d: &Description,
) -> Result<Option<Migrated>, MigrateError> {
    let crd = super::crd_name(d);
    let storage = d.storage_version().to_owned();

    // Phase 1: check.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let installed = crds.get(&crd).await.map_err(|source| MigrateError::Crd {
        crd: crd.clone(),
        source,
    })?;
    let stored = installed
        .status
        .and_then(|s| s.stored_versions)
        .unwrap_or_default();
    if stored.iter().all(|v| *v == storage) {
        return Ok(None);
    }
    tracing::info!(plugin = %d.name, crd = %crd, stored = ?stored, storage = %storage, "storage migration: rewriting every object at the storage version");

    // Phase 2: rewrite.
    let resource = ApiResource {
        group: d.group.clone(),
        version: storage.clone(),
        api_version: format!("{}/{storage}", d.group),
        kind: d.kind.clone(),
        plural: d.plural.clone(),
    };
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let mut objects = 0u64;
    let mut params = ListParams::default().limit(PAGE);
    loop {
        let page = all
            .list(&params)
            .await
            .map_err(|source| MigrateError::List {
                crd: crd.clone(),
                version: storage.clone(),
                source,
            })?;
        let next = page.metadata.continue_.clone().filter(|c| !c.is_empty());
        let mut rewritten = 0u64;
        for obj in page.items {
            if rewrite(client, &resource, obj).await? {
                rewritten += 1;
            }
        }
        objects += rewritten;
        crate::ops::metrics::global().migrated(&d.name, rewritten);
        tracing::info!(plugin = %d.name, crd = %crd, objects, "storage migration: a page rewritten");
        match next {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }

    // Phase 3: record.
    crds.patch_status(
        &crd,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"storedVersions": [storage]}})),
    )
    .await
    .map_err(|source| MigrateError::StoredVersions {
        crd: crd.clone(),
        version: storage.clone(),
        source,
    })?;
    tracing::info!(plugin = %d.name, crd = %crd, objects, from = ?stored, storage = %storage, "storage migration done: status.storedVersions is the storage version alone");
    Ok(Some(Migrated {
        from: stored,
        objects,
    }))
}

/// Replaces `obj` unchanged (re-read after a conflict); `false` when it is gone.
async fn rewrite(
    client: &kube::Client,
    resource: &ApiResource,
    mut obj: DynamicObject,
) -> Result<bool, MigrateError> {
    let namespace = obj.metadata.namespace.clone().unwrap_or_default();
    let name = obj.metadata.name.clone().unwrap_or_default();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, resource);
    let failed = |source| MigrateError::Rewrite {
        object: format!("{namespace}/{name}"),
        source,
    };
    let mut tries = 0;
    loop {
        tries += 1;
        match api.replace(&name, &PostParams::default(), &obj).await {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(false),
            Err(kube::Error::Api(e)) if e.code == 409 && tries < CONFLICT_TRIES => {
                // Written by someone else meanwhile: that write was at the storage version
                // already, but re-read and rewrite to be sure of it.
                match api.get_opt(&name).await.map_err(failed)? {
                    Some(fresh) => obj = fresh,
                    None => return Ok(false),
                }
            }
            Err(source) => return Err(failed(source)),
        }
    }
}

/// The waits between tries of a background migration: a CRD just established may not serve
/// its new storage version for a moment (the apiserver answers 404 until its handler is up),
/// and an apiserver may be away; after the last, the migration runs again at the next start.
pub fn retry_delays() -> impl Iterator<Item = std::time::Duration> {
    (0..8).map(|try_| std::time::Duration::from_secs(1 << try_.min(5)))
}

/// Runs [`migrate`] in the background when `d`'s kind has several versions, tried again after
/// each of [`retry_delays`]; the outcome is logged.
pub fn spawn(client: &kube::Client, d: &Description) {
    if !d.converts() {
        return;
    }
    let (client, d) = (client.clone(), d.clone());
    tokio::spawn(async move {
        let mut delays = retry_delays();
        loop {
            let Err(e) = migrate(&client, &d).await else {
                return;
            };
            let Some(delay) = delays.next() else {
                tracing::warn!(plugin = %d.name, error = %e, "storage migration stopped; it runs again at the next start");
                return;
            };
            tracing::info!(plugin = %d.name, error = %e, retry_in = ?delay, "storage migration stopped; trying again");
            tokio::time::sleep(delay).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_background_migration_is_tried_again_for_about_two_minutes_at_most() {
        let delays: Vec<u64> = retry_delays().map(|d| d.as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 32, 32]);
    }
}
