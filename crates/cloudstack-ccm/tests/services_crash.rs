//! Crash safety of the IP lifecycle: the public IP id is on the Service before its
//! association finishes, so a controller killed right then leaks nothing: the next one
//! finds the IP by id and finishes the load balancer with it.

mod common;
mod services_common;

use std::time::Duration;

use cloudstack_ccm::cloud::loadbalancer::annotations;
use cloudstack_ccm::controllers::service;
use cloudstack_ccm::controllers::shutdown_channel;
use cloudstack_sim::Scenario;
use services_common::*;

const NODES: [&str; 3] = ["node-1", "node-2", "node-3"];
const RESYNC: Duration = Duration::from_secs(100);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_killed_during_ip_association_leaks_nothing() {
    let t = LbTest::prepare(Scenario::small(), &NODES, RESYNC).await;
    t.h.sim.set_job_duration(Duration::from_millis(400));
    let allocated = || {
        t.h.sim.with_state(|s| {
            s.ips
                .iter()
                .filter(|ip| ip.owner.is_some() && !ip.source_nat)
                .count()
        })
    };
    let before = allocated();

    let (_first_trigger, first_shutdown) = shutdown_channel();
    let first = tokio::spawn(service::run_with(
        t.h.ctx.clone(),
        fast_settings(RESYNC),
        first_shutdown,
    ));
    t.create(&lb_service("crashy", &[("TCP", 80, 30080)])).await;
    let service = t
        .wait_for("crashy", "has its IP id recorded", |s| {
            annotation(s, annotations::IP_ID.key).is_some()
        })
        .await;
    // Killed while the association job still runs (it takes 400 ms).
    first.abort();
    let recorded = annotation(&service, annotations::IP_ID.key)
        .expect("recorded")
        .to_string();
    assert!(
        ingress_ip(&service).is_none(),
        "killed before the load balancer was done"
    );

    t.h.sim.set_job_duration(Duration::from_millis(2));
    let (second_trigger, second_shutdown) = shutdown_channel();
    let second = tokio::spawn(service::run_with(
        t.h.ctx.clone(),
        fast_settings(RESYNC),
        second_shutdown,
    ));
    let address = t.wait_for_ip("crashy").await;
    assert_eq!(
        ip_id_of(&t.h, &address),
        recorded,
        "the recorded IP is used"
    );
    let rules = t
        .wait_rules("crashy", "exist", |r| {
            r.len() == 1 && r[0].members.len() == 3
        })
        .await;
    assert_eq!(rules[0].ip_id, recorded);
    assert_eq!(allocated(), before + 1, "exactly one IP for the Service");

    t.delete("crashy").await;
    t.wait_gone("crashy").await;
    assert_eq!(allocated(), before, "released on delete");
    second_trigger.trigger();
    tokio::time::timeout(common::WAIT, second)
        .await
        .expect("stops")
        .expect("no panic")
        .expect("clean stop");
    t.stop().await;
}
