//! Faults on both sides, with the service controller in process (short CloudStack job
//! timeout, fast retries):
//! * CloudStack: 5 % 5xx on every command, 429 throttling, latency spikes, 5 % failed
//!   async jobs, 3 % jobs that never finish — every Service converges, nothing leaks,
//!   calls stay bounded;
//! * Kubernetes API: 409 conflicts and 500s on writes, 500s on lists, watch streams
//!   dropped — the controller recovers and does no CloudStack work twice.

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::audit::{self, Baseline};
use super::in_process::start_service_controller;
use super::services::{self, lb_service};
use cloudstack_sim::{ErrorFault, Faults, Scenario, Throttle};
use fake_apiserver::{Fault, Verb};
use serde_json::json;

const NODES: [&str; 3] = ["node-1", "node-2", "node-3"];
const CONVERGE: Duration = Duration::from_secs(90);

/// Every command the service controller sends.
const COMMANDS: [&str; 19] = [
    "listPublicIpAddresses",
    "listLoadBalancerRules",
    "listLoadBalancerRuleInstances",
    "listVirtualMachines",
    "listNetworks",
    "listFirewallRules",
    "listTags",
    "listCapabilities",
    "queryAsyncJobResult",
    "associateIpAddress",
    "disassociateIpAddress",
    "createLoadBalancerRule",
    "updateLoadBalancerRule",
    "deleteLoadBalancerRule",
    "assignToLoadBalancerRule",
    "removeFromLoadBalancerRule",
    "createFirewallRule",
    "deleteFirewallRule",
    "createTags",
];

/// `svc-i` with `ports` TCP ports from 80 (node ports unique per Service).
fn service(i: usize, ports: usize) -> serde_json::Value {
    let ports: Vec<(&str, i64, i64)> = (0..ports)
        .map(|k| ("TCP", 80 + k as i64, 30000 + (i * 10 + k) as i64))
        .collect();
    lb_service(&format!("svc-{i}"), &ports, &[])
}

/// Waits until every Service is converged (a rule whose creation job never finishes
/// counts) and no Service is being deleted.
async fn converge(h: &common::Harness) -> Option<Duration> {
    let started = Instant::now();
    let cluster = h.cluster();
    super::poll(CONVERGE, || async {
        services::list(&cluster)
            .iter()
            .all(|s| {
                !services::is_deleting(s) && services::is_converged_allowing_stuck_jobs(s, &h.sim)
            })
            .then_some(())
    })
    .await
    .map(|()| started.elapsed())
}

