//! Plugins as OCI artifacts: the CNCF Wasm layout, pull and push with every digest verified,
//! docker `config.json` credentials, a content-addressed local cache and cosign signatures.
//!
//! - [`layout`]: media types, the `application/vnd.wasm.config.v0+json` config, what a
//!   component exports and imports;
//! - [`auth`]: credentials for a registry from a docker config (file or pull Secret);
//! - [`cache`]: manifests and blobs by digest on disk;
//! - [`verify`]: cosign signatures checked against a public key.
//!
//! The contract of [`Registry::pull`]:
//! - it MUST return bytes whose sha256 is the layer digest named by a manifest whose sha256 is
//!   the returned manifest digest (pulled by digest: the digest asked for);
//! - it MUST refuse an artifact that is not one Wasm layer (config `v0`, layer
//!   `application/wasm`, or the older `application/vnd.wasm.content.layer.v1+wasm`);
//! - it SHOULD not touch the network for a reference pinned by digest that is in the cache.

pub mod auth;
pub mod cache;
pub mod layout;
pub mod verify;

use std::path::PathBuf;

use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use sha2::{Digest, Sha256};

pub use auth::Credentials;
pub use cache::BlobCache;
pub use layout::{ComponentWorld, WasmConfig};

/// Errors of the OCI layer; each names the reference it is about.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The reference does not parse.
    #[error("invalid OCI reference {reference:?}: {message}")]
    Reference {
        /// The reference as given.
        reference: String,
        /// Why it does not parse.
        message: String,
    },
    /// The registry refused or failed a request.
    #[error("{reference}: {action} failed: {source}")]
    Registry {
        /// The artifact reference.
        reference: String,
        /// What was being done (pull, push, resolve…).
        action: &'static str,
        #[source]
        /// The registry client's error.
        source: oci_client::errors::OciDistributionError,
    },
    /// The artifact is not a Wasm component in the CNCF layout.
    #[error("{reference} is not a Wasm artifact: {reason}")]
    Layout {
        /// The artifact reference.
        reference: String,
        /// What in the layout is wrong.
        reason: String,
    },
    /// Content did not hash to the digest that names it.
    #[error("{reference}: digest mismatch for {what}: expected {expected}, got {actual}")]
    DigestMismatch {
        /// The artifact reference.
        reference: String,
        /// Which blob (manifest, config, layer).
        what: &'static str,
        /// The digest the manifest names.
        expected: String,
        /// The digest of the bytes received.
        actual: String,
    },
    /// The artifact's signature is missing or does not verify.
    #[error("{reference}: signature verification failed: {reason}")]
    Signature {
        /// The artifact reference.
        reference: String,
        /// Why verification failed.
        reason: String,
    },
    /// Credentials could not be read.
    #[error("credentials for {registry}: {reason}")]
    Credentials {
        /// The registry host.
        registry: String,
        /// Why they could not be read.
        reason: String,
    },
    /// The local cache could not be read or written.
    #[error("plugin cache {path}: {source}")]
    Cache {
        /// The cache directory or file.
        path: PathBuf,
        #[source]
        /// The I/O error.
        source: std::io::Error,
    },
}

/// `sha256:<hex>` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Installs ring as the process's TLS crypto provider (the one kube uses) unless one is
/// installed: oci-client's HTTP client is built without a provider of its own.
pub fn ensure_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Err only means another thread installed one first: fine either way.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// Parses `reference` (`registry/repo[:tag][@sha256:…]`).
pub fn parse_reference(reference: &str) -> Result<Reference, Error> {
    reference
        .parse()
        .map_err(|e: oci_client::ParseError| Error::Reference {
            reference: reference.to_owned(),
            message: e.to_string(),
        })
}

/// How the host talks to registries.
#[derive(Debug, Clone, Default)]
pub struct RegistryOptions {
    /// Registries (`host[:port]`) reached over plain HTTP. Everything else is HTTPS only.
    pub insecure: Vec<String>,
    /// The content-addressed cache (`None`: no cache).
    pub cache_dir: Option<PathBuf>,
}

/// A Wasm artifact pulled and verified.
#[derive(Debug, Clone)]
pub struct Artifact {
    /// `registry/repository@sha256:…`: the reference pinned to what was pulled.
    pub pinned: String,
    /// Digest of the manifest.
    pub manifest_digest: String,
    /// Media type and digest of the one layer.
    pub layer: OciDescriptor,
    /// Media type of the config.
    pub config_media_type: String,
    /// The config, parsed (the older layout's `{}` parses to an empty one).
    pub config: WasmConfig,
    /// The component.
    pub bytes: Vec<u8>,
    /// Whether everything came from the local cache.
    pub from_cache: bool,
}

