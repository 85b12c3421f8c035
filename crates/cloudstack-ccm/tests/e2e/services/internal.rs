//! Internal load balancers on VPC tiers (CloudStack's Internal LB,
//! `service.beta.kubernetes.io/cloudstack-load-balancer-internal`): one internal rule per
//! TCP port on one tier address, members following the Nodes, changes in place, switching
//! between internal and public, deletion, orphans; a public Service on an internal-only
//! tier and an internal one on a tier without it are refused before any call.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use super::support::*;
use cloudstack_ccm::cloud::loadbalancer::annotations;
use cloudstack_ccm::cloud::tags::TAG_SERVICE_UID;
use cloudstack_sim::{KINDS_INTERNAL_LB_TIER, SMALL_TIER, Scenario};
use fake_apiserver::{Fault, Verb};
use k8s_openapi::api::core::v1::Service;
use serde_json::json;

const RESYNC: Duration = Duration::from_secs(100);

/// The internal rules the simulator holds: (name, source address, source port, instance
/// port, member VM ids, tagged with `uid`).
type InternalRuleView = (String, String, u16, u16, BTreeSet<String>, bool);

fn internal_rules(t: &LbTest, uid: &str) -> Vec<InternalRuleView> {
    t.h.sim.with_state(|s| {
        let mut rules: Vec<InternalRuleView> = s
            .internal_lb_rules
            .iter()
            .map(|r| {
                let tagged = s.tags.iter().any(|tag| {
                    tag.resource_id == r.id && tag.key == TAG_SERVICE_UID && tag.value == uid
                });
                (
                    r.name.clone(),
                    r.source_ip.clone(),
                    r.source_port,
                    r.instance_port,
                    r.members.iter().map(|m| m.vm_id.clone()).collect(),
                    tagged,
                )
            })
            .collect();
        rules.sort();
        rules
    })
}

fn all_internal_rules(t: &LbTest) -> usize {
    t.h.sim.with_state(|s| s.internal_lb_rules.len())
}

/// Allocated public addresses and public rules.
fn public_objects(t: &LbTest) -> (usize, usize) {
    t.h.sim.with_state(|s| {
        (
            s.ips.iter().filter(|ip| ip.state != "Free").count(),
            s.lb_rules.len(),
        )
    })
}

fn internal(service: Service) -> Service {
    with_annotations(service, &[(annotations::INTERNAL.key, "true")])
}

/// The internal-LB tier of `Scenario::network_kinds()` with `vm-ilb` and two more VMs.
async fn on_internal_tier(nodes: &[&str]) -> LbTest {
    let mut scenario = Scenario::network_kinds();
    scenario.add_vms(KINDS_INTERNAL_LB_TIER, "ilb-node-", 2);
    LbTest::start(scenario, nodes, RESYNC).await
}

/// Creates the internal Service `name` with `ports` and waits until it is served; returns
/// its address and UID.
async fn served_internal(t: &LbTest, name: &str, ports: &[(&str, i32, i32)]) -> (String, String) {
    t.create(&internal(lb_service(name, ports))).await;
    (t.wait_for_ip(name).await, t.uid(name).await)
}

fn vm_ids(t: &LbTest, names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| t.h.vm_id(n)).collect()
}

