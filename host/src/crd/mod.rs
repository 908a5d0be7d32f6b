//! The CRD of a plugin's kind: the standard envelope (the same for every kind, ORC's shape)
//! around the plugin's own schemas, with CEL rules and printer columns; [`evolution`] says
//! whether replacing an installed one would strand its stored objects.

pub mod evolution;
pub mod migrate;

use serde_json::{Value, json};

use crate::actuator::Description;

/// The API group/version/kind a plugin serves, as kube's dynamic API needs it.
pub fn api_resource(d: &Description) -> kube::api::ApiResource {
    kube::api::ApiResource {
        group: d.group.clone(),
        version: d.version.clone(),
        api_version: format!("{}/{}", d.group, d.version),
        kind: d.kind.clone(),
        plural: d.plural.clone(),
    }
}

/// `<plural>.<group>`.
pub fn crd_name(d: &Description) -> String {
    format!("{}.{}", d.plural, d.group)
}

fn conditions_schema() -> Value {
    json!({
        "type": "array",
        "maxItems": 32,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "type": "object",
            "required": ["type", "status", "reason", "message", "lastTransitionTime"],
            "properties": {
                "type": {"type": "string", "maxLength": 316},
                "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                "reason": {"type": "string", "maxLength": 1024},
                "message": {"type": "string", "maxLength": 32768},
                "lastTransitionTime": {"type": "string", "format": "date-time"},
                "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0}
            }
        }
    })
}

/// `status.drift`: what the last correction of drift changed back, and when.
fn drift_schema() -> Value {
    json!({
        "type": "object",
        "description": "The last time a reconciler changed the external resource back to the spec: the fields that differed (secret values masked).",
        "properties": {
            "time": {"type": "string", "format": "date-time"},
            "fields": {
                "type": "array",
                "maxItems": 32,
                "items": {
                    "type": "object",
                    "required": ["field"],
                    "properties": {
                        "field": {"type": "string", "maxLength": 256},
                        "observed": {"type": "string", "maxLength": 1024, "description": "The value found (JSON), absent when the field was absent."},
                        "desired": {"type": "string", "maxLength": 1024, "description": "The value set back (JSON), absent when the field was removed."}
                    }
                }
            }
        }
    })
}

/// The `CustomResourceDefinition` of the kind described by `d`, at one version (a kind with
/// several needs its webhook: [`crd_with`]).
pub fn crd(d: &Description) -> Value {
    crd_with(d, None)
}

/// How the apiserver reaches the host's conversion webhook: a CRD's
/// `spec.conversion.webhook.clientConfig` (`url` or `service`, and `caBundle`).
#[derive(Debug, Clone, PartialEq)]
pub struct Webhook {
    /// The `clientConfig`, as the CRD holds it.
    pub client_config: Value,
}

/// The `CustomResourceDefinition` of the kind described by `d`: every version it lists (each
/// with its own schemas, the storage one marked) and, when there are several, conversion by
/// `webhook` (without one, `strategy: None`: the apiserver only rewrites `apiVersion`, which
/// [`ensure`] refuses).
pub fn crd_with(d: &Description, webhook: Option<&Webhook>) -> Value {
    let versions: Vec<Value> = if d.versions.is_empty() {
        vec![version_entry(
            d,
            &d.version,
            true,
            &d.resource_schema,
            d.filter_schema.as_ref(),
            &d.observed_schema,
        )]
    } else {
        d.versions
            .iter()
            .map(|v| {
                version_entry(
                    d,
                    &v.name,
                    v.storage,
                    &v.resource_schema,
                    v.filter_schema.as_ref(),
                    &v.observed_schema,
                )
            })
            .collect()
    };
    let mut crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": crd_name(d),
            "labels": {"orchard.dev/plugin": d.name}
        },
        "spec": {
            "group": d.group,
            "scope": "Namespaced",
            "names": {
                "kind": d.kind,
                "listKind": format!("{}List", d.kind),
                "plural": d.plural,
                "singular": d.kind.to_ascii_lowercase(),
                "categories": ["orchard"]
            },
            "versions": versions
        }
    });
    if d.converts() {
        crd["spec"]["conversion"] = match webhook {
            Some(w) => json!({
                "strategy": "Webhook",
                "webhook": {
                    "conversionReviewVersions": ["v1"],
                    "clientConfig": w.client_config
                }
            }),
            None => json!({"strategy": "None"}),
        };
    }
    crd
}

