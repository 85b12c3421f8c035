//! Async commands that are not creates validate inside the job: the call answers HTTP 200
//! with a `jobid` and the job ends with `jobstatus` 2. `ApiServer.queueCommand` runs only
//! parameter processing (UUIDs resolved, `@ACL` parameters checked) before queueing; the
//! command's `execute()` runs in the job, and `ApiAsyncJobDispatcher.runJob` reports an
//! `InvalidParameterValueException` as 431 and any other exception (permission denied,
//! `IllegalArgumentException`, `CloudRuntimeException`) as 530.

use crate::common;

use cloudstack::{
    AssignToLoadBalancerRule, AssociateIpAddress, CreateLoadBalancerRule, CreateTags,
    DeleteLoadBalancerRule, DeleteTags, ListLoadBalancerRules, UpdateLoadBalancerRule,
};
use cloudstack_sim::{NicSpec, Scenario, SimServer, VmSpec};
use common::{client, id_of, job_error, start};

/// The small scenario plus a VM of bob's with a NIC in alice's `net-vr`.
fn scenario() -> Scenario {
    let mut scenario = Scenario::small();
    scenario.vms.push(VmSpec {
        id: None,
        name: "bobs-vm".into(),
        state: "Running".into(),
        zone: "zone1".into(),
        offering: "small".into(),
        nics: vec![NicSpec {
            network: "net-vr".into(),
            ipv4: "10.1.1.50".into(),
            ipv6: None,
            isdefault: true,
        }],
        static_nat_ip: None,
        account: Some("bob".into()),
        project: None,
    });
    scenario
}

async fn alice_rule(sim: &SimServer) -> String {
    let alice = client(sim, "alice");
    let ip = alice
        .associate_ip_address(&AssociateIpAddress {
            networkid: Some(id_of(sim, "networks", "net-vr")),
            ..Default::default()
        })
        .await
        .unwrap()
        .id
        .unwrap();
    alice
        .create_load_balancer_rule(&CreateLoadBalancerRule {
            name: "a-tcp-80".into(),
            algorithm: "roundrobin".into(),
            privateport: 30080,
            publicport: 80,
            publicipid: Some(ip),
            openfirewall: Some(false),
            ..Default::default()
        })
        .await
        .unwrap()
        .id
        .unwrap()
}

