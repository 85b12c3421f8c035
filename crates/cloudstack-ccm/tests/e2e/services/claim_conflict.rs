//! One address, two Services that each believe they hold it: what a leader cut off from
//! the API server leaves behind while a new leader works (a claim written by the old
//! leader, an address associated by the new one, each process with its own picks). The
//! address goes to exactly one Service, the other claims a new one, and nothing leaks.

use crate::common;

use std::time::Duration;

use super::support::*;
use cloudstack::AssociateIpAddress;
use cloudstack_ccm::cloud::loadbalancer::annotations;
use cloudstack_sim::state::Owner;
use cloudstack_sim::{SMALL_NETWORK, Scenario};

const NODES: [&str; 2] = ["node-1", "node-2"];
const RESYNC: Duration = Duration::from_secs(100);
const SERVICE_UID_TAG: &str = "cloudstack-ccm/service-uid";

/// An address associated to the account with nothing on it and no tag: what a process
/// stopped right after `associateIpAddress` leaves. Returns the address and its id.
async fn associated_untagged(t: &LbTest) -> (String, String) {
    let request = AssociateIpAddress {
        networkid: Some(t.network_id(SMALL_NETWORK)),
        ..Default::default()
    };
    let ip = t
        .client_of(common::ACCOUNT)
        .associate_ip_address(&request)
        .await
        .expect("associate");
    (ip.ipaddress.expect("address"), ip.id.expect("id"))
}

/// The addresses (not source NAT) allocated to the test account, sorted.
fn owned(t: &LbTest) -> Vec<String> {
    let mut owned: Vec<String> = t.h.sim.with_state(|s| {
        s.ips
            .iter()
            .filter(|ip| !ip.source_nat)
            .filter(|ip| ip.owner == Some(Owner::Account(common::ACCOUNT.to_string())))
            .map(|ip| ip.address.clone())
            .collect()
    });
    owned.sort();
    owned
}

/// The Service UID tagged on IP `ip_id`, if any.
fn owner_tag(t: &LbTest, ip_id: &str) -> Option<String> {
    t.h.sim.with_state(|s| {
        s.tags
            .iter()
            .find(|tag| tag.resource_id == ip_id && tag.key == SERVICE_UID_TAG)
            .map(|tag| tag.value.clone())
    })
}

/// A Service on `port` whose claim names `address` (written by an earlier leader).
fn claiming(name: &str, port: i32, address: &str) -> k8s_openapi::api::core::v1::Service {
    with_annotations(
        lb_service(name, &[("TCP", port, 30000 + port)]),
        &[(annotations::IP_CLAIM.key, address)],
    )
}

/// A Service on `port` that associated `address` (id `id`) and recorded it, and was
/// stopped before it built anything on it.
fn recording(
    name: &str,
    port: i32,
    address: &str,
    id: &str,
) -> k8s_openapi::api::core::v1::Service {
    with_annotations(
        lb_service(name, &[("TCP", port, 30000 + port)]),
        &[
            (annotations::IP_CLAIM.key, address),
            (annotations::IP_ID.key, id),
            (annotations::IP_ASSOCIATED_BY_CONTROLLER.key, "true"),
        ],
    )
}

/// Deletes both Services and checks that every address they held went back.
async fn delete_both(t: &LbTest, names: [&str; 2], before: &[String]) {
    for name in names {
        t.delete(name).await;
        t.wait_gone(name).await;
    }
    assert_eq!(owned(t), before, "every address released, none leaked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_never_keeps_an_address_another_service_took() {
    if common::skip_in_remote_mode("associates an address by hand and reads the simulator's tags") {
        return;
    }
    let mut t = LbTest::prepare(Scenario::small(), &NODES, RESYNC).await;
    let before = owned(&t);
    let (address, id) = associated_untagged(&t).await;
    // The old leader claimed the address for "claimer"; the new one associated it for
    // "recorder" (it was free again) and recorded it. "claimer" is served first.
    t.create(&claiming("claimer", 80, &address)).await;
    t.start_controller(RESYNC);
    assert_eq!(t.wait_for_ip("claimer").await, address, "adopted");
    t.wait_rules("claimer", "stand", |r| r.len() == 1).await;

    t.create(&recording("recorder", 81, &address, &id)).await;
    let moved = t.wait_for_ip("recorder").await;
    assert_ne!(
        moved, address,
        "a Service never builds on an address another Service took"
    );
    let recorder = t.get("recorder").await.expect("exists");
    let moved_id = ip_id_of(&t.h, &moved);
    assert_eq!(
        annotation(&recorder, annotations::IP_ID.key),
        Some(moved_id.as_str())
    );
    assert_eq!(
        annotation(&recorder, annotations::IP_CLAIM.key),
        Some(moved.as_str())
    );
    let rules = t
        .wait_rules("recorder", "stand on the new address", |r| {
            r.len() == 1 && r[0].members.len() == NODES.len()
        })
        .await;
    assert_eq!(rules[0].ip_id, moved_id);
    assert_eq!(owner_tag(&t, &moved_id), Some(t.uid("recorder").await));
    assert_eq!(
        owner_tag(&t, &id),
        Some(t.uid("claimer").await),
        "still the claimer's"
    );
    let claimer_rules = t.rules("claimer").await;
    assert!(claimer_rules.iter().all(|r| r.ip_id == id));

    let mut expected = before.clone();
    expected.extend([address.clone(), moved.clone()]);
    expected.sort();
    assert_eq!(owned(&t), expected, "one address per Service");
    delete_both(&t, ["recorder", "claimer"], &before).await;
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_services_whose_claims_name_one_address_end_on_two() {
    if common::skip_in_remote_mode("associates an address by hand and reads the simulator's tags") {
        return;
    }
    let mut t = LbTest::prepare(Scenario::small(), &NODES, RESYNC).await;
    t.h.expect_failing_calls();
    t.h.sim.set_job_duration(Duration::from_millis(100));
    let before = owned(&t);
    let (address, id) = associated_untagged(&t).await;
    // Both find the address allocated with nothing on it, at the same time.
    t.create(&claiming("left", 80, &address)).await;
    t.create(&recording("right", 81, &address, &id)).await;
    t.start_controller(RESYNC);
    let left = t.wait_for_ip("left").await;
    let right = t.wait_for_ip("right").await;
    assert_ne!(left, right, "one address, one Service");
    assert!(
        left == address || right == address,
        "the contested address went to one of them"
    );
    let holder = if left == address { "left" } else { "right" };
    assert_eq!(owner_tag(&t, &id), Some(t.uid(holder).await));
    for name in ["left", "right"] {
        let ip = t.wait_for_ip(name).await;
        let ip_id = ip_id_of(&t.h, &ip);
        let rules = t
            .wait_rules(name, "stand on its own address", |r| r.len() == 1)
            .await;
        assert_eq!(rules[0].ip_id, ip_id, "{name}'s rules on {name}'s address");
    }
    let mut expected = before.clone();
    expected.extend([left, right]);
    expected.sort();
    assert_eq!(owned(&t), expected, "one address per Service, nothing else");
    delete_both(&t, ["left", "right"], &before).await;
    t.stop().await;
}
