//! The OCI side of the suites: the real `orchard plugin …`, `oras` and `cosign` commands, and
//! the registry's own storage (to tamper with a blob the way a compromised mirror would).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;

use crate::paths::orchard_bin;
use crate::{TestEnv, run, tool};

/// A scratch directory for one test: docker config, keys, pulled files.
pub struct Workdir {
    pub path: PathBuf,
}

impl Workdir {
    /// `target/e2e-oci/<name>`, emptied.
    pub fn new(name: &str) -> anyhow::Result<Self> {
        let path = crate::paths::target_dir().join("e2e-oci").join(name);
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path)?;
        Ok(Self { path })
    }

    /// `orchard <args>` run in this directory, with it as the docker config home and the test
    /// registries marked insecure (plain HTTP on loopback).
    pub fn orchard(&self, env: &TestEnv) -> Command {
        let mut cmd = Command::new(orchard_bin());
        cmd.current_dir(&self.path)
            .env("DOCKER_CONFIG", self.path.join("docker"))
            .env(
                "ORCHARD_INSECURE_REGISTRIES",
                format!("{},{}", env.registry, env.auth_registry),
            )
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "warn");
        cmd
    }

    /// `oras <args>` over plain HTTP, with this directory as its docker config home.
    pub fn oras(&self) -> Command {
        let mut cmd = Command::new(tool("oras"));
        cmd.env("DOCKER_CONFIG", self.path.join("docker"))
            .current_dir(&self.path);
        cmd
    }

    /// `cosign <args>` with an empty key password, no transparency log, plain HTTP allowed.
    pub fn cosign(&self) -> Command {
        let mut cmd = Command::new(tool("cosign"));
        cmd.env("COSIGN_PASSWORD", "")
            .env("DOCKER_CONFIG", self.path.join("docker"))
            .current_dir(&self.path);
        cmd
    }

    /// Generates a cosign key pair `<prefix>.key` / `<prefix>.pub`; returns the public key path.
    pub fn cosign_key_pair(&self, prefix: &str) -> anyhow::Result<PathBuf> {
        run(self
            .cosign()
            .args(["generate-key-pair", "--output-key-prefix", prefix]))?;
        Ok(self.path.join(format!("{prefix}.pub")))
    }

    /// Signs the manifest `pinned` (`repo@sha256:…`) with `<prefix>.key`.
    pub fn cosign_sign(&self, prefix: &str, pinned: &str) -> anyhow::Result<()> {
        run(self.cosign().args([
            "sign",
            "--key",
            &format!("{prefix}.key"),
            "--tlog-upload=false",
            "--allow-http-registry",
            "--yes",
            pinned,
        ]))
        .map(drop)
    }

    /// Pushes `file` with `orchard plugin push`; returns the pinned reference it prints.
    pub fn push(&self, env: &TestEnv, file: &Path, reference: &str) -> anyhow::Result<String> {
        let out = run(self
            .orchard(env)
            .args(["plugin", "push"])
            .arg(file)
            .arg(reference))?;
        Ok(out.trim().to_owned())
    }

    /// Writes `bytes` to a file in this directory.
    pub fn write(&self, name: &str, bytes: &[u8]) -> anyhow::Result<PathBuf> {
        let path = self.path.join(name);
        std::fs::write(&path, bytes)?;
        Ok(path)
    }
}

/// `component` with a custom section `orchard-e2e` holding `tag` appended: the same plugin as
/// a distinct artifact (its own layer digest), still a valid component.
pub fn with_custom_section(component: &[u8], tag: &str) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            #[allow(clippy::cast_possible_truncation, reason = "masked to 7 bits")]
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let name = b"orchard-e2e";
    let mut body = Vec::new();
    leb(name.len(), &mut body);
    body.extend_from_slice(name);
    body.extend_from_slice(tag.as_bytes());
    let mut out = component.to_vec();
    out.push(0);
    leb(body.len(), &mut out);
    out.extend_from_slice(&body);
    out
}

/// Overwrites the middle of the blob `digest` in the registry's storage with other bytes of
/// the same length: the registry keeps serving it under the old digest.
pub fn tamper_blob(env: &TestEnv, digest: &str) -> anyhow::Result<()> {
    let hex = digest
        .strip_prefix("sha256:")
        .context("not a sha256 digest")?;
    let path = env
        .registry_data
        .join("docker/registry/v2/blobs/sha256")
        .join(&hex[..2])
        .join(hex)
        .join("data");
    let mut bytes =
        std::fs::read(&path).with_context(|| format!("reading blob {}", path.display()))?;
    let (middle, len) = (bytes.len() / 2, bytes.len());
    for b in &mut bytes[middle..(middle + 16).min(len)] {
        *b = !*b;
    }
    std::fs::write(&path, bytes)?;
    Ok(())
}

/// The digest of the one layer of the manifest `pinned`, read from the registry.
pub async fn layer_digest(env: &TestEnv, pinned: &str) -> anyhow::Result<String> {
    let (repo, digest) = pinned
        .split_once('@')
        .context("reference is not pinned by digest")?;
    let repo = repo
        .strip_prefix(&format!("{}/", env.registry))
        .context("reference is not in the test registry")?;
    let manifest: serde_json::Value = crate::http()?
        .get(format!(
            "{}/v2/{repo}/manifests/{digest}",
            env.registry_url()
        ))
        .header("Accept", "application/vnd.oci.image.manifest.v1+json")
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    manifest["layers"][0]["digest"]
        .as_str()
        .map(str::to_owned)
        .context("manifest without a layer")
}
