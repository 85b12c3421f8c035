//! The parts that outlive the controller manager: the CloudStack simulator (saving its
//! state to a file after every change), the fake Kubernetes API server, a kubeconfig and
//! cloud-config files in a temporary directory, and Nodes for the simulator's VMs.

use std::path::PathBuf;

use cloudstack_sim::{Scenario, SimOptions, SimServer};
use fake_apiserver::{Cluster, FakeApiServer, PatchType};
use serde_json::json;

/// A simulator and a fake API server on 127.0.0.1, with their files.
pub struct Rig {
    /// The CloudStack simulator.
    pub sim: SimServer,
    /// The fake Kubernetes API server.
    pub api: FakeApiServer,
    /// Kubeconfig of the fake API server.
    pub kubeconfig: PathBuf,
    dir: tempfile::TempDir,
}

impl Rig {
    /// Starts `scenario` (with a state file) and an empty fake cluster.
    pub async fn start(scenario: Scenario) -> Rig {
        Self::start_with(scenario, fake_apiserver::ServerOptions::default()).await
    }

    /// [`Rig::start`] with a fake cluster started with `options` (RBAC enforced, …); the
    /// kubeconfig is the admin's.
    pub async fn start_with(scenario: Scenario, options: fake_apiserver::ServerOptions) -> Rig {
        crate::common::init();
        let dir = tempfile::tempdir().expect("temporary directory");
        let state_file = dir.path().join("sim-state.json");
        let sim = SimServer::start_with(
            scenario,
            SimOptions {
                state_file: Some(state_file),
                ..SimOptions::default()
            },
        )
        .await
        .expect("simulator starts");
        let api = FakeApiServer::start_with(options)
            .await
            .expect("fake API server starts");
        let kubeconfig = dir.path().join("kubeconfig");
        api.write_kubeconfig(&kubeconfig)
            .expect("kubeconfig written");
        Rig {
            sim,
            api,
            kubeconfig,
            dir,
        }
    }

    /// The fake cluster's store, faults and counters.
    pub fn cluster(&self) -> Cluster {
        self.api.cluster()
    }

    /// Writes `text` to a file named `name` in the rig's directory; returns its path.
    pub fn write_file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).expect("file written");
        path
    }

    /// A path in the rig's directory (for logs).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A cloud-config for `account` of the scenario.
    pub fn cloud_config(&self, account: &str) -> PathBuf {
        self.cloud_config_extra(account, "")
    }

    /// A cloud-config for `account` of the scenario with `extra` lines in `[Global]`
    /// (`project-id = …`, `version = …`).
    pub fn cloud_config_extra(&self, account: &str, extra: &str) -> PathBuf {
        let (api_key, secret_key) = self
            .sim
            .credentials(account)
            .unwrap_or_else(|| panic!("no account {account:?} in the scenario"));
        self.write_file(
            &format!("cloud-config-{account}"),
            &format!(
                "[Global]\napi-url = {}\napi-key = \"{}\"\nsecret-key = \"{}\"\n{extra}",
                self.sim.api_url(),
                api_key.expose(),
                secret_key.expose()
            ),
        )
    }

    /// A cloud-config named after `name` with explicit keys (right or wrong).
    pub fn cloud_config_with(&self, name: &str, api_key: &str, secret_key: &str) -> PathBuf {
        self.write_file(
            &format!("cloud-config-{name}"),
            &format!(
                "[Global]\napi-url = {}\napi-key = \"{api_key}\"\nsecret-key = \"{secret_key}\"\n",
                self.sim.api_url()
            ),
        )
    }

    /// Creates an initialised, Ready Node for the simulator VM named `vm`.
    pub fn add_node(&self, vm: &str) {
        let provider_id = format!("external-cloudstack://{}", self.vm_id(vm));
        self.add_node_with_provider_id(vm, Some(&provider_id));
    }

    /// Creates an initialised, Ready Node named `name` (with `provider_id` when given).
    pub fn add_node_with_provider_id(&self, name: &str, provider_id: Option<&str>) {
        let mut node = json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": { "name": name, "labels": { "kubernetes.io/hostname": name } },
            "spec": {},
        });
        if let Some(id) = provider_id {
            node["spec"]["providerID"] = json!(id);
        }
        let cluster = self.cluster();
        cluster.create("nodes", None, node).expect("node created");
        let ready = json!({ "status": { "conditions": [{
            "type": "Ready", "status": "True", "reason": "KubeletReady",
            "lastHeartbeatTime": "2026-01-01T00:00:00Z",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }]}});
        cluster
            .patch("nodes", None, name, PatchType::Merge, &ready, true)
            .expect("node status set");
    }

    /// The id of the simulator VM named `name`.
    pub fn vm_id(&self, name: &str) -> String {
        self.sim
            .with_state(|s| {
                s.vms
                    .iter()
                    .find(|vm| vm.name == name)
                    .map(|vm| vm.id.clone())
            })
            .unwrap_or_else(|| panic!("no VM {name:?} in the simulator"))
    }

    /// Mutating CloudStack calls since start or the last reset.
    pub fn mutating_calls(&self) -> u64 {
        self.sim.mutating_calls()
    }

    /// All CloudStack calls since start or the last reset.
    pub fn all_calls(&self) -> u64 {
        self.sim.call_counts().values().sum()
    }
}
