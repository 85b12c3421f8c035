//! `cloudstack-ccm check` (the real binary) against the simulator and the fake API server:
//! the verdict and the hint for the default User role, CloudStack Kubernetes Service's
//! project keys, a server hiding its version, ROUTED, shared, internal-LB, NSX and Netris
//! networks, missing RBAC and a Lease held by another controller; a golden test of the
//! human output for one world.

use std::path::Path;
use std::process::Command;

use crate::common::{self, TestNode};
use crate::reliability::ccm::BINARY;
use crate::reliability::rig::Rig;
use cloudstack_sim::{CKS_ACCOUNT, SMALL_PROJECT_ID, Scenario};
use serde_json::Value;

/// Runs `check` with `cloud_config` (and the rig's kubeconfig unless `kube` is false);
/// returns the exit status and the JSON report (or the text with `json` false).
fn run_check(rig: &Rig, cloud_config: &Path, extra: &[&str], json: bool) -> (i32, String) {
    let mut command = Command::new(BINARY);
    command
        .arg("check")
        .arg(format!("--cloud-config={}", cloud_config.display()))
        .arg(format!("--kubeconfig={}", rig.kubeconfig.display()))
        .arg("--color=never")
        .args(extra);
    if json {
        command.arg("--output=json");
    }
    let output = command.output().expect("cloudstack-ccm check runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    (output.status.code().unwrap_or(-1), stdout)
}

/// Registers `names` as Nodes.
fn nodes(rig: &Rig, names: &[&str]) {
    for name in names {
        let node = serde_json::to_value(TestNode::new(name).build()).expect("a Node");
        rig.cluster()
            .create("nodes", None, node)
            .expect("Node created");
    }
}

/// The checks of a JSON report, as (group, name) → check.
fn check_named<'a>(report: &'a Value, name: &str) -> Option<&'a Value> {
    report["groups"]
        .as_array()?
        .iter()
        .flat_map(|g| g["checks"].as_array().into_iter().flatten())
        .find(|c| c["name"].as_str().is_some_and(|n| n.starts_with(name)))
}

/// The JSON report of `check`, and its exit status.
fn json_report(rig: &Rig, cloud_config: &Path, extra: &[&str]) -> (i32, Value) {
    let (code, json) = run_check(rig, cloud_config, extra, true);
    let report = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
    (code, report)
}

/// The status of the check whose name starts with `name`.
fn status<'a>(report: &'a Value, name: &str) -> &'a str {
    check_named(report, name)
        .and_then(|c| c["status"].as_str())
        .unwrap_or_else(|| panic!("no check {name}: {report:#}"))
}

/// The verdict of the feature row `feature`.
fn feature<'a>(report: &'a Value, feature: &str) -> &'a Value {
    report["features"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["feature"] == feature))
        .unwrap_or_else(|| panic!("no feature {feature}: {report:#}"))
}

/// The total of CloudStack calls of a report.
fn calls(report: &Value) -> u64 {
    report["cloudstack_calls"]
        .as_object()
        .map(|calls| calls.values().filter_map(Value::as_u64).sum())
        .unwrap_or_default()
}

