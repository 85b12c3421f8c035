//! Two Services on one port of a VPC tier, end to end: each keeps its own ACL item with
//! its own source ranges, and deleting one never closes the port for the other.

use crate::common;

use std::time::Duration;

use super::support::*;
use cloudstack_sim::{SMALL_ACL, SMALL_TIER, Scenario};

/// A Service on port 80 allowing `range`.
fn ranged(name: &str, node_port: i32, range: &str) -> k8s_openapi::api::core::v1::Service {
    let mut service = lb_service(name, &[("TCP", 80, node_port)]);
    service
        .spec
        .as_mut()
        .expect("spec")
        .load_balancer_source_ranges = Some(vec![range.to_string()]);
    service
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_services_on_one_port_each_keep_their_acl_item() {
    let mut scenario = Scenario::small();
    let vms = scenario.add_vms(SMALL_TIER, "vpc-node-", 2);
    let names: Vec<&str> = vms.iter().map(String::as_str).collect();
    let t = LbTest::start(scenario, &names, Duration::from_secs(100)).await;
    let acl_id = t.h.sim.with_state(|s| {
        s.acl_lists
            .iter()
            .find(|a| a.name == SMALL_ACL)
            .map(|a| a.id.clone())
            .expect("acl")
    });
    // (port, CIDRs, reason) of the list's items, sorted.
    let items = || {
        t.h.sim.with_state(|s| {
            let mut items: Vec<(i64, Vec<String>, String)> = s
                .acl_items
                .iter()
                .filter(|i| i.acl_id == acl_id)
                .map(|i| {
                    (
                        i.start_port.unwrap_or(-1),
                        i.cidrs.clone(),
                        i.reason.clone().unwrap_or_default(),
                    )
                })
                .collect();
            items.sort();
            items
        })
    };

    t.create(&ranged("first", 30080, "198.51.100.0/24")).await;
    t.wait_for_ip("first").await;
    t.create(&ranged("second", 30081, "203.0.113.0/24")).await;
    t.wait_for_ip("second").await;
    let both = common::eventually("both ranges are admitted", common::WAIT, || async {
        let items = items();
        (items.len() == 2).then_some(items)
    })
    .await;
    let ranges: Vec<&[String]> = both.iter().map(|i| i.1.as_slice()).collect();
    assert_eq!(
        ranges,
        [
            ["198.51.100.0/24".to_string()],
            ["203.0.113.0/24".to_string()]
        ],
        "{both:?}"
    );
    assert!(both.iter().all(|i| i.0 == 80));
    let second_uid = t.uid("second").await;
    let second_lb = cloudstack_ccm::cloud::loadbalancer::vocabulary::default_lb_name(&second_uid);
    assert!(
        both.iter()
            .any(|i| i.1 == ["203.0.113.0/24"] && i.2.contains(&second_lb)),
        "the second Service's item is its own: {both:?}"
    );
    t.wait_event("second", "LoadBalancerWarning", "198.51.100.0/24")
        .await;

    // Deleting the first leaves the second's port open to its ranges.
    t.delete("first").await;
    t.wait_gone("first").await;
    let left = items();
    assert_eq!(
        left,
        [(80, vec!["203.0.113.0/24".to_string()], both[1].2.clone())],
        "{left:?}"
    );

    t.delete("second").await;
    t.wait_gone("second").await;
    assert!(items().is_empty(), "{:?}", items());
    t.stop().await;
}
