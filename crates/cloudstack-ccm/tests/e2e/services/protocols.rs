//! Protocols of LoadBalancer Services end to end: UDP where the provider has it
//! (NetScaler-like network) and refused where it does not (Virtual Router), and the
//! PROXY protocol switched on and off on a live Service. In remote mode (see
//! `common::target`) the environment's VMs are expected on a Virtual Router network.

use crate::common;

use std::time::Duration;

use super::support::*;
use cloudstack_ccm::cloud::loadbalancer::annotations;
use cloudstack_sim::{SMALL_NETSCALER_NETWORK, Scenario};

const NODES: [&str; 3] = ["node-1", "node-2", "node-3"];
const RESYNC: Duration = Duration::from_secs(100);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_is_refused_on_a_virtual_router_network_without_any_change() {
    let t = LbTest::start(Scenario::small(), &NODES, RESYNC).await;
    t.h.reset_cloudstack_counts();
    t.create(&lb_service(
        "dns",
        &[("TCP", 53, 30053), ("UDP", 5353, 30054)],
    ))
    .await;
    let event = t.wait_event("dns", "SyncLoadBalancerFailed", "udp").await;
    let note = common::event_note(&event);
    assert!(note.contains("5353"), "the Event names the port: {note}");
    assert_eq!(event["type"], "Warning");
    settle().await;
    assert!(
        mutating_counts(&t.h).is_empty(),
        "no CloudStack change: {:?}",
        mutating_counts(&t.h)
    );
    let service = t.get("dns").await.expect("exists");
    assert_eq!(ingress_ip(&service), None);
    assert!(t.rules("dns").await.is_empty());
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_and_udp_on_a_netscaler_network() {
    if common::skip_in_remote_mode("needs the simulator's NetScaler network and its VMs") {
        return;
    }
    let mut scenario = Scenario::small();
    let nodes = scenario.add_vms(SMALL_NETSCALER_NETWORK, "ns-", 2);
    let names: Vec<&str> = nodes.iter().map(String::as_str).collect();
    let t = LbTest::start(scenario, &names, RESYNC).await;
    t.create(&lb_service(
        "mixed",
        &[("TCP", 80, 30080), ("UDP", 514, 30514)],
    ))
    .await;
    let address = t.wait_for_ip("mixed").await;
    let rules = t
        .wait_rules("mixed", "have members", |r| {
            r.len() == 2 && r.iter().all(|r| r.members.len() == 2)
        })
        .await;
    let protocols: Vec<(&str, u16)> = rules
        .iter()
        .map(|r| (r.protocol.as_str(), r.public_port))
        .collect();
    assert_eq!(protocols, [("tcp", 80), ("udp", 514)]);
    let network_id = t.h.sim.with_state(|s| {
        s.networks
            .iter()
            .find(|n| n.name == SMALL_NETSCALER_NETWORK)
            .map(|n| n.id.clone())
            .expect("network")
    });
    assert!(rules.iter().all(|r| r.network_id == network_id));
    assert_eq!(rules[0].members, names);
    let ip_id = ip_id_of(&t.h, &address);
    let opened: Vec<(String, i64)> = firewall_rules(&t.h, &ip_id)
        .into_iter()
        .map(|f| (f.0, f.1))
        .collect();
    assert!(opened.contains(&("tcp".to_string(), 80)), "{opened:?}");
    assert!(opened.contains(&("udp".to_string(), 514)), "{opened:?}");
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_protocol_toggles_on_a_live_service() {
    let t = LbTest::start(Scenario::small(), &NODES, RESYNC).await;
    t.create(&lb_service(
        "ingress",
        &[("TCP", 80, 30080), ("TCP", 443, 30443)],
    ))
    .await;
    let address = t.wait_for_ip("ingress").await;
    let before = t.rules("ingress").await;
    assert!(before.iter().all(|r| r.protocol == "tcp"));

    t.patch("ingress", serde_json::json!({ "metadata": { "annotations": { annotations::PROXY_PROTOCOL.key: "true" } } }))
        .await;
    let proxied = t
        .wait_rules("ingress", "use tcp-proxy", |r| {
            r.len() == 2 && r.iter().all(|r| r.protocol == "tcp-proxy")
        })
        .await;
    assert!(
        proxied.iter().all(|r| r.name.contains("-tcp-proxy-")),
        "{proxied:#?}"
    );
    assert!(proxied.iter().all(|r| r.members == t.h.vm_names(&NODES)));
    let service = t
        .wait_for("ingress", "reports ipMode Proxy", |s| {
            ingress_ip_mode(s).as_deref() == Some("Proxy")
        })
        .await;
    assert_eq!(ingress_ip(&service).as_deref(), Some(address.as_str()));
    let ip_id = ip_id_of(&t.h, &address);
    let opened: Vec<(String, i64)> = firewall_rules(&t.h, &ip_id)
        .into_iter()
        .map(|f| (f.0, f.1))
        .collect();
    assert_eq!(
        opened,
        [("tcp".to_string(), 80), ("tcp".to_string(), 443)],
        "tcp-proxy opens tcp"
    );

    t.patch("ingress", serde_json::json!({ "metadata": { "annotations": { annotations::PROXY_PROTOCOL.key: "false" } } }))
        .await;
    let plain = t
        .wait_rules("ingress", "use tcp again", |r| {
            r.len() == 2 && r.iter().all(|r| r.protocol == "tcp")
        })
        .await;
    assert!(
        plain
            .iter()
            .all(|r| r.name.ends_with("-tcp-80") || r.name.ends_with("-tcp-443"))
    );
    t.wait_for("ingress", "drops ipMode Proxy", |s| {
        ingress_ip_mode(s).is_none()
    })
    .await;
    assert_eq!(
        t.wait_for_ip("ingress").await,
        address,
        "the address never changes"
    );
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hostname_annotation_replaces_the_ip_in_the_status() {
    let t = LbTest::start(Scenario::small(), &NODES, RESYNC).await;
    let service = with_annotations(
        lb_service("named", &[("TCP", 80, 30080)]),
        &[
            (annotations::HOSTNAME.key, "lb.example.com"),
            (annotations::PROXY_PROTOCOL.key, "true"),
        ],
    );
    t.create(&service).await;
    let service = t
        .wait_for("named", "reports the hostname", |s| {
            s.status
                .as_ref()
                .and_then(|st| st.load_balancer.as_ref())
                .and_then(|lb| lb.ingress.as_ref())
                .and_then(|ingress| ingress.first())
                .and_then(|entry| entry.hostname.as_deref())
                == Some("lb.example.com")
        })
        .await;
    assert_eq!(ingress_ip(&service), None, "no IP next to the hostname");
    let rules = t
        .wait_rules("named", "use tcp-proxy", |r| {
            r.len() == 1 && r[0].protocol == "tcp-proxy"
        })
        .await;
    assert_eq!(rules[0].members, t.h.vm_names(&NODES));
    t.stop().await;
}
