//! An address whose association has not completed (state `Allocating`: its job still runs,
//! or a crash came between associate and record) is not built on: CloudStack refuses a rule
//! on it (`createPublicLoadBalancer`: not `readyToUse()`, 431). The controller waits for the
//! association and then serves the Service, with no failing call.

use crate::common;

use std::time::Duration;

use super::support::*;
use cloudstack_sim::Scenario;

const NODES: [&str; 2] = ["node-1", "node-2"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_wait_until_the_address_association_completes() {
    if common::skip_in_remote_mode("slows the simulator's association job") {
        return;
    }
    let t = LbTest::start(Scenario::small(), &NODES, Duration::from_secs(100)).await;
    // The user associates an address, and its job takes 3 s.
    t.h.sim.set_job_duration(Duration::from_secs(3));
    let started = t
        .client_of(common::ACCOUNT)
        .associate_ip_address_begin(&cloudstack::AssociateIpAddress {
            networkid: Some(t.network_id(cloudstack_sim::SMALL_NETWORK)),
            ..Default::default()
        })
        .await
        .expect("associateIpAddress starts");
    t.h.sim.set_job_duration(Duration::from_millis(2));
    let ip_id = started.id.clone().expect("the address id");
    let (address, state) = t.h.sim.with_state(|s| {
        let ip = s.ips.iter().find(|ip| ip.id == ip_id).expect("the address");
        (ip.address.clone(), ip.state.clone())
    });
    assert_eq!(state, "Allocating");

    // A Service asks for it meanwhile.
    let mut service = lb_service("web", &[("TCP", 80, 30080)]);
    service.spec.as_mut().expect("spec").load_balancer_ip = Some(address.clone());
    t.create(&service).await;
    let served = t
        .wait_for("web", "has the requested address", |s| {
            ingress_ip(s).as_deref() == Some(address.as_str())
        })
        .await;
    assert!(ingress_ip(&served).is_some());
    t.wait_rules("web", "stand with members", |r| {
        r.len() == 1 && r[0].members.len() == 2
    })
    .await;
    let refused: Vec<String> = failing_calls(&t.h, 0);
    assert!(
        refused.is_empty(),
        "no rule was tried on the address early: {refused:#?}"
    );
    t.stop().await;
}
