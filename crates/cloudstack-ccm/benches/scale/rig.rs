//! One benchmark run's world: the CloudStack simulator and the fake Kubernetes API server
//! in this process, the config files the controller manager reads, and helpers to create
//! Nodes and Services in the store and wait (always with a deadline) for the controllers.

use crate::ccm::{Ccm, Flags, write_cloud_config};
use crate::cloud::{ACCOUNT, CloudModel, vm_name};
use anyhow::Context as _;
use cloudstack_sim::SimServer;
use fake_apiserver::{FakeApiServer, Verb};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Taint the kubelet puts on a Node until a cloud controller initialises it.
pub const UNINITIALIZED_TAINT: &str = "node.cloudprovider.kubernetes.io/uninitialized";
/// Namespace of the benchmark's Services.
pub const NAMESPACE: &str = "default";

/// Simulator + fake API server + config files.
pub struct Rig {
    /// The CloudStack simulator (counters, call log, jobs).
    pub sim: SimServer,
    /// The fake Kubernetes API server (store access).
    pub api: FakeApiServer,
    dir: tempfile::TempDir,
    cloud_config: PathBuf,
    kubeconfig: PathBuf,
}

impl Rig {
    /// Starts the simulator with `model` and an empty fake API server.
    pub async fn start(model: CloudModel) -> anyhow::Result<Rig> {
        Self::start_with(model, fake_apiserver::ServerOptions::default()).await
    }

    /// [`Rig::start`] with the fake API server started with `options`.
    pub async fn start_with(
        model: CloudModel,
        options: fake_apiserver::ServerOptions,
    ) -> anyhow::Result<Rig> {
        let sim = SimServer::start(model.scenario())
            .await
            .context("starting the CloudStack simulator")?;
        let api = FakeApiServer::start_with(options)
            .await
            .context("starting the fake API server")?;
        let dir = tempfile::Builder::new()
            .prefix("ccm-bench-")
            .tempdir()
            .context("creating a temporary directory")?;
        let (api_key, secret_key) = sim
            .credentials(ACCOUNT)
            .ok_or_else(|| anyhow::anyhow!("the scenario has no account {ACCOUNT}"))?;
        let cloud_config = write_cloud_config(
            dir.path(),
            &sim.api_url(),
            api_key.expose(),
            secret_key.expose(),
        )?;
        let kubeconfig = dir.path().join("kubeconfig");
        api.write_kubeconfig(&kubeconfig)?;
        Ok(Rig {
            sim,
            api,
            dir,
            cloud_config,
            kubeconfig,
        })
    }

