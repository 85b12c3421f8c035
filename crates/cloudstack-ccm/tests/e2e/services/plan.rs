//! The dry run end to end: `plan_services` reads CloudStack and returns each Service's
//! plan without changing anything.

use crate::common;

use std::time::Duration;

use super::support::*;
use cloudstack_ccm::cloud::loadbalancer::ensure::Engine;
use cloudstack_ccm::controllers::node_cache::CachedNode;
use cloudstack_ccm::controllers::service::{EndpointSnapshot, plan_services, settings};
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
    t.h.sim.reset_counts();

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
