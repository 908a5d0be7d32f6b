//! The host's async runtime, and how many worker threads it starts.
//!
//! tokio starts a worker per vCPU. On a node of two vCPUs, where the host shares the cores
//! with its neighbours, the second worker mostly steals tasks from the first and wakes it:
//! one worker spent 11 % less CPU per object in the 1,000-zone job and was no slower
//! (docs/benchmarks.md, "One tokio worker on 2 vCPUs"). A plugin call cannot hold the one
//! worker for long: a computing guest yields at every epoch tick (`runtime::engine`), and
//! compiling a plugin and native calls run on tokio's blocking pool.

use std::num::NonZeroUsize;
use std::str::FromStr;

/// tokio's variable that names the worker count; when set, tokio's own default applies.
const TOKIO_WORKER_THREADS: &str = "TOKIO_WORKER_THREADS";

/// At most this many vCPUs (the machine's, or the cgroup's CPU quota), `auto` starts one
/// worker.
const SMALL_NODE_CPUS: usize = 2;

/// How many worker threads the host's async runtime starts (`--runtime-workers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workers {
    /// One on a node of at most two vCPUs, one per vCPU on a larger one; tokio's
    /// `TOKIO_WORKER_THREADS`, when set, decides instead.
    Auto,
    /// Exactly this many.
    Count(NonZeroUsize),
}

/// `--runtime-workers` is neither `auto` nor a whole number ≥ 1.
#[derive(Debug, thiserror::Error)]
#[error("expected `auto` or a number of worker threads ≥ 1, got `{0}`")]
pub struct ParseWorkersError(String);

impl FromStr for Workers {
    type Err = ParseWorkersError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "auto" {
            return Ok(Self::Auto);
        }
        s.parse::<NonZeroUsize>()
            .map(Self::Count)
            .map_err(|_| ParseWorkersError(s.to_owned()))
    }
}

impl Workers {
    /// The worker count for a node of `cpus` vCPUs; `None` leaves it to tokio
    /// (`TOKIO_WORKER_THREADS` when `tokio_variable_set`, else a worker per vCPU).
    pub fn count(self, cpus: usize, tokio_variable_set: bool) -> Option<usize> {
        match self {
            Self::Count(n) => Some(n.get()),
            Self::Auto if tokio_variable_set => None,
            Self::Auto if cpus <= SMALL_NODE_CPUS => Some(1),
            Self::Auto => None,
        }
    }

    /// The multi-threaded runtime with every driver (I/O, time) enabled.
    pub fn runtime(self) -> std::io::Result<tokio::runtime::Runtime> {
        // `available_parallelism` counts the cgroup's CPU quota: a pod limited to 2 CPUs on a
        // large node is a small node.
        let cpus = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
        let tokio_variable_set = std::env::var_os(TOKIO_WORKER_THREADS).is_some();
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.enable_all();
        if let Some(n) = self.count(cpus, tokio_variable_set) {
            builder.worker_threads(n);
        }
        builder.build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(n: usize) -> Workers {
        Workers::Count(NonZeroUsize::new(n).unwrap())
    }

    #[test]
    fn auto_starts_one_worker_on_a_node_of_one_or_two_vcpus() {
        assert_eq!(Workers::Auto.count(1, false), Some(1));
        assert_eq!(Workers::Auto.count(2, false), Some(1));
    }

    #[test]
    fn auto_leaves_a_larger_node_to_tokios_worker_per_vcpu() {
        assert_eq!(Workers::Auto.count(3, false), None);
        assert_eq!(Workers::Auto.count(16, false), None);
    }

    #[test]
    fn auto_defers_to_tokio_worker_threads_when_it_is_set() {
        assert_eq!(Workers::Auto.count(2, true), None);
    }

    #[test]
    fn an_explicit_count_wins_over_the_node_and_the_variable() {
        assert_eq!(count(3).count(2, true), Some(3));
        assert_eq!(count(1).count(64, false), Some(1));
    }

    #[test]
    fn the_flag_parses_auto_and_positive_counts_and_names_a_bad_value() {
        assert_eq!("auto".parse::<Workers>().unwrap(), Workers::Auto);
        assert_eq!("4".parse::<Workers>().unwrap(), count(4));
        for bad in ["0", "-1", "two", ""] {
            let e = bad.parse::<Workers>().unwrap_err().to_string();
            assert!(e.contains(&format!("`{bad}`")), "{e}");
        }
    }

    #[test]
    fn the_runtime_starts_the_workers_it_was_given() {
        let runtime = count(3).runtime().unwrap();
        assert_eq!(runtime.metrics().num_workers(), 3);
    }
}
