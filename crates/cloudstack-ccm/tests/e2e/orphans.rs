//! Orphans end to end: what the service controller creates carries ownership tags
//! (firewall rules included); objects tagged for the cluster whose Service or Node is gone
//! are listed with why and deleted, while addresses the user brought or may have kept stay.

use crate::common;

use std::time::Duration;

use crate::services::support::*;
use cloudstack::{AssociateIpAddress, CreateLoadBalancerRule, CreateStaticRoute, CreateTags};
use cloudstack_ccm::cloud::cidr::Cidr;
use cloudstack_ccm::cloud::loadbalancer::annotations;
use cloudstack_ccm::cloud::orphans::OrphanKind;
use cloudstack_ccm::orphans::{Scope, report, write_report};
use cloudstack_sim::Scenario;
use kube::api::{Patch, PatchParams};

const CLUSTER: &str = "kubernetes";
const GONE_UID: &str = "6f1c4c1e-0000-4000-8000-00000000dead";

/// This cluster's orphans, the Nodes listed, with `cluster_cidrs` as `--cluster-cidr`.
fn scope(cluster_cidrs: &[Cidr]) -> Scope<'_> {
    Scope {
        cluster: CLUSTER,
        node_cache: None,
        cluster_cidrs,
    }
}

/// Stops `controller`, then removes Service `name`'s finalizer and deletes it: no cleanup
/// runs.
async fn force_delete_while_down(controller: OwnController, t: &LbTest, name: &str) {
    controller.stop().await;
    t.services()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    t.delete(name).await;
    t.wait_gone(name).await;
}

fn tags_of(h: &common::Harness, id: &str) -> Vec<(String, String)> {
    h.sim.with_state(|s| {
        let mut tags: Vec<_> = s
            .tags
            .iter()
            .filter(|t| t.resource_id == id)
            .map(|t| (t.key.clone(), t.value.clone()))
            .collect();
        tags.sort();
        tags
    })
}

/// Puts `tags` on CloudStack object `id` of type `kind`.
async fn tag(
    client: &cloudstack::Client,
    id: String,
    kind: &str,
    tags: Vec<(&'static str, &'static str)>,
) {
    client
        .create_tags(&CreateTags {
            resourceids: vec![id],
            resourcetype: kind.into(),
            tags: tags
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            customer: None,
        })
        .await
        .unwrap()
}

