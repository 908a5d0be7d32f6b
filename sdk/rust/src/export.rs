//! The glue between the generated bindings and [`Raw`]: one `Guest` implementation for every
//! [`Actuator`]. Used through [`crate::export_actuator!`].

use std::marker::PhantomData;
use std::time::Duration;

use crate::actuator::{Actuator, Raw};
use crate::bindings::exports::orchard::actuator::actuator::Guest;
use crate::bindings::exports::orchard::actuator::conversion as wit_conversion;
use crate::bindings::exports::orchard::shortcuts::shortcuts as wit_shortcuts;
use crate::bindings::orchard::actuator::types as wit;
use crate::types::{
    Availability, Convertible, Dependency, Description, Failure, Object, Progress, Resource,
    Status, WaitEvent,
};

/// Implements the exported interface for `A`.
pub struct Exported<A>(PhantomData<A>);

fn raw<A: Actuator>() -> Raw<A> {
    Raw(A::default())
}

impl<A: Actuator> Guest for Exported<A> {
    fn describe() -> wit::Description {
        description(raw::<A>().describe())
    }

    fn get_by_id(
        obj: wit::ManagedObject,
        id: String,
    ) -> Result<Option<wit::ExternalResource>, wit::Failure> {
        raw::<A>()
            .get_by_id(object(obj), &id)
            .map(|r| r.map(external))
            .map_err(failure)
    }

    fn list_for_adoption(
        obj: wit::ManagedObject,
    ) -> Result<Option<Vec<wit::ExternalResource>>, wit::Failure> {
        raw::<A>()
            .list_for_adoption(object(obj))
            .map(|l| l.map(|l| l.into_iter().map(external).collect()))
            .map_err(failure)
    }

    fn list_for_import(
        obj: wit::ManagedObject,
        filter: String,
    ) -> Result<Vec<wit::ExternalResource>, wit::Failure> {
        raw::<A>()
            .list_for_import(object(obj), &filter)
            .map(|l| l.into_iter().map(external).collect())
            .map_err(failure)
    }

    fn create(obj: wit::ManagedObject) -> Result<wit::ExternalResource, wit::Status> {
        raw::<A>().create(object(obj)).map(external).map_err(status)
    }

    fn delete(obj: wit::ManagedObject, res: wit::ExternalResource) -> wit::Status {
        status(raw::<A>().delete(object(obj), &resource(res)))
    }

    fn reconcilers(
        obj: wit::ManagedObject,
        res: wit::ExternalResource,
    ) -> Result<Vec<String>, wit::Failure> {
        raw::<A>()
            .reconcilers(object(obj), &resource(res))
            .map_err(failure)
    }

    fn run_reconciler(
        name: String,
        obj: wit::ManagedObject,
        res: wit::ExternalResource,
    ) -> wit::Status {
        status(raw::<A>().run_reconciler(&name, object(obj), &resource(res)))
    }

    fn available(
        obj: wit::ManagedObject,
        res: wit::ExternalResource,
    ) -> (wit::Availability, wit::Status) {
        let (a, s) = raw::<A>().available(object(obj), &resource(res));
        let a = match a {
            Availability::Available => wit::Availability::Available,
            Availability::Unavailable => wit::Availability::Unavailable,
            Availability::Unknown => wit::Availability::Unknown,
        };
        (a, status(s))
    }

    fn observed(res: wit::ExternalResource) -> String {
        raw::<A>().observed(&resource(res))
    }
}

impl<A: Actuator> wit_shortcuts::Guest for Exported<A> {
    fn shortcuts() -> wit_shortcuts::Shortcut {
        let declared = raw::<A>().0.shortcuts();
        let mut flags = wit_shortcuts::Shortcut::empty();
        if declared.create_refuses_duplicates {
            flags |= wit_shortcuts::Shortcut::CREATE_REFUSES_DUPLICATES;
        }
        if declared.delete_is_synchronous {
            flags |= wit_shortcuts::Shortcut::DELETE_IS_SYNCHRONOUS;
        }
        if declared.delete_by_id {
            flags |= wit_shortcuts::Shortcut::DELETE_BY_ID;
        }
        flags
    }
}

impl<A: Actuator> wit_conversion::Guest for Exported<A> {
    fn versions() -> Vec<wit_conversion::ApiVersion> {
        raw::<A>()
            .0
            .versions()
            .into_iter()
            .map(|v| wit_conversion::ApiVersion {
                name: v.name,
                resource_schema: v.resource_schema,
                filter_schema: v.filter_schema,
                observed_schema: v.observed_schema,
                storage: v.storage,
            })
            .collect()
    }

