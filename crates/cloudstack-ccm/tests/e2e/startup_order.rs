//! Start-up order: with Nodes waiting to be initialised and a LoadBalancer Service already
//! in the cluster, the real binary initialises every Node before it makes any other
//! CloudStack read (the account view, the orphan count, the static routes), then serves
//! the Service.

use crate::common::{self, TestNode};
use crate::reliability;

use std::collections::BTreeSet;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cloudstack_sim::Scenario;
use fake_apiserver::{Fault, PatchType, Verb};
use reliability::ccm::Ccm;
use reliability::rig::Rig;
use reliability::services::{self, lb_service};
use serde_json::json;

/// Nodes registered before the controller manager starts.
const NODES: usize = 12;
/// What a Node patch costs on a busy API server: the first pass takes a while.
const NODE_PATCH_LATENCY: Duration = Duration::from_millis(150);
/// The CloudStack commands the first pass of Node initialisation may make, start-up's
/// version and scope checks included (the account of the keys is read after it).
const NODE_PASS_COMMANDS: [&str; 5] = [
    "listApis",
    "listCapabilities",
    "listZones",
    "listProjects",
    "listVirtualMachines",
];

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default()
}

fn tainted_nodes(rig: &Rig) -> usize {
    rig.cluster()
        .list("nodes", None)
        .expect("nodes listed")
        .iter()
        .filter(|node| {
            node["spec"]["taints"].as_array().is_some_and(|taints| {
                taints
                    .iter()
                    .any(|t| t["key"] == common::UNINITIALIZED_TAINT)
            })
        })
        .count()
}

#[tokio::test(flavor = "multi_thread")]
async fn nodes_are_initialised_before_any_other_cloudstack_read() {
    let mut scenario = Scenario::small();
    for index in 0..NODES {
        scenario.vms.push(common::vm_spec(
            &format!("order-{index}"),
            &format!("10.1.1.{}", 100 + index),
        ));
    }
    let rig = Rig::start(scenario).await;
    let cluster = rig.cluster();
    let service = services::create(&cluster, lb_service("web", &[("TCP", 80, 30080)], &[]));
    let ready = json!({ "status": { "conditions": [{
        "type": "Ready", "status": "True", "reason": "KubeletReady",
        "lastHeartbeatTime": "2026-01-01T00:00:00Z",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }]}});
    for index in 0..NODES {
        let name = format!("order-{index}");
        let node = TestNode::new(&name).build();
        cluster
            .create(
                "nodes",
                None,
                serde_json::to_value(node).expect("node JSON"),
            )
            .expect("node created");
        cluster
            .patch("nodes", None, &name, PatchType::Merge, &ready, true)
            .expect("node status set");
    }
    cluster.set_faults(vec![Fault {
        verb: Some(Verb::Patch),
        resource: Some("nodes".into()),
        ..Fault::latency(NODE_PATCH_LATENCY)
    }]);

    let config = rig.cloud_config(common::ACCOUNT);
    let mut ccm = Ccm::start(&rig, "startup-order", &config, &[]);
    let deadline = Instant::now() + Duration::from_secs(60);
    // The last instant a Node was still seen waiting: the first pass ended after it.
    let mut still_waiting_at = now_ms();
    while tainted_nodes(&rig) > 0 {
        still_waiting_at = now_ms();
        assert!(
            Instant::now() < deadline && ccm.running(),
            "Nodes not initialised: {}",
            ccm.output()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    cluster.clear_faults();
    while services::get(&cluster, services::name(&service))
        .as_ref()
        .and_then(services::ingress_ip)
        .is_none()
    {
        assert!(
            Instant::now() < deadline && ccm.running(),
            "Service not served after the Nodes: {}",
            ccm.output()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    ccm.kill();

    let log = rig.sim.call_log();
    let during_first_pass: BTreeSet<&str> = log
        .iter()
        .filter(|call| call.at_ms <= still_waiting_at)
        .map(|call| call.command.as_str())
        .collect();
    let others: Vec<&&str> = during_first_pass
        .iter()
        .filter(|command| !NODE_PASS_COMMANDS.contains(command))
        .collect();
    assert!(
        others.is_empty(),
        "reads made while Nodes still waited for initialisation: {others:?} (all: {during_first_pass:?})"
    );
    assert!(
        during_first_pass.contains("listVirtualMachines"),
        "the first pass read the VMs: {during_first_pass:?}"
    );
}
