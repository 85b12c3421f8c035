//! The route controller end to end: a simulated VPC (CloudStack 4.22 static routes to a next
//! hop) and a fake API server. Routes appear, change and disappear with the Nodes; routes
//! the cluster did not create are left alone; the `NetworkUnavailable` condition is set as
//! Kubernetes' route controller sets it; old servers and isolated networks are refused.

use crate::common;

use std::time::Duration;

use cloudstack::{CreateStaticRoute, CreateTags};
use cloudstack_ccm::cloud::routes::plan::RouteStep;
use cloudstack_ccm::controllers::route::{self, Pass, RouteController, RouteSettings};
use cloudstack_sim::{NicSpec, Scenario, SimServer, Version, VmSpec};
use common::*;
use fake_apiserver::Verb;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

const CLUSTER: &str = "kubernetes";

fn settings() -> RouteSettings {
    RouteSettings {
        allocate_node_cidrs: true,
        reconciliation_period: Duration::from_millis(100),
        ..RouteSettings::default()
    }
}

async fn start(version: &str) -> Harness {
    let mut scenario = Scenario::small();
    scenario.version = Version::parse(version).unwrap();
    Harness::start_with(HarnessOptions {
        scenario,
        routes: settings(),
        ..HarnessOptions::default()
    })
    .await
}

/// Adds a Running VM on `network` with `ipv4`; returns its id.
fn vm_on(sim: &SimServer, network: &str, name: &str, ipv4: &str) -> String {
    sim.add_vm(VmSpec {
        nics: vec![NicSpec {
            network: network.into(),
            ipv4: ipv4.into(),
            ipv6: None,
            isdefault: true,
        }],
        ..vm_spec(name, ipv4)
    })
    .unwrap()
}

/// Registers a Node as the kubelet and kube-controller-manager leave it: providerID, pod
/// CIDR and an InternalIP.
async fn create_node(h: &Harness, name: &str, vm_id: &str, pod_cidr: &str, ip: &str) {
    let mut node = TestNode::new(name)
        .initialised()
        .provider_id(&format!("external-cloudstack://{vm_id}"))
        .build();
    node.spec.as_mut().unwrap().pod_cidr = Some(pod_cidr.into());
    node.spec.as_mut().unwrap().pod_cidrs = Some(vec![pod_cidr.into()]);
    h.nodes()
        .create(&PostParams::default(), &node)
        .await
        .unwrap();
    set_internal_ip(h, name, ip).await;
}

/// Sets the Node's InternalIP and waits until the shared Node cache, which the route
/// controller reads, holds it.
async fn set_internal_ip(h: &Harness, name: &str, ip: &str) {
    let patch = json!({ "status": { "addresses": [
        { "type": "InternalIP", "address": ip },
        { "type": "Hostname", "address": name },
    ]}});
    h.nodes()
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    h.caches.nodes.wait_until_ready().await;
    eventually("the Node cache holds the address", WAIT, || async {
        h.caches
            .nodes
            .state()
            .iter()
            .filter(|node| node.metadata.name.as_deref() == Some(name))
            .flat_map(|node| {
                node.status
                    .iter()
                    .flat_map(|s| s.addresses.iter().flatten())
            })
            .any(|a| a.type_ == "InternalIP" && a.address == ip)
            .then_some(())
    })
    .await;
}

/// `(cidr, next hop, cluster tag, node tag)` of every route in the simulator.
fn routes(h: &Harness) -> Vec<(String, String, Option<String>, Option<String>)> {
    h.sim.with_state(|state| {
        let tag = |id: &str, key: &str| {
            state
                .tags
                .iter()
                .find(|t| t.resource_type == "StaticRoute" && t.resource_id == id && t.key == key)
                .map(|t| t.value.clone())
        };
        let mut out: Vec<_> = state
            .static_routes
            .iter()
            .map(|r| {
                (
                    r.cidr.clone(),
                    r.next_hop.clone().unwrap_or_default(),
                    tag(&r.id, "cloudstack-ccm/cluster"),
                    tag(&r.id, "cloudstack-ccm/node"),
                )
            })
            .collect();
        out.sort();
        out
    })
}

