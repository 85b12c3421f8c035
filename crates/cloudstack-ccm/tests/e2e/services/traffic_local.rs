//! `externalTrafficPolicy: Local`: each rule's members are the eligible Nodes holding a
//! ready endpoint of the Service (read from EndpointSlices, or from core Endpoints under
//! the ClusterRole CloudStack Kubernetes Service installs), follow the endpoints, are
//! never emptied when the endpoints vanish, and a rolling update makes a bounded number
//! of member jobs. `Cluster` Services read no endpoints.
//!
//! No endpoints controller runs: the tests write the EndpointSlice and Endpoints objects
//! one would, so these tests run in process only.

use std::time::{Duration, Instant};

use crate::common::{self, Harness, HarnessOptions, WAIT};
use crate::services::support::{
    LbTest, NAMESPACE, add_node, annotation, fast_settings, lb_service,
};
use cloudstack_ccm::cloud::loadbalancer::annotations;
use cloudstack_ccm::controllers::service;
use cloudstack_sim::{SMALL_NETSCALER_NETWORK, SMALL_NETWORK, Scenario};
use fake_apiserver::PatchType;
use k8s_openapi::api::core::v1::Service;
use serde_json::{Value, json};

const RESYNC: Duration = Duration::from_secs(100);
/// The exclusion label of the Kubernetes service controller.
const EXCLUDE: &str = "node.kubernetes.io/exclude-from-external-load-balancers";

/// An endpoint of the Service: the Node it runs on and its conditions.
#[derive(Clone, Copy)]
pub(super) struct Pod<'a> {
    node: &'a str,
    ready: bool,
    terminating: bool,
}

/// A ready endpoint on `node`.
pub(super) fn ready(node: &str) -> Pod<'_> {
    Pod {
        node,
        ready: true,
        terminating: false,
    }
}

/// A LoadBalancer Service with `externalTrafficPolicy: Local` on TCP 80 (node port 30080).
fn local_service(name: &str, node_port: i32) -> Service {
    let mut service = lb_service(name, &[("TCP", 80, node_port)]);
    let spec = service.spec.as_mut().expect("spec");
    spec.external_traffic_policy = Some("Local".into());
    service
}

