//! A VM replaced under the same name (reinstalled, or replaced by an autoscaler reusing
//! names): CloudStack expunges the old VM and creates a new one called the same, the Node
//! is deleted and registered again a moment later. The new Node must be bound to the new
//! VM — never to the old one from a VM list older than the Node — and the new VM become a
//! member of the load balancer, with no failing call (the old VM is never assigned).

use crate::common;

use std::time::Duration;

use super::support::*;
use cloudstack_ccm::cloud::inventory::InventorySettings;
use cloudstack_ccm::controllers::node;
use cloudstack_sim::Scenario;
use kube::api::DeleteParams;

const RESYNC: Duration = Duration::from_secs(100);

/// The VM ids that are members of the Service's rules, sorted.
fn member_ids(t: &LbTest, uid_prefix: &str) -> Vec<String> {
    t.h.sim.with_state(|state| {
        let mut ids: Vec<String> = state
            .lb_rules
            .iter()
            .filter(|rule| rule.name.starts_with(uid_prefix))
            .flat_map(|rule| rule.members.iter().map(|m| m.vm_id.clone()))
            .collect();
        ids.sort();
        ids.dedup();
        ids
    })
}

/// A harness on the small scenario (2 ms jobs) whose VM list is reused for up to 30 s,
/// as in production.
async fn with_production_freshness() -> common::Harness {
    let mut scenario = Scenario::small();
    scenario.settings.job_duration_ms = 2;
    common::Harness::start_with(common::HarnessOptions {
        scenario,
        inventory: InventorySettings::default(),
        service_resync_period: RESYNC,
        ..common::HarnessOptions::default()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_registered_again_for_a_replaced_vm_is_bound_to_the_new_vm() {
    if common::skip_in_remote_mode("replaces a VM in the simulator") {
        return;
    }
    let h = with_production_freshness().await;
    add_node(&h, "node-1").await;
    let mut t = LbTest::from_harness(h);
    t.h.spawn(node::run);
    t.start_controller(RESYNC);

    // node-3 registers, is initialised and becomes a member.
    let old_id = t.h.vm_id("node-3");
    t.h.create_node(common::TestNode::new("node-3").ready(true))
        .await;
    let initialised =
        t.h.wait_for_node("node-3", "initialised", |n| {
            !common::has_taint(n, common::UNINITIALIZED_TAINT)
        })
        .await;
    assert_eq!(
        common::provider_id(&initialised),
        format!("external-cloudstack://{old_id}")
    );
    t.create(&lb_service("web", &[("TCP", 80, 30080)])).await;
    let uid = t.uid("web").await;
    let prefix = cloudstack_ccm::cloud::loadbalancer::vocabulary::default_lb_name(&uid);
    let node_1 = t.h.vm_id("node-1");
    common::eventually("both VMs are members", t.h.wait(), || async {
        let mut want = vec![node_1.clone(), old_id.clone()];
        want.sort();
        (member_ids(&t, &prefix) == want).then_some(())
    })
    .await;

    // The VM is replaced under the same name; the Node goes and comes back 0.2 s later.
    let lists_before = t.h.list_vm_calls();
    assert!(t.h.sim.remove_vm(&old_id), "the old VM is expunged");
    let new_id = t.h.add_vm("node-3", "10.1.1.99");
    t.h.nodes()
        .delete("node-3", &DeleteParams::default())
        .await
        .expect("the Node is deleted");
    tokio::time::sleep(Duration::from_millis(200)).await;
    t.h.create_node(common::TestNode::new("node-3").ready(true))
        .await;
    let again =
        t.h.wait_for_node("node-3", "initialised again", |n| {
            !common::has_taint(n, common::UNINITIALIZED_TAINT)
        })
        .await;
    assert_eq!(
        common::provider_id(&again),
        format!("external-cloudstack://{new_id}"),
        "bound to the new VM, not to {old_id}"
    );
    common::eventually("the new VM is a member", t.h.wait(), || async {
        let mut want = vec![node_1.clone(), new_id.clone()];
        want.sort();
        (member_ids(&t, &prefix) == want).then_some(())
    })
    .await;
    println!(
        "VM lists from the replacement to the new member: {}",
        t.h.list_vm_calls() - lists_before
    );
    settle().await;
    let failed = failing_calls(&t.h, 0);
    assert!(failed.is_empty(), "{failed:#?}");
    t.stop().await;
}

/// A Node whose VM CloudStack expunged (the node lifecycle controller not yet there to
/// delete the Node) while the VM list the controller holds still shows it: the first
/// assignment of that VM fails, the list is read again at once, and the VM is not
/// assigned again — not once per retry until the list ages out (30 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vm_cloudstack_says_is_gone_is_not_assigned_again_and_again() {
    if common::skip_in_remote_mode("expunges a VM in the simulator") {
        return;
    }
    let h = with_production_freshness().await;
    h.expect_failing_calls();
    add_node(&h, "node-1").await;
    add_node(&h, "node-2").await;
    let mut t = LbTest::from_harness(h);
    t.start_controller(RESYNC);
    t.create(&lb_service("web", &[("TCP", 80, 30080)])).await;
    t.wait_rules("web", "one rule with both members", |r| {
        r.len() == 1 && r[0].members.len() == 2
    })
    .await;

    // node-2's VM is expunged; the controller's VM list (30 s fresh) still holds it.
    let gone = t.h.vm_id("node-2");
    assert!(t.h.sim.remove_vm(&gone));
    t.patch(
        "web",
        ports_patch(&[("TCP", 80, 30080), ("TCP", 443, 30443)]),
    )
    .await;
    t.wait_rules("web", "two rules, node-1 only on the new one", |r| {
        r.len() == 2
            && r.iter()
                .any(|r| r.public_port == 443 && r.members.len() == 1)
    })
    .await;
    settle().await;
    let failed_assigns = failing_calls(&t.h, 0)
        .into_iter()
        .filter(|f| f.starts_with("assignToLoadBalancerRule"))
        .count();
    assert!(
        failed_assigns <= 1,
        "the gone VM was assigned {failed_assigns} times"
    );
    t.stop().await;
}