fn route(
    cidr: &str,
    hop: &str,
    cluster: Option<&str>,
    node: Option<&str>,
) -> (String, String, Option<String>, Option<String>) {
    (
        cidr.into(),
        hop.into(),
        cluster.map(str::to_owned),
        node.map(str::to_owned),
    )
}

async fn wait_for_routes(
    h: &Harness,
    what: &str,
    want: &[(String, String, Option<String>, Option<String>)],
) {
    eventually(what, WAIT, || async {
        let now = routes(h);
        (now == want).then_some(())
    })
    .await;
}

fn network_unavailable(node: &k8s_openapi::api::core::v1::Node) -> Option<(String, String)> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "NetworkUnavailable")
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

/// Creates a route with the account's client, tagged with `tags`.
async fn existing_route(h: &Harness, cidr: &str, hop: &str, tags: &[(&str, &str)]) {
    let vpc = h.sim.with_state(|s| s.vpcs[0].id.clone());
    let route = h
        .ctx
        .cloudstack
        .create_static_route(&CreateStaticRoute {
            cidr: cidr.into(),
            vpcid: Some(vpc),
            nexthop: Some(hop.into()),
            gatewayid: None,
        })
        .await
        .unwrap();
    if !tags.is_empty() {
        h.ctx
            .cloudstack
            .create_tags(&CreateTags {
                resourceids: vec![route.id.unwrap()],
                resourcetype: "StaticRoute".into(),
                tags: tags
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                customer: None,
            })
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_are_created_changed_and_removed_with_nodes() {
    let mut h = start("4.22").await;
    let w1 = vm_on(&h.sim, "tier1", "w1", "10.100.1.11");
    let w2 = vm_on(&h.sim, "tier1", "w2", "10.100.1.12");
    create_node(&h, "w1", &w1, "10.244.1.0/24", "10.100.1.11").await;
    create_node(&h, "w2", &w2, "10.244.2.0/24", "10.100.1.12").await;
    // Not ours: a route without tags, one of another cluster; ours: one of a Node long gone.
    existing_route(&h, "192.168.0.0/16", "10.100.1.200", &[]).await;
    existing_route(
        &h,
        "10.250.0.0/24",
        "10.100.1.201",
        &[("cloudstack-ccm/cluster", "other")],
    )
    .await;
    existing_route(
        &h,
        "10.244.9.0/24",
        "10.100.1.99",
        &[
            ("cloudstack-ccm/cluster", CLUSTER),
            ("cloudstack-ccm/node", "gone"),
        ],
    )
    .await;

    h.spawn(route::run);
    wait_for_routes(
        &h,
        "a route per Node, the stale one removed, foreign ones kept",
        &[
            route("10.244.1.0/24", "10.100.1.11", Some(CLUSTER), Some("w1")),
            route("10.244.2.0/24", "10.100.1.12", Some(CLUSTER), Some("w2")),
            route("10.250.0.0/24", "10.100.1.201", Some("other"), None),
            route("192.168.0.0/16", "10.100.1.200", None, None),
        ],
    )
    .await;
    for name in ["w1", "w2"] {
        let node = h
            .wait_for_node(name, "NetworkUnavailable=False", |n| {
                network_unavailable(n).is_some_and(|(status, _)| status == "False")
            })
            .await;
        assert_eq!(
            network_unavailable(&node),
            Some(("False".into(), "RouteCreated".into()))
        );
    }

    // A changed address replaces the route.
    set_internal_ip(&h, "w1", "10.100.1.21").await;
    wait_for_routes(
        &h,
        "w1's route follows its new address",
        &[
            route("10.244.1.0/24", "10.100.1.21", Some(CLUSTER), Some("w1")),
            route("10.244.2.0/24", "10.100.1.12", Some(CLUSTER), Some("w2")),
            route("10.250.0.0/24", "10.100.1.201", Some("other"), None),
            route("192.168.0.0/16", "10.100.1.200", None, None),
        ],
    )
    .await;

    // A deleted Node's route goes.
    h.nodes()
        .delete("w2", &DeleteParams::default())
        .await
        .unwrap();
    wait_for_routes(
        &h,
        "w2's route removed",
        &[
            route("10.244.1.0/24", "10.100.1.21", Some(CLUSTER), Some("w1")),
            route("10.250.0.0/24", "10.100.1.201", Some("other"), None),
            route("192.168.0.0/16", "10.100.1.200", None, None),
        ],
    )
    .await;
    let metrics = h.ctx.metrics.encode();
    assert!(
        metrics.contains(r#"cloudstack_ccm_reconciles_total{controller="route",result="ok"}"#),
        "route passes are counted:\n{metrics}"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steady_state_pass_changes_nothing() {
    let h = start("4.22").await;
    let w1 = vm_on(&h.sim, "tier1", "w1", "10.100.1.11");
    create_node(&h, "w1", &w1, "10.244.1.0/24", "10.100.1.11").await;
    let controller = RouteController::new(h.ctx.clone(), h.caches.clone());
    assert_eq!(controller.pass().await.unwrap(), Pass::Done);
    let (_, plan) = controller.plan().await.unwrap();
    assert!(plan.is_empty(), "{plan}");
    h.sim.reset_counts();
    assert_eq!(controller.pass().await.unwrap(), Pass::Done);
    let mutating: Vec<_> = h
        .sim
        .call_counts()
        .into_iter()
        .filter(|(command, _)| cloudstack_sim::commands::is_mutating(command))
        .collect();
    assert!(mutating.is_empty(), "{mutating:?}");
    if !h.is_remote() {
        // The passes read the shared Node cache: one list when it started, none per pass.
        assert_eq!(h.kube_request_count(Verb::List, "nodes"), 1);
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plan_names_each_route_change() {
    let h = start("4.22").await;
    let w1 = vm_on(&h.sim, "tier1", "w1", "10.100.1.11");
    create_node(&h, "w1", &w1, "10.244.1.0/24", "10.100.1.11").await;
    let controller = RouteController::new(h.ctx.clone(), h.caches.clone());
    let (_, plan) = controller.plan().await.unwrap();
    assert_eq!(plan.steps.len(), 1);
    assert!(matches!(&plan.steps[0], RouteStep::Create(r) if r.node == "w1"));
    let text = plan.to_string();
    assert!(
        text.contains("create static route 10.244.1.0/24 via 10.100.1.11"),
        "{text}"
    );
    let mut printed = Vec::new();
    cloudstack_ccm::dry_run::write_route_plan(h.ctx.clone(), &mut printed)
        .await
        .unwrap();
    let printed = String::from_utf8(printed).unwrap();
    assert!(printed.starts_with("Routes: 1 change(s)."), "{printed}");
    assert!(
        printed.contains("create static route 10.244.1.0/24 via 10.100.1.11"),
        "{printed}"
    );
    assert!(routes(&h).is_empty(), "planning changes nothing");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn below_4_22_the_controller_does_not_start() {
    let h = start("4.21").await;
    let reason = route::not_started_reason(&h.ctx).expect("refused");
    assert!(reason.contains("needs 4.22"), "{reason}");
    h.sim.reset_counts();
    let (trigger, shutdown) = cloudstack_ccm::controllers::shutdown_channel();
    let task = tokio::spawn(route::run(h.ctx.clone(), h.caches.clone(), shutdown));
    trigger.trigger();
    tokio::time::timeout(WAIT, task)
        .await
        .expect("stops at shutdown")
        .unwrap()
        .expect("a refused controller ends without error");
    assert_eq!(h.cloudstack_calls(), 0, "{:?}", h.sim.call_counts());
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_allocate_node_cidrs_the_controller_does_not_start() {
    let h = Harness::start(Scenario::small()).await;
    let reason = route::not_started_reason(&h.ctx).expect("refused by default");
    assert!(reason.contains("allocate-node-cidrs: false"), "{reason}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_on_isolated_networks_stop_the_controller() {
    let h = start("4.22").await;
    let id = h.add_vm("iso-1", "10.1.1.50");
    create_node(&h, "iso-1", &id, "10.244.5.0/24", "10.1.1.50").await;
    let controller = RouteController::new(h.ctx.clone(), h.caches.clone());
    let network = h.sim.with_state(|s| {
        s.networks
            .iter()
            .find(|n| n.name == "net-vr")
            .unwrap()
            .id
            .clone()
    });
    assert_eq!(
        controller.pass().await.unwrap(),
        Pass::Isolated(vec![network])
    );
    assert!(routes(&h).is_empty());
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_vpc_demo_shows_routes_appear_and_go() {
    init();
    let args = cloudstack_ccm::cli::DemoArgs {
        vpc: true,
        ..Default::default()
    };
    let mut out = Vec::new();
    cloudstack_ccm::demo::vpc::run(&args, &mut out)
        .await
        .expect("the demo converges");
    let out = String::from_utf8(out).unwrap();
    for line in [
        "Node worker-1 registers with pod CIDR 10.244.1.0/24",
        "static route 10.244.1.0/24 -> next hop 10.100.1.11",
        "Node worker-1: NetworkUnavailable=False (RouteCreated)",
        "static route 10.244.2.0/24 removed",
        "Done: 1 route(s) left",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
}

/// `createStaticRoute` failing: the Node gets `NetworkUnavailable=True`/`NoRouteCreated` and
/// one Warning `FailedToCreateRoute` naming the route and the error, as the Kubernetes route
/// controller posts it — one Event, not one per retry of the 100 ms passes. Once the route
/// is made the condition turns `False`/`RouteCreated` (the upstream controller posts no
/// Event for that).
#[tokio::test]
async fn a_failing_route_is_a_warning_on_the_node_once_not_per_retry() {
    if common::skip_in_remote_mode("injects faults into the simulator") {
        return;
    }
    let mut h = start("4.22").await;
    h.expect_failing_calls();
    let w1 = vm_on(&h.sim, "tier1", "w1", "10.100.1.11");
    create_node(&h, "w1", &w1, "10.244.1.0/24", "10.100.1.11").await;
    let mut faults = cloudstack_sim::Faults::default();
    faults.errors.insert(
        "createStaticRoute".into(),
        cloudstack_sim::ErrorFault {
            rate: 1.0,
            code: 530,
            text: Some("the VPC router is down".into()),
        },
    );
    h.sim.set_faults(faults);
    h.spawn(route::run);
    let node = h
        .wait_for_node("w1", "NetworkUnavailable=True", |n| {
            network_unavailable(n).is_some_and(|(status, _)| status == "True")
        })
        .await;
    assert_eq!(
        network_unavailable(&node),
        Some(("True".into(), "NoRouteCreated".into()))
    );
    let event = h.wait_for_event("w1", "FailedToCreateRoute").await;
    assert_eq!(event["type"], "Warning");
    let note = common::event_note(&event);
    assert!(
        note.starts_with("Could not create route w1 10.244.1.0/24 for node w1 after")
            && note.contains("the VPC router is down"),
        "{note}"
    );
    // Many passes later: still one Event, seen once.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let failures: Vec<_> = h
        .events_about("w1")
        .into_iter()
        .filter(|e| common::event_reason(e) == Some("FailedToCreateRoute"))
        .collect();
    assert_eq!(failures.len(), 1, "{failures:#?}");
    println!(
        "createStaticRoute calls meanwhile: {:?}",
        h.cloudstack_call_counts().get("createStaticRoute")
    );
    assert_eq!(
        failures[0]["count"].as_i64().unwrap_or(1),
        1,
        "{failures:#?}"
    );
    assert!(
        h.cloudstack_call_counts()
            .get("createStaticRoute")
            .copied()
            .unwrap_or(0)
            > 3,
        "the route was retried meanwhile"
    );

    // CloudStack creates routes again: the route is made, the condition follows.
    h.sim.set_faults(cloudstack_sim::Faults::default());
    h.wait_for_node("w1", "NetworkUnavailable=False", |n| {
        network_unavailable(n)
            .is_some_and(|(status, reason)| status == "False" && reason == "RouteCreated")
    })
    .await;
    h.stop().await;
}
