//! Manifests and blobs on disk, named by their digest: `<dir>/sha256/<hex>`. Entries are
//! written atomically and checked against their name when read; a corrupt entry is removed and
//! reads as missing (the caller pulls it again).

use std::path::{Path, PathBuf};

use super::{Error, sha256_digest};

/// A content-addressed store of OCI content.
#[derive(Debug, Clone)]
pub struct BlobCache {
    dir: PathBuf,
}

impl BlobCache {
    /// A cache in `dir` (created on first write).
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    /// The content named `digest`, if cached and intact.
    pub fn get(&self, digest: &str) -> Result<Option<Vec<u8>>, Error> {
        let Some(path) = self.path(digest) else {
            return Ok(None);
        };
        match std::fs::read(&path) {
            Ok(bytes) if sha256_digest(&bytes) == digest => Ok(Some(bytes)),
            Ok(_) => {
                tracing::warn!(path = %path.display(), "cached OCI content does not match its digest: removed");
                let _ = std::fs::remove_file(&path);
                Ok(None)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(Error::Cache { path, source }),
        }
    }

    /// Stores `bytes` under `digest` (which the caller has verified).
    pub fn put(&self, digest: &str, bytes: &[u8]) -> Result<(), Error> {
        let Some(path) = self.path(digest) else {
            return Ok(());
        };
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| Error::Cache { path, source }
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&tmp, bytes).map_err(io(&tmp))?;
        std::fs::rename(&tmp, &path).map_err(io(&path))
    }

    /// Only sha256 digests with a hex name are cached (anything else cannot name a file safely).
    fn path(&self, digest: &str) -> Option<PathBuf> {
        let hex = digest.strip_prefix("sha256:")?;
        (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| self.dir.join("sha256").join(hex))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_is_found_by_its_digest_and_corruption_reads_as_missing() {
        let dir = tempfile::tempdir().unwrap();
        let cache = BlobCache::new(dir.path().to_owned());
        let digest = sha256_digest(b"component");
        assert_eq!(cache.get(&digest).unwrap(), None);
        cache.put(&digest, b"component").unwrap();
        assert_eq!(
            cache.get(&digest).unwrap().as_deref(),
            Some(&b"component"[..])
        );

        let file = dir
            .path()
            .join("sha256")
            .join(digest.trim_start_matches("sha256:"));
        std::fs::write(&file, b"tampered").unwrap();
        assert_eq!(cache.get(&digest).unwrap(), None);
        assert!(!file.exists(), "a corrupt entry is removed");
    }

    #[test]
    fn digests_that_cannot_name_a_file_are_never_cached() {
        let dir = tempfile::tempdir().unwrap();
        let cache = BlobCache::new(dir.path().to_owned());
        cache.put("sha256:../../etc/passwd", b"x").unwrap();
        assert_eq!(cache.get("sha256:../../etc/passwd").unwrap(), None);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
