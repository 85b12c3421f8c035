//! The dry run end to end: `plan_services` reads CloudStack and returns each Service's
//! plan without changing anything.

use crate::common;

use std::time::Duration;

use super::support::*;
use cloudstack_ccm::cloud::loadbalancer::ensure::Engine;
use cloudstack_ccm::controllers::node_cache::CachedNode;
use cloudstack_ccm::controllers::service::{
    EndpointSnapshot, ServicePlan, plan_services, settings,
};
use cloudstack_sim::Scenario;
use kube::api::ListParams;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dry_run_plans_without_changing_anything() {
    if common::skip_in_remote_mode(
        "counts with the simulator and plans for every Service and Node of the cluster",
    ) {
        return;
    }
    let t = LbTest::prepare(
        Scenario::small(),
        &["node-1", "node-2", "node-3"],
        Duration::from_secs(100),
    )
    .await;
    t.create(&lb_service(
        "web",
        &[("TCP", 80, 30080), ("TCP", 443, 30443)],
    ))
    .await;
    t.create(&lb_service("dns", &[("UDP", 53, 30053)])).await;
    t.h.sim.reset_counts();
    let plans = plan_all(&t).await;
    assert!(
        mutating_counts(&t.h).is_empty(),
        "a dry run changes nothing: {:?}",
        mutating_counts(&t.h)
    );
    let web = &plans
        .iter()
        .find(|p| p.key == "default/web")
        .expect("web planned")
        .plan;
    let web = web.as_ref().expect("web can be built");
    for step in web.steps() {
        println!("web: {step}");
    }
    assert_eq!(
        web.job_count(),
        7,
        "associate, 2 rules, 2 assigns, 2 tag calls"
    );
    let dns = &plans
        .iter()
        .find(|p| p.key == "default/dns")
        .expect("dns planned")
        .plan;
    let refused = dns
        .as_ref()
        .expect_err("UDP is refused on the Virtual Router");
    assert!(refused.contains("udp"), "{refused}");
    t.stop().await;
}

/// Plans every Service of `t`'s cluster as `cloudstack-ccm plan` does.
async fn plan_all(t: &LbTest) -> Vec<ServicePlan> {
    let services = t
        .services()
        .list(&ListParams::default())
        .await
        .expect("services")
        .items;
    let nodes =
        t.h.nodes()
            .list(&ListParams::default())
            .await
            .expect("nodes")
            .items
            .into_iter()
            .map(CachedNode::from)
            .collect::<Vec<_>>();
    let ctx = &t.h.ctx;
    let engine = Engine::new(
        ctx.cloudstack.clone(),
        t.h.instances.inventory().clone(),
        fast_settings(Duration::from_secs(100)).engine(ctx),
    );

    let endpoints = EndpointSnapshot::read(&ctx.kube).await.expect("endpoints");
    plan_services(
        &engine,
        None,
        &services,
        &nodes,
        &endpoints,
        &settings::spec_options(ctx),
    )
    .await
}