/// Pulls and pushes Wasm artifacts.
///
/// Each operation uses a client of its own: oci-client keeps the first credentials it sees per
/// registry, so a shared client would let one Plugin's pull Secret serve another's pulls.
pub struct Registry {
    options: RegistryOptions,
    cache: Option<BlobCache>,
}

impl Registry {
    /// A client for `options`.
    pub fn new(options: RegistryOptions) -> Self {
        ensure_crypto_provider();
        let cache = options.cache_dir.clone().map(BlobCache::new);
        Self { options, cache }
    }

    fn client(&self) -> Client {
        Client::new(ClientConfig {
            protocol: protocol(&self.options.insecure),
            ..ClientConfig::default()
        })
    }

    /// The options this client was made with.
    pub fn options(&self) -> &RegistryOptions {
        &self.options
    }

    /// The manifest digest `reference` points at now (one request; no download).
    pub async fn resolve(&self, reference: &str, auth: &RegistryAuth) -> Result<String, Error> {
        let parsed = parse_reference(reference)?;
        if let Some(digest) = parsed.digest() {
            return Ok(digest.to_owned());
        }
        self.client()
            .fetch_manifest_digest(&parsed, auth)
            .await
            .map_err(registry_error(reference, "resolve"))
    }

    /// Pulls the Wasm artifact at `reference` (tag or digest), verifying every digest.
    pub async fn pull(&self, reference: &str, auth: &RegistryAuth) -> Result<Artifact, Error> {
        let parsed = parse_reference(reference)?;
        if let Some(artifact) = self.pull_cached(&parsed)? {
            return Ok(artifact);
        }
        // Phase 1: the manifest; oci-client checks its bytes against the digest of a pinned
        // reference and against the registry's Docker-Content-Digest header.
        let client = self.client();
        let (manifest_bytes, manifest_digest) = client
            .pull_manifest_raw(&parsed, auth, &[OCI_IMAGE_MEDIA_TYPE])
            .await
            .map_err(|source| pull_error(&parsed, "manifest", "pull manifest", source))?;
        let manifest = parse_manifest(reference, &manifest_bytes)?;
        let layer = layout::wasm_layer(reference, &manifest)?.clone();
        let pinned = parsed.clone_with_digest(manifest_digest.clone());

        // Phase 2: config and layer; oci-client checks each against its descriptor while
        // streaming (and against the registry's digest header).
        let config_bytes = pull_blob(&client, &pinned, &manifest.config, "config").await?;
        let config = WasmConfig::parse(reference, &manifest.config.media_type, &config_bytes)?;
        let bytes = pull_blob(&client, &pinned, &layer, "layer").await?;

        if let Some(cache) = &self.cache {
            cache.put(&manifest_digest, &manifest_bytes)?;
            cache.put(&manifest.config.digest, &config_bytes)?;
            cache.put(&layer.digest, &bytes)?;
        }
        Ok(Artifact {
            pinned: pinned.whole(),
            manifest_digest,
            layer,
            config_media_type: manifest.config.media_type.clone(),
            config,
            bytes,
            from_cache: false,
        })
    }

    /// A pinned reference whose manifest, config and layer are all in the cache (each checked
    /// against its digest when read).
    fn pull_cached(&self, parsed: &Reference) -> Result<Option<Artifact>, Error> {
        let (Some(cache), Some(digest)) = (&self.cache, parsed.digest()) else {
            return Ok(None);
        };
        let reference = parsed.whole();
        let Some(manifest_bytes) = cache.get(digest)? else {
            return Ok(None);
        };
        let manifest = parse_manifest(&reference, &manifest_bytes)?;
        let layer = layout::wasm_layer(&reference, &manifest)?.clone();
        let (Some(config_bytes), Some(bytes)) = (
            cache.get(&manifest.config.digest)?,
            cache.get(&layer.digest)?,
        ) else {
            return Ok(None);
        };
        let config = WasmConfig::parse(&reference, &manifest.config.media_type, &config_bytes)?;
        Ok(Some(Artifact {
            pinned: reference,
            manifest_digest: digest.to_owned(),
            layer,
            config_media_type: manifest.config.media_type.clone(),
            config,
            bytes,
            from_cache: true,
        }))
    }
}

async fn pull_blob(
    client: &Client,
    reference: &Reference,
    descriptor: &OciDescriptor,
    what: &'static str,
) -> Result<Vec<u8>, Error> {
    let mut out = Vec::with_capacity(usize::try_from(descriptor.size).unwrap_or(0));
    client
        .pull_blob(reference, descriptor, &mut out)
        .await
        .map_err(|source| pull_error(reference, what, "pull blob", source))?;
    Ok(out)
}

