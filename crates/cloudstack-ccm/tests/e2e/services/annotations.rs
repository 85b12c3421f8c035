//! Annotation values end to end: a bad value never freezes a load balancer (a Warning
//! naming the annotation and the value, the field's default, members still follow the
//! Nodes), unreadable source ranges keep what was applied, ranges that admit no IPv4
//! client are warned about, and health checks only where asked for and never on UDP.

use crate::common;

use std::time::Duration;

use super::support::*;
use cloudstack_ccm::cloud::loadbalancer::annotations;
use cloudstack_sim::state::PolicyKind;
use cloudstack_sim::{SMALL_NETSCALER_NETWORK, Scenario};

const NODES: [&str; 3] = ["node-1", "node-2", "node-3"];
const RESYNC: Duration = Duration::from_secs(100);

/// Sets annotation `key` of Service `name` to `value`.
async fn annotate(t: &LbTest, name: &str, key: &str, value: &str) {
    t.patch(
        name,
        serde_json::json!({ "metadata": { "annotations": { key: value } } }),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_value_falls_back_and_members_still_follow_the_nodes() {
    let t = LbTest::start(Scenario::small(), &NODES, RESYNC).await;
    t.create(&lb_service("web", &[("TCP", 80, 30080)])).await;
    t.wait_for_ip("web").await;
    t.wait_rules("web", "have three members", |r| {
        r.len() == 1 && r[0].members == NODES
    })
    .await;

    annotate(&t, "web", annotations::PROXY_PROTOCOL.key, "maybe").await;
    let warning = t
        .wait_event("web", "LoadBalancerWarning", "\"maybe\"")
        .await;
    let note = common::event_note(&warning);
    assert!(note.contains(annotations::PROXY_PROTOCOL.key), "{note}");

    // The rest of the Service still reconciles: a new Node becomes a member.
    t.h.add_vm("node-4", "10.1.1.44");
    add_node(&t.h, "node-4").await;
    let rules = t
        .wait_rules("web", "include node-4", |r| {
            r.len() == 1 && r[0].members.len() == 4
        })
        .await;
    assert_eq!(rules[0].protocol, "tcp", "the default: no PROXY protocol");
    assert!(
        !reasons(&t, "web")
            .iter()
            .any(|r| r == "SyncLoadBalancerFailed"),
        "{:?}",
        reasons(&t, "web")
    );
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_source_ranges_keep_the_ranges_applied() {
    let t = LbTest::start(Scenario::small(), &NODES, RESYNC).await;
    t.create(&with_annotations(
        lb_service("private", &[("TCP", 443, 30443)]),
        &[(annotations::K8S_SOURCE_RANGES.key, "198.51.100.0/24")],
    ))
    .await;
    let address = t.wait_for_ip("private").await;
    let ip_id = ip_id_of(&t.h, &address);
    assert_eq!(
        firewall_rules(&t.h, &ip_id),
        [("tcp".to_string(), 443, vec!["198.51.100.0/24".to_string()])]
    );

    // A typo must not open the port to everyone; a port added meanwhile gets the same
    // ranges.
    annotate(
        &t,
        "private",
        annotations::K8S_SOURCE_RANGES.key,
        "198.51.100.0/240",
    )
    .await;
    t.patch(
        "private",
        ports_patch(&[("TCP", 443, 30443), ("TCP", 8443, 30843)]),
    )
    .await;
    t.wait_event("private", "LoadBalancerWarning", "198.51.100.0/240")
        .await;
    let opened = common::eventually("the new port is opened", common::WAIT, || async {
        let rules = firewall_rules(&t.h, &ip_id);
        (rules.len() == 2).then_some(rules)
    })
    .await;
    assert_eq!(
        opened,
        [
            ("tcp".to_string(), 443, vec!["198.51.100.0/24".to_string()]),
            ("tcp".to_string(), 8443, vec!["198.51.100.0/24".to_string()]),
        ]
    );
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipv6_only_source_ranges_are_warned_about() {
    let t = LbTest::start(Scenario::small(), &NODES, RESYNC).await;
    let mut service = lb_service("v6", &[("TCP", 80, 30080)]);
    service
        .spec
        .as_mut()
        .expect("spec")
        .load_balancer_source_ranges = Some(vec!["::/0".into()]);
    t.create(&service).await;
    let warning = t.wait_event("v6", "LoadBalancerWarning", "::/0").await;
    assert!(
        common::event_note(&warning).contains("no IPv4"),
        "{warning}"
    );
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_checks_only_when_asked_and_never_on_udp() {
    let mut scenario = Scenario::small();
    let vms = scenario.add_vms(SMALL_NETSCALER_NETWORK, "ns-node-", 2);
    let names: Vec<&str> = vms.iter().map(String::as_str).collect();
    let t = LbTest::start(scenario, &names, RESYNC).await;
    let health_checks = |rule_ids: &[String]| {
        t.h.sim.with_state(|s| {
            s.policies
                .iter()
                .filter(|p| p.kind == PolicyKind::HealthCheck && rule_ids.contains(&p.rule_id))
                .map(|p| p.rule_id.clone())
                .collect::<Vec<_>>()
        })
    };

    // externalTrafficPolicy: Local alone: no check (it would probe the node port).
    let mut local = lb_service("local", &[("TCP", 80, 30080), ("UDP", 53, 30053)]);
    let spec = local.spec.as_mut().expect("spec");
    spec.external_traffic_policy = Some("Local".into());
    spec.health_check_node_port = Some(32000);
    let pods: Vec<_> = names
        .iter()
        .map(|n| super::traffic_local::ready(n))
        .collect();
    super::traffic_local::write_endpoints_for(&t.h, "local", &[("TCP", 80), ("UDP", 53)], &pods);
    t.create(&local).await;
    t.wait_for_ip("local").await;
    let rules = t
        .wait_rules("local", "have members", |r| {
            r.len() == 2 && r.iter().all(|r| r.members.len() == 2)
        })
        .await;
    let ids: Vec<String> = rules.iter().map(|r| r.id.clone()).collect();
    assert!(health_checks(&ids).is_empty(), "no implied health check");

    // Asked for: on the TCP rule only.
    t.create(&with_annotations(
        lb_service("checked", &[("TCP", 80, 30081), ("UDP", 53, 30054)]),
        &[(annotations::HEALTH_CHECK_PATH.key, "/ready")],
    ))
    .await;
    t.wait_for_ip("checked").await;
    let rules = t
        .wait_rules("checked", "have members", |r| {
            r.len() == 2 && r.iter().all(|r| r.members.len() == 2)
        })
        .await;
    let tcp = rules
        .iter()
        .find(|r| r.protocol == "tcp")
        .expect("a TCP rule");
    let ids: Vec<String> = rules.iter().map(|r| r.id.clone()).collect();
    let checked = common::eventually("the TCP rule is checked", common::WAIT, || async {
        let checked = health_checks(&ids);
        (!checked.is_empty()).then_some(checked)
    })
    .await;
    assert_eq!(checked, std::slice::from_ref(&tcp.id), "only the TCP rule");
    t.wait_event("checked", "LoadBalancerWarning", "UDP port 53")
        .await;
    t.stop().await;
}
