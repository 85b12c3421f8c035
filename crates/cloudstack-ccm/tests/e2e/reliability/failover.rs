//! Leader failover: two `cloudstack-ccm` processes with `--leader-elect=true` and short
//! lease flags, each with its own API key (two accounts of one project, so the
//! simulator's call log says which process made each call). The leader is killed with
//! SIGKILL; the other leads within the lease duration plus the (jittered) retry periods
//! of observing and acquiring; at no instant do both act (from the call log and from the
//! Lease). A leader cut off from the API server in the middle of its work (its own
//! endpoint stops answering while the other process is served) makes no CloudStack
//! mutation after its renew deadline, lives on, and stands by once the network heals.

use crate::common;

use std::time::{Duration, Instant};

use super::ccm::Ccm;
use super::rig::Rig;
use super::services::{self, lb_service};
use cloudstack_sim::{AccountSpec, Role, SMALL_NETWORK, SMALL_PROJECT, Scenario, Secret};
use serde_json::Value;

const PROJECT_ID: &str = "7a1b0c2d-0000-4000-8000-00000000f00d";
const LEASE: Duration = Duration::from_secs(2);
const RETRY: Duration = Duration::from_millis(250);
const LEASE_FLAGS: [&str; 4] = [
    "--leader-elect=true",
    "--leader-elect-lease-duration=2s",
    "--leader-elect-renew-deadline=1500ms",
    "--leader-elect-retry-period=250ms",
];

/// `small()` with the VR network and its VMs owned by project `proj1`, of which `alice`
/// and `carol` are members.
fn project_scenario() -> Scenario {
    let mut scenario = Scenario::small();
    scenario.settings.job_duration_ms = 10;
    scenario.projects[0].id = Some(PROJECT_ID.into());
    scenario.accounts.push(AccountSpec {
        name: "carol".into(),
        role: Role::User,
        api_key: Secret::new("carol-api-key"),
        secret_key: Secret::new("carol-secret-key"),
        projects: vec![SMALL_PROJECT.into()],
        custom_role: None,
    });
    for network in scenario
        .networks
        .iter_mut()
        .filter(|n| n.name == SMALL_NETWORK)
    {
        network.account = None;
        network.project = Some(SMALL_PROJECT.into());
    }
    for vm in &mut scenario.vms {
        vm.account = None;
        vm.project = Some(SMALL_PROJECT.into());
    }
    scenario
}

/// A cloud-config for `account` scoped to the project.
fn project_config(rig: &Rig, account: &str) -> std::path::PathBuf {
    let (key, secret) = rig.sim.credentials(account).expect("account exists");
    rig.write_file(
        &format!("cloud-config-{account}"),
        &format!(
            "[Global]\napi-url = {}\napi-key = {}\nsecret-key = {}\nproject-id = {PROJECT_ID}\n",
            rig.sim.api_url(),
            key.expose(),
            secret.expose()
        ),
    )
}

/// Whether `/metrics` text has the sample line `cloudstack_ccm_leader <value>` (the
/// `# HELP` line also starts with the metric name, so whole lines are compared).
fn reports_leader(metrics: &str, value: u8) -> bool {
    let sample = format!("cloudstack_ccm_leader {value}");
    metrics.lines().any(|line| line == sample)
}

/// Waits until the process reports `cloudstack_ccm_leader <value>`.
async fn wait_leader_metric(ccm: &Ccm, value: u8, timeout: Duration) -> bool {
    super::poll(timeout, || async {
        reports_leader(&ccm.metrics().await, value).then_some(())
    })
    .await
    .is_some()
}

