//! cosign signatures, verified with a public key (the `sigstore` crate).
//!
//! `cosign sign --key` stores a signature as the artifact `<repo>:sha256-<digest>.sig` whose
//! layers are simple-signing payloads naming the signed manifest digest. An artifact passes when
//! at least one such payload names *its* manifest digest and carries a signature that the key
//! verifies. Transparency-log bundles are not required (keys, not keyless identities).

use std::str::FromStr;

use oci_client::secrets::RegistryAuth;
use sigstore::cosign::verification_constraint::{PublicKeyVerifier, VerificationConstraintVec};
use sigstore::cosign::{ClientBuilder, CosignCapabilities};
use sigstore::registry::{Auth, ClientConfig, ClientProtocol, OciReference};

use super::Error;

/// A public key that plugin artifacts must be signed with.
#[derive(Clone)]
pub struct SignatureKey {
    /// Kept as PEM: sigstore's verifier is neither `Clone` nor `Send`; it is rebuilt per check.
    pem: Vec<u8>,
}

impl std::fmt::Debug for SignatureKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SignatureKey")
    }
}

impl SignatureKey {
    /// Parses a PEM public key (ECDSA P-256/P-384, RSA or Ed25519, as cosign writes them).
    pub fn from_pem(pem: &[u8]) -> Result<Self, String> {
        PublicKeyVerifier::try_from(pem)
            .map(|_| Self { pem: pem.to_vec() })
            .map_err(|e| format!("not a PEM public key: {e}"))
    }

    /// Verifies that the manifest `pinned` (`registry/repo@sha256:…`) is signed with this key.
    pub async fn verify(
        &self,
        pinned: &str,
        auth: &RegistryAuth,
        insecure: &[String],
    ) -> Result<(), Error> {
        let fail = |reason: String| Error::Signature {
            reference: pinned.to_owned(),
            reason,
        };
        super::ensure_crypto_provider();
        let image = OciReference::from_str(pinned).map_err(|e| fail(e.to_string()))?;
        let config = ClientConfig {
            protocol: if insecure.is_empty() {
                ClientProtocol::Https
            } else {
                ClientProtocol::HttpsExcept(insecure.to_vec())
            },
            ..ClientConfig::default()
        };
        let mut client = ClientBuilder::default()
            .with_oci_client_config(config)
            .build()
            .map_err(|e| fail(e.to_string()))?;
        let auth = match auth {
            RegistryAuth::Anonymous => Auth::Anonymous,
            RegistryAuth::Basic(user, password) => Auth::Basic(user.clone(), password.clone()),
            RegistryAuth::Bearer(token) => Auth::Bearer(token.clone()),
        };
        // Layers whose payload does not name this digest are dropped here, by sigstore.
        let layers = client
            .trusted_signature_layers(&auth, &image)
            .await
            .map_err(|e| fail(e.to_string()))?;
        if layers.is_empty() {
            return Err(fail(
                "the artifact is not signed (no cosign signature names its digest)".to_owned(),
            ));
        }
        let verifier = PublicKeyVerifier::try_from(self.pem.as_slice())
            .map_err(|e| fail(format!("not a PEM public key: {e}")))?;
        let constraints: VerificationConstraintVec = vec![Box::new(verifier)];
        sigstore::cosign::verify_constraints(&layers, constraints.iter()).map_err(|_| {
            fail(format!(
                "none of its {} signature(s) verifies with the configured public key",
                layers.len()
            ))
        })
    }
}