    fn convert(
        obj: wit_conversion::Convertible,
        from: String,
        to: String,
    ) -> Result<wit_conversion::Convertible, wit::Failure> {
        let parse = |what: &str, text: Option<String>| {
            text.map(|t| {
                serde_json::from_str(&t).map_err(|e| {
                    Failure::invalid(format!("{what} at version {from} is not JSON: {e}"))
                })
            })
            .transpose()
        };
        let input = (|| {
            Ok(Convertible {
                resource: parse("spec.resource", obj.resource)?,
                filter: parse("spec.import.filter", obj.filter)?,
                observed: parse("status.resource", obj.observed)?,
                annotations: obj.annotations.into_iter().collect(),
            })
        })();
        let out = input
            .and_then(|c| raw::<A>().0.convert(c, &from, &to))
            .map_err(failure)?;
        let text = |v: Option<serde_json::Value>| v.map(|v| v.to_string());
        Ok(wit_conversion::Convertible {
            resource: text(out.resource),
            filter: text(out.filter),
            observed: text(out.observed),
            annotations: out.annotations.into_iter().collect(),
        })
    }
}

fn object(o: wit::ManagedObject) -> Object {
    Object {
        name: o.name,
        namespace: o.namespace,
        uid: o.uid,
        generation: o.generation,
        labels: o.labels.into_iter().collect(),
        annotations: o.annotations.into_iter().collect(),
        spec: o.spec,
        status_id: o.status_id,
        dependencies: o
            .dependencies
            .into_iter()
            .map(|d| Dependency {
                name: d.name,
                kind: d.kind,
                object: d.object,
                id: d.id,
                observed: d.observed,
            })
            .collect(),
        credentials: o.credentials.into_iter().collect(),
    }
}

fn resource(r: wit::ExternalResource) -> Resource {
    Resource {
        id: r.id,
        state: r.state,
    }
}

fn external(r: Resource) -> wit::ExternalResource {
    wit::ExternalResource {
        id: r.id,
        state: r.state,
    }
}

fn failure(f: Failure) -> wit::Failure {
    match f {
        Failure::Transient(m) => wit::Failure::Transient(m),
        Failure::InvalidConfiguration(m) => wit::Failure::InvalidConfiguration(m),
        Failure::Unrecoverable(m) => wit::Failure::Unrecoverable(m),
    }
}

fn event(e: WaitEvent) -> wit::WaitEvent {
    match e {
        WaitEvent::Creation => wit::WaitEvent::Creation,
        WaitEvent::Ready => wit::WaitEvent::Ready,
        WaitEvent::Deletion => wit::WaitEvent::Deletion,
        WaitEvent::Update => wit::WaitEvent::Update,
    }
}

fn millis(d: Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX)
}

fn status(s: Status) -> wit::Status {
    wit::Status {
        progress: s
            .progress
            .into_iter()
            .map(|p| match p {
                Progress::WaitingOnExternal {
                    event: e,
                    message,
                    poll_after,
                } => wit::Progress::WaitingOnExternal(wit::ExternalWait {
                    event: event(e),
                    message,
                    poll_after_ms: millis(poll_after),
                }),
                Progress::WaitingOnObject {
                    kind,
                    name,
                    event: e,
                } => wit::Progress::WaitingOnObject(wit::ObjectWait {
                    target: wit::ObjectRef { kind, name },
                    event: event(e),
                }),
                Progress::NeedsRefresh(m) => wit::Progress::NeedsRefresh(m),
            })
            .collect(),
        failure: s.failure.map(failure),
    }
}

fn description(d: Description) -> wit::Description {
    wit::Description {
        name: d.name,
        group: d.group,
        version: d.version,
        kind: d.kind,
        plural: d.plural,
        resource_schema: d.resource_schema,
        filter_schema: d.filter_schema,
        observed_schema: d.observed_schema,
        dependencies: d
            .dependencies
            .into_iter()
            .map(|d| wit::DependencyDecl {
                name: d.name,
                field: d.field,
                kind: d.kind,
                for_create: d.for_create,
                for_delete: d.for_delete,
                guard_deletion: d.guard_deletion,
            })
            .collect(),
        needs_credentials: d.needs_credentials,
    }
}
