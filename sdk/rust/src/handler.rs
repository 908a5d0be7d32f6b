//! The `ResourceHandler` pattern (OpenChoreo) for optional sub-resources, usable inside a
//! reconciler: not required → delete it if present; required → fetch it, then create it or
//! bring it up to date.

use crate::types::{Failure, Status};

/// One optional sub-resource of an external resource (a DNS record set, a queue binding…).
pub trait ResourceHandler {
    /// What [`ResourceHandler::current`] reports.
    type Current;

    /// Name shown in messages, e.g. `"ttl"`.
    fn name(&self) -> &str;

    /// Whether the sub-resource should exist. `false` deletes it.
    fn is_required(&self) -> bool;

    /// The current state; `Ok(None)` when it does not exist.
    fn current(&self) -> Result<Option<Self::Current>, Failure>;

    /// Creates it.
    fn create(&self) -> Result<(), Failure>;

    /// Brings it to the desired state. Returns whether anything changed.
    fn update(&self, current: &Self::Current) -> Result<bool, Failure>;

    /// Deletes it. MUST succeed when it is already gone.
    fn delete(&self, current: &Self::Current) -> Result<(), Failure>;
}

/// Drives one handler through the pattern. Returns `needs-refresh` when anything changed, so
/// that the host fetches the resource again, and done when it was already as desired.
pub fn ensure<H: ResourceHandler>(handler: &H) -> Status {
    drive(handler).unwrap_or_else(Status::from)
}

fn drive<H: ResourceHandler>(handler: &H) -> Result<Status, Failure> {
    let current = handler.current()?;
    let changed = match (handler.is_required(), current) {
        (false, None) => None,
        (false, Some(current)) => {
            handler.delete(&current)?;
            Some("deleted")
        }
        (true, None) => {
            handler.create()?;
            Some("created")
        }
        (true, Some(current)) => handler.update(&current)?.then_some("updated"),
    };
    Ok(match changed {
        Some(what) => Status::needs_refresh(format!("{} {what}", handler.name())),
        None => Status::done(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    #[derive(Default)]
    struct Ttl {
        desired: Option<u32>,
        actual: RefCell<Option<u32>>,
        calls: RefCell<Vec<&'static str>>,
    }

    impl ResourceHandler for Ttl {
        type Current = u32;
        fn name(&self) -> &'static str {
            "ttl"
        }
        fn is_required(&self) -> bool {
            self.desired.is_some()
        }
        fn current(&self) -> Result<Option<u32>, Failure> {
            Ok(*self.actual.borrow())
        }
        fn create(&self) -> Result<(), Failure> {
            self.calls.borrow_mut().push("create");
            *self.actual.borrow_mut() = self.desired;
            Ok(())
        }
        fn update(&self, current: &u32) -> Result<bool, Failure> {
            self.calls.borrow_mut().push("update");
            let changed = Some(*current) != self.desired;
            *self.actual.borrow_mut() = self.desired;
            Ok(changed)
        }
        fn delete(&self, _: &u32) -> Result<(), Failure> {
            self.calls.borrow_mut().push("delete");
            *self.actual.borrow_mut() = None;
            Ok(())
        }
    }

    #[test]
    fn a_missing_required_resource_is_created_and_asks_for_a_refresh() {
        let h = Ttl {
            desired: Some(60),
            ..Default::default()
        };
        assert_eq!(ensure(&h), Status::needs_refresh("ttl created"));
        assert_eq!(*h.actual.borrow(), Some(60));
    }

    #[test]
    fn a_resource_already_as_desired_is_done_without_a_refresh() {
        let h = Ttl {
            desired: Some(60),
            actual: RefCell::new(Some(60)),
            ..Default::default()
        };
        assert!(ensure(&h).is_done());
        assert_eq!(*h.calls.borrow(), vec!["update"]);
    }

    #[test]
    fn a_resource_no_longer_required_is_deleted() {
        let h = Ttl {
            desired: None,
            actual: RefCell::new(Some(60)),
            ..Default::default()
        };
        assert_eq!(ensure(&h), Status::needs_refresh("ttl deleted"));
        assert_eq!(*h.actual.borrow(), None);
    }

    #[test]
    fn an_absent_resource_that_is_not_required_is_left_alone() {
        let h = Ttl::default();
        assert!(ensure(&h).is_done());
        assert!(h.calls.borrow().is_empty());
    }
}
