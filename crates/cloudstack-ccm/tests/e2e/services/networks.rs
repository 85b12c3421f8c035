//! Source ranges and network kinds end to end: the rule's own `cidrlist` changed on
//! CloudStack 4.18 (rule recreated) and 4.22 (changed in place), firewall source ranges on
//! an isolated network, and ACL items on a VPC tier. In remote mode (see `common::target`)
//! the isolated-network test runs, and the cidrlist test of the server's own version.

use crate::common;

use std::time::Duration;

use super::support::*;
use cloudstack_ccm::cloud::loadbalancer::annotations;
use cloudstack_sim::{SMALL_ACL, SMALL_TIER, Scenario, Version};

const NODES: [&str; 3] = ["node-1", "node-2", "node-3"];
const RESYNC: Duration = Duration::from_secs(100);

/// Creates a Service with `…-source-cidrs` `first`, changes it to `second`, and returns
/// (rule id before, rule id after). In remote mode the server's version decides: `None`
/// (after saying so) when it is not in `versions` (major, minor from, minor to excluded).
async fn change_rule_cidrs(version: &str, versions: (u32, u32, u32)) -> Option<(String, String)> {
    let mut scenario = Scenario::small();
    scenario.version = Version::parse(version).expect("version");
    let t = LbTest::start(scenario, &NODES, RESYNC).await;
    let server = t.h.ctx.server_version.clone();
    let (major, from, to) = versions;
    let in_range = server.at_least(major, from, 0) && !server.at_least(major, to, 0);
    if !in_range
        && t.h
            .skip_after_start(&format!("the server runs CloudStack {server}"))
    {
        t.stop().await;
        return None;
    }
    t.create(&with_annotations(
        lb_service("ranged", &[("TCP", 80, 30080)]),
        &[(annotations::SOURCE_CIDRS.key, "10.0.0.0/8")],
    ))
    .await;
    t.wait_for_ip("ranged").await;
    let before = t
        .wait_rules("ranged", "have the first cidrlist", |r| {
            r.len() == 1 && r[0].cidrs == ["10.0.0.0/8"]
        })
        .await;
    t.patch(
        "ranged",
        serde_json::json!({ "metadata": { "annotations": { annotations::SOURCE_CIDRS.key: "192.168.0.0/16,172.16.0.0/12" } } }),
    )
    .await;
    let after = t
        .wait_rules("ranged", "have the second cidrlist", |r| {
            r.len() == 1
                && r[0].cidrs == ["192.168.0.0/16", "172.16.0.0/12"]
                && r[0].members.len() == 3
        })
        .await;
    t.stop().await;
    Some((before[0].id.clone(), after[0].id.clone()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_cidrs_are_recreated_on_4_18() {
    let Some((before, after)) = change_rule_cidrs("4.18.0.0", (4, 18, 22)).await else {
        return;
    };
    assert_ne!(
        before, after,
        "below 4.22 the cidrlist cannot change in place"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_cidrs_change_in_place_on_4_22() {
    let Some((before, after)) = change_rule_cidrs("4.22.0.0", (4, 22, u32::MAX)).await else {
        return;
    };
    assert_eq!(before, after, "4.22 updates the cidrlist in place");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_ranges_become_firewall_rules_on_an_isolated_network() {
    let t = LbTest::start(Scenario::small(), &NODES, RESYNC).await;
    let mut service = lb_service("private", &[("TCP", 443, 30443)]);
    service
        .spec
        .as_mut()
        .expect("spec")
        .load_balancer_source_ranges = Some(vec!["198.51.100.0/24".into()]);
    t.create(&service).await;
    let address = t.wait_for_ip("private").await;
    let ip_id = ip_id_of(&t.h, &address);
    let opened = firewall_rules(&t.h, &ip_id);
    assert_eq!(
        opened,
        [("tcp".to_string(), 443, vec!["198.51.100.0/24".to_string()])]
    );

    t.patch("private", serde_json::json!({ "spec": { "loadBalancerSourceRanges": ["198.51.100.0/24", "203.0.113.0/24"] } }))
        .await;
    let changed = common::eventually("the firewall follows the ranges", t.h.wait(), || async {
        let rules = firewall_rules(&t.h, &ip_id);
        (rules.len() == 1 && rules[0].2.len() == 2).then_some(rules)
    })
    .await;
    assert_eq!(changed[0].2, ["198.51.100.0/24", "203.0.113.0/24"]);
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vpc_tier_opens_ports_with_acl_items() {
    if common::skip_in_remote_mode("needs the simulator's VPC tier, its VMs and its ACL state") {
        return;
    }
    let mut scenario = Scenario::small();
    let vms = scenario.add_vms(SMALL_TIER, "vpc-node-", 2);
    let names: Vec<&str> = vms.iter().map(String::as_str).collect();
    let t = LbTest::start(scenario, &names, RESYNC).await;
    t.create(&lb_service(
        "tiered",
        &[("TCP", 80, 30080), ("TCP", 443, 30443)],
    ))
    .await;
    let address = t.wait_for_ip("tiered").await;
    let rules = t
        .wait_rules("tiered", "have members", |r| {
            r.len() == 2 && r.iter().all(|r| r.members.len() == 2)
        })
        .await;
    let (tier_id, acl_id, vpc_id) = t.h.sim.with_state(|s| {
        let tier = s
            .networks
            .iter()
            .find(|n| n.name == SMALL_TIER)
            .expect("tier");
        let acl = s
            .acl_lists
            .iter()
            .find(|a| a.name == SMALL_ACL)
            .expect("acl");
        (
            tier.id.clone(),
            acl.id.clone(),
            tier.vpc_id.clone().expect("tier in a VPC"),
        )
    });
    assert!(rules.iter().all(|r| r.network_id == tier_id));
    let ip_id = ip_id_of(&t.h, &address);
    let ip_vpc = t.h.sim.with_state(|s| {
        s.ips
            .iter()
            .find(|ip| ip.id == ip_id)
            .and_then(|ip| ip.vpc_id.clone())
    });
    assert_eq!(ip_vpc, Some(vpc_id), "the IP is associated with the VPC");
    assert!(
        firewall_rules(&t.h, &ip_id).is_empty(),
        "no firewall rules in a VPC"
    );
    let items = || {
        t.h.sim.with_state(|s| {
            let mut items: Vec<(String, i64, Vec<String>, String)> = s
                .acl_items
                .iter()
                .filter(|i| i.acl_id == acl_id)
                .map(|i| {
                    (
                        i.protocol.clone(),
                        i.start_port.unwrap_or(-1),
                        i.cidrs.clone(),
                        i.action.to_ascii_lowercase(),
                    )
                })
                .collect();
            items.sort();
            items
        })
    };
    let opened: Vec<(String, i64)> = items().into_iter().map(|i| (i.0, i.1)).collect();
    assert_eq!(opened, [("tcp".to_string(), 80), ("tcp".to_string(), 443)]);
    assert!(
        items()
            .iter()
            .all(|i| i.2 == ["0.0.0.0/0"] && i.3 == "allow"),
        "{:?}",
        items()
    );

    t.delete("tiered").await;
    t.wait_gone("tiered").await;
    assert!(items().is_empty(), "ACL items removed with the Service");
    assert_eq!(ip_state(&t.h, &ip_id).as_deref(), Some("Free"));
    t.stop().await;
}
