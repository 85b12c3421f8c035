//! LoadBalancer Services end to end (simulator + fake API server over HTTP, or remote
//! endpoints, see `common::target`): create, change and delete with one to three ports, and
//! what each step costs in jobs.

mod common;
mod services_common;

use std::time::Duration;

use cloudstack_ccm::cloud::loadbalancer::annotations;
use cloudstack_sim::Scenario;
use services_common::*;

const NODES: [&str; 3] = ["node-1", "node-2", "node-3"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_update_delete_with_one_to_three_ports() {
    let t = LbTest::start(Scenario::small(), &NODES, Duration::from_secs(100)).await;
    t.h.reset_cloudstack_counts();

    // Create with one port.
    t.create(&lb_service("web", &[("TCP", 80, 30080)])).await;
    let address = t.wait_for_ip("web").await;
    let service = t.get("web").await.expect("the Service exists");
    assert!(has_finalizer(&service), "finalizer added");
    let ip_id = annotation(&service, annotations::IP_ID.key)
        .expect("IP id recorded")
        .to_string();
    assert_eq!(ip_id, ip_id_of(&t.h, &address));
    assert_eq!(
        annotation(&service, annotations::IP_ASSOCIATED_BY_CONTROLLER.key),
        Some("true")
    );
    let rules = t.rules("web").await;
    assert_eq!(rules.len(), 1, "{rules:#?}");
    let uid = t.uid("web").await;
    assert!(rules[0].name.ends_with("-tcp-80"), "{}", rules[0].name);
    assert_eq!((rules[0].public_port, rules[0].private_port), (80, 30080));
    assert_eq!(rules[0].members, t.h.vm_names(&NODES));
    assert_eq!(rules[0].ip_id, ip_id);
    assert_eq!(rules[0].tags.get("cloudstack-ccm/service-uid"), Some(&uid));
    assert_eq!(
        rules[0]
            .tags
            .get("cloudstack-ccm/cluster")
            .map(String::as_str),
        Some("kubernetes")
    );
    // The default source range is served by the rule's own firewall opening.
    assert_eq!(
        firewall_rules(&t.h, &ip_id),
        [("tcp".to_string(), 80, vec!["0.0.0.0/0".to_string()])]
    );
    t.wait_event("web", "EnsuringLoadBalancer", "").await;
    t.wait_event("web", "EnsuredLoadBalancer", "").await;
    let jobs = mutating_counts(&t.h);
    let total: u64 = jobs.values().sum();
    println!("jobs to create a 1-port Service on 3 nodes: {total} {jobs:?}");
    assert_eq!(jobs.get("associateIpAddress"), Some(&1));
    assert_eq!(jobs.get("createLoadBalancerRule"), Some(&1));
    assert_eq!(
        jobs.get("assignToLoadBalancerRule"),
        Some(&1),
        "all members in one call"
    );

    // Three ports.
    t.h.reset_cloudstack_counts();
    t.patch(
        "web",
        ports_patch(&[
            ("TCP", 80, 30080),
            ("TCP", 443, 30443),
            ("TCP", 8080, 30808),
        ]),
    )
    .await;
    let rules = t
        .wait_rules("web", "are three", |r| {
            r.len() == 3 && r.iter().all(|r| r.members.len() == 3)
        })
        .await;
    assert_eq!(
        rules.iter().map(|r| r.public_port).collect::<Vec<_>>(),
        [80, 443, 8080]
    );
    assert!(
        rules.iter().all(|r| r.ip_id == ip_id),
        "same IP for every port"
    );
    println!("jobs to add two ports: {:?}", mutating_counts(&t.h));
    assert_eq!(
        mutating_counts(&t.h).get("associateIpAddress"),
        None,
        "no new IP"
    );

    // Down to two ports, one with a new node port.
    t.patch(
        "web",
        ports_patch(&[("TCP", 80, 30080), ("TCP", 443, 31443)]),
    )
    .await;
    let rules = t
        .wait_rules("web", "are 80 and 443 on node port 31443", |r| {
            r.len() == 2
                && r.iter().any(|r| {
                    r.public_port == 443 && r.private_port == 31443 && r.members.len() == 3
                })
        })
        .await;
    assert_eq!(rules[0].public_port, 80);
    assert_eq!(
        t.wait_for_ip("web").await,
        address,
        "the address does not change"
    );
    let ports: Vec<i64> = firewall_rules(&t.h, &ip_id).iter().map(|f| f.1).collect();
    assert_eq!(ports, [80, 443], "firewall follows the ports");

    // Delete.
    t.delete("web").await;
    t.wait_gone("web").await;
    assert!(t.rules_of_uid(&uid).is_empty(), "rules deleted");
    assert_eq!(
        ip_state(&t.h, &ip_id).as_deref(),
        Some("Free"),
        "IP released"
    );
    assert!(firewall_rules(&t.h, &ip_id).is_empty());
    t.wait_event("web", "DeletingLoadBalancer", "").await;
    t.wait_event("web", "DeletedLoadBalancer", "").await;
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_that_stops_being_a_load_balancer_is_cleaned_up() {
    let t = LbTest::start(Scenario::small(), &NODES, Duration::from_secs(100)).await;
    t.create(&lb_service("api", &[("TCP", 8443, 30443)])).await;
    let address = t.wait_for_ip("api").await;
    let ip_id = ip_id_of(&t.h, &address);
    let uid = t.uid("api").await;
    t.patch("api", serde_json::json!({ "spec": { "type": "NodePort" } }))
        .await;
    let service = t
        .wait_for("api", "has no finalizer and no ingress", |s| {
            !has_finalizer(s) && ingress_ip(s).is_none()
        })
        .await;
    assert_eq!(
        service.spec.and_then(|s| s.type_).as_deref(),
        Some("NodePort")
    );
    assert!(t.rules_of_uid(&uid).is_empty());
    assert_eq!(ip_state(&t.h, &ip_id).as_deref(), Some("Free"));

    // A Service of another class is left alone.
    let mut other = lb_service("other", &[("TCP", 80, 30081)]);
    other.spec.as_mut().expect("spec").load_balancer_class = Some("example.com/other".into());
    t.create(&other).await;
    t.h.reset_cloudstack_counts();
    settle().await;
    assert!(
        mutating_counts(&t.h).is_empty(),
        "{:?}",
        mutating_counts(&t.h)
    );
    assert!(!has_finalizer(&t.get("other").await.expect("exists")));
    t.stop().await;
}
