//! Shared harness of the end-to-end tests: a CloudStack simulator and a fake Kubernetes
//! API server on 127.0.0.1, a real `kube::Client` and `cloudstack::Client` talking HTTP to
//! them, a controller [`Context`] with short intervals, one shared [`Instances`] view, and
//! helpers to create nodes and wait (always with a timeout) for what the controllers do.
//!
//! The same tests run against remote endpoints (a real cluster and a real CloudStack, or the
//! doubles started as separate processes) when the environment names them: see
//! [`target`]. Node, VM and object names the tests use are then mapped to unique ones
//! ([`Harness::node_name`], [`Harness::vm`]), and everything a test creates is deleted at
//! [`Harness::stop`].
//!
//! ```ignore
//! let mut h = Harness::start(Scenario::small()).await;
//! h.spawn(node::run);
//! h.create_node(TestNode::new("node-1")).await;
//! let node = h.wait_for_node("node-1", "initialised", |n| !has_taint(n, UNINITIALIZED_TAINT)).await;
//! h.stop().await;
//! ```

pub mod target;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cloudstack_ccm::cloud::instances::Instances;
use cloudstack_ccm::cloud::inventory::{CloudStackVms, Inventory, InventorySettings};
use cloudstack_ccm::config::CloudConfig;
use cloudstack_ccm::controllers::{
    Caches, Context, FirstNodePass, NodeCache, Shutdown, ShutdownTrigger, shutdown_channel,
};
use cloudstack_ccm::metrics::Metrics;
use cloudstack_sim::{Scenario, SimServer, VmSpec};
use fake_apiserver::FakeApiServer;
use k8s_openapi::api::core::v1::{Node, NodeSpec, Taint};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use target::{CallCounter, KubeRequestLog, PASS_LINE, RemoteSettings};
#[allow(unused_imports)]
pub use target::{Double, VmFacts, skip_check_in_remote_mode, skip_in_remote_mode};

/// Taint the kubelet puts on nodes until a cloud controller initialises them.
pub const UNINITIALIZED_TAINT: &str = "node.cloudprovider.kubernetes.io/uninitialized";
/// The account of [`Scenario::small`] the controllers use.
pub const ACCOUNT: &str = "alice";
/// Namespace of the controller's ServiceAccount with [`HarnessOptions::rbac`].
pub const CONTROLLER_NAMESPACE: &str = "kube-system";
/// The controller's ServiceAccount with [`HarnessOptions::rbac`] (as in `deploy/rbac.yaml`).
pub const CONTROLLER_ACCOUNT: &str = "cloud-controller-manager";
/// Default timeout of every wait.
pub const WAIT: Duration = Duration::from_secs(30);
/// How often waits poll.
const POLL: Duration = Duration::from_millis(25);

/// Knobs of [`Harness::start_with`]; `Default` gives fast intervals for tests.
#[derive(Debug, Clone)]
pub struct HarnessOptions {
    /// The simulated cloud.
    pub scenario: Scenario,
    /// Account whose keys the controllers use.
    pub account: String,
    /// Freshness of the shared inventory.
    pub inventory: InventorySettings,
    /// `--node-status-update-frequency`.
    pub node_status_update_frequency: Duration,
    /// `--node-monitor-period`.
    pub node_monitor_period: Duration,
    /// `--service-resync-period`.
    pub service_resync_period: Duration,
    /// cloud-config `region`.
    pub region: Option<String>,
    /// cloud-config `project-id`.
    pub project_id: Option<String>,
    /// `--cluster-name`.
    pub cluster_name: String,
    /// Start the API server with RBAC enforced: the controllers then act as the
    /// ServiceAccount `kube-system/cloud-controller-manager` (with no permission until a
    /// test binds a role to it), the test's own client as the admin.
    pub rbac: bool,
    /// The route controller's flags.
    pub routes: cloudstack_ccm::controllers::route::RouteSettings,
    /// `--delete-orphans`.
    pub delete_orphans: bool,
}