/// Writes what the endpoints controller would for Service `name` (port `tcp-80`) with
/// `pods`: its EndpointSlice and its Endpoints (created, then replaced by merge patch).
fn write_endpoints(h: &Harness, name: &str, pods: &[Pod<'_>]) {
    write_endpoints_for(h, name, &[("TCP", 80)], pods);
}

/// [`write_endpoints`] for the Service ports `(protocol, port)` of [`lb_service`] (named
/// `<protocol>-<port>`).
pub(super) fn write_endpoints_for(
    h: &Harness,
    name: &str,
    ports: &[(&str, i32)],
    pods: &[Pod<'_>],
) {
    let endpoints: Vec<Value> = pods
        .iter()
        .enumerate()
        .map(|(i, pod)| {
            json!({
                "addresses": [format!("10.244.0.{}", i + 10)],
                "nodeName": pod.node,
                "conditions": {
                    "ready": pod.ready,
                    "serving": pod.ready || pod.terminating,
                    "terminating": pod.terminating,
                },
            })
        })
        .collect();
    let ports: Vec<Value> = ports
        .iter()
        .map(|(protocol, port)| {
            json!({ "name": format!("{}-{port}", protocol.to_ascii_lowercase()), "port": port + 8000, "protocol": protocol })
        })
        .collect();
    let slice = json!({
        "metadata": { "name": format!("{name}-x1y2z"), "labels": { "kubernetes.io/service-name": name } },
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": ports,
    });
    let address = |i: usize, pod: &Pod<'_>| json!({ "ip": format!("10.244.0.{}", i + 10), "nodeName": pod.node });
    let ready: Vec<Value> = pods
        .iter()
        .enumerate()
        .filter(|(_, p)| p.ready)
        .map(|(i, p)| address(i, p))
        .collect();
    let not_ready: Vec<Value> = pods
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.ready)
        .map(|(i, p)| address(i, p))
        .collect();
    let subsets = if pods.is_empty() {
        json!([])
    } else {
        json!([{ "addresses": ready, "notReadyAddresses": not_ready, "ports": ports }])
    };
    let core = json!({ "metadata": { "name": name }, "subsets": subsets });
    for (resource, object, object_name) in [
        ("endpointslices", slice, format!("{name}-x1y2z")),
        ("endpoints", core, name.to_string()),
    ] {
        let exists = h
            .apiserver
            .get(resource, Some(NAMESPACE), &object_name)
            .is_ok();
        if exists {
            h.apiserver
                .patch(
                    resource,
                    Some(NAMESPACE),
                    &object_name,
                    PatchType::Merge,
                    &object,
                    false,
                )
                .unwrap_or_else(|e| panic!("patching the {resource}: {e}"));
        } else {
            h.apiserver
                .create(resource, Some(NAMESPACE), object)
                .unwrap_or_else(|e| panic!("creating the {resource}: {e}"));
        }
    }
}

/// Deletes Service `name`'s EndpointSlice and Endpoints (the Deployment is gone).
fn delete_endpoints(h: &Harness, name: &str) {
    h.apiserver
        .delete("endpointslices", Some(NAMESPACE), &format!("{name}-x1y2z"))
        .expect("deleting the EndpointSlice");
    h.apiserver
        .delete("endpoints", Some(NAMESPACE), name)
        .expect("deleting the Endpoints");
}

/// Waits until the one rule of Service `name` has exactly the members `vms`.
async fn wait_members(t: &LbTest, name: &str, vms: &[&str]) {
    let mut wanted: Vec<&str> = vms.to_vec();
    wanted.sort_unstable();
    t.wait_rules(name, &format!("have members {wanted:?}"), |rules| {
        rules.len() == 1 && rules[0].members == wanted
    })
    .await;
}

/// The endpoint requests the controllers made (any verb, both kinds).
fn endpoint_requests(h: &Harness) -> u64 {
    h.apiserver
        .request_counts()
        .into_iter()
        .filter(|((_, resource), _)| resource.contains("endpoint"))
        .map(|(_, count)| count)
        .sum()
}

/// The Local flow shared by the EndpointSlice and the core Endpoints tests: one endpoint,
/// moved, an endpoint on an excluded Node, then none.
async fn members_follow_the_endpoints(t: &LbTest) {
    write_endpoints(&t.h, "web", &[ready("node-2")]);
    t.create(&local_service("web", 30080)).await;
    t.wait_for_ip("web").await;
    wait_members(t, "web", &["node-2"]).await;

    // The endpoint moves: the member follows, with one assignment and one removal.
    super::support::settle().await;
    t.h.sim.reset_counts();
    write_endpoints(&t.h, "web", &[ready("node-3")]);
    wait_members(t, "web", &["node-3"]).await;
    super::support::settle().await;
    let calls = t.h.cloudstack_call_counts();
    let calls: std::collections::BTreeMap<_, _> =
        calls.into_iter().filter(|(_, n)| *n > 0).collect();
    println!(
        "one endpoint moved: {} CloudStack calls: {calls:?}",
        calls.values().sum::<u64>()
    );
    let mutating = super::support::mutating_counts(&t.h);
    assert_eq!(
        mutating.into_iter().collect::<Vec<_>>(),
        [
            ("assignToLoadBalancerRule".to_string(), 1),
            ("removeFromLoadBalancerRule".to_string(), 1)
        ],
        "{calls:?}"
    );

    // A Node holding an endpoint but excluded by label is not a member.
    write_endpoints(&t.h, "web", &[ready("node-3"), ready("node-4")]);
    wait_members(t, "web", &["node-3", "node-4"]).await;
    t.h.nodes()
        .patch(
            "node-3",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({ "metadata": { "labels": { EXCLUDE: "true" } } })),
        )
        .await
        .expect("labelling node-3");
    wait_members(t, "web", &["node-4"]).await;

    // Every endpoint gone: the members stay, with a Warning.
    delete_endpoints(&t.h, "web");
    t.wait_event("web", "UnAvailableLoadBalancer", "ready endpoint")
        .await;
    super::support::settle().await;
    wait_members(t, "web", &["node-4"]).await;
}

