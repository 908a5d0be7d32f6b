//! Why a version of a plugin is not served: one error per failed phase of the worker's sync.

use crate::oci;

/// Why a version of a plugin is not served. The message is what `Ready=False` shows.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The spec is invalid.
    #[error("{field}: {message}")]
    Spec {
        /// The field, e.g. `spec.allowedHosts`.
        field: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// The pull Secret could not be read.
    #[error("pull secret {namespace}/{name}: {message}")]
    PullSecret {
        /// The Secret's namespace.
        namespace: String,
        /// The Secret's name.
        name: String,
        /// What is wrong with it.
        message: String,
    },
    /// Resolving, pulling or verifying the artifact failed.
    #[error(transparent)]
    Oci(#[from] oci::Error),
    /// The component does not compile or instantiate.
    #[error("loading the component: {0}")]
    Load(#[source] crate::runtime::Error),
    /// The compile task itself failed (it panicked or the runtime shut down).
    #[error("loading the component: the compile task failed: {0}")]
    LoadTask(#[source] tokio::task::JoinError),
    /// `describe()` failed or broke the contract (a name Kubernetes or the host refuses).
    #[error("describe(): {0}")]
    Describe(#[source] crate::actuator::CallError),
    /// Another Plugin (or a static plugin) serves the same kind.
    #[error("kind {kind} is already served by plugin {owner}")]
    KindConflict {
        /// The kind's CRD name.
        kind: String,
        /// Who serves it.
        owner: String,
    },
    /// The kind's CRD could not be installed or validated.
    #[error(transparent)]
    Crd(#[from] crate::crd::InstallError),
    /// The Kubernetes API failed.
    #[error("{0}")]
    Kube(#[from] kube::Error),
}

impl Error {
    /// The condition reason for this failure.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Spec { .. } => "InvalidSpec",
            Self::PullSecret { .. } => "PullSecretUnavailable",
            Self::Oci(oci::Error::DigestMismatch { .. }) => "DigestMismatch",
            Self::Oci(oci::Error::Signature { .. }) => "SignatureInvalid",
            Self::Oci(oci::Error::Layout { .. }) => "NotAWasmArtifact",
            Self::Oci(_) => "PullFailed",
            Self::Load(_) | Self::LoadTask(_) => "LoadFailed",
            Self::Describe(_) => "InvalidDescription",
            Self::KindConflict { .. } => "KindConflict",
            Self::Crd(crate::crd::InstallError::Strands { .. }) => "IncompatibleSchema",
            Self::Crd(_) => "CrdFailed",
            Self::Kube(_) => "KubernetesError",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_failure_has_a_reason_an_admin_can_filter_on() {
        let mismatch = Error::Oci(oci::Error::DigestMismatch {
            reference: "r".into(),
            what: "layer",
            expected: "a".into(),
            actual: "b".into(),
        });
        assert_eq!(mismatch.reason(), "DigestMismatch");
        let unsigned = Error::Oci(oci::Error::Signature {
            reference: "r".into(),
            reason: "not signed".into(),
        });
        assert_eq!(unsigned.reason(), "SignatureInvalid");
        assert!(unsigned.to_string().contains("not signed"));
    }
}
