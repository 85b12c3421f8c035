//! The controllers under RBAC, against the API server with RBAC enforced: with the
//! ClusterRole of the Go provider's manifest (what CloudStack Kubernetes Service
//! installs) and with `deploy/rbac.yaml`, the real `kube::Client` holding the
//! ServiceAccount's token takes the Lease, initialises Nodes, serves a LoadBalancer
//! Service and records its Events, routes a Node's pod CIDR (its `NetworkUnavailable`
//! condition on `nodes/status`) and deletes a Node whose VM is gone, without one 403. Events repeat as client-go's recorder
//! repeats them: the same message updates the count, a new message is a new Event, so
//! the newest Event names the current cause.

use crate::common;

use std::time::Duration;

use crate::services::support::{LbTest, fast_settings, lb_service, with_annotations};
use cloudstack_ccm::cloud::loadbalancer::annotations;
use cloudstack_ccm::controllers::route::{self, RouteSettings};
use cloudstack_ccm::controllers::{node, node_lifecycle, service};
use cloudstack_ccm::leader::{Attempt, LeaderElector, LeaderStatus, LeaseConfig};
use cloudstack_sim::{NicSpec, Scenario, VmSpec};
use common::{
    CONTROLLER_ACCOUNT, CONTROLLER_NAMESPACE, Harness, HarnessOptions, TestNode,
    UNINITIALIZED_TAINT, WAIT, eventually, has_taint, provider_id,
};
use kube::api::{Patch, PatchParams};
use serde::Deserialize;
use serde_json::{Value, json};

const NODES: [&str; 2] = ["node-1", "node-2"];

/// The ClusterRole of the Go provider (`apache/cloudstack-kubernetes-provider`), bound to
/// the controller's ServiceAccount, as CloudStack Kubernetes Service installs it.
pub(crate) fn go_provider_role() -> Vec<(String, Option<String>, Value)> {
    let rule = |groups: &[&str], resources: &[&str], verbs: &[&str]| json!({ "apiGroups": groups, "resources": resources, "verbs": verbs });
    let rules = json!([
        rule(
            &["coordination.k8s.io"],
            &["leases"],
            &["get", "create", "update"]
        ),
        rule(&[""], &["configmaps"], &["list", "watch"]),
        rule(&[""], &["events"], &["create", "patch", "update"]),
        rule(&[""], &["nodes"], &["*"]),
        rule(&[""], &["nodes/status"], &["patch"]),
        rule(&[""], &["pods"], &["list", "get"]),
        rule(
            &[""],
            &["services"],
            &["get", "list", "patch", "update", "watch"]
        ),
        rule(
            &[""],
            &["services/status"],
            &["list", "patch", "update", "watch"]
        ),
        rule(&[""], &["serviceaccounts"], &["create"]),
        rule(
            &[""],
            &["endpoints"],
            &["create", "get", "list", "watch", "update"]
        ),
        rule(&[""], &["persistentvolumes"], &["list", "watch", "patch"]),
    ]);
    vec![
        (
            "ClusterRole".into(),
            None,
            json!({ "metadata": { "name": "system:cloud-controller-manager" }, "rules": rules }),
        ),
        (
            "ClusterRoleBinding".into(),
            None,
            json!({
                "metadata": { "name": "system:cloud-controller-manager" },
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:cloud-controller-manager" },
                "subjects": [{ "kind": "ServiceAccount", "name": CONTROLLER_ACCOUNT, "namespace": CONTROLLER_NAMESPACE }],
            }),
        ),
    ]
}

/// The RBAC objects of `deploy/rbac.yaml` (the ServiceAccount exists already).
fn deploy_role() -> Vec<(String, Option<String>, Value)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/rbac.yaml");
    let text = std::fs::read_to_string(path).expect("deploy/rbac.yaml is readable");
    serde_yaml::Deserializer::from_str(&text)
        .map(|document| Value::deserialize(document).expect("deploy/rbac.yaml parses"))
        .filter(|object| !object.is_null() && object["kind"] != "ServiceAccount")
        .map(|object| {
            let namespace = object["metadata"]["namespace"].as_str().map(String::from);
            (
                object["kind"].as_str().unwrap_or("").to_string(),
                namespace,
                object,
            )
        })
        .collect()
}

