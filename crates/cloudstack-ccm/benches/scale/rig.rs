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
        let sim = SimServer::start(model.scenario())
            .await
            .context("starting the CloudStack simulator")?;
        let api = FakeApiServer::start()
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
                Some(id) => node_object(&name, Some(id)),
                None if initialised => anyhow::bail!("no VM named {name} for an initialised node"),
                None => node_object(&name, None),
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
fn node_object(name: &str, vm_id: Option<&str>) -> Value {
    let mut spec = json!({});
    match vm_id {
        Some(id) => spec["providerID"] = json!(format!("external-cloudstack://{id}")),
        None => {
            spec["taints"] =
                json!([{ "key": UNINITIALIZED_TAINT, "value": "true", "effect": "NoSchedule" }])
        }
    }
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": { "name": name, "labels": { "kubernetes.io/hostname": name } },
        "spec": spec,
        "status": { "conditions": [{
            "type": "Ready", "status": "True", "reason": "KubeletReady",
            "lastHeartbeatTime": "2026-01-01T00:00:00Z",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }]},
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
