//! Which plugin serves which kind: a kind is served by one plugin at a time, and a static
//! plugin's (`--plugin`) kind is never taken over by a Plugin object.

use std::collections::HashMap;
use std::sync::Mutex;

use super::Error;

/// Kinds (CRD names) and who serves each; shared by every Plugin's worker.
#[derive(Debug, Default)]
pub struct KindClaims {
    owners: Mutex<HashMap<String, Owner>>,
}

/// Who serves a kind.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Owner {
    /// A `--plugin` of the host: never released.
    Static(String),
    /// A Plugin object.
    Plugin(String),
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Static(name) => write!(f, "--plugin {name}"),
            Self::Plugin(name) => f.write_str(name),
        }
    }
}

impl KindClaims {
    /// Claims held by the host's static plugins: `(kind, plugin name)`.
    pub fn with_static<'a>(kinds: impl IntoIterator<Item = (String, &'a str)>) -> Self {
        let owners = kinds
            .into_iter()
            .map(|(kind, plugin)| (kind, Owner::Static(plugin.to_owned())))
            .collect();
        Self {
            owners: Mutex::new(owners),
        }
    }

    fn owners(&self) -> std::sync::MutexGuard<'_, HashMap<String, Owner>> {
        // Poisoned only by a panic inside one of the short sections below, which leave the
        // map whole.
        self.owners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Claims `kind` for the Plugin `plugin`; refused when someone else serves it.
    pub fn claim(&self, kind: &str, plugin: &str) -> Result<(), Error> {
        let mut owners = self.owners();
        match owners.get(kind) {
            Some(Owner::Plugin(owner)) if owner == plugin => Ok(()),
            Some(owner) => Err(Error::KindConflict {
                kind: kind.to_owned(),
                owner: owner.to_string(),
            }),
            None => {
                owners.insert(kind.to_owned(), Owner::Plugin(plugin.to_owned()));
                Ok(())
            }
        }
    }

    /// Releases `kind` if the Plugin `plugin` holds it.
    pub fn release(&self, kind: &str, plugin: &str) {
        let mut owners = self.owners();
        if owners.get(kind) == Some(&Owner::Plugin(plugin.to_owned())) {
            owners.remove(kind);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_is_served_by_one_plugin_until_it_releases_it() {
        let claims = KindClaims::default();
        claims.claim("zones.dns", "a").unwrap();
        claims.claim("zones.dns", "a").unwrap();
        let err = claims.claim("zones.dns", "b").unwrap_err();
        assert_eq!(err.reason(), "KindConflict");
        assert_eq!(
            err.to_string(),
            "kind zones.dns is already served by plugin a"
        );
        claims.release("zones.dns", "b");
        assert!(
            claims.claim("zones.dns", "b").is_err(),
            "only the holder releases"
        );
        claims.release("zones.dns", "a");
        claims.claim("zones.dns", "b").unwrap();
    }

    #[test]
    fn a_static_plugin_s_kind_is_never_taken_over() {
        let claims = KindClaims::with_static([("zones.dns".to_owned(), "pdns-zone")]);
        let err = claims.claim("zones.dns", "pdns-zone").unwrap_err();
        assert!(
            err.to_string().ends_with("by plugin --plugin pdns-zone"),
            "{err}"
        );
        claims.release("zones.dns", "pdns-zone");
        assert!(claims.claim("zones.dns", "x").is_err());
    }
}
