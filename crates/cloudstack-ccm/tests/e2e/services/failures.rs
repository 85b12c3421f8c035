//! Failures end to end: a CloudStack step that fails stops the plan with a Warning Event
//! naming the step, the IP is already recorded on the Service, and a retry (with backoff)
//! finishes the load balancer once CloudStack works again, without duplicates. A role
//! that may not call the load-balancer policy commands reads as "no policy": a Service
//! whose rules the controller gave policies is still changed and deleted.

use crate::common;

use std::time::Duration;

use super::support::*;
use cloudstack_ccm::cloud::loadbalancer::annotations;
use cloudstack_sim::state::PolicyKind;
use cloudstack_sim::{ErrorFault, Faults, SMALL_NETSCALER_NETWORK, Scenario};

const NODES: [&str; 3] = ["node-1", "node-2", "node-3"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_step_is_reported_and_the_retry_finishes_the_job() {
    if common::skip_in_remote_mode("injects faults into the simulator") {
        return;
    }
    let t = LbTest::start(Scenario::small(), &NODES, Duration::from_secs(100)).await;
    t.h.expect_failing_calls();
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

/// The load-balancer policy commands, which a role allowing `*LoadBalancer*` does not
/// match (they are named `…LB…Policy…`).
const POLICY_LISTS: [&str; 2] = ["listLBStickinessPolicies", "listLBHealthCheckPolicies"];

/// CloudStack's answer to a command the account's role may not call: HTTP 401, errorcode
/// 401 (`cloudstack-api/API.md` §1.5).
fn not_allowed(command: &str) -> ErrorFault {
    ErrorFault {
        rate: 1.0,
        code: 401,
        text: Some(format!(
            "The given command '{command}' either does not exist, is not available for user."
        )),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_policy_lists_leave_policies_alone_and_changes_and_deletes_converge() {
    if common::skip_in_remote_mode("injects faults into the simulator") {
        return;
    }
    let resync = Duration::from_secs(100);
    // NetScaler: both policy kinds exist there.
    let mut scenario = Scenario::small();
    let vms = scenario.add_vms(SMALL_NETSCALER_NETWORK, "ns-node-", 2);
    let nodes: Vec<&str> = vms.iter().map(String::as_str).collect();
    let t = LbTest::prepare(scenario, &nodes, resync).await;
    t.h.expect_failing_calls();
    let policies = [
        (annotations::STICKINESS_METHOD.key, "SourceBased"),
        (annotations::HEALTH_CHECK_PATH.key, "/ready"),
    ];
    let first = OwnController::start(&t, resync);
    for (name, node_port) in [("changed", 30080), ("deleted", 30081), ("kept", 30082)] {
        t.create(&with_annotations(
            lb_service(name, &[("TCP", 80, node_port)]),
            &policies,
        ))
        .await;
    }
    let policy_rules = |kind: PolicyKind| {
        t.h.sim.with_state(|s| {
            let mut rules: Vec<String> = s
                .policies
                .iter()
                .filter(|p| p.kind == kind)
                .map(|p| p.rule_id.clone())
                .collect();
            rules.sort();
            rules
        })
    };
    let mut rule_ids = Vec::new();
    for name in ["changed", "deleted", "kept"] {
        let rules = t
            .wait_rules(name, "has members", |r| {
                r.len() == 1 && r[0].members == nodes
            })
            .await;
        rule_ids.push(rules[0].id.clone());
    }
    rule_ids.sort();
    common::eventually("each rule has both policies", common::WAIT, || async {
        (policy_rules(PolicyKind::Stickiness) == rule_ids
            && policy_rules(PolicyKind::HealthCheck) == rule_ids)
            .then_some(())
    })
    .await;
    let deleted_uid = t.uid("deleted").await;
    let deleted_ip = ip_id_of(&t.h, &t.wait_for_ip("deleted").await);
    first.stop().await;

    // The account's role loses the policy lists (it may still create and delete them);
    // meanwhile one Service drops its policies and gains a port, one is deleted, one keeps
    // its policies (which cannot be read now, and must not be created a second time).
    let mut faults = Faults::default();
    for command in POLICY_LISTS {
        faults.errors.insert(command.into(), not_allowed(command));
    }
    t.h.sim.set_faults(faults);
    let mut change = ports_patch(&[("TCP", 80, 30080), ("TCP", 443, 30443)]);
    change["metadata"]["annotations"] = serde_json::json!({
        annotations::STICKINESS_METHOD.key: null,
        annotations::HEALTH_CHECK_PATH.key: null,
    });
    t.patch("changed", change).await;
    t.delete("deleted").await;

    // A new process: no cache, so the rules' policies are asked for (the rules' tags say
    // the controller made some) and refused.
    let since = sim_now_ms();
    let second = OwnController::start(&t, resync);
    t.wait_gone("deleted").await;
    assert!(t.rules_of_uid(&deleted_uid).is_empty(), "rules deleted");
    assert_eq!(
        ip_state(&t.h, &deleted_ip).as_deref(),
        Some("Free"),
        "IP released"
    );
    t.wait_rules("changed", "have the new port with members", |r| {
        r.len() == 2 && r.iter().all(|r| r.members == nodes)
    })
    .await;
    settle().await;

    let failed = failing_calls(&t.h, since);
    for list in ["listLBStickinessPolicies", "listLBHealthCheckPolicies"] {
        assert!(
            failed.iter().any(|f| f.starts_with(&format!("{list}: "))),
            "{list} was asked for and refused: {failed:?}"
        );
    }
    assert!(
        failed.iter().all(|f| f.starts_with("listLB")),
        "only the policy lists were refused; nothing else failed: {failed:?}"
    );
    t.wait_rules("kept", "keeps its rule", |r| {
        r.len() == 1 && r[0].members == nodes
    })
    .await;
    for name in ["changed", "deleted", "kept"] {
        let seen = reasons(&t, name);
        assert!(
            !seen.iter().any(|r| r == "SyncLoadBalancerFailed"),
            "{name}: no failure: {seen:?}"
        );
    }
    second.stop().await;
    t.stop().await;
}
