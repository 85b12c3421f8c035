//! Bad input, end to end with the real binary: invalid annotation values that decide
//! access or the address of a new load balancer (other annotations fall back to their
//! defaults with a Warning, see `crate::services::annotations`), unsupported
//! protocols, conflicting or missing ports, requested IPs that are unknown, someone
//! else's or in another zone, UDP on a Virtual Router, no eligible node, nodes matching no
//! VM. Each gets a Warning Event naming the field or cause and changes nothing in
//! CloudStack. Bad start-up input (malformed cloud-config, wrong key, unreachable
//! CloudStack) stops the process with one line naming the cause.

use crate::common;

use std::time::{Duration, Instant};

use super::ccm::Ccm;
use super::rig::Rig;
use super::services::{self, lb_service};
use cloudstack_sim::{IpRange, NetworkSpec, NicSpec, Scenario, VmSpec, ZoneSpec};
use serde_json::{Value, json};

const ANN: &str = "service.beta.kubernetes.io/cloudstack-load-balancer-";
/// An address of bob's (static NAT of his VM).
const BOB_IP: &str = "203.0.113.200";
/// A free address of another zone.
const OTHER_ZONE_IP: &str = "192.0.2.10";

/// `small()` plus a second zone with its own pool and a VM of bob's holding `BOB_IP`.
fn scenario() -> Scenario {
    let mut scenario = Scenario::small();
    scenario.zones.push(ZoneSpec {
        id: None,
        name: "zone2".into(),
        public_ips: vec![],
        public_ip_range: Some(IpRange {
            start: OTHER_ZONE_IP.into(),
            end: "192.0.2.20".into(),
        }),
    });
    scenario.networks.push(NetworkSpec {
        id: None,
        name: "net-bob".into(),
        zone: cloudstack_sim::SMALL_ZONE.into(),
        cidr: "10.9.9.0/24".into(),
        vpc: None,
        acl: None,
        account: Some("bob".into()),
        ..Default::default()
    });
    scenario.vms.push(VmSpec {
        id: None,
        name: "bob-vm".into(),
        state: "Running".into(),
        zone: cloudstack_sim::SMALL_ZONE.into(),
        offering: "small".into(),
        nics: vec![NicSpec {
            network: "net-bob".into(),
            ipv4: "10.9.9.10".into(),
            ipv6: None,
            isdefault: true,
        }],
        static_nat_ip: Some(BOB_IP.into()),
        account: Some("bob".into()),
        project: None,
    });
    scenario
}

/// What the simulator holds that a load balancer could change.
fn cloud_state(rig: &Rig) -> Value {
    let dump = rig.sim.dump();
    json!({
        "ips": dump["ips"], "lb_rules": dump["lb_rules"], "firewall_rules": dump["firewall_rules"],
        "acl_items": dump["acl_items"], "tags": dump["tags"], "policies": dump["policies"],
    })
}

/// One bad Service and the text its Warning Event must contain.
struct Case {
    service: Value,
    expect: &'static str,
    reason: &'static str,
}

/// The reason of a Service that cannot be built as asked.
const FAILED: &str = "SyncLoadBalancerFailed";
/// The reason of a Service no Node can serve.
const UNAVAILABLE: &str = "UnAvailableLoadBalancer";

fn with_spec(mut service: Value, field: &str, value: Value) -> Value {
    service["spec"][field] = value;
    service
}

