//! End-to-end tests of the cloud-node-lifecycle controller against the CloudStack
//! simulator and the fake API server over HTTP (or remote endpoints, see
//! `common::target`, where the environment's VMs are never removed or stopped).

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use cloudstack_ccm::controllers::node;
use cloudstack_ccm::controllers::node_lifecycle::{self, SHUTDOWN_TAINT};
use cloudstack_sim::{ErrorFault, Faults};
use common::{
    Harness, HarnessOptions, TestNode, UNINITIALIZED_TAINT, event_note, has_taint, provider_id,
    skip_check_in_remote_mode, skip_in_remote_mode,
};

/// Monitor periods a negative check waits before concluding nothing happens.
const QUIET_PERIODS: u32 = 5;

async fn harness_with_lifecycle_controller() -> Harness {
    let mut harness = Harness::start_with(HarnessOptions::default()).await;
    harness.spawn(node_lifecycle::run_with);
    harness
}

fn initialised_node(h: &Harness, name: &str) -> TestNode {
    TestNode::new(name)
        .initialised()
        .provider_id(&format!("external-cloudstack://{}", h.vm_id(name)))
}

/// Waits several monitor periods, for checks that something does NOT happen.
async fn let_the_controller_look(h: &Harness) {
    tokio::time::sleep(h.ctx.node_monitor_period * QUIET_PERIODS).await;
}

#[tokio::test]
async fn a_not_ready_node_whose_vm_is_deleted_is_deleted() {
    let h = harness_with_lifecycle_controller().await;
    let id = h.vm_id("node-1");
    h.create_node(initialised_node(&h, "node-1").ready(false))
        .await;
    let_the_controller_look(&h).await;
    assert!(h.node("node-1").await.is_some(), "its VM still exists");
    if h.is_remote() {
        skip_check_in_remote_mode(
            "the node goes with its VM",
            "removing a VM of the environment is destructive",
        );
        h.stop().await;
        return;
    }

    assert!(h.sim.remove_vm(&id));
    h.wait_for_node_gone("node-1").await;
    let event = h.wait_for_event("node-1", "DeletingNode").await;
    assert_eq!(event["type"], "Normal");
    assert!(event_note(&event).contains("node-1"), "{event}");
    h.stop().await;
}

#[tokio::test]
async fn a_node_without_provider_id_is_matched_by_name_before_deleting() {
    if skip_in_remote_mode("removes a VM (destructive on a real environment)") {
        return;
    }
    let h = harness_with_lifecycle_controller().await;
    let id = h.vm_id("node-2");
    h.create_node(
        TestNode::new("node-2.cluster.local")
            .initialised()
            .ready(false),
    )
    .await;
    let_the_controller_look(&h).await;
    assert!(h.node("node-2.cluster.local").await.is_some());

    assert!(h.sim.remove_vm(&id));
    h.wait_for_node_gone("node-2.cluster.local").await;
    h.stop().await;
}

#[tokio::test]
async fn a_ready_node_is_never_deleted() {
    if skip_in_remote_mode("removes a VM (destructive on a real environment)") {
        return;
    }
    let h = harness_with_lifecycle_controller().await;
    let id = h.vm_id("node-1");
    h.create_node(initialised_node(&h, "node-1").ready(true))
        .await;
    assert!(h.sim.remove_vm(&id));
    let_the_controller_look(&h).await;
    assert!(h.node("node-1").await.is_some());
    assert!(h.events_about("node-1").is_empty());
    h.stop().await;
}