/// `cloudstack-ccm plan` over a mixed world: for each Service, what would happen and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dry_run_says_for_each_network_kind_what_would_happen_and_why() {
    if common::skip_in_remote_mode("needs the simulator's network kinds") {
        return;
    }
    let t = LbTest::prepare(
        Scenario::network_kinds(),
        &["vm-routed", "vm-shared", "vm-nsx", "vm-netris", "vm-ilb"],
        Duration::from_secs(100),
    )
    .await;
    let on = |name: &str, network: &str, ports: &[(&str, i32, i32)], extra: &[(&str, &str)]| {
        let id = t.network_id(network);
        let mut annotations = vec![(
            cloudstack_ccm::cloud::loadbalancer::annotations::NETWORK_ID.key,
            id,
        )];
        annotations.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
        let pairs: Vec<(&str, &str)> = annotations.iter().map(|(k, v)| (*k, v.as_str())).collect();
        with_annotations(lb_service(name, ports), &pairs)
    };
    let hc = cloudstack_ccm::cloud::loadbalancer::annotations::HEALTH_CHECK_PATH.key;
    let internal_key = cloudstack_ccm::cloud::loadbalancer::annotations::INTERNAL.key;
    for service in [
        on(
            "routed",
            cloudstack_sim::KINDS_ROUTED_NETWORK,
            &[("TCP", 80, 30080)],
            &[],
        ),
        on(
            "shared",
            cloudstack_sim::KINDS_SHARED_NETWORK,
            &[("TCP", 80, 30081)],
            &[],
        ),
        on(
            "nsx",
            cloudstack_sim::KINDS_NSX_NETWORK,
            &[("TCP", 80, 30082)],
            &[(hc, "/ready")],
        ),
        on(
            "netris",
            cloudstack_sim::KINDS_NETRIS_TIER,
            &[("TCP", 80, 30083), ("UDP", 53, 30053)],
            &[],
        ),
        on(
            "internal",
            cloudstack_sim::KINDS_INTERNAL_LB_TIER,
            &[("TCP", 5432, 31432), ("TCP", 6432, 31433)],
            &[(internal_key, "true")],
        ),
        on(
            "public-on-ilb",
            cloudstack_sim::KINDS_INTERNAL_LB_TIER,
            &[("TCP", 80, 30084)],
            &[],
        ),
    ] {
        t.create(&service).await;
    }
    t.h.sim.reset_counts();
    let plans = plan_all(&t).await;
    assert!(
        mutating_counts(&t.h).is_empty(),
        "{:?}",
        mutating_counts(&t.h)
    );
    let plan_of = |name: &str| {
        &plans
            .iter()
            .find(|p| p.key == format!("default/{name}"))
            .unwrap_or_else(|| panic!("{name} planned"))
            .plan
    };
    let internal = plan_of("internal").as_ref().expect("served");
    let steps: Vec<String> = internal.steps().map(|s| s.to_string()).collect();
    println!("internal: {steps:?}");
    assert!(
        steps[0].starts_with("create internal rule") && steps[0].contains("a free address:5432"),
        "{steps:?}"
    );
    assert!(
        steps[1].contains("the address of the first rule:6432"),
        "{steps:?}"
    );
    let refused = plan_of("public-on-ilb")
        .as_ref()
        .expect_err("no public load balancer there");
    assert!(
        refused.contains("internal load-balancer scheme only") && refused.contains(internal_key),
        "{refused}"
    );
    for (name, word) in [("routed", "ROUTED mode"), ("shared", "shared network")] {
        let why = plan_of(name).as_ref().expect_err("no load balancer there");
        println!("{name}: {why}");
        assert!(
            why.contains(word) && why.contains("loadBalancerClass"),
            "{why}"
        );
    }
    for (name, warning) in [
        ("nsx", "health check not applied: NSX monitors"),
        ("netris", "port(s) 53: UDP is not served by Netris"),
    ] {
        let plan = plan_of(name).as_ref().expect("served");
        println!(
            "{name}: {} job(s); {}",
            plan.job_count(),
            plan.warnings.join("; ")
        );
        assert!(
            plan.warnings.iter().any(|w| w.contains(warning)),
            "{:?}",
            plan.warnings
        );
    }
    t.stop().await;
}

/// A Service that was internal and is public now: the dry run shows the deletion of its
/// internal rules, which the controller makes first, before the public plan (refused on
/// an internal-only tier).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dry_run_shows_what_a_switch_of_kinds_deletes_first() {
    if common::skip_in_remote_mode("needs the simulator's internal load balancer") {
        return;
    }
    use cloudstack_ccm::cloud::loadbalancer::annotations::{INTERNAL_NETWORK_ID, NETWORK_ID};
    let t = LbTest::prepare(
        Scenario::network_kinds(),
        &["vm-ilb"],
        Duration::from_secs(100),
    )
    .await;
    let tier = t.network_id(cloudstack_sim::KINDS_INTERNAL_LB_TIER);
    t.create(&with_annotations(
        lb_service("db", &[("TCP", 5432, 31432)]),
        &[
            (INTERNAL_NETWORK_ID.key, tier.as_str()),
            (NETWORK_ID.key, tier.as_str()),
        ],
    ))
    .await;
    // Its internal rule, as the controller made it while the Service was internal.
    let lb = cloudstack_ccm::cloud::loadbalancer::vocabulary::default_lb_name(&t.uid("db").await);
    t.client_of(common::ACCOUNT)
        .create_load_balancer(&cloudstack::CreateLoadBalancer {
            name: format!("{lb}-tcp-5432"),
            networkid: tier.clone(),
            sourceport: 5432,
            instanceport: 31432,
            algorithm: "roundrobin".into(),
            sourceipaddressnetworkid: tier.clone(),
            scheme: "Internal".into(),
            ..Default::default()
        })
        .await
        .expect("internal rule made by hand");
    t.h.sim.reset_counts();
    let plans = plan_all(&t).await;
    assert!(
        mutating_counts(&t.h).is_empty(),
        "{:?}",
        mutating_counts(&t.h)
    );
    let db = plans
        .iter()
        .find(|p| p.key == "default/db")
        .expect("db planned");
    let (kind, deletion) = db.teardown.as_ref().expect("a teardown");
    assert_eq!(*kind, "internal");
    let steps: Vec<String> = deletion.steps().map(|s| s.to_string()).collect();
    assert_eq!(steps, [format!("delete internal rule {lb}-tcp-5432")]);
    let refused = db
        .plan
        .as_ref()
        .expect_err("public is refused on that tier");
    assert!(
        refused.contains("internal load-balancer scheme only"),
        "{refused}"
    );
    let mut out = Vec::new();
    cloudstack_ccm::dry_run::write_report(
        &cloudstack_ccm::dry_run::PlanReport {
            plans: plans.clone(),
        },
        &mut out,
    )
    .expect("report written");
    let text = String::from_utf8(out).expect("UTF-8");
    println!("{text}");
    assert!(
        text.contains(
            "Service default/db: first deletes its internal load balancer: 1 CloudStack job(s)"
        ),
        "{text}"
    );
    t.stop().await;
}