fn four_nodes() -> Scenario {
    let mut scenario = Scenario::small();
    scenario.add_vms(SMALL_NETWORK, "node-", 1);
    scenario
}

const FOUR: [&str; 4] = ["node-1", "node-2", "node-3", "node-4"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_members_are_the_nodes_with_ready_endpoints() {
    if common::skip_in_remote_mode("writes EndpointSlices no endpoints controller owns") {
        return;
    }
    let t = LbTest::start(four_nodes(), &FOUR, RESYNC).await;
    // A Cluster Service alongside reads no endpoints and keeps every Node.
    t.create(&lb_service("all", &[("TCP", 81, 30081)])).await;
    t.wait_rules("all", "have every node", |r| {
        r.len() == 1 && r[0].members.len() == 4
    })
    .await;
    assert_eq!(
        endpoint_requests(&t.h),
        0,
        "no Local Service, no endpoint read"
    );

    members_follow_the_endpoints(&t).await;
    let all = t.rules("all").await;
    assert_eq!(
        all[0].members,
        FOUR[..2]
            .iter()
            .chain(&FOUR[3..])
            .copied()
            .collect::<Vec<_>>(),
        "the Cluster Service loses only the excluded node"
    );
    t.stop().await;
}

/// The Local flow as the ServiceAccount bound by `role`; returns the requests refused.
async fn under_role(role: Vec<(String, Option<String>, Value)>) -> Vec<fake_apiserver::Denial> {
    let mut scenario = four_nodes();
    scenario.settings.job_duration_ms = 2;
    let h = Harness::start_with(HarnessOptions {
        scenario,
        rbac: true,
        service_resync_period: RESYNC,
        ..HarnessOptions::default()
    })
    .await;
    for (kind, namespace, object) in role {
        h.apiserver
            .create(&kind, namespace.as_deref(), object)
            .unwrap_or_else(|e| panic!("creating the {kind}: {e}"));
    }
    for name in FOUR {
        add_node(&h, name).await;
    }
    let mut t = LbTest::from_harness(h);
    t.start_controller(RESYNC);
    members_follow_the_endpoints(&t).await;
    let denials = t.h.apiserver.denials();
    t.stop().await;
    denials
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_members_come_from_core_endpoints_under_the_cks_cluster_role() {
    if common::skip_in_remote_mode("runs the API server with RBAC and writes endpoints") {
        return;
    }
    let denials = under_role(crate::rbac::go_provider_role()).await;
    assert_eq!(
        denials.len(),
        1,
        "one refusal (the EndpointSlice probe), then core Endpoints: {denials:#?}"
    );
    assert!(
        denials[0].request.contains("endpointslices"),
        "{denials:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_members_come_from_endpoint_slices_under_deploy_rbac_yaml() {
    if common::skip_in_remote_mode("runs the API server with RBAC and writes endpoints") {
        return;
    }
    let denials = under_role(crate::rbac::deploy_role()).await;
    assert!(denials.is_empty(), "{denials:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_on_a_health_check_provider_follows_the_endpoints_too() {
    if common::skip_in_remote_mode("needs the simulator's NetScaler network") {
        return;
    }
    let mut scenario = Scenario::small();
    let nodes = scenario.add_vms(SMALL_NETSCALER_NETWORK, "ns-", 3);
    let names: Vec<&str> = nodes.iter().map(String::as_str).collect();
    let t = LbTest::start(scenario, &names, RESYNC).await;
    write_endpoints(&t.h, "web", &[ready(names[1])]);
    t.create(&local_service("web", 30080)).await;
    t.wait_for_ip("web").await;
    wait_members(&t, "web", &[names[1]]).await;
    // CloudStack's health-check policy has no port (it probes the rule's node port), so
    // none is implied by Local; an explicit one still applies.
    let ip_id = annotation(&t.get("web").await.expect("web"), annotations::IP_ID.key)
        .expect("IP id recorded")
        .to_string();
    let policies = |h: &Harness| {
        h.sim.with_state(|s| {
            s.policies
                .iter()
                .filter(|p| matches!(p.kind, cloudstack_sim::state::PolicyKind::HealthCheck))
                .count()
        })
    };
    assert_eq!(policies(&t.h), 0, "no implied health check");
    t.patch(
        "web",
        json!({ "metadata": { "annotations": { annotations::HEALTH_CHECK_PATH.key: "/ready" } } }),
    )
    .await;
    common::eventually("the asked health check", WAIT, || async {
        (policies(&t.h) == 1).then_some(())
    })
    .await;
    write_endpoints(&t.h, "web", &[ready(names[2])]);
    wait_members(&t, "web", &[names[2]]).await;
    assert!(!ip_id.is_empty());
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_update_over_ten_nodes_makes_a_bounded_number_of_member_jobs() {
    if common::skip_in_remote_mode("writes EndpointSlices no endpoints controller owns") {
        return;
    }
    const COALESCE: Duration = Duration::from_millis(1000);
    const STEP: Duration = Duration::from_millis(100);
    let mut scenario = Scenario::small();
    scenario.add_vms(SMALL_NETWORK, "node-", 7);
    let names: Vec<String> = (1..=10).map(|i| format!("node-{i}")).collect();
    let nodes: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut t = LbTest::prepare(scenario, &nodes, RESYNC).await;
    let mut settings = fast_settings(RESYNC);
    settings.endpoint_coalesce = COALESCE;
    t.h.spawn(move |ctx, caches, shutdown| service::run_with(ctx, settings, caches, shutdown));

    // Ten replicas, one per Node.
    let mut pods: Vec<Pod<'_>> = nodes.iter().map(|n| ready(n)).collect();
    write_endpoints(&t.h, "web", &pods);
    t.create(&local_service("web", 30080)).await;
    t.wait_for_ip("web").await;
    wait_members(&t, "web", &nodes).await;

    // The rolling update (maxUnavailable 1, maxSurge 0): each old pod terminates, then
    // its replacement starts on the same Node and becomes ready; the Node has no ready
    // endpoint meanwhile.
    t.h.sim.reset_counts();
    let started = Instant::now();
    let mut changes = 0;
    for i in 0..nodes.len() {
        pods[i].ready = false;
        pods[i].terminating = true;
        write_endpoints(&t.h, "web", &pods);
        tokio::time::sleep(STEP).await;
        pods[i] = Pod {
            node: nodes[i],
            ready: false,
            terminating: false,
        };
        write_endpoints(&t.h, "web", &pods);
        tokio::time::sleep(STEP).await;
        pods[i].ready = true;
        write_endpoints(&t.h, "web", &pods);
        tokio::time::sleep(STEP).await;
        changes += 3;
    }
    let rolled = started.elapsed();
    wait_members(&t, "web", &nodes).await;
    tokio::time::sleep(COALESCE * 2).await;
    wait_members(&t, "web", &nodes).await;
    let counts = t.h.sim.call_counts();
    let jobs = counts.get("assignToLoadBalancerRule").copied().unwrap_or(0)
        + counts
            .get("removeFromLoadBalancerRule")
            .copied()
            .unwrap_or(0);
    // Without coalescing every Node would leave and come back: two jobs per replica.
    let uncoalesced = 2 * nodes.len() as u64;
    let windows = (rolled.as_millis() / COALESCE.as_millis()) as u64 + 2;
    println!(
        "rolling update of {} replicas over {} nodes in {rolled:?}: {changes} endpoint changes, {jobs} member jobs (at most {} by the coalescing window, {uncoalesced} without it)",
        nodes.len(),
        nodes.len(),
        2 * windows
    );
    assert!(
        jobs <= 2 * windows && jobs < uncoalesced,
        "{jobs} member jobs: {counts:?}"
    );
    // Scaled down to nine: the Node left without a replica leaves the rule.
    pods.pop();
    write_endpoints(&t.h, "web", &pods);
    wait_members(&t, "web", &nodes[..9]).await;
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_back_to_cluster_no_longer_follows_endpoints() {
    if common::skip_in_remote_mode("counts the fake API server's requests") {
        return;
    }
    let t = LbTest::start(Scenario::small(), &["node-1", "node-2"], RESYNC).await;
    t.create(&lb_service("plain", &[("TCP", 80, 30080)])).await;
    t.wait_for_ip("plain").await;
    // Local, then back to Cluster: the endpoints are read while Local only.
    t.patch(
        "plain",
        json!({ "spec": { "externalTrafficPolicy": "Local" } }),
    )
    .await;
    write_endpoints(&t.h, "plain", &[ready("node-1")]);
    wait_members(&t, "plain", &["node-1"]).await;
    t.patch(
        "plain",
        json!({ "spec": { "externalTrafficPolicy": "Cluster" } }),
    )
    .await;
    wait_members(&t, "plain", &["node-1", "node-2"]).await;
    // The member job's last poll and the members read after it.
    super::support::settle().await;
    t.h.sim.reset_counts();
    write_endpoints(&t.h, "plain", &[ready("node-2")]);
    super::support::settle().await;
    assert!(
        t.h.sim.call_counts().values().all(|n| *n == 0),
        "an endpoint change of a Cluster Service reconciles nothing: {:?}",
        t.h.sim.call_counts()
    );
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dry_run_shows_each_rules_members_and_why() {
    if common::skip_in_remote_mode("writes EndpointSlices no endpoints controller owns") {
        return;
    }
    use cloudstack_ccm::cloud::loadbalancer::ensure::Engine;
    use cloudstack_ccm::controllers::node_cache::CachedNode;
    use cloudstack_ccm::controllers::service::{EndpointSnapshot, plan_services, settings};
    use kube::api::ListParams;

    let t = LbTest::prepare(four_nodes(), &FOUR, RESYNC).await;
    write_endpoints(&t.h, "web", &[ready("node-2"), ready("node-4")]);
    t.create(&local_service("web", 30080)).await;
    t.create(&lb_service("all", &[("TCP", 81, 30081)])).await;
    let services = t
        .services()
        .list(&ListParams::default())
        .await
        .expect("services")
        .items;
    let nodes: Vec<CachedNode> =
        t.h.nodes()
            .list(&ListParams::default())
            .await
            .expect("nodes")
            .items
            .into_iter()
            .map(CachedNode::from)
            .collect();
    let ctx = &t.h.ctx;
    let engine = Engine::new(
        ctx.cloudstack.clone(),
        t.h.instances.inventory().clone(),
        fast_settings(RESYNC).engine(ctx),
    );
    let endpoints = EndpointSnapshot::read(&ctx.kube).await.expect("endpoints");
    let plans = plan_services(
        &engine,
        None,
        &services,
        &nodes,
        &endpoints,
        &settings::spec_options(ctx),
    )
    .await;
    let members = |key: &str| {
        let plan = plans.iter().find(|p| p.key == key).expect("planned");
        assert!(plan.plan.is_ok(), "{:?}", plan.plan);
        plan.members
            .iter()
            .map(|m| m.to_string())
            .collect::<Vec<_>>()
    };
    let web = members("default/web");
    println!("{web:?}");
    assert_eq!(web.len(), 1);
    assert!(
        web[0].contains(
            "2 node(s): node-2, node-4 (Local: the eligible nodes holding a ready endpoint)"
        ),
        "{web:?}"
    );
    let all = members("default/all");
    assert!(
        all[0].contains("4 node(s): node-1, node-2, node-3, node-4 (Cluster: every eligible node)"),
        "{all:?}"
    );
    t.stop().await;
}