#[tokio::test]
async fn a_stopped_vm_taints_the_node_until_it_is_ready_again() {
    let h = harness_with_lifecycle_controller().await;
    let id = h.vm_id("node-1");
    h.create_node(initialised_node(&h, "node-1").ready(false))
        .await;
    let_the_controller_look(&h).await;
    assert!(!has_taint(&h.node("node-1").await.unwrap(), SHUTDOWN_TAINT));
    if h.is_remote() {
        skip_check_in_remote_mode(
            "a stopped VM taints its node",
            "stopping a VM of the environment is disruptive",
        );
        h.stop().await;
        return;
    }

    assert!(h.sim.set_vm_state(&id, "Stopped"));
    let node = h
        .wait_for_node("node-1", "tainted as shut down", |n| {
            has_taint(n, SHUTDOWN_TAINT)
        })
        .await;
    let taint = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .and_then(|t| t.iter().find(|t| t.key == SHUTDOWN_TAINT))
        .cloned()
        .unwrap();
    assert_eq!(taint.effect, "NoSchedule");
    let_the_controller_look(&h).await;
    assert!(
        h.node("node-1").await.is_some(),
        "a stopped VM's node is kept"
    );

    assert!(h.sim.set_vm_state(&id, "Running"));
    h.set_ready("node-1", true).await;
    h.wait_for_node("node-1", "untainted once Ready", |n| {
        !has_taint(n, SHUTDOWN_TAINT)
    })
    .await;
    h.stop().await;
}

#[tokio::test]
async fn monitoring_many_nodes_lists_vms_once_per_refresh_not_per_node() {
    if skip_in_remote_mode("needs a scenario of 50 more VMs") {
        return;
    }
    let mut scenario = cloudstack_sim::Scenario::small();
    scenario.add_vms(cloudstack_sim::SMALL_NETWORK, "worker-", 50);
    let mut h = Harness::start_with(HarnessOptions {
        scenario,
        ..HarnessOptions::default()
    })
    .await;
    for i in 1..=50 {
        let name = format!("worker-{i}");
        h.create_node(initialised_node(&h, &name).ready(false))
            .await;
    }
    h.sim.reset_counts();
    h.spawn(node_lifecycle::run_with);
    let watched = Duration::from_secs(1);
    tokio::time::sleep(watched).await;
    let calls = h.cloudstack_calls();
    // The inventory is at most 200 ms old in these tests: about 5 lists in 1 s,
    // whatever the number of nodes (50 nodes × 10 periods would be 500 lookups).
    let bound = (watched.as_millis() / 200) as u64 + 2;
    println!(
        "CloudStack calls while monitoring 50 NotReady nodes for {watched:?}: {:?}",
        h.sim.call_counts()
    );
    assert!(
        calls >= 1 && calls <= bound,
        "{calls} calls: {:?}",
        h.sim.call_counts()
    );
    h.stop().await;
}

#[tokio::test]
async fn a_failing_vm_list_never_deletes_a_node() {
    if skip_in_remote_mode("injects faults into the simulator") {
        return;
    }
    let h = harness_with_lifecycle_controller().await;
    let id = h.vm_id("node-1");
    h.create_node(initialised_node(&h, "node-1").ready(false))
        .await;
    let failing = ErrorFault {
        rate: 1.0,
        code: 530,
        text: Some("management server unavailable".to_string()),
    };
    h.sim.set_faults(Faults {
        errors: BTreeMap::from([("listVirtualMachines".to_string(), failing)]),
        ..Faults::default()
    });
    assert!(h.sim.remove_vm(&id));
    let_the_controller_look(&h).await;
    assert!(
        h.node("node-1").await.is_some(),
        "an unanswered list is no proof the VM is gone"
    );
    assert!(h.list_vm_calls() > 1, "the controller kept asking");

    h.sim.set_faults(Faults::default());
    h.wait_for_node_gone("node-1").await;
    h.stop().await;
}

#[tokio::test]
async fn both_node_controllers_together_follow_a_vm_from_start_to_removal() {
    if skip_in_remote_mode("stops and removes a VM (destructive on a real environment)") {
        return;
    }
    let mut h = Harness::start_with(HarnessOptions::default()).await;
    h.spawn(node::run_with);
    h.spawn(node_lifecycle::run_with);
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

    assert!(h.sim.remove_vm(&id));
    h.wait_for_node_gone("node-3").await;
    h.wait_for_event("node-3", "DeletingNode").await;
    h.stop().await;
}