/// A failed pull: content that does not hash to its digest is a [`Error::DigestMismatch`],
/// anything else a registry error.
fn pull_error(
    reference: &Reference,
    what: &'static str,
    action: &'static str,
    source: oci_client::errors::OciDistributionError,
) -> Error {
    use oci_client::errors::{DigestError, OciDistributionError};
    match source {
        OciDistributionError::DigestError(DigestError::VerificationError { expected, actual }) => {
            Error::DigestMismatch {
                reference: reference.whole(),
                what,
                expected,
                actual,
            }
        }
        source => Error::Registry {
            reference: reference.whole(),
            action,
            source,
        },
    }
}

impl Registry {
    /// Pushes `component` to `reference` in the CNCF Wasm layout; returns the pinned reference.
    /// `title` (a file name) becomes the layer's `org.opencontainers.image.title`, which
    /// `oras pull` uses to name the file it writes.
    pub async fn push(
        &self,
        component: &[u8],
        reference: &str,
        auth: &RegistryAuth,
        title: Option<&str>,
    ) -> Result<Artifact, Error> {
        let parsed = parse_reference(reference)?;
        let layer_digest = sha256_digest(component);
        let config = WasmConfig::for_component(component, &layer_digest);
        let config_bytes = config.to_bytes();
        let config_descriptor = OciDescriptor {
            media_type: layout::WASM_CONFIG_MEDIA_TYPE.to_owned(),
            digest: sha256_digest(&config_bytes),
            size: len_i64(&config_bytes),
            ..OciDescriptor::default()
        };
        let layer = OciDescriptor {
            media_type: layout::WASM_LAYER_MEDIA_TYPE.to_owned(),
            digest: layer_digest,
            size: len_i64(component),
            annotations: title
                .map(|t| [("org.opencontainers.image.title".to_owned(), t.to_owned())].into()),
            ..OciDescriptor::default()
        };
        let manifest = OciImageManifest {
            schema_version: 2,
            media_type: Some(OCI_IMAGE_MEDIA_TYPE.to_owned()),
            artifact_type: None,
            config: config_descriptor.clone(),
            layers: vec![layer.clone()],
            subject: None,
            annotations: None,
        };
        // The manifest is serialised once, here: its digest is the sha256 of these bytes.
        let manifest_bytes = serde_json::to_vec(&manifest).map_err(|e| Error::Layout {
            reference: reference.to_owned(),
            reason: format!("manifest does not serialise: {e}"),
        })?;
        let manifest_digest = sha256_digest(&manifest_bytes);

        let client = self.client();
        client
            .store_auth_if_needed(parsed.resolve_registry(), auth)
            .await;
        let push = |action| registry_error(reference, action);
        client
            .push_blob(&parsed, component.to_vec(), &layer.digest)
            .await
            .map_err(push("push layer"))?;
        client
            .push_blob(&parsed, config_bytes.clone(), &config_descriptor.digest)
            .await
            .map_err(push("push config"))?;
        let content_type = http::HeaderValue::from_static(OCI_IMAGE_MEDIA_TYPE);
        client
            .push_manifest_raw(&parsed, manifest_bytes, content_type)
            .await
            .map_err(push("push manifest"))?;
        let pinned = parsed.clone_with_digest(manifest_digest.clone()).whole();
        tracing::info!(reference, pinned = %pinned, size = component.len(), "plugin pushed");
        Ok(Artifact {
            pinned,
            manifest_digest,
            layer,
            config_media_type: layout::WASM_CONFIG_MEDIA_TYPE.to_owned(),
            config,
            bytes: component.to_vec(),
            from_cache: false,
        })
    }
}

fn protocol(insecure: &[String]) -> ClientProtocol {
    if insecure.is_empty() {
        ClientProtocol::Https
    } else {
        ClientProtocol::HttpsExcept(insecure.to_vec())
    }
}

fn registry_error(
    reference: &str,
    action: &'static str,
) -> impl FnOnce(oci_client::errors::OciDistributionError) -> Error {
    let reference = reference.to_owned();
    move |source| Error::Registry {
        reference,
        action,
        source,
    }
}

fn parse_manifest(reference: &str, bytes: &[u8]) -> Result<OciImageManifest, Error> {
    serde_json::from_slice(bytes).map_err(|e| Error::Layout {
        reference: reference.to_owned(),
        reason: format!("manifest is not an OCI image manifest: {e}"),
    })
}

fn len_i64(bytes: &[u8]) -> i64 {
    i64::try_from(bytes.len()).unwrap_or(i64::MAX)
}