fn cases() -> Vec<Case> {
    let tcp80 = [("TCP", 80, 30080)];
    let annotated = |name: &str, key: &str, value: &str| {
        lb_service(name, &tcp80, &[(&format!("{ANN}{key}"), value)])
    };
    // Health-check numbers count once a health check is asked for (a path).
    let health_checked = |name: &str, key: &str, value: &str| {
        lb_service(
            name,
            &tcp80,
            &[
                (&format!("{ANN}health-check-path"), "/healthz"),
                (&format!("{ANN}{key}"), value),
            ],
        )
    };
    vec![
        Case {
            service: annotated("bad-address", "address", "1.2.3"),
            expect: "cloudstack-load-balancer-address",
            reason: FAILED,
        },
        Case {
            service: annotated("bad-cidr", "source-cidrs", "10.0.0.0/33"),
            expect: "cloudstack-load-balancer-source-cidrs",
            reason: FAILED,
        },
        Case {
            service: health_checked("health-check-on-vr", "health-check-interval", "10"),
            expect: "health checks are not supported by the load balancer of network net-vr",
            reason: FAILED,
        },
        Case {
            service: with_spec(
                lb_service("bad-range", &tcp80, &[]),
                "loadBalancerSourceRanges",
                json!(["10.1.2.3/40"]),
            ),
            expect: "10.1.2.3/40",
            reason: FAILED,
        },
        Case {
            service: lb_service("sctp", &[("SCTP", 80, 30080)], &[]),
            expect: "SCTP",
            reason: FAILED,
        },
        Case {
            service: lb_service("dup-ports", &[("TCP", 80, 30080), ("UDP", 80, 30081)], &[]),
            expect: "public port 80 is already used",
            reason: FAILED,
        },
        Case {
            service: lb_service("no-ports", &[], &[]),
            expect: "spec.ports",
            reason: FAILED,
        },
        Case {
            service: lb_service("udp-on-vr", &[("UDP", 53, 30053)], &[]),
            expect: "protocol udp is not supported by the load balancer of network net-vr",
            reason: FAILED,
        },
        Case {
            service: with_spec(
                lb_service("ip-not-an-ip", &tcp80, &[]),
                "loadBalancerIP",
                json!("300.1.2.3"),
            ),
            expect: "spec.loadBalancerIP",
            reason: FAILED,
        },
        Case {
            service: with_spec(
                lb_service("ip-unknown", &tcp80, &[]),
                "loadBalancerIP",
                json!("198.51.100.7"),
            ),
            expect: "198.51.100.7",
            reason: FAILED,
        },
        Case {
            // A user key cannot see other accounts' addresses: "not found" is all it knows.
            service: with_spec(
                lb_service("ip-of-bob", &tcp80, &[]),
                "loadBalancerIP",
                json!(BOB_IP),
            ),
            expect: BOB_IP,
            reason: FAILED,
        },
        Case {
            service: with_spec(
                lb_service("ip-other-zone", &tcp80, &[]),
                "loadBalancerIP",
                json!(OTHER_ZONE_IP),
            ),
            expect: OTHER_ZONE_IP,
            reason: FAILED,
        },
    ]
}

/// The first Warning Event about Service `name`.
fn warning_about(rig: &Rig, name: &str) -> Option<Value> {
    rig.cluster().events().into_iter().find(|e| {
        let regarding = e.get("regarding").or_else(|| e.get("involvedObject"));
        e["type"] == "Warning" && regarding.and_then(|r| r["name"].as_str()) == Some(name)
    })
}

