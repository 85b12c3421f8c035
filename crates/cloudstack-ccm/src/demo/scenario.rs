//! What the demo plays with: the simulated cloud (one zone, an isolated network and a VPC
//! tier, three VMs, a public IP pool), the three Nodes the kubelets would register, and the
//! LoadBalancer Service with its change.

use std::collections::BTreeMap;

use cloudstack_sim::{NicSpec, Scenario, VmSpec};
use serde_json::{Value, json};

use crate::cloud::loadbalancer::annotations::PROXY_PROTOCOL;
use crate::controllers::node_vocabulary::UNINITIALIZED_TAINT;

/// The CloudStack account whose keys the controllers use.
pub const ACCOUNT: &str = "alice";
/// Namespace of the demo Service.
pub const NAMESPACE: &str = "default";
/// Name of the demo Service.
pub(crate) const SERVICE: &str = "web";
/// How long each simulated async job takes.
pub(crate) const JOB_DURATION_MS: u64 = 300;
/// Latency the simulator adds to every API call.
pub(crate) const CALL_LATENCY_MS: u64 = 4;

/// A Node and the VM behind it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DemoNode {
    /// The Node's name, as the kubelet registers it.
    pub node: &'static str,
    /// The VM's name in CloudStack.
    pub vm: &'static str,
    /// The VM's address on the isolated network.
    pub ip: &'static str,
    /// The VM's service offering.
    pub offering: &'static str,
}

/// The three nodes: a plain name, an FQDN (matched on its first label) and a VM whose
/// name differs from the Node's in case only.
pub const NODES: [DemoNode; 3] = [
    DemoNode {
        node: "worker-1",
        vm: "worker-1",
        ip: "10.1.1.11",
        offering: "small",
    },
    DemoNode {
        node: "worker-2.cluster.example",
        vm: "worker-2",
        ip: "10.1.1.12",
        offering: "small",
    },
    DemoNode {
        node: "worker-3",
        vm: "Worker-3",
        ip: "10.1.1.13",
        offering: "large",
    },
];

/// The simulator's small cloud with the demo VMs, slow-ish async jobs and the version of
/// the default scenario.
pub fn cloud() -> Scenario {
    let mut scenario = Scenario::small();
    scenario.settings.job_duration_ms = JOB_DURATION_MS;
    scenario.vms = NODES
        .iter()
        .map(|node| VmSpec {
            id: None,
            name: node.vm.to_string(),
            state: "Running".to_string(),
            zone: cloudstack_sim::SMALL_ZONE.to_string(),
            offering: node.offering.to_string(),
            nics: vec![NicSpec {
                network: cloudstack_sim::SMALL_NETWORK.to_string(),
                ipv4: node.ip.to_string(),
                ipv6: None,
                isdefault: true,
            }],
            static_nat_ip: None,
            account: Some(ACCOUNT.to_string()),
            project: None,
        })
        .collect();
    scenario
}

/// A Node as the kubelet registers it with `--cloud-provider=external`: no providerID,
/// the `uninitialized` taint.
pub(crate) fn node_manifest(node: &DemoNode) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.node,
            "labels": { "kubernetes.io/hostname": node.node, "kubernetes.io/os": "linux" },
        },
        "spec": {
            "taints": [{ "key": UNINITIALIZED_TAINT, "value": "true", "effect": "NoSchedule" }],
        },
    })
}

/// The LoadBalancer Service with two TCP ports.
pub(crate) fn service_manifest() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": { "name": SERVICE, "namespace": NAMESPACE },
        "spec": {
            "type": "LoadBalancer",
            "selector": { "app": SERVICE },
            "ports": [
                { "name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP" },
                { "name": "https", "port": 443, "targetPort": 8443, "protocol": "TCP" },
            ],
        },
    })
}

/// The change: turn on the PROXY protocol and add a third port. `current_ports` are the
/// Service's ports as stored (with their node ports, which are kept).
pub(crate) fn service_change(current_ports: &Value) -> Value {
    let mut ports = current_ports.as_array().cloned().unwrap_or_default();
    ports.push(json!({ "name": "metrics", "port": 9090, "targetPort": 9090, "protocol": "TCP" }));
    json!({
        "metadata": { "annotations": BTreeMap::from([(PROXY_PROTOCOL.key, "true")]) },
        "spec": { "ports": ports },
    })
}
