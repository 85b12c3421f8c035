//! Failures end to end: a CloudStack step that fails stops the plan with a Warning Event
//! naming the step, the IP is already recorded on the Service, and a retry (with backoff)
//! finishes the load balancer once CloudStack works again, without duplicates.

use crate::common;

use std::time::Duration;

use super::support::*;
use cloudstack_ccm::cloud::loadbalancer::annotations;
use cloudstack_sim::{ErrorFault, Faults, Scenario};

const NODES: [&str; 3] = ["node-1", "node-2", "node-3"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_step_is_reported_and_the_retry_finishes_the_job() {
    if common::skip_in_remote_mode("injects faults into the simulator") {
        return;
    }
    let t = LbTest::start(Scenario::small(), &NODES, Duration::from_secs(100)).await;
    let mut faults = Faults::default();
    faults.errors.insert(
        "assignToLoadBalancerRule".into(),
        ErrorFault {
            rate: 1.0,
            code: 530,
            text: Some("router is busy".into()),
        },
    );
    t.h.sim.set_faults(faults);
    t.create(&lb_service("flaky", &[("TCP", 80, 30080)])).await;

    let event = t
        .wait_event("flaky", "SyncLoadBalancerFailed", "router is busy")
        .await;
    let note = common::event_note(&event);
    assert!(note.contains("assign"), "the Event names the step: {note}");
    let service = t.get("flaky").await.expect("exists");
    assert!(
        annotation(&service, annotations::IP_ID.key).is_some(),
        "the IP was recorded before the failure"
    );
    assert_eq!(
        ingress_ip(&service),
        None,
        "no ingress before the load balancer works"
    );
    let failed = t.rules("flaky").await;
    assert_eq!(failed.len(), 1);
    assert!(failed[0].members.is_empty());

    t.h.sim.set_faults(Faults::default());
    let address = t.wait_for_ip("flaky").await;
    let rules = t
        .wait_rules("flaky", "have members", |r| {
            r.len() == 1 && r[0].members == NODES
        })
        .await;
    assert_eq!(
        rules[0].id, failed[0].id,
        "the rule made before the failure is kept"
    );
    let allocated = t.h.sim.with_state(|s| {
        s.ips
            .iter()
            .filter(|ip| ip.state == "Allocated" && !ip.source_nat)
            .count()
    });
    assert_eq!(allocated, 1, "one IP, no duplicate after the retry");
    assert_eq!(
        ip_id_of(&t.h, &address),
        annotation(
            &t.get("flaky").await.expect("exists"),
            annotations::IP_ID.key
        )
        .unwrap_or_default()
    );
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_annotation_is_reported_and_nothing_is_created() {
    let t = LbTest::start(Scenario::small(), &NODES, Duration::from_secs(100)).await;
    t.h.reset_cloudstack_counts();
    // Source ranges decide who may connect: a new load balancer with unreadable ones is
    // not built (other annotations fall back to their defaults, services::annotations).
    t.create(&with_annotations(
        lb_service("bad", &[("TCP", 80, 30080)]),
        &[(annotations::K8S_SOURCE_RANGES.key, "10.0.0.0/8,fastest")],
    ))
    .await;
    let event = t
        .wait_event(
            "bad",
            "SyncLoadBalancerFailed",
            annotations::K8S_SOURCE_RANGES.key,
        )
        .await;
    assert!(
        common::event_note(&event).contains("fastest"),
        "names the value: {}",
        common::event_note(&event)
    );
    settle().await;
    assert!(
        mutating_counts(&t.h).is_empty(),
        "{:?}",
        mutating_counts(&t.h)
    );
    assert!(
        !has_finalizer(&t.get("bad").await.expect("exists")),
        "no finalizer without a load balancer"
    );

    // Deleting it is not blocked by anything.
    t.delete("bad").await;
    t.wait_gone("bad").await;
    t.stop().await;
}
