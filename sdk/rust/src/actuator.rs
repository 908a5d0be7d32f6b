//! The typed actuator trait a plugin implements, and [`Raw`], its JSON-text face.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::types::{
    ApiVersion, Availability, Convertible, Description, Failure, Object, Resource, Shortcuts,
    Status,
};

/// An actuator: everything specific to one kind of external resource.
///
/// The contract of each method is the one written in `wit/actuator.wit`; in short:
/// every method MUST be idempotent; `create` MUST NOT do anything fallible after the primary
/// resource exists; `get_by_id` returns `Ok(None)` when the resource is gone;
/// `list_for_adoption` returns `Ok(None)` where adoption does not apply; `delete` SHOULD NOT
/// fail when the resource is already gone.
///
/// A value is made with `Default` for every call: keep no state in it.
///
/// Every method that can fail returns a `Result` whose error a [`Failure`] converts into, so
/// `?` works on any `Result<_, Failure>` (and on `serde_json` errors) in every method:
/// `Failure` for most, [`Status`] for `create` (which may also create nothing yet and report
/// progress: `Err(Status::waiting_on_external(…))`). The steps that report progress
/// (`delete`, `run_reconciler`, `available`) return `Ok(status)`; an `Err(failure)` from them
/// reaches the host exactly as a status carrying that failure (and `Availability::Unknown`
/// for `available`).
pub trait Actuator: Default {
    /// `spec.resource`.
    type Spec: DeserializeOwned;
    /// `spec.import.filter`.
    type Filter: DeserializeOwned;
    /// What the plugin remembers of an external resource (passed back on every call).
    type State: Serialize + DeserializeOwned;

    /// The managed kind and its schemas.
    fn describe(&self) -> Description;

    /// Fetches the resource with this id; `Ok(None)` when it does not exist.
    fn get_by_id(
        &self,
        obj: &Object<Self::Spec>,
        id: &str,
    ) -> Result<Option<Resource<Self::State>>, Failure>;

    /// Resources this object would have created; `Ok(None)` where adoption does not apply.
    fn list_for_adoption(
        &self,
        _obj: &Object<Self::Spec>,
    ) -> Result<Option<Vec<Resource<Self::State>>>, Failure> {
        Ok(None)
    }

    /// Resources matching an import filter, matched exactly.
    fn list_for_import(
        &self,
        _obj: &Object<Self::Spec>,
        _filter: &Self::Filter,
    ) -> Result<Vec<Resource<Self::State>>, Failure> {
        Err(Failure::invalid(
            "this plugin does not support import by filter",
        ))
    }

    /// Creates the primary resource. Nothing fallible after it exists. `Err` with a status
    /// that has progress creates nothing yet (the host calls again); `?` on a [`Failure`]
    /// makes a status carrying it.
    fn create(&self, obj: &Object<Self::Spec>) -> Result<Resource<Self::State>, Status>;

    /// Deletes the resource; done when it is already gone.
    fn delete(
        &self,
        obj: &Object<Self::Spec>,
        res: &Resource<Self::State>,
    ) -> Result<Status, Failure>;

    /// Deletes the resource with this id, which nobody read first; done when no resource has
    /// it. Called instead of [`Actuator::delete`] when the host deletes by id: a plugin that
    /// declares [`Shortcuts::delete_by_id`] MUST implement it (the default answers an
    /// unrecoverable failure naming what is missing).
    fn delete_by_id(&self, _obj: &Object<Self::Spec>, id: &str) -> Result<Status, Failure> {
        Err(Failure::unrecoverable(format!(
            "this plugin declares the delete-by-id shortcut but does not implement Actuator::delete_by_id (asked to delete {id})"
        )))
    }

    /// Names of the post-create steps, in order.
    fn reconcilers(
        &self,
        _obj: &Object<Self::Spec>,
        _res: &Resource<Self::State>,
    ) -> Result<Vec<String>, Failure> {
        Ok(Vec::new())
    }

