//! Dependencies given on the command line (`--dependency NAME=FILE` or `NAME=Kind/name`),
//! turned into [`ManagedObject::dependencies`] the way the reconciler does it from its caches
//! (`reconcile::flow::deps`): kind, object name, `status.id` and `status.resource` of the
//! referenced object.
//!
//! # Contract
//!
//! - Every given dependency MUST be declared by the plugin (`describe().dependencies`), be of
//!   the declared kind, and be the object the sample's `spec.resource.<field>` names (when it
//!   names one): the plugin sees exactly what the host would hand it.
//! - A dependency is given at most once.
//! - [`missing`] lists the declared dependencies the sample names but no flag gives; `invoke`
//!   warns about them, `conformance` refuses to start without them.

use std::path::PathBuf;
use std::str::FromStr;

use kube::api::{Api, DynamicObject};
use serde_json::Value;

use super::Error;
use crate::actuator::{Dependency, DependencyDecl, Description, ManagedObject};

/// Where a `--dependency` flag takes its object from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DependencySource {
    /// A manifest file (YAML or JSON).
    File(PathBuf),
    /// An object of the current kubeconfig's cluster, in the sample's namespace.
    Cluster {
        /// Its kind, e.g. `DnsZone`.
        kind: String,
        /// Its name.
        name: String,
    },
}

/// One `--dependency NAME=FILE|Kind/name` flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DependencyArg {
    /// The flag as written, for error messages.
    pub flag: String,
    /// The name of the dependency declaration, e.g. `zone`.
    pub name: String,
    /// Where the object comes from.
    pub source: DependencySource,
}

impl FromStr for DependencyArg {
    type Err = String;

    /// `NAME=FILE` when FILE exists, else `NAME=Kind/name` (a kind starts with an upper-case
    /// letter), else an error naming both forms.
    fn from_str(text: &str) -> Result<Self, String> {
        let flag = format!("--dependency {text}");
        let (name, value) = text
            .split_once('=')
            .filter(|(n, v)| !n.is_empty() && !v.is_empty())
            .ok_or_else(|| format!("{flag}: expected NAME=FILE or NAME=Kind/name"))?;
        let path = PathBuf::from(value);
        let source = if path.is_file() {
            DependencySource::File(path)
        } else {
            match value.split_once('/') {
                Some((kind, object))
                    if kind.starts_with(|c: char| c.is_ascii_uppercase())
                        && kind.chars().all(|c| c.is_ascii_alphanumeric())
                        && !object.is_empty()
                        && !object.contains('/') =>
                {
                    DependencySource::Cluster {
                        kind: kind.to_owned(),
                        name: object.to_owned(),
                    }
                }
                _ => {
                    return Err(format!(
                        "{flag}: {value:?} is neither a file nor Kind/name of a cluster object"
                    ));
                }
            }
        };
        Ok(Self {
            flag,
            name: name.to_owned(),
            source,
        })
    }
}

impl DependencyArg {
    /// The referenced object's manifest: read from its file, or fetched from the cluster of
    /// the current kubeconfig (kind in the plugin's API group and version, in `namespace`).
    pub async fn manifest(&self, d: &Description, namespace: &str) -> Result<Value, Error> {
        match &self.source {
            DependencySource::File(path) => read_manifest(path),
            DependencySource::Cluster { kind, name } => {
                let fetch = async {
                    let client = kube::Client::try_default().await?;
                    let gvk = if kind == crate::reconcile::machinery::dependents::SECRET {
                        kube::api::GroupVersionKind::gvk("", "v1", kind)
                    } else {
                        kube::api::GroupVersionKind::gvk(&d.group, &d.version, kind)
                    };
                    let (resource, _) = kube::discovery::pinned_kind(&client, &gvk).await?;
                    let api: Api<DynamicObject> =
                        Api::namespaced_with(client, namespace, &resource);
                    let obj = api.get(name).await?;
                    Ok::<_, kube::Error>(serde_json::to_value(obj).unwrap_or_default())
                };
                let mut manifest = fetch.await.map_err(|source| Error::DependencyFetch {
                    flag: self.flag.clone(),
                    namespace: namespace.to_owned(),
                    source,
                })?;
                // A DynamicObject serialises without its kind when the types are absent.
                if manifest["kind"].is_null() {
                    manifest["kind"] = Value::String(kind.clone());
                }
                Ok(manifest)
            }
        }
    }
}

