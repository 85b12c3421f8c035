//! CloudStack away when the controller manager starts (a management-server upgrade, a
//! network blip during a rollout): the process stays up, serves `/healthz` with `/readyz`
//! not ready, says so in one line (then a paced reminder), asks again with a capped
//! back-off, and within seconds of CloudStack answering initialises the waiting Nodes and
//! serves the waiting Service. The test prints the time from CloudStack's return to both,
//! and the calls made while it was away.

use crate::common;

use std::time::{Duration, Instant};

use super::ccm::{Ccm, free_port};
use super::raw_http;
use super::rig::Rig;
use super::services::lb_service;
use cloudstack_sim::{Scenario, SimOptions, SimServer};
use serde_json::Value;

/// How long CloudStack is away after the controller manager started.
const AWAY: Duration = Duration::from_secs(30);

/// The attempts the process made, from its `cloudstack_api_calls_total` metric.
fn calls_in_metrics(metrics: &str) -> u64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("cloudstack_ccm_cloudstack_api_calls_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

fn status_code(reply: &Option<raw_http::Reply>) -> Option<u16> {
    reply.as_ref().map(|r| r.status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cloudstack_away_at_start_up_is_waited_out_and_served_within_seconds_of_its_return() {
    if common::skip_in_remote_mode("starts and stops the simulator under the controller") {
        return;
    }
    let rig = Rig::start(Scenario::small()).await;
    // The CloudStack the controller manager is pointed at: a port nothing listens on yet,
    // where a simulator with the rig's cloud (same keys, same VMs) starts after AWAY.
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/client/api");
    let (api_key, secret_key) = rig.sim.credentials(common::ACCOUNT).expect("keys");
    let config = rig.write_file(
        "cloud-config-away",
        &format!(
            "[Global]\napi-url = {url}\napi-key = \"{}\"\nsecret-key = \"{}\"\n",
            api_key.expose(),
            secret_key.expose()
        ),
    );
    let state_copy = rig.path("sim-state-away.json");
    std::fs::copy(rig.path("sim-state.json"), &state_copy).expect("state copied");
    // Nodes as kubelets register them (no providerID), and a Service waiting for an address.
    for name in ["node-1", "node-2"] {
        let node = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": { "name": name, "labels": { "kubernetes.io/hostname": name } },
            "spec": { "taints": [{
                "key": common::UNINITIALIZED_TAINT, "value": "true", "effect": "NoSchedule",
            }]},
        });
        rig.cluster()
            .create("nodes", None, node)
            .expect("Node created");
        let ready = serde_json::json!({ "status": { "conditions": [{
            "type": "Ready", "status": "True", "reason": "KubeletReady",
            "lastHeartbeatTime": "2026-01-01T00:00:00Z",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }]}});
        rig.cluster()
            .patch(
                "nodes",
                None,
                name,
                fake_apiserver::PatchType::Merge,
                &ready,
                true,
            )
            .expect("Node status set");
    }
    rig.cluster()
        .create(
            "services",
            Some("default"),
            lb_service("web", &[("TCP", 80, 30080)], &[]),
        )
        .expect("Service created");

    let started = Instant::now();
    let mut ccm = Ccm::start(&rig, "away", &config, &[]);
    // Alive and serving health while CloudStack is away; not ready.
    let mut healthz = None;
    while started.elapsed() < AWAY {
        assert!(ccm.running(), "the process lives on:\n{}", ccm.output());
        let health = raw_http::get(ccm.addr, "/healthz").await;
        if status_code(&health) == Some(200) {
            let ready = raw_http::get(ccm.addr, "/readyz").await;
            assert_ne!(
                status_code(&ready),
                Some(200),
                "not ready while CloudStack is away"
            );
            healthz.get_or_insert(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let healthz = healthz.expect("/healthz is served while CloudStack is away");
    let away_calls = calls_in_metrics(&ccm.metrics().await);
    let output = ccm.output();
    let waiting_lines = output
        .lines()
        .filter(|l| l.contains("waiting for CloudStack"))
        .count();
    assert_eq!(waiting_lines, 1, "one line says it, no flood:\n{output}");
    assert!(
        away_calls <= 2 * AWAY.as_secs(),
        "a paced back-off: {away_calls} calls in {AWAY:?}"
    );

    // CloudStack returns.
    let back = Instant::now();
    let sim = SimServer::start_with(
        Scenario::small(),
        SimOptions {
            listen: std::net::SocketAddr::from(([127, 0, 0, 1], port)),
            state_file: Some(state_copy),
        },
    )
    .await
    .expect("the simulator starts on the port");
    let cluster = rig.cluster();
    let initialised = common::eventually("both Nodes initialised", Duration::from_secs(30), || {
        let cluster = cluster.clone();
        async move {
            let nodes = cluster.list("nodes", None).ok()?;
            nodes
                .iter()
                .all(|n| {
                    n["spec"]["providerID"]
                        .as_str()
                        .is_some_and(|p| p.starts_with("external-cloudstack://"))
                })
                .then(|| back.elapsed())
        }
    })
    .await;
    let served = common::eventually(
        "the Service has its address",
        Duration::from_secs(30),
        || {
            let cluster = cluster.clone();
            async move {
                let service: Value = cluster.get("services", Some("default"), "web").ok()?;
                service["status"]["loadBalancer"]["ingress"][0]["ip"]
                    .as_str()
                    .map(|_| back.elapsed())
            }
        },
    )
    .await;
    assert!(ccm.running(), "still the same process:\n{}", ccm.output());
    let away_lines = ccm.output();
    assert!(
        away_lines.contains("CloudStack answers; starting"),
        "{away_lines}"
    );
    assert!(
        initialised < Duration::from_secs(10) && served < Duration::from_secs(15),
        "within seconds of CloudStack's return: Nodes {initialised:?}, Service {served:?}"
    );
    let ready = raw_http::get(ccm.addr, "/readyz").await;
    assert_eq!(
        status_code(&ready),
        Some(200),
        "ready once CloudStack answered"
    );
    println!(
        "  /healthz served {healthz:.1?} after start; {away_calls} calls in {AWAY:?} away; \
         after CloudStack's return: Nodes initialised in {initialised:.1?}, Service served in {served:.1?}"
    );
    ccm.kill();
    sim.shutdown();
}