    /// Runs the post-create step `name`; `Ok(Status::needs_refresh(…))` after a change.
    fn run_reconciler(
        &self,
        name: &str,
        _obj: &Object<Self::Spec>,
        _res: &Resource<Self::State>,
    ) -> Result<Status, Failure> {
        Err(Failure::unrecoverable(format!(
            "no reconciler named {name:?}"
        )))
    }

    /// Whether the resource is ready; available by default. An `Err` is
    /// `Availability::Unknown` with that failure.
    fn available(
        &self,
        _obj: &Object<Self::Spec>,
        _res: &Resource<Self::State>,
    ) -> Result<(Availability, Status), Failure> {
        Ok((Availability::Available, Status::done()))
    }

    /// `status.resource`; the state itself by default.
    fn observed(&self, res: &Resource<Self::State>) -> Result<serde_json::Value, Failure> {
        Ok(serde_json::to_value(&res.state)?)
    }

    /// The calls this plugin's external system lets the host skip. MUST be pure. Default:
    /// none — the generic flow, safe on any system.
    fn shortcuts(&self) -> Shortcuts {
        Shortcuts::default()
    }

    /// Every API version of the kind, oldest first, when it has several; one of them is
    /// `describe().version` (the version every other method sees) with the same schemas.
    /// MUST be pure. Default: none — the kind has one version.
    fn versions(&self) -> Vec<ApiVersion> {
        Vec::new()
    }

    /// Converts `obj` from version `from` to version `to`. MUST preserve every field (a round
    /// trip gives `obj` back: keep what `to` cannot hold in an annotation) and MUST NOT do I/O
    /// (the host denies every request). Default: refuses (one version).
    fn convert(&self, _obj: Convertible, from: &str, to: &str) -> Result<Convertible, Failure> {
        Err(Failure::unrecoverable(format!(
            "this plugin serves one API version (asked to convert {from} to {to})"
        )))
    }
}

/// The actuator contract over JSON text, exactly as it crosses the Wasm boundary.
///
/// The export macro calls it from the generated bindings; a native host calls it directly,
/// so that both pay the same parsing and serialising cost.
pub struct Raw<A>(pub A);

fn typed_resource<A: Actuator>(res: &Resource) -> Result<Resource<A::State>, Failure> {
    res.parse()
}

impl<A: Actuator> Raw<A> {
    /// `describe`.
    pub fn describe(&self) -> Description {
        self.0.describe()
    }

    /// `get-by-id`.
    pub fn get_by_id(&self, obj: Object, id: &str) -> Result<Option<Resource>, Failure> {
        let obj = obj.parse::<A::Spec>()?;
        self.0
            .get_by_id(&obj, id)?
            .as_ref()
            .map(Resource::to_raw)
            .transpose()
    }

    /// `list-for-adoption`.
    pub fn list_for_adoption(&self, obj: Object) -> Result<Option<Vec<Resource>>, Failure> {
        let obj = obj.parse::<A::Spec>()?;
        match self.0.list_for_adoption(&obj)? {
            None => Ok(None),
            Some(list) => Ok(Some(
                list.iter()
                    .map(Resource::to_raw)
                    .collect::<Result<_, _>>()?,
            )),
        }
    }

    /// `list-for-import`.
    pub fn list_for_import(&self, obj: Object, filter: &str) -> Result<Vec<Resource>, Failure> {
        let obj = obj.parse::<A::Spec>()?;
        let filter: A::Filter = serde_json::from_str(filter)
            .map_err(|e| Failure::invalid(format!("spec.import.filter of {}: {e}", obj.name)))?;
        self.0
            .list_for_import(&obj, &filter)?
            .iter()
            .map(Resource::to_raw)
            .collect()
    }

    /// `create`.
    pub fn create(&self, obj: Object) -> Result<Resource, Status> {
        let obj = obj.parse::<A::Spec>()?;
        Ok(self.0.create(&obj)?.to_raw()?)
    }