/// One entry of `spec.versions`: the envelope around the version's schemas.
fn version_entry(
    d: &Description,
    name: &str,
    storage: bool,
    resource_schema: &Value,
    filter_schema: Option<&Value>,
    observed_schema: &Value,
) -> Value {
    let mut import = json!({
        "type": "object",
        "description": "An existing external resource to import: exactly one of id or filter.",
        "minProperties": 1,
        "maxProperties": 1,
        "properties": {
            "id": {"type": "string", "minLength": 1, "maxLength": 1024, "description": "The external id."}
        }
    });
    if let Some(filter) = filter_schema {
        import["properties"]["filter"] = filter.clone();
    }

    let mut spec_properties = json!({
        "managementPolicy": {
            "type": "string",
            "enum": ["managed", "unmanaged"],
            "default": "managed",
            "description": "managed: Orchard creates, updates and deletes the external resource. unmanaged: it only reads an imported one.",
            "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "managementPolicy is immutable"}]
        },
        "managedOptions": {
            "type": "object",
            "properties": {
                "onDelete": {
                    "type": "string",
                    "enum": ["delete", "detach"],
                    "default": "delete",
                    "description": "detach leaves the external resource in place when the object is deleted."
                }
            }
        },
        "import": import,
        "resource": resource_schema,
        "resyncPeriod": {
            "type": "string",
            "pattern": "^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$",
            "description": "How often to check the external resource for drift (e.g. 10m); 0s disables."
        },
        "writeConnectionSecretTo": {
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 253}},
            "description": "The Secret (same namespace, created and owned by this object) that receives the connection details the plugin reports: a generated password, an endpoint, a token."
        }
    });
    let mut required = vec![];
    if d.needs_credentials {
        spec_properties["credentialsRef"] = json!({
            "type": "object",
            "required": ["secretName"],
            "properties": {"secretName": {"type": "string", "minLength": 1, "maxLength": 253}},
            "description": "The Secret holding the credentials of the external system (same namespace)."
        });
        required.push("credentialsRef");
    }

    let spec = json!({
        "type": "object",
        "required": required,
        "properties": spec_properties,
        "x-kubernetes-validations": [
            {"rule": "self.managementPolicy == 'managed' ? has(self.resource) : true",
             "message": "resource must be specified when policy is managed"},
            {"rule": "self.managementPolicy == 'managed' ? !has(self.__import__) : true",
             "message": "import may not be specified when policy is managed"},
            {"rule": "self.managementPolicy == 'unmanaged' ? has(self.__import__) : true",
             "message": "import must be specified when policy is unmanaged"},
            {"rule": "self.managementPolicy == 'unmanaged' ? !has(self.resource) : true",
             "message": "resource may not be specified when policy is unmanaged"},
            {"rule": "has(self.managedOptions) ? self.managementPolicy == 'managed' : true",
             "message": "managedOptions may only be specified when policy is managed"}
        ]
    });

    let status = json!({
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": "The external id, written the moment it is known."},
            "conditions": conditions_schema(),
            "resource": observed_schema,
            "lastSyncTime": {"type": "string", "format": "date-time"},
            "drift": drift_schema()
        }
    });

    json!({
                "name": name,
                "served": true,
                "storage": storage,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "ID", "type": "string", "jsonPath": ".status.id"},
                    {"name": "Available", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Available')].status"},
                    {"name": "Message", "type": "string", "jsonPath": ".status.conditions[?(@.type=='Progressing')].message"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
                ],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "required": ["spec"],
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "metadata": {"type": "object"},
                        "spec": spec,
                        "status": status
                    }
                }}
    })
}

