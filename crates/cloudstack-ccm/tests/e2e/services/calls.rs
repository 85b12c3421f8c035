//! What a periodic resync costs: 50 unchanged LoadBalancer Services make no mutating
//! CloudStack call and a handful of reads (no VM list) that does not grow with the number
//! of nodes.
//! What a cold restart costs: load-balancer policies are read only for the rules whose
//! Service asks for one (or whose tag says we made one).
//! What a burst of new Services costs: after each change nothing is read again, not even
//! the addresses it touched: the results of its jobs are spliced into the account view.
//! And that spliced view is right: the next reconcile of a new or changed Service plans
//! nothing.

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::support::*;
use cloudstack_ccm::cloud::loadbalancer::annotations;
use cloudstack_sim::state::PolicyKind;
use cloudstack_sim::{SMALL_NETWORK, Scenario};
use fake_apiserver::Verb;

const SERVICES: usize = 50;
const NODES: [&str; 3] = ["node-1", "node-2", "node-3"];
const RESYNC: Duration = Duration::from_millis(1500);

/// Creates `count` one-port Services `<prefix>-<i>` (node ports from 30000).
async fn create_one_port_services(t: &LbTest, prefix: &str, count: usize) {
    for i in 0..count {
        t.create(&lb_service(
            &format!("{prefix}-{i}"),
            &[("TCP", 80, 30000 + i as i32)],
        ))
        .await;
    }
}

/// Waits until each of those Services has its one rule with `members` members.
async fn wait_for_members(t: &LbTest, prefix: &str, count: usize, members: usize) {
    for i in 0..count {
        t.wait_rules(&format!("{prefix}-{i}"), "have every eligible node", |r| {
            r.len() == 1 && r[0].members.len() == members
        })
        .await;
    }
}

