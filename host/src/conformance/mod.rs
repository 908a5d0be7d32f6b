//! The conformance kit (`orchard conformance`): runs a plugin against its real external
//! system and reports, rule by rule with evidence, whether it keeps the contract that makes
//! Orchard leak-free. `docs/conformance.md` is the plugin author's guide.
//!
//! # What a run does
//!
//! One sample object (its `spec.resource`, credentials and dependencies) goes through the
//! phases of [`Rule::ALL`], in order — describe, adoption before create, create, the kill
//! point, a second create, two passes of the reconcilers, observed against its schema, a
//! create by a second object naming the same resource, import by id and by filter, delete
//! twice, get-by-id of the deleted id — each one answering pass, fail or skip ([`report`]).
//!
//! # Contract
//!
//! - A run MUST only touch what it created: a sample whose resource exists before the run
//!   stops it before any create.
//! - A run MUST clean up what it created, also when a rule failed midway: every id it
//!   created is recorded at once (the `ledger` module) and deleted through the plugin after the last
//!   phase; what could not be deleted is reported as a leftover, by id.
//! - A run MUST NOT panic on any answer of the plugin: a broken answer is a failed rule.
//! - Waits SHOULD follow the plugin's `poll-after`, capped, within a budget per phase
//!   ([`wait::Budget`]).
//!
//! The command line ([`crate::cli`]) loads the component, reads the flags and prints the
//! [`Report`]; everything else is here, over the [`Actuator`] trait (unit tests use a fake).

pub mod inputs;
mod ledger;
mod phases;
pub mod report;
pub mod rules;
mod schema;
pub mod wait;

#[cfg(test)]
mod tests;

use std::path::PathBuf;

use serde_json::Value;

pub use report::{Cleanup, Finding, Leftover, Outcome, Report};
pub use rules::{Level, Rule};
pub use wait::Budget;

use crate::actuator::{Actuator, ManagedObject};

/// Why a run (or the inputs of `invoke`) could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A manifest file could not be read.
    #[error("reading {}: {source}", path.display())]
    ReadManifest {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A manifest file is not YAML or JSON.
    #[error("parsing {} as YAML: {source}", path.display())]
    ParseManifest {
        /// The file.
        path: PathBuf,
        /// Why.
        source: serde_yaml::Error,
    },
    /// The sample object has no `spec.resource`: there is nothing to create.
    #[error("the sample object {object} has no spec.resource: the kit creates from it")]
    NoSpec {
        /// `namespace/name` of the sample.
        object: String,
    },
    /// A `--dependency` names a dependency the plugin does not declare.
    #[error("{flag}: plugin {plugin} declares no dependency {name:?} (it declares: {declared})")]
    UnknownDependency {
        /// The flag as written.
        flag: String,
        /// The plugin.
        plugin: String,
        /// The name given.
        name: String,
        /// The declared names.
        declared: String,
    },
    /// The same dependency given twice.
    #[error("{flag}: dependency {name:?} is given twice")]
    DuplicateDependency {
        /// The second flag.
        flag: String,
        /// The dependency.
        name: String,
    },
    /// A `--dependency` object of another kind than declared.
    #[error("{flag}: the object is a {found}, the dependency {name:?} is a {expected}")]
    DependencyKind {
        /// The flag as written.
        flag: String,
        /// The dependency.
        name: String,
        /// The declared kind.
        expected: String,
        /// The manifest's kind.
        found: String,
    },
    /// A `--dependency` object without `metadata.name`.
    #[error("{flag}: the object has no metadata.name")]
    DependencyUnnamed {
        /// The flag as written.
        flag: String,
    },
    /// A `--dependency` object that is not the one the sample's spec names.
    #[error(
        "{flag}: the sample's spec.resource.{field} names {named:?}, the given object is {given:?}"
    )]
    DependencyMismatch {
        /// The flag as written.
        flag: String,
        /// The spec field.
        field: String,
        /// The name in the spec.
        named: String,
        /// The given object's name.
        given: String,
    },
    /// A `--dependency Kind/name` could not be read from the cluster.
    #[error(
        "{flag}: reading it from the cluster (namespace {namespace}): {}",
        api_message(source)
    )]
    DependencyFetch {
        /// The flag as written.
        flag: String,
        /// Where it was looked for.
        namespace: String,
        /// Why.
        source: kube::Error,
    },
    /// A dependency the sample names, needed for create, was not given.
    #[error(
        "the sample's spec.resource.{field} names a {kind} (dependency {name:?}): give it with --dependency {name}=FILE or --dependency {name}={kind}/NAME"
    )]
    MissingDependency {
        /// The dependency.
        name: String,
        /// Its spec field.
        field: String,
        /// Its kind.
        kind: String,
    },
}

/// The apiserver's own message for an API error (not the whole status), else the error.
fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        other => other.to_string(),
    }
}

/// What one run is given.
#[derive(Debug, Clone)]
pub struct Options {
    /// The sample object, credentials and dependencies filled; its `status.id` is ignored.
    pub object: ManagedObject,
    /// The import filter for the import-by-filter rule (skipped without one).
    pub import_filter: Option<Value>,
    /// How long a phase may wait on the external system.
    pub budget: Budget,
}

/// Runs every rule on `actuator` and cleans up what it created.
pub async fn run(actuator: &dyn Actuator, options: Options) -> Result<Report, Error> {
    let object = format!("{}/{}", options.object.namespace, options.object.name);
    if options.object.spec.is_none() {
        return Err(Error::NoSpec { object });
    }
    let mut kit = phases::Kit::new(
        actuator,
        options.object,
        options.import_filter,
        options.budget,
    );
    let mut rules = Vec::new();
    for rule in Rule::ALL {
        let verdict = kit.check(rule).await;
        tracing::info!(plugin = actuator.name(), rule = %rule, outcome = verdict.outcome.as_str(), "conformance rule");
        rules.push(Finding {
            rule,
            level: rule.level(),
            outcome: verdict.outcome,
            evidence: verdict.evidence,
        });
    }
    let cleanup = kit.cleanup().await;
    let passed = rules.iter().all(|f| f.outcome != Outcome::Fail) && cleanup.leftovers.is_empty();
    Ok(Report {
        plugin: actuator.name().to_owned(),
        kind: kit.description().map(|d| format!("{}.{}", d.kind, d.group)),
        object,
        rules,
        cleanup,
        passed,
    })
}