impl Default for HarnessOptions {
    fn default() -> Self {
        Self {
            scenario: Scenario::small(),
            account: ACCOUNT.to_string(),
            inventory: InventorySettings {
                max_age: Duration::from_millis(200),
                min_refresh_interval: Duration::from_millis(100),
            },
            node_status_update_frequency: Duration::from_secs(300),
            node_monitor_period: Duration::from_millis(100),
            service_resync_period: Duration::from_secs(100),
            region: None,
            project_id: None,
            cluster_name: "kubernetes".to_string(),
            rbac: false,
            routes: Default::default(),
            delete_orphans: false,
        }
    }
}

/// Where a [`Harness`] runs: its own in-process doubles, or remote endpoints.
pub enum Target {
    /// A simulator and a fake API server started by this test (the default).
    InProcess,
    /// A cluster and a CloudStack named by the environment (see [`target`]).
    Remote(Box<Remote>),
}

/// The remote endpoints of a test and what it keeps to use them as a real server allows.
pub struct Remote {
    /// What the environment named.
    pub settings: RemoteSettings,
    /// Unique per test: a suffix of node names and a prefix of other object names.
    pub prefix: String,
    /// A client of the account that is not counted (the test's own reads).
    pub probe: cloudstack::Client,
    /// The VMs used as nodes, in order (`node-1` is the first).
    pub vms: Vec<VmFacts>,
    /// CloudStack calls of the controllers, as their client reports them.
    pub calls: Arc<CallCounter>,
    /// Kubernetes API requests of this process.
    pub requests: KubeRequestLog,
    /// Nodes this test created (deleted at stop).
    pub created_nodes: Mutex<Vec<String>>,
    /// Set by [`Harness::skip_after_start`]: the test stops without having passed.
    pub skipped: std::sync::atomic::AtomicBool,
}

/// A running simulator + fake API server (or remote endpoints) + controller context.
pub struct Harness {
    /// The CloudStack simulator (counters: `sim.call_counts()`, `sim.reset_counts()`);
    /// absent in remote mode.
    pub sim: Double<SimServer>,
    /// The fake Kubernetes API server (`apiserver.cluster()` for direct store access);
    /// absent in remote mode.
    pub apiserver: Double<FakeApiServer>,
    /// In-process doubles or remote endpoints.
    pub target: Target,
    /// A client of the API server (the admin when RBAC is on).
    pub kube: kube::Client,
    /// The controller context (short intervals).
    pub ctx: Arc<Context>,
    /// One inventory view shared by the controllers the harness starts.
    pub instances: Instances,
    /// The caches of the controllers the harness starts: [`Harness::instances`] and one
    /// Node cache (watching from its first reader on).
    pub caches: Caches,
    trigger: ShutdownTrigger,
    shutdown: Shutdown,
    tasks: Vec<JoinHandle<anyhow::Result<()>>>,
}

/// Installs the rustls provider and a test log subscriber (`RUST_LOG` filters it).
pub fn init() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .try_init();
}

impl Harness {
    /// Starts `scenario` with the default (fast) options.
    pub async fn start(scenario: Scenario) -> Self {
        Self::start_with(HarnessOptions {
            scenario,
            ..HarnessOptions::default()
        })
        .await
    }

