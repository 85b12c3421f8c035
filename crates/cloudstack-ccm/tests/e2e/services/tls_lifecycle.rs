//! TLS termination over a Service's life, beyond the Secret's renewals: the dry run shows
//! the certificate steps without taking any, and dropping the annotation turns the port
//! back into a plain TCP rule and deletes the certificate the controller uploaded.

use crate::common;

use super::support::*;
use super::tls::{LEAF_A, NODES, RESYNC, certificates, put_secret, wait_bound, web};
use cloudstack_ccm::cloud::loadbalancer::annotations;
use cloudstack_ccm::cloud::loadbalancer::ensure::Engine;
use cloudstack_ccm::controllers::node_cache::CachedNode;
use cloudstack_ccm::controllers::service::{EndpointSnapshot, plan_services, settings};
use cloudstack_sim::Scenario;
use kube::api::ListParams;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dry_run_shows_upload_and_attach_and_takes_neither() {
    if common::skip_in_remote_mode("counts with the simulator") {
        return;
    }
    let t = LbTest::prepare(Scenario::small(), &NODES, RESYNC).await;
    put_secret(&t, "shop-tls", "leaf-a").await;
    t.create(&web("shop-tls")).await;
    let services = t
        .services()
        .list(&ListParams::default())
        .await
        .expect("services")
        .items;
    let nodes: Vec<CachedNode> =
        t.h.nodes()
            .list(&ListParams::default())
            .await
            .expect("nodes")
            .items
            .into_iter()
            .map(CachedNode::from)
            .collect();
    let ctx = &t.h.ctx;
    let engine = Engine::new(
        ctx.cloudstack.clone(),
        t.h.instances.inventory().clone(),
        fast_settings(RESYNC).engine(ctx),
    );
    t.h.reset_cloudstack_counts();
    let plans = plan_services(
        &engine,
        Some(&ctx.kube),
        &services,
        &nodes,
        &EndpointSnapshot::default(),
        &settings::spec_options(ctx),
    )
    .await;
    let web = plans.iter().find(|p| p.key.ends_with("/web")).expect("web");
    let plan = web.plan.as_ref().expect("a plan");
    let shown: Vec<String> = plan.steps().map(ToString::to_string).collect();
    assert!(
        shown
            .iter()
            .any(|s| s.starts_with("upload certificate cloudstack-ccm.")),
        "{shown:?}"
    );
    assert!(
        shown
            .iter()
            .any(|s| s.starts_with("attach the uploaded certificate")),
        "{shown:?}"
    );
    assert!(
        mutating_counts(&t.h).is_empty(),
        "{:?}",
        mutating_counts(&t.h)
    );
    assert!(certificates(&t).is_empty());
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_annotation_serves_plain_tcp_and_deletes_the_certificate() {
    if common::skip_in_remote_mode("reads the simulator's certificate store") {
        return;
    }
    let t = LbTest::start(Scenario::small(), &NODES, RESYNC).await;
    put_secret(&t, "shop-tls", "leaf-a").await;
    t.create(&web("shop-tls")).await;
    wait_bound(&t, LEAF_A).await;
    let since = sim_now_ms();
    t.patch(
        "web",
        json!({ "metadata": { "annotations": { annotations::TLS_SECRET.key: null } } }),
    )
    .await;
    t.wait_rules("web", "are plain TCP", |r| {
        r.len() == 2
            && r.iter()
                .all(|r| r.protocol == "tcp" && r.members.len() == 3)
    })
    .await;
    common::eventually("the certificate is deleted", t.h.wait(), || async {
        certificates(&t).is_empty().then_some(())
    })
    .await;
    assert!(
        failing_calls(&t.h, since).is_empty(),
        "{:?}",
        failing_calls(&t.h, since)
    );
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resync_of_tls_services_lists_certificates_once_and_changes_nothing() {
    if common::skip_in_remote_mode("counts with the simulator") {
        return;
    }
    let t = LbTest::start(
        Scenario::small(),
        &NODES,
        std::time::Duration::from_millis(300),
    )
    .await;
    put_secret(&t, "shop-tls", "leaf-a").await;
    for (i, name) in ["web-a", "web-b", "web-c"].into_iter().enumerate() {
        let port = 30443 + i as i32;
        t.create(&with_annotations(
            lb_service(name, &[("TCP", 443, port)]),
            &[(annotations::TLS_SECRET.key, "shop-tls")],
        ))
        .await;
    }
    common::eventually("three certificates attached", t.h.wait(), || async {
        let certs = certificates(&t);
        (certs.len() == 3 && certs.iter().all(|c| c.3.len() == 1)).then_some(())
    })
    .await;
    settle().await;
    t.h.reset_cloudstack_counts();
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    let counts = t.h.sim.call_counts();
    let views = counts.get("listLoadBalancerRules").copied().unwrap_or(0);
    let lists = counts.get("listSslCerts").copied().unwrap_or(0);
    assert!(views >= 2, "resyncs ran: {counts:?}");
    assert!(
        lists <= views,
        "one certificate list per view, not per Service: {counts:?}"
    );
    assert!(
        mutating_counts(&t.h).is_empty(),
        "{:?}",
        mutating_counts(&t.h)
    );
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_only_service_without_ssl_termination_takes_no_address() {
    if common::skip_in_remote_mode("needs a CloudStack version below 4.22") {
        return;
    }
    let mut scenario = Scenario::small();
    scenario.version = cloudstack_sim::Version::parse("4.21").unwrap();
    let t = LbTest::start(scenario, &NODES, RESYNC).await;
    put_secret(&t, "shop-tls", "leaf-a").await;
    t.h.reset_cloudstack_counts();
    t.create(&with_annotations(
        lb_service("secure", &[("TCP", 443, 30443)]),
        &[(annotations::TLS_SECRET.key, "shop-tls")],
    ))
    .await;
    let event = t
        .wait_event("secure", "SyncLoadBalancerFailed", "port 443")
        .await;
    assert_eq!(event["type"], "Warning");
    settle().await;
    assert!(
        mutating_counts(&t.h).is_empty(),
        "{:?}",
        mutating_counts(&t.h)
    );
    assert!(t.rules("secure").await.is_empty());
    assert_eq!(ingress_ip(&t.get("secure").await.expect("exists")), None);
    t.stop().await;
}
