//! A normal day of the controller against CloudStack's contract: start-up, the orphan pass,
//! Services created (one terminating TLS), changed, their certificate renewed, resyncs,
//! and deletes — and not one CloudStack call that fails or names a parameter the command
//! does not declare in CloudStack's listing (the simulator enforces the listing's required
//! parameters and records unknown names, as the real server ignores them).

use crate::common;

use std::time::Duration;

use super::support::*;
use super::tls::{LEAF_A, NODES, fingerprint_of, put_secret, wait_bound, web};
use cloudstack_ccm::cloud::loadbalancer::annotations;
use cloudstack_sim::Scenario;

/// Short enough for several resyncs (and the first orphan pass) within the test.
const RESYNC: Duration = Duration::from_millis(700);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_normal_day_makes_no_failing_call_and_sends_only_listed_parameters() {
    if common::skip_in_remote_mode("reads the simulator's call log") {
        return;
    }
    let t = LbTest::start(Scenario::small(), &NODES, RESYNC).await;

    // Created: a TLS Service and a plain one with source ranges.
    put_secret(&t, "shop-tls", "leaf-a").await;
    t.create(&web("shop-tls")).await;
    t.create(&with_annotations(
        lb_service("api", &[("TCP", 8080, 30808)]),
        &[(annotations::SOURCE_CIDRS.key, "10.0.0.0/8")],
    ))
    .await;
    wait_bound(&t, LEAF_A).await;
    t.wait_for("web", "has its ingress", |s| ingress_ip(s).is_some())
        .await;
    t.wait_for("api", "has its ingress", |s| ingress_ip(s).is_some())
        .await;

    // Changed: a port added, the PROXY protocol turned on, the certificate renewed.
    t.patch(
        "api",
        ports_patch(&[("TCP", 8080, 30808), ("TCP", 9090, 30909)]),
    )
    .await;
    t.patch(
        "web",
        serde_json::json!({"metadata": {"annotations": {annotations::PROXY_PROTOCOL.key: "true"}}}),
    )
    .await;
    put_secret(&t, "shop-tls", "leaf-b").await;
    wait_bound(&t, &fingerprint_of("leaf-b")).await;
    t.wait_rules("api", "two TCP ports", |r| {
        r.len() == 2
            && r.iter()
                .all(|r| r.protocol == "tcp" && r.members.len() == 3)
    })
    .await;

    // Resyncs with nothing to change, and the orphan pass at start.
    tokio::time::sleep(RESYNC * 4).await;
    let counts = t.h.cloudstack_call_counts();
    assert!(
        counts.get("listSslCerts").copied().unwrap_or(0) > 0,
        "the certificates were read: {counts:?}"
    );
    assert!(
        counts.get("listStaticRoutes").copied().unwrap_or(0) > 0,
        "the orphan pass ran: {counts:?}"
    );

    // Deleted: nothing left.
    let web_uid = t.uid("web").await;
    let api_uid = t.uid("api").await;
    t.delete("web").await;
    t.delete("api").await;
    t.wait_gone("web").await;
    t.wait_gone("api").await;
    assert!(t.rules_of_uid(&web_uid).is_empty() && t.rules_of_uid(&api_uid).is_empty());

    let failed = failing_calls(&t.h, 0);
    assert!(failed.is_empty(), "failing calls: {failed:#?}");
    let unknown: Vec<(String, Vec<String>)> =
        t.h.sim
            .call_log()
            .into_iter()
            .filter(|call| !call.unknown_params.is_empty())
            .map(|call| (call.command, call.unknown_params))
            .collect();
    assert!(
        unknown.is_empty(),
        "parameters CloudStack does not declare: {unknown:?}"
    );
    t.stop().await;
}
