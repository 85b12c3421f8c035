//! How applying a plan fails: [`ApplyError`] names the step, and the small helpers that
//! turn a CloudStack or recording error into one. Shared by the apply step and the public
//! IP's protocol ([`crate::cloud::loadbalancer::ip_claim`]).

use crate::cloud::job_queue::QueuedJob;
use crate::cloud::loadbalancer::plan::Step;

/// Why the Service could not be written to.
#[derive(Debug, thiserror::Error)]
#[error("{action}: {source}")]
pub struct RecordError {
    /// What was being recorded, and where (e.g. `recording public IP 1 on Service web`).
    pub action: String,
    /// The store's error (the Kubernetes API's).
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

/// A step that failed, named.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// A CloudStack call failed.
    #[error("{step}: {source}")]
    CloudStack {
        /// The step (its display form).
        step: String,
        /// The error.
        #[source]
        source: cloudstack::Error,
    },
    /// The IP could not be recorded on the Service.
    #[error("associate IP: {0}")]
    Record(#[source] RecordError),
    /// Another Service took the IP first (its UID tag is on it): the Service forgot it,
    /// and its next plan claims a new address.
    #[error("{step}: IP {ip_id} is held by Service {owner}; a new address is claimed")]
    IpTaken {
        /// The step.
        step: String,
        /// The IP id.
        ip_id: String,
        /// The UID of the Service that holds it.
        owner: String,
    },
    /// A step refers to something an earlier phase should have made.
    #[error("{step}: {detail}")]
    Unresolved {
        /// The step.
        step: String,
        /// What is missing.
        detail: String,
    },
}

impl ApplyError {
    /// The CloudStack error behind this failure, if any.
    pub fn cloudstack(&self) -> Option<&cloudstack::Error> {
        match self {
            ApplyError::CloudStack { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Shorthand: wraps a CloudStack error with the step's name.
pub(in crate::cloud::loadbalancer) fn failed(
    step: &Step,
) -> impl FnOnce(cloudstack::Error) -> ApplyError + '_ {
    move |source| ApplyError::CloudStack {
        step: step.to_string(),
        source,
    }
}

/// The id of the entity a create job makes (`what`: "rule", "IP"), from its start reply.
pub(in crate::cloud::loadbalancer) fn created_id(
    step: &Step,
    job: &QueuedJob,
    what: &str,
) -> Result<String, ApplyError> {
    job.start()
        .id
        .clone()
        .ok_or_else(|| ApplyError::Unresolved {
            step: step.to_string(),
            detail: format!("the reply carried no {what} id"),
        })
}

/// A delete that finds nothing to delete has done its job.
pub(in crate::cloud::loadbalancer) fn gone_is_fine(
    result: Result<(), cloudstack::Error>,
) -> Result<(), cloudstack::Error> {
    match result {
        Err(err) if err.is_not_found() => Ok(()),
        other => other,
    }
}
