use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{Registry, review};
use crate::actuator::{
    Actuator, ApiVersion, Availability, CallError, CallResult, Convertible, Description,
    ExternalResource, Failure, ManagedObject, Status,
};

/// Converts v1 `{host}` ⇄ v2 `{hosts: [host]}`; refuses a resource named "refused"; traps
/// on one named "trap".
struct Hosts;

#[async_trait]
impl Actuator for Hosts {
    fn name(&self) -> &'static str {
        "hosts"
    }
    async fn describe(&self) -> CallResult<Description> {
        Ok(description())
    }
    async fn get_by_id(
        &self,
        _: &ManagedObject,
        _: &str,
    ) -> CallResult<Result<Option<ExternalResource>, Failure>> {
        unreachable!("conversion calls convert only")
    }
    async fn list_for_adoption(
        &self,
        _: &ManagedObject,
    ) -> CallResult<Result<Option<Vec<ExternalResource>>, Failure>> {
        unreachable!()
    }
    async fn list_for_import(
        &self,
        _: &ManagedObject,
        _: &Value,
    ) -> CallResult<Result<Vec<ExternalResource>, Failure>> {
        unreachable!()
    }
    async fn create(&self, _: &ManagedObject) -> CallResult<Result<ExternalResource, Status>> {
        unreachable!()
    }
    async fn delete(&self, _: &ManagedObject, _: &ExternalResource) -> CallResult<Status> {
        unreachable!()
    }
    async fn reconcilers(
        &self,
        _: &ManagedObject,
        _: &ExternalResource,
    ) -> CallResult<Result<Vec<String>, Failure>> {
        unreachable!()
    }
    async fn run_reconciler(
        &self,
        _: &str,
        _: &ManagedObject,
        _: &ExternalResource,
    ) -> CallResult<Status> {
        unreachable!()
    }
    async fn available(
        &self,
        _: &ManagedObject,
        _: &ExternalResource,
    ) -> CallResult<(Availability, Status)> {
        unreachable!()
    }
    async fn observed(&self, _: &ExternalResource) -> CallResult<Value> {
        unreachable!()
    }
    async fn convert(
        &self,
        obj: &Convertible,
        from: &str,
        to: &str,
    ) -> CallResult<Result<Convertible, Failure>> {
        let r = obj.resource.clone().unwrap_or(json!({}));
        if r["host"] == "trap" || r["hosts"][0] == "trap" {
            return Err(CallError::Trap {
                plugin: "hosts".into(),
                function: "convert",
                message: "unreachable executed".into(),
            });
        }
        if r["host"] == "refused" {
            return Ok(Err(Failure::InvalidConfiguration(
                "host refused is not convertible".into(),
            )));
        }
        let resource = match (from, to) {
            ("v1", "v2") => json!({"hosts": [r["host"]]}),
            ("v2", "v1") => json!({"host": r["hosts"][0]}),
            _ => return Ok(Err(Failure::Unrecoverable(format!("{from} to {to}")))),
        };
        let mut annotations = obj.annotations.clone();
        annotations.push(("hosts.orchard.dev/converted-from".into(), from.into()));
        annotations.push(("other.example/steal".into(), "no".into()));
        Ok(Ok(Convertible {
            resource: Some(resource),
            annotations,
            ..obj.clone()
        }))
    }
}

fn version(name: &str, storage: bool) -> ApiVersion {
    ApiVersion {
        name: name.into(),
        resource_schema: json!({"type": "object"}),
        filter_schema: None,
        observed_schema: json!({"type": "object"}),
        storage,
    }
}

fn description() -> Description {
    Description {
        name: "hosts".into(),
        group: "hosts.orchard.dev".into(),
        version: "v2".into(),
        kind: "Host".into(),
        plural: "hosts".into(),
        resource_schema: json!({"type": "object"}),
        filter_schema: None,
        observed_schema: json!({"type": "object"}),
        dependencies: vec![],
        needs_credentials: false,
        versions: vec![version("v1", true), version("v2", false)],
        shortcuts: crate::actuator::Shortcuts::default(),
    }
}

fn registry() -> Registry {
    let r = Registry::default();
    r.register(&description(), Arc::new(Hosts));
    r
}

fn host(name: &str, version: &str, resource: &Value) -> Value {
    json!({
        "apiVersion": format!("hosts.orchard.dev/{version}"),
        "kind": "Host",
        "metadata": {"name": name, "namespace": "ns", "uid": "u-1", "resourceVersion": "7",
                     "annotations": {"keep.example/me": "yes", "hosts.orchard.dev/stale": "x"}},
        "spec": {"managementPolicy": "managed", "resource": resource},
        "status": {"id": "id-1", "conditions": [{"type": "Available", "status": "True"}]}
    })
}

fn request(desired: &str, objects: &[Value]) -> Vec<u8> {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "review-1", "desiredAPIVersion": desired, "objects": objects}
    })
    .to_string()
    .into_bytes()
}