/// Replaces what changes between runs (ports, ids, counts of free addresses) in `text`.
fn normalised(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let mut line = line.to_string();
        if let Some(at) = line.find("http://127.0.0.1:") {
            let end = line[at + 17..]
                .find(|c: char| !c.is_ascii_digit())
                .map_or(line.len(), |e| at + 17 + e);
            line.replace_range(at..end, "http://127.0.0.1:PORT");
        }
        while let Some(at) = line.find(" (").filter(|at| {
            line[at + 2..]
                .chars()
                .take(36)
                .filter(|c| *c == '-')
                .count()
                == 4
        }) {
            line.replace_range(at..at + 2 + 36 + 1, " (ID)");
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_user_role_on_an_isolated_network_is_ready_and_the_report_reads_as_the_golden_one()
 {
    let rig = Rig::start(Scenario::small()).await;
    nodes(&rig, &["node-1", "node-2"]);
    let cloud_config = rig.cloud_config(common::ACCOUNT);
    let started = std::time::Instant::now();
    let (code, text) = run_check(&rig, &cloud_config, &[], false);
    let took = started.elapsed();
    assert_eq!(code, 0, "{text}");
    let golden_path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/e2e/fixtures/check-small.txt"
    );
    let golden = std::fs::read_to_string(golden_path).unwrap_or_default();
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(golden_path, normalised(&text)).expect("golden written");
    } else {
        assert_eq!(
            normalised(&text),
            golden,
            "the human report changed; UPDATE_GOLDEN=1 rewrites {golden_path}"
        );
    }
    let (code, report) = json_report(&rig, &cloud_config, &[]);
    assert_eq!((code, report["verdict"].as_str()), (0, Some("ready")));
    assert!(calls(&report) < 20, "{}", report["cloudstack_calls"]);
    println!(
        "check against the small world: {} CloudStack calls, {took:?}",
        calls(&report)
    );
    let mutating: Vec<String> = rig
        .sim
        .call_log()
        .into_iter()
        .map(|c| c.command)
        .filter(|c| !(c.starts_with("list") || c.starts_with("query")))
        .collect();
    assert!(mutating.is_empty(), "read-only: {mutating:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cks_project_keys_work_with_warnings_naming_what_they_take_away() {
    let rig = Rig::start(Scenario::cks_project()).await;
    nodes(&rig, &["pnode-1", "pnode-2"]);
    let cloud_config =
        rig.cloud_config_extra(CKS_ACCOUNT, &format!("project-id = {SMALL_PROJECT_ID}\n"));
    let (code, report) = json_report(&rig, &cloud_config, &[]);
    assert_eq!(code, 1, "{report:#}");
    assert_eq!(status(&report, "endpoint and keys"), "ok");
    assert_eq!(status(&report, "what the keys may call"), "warn");
    assert_eq!(status(&report, "version"), "ok", "read from an XML reply");
    assert!(
        check_named(&report, "version").unwrap()["detail"]
            .as_str()
            .unwrap()
            .contains("XML reply")
    );
    assert_eq!(status(&report, "project-id"), "warn", "cannot be verified");
    assert_eq!(status(&report, "network proj-net"), "ok");
    let tags = feature(
        &report,
        "ownership tags on the objects the controller creates",
    );
    assert_eq!(tags["verdict"], "degraded", "{tags}");
    assert!(tags["fix"].as_str().unwrap().contains("listTags"), "{tags}");
    let tls = feature(&report, "TLS termination");
    assert_eq!(tls["verdict"], "degraded");
    assert!(
        tls["reason"].as_str().unwrap().contains("listSslCerts"),
        "{tls}"
    );
    assert!(calls(&report) < 20, "{}", report["cloudstack_calls"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_hiding_its_version_is_a_warning_with_the_fix() {
    let mut scenario = Scenario::small();
    scenario.settings.expose_version_in_capabilities = false;
    scenario.settings.expose_version_in_xml = false;
    let rig = Rig::start(scenario).await;
    nodes(&rig, &["node-1"]);
    let (code, report) = json_report(&rig, &rig.cloud_config(common::ACCOUNT), &[]);
    assert_eq!(code, 1);
    let version = check_named(&report, "version").unwrap();
    assert_eq!(version["status"], "warn");
    assert!(
        version["detail"]
            .as_str()
            .unwrap()
            .contains("from listApis"),
        "{version}"
    );
    assert!(
        version["hint"].as_str().unwrap().contains("set version"),
        "{version}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_network_kind_gets_the_controllers_verdict() {
    let rig = Rig::start(Scenario::network_kinds()).await;
    let vms = [
        "vm-routed",
        "vm-tier-routed",
        "vm-shared",
        "vm-nsx",
        "vm-netris",
        "vm-ilb",
        "node-1",
    ];
    nodes(&rig, &vms);
    let (code, report) = json_report(&rig, &rig.cloud_config(common::ACCOUNT), &[]);
    assert_eq!(code, 1, "some networks refuse Services: {report:#}");
    let line = |network: &str| check_named(&report, &format!("network {network}")).unwrap();
    let cases = [
        ("net-routed", "ROUTED", "warn", "routing firewall companion"),
        (
            "tier-routed",
            "ROUTED",
            "warn",
            "routing firewall companion",
        ),
        ("net-shared", "shared", "warn", "Services are refused"),
        ("net-nsx", "NSX", "ok", "public load balancers served"),
        ("tier-netris", "Netris", "ok", "load balancers served"),
        (
            "tier-ilb",
            "internal-LB tier",
            "warn",
            "internal load balancers only",
        ),
        ("net-vr", "isolated", "ok", "public load balancers served"),
    ];
    for (network, kind, expected, says) in cases {
        let check = line(network);
        let detail = check["detail"].as_str().unwrap();
        assert_eq!(check["status"], expected, "{network}: {check}");
        assert!(detail.contains(&format!("({kind},")), "{network}: {detail}");
        assert!(detail.contains(says), "{network}: {detail}");
    }
    assert!(
        line("net-shared")["hint"]
            .as_str()
            .unwrap()
            .contains("loadBalancerClass"),
        "the fix is named"
    );
    assert_eq!(
        feature(&report, "internal load balancers")["verdict"],
        "works"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_account_without_rbac_will_not_work_and_the_hint_names_the_manifest() {
    let rig = Rig::start_with(
        Scenario::small(),
        fake_apiserver::ServerOptions::with_rbac(),
    )
    .await;
    nodes(&rig, &["node-1"]);
    let as_user = "--as=system:serviceaccount:kube-system:cloud-controller-manager";
    let (code, report) = json_report(&rig, &rig.cloud_config(common::ACCOUNT), &[as_user]);
    assert_eq!(code, 2, "{report:#}");
    let nodes_list = check_named(&report, "RBAC list nodes").expect("a missing permission");
    assert_eq!(nodes_list["status"], "fail");
    assert!(
        nodes_list["hint"]
            .as_str()
            .unwrap()
            .contains("deploy/rbac.yaml")
    );
    assert_eq!(report["verdict"], "will not work");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_held_by_the_go_provider_is_a_warning() {
    let rig = Rig::start(Scenario::small()).await;
    nodes(&rig, &["node-1"]);
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string();
    let lease = serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": { "name": "cloud-controller-manager", "namespace": "kube-system" },
        "spec": {
            "holderIdentity": "go-ccm-7d9f_1c2e",
            "leaseDurationSeconds": 15,
            "acquireTime": now,
            "renewTime": now,
        },
    });
    rig.cluster()
        .create("leases", Some("kube-system"), lease)
        .expect("Lease created");
    let (code, report) = json_report(&rig, &rig.cloud_config(common::ACCOUNT), &[]);
    assert_eq!(code, 1);
    let lease = check_named(&report, "leader Lease").unwrap();
    assert_eq!(lease["status"], "warn");
    assert!(
        lease["detail"]
            .as_str()
            .unwrap()
            .contains("go-ccm-7d9f_1c2e")
    );
    assert!(
        lease["hint"]
            .as_str()
            .unwrap()
            .contains("scale the old Deployment")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_keys_will_not_work_and_say_so() {
    let rig = Rig::start(Scenario::small()).await;
    let cloud_config = rig.cloud_config_with("wrong", "AkUnknown0123456789", "SkWrong0123456789");
    let (code, report) = json_report(&rig, &cloud_config, &[]);
    assert_eq!(code, 2);
    let keys = check_named(&report, "endpoint and keys").unwrap();
    assert_eq!(keys["status"], "fail");
    assert!(keys["hint"].as_str().unwrap().contains("api-key"), "{keys}");
}