    /// `delete`: by id when the plugin declares it and the host sent no state (JSON `null`).
    pub fn delete(&self, obj: Object, res: &Resource) -> Status {
        let obj = match obj.parse::<A::Spec>() {
            Ok(obj) => obj,
            Err(f) => return f.into(),
        };
        if res.state.trim() == "null" && self.0.shortcuts().delete_by_id {
            return self
                .0
                .delete_by_id(&obj, &res.id)
                .unwrap_or_else(Status::from);
        }
        typed_resource::<A>(res)
            .and_then(|res| self.0.delete(&obj, &res))
            .unwrap_or_else(Status::from)
    }

    /// `reconcilers`.
    pub fn reconcilers(&self, obj: Object, res: &Resource) -> Result<Vec<String>, Failure> {
        let obj = obj.parse::<A::Spec>()?;
        self.0.reconcilers(&obj, &typed_resource::<A>(res)?)
    }

    /// `run-reconciler`.
    pub fn run_reconciler(&self, name: &str, obj: Object, res: &Resource) -> Status {
        let obj = match obj.parse::<A::Spec>() {
            Ok(obj) => obj,
            Err(f) => return f.into(),
        };
        typed_resource::<A>(res)
            .and_then(|res| self.0.run_reconciler(name, &obj, &res))
            .unwrap_or_else(Status::from)
    }

    /// `available`.
    pub fn available(&self, obj: Object, res: &Resource) -> (Availability, Status) {
        obj.parse::<A::Spec>()
            .and_then(|obj| self.0.available(&obj, &typed_resource::<A>(res)?))
            .unwrap_or_else(|f| (Availability::Unknown, f.into()))
    }