#[tokio::test]
async fn a_review_converts_each_object_and_keeps_the_envelope() {
    let body = request(
        "hosts.orchard.dev/v2",
        &[
            host("a", "v1", &json!({"host": "ns1"})),
            host("b", "v2", &json!({"hosts": ["ns2"]})),
        ],
    );
    let answer = review(&body, &registry()).await;
    let response = &answer["response"];
    assert_eq!(answer["kind"], "ConversionReview");
    assert_eq!(response["uid"], "review-1");
    assert_eq!(response["result"]["status"], "Success", "{answer}");
    let objects = response["convertedObjects"].as_array().unwrap();
    assert_eq!(objects.len(), 2);
    let a = &objects[0];
    assert_eq!(a["apiVersion"], "hosts.orchard.dev/v2");
    assert_eq!(a["spec"]["resource"], json!({"hosts": ["ns1"]}));
    // The envelope is the host's: metadata, the rest of spec and status as they were.
    let before = host("a", "v1", &json!({"host": "ns1"}));
    assert_eq!(a["metadata"]["uid"], before["metadata"]["uid"]);
    assert_eq!(a["metadata"]["resourceVersion"], "7");
    assert_eq!(a["spec"]["managementPolicy"], "managed");
    assert_eq!(a["status"], before["status"]);
    // Only annotations under the kind's group are the plugin's to write.
    assert_eq!(
        a["metadata"]["annotations"],
        json!({"keep.example/me": "yes", "hosts.orchard.dev/stale": "x", "hosts.orchard.dev/converted-from": "v1"})
    );
    // Already at the desired version: unchanged.
    assert_eq!(objects[1], host("b", "v2", &json!({"hosts": ["ns2"]})));
}

#[tokio::test]
async fn a_refused_conversion_fails_the_review_naming_the_plugin_the_object_and_the_failure() {
    let body = request(
        "hosts.orchard.dev/v2",
        &[
            host("a", "v1", &json!({"host": "ns1"})),
            host("bad", "v1", &json!({"host": "refused"})),
        ],
    );
    let answer = review(&body, &registry()).await;
    let result = &answer["response"]["result"];
    assert_eq!(result["status"], "Failed");
    assert_eq!(
        result["message"],
        "plugin hosts: converting Host ns/bad from v1 to v2: InvalidConfiguration failure: host refused is not convertible"
    );
    assert_eq!(answer["response"]["convertedObjects"], json!([]));
}

#[tokio::test]
async fn a_trapping_conversion_fails_the_review_with_the_trap_and_the_next_review_converts() {
    let registry = registry();
    let trap = review(
        &request(
            "hosts.orchard.dev/v1",
            &[host("t", "v2", &json!({"hosts": ["trap"]}))],
        ),
        &registry,
    )
    .await;
    let message = trap["response"]["result"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "plugin hosts: converting Host ns/t from v2 to v1: plugin hosts: convert trapped"
        ),
        "{message}"
    );
    let ok = review(
        &request(
            "hosts.orchard.dev/v1",
            &[host("a", "v2", &json!({"hosts": ["ns1"]}))],
        ),
        &registry,
    )
    .await;
    assert_eq!(ok["response"]["result"]["status"], "Success", "{ok}");
    assert_eq!(
        ok["response"]["convertedObjects"][0]["spec"]["resource"],
        json!({"host": "ns1"})
    );
}

#[tokio::test]
async fn a_kind_no_plugin_converts_and_a_body_that_is_no_review_fail_with_what_is_missing() {
    let mut other = host("a", "v1", &json!({}));
    other["kind"] = json!("Other");
    let answer = review(&request("hosts.orchard.dev/v2", &[other]), &registry()).await;
    assert_eq!(
        answer["response"]["result"]["message"],
        "ns/a: no plugin on this host converts kind Other of group hosts.orchard.dev"
    );
    let answer = review(b"{\"kind\": \"Pod\"}", &registry()).await;
    assert_eq!(answer["response"]["result"]["status"], "Failed");
    assert_eq!(
        answer["response"]["result"]["message"],
        "not a ConversionReview v1: no request"
    );
}

#[test]
fn a_kind_with_one_version_leaves_the_registry() {
    let r = registry();
    assert!(r.get("hosts.orchard.dev", "Host").is_some());
    let mut single = description();
    single.versions.clear();
    r.register(&single, Arc::new(Hosts));
    assert!(r.get("hosts.orchard.dev", "Host").is_none());
}

#[test]
fn a_generated_certificate_gives_a_ca_bundle_and_a_server_config() {
    let tls =
        super::server::Tls::generate(vec!["127.0.0.1".into(), "orchard.ns.svc".into()]).unwrap();
    assert!(!tls.ca_bundle().is_empty());
    assert!(format!("{tls:?}").starts_with("Tls"));
}
