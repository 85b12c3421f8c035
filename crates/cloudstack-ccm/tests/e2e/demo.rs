//! The `demo` and `plan` subcommands, run as the binary: the demo converges and prints
//! every key step and the summary; the dry run prints a Service's plan against a
//! simulator and an in-process API server without changing anything in either.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use cloudstack_sim::{Scenario, SimServer};
use fake_apiserver::{FakeApiServer, Verb};
use serde_json::json;
use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_cloudstack-ccm");

/// Runs the binary with `args`, failing the test after `limit`.
async fn run_binary(args: &[&str], limit: Duration) -> Output {
    let child = Command::new(BIN)
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(limit, child)
        .await
        .unwrap_or_else(|_| panic!("cloudstack-ccm {args:?} did not finish within {limit:?}"))
        .expect("the binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn demo_converges_and_shows_every_step() {
    let output = run_binary(&["demo"], Duration::from_secs(90)).await;
    let stdout = text(&output.stdout);
    let stderr = text(&output.stderr);
    assert!(
        output.status.success(),
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    let initialised = stdout
        .lines()
        .filter(|line| line.contains("+ Node ") && line.contains(" initialised"))
        .count();
    assert_eq!(initialised, 3, "{stdout}");
    for node in ["worker-1", "worker-2.cluster.example", "worker-3"] {
        let line = stdout
            .lines()
            .find(|line| line.contains(&format!("Node {node} initialised")))
            .unwrap_or_else(|| panic!("no line for {node}:\n{stdout}"));
        assert!(line.contains("external-cloudstack://"), "{line}");
        assert!(line.contains("zone zone1"), "{line}");
    }
    for step in [
        "finalizer added",
        "associated with network net-vr",
        "-tcp-80 created: tcp 80 -> node port",
        "firewall opened",
        "members assigned to",
        "ingress set: 203.0.113.",
        "updated: renamed to",
        "ingress updated: 203.0.113.",
        "(ipMode Proxy)",
        "-tcp-proxy-9090 deleted",
        "released",
        "finalizer removed, Service gone",
        "event DeletedLoadBalancer",
    ] {
        assert!(stdout.contains(step), "missing {step:?}:\n{stdout}");
    }
    let summary = stdout
        .split("== summary ==")
        .nth(1)
        .unwrap_or_else(|| panic!("no summary:\n{stdout}"));
    for row in [
        "phase",
        "1. nodes",
        "2. create",
        "3. change",
        "4. delete",
        "total",
    ] {
        assert!(summary.contains(row), "summary lacks {row}:\n{summary}");
    }
    let total: Vec<&str> = summary
        .lines()
        .find(|line| line.starts_with("total"))
        .expect("a total row")
        .split_whitespace()
        .collect();
    let mutating: u64 = total[3].parse().expect("mutating calls");
    let jobs: u64 = total[4].parse().expect("async jobs");
    assert!(mutating > 0 && jobs > 0, "{summary}");
    let failed: u64 = total
        .get(5)
        .unwrap_or_else(|| panic!("no failed-calls column:\n{summary}"))
        .parse()
        .expect("failed calls");
    assert_eq!(failed, 0, "no CloudStack call fails:\n{stdout}");
    assert!(stdout.contains("OK: converged in"), "{stdout}");
    assert!(
        !stdout.contains('\x1b'),
        "no escape codes without a terminal:\n{stdout}"
    );
}

/// A cloud-config for the account `alice` of `sim`.
fn cloud_config(sim: &SimServer) -> String {
    let (key, secret) = sim.credentials("alice").expect("alice exists");
    format!(
        "[Global]\napi-url = {}\napi-key = {}\nsecret-key = {}\n",
        sim.api_url(),
        key.expose(),
        secret.expose()
    )
}

fn write(dir: &Path, name: &str, content: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, content).expect("writing a temporary file");
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn plan_prints_the_steps_and_changes_nothing() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let sim = SimServer::start(Scenario::small())
        .await
        .expect("simulator starts");
    let apiserver = FakeApiServer::start().await.expect("API server starts");
    let vms: Vec<(String, String)> = sim.with_state(|state| {
        state
            .vms
            .iter()
            .map(|vm| (vm.name.clone(), vm.id.clone()))
            .collect()
    });
    for (name, id) in &vms {
        let node = json!({
            "metadata": { "name": name },
            "spec": { "providerID": format!("external-cloudstack://{id}") },
        });
        apiserver
            .create("nodes", None, node)
            .expect("creating a Node");
    }
    let service = json!({
        "metadata": { "name": "web", "namespace": "default" },
        "spec": { "type": "LoadBalancer", "ports": [
            { "name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP" },
            { "name": "https", "port": 443, "targetPort": 8443, "protocol": "TCP" },
        ]},
    });
    let created = apiserver
        .create("services", Some("default"), service)
        .expect("creating the Service");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = write(dir.path(), "cloud-config", &cloud_config(&sim));
    let kubeconfig = write(dir.path(), "kubeconfig", &apiserver.kubeconfig_yaml());
    sim.reset_counts();
    apiserver.reset_request_counts();

    let output = run_binary(
        &[
            "--cloud-config",
            &config,
            "--kubeconfig",
            &kubeconfig,
            "plan",
        ],
        Duration::from_secs(30),
    )
    .await;
    let stdout = text(&output.stdout);
    assert!(
        output.status.success(),
        "stdout:\n{stdout}\nstderr:\n{}",
        text(&output.stderr)
    );
    let lb_name = cloudstack_ccm::cloud::loadbalancer::vocabulary::default_lb_name(
        created["metadata"]["uid"].as_str().expect("a UID"),
    );
    for step in [
        "Service default/web: ".to_string(),
        "associate a new IP with network".to_string(),
        format!("create rule {lb_name}-tcp-80"),
        format!("create rule {lb_name}-tcp-443"),
        format!("to rule {lb_name}-tcp-80"),
        "1 Service(s): 1 to change, 0 failed to plan. Dry run: nothing was changed.".to_string(),
    ] {
        assert!(stdout.contains(&step), "missing {step:?}:\n{stdout}");
    }
    for (_, id) in &vms {
        assert!(
            stdout.contains(id.as_str()),
            "VM {id} is not a member in the plan:\n{stdout}"
        );
    }

    assert!(
        sim.call_counts().values().sum::<u64>() > 0,
        "the dry run observed CloudStack"
    );
    assert_eq!(
        sim.mutating_calls(),
        0,
        "no mutating call: {:?}",
        sim.call_counts()
    );
    for verb in [Verb::Create, Verb::Update, Verb::Patch, Verb::Delete] {
        for resource in [
            "services",
            "services/status",
            "nodes",
            "events.events.k8s.io",
            "events",
        ] {
            assert_eq!(
                apiserver.request_count(verb, resource),
                0,
                "{verb:?} {resource}"
            );
        }
    }
    let after = apiserver
        .get("services", Some("default"), "web")
        .expect("the Service");
    assert_eq!(
        after["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
}

#[test]
fn example_cloud_configs_parse() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let production =
        cloudstack_ccm::config::CloudConfig::load(Some(&examples.join("cloud-config")), |_| None)
            .expect("examples/cloud-config parses");
    assert_eq!(production.api_url, "https://cloud.example.com/client/api");
    let sim =
        cloudstack_ccm::config::CloudConfig::load(Some(&examples.join("cloud-config-sim")), |_| {
            None
        })
        .expect("examples/cloud-config-sim parses");
    assert_eq!(sim.api_url, "http://127.0.0.1:8080/client/api");
    assert_eq!(sim.zone.as_deref(), Some(cloudstack_sim::SMALL_ZONE));
}