/// The Lease's holder, renew time (ms) and transitions.
fn lease(rig: &Rig) -> Option<(String, i64, i64)> {
    let lease = rig
        .cluster()
        .get("leases", Some("kube-system"), "cloud-controller-manager")
        .ok()?;
    let spec = &lease["spec"];
    let renew = spec["renewTime"]
        .as_str()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .map_or(0, |t| t.as_millisecond());
    Some((
        spec["holderIdentity"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        renew,
        spec["leaseTransitions"].as_i64().unwrap_or(0),
    ))
}

/// Milliseconds since the Unix epoch.
fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// What every process reads once at start, leader or not: what the keys may call, the
/// version, and the start-up check that the cloud-config's project and zone exist.
const START_UP_READS: [&str; 5] = [
    "listApis",
    "listCapabilities",
    "listProjects",
    "listZones",
    "listAccounts",
];

/// Calls of `account` other than the start-up reads, as (time, command).
fn acting_calls(rig: &Rig, account: &str) -> Vec<(u64, String)> {
    rig.sim
        .call_log()
        .into_iter()
        .filter(|c| {
            c.account.as_deref() == Some(account) && !START_UP_READS.contains(&c.command.as_str())
        })
        .map(|c| (c.at_ms, c.command))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_the_leader_hands_over_within_the_lease_and_never_two_act() {
    if common::skip_in_remote_mode(
        "needs a project shared by two simulator accounts and the simulator's call log",
    ) {
        return;
    }
    let rig = Rig::start(project_scenario()).await;
    for vm in ["node-1", "node-2"] {
        rig.add_node(vm);
    }
    let cluster = rig.cluster();
    let (alice, carol) = (project_config(&rig, "alice"), project_config(&rig, "carol"));

    let mut first = Ccm::start(&rig, "alice", &alice, &LEASE_FLAGS);
    assert!(
        wait_leader_metric(&first, 1, Duration::from_secs(20)).await,
        "the first process leads:\n{}",
        first.output()
    );
    let second = Ccm::start(&rig, "carol", &carol, &LEASE_FLAGS);
    assert!(
        wait_leader_metric(&second, 0, Duration::from_secs(20)).await,
        "the second stands by"
    );
    let (first_holder, _, transitions) = lease(&rig).expect("a Lease");
    assert_eq!(transitions, 0);

    // The leader acts.
    services::create(&cluster, lb_service("before", &[("TCP", 80, 30080)], &[]));
    let converged = super::poll(Duration::from_secs(20), || async {
        services::get(&cluster, "before").filter(|s| services::is_converged(s, &rig.sim))
    })
    .await;
    assert!(
        converged.is_some(),
        "the leader serves the Service:\n{}",
        first.output()
    );
    assert!(
        acting_calls(&rig, "carol").is_empty(),
        "the standby makes no CloudStack call"
    );

    // Kill the leader; watch the Lease until the other takes over.
    let mut last_first_renew = lease(&rig).expect("a Lease").1;
    first.kill();
    let killed = Instant::now();
    let killed_ms = now_ms();
    let mut observed = Vec::<(String, i64)>::new();
    let took_over = super::poll(LEASE * 5, || {
        let snapshot = lease(&rig);
        if let Some((holder, renew, _)) = &snapshot {
            if *holder == first_holder {
                last_first_renew = last_first_renew.max(*renew);
            }
            if observed.last().is_none_or(|(h, _)| h != holder) {
                observed.push((holder.clone(), *renew));
            }
        }
        let metrics = second.metrics();
        async move { reports_leader(&metrics.await, 1).then_some(()) }
    })
    .await;
    let takeover = killed.elapsed();
    assert!(
        took_over.is_some(),
        "the standby never led:\n{}",
        second.output()
    );
    let (second_holder, second_renew, transitions) = lease(&rig).expect("a Lease");

    // The new leader acts.
    services::create(&cluster, lb_service("after", &[("TCP", 81, 30081)], &[]));
    let converged = super::poll(Duration::from_secs(20), || async {
        services::get(&cluster, "after").filter(|s| services::is_converged(s, &rig.sim))
    })
    .await;
    assert!(
        converged.is_some(),
        "the new leader serves the Service:\n{}",
        second.output()
    );

    // The killed leader comes back: it stands by and makes no call.
    let returning = Ccm::start(&rig, "alice", &alice, &LEASE_FLAGS);
    assert!(
        wait_leader_metric(&returning, 0, Duration::from_secs(20)).await,
        "it stands by"
    );
    tokio::time::sleep(LEASE).await;
    drop(returning);

    let first_calls = acting_calls(&rig, "alice");
    let second_calls = acting_calls(&rig, "carol");
    let last_first = first_calls.iter().map(|c| c.0).max().unwrap_or(0);
    let first_second = second_calls.iter().map(|c| c.0).min().unwrap_or(u64::MAX);
    println!(
        "failover summary: takeover {takeover:?} after SIGKILL (lease {LEASE:?}, retry {RETRY:?}), \
         holders {observed:?}, transitions {transitions}, calls by the first leader {} (last at kill{:+} ms), \
         by the second {} (first at kill{:+} ms), mutating calls {}",
        first_calls.len(),
        i64::try_from(last_first).unwrap_or(0) - killed_ms,
        second_calls.len(),
        i64::try_from(first_second).unwrap_or(0) - killed_ms,
        rig.mutating_calls(),
    );
    // The standby sees the last renewal up to one jittered retry period late, waits the
    // lease duration from then, and acquires at its next jittered attempt (client-go's
    // jitter: up to 2.2 x the retry period each), plus 500 ms for polling and scheduling on a busy machine.
    let bound = LEASE + RETRY.mul_f64(2.0 * 2.2) + Duration::from_millis(500);
    assert!(
        takeover <= bound,
        "took over after {takeover:?} (bound {bound:?})"
    );
    assert_ne!(second_holder, first_holder);
    assert_eq!(transitions, 1, "one hand-over");
    assert!(
        second_renew >= last_first_renew + i64::try_from(LEASE.as_millis()).unwrap_or(0),
        "taken only after the old lease expired: renewed {last_first_renew}, taken by {second_renew}"
    );
    assert!(
        i64::try_from(last_first).unwrap_or(0) <= killed_ms,
        "the killed leader made no call after its death"
    );
    assert!(
        last_first < first_second,
        "the two processes' CloudStack calls overlap: first leader's last at {last_first}, \
         second's first at {first_second}"
    );
    assert!(!second_calls.is_empty(), "the second leader acted");
    let leads: Vec<Value> = services::list(&cluster);
    assert!(leads.iter().all(|s| services::is_converged(s, &rig.sim)));
}

/// How late after its renew deadline (by the Lease's last `renewTime`) a mutation of the
/// old leader may still arrive: its deadline runs from the reply to that renewal, one
/// round trip after the time it wrote, and a request sent before may still be on its way.
const DEADLINE_SLACK_MS: i64 = 200;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_leader_stops_mutating_by_its_renew_deadline_lives_on_and_stands_by() {
    if common::skip_in_remote_mode(
        "cuts one process off the fake API server and reads the simulator's call log",
    ) {
        return;
    }
    let rig = Rig::start(project_scenario()).await;
    for vm in ["node-1", "node-2"] {
        rig.add_node(vm);
    }
    let cluster = rig.cluster();
    let (alice, carol) = (project_config(&rig, "alice"), project_config(&rig, "carol"));
    // The first process reaches the API server through an endpoint of its own.
    let endpoint = rig.api.open_endpoint().await.expect("a second endpoint");
    let kubeconfig = rig.write_file(
        "kubeconfig-partitioned",
        &fake_apiserver::kubeconfig_yaml(&endpoint.url()),
    );
    let kubeconfig_flag = format!("--kubeconfig={}", kubeconfig.display());
    let mut flags = LEASE_FLAGS.to_vec();
    flags.push(&kubeconfig_flag);

    let mut first = Ccm::start(&rig, "alice", &alice, &flags);
    let pid = first.pid();
    assert!(
        wait_leader_metric(&first, 1, Duration::from_secs(20)).await,
        "the first process leads:\n{}",
        first.output()
    );
    let second = Ccm::start(&rig, "carol", &carol, &LEASE_FLAGS);
    assert!(wait_leader_metric(&second, 0, Duration::from_secs(20)).await);

    // Slow jobs, so the leader is in the middle of its work when it is cut off.
    rig.sim.set_job_duration(Duration::from_millis(400));
    for i in 0..6 {
        services::create(
            &cluster,
            lb_service(&format!("busy-{i}"), &[("TCP", 80 + i, 30080 + i)], &[]),
        );
    }
    let mutating = |account: &str| -> Vec<u64> {
        acting_calls(&rig, account)
            .into_iter()
            .filter(|(_, command)| cloudstack_sim::commands::is_mutating(command))
            .map(|(at, _)| at)
            .collect()
    };
    let busy = super::poll(Duration::from_secs(20), || async {
        (!mutating("alice").is_empty()).then_some(())
    })
    .await;
    assert!(busy.is_some(), "the leader acts:\n{}", first.output());
    endpoint.stop().await;
    let cut_ms = now_ms();
    let (holder, last_renew_ms, _) = lease(&rig).expect("a Lease");
    let deadline_ms = last_renew_ms + 1500;

    assert!(
        wait_leader_metric(&second, 1, Duration::from_secs(20)).await,
        "the standby takes over:\n{}",
        second.output()
    );
    let converged = super::poll(Duration::from_secs(60), || async {
        let all = services::list(&cluster);
        all.iter()
            .all(|s| services::is_converged(s, &rig.sim))
            .then_some(())
    })
    .await;
    assert!(
        converged.is_some(),
        "the new leader serves every Service:\n{}",
        second.output()
    );
    assert!(
        first.running(),
        "the cut-off leader lives on:\n{}",
        first.output()
    );
    assert_eq!(first.pid(), pid);
    assert!(
        wait_leader_metric(&first, 0, Duration::from_secs(5)).await,
        "the cut-off process no longer leads"
    );

    // Healed: it stands by behind the new leader and acts no more.
    endpoint.resume().await;
    tokio::time::sleep(LEASE * 2).await;
    assert!(first.running());
    assert!(wait_leader_metric(&first, 0, Duration::from_secs(1)).await);
    let (new_holder, _, transitions) = lease(&rig).expect("a Lease");

    let first_mutations = mutating("alice");
    let last_first = first_mutations.iter().copied().max().unwrap_or(0);
    let last_first = i64::try_from(last_first).unwrap_or(i64::MAX);
    let first_second = acting_calls(&rig, "carol")
        .iter()
        .map(|c| c.0)
        .min()
        .unwrap_or(u64::MAX);
    let first_second = i64::try_from(first_second).unwrap_or(i64::MAX);
    println!(
        "partition summary: the cut-off leader made {} mutations, the last at its renew deadline{:+} ms \
         (cut at deadline{:+} ms); the new leader's first call at deadline{:+} ms; {} mutations in all",
        first_mutations.len(),
        last_first - deadline_ms,
        cut_ms - deadline_ms,
        first_second - deadline_ms,
        rig.mutating_calls(),
    );
    assert!(
        first.output().contains(&format!("identity={holder}")),
        "the Lease named the cut-off process when it was cut off"
    );
    assert_ne!(new_holder, holder);
    assert_eq!(transitions, 1, "one hand-over");
    assert!(
        last_first <= deadline_ms + DEADLINE_SLACK_MS,
        "the cut-off leader mutated {} ms after its renew deadline",
        last_first - deadline_ms
    );
    assert!(
        last_first < first_second,
        "the two leaders' calls overlap: the old one's last mutation at {last_first}, the new one's first call at {first_second}"
    );
}
