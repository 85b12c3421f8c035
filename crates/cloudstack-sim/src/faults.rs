//! Fault injection, per-command call counters, the call log and the API rate limiter.

use crate::error::ApiError;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// An injected error for one command.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ErrorFault {
    /// Probability (0..=1) that a call fails.
    pub rate: f64,
    /// HTTP status / `errorcode` (e.g. 530, 534, 429).
    pub code: u16,
    /// `errortext`; a generic text when absent.
    #[serde(default)]
    pub text: Option<String>,
}

/// Faults applied to API calls and jobs.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Faults {
    /// Injected errors by command name.
    pub errors: BTreeMap<String, ErrorFault>,
    /// Extra latency in ms by command name (`*` = every command).
    pub latency_ms: BTreeMap<String, u64>,
    /// Probability that a job fails with 530.
    pub job_failure_rate: f64,
    /// Probability that a job never finishes.
    pub job_never_finish_rate: f64,
    /// Networks (ids or names) whose virtual router hangs: every job queued on them never
    /// finishes, so the jobs behind it wait until it is cancelled
    /// ([`crate::Settings::job_cancel_threshold_ms`]).
    pub hung_networks: Vec<String>,
}

impl Faults {
    /// The injected error for this call, if the dice say so.
    pub fn error_for(&self, command: &str) -> Option<ApiError> {
        let fault = self.errors.get(command)?;
        (rand::random::<f64>() < fault.rate).then(|| {
            let text = fault
                .text
                .clone()
                .unwrap_or_else(|| format!("Simulated failure of {command}"));
            ApiError::new(fault.code, Some(9999), text)
        })
    }

    /// Extra latency for a command.
    pub fn latency_for(&self, command: &str) -> u64 {
        self.latency_ms
            .get(command)
            .or_else(|| self.latency_ms.get("*"))
            .copied()
            .unwrap_or_default()
    }
}

/// One API call as the simulator answered it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct CallRecord {
    /// Arrival time, ms since the Unix epoch.
    pub at_ms: u64,
    /// Command name (empty when none was sent).
    pub command: String,
    /// The account: authenticated, or named by the API key of a call its role or project
    /// refused (432, decided before the signature); none for other 401s.
    pub account: Option<String>,
    /// HTTP status answered.
    pub status: u16,
    /// Error text when the call failed.
    pub error: Option<String>,
    /// Job started by the call.
    pub job_id: Option<String>,
    /// Parameter names the command does not declare in CloudStack's listing (the server
    /// ignores them; see [`crate::listing`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown_params: Vec<String>,
}

/// Fixed-window counter per account (`api.throttling.*`).
#[derive(Debug, Default)]
pub struct RateLimiter {
    windows: HashMap<String, (u64, u64)>,
}

impl RateLimiter {
    /// Counts a call; `Err` with the server's 429 once the account exceeded `max` in the window.
    pub fn check(
        &mut self,
        account: &str,
        max: u64,
        interval_ms: u64,
        now_ms: u64,
    ) -> Result<(), ApiError> {
        let entry = self
            .windows
            .entry(account.to_owned())
            .or_insert((now_ms, 0));
        if now_ms >= entry.0 + interval_ms {
            *entry = (now_ms, 0);
        }
        entry.1 += 1;
        if entry.1 > max {
            return Err(ApiError::throttled(entry.0 + interval_ms - now_ms));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_window_limits_and_resets() {
        let mut limiter = RateLimiter::default();
        assert!(limiter.check("a", 2, 1000, 0).is_ok());
        assert!(limiter.check("a", 2, 1000, 10).is_ok());
        let err = limiter.check("a", 2, 1000, 400).unwrap_err();
        assert_eq!(err.code, 429);
        assert!(
            err.text.ends_with("please retry after [600] ms."),
            "{}",
            err.text
        );
        assert!(
            limiter.check("b", 2, 1000, 400).is_ok(),
            "other accounts have their own window"
        );
        assert!(
            limiter.check("a", 2, 1000, 1000).is_ok(),
            "a new window starts"
        );
    }

    #[test]
    fn error_fault_with_certainty() {
        let mut faults = Faults::default();
        faults.errors.insert(
            "listZones".into(),
            ErrorFault {
                rate: 1.0,
                code: 534,
                text: None,
            },
        );
        assert_eq!(faults.error_for("listZones").unwrap().code, 534);
        assert!(faults.error_for("listNetworks").is_none());
    }
}