    /// `observed`: JSON text. A state that cannot be read gives `null`, which the host shows
    /// as an empty `status.resource`.
    pub fn observed(&self, res: &Resource) -> String {
        typed_resource::<A>(res)
            .and_then(|r| self.0.observed(&r))
            .map_or_else(|_| "null".to_owned(), |v| v.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{DependencyDecl, WaitEvent};
    use serde::Deserialize;
    use std::time::Duration;

    #[derive(Deserialize)]
    struct Spec {
        name: String,
        #[serde(default)]
        size: u32,
    }

    /// Every method uses `?` on the object's helpers: no closure, no `.into()`.
    #[derive(Default)]
    struct Thing;

    impl Actuator for Thing {
        type Spec = Spec;
        type Filter = ();
        type State = u32;

        fn describe(&self) -> Description {
            Description {
                name: "thing".into(),
                dependencies: vec![DependencyDecl::guarded("parent", "parentRef", "Parent")],
                ..Description::default()
            }
        }

        fn get_by_id(
            &self,
            obj: &Object<Spec>,
            id: &str,
        ) -> Result<Option<Resource<u32>>, Failure> {
            obj.dependency_id("parent")?;
            Ok((id != "gone").then(|| Resource::new(id, obj.spec().map_or(0, |s| s.size))))
        }

        fn create(&self, obj: &Object<Spec>) -> Result<Resource<u32>, Status> {
            let spec = obj.spec()?;
            if spec.name == "later" {
                return Err(Status::waiting_on_external(
                    WaitEvent::Ready,
                    "not yet",
                    Duration::from_millis(1500),
                ));
            }
            obj.credential("key")?;
            Ok(Resource::new(spec.name.clone(), spec.size))
        }

        fn delete(&self, obj: &Object<Spec>, _: &Resource<u32>) -> Result<Status, Failure> {
            obj.credential("key")?;
            Ok(Status::done())
        }

        fn run_reconciler(
            &self,
            name: &str,
            obj: &Object<Spec>,
            res: &Resource<u32>,
        ) -> Result<Status, Failure> {
            if name != "size" {
                return Err(Failure::unrecoverable(format!(
                    "no reconciler named {name:?}"
                )));
            }
            let spec = obj.spec()?;
            Ok(if spec.size == res.state {
                Status::done()
            } else {
                Status::needs_refresh("size updated")
            })
        }

        fn available(
            &self,
            obj: &Object<Spec>,
            res: &Resource<u32>,
        ) -> Result<(Availability, Status), Failure> {
            obj.dependency_id("parent")?;
            Ok(if res.state > 0 {
                (Availability::Available, Status::done())
            } else {
                (
                    Availability::Unavailable,
                    Status::waiting_on_object("Parent", "p", WaitEvent::Ready),
                )
            })
        }
    }

    fn complete(spec: &serde_json::Value) -> Object {
        Object::new("o")
            .with_spec(spec.to_string())
            .with_dependency(crate::Dependency::new("parent", "Parent", "p").with_id("p-1"))
            .with_credential("key", "s3cret")
    }

    fn raw_res(state: u32) -> Resource {
        Resource::new("r", state.to_string())
    }

    #[test]
    fn typed_methods_called_directly_take_builder_objects() {
        let obj = Object::new("o")
            .with_spec(Spec {
                name: "a".into(),
                size: 2,
            })
            .with_credential("key", "k");
        assert_eq!(Thing.create(&obj), Ok(Resource::new("a", 2)));
        assert_eq!(
            Thing.run_reconciler("size", &obj, &Resource::new("a", 1)),
            Ok(Status::needs_refresh("size updated"))
        );
        assert_eq!(
            Thing.run_reconciler("size", &obj, &Resource::new("a", 2)),
            Ok(Status::done())
        );
        let imported = Object::<Spec>::default();
        assert_eq!(
            Thing.create(&imported),
            Err(Failure::invalid("spec.resource is required").into())
        );
    }

    #[test]
    fn create_gives_a_resource_progress_or_a_failure_status() {
        let raw = Raw(Thing);
        let created = raw.create(complete(&serde_json::json!({"name": "a", "size": 2})));
        assert_eq!(created, Ok(Resource::new("a", "2".to_owned())));
        let later = raw.create(complete(&serde_json::json!({"name": "later"})));
        assert_eq!(
            later,
            Err(Status::waiting_on_external(
                WaitEvent::Ready,
                "not yet",
                Duration::from_millis(1500)
            ))
        );
        let no_key = Object::new("o").with_spec(r#"{"name":"a"}"#.to_owned());
        assert_eq!(
            raw.create(no_key),
            Err(Failure::invalid(r#"credentials Secret has no key "key""#).into())
        );
    }

    #[test]
    fn a_failure_from_a_status_step_is_a_status_carrying_it() {
        let raw = Raw(Thing);
        let spec = serde_json::json!({"name": "a", "size": 2});
        assert!(raw.delete(complete(&spec), &raw_res(2)).is_done());
        let no_key = Object::new("o").with_spec(spec.to_string());
        assert_eq!(
            raw.delete(no_key, &raw_res(2)),
            Status {
                progress: vec![],
                failure: Some(Failure::invalid(r#"credentials Secret has no key "key""#)),
            }
        );
        assert_eq!(
            raw.run_reconciler("size", complete(&spec), &raw_res(1)),
            Status::needs_refresh("size updated")
        );
        assert_eq!(
            raw.run_reconciler("nope", complete(&spec), &raw_res(1)),
            Failure::unrecoverable(r#"no reconciler named "nope""#).into()
        );
        assert_eq!(
            raw.run_reconciler("size", complete(&spec), &Resource::new("r", "x".to_owned())),
            Failure::transient("state of external resource r: expected value at line 1 column 1")
                .into()
        );
    }

    #[test]
    fn a_failure_from_available_is_unknown_with_that_failure() {
        let raw = Raw(Thing);
        let spec = serde_json::json!({"name": "a"});
        assert_eq!(
            raw.available(complete(&spec), &raw_res(1)),
            (Availability::Available, Status::done())
        );
        assert_eq!(
            raw.available(complete(&spec), &raw_res(0)),
            (
                Availability::Unavailable,
                Status::waiting_on_object("Parent", "p", WaitEvent::Ready)
            )
        );
        let orphan = Object::new("o").with_spec(spec.to_string());
        assert_eq!(
            raw.available(orphan, &raw_res(1)),
            (
                Availability::Unknown,
                Failure::transient("dependency parent was not resolved").into()
            )
        );
    }

    #[test]
    fn a_spec_that_does_not_parse_is_an_invalid_configuration_everywhere() {
        let raw = Raw(Thing);
        let bad = || Object::new("o").with_spec(r#"{"size": 1}"#.to_owned());
        let want = Failure::invalid("spec.resource of o: missing field `name` at line 1 column 11");
        assert_eq!(raw.get_by_id(bad(), "x"), Err(want.clone()));
        assert_eq!(raw.create(bad()), Err(want.clone().into()));
        assert_eq!(raw.delete(bad(), &raw_res(1)), want.clone().into());
        assert_eq!(
            raw.run_reconciler("size", bad(), &raw_res(1)),
            want.clone().into()
        );
        assert_eq!(
            raw.available(bad(), &raw_res(1)),
            (Availability::Unknown, want.into())
        );
    }

    /// Deletes by id: remembers what it was asked, so a test sees which method ran.
    #[derive(Default)]
    struct ByName {
        deleted: std::cell::RefCell<Vec<String>>,
    }

    impl Actuator for ByName {
        type Spec = Spec;
        type Filter = ();
        type State = u32;

        fn describe(&self) -> Description {
            Description::default()
        }

        fn get_by_id(&self, _: &Object<Spec>, _: &str) -> Result<Option<Resource<u32>>, Failure> {
            Ok(None)
        }

        fn create(&self, _: &Object<Spec>) -> Result<Resource<u32>, Status> {
            Ok(Resource::new("a", 1))
        }

        fn delete(&self, _: &Object<Spec>, res: &Resource<u32>) -> Result<Status, Failure> {
            self.deleted
                .borrow_mut()
                .push(format!("delete {} {}", res.id, res.state));
            Ok(Status::done())
        }

        fn delete_by_id(&self, _: &Object<Spec>, id: &str) -> Result<Status, Failure> {
            self.deleted.borrow_mut().push(format!("delete_by_id {id}"));
            Ok(Status::done())
        }

        fn shortcuts(&self) -> Shortcuts {
            Shortcuts {
                delete_by_id: true,
                ..Shortcuts::default()
            }
        }
    }

    #[test]
    fn a_delete_without_state_goes_to_delete_by_id_when_the_plugin_declares_it() {
        let raw = Raw(ByName::default());
        let obj = || Object::new("o").with_spec(r#"{"name":"a"}"#.to_owned());
        assert!(
            raw.delete(obj(), &Resource::new("a.", "null".to_owned()))
                .is_done()
        );
        // A resource the host read (adopted, say) still goes to `delete`, typed.
        assert!(raw.delete(obj(), &raw_res(3)).is_done());
        assert_eq!(
            *raw.0.deleted.borrow(),
            ["delete_by_id a.", "delete r 3"],
            "which method ran"
        );
    }

    #[test]
    fn a_plugin_that_does_not_declare_delete_by_id_reads_a_null_state_as_its_own() {
        // Thing's state is a number: a null one is a state it cannot read, as before.
        let raw = Raw(Thing);
        let spec = serde_json::json!({"name": "a", "size": 2});
        let status = raw.delete(complete(&spec), &Resource::new("r", "null".to_owned()));
        assert!(status.failure.is_some(), "{status:?}");
        // And the default delete_by_id names what is missing.
        let obj = Object::new("o").with_spec(Spec {
            name: "a".into(),
            size: 1,
        });
        let Err(f) = Thing.delete_by_id(&obj, "r") else {
            panic!("the default delete_by_id fails");
        };
        assert!(
            f.to_string()
                .contains("does not implement Actuator::delete_by_id"),
            "{f}"
        );
    }
}
