//! A port the network's load-balancer provider refuses, end to end: found from what the
//! network tells (its provider and capabilities) before any public IP is taken, with a
//! Warning Event naming the port.

use crate::common;

use std::time::Duration;

use super::support::*;
use cloudstack_sim::Scenario;

const NODES: [&str; 3] = ["node-1", "node-2", "node-3"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_virtual_routers_stats_port_is_refused_before_an_ip_is_taken() {
    let t = LbTest::start(Scenario::small(), &NODES, Duration::from_secs(100)).await;
    t.h.sim.reset_counts();
    // HAProxy on the Virtual Router listens on 8081 for its statistics: CloudStack
    // refuses a load-balancer rule there (HAProxyLBRule.validateHAProxyLBRule).
    t.create(&lb_service(
        "stats",
        &[("TCP", 80, 30080), ("TCP", 8081, 30081)],
    ))
    .await;
    let event = t
        .wait_event("stats", "SyncLoadBalancerFailed", "8081")
        .await;
    assert!(
        common::event_note(&event).contains("spec.ports[1]")
            || common::event_note(&event).contains("port 8081"),
        "{event}"
    );
    settle().await;
    assert_eq!(
        mutating_counts(&t.h),
        Default::default(),
        "no IP associated, nothing created"
    );
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ip_taken_for_a_refused_rule_is_released_again() {
    let t = LbTest::start(Scenario::small(), &NODES, Duration::from_secs(100)).await;
    t.h.expect_failing_calls();
    let allocated = || {
        t.h.sim.with_state(|s| {
            s.ips
                .iter()
                .filter(|ip| ip.state == "Allocated" && !ip.source_nat)
                .count()
        })
    };
    let before = allocated();
    // A refusal CloudStack does not announce in the network's capabilities.
    let mut faults = cloudstack_sim::Faults::default();
    faults.errors.insert(
        "createLoadBalancerRule".into(),
        cloudstack_sim::ErrorFault {
            rate: 1.0,
            code: 431,
            text: Some("LB service provider cannot support this rule".into()),
        },
    );
    t.h.sim.set_faults(faults);
    t.create(&lb_service("refused", &[("TCP", 80, 30080)]))
        .await;
    t.wait_event(
        "refused",
        "SyncLoadBalancerFailed",
        "cannot support this rule",
    )
    .await;
    let service = common::eventually("the IP is released again", common::WAIT, || async {
        let service = t.get("refused").await?;
        let recorded = annotation(
            &service,
            cloudstack_ccm::cloud::loadbalancer::annotations::IP_ID.key,
        );
        (allocated() == before && recorded.is_none()).then_some(service)
    })
    .await;
    assert!(ingress_ip(&service).is_none());

    // Once CloudStack accepts the rule, the Service gets its load balancer.
    t.h.sim.set_faults(cloudstack_sim::Faults::default());
    t.patch(
        "refused",
        serde_json::json!({ "metadata": { "labels": { "retry": "1" } } }),
    )
    .await;
    t.wait_for_ip("refused").await;
    assert_eq!(allocated(), before + 1);
    t.stop().await;
}
