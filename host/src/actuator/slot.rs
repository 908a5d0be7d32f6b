//! An actuator that can be replaced while it serves: the hot-swap point of plugins loaded from
//! a `Plugin` object.
//!
//! - A call MUST go to the version current when it starts, and MUST finish on that version
//!   even if a swap happens meanwhile (it holds its own `Arc`): no call is dropped.
//! - Calls that start after [`ActuatorSlot::swap`] returns MUST go to the new version.
//!
//! - A pass's view ([`Actuator::for_pass`]) MUST come from the version current when the pass
//!   starts; the whole pass then runs on that version (its instance holds it). The host sees
//!   the swap and runs another pass with the new version.
//!
//! An actuator without pass views serves each call of a pass from the version current at that
//! call, so a pass that spans a swap finishes on the new version.

use std::sync::{Arc, RwLock};

use async_trait::async_trait;

use super::{
    Actuator, Availability, CallResult, Description, ExternalResource, Failure, ManagedObject,
    Status,
};

/// A replaceable [`Actuator`].
pub struct ActuatorSlot {
    name: String,
    current: RwLock<Arc<dyn Actuator>>,
}

impl ActuatorSlot {
    /// A slot serving `actuator`.
    pub fn new(actuator: Arc<dyn Actuator>) -> Self {
        Self {
            name: actuator.name().to_owned(),
            current: RwLock::new(actuator),
        }
    }

