//! Crash-kill: the real binary against a simulator (with a state file) and the fake API
//! server that both outlive it. LoadBalancer Services are created, changed and deleted
//! while the controller manager is killed with SIGKILL at random instants and restarted.
//! Afterwards every Service converges, and the simulator holds no IP, rule, firewall
//! rule or ACL item that no Service owns, and no duplicate rule.
//!
//! `CRASH_KILLS=500` runs more kills (50 by default); `CRASH_SEED=<n>` replays the same
//! changes and kill instants; `CRASH_VERBOSITY=3` runs the controller with `-v=3` and, on
//! a leak, prints its log lines about the leaked IPs.

use crate::common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::audit::{self, Baseline};
use super::ccm::Ccm;
use super::rig::Rig;
use super::services::{self, lb_service};
use cloudstack_ccm::cloud::loadbalancer::annotations;
use cloudstack_sim::{KINDS_INTERNAL_LB_TIER, Scenario};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

/// Services the driver plays with.
const SERVICES: usize = 6;
/// Public ports a Service may have.
const PORTS: [i64; 4] = [80, 443, 8080, 9000];
/// How long the last controller may take to converge everything: a bound, not a
/// target (alone it takes a few seconds; under the whole suite on 2 shared cores,
/// debug builds of three processes per test, far longer).
const CONVERGE: Duration = Duration::from_secs(120);

/// Random Service changes, one at a time.
struct Driver {
    rng: StdRng,
    created: u64,
    changed: u64,
    deleted: u64,
    /// Services are created internal (`…-internal: "true"`) and now and then switched
    /// between internal and public.
    internal: bool,
}

impl Driver {
    /// A driver replaying `seed`; `internal`: see [`Driver::internal`].
    fn new(seed: u64, internal: bool) -> Driver {
        Driver {
            rng: StdRng::seed_from_u64(seed),
            created: 0,
            changed: 0,
            deleted: 0,
            internal,
        }
    }

    /// 1–3 distinct ports, node ports unique per Service and port.
    fn ports(&mut self, index: usize) -> Vec<(&'static str, i64, i64)> {
        let count = self.rng.random_range(1..=3);
        let mut ports: Vec<i64> = PORTS.to_vec();
        while ports.len() > count {
            let drop = self.rng.random_range(0..ports.len());
            ports.remove(drop);
        }
        ports
            .into_iter()
            .enumerate()
            .map(|(k, port)| ("TCP", port, 30000 + (index as i64) * 10 + k as i64))
            .collect()
    }

    /// One change to a random Service: create it if absent, else change its ports or
    /// delete it; a Service being deleted is left alone.
    fn step(&mut self, rig: &Rig) {
        let cluster = rig.cluster();
        let index = self.rng.random_range(0..SERVICES);
        let name = format!("svc-{index}");
        match services::get(&cluster, &name) {
            None => {
                let ports = self.ports(index);
                let annotations: &[(&str, &str)] = if self.internal {
                    &[(annotations::INTERNAL.key, "true")]
                } else {
                    &[]
                };
                services::create(&cluster, lb_service(&name, &ports, annotations));
                self.created += 1;
            }
            Some(service) if services::is_deleting(&service) => {}
            Some(service) if self.internal && self.rng.random_bool(0.2) => {
                let switched = if services::is_internal(&service) {
                    "false"
                } else {
                    "true"
                };
                let patch = json!({ "metadata": { "annotations": { annotations::INTERNAL.key: switched } } });
                services::patch(&cluster, &name, &patch);
                self.changed += 1;
            }
            Some(_) if self.rng.random_bool(0.6) => {
                let ports = self.ports(index);
                let patch = json!({ "spec": { "ports": services::ports_json(&ports) } });
                services::patch(&cluster, &name, &patch);
                self.changed += 1;
            }
            Some(_) => {
                services::delete(&cluster, &name);
                self.deleted += 1;
            }
        }
    }
}

