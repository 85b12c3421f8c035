//! A load-balancer rule's `state` and its re-application: `Add` after its create job
//! (`CreateLoadBalancerRuleCmd.execute` applies only the firewall rules), `Active` once
//! `LoadBalancingRulesManagerImpl.applyLoadBalancerRules` runs with a VM mapped, back to
//! `Add` when it runs with none — whatever applies it: assign, remove, an update of the
//! algorithm, a policy, a member VM expunged. And `updateLoadBalancerRule` with an algorithm
//! the server does not know: accepted on the Virtual Router, refused by the NetScaler.

use crate::common;

use cloudstack::{
    AssignToLoadBalancerRule, AssociateIpAddress, CreateLbStickinessPolicy, CreateLoadBalancerRule,
    DeleteLbStickinessPolicy, ListLoadBalancerRules, RemoveFromLoadBalancerRule,
    UpdateLoadBalancerRule,
};
use cloudstack_sim::{Scenario, SimServer};
use common::{client, id_of, job_error, start};

/// A rule on a new address of `network`, created through the whole job; with its job's
/// `loadbalancer` result state.
async fn new_rule(sim: &SimServer, network: &str) -> (String, Option<String>) {
    let alice = client(sim, "alice");
    let ip = alice
        .associate_ip_address(&AssociateIpAddress {
            networkid: Some(id_of(sim, "networks", network)),
            ..Default::default()
        })
        .await
        .unwrap()
        .id;
    let created = alice
        .create_load_balancer_rule(&CreateLoadBalancerRule {
            name: "s-tcp-80".into(),
            algorithm: "roundrobin".into(),
            privateport: 30080,
            publicport: 80,
            publicipid: ip,
            openfirewall: Some(true),
            ..Default::default()
        })
        .await
        .unwrap();
    (created.id.unwrap(), created.state)
}

/// The rule's `state` as `listLoadBalancerRules` shows it.
async fn state_of(sim: &SimServer, rule: &str) -> String {
    let listed = client(sim, "alice")
        .list_load_balancer_rules(&ListLoadBalancerRules {
            id: Some(rule.into()),
            ..Default::default()
        })
        .await
        .unwrap();
    listed[0].state.clone().unwrap_or_default()
}

async fn assign(sim: &SimServer, rule: &str, vm: &str) {
    client(sim, "alice")
        .assign_to_load_balancer_rule(&AssignToLoadBalancerRule {
            id: rule.into(),
            virtualmachineids: vec![vm.into()],
            ..Default::default()
        })
        .await
        .unwrap();
}

async fn remove(sim: &SimServer, rule: &str, vm: &str) {
    client(sim, "alice")
        .remove_from_load_balancer_rule(&RemoveFromLoadBalancerRule {
            id: rule.into(),
            virtualmachineids: vec![vm.into()],
            ..Default::default()
        })
        .await
        .unwrap();
}

async fn set_algorithm(
    sim: &SimServer,
    rule: &str,
    algorithm: &str,
) -> Result<(), cloudstack::Error> {
    client(sim, "alice")
        .update_load_balancer_rule(&UpdateLoadBalancerRule {
            id: rule.into(),
            algorithm: Some(algorithm.into()),
            ..Default::default()
        })
        .await
        .map(|_| ())
}

#[tokio::test]
async fn a_rule_is_active_only_while_applied_with_a_member() {
    let sim = start(Scenario::small()).await;
    let (rule, created_state) = new_rule(&sim, "net-vr").await;
    assert_eq!(
        created_state.as_deref(),
        Some("Add"),
        "the create job's result"
    );
    assert_eq!(state_of(&sim, &rule).await, "Add", "finished, not applied");
    let firewall = client(&sim, "alice")
        .list_firewall_rules(&Default::default())
        .await
        .unwrap();
    assert_eq!(
        firewall[0].state.as_deref(),
        Some("Active"),
        "the opened firewall rule is applied by the create job"
    );

    set_algorithm(&sim, &rule, "leastconn").await.unwrap();
    assert_eq!(
        state_of(&sim, &rule).await,
        "Add",
        "applied with no member: still Add"
    );

    let (node1, node2) = (id_of(&sim, "vms", "node-1"), id_of(&sim, "vms", "node-2"));
    assign(&sim, &rule, &node1).await;
    assert_eq!(state_of(&sim, &rule).await, "Active");
    assign(&sim, &rule, &node2).await;
    remove(&sim, &rule, &node1).await;
    assert_eq!(state_of(&sim, &rule).await, "Active", "one member left");
    remove(&sim, &rule, &node2).await;
    assert_eq!(state_of(&sim, &rule).await, "Add", "the last mapping went");

    assign(&sim, &rule, &node1).await;
    set_algorithm(&sim, &rule, "source").await.unwrap();
    assert_eq!(
        state_of(&sim, &rule).await,
        "Active",
        "re-applied with a member"
    );
    assert!(sim.remove_vm(&node1), "expunge the only member");
    assert_eq!(
        state_of(&sim, &rule).await,
        "Add",
        "removeVmFromLoadBalancers re-applies the rule"
    );
}

/// `applyLBStickinessPolicy` and `deleteLBStickinessPolicy` apply the rule too: the state
/// follows the members, not the policy.
#[tokio::test]
async fn policies_apply_the_rule_with_its_members() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    let (rule, _) = new_rule(&sim, "net-vr").await;
    let policy = CreateLbStickinessPolicy {
        lbruleid: rule.clone(),
        name: "sticky".into(),
        methodname: "SourceBased".into(),
        ..Default::default()
    };
    let created = alice.create_lb_stickiness_policy(&policy).await.unwrap();
    assert_eq!(state_of(&sim, &rule).await, "Add", "no member");
    let policy_id = created.stickinesspolicy[0].id.clone().unwrap();

    let node = id_of(&sim, "vms", "node-3");
    assign(&sim, &rule, &node).await;
    alice
        .delete_lb_stickiness_policy(&DeleteLbStickinessPolicy { id: policy_id })
        .await
        .unwrap();
    assert_eq!(state_of(&sim, &rule).await, "Active");
}

/// `updateLoadBalancerRule` never validates the algorithm: the Virtual Router's
/// `NetworkHelperImpl.validateHAProxyLBRule` checks only port 8081, UDP and the protocol,
/// so the job succeeds and the algorithm is stored; `NetscalerElement.validateLBRule`
/// refuses it, 431 "Modifications in lb rule … are not supported.".
#[tokio::test]
async fn an_unknown_algorithm_passes_the_virtual_router_but_not_the_netscaler() {
    let sim = start(Scenario::small()).await;
    let (on_vr, _) = new_rule(&sim, "net-vr").await;
    set_algorithm(&sim, &on_vr, "fastest")
        .await
        .expect("the Virtual Router does not check the algorithm");
    let listed = client(&sim, "alice")
        .list_load_balancer_rules(&ListLoadBalancerRules {
            id: Some(on_vr),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed[0].algorithm.as_deref(), Some("fastest"));

    let (on_ns, _) = new_rule(&sim, "net-ns").await;
    let (code, text) = job_error(set_algorithm(&sim, &on_ns, "fastest").await.unwrap_err());
    assert_eq!(code, 431);
    assert!(
        text.starts_with("Modifications in lb rule ") && text.ends_with(" are not supported."),
        "{text}"
    );
}
