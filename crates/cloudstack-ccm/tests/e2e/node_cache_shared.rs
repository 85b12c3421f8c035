//! The controllers on one Node cache, as `controllers::run` starts them: node-lifecycle
//! and the service controller read cloud-node's cache, node-lifecycle still taints,
//! untaints and deletes, and the process lists and watches the Nodes once.

use crate::common;

use cloudstack_ccm::controllers::node_vocabulary::SHUTDOWN_TAINT;
use cloudstack_ccm::controllers::{node, node_lifecycle, service};
use common::{Harness, HarnessOptions, TestNode, UNINITIALIZED_TAINT, has_taint, provider_id};
use fake_apiserver::Verb;

#[tokio::test]
async fn the_controllers_list_and_watch_the_nodes_once() {
    if common::skip_in_remote_mode("counts the fake API server's requests") {
        return;
    }
    let mut h = Harness::start_with(HarnessOptions::default()).await;
    h.create_node(TestNode::new("node-1")).await;
    h.spawn(node::run);
    h.spawn(node_lifecycle::run);
    h.spawn(service::run);
    h.wait_for_node("node-1", "initialised", |n| {
        !has_taint(n, UNINITIALIZED_TAINT)
    })
    .await;
    common::eventually("the Node watch", common::WAIT, || async {
        (h.cluster().request_count(Verb::Watch, "nodes") > 0).then_some(())
    })
    .await;
    assert_eq!(h.cluster().request_count(Verb::List, "nodes"), 1);
    assert_eq!(h.cluster().request_count(Verb::Watch, "nodes"), 1);
    h.stop().await;
}

#[tokio::test]
async fn lifecycle_on_the_cloud_node_cache_follows_a_vm_from_start_to_removal() {
    if common::skip_in_remote_mode("stops and removes a VM (destructive on a real environment)") {
        return;
    }
    let mut h = Harness::start_with(HarnessOptions::default()).await;
    h.spawn(node::run);
    h.spawn(node_lifecycle::run);
    // A second Node whose VM stays: the safety rail deletes only while the VM list holds
    // at least half of the cluster's initialised Nodes.
    let healthy = format!("external-cloudstack://{}", h.vm_id("node-1"));
    h.create_node(
        TestNode::new("node-1")
            .initialised()
            .provider_id(&healthy)
            .ready(true),
    )
    .await;
    let id = h.vm_id("node-3");
    h.create_node(TestNode::new("node-3")).await;
    let node = h
        .wait_for_node("node-3", "initialised", |n| {
            !has_taint(n, UNINITIALIZED_TAINT)
        })
        .await;
    assert_eq!(provider_id(&node), format!("external-cloudstack://{id}"));

    h.set_ready("node-3", false).await;
    assert!(h.sim.set_vm_state(&id, "Stopped"));
    h.wait_for_node("node-3", "tainted as shut down", |n| {
        has_taint(n, SHUTDOWN_TAINT)
    })
    .await;

    assert!(h.sim.set_vm_state(&id, "Running"));
    h.set_ready("node-3", true).await;
    h.wait_for_node("node-3", "untainted once Ready", |n| {
        !has_taint(n, SHUTDOWN_TAINT)
    })
    .await;

    h.set_ready("node-3", false).await;
    assert!(h.sim.remove_vm(&id));
    h.wait_for_node_gone("node-3").await;
    h.wait_for_event("node-3", "DeletingNode").await;
    h.stop().await;
}