    /// Starts a simulator and a fake API server and builds the context; in remote mode
    /// connects to the endpoints the environment names instead (the scenario is unused).
    pub async fn start_with(options: HarnessOptions) -> Self {
        init();
        if let Some(settings) = RemoteSettings::from_env() {
            return Self::connect(settings, options).await;
        }
        let server_version = options
            .scenario
            .version
            .text
            .parse::<cloudstack::ServerVersion>()
            .expect("the scenario's version parses");
        let sim = SimServer::start(options.scenario.clone())
            .await
            .expect("simulator starts");
        let apiserver = if options.rbac {
            FakeApiServer::start_with_rbac().await
        } else {
            FakeApiServer::start().await
        }
        .expect("fake API server starts");
        let kube = apiserver.kube_client().expect("kube client");
        let controller_kube = if options.rbac {
            apiserver
                .create(
                    "serviceaccounts",
                    Some(CONTROLLER_NAMESPACE),
                    json!({ "metadata": { "name": CONTROLLER_ACCOUNT } }),
                )
                .expect("the controller's ServiceAccount is created");
            let token = apiserver
                .service_account_token(CONTROLLER_NAMESPACE, CONTROLLER_ACCOUNT)
                .expect("a ServiceAccount token");
            apiserver
                .kube_client_with_token(&token)
                .expect("kube client with the ServiceAccount token")
        } else {
            kube.clone()
        };
        let (api_key, secret_key) = sim
            .credentials(&options.account)
            .unwrap_or_else(|| panic!("no account {:?} in the scenario", options.account));

        let mut config_text = format!(
            "[Global]\napi-url = {}\napi-key = {}\nsecret-key = {}\n",
            sim.api_url(),
            api_key.expose(),
            secret_key.expose()
        );
        if let Some(region) = &options.region {
            config_text.push_str(&format!("region = {region}\n"));
        }
        if let Some(project) = &options.project_id {
            config_text.push_str(&format!("project-id = {project}\n"));
        }
        let cloud_config = CloudConfig::from_text(&config_text, |_| None).expect("cloud-config");

        let metrics = Arc::new(Metrics::new());
        let mut client_config =
            cloudstack::ClientConfig::new(sim.api_url(), api_key.expose(), secret_key.expose());
        client_config.project_id = options.project_id.clone();
        client_config.max_retries = 2;
        client_config.retry_backoff_initial = Duration::from_millis(20);
        client_config.observer = Some(metrics.clone());
        let cloudstack = cloudstack::Client::new(client_config).expect("CloudStack client");

        let inventory = Inventory::new(
            Arc::new(CloudStackVms::new(cloudstack.clone())),
            options.inventory,
        )
        .with_observer(metrics.clone());
        let instances = Instances::new(Arc::new(inventory), options.region.clone());

        let ctx = context(
            controller_kube,
            cloudstack,
            server_version,
            cloud_config,
            metrics,
            &options,
        );
        let caches = Caches {
            instances: instances.clone(),
            nodes: NodeCache::new(ctx.kube.clone()),
            first_node_pass: FirstNodePass::opened(),
            service: Default::default(),
        };
        let (trigger, shutdown) = shutdown_channel();
        Self {
            sim: Double::local(sim, "CloudStack simulator"),
            apiserver: Double::local(apiserver, "fake API server"),
            target: Target::InProcess,
            kube,
            ctx,
            instances,
            caches,
            trigger,
            shutdown,
            tasks: Vec::new(),
        }
    }

