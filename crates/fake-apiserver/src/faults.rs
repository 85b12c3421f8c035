//! Fault injection (error statuses, latency) per verb and resource, and request counters.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use crate::error::ApiError;

/// Kubernetes API verbs as the server classifies requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verb {
    /// GET one object.
    Get,
    /// GET a collection.
    List,
    /// GET a collection with `watch=true`.
    Watch,
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH.
    Patch,
    /// DELETE.
    Delete,
    /// DELETE on a collection.
    DeleteCollection,
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Self::Get => "get",
            Self::List => "list",
            Self::Watch => "watch",
            Self::Create => "create",
            Self::Update => "update",
            Self::Patch => "patch",
            Self::Delete => "delete",
            Self::DeleteCollection => "deletecollection",
        };
        f.write_str(name)
    }
}

/// One injected fault. Resources are named like kubectl names them, with the subresource:
/// `services`, `services/status`, `nodes`, `leases`, `events.events.k8s.io`.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    /// Verb to match (`None`: any).
    pub verb: Option<Verb>,
    /// Resource to match (`None`: any).
    pub resource: Option<String>,
    /// Status code to fail with (`None`: only add latency).
    pub status: Option<u16>,
    /// How many matching requests fail before the fault is spent (`None`: unlimited).
    pub times: Option<u32>,
    /// Fraction of matching requests that fail, applied deterministically (0.5 fails every
    /// second request).
    pub rate: f64,
    /// Delay added to every matching request.
    pub latency: Duration,
}

impl Fault {
    /// Fail every matching request with `status` (500, 409, 429, ...).
    pub fn error(status: u16) -> Self {
        Self {
            verb: None,
            resource: None,
            status: Some(status),
            times: None,
            rate: 1.0,
            latency: Duration::ZERO,
        }
    }

    /// Delay every matching request by `latency`.
    pub fn latency(latency: Duration) -> Self {
        Self {
            status: None,
            latency,
            ..Self::error(0)
        }
    }

    /// Only requests with this verb on this resource.
    pub fn on(mut self, verb: Verb, resource: &str) -> Self {
        self.verb = Some(verb);
        self.resource = Some(resource.to_string());
        self
    }

    /// Only requests with this verb.
    pub fn verb(mut self, verb: Verb) -> Self {
        self.verb = Some(verb);
        self
    }

    /// Only requests on this resource.
    pub fn resource(mut self, resource: &str) -> Self {
        self.resource = Some(resource.to_string());
        self
    }

    /// Fail only the first `times` matching requests.
    pub fn times(mut self, times: u32) -> Self {
        self.times = Some(times);
        self
    }

    /// Fail this fraction of matching requests (clamped to 0..=1).
    pub fn rate(mut self, rate: f64) -> Self {
        self.rate = rate.clamp(0.0, 1.0);
        self
    }

    fn matches(&self, verb: Verb, resource: &str) -> bool {
        self.verb.is_none_or(|v| v == verb)
            && self.resource.as_deref().is_none_or(|r| r == resource)
    }
}

#[derive(Debug)]
struct ActiveFault {
    fault: Fault,
    failed: u32,
    accumulator: f64,
}

/// What to do with one request.
#[derive(Debug, Default)]
pub struct Verdict {
    /// Delay before answering.
    pub latency: Duration,
    /// Fail with this error instead of serving.
    pub error: Option<ApiError>,
}

/// The fault table and the request counters.
#[derive(Debug, Default)]
pub struct Faults {
    active: Mutex<Vec<ActiveFault>>,
    counts: Mutex<BTreeMap<(Verb, String), u64>>,
}

impl Faults {
    /// Replaces the active faults.
    pub fn set(&self, faults: Vec<Fault>) {
        let active = faults
            .into_iter()
            .map(|fault| ActiveFault {
                fault,
                failed: 0,
                accumulator: 0.0,
            })
            .collect();
        *self.active.lock().unwrap_or_else(|p| p.into_inner()) = active;
    }

    /// Counts the request and decides whether it is delayed or failed.
    pub fn check(&self, verb: Verb, resource: &str) -> Verdict {
        *self
            .counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry((verb, resource.to_string()))
            .or_default() += 1;
        let mut verdict = Verdict::default();
        let mut active = self.active.lock().unwrap_or_else(|p| p.into_inner());
        for entry in active
            .iter_mut()
            .filter(|a| a.fault.matches(verb, resource))
        {
            verdict.latency += entry.fault.latency;
            let Some(status) = entry.fault.status else {
                continue;
            };
            if verdict.error.is_some() || entry.fault.times.is_some_and(|t| entry.failed >= t) {
                continue;
            }
            entry.accumulator += entry.fault.rate;
            if entry.accumulator >= 1.0 - f64::EPSILON {
                entry.accumulator -= 1.0;
                entry.failed += 1;
                verdict.error = Some(ApiError::injected(status));
            }
        }
        verdict
    }

    /// Requests seen for `verb` on `resource` (e.g. `services/status`).
    pub fn count(&self, verb: Verb, resource: &str) -> u64 {
        self.counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(verb, resource.to_string()))
            .copied()
            .unwrap_or(0)
    }

    /// All counters.
    pub fn counts(&self) -> BTreeMap<(Verb, String), u64> {
        self.counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Zeroes all counters.
    pub fn reset_counts(&self) {
        self.counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_rate_are_deterministic() {
        let faults = Faults::default();
        faults.set(vec![
            Fault::error(500).on(Verb::Patch, "services").times(2),
            Fault::error(429).on(Verb::Get, "nodes").rate(0.5),
        ]);
        let failed = |verb, resource| faults.check(verb, resource).error.map(|e| e.code);
        assert_eq!(failed(Verb::Patch, "services"), Some(500));
        assert_eq!(failed(Verb::Patch, "services/status"), None);
        assert_eq!(failed(Verb::Patch, "services"), Some(500));
        assert_eq!(failed(Verb::Patch, "services"), None);
        let node_results: Vec<_> = (0..4).map(|_| failed(Verb::Get, "nodes")).collect();
        assert_eq!(node_results, vec![None, Some(429), None, Some(429)]);
        assert_eq!(faults.count(Verb::Patch, "services"), 3);
        assert_eq!(faults.count(Verb::Get, "nodes"), 4);
    }
}