/// Errors of installing a CRD.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    /// The apiserver refused the CRD.
    #[error("failed to apply CRD {name}: {source}")]
    Apply {
        /// Name of the CRD.
        name: String,
        #[source]
        /// The apiserver's answer.
        source: kube::Error,
    },
    /// The host may not apply it, and it is not installed (or does not serve the version).
    #[error(
        "CRD {name} (version {versions}) is not installed, and this host does not install CRDs (--install-crds, or the right to)"
    )]
    Missing {
        /// Name of the CRD.
        name: String,
        /// The versions the host needs it to serve.
        versions: String,
    },
    /// The new schema would strand objects stored at the installed one ([`evolution`]): not
    /// applied, the installed CRD stays.
    #[error(
        "CRD {name} is not replaced: the new schema would strand the objects stored at the installed one: {breaks}"
    )]
    Strands {
        /// Name of the CRD.
        name: String,
        /// Every break, `; `-separated.
        breaks: String,
    },
    /// The kind lists several versions and this host serves no conversion webhook.
    #[error(
        "CRD {name} lists versions {versions}, converted by the plugin: this host must serve the conversion webhook (--conversion-webhook-addr)"
    )]
    NoWebhook {
        /// The CRD.
        name: String,
        /// The versions the plugin lists.
        versions: String,
    },
    /// It did not become Established in time.
    #[error("CRD {name} was not established within {seconds} s")]
    NotEstablished {
        /// Name of the CRD.
        name: String,
        /// How long the host waited.
        seconds: u64,
    },
    /// A typed CRD could not be encoded as JSON.
    #[error("encoding CRD {name}: {source}")]
    Encode {
        /// Name of the CRD.
        name: String,
        #[source]
        /// Why it did not encode.
        source: serde_json::Error,
    },
}

/// Applies the CRD of `d` (server-side, field manager `orchard.dev/crds`) and waits until it
/// is Established.
pub async fn install(
    client: &kube::Client,
    d: &Description,
    webhook: Option<&Webhook>,
) -> Result<(), InstallError> {
    ensure(client, d, true, webhook).await
}