/// Runs one CCM against `rig`, creates `cases`, and checks each gets its Warning Event
/// and the cloud does not change. Returns (cases, mutating call attempts).
async fn run_matrix(rig: &Rig, cases: &[Case]) -> (usize, u64) {
    let before = cloud_state(rig);
    rig.sim.reset_counts();
    let config = rig.cloud_config(common::ACCOUNT);
    let ccm = Ccm::start(rig, "ccm", &config, &[]);
    let cluster = rig.cluster();
    for case in cases {
        services::create(&cluster, case.service.clone());
    }
    let started = Instant::now();
    let mut failures = Vec::new();
    for case in cases {
        let name = services::name(&case.service);
        let remaining = Duration::from_secs(30).saturating_sub(started.elapsed());
        let event = super::poll(remaining, || async { warning_about(rig, name) }).await;
        match event {
            None => failures.push(format!("{name}: no Warning Event")),
            Some(event) => {
                let note = common::event_note(&event).to_string();
                let reason = common::event_reason(&event).unwrap_or_default().to_string();
                println!("  {name}: {reason}: {note}");
                if !note.contains(case.expect) || reason != case.reason {
                    failures.push(format!("{name}: {reason} {note:?} lacks {:?}", case.expect));
                }
            }
        }
    }
    // Let a retry or two happen before comparing.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let attempts = rig.sim.mutating_calls();
    let accepted: Vec<String> = rig
        .sim
        .call_log()
        .into_iter()
        .filter(|c| !cloudstack::is_read(&c.command) && c.status == 200)
        .map(|c| c.command)
        .collect();
    assert!(
        accepted.is_empty(),
        "mutating calls that succeeded: {accepted:?}"
    );
    let after = cloud_state(rig);
    drop(ccm);
    assert!(failures.is_empty(), "{failures:#?}");
    assert_eq!(before, after, "bad input changed the cloud");
    (cases.len(), attempts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_services_get_a_warning_naming_the_cause_and_change_nothing() {
    if common::skip_in_remote_mode(
        "audits the simulator's state and the fake API server's counters",
    ) {
        return;
    }
    let rig = Rig::start(scenario()).await;
    for vm in ["node-1", "node-2", "node-3"] {
        rig.add_node(vm);
    }
    let (count, attempts) = run_matrix(&rig, &cases()).await;
    println!(
        "bad input summary: {count} Services, {count} Warning Events, cloud unchanged, \
         mutating call attempts {attempts} (all refused)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_eligible_node_and_nodes_matching_no_vm_get_a_warning() {
    if common::skip_in_remote_mode("reads the simulator's state and the fake API server's store") {
        return;
    }
    let cluster_without_nodes = Rig::start(scenario()).await;
    let case = |name| Case {
        service: lb_service(name, &[("TCP", 80, 30080)], &[]),
        expect: "no available nodes",
        reason: UNAVAILABLE,
    };
    let (_, attempts_none) = run_matrix(&cluster_without_nodes, &[case("no-nodes")]).await;

    let ghosts = Rig::start(scenario()).await;
    ghosts.add_node_with_provider_id("ghost-1", None);
    ghosts.add_node_with_provider_id(
        "ghost-2",
        Some("external-cloudstack://00000000-0000-4000-8000-000000000000"),
    );
    let (_, attempts_ghosts) = run_matrix(&ghosts, &[case("ghost-nodes")]).await;
    println!(
        "bad input summary: no nodes and ghost nodes: 2 Warning Events, cloud unchanged, \
         mutating call attempts {}",
        attempts_none + attempts_ghosts
    );
    assert_eq!(attempts_none + attempts_ghosts, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_start_up_input_stops_with_one_line_naming_the_cause() {
    if common::skip_in_remote_mode(
        "points the controller manager at endpoints made to fail (closed ports, bad files)",
    ) {
        return;
    }
    let rig = Rig::start(Scenario::small()).await;
    let url = rig.sim.api_url();
    let keys = "api-key = alice-api-key\nsecret-key = alice-secret-key\n";
    let cases: Vec<(&str, String, Vec<&str>)> = vec![
        (
            "unterminated-quote",
            format!("[Global]\napi-url = {url}\napi-key = \"abc\nsecret-key = s\n"),
            vec!["cloud-config", "line 3"],
        ),
        (
            "unknown-key",
            format!("[Global]\napi-url = {url}\n{keys}api-secret = x\n"),
            vec!["cloud-config", "api-secret"],
        ),
        (
            "unknown-section",
            format!("[Global]\napi-url = {url}\n{keys}[Extra]\nkey = 1\n"),
            vec!["cloud-config", "extra"],
        ),
        (
            "bad-bool",
            format!("[Global]\napi-url = {url}\n{keys}ssl-no-verify = perhaps\n"),
            vec!["cloud-config", "ssl-no-verify"],
        ),
        (
            "missing-secret",
            format!("[Global]\napi-url = {url}\napi-key = k\n"),
            vec!["cloud-config", "secret-key"],
        ),
    ];
    for (name, text, fragments) in cases {
        let config = rig.write_file(&format!("cloud-config-{name}"), &text);
        let started = Instant::now();
        let mut ccm = Ccm::start(&rig, name, &config, &[]);
        let status = ccm.wait_exit(Duration::from_secs(30));
        let elapsed = started.elapsed();
        let output = ccm.output();
        let status =
            status.unwrap_or_else(|| panic!("{name}: still running after 30 s:\n{output}"));
        assert!(!status.success(), "{name}: must fail");
        let errors: Vec<&str> = output.lines().filter(|l| l.contains("error")).collect();
        assert_eq!(errors.len(), 1, "{name}: one error line:\n{output}");
        assert!(
            errors[0].starts_with("cloudstack-ccm: error: "),
            "{name}: {}",
            errors[0]
        );
        for fragment in fragments {
            assert!(
                errors[0].contains(fragment),
                "{name}: {fragment:?} not in {:?}",
                errors[0]
            );
        }
        println!("  {name} ({elapsed:.1?}): {}", errors[0]);
    }
    assert_eq!(rig.mutating_calls(), 0);
}
