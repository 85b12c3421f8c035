//! Retry delays per object (Service or Node): exponential from a base to a cap, reset by
//! a success. Shared by the controllers.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// Failure counts by object key (`namespace/name`, or a Node name), turned into growing
/// retry delays.
#[derive(Debug)]
pub(crate) struct RetryBackoff {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<String, u32>>,
}

impl RetryBackoff {
    /// Delays start at `base` and double up to `max` (the Kubernetes service controller
    /// uses 5 s and 5 min).
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// Records one more failure of `key` and returns how long to wait before retrying.
    pub(crate) fn next_delay(&self, key: &str) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let count = failures.entry(key.to_string()).or_insert(0);
        let exponent = (*count).min(20);
        *count = count.saturating_add(1);
        self.base.saturating_mul(1u32 << exponent).min(self.max)
    }

    /// Forgets the failures of `key` after a success or when the object is gone.
    pub fn reset(&self, key: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap_and_reset_on_success() {
        let backoff = RetryBackoff::new(Duration::from_secs(5), Duration::from_secs(300));
        let delays: Vec<u64> = (0..8)
            .map(|_| backoff.next_delay("ns/a").as_secs())
            .collect();
        assert_eq!(delays, [5, 10, 20, 40, 80, 160, 300, 300]);
        assert_eq!(backoff.next_delay("ns/b").as_secs(), 5);
        backoff.reset("ns/a");
        assert_eq!(backoff.next_delay("ns/a").as_secs(), 5);
    }
}
