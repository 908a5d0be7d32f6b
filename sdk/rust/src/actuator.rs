//! The typed actuator trait a plugin implements, and [`Raw`], its JSON-text face.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::types::{Availability, Description, Failure, Object, Resource, Status};

/// An actuator: everything specific to one kind of external resource.
///
/// The contract of each method is the one written in `wit/actuator.wit`; in short:
/// every method MUST be idempotent; `create` MUST NOT do anything fallible after the primary
/// resource exists; `get_by_id` returns `Ok(None)` when the resource is gone;
/// `list_for_adoption` returns `Ok(None)` where adoption does not apply; `delete` SHOULD NOT
/// fail when the resource is already gone.
///
/// A value is made with `Default` for every call: keep no state in it.
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

    /// Creates the primary resource. Nothing fallible after it exists.
    fn create(&self, obj: &Object<Self::Spec>) -> Result<Resource<Self::State>, Status>;

    /// Deletes the resource; done when it is already gone.
    fn delete(&self, obj: &Object<Self::Spec>, res: &Resource<Self::State>) -> Status;

    /// Names of the post-create steps, in order.
    fn reconcilers(
        &self,
        _obj: &Object<Self::Spec>,
        _res: &Resource<Self::State>,
    ) -> Result<Vec<String>, Failure> {
        Ok(Vec::new())
    }

    /// Runs the post-create step `name`.
    fn run_reconciler(
        &self,
        name: &str,
        _obj: &Object<Self::Spec>,
        _res: &Resource<Self::State>,
    ) -> Status {
        Failure::unrecoverable(format!("no reconciler named {name:?}")).into()
    }

    /// Whether the resource is ready; available by default.
    fn available(
        &self,
        _obj: &Object<Self::Spec>,
        _res: &Resource<Self::State>,
    ) -> (Availability, Status) {
        (Availability::Available, Status::done())
    }

    /// `status.resource`; the state itself by default.
    fn observed(&self, res: &Resource<Self::State>) -> Result<serde_json::Value, Failure> {
        Ok(serde_json::to_value(&res.state)?)
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

    /// `delete`.
    pub fn delete(&self, obj: Object, res: &Resource) -> Status {
        let typed = || -> Result<Status, Failure> {
            let obj = obj.parse::<A::Spec>()?;
            Ok(self.0.delete(&obj, &typed_resource::<A>(res)?))
        };
        typed().into()
    }

    /// `reconcilers`.
    pub fn reconcilers(&self, obj: Object, res: &Resource) -> Result<Vec<String>, Failure> {
        let obj = obj.parse::<A::Spec>()?;
        self.0.reconcilers(&obj, &typed_resource::<A>(res)?)
    }

    /// `run-reconciler`.
    pub fn run_reconciler(&self, name: &str, obj: Object, res: &Resource) -> Status {
        let typed = || -> Result<Status, Failure> {
            let obj = obj.parse::<A::Spec>()?;
            Ok(self
                .0
                .run_reconciler(name, &obj, &typed_resource::<A>(res)?))
        };
        typed().into()
    }

    /// `available`.
    pub fn available(&self, obj: Object, res: &Resource) -> (Availability, Status) {
        let typed = || -> Result<(Availability, Status), Failure> {
            let obj = obj.parse::<A::Spec>()?;
            Ok(self.0.available(&obj, &typed_resource::<A>(res)?))
        };
        typed().unwrap_or_else(|f| (Availability::Unknown, f.into()))
    }

    /// `observed`: JSON text. A state that cannot be read gives `null`, which the host shows
    /// as an empty `status.resource`.
    pub fn observed(&self, res: &Resource) -> String {
        typed_resource::<A>(res)
            .and_then(|r| self.0.observed(&r))
            .map_or_else(|_| "null".to_owned(), |v| v.to_string())
    }
}
