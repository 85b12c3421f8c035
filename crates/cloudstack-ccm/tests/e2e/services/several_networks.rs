//! Nodes on several networks, end to end: a load balancer serves one network — the one
//! its network annotation names, else the one holding the most eligible Nodes — and the
//! Nodes elsewhere are left out with a Warning Event naming them.

use crate::common;

use std::time::Duration;

use super::support::*;
use cloudstack_ccm::cloud::loadbalancer::annotations;
use cloudstack_sim::{SMALL_NETSCALER_NETWORK, SMALL_NETWORK, Scenario};

const RESYNC: Duration = Duration::from_secs(100);

/// Three Nodes on the VR network and two on the NetScaler network.
async fn start() -> (LbTest, Vec<String>) {
    let mut scenario = Scenario::small();
    let others = scenario.add_vms(SMALL_NETSCALER_NETWORK, "ns-node-", 2);
    let mut names = vec!["node-1", "node-2", "node-3"];
    names.extend(others.iter().map(String::as_str));
    let t = LbTest::start(scenario, &names, RESYNC).await;
    (t, others)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_network_holding_most_nodes_serves_and_the_others_are_named() {
    let (t, others) = start().await;
    t.create(&lb_service("web", &[("TCP", 80, 30080)])).await;
    t.wait_for_ip("web").await;
    let rules = t
        .wait_rules("web", "have the VR network's nodes", |r| {
            r.len() == 1 && r[0].members == ["node-1", "node-2", "node-3"]
        })
        .await;
    assert_eq!(rules[0].network_id, t.network_id(SMALL_NETWORK));
    let warning = t.wait_event("web", "LoadBalancerWarning", &others[0]).await;
    let note = common::event_note(&warning);
    assert!(note.contains(&others[1]), "{note}");
    for served in ["node-1", "node-2", "node-3"] {
        assert!(
            !note.contains(&format!(" {served} (")),
            "{served} serves, it is not left out: {note}"
        );
    }
    let recorded = t.get("web").await.expect("the Service");
    assert_eq!(
        annotation(&recorded, annotations::NETWORK_ID.key),
        Some(t.network_id(SMALL_NETWORK).as_str()),
        "the chosen network is recorded"
    );
    let seen: Vec<String> =
        t.h.events_about("web")
            .iter()
            .filter_map(|e| common::event_reason(e).map(str::to_string))
            .collect();
    assert!(
        !seen.iter().any(|r| r == "SyncLoadBalancerFailed"),
        "{seen:?}"
    );
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_network_annotation_chooses_the_network() {
    let (t, others) = start().await;
    let netscaler = t.network_id(SMALL_NETSCALER_NETWORK);
    t.create(&with_annotations(
        lb_service("ns", &[("TCP", 80, 30080)]),
        &[(annotations::NETWORK_ID.key, &netscaler)],
    ))
    .await;
    t.wait_for_ip("ns").await;
    let rules = t
        .wait_rules("ns", "have the NetScaler network's nodes", |r| {
            r.len() == 1 && r[0].members == others
        })
        .await;
    assert_eq!(rules[0].network_id, netscaler);
    let warning = t.wait_event("ns", "LoadBalancerWarning", "node-1").await;
    let note = common::event_note(&warning);
    assert!(note.contains("node-2") && note.contains("node-3"), "{note}");
    t.stop().await;
}