    /// Starts the controller manager and waits until it watches `watched` (e.g. `nodes`,
    /// `services`), i.e. its controllers are running.
    pub async fn start_ccm(&self, flags: &Flags, watched: &[&str]) -> anyhow::Result<Ccm> {
        let mut ccm = Ccm::spawn(self.dir.path(), &self.cloud_config, &self.kubeconfig, flags)?;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            ccm.check_alive()?;
            let watching = watched
                .iter()
                .all(|r| self.api.request_count(Verb::Watch, r) > 0);
            if watching {
                return Ok(ccm);
            }
            if Instant::now() > deadline {
                anyhow::bail!(
                    "the controller manager did not watch {watched:?} within 30 s; last log lines:\n{}",
                    ccm.log_tail(20)
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until the simulator has had no call for `quiet` (at most `limit`).
    pub async fn wait_for_quiet_cloudstack(&self, quiet: Duration, limit: Duration) {
        let deadline = Instant::now() + limit;
        let mut last = self.sim.call_log().len();
        let mut since = Instant::now();
        while Instant::now() < deadline && since.elapsed() < quiet {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let now = self.sim.call_log().len();
            if now != last {
                last = now;
                since = Instant::now();
            }
        }
    }

    /// Creates Nodes `node-<i>` for `indexes` as the kubelet registers them (uninitialised
    /// taint, Ready), or already initialised (providerID, no taint) when `initialised`.
    pub fn create_nodes(
        &self,
        indexes: impl IntoIterator<Item = usize>,
        initialised: bool,
    ) -> anyhow::Result<()> {
        let ids: BTreeMap<String, String> = if initialised {
            self.sim.with_state(|state| {
                state
                    .vms
                    .iter()
                    .map(|vm| (vm.name.clone(), vm.id.clone()))
                    .collect()
            })
        } else {
            BTreeMap::new()
        };
        for index in indexes {
            let name = vm_name(index);
            let node = match ids.get(&name) {
                Some(id) => node_object(index, &name, Some(id)),
                None if initialised => anyhow::bail!("no VM named {name} for an initialised node"),
                None => node_object(index, &name, None),
            };
            self.api
                .create("nodes", None, node)
                .with_context(|| format!("creating node {name}"))?;
        }
        Ok(())
    }

    /// Creates LoadBalancer Service `svc-<i>` with `ports` ports (80, 81, …).
    pub fn create_service(&self, index: usize, ports: usize) -> anyhow::Result<()> {
        let name = service_name(index);
        self.api
            .create("services", Some(NAMESPACE), service_object(&name, ports))
            .with_context(|| format!("creating service {name}"))?;
        Ok(())
    }

    /// Every object of `resource` in the store.
    pub fn list(&self, resource: &str) -> anyhow::Result<Vec<Value>> {
        Ok(self.api.list(resource, None)?)
    }
}

/// `svc-<index>`.
pub fn service_name(index: usize) -> String {
    format!("svc-{index}")
}

/// A Node as the kubelet registers it (or already initialised with `provider`).
/// A Node the size a real kubelet and control plane write (about 7 KB of JSON, like a
/// worker of a CKS cluster): 15 labels, the usual annotations, managedFields of the kubelet
/// and of the cloud controller, five conditions, ten container images, capacity,
/// allocatable, addresses and nodeInfo. The benchmark's memory figures hold for real
/// clusters only with objects this heavy.
pub fn node_object(index: usize, name: &str, vm_id: Option<&str>) -> Value {
    // A /24 of 10.0.0.0/8 per Node (`--cluster-cidr` large enough for 65536 Nodes).
    let pod_cidr = format!("10.{}.{}.0/24", index / 256 % 256, index % 256);
    let mut spec = json!({ "podCIDR": pod_cidr, "podCIDRs": [pod_cidr] });
    match vm_id {
        Some(id) => spec["providerID"] = json!(format!("external-cloudstack://{id}")),
        None => {
            spec["taints"] =
                json!([{ "key": UNINITIALIZED_TAINT, "value": "true", "effect": "NoSchedule" }])
        }
    }
    let time = "2026-01-01T00:00:00Z";
    let condition = |kind: &str, status: &str, reason: &str, message: &str| {
        json!({ "type": kind, "status": status, "reason": reason, "message": message,
                "lastHeartbeatTime": time, "lastTransitionTime": time })
    };
    let images: Vec<Value> = [
        ("registry.k8s.io/kube-proxy", "v1.33.4", 30_000_000),
        ("docker.io/calico/node", "v3.30.2", 150_000_000),
        ("docker.io/calico/cni", "v3.30.2", 90_000_000),
        ("registry.k8s.io/coredns/coredns", "v1.12.0", 20_000_000),
        ("registry.k8s.io/pause", "3.10", 320_000),
        ("quay.io/prometheus/node-exporter", "v1.9.1", 12_000_000),
        ("registry.k8s.io/ingress-nginx/controller", "v1.13.0", 110_000_000),
        ("docker.io/library/nginx", "1.29.1", 70_000_000),
        ("registry.k8s.io/metrics-server/metrics-server", "v0.8.0", 19_000_000),
        ("docker.io/grafana/promtail", "3.5.3", 80_000_000),
    ]
    .iter()
    .map(|(image, tag, size)| {
        json!({
            "names": [
                format!("{image}@sha256:{}", "4f3c1e0d9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d"),
                format!("{image}:{tag}"),
            ],
            "sizeBytes": size,
        })
    })
    .collect();
    let capacity = json!({
        "cpu": "4", "ephemeral-storage": "51287520Ki", "hugepages-1Gi": "0",
        "hugepages-2Mi": "0", "memory": "8148000Ki", "pods": "110",
    });
    let allocatable = json!({
        "cpu": "3800m", "ephemeral-storage": "47266578354", "hugepages-1Gi": "0",
        "hugepages-2Mi": "0", "memory": "7533600Ki", "pods": "110",
    });
    let mut kubelet_fields = json!({
        "f:metadata": { "f:annotations": { ".": {}, "f:node.alpha.kubernetes.io/ttl": {},
            "f:volumes.kubernetes.io/controller-managed-attach-detach": {} },
          "f:labels": { ".": {}, "f:beta.kubernetes.io/arch": {}, "f:beta.kubernetes.io/os": {},
            "f:kubernetes.io/arch": {}, "f:kubernetes.io/hostname": {}, "f:kubernetes.io/os": {} } },
        "f:spec": { "f:podCIDR": {}, "f:podCIDRs": { ".": {} } },
        "f:status": {
            "f:allocatable": { "f:cpu": {}, "f:ephemeral-storage": {}, "f:memory": {}, "f:pods": {} },
            "f:capacity": { "f:cpu": {}, "f:ephemeral-storage": {}, "f:memory": {}, "f:pods": {} },
            "f:conditions": { "k:{\"type\":\"DiskPressure\"}": { "f:lastHeartbeatTime": {}, "f:message": {}, "f:reason": {}, "f:status": {} },
              "k:{\"type\":\"MemoryPressure\"}": { "f:lastHeartbeatTime": {}, "f:message": {}, "f:reason": {}, "f:status": {} },
              "k:{\"type\":\"PIDPressure\"}": { "f:lastHeartbeatTime": {}, "f:message": {}, "f:reason": {}, "f:status": {} },
              "k:{\"type\":\"Ready\"}": { "f:lastHeartbeatTime": {}, "f:lastTransitionTime": {}, "f:message": {}, "f:reason": {}, "f:status": {} } },
            "f:daemonEndpoints": { "f:kubeletEndpoint": { "f:Port": {} } },
            "f:images": {}, "f:nodeInfo": { "f:architecture": {}, "f:bootID": {}, "f:containerRuntimeVersion": {},
              "f:kernelVersion": {}, "f:kubeProxyVersion": {}, "f:kubeletVersion": {}, "f:machineID": {},
              "f:operatingSystem": {}, "f:osImage": {}, "f:systemUUID": {} },
        },
    });
    kubelet_fields["f:spec"]["f:podCIDRs"][format!("v:\"{pod_cidr}\"")] = json!({});
    let controller_fields = json!({
        "f:metadata": { "f:labels": { "f:node.kubernetes.io/instance-type": {},
            "f:topology.kubernetes.io/region": {}, "f:topology.kubernetes.io/zone": {} } },
        "f:spec": { "f:providerID": {} },
        "f:status": { "f:addresses": { ".": {}, "k:{\"type\":\"Hostname\"}": { ".": {}, "f:address": {}, "f:type": {} },
            "k:{\"type\":\"InternalIP\"}": { ".": {}, "f:address": {}, "f:type": {} } } },
    });
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "Medium Instance",
                "beta.kubernetes.io/instance-type": "Medium Instance",
                "topology.kubernetes.io/zone": "zone1", "failure-domain.beta.kubernetes.io/zone": "zone1",
                "topology.kubernetes.io/region": "zone1", "failure-domain.beta.kubernetes.io/region": "zone1",
                "node-role.kubernetes.io/worker": "",
                "cluster.x-k8s.io/cluster-name": "bench",
                "cks.cloudstack.apache.org/node-pool": "workers",
                "team": "platform",
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "kubeadm.alpha.kubernetes.io/cri-socket": "unix:///run/containerd/containerd.sock",
                "projectcalico.org/IPv4Address": "10.1.0.10/16",
                "projectcalico.org/IPv4IPIPTunnelAddr": "192.168.12.0",
            },
            "managedFields": [
                { "manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": time,
                  "fieldsType": "FieldsV1", "fieldsV1": kubelet_fields },
                { "manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": time,
                  "fieldsType": "FieldsV1", "fieldsV1": { "f:status": { "f:conditions": {}, "f:images": {} } },
                  "subresource": "status" },
                { "manager": "cloudstack-ccm", "operation": "Update", "apiVersion": "v1", "time": time,
                  "fieldsType": "FieldsV1", "fieldsV1": controller_fields },
                { "manager": "calico-node", "operation": "Update", "apiVersion": "v1", "time": time,
                  "fieldsType": "FieldsV1", "fieldsV1": { "f:metadata": { "f:annotations": {
                      "f:projectcalico.org/IPv4Address": {}, "f:projectcalico.org/IPv4IPIPTunnelAddr": {} } } } },
            ],
        },
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": [
                condition("NetworkUnavailable", "False", "CalicoIsUp", "Calico is running on this node"),
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ],
            "daemonEndpoints": { "kubeletEndpoint": { "Port": 10250 } },
            "images": images,
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": "0b6f7a52-3a8e-4c1e-9d61-2f3b8f0d4c11",
                "containerRuntimeVersion": "containerd://1.7.27",
                "kernelVersion": "6.1.0-37-amd64",
                "kubeProxyVersion": "v1.33.4",
                "kubeletVersion": "v1.33.4",
                "machineID": "6c1d4f6e2b7a4f0c9e3d8a5b1c2d3e4f",
                "operatingSystem": "linux",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "systemUUID": "7e1f3c2a-9b4d-4e6f-8a1c-2d3e4f5a6b7c",
            },
        },
    })
}