/// Runs the controllers as the ServiceAccount bound by `objects` through a node's and a
/// Service's life, then checks that the API server refused nothing.
async fn controllers_run_without_a_403(objects: Vec<(String, Option<String>, Value)>) {
    let mut scenario = Scenario::small();
    scenario.settings.job_duration_ms = 2;
    // Static routes to a next hop need 4.22.
    scenario.version = cloudstack_sim::Version::parse("4.22").unwrap();
    let mut h = Harness::start_with(HarnessOptions {
        scenario,
        rbac: true,
        routes: RouteSettings {
            allocate_node_cidrs: true,
            reconciliation_period: Duration::from_millis(100),
            ..RouteSettings::default()
        },
        ..HarnessOptions::default()
    })
    .await;
    for (kind, namespace, object) in objects {
        h.apiserver
            .create(&kind, namespace.as_deref(), object)
            .unwrap_or_else(|e| panic!("creating the {kind}: {e}"));
    }

    // Leader election: get, create, update of the Lease.
    let mut elector = LeaderElector::new(
        h.ctx.kube.clone(),
        LeaseConfig::new(CONTROLLER_NAMESPACE, "cloud-controller-manager", "ccm-test"),
        LeaderStatus::new(),
    );
    for _ in 0..2 {
        let attempt = elector.try_acquire_or_renew().await.expect("Lease access");
        assert!(matches!(attempt, Attempt::Held), "{attempt:?}");
    }
    elector.release().await.expect("the Lease is released");

    h.spawn(node::run);
    h.spawn(node_lifecycle::run);
    let settings = fast_settings(Duration::from_secs(100));
    h.spawn(move |ctx, caches, shutdown| service::run_with(ctx, settings, caches, shutdown));
    for name in NODES {
        h.create_node(TestNode::new(name).ready(true)).await;
    }
    for name in NODES {
        let node = h
            .wait_for_node(name, "initialised", |n| {
                !has_taint(n, UNINITIALIZED_TAINT) && !provider_id(n).is_empty()
            })
            .await;
        assert!(provider_id(&node).starts_with("external-cloudstack://"));
        h.wait_for_event(name, "Synced").await;
    }

    let t = LbTest::from_harness(h);
    t.create(&lb_service("web", &[("TCP", 80, 30080)])).await;
    t.wait_for_ip("web").await;
    t.wait_event("web", "EnsuredLoadBalancer", "").await;

    // A bad annotation: the Warning repeats, patched in place (count), then a new cause.
    t.patch(
        "web",
        json!({ "metadata": { "annotations": { annotations::ALGORITHM.key: "fastest" } } }),
    )
    .await;
    t.wait_event("web", "LoadBalancerWarning", annotations::ALGORITHM.key)
        .await;
    // Another change of the Service reconciles it again: the same Warning repeats.
    t.patch(
        "web",
        json!({ "metadata": { "labels": { "touched": "yes" } } }),
    )
    .await;
    let repeated = eventually("the first cause counted twice", WAIT, || async {
        t.h.events_about("web").into_iter().find(|e| {
            common::event_reason(e) == Some("LoadBalancerWarning")
                && common::event_note(e).contains(annotations::ALGORITHM.key)
                && e["count"].as_i64().unwrap_or(0) >= 2
        })
    })
    .await;
    t.patch(
        "web",
        json!({ "metadata": { "annotations": {
            annotations::ALGORITHM.key: null,
            annotations::SOURCE_CIDRS.key: "300.1.2.3/8",
        } } }),
    )
    .await;
    t.wait_event("web", "LoadBalancerWarning", annotations::SOURCE_CIDRS.key)
        .await;
    assert_eq!(
        repeated["apiVersion"], "v1",
        "posted through the core API: {repeated}"
    );

    t.delete("web").await;
    t.wait_gone("web").await;
    t.wait_event("web", "DeletedLoadBalancer", "").await;

    // A Node on a VPC tier with a pod CIDR: the route controller routes it and sets its
    // NetworkUnavailable condition through nodes/status.
    let mut t = t;
    let vm =
        t.h.sim
            .add_vm(VmSpec {
                nics: vec![NicSpec {
                    network: "tier1".into(),
                    ipv4: "10.100.1.31".into(),
                    ipv6: None,
                    isdefault: true,
                }],
                ..common::vm_spec("routed-1", "10.100.1.31")
            })
            .unwrap();
    t.h.spawn(route::run);
    t.h.create_node(TestNode::new("routed-1").ready(true)).await;
    t.h.wait_for_node("routed-1", "initialised", |n| {
        !has_taint(n, UNINITIALIZED_TAINT)
    })
    .await;
    t.h.nodes()
        .patch(
            "routed-1",
            &PatchParams::default(),
            &Patch::Merge(
                &json!({ "spec": { "podCIDR": "10.244.7.0/24", "podCIDRs": ["10.244.7.0/24"] } }),
            ),
        )
        .await
        .unwrap();
    t.h.wait_for_node("routed-1", "NetworkUnavailable=False", |n| {
        n.status
            .iter()
            .flat_map(|s| s.conditions.iter().flatten())
            .any(|c| c.type_ == "NetworkUnavailable" && c.status == "False")
    })
    .await;
    // Its VM is expunged and the kubelet stops reporting: node-lifecycle deletes the Node.
    assert!(t.h.sim.remove_vm(&vm));
    t.h.set_ready("routed-1", false).await;
    t.h.wait_for_node_gone("routed-1").await;

    let denials = t.h.apiserver.denials();
    assert!(
        denials.is_empty(),
        "the API server refused {} request(s) of the controllers:\n{denials:#?}",
        denials.len()
    );
    println!(
        "requests refused: 0; Events recorded: {}",
        t.h.apiserver.events().len()
    );
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controllers_run_under_the_go_providers_cluster_role_without_a_403() {
    controllers_run_without_a_403(go_provider_role()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controllers_run_under_deploy_rbac_yaml_without_a_403() {
    controllers_run_without_a_403(deploy_role()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_newest_event_names_the_current_cause() {
    let t = LbTest::start(Scenario::small(), &NODES, Duration::from_secs(100)).await;
    t.create(&with_annotations(
        lb_service("web", &[("TCP", 80, 30080)]),
        &[(annotations::ALGORITHM.key, "fastest")],
    ))
    .await;
    t.wait_event("web", "LoadBalancerWarning", annotations::ALGORITHM.key)
        .await;
    t.patch(
        "web",
        json!({ "metadata": { "annotations": {
            annotations::ALGORITHM.key: null,
            annotations::SOURCE_CIDRS.key: "300.1.2.3/8",
        } } }),
    )
    .await;
    // What `kubectl describe service web` shows last: the newest LoadBalancerWarning.
    let newest = eventually("an Event naming the new cause", WAIT, || async {
        let mut failures: Vec<Value> =
            t.h.events_about("web")
                .into_iter()
                .filter(|e| common::event_reason(e) == Some("LoadBalancerWarning"))
                .collect();
        failures.sort_by_key(|e| {
            e["metadata"]["resourceVersion"]
                .as_str()
                .and_then(|rv| rv.parse::<u64>().ok())
                .unwrap_or(0)
        });
        failures
            .pop()
            .filter(|e| common::event_note(e).contains(annotations::SOURCE_CIDRS.key))
    })
    .await;
    assert!(
        !common::event_note(&newest).contains(annotations::ALGORITHM.key),
        "{newest}"
    );
    let causes: Vec<String> =
        t.h.events_about("web")
            .iter()
            .filter(|e| common::event_reason(e) == Some("LoadBalancerWarning"))
            .map(|e| common::event_note(e).to_string())
            .collect();
    assert!(
        causes
            .iter()
            .any(|c| c.contains(annotations::ALGORITHM.key)),
        "the old cause stays as its own Event: {causes:?}"
    );
    // And so does `kubectl describe`, which lists the Events oldest first.
    if let Some(described) = kubectl_describe_service(&t.h, "web") {
        let events_section = described.split("Events:").nth(1).unwrap_or_default();
        let last = events_section
            .lines()
            .rfind(|line| line.contains("LoadBalancerWarning"))
            .unwrap_or_else(|| panic!("no LoadBalancerWarning in:\n{described}"));
        assert!(
            last.contains(annotations::SOURCE_CIDRS.key),
            "the last Event shown names the current cause:\n{described}"
        );
    }
    t.stop().await;
}

/// `kubectl describe service <name>` against the harness's API server, `None` (with a
/// notice) when kubectl is not installed.
fn kubectl_describe_service(h: &Harness, name: &str) -> Option<String> {
    // The PATH's kubectl, wherever it is installed.
    const KUBECTL: &str = "kubectl";
    let installed = std::process::Command::new(KUBECTL)
        .args(["version", "--client"])
        .output()
        .is_ok_and(|out| out.status.success());
    if !installed {
        eprintln!("\n!!! NOTICE: kubectl is not on PATH: kubectl describe not checked\n");
        return None;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let kubeconfig = dir.path().join("kubeconfig");
    h.apiserver
        .write_kubeconfig(&kubeconfig)
        .expect("kubeconfig");
    let output = std::process::Command::new(KUBECTL)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--request-timeout=10s", "describe", "service", name])
        .output()
        .expect("kubectl runs");
    assert!(
        output.status.success(),
        "kubectl describe failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Some(String::from_utf8_lossy(&output.stdout).into_owned())
}
