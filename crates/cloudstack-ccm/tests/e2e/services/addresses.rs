//! Public IPs of LoadBalancer Services end to end: a requested address that is free,
//! already ours, or someone else's; `keep-ip`; two Services sharing one address. In remote
//! mode (see `common::target`) addresses a test keeps are released at its end.

use crate::common;

use std::time::Duration;

use super::support::*;
use cloudstack::{AssociateIpAddress, DisassociateIpAddress};
use cloudstack_ccm::cloud::loadbalancer::annotations;
use cloudstack_sim::{SMALL_ZONE, Scenario};

const NODES: [&str; 3] = ["node-1", "node-2", "node-3"];
const RESYNC: Duration = Duration::from_secs(100);

/// In remote mode, releases address `ip_id` that the test kept (no leak on a real cloud).
async fn release_in_remote_mode(t: &LbTest, ip_id: &str) {
    if t.h.is_remote() {
        let request = DisassociateIpAddress {
            id: ip_id.to_string(),
            ..Default::default()
        };
        t.client_of(common::ACCOUNT)
            .disassociate_ip_address(&request)
            .await
            .expect("releasing the kept address");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_free_requested_address_is_associated_and_released() {
    if common::skip_in_remote_mode("requests a free address of the simulator's pool") {
        return;
    }
    let t = LbTest::start(Scenario::small(), &NODES, RESYNC).await;
    let wanted = "203.0.113.150";
    t.create(&with_annotations(
        lb_service("fixed", &[("TCP", 80, 30080)]),
        &[(annotations::ADDRESS.key, wanted)],
    ))
    .await;
    assert_eq!(t.wait_for_ip("fixed").await, wanted);
    let ip_id = ip_id_of(&t.h, wanted);
    let service = t.get("fixed").await.expect("exists");
    assert_eq!(
        annotation(&service, annotations::IP_ID.key),
        Some(ip_id.as_str())
    );
    t.delete("fixed").await;
    t.wait_gone("fixed").await;
    assert_eq!(
        ip_state(&t.h, &ip_id).as_deref(),
        Some("Free"),
        "we associated it, so we release it"
    );
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_already_ours_is_used_and_kept() {
    let t = LbTest::start(Scenario::small(), &NODES, RESYNC).await;
    let request = AssociateIpAddress {
        networkid: Some(t.h.vm("node-1").network_id),
        ..Default::default()
    };
    let ip = t
        .client_of("alice")
        .associate_ip_address(&request)
        .await
        .expect("associate by hand");
    let address = ip.ipaddress.expect("address");
    let ip_id = ip.id.expect("id");
    let mut service = lb_service("mine", &[("TCP", 80, 30080)]);
    service.spec.as_mut().expect("spec").load_balancer_ip = Some(address.clone());
    t.create(&service).await;
    assert_eq!(t.wait_for_ip("mine").await, address);
    let service = t.get("mine").await.expect("exists");
    assert_eq!(
        annotation(&service, annotations::IP_ASSOCIATED_BY_CONTROLLER.key),
        None
    );
    let uid = t.uid("mine").await;
    t.h.reset_cloudstack_counts();
    t.delete("mine").await;
    t.wait_gone("mine").await;
    assert!(t.rules_of_uid(&uid).is_empty(), "rules deleted");
    assert_eq!(
        ip_state(&t.h, &ip_id).as_deref(),
        Some("Allocated"),
        "the user's IP is never released"
    );
    assert_eq!(mutating_counts(&t.h).get("disassociateIpAddress"), None);
    release_in_remote_mode(&t, &ip_id).await;
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_of_another_account_is_refused_without_change() {
    if common::skip_in_remote_mode("needs the keys of a second account (the simulator's bob)") {
        return;
    }
    let t = LbTest::start(Scenario::small(), &NODES, RESYNC).await;
    let zone_id = t.h.sim.with_state(|s| {
        s.zones
            .iter()
            .find(|z| z.name == SMALL_ZONE)
            .map(|z| z.id.clone())
            .expect("zone")
    });
    let request = AssociateIpAddress {
        zoneid: Some(zone_id),
        ..Default::default()
    };
    let theirs = t
        .client_of("bob")
        .associate_ip_address(&request)
        .await
        .expect("bob takes an IP");
    let address = theirs.ipaddress.expect("address");
    t.h.sim.reset_counts();
    t.create(&with_annotations(
        lb_service("steal", &[("TCP", 80, 30080)]),
        &[(annotations::ADDRESS.key, &address)],
    ))
    .await;
    let event = t
        .wait_event("steal", "SyncLoadBalancerFailed", &address)
        .await;
    assert_eq!(event["type"], "Warning");
    settle().await;
    assert!(
        mutating_counts(&t.h).is_empty(),
        "no change: {:?}",
        mutating_counts(&t.h)
    );
    assert_eq!(ingress_ip(&t.get("steal").await.expect("exists")), None);
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_ip_keeps_the_address_after_delete() {
    let t = LbTest::start(Scenario::small(), &NODES, RESYNC).await;
    t.create(&with_annotations(
        lb_service("sticky", &[("TCP", 80, 30080)]),
        &[(annotations::KEEP_IP.key, "true")],
    ))
    .await;
    let address = t.wait_for_ip("sticky").await;
    let ip_id = ip_id_of(&t.h, &address);
    let uid = t.uid("sticky").await;
    t.delete("sticky").await;
    t.wait_gone("sticky").await;
    assert!(t.rules_of_uid(&uid).is_empty(), "rules deleted");
    assert_eq!(
        ip_state(&t.h, &ip_id).as_deref(),
        Some("Allocated"),
        "keep-ip keeps the IP"
    );
    release_in_remote_mode(&t, &ip_id).await;
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_services_share_one_address_on_different_ports() {
    let t = LbTest::start(Scenario::small(), &NODES, RESYNC).await;
    t.create(&lb_service("http", &[("TCP", 80, 30080)])).await;
    let address = t.wait_for_ip("http").await;
    let ip_id = ip_id_of(&t.h, &address);
    t.create(&with_annotations(
        lb_service("smtp", &[("TCP", 25, 30025)]),
        &[(annotations::ADDRESS.key, &address)],
    ))
    .await;
    assert_eq!(t.wait_for_ip("smtp").await, address);
    let smtp_rules = t
        .wait_rules("smtp", "exist", |r| r.len() == 1 && r[0].members.len() == 3)
        .await;
    assert_eq!(smtp_rules[0].ip_id, ip_id);

    // The first Service goes; the address stays for the second.
    let http_uid = t.uid("http").await;
    t.delete("http").await;
    t.wait_gone("http").await;
    assert!(t.rules_of_uid(&http_uid).is_empty());
    assert_eq!(
        ip_state(&t.h, &ip_id).as_deref(),
        Some("Allocated"),
        "still used by smtp"
    );
    assert_eq!(t.rules("smtp").await.len(), 1);

    // A port held by the other Service is refused with a clear Event.
    t.create(&with_annotations(
        lb_service("clash", &[("TCP", 25, 30026)]),
        &[(annotations::ADDRESS.key, &address)],
    ))
    .await;
    t.wait_event("clash", "SyncLoadBalancerFailed", "25").await;

    t.delete("clash").await;
    t.delete("smtp").await;
    t.wait_gone("smtp").await;
    t.wait_gone("clash").await;
    assert_eq!(
        ip_state(&t.h, &ip_id).as_deref(),
        Some("Free"),
        "released with its last rule"
    );
    t.stop().await;
}