fn calls_of(t: &LbTest, command: &str) -> u64 {
    t.h.cloudstack_call_counts()
        .get(command)
        .copied()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_internal_service_gets_one_rule_per_port_on_one_tier_address_and_follows_its_nodes() {
    if common::skip_in_remote_mode("needs the simulator's internal load balancer") {
        return;
    }
    let t = on_internal_tier(&["vm-ilb", "ilb-node-1"]).await;
    let (public_ips, public_rules) = public_objects(&t);
    let (address, uid) =
        served_internal(&t, "db", &[("TCP", 5432, 31432), ("TCP", 6432, 31433)]).await;
    let lb = cloudstack_ccm::cloud::loadbalancer::vocabulary::default_lb_name(&uid);
    let members = vm_ids(&t, &["vm-ilb", "ilb-node-1"]);
    let want = |ports: &[(u16, u16)], members: &BTreeSet<String>| -> Vec<InternalRuleView> {
        ports
            .iter()
            .map(|(port, node_port)| {
                (
                    format!("{lb}-tcp-{port}"),
                    address.clone(),
                    *port,
                    *node_port,
                    members.clone(),
                    true,
                )
            })
            .collect()
    };
    common::eventually(
        "two tagged internal rules on one address",
        t.h.wait(),
        || async {
            (internal_rules(&t, &uid) == want(&[(5432, 31432), (6432, 31433)], &members))
                .then_some(())
        },
    )
    .await;
    assert!(
        address.starts_with("10.220.1."),
        "a tier address: {address}"
    );
    let service = t.get("db").await.expect("db");
    assert_eq!(
        annotation(&service, annotations::INTERNAL_NETWORK_ID.key),
        Some(t.network_id(KINDS_INTERNAL_LB_TIER).as_str()),
        "the tier is recorded"
    );
    assert_eq!(annotation(&service, annotations::IP_ID.key), None);
    assert_eq!(
        public_objects(&t),
        (public_ips, public_rules),
        "nothing public"
    );
    assert_eq!(calls_of(&t, "associateIpAddress"), 0);
    assert_eq!(calls_of(&t, "createLoadBalancerRule"), 0);

    // Ports change in place: 6432 goes, 8080 comes on the same address.
    t.patch(
        "db",
        ports_patch(&[("TCP", 5432, 31432), ("TCP", 8080, 31080)]),
    )
    .await;
    common::eventually("8080 replaces 6432", t.h.wait(), || async {
        (internal_rules(&t, &uid) == want(&[(5432, 31432), (8080, 31080)], &members)).then_some(())
    })
    .await;

    // A Node joins, another leaves.
    add_node(&t.h, "ilb-node-2").await;
    let three = vm_ids(&t, &["vm-ilb", "ilb-node-1", "ilb-node-2"]);
    common::eventually("the new Node is a member", t.h.wait(), || async {
        (internal_rules(&t, &uid) == want(&[(5432, 31432), (8080, 31080)], &three)).then_some(())
    })
    .await;
    t.h.nodes()
        .delete("ilb-node-1", &Default::default())
        .await
        .expect("Node deleted");
    let two = vm_ids(&t, &["vm-ilb", "ilb-node-2"]);
    common::eventually("the Node gone is no member", t.h.wait(), || async {
        (internal_rules(&t, &uid) == want(&[(5432, 31432), (8080, 31080)], &two)).then_some(())
    })
    .await;

    t.delete("db").await;
    t.wait_gone("db").await;
    assert_eq!(all_internal_rules(&t), 0, "nothing left");
    assert_eq!(public_objects(&t), (public_ips, public_rules));
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_internal_load_balancer_cannot_do_is_a_warning_and_the_tcp_ports_are_served() {
    if common::skip_in_remote_mode("needs the simulator's internal load balancer") {
        return;
    }
    let t = on_internal_tier(&["vm-ilb"]).await;
    let mut service = with_annotations(
        internal(lb_service("dns", &[("TCP", 53, 30053), ("UDP", 54, 30054)])),
        &[
            (annotations::HEALTH_CHECK_PATH.key, "/healthz"),
            (annotations::INTERNAL_ADDRESS.key, "10.220.1.200"),
        ],
    );
    service
        .spec
        .as_mut()
        .expect("spec")
        .load_balancer_source_ranges = Some(vec!["10.0.0.0/8".into()]);
    t.create(&service).await;
    let address = t.wait_for_ip("dns").await;
    assert_eq!(address, "10.220.1.200", "the address asked for");
    for what in [
        "UDP port(s) 54",
        "loadBalancerSourceRanges",
        "the health check",
    ] {
        t.wait_event("dns", "LoadBalancerWarning", what).await;
    }
    let uid = t.uid("dns").await;
    let rules = internal_rules(&t, &uid);
    assert_eq!(rules.len(), 1, "{rules:?}");
    assert_eq!((rules[0].2, rules[0].3), (53, 30053));
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_public_service_on_an_internal_only_tier_is_refused_before_any_call() {
    if common::skip_in_remote_mode("needs the simulator's internal load balancer") {
        return;
    }
    let t = on_internal_tier(&["vm-ilb"]).await;
    let before = public_objects(&t);
    t.create(&lb_service("web", &[("TCP", 80, 30080)])).await;
    let event = t
        .wait_event(
            "web",
            "SyncLoadBalancerFailed",
            "internal load-balancer scheme only",
        )
        .await;
    let note = common::event_note(&event).to_string();
    assert!(
        note.contains("tier-ilb") && note.contains(annotations::INTERNAL.key),
        "{note}"
    );
    let (status, reason, _) = t.wait_condition("web").await;
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "NoLoadBalancerOnNetwork")
    );
    settle().await;
    assert_eq!(public_objects(&t), before);
    for command in [
        "associateIpAddress",
        "createLoadBalancerRule",
        "createNetworkACL",
    ] {
        assert_eq!(calls_of(&t, command), 0, "{command}");
    }
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_internal_service_on_a_tier_without_an_internal_load_balancer_is_refused() {
    if common::skip_in_remote_mode("needs the simulator's VPC tier") {
        return;
    }
    let mut scenario = Scenario::network_kinds();
    scenario.add_vms(SMALL_TIER, "tier-node-", 1);
    let t = LbTest::start(scenario, &["tier-node-1"], RESYNC).await;
    t.create(&internal(lb_service("db", &[("TCP", 5432, 31432)])))
        .await;
    t.wait_event(
        "db",
        "SyncLoadBalancerFailed",
        "no internal load balancer on network",
    )
    .await;
    let (_, reason, message) = t.wait_condition("db").await;
    assert_eq!(reason, "NoInternalLoadBalancerOnNetwork");
    assert!(
        message.contains("public load-balancer scheme only"),
        "{message}"
    );
    settle().await;
    assert_eq!(all_internal_rules(&t), 0);
    assert_eq!(calls_of(&t, "createLoadBalancer"), 0);

    t.stop().await;
}

/// Sets the Service's `…-internal` annotation to `internal`.
async fn switch_internal(t: &LbTest, name: &str, internal: bool) {
    let value = if internal { "true" } else { "false" };
    t.patch(
        name,
        json!({"metadata": {"annotations": {annotations::INTERNAL.key: value}}}),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switching_between_internal_and_public_tears_the_old_kind_down() {
    if common::skip_in_remote_mode("needs the simulator's network kinds") {
        return;
    }
    // Internal → public on the internal-LB tier: the internal rules go; the public one
    // is refused there.
    let t = on_internal_tier(&["vm-ilb"]).await;
    let (_, uid) = served_internal(&t, "db", &[("TCP", 5432, 31432)]).await;
    switch_internal(&t, "db", false).await;
    t.wait_event(
        "db",
        "SyncLoadBalancerFailed",
        "internal load-balancer scheme only",
    )
    .await;
    common::eventually("the internal rules are gone", t.h.wait(), || async {
        internal_rules(&t, &uid).is_empty().then_some(())
    })
    .await;
    let service = t
        .wait_for("db", "the tier record is dropped", |s| {
            annotation(s, annotations::INTERNAL_NETWORK_ID.key).is_none()
        })
        .await;
    assert!(ingress_ip(&service).is_none(), "no address is reported");
    t.stop().await;

    // Public → internal on a Virtual Router tier: the public load balancer and its
    // address go; the internal one is refused there.
    let mut scenario = Scenario::network_kinds();
    scenario.add_vms(SMALL_TIER, "tier-node-", 1);
    let t = LbTest::start(scenario, &["tier-node-1"], RESYNC).await;
    let before = public_objects(&t);
    t.create(&lb_service("web", &[("TCP", 80, 30080)])).await;
    t.wait_for_ip("web").await;
    assert_eq!(public_objects(&t), (before.0 + 1, before.1 + 1));
    switch_internal(&t, "web", true).await;
    t.wait_event(
        "web",
        "SyncLoadBalancerFailed",
        "no internal load balancer on network",
    )
    .await;
    common::eventually("the public load balancer is gone", t.h.wait(), || async {
        (public_objects(&t) == before).then_some(())
    })
    .await;
    let service = t.get("web").await.expect("web");
    assert_eq!(annotation(&service, annotations::IP_ID.key), None);
    assert!(
        reasons(&t, "web")
            .iter()
            .any(|r| r == "DeletedLoadBalancer")
    );
    t.delete("web").await;
    t.wait_gone("web").await;
    t.stop().await;
}

/// Internal → public where the status write fails once, as a crash between the switch's
/// writes would leave it: the tier record stays until the status no longer reports the old
/// address, so the teardown runs again and the refused Service reports nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switch_whose_status_write_fails_still_stops_reporting_the_old_address() {
    if common::skip_in_remote_mode("injects a fault into the fake API server") {
        return;
    }
    let t = on_internal_tier(&["vm-ilb"]).await;
    served_internal(&t, "db", &[("TCP", 5432, 31432)]).await;
    let status_patches = || t.h.cluster().request_count(Verb::Patch, "services/status");
    let before = status_patches();
    t.h.cluster().set_faults(vec![
        Fault::error(500)
            .on(Verb::Patch, "services/status")
            .times(1),
    ]);
    switch_internal(&t, "db", false).await;
    t.wait_for(
        "db",
        "no address reported and the tier record dropped",
        |s| {
            ingress_ip(s).is_none() && annotation(s, annotations::INTERNAL_NETWORK_ID.key).is_none()
        },
    )
    .await;
    assert!(
        status_patches() >= before + 2,
        "the failed status write and its retry"
    );
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn internal_rules_of_a_service_gone_without_its_finalizer_are_orphans() {
    if common::skip_in_remote_mode("needs the simulator's internal load balancer") {
        return;
    }
    let t = on_internal_tier(&["vm-ilb"]).await;
    let (_, uid) = served_internal(&t, "db", &[("TCP", 5432, 31432), ("TCP", 6432, 31433)]).await;
    common::eventually("the rules stand, tagged", t.h.wait(), || async {
        let rules = internal_rules(&t, &uid);
        (rules.len() == 2 && rules.iter().all(|r| r.5)).then_some(())
    })
    .await;
    t.patch("db", json!({"metadata": {"finalizers": null}}))
        .await;
    t.delete("db").await;
    t.wait_gone("db").await;
    assert_eq!(all_internal_rules(&t), 2);
    let report = t.delete_orphans().await;
    let kinds: Vec<String> = report.orphans.iter().map(|o| o.kind.to_string()).collect();
    assert_eq!(
        kinds,
        ["internal_load_balancer_rule", "internal_load_balancer_rule"]
    );
    assert_eq!(report.failed(), 0);
    assert_eq!(all_internal_rules(&t), 0);
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_public_and_an_internal_service_are_served_side_by_side_on_two_tiers_of_a_vpc() {
    if common::skip_in_remote_mode("needs the simulator's internal load balancer") {
        return;
    }
    // The VPC of the internal-LB tier gets a second tier with the public load balancer.
    let mut scenario = Scenario::network_kinds();
    let ilb_tier = scenario
        .networks
        .iter()
        .find(|n| n.name == KINDS_INTERNAL_LB_TIER)
        .cloned()
        .expect("internal-LB tier");
    scenario.networks.push(cloudstack_sim::NetworkSpec {
        name: "tier-web".into(),
        cidr: "10.220.2.0/24".into(),
        lb_provider: cloudstack_sim::LbProvider::VirtualRouter,
        ..ilb_tier
    });
    scenario.add_vms("tier-web", "web-node-", 1);
    scenario.add_vms(KINDS_INTERNAL_LB_TIER, "ilb-node-", 1);
    let t = LbTest::start(scenario, &["web-node-1", "ilb-node-1"], RESYNC).await;
    let web_tier = t.network_id("tier-web");
    let ilb_tier = t.network_id(KINDS_INTERNAL_LB_TIER);
    t.create(&with_annotations(
        lb_service("web", &[("TCP", 80, 30080)]),
        &[(annotations::NETWORK_ID.key, &web_tier)],
    ))
    .await;
    t.create(&with_annotations(
        internal(lb_service("db", &[("TCP", 5432, 31432)])),
        &[(annotations::NETWORK_ID.key, &ilb_tier)],
    ))
    .await;
    let public = t.wait_for_ip("web").await;
    let private = t.wait_for_ip("db").await;
    assert!(!public.starts_with("10.220."), "a public address: {public}");
    assert!(
        private.starts_with("10.220.1."),
        "an address of the tier: {private}"
    );
    let rules = t.rules("web").await;
    assert_eq!(rules.len(), 1);
    let uid = t.uid("db").await;
    let internal = internal_rules(&t, &uid);
    assert_eq!(internal.len(), 1);
    assert_eq!(
        internal[0].4,
        vm_ids(&t, &["ilb-node-1"]),
        "members on the tier"
    );
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_internal_service_with_local_traffic_has_the_nodes_with_ready_endpoints_as_members() {
    if common::skip_in_remote_mode("needs the simulator's internal load balancer") {
        return;
    }
    use super::traffic_local::{ready, write_endpoints_for};
    let t = on_internal_tier(&["vm-ilb", "ilb-node-1", "ilb-node-2"]).await;
    let mut service = internal(lb_service("api", &[("TCP", 8080, 31080)]));
    service.spec.as_mut().expect("spec").external_traffic_policy = Some("Local".into());
    t.create(&service).await;
    write_endpoints_for(&t.h, "api", &[("TCP", 8080)], &[ready("ilb-node-2")]);
    let uid = t.uid("api").await;
    let only = vm_ids(&t, &["ilb-node-2"]);
    common::eventually(
        "the Node with the endpoint is the member",
        t.h.wait(),
        || async {
            let rules = internal_rules(&t, &uid);
            (rules.len() == 1 && rules[0].4 == only).then_some(())
        },
    )
    .await;
    write_endpoints_for(
        &t.h,
        "api",
        &[("TCP", 8080)],
        &[ready("ilb-node-2"), ready("vm-ilb")],
    );
    let two = vm_ids(&t, &["ilb-node-2", "vm-ilb"]);
    common::eventually("the members follow the endpoints", t.h.wait(), || async {
        let rules = internal_rules(&t, &uid);
        (rules.len() == 1 && rules[0].4 == two).then_some(())
    })
    .await;
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_whose_recorded_tier_is_gone_is_deleted_all_the_same() {
    if common::skip_in_remote_mode("needs the simulator's internal load balancer") {
        return;
    }
    let t = on_internal_tier(&["vm-ilb"]).await;
    served_internal(&t, "db", &[("TCP", 5432, 31432)]).await;
    // The tier recorded on the Service no longer exists (deleted with its rules).
    t.patch(
        "db",
        json!({"metadata": {"annotations": {
            annotations::INTERNAL_NETWORK_ID.key: "0b6f3c1e-5d2a-4e8b-9f10-2a3b4c5d6e7f",
            annotations::NETWORK_ID.key: "0b6f3c1e-5d2a-4e8b-9f10-2a3b4c5d6e7f",
        }}}),
    )
    .await;
    t.h.expect_failing_calls();
    t.delete("db").await;
    t.wait_gone("db").await;
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resync_of_unchanged_internal_services_lists_their_tier_once() {
    if common::skip_in_remote_mode("needs the simulator's internal load balancer") {
        return;
    }
    const SERVICES: usize = 8;
    let resync = Duration::from_millis(1500);
    let mut scenario = Scenario::network_kinds();
    scenario.add_vms(KINDS_INTERNAL_LB_TIER, "ilb-node-", 2);
    let t = LbTest::start(scenario, &["vm-ilb", "ilb-node-1", "ilb-node-2"], resync).await;
    for i in 0..SERVICES {
        let port = 5000 + i as i32;
        t.create(&internal(lb_service(
            &format!("svc-{i}"),
            &[("TCP", port, 30000 + i as i32)],
        )))
        .await;
    }
    for i in 0..SERVICES {
        t.wait_for_ip(&format!("svc-{i}")).await;
    }
    // One resync with the caches warm, then measure one.
    tokio::time::sleep(resync * 2).await;
    t.h.sim.reset_counts();
    common::eventually("a resync reads the rules", common::WAIT, || async {
        (calls_of(&t, "listLoadBalancerRules") > 0).then_some(())
    })
    .await;
    tokio::time::sleep(resync / 2).await;
    let counts = t.h.cloudstack_call_counts();
    println!("one resync of {SERVICES} internal Services: {counts:?}");
    assert_eq!(calls_of(&t, "listLoadBalancers"), 1, "{counts:?}");
    assert!(mutating_counts(&t.h).is_empty(), "{counts:?}");
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_internal_address_moves_every_rule_and_the_status() {
    if common::skip_in_remote_mode("needs the simulator's internal load balancer") {
        return;
    }
    let t = on_internal_tier(&["vm-ilb"]).await;
    let (first, uid) =
        served_internal(&t, "db", &[("TCP", 5432, 31432), ("TCP", 6432, 31433)]).await;
    t.patch(
        "db",
        json!({"metadata": {"annotations": {annotations::INTERNAL_ADDRESS.key: "10.220.1.77"}}}),
    )
    .await;
    let moved = t
        .wait_for("db", "reports the new address", |s| {
            ingress_ip(s).as_deref() == Some("10.220.1.77")
        })
        .await;
    assert_ne!(first, "10.220.1.77");
    common::eventually("both rules on the new address only", t.h.wait(), || async {
        let rules = internal_rules(&t, &uid);
        (rules.len() == 2
            && rules
                .iter()
                .all(|r| r.1 == "10.220.1.77" && !r.4.is_empty() && r.5))
        .then_some(())
    })
    .await;
    assert!(annotation(&moved, annotations::INTERNAL_NETWORK_ID.key).is_some());
    t.stop().await;
}
