//! Deleting load balancers end to end: no call CloudStack must refuse (the firewall rules
//! `openfirewall` made go with their load-balancer rule), an address kept with `keep-ip`
//! stays with whoever requests it next, and load balancers adopted from the Go provider
//! are cleaned up as the Go provider would have (its addresses released, its ACL items
//! removed). What was deleted by hand meanwhile counts as deleted.

use crate::common;

use std::time::Duration;

use super::support::*;
use cloudstack::{
    AssignToLoadBalancerRule, AssociateIpAddress, CreateFirewallRule, CreateLoadBalancerRule,
    CreateNetworkAcl, DeleteFirewallRule, DeleteLoadBalancerRule,
};
use cloudstack_ccm::cloud::loadbalancer::annotations;
use cloudstack_ccm::cloud::loadbalancer::vocabulary::default_lb_name;
use cloudstack_ccm::controllers::service::finalizer::FINALIZER;
use cloudstack_sim::{SMALL_ACL, SMALL_NETWORK, SMALL_TIER, Scenario};
use k8s_openapi::api::core::v1::Service;

const NODES: [&str; 3] = ["node-1", "node-2", "node-3"];
const RESYNC: Duration = Duration::from_secs(100);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_services_makes_no_failing_call() {
    let t = LbTest::start(Scenario::small(), &NODES, RESYNC).await;
    // Rules made with `openfirewall=true` (default source range) ...
    t.create(&lb_service(
        "open",
        &[("TCP", 80, 30080), ("TCP", 443, 30443)],
    ))
    .await;
    // ... and rules with their own firewall rules (source ranges).
    let mut ranged = lb_service("ranged", &[("TCP", 8080, 30880), ("TCP", 8443, 30843)]);
    ranged
        .spec
        .as_mut()
        .expect("spec")
        .load_balancer_source_ranges = Some(vec!["198.51.100.0/24".into()]);
    t.create(&ranged).await;
    let open_ip = ip_id_of(&t.h, &t.wait_for_ip("open").await);
    let ranged_ip = ip_id_of(&t.h, &t.wait_for_ip("ranged").await);
    t.patch(
        "open",
        ports_patch(&[
            ("TCP", 80, 30080),
            ("TCP", 443, 30443),
            ("TCP", 9090, 30090),
        ]),
    )
    .await;
    t.wait_rules("open", "have a third port", |r| {
        r.len() == 3 && r.iter().all(|r| r.members.len() == 3)
    })
    .await;
    t.wait_rules("ranged", "have members", |r| {
        r.len() == 2 && r.iter().all(|r| r.members.len() == 3)
    })
    .await;
    common::eventually("firewall rules in place", common::WAIT, || async {
        (firewall_rules(&t.h, &open_ip).len() == 3 && firewall_rules(&t.h, &ranged_ip).len() == 2)
            .then_some(())
    })
    .await;

    let since = sim_now_ms();
    t.h.sim.reset_counts();
    t.delete("open").await;
    t.delete("ranged").await;
    t.wait_gone("open").await;
    t.wait_gone("ranged").await;
    for ip in [&open_ip, &ranged_ip] {
        assert_eq!(ip_state(&t.h, ip).as_deref(), Some("Free"), "IP released");
        assert!(firewall_rules(&t.h, ip).is_empty(), "no firewall rule left");
    }
    let failed = failing_calls(&t.h, since);
    assert!(
        failed.is_empty(),
        "no failing call on delete: {failed:?}; calls {:?}",
        mutating_counts(&t.h)
    );
    assert_eq!(
        mutating_counts(&t.h).get("deleteFirewallRule"),
        Some(&2),
        "only the firewall rules of the source ranges: those openfirewall made go with their rule"
    );
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_was_deleted_by_hand_does_not_block_the_deletion() {
    if common::skip_in_remote_mode("reads the simulator's call log") {
        return;
    }
    let t = LbTest::start(Scenario::small(), &NODES, RESYNC).await;
    t.h.expect_failing_calls();
    // Source ranges: each port has its own firewall rule besides its load-balancer rule.
    let mut ranged = lb_service("ranged", &[("TCP", 80, 30080), ("TCP", 443, 30443)]);
    ranged
        .spec
        .as_mut()
        .expect("spec")
        .load_balancer_source_ranges = Some(vec!["198.51.100.0/24".into()]);
    t.create(&ranged).await;
    let ip_id = ip_id_of(&t.h, &t.wait_for_ip("ranged").await);
    let rules = t
        .wait_rules("ranged", "have members", |r| {
            r.len() == 2 && r.iter().all(|r| r.members.len() == 3)
        })
        .await;
    common::eventually("firewall rules in place", common::WAIT, || async {
        (firewall_rules(&t.h, &ip_id).len() == 2).then_some(())
    })
    .await;
    let uid = t.uid("ranged").await;
    // The controller is done with the Service: what it saw last has both rules of each kind.
    settle().await;

    // By hand: the firewall rule of port 80 and the load-balancer rule of port 443.
    let firewall_80 = t.h.sim.with_state(|s| {
        s.firewall_rules
            .iter()
            .find(|f| f.ip_id == ip_id && f.start_port == Some(80))
            .map(|f| f.id.clone())
            .expect("the firewall rule of port 80")
    });
    let lb_443 = rules
        .iter()
        .find(|r| r.public_port == 443)
        .expect("rule 443")
        .id
        .clone();
    let cloud = t.client_of(common::ACCOUNT);
    cloud
        .delete_firewall_rule(&DeleteFirewallRule {
            id: firewall_80.clone(),
        })
        .await
        .expect("firewall rule deleted by hand");
    cloud
        .delete_load_balancer_rule(&DeleteLoadBalancerRule { id: lb_443.clone() })
        .await
        .expect("load-balancer rule deleted by hand");

    let since = sim_now_ms();
    t.delete("ranged").await;
    t.wait_gone("ranged").await;
    assert!(t.rules_of_uid(&uid).is_empty(), "rules deleted");
    assert!(
        firewall_rules(&t.h, &ip_id).is_empty(),
        "no firewall rule left"
    );
    assert_eq!(
        ip_state(&t.h, &ip_id).as_deref(),
        Some("Free"),
        "IP released"
    );
    // The deletion was planned from what the controller saw before the rules went: both
    // deletes found nothing, and that was all that failed.
    let mut failed = failing_calls(&t.h, since);
    failed.sort();
    assert_eq!(failed.len(), 2, "{failed:?}");
    for (call, (command, id)) in failed.iter().zip([
        ("deleteFirewallRule", &firewall_80),
        ("deleteLoadBalancerRule", &lb_443),
    ]) {
        assert!(
            call.starts_with(&format!("{command}: "))
                && call.contains(id.as_str())
                && call.contains("does not exist"),
            "{command} of {id} found nothing: {failed:?}"
        );
    }
    let seen = reasons(&t, "ranged");
    assert!(
        !seen.iter().any(|r| r == "SyncLoadBalancerFailed"),
        "no failure: {seen:?}"
    );
    assert!(
        seen.iter().any(|r| r == "DeletedLoadBalancer"),
        "deleted: {seen:?}"
    );
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_address_is_never_released_by_a_later_service() {
    let t = LbTest::start(Scenario::small(), &NODES, RESYNC).await;
    t.create(&with_annotations(
        lb_service("first", &[("TCP", 80, 30080)]),
        &[(annotations::KEEP_IP.key, "true")],
    ))
    .await;
    let address = t.wait_for_ip("first").await;
    let ip_id = ip_id_of(&t.h, &address);
    t.delete("first").await;
    t.wait_gone("first").await;
    assert_eq!(ip_state(&t.h, &ip_id).as_deref(), Some("Allocated"), "kept");

    // Requested through spec.loadBalancerIP, then deleted: the address stays.
    let mut second = lb_service("second", &[("TCP", 80, 30081)]);
    second.spec.as_mut().expect("spec").load_balancer_ip = Some(address.clone());
    t.create(&second).await;
    assert_eq!(t.wait_for_ip("second").await, address);
    t.delete("second").await;
    t.wait_gone("second").await;
    assert_eq!(
        ip_state(&t.h, &ip_id).as_deref(),
        Some("Allocated"),
        "a kept address belongs to the user: a later Service that requests it never releases it"
    );

    // The same through the address annotation.
    t.create(&with_annotations(
        lb_service("third", &[("TCP", 80, 30082)]),
        &[(annotations::ADDRESS.key, &address)],
    ))
    .await;
    assert_eq!(t.wait_for_ip("third").await, address);
    t.delete("third").await;
    t.wait_gone("third").await;
    assert_eq!(ip_state(&t.h, &ip_id).as_deref(), Some("Allocated"));
    t.stop().await;
}

/// What the Go provider (v1.2.0) leaves for a Service with one TCP port on network
/// `network`: its address (associated by it when `address` is `None`), a rule named
/// `<lb name>-tcp-<port>` made with `openfirewall=false`, every node as a member, and its
/// own firewall rule (isolated network) or ACL item (VPC tier, `acl`). No tags. Returns
/// the address's id and the address.
async fn go_provider_load_balancer(
    t: &LbTest,
    uid: &str,
    network: &str,
    address: Option<&str>,
    (port, node_port): (u32, u32),
    acl: Option<&str>,
) -> (String, String) {
    let client = t.client_of(common::ACCOUNT);
    let network_id = t.network_id(network);
    let (vpc_id, vms) = t.h.sim.with_state(|s| {
        let vpc = s
            .networks
            .iter()
            .find(|n| n.id == network_id)
            .and_then(|n| n.vpc_id.clone());
        let vms: Vec<String> = s
            .vms
            .iter()
            .filter(|vm| vm.nics.iter().any(|n| n.network_id == network_id))
            .map(|vm| vm.id.clone())
            .collect();
        (vpc, vms)
    });
    let (ip_id, address) = match address {
        Some(address) => (ip_id_of(&t.h, address), address.to_string()),
        None => {
            let request = AssociateIpAddress {
                networkid: vpc_id.is_none().then(|| network_id.clone()),
                vpcid: vpc_id.clone(),
                ..Default::default()
            };
            let ip = client
                .associate_ip_address(&request)
                .await
                .expect("the Go provider associates an address");
            (ip.id.expect("id"), ip.ipaddress.expect("address"))
        }
    };
    let rule = client
        .create_load_balancer_rule(&CreateLoadBalancerRule {
            name: format!("{}-tcp-{port}", default_lb_name(uid)),
            algorithm: "roundrobin".into(),
            privateport: node_port,
            publicport: port,
            publicipid: Some(ip_id.clone()),
            networkid: Some(network_id.clone()),
            protocol: Some("tcp".into()),
            openfirewall: Some(false),
            ..Default::default()
        })
        .await
        .expect("the Go provider creates its rule");
    client
        .assign_to_load_balancer_rule(&AssignToLoadBalancerRule {
            id: rule.id.expect("rule id"),
            virtualmachineids: vms,
            ..Default::default()
        })
        .await
        .expect("the Go provider assigns the nodes");
    match acl {
        None => {
            client
                .create_firewall_rule(&CreateFirewallRule {
                    ipaddressid: ip_id.clone(),
                    protocol: "tcp".into(),
                    startport: Some(port),
                    endport: Some(port),
                    cidrlist: vec!["0.0.0.0/0".into()],
                    ..Default::default()
                })
                .await
                .expect("the Go provider opens its firewall");
        }
        Some(acl) => {
            let acl_id = t.h.sim.with_state(|s| {
                s.acl_lists
                    .iter()
                    .find(|a| a.name == acl)
                    .map(|a| a.id.clone())
                    .expect("ACL list")
            });
            client
                .create_network_acl(&CreateNetworkAcl {
                    protocol: "tcp".into(),
                    aclid: Some(acl_id),
                    networkid: Some(network_id.clone()),
                    startport: Some(port),
                    endport: Some(port),
                    cidrlist: vec!["0.0.0.0/0".into()],
                    traffictype: Some("Ingress".into()),
                    action: Some("Allow".into()),
                    ..Default::default()
                })
                .await
                .expect("the Go provider adds its ACL item");
        }
    }
    (ip_id, address)
}

/// Creates Service `service` as the Go provider's cluster holds it (finalizer on),
/// without any of our annotations; returns its UID.
async fn go_provider_service(t: &LbTest, service: Service) -> String {
    let mut service = service;
    service.metadata.finalizers = Some(vec![FINALIZER.to_string()]);
    t.create(&service)
        .await
        .metadata
        .uid
        .expect("the Service has a UID")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_provider_load_balancers_are_cleaned_up_as_it_would() {
    let mut t = LbTest::prepare(Scenario::small(), &NODES, RESYNC).await;
    // The address the Go provider associated itself.
    let uid = go_provider_service(&t, lb_service("plain", &[("TCP", 80, 30080)])).await;
    let (plain_ip, _) =
        go_provider_load_balancer(&t, &uid, SMALL_NETWORK, None, (80, 30080), None).await;
    // A requested address the Go provider associated (and marked so).
    let requested = free_address(&t);
    let mut service = with_annotations(
        lb_service("marked", &[("TCP", 80, 30081)]),
        &[(annotations::IP_ASSOCIATED_BY_CONTROLLER.key, "true")],
    );
    service.spec.as_mut().expect("spec").load_balancer_ip = Some(requested.clone());
    let uid = go_provider_service(&t, service).await;
    let client = t.client_of(common::ACCOUNT);
    client
        .associate_ip_address(&AssociateIpAddress {
            networkid: Some(t.network_id(SMALL_NETWORK)),
            ipaddress: Some(requested.clone()),
            ..Default::default()
        })
        .await
        .expect("the Go provider associates the requested address");
    let (marked_ip, _) =
        go_provider_load_balancer(&t, &uid, SMALL_NETWORK, Some(&requested), (80, 30081), None)
            .await;
    // A requested address the user brought.
    let users = client
        .associate_ip_address(&AssociateIpAddress {
            networkid: Some(t.network_id(SMALL_NETWORK)),
            ..Default::default()
        })
        .await
        .expect("the user associates an address");
    let users_address = users.ipaddress.expect("address");
    let mut service = lb_service("brought", &[("TCP", 80, 30082)]);
    service.spec.as_mut().expect("spec").load_balancer_ip = Some(users_address.clone());
    let uid = go_provider_service(&t, service).await;
    let (brought_ip, _) = go_provider_load_balancer(
        &t,
        &uid,
        SMALL_NETWORK,
        Some(&users_address),
        (80, 30082),
        None,
    )
    .await;

    // Our controller takes over, changing nothing but tags, then the Services go.
    t.h.sim.reset_counts();
    t.start_controller(RESYNC);
    for name in ["plain", "marked", "brought"] {
        t.wait_for_ip(name).await;
    }
    let changes: Vec<String> = mutating_counts(&t.h)
        .into_keys()
        .filter(|c| c != "createTags")
        .collect();
    assert!(changes.is_empty(), "taken over unchanged: {changes:?}");
    let since = sim_now_ms();
    for name in ["plain", "marked", "brought"] {
        t.delete(name).await;
    }
    for name in ["plain", "marked", "brought"] {
        t.wait_gone(name).await;
    }
    assert_eq!(
        ip_state(&t.h, &plain_ip).as_deref(),
        Some("Free"),
        "the Go provider releases an address spec.loadBalancerIP did not request"
    );
    assert_eq!(
        ip_state(&t.h, &marked_ip).as_deref(),
        Some("Free"),
        "... and a requested one it marked as associated by it"
    );
    assert_eq!(
        ip_state(&t.h, &brought_ip).as_deref(),
        Some("Allocated"),
        "the user's address stays"
    );
    assert!(
        firewall_rules(&t.h, &brought_ip).is_empty(),
        "its firewall rule went"
    );
    let failed = failing_calls(&t.h, since);
    assert!(failed.is_empty(), "no failing call: {failed:?}");
    t.stop().await;
}

/// A free address of the small scenario's zone.
fn free_address(t: &LbTest) -> String {
    t.h.sim.with_state(|s| {
        s.ips
            .iter()
            .find(|ip| ip.state == "Free")
            .map(|ip| ip.address.clone())
            .expect("a free address")
    })
}

/// The ingress ACL items of list `acl` as (protocol, port, CIDRs), sorted.
fn acl_items(t: &LbTest, acl: &str) -> Vec<(String, i64, Vec<String>)> {
    t.h.sim.with_state(|s| {
        let acl_id = s
            .acl_lists
            .iter()
            .find(|a| a.name == acl)
            .map(|a| a.id.clone())
            .expect("ACL list");
        let mut items: Vec<(String, i64, Vec<String>)> = s
            .acl_items
            .iter()
            .filter(|i| i.acl_id == acl_id)
            .map(|i| {
                (
                    i.protocol.clone(),
                    i.start_port.unwrap_or(-1),
                    i.cidrs.clone(),
                )
            })
            .collect();
        items.sort();
        items
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_provider_acl_items_go_with_their_service_or_give_way_to_source_ranges() {
    let mut scenario = Scenario::small();
    let vms = scenario.add_vms(SMALL_TIER, "vpc-node-", 2);
    let names: Vec<&str> = vms.iter().map(String::as_str).collect();
    let mut t = LbTest::prepare(scenario, &names, RESYNC).await;
    let web = go_provider_service(&t, lb_service("web", &[("TCP", 80, 30080)])).await;
    go_provider_load_balancer(&t, &web, SMALL_TIER, None, (80, 30080), Some(SMALL_ACL)).await;
    let api = go_provider_service(&t, lb_service("api", &[("TCP", 443, 30443)])).await;
    go_provider_load_balancer(&t, &api, SMALL_TIER, None, (443, 30443), Some(SMALL_ACL)).await;
    let any = vec!["0.0.0.0/0".to_string()];
    assert_eq!(
        acl_items(&t, SMALL_ACL),
        [
            ("tcp".into(), 80, any.clone()),
            ("tcp".into(), 443, any.clone())
        ]
    );

    t.start_controller(RESYNC);
    t.wait_for_ip("web").await;
    t.wait_for_ip("api").await;
    // Source ranges on one: the Go provider's item gives way to the Service's own.
    t.patch(
        "api",
        serde_json::json!({ "spec": { "loadBalancerSourceRanges": ["198.51.100.0/24"] } }),
    )
    .await;
    let ranged = vec!["198.51.100.0/24".to_string()];
    let expected = vec![
        ("tcp".to_string(), 80, any.clone()),
        ("tcp".to_string(), 443, ranged),
    ];
    common::eventually(
        "the ACL item follows the source ranges",
        common::WAIT,
        || async { (acl_items(&t, SMALL_ACL) == expected).then_some(()) },
    )
    .await;
    // The other goes: its port closes.
    let since = sim_now_ms();
    t.delete("web").await;
    t.wait_gone("web").await;
    common::eventually(
        "the Go provider's item of web is removed",
        common::WAIT,
        || async { (acl_items(&t, SMALL_ACL) == expected[1..]).then_some(()) },
    )
    .await;
    let failed = failing_calls(&t.h, since);
    assert!(failed.is_empty(), "no failing call: {failed:?}");
    t.stop().await;
}
