//! The Nodes' `NetworkUnavailable` condition, as the route controller reads and writes it.

use k8s_openapi::api::core::v1::{Node, NodeCondition};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::controllers::node_cache::CachedNode;
use crate::controllers::node_vocabulary::NETWORK_UNAVAILABLE;

/// The Node's `NetworkUnavailable` condition, if it has one.
pub(crate) fn network_condition(node: &CachedNode) -> Option<&NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == NETWORK_UNAVAILABLE)
}

/// Sets `NetworkUnavailable` as Kubernetes' route controller (`updateNetworkingCondition`)
/// does: `False`/`RouteCreated` when the route exists, `True`/`NoRouteCreated` when it could
/// not be made. Nothing is written when the condition `listed` at the start of the pass
/// already says so.
pub(super) async fn set_network_condition(
    api: &Api<Node>,
    name: &str,
    listed: Option<&CachedNode>,
    route_created: Result<(), &str>,
) -> Result<(), kube::Error> {
    let (status, reason, message) = match route_created {
        Ok(()) => ("False", "RouteCreated", "RouteController created a route"),
        Err(message) => ("True", "NoRouteCreated", message),
    };
    let current = listed.and_then(network_condition);
    if current.is_some_and(|c| {
        c.status == status
            && c.reason.as_deref() == Some(reason)
            && c.message.as_deref() == Some(message)
    }) {
        return Ok(());
    }
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let patch = json!({ "status": { "conditions": [{
        "type": NETWORK_UNAVAILABLE,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": now,
        "lastHeartbeatTime": now,
    }]}});
    api.patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .map(drop)
}
