//! Leader election through a `coordination.k8s.io/v1` Lease (kube-lease-manager): only the
//! holder reconciles. A host that loses the lease stops at once (its pod restarts and stands
//! by), so two hosts never reconcile together for longer than the lease's grace.

use std::time::Duration;

use kube::Client;
use kube_lease_manager::{LeaseManagerBuilder, LeaseManagerError};

/// Errors of leader election.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Lease could not be created or read.
    #[error("leader election on lease {namespace}/{name}: {source}")]
    Lease {
        /// Namespace of the Lease.
        namespace: String,
        /// Name of the Lease.
        name: String,
        #[source]
        /// The lease manager's error.
        source: LeaseManagerError,
    },
}

/// A held (or awaited) lease. Dropping it releases the lease.
pub struct Leadership {
    rx: tokio::sync::watch::Receiver<bool>,
    task: tokio::task::JoinHandle<Result<kube_lease_manager::LeaseManager, LeaseManagerError>>,
}

impl Leadership {
    /// Waits until this host holds the lease `namespace/name` as `identity`.
    pub async fn acquire(
        client: Client,
        namespace: &str,
        name: &str,
        identity: &str,
        duration: Duration,
    ) -> Result<Self, Error> {
        let seconds = duration.as_secs().max(3);
        let manager = LeaseManagerBuilder::new(client, name)
            .with_namespace(namespace)
            .with_identity(identity)
            .with_duration(seconds)
            .with_grace((seconds / 3).max(1))
            .with_field_manager(format!("orchard.dev/leader/{identity}"))
            .build()
            .await
            .map_err(|source| Error::Lease {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                source,
            })?;
        let (mut rx, task) = manager.watch().await;
        tracing::info!(lease = %format!("{namespace}/{name}"), %identity, "waiting for leadership");
        while !*rx.borrow_and_update() {
            if rx.changed().await.is_err() {
                break;
            }
        }
        tracing::info!(%identity, "acquired leadership");
        Ok(Self { rx, task })
    }

    /// Resolves when the lease is lost.
    pub async fn lost(&mut self) {
        loop {
            if !*self.rx.borrow_and_update() {
                return;
            }
            if self.rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// Releases the lease (so a standby takes over at once) and waits for that to be written.
    pub async fn release(self) {
        drop(self.rx);
        match self.task.await {
            Ok(Ok(_)) => tracing::info!("released leadership"),
            Ok(Err(e)) => tracing::warn!(error = %e, "could not release the lease"),
            Err(e) => tracing::warn!(error = %e, "lease task failed"),
        }
    }
}
