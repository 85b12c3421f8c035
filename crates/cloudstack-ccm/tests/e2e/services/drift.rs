//! Backend nodes and drift end to end: Nodes added, removed and excluded change the
//! members of every rule; a rule deleted by hand in CloudStack comes back at the next
//! resync, one whose members were removed by hand gets them back; a load balancer made by
//! the Go CCM is adopted without recreating anything.

use crate::common;

use std::time::Duration;

use super::support::*;
use cloudstack::{
    AssignToLoadBalancerRule, AssociateIpAddress, CreateFirewallRule, CreateLoadBalancerRule,
    DeleteLoadBalancerRule, ListLoadBalancerRules, RemoveFromLoadBalancerRule,
};
use cloudstack_ccm::cloud::loadbalancer::annotations;
use cloudstack_ccm::cloud::loadbalancer::vocabulary::default_lb_name;
use cloudstack_ccm::controllers::service::finalizer::FINALIZER;
use cloudstack_sim::{SMALL_NETWORK, Scenario};
use kube::api::{DeleteParams, Patch, PatchParams};

const NODES: [&str; 3] = ["node-1", "node-2", "node-3"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_added_removed_and_excluded_change_the_members() {
    if common::skip_in_remote_mode("adds a VM to the simulator") {
        return;
    }
    let t = LbTest::start(Scenario::small(), &NODES, Duration::from_secs(100)).await;
    t.create(&lb_service(
        "web",
        &[("TCP", 80, 30080), ("TCP", 443, 30443)],
    ))
    .await;
    t.wait_for_ip("web").await;
    t.wait_rules("web", "have three members", |r| {
        r.len() == 2 && r.iter().all(|r| r.members == NODES)
    })
    .await;

    // Added: a new VM and its Node.
    t.h.add_vm("node-4", "10.1.1.44");
    add_node(&t.h, "node-4").await;
    t.wait_rules("web", "include node-4", |r| {
        r.iter().all(|r| r.members.len() == 4)
    })
    .await;
    t.wait_event("web", "UpdatedLoadBalancer", "").await;

    // Excluded by label.
    let label = serde_json::json!({ "metadata": { "labels": {
        "node.kubernetes.io/exclude-from-external-load-balancers": "true" } } });
    t.h.nodes()
        .patch("node-2", &PatchParams::default(), &Patch::Merge(&label))
        .await
        .expect("label node-2");
    t.wait_rules("web", "drop node-2", |r| {
        r.iter()
            .all(|r| r.members == ["node-1", "node-3", "node-4"])
    })
    .await;

    // Removed.
    t.h.nodes()
        .delete("node-4", &DeleteParams::default())
        .await
        .expect("delete node-4");
    let rules = t
        .wait_rules("web", "drop node-4", |r| {
            r.iter().all(|r| r.members == ["node-1", "node-3"])
        })
        .await;
    assert_eq!(rules.len(), 2);
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_deleted_by_hand_is_recreated_at_the_next_resync() {
    let t = LbTest::start(Scenario::small(), &NODES, Duration::from_millis(400)).await;
    t.create(&lb_service(
        "web",
        &[("TCP", 80, 30080), ("TCP", 443, 30443)],
    ))
    .await;
    t.wait_for_ip("web").await;
    let before = t
        .wait_rules("web", "exist", |r| {
            r.len() == 2 && r.iter().all(|r| r.members.len() == 3)
        })
        .await;
    let victim = before
        .iter()
        .find(|r| r.public_port == 443)
        .expect("rule 443")
        .clone();
    t.client_of("alice")
        .delete_load_balancer_rule(&DeleteLoadBalancerRule {
            id: victim.id.clone(),
        })
        .await
        .expect("delete by hand");
    let after = t
        .wait_rules("web", "have 443 again", |r| {
            r.iter()
                .any(|r| r.public_port == 443 && r.id != victim.id && r.members.len() == 3)
        })
        .await;
    let recreated = after
        .iter()
        .find(|r| r.public_port == 443)
        .expect("rule 443");
    assert_eq!(recreated.name, victim.name);
    let kept = after.iter().find(|r| r.public_port == 80).expect("rule 80");
    assert_eq!(
        kept.id,
        before
            .iter()
            .find(|r| r.public_port == 80)
            .expect("rule 80")
            .id,
        "the other rule stays"
    );
    t.stop().await;
}

/// A rule left with no member is `Add` in CloudStack (`applyLoadBalancerRules` sets it back
/// when its last mapping goes): a finished rule, not one being created. Once the controller
/// reads the rule's members again (its cached details are forgotten when it changes the
/// rule, here the algorithm `sessionAffinity: ClientIP` asks for), it assigns the members
/// to the same rule — no rule is deleted or recreated — and the rule is `Active` again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_removed_by_hand_are_assigned_again_to_the_same_rule() {
    let t = LbTest::start(Scenario::small(), &NODES, Duration::from_millis(400)).await;
    t.create(&lb_service("web", &[("TCP", 80, 30080)])).await;
    t.wait_for_ip("web").await;
    let before = t
        .wait_rules("web", "have three members", |r| {
            r.len() == 1 && r[0].members.len() == 3
        })
        .await;
    let alice = t.client_of(common::ACCOUNT);
    let state = || async {
        let listed = alice
            .list_load_balancer_rules(&ListLoadBalancerRules {
                id: Some(before[0].id.clone()),
                ..Default::default()
            })
            .await
            .expect("list the rule");
        listed[0].state.clone().unwrap_or_default()
    };
    assert_eq!(state().await, "Active");
    let vm_ids: Vec<String> = NODES.iter().map(|n| t.h.vm_id(n)).collect();
    t.h.reset_cloudstack_counts();
    alice
        .remove_from_load_balancer_rule(&RemoveFromLoadBalancerRule {
            id: before[0].id.clone(),
            virtualmachineids: vm_ids,
            ..Default::default()
        })
        .await
        .expect("remove every member by hand");
    assert_eq!(state().await, "Add", "no member left");
    t.patch(
        "web",
        serde_json::json!({ "spec": { "sessionAffinity": "ClientIP" } }),
    )
    .await;
    let after = t
        .wait_rules("web", "have three members again", |r| {
            r.len() == 1 && r[0].members.len() == 3
        })
        .await;
    assert_eq!(after[0].id, before[0].id, "the same rule");
    assert_eq!(after[0].algorithm, "source");
    assert_eq!(state().await, "Active");
    let counts = mutating_counts(&t.h);
    assert!(
        !counts.contains_key("createLoadBalancerRule")
            && !counts.contains_key("deleteLoadBalancerRule"),
        "{counts:?}"
    );
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_go_ccm_load_balancer_is_adopted_unchanged() {
    if common::skip_in_remote_mode("builds the Go CCM's load balancer in the simulator's state") {
        return;
    }
    let mut t = LbTest::prepare(Scenario::small(), &NODES, Duration::from_secs(100)).await;
    // A Service as the Go CCM left it: finalizer, ingress, ip-associated-by-controller.
    t.create(&lb_service(
        "legacy",
        &[("TCP", 80, 30080), ("TCP", 443, 30443)],
    ))
    .await;
    let uid = t.uid("legacy").await;
    let lb_name = default_lb_name(&uid);
    let cloud = t.client_of("alice");
    let network_id = t.network_id(SMALL_NETWORK);
    let ip = cloud
        .associate_ip_address(&AssociateIpAddress {
            networkid: Some(network_id.clone()),
            ..Default::default()
        })
        .await
        .expect("associate");
    let (ip_id, address) = (ip.id.expect("id"), ip.ipaddress.expect("address"));
    let vm_ids: Vec<String> = NODES.iter().map(|n| t.h.vm_id(n)).collect();
    for (port, node_port) in [(80u32, 30080u32), (443, 30443)] {
        let rule = cloud
            .create_load_balancer_rule(&CreateLoadBalancerRule {
                name: format!("{lb_name}-tcp-{port}"),
                algorithm: "roundrobin".into(),
                privateport: node_port,
                publicport: port,
                publicipid: Some(ip_id.clone()),
                networkid: Some(network_id.clone()),
                protocol: Some("tcp".into()),
                openfirewall: Some(false),
                ..Default::default()
            })
            .await
            .expect("rule");
        let rule_id = rule.id.expect("rule id");
        cloud
            .assign_to_load_balancer_rule(&AssignToLoadBalancerRule {
                id: rule_id,
                virtualmachineids: vm_ids.clone(),
                ..Default::default()
            })
            .await
            .expect("members");
        cloud
            .create_firewall_rule(&CreateFirewallRule {
                ipaddressid: ip_id.clone(),
                protocol: "tcp".into(),
                startport: Some(port),
                endport: Some(port),
                cidrlist: vec!["0.0.0.0/0".into()],
                ..Default::default()
            })
            .await
            .expect("firewall");
    }
    t.patch(
        "legacy",
        serde_json::json!({ "metadata": {
            "finalizers": [FINALIZER],
            "annotations": { annotations::IP_ASSOCIATED_BY_CONTROLLER.key: "true" } } }),
    )
    .await;
    let status =
        serde_json::json!({ "status": { "loadBalancer": { "ingress": [{ "ip": address }] } } });
    t.services()
        .patch_status("legacy", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("status");
    let before = t.rules("legacy").await;
    let firewall_before = firewall_rules(&t.h, &ip_id);

    t.h.sim.reset_counts();
    t.start_controller(Duration::from_secs(100));
    // The controller records the IP id it found; nothing in CloudStack changes but tags.
    let service = t
        .wait_for("legacy", "has the IP id recorded", |s| {
            annotation(s, annotations::IP_ID.key) == Some(ip_id.as_str())
        })
        .await;
    assert_eq!(ingress_ip(&service).as_deref(), Some(address.as_str()));
    t.wait_rules("legacy", "are tagged", |r| {
        r.iter()
            .all(|r| r.tags.contains_key("cloudstack-ccm/service-uid"))
    })
    .await;
    settle().await;
    let after = t.rules("legacy").await;
    let ids = |rules: &[RuleView]| {
        rules
            .iter()
            .map(|r| (r.id.clone(), r.members.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ids(&after),
        ids(&before),
        "no rule recreated, no member changed"
    );
    assert_eq!(firewall_rules(&t.h, &ip_id), firewall_before);
    let mutating = mutating_counts(&t.h);
    println!(
        "calls to adopt a Go CCM load balancer: {:?}",
        t.h.sim.call_counts()
    );
    assert_eq!(
        mutating.keys().collect::<Vec<_>>(),
        ["createTags"],
        "only ownership tags are added: {mutating:?}"
    );
    assert_eq!(ip_state(&t.h, &ip_id).as_deref(), Some("Allocated"));
    t.stop().await;
}