    /// The version serving now.
    pub fn current(&self) -> Arc<dyn Actuator> {
        // A poisoned lock only means a panic elsewhere while swapping an Arc: the value is
        // still a whole Arc, so keep using it.
        Arc::clone(
            &self
                .current
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// Serves `actuator` from now on; returns the version it replaces.
    pub fn swap(&self, actuator: Arc<dyn Actuator>) -> Arc<dyn Actuator> {
        let mut current = self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        std::mem::replace(&mut *current, actuator)
    }
}

#[async_trait]
impl Actuator for ActuatorSlot {
    fn name(&self) -> &str {
        &self.name
    }
    fn for_pass(&self) -> Option<Box<dyn Actuator>> {
        self.current().for_pass()
    }
    fn take_reports(&self) -> crate::actuator::Reports {
        self.current().take_reports()
    }
    async fn describe(&self) -> CallResult<Description> {
        self.current().describe().await
    }
    async fn get_by_id(
        &self,
        obj: &ManagedObject,
        id: &str,
    ) -> CallResult<Result<Option<ExternalResource>, Failure>> {
        self.current().get_by_id(obj, id).await
    }
    async fn list_for_adoption(
        &self,
        obj: &ManagedObject,
    ) -> CallResult<Result<Option<Vec<ExternalResource>>, Failure>> {
        self.current().list_for_adoption(obj).await
    }
    async fn list_for_import(
        &self,
        obj: &ManagedObject,
        filter: &serde_json::Value,
    ) -> CallResult<Result<Vec<ExternalResource>, Failure>> {
        self.current().list_for_import(obj, filter).await
    }
    async fn create(&self, obj: &ManagedObject) -> CallResult<Result<ExternalResource, Status>> {
        self.current().create(obj).await
    }
    async fn delete(&self, obj: &ManagedObject, res: &ExternalResource) -> CallResult<Status> {
        self.current().delete(obj, res).await
    }
    async fn reconcilers(
        &self,
        obj: &ManagedObject,
        res: &ExternalResource,
    ) -> CallResult<Result<Vec<String>, Failure>> {
        self.current().reconcilers(obj, res).await
    }
    async fn run_reconciler(
        &self,
        name: &str,
        obj: &ManagedObject,
        res: &ExternalResource,
    ) -> CallResult<Status> {
        self.current().run_reconciler(name, obj, res).await
    }
    async fn available(
        &self,
        obj: &ManagedObject,
        res: &ExternalResource,
    ) -> CallResult<(Availability, Status)> {
        self.current().available(obj, res).await
    }
    async fn observed(&self, res: &ExternalResource) -> CallResult<serde_json::Value> {
        self.current().observed(res).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tokio::sync::Notify;

    /// An actuator whose `describe` names it, and (when gated) waits for the gate to open
    /// after saying it started: a call in flight.
    struct Version {
        name: &'static str,
        started: Arc<Notify>,
        gate: Option<Arc<Notify>>,
    }

    #[async_trait]
    impl Actuator for Version {
        fn name(&self) -> &str {
            self.name
        }
        async fn describe(&self) -> CallResult<Description> {
            self.started.notify_one();
            if let Some(gate) = &self.gate {
                gate.notified().await;
            }
            Ok(Description {
                name: self.name.to_owned(),
                group: String::new(),
                version: String::new(),
                kind: String::new(),
                plural: String::new(),
                resource_schema: serde_json::Value::Null,
                filter_schema: None,
                observed_schema: serde_json::Value::Null,
                dependencies: Vec::new(),
                needs_credentials: false,
                versions: Vec::new(),
                shortcuts: crate::actuator::Shortcuts::default(),
            })
        }
        async fn get_by_id(
            &self,
            _: &ManagedObject,
            _: &str,
        ) -> CallResult<Result<Option<ExternalResource>, Failure>> {
            unimplemented!("not called by these tests")
        }
        async fn list_for_adoption(
            &self,
            _: &ManagedObject,
        ) -> CallResult<Result<Option<Vec<ExternalResource>>, Failure>> {
            unimplemented!("not called by these tests")
        }
        async fn list_for_import(
            &self,
            _: &ManagedObject,
            _: &serde_json::Value,
        ) -> CallResult<Result<Vec<ExternalResource>, Failure>> {
            unimplemented!("not called by these tests")
        }
        async fn create(&self, _: &ManagedObject) -> CallResult<Result<ExternalResource, Status>> {
            unimplemented!("not called by these tests")
        }
        async fn delete(&self, _: &ManagedObject, _: &ExternalResource) -> CallResult<Status> {
            unimplemented!("not called by these tests")
        }
        async fn reconcilers(
            &self,
            _: &ManagedObject,
            _: &ExternalResource,
        ) -> CallResult<Result<Vec<String>, Failure>> {
            unimplemented!("not called by these tests")
        }
        async fn run_reconciler(
            &self,
            _: &str,
            _: &ManagedObject,
            _: &ExternalResource,
        ) -> CallResult<Status> {
            unimplemented!("not called by these tests")
        }
        async fn available(
            &self,
            _: &ManagedObject,
            _: &ExternalResource,
        ) -> CallResult<(Availability, Status)> {
            unimplemented!("not called by these tests")
        }
        async fn observed(&self, _: &ExternalResource) -> CallResult<serde_json::Value> {
            unimplemented!("not called by these tests")
        }
    }

    #[tokio::test]
    async fn a_call_in_flight_finishes_on_its_version_and_later_calls_reach_the_new_one() {
        let started = Arc::new(Notify::new());
        let gate = Arc::new(Notify::new());
        let old = Version {
            name: "v1",
            started: Arc::clone(&started),
            gate: Some(Arc::clone(&gate)),
        };
        let slot = Arc::new(ActuatorSlot::new(Arc::new(old)));

        let in_flight = tokio::spawn({
            let slot = Arc::clone(&slot);
            async move { slot.describe().await.map(|d| d.name) }
        });
        started.notified().await; // v1 is now inside the call

        let new = Version {
            name: "v2",
            started: Arc::new(Notify::new()),
            gate: None,
        };
        let replaced = slot.swap(Arc::new(new));
        assert_eq!(replaced.name(), "v1");
        assert_eq!(
            slot.describe().await.map(|d| d.name).ok().as_deref(),
            Some("v2")
        );

        gate.notify_one();
        let finished = in_flight.await.map(Result::ok).ok().flatten();
        assert_eq!(
            finished.as_deref(),
            Some("v1"),
            "the call in flight was not dropped"
        );
    }
}