/// Installs the CRD of `d` when `install` is set; otherwise only checks it is installed.
pub async fn ensure(
    client: &kube::Client,
    d: &Description,
    install: bool,
    webhook: Option<&Webhook>,
) -> Result<(), InstallError> {
    if d.converts() && webhook.is_none() {
        return Err(InstallError::NoWebhook {
            name: crd_name(d),
            versions: d
                .versions
                .iter()
                .map(|v| v.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    apply_crd(client, &crd_with(d, webhook), install).await
}

/// Applies `crd` (when `install`) and waits until it is Established. Without `install`, or
/// without the right to write CRDs (403), it validates instead: the CRD must already exist,
/// established, serving every version of `crd` (an admin installed it, e.g. from the chart).
pub async fn apply_crd(
    client: &kube::Client,
    crd: &Value,
    install: bool,
) -> Result<(), InstallError> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{Api, Patch, PatchParams};

    // The CRD comes from this module's builders, which always set `metadata.name`.
    let name = crd["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply("orchard.dev/crds").force();
    let validate = if install {
        // Never replace a schema in a way that strands the objects stored at it.
        if let Ok(Some(installed)) = api.get_opt(&name).await
            && let Ok(installed) = serde_json::to_value(&installed)
        {
            let breaks = evolution::breaks(&installed, crd);
            if !breaks.is_empty() {
                return Err(InstallError::Strands {
                    name,
                    breaks: breaks
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("; "),
                });
            }
        }
        match api.patch(&name, &params, &Patch::Apply(crd)).await {
            Ok(_) => false,
            Err(kube::Error::Api(e)) if e.code == 403 => true,
            Err(source) => return Err(InstallError::Apply { name, source }),
        }
    } else {
        true
    };
    if validate {
        let versions: Vec<&str> = crd["spec"]["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v["name"].as_str())
            .collect();
        let existing = api.get_opt(&name).await.ok().flatten();
        let served = existing.as_ref().is_some_and(|c| {
            versions
                .iter()
                .all(|v| c.spec.versions.iter().any(|s| s.name == *v && s.served))
        });
        if !served {
            return Err(InstallError::Missing {
                name,
                versions: versions.join(", "),
            });
        }
        tracing::debug!(crd = %name, "CRD not applied by this host; it exists and serves the version");
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let established = api.get_opt(&name).await.ok().flatten().is_some_and(|crd| {
            // No conditions yet: not Established; poll again.
            crd.status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        });
        if established {
            tracing::info!(crd = %name, "CRD established");
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            return Err(InstallError::NotEstablished { name, seconds: 30 });
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "test code")]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Poll};

    use super::*;
    use crate::actuator::ApiVersion;

    /// `DnsZone` at `v1alpha1` alone (no `conversion.versions`).
    fn one_version() -> Description {
        Description {
            name: "pdns-zone".into(),
            group: "pdns.orchard.dev".into(),
            version: "v1alpha1".into(),
            kind: "DnsZone".into(),
            plural: "dnszones".into(),
            resource_schema: json!({"type": "object", "properties": {
                "nameservers": {"type": "array", "items": {"type": "string"}}
            }}),
            filter_schema: None,
            observed_schema: json!({"type": "object"}),
            dependencies: vec![],
            needs_credentials: true,
            versions: vec![],
            shortcuts: crate::actuator::Shortcuts::default(),
        }
    }

    /// `DnsZone` at `v1alpha1` (the description's) and `v1beta1`, the storage version.
    fn two_versions() -> Description {
        let d = one_version();
        let version = |name: &str, resource_schema: Value, storage| ApiVersion {
            name: name.into(),
            resource_schema,
            filter_schema: None,
            observed_schema: d.observed_schema.clone(),
            storage,
        };
        Description {
            versions: vec![
                version("v1alpha1", d.resource_schema.clone(), false),
                version(
                    "v1beta1",
                    json!({"type": "object", "properties": {
                        "nameServers": {"type": "array", "items": {"type": "object"}}
                    }}),
                    true,
                ),
            ],
            ..d
        }
    }

    /// The `clientConfig` the host publishes for `--conversion-webhook-service`.
    fn service_webhook() -> Webhook {
        Webhook {
            client_config: json!({
                "service": {"namespace": "orchard", "name": "orchard-webhook", "port": 443,
                            "path": "/convert"},
                "caBundle": "LS0tLS1CRUdJTi…"
            }),
        }
    }

    /// `(name, served, storage)` of each entry of `spec.versions`.
    fn listed(crd: &Value) -> Vec<(String, bool, bool)> {
        crd["spec"]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                (
                    v["name"].as_str().unwrap().to_owned(),
                    v["served"].as_bool().unwrap(),
                    v["storage"].as_bool().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn a_kind_with_one_version_is_stored_at_it_and_has_no_conversion() {
        let crd = crd(&one_version());
        assert_eq!(listed(&crd), [("v1alpha1".to_owned(), true, true)]);
        assert!(crd["spec"].get("conversion").is_none(), "{crd}");
        // The webhook changes nothing for it: there is nothing to convert.
        assert_eq!(crd_with(&one_version(), Some(&service_webhook())), crd);
    }

    #[test]
    fn a_multi_version_crd_lists_every_version_served_with_exactly_one_storage_version() {
        let d = two_versions();
        let crd = crd_with(&d, Some(&service_webhook()));
        assert_eq!(
            listed(&crd),
            [
                ("v1alpha1".to_owned(), true, false),
                ("v1beta1".to_owned(), true, true)
            ]
        );
        // Each version holds its own schema inside the same envelope.
        for (i, v) in d.versions.iter().enumerate() {
            let spec = &crd["spec"]["versions"][i]["schema"]["openAPIV3Schema"]["properties"]["spec"]
                ["properties"];
            assert_eq!(spec["resource"], v.resource_schema, "{}", v.name);
            assert!(spec["credentialsRef"].is_object(), "{}", v.name);
            assert_eq!(
                crd["spec"]["versions"][i]["subresources"],
                json!({"status": {}}),
                "{}",
                v.name
            );
        }
    }

    #[test]
    fn a_multi_version_crd_converts_by_the_webhook_with_its_client_config_and_ca_bundle() {
        let webhook = service_webhook();
        let crd = crd_with(&two_versions(), Some(&webhook));
        assert_eq!(
            crd["spec"]["conversion"],
            json!({
                "strategy": "Webhook",
                "webhook": {
                    "conversionReviewVersions": ["v1"],
                    "clientConfig": {
                        "service": {"namespace": "orchard", "name": "orchard-webhook",
                                    "port": 443, "path": "/convert"},
                        "caBundle": "LS0tLS1CRUdJTi…"
                    }
                }
            })
        );
        let url = Webhook {
            client_config: json!({"url": "https://127.0.0.1:9443/convert", "caBundle": "Q0E="}),
        };
        assert_eq!(
            crd_with(&two_versions(), Some(&url))["spec"]["conversion"]["webhook"]["clientConfig"],
            url.client_config
        );
    }

    #[test]
    fn a_multi_version_crd_built_without_a_webhook_says_strategy_none() {
        let crd = crd_with(&two_versions(), None);
        assert_eq!(crd["spec"]["conversion"], json!({"strategy": "None"}));
    }

    /// An apiserver that answers nothing: it counts the requests it gets, each fails.
    #[derive(Clone, Default)]
    struct NoApiserver(Arc<AtomicUsize>);

    impl tower::Service<http::Request<kube::client::Body>> for NoApiserver {
        type Response = http::Response<http_body_util::Full<bytes::Bytes>>;
        type Error = std::io::Error;
        type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: http::Request<kube::client::Body>) -> Self::Future {
            self.0.fetch_add(1, Ordering::SeqCst);
            std::future::ready(Err(std::io::Error::other("no apiserver in a unit test")))
        }
    }

    #[tokio::test]
    async fn a_multi_version_kind_without_a_webhook_is_refused_before_the_apiserver_is_asked() {
        let apiserver = NoApiserver::default();
        let client = kube::Client::new(apiserver.clone(), "default");
        for installs in [true, false] {
            let refused = ensure(&client, &two_versions(), installs, None).await;
            match refused {
                Err(InstallError::NoWebhook { name, versions }) => {
                    assert_eq!(name, "dnszones.pdns.orchard.dev");
                    assert_eq!(versions, "v1alpha1, v1beta1");
                }
                other => panic!("install={installs}: {other:?}"),
            }
        }
        assert_eq!(apiserver.0.load(Ordering::SeqCst), 0);
        let text = install(&client, &two_versions(), None)
            .await
            .unwrap_err()
            .to_string();
        assert_eq!(
            text,
            "CRD dnszones.pdns.orchard.dev lists versions v1alpha1, v1beta1, converted by the plugin: this host must serve the conversion webhook (--conversion-webhook-addr)"
        );
    }

    #[tokio::test]
    async fn a_multi_version_kind_with_a_webhook_or_a_one_version_kind_goes_on_to_the_apiserver() {
        for (d, webhook) in [
            (two_versions(), Some(service_webhook())),
            (one_version(), None),
        ] {
            let apiserver = NoApiserver::default();
            let client = kube::Client::new(apiserver.clone(), "default");
            let result = install(&client, &d, webhook.as_ref()).await;
            assert!(
                matches!(result, Err(InstallError::Apply { .. })),
                "{}: {result:?}",
                d.versions.len()
            );
            assert!(apiserver.0.load(Ordering::SeqCst) > 0);
        }
    }
}
