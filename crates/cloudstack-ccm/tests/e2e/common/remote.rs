//! The remote mode of a [`Harness`]: connecting to the endpoints the environment names, and
//! mapping the node, VM and object names a test uses to the ones of the environment.

use std::sync::{Arc, Mutex};

use cloudstack_ccm::cloud::instances::Instances;
use cloudstack_ccm::cloud::inventory::{CloudStackVms, Inventory};
use cloudstack_ccm::config::CloudConfig;
use cloudstack_ccm::controllers::{Caches, FirstNodePass, NodeCache, shutdown_channel};
use cloudstack_ccm::metrics::Metrics;

use super::lifecycle::context;
use super::target::{
    self, CallCounter, Double, KubeRequestLog, RemoteSettings, VmFacts, skip_in_remote_mode,
};
use super::{Harness, HarnessOptions, Remote, Target};

impl Harness {
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
    pub(super) async fn connect(settings: RemoteSettings, options: HarnessOptions) -> Self {
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
        let server_version = cloudstack_ccm::connect::learn_server(&cloud_config, &probe)
            .await
            .expect("the CloudStack version")
            .version;
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
            failing_calls_expected: Default::default(),
        }
    }
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