/// A static route of VPC `vpc` to `nexthop`, tagged as the cluster's route of Node `node`,
/// as the route controller makes them; returns its id.
async fn node_route(
    client: &cloudstack::Client,
    vpc: &str,
    cidr: &str,
    nexthop: &str,
    node: &'static str,
) -> String {
    let id = client
        .create_static_route(&CreateStaticRoute {
            cidr: cidr.into(),
            vpcid: Some(vpc.to_string()),
            nexthop: Some(nexthop.into()),
            gatewayid: None,
        })
        .await
        .unwrap()
        .id
        .unwrap();
    tag(
        client,
        id.clone(),
        "StaticRoute",
        vec![
            ("cloudstack-ccm/cluster", CLUSTER),
            ("cloudstack-ccm/node", node),
        ],
    )
    .await;
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_force_deleted_service_leaves_orphans_that_are_found_and_removed() {
    // 4.14: the Virtual Router still takes UDP rules, and `openfirewall` opens TCP only, so
    // the UDP port gets a firewall rule of its own.
    let mut scenario = Scenario::small();
    scenario.version = cloudstack_sim::Version::parse("4.14").unwrap();
    let resync = Duration::from_secs(100);
    let t = LbTest::prepare(scenario, &["node-1", "node-2"], resync).await;
    // The service controller runs on a shutdown of its own, so that it can be stopped
    // (the controller down) while the Service is force-deleted.
    let controller = OwnController::start(&t, resync);
    t.create(&lb_service(
        "web",
        &[("TCP", 80, 30080), ("UDP", 53, 30053)],
    ))
    .await;
    let address = t.wait_for_ip("web").await;
    let uid = t.uid("web").await;
    let ip_id = ip_id_of(&t.h, &address);

    // The firewall rule the controller created carries the ownership tags (the TCP one
    // `openfirewall` made goes with its load-balancer rule).
    let firewall_id = t.h.sim.with_state(|s| {
        s.firewall_rules
            .iter()
            .find(|f| f.ip_id == ip_id && f.protocol == "udp")
            .map(|f| f.id.clone())
            .expect("a UDP firewall rule on the IP")
    });
    let tags = tags_of(&t.h, &firewall_id);
    for owner in [
        ("cloudstack-ccm/cluster".to_string(), CLUSTER.to_string()),
        ("cloudstack-ccm/service-uid".to_string(), uid.clone()),
    ] {
        assert!(tags.contains(&owner), "{owner:?} in {tags:?}");
    }
    let live = report(&t.h.ctx.cloudstack, &t.h.kube, scope(&[]), false)
        .await
        .unwrap();
    assert!(live.orphans.is_empty(), "{:?}", live.orphans);

    // The controller is down; someone removes the finalizer and deletes the Service: no
    // cleanup runs.
    force_delete_while_down(controller, &t, "web").await;

    let found = report(&t.h.ctx.cloudstack, &t.h.kube, scope(&[]), false)
        .await
        .unwrap();
    let mut kinds: Vec<_> = found.orphans.iter().map(|o| o.kind).collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            OrphanKind::PublicIp,
            OrphanKind::LoadBalancerRule,
            OrphanKind::LoadBalancerRule,
            OrphanKind::FirewallRule
        ]
    );
    let mut text = Vec::new();
    write_report(&found, CLUSTER, &mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(
        text.contains(&format!("Service {uid} no longer exists")),
        "{text}"
    );
    assert!(found.orphans.iter().all(|o| o.deletable), "{text}");

    let removed = report(&t.h.ctx.cloudstack, &t.h.kube, scope(&[]), true)
        .await
        .unwrap();
    assert_eq!(removed.deleted.len(), 4);
    assert_eq!(removed.failed(), 0, "{:?}", removed.deleted);
    assert_eq!(ip_state(&t.h, &ip_id).as_deref(), Some("Free"));
    assert!(firewall_rules(&t.h, &ip_id).is_empty());
    let again = report(&t.h.ctx.cloudstack, &t.h.kube, scope(&[]), false)
        .await
        .unwrap();
    assert!(again.orphans.is_empty(), "{:?}", again.orphans);
    t.stop().await;
}

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
    let removed = report(client, &h.kube, scope(&cluster_cidr), true)
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
async fn with_delete_orphans_a_service_force_deleted_while_down_is_cleaned_up_on_start() {
    // The cloud as a controller left it: a load balancer of a Service that existed then.
    let mut scenario = Scenario::small();
    scenario.settings.job_duration_ms = 2;
    let h = common::Harness::start_with(common::HarnessOptions {
        scenario,
        delete_orphans: true,
        ..Default::default()
    })
    .await;
    for name in ["node-1", "node-2"] {
        add_node(&h, name).await;
    }
    let client = &h.ctx.cloudstack;
    let network = h.sim.with_state(|s| {
        s.networks
            .iter()
            .find(|n| n.name == "net-vr")
            .unwrap()
            .id
            .clone()
    });
    let ip = client
        .associate_ip_address(&AssociateIpAddress {
            networkid: Some(network),
            ..Default::default()
        })
        .await
        .unwrap()
        .id
        .unwrap();
    let rule = client
        .create_load_balancer_rule(&CreateLoadBalancerRule {
            name: "agone-tcp-80".into(),
            algorithm: "roundrobin".into(),
            privateport: 30080,
            publicport: 80,
            publicipid: Some(ip.clone()),
            openfirewall: Some(true),
            ..Default::default()
        })
        .await
        .unwrap()
        .id
        .unwrap();
    for (id, kind, tags) in [
        (
            &ip,
            "PublicIpAddress",
            vec![
                ("cloudstack-ccm/cluster", CLUSTER),
                ("cloudstack-ccm/associated", "true"),
            ],
        ),
        (
            &rule,
            "LoadBalancer",
            vec![
                ("cloudstack-ccm/cluster", CLUSTER),
                ("cloudstack-ccm/service-uid", GONE_UID),
            ],
        ),
    ] {
        tag(client, id.clone(), kind, tags).await;
    }

    let mut t = LbTest::from_harness(h);
    t.start_controller(Duration::from_secs(100));
    common::eventually("the orphans are deleted", common::WAIT, || async {
        (ip_state(&t.h, &ip).as_deref() == Some("Free")
            && t.h
                .sim
                .with_state(|s| s.lb_rules.iter().all(|r| r.id != rule)))
        .then_some(())
    })
    .await;
    // The pass counts what it found (then deleted).
    common::eventually("the orphan metric", common::WAIT, || async {
        let metrics = t.h.ctx.metrics.encode();
        (metrics.contains("cloudstack_ccm_orphaned_resources{kind=\"load_balancer_rule\"} 1")
            && metrics.contains("cloudstack_ccm_orphaned_resources{kind=\"public_ip\"} 1")
            && metrics.contains("cloudstack_ccm_orphaned_resources{kind=\"static_route\"} 0"))
        .then_some(())
    })
    .await;
    t.stop().await;
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

    let removed = report(&t.h.ctx.cloudstack, &t.h.kube, scope(&[]), true)
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
async fn the_acl_item_of_a_force_deleted_vpc_service_is_found_and_removed() {
    let mut scenario = Scenario::small();
    let vms = scenario.add_vms(cloudstack_sim::SMALL_TIER, "vpc-node-", 2);
    let names: Vec<&str> = vms.iter().map(String::as_str).collect();
    let resync = Duration::from_secs(100);
    let t = LbTest::prepare(scenario, &names, resync).await;
    let controller = OwnController::start(&t, resync);
    let mut web = lb_service("web", &[("TCP", 80, 30080)]);
    web.spec.as_mut().expect("spec").load_balancer_source_ranges =
        Some(vec!["198.51.100.0/24".into()]);
    t.create(&web).await;
    t.wait_for_ip("web").await;
    let uid = t.uid("web").await;
    let acl_item = common::eventually("the Service's ACL item", common::WAIT, || async {
        t.h.sim.with_state(|s| {
            s.acl_items
                .iter()
                .find(|i| i.cidrs == ["198.51.100.0/24"])
                .map(|i| i.id.clone())
        })
    })
    .await;
    // Tagged as the Service's, so that it can be found once the Service is gone.
    let owner = ("cloudstack-ccm/service-uid".to_string(), uid.clone());
    common::eventually("the ACL item is tagged", common::WAIT, || async {
        tags_of(&t.h, &acl_item).contains(&owner).then_some(())
    })
    .await;

    force_delete_while_down(controller, &t, "web").await;

    let removed = report(&t.h.ctx.cloudstack, &t.h.kube, scope(&[]), true)
        .await
        .unwrap();
    let item = removed
        .orphans
        .iter()
        .find(|o| o.kind == OrphanKind::AclItem)
        .unwrap_or_else(|| panic!("the ACL item is an orphan: {:?}", removed.orphans));
    assert_eq!(item.id, acl_item);
    assert!(item.reason.contains(&uid), "{item}");
    assert_eq!(removed.failed(), 0, "{:?}", removed.deleted);
    assert!(
        t.h.sim
            .with_state(|s| s.acl_items.iter().all(|i| i.id != acl_item)),
        "the orphaned ACL item is deleted"
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
        tokio::spawn(async move {
            let scope = Scope {
                cluster: CLUSTER,
                node_cache: Some(&nodes),
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