/// A LoadBalancer Service with `ports` TCP ports.
fn service_object(name: &str, ports: usize) -> Value {
    let ports: Vec<Value> = (0..ports)
        .map(|i| json!({ "name": format!("p{i}"), "protocol": "TCP", "port": 80 + i, "targetPort": 8080 + i }))
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": { "name": name, "namespace": NAMESPACE },
        "spec": { "type": "LoadBalancer", "selector": { "app": name }, "ports": ports },
    })
}

/// True when the Node has a providerID and no uninitialised taint.
pub fn node_initialised(node: &Value) -> bool {
    let spec = &node["spec"];
    let has_id = spec["providerID"].as_str().is_some_and(|id| !id.is_empty());
    let tainted = spec["taints"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["key"] == UNINITIALIZED_TAINT));
    has_id && !tainted
}

/// The first ingress IP of a Service, if set.
pub fn ingress_ip(service: &Value) -> Option<&str> {
    service["status"]["loadBalancer"]["ingress"][0]["ip"].as_str()
}

/// Polls `probe` every `every` until it returns `Some` or `timeout` passes (then `None`).
pub async fn poll_until<T, F, Fut>(timeout: Duration, every: Duration, mut probe: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(found) = probe().await {
            return Some(found);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(every).await;
    }
}
