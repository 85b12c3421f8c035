//! API-server outages: the fake API server stops answering (connections refused, open
//! ones and watches cut, as a kube-apiserver stopped for a control-plane upgrade) for 8 s
//! and for 60 s, with the default lease timings (15 s lease, 10 s renew deadline), so
//! the controller manager loses the Lease. It must live on (same PID), lead again when the
//! server is back, read CloudStack then as a steady resync does (not as a cold start:
//! no start-up checks, no per-rule members or policies, no orphan pass), and serve a new
//! Service. The Node watch (the one watch that outlives a term) resumes from its
//! resourceVersion when the server still has it (no relist) and relists when it answers
//! 410 Gone (the history compacted during the 8 s outage).
//!
//! Each test prints the reads it measured: a steady resync, the reads after the outage
//! and those of a cold start of a new process over the same load balancers.

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::ccm::Ccm;
use super::rig::Rig;
use super::services::{self, lb_service};
use cloudstack_sim::Scenario;
use fake_apiserver::{PatchType, Verb};
use serde_json::json;

/// Load balancers in place before the outage.
const SERVICES: i64 = 8;
/// The resync period: long enough that windows of a few seconds hold at most one resync.
const RESYNC_FLAG: &str = "--service-resync-period=20s";
/// Per-rule reads, which a cold start makes for every rule and a resync for none.
const DETAIL_READS: [&str; 3] = [
    "listLoadBalancerRuleInstances",
    "listLBStickinessPolicies",
    "listLBHealthCheckPolicies",
];
/// What a process reads once at start.
const START_UP_READS: [&str; 3] = ["listCapabilities", "listProjects", "listZones"];
/// How long after a resync starts its reads are counted.
const SETTLE: Duration = Duration::from_secs(4);

fn now_ms() -> u64 {
    u64::try_from(jiff::Timestamp::now().as_millisecond()).unwrap_or(0)
}

/// CloudStack reads (by command) that arrived in `[from_ms, to_ms]`.
fn reads_between(rig: &Rig, from_ms: u64, to_ms: u64) -> BTreeMap<String, u64> {
    let mut reads = BTreeMap::new();
    for call in rig.sim.call_log() {
        if (from_ms..=to_ms).contains(&call.at_ms)
            && !cloudstack_sim::commands::is_mutating(&call.command)
        {
            *reads.entry(call.command).or_default() += 1;
        }
    }
    reads
}

fn total(reads: &BTreeMap<String, u64>) -> u64 {
    reads.values().sum()
}

fn of(reads: &BTreeMap<String, u64>, commands: &[&str]) -> u64 {
    commands.iter().filter_map(|c| reads.get(*c)).sum()
}

/// Creates Service `name` on `port` and waits until it is served; how long it took.
async fn serve(rig: &Rig, name: &str, port: i64, ccm: &Ccm) -> Duration {
    let cluster = rig.cluster();
    let started = Instant::now();
    services::create(
        &cluster,
        lb_service(name, &[("TCP", port, 30000 + port)], &[]),
    );
    let served = super::poll(Duration::from_secs(30), || async {
        services::get(&cluster, name).filter(|s| services::is_converged(s, &rig.sim))
    })
    .await;
    assert!(served.is_some(), "{name} is not served:\n{}", ccm.output());
    started.elapsed()
}

/// Waits until the process reports `cloudstack_ccm_leader 1`; when it did (ms).
async fn wait_leading(ccm: &Ccm, timeout: Duration) -> Option<u64> {
    super::poll(timeout, || async {
        let metrics = ccm.metrics().await;
        metrics
            .lines()
            .any(|line| line == "cloudstack_ccm_leader 1")
            .then(now_ms)
    })
    .await
}

/// The reads of one periodic resync in steady state: waits for its first view read
/// (`listLoadBalancerRules`) and counts the reads from then until it settled.
async fn steady_resync(rig: &Rig) -> BTreeMap<String, u64> {
    let rule_lists = || {
        rig.sim
            .call_counts()
            .get("listLoadBalancerRules")
            .copied()
            .unwrap_or(0)
    };
    let before = rule_lists();
    let seen = super::poll(Duration::from_secs(30), || async {
        (rule_lists() > before).then_some(())
    })
    .await;
    assert!(seen.is_some(), "no resync within 30 s");
    let tick = rig
        .sim
        .call_log()
        .iter()
        .rev()
        .find(|c| c.command == "listLoadBalancerRules")
        .map(|c| c.at_ms)
        .unwrap_or_default();
    tokio::time::sleep(SETTLE).await;
    reads_between(rig, tick.saturating_sub(200), tick + duration_ms(SETTLE))
}

fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

