//! An actuator that can be replaced while it serves: the hot-swap point of plugins loaded from
//! a `Plugin` object.
//!
//! - A call MUST go to the version current when it starts, and MUST finish on that version
//!   even if a swap happens meanwhile (it holds its own `Arc`): no call is dropped.
//! - Calls that start after [`ActuatorSlot::swap`] returns MUST go to the new version.
//!
//! A reconcile is a series of calls, each stateless by contract, so one that spans a swap
//! finishes on the new version.

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
        Arc::clone(&self.current.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Serves `actuator` from now on; returns the version it replaces.
    pub fn swap(&self, actuator: Arc<dyn Actuator>) -> Arc<dyn Actuator> {
        let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
        std::mem::replace(&mut *current, actuator)
    }
}

#[async_trait]
impl Actuator for ActuatorSlot {
    fn name(&self) -> &str {
        &self.name
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
    use crate::actuator::NativeActuator;

    #[tokio::test]
    async fn calls_after_a_swap_reach_the_new_version_and_the_old_one_stays_usable() {
        let old: Arc<dyn Actuator> = Arc::new(NativeActuator::<orchard_fixture_echo::Echo>::new());
        let new: Arc<dyn Actuator> = Arc::new(NativeActuator::<orchard_fixture_echo::Echo>::new());
        let slot = ActuatorSlot::new(Arc::clone(&old));
        let in_flight = slot.current();
        let replaced = slot.swap(Arc::clone(&new));
        assert!(Arc::ptr_eq(&replaced, &old));
        assert!(Arc::ptr_eq(&slot.current(), &new));
        // A call that took the old version before the swap still completes on it.
        assert!(in_flight.describe().await.is_ok());
        assert!(slot.describe().await.is_ok());
    }
}
