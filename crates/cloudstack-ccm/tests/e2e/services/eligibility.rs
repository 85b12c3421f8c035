//! Which Nodes serve a load balancer, end to end: the exclusion label by its presence,
//! no failure and no Warning while the Nodes are still initialising, and a load balancer that keeps its
//! members (with a Warning) when no Node is eligible any more.

use crate::common;

use std::time::Duration;

use super::support::*;
use cloudstack_sim::Scenario;
use kube::api::{Patch, PatchParams};

const NODES: [&str; 3] = ["node-1", "node-2", "node-3"];
const EXCLUDE_LABEL: &str = "node.kubernetes.io/exclude-from-external-load-balancers";

/// Sets label `key=value` on Node `name`.
async fn label_node(t: &LbTest, name: &str, key: &str, value: &str) {
    let patch = serde_json::json!({ "metadata": { "labels": { key: value } } });
    t.h.nodes()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("labelling node {name}: {e}"));
}

/// The Warning Events about `name`, as `reason: note`.
fn warnings(t: &LbTest, name: &str) -> Vec<String> {
    t.h.events_about(name)
        .iter()
        .filter(|e| e.get("type").and_then(|v| v.as_str()) == Some("Warning"))
        .map(|e| {
            format!(
                "{}: {}",
                common::event_reason(e).unwrap_or_default(),
                common::event_note(e)
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exclusion_label_excludes_whatever_its_value() {
    let mut t = LbTest::prepare(Scenario::small(), &NODES, Duration::from_secs(100)).await;
    // Kubernetes' service controller reads the label's presence: "false" excludes too.
    // Labelled before the controller starts, so its first view of the Nodes has them (a
    // label set later is seen when its watch event arrives, as in any controller).
    label_node(&t, "node-2", EXCLUDE_LABEL, "false").await;
    label_node(&t, "node-3", EXCLUDE_LABEL, "").await;
    t.start_controller(Duration::from_secs(100));
    t.create(&lb_service("web", &[("TCP", 80, 30080)])).await;
    t.wait_for_ip("web").await;
    let rules = t
        .wait_rules("web", "have members", |r| {
            r.len() == 1 && !r[0].members.is_empty()
        })
        .await;
    common::eventually("only node-1 serves", common::WAIT, || async {
        let rules = t.rules("web").await;
        (rules[0].members == ["node-1"]).then_some(())
    })
    .await;
    assert_eq!(
        rules[0].members,
        ["node-1"],
        "labelled Nodes are never members"
    );
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_failure_while_the_nodes_are_still_initialising() {
    let mut t = LbTest::prepare(Scenario::small(), &[], Duration::from_secs(100)).await;
    // As the kubelet registers them: the uninitialized taint, no providerID yet.
    for name in NODES {
        t.h.create_node(common::TestNode::new(name).ready(true))
            .await;
    }
    t.start_controller(Duration::from_secs(100));
    t.create(&lb_service("web", &[("TCP", 80, 30080)])).await;
    // The controller has taken the Service up (the finalizer goes on just before the
    // load balancer is looked at) and had time to look at the Nodes.
    t.wait_for("web", "has the finalizer", has_finalizer).await;
    settle().await;
    let early = warnings(&t, "web");
    assert!(
        early.is_empty(),
        "no Warning while the Nodes initialise: {early:?}"
    );
    assert!(
        t.rules("web").await.is_empty(),
        "nothing built before a Node is eligible"
    );
    // The cloud-node controller initialises them.
    for name in NODES {
        let patch = serde_json::json!({ "spec": {
            "providerID": format!("external-cloudstack://{}", t.h.vm_id(name)),
            "taints": null,
        } });
        t.h.nodes()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("initialising node {name}: {e}"));
    }
    t.wait_for_ip("web").await;
    t.wait_rules("web", "have three members", |r| {
        r.len() == 1 && r[0].members == NODES
    })
    .await;
    t.wait_event("web", "EnsuredLoadBalancer", "").await;
    let seen = reasons(&t, "web");
    assert!(
        !seen.iter().any(|r| r == "SyncLoadBalancerFailed"),
        "no failure while Nodes initialise: {seen:?}"
    );
    // Neither `UnAvailableLoadBalancer` nor any other Warning, then or since.
    let warned = warnings(&t, "web");
    assert!(
        warned.is_empty(),
        "no Warning while Nodes initialise: {warned:?}"
    );
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_eligible_node_keeps_the_members_with_a_warning() {
    let t = LbTest::start(Scenario::small(), &NODES, Duration::from_millis(300)).await;
    t.create(&lb_service(
        "web",
        &[("TCP", 80, 30080), ("TCP", 443, 30443)],
    ))
    .await;
    t.wait_for_ip("web").await;
    t.wait_rules("web", "have three members", |r| {
        r.len() == 2 && r.iter().all(|r| r.members == NODES)
    })
    .await;
    for name in NODES {
        label_node(&t, name, EXCLUDE_LABEL, "true").await;
    }
    let warning = t
        .wait_event("web", "UnAvailableLoadBalancer", "no available nodes")
        .await;
    assert_eq!(
        warning.get("type").and_then(|v| v.as_str()),
        Some("Warning"),
        "{warning}"
    );
    // The Nodes were labelled one by one, so a resync in between may have left only the
    // last one; what counts is that the members at the moment none was eligible stay.
    let kept = t.rules("web").await;
    assert!(
        kept.iter().all(|r| !r.members.is_empty()),
        "members kept when no Node is eligible: {kept:?}"
    );
    // Several resyncs later the members are still there.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let rules = t.rules("web").await;
    assert_eq!(rules.len(), 2);
    assert!(
        rules
            .iter()
            .zip(&kept)
            .all(|(now, then)| now.members == then.members),
        "members kept: {rules:?}, were {kept:?}"
    );

    // A Node comes back: members follow it again.
    let patch = serde_json::json!({ "metadata": { "labels": { EXCLUDE_LABEL: null } } });
    t.h.nodes()
        .patch("node-1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("unlabel node-1");
    t.wait_rules("web", "follow node-1 alone", |r| {
        r.iter().all(|r| r.members == ["node-1"])
    })
    .await;

    // Being deleted, the Service's load balancer goes whatever the Nodes.
    for name in NODES {
        label_node(&t, name, EXCLUDE_LABEL, "true").await;
    }
    let uid = t.uid("web").await;
    t.delete("web").await;
    t.wait_gone("web").await;
    assert!(t.rules_of_uid(&uid).is_empty(), "rules deleted");
    t.stop().await;
}