/// Starts the controller manager `kills` times, each for a random 20–800 ms in which the
/// driver makes 0–2 changes, and kills it with SIGKILL. Returns each life and the instant
/// (ms since the epoch) of each kill.
async fn kill_repeatedly(
    rig: &Rig,
    driver: &mut Driver,
    cloud_config: &std::path::Path,
    args: &[&str],
    kills: u64,
) -> (Vec<Duration>, Vec<u64>) {
    let mut lifetimes = Vec::new();
    let mut kill_times = Vec::new();
    for _ in 0..kills {
        let mut ccm = Ccm::start(rig, "ccm", cloud_config, args);
        let life = Duration::from_millis(driver.rng.random_range(20..800));
        let changes = driver.rng.random_range(0..=2);
        let mut at: Vec<Duration> = (0..changes)
            .map(|_| life.mul_f64(driver.rng.random_range(0.0..1.0)))
            .collect();
        at.sort();
        let born = Instant::now();
        for instant in at {
            tokio::time::sleep(instant.saturating_sub(born.elapsed())).await;
            driver.step(rig);
        }
        tokio::time::sleep(life.saturating_sub(born.elapsed())).await;
        assert!(ccm.running(), "the CCM died on its own:\n{}", ccm.output());
        ccm.kill();
        kill_times.push(now_ms());
        lifetimes.push(life);
    }
    (lifetimes, kill_times)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_at_random_instants_loses_and_leaks_nothing() {
    if common::skip_in_remote_mode(
        "restarts the simulator from its state file and audits its state",
    ) {
        return;
    }
    let kills = super::env_count("CRASH_KILLS", 50);
    let seed = super::seed("CRASH_SEED");
    let (rig, baseline, cloud_config) =
        rig_with_nodes(Scenario::small(), &["node-1", "node-2", "node-3"]).await;
    let verbosity = format!("-v={}", super::env_count("CRASH_VERBOSITY", 0));
    let mut driver = Driver::new(seed, false);
    for _ in 0..3 {
        driver.step(&rig);
    }

    let started = Instant::now();
    let (lifetimes, kill_times) =
        kill_repeatedly(&rig, &mut driver, &cloud_config, &[&verbosity], kills).await;
    let chaos = started.elapsed();

    // The last run: everything converges.
    let ccm = Ccm::start(&rig, "ccm", &cloud_config, &[&verbosity]);
    let converge_start = Instant::now();
    let cluster = rig.cluster();
    let converged = converge(&rig, |s| services::is_converged(s, &rig.sim)).await;
    let converge_time = converge_start.elapsed();
    let live = services::list(&cluster);
    let findings = audit::audit(&rig.sim, &baseline, &live);
    let calls = rig.sim.call_counts();
    let mutating: BTreeMap<_, _> = calls
        .iter()
        .filter(|(c, _)| !cloudstack::is_read(c))
        .collect();

    // Steady state: a full resync with nothing to change changes nothing.
    rig.sim.reset_counts();
    tokio::time::sleep(Duration::from_millis(2600)).await;
    let steady_mutations = rig.sim.mutating_calls();
    let steady_commands: Vec<_> = rig
        .sim
        .call_log()
        .into_iter()
        .filter(|c| !cloudstack::is_read(&c.command))
        .map(|c| c.command)
        .collect();

    println!(
        "crash-kill summary: seed {seed}, kills {kills}, chaos {chaos:.1?} (mean life {:?}), \
         services created {} changed {} deleted {}, live {}, converged {} in {converge_time:.1?}, \
         leaks found {}, duplicates {}, calls {} (mutating {:?}), mutating calls in steady state {steady_mutations}",
        lifetimes.iter().sum::<Duration>() / u32::try_from(lifetimes.len().max(1)).unwrap_or(1),
        driver.created,
        driver.changed,
        driver.deleted,
        live.len(),
        converged.is_some(),
        findings.leaks(),
        findings.duplicate_count(),
        calls.values().sum::<u64>(),
        mutating,
    );
    println!("simulator: {}", audit::totals(&rig.sim));
    assert!(
        converged.is_some(),
        "not converged within {CONVERGE:?}: {:#?}\nCCM log tail:\n{}",
        live.iter()
            .filter(|s| !services::is_converged(s, &rig.sim))
            .collect::<Vec<_>>(),
        tail(&ccm.output(), 40)
    );
    assert!(
        findings.is_clean(),
        "{findings}\n{}\n{}",
        forensics(&rig, &kill_times).join("\n"),
        log_lines_about(&ccm.output(), &findings.leaked_ips).join("\n")
    );
    assert_eq!(
        steady_mutations, 0,
        "steady state makes no mutating call: {steady_commands:?}"
    );
}

/// Internal Services on a tier with CloudStack's internal load balancer, switched now
/// and then to public (refused there: their internal rules go) and back, while the
/// controller manager is killed at random instants: every Service converges, no internal
/// rule is left without its Service or built twice, and nothing public is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_with_internal_services_loses_and_leaks_nothing() {
    if common::skip_in_remote_mode(
        "restarts the simulator from its state file and audits its state",
    ) {
        return;
    }
    let kills = super::env_count("CRASH_KILLS", 50);
    let seed = super::seed("CRASH_SEED");
    let mut scenario = Scenario::network_kinds();
    let nodes = scenario.add_vms(KINDS_INTERNAL_LB_TIER, "ilb-node-", 3);
    let nodes: Vec<&str> = nodes.iter().map(String::as_str).collect();
    let (rig, baseline, cloud_config) = rig_with_nodes(scenario, &nodes).await;
    let public_before = rig.sim.with_state(|s| s.lb_rules.len());
    let mut driver = Driver::new(seed, true);
    for _ in 0..3 {
        driver.step(&rig);
    }
    kill_repeatedly(&rig, &mut driver, &cloud_config, &[], kills).await;
    let ccm = Ccm::start(&rig, "ccm", &cloud_config, &[]);
    let cluster = rig.cluster();
    let settled = |s: &serde_json::Value| {
        if services::is_internal(s) {
            services::is_converged(s, &rig.sim)
        } else {
            services::is_refused_on_internal_tier(s, &rig.sim)
        }
    };
    let converged = converge(&rig, settled).await;
    let live = services::list(&cluster);
    let findings = audit::audit(&rig.sim, &baseline, &live);
    println!(
        "internal crash-kill summary: seed {seed}, kills {kills}, services created {} changed {} deleted {}, live {} ({} internal), converged {}, leaks found {}, duplicates {}; simulator: {}",
        driver.created,
        driver.changed,
        driver.deleted,
        live.len(),
        live.iter().filter(|s| services::is_internal(s)).count(),
        converged.is_some(),
        findings.leaks(),
        findings.duplicate_count(),
        audit::totals(&rig.sim),
    );
    assert!(
        converged.is_some(),
        "not converged within {CONVERGE:?}: {:#?}\nCCM log tail:\n{}",
        live.iter().filter(|s| !settled(s)).collect::<Vec<_>>(),
        tail(&ccm.output(), 40)
    );
    assert!(findings.is_clean(), "{findings}");
    assert_eq!(
        rig.sim.with_state(|s| s.lb_rules.len()),
        public_before,
        "no public rule on the internal-only tier"
    );
}

