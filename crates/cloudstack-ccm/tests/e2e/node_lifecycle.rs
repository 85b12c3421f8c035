//! End-to-end tests of the cloud-node-lifecycle controller against the CloudStack
//! simulator and the fake API server over HTTP (or remote endpoints, see
//! `common::target`, where the environment's VMs are never removed or stopped).

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use cloudstack_ccm::controllers::node;
use cloudstack_ccm::controllers::node_lifecycle;
use cloudstack_ccm::controllers::node_vocabulary::SHUTDOWN_TAINT;
use cloudstack_sim::{ErrorFault, Faults};
use common::{
    Harness, HarnessOptions, TestNode, UNINITIALIZED_TAINT, event_note, event_reason, has_taint,
    provider_id, skip_check_in_remote_mode, skip_in_remote_mode,
};

/// Reason of the Warning Event on a Node whose deletion the safety rail holds back.
const DELETION_REFUSED_REASON: &str = "NodeDeletionRefused";

/// Monitor periods a negative check waits before concluding nothing happens.
const QUIET_PERIODS: u32 = 5;

async fn harness_with_lifecycle_controller() -> Harness {
    let mut harness = Harness::start_with(HarnessOptions::default()).await;
    harness.spawn(node_lifecycle::run);
    harness
}

fn initialised_node(h: &Harness, name: &str) -> TestNode {
    TestNode::new(name)
        .initialised()
        .provider_id(&format!("external-cloudstack://{}", h.vm_id(name)))
}

/// Adds a Ready, initialised Node for the simulator VM `name`, whose VM stays: the
/// safety rail deletes a Node only while the VM list holds at least half of the
/// cluster's initialised Nodes.
async fn add_healthy_node(h: &Harness, name: &str) {
    h.create_node(initialised_node(h, name).ready(true)).await;
}

/// Waits several monitor periods, for checks that something does NOT happen.
async fn let_the_controller_look(h: &Harness) {
    tokio::time::sleep(h.ctx.node_monitor_period * QUIET_PERIODS).await;
}

#[tokio::test]
async fn a_not_ready_node_whose_vm_is_deleted_is_deleted() {
    let h = harness_with_lifecycle_controller().await;
    add_healthy_node(&h, "node-3").await;
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
    add_healthy_node(&h, "node-3").await;
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
    h.spawn(node_lifecycle::run);
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
    h.expect_failing_calls();
    add_healthy_node(&h, "node-3").await;
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
    h.spawn(node::run);
    h.spawn(node_lifecycle::run);
    add_healthy_node(&h, "node-1").await;
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

/// The project of [`wrong_project_harness`]: it exists and alice is a member, but the
/// cluster's VMs are not in it.
const EMPTY_PROJECT_ID: &str = "3f2a1b0c-9d8e-4f7a-8b6c-5d4e3f2a1b0c";

/// A harness whose cloud-config scopes every call to a real project holding none of the
/// cluster's VMs (a wrong but valid `project-id`).
async fn wrong_project_harness() -> Harness {
    let mut scenario = cloudstack_sim::Scenario::small();
    scenario.projects[0].id = Some(EMPTY_PROJECT_ID.to_string());
    // Nodes are created from VM ids, looked up in the simulator before the project applies.
    Harness::start_with(HarnessOptions {
        scenario,
        project_id: Some(EMPTY_PROJECT_ID.to_string()),
        ..HarnessOptions::default()
    })
    .await
}

#[tokio::test]
async fn a_vm_list_holding_none_of_the_nodes_deletes_nothing_and_warns_once_per_node() {
    if skip_in_remote_mode("scopes the controllers to a simulator project holding no VM") {
        return;
    }
    let mut h = wrong_project_harness().await;
    let names = ["node-1", "node-2", "node-3"];
    for name in names {
        h.create_node(initialised_node(&h, name).ready(false)).await;
    }
    h.spawn(node_lifecycle::run);
    for name in names {
        let event = h.wait_for_event(name, DELETION_REFUSED_REASON).await;
        assert_eq!(event["type"], "Warning", "{event}");
        let note = event_note(&event);
        assert!(
            note.contains(name) && note.contains("0 of the cluster's 3 initialised Nodes"),
            "{note}"
        );
    }
    let_the_controller_look(&h).await;
    for name in names {
        assert!(h.node(name).await.is_some(), "{name} must not be deleted");
        let refusals = h
            .events_about(name)
            .iter()
            .filter(|e| event_reason(e) == Some(DELETION_REFUSED_REASON))
            .count();
        assert_eq!(refusals, 1, "one Warning Event per held-back Node");
        assert!(
            h.events_about(name)
                .iter()
                .all(|e| event_reason(e) != Some("DeletingNode"))
        );
    }
    let metrics = h.ctx.metrics.encode();
    assert!(
        metrics
            .lines()
            .any(|line| line.contains("controller=\"node-lifecycle\"")
                && line.contains("result=\"deletion_refused\"")
                && !line.ends_with(" 0")),
        "{metrics}"
    );
    h.stop().await;
}

#[tokio::test]
async fn fewer_than_half_of_the_nodes_in_the_vm_list_deletes_nothing() {
    if skip_in_remote_mode("removes VMs (destructive on a real environment)") {
        return;
    }
    let h = harness_with_lifecycle_controller().await;
    add_healthy_node(&h, "node-3").await;
    for name in ["node-1", "node-2"] {
        h.create_node(initialised_node(&h, name).ready(false)).await;
        assert!(h.sim.remove_vm(&h.vm_id(name)));
    }
    h.wait_for_event("node-1", DELETION_REFUSED_REASON).await;
    h.wait_for_event("node-2", DELETION_REFUSED_REASON).await;
    let_the_controller_look(&h).await;
    assert!(h.node("node-1").await.is_some() && h.node("node-2").await.is_some());
    h.stop().await;
}

#[tokio::test]
async fn deletions_are_rate_limited_to_one_node_in_ten_per_period() {
    if skip_in_remote_mode("adds and removes simulator VMs") {
        return;
    }
    let mut scenario = cloudstack_sim::Scenario::small();
    scenario.add_vms(cloudstack_sim::SMALL_NETWORK, "worker-", 7);
    let period = Duration::from_millis(400);
    let mut h = Harness::start_with(HarnessOptions {
        scenario,
        node_monitor_period: period,
        ..HarnessOptions::default()
    })
    .await;
    // Ten initialised Nodes: one deletion per period; three VMs gone.
    let gone = ["node-1", "node-2", "node-3"];
    for name in gone {
        h.create_node(initialised_node(&h, name).ready(false)).await;
    }
    for i in 1..=7 {
        add_healthy_node(&h, &format!("worker-{i}")).await;
    }
    for name in gone {
        assert!(h.sim.remove_vm(&h.vm_id(name)));
    }
    h.spawn(node_lifecycle::run);
    let mut deleted_at: Vec<(&str, Duration)> = Vec::new();
    let started = std::time::Instant::now();
    while deleted_at.len() < gone.len() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "three Nodes not deleted in time: {deleted_at:?}"
        );
        for name in gone {
            if !deleted_at.iter().any(|(n, _)| *n == name) && h.node(name).await.is_none() {
                deleted_at.push((name, started.elapsed()));
            }
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let span = deleted_at[2].1 - deleted_at[0].1;
    println!("deletions observed at {deleted_at:?}");
    // One per period: the third comes at least two periods after the first (less the
    // 25 ms polling of the observation).
    assert!(
        span >= period * 2 - Duration::from_millis(100),
        "{deleted_at:?}"
    );
    h.stop().await;
}
