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
//!
//! - The passes its controller expects ([`Actuator::expect_passes`]) MUST be counted by the
//!   version current: a swap withdraws the old version's count before the new one's is taken.

use std::sync::{Arc, Mutex, PoisonError, RwLock};

use async_trait::async_trait;

use super::{
    Actuator, Availability, CallResult, Description, ExternalResource, Failure, ManagedObject,
    PassesExpected, Status,
};

/// A replaceable [`Actuator`].
pub struct ActuatorSlot {
    name: String,
    current: RwLock<Arc<dyn Actuator>>,
    /// The passes the controller expects and the current version's count of them, while the
    /// controller holds the slot's answer to [`Actuator::expect_passes`].
    expected: Arc<Mutex<Option<(u16, PassesExpected)>>>,
}

/// The slot's answer to [`Actuator::expect_passes`]: dropping it withdraws the count of
/// whichever version holds it then.
struct SlotExpectation(Arc<Mutex<Option<(u16, PassesExpected)>>>);

impl Drop for SlotExpectation {
    fn drop(&mut self) {
        let count = lock(&self.0).take();
        drop(count);
    }
}

/// A poisoned lock only means a panic elsewhere while a value was replaced whole.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ActuatorSlot {
    /// A slot serving `actuator`.
    pub fn new(actuator: Arc<dyn Actuator>) -> Self {
        Self {
            name: actuator.name().to_owned(),
            current: RwLock::new(actuator),
            expected: Arc::default(),
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
        {
            let mut expected = lock(&self.expected);
            if let Some((at_once, count)) = expected.take() {
                // The old version's count first, so that the two are never counted together.
                drop(count);
                *expected = Some((at_once, actuator.expect_passes(at_once)));
            }
        }
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
    fn expect_passes(&self, at_once: u16) -> PassesExpected {
        let mut expected = lock(&self.expected);
        drop(expected.take());
        *expected = Some((at_once, self.current().expect_passes(at_once)));
        PassesExpected::holding(SlotExpectation(Arc::clone(&self.expected)))
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
        /// Passes this version counts now ([`Actuator::expect_passes`]).
        expected: Arc<std::sync::atomic::AtomicI32>,
    }

    impl Version {
        fn new(name: &'static str) -> Self {
            Self {
                name,
                started: Arc::new(Notify::new()),
                gate: None,
                expected: Arc::default(),
            }
        }
    }

    /// A version's count of expected passes, withdrawn when dropped.
    struct Counted(Arc<std::sync::atomic::AtomicI32>, i32);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0
                .fetch_sub(self.1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[async_trait]
    impl Actuator for Version {
        fn name(&self) -> &str {
            self.name
        }
        fn expect_passes(&self, at_once: u16) -> PassesExpected {
            let n = i32::from(at_once);
            let total = self
                .expected
                .fetch_add(n, std::sync::atomic::Ordering::SeqCst)
                + n;
            // Never counted by one version twice over (the slot replaces, not adds).
            assert_eq!(total, n, "{} counted twice", self.name);
            PassesExpected::holding(Counted(Arc::clone(&self.expected), n))
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
            started: Arc::clone(&started),
            gate: Some(Arc::clone(&gate)),
            ..Version::new("v1")
        };
        let slot = Arc::new(ActuatorSlot::new(Arc::new(old)));

        let in_flight = tokio::spawn({
            let slot = Arc::clone(&slot);
            async move { slot.describe().await.map(|d| d.name) }
        });
        started.notified().await; // v1 is now inside the call

        let new = Version::new("v2");
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

    #[test]
    fn the_controllers_passes_are_counted_by_the_version_serving_and_withdrawn_when_it_stops() {
        let (v1, v2, v3) = (Version::new("v1"), Version::new("v2"), Version::new("v3"));
        let (c1, c2, c3) = (
            Arc::clone(&v1.expected),
            Arc::clone(&v2.expected),
            Arc::clone(&v3.expected),
        );
        let count =
            |c: &Arc<std::sync::atomic::AtomicI32>| c.load(std::sync::atomic::Ordering::SeqCst);
        let slot = ActuatorSlot::new(Arc::new(v1));
        // A swap before any controller expects passes counts nothing.
        slot.swap(Arc::new(v2));
        assert_eq!((count(&c1), count(&c2)), (0, 0));
        let held = slot.expect_passes(16);
        assert_eq!(count(&c2), 16);
        // A swap moves the count: the old version's withdrawn, the new one's taken.
        slot.swap(Arc::new(v3));
        assert_eq!((count(&c2), count(&c3)), (0, 16));
        // The controller stops: nothing stays counted.
        drop(held);
        assert_eq!(count(&c3), 0);
    }
}
