//! Registry credentials from a docker `config.json`: a pull Secret's `.dockerconfigjson` in the
//! cluster, the usual file (`$DOCKER_CONFIG/config.json`, `~/.docker/config.json`) locally.
//!
//! A Secret's content is data, never code: only its `auths` entries are read, and credential
//! helpers it may name are ignored (running them would let a Secret start programs in the
//! host). The local file is the user's own, so its helpers run (`docker_credential`).

use std::collections::BTreeMap;

use base64::Engine as _;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;

use super::Error;

/// Where credentials come from.
#[derive(Debug, Clone, Default)]
pub enum Credentials {
    /// No credentials.
    #[default]
    Anonymous,
    /// The docker config of the user running the host (helpers allowed).
    LocalDockerConfig,
    /// A docker config's JSON, e.g. from a `kubernetes.io/dockerconfigjson` Secret.
    DockerConfigJson(Vec<u8>),
}

#[derive(Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
}

#[derive(Deserialize)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default, rename = "identitytoken")]
    identity_token: Option<String>,
}

impl Credentials {
    /// The credentials for `registry` (`host[:port]`); anonymous when none is configured.
    pub fn for_registry(&self, registry: &str) -> Result<RegistryAuth, Error> {
        let invalid = |reason: String| Error::Credentials {
            registry: registry.to_owned(),
            reason,
        };
        match self {
            Self::Anonymous => Ok(RegistryAuth::Anonymous),
            Self::LocalDockerConfig => {
                use docker_credential::{CredentialRetrievalError as E, DockerCredential as C};
                match docker_credential::get_credential(registry) {
                    Ok(C::UsernamePassword(user, password)) => {
                        Ok(RegistryAuth::Basic(user, password))
                    }
                    Ok(C::IdentityToken(token)) => Ok(RegistryAuth::Bearer(token)),
                    Err(E::NoCredentialConfigured | E::ConfigNotFound | E::ConfigReadError) => {
                        Ok(RegistryAuth::Anonymous)
                    }
                    Err(e) => Err(invalid(e.to_string())),
                }
            }
            Self::DockerConfigJson(json) => {
                let config: DockerConfig = serde_json::from_slice(json)
                    .map_err(|e| invalid(format!("not a docker config.json: {e}")))?;
                let Some(entry) = config
                    .auths
                    .iter()
                    .find(|(key, _)| server_of(key) == registry)
                    .map(|(_, entry)| entry)
                else {
                    return Ok(RegistryAuth::Anonymous);
                };
                entry.to_auth().map_err(invalid)
            }
        }
    }
}

impl AuthEntry {
    fn to_auth(&self) -> Result<RegistryAuth, String> {
        if let Some(token) = &self.identity_token {
            return Ok(RegistryAuth::Bearer(token.clone()));
        }
        if let (Some(user), Some(password)) = (&self.username, &self.password) {
            return Ok(RegistryAuth::Basic(user.clone(), password.clone()));
        }
        let Some(auth) = &self.auth else {
            return Ok(RegistryAuth::Anonymous);
        };
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth.trim())
            .map_err(|e| format!("auth is not base64: {e}"))?;
        let decoded = String::from_utf8(decoded).map_err(|_| "auth is not UTF-8".to_owned())?;
        let (user, password) = decoded
            .split_once(':')
            .ok_or_else(|| "auth is not user:password".to_owned())?;
        Ok(RegistryAuth::Basic(user.to_owned(), password.to_owned()))
    }
}

/// `https://host:port/v1/` → `host:port`; docker.io's legacy key → `index.docker.io`.
fn server_of(key: &str) -> &str {
    let key = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    key.split('/').next().unwrap_or(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(auth: RegistryAuth) -> Option<(String, String)> {
        match auth {
            RegistryAuth::Basic(u, p) => Some((u, p)),
            _ => None,
        }
    }

    #[test]
    fn a_pull_secret_gives_basic_credentials_for_its_registry_only() {
        let json = br#"{"auths":{"https://127.0.0.1:5000/v1/":{"auth":"b3JjaGFyZDpzM2NyZXQ="},
                        "ghcr.io":{"username":"u","password":"p"}}}"#;
        let creds = Credentials::DockerConfigJson(json.to_vec());
        assert_eq!(
            basic(creds.for_registry("127.0.0.1:5000").unwrap()),
            Some(("orchard".into(), "s3cret".into()))
        );
        assert_eq!(
            basic(creds.for_registry("ghcr.io").unwrap()),
            Some(("u".into(), "p".into()))
        );
        assert!(matches!(
            creds.for_registry("quay.io").unwrap(),
            RegistryAuth::Anonymous
        ));
    }

    #[test]
    fn a_malformed_pull_secret_is_an_error_naming_the_registry() {
        let creds = Credentials::DockerConfigJson(b"{not json".to_vec());
        let err = creds.for_registry("ghcr.io").unwrap_err().to_string();
        assert!(
            err.contains("ghcr.io") && err.contains("config.json"),
            "{err}"
        );
        let creds =
            Credentials::DockerConfigJson(br#"{"auths":{"ghcr.io":{"auth":"!!"}}}"#.to_vec());
        assert!(
            creds
                .for_registry("ghcr.io")
                .unwrap_err()
                .to_string()
                .contains("base64")
        );
    }

    #[test]
    fn credential_helpers_named_by_a_secret_are_never_run() {
        let json = br#"{"credsStore":"evil","credHelpers":{"ghcr.io":"evil"},"auths":{}}"#;
        let creds = Credentials::DockerConfigJson(json.to_vec());
        assert!(matches!(
            creds.for_registry("ghcr.io").unwrap(),
            RegistryAuth::Anonymous
        ));
    }
}
