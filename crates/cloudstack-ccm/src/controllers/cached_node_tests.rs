//! What every controller reads from a [`CachedNode`]: the Node cache keeps exactly the
//! fields the cloud-node, node-lifecycle, service and route controllers read, checked here
//! through their own functions (a test of the parent module, so no controller imports
//! another).

use super::node::{has_taint, node_ref};
use super::node_cache::CachedNode;
use super::node_cache::tests::kubelet_node;
use super::node_lifecycle::{is_ready, set_shutdown_taint, taints_patch};
use super::node_vocabulary::SHUTDOWN_TAINT;
use super::route::network_condition::network_condition;
use super::route::{internal_ipv4, pod_cidrs};
use super::service::eligible::{eligible_set, is_eligible, is_initialising};

#[test]
fn cached_nodes_keep_what_every_controller_reads() {
    let mut cached = CachedNode::from(kubelet_node());
    // cloud-node and node-lifecycle
    assert!(!is_ready(&cached));
    assert!(has_taint(&cached, SHUTDOWN_TAINT));
    let node_ref = node_ref(&cached);
    assert_eq!(node_ref.name, "worker-1");
    assert_eq!(node_ref.provider_id, Some("external-cloudstack://vm-1"));
    assert_eq!(node_ref.provided_node_ip, Some("10.1.1.5"));
    assert_eq!(cached.metadata.resource_version.as_deref(), Some("42"));
    // the service controller: excluded by its label
    assert!(!is_eligible(&cached));
    assert!(eligible_set([&cached]).is_empty());
    assert!(!is_initialising(&cached, jiff::Timestamp::now()));
    // the route controller
    assert_eq!(
        pod_cidrs(&cached),
        [crate::cloud::cidr::Cidr::parse("10.244.0.0/24").unwrap()]
    );
    assert_eq!(internal_ipv4(&cached), Some("10.1.1.5".parse().unwrap()));
    assert_eq!(
        network_condition(&cached).map(|c| c.reason.as_deref()),
        Some(Some("RouteCreated"))
    );
    // and nothing else
    assert_eq!(cached.metadata.labels.as_ref().unwrap().len(), 1);
    assert_eq!(cached.metadata.annotations.as_ref().unwrap().len(), 1);
    let status = cached.status.as_ref().unwrap();
    assert_eq!(status.conditions.as_ref().unwrap().len(), 2);
    // what node-lifecycle writes back from it
    let patch = taints_patch(&cached);
    assert_eq!(patch["metadata"]["resourceVersion"], "42");
    assert_eq!(patch["spec"]["taints"][0]["key"], SHUTDOWN_TAINT);
    set_shutdown_taint(&mut cached, false);
    assert_eq!(
        taints_patch(&cached)["spec"]["taints"],
        serde_json::json!([]),
        "an empty list removes the last taint"
    );
}