    /// Starts a controller: `run(ctx, caches, shutdown)` (e.g. `node::run`), on the
    /// harness's [`Caches`] as `controllers::run` starts it. It stops at [`Harness::stop`].
    pub fn spawn<F, Fut>(&mut self, run: F)
    where
        F: FnOnce(Arc<Context>, Caches, Shutdown) -> Fut,
        Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        let task = run(self.ctx.clone(), self.caches.clone(), self.shutdown.clone());
        self.tasks.push(tokio::spawn(task));
    }

    /// Caches for a controller a test starts on its own (a restart stands for a new
    /// process): the harness's inventory view and a Node cache of its own.
    pub fn new_caches(&self) -> Caches {
        Caches {
            instances: self.instances.clone(),
            nodes: NodeCache::new(self.ctx.kube.clone()),
            first_node_pass: FirstNodePass::opened(),
            service: Default::default(),
        }
    }

    /// Stops every controller started with [`Harness::spawn`] and checks they ended cleanly;
    /// in remote mode first deletes the Nodes the test created.
    pub async fn stop(self) {
        if let Target::Remote(remote) = &self.target {
            let created = remote
                .created_nodes
                .lock()
                .expect("created nodes lock")
                .clone();
            for name in created {
                match self.nodes().delete(&name, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(status)) if status.code == 404 => {}
                    Err(e) => panic!("deleting node {name}: {e}"),
                }
                self.wait_for_real_node_gone(&name).await;
            }
        }
        self.trigger.trigger();
        for task in self.tasks {
            let result = tokio::time::timeout(WAIT, task)
                .await
                .expect("controller stops within the timeout")
                .expect("controller task does not panic");
            result.expect("controller ends without error");
        }
        if let Target::Remote(remote) = &self.target
            && !remote.skipped.load(std::sync::atomic::Ordering::Relaxed)
        {
            println!("{PASS_LINE}: {}", target::current_test());
        }
    }

    /// Direct access to the fake cluster's store, counters and faults.
    pub fn cluster(&self) -> fake_apiserver::Cluster {
        self.apiserver.cluster()
    }

    /// The Node API.
    pub fn nodes(&self) -> Api<Node> {
        Api::all(self.kube.clone())
    }

    /// Id of the simulator VM named `name` (in remote mode: of the environment's VM that
    /// stands for `name`, see [`Harness::vm`]).
    pub fn vm_id(&self, name: &str) -> String {
        if let Target::Remote(_) = &self.target {
            return self.vm(name).id;
        }
        self.sim
            .with_state(|state| {
                state
                    .vms
                    .iter()
                    .find(|vm| vm.name == name)
                    .map(|vm| vm.id.clone())
            })
            .unwrap_or_else(|| panic!("no VM named {name:?} in the simulator"))
    }

    /// Adds a Running VM named `name` on the small scenario's network with `ipv4`; returns its id.
    pub fn add_vm(&self, name: &str, ipv4: &str) -> String {
        self.sim
            .add_vm(vm_spec(name, ipv4))
            .unwrap_or_else(|e| panic!("adding VM {name}: {e}"))
    }

    /// Total CloudStack calls since start or the last [`Harness::reset_cloudstack_counts`].
    pub fn cloudstack_calls(&self) -> u64 {
        self.cloudstack_call_counts().values().sum()
    }

    /// `listVirtualMachines` calls since start or the last reset.
    pub fn list_vm_calls(&self) -> u64 {
        self.cloudstack_call_counts()
            .get("listVirtualMachines")
            .copied()
            .unwrap_or(0)
    }

    /// CloudStack calls per command since start or the last reset: the simulator's counters
    /// in process; in remote mode the controllers' client's own reports (a real server has
    /// no counters to ask, and other clients may share it).
    pub fn cloudstack_call_counts(&self) -> BTreeMap<String, u64> {
        match &self.target {
            Target::InProcess => self.sim.call_counts(),
            Target::Remote(remote) => remote.calls.counts(),
        }
    }

    /// Restarts the counts of [`Harness::cloudstack_call_counts`].
    pub fn reset_cloudstack_counts(&self) {
        match &self.target {
            Target::InProcess => self.sim.reset_counts(),
            Target::Remote(remote) => remote.calls.reset(),
        }
    }

    /// Kubernetes API requests with `verb` on `resource` (`nodes/status` for a subresource):
    /// the fake API server's counters in process; in remote mode the requests this process
    /// sent about objects of this test.
    pub fn kube_request_count(&self, verb: fake_apiserver::Verb, resource: &str) -> usize {
        match &self.target {
            Target::InProcess => self.cluster().request_count(verb, resource) as usize,
            Target::Remote(remote) => remote.requests.count(verb, resource, &remote.prefix),
        }
    }

    /// In remote mode, for a test that learns only from the endpoints that it cannot run
    /// (e.g. the server's version): prints `skipped in real-endpoint mode: <why>`, marks the
    /// test as not passed, and returns true; the caller then stops the harness (to clean
    /// up) and returns. False in process.
    pub fn skip_after_start(&self, why: &str) -> bool {
        let Target::Remote(remote) = &self.target else {
            return false;
        };
        remote
            .skipped
            .store(true, std::sync::atomic::Ordering::Relaxed);
        skip_in_remote_mode(why)
    }

    /// True in remote mode.
    pub fn is_remote(&self) -> bool {
        matches!(self.target, Target::Remote(_))
    }

    /// The name of the object a test calls `name`: itself in process; in remote mode
    /// unique to this test. A node named `node-N` (or `node-N.<domain>`) is named
    /// `<Nth VM>.<prefix>`, so that the controller still finds its VM by the first DNS
    /// label; any other node `name.<prefix>`.
    pub fn node_name(&self, name: &str) -> String {
        let Target::Remote(remote) = &self.target else {
            return name.to_string();
        };
        let first = name.split('.').next().unwrap_or(name);
        match remote_vm_index(first).and_then(|i| remote.vms.get(i)) {
            Some(vm) => format!("{}.{}", vm.name.to_ascii_lowercase(), remote.prefix),
            None => format!("{name}.{}", remote.prefix),
        }
    }

    /// The name of a Service (or other namespaced object) a test calls `name`: itself in
    /// process; `<prefix>-<name>` in remote mode.
    pub fn object_name(&self, name: &str) -> String {
        match &self.target {
            Target::InProcess => name.to_string(),
            Target::Remote(remote) => format!("{}-{name}", remote.prefix),
        }
    }

    /// The VM a test calls `name`: the simulator's VM of that name in process; in remote
    /// mode `node-N` is the environment's Nth VM (any other name panics: such a test must
    /// skip in remote mode).
    pub fn vm(&self, name: &str) -> VmFacts {
        match &self.target {
            Target::InProcess => self
                .sim
                .with_state(|state| {
                    let vm = state.vms.iter().find(|vm| vm.name == name)?;
                    let nic = vm.nics.iter().find(|n| n.isdefault).or(vm.nics.first())?;
                    let network = state.networks.iter().find(|n| n.id == nic.network_id)?;
                    Some(VmFacts {
                        id: vm.id.clone(),
                        name: vm.name.clone(),
                        zone: state
                            .zones
                            .iter()
                            .find(|z| z.id == vm.zone_id)
                            .map(|z| z.name.clone())
                            .unwrap_or_default(),
                        offering: state
                            .offerings
                            .iter()
                            .find(|o| o.id == vm.offering_id)
                            .map(|o| o.name.clone())
                            .unwrap_or_default(),
                        ipv4: nic.ipv4.clone(),
                        network_id: network.id.clone(),
                        network_name: network.name.clone(),
                    })
                })
                .unwrap_or_else(|| panic!("no VM named {name:?} in the simulator")),
            Target::Remote(remote) => remote_vm_index(name)
                .and_then(|i| remote.vms.get(i))
                .cloned()
                .unwrap_or_else(|| {
                    panic!(
                        "the test uses VM {name:?}; the environment provides {} VMs ({}): \
                         name more with {}",
                        remote.vms.len(),
                        remote
                            .vms
                            .iter()
                            .map(|vm| vm.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                        target::ENV_VMS
                    )
                }),
        }
    }

    /// The names of the VMs a test calls `names` (see [`Harness::vm`]).
    pub fn vm_names(&self, names: &[&str]) -> Vec<String> {
        names.iter().map(|name| self.vm(name).name).collect()
    }

    /// Connects to the remote endpoints of `settings`.
    async fn connect(settings: RemoteSettings, options: HarnessOptions) -> Self {
        let text = std::fs::read_to_string(&settings.cloud_config).unwrap_or_else(|e| {
            panic!(
                "reading cloud-config {}: {e}",
                settings.cloud_config.display()
            )
        });
        let mut cloud_config = CloudConfig::from_text(&text, |_| None).expect("cloud-config");
        if options.region.is_some() {
            cloud_config.region = options.region.clone();
        }
        if options.project_id.is_some() {
            cloud_config.project_id = options.project_id.clone();
        }
        let metrics = Arc::new(Metrics::new());
        let calls = Arc::new(CallCounter::new(metrics.clone()));
        // The test's own reads are not counted: only the controllers' calls are.
        let probe = remote_client(&cloud_config, None);
        let cloudstack = remote_client(&cloud_config, Some(calls.clone()));
        let server_version = cloudstack_ccm::connect::server_version(&cloud_config, &probe)
            .await
            .expect("the CloudStack version");
        let vms = target::environment_vms(&probe, &settings).await;
        let requests = KubeRequestLog::default();
        let kube = requests.client(&settings.kubeconfig).await;
        let prefix = format!("e2e-{}", &uuid::Uuid::new_v4().simple().to_string()[..10]);
        println!(
            "real-endpoint mode: {} against {} (CloudStack {}), VMs {:?}, object prefix {prefix}",
            target::current_test(),
            cloud_config.api_url,
            server_version,
            vms.iter().map(|vm| vm.name.as_str()).collect::<Vec<_>>()
        );

        let inventory = Inventory::new(
            Arc::new(CloudStackVms::new(cloudstack.clone())),
            options.inventory,
        )
        .with_observer(metrics.clone());
        let instances = Instances::new(Arc::new(inventory), cloud_config.region.clone());
        let ctx = context(
            kube.clone(),
            cloudstack,
            server_version,
            cloud_config,
            metrics,
            &options,
        );
        let caches = Caches {
            instances: instances.clone(),
            nodes: NodeCache::new(ctx.kube.clone()),
            first_node_pass: FirstNodePass::opened(),
            service: Default::default(),
        };
        let (trigger, shutdown) = shutdown_channel();
        Self {
            sim: Double::remote("CloudStack simulator"),
            apiserver: Double::remote("fake API server"),
            target: Target::Remote(Box::new(Remote {
                settings,
                prefix,
                probe,
                vms,
                calls,
                requests,
                created_nodes: Mutex::new(Vec::new()),
                skipped: std::sync::atomic::AtomicBool::new(false),
            })),
            kube,
            ctx,
            instances,
            caches,
            trigger,
            shutdown,
            tasks: Vec::new(),
        }
    }

    /// Timeout of every wait: [`WAIT`] in process, the environment's in remote mode.
    pub fn wait(&self) -> Duration {
        match &self.target {
            Target::InProcess => WAIT,
            Target::Remote(remote) => remote.settings.wait,
        }
    }

    /// Every Event (core/v1 and events.k8s.io/v1) about the object named `name` (its real
    /// name), read through the API (works in both modes).
    pub async fn events_about_object(&self, name: &str) -> Vec<Value> {
        let mut found = Vec::new();
        let core: Api<k8s_openapi::api::core::v1::Event> = Api::all(self.kube.clone());
        let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(self.kube.clone());
        if let Ok(list) = core.list(&ListParams::default()).await {
            found.extend(
                list.items
                    .iter()
                    .filter_map(|e| serde_json::to_value(e).ok()),
            );
        }
        if let Ok(list) = events.list(&ListParams::default()).await {
            found.extend(
                list.items
                    .iter()
                    .filter_map(|e| serde_json::to_value(e).ok()),
            );
        }
        found.retain(|event| {
            let regarding = event
                .get("regarding")
                .or_else(|| event.get("involvedObject"));
            regarding
                .and_then(|r| r.get("name"))
                .and_then(Value::as_str)
                == Some(name)
        });
        found
    }

    async fn wait_for_real_node_gone(&self, name: &str) {
        eventually(&format!("node {name} deleted"), self.wait(), || async {
            self.nodes()
                .get_opt(name)
                .await
                .unwrap_or_else(|e| panic!("reading node {name}: {e}"))
                .is_none()
                .then_some(())
        })
        .await
    }

    /// Creates a node (and, when `node.ready` is set, its Ready condition). In remote mode
    /// the node is named [`Harness::node_name`] and deleted at [`Harness::stop`].
    pub async fn create_node(&self, mut node: TestNode) -> Node {
        let ready = node.ready;
        let logical = node.name.clone();
        node.name = self.node_name(&logical);
        let name = node.name.clone();
        if let Target::Remote(remote) = &self.target {
            remote
                .created_nodes
                .lock()
                .expect("created nodes lock")
                .push(name.clone());
        }
        let created = self
            .nodes()
            .create(&PostParams::default(), &node.build())
            .await
            .unwrap_or_else(|e| panic!("creating node {name}: {e}"));
        match ready {
            Some(ready) => self.set_ready(&logical, ready).await,
            None => created,
        }
    }

    /// Sets the node's Ready condition to `True` or `False`.
    pub async fn set_ready(&self, name: &str, ready: bool) -> Node {
        let name = &self.node_name(name);
        let status = if ready { "True" } else { "False" };
        let patch = json!({ "status": { "conditions": [{
            "type": "Ready",
            "status": status,
            "reason": if ready { "KubeletReady" } else { "KubeletNotReady" },
            "lastHeartbeatTime": "2026-01-01T00:00:00Z",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }]}});
        self.nodes()
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("setting Ready={status} on node {name}: {e}"))
    }

    /// The node, or `None` when it does not exist.
    pub async fn node(&self, name: &str) -> Option<Node> {
        let name = &self.node_name(name);
        self.nodes()
            .get_opt(name)
            .await
            .unwrap_or_else(|e| panic!("reading node {name}: {e}"))
    }

    /// Waits (at most [`WAIT`]) until node `name` exists and satisfies `check`; panics
    /// naming `what` and showing the node otherwise.
    pub async fn wait_for_node(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&Node) -> bool,
    ) -> Node {
        let mut last = None;
        let wait = self.wait();
        let waited = tokio::time::timeout(wait, async {
            loop {
                if let Some(node) = self.node(name).await {
                    if check(&node) {
                        return node;
                    }
                    last = Some(node);
                }
                tokio::time::sleep(POLL).await;
            }
        })
        .await;
        waited.unwrap_or_else(|_| {
            panic!("node {name} not {what} within {wait:?}; last seen: {last:#?}")
        })
    }

    /// Waits (at most [`WAIT`]) until node `name` no longer exists.
    pub async fn wait_for_node_gone(&self, name: &str) {
        eventually(&format!("node {name} deleted"), self.wait(), || async {
            self.node(name).await.is_none().then_some(())
        })
        .await
    }

    /// Every Event (core/v1 and events.k8s.io/v1) about the object named `name`.
    pub fn events_about(&self, name: &str) -> Vec<Value> {
        self.cluster()
            .events()
            .into_iter()
            .filter(|event| {
                let regarding = event
                    .get("regarding")
                    .or_else(|| event.get("involvedObject"));
                regarding
                    .and_then(|r| r.get("name"))
                    .and_then(Value::as_str)
                    == Some(name)
            })
            .collect()
    }

    /// Waits (at most [`WAIT`]) for an Event with `reason` about node `name`; returns it.
    pub async fn wait_for_event(&self, name: &str, reason: &str) -> Value {
        if !self.is_remote() {
            return eventually(&format!("an Event {reason} about {name}"), WAIT, || async {
                self.events_about(name)
                    .into_iter()
                    .find(|event| event_reason(event) == Some(reason))
            })
            .await;
        }
        let name = &self.node_name(name);
        eventually(
            &format!("an Event {reason} about {name}"),
            self.wait(),
            || async {
                self.events_about_object(name)
                    .await
                    .into_iter()
                    .find(|event| event_reason(event) == Some(reason))
            },
        )
        .await
    }
}

