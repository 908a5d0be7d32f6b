//! The actuator contract as the reconciler sees it: an async Rust trait over the values of
//! `wit/actuator.wit`. The Wasm component adapter ([`crate::runtime::ComponentActuator`]) is
//! one implementation; a natively linked plugin is another (benchmarks and flow tests).

pub mod calls;
pub mod contract;
mod native;
mod slot;
mod types;

pub use native::NativeActuator;
pub use slot::ActuatorSlot;
pub use types::*;

use async_trait::async_trait;

/// A call that did not produce an answer from the actuator: the sandbox stopped it, or what
/// it returned breaks the contract. It is the failure of that one call; the host goes on.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The call ran past its deadline (epoch interruption or wall clock).
    #[error("plugin {plugin}: {function} exceeded its deadline of {timeout_ms} ms")]
    Deadline {
        /// The plugin the call went to.
        plugin: String,
        /// The contract function called.
        function: &'static str,
        /// The deadline, in milliseconds.
        timeout_ms: u128,
    },
    /// The guest tried to grow its memory past the cap.
    #[error("plugin {plugin}: {function} exceeded its memory cap of {limit_bytes} bytes")]
    MemoryCap {
        /// The plugin the call went to.
        plugin: String,
        /// The contract function called.
        function: &'static str,
        /// The cap on the guest's linear memory.
        limit_bytes: usize,
    },
    /// The guest trapped (a panic, `unreachable`, an out-of-bounds access…).
    #[error("plugin {plugin}: {function} trapped: {message}")]
    Trap {
        /// The plugin the call went to.
        plugin: String,
        /// The contract function called.
        function: &'static str,
        /// What the trap said.
        message: String,
    },
    /// The plugin returned a value that breaks the contract: JSON that does not parse, an
    /// invalid id or name, a document or list over its bound ([`contract`] has every rule).
    #[error("plugin {plugin}: {function} broke the contract (rule {rule}): {detail}")]
    Contract {
        /// The plugin the call went to.
        plugin: String,
        /// The contract function called.
        function: &'static str,
        /// The rule broken.
        rule: contract::Rule,
        /// What exactly broke it.
        detail: String,
    },
    /// No instance could be made for the call (pool exhausted, link error…).
    #[error("plugin {plugin}: could not instantiate for {function}: {message}")]
    Instantiate {
        /// The plugin the call went to.
        plugin: String,
        /// The contract function called.
        function: &'static str,
        /// Why no instance could be made.
        message: String,
    },
    /// The host's instance pool had no room for the call's instance before its deadline: the
    /// host runs more plugin instances at once than its pool holds (`runtime::admission`).
    #[error(
        "plugin {plugin}: no room in the host's instance pool for {function} within the call's deadline (waited {waited_ms} ms): the host runs at most {pool} plugin instances at once (--instance-pool) and its kinds' passes asked for more"
    )]
    PoolFull {
        /// The plugin the call went to.
        plugin: String,
        /// The contract function called.
        function: &'static str,
        /// How long the call waited for room.
        waited_ms: u128,
        /// Plugin instances the pool holds.
        pool: u32,
    },
}

impl CallError {
    /// The plugin the call went to.
    pub fn plugin(&self) -> &str {
        match self {
            Self::Deadline { plugin, .. }
            | Self::MemoryCap { plugin, .. }
            | Self::Trap { plugin, .. }
            | Self::Contract { plugin, .. }
            | Self::Instantiate { plugin, .. }
            | Self::PoolFull { plugin, .. } => plugin,
        }
    }

    /// What stopped the call, as one word: `deadline`, `memory-cap`, `trap`, `contract`,
    /// `instantiate`, `pool-full`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Deadline { .. } => "deadline",
            Self::MemoryCap { .. } => "memory-cap",
            Self::Trap { .. } => "trap",
            Self::Contract { .. } => "contract",
            Self::Instantiate { .. } => "instantiate",
            Self::PoolFull { .. } => "pool-full",
        }
    }
}

/// The outcome of one call: the actuator's own answer, or why there was none.
pub type CallResult<T> = Result<T, CallError>;

/// What an actuator counts for a controller that runs up to so many passes at once
/// ([`Actuator::expect_passes`]), for as long as this lives.
#[must_use = "the passes are counted only while this lives"]
pub struct PassesExpected(Option<Box<dyn Send + Sync>>);

