//! Orphans that are found and removed: the objects of a Service force-deleted while the
//! controller was down (by a report, or by the controller on start with `--delete-orphans`),
//! and the ACL item of a force-deleted VPC Service.

use std::time::Duration;

use crate::common;
use crate::services::support::*;
use cloudstack::{AssociateIpAddress, CreateLoadBalancerRule};
use cloudstack_ccm::cloud::orphans::OrphanKind;
use cloudstack_ccm::orphans::{report, write_report};
use cloudstack_sim::Scenario;

use super::{CLUSTER, GONE_UID, force_delete_while_down, scope, tag, tags_of};

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
    let live = report(&t.h.ctx.cloudstack, &t.h.kube, scope(&t.h, &[]), false)
        .await
        .unwrap();
    assert!(live.orphans.is_empty(), "{:?}", live.orphans);

    // The controller is down; someone removes the finalizer and deletes the Service: no
    // cleanup runs.
    force_delete_while_down(controller, &t, "web").await;

    let found = report(&t.h.ctx.cloudstack, &t.h.kube, scope(&t.h, &[]), false)
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

    let removed = report(&t.h.ctx.cloudstack, &t.h.kube, scope(&t.h, &[]), true)
        .await
        .unwrap();
    assert_eq!(removed.deleted.len(), 4);
    assert_eq!(removed.failed(), 0, "{:?}", removed.deleted);
    assert_eq!(ip_state(&t.h, &ip_id).as_deref(), Some("Free"));
    assert!(firewall_rules(&t.h, &ip_id).is_empty());
    let again = report(&t.h.ctx.cloudstack, &t.h.kube, scope(&t.h, &[]), false)
        .await
        .unwrap();
    assert!(again.orphans.is_empty(), "{:?}", again.orphans);
    t.stop().await;
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

    let removed = report(&t.h.ctx.cloudstack, &t.h.kube, scope(&t.h, &[]), true)
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