/// Creates 50 one-port Services on `node_count` nodes, then returns the CloudStack calls
/// of one full resync.
async fn calls_of_one_resync(node_count: usize) -> BTreeMap<String, u64> {
    let mut scenario = Scenario::small();
    if node_count > 3 {
        scenario.add_vms(SMALL_NETWORK, "node-", node_count - 3);
    }
    let names: Vec<String> = (1..=node_count).map(|i| format!("node-{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let t = LbTest::start(scenario, &refs, RESYNC).await;

    t.h.sim.reset_counts();
    let started = Instant::now();
    create_one_port_services(&t, "svc", SERVICES).await;
    for i in 0..SERVICES {
        t.wait_for_ip(&format!("svc-{i}")).await;
    }
    let jobs: u64 = mutating_counts(&t.h).values().sum();
    println!(
        "{SERVICES} Services on {node_count} nodes ready in {:?} with {jobs} jobs ({:.1} per Service)",
        started.elapsed(),
        jobs as f64 / SERVICES as f64
    );
    wait_for_members(&t, "svc", SERVICES, node_count).await;

    // Let the creation settle and one resync pass with the caches warm.
    tokio::time::sleep(RESYNC * 2).await;
    // Measure from just after a resync starts until just before the next.
    t.h.sim.reset_counts();
    t.h.cluster().reset_request_counts();
    common::eventually("a resync reads the rules", common::WAIT, || async {
        t.h.sim
            .call_counts()
            .get("listLoadBalancerRules")
            .is_some_and(|n| *n > 0)
            .then_some(())
    })
    .await;
    tokio::time::sleep(RESYNC / 2).await;
    let counts: BTreeMap<String, u64> =
        t.h.sim
            .call_counts()
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .collect();
    let service_writes: Vec<_> =
        t.h.cluster()
            .request_counts()
            .into_iter()
            .filter(|((verb, resource), n)| {
                *n > 0
                    && resource.starts_with("services")
                    && matches!(verb, Verb::Patch | Verb::Update | Verb::Create)
            })
            .collect();
    assert!(
        service_writes.is_empty(),
        "an unchanged Service is not written: {service_writes:?}"
    );
    t.stop().await;
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resync_of_fifty_unchanged_services_costs_a_handful_of_reads() {
    if common::skip_in_remote_mode(
        "needs a scenario of 50 VMs and the fake API server's request counters",
    ) {
        return;
    }
    let small = calls_of_one_resync(3).await;
    let large = calls_of_one_resync(30).await;
    let total = |c: &BTreeMap<String, u64>| c.values().sum::<u64>();
    println!(
        "one resync of {SERVICES} Services, 3 nodes: {} calls {small:?}",
        total(&small)
    );
    println!(
        "one resync of {SERVICES} Services, 30 nodes: {} calls {large:?}",
        total(&large)
    );
    for counts in [&small, &large] {
        let mutating: Vec<_> = counts.keys().filter(|c| !cloudstack::is_read(c)).collect();
        assert!(mutating.is_empty(), "no mutating call: {counts:?}");
        assert!(total(counts) <= 6, "a handful of reads: {counts:?}");
        assert_eq!(
            counts.get("listLoadBalancerRuleInstances"),
            None,
            "members are cached: {counts:?}"
        );
        assert_eq!(
            counts.get("listVirtualMachines"),
            None,
            "the VMs' networks come from the node inventory, not a list per resync: {counts:?}"
        );
    }
    assert_eq!(small, large, "reads do not grow with the number of nodes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_restart_reads_policies_only_where_one_may_exist() {
    if common::skip_in_remote_mode("reads the simulator's policies and call counters") {
        return;
    }
    const PLAIN: usize = 10;
    let nodes = ["node-1", "node-2", "node-3"];
    let resync = Duration::from_secs(100);
    let t = LbTest::prepare(Scenario::small(), &nodes, resync).await;
    let first = OwnController::start(&t, resync);
    for i in 0..PLAIN {
        t.create(&lb_service(
            &format!("plain-{i}"),
            &[
                ("TCP", 80, 30000 + i as i32),
                ("TCP", 443, 31000 + i as i32),
            ],
        ))
        .await;
    }
    t.create(&with_annotations(
        lb_service("sticky", &[("TCP", 80, 32000)]),
        &[(annotations::STICKINESS_METHOD.key, "SourceBased")],
    ))
    .await;
    for i in 0..PLAIN {
        t.wait_rules(&format!("plain-{i}"), "have members", |r| {
            r.len() == 2 && r.iter().all(|r| r.members.len() == 3)
        })
        .await;
    }
    t.wait_rules("sticky", "has members", |r| {
        r.len() == 1 && r[0].members.len() == 3
    })
    .await;
    let sticky_policies = || {
        t.h.sim.with_state(|s| {
            s.policies
                .iter()
                .filter(|p| p.kind == PolicyKind::Stickiness)
                .count()
        })
    };
    common::eventually("the stickiness policy exists", common::WAIT, || async {
        (sticky_policies() == 1).then_some(())
    })
    .await;
    first.stop().await;

    // A new process: no cache; every Service is reconciled once.
    t.h.sim.reset_counts();
    let second = OwnController::start(&t, resync);
    let rules = 2 * PLAIN as u64 + 1;
    common::eventually("every rule's members are read", common::WAIT, || async {
        let counts = t.h.sim.call_counts();
        (counts.get("listLoadBalancerRuleInstances").copied() == Some(rules)).then_some(())
    })
    .await;
    settle().await;
    let counts = t.h.sim.call_counts();
    assert_eq!(
        counts.get("listLBStickinessPolicies").copied().unwrap_or(0),
        1,
        "only the rule of the Service asking for stickiness: {counts:?}"
    );
    assert_eq!(
        counts
            .get("listLBHealthCheckPolicies")
            .copied()
            .unwrap_or(0),
        0,
        "no Service asks for a health check: {counts:?}"
    );
    assert!(
        mutating_counts(&t.h).is_empty(),
        "nothing changes: {counts:?}"
    );
    assert_eq!(sticky_policies(), 1, "the policy stays");
    second.stop().await;
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_services_read_nothing_again_after_their_change() {
    if common::skip_in_remote_mode("counts the simulator's calls") {
        return;
    }
    const NEW: usize = 12;
    let t = LbTest::start(
        Scenario::small(),
        &["node-1", "node-2", "node-3"],
        RESYNC * 100,
    )
    .await;
    t.h.sim.reset_counts();
    create_one_port_services(&t, "burst", NEW).await;
    for i in 0..NEW {
        t.wait_for_ip(&format!("burst-{i}")).await;
    }
    settle().await;
    let counts = t.h.cloudstack_call_counts();
    let calls = |command: &str| counts.get(command).copied().unwrap_or(0);
    // The whole view is read once for the burst (twice if a Service event comes before
    // the first read ends), not after every change: the changes are spliced in.
    for list in ["listNetworks", "listLoadBalancerRules", "listFirewallRules"] {
        assert!(calls(list) <= 2, "{list}: {counts:?}");
    }
    // Beside the view, one page of free addresses per new Service (its claim).
    assert!(
        calls("listPublicIpAddresses") <= NEW as u64 + 2,
        "{counts:?}"
    );
    // And what the Services see is right: each has its rule with every node.
    wait_for_members(&t, "burst", NEW, 3).await;
    let events = reasons(&t, "burst-0");
    assert!(
        !events.iter().any(|r| r == "SyncLoadBalancerFailed"),
        "{events:?}"
    );
    t.stop().await;
}

/// The reads of the account view (rules, addresses, firewall rules) in `log`.
fn view_reads(log: &[cloudstack_sim::CallRecord]) -> Vec<&str> {
    const READS: [&str; 3] = [
        "listPublicIpAddresses",
        "listLoadBalancerRules",
        "listFirewallRules",
    ];
    log.iter()
        .map(|call| call.command.as_str())
        .filter(|command| READS.contains(command))
        .collect()
}

/// The calls of `log` from the first mutating one on (the plan's run and what follows).
fn from_first_change(log: Vec<cloudstack_sim::CallRecord>) -> Vec<cloudstack_sim::CallRecord> {
    log.into_iter()
        .skip_while(|call| cloudstack::is_read(&call.command))
        .collect()
}

/// Makes Service `name` reconcile again with nothing to change (an annotation whose bad
/// value falls back to the default, with a warning to wait for), and checks that this
/// plans nothing and reads nothing of the rules, addresses and firewall rules: the view
/// its last change was spliced into is what CloudStack holds.
async fn reconcile_again_plans_nothing(t: &LbTest, name: &str, value: &str) {
    t.h.sim.reset_counts();
    t.patch(
        name,
        serde_json::json!({ "metadata": { "annotations": {
            annotations::PROXY_PROTOCOL.key: value } } }),
    )
    .await;
    t.wait_event(name, "LoadBalancerWarning", &format!("\"{value}\""))
        .await;
    settle().await;
    assert!(
        mutating_counts(&t.h).is_empty(),
        "{name}: the spliced view is right, nothing to change: {:?}",
        mutating_counts(&t.h)
    );
    let log = t.h.sim.call_log();
    assert!(
        view_reads(&log).is_empty(),
        "{name}: {:?}",
        view_reads(&log)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_service_is_spliced_into_the_view_and_plans_nothing_next() {
    if common::skip_in_remote_mode("reads the simulator's call log") {
        return;
    }
    let t = LbTest::start(Scenario::small(), &NODES, RESYNC * 100).await;
    // The view is read for a first Service, then a second one is measured.
    create_one_port_services(&t, "first", 1).await;
    wait_for_members(&t, "first", 1, 3).await;
    settle().await;
    t.h.sim.reset_counts();
    t.create(&lb_service(
        "fresh",
        &[
            ("TCP", 80, 30080),
            ("TCP", 443, 30443),
            ("TCP", 8080, 30880),
        ],
    ))
    .await;
    t.wait_for_ip("fresh").await;
    t.wait_rules("fresh", "have every node", |r| {
        r.len() == 3 && r.iter().all(|r| r.members.len() == 3)
    })
    .await;
    settle().await;
    let after = from_first_change(t.h.sim.call_log());
    assert!(
        after
            .iter()
            .any(|call| call.command == "associateIpAddress"),
        "the change is measured"
    );
    assert!(
        view_reads(&after).is_empty(),
        "nothing is read again after the change: {:?}",
        view_reads(&after)
    );
    reconcile_again_plans_nothing(&t, "fresh", "maybe").await;
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_ports_and_source_ranges_are_spliced_into_the_view() {
    if common::skip_in_remote_mode("reads the simulator's call log") {
        return;
    }
    let t = LbTest::start(Scenario::small(), &NODES, RESYNC * 100).await;
    t.create(&lb_service(
        "web",
        &[("TCP", 80, 30080), ("TCP", 443, 30443)],
    ))
    .await;
    let address = t.wait_for_ip("web").await;
    let ip_id = ip_id_of(&t.h, &address);
    wait_for_ports(&t, "web", &[80, 443]).await;
    settle().await;

    // A port added and one removed: a rule created (its firewall opened with it), one
    // deleted (its firewall rule with it), no read after.
    t.h.sim.reset_counts();
    t.patch(
        "web",
        ports_patch(&[("TCP", 80, 30080), ("TCP", 8080, 30880)]),
    )
    .await;
    wait_for_ports(&t, "web", &[80, 8080]).await;
    settle().await;
    let after = from_first_change(t.h.sim.call_log());
    assert!(!after.is_empty(), "the change is measured");
    assert!(view_reads(&after).is_empty(), "{:?}", view_reads(&after));
    assert_eq!(
        firewall_rules(&t.h, &ip_id),
        [
            ("tcp".to_string(), 80, vec!["0.0.0.0/0".to_string()]),
            ("tcp".to_string(), 8080, vec!["0.0.0.0/0".to_string()]),
        ]
    );
    reconcile_again_plans_nothing(&t, "web", "maybe").await;

    // Source ranges: the firewall rules `openfirewall` made give way to the Service's own
    // (the one made since the view was read is read first, for its id).
    t.h.sim.reset_counts();
    t.patch(
        "web",
        serde_json::json!({ "spec": { "loadBalancerSourceRanges": ["198.51.100.0/24"] } }),
    )
    .await;
    let private = vec!["198.51.100.0/24".to_string()];
    common::eventually("the firewall follows the ranges", t.h.wait(), || async {
        let rules = firewall_rules(&t.h, &ip_id);
        (rules.len() == 2 && rules.iter().all(|r| r.2 == private)).then_some(())
    })
    .await;
    settle().await;
    let log = t.h.sim.call_log();
    let before: Vec<&str> = log
        .iter()
        .take_while(|call| cloudstack::is_read(&call.command))
        .map(|call| call.command.as_str())
        .collect();
    assert!(
        before.contains(&"listFirewallRules"),
        "the firewall rule made since the view was read is read for its id: {before:?}"
    );
    let after = from_first_change(log);
    assert!(
        after
            .iter()
            .any(|call| call.command == "createFirewallRule"),
        "{after:?}"
    );
    assert!(view_reads(&after).is_empty(), "{:?}", view_reads(&after));
    reconcile_again_plans_nothing(&t, "web", "perhaps").await;
    let events = reasons(&t, "web");
    assert!(
        !events.iter().any(|r| r == "SyncLoadBalancerFailed"),
        "every change went through at once: {events:?}"
    );
    t.stop().await;
}

/// Waits until Service `name` has one rule per port of `ports`, each with every node.
async fn wait_for_ports(t: &LbTest, name: &str, ports: &[u16]) {
    t.wait_rules(name, &format!("serve {ports:?}"), |r| {
        let mut served: Vec<u16> = r.iter().map(|r| r.public_port).collect();
        served.sort_unstable();
        served == ports && r.iter().all(|r| r.members.len() == NODES.len())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_joining_changes_members_and_reads_no_address_again() {
    if common::skip_in_remote_mode("counts the simulator's calls") {
        return;
    }
    const SERVICES: usize = 6;
    let mut scenario = Scenario::small();
    scenario.add_vms(SMALL_NETWORK, "node-", 1);
    let t = LbTest::start(scenario, &["node-1", "node-2", "node-3"], RESYNC * 100).await;
    create_one_port_services(&t, "churn", SERVICES).await;
    wait_for_members(&t, "churn", SERVICES, 3).await;
    settle().await;
    t.h.sim.reset_counts();
    add_node(&t.h, "node-4").await;
    wait_for_members(&t, "churn", SERVICES, 4).await;
    settle().await;
    let counts = t.h.cloudstack_call_counts();
    let calls = |command: &str| counts.get(command).copied().unwrap_or(0);
    assert_eq!(
        calls("assignToLoadBalancerRule"),
        SERVICES as u64,
        "{counts:?}"
    );
    // The Node change renews the whole view once; a change of members alone reads no
    // address again (the view holds no members).
    assert!(
        calls("listLoadBalancerRules") <= 1 && calls("listFirewallRules") <= 1,
        "{counts:?}"
    );
    t.stop().await;
}