impl PassesExpected {
    /// Nothing counted (an actuator with no shared room to count against).
    pub fn nothing() -> Self {
        Self(None)
    }

    /// Counted until `hold` is dropped.
    pub fn holding(hold: impl Send + Sync + 'static) -> Self {
        Self(Some(Box::new(hold)))
    }
}

impl std::fmt::Debug for PassesExpected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "PassesExpected(held)"
        } else {
            "PassesExpected(nothing)"
        })
    }
}

/// Everything specific to one kind of external resource. The contract of each method is
/// written in `wit/actuator.wit`; an implementation MUST NOT carry state from one object's
/// calls into another's, and MUST NOT rely on state between passes.
#[async_trait]
pub trait Actuator: Send + Sync {
    /// The plugin's name, for logs and errors.
    fn name(&self) -> &str;
    /// `sha256:<hex>` of the plugin's code, for traces; `None` (the default) when it has none.
    fn digest(&self) -> Option<&str> {
        None
    }
    /// A view of this actuator for one reconcile pass of one object: the caller MUST use it
    /// for that one object only and drop it when the pass ends. It MAY serve the pass's
    /// calls from one instance (a component does: its start-up is paid once per pass), and
    /// it answers as this actuator would. `None` (the default): call this actuator itself.
    fn for_pass(&self) -> Option<Box<dyn Actuator>> {
        None
    }
    /// The kind's controller runs up to `at_once` passes at once: the controller MUST call this
    /// once as it starts and hold the answer until it stops. An actuator whose passes share
    /// room with other kinds' (a component: the host's instance pool) counts them against it,
    /// to warn before passes have to wait; it MUST NOT refuse or delay a pass because of it.
    /// Default: nothing counted.
    fn expect_passes(&self, at_once: u16) -> PassesExpected {
        let _ = at_once;
        PassesExpected::nothing()
    }
    /// What the plugin reported (connection details, drift) by the calls that succeeded since
    /// the last take; a pass's view collects them over the pass. Default: nothing.
    fn take_reports(&self) -> Reports {
        Reports::default()
    }
    /// `describe`.
    async fn describe(&self) -> CallResult<Description>;
    /// `get-by-id`.
    async fn get_by_id(
        &self,
        obj: &ManagedObject,
        id: &str,
    ) -> CallResult<Result<Option<ExternalResource>, Failure>>;
    /// `list-for-adoption`.
    async fn list_for_adoption(
        &self,
        obj: &ManagedObject,
    ) -> CallResult<Result<Option<Vec<ExternalResource>>, Failure>>;
    /// `list-for-import`.
    async fn list_for_import(
        &self,
        obj: &ManagedObject,
        filter: &serde_json::Value,
    ) -> CallResult<Result<Vec<ExternalResource>, Failure>>;
    /// `create`.
    async fn create(&self, obj: &ManagedObject) -> CallResult<Result<ExternalResource, Status>>;
    /// `delete`.
    async fn delete(&self, obj: &ManagedObject, res: &ExternalResource) -> CallResult<Status>;
    /// `reconcilers`.
    async fn reconcilers(
        &self,
        obj: &ManagedObject,
        res: &ExternalResource,
    ) -> CallResult<Result<Vec<String>, Failure>>;
    /// `run-reconciler`.
    async fn run_reconciler(
        &self,
        name: &str,
        obj: &ManagedObject,
        res: &ExternalResource,
    ) -> CallResult<Status>;
    /// `available`.
    async fn available(
        &self,
        obj: &ManagedObject,
        res: &ExternalResource,
    ) -> CallResult<(Availability, Status)>;
    /// `observed`.
    async fn observed(&self, res: &ExternalResource) -> CallResult<serde_json::Value>;
    /// `conversion.convert`: `obj` from version `from` to version `to`. The default, for an
    /// actuator whose kind has one version, refuses ([`Failure::Unrecoverable`]).
    async fn convert(
        &self,
        _obj: &Convertible,
        from: &str,
        to: &str,
    ) -> CallResult<Result<Convertible, Failure>> {
        Ok(Err(Failure::Unrecoverable(format!(
            "plugin {} serves one API version and converts nothing (asked {from} to {to})",
            self.name()
        ))))
    }
}