/// Reads a Kubernetes manifest (YAML or JSON).
pub fn read_manifest(path: &std::path::Path) -> Result<Value, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::ReadManifest {
        path: path.to_owned(),
        source,
    })?;
    serde_yaml::from_str(&text).map_err(|source| Error::ParseManifest {
        path: path.to_owned(),
        source,
    })
}

/// The dependency the host would resolve from `manifest` for `decl`.
pub fn dependency(decl: &DependencyDecl, manifest: &Value) -> Dependency {
    Dependency {
        name: decl.name.clone(),
        kind: decl.kind.clone(),
        object: manifest["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        id: manifest["status"]["id"].as_str().map(str::to_owned),
        observed: Some(manifest["status"]["resource"].clone()).filter(|v| !v.is_null()),
    }
}

/// Checks the given dependencies against the plugin's declarations and the sample's spec and
/// returns them in declaration order. `given`: each flag with the manifest it names.
pub fn dependencies(
    d: &Description,
    spec: Option<&Value>,
    given: &[(DependencyArg, Value)],
) -> Result<Vec<Dependency>, Error> {
    let declared = || {
        if d.dependencies.is_empty() {
            "none".to_owned()
        } else {
            d.dependencies
                .iter()
                .map(|decl| decl.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    for (i, (arg, _)) in given.iter().enumerate() {
        if !d.dependencies.iter().any(|decl| decl.name == arg.name) {
            return Err(Error::UnknownDependency {
                flag: arg.flag.clone(),
                plugin: d.name.clone(),
                name: arg.name.clone(),
                declared: declared(),
            });
        }
        if given[..i].iter().any(|(a, _)| a.name == arg.name) {
            return Err(Error::DuplicateDependency {
                flag: arg.flag.clone(),
                name: arg.name.clone(),
            });
        }
    }
    let mut out = Vec::new();
    for decl in &d.dependencies {
        let Some((arg, manifest)) = given.iter().find(|(a, _)| a.name == decl.name) else {
            continue;
        };
        let kind = manifest["kind"].as_str().unwrap_or_default();
        if kind != decl.kind {
            return Err(Error::DependencyKind {
                flag: arg.flag.clone(),
                name: decl.name.clone(),
                expected: decl.kind.clone(),
                found: kind.to_owned(),
            });
        }
        let dep = dependency(decl, manifest);
        if dep.object.is_empty() {
            return Err(Error::DependencyUnnamed {
                flag: arg.flag.clone(),
            });
        }
        if let Some(named) = spec.and_then(|s| s[&decl.field].as_str())
            && named != dep.object
        {
            return Err(Error::DependencyMismatch {
                flag: arg.flag.clone(),
                field: decl.field.clone(),
                named: named.to_owned(),
                given: dep.object,
            });
        }
        out.push(dep);
    }
    Ok(out)
}

/// The declared dependencies that the sample's spec names, the host resolves before create,
/// and no flag gives.
pub fn missing<'d>(
    d: &'d Description,
    spec: Option<&Value>,
    given: &[(DependencyArg, Value)],
) -> Vec<&'d DependencyDecl> {
    d.dependencies
        .iter()
        .filter(|decl| decl.for_create)
        .filter(|decl| spec.is_some_and(|s| s[&decl.field].is_string()))
        .filter(|decl| !given.iter().any(|(a, _)| a.name == decl.name))
        .collect()
}

/// Reads every flag's manifest, checks them ([`dependencies`]) and puts them into `obj`.
pub async fn fill(
    obj: &mut ManagedObject,
    d: &Description,
    args: &[DependencyArg],
) -> Result<Vec<DependencyDecl>, Error> {
    let namespace = if obj.namespace.is_empty() {
        "default".to_owned()
    } else {
        obj.namespace.clone()
    };
    let mut given = Vec::new();
    for arg in args {
        given.push((arg.clone(), arg.manifest(d, &namespace).await?));
    }
    obj.dependencies = dependencies(d, obj.spec.as_ref(), &given)?;
    Ok(missing(d, obj.spec.as_ref(), &given)
        .into_iter()
        .cloned()
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn description() -> Description {
        Description {
            name: "pdns-record".into(),
            group: "pdns.orchard.dev".into(),
            version: "v1alpha1".into(),
            kind: "DnsRecord".into(),
            plural: "dnsrecords".into(),
            resource_schema: json!({"type": "object"}),
            filter_schema: None,
            observed_schema: json!({"type": "object"}),
            dependencies: vec![DependencyDecl {
                name: "zone".into(),
                field: "zoneRef".into(),
                kind: "DnsZone".into(),
                for_create: true,
                for_delete: true,
                guard_deletion: true,
            }],
            needs_credentials: true,
            versions: Vec::new(),
            shortcuts: crate::actuator::Shortcuts::default(),
        }
    }

    fn zone() -> Value {
        json!({"kind": "DnsZone", "metadata": {"name": "example-org"},
               "status": {"id": "example.org.", "resource": {"serial": 3}}})
    }

    fn arg(text: &str) -> DependencyArg {
        text.parse().unwrap()
    }

    #[test]
    fn a_manifest_gives_kind_name_status_id_and_observed_state() {
        let spec = json!({"zoneRef": "example-org"});
        let deps = dependencies(
            &description(),
            Some(&spec),
            &[(arg("zone=DnsZone/example-org"), zone())],
        )
        .unwrap();
        assert_eq!(
            deps,
            vec![Dependency {
                name: "zone".into(),
                kind: "DnsZone".into(),
                object: "example-org".into(),
                id: Some("example.org.".into()),
                observed: Some(json!({"serial": 3})),
            }]
        );
    }

    #[test]
    fn an_undeclared_dependency_is_refused_naming_the_flag_and_the_declared_ones() {
        let err = dependencies(
            &description(),
            None,
            &[(arg("vhost=RabbitVhost/v"), zone())],
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("--dependency vhost=RabbitVhost/v"), "{err}");
        assert!(err.contains("declares: zone"), "{err}");
    }

    #[test]
    fn a_dependency_of_another_kind_is_refused() {
        let mut other = zone();
        other["kind"] = json!("RabbitVhost");
        let err = dependencies(&description(), None, &[(arg("zone=DnsZone/x"), other)])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("is a RabbitVhost") && err.contains("a DnsZone"),
            "{err}"
        );
    }

    #[test]
    fn a_dependency_that_is_not_the_object_the_spec_names_is_refused() {
        let spec = json!({"zoneRef": "other-zone"});
        let err = dependencies(
            &description(),
            Some(&spec),
            &[(arg("zone=DnsZone/x"), zone())],
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("zoneRef") && err.contains("other-zone") && err.contains("example-org"),
            "{err}"
        );
    }

    #[test]
    fn a_dependency_given_twice_is_refused() {
        let given = [
            (arg("zone=DnsZone/a"), zone()),
            (arg("zone=DnsZone/b"), zone()),
        ];
        let err = dependencies(&description(), None, &given).unwrap_err();
        assert!(matches!(err, Error::DuplicateDependency { .. }), "{err}");
    }

    #[test]
    fn a_dependency_the_spec_names_but_no_flag_gives_is_missing() {
        let d = description();
        let spec = json!({"zoneRef": "example-org"});
        assert_eq!(missing(&d, Some(&spec), &[]).len(), 1);
        assert!(missing(&d, Some(&json!({})), &[]).is_empty());
        assert!(
            missing(
                &d,
                Some(&spec),
                &[(arg("zone=DnsZone/example-org"), zone())]
            )
            .is_empty()
        );
    }

    #[test]
    fn a_flag_is_a_file_when_one_exists_else_kind_slash_name() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let text = format!("zone={}", file.path().display());
        assert_eq!(
            arg(&text).source,
            DependencySource::File(file.path().to_owned())
        );
        assert_eq!(
            arg("zone=DnsZone/example-org").source,
            DependencySource::Cluster {
                kind: "DnsZone".into(),
                name: "example-org".into()
            }
        );
        let err = "zone=no/such/file.yaml"
            .parse::<DependencyArg>()
            .unwrap_err();
        assert!(err.contains("neither a file nor Kind/name"), "{err}");
        assert!("zone".parse::<DependencyArg>().is_err());
    }
}
