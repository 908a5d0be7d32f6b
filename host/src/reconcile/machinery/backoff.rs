//! Per-object exponential backoff for transient failures (kube-runtime has none built in).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// Attempts per object key, doubling from `base` up to `max`.
#[derive(Debug)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    attempts: Mutex<HashMap<String, u32>>,
}

impl Backoff {
    /// A backoff from `base` to `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            attempts: Mutex::default(),
        }
    }

    /// The delay before the next retry of `key`, counting this failure.
    pub fn next(&self, key: &str) -> Duration {
        let mut attempts = self
            .attempts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = attempts.entry(key.to_owned()).or_insert(0);
        let delay = self.base.saturating_mul(1u32 << (*n).min(16)).min(self.max);
        *n = n.saturating_add(1);
        delay
    }

    /// `key` succeeded: its next failure starts from `base` again.
    pub fn reset(&self, key: &str) {
        self.attempts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_per_object_up_to_the_cap_and_reset_on_success() {
        let b = Backoff::new(Duration::from_secs(1), Duration::from_secs(5));
        let d: Vec<_> = (0..5).map(|_| b.next("a").as_secs()).collect();
        assert_eq!(d, vec![1, 2, 4, 5, 5]);
        assert_eq!(b.next("b").as_secs(), 1, "objects back off independently");
        b.reset("a");
        assert_eq!(b.next("a").as_secs(), 1);
    }
}
