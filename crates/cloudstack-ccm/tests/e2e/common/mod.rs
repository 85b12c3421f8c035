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
//!
//! This module holds the harness's types; `lifecycle` starts and stops it, `remote` connects
//! it to remote endpoints, `nodes` creates and reads Nodes, `waits` waits and reads Events,
//! `doubles` reads the doubles' state and the call counts.

mod doubles;
mod lifecycle;
mod nodes;
mod remote;
pub mod target;
mod waits;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cloudstack_ccm::cloud::instances::Instances;
use cloudstack_ccm::cloud::inventory::InventorySettings;
use cloudstack_ccm::controllers::{Caches, Context, Shutdown, ShutdownTrigger};
use cloudstack_sim::{Scenario, SimServer};
use fake_apiserver::FakeApiServer;
use tokio::task::JoinHandle;

use target::{CallCounter, KubeRequestLog, RemoteSettings};
#[allow(unused_imports)]
pub use target::{Double, VmFacts, skip_check_in_remote_mode, skip_in_remote_mode};

pub use doubles::{failing_calls, vm_spec};
pub use nodes::{TestNode, addresses, has_taint, labels, provider_id};
pub use waits::{event_note, event_reason, events_in, eventually};

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
    /// Set by [`Harness::expect_failing_calls`]: the test provokes failing CloudStack calls.
    failing_calls_expected: std::sync::atomic::AtomicBool,
}

/// Installs the rustls provider and a test log subscriber (`RUST_LOG` filters it).
pub fn init() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .try_init();
}