/// The same changes without any kill: what leaks here is not a crash's doing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn churn_without_kills_leaks_nothing() {
    if common::skip_in_remote_mode("audits the simulator's state for leaks") {
        return;
    }
    let seed = super::seed("CHURN_SEED");
    let (rig, baseline, cloud_config) =
        rig_with_nodes(Scenario::small(), &["node-1", "node-2", "node-3"]).await;
    let mut driver = Driver::new(seed, false);
    let ccm = Ccm::start(&rig, "ccm", &cloud_config, &[]);
    for _ in 0..100 {
        driver.step(&rig);
        let pause = driver.rng.random_range(10..200);
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
    let cluster = rig.cluster();
    let converged = converge(&rig, |s| services::is_converged(s, &rig.sim)).await;
    let live = services::list(&cluster);
    let findings = audit::audit(&rig.sim, &baseline, &live);
    println!(
        "churn summary: seed {seed}, services created {} changed {} deleted {}, live {}, \
         converged {}, leaks found {}, duplicates {}, calls {}",
        driver.created,
        driver.changed,
        driver.deleted,
        live.len(),
        converged.is_some(),
        findings.leaks(),
        findings.duplicate_count(),
        rig.all_calls(),
    );
    assert!(
        converged.is_some(),
        "not converged:\n{}",
        tail(&ccm.output(), 40)
    );
    assert!(findings.is_clean(), "{findings}");
}

/// A rig on `scenario` (20 ms jobs) with a Node for each VM named in `nodes`, what the
/// simulator held before any controller ran, and a cloud-config of the test account.
async fn rig_with_nodes(mut scenario: Scenario, nodes: &[&str]) -> (Rig, Baseline, PathBuf) {
    scenario.settings.job_duration_ms = 20;
    let rig = Rig::start(scenario).await;
    for vm in nodes {
        rig.add_node(vm);
    }
    let baseline = Baseline::take(&rig.sim);
    let cloud_config = rig.cloud_config(common::ACCOUNT);
    (rig, baseline, cloud_config)
}

/// Waits (at most [`CONVERGE`]) until no Service is being deleted and every one is
/// `settled`; `None` when that time passed first.
async fn converge(rig: &Rig, settled: impl Fn(&serde_json::Value) -> bool) -> Option<()> {
    let cluster = rig.cluster();
    super::poll(CONVERGE, || async {
        services::list(&cluster)
            .iter()
            .all(|s| !services::is_deleting(s) && settled(s))
            .then_some(())
    })
    .await
}

/// Milliseconds since the Unix epoch.
fn now_ms() -> u64 {
    u64::try_from(jiff::Timestamp::now().as_millisecond()).unwrap_or_default()
}

/// For every IP association job whose IP is still allocated, how long before the next
/// SIGKILL it was accepted and whether the IP was ever tagged.
fn forensics(rig: &Rig, kill_times: &[u64]) -> Vec<String> {
    rig.sim.with_state(|s| {
        s.jobs
            .iter()
            .filter_map(|job| match &job.action {
                cloudstack_sim::jobs::JobAction::AssociateIp { ip_id, .. } => {
                    let ip = s.ips.iter().find(|ip| &ip.id == ip_id)?;
                    let next_kill = kill_times.iter().find(|k| **k >= job.created_ms);
                    Some(format!(
                        "associateIpAddress {ip_id} ({}, {}): accepted {:?} ms before the next kill",
                        ip.address,
                        ip.state,
                        next_kill.map(|k| k - job.created_ms)
                    ))
                }
                _ => None,
            })
            .collect()
    })
}

/// Log lines naming a leaked IP (its id is the second word of each finding).
fn log_lines_about<'a>(log: &'a str, leaked: &[String]) -> Vec<&'a str> {
    let ids: Vec<&str> = leaked
        .iter()
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    log.lines()
        .filter(|line| ids.iter().any(|id| line.contains(id)))
        .take(40)
        .collect()
}

/// The last `n` lines of `text`.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