/// `assignToLoadBalancer` → `RulesManagerImpl.checkRuleAndUserVm` (caller's access to rule
/// and VM, same owner) in the job; `AssignToLoadBalancerRuleCmd.execute` answers 530.
#[tokio::test]
async fn assigning_another_accounts_vm_fails_in_the_job() {
    let sim = start(scenario()).await;
    let rule = alice_rule(&sim).await;
    let bobs = id_of(&sim, "vms", "bobs-vm");
    let node = id_of(&sim, "vms", "node-1");
    let failed = client(&sim, "alice")
        .assign_to_load_balancer_rule(&AssignToLoadBalancerRule {
            id: rule.clone(),
            virtualmachineids: vec![bobs],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        job_error(failed),
        (530, "Failed to assign load balancer rule".into())
    );
    // The rule's `id` carries no @ACL either: bob gets a job, and the job fails.
    let by_bob = client(&sim, "bob")
        .assign_to_load_balancer_rule(&AssignToLoadBalancerRule {
            id: rule.clone(),
            virtualmachineids: vec![node],
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        job_error(by_bob),
        (530, "Failed to assign load balancer rule".into())
    );
    assert!(sim.with_state(|s| s.lb_rule(&rule).is_some_and(|r| r.members.is_empty())));
}

/// `LoadBalancingRulesManagerImpl.updateLoadBalancerRule` in the job: a protocol the
/// provider refuses → 431 "Modifications in lb rule … are not supported."; another account
/// → 530. (An unknown algorithm: `api_rule_state`.)
#[tokio::test]
async fn update_failures_come_from_the_job() {
    let sim = start(scenario()).await;
    let rule = alice_rule(&sim).await;
    let alice = client(&sim, "alice");
    let udp = alice
        .update_load_balancer_rule(&UpdateLoadBalancerRule {
            id: rule.clone(),
            protocol: Some("udp".into()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    let (code, text) = job_error(udp);
    assert_eq!(code, 431);
    assert!(
        text.starts_with("Modifications in lb rule ") && text.ends_with(" are not supported."),
        "{text}"
    );
    let by_bob = client(&sim, "bob")
        .update_load_balancer_rule(&UpdateLoadBalancerRule {
            id: rule.clone(),
            algorithm: Some("source".into()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(job_error(by_bob).0, 530);
    let now = alice
        .list_load_balancer_rules(&ListLoadBalancerRules {
            id: Some(rule.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        (now[0].algorithm.as_deref(), now[0].protocol.as_deref()),
        (Some("roundrobin"), Some("tcp")),
        "failed updates leave the rule as it was"
    );
    let deleted_by_bob = client(&sim, "bob")
        .delete_load_balancer_rule(&DeleteLoadBalancerRule { id: rule.clone() })
        .await
        .unwrap_err();
    assert_eq!(
        job_error(deleted_by_bob).0,
        530,
        "deleteLoadBalancerRule checks access in the job"
    );
    assert!(sim.with_state(|s| s.lb_rule(&rule).is_some()));
}

/// `TaggedResourceManagerImpl.createTags`/`deleteTags` run in the job: a bad resource type
/// or resource is 431, someone else's resource 530, an empty value 431; deleting tags that
/// do not exist is 431 "Unable to find any tags which conform to specified delete
/// parameters.".
#[tokio::test]
async fn tag_failures_come_from_the_job() {
    let sim = start(scenario()).await;
    let rule = alice_rule(&sim).await;
    let alice = client(&sim, "alice");
    let tag = |kind: &str, id: &str, value: &str| CreateTags {
        resourceids: vec![id.to_owned()],
        resourcetype: kind.into(),
        tags: vec![("cloudstack-ccm/cluster".into(), value.into())],
        ..Default::default()
    };
    let bad_type = alice
        .create_tags(&tag("Bogus", &rule, "k8s"))
        .await
        .unwrap_err();
    assert_eq!(
        job_error(bad_type),
        (431, "Invalid resource type Bogus".into())
    );
    let missing = "0b1d2c3e-0000-4000-8000-00000000ffff";
    let no_resource = alice
        .create_tags(&tag("LoadBalancer", missing, "k8s"))
        .await
        .unwrap_err();
    assert_eq!(
        job_error(no_resource),
        (
            431,
            format!("Unable to find resource by uuid {missing} and type LoadBalancer")
        )
    );
    let empty = alice
        .create_tags(&tag("LoadBalancer", &rule, ""))
        .await
        .unwrap_err();
    assert_eq!(
        job_error(empty),
        (
            431,
            "Value for the key cloudstack-ccm/cluster is either null or empty".into()
        )
    );
    let by_bob = client(&sim, "bob")
        .create_tags(&tag("LoadBalancer", &rule, "k8s"))
        .await
        .unwrap_err();
    assert_eq!(job_error(by_bob).0, 530);
    assert!(
        sim.with_state(|s| s.tags.is_empty()),
        "failed jobs tag nothing"
    );

    let nothing = alice
        .delete_tags(&DeleteTags {
            resourceids: vec![rule.clone()],
            resourcetype: "LoadBalancer".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        job_error(nothing),
        (
            431,
            "Unable to find any tags which conform to specified delete parameters.".into()
        )
    );
    alice
        .create_tags(&tag("LoadBalancer", &rule, "k8s"))
        .await
        .unwrap();
    alice
        .delete_tags(&DeleteTags {
            resourceids: vec![rule.clone()],
            resourcetype: "loadbalancer".into(),
            tags: vec![("CLOUDSTACK-CCM/CLUSTER".into(), "K8S".into())],
        })
        .await
        .expect("keys and values match case-insensitively");
    assert!(sim.with_state(|s| s.tags.is_empty()));
}