/// The controller context of a harness (four Service syncs at a time).
fn context(
    kube: kube::Client,
    cloudstack: cloudstack::Client,
    server_version: cloudstack::ServerVersion,
    cloud_config: CloudConfig,
    metrics: Arc<Metrics>,
    options: &HarnessOptions,
) -> Arc<Context> {
    let mut ctx = Context::new(
        kube,
        cloudstack,
        server_version,
        cloud_config,
        options.cluster_name.clone(),
        metrics,
    );
    ctx.node_status_update_frequency = options.node_status_update_frequency;
    ctx.node_monitor_period = options.node_monitor_period;
    ctx.service_resync_period = options.service_resync_period;
    ctx.concurrent_service_syncs = 4;
    ctx.routes = options.routes.clone();
    ctx.delete_orphans = options.delete_orphans;
    Arc::new(ctx)
}

/// A CloudStack client as the controller manager builds it from `config`.
fn remote_client(
    config: &CloudConfig,
    observer: Option<Arc<dyn cloudstack::CallObserver>>,
) -> cloudstack::Client {
    let mut client_config = cloudstack::ClientConfig::new(
        config.api_url.clone(),
        config.api_key.clone(),
        config.secret_key.clone(),
    );
    client_config.project_id = config.project_id.clone();
    client_config.ssl_no_verify = config.ssl_no_verify;
    client_config.ca_file = config.ca_file.clone();
    client_config.requests_per_second = config.requests_per_second;
    if let Some(timeout) = config.job_timeout {
        client_config.job_timeout = timeout;
    }
    client_config.observer = observer;
    cloudstack::Client::new(client_config).expect("CloudStack client")
}