/// Services not (yet) converged, for failure messages.
fn stragglers(h: &common::Harness) -> Vec<String> {
    services::list(&h.cluster())
        .iter()
        .filter(|s| {
            services::is_deleting(s) || !services::is_converged_allowing_stuck_jobs(s, &h.sim)
        })
        .map(|s| {
            let ip_id = services::recorded_ip_id(s).unwrap_or_default().to_string();
            let prefix =
                cloudstack_ccm::cloud::loadbalancer::vocabulary::default_lb_name(services::uid(s));
            let cloud = h.sim.with_state(|st| {
                let ip = st
                    .ips
                    .iter()
                    .find(|ip| ip.id == ip_id)
                    .map(|ip| ip.state.clone());
                let rules: Vec<String> = st
                    .lb_rules
                    .iter()
                    .filter(|r| r.name.starts_with(&prefix))
                    .map(|r| format!("{} {} members {}", r.name, r.state, r.members.len()))
                    .collect();
                format!("ip {ip:?}, rules {rules:?}")
            });
            let last_event = h
                .events_about(services::name(s))
                .last()
                .map(|e| common::event_note(e).to_string());
            format!(
                "{}: ingress {:?}, finalizer {}, deleting {}, {cloud}, last Event {last_event:?}",
                services::name(s),
                services::ingress_ip(s),
                services::has_finalizer(s),
                services::is_deleting(s)
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cloudstack_faults_converge_without_leaks_and_with_bounded_calls() {
    if common::skip_in_remote_mode("injects faults into the simulator") {
        return;
    }
    let mut scenario = Scenario::small();
    scenario.settings.job_duration_ms = 10;
    scenario.settings.throttle = Some(Throttle {
        max: 40,
        interval_secs: 1,
    });
    // A job that never finishes holds its network's queue until CloudStack cancels it
    // (`job.cancel.threshold.minutes`); scaled down like the job durations.
    scenario.settings.job_cancel_threshold_ms = 2_000;
    let h = start_service_controller(scenario, &NODES).await;
    h.expect_failing_calls();
    let baseline = Baseline::take(&h.sim);
    let mut faults = Faults {
        job_failure_rate: 0.05,
        job_never_finish_rate: 0.03,
        ..Faults::default()
    };
    for command in COMMANDS {
        faults.errors.insert(
            command.into(),
            ErrorFault {
                rate: 0.05,
                code: 530,
                text: None,
            },
        );
    }
    faults
        .latency_ms
        .insert("listLoadBalancerRules".into(), 150);
    faults.latency_ms.insert("associateIpAddress".into(), 250);
    faults
        .latency_ms
        .insert("createLoadBalancerRule".into(), 100);
    h.sim.set_faults(faults);
    h.sim.reset_counts();
    let cluster = h.cluster();

    const SERVICES: usize = 8;
    for i in 0..SERVICES {
        services::create(&cluster, service(i, 1 + i % 2));
    }
    let created = converge(&h).await;
    assert!(created.is_some(), "not converged: {:#?}", stragglers(&h));
    for i in 0..SERVICES / 2 {
        services::delete(&cluster, &format!("svc-{i}"));
    }
    for i in SERVICES / 2..SERVICES / 2 + 2 {
        let ports = services::ports_json(&[("TCP", 8080, 31000 + i as i64)]);
        services::patch(
            &cluster,
            &format!("svc-{i}"),
            &json!({ "spec": { "ports": ports } }),
        );
    }
    let changed = converge(&h).await;
    assert!(changed.is_some(), "not converged: {:#?}", stragglers(&h));

    let live = services::list(&cluster);
    let findings = audit::audit(&h.sim, &baseline, &live);
    let log = h.sim.call_log();
    let mut by_status = BTreeMap::<u16, u64>::new();
    for call in &log {
        *by_status.entry(call.status).or_default() += 1;
    }
    let jobs = h.sim.with_state(|s| {
        let failed = s.jobs.iter().filter(|j| j.status == 2).count();
        let stuck = s.jobs.iter().filter(|j| j.finish_ms.is_none()).count();
        (s.jobs.len(), failed, stuck)
    });
    let mutating = h.sim.mutating_calls();
    let stuck = h.sim.with_state(services::stuck_resources);
    let stuck_live: Vec<String> = h.sim.with_state(|st| {
        let rules = st.lb_rules.iter().filter(|r| stuck.contains(&r.id));
        let ips = st
            .ips
            .iter()
            .filter(|ip| stuck.contains(&ip.id) && ip.state != "Free");
        rules
            .map(|r| format!("rule {} ({})", r.name, r.state))
            .chain(ips.map(|ip| format!("IP {} ({})", ip.address, ip.state)))
            .collect()
    });
    let timeouts = cluster
        .events()
        .iter()
        .filter(|e| common::event_note(e).contains("did not finish within"))
        .count();
    println!(
        "cloudstack faults summary: {SERVICES} Services created ({:.1?}), 4 deleted and 2 changed \
         ({:.1?}); live {}, converged, leaks found {}, duplicates {}; calls {} by status {by_status:?}, \
         mutating {mutating}; jobs {} (failed {}, never finishing {}); resources stuck in a job \
         yet in use {stuck_live:?}; job-timeout Events {timeouts}",
        created.unwrap_or_default(),
        changed.unwrap_or_default(),
        live.len(),
        findings.leaks(),
        findings.duplicate_count(),
        log.len(),
        jobs.0,
        jobs.1,
        jobs.2,
    );
    println!("simulator: {}", audit::totals(&h.sim));
    assert!(findings.is_clean(), "{findings}");
    assert_eq!(live.len(), SERVICES / 2);
    // Without faults this work takes about 25 calls per Service; retries of failed steps
    // and jobs must not multiply it without end.
    let bound = 150 * SERVICES;
    assert!(log.len() <= bound, "{} calls, bound {bound}", log.len());
    assert!(
        mutating <= (30 * SERVICES) as u64,
        "{mutating} mutating calls"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_server_faults_are_survived_without_duplicate_cloudstack_work() {
    if common::skip_in_remote_mode("injects faults into the fake API server") {
        return;
    }
    let mut scenario = Scenario::small();
    scenario.settings.job_duration_ms = 5;
    let h = start_service_controller(scenario, &NODES).await;
    let baseline = Baseline::take(&h.sim);
    let cluster = h.cluster();
    cluster.set_faults(vec![
        Fault::error(409).on(Verb::Patch, "services").rate(0.3),
        Fault::error(500).on(Verb::Patch, "services").times(3),
        Fault::error(409)
            .on(Verb::Patch, "services/status")
            .rate(0.3),
        Fault::error(500)
            .on(Verb::Patch, "services/status")
            .times(3),
        Fault::error(500).on(Verb::List, "services").times(2),
        Fault::error(500).on(Verb::List, "nodes").times(2),
        Fault::error(500).on(Verb::Create, "events").rate(0.5),
    ]);
    h.sim.reset_counts();
    cluster.reset_request_counts();

    const SERVICES: usize = 6;
    let ports_total: usize = (0..SERVICES).map(|i| 1 + i % 3).sum();
    for i in 0..SERVICES {
        services::create(&cluster, service(i, 1 + i % 3));
    }
    // Drop every watch stream a few times while the work runs.
    let dropper = {
        let cluster = cluster.clone();
        tokio::spawn(async move {
            for _ in 0..10 {
                tokio::time::sleep(Duration::from_millis(150)).await;
                cluster.drop_watches();
            }
        })
    };
    let converged = converge(&h).await;
    dropper.await.expect("watch dropper");
    assert!(converged.is_some(), "not converged: {:#?}", stragglers(&h));

    // Steady state: resyncs keep running, nothing is created again.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let counts = h.sim.call_counts();
    let count = |c: &str| counts.get(c).copied().unwrap_or(0);
    let live = services::list(&cluster);
    let findings = audit::audit(&h.sim, &baseline, &live);
    let requests = cluster.request_counts();
    let writes: u64 = requests
        .iter()
        .filter(|((verb, _), _)| !matches!(verb, Verb::Get | Verb::List | Verb::Watch))
        .map(|(_, n)| n)
        .sum();
    println!(
        "API server faults summary: {SERVICES} Services ({ports_total} ports) converged in {:.1?}; \
         associateIpAddress {}, disassociateIpAddress {}, createLoadBalancerRule {}, \
         assignToLoadBalancerRule {}; leaks found {}, duplicates {}; CloudStack calls {}, \
         API writes {writes}, watches opened {}",
        converged.unwrap_or_default(),
        count("associateIpAddress"),
        count("disassociateIpAddress"),
        count("createLoadBalancerRule"),
        count("assignToLoadBalancerRule"),
        findings.leaks(),
        findings.duplicate_count(),
        counts.values().sum::<u64>(),
        requests
            .iter()
            .filter(|((verb, _), _)| *verb == Verb::Watch)
            .map(|(_, n)| n)
            .sum::<u64>(),
    );
    assert!(findings.is_clean(), "{findings}");
    assert_eq!(
        count("createLoadBalancerRule"),
        ports_total as u64,
        "each rule is created once"
    );
    assert_eq!(
        count("associateIpAddress") - count("disassociateIpAddress"),
        SERVICES as u64,
        "one IP kept per Service (an IP whose id could not be recorded is released)"
    );
    assert_eq!(
        count("assignToLoadBalancerRule"),
        ports_total as u64,
        "members assigned once per rule"
    );
    h.stop().await;
}

/// A failed `associateIpAddress` job releases the address; if the id stays recorded on
/// the Service, the address can meanwhile be taken by someone else. The Service must get
/// an IP of its own, and deleting it must never release the other's address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_ip_association_is_not_taken_for_the_services_ip() {
    if common::skip_in_remote_mode("injects faults into the simulator") {
        return;
    }
    let mut scenario = Scenario::small();
    scenario.settings.job_duration_ms = 5;
    let h = super::in_process::start_with_nodes(scenario, &NODES).await;
    h.expect_failing_calls();
    let cluster = h.cluster();
    h.sim.set_faults(Faults {
        job_failure_rate: 1.0,
        ..Faults::default()
    });
    let controller = super::in_process::ServiceController::start(&h);
    services::create(&cluster, service(0, 1));
    let failed = super::poll(Duration::from_secs(10), || async {
        h.events_about("svc-0")
            .into_iter()
            .find(|e| common::event_note(e).contains("associateIpAddress"))
    })
    .await;
    assert!(failed.is_some(), "the association fails");
    controller.stop().await;
    h.sim.set_faults(Faults::default());
    let recorded = services::get(&cluster, "svc-0")
        .and_then(|s| services::recorded_ip_id(&s).map(str::to_string));

    // Someone else (a user, another Service) acquires the released address.
    let released = h.sim.with_state(|s| {
        let failed_job = s
            .jobs
            .iter()
            .find(|j| j.command == "associateIpAddress" && j.status == 2);
        let ip_id = match failed_job.map(|j| &j.action) {
            Some(cloudstack_sim::jobs::JobAction::AssociateIp { ip_id, .. }) => ip_id.clone(),
            _ => panic!("a failed associateIpAddress job"),
        };
        let ip = s
            .ips
            .iter()
            .find(|ip| ip.id == ip_id)
            .expect("the IP exists");
        let network = s
            .networks
            .iter()
            .find(|n| n.name == cloudstack_sim::SMALL_NETWORK);
        (
            ip.address.clone(),
            ip.state.clone(),
            network.map(|n| n.id.clone()),
        )
    });
    let (address, state, network) = released;
    assert_eq!(state, "Free", "a failed association releases the address");
    let request = cloudstack::AssociateIpAddress {
        networkid: network,
        ipaddress: Some(address.clone()),
        ..Default::default()
    };
    h.ctx
        .cloudstack
        .associate_ip_address(&request)
        .await
        .expect("the user acquires the address");
    let taken = Some(address);

    let controller = super::in_process::ServiceController::start(&h);
    let converged = super::poll(Duration::from_secs(20), || async {
        services::get(&cluster, "svc-0").filter(|s| services::is_converged(s, &h.sim))
    })
    .await;
    let service_ip = converged
        .as_ref()
        .and_then(services::ingress_ip)
        .map(str::to_string);
    println!(
        "failed association summary: recorded after the failure {recorded:?}, address taken by \
         the user {taken:?}, the Service's IP afterwards {service_ip:?}"
    );
    assert!(converged.is_some(), "not converged: {:#?}", stragglers(&h));
    services::delete(&cluster, "svc-0");
    let gone = super::poll(Duration::from_secs(20), || async {
        services::get(&cluster, "svc-0").is_none().then_some(())
    })
    .await;
    assert!(gone.is_some(), "the Service is deleted");
    let kept = taken.as_ref().map(|address| {
        h.sim.with_state(|s| {
            s.ips
                .iter()
                .find(|ip| &ip.address == address)
                .map(|ip| ip.state.clone())
        })
    });
    println!("the user's address after the Service's deletion: {kept:?}");
    controller.stop().await;
    h.stop().await;
    assert_ne!(service_ip, taken, "the Service took the user's address");
    if let Some(state) = kept {
        assert_eq!(
            state.as_deref(),
            Some("Allocated"),
            "the user's address is kept"
        );
    }
}
