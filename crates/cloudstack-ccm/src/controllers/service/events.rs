//! Events on Services, with the reasons the Kubernetes service controller uses so that
//! `kubectl describe service` reads the same as with any cloud provider.

use crate::controllers::events::{Event, EventType, Recorder};
use k8s_openapi::api::core::v1::Service;
use kube::Resource;

/// The reasons we report, named as the Kubernetes service controller names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// About to create or change the load balancer.
    EnsuringLoadBalancer,
    /// The load balancer matches the Service.
    EnsuredLoadBalancer,
    /// Only the backend hosts changed, and the load balancer was updated.
    UpdatedLoadBalancer,
    /// Reaching the wanted state failed (Warning).
    SyncLoadBalancerFailed,
    /// About to delete the load balancer.
    DeletingLoadBalancer,
    /// The load balancer is gone.
    DeletedLoadBalancer,
    /// Deleting the load balancer failed (Warning).
    DeleteLoadBalancerFailed,
    /// Something the load balancer could not do and does not fail for, e.g. a VPC tier
    /// on a default ACL list, an IP kept by `keep-ip`, an annotation value replaced by
    /// its default, or Nodes left out because they are on another network (Warning).
    LoadBalancerWarning,
    /// No Node may serve the load balancer: nothing is changed in CloudStack, the members
    /// stay (Warning).
    UnAvailableLoadBalancer,
}

impl Reason {
    /// The reason string of the Event.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::EnsuringLoadBalancer => "EnsuringLoadBalancer",
            Self::EnsuredLoadBalancer => "EnsuredLoadBalancer",
            Self::UpdatedLoadBalancer => "UpdatedLoadBalancer",
            Self::SyncLoadBalancerFailed => "SyncLoadBalancerFailed",
            Self::DeletingLoadBalancer => "DeletingLoadBalancer",
            Self::DeletedLoadBalancer => "DeletedLoadBalancer",
            Self::DeleteLoadBalancerFailed => "DeleteLoadBalancerFailed",
            Self::LoadBalancerWarning => "LoadBalancerWarning",
            Self::UnAvailableLoadBalancer => "UnAvailableLoadBalancer",
        }
    }

    /// Warning for failures, Normal otherwise.
    pub(crate) fn event_type(self) -> EventType {
        match self {
            Self::SyncLoadBalancerFailed
            | Self::DeleteLoadBalancerFailed
            | Self::LoadBalancerWarning
            | Self::UnAvailableLoadBalancer => EventType::Warning,
            _ => EventType::Normal,
        }
    }

    /// The message the Kubernetes service controller shows for a successful step.
    pub(crate) fn default_note(self) -> &'static str {
        match self {
            Self::EnsuringLoadBalancer => "Ensuring load balancer",
            Self::EnsuredLoadBalancer => "Ensured load balancer",
            Self::UpdatedLoadBalancer => "Updated load balancer with new hosts",
            Self::SyncLoadBalancerFailed => "Error syncing load balancer",
            Self::DeletingLoadBalancer => "Deleting load balancer",
            Self::DeletedLoadBalancer => "Deleted load balancer",
            Self::DeleteLoadBalancerFailed => "Error deleting load balancer",
            Self::LoadBalancerWarning => "Load balancer warning",
            Self::UnAvailableLoadBalancer => "There are no available nodes for LoadBalancer",
        }
    }
}

/// Publishes an Event about `service`. A failure to publish is logged and otherwise
/// ignored: Events are informative and must never block reconciliation.
pub async fn publish(recorder: &Recorder, service: &Service, reason: Reason, note: Option<String>) {
    let event = Event {
        type_: reason.event_type(),
        reason: reason.as_str().to_string(),
        note: Some(truncate(
            note.unwrap_or_else(|| reason.default_note().to_string()),
        )),
        action: action_of(reason).to_string(),
        secondary: None,
    };
    let reference = service.object_ref(&());
    if let Err(err) = recorder.publish(&event, &reference).await {
        tracing::warn!(
            service = %format!("{}/{}", reference.namespace.unwrap_or_default(), reference.name.unwrap_or_default()),
            reason = reason.as_str(),
            error = %err,
            "cannot publish event"
        );
    }
}

/// Publishes `SyncLoadBalancerFailed` with the Kubernetes service controller's note,
/// `Error syncing load balancer: <error>`.
pub(crate) async fn publish_sync_failed(
    recorder: &Recorder,
    service: &Service,
    error: &(dyn std::fmt::Display + Sync),
) {
    let note = format!("Error syncing load balancer: {error}");
    publish(
        recorder,
        service,
        Reason::SyncLoadBalancerFailed,
        Some(note),
    )
    .await;
}

/// Publishes one `LoadBalancerWarning` per warning.
pub(crate) async fn publish_warnings(
    recorder: &Recorder,
    service: &Service,
    warnings: impl IntoIterator<Item = String>,
) {
    for warning in warnings {
        publish(
            recorder,
            service,
            Reason::LoadBalancerWarning,
            Some(warning),
        )
        .await;
    }
}

/// The Event `action`: what we were doing when the Event happened.
fn action_of(reason: Reason) -> &'static str {
    match reason {
        Reason::DeletingLoadBalancer
        | Reason::DeletedLoadBalancer
        | Reason::DeleteLoadBalancerFailed => "DeleteLoadBalancer",
        _ => "EnsureLoadBalancer",
    }
}

/// Events notes are limited to 1 kB; longer texts are cut at a character boundary.
fn truncate(mut note: String) -> String {
    const LIMIT: usize = 1024;
    if note.len() > LIMIT {
        let mut end = LIMIT - 3;
        while !note.is_char_boundary(end) {
            end -= 1;
        }
        note.truncate(end);
        note.push_str("...");
    }
    note
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_warnings_with_kubernetes_reason_names() {
        assert_eq!(
            Reason::SyncLoadBalancerFailed.as_str(),
            "SyncLoadBalancerFailed"
        );
        assert_eq!(
            Reason::SyncLoadBalancerFailed.event_type(),
            EventType::Warning
        );
        assert_eq!(Reason::EnsuredLoadBalancer.event_type(), EventType::Normal);
        assert_eq!(action_of(Reason::DeletedLoadBalancer), "DeleteLoadBalancer");
    }

    #[test]
    fn long_notes_are_cut_to_one_kilobyte() {
        let note = truncate("é".repeat(1000));
        assert!(note.len() <= 1024);
        assert!(note.ends_with("..."));
        assert_eq!(truncate("short".into()), "short");
    }
}
