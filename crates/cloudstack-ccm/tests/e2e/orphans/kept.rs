//! What the orphan pass must leave alone: addresses the user brought or may have kept,
//! objects of other clusters or untagged ones, and the route of a Node that joins while
//! CloudStack is being read.

use std::time::Duration;

use crate::common;
use crate::services::support::*;
use cloudstack::{AssociateIpAddress, CreateLoadBalancerRule};
use cloudstack_ccm::cloud::cidr::Cidr;
use cloudstack_ccm::cloud::loadbalancer::annotations;
use cloudstack_ccm::cloud::orphans::OrphanKind;
use cloudstack_ccm::orphans::{Scope, report};
use cloudstack_sim::Scenario;

use super::{CLUSTER, GONE_UID, force_delete_while_down, node_route, scope, tag, tags_of};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_and_kept_addresses_stay_and_foreign_objects_are_not_listed() {
    let h = common::Harness::start(Scenario::small()).await;
    let client = &h.ctx.cloudstack;
    let network = h.sim.with_state(|s| {
        s.networks
            .iter()
            .find(|n| n.name == "net-vr")
            .unwrap()
            .id
            .clone()
    });
    let associate = || async {
        client
            .associate_ip_address(&AssociateIpAddress {
                networkid: Some(network.clone()),
                ..Default::default()
            })
            .await
            .unwrap()
    };
    let tag = |id: String, kind: &'static str, tags: Vec<(&'static str, &'static str)>| {
        tag(client, id, kind, tags)
    };
    // A user's address (tagged for the cluster, not associated by the controller) with a
    // rule of a deleted Service on it.
    let user_ip = associate().await.id.unwrap();
    tag(
        user_ip.clone(),
        "PublicIpAddress",
        vec![("cloudstack-ccm/cluster", CLUSTER)],
    )
    .await;
    let rule = client
        .create_load_balancer_rule(&CreateLoadBalancerRule {
            name: "agone-tcp-80".into(),
            algorithm: "roundrobin".into(),
            privateport: 30080,
            publicport: 80,
            publicipid: Some(user_ip.clone()),
            openfirewall: Some(false),
            ..Default::default()
        })
        .await
        .unwrap()
        .id
        .unwrap();
    tag(
        rule.clone(),
        "LoadBalancer",
        vec![
            ("cloudstack-ccm/cluster", CLUSTER),
            ("cloudstack-ccm/service-uid", GONE_UID),
        ],
    )
    .await;
    // An address the controller associated that has no rules (kept with keep-ip).
    let kept_ip = associate().await.id.unwrap();
    tag(
        kept_ip.clone(),
        "PublicIpAddress",
        vec![
            ("cloudstack-ccm/cluster", CLUSTER),
            ("cloudstack-ccm/associated", "true"),
        ],
    )
    .await;
    // Another cluster's address: not listed.
    let other_ip = associate().await.id.unwrap();
    tag(
        other_ip.clone(),
        "PublicIpAddress",
        vec![
            ("cloudstack-ccm/cluster", "other"),
            ("cloudstack-ccm/associated", "true"),
        ],
    )
    .await;
    // Routes of a Node that is gone: one inside --cluster-cidr, one outside it (the route
    // controller leaves those alone, and so does the orphan pass).
    let vpc = h.sim.with_state(|s| s.vpcs[0].id.clone());
    let route = node_route(client, &vpc, "10.244.9.0/24", "10.100.1.99", "gone").await;
    let outside_route = node_route(client, &vpc, "192.168.50.0/24", "10.100.1.99", "gone").await;
    // An address a keep-ip Service kept: rules of its gone Service still on it.
    let keep_tagged_ip = associate().await.id.unwrap();
    tag(
        keep_tagged_ip.clone(),
        "PublicIpAddress",
        vec![
            ("cloudstack-ccm/cluster", CLUSTER),
            ("cloudstack-ccm/associated", "true"),
            ("cloudstack-ccm/keep-ip", "true"),
        ],
    )
    .await;
    let kept_rule = client
        .create_load_balancer_rule(&CreateLoadBalancerRule {
            name: "akept-tcp-80".into(),
            algorithm: "roundrobin".into(),
            privateport: 30081,
            publicport: 80,
            publicipid: Some(keep_tagged_ip.clone()),
            openfirewall: Some(false),
            ..Default::default()
        })
        .await
        .unwrap()
        .id
        .unwrap();
    tag(
        kept_rule.clone(),
        "LoadBalancer",
        vec![
            ("cloudstack-ccm/cluster", CLUSTER),
            ("cloudstack-ccm/service-uid", GONE_UID),
        ],
    )
    .await;

    // A Service whose unrelated annotation happens to hold the kept address's id: only
    // the address annotations name a Service's address, so the address is still listed.
    let note: k8s_openapi::api::core::v1::Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "notes", "annotations": {"example.com/cloudstack-note": kept_ip}},
        "spec": {"ports": [{"port": 80}]}
    }))
    .unwrap();
    kube::Api::<k8s_openapi::api::core::v1::Service>::namespaced(h.kube.clone(), "default")
        .create(&Default::default(), &note)
        .await
        .unwrap();
    let cluster_cidr = [Cidr::parse("10.244.0.0/16").unwrap()];
    let removed = report(client, &h.kube, scope(&h, &cluster_cidr), true)
        .await
        .unwrap();
    let listed: Vec<(OrphanKind, String, bool)> = removed
        .orphans
        .iter()
        .map(|o| (o.kind, o.id.clone(), o.deletable))
        .collect();
    assert!(
        listed.contains(&(OrphanKind::LoadBalancerRule, rule.clone(), true)),
        "{listed:?}"
    );
    assert!(
        listed.contains(&(OrphanKind::StaticRoute, route.clone(), true)),
        "{listed:?}"
    );
    assert!(
        listed.contains(&(OrphanKind::PublicIp, user_ip.clone(), false)),
        "{listed:?}"
    );
    assert!(
        listed.contains(&(OrphanKind::PublicIp, kept_ip.clone(), false)),
        "{listed:?}"
    );
    assert!(
        listed.contains(&(OrphanKind::StaticRoute, outside_route.clone(), false)),
        "{listed:?}"
    );
    assert!(
        listed.contains(&(OrphanKind::LoadBalancerRule, kept_rule.clone(), true)),
        "{listed:?}"
    );
    assert!(
        listed.contains(&(OrphanKind::PublicIp, keep_tagged_ip.clone(), false)),
        "{listed:?}"
    );
    assert!(
        !listed.iter().any(|(_, id, _)| id == &other_ip),
        "{listed:?}"
    );
    assert_eq!(removed.failed(), 0, "{:?}", removed.deleted);

    h.sim.with_state(|s| {
        assert!(
            s.lb_rules.iter().all(|r| r.id != rule),
            "orphaned rule deleted"
        );
        assert!(
            s.static_routes.iter().all(|r| r.id != route),
            "orphaned route deleted"
        );
        assert!(
            s.static_routes.iter().any(|r| r.id == outside_route),
            "a route outside --cluster-cidr is left alone"
        );
        for ip in [&user_ip, &kept_ip, &other_ip, &keep_tagged_ip] {
            let state = s.ips.iter().find(|i| &i.id == ip).map(|i| i.state.clone());
            assert_eq!(state.as_deref(), Some("Allocated"), "address {ip} kept");
        }
    });
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_address_of_a_force_deleted_service_is_never_released() {
    let resync = Duration::from_secs(100);
    let t = LbTest::prepare(Scenario::small(), &["node-1", "node-2"], resync).await;
    let controller = OwnController::start(&t, resync);
    t.create(&lb_service("web", &[("TCP", 80, 30080)])).await;
    let ip_id = ip_id_of(&t.h, &t.wait_for_ip("web").await);
    let keep_tag = ("cloudstack-ccm/keep-ip".to_string(), "true".to_string());
    assert!(!tags_of(&t.h, &ip_id).contains(&keep_tag));
    // The user asks to keep the address: the controller marks it.
    t.patch(
        "web",
        serde_json::json!({"metadata": {"annotations": {
            annotations::KEEP_IP.key: "true"
        }}}),
    )
    .await;
    common::eventually("the address is marked kept", common::WAIT, || async {
        tags_of(&t.h, &ip_id).contains(&keep_tag).then_some(())
    })
    .await;

    // The controller is down; the finalizer is removed and the Service deleted.
    force_delete_while_down(controller, &t, "web").await;

    let removed = report(&t.h.ctx.cloudstack, &t.h.kube, scope(&t.h, &[]), true)
        .await
        .unwrap();
    let address = removed
        .orphans
        .iter()
        .find(|o| o.kind == OrphanKind::PublicIp)
        .expect("the address is listed");
    assert!(!address.deletable, "{address}");
    assert!(address.reason.contains("keep-ip"), "{address}");
    assert_eq!(removed.failed(), 0, "{:?}", removed.deleted);
    assert_eq!(ip_state(&t.h, &ip_id).as_deref(), Some("Allocated"));
    assert!(
        t.h.sim
            .with_state(|s| s.lb_rules.iter().all(|r| r.ip_id != ip_id)),
        "the gone Service's rules are deleted"
    );
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_joins_while_cloudstack_is_read_keeps_its_route() {
    if common::skip_in_remote_mode("slows the simulator's answers") {
        return;
    }
    let h = common::Harness::start(Scenario::small()).await;
    h.caches.nodes.wait_until_ready().await;
    // The route controller has just made the route of a Node that is joining.
    let vpc = h.sim.with_state(|s| s.vpcs[0].id.clone());
    let route = node_route(
        &h.ctx.cloudstack,
        &vpc,
        "10.244.3.0/24",
        "10.100.1.33",
        "late",
    )
    .await;
    // The orphan pass lists the routes, then the addresses (slowed down); the Node joins
    // the cache in between.
    let mut faults = cloudstack_sim::Faults::default();
    faults
        .latency_ms
        .insert("listPublicIpAddresses".into(), 1500);
    h.sim.set_faults(faults);
    let nodes = h.caches.nodes.clone();
    let pass = {
        let (cloudstack, kube) = (h.ctx.cloudstack.clone(), h.kube.clone());
        let version = h.ctx.server_version.clone();
        tokio::spawn(async move {
            let node_names = || nodes.names();
            let scope = Scope {
                cluster: CLUSTER,
                node_names: Some(&node_names),
                routing_firewall: cloudstack_ccm::cloud::orphans::RoutingFirewall::of(&version),
                cluster_cidrs: &[],
            };
            report(&cloudstack, &kube, scope, false).await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    h.create_node(common::TestNode::new("late")).await;
    common::eventually("the Node cache holds the Node", common::WAIT, || async {
        h.caches
            .nodes
            .state()
            .iter()
            .any(|n| n.metadata.name.as_deref() == Some("late"))
            .then_some(())
    })
    .await;
    let found = pass.await.unwrap().unwrap();
    assert!(
        !found.orphans.iter().any(|o| o.id == route),
        "the joining Node's route is not an orphan: {:?}",
        found.orphans
    );
    h.sim.set_faults(cloudstack_sim::Faults::default());
    h.stop().await;
}
