//! The rules the kit checks, in the order it checks them. Each is one phase of a run; a phase
//! whose precondition failed (no resource was created, the sample already exists…) is
//! skipped, with the reason, and never counts as a pass.

use std::fmt;

use serde::Serialize;

/// How binding a rule is: `MUST` from the contract, or `SHOULD` that the host relies on. The
/// kit fails a plugin on either; the level is shown so that the author knows which text of
/// `wit/actuator.wit` the rule comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Level {
    /// A `MUST` of the contract.
    Must,
    /// A `SHOULD` of the contract that the leak-free flow depends on.
    Should,
}

impl Level {
    /// `MUST` or `SHOULD`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Must => "MUST",
            Self::Should => "SHOULD",
        }
    }
}

/// One rule of the contract, checked by one phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(into = "&'static str")]
pub enum Rule {
    /// `describe` MUST be pure: two calls answer the same description.
    DescribePure,
    /// `describe` MUST pass the host's boundary (`actuator::contract`), its three schemas MUST
    /// compile as JSON Schema, and the sample's `spec.resource` MUST match `resource-schema`.
    DescribeValid,
    /// Before anything is created, `list-for-adoption` MUST answer without finding anything
    /// for the sample (the kit only touches what it creates: a sample that already exists
    /// stops the run).
    AdoptionBeforeCreate,
    /// `create` MUST make the resource and answer it (a status with progress only creates
    /// nothing and is retried within the wait budget).
    Create,
    /// `get-by-id` of the created id MUST find it, with that id.
    GetAfterCreate,
    /// The kill point: the answer of `create` is thrown away, as if the host died before it
    /// wrote `status.id`. `list-for-adoption` MUST then find exactly that resource (never a
    /// second one), so that the host's retried flow adopts it instead of creating again.
    KillPoint,
    /// A second `create` of the same object MUST NOT make a second resource: it answers the
    /// same id (the existing resource, provably its own) or a failure naming the conflict,
    /// and afterwards `list-for-adoption` still finds exactly the one resource. A plugin that
    /// declares `create-refuses-duplicates` (`orchard:shortcuts`) MUST answer a failure.
    CreateNotRepeated,
    /// Reconcilers MUST be idempotent: once a pass converged, a second pass of every
    /// reconciler answers done (no `needs-refresh`, no wait, no failure) and the observed
    /// state is unchanged.
    ReconcileIdempotent,
    /// `observed` MUST match `observed-schema`.
    ObservedSchema,
    /// `create` MUST NOT overwrite a resource that exists under the same name. The host calls
    /// create only after adoption found nothing, so a create that meets an existing resource
    /// meets one that is not (provably) this object's: a second object naming the same
    /// resource (another `metadata.name` and uid, the same `spec.resource`, no `status.id`)
    /// calls `create`, which MUST refuse (a failure, terminal or transient) or answer the
    /// existing resource untouched: `get-by-id` and `observed` answer the same before and
    /// after (fields that change between two reads aside), and the sample's
    /// `list-for-adoption` still finds it. A put-style create (an upsert) breaks it.
    CreateNeverOverwrites,
    /// Import by id: `get-by-id` for an unmanaged object (no `spec`, no `status.id`, no
    /// dependencies) MUST find the resource.
    ImportById,
    /// Import by filter (when `filter-schema` is set and a filter is given): the filter
    /// MUST match `filter-schema`, `list-for-import` MUST find exactly the resource, and a
    /// near miss (one string field without its first character) MUST find nothing: fields
    /// are matched exactly, never as substrings or suffixes.
    ImportByFilter,
    /// `delete` MUST NOT fail, and `get-by-id` MUST answer none once it is done (polled
    /// within the wait budget for an asynchronous delete; at once, with no progress from
    /// `delete`, for a plugin that declares `delete-is-synchronous`).
    Delete,
    /// `delete` SHOULD NOT fail when the resource is already gone: the host may call it again
    /// after a crash between the delete and the removal of its finalizer.
    DeleteIdempotent,
    /// `get-by-id` of an id the system does not know (the deleted one) MUST answer `ok(none)`,
    /// not an error.
    GetUnknownId,
    /// A kind with several API versions: `convert` of the sample (its `spec.resource` and
    /// annotations) from the description's version to every other one and back MUST give the
    /// sample again (a conversion loses nothing). Skipped for a kind with one version.
    ConversionRoundTrip,
}

impl Rule {
    /// Every rule, in the order of the phases.
    pub const ALL: [Self; 16] = [
        Self::DescribePure,
        Self::DescribeValid,
        Self::ConversionRoundTrip,
        Self::AdoptionBeforeCreate,
        Self::Create,
        Self::GetAfterCreate,
        Self::KillPoint,
        Self::CreateNotRepeated,
        Self::ReconcileIdempotent,
        Self::ObservedSchema,
        Self::CreateNeverOverwrites,
        Self::ImportById,
        Self::ImportByFilter,
        Self::Delete,
        Self::DeleteIdempotent,
        Self::GetUnknownId,
    ];

    /// The stable name shown in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DescribePure => "describe-pure",
            Self::DescribeValid => "describe-valid",
            Self::AdoptionBeforeCreate => "adoption-before-create",
            Self::Create => "create",
            Self::GetAfterCreate => "get-after-create",
            Self::KillPoint => "kill-point",
            Self::CreateNotRepeated => "create-not-repeated",
            Self::ReconcileIdempotent => "reconcile-idempotent",
            Self::ObservedSchema => "observed-schema",
            Self::CreateNeverOverwrites => "create-never-overwrites",
            Self::ImportById => "import-by-id",
            Self::ImportByFilter => "import-by-filter",
            Self::Delete => "delete",
            Self::DeleteIdempotent => "delete-idempotent",
            Self::GetUnknownId => "get-unknown-id",
            Self::ConversionRoundTrip => "conversion-round-trip",
        }
    }

    /// `MUST` or `SHOULD`.
    pub fn level(self) -> Level {
        match self {
            Self::DeleteIdempotent => Level::Should,
            _ => Level::Must,
        }
    }
}

impl From<Rule> for &'static str {
    fn from(r: Rule) -> Self {
        r.as_str()
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