async fn outage(down: Duration, compact: bool) {
    let mut scenario = Scenario::small();
    scenario.settings.job_duration_ms = 20;
    let rig = Rig::start(scenario).await;
    for vm in ["node-1", "node-2", "node-3"] {
        rig.add_node(vm);
    }
    let cloud_config = rig.cloud_config(common::ACCOUNT);
    let flags = ["--leader-elect=true", RESYNC_FLAG];
    let mut ccm = Ccm::start(&rig, "ccm", &cloud_config, &flags);
    let pid = ccm.pid();
    assert!(
        wait_leading(&ccm, Duration::from_secs(30)).await.is_some(),
        "the process leads:\n{}",
        ccm.output()
    );
    let cluster = rig.cluster();
    for i in 0..SERVICES {
        services::create(
            &cluster,
            lb_service(&format!("svc-{i}"), &[("TCP", 80 + i, 30000 + i)], &[]),
        );
    }
    let converged = super::poll(Duration::from_secs(60), || async {
        let all = services::list(&cluster);
        all.iter()
            .all(|s| services::is_converged(s, &rig.sim))
            .then_some(())
    })
    .await;
    assert!(converged.is_some(), "not converged:\n{}", ccm.output());
    let before = serve(&rig, "before", 200, &ccm).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let steady = steady_resync(&rig).await;

    // The outage: a Node changes meanwhile (in the history unless compacted).
    let node_lists = rig.api.request_count(Verb::List, "nodes");
    let node_watches = rig.api.request_count(Verb::Watch, "nodes");
    let mutations = rig.mutating_calls();
    rig.api.stop_answering().await;
    let label = json!({ "metadata": { "labels": { "outage": "seen" } } });
    cluster
        .patch("nodes", None, "node-1", PatchType::Merge, &label, false)
        .expect("node patched");
    tokio::time::sleep(down).await;
    if compact {
        cluster.compact();
    }
    let resumed = now_ms();
    rig.api.resume_answering().await;
    let led_again = wait_leading(&ccm, Duration::from_secs(30))
        .await
        .unwrap_or_else(|| panic!("does not lead again:\n{}", ccm.output()));
    tokio::time::sleep(SETTLE).await;
    let after = reads_between(&rig, resumed, led_again + duration_ms(SETTLE));
    assert!(ccm.running(), "the process lives on:\n{}", ccm.output());
    assert_eq!(ccm.pid(), pid);
    assert!(
        ccm.output().contains("lost the leader lease"),
        "the outage outlasted the renew deadline:\n{}",
        ccm.output()
    );
    assert_eq!(
        rig.mutating_calls(),
        mutations,
        "nothing changed, so nothing is changed"
    );
    // The Node watch comes back after its retry backoff (up to 30 s, as client-go's
    // reflector): with its resourceVersion, or after a relist when that was compacted.
    let back = super::poll(Duration::from_secs(60), || async {
        let (lists, watches) = (
            rig.api.request_count(Verb::List, "nodes"),
            rig.api.request_count(Verb::Watch, "nodes"),
        );
        (if compact {
            lists > node_lists
        } else {
            watches > node_watches
        })
        .then_some(())
    })
    .await;
    assert!(
        back.is_some(),
        "the Node watch never came back ({:?}):\n{}",
        rig.api.request_counts(),
        ccm.output()
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let relists = rig.api.request_count(Verb::List, "nodes") - node_lists;
    let after_time = serve(&rig, "after", 201, &ccm).await;
    assert_eq!(ccm.pid(), pid);

    // A cold start over the same load balancers, for comparison.
    ccm.kill();
    let cold_started = now_ms();
    let cold = Ccm::start(
        &rig,
        "cold",
        &cloud_config,
        &["--leader-elect=false", RESYNC_FLAG],
    );
    let ready = super::poll(Duration::from_secs(30), || async {
        super::raw_http::get(cold.addr, "/readyz")
            .await
            .filter(|r| r.status == 200)
            .map(|_| now_ms())
    })
    .await
    .unwrap_or_else(|| panic!("the cold start is not ready:\n{}", cold.output()));
    tokio::time::sleep(SETTLE).await;
    let cold_reads = reads_between(&rig, cold_started, ready + duration_ms(SETTLE));

    println!(
        "outage summary: {down:?} (compacted: {compact}): reads after it {} {after:?}; steady resync {} {steady:?}; \
         cold start {} {cold_reads:?}; Node relists {relists}; a new Service served in {before:?} before, {after_time:?} after",
        total(&after),
        total(&steady),
        total(&cold_reads),
    );
    assert_eq!(of(&after, &START_UP_READS), 0, "no start-up check again");
    assert_eq!(of(&after, &DETAIL_READS), 0, "rule details are kept");
    assert!(
        of(&cold_reads, &DETAIL_READS) >= u64::try_from(SERVICES).unwrap_or(0),
        "a cold start reads every rule's members: {cold_reads:?}"
    );
    assert!(
        total(&after) <= total(&steady) + 2,
        "after the outage {after:?}, a steady resync {steady:?}"
    );
    assert!(total(&after) < total(&cold_reads));
    if compact {
        assert_eq!(relists, 1, "the Node watch relists after 410 Gone");
    } else {
        assert_eq!(
            relists, 0,
            "the Node watch resumes from its resourceVersion"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_server_outage_of_8_s_with_compaction_is_survived_without_a_cold_start() {
    if common::skip_in_remote_mode("stops the fake API server") {
        return;
    }
    outage(Duration::from_secs(8), true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_server_outage_of_60_s_is_survived_without_a_cold_start() {
    if common::skip_in_remote_mode("stops the fake API server") {
        return;
    }
    outage(Duration::from_secs(60), false).await;
}
