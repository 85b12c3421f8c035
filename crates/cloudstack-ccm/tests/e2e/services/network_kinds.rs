//! Every network a cluster lives on (docs/networks.md): where CloudStack has no load
//! balancer (ROUTED, shared) a Service gets a Warning and a condition and nothing in
//! CloudStack, with no failing call; NSX and Netris are served as they behave; IPv6-only
//! Services are refused the same way, dual-stack ones get their IPv4 load balancer.

use crate::common;

use std::time::Duration;

use super::support::*;
use cloudstack_ccm::cloud::loadbalancer::annotations;
use cloudstack_sim::Scenario;
use k8s_openapi::api::core::v1::Service;

const RESYNC: Duration = Duration::from_secs(100);

/// CloudStack objects of any kind the simulator holds beyond `before` (IPs allocated,
/// rules, firewall rules, ACL items, jobs).
fn cloud_objects(t: &LbTest) -> (usize, usize, usize, usize, usize) {
    t.h.sim.with_state(|s| {
        (
            s.ips.iter().filter(|ip| ip.state != "Free").count(),
            s.lb_rules.len(),
            s.firewall_rules.len(),
            s.acl_items.len(),
            s.jobs.len(),
        )
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ipv6_only_service_gets_a_warning_and_a_condition_and_nothing_in_cloudstack() {
    if common::skip_in_remote_mode("reads the simulator's state") {
        return;
    }
    let t = LbTest::start(Scenario::small(), &["node-1", "node-2"], RESYNC).await;
    let before = cloud_objects(&t);
    let mut v6 = lb_service("v6", &[("TCP", 80, 30080)]);
    let spec = v6.spec.as_mut().expect("spec");
    spec.ip_families = Some(vec!["IPv6".into()]);
    spec.ip_family_policy = Some("SingleStack".into());
    t.create(&v6).await;
    let event = t
        .wait_event("v6", "SyncLoadBalancerFailed", "IPv4 only")
        .await;
    assert_eq!(event["type"], "Warning");
    let (status, reason, message) = t.wait_condition("v6").await;
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "IPv6NotSupported")
    );
    assert!(message.contains("spec.ipFamilies: [IPv6]"), "{message}");

    // Dual-stack, required: the IPv4 load balancer, and a Warning.
    let mut dual = lb_service("dual", &[("TCP", 80, 30081)]);
    let spec = dual.spec.as_mut().expect("spec");
    spec.ip_families = Some(vec!["IPv4".into(), "IPv6".into()]);
    spec.ip_family_policy = Some("RequireDualStack".into());
    t.create(&dual).await;
    t.wait_event("dual", "LoadBalancerWarning", "RequireDualStack")
        .await;
    let served = t
        .wait_for("dual", "has its IPv4 ingress", |s| ingress_ip(s).is_some())
        .await;
    assert!(
        ingress_ip(&served)
            .and_then(|ip| ip.parse::<std::net::IpAddr>().ok())
            .is_some_and(|ip| ip.is_ipv4())
    );
    assert!(supported_condition(&served).is_none());
    settle().await;
    let (ips, rules, ..) = cloud_objects(&t);
    assert_eq!(
        (ips - before.0, rules - before.1),
        (1, 1),
        "only the dual-stack Service's address and rule"
    );
    t.stop().await;
}

/// No CloudStack call and no job failed in the whole test.
fn assert_no_failing_calls(t: &LbTest) {
    let failed = failing_calls(&t.h, 0);
    assert!(failed.is_empty(), "{failed:#?}");
}

/// A service controller with one Node, the VM `vm` of `Scenario::network_kinds()`.
async fn on_network_of(vm: &str) -> LbTest {
    LbTest::start(Scenario::network_kinds(), &[vm], RESYNC).await
}

/// The calls a careless controller would make on a network without a load balancer.
const LOAD_BALANCER_CALLS: [&str; 5] = [
    "associateIpAddress",
    "createLoadBalancerRule",
    "createFirewallRule",
    "createNetworkACL",
    "assignToLoadBalancerRule",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routed_and_shared_networks_get_a_warning_and_a_condition_and_nothing_in_cloudstack() {
    if common::skip_in_remote_mode("needs the simulator's network kinds") {
        return;
    }
    for (vm, network, why) in [
        (
            "vm-routed",
            cloudstack_sim::KINDS_ROUTED_NETWORK,
            "ROUTED mode",
        ),
        (
            "vm-tier-routed",
            cloudstack_sim::KINDS_ROUTED_TIER,
            "ROUTED mode",
        ),
        (
            "vm-shared",
            cloudstack_sim::KINDS_SHARED_NETWORK,
            "shared network",
        ),
    ] {
        let t = on_network_of(vm).await;
        let before = cloud_objects(&t);
        t.create(&lb_service(
            "web",
            &[("TCP", 80, 30080), ("UDP", 53, 30053)],
        ))
        .await;
        let event = t.wait_event("web", "SyncLoadBalancerFailed", why).await;
        let note = common::event_note(&event);
        assert!(
            note.contains(network) && note.contains("loadBalancerClass"),
            "{vm}: {note}"
        );
        let (status, reason, message) = t.wait_condition("web").await;
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("False", "NoLoadBalancerOnNetwork"),
            "{vm}"
        );
        assert!(message.contains(network), "{vm}: {message}");
        settle().await;
        assert_eq!(cloud_objects(&t), before, "{vm}: nothing in CloudStack");
        let counts = t.h.cloudstack_call_counts();
        for command in LOAD_BALANCER_CALLS {
            assert_eq!(counts.get(command), None, "{vm}: {command}");
        }
        // The Service goes: nothing to clean up, and it goes at once.
        t.delete("web").await;
        t.wait_gone("web").await;
        let failed = failing_calls(&t.h, 0);
        assert!(failed.is_empty(), "{vm}: {failed:#?}");
        println!("{vm}: {note}");
        t.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nsx_serves_a_health_checked_service_and_says_nsx_monitors_the_members() {
    if common::skip_in_remote_mode("needs the simulator's network kinds") {
        return;
    }
    let t = on_network_of("vm-nsx").await;
    t.create(&with_annotations(
        lb_service("web", &[("TCP", 80, 30080), ("UDP", 53, 30053)]),
        &[
            (annotations::HEALTH_CHECK_PATH.key, "/ready"),
            (annotations::SOURCE_CIDRS.key, "10.0.0.0/8"),
        ],
    ))
    .await;
    t.wait_rules("web", "TCP and UDP rules with their member", |r| {
        r.len() == 2 && r.iter().all(|r| r.members.len() == 1)
    })
    .await;
    t.wait_event("web", "LoadBalancerWarning", "NSX monitors")
        .await;
    let rules = t.rules("web").await;
    let ip_id = rules[0].ip_id.clone();
    assert!(
        rules
            .iter()
            .all(|r| r.cidrs.is_empty() || r.cidrs == ["0.0.0.0/0"]),
        "no cidrlist on the rules: {rules:?}"
    );
    let firewall = firewall_rules(&t.h, &ip_id);
    assert_eq!(firewall.len(), 2, "{firewall:?}");
    assert!(
        firewall
            .iter()
            .all(|(_, _, cidrs)| cidrs == &["10.0.0.0/8"]),
        "{firewall:?}"
    );
    assert_eq!(
        t.h.cloudstack_call_counts()
            .get("createLBHealthCheckPolicy"),
        None
    );
    t.wait_for("web", "has its ingress", |s| ingress_ip(s).is_some())
        .await;
    t.delete("web").await;
    t.wait_gone("web").await;
    assert_no_failing_calls(&t);
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn netris_serves_tcp_only_and_never_sends_what_it_refuses() {
    if common::skip_in_remote_mode("needs the simulator's network kinds") {
        return;
    }
    let t = on_network_of("vm-netris").await;
    t.create(&with_annotations(
        lb_service("web", &[("TCP", 80, 30080), ("UDP", 53, 30053)]),
        &[(annotations::PROXY_PROTOCOL.key, "true")],
    ))
    .await;
    let rules = t
        .wait_rules("web", "one TCP rule with its member", |r| {
            r.len() == 1 && r[0].members.len() == 1
        })
        .await;
    assert_eq!(
        (rules[0].protocol.as_str(), rules[0].public_port),
        ("tcp", 80)
    );
    t.wait_event("web", "LoadBalancerWarning", "UDP is not served by Netris")
        .await;
    t.wait_event("web", "LoadBalancerWarning", "PROXY protocol not applied")
        .await;
    // A new algorithm: Netris refuses it on update; a Warning, no call.
    t.patch(
        "web",
        serde_json::json!({"metadata": {"annotations": {annotations::ALGORITHM.key: "leastconn"}}}),
    )
    .await;
    t.wait_event(
        "web",
        "LoadBalancerWarning",
        "algorithm leastconn not applied",
    )
    .await;
    settle().await;
    assert_eq!(
        t.h.cloudstack_call_counts().get("updateLoadBalancerRule"),
        None
    );
    t.wait_for("web", "has its ingress", |s| ingress_ip(s).is_some())
        .await;
    t.delete("web").await;
    t.wait_gone("web").await;
    assert_no_failing_calls(&t);
    t.stop().await;
}

/// A routing firewall rule as the simulator holds it: (network, protocol, port,
/// destinations, sources).
type RoutingRule = (String, String, i64, Vec<String>, Vec<String>);

/// The routing firewall rules of the simulator, sorted.
fn routing_rules(t: &LbTest) -> Vec<RoutingRule> {
    let mut rules: Vec<_> = t.h.sim.with_state(|s| {
        s.routing_firewall_rules
            .iter()
            .map(|r| {
                (
                    r.network_id.clone(),
                    r.protocol.clone(),
                    r.start_port.unwrap_or_default(),
                    r.dest_cidrs.clone(),
                    r.cidrs.clone(),
                )
            })
            .collect()
    });
    rules.sort();
    rules
}

/// What MetalLB does: gives the Service an address in its status.
async fn assign_address(t: &LbTest, name: &str, address: &str) {
    use kube::api::{Patch, PatchParams};
    let patch = serde_json::json!({"status": {"loadBalancer": {"ingress": [{"ip": address}]}}});
    t.services()
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("status patched");
}

/// A Service MetalLB serves, opted in to the routing firewall companion.
fn metallb_service(name: &str) -> Service {
    let mut service = with_annotations(
        lb_service(name, &[("TCP", 80, 30080), ("UDP", 53, 30053)]),
        &[(annotations::ROUTED_FIREWALL.key, "true")],
    );
    let spec = service.spec.as_mut().expect("spec");
    spec.load_balancer_class = Some("metallb.io/metallb".into());
    spec.load_balancer_source_ranges = Some(vec!["192.0.2.0/24".into()]);
    service
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metallb_address_on_a_routed_network_gets_its_routing_firewall_rules_and_loses_them_with_the_service()
 {
    if common::skip_in_remote_mode("needs the simulator's network kinds") {
        return;
    }
    let t = on_network_of("vm-routed").await;
    let network = t.network_id(cloudstack_sim::KINDS_ROUTED_NETWORK);
    t.create(&metallb_service("web")).await;
    assign_address(&t, "web", "10.1.10.200").await;
    let want = |address: &str| {
        vec![
            (
                network.clone(),
                "tcp".to_string(),
                80,
                vec![format!("{address}/32")],
                vec!["192.0.2.0/24".to_string()],
            ),
            (
                network.clone(),
                "udp".to_string(),
                53,
                vec![format!("{address}/32")],
                vec!["192.0.2.0/24".to_string()],
            ),
        ]
    };
    let mut sorted = want("10.1.10.200");
    sorted.sort();
    common::eventually("a routing firewall rule per port", t.h.wait(), || async {
        (routing_rules(&t) == sorted).then_some(())
    })
    .await;
    let service = t.get("web").await.expect("web");
    assert!(
        service
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == cloudstack_ccm::controllers::service::ROUTED_FIREWALL_FINALIZER)
    );
    assert!(
        !has_finalizer(&service),
        "not the load-balancer finalizer: MetalLB serves the Service"
    );
    let uid = t.uid("web").await;
    common::eventually("both rules carry the Service's UID", t.h.wait(), || async {
        let tagged = t.h.sim.with_state(|s| {
            s.tags
                .iter()
                .filter(|tag| tag.key == "cloudstack-ccm/service-uid" && tag.value == uid)
                .count()
        });
        (tagged == 2).then_some(())
    })
    .await;

    // MetalLB moves the Service to another address: the rules follow.
    assign_address(&t, "web", "10.1.10.201").await;
    let mut moved = want("10.1.10.201");
    moved.sort();
    common::eventually("the rules follow the address", t.h.wait(), || async {
        (routing_rules(&t) == moved).then_some(())
    })
    .await;

    // The Service goes: its rules go, then the Service.
    t.delete("web").await;
    t.wait_gone("web").await;
    assert!(routing_rules(&t).is_empty(), "{:?}", routing_rules(&t));
    let counts = t.h.cloudstack_call_counts();
    assert_eq!(counts.get("associateIpAddress"), None);
    assert_eq!(counts.get("createLoadBalancerRule"), None);
    assert_no_failing_calls(&t);
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_routing_firewall_companion_on_a_network_that_is_not_routed_is_a_warning() {
    if common::skip_in_remote_mode("needs the simulator's network kinds") {
        return;
    }
    let t = on_network_of("vm-nsx").await;
    t.create(&metallb_service("web")).await;
    assign_address(&t, "web", "203.0.113.77").await;
    t.wait_event("web", "SyncLoadBalancerFailed", "is not in ROUTED mode")
        .await;
    settle().await;
    assert!(routing_rules(&t).is_empty());
    assert_eq!(
        t.h.cloudstack_call_counts()
            .get("createRoutingFirewallRule"),
        None
    );
    t.delete("web").await;
    t.wait_gone("web").await;
    assert_no_failing_calls(&t);
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_routed_tier_the_companion_keeps_acl_items_in_the_tiers_list() {
    if common::skip_in_remote_mode("needs the simulator's network kinds") {
        return;
    }
    // The ROUTED tier with a custom ACL list (the scenario's uses default_allow).
    let mut scenario = Scenario::network_kinds();
    scenario.acl_lists.push(cloudstack_sim::AclListSpec {
        id: None,
        name: "routed-acl".into(),
        vpc: cloudstack_sim::KINDS_ROUTED_VPC.into(),
        description: None,
    });
    for network in &mut scenario.networks {
        if network.name == cloudstack_sim::KINDS_ROUTED_TIER {
            network.acl = Some("routed-acl".into());
        }
    }
    let t = LbTest::start(scenario, &["vm-tier-routed"], RESYNC).await;
    t.create(&metallb_service("web")).await;
    assign_address(&t, "web", "10.200.1.200").await;
    let items = || {
        t.h.sim.with_state(|s| {
            let mut items: Vec<(String, i64, Vec<String>)> = s
                .acl_items
                .iter()
                .map(|i| {
                    (
                        i.protocol.clone(),
                        i.start_port.unwrap_or_default(),
                        i.cidrs.clone(),
                    )
                })
                .collect();
            items.sort();
            items
        })
    };
    let want = vec![
        ("tcp".to_string(), 80, vec!["192.0.2.0/24".to_string()]),
        ("udp".to_string(), 53, vec!["192.0.2.0/24".to_string()]),
    ];
    common::eventually("an ACL item per port", t.h.wait(), || async {
        (items() == want).then_some(())
    })
    .await;
    assert!(routing_rules(&t).is_empty());
    t.delete("web").await;
    t.wait_gone("web").await;
    assert!(items().is_empty(), "{:?}", items());
    assert_no_failing_calls(&t);
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routing_firewall_rules_of_a_service_gone_without_its_finalizer_are_orphans() {
    if common::skip_in_remote_mode("needs the simulator's network kinds") {
        return;
    }
    let t = on_network_of("vm-routed").await;
    t.create(&metallb_service("web")).await;
    assign_address(&t, "web", "10.1.10.200").await;
    let uid = t.uid("web").await;
    common::eventually("the rules stand, tagged", t.h.wait(), || async {
        let tagged = t.h.sim.with_state(|s| {
            s.tags
                .iter()
                .filter(|tag| tag.key == "cloudstack-ccm/service-uid" && tag.value == uid)
                .count()
        });
        (routing_rules(&t).len() == 2 && tagged == 2).then_some(())
    })
    .await;
    // Someone removes the finalizer by hand, and the Service goes with its rules left.
    t.patch("web", serde_json::json!({"metadata": {"finalizers": null}}))
        .await;
    t.delete("web").await;
    t.wait_gone("web").await;
    assert_eq!(routing_rules(&t).len(), 2);
    let report = t.delete_orphans().await;
    let kinds: Vec<String> = report.orphans.iter().map(|o| o.kind.to_string()).collect();
    assert_eq!(kinds, ["routing_firewall_rule", "routing_firewall_rule"]);
    assert_eq!(report.failed(), 0);
    assert!(routing_rules(&t).is_empty(), "{:?}", routing_rules(&t));
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_4_20_the_companion_never_asks_for_routing_firewall_rules() {
    if common::skip_in_remote_mode("needs a CloudStack version below 4.20") {
        return;
    }
    let mut scenario = Scenario::small();
    scenario.version = cloudstack_sim::Version::parse("4.19").unwrap();
    let t = LbTest::start(scenario, &["node-1"], RESYNC).await;
    t.create(&metallb_service("web")).await;
    assign_address(&t, "web", "203.0.113.77").await;
    t.wait_event("web", "SyncLoadBalancerFailed", "is not in ROUTED mode")
        .await;
    t.delete("web").await;
    t.wait_gone("web").await;
    assert_eq!(
        t.h.cloudstack_call_counts().get("listRoutingFirewallRules"),
        None,
        "a 4.19 server does not know the command (401: refused keys)"
    );
    assert_no_failing_calls(&t);
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resync_of_unchanged_companions_lists_the_clusters_rules_once() {
    if common::skip_in_remote_mode("needs the simulator's network kinds") {
        return;
    }
    const SERVICES: usize = 4;
    let resync = Duration::from_millis(1500);
    let t = LbTest::start(Scenario::network_kinds(), &["vm-routed"], resync).await;
    for i in 0..SERVICES {
        let name = format!("web-{i}");
        t.create(&metallb_service(&name)).await;
        assign_address(&t, &name, &format!("10.1.10.{}", 200 + i)).await;
    }
    common::eventually("every companion's rules stand", t.h.wait(), || async {
        (routing_rules(&t).len() == 2 * SERVICES).then_some(())
    })
    .await;
    // One resync with the listing warm, then measure one.
    tokio::time::sleep(resync * 2).await;
    t.h.sim.reset_counts();
    common::eventually("a resync reads the view", t.h.wait(), || async {
        t.h.sim
            .call_counts()
            .get("listLoadBalancerRules")
            .is_some_and(|n| *n > 0)
            .then_some(())
    })
    .await;
    tokio::time::sleep(resync / 2).await;
    let counts = t.h.cloudstack_call_counts();
    println!("one resync of {SERVICES} companion Services: {counts:?}");
    assert_eq!(
        counts.get("listRoutingFirewallRules"),
        Some(&1),
        "{counts:?}"
    );
    assert_eq!(counts.get("listNetworkACLs"), Some(&1), "{counts:?}");
    assert!(mutating_counts(&t.h).is_empty(), "{counts:?}");
    assert_no_failing_calls(&t);
    t.stop().await;
}