/// The index of the environment VM that a test's `node-N` stands for.
fn remote_vm_index(name: &str) -> Option<usize> {
    name.strip_prefix("node-")?
        .parse::<usize>()
        .ok()?
        .checked_sub(1)
}

/// Polls `probe` until it returns `Some`, at most `timeout`; panics naming `what`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let waited = tokio::time::timeout(timeout, async {
        loop {
            if let Some(found) = probe().await {
                return found;
            }
            tokio::time::sleep(POLL).await;
        }
    })
    .await;
    waited.unwrap_or_else(|_| panic!("timed out after {timeout:?} waiting for {what}"))
}

/// The `reason` of an Event.
pub fn event_reason(event: &Value) -> Option<&str> {
    event.get("reason").and_then(Value::as_str)
}

/// The note/message of an Event.
pub fn event_note(event: &Value) -> &str {
    event
        .get("note")
        .or_else(|| event.get("message"))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// A VM on the small scenario's network (`net-vr`, zone `zone1`, offering `small`).
pub fn vm_spec(name: &str, ipv4: &str) -> VmSpec {
    VmSpec {
        id: None,
        name: name.to_string(),
        state: "Running".to_string(),
        zone: cloudstack_sim::SMALL_ZONE.to_string(),
        offering: "small".to_string(),
        nics: vec![cloudstack_sim::NicSpec {
            network: cloudstack_sim::SMALL_NETWORK.to_string(),
            ipv4: ipv4.to_string(),
            ipv6: None,
            isdefault: true,
        }],
        static_nat_ip: None,
        account: Some(ACCOUNT.to_string()),
        project: None,
    }
}

/// True when the node has a taint with `key`.
pub fn has_taint(node: &Node, key: &str) -> bool {
    node.spec
        .as_ref()
        .and_then(|spec| spec.taints.as_ref())
        .is_some_and(|taints| taints.iter().any(|taint| taint.key == key))
}

/// The node's `spec.providerID` (empty when unset).
pub fn provider_id(node: &Node) -> &str {
    node.spec
        .as_ref()
        .and_then(|spec| spec.provider_id.as_deref())
        .unwrap_or_default()
}

/// The node's labels.
pub fn labels(node: &Node) -> BTreeMap<String, String> {
    node.metadata.labels.clone().unwrap_or_default()
}

/// The node's addresses as `(type, address)` pairs, in order.
pub fn addresses(node: &Node) -> Vec<(String, String)> {
    node.status
        .as_ref()
        .and_then(|status| status.addresses.as_ref())
        .map(|list| {
            list.iter()
                .map(|a| (a.type_.clone(), a.address.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// A node to create, as the kubelet registers it.
#[derive(Debug, Clone)]
pub struct TestNode {
    /// `metadata.name`.
    pub name: String,
    /// `spec.providerID`.
    pub provider_id: Option<String>,
    /// Annotations.
    pub annotations: BTreeMap<String, String>,
    /// Carries the uninitialized taint (default `true`).
    pub uninitialized: bool,
    /// Ready condition to set after creation (`None`: no conditions).
    pub ready: Option<bool>,
    /// Other taints.
    pub taints: Vec<Taint>,
}

impl TestNode {
    /// A node named `name` with the uninitialized taint, no providerID, no conditions.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            provider_id: None,
            annotations: BTreeMap::new(),
            uninitialized: true,
            ready: None,
            taints: Vec::new(),
        }
    }

    /// Sets `spec.providerID`.
    pub fn provider_id(mut self, provider_id: &str) -> Self {
        self.provider_id = Some(provider_id.to_string());
        self
    }

    /// Adds an annotation.
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.annotations.insert(key.to_string(), value.to_string());
        self
    }

    /// Without the uninitialized taint (already initialised).
    pub fn initialised(mut self) -> Self {
        self.uninitialized = false;
        self
    }

    /// With a Ready condition of `ready`.
    pub fn ready(mut self, ready: bool) -> Self {
        self.ready = Some(ready);
        self
    }

    /// The Node object.
    pub fn build(&self) -> Node {
        let mut taints = self.taints.clone();
        if self.uninitialized {
            taints.push(Taint {
                key: UNINITIALIZED_TAINT.to_string(),
                value: Some("true".to_string()),
                effect: "NoSchedule".to_string(),
                time_added: None,
            });
        }
        Node {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                annotations: (!self.annotations.is_empty()).then(|| self.annotations.clone()),
                labels: Some(BTreeMap::from([(
                    "kubernetes.io/hostname".to_string(),
                    self.name.to_ascii_lowercase(),
                )])),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                provider_id: self.provider_id.clone(),
                taints: (!taints.is_empty()).then_some(taints),
                ..Default::default()
            }),
            status: None,
        }
    }
}
