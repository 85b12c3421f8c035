//! LoadBalancer Services end to end (simulator + fake API server over HTTP, or remote
//! endpoints, see `common::target`): create, change and delete with one to three ports, and
//! what each step costs in jobs.

use crate::common;

use std::time::Duration;

use super::support::*;
use cloudstack_ccm::cloud::loadbalancer::annotations;
use cloudstack_sim::Scenario;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expunged_member_vm_leaves_every_service_in_one_pass() {
    if common::skip_in_remote_mode("expunges and purges simulator VMs") {
        return;
    }
    let nodes = ["node-1", "node-2", "node-3", "node-4", "node-5"];
    let mut scenario = Scenario::small();
    scenario.add_vms(cloudstack_sim::SMALL_NETWORK, "node-", 2);
    let t = LbTest::start(scenario, &nodes, Duration::from_secs(100)).await;
    let names: Vec<String> = (0..4).map(|i| format!("svc-{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        let i = i as i32;
        t.create(&lb_service(
            name,
            &[("TCP", 80, 30080 + i), ("TCP", 443, 30443 + i)],
        ))
        .await;
    }
    for name in &names {
        t.wait_rules(name, "have every node", |r| {
            r.len() == 2 && r.iter().all(|r| r.members.len() == 5)
        })
        .await;
    }

    // Scale-down: CloudStack expunges one VM (and drops it from every rule itself; its
    // row is purged later, after which its id no longer resolves) and destroys another
    // without expunging it (its mappings stay until the expunge); then their Nodes go.
    let expunged = t.h.vm_id("node-5");
    assert!(t.h.sim.remove_vm(&expunged), "node-5 expunged");
    assert!(t.h.sim.purge_vm(&expunged), "node-5 purged");
    assert!(t.h.sim.destroy_vm(&t.h.vm_id("node-4")), "node-4 destroyed");
    // A scale-down takes longer than the VM list's re-check period.
    tokio::time::sleep(Duration::from_millis(300)).await;
    t.h.sim.reset_counts();
    let since = sim_now_ms();
    for node in ["node-5", "node-4"] {
        t.h.nodes()
            .delete(node, &kube::api::DeleteParams::default())
            .await
            .expect("deleting the Node");
    }
    // The members to remove are checked against a fresh VM list: neither VM is listed
    // any more (a Destroyed VM is not listed either), so no removal is sent, and no call
    // fails (CloudStack drops an expunged VM's mappings itself).
    common::eventually("the VM list is read again", common::WAIT, || async {
        let counts = t.h.sim.call_counts();
        counts
            .get("listVirtualMachines")
            .is_some_and(|n| *n >= 1)
            .then_some(())
    })
    .await;
    settle().await;
    let counts = t.h.sim.call_counts();
    assert_eq!(
        counts
            .get("removeFromLoadBalancerRule")
            .copied()
            .unwrap_or(0),
        0,
        "no removal of a VM CloudStack no longer lists: {counts:?}"
    );
    let failed = failing_calls(&t.h, since);
    assert!(failed.is_empty(), "no CloudStack call fails: {failed:?}");
    let client = t.client_of(common::ACCOUNT);
    let expected: Vec<String> = nodes[..3].iter().map(|n| t.h.vm_id(n)).collect();
    for name in &names {
        for rule in t.rules(name).await {
            let request = cloudstack::ListLoadBalancerRuleInstances {
                id: rule.id.clone(),
                ..Default::default()
            };
            let mut listed: Vec<String> = client
                .list_load_balancer_rule_instances(&request)
                .await
                .expect("listing the rule's instances")
                .into_iter()
                .filter_map(|vm| vm.id)
                .collect();
            listed.sort();
            let mut expected = expected.clone();
            expected.sort();
            assert_eq!(listed, expected, "{name}: {}", rule.name);
        }
    }
    settle().await;
    for name in &names {
        let failures: Vec<String> =
            t.h.events_about(name)
                .iter()
                .filter(|e| common::event_reason(e) == Some("SyncLoadBalancerFailed"))
                .map(|e| common::event_note(e).to_string())
                .collect();
        assert!(
            failures.is_empty(),
            "{name} converges in one pass, without a Warning: {failures:?}"
        );
    }
    t.stop().await;
}
