//! A port the network's load-balancer provider refuses, end to end: found from what the
//! network tells (its provider and capabilities) before any public IP is taken, with a
//! Warning Event naming the port.

mod common;
mod services_common;

use std::time::Duration;

use cloudstack_sim::Scenario;
use services_common::*;

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
