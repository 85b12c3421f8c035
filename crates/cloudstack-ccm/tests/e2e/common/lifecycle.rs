//! Starting a [`Harness`] on in-process doubles (a simulator and a fake API server started
//! by the test; remote endpoints are connected in `remote`), the controllers a test runs on
//! it, and stopping it all (in remote mode after deleting the Nodes the test created).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use cloudstack_ccm::cloud::instances::Instances;
use cloudstack_ccm::cloud::inventory::{CloudStackVms, Inventory};
use cloudstack_ccm::config::CloudConfig;
use cloudstack_ccm::controllers::{
    Caches, Context, FirstNodePass, NodeCache, Shutdown, shutdown_channel,
};
use cloudstack_ccm::metrics::Metrics;
use cloudstack_sim::{Scenario, SimServer};
use fake_apiserver::FakeApiServer;
use kube::api::DeleteParams;
use serde_json::json;

use super::target::{self, Double, PASS_LINE, RemoteSettings};
use super::{
    CONTROLLER_ACCOUNT, CONTROLLER_NAMESPACE, Harness, HarnessOptions, Target, WAIT, init,
};

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
            failing_calls_expected: Default::default(),
        }
    }

    /// Says the test provokes failing CloudStack calls (injected faults, refused keys, a
    /// VM or an address taken away, bad input sent on purpose): [`Harness::stop`] then does
    /// not require every call to have succeeded. Unknown parameter names stay refused.
    pub fn expect_failing_calls(&self) {
        self.failing_calls_expected
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// The contract with CloudStack, checked on the simulator's call log at the end of every
    /// in-process test: no call named a parameter the command does not declare in
    /// CloudStack's listing (the server would have ignored it), and — unless the test said
    /// it provokes them — no call failed.
    fn check_cloudstack_contract(&self) {
        if !matches!(self.target, Target::InProcess) {
            return;
        }
        let log = self.sim.call_log();
        let unknown: Vec<String> = log
            .iter()
            .filter(|call| !call.unknown_params.is_empty())
            .map(|call| format!("{} {:?}", call.command, call.unknown_params))
            .collect();
        assert!(
            unknown.is_empty(),
            "calls named parameters CloudStack does not declare: {unknown:#?}"
        );
        if self
            .failing_calls_expected
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            return;
        }
        let failed = super::failing_calls(self, 0);
        assert!(
            failed.is_empty(),
            "CloudStack calls failed on a normal day: {failed:#?}"
        );
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
        if !std::thread::panicking() {
            self.check_cloudstack_contract();
        }
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
}

/// The controller context of a harness (four Service syncs at a time).
pub(super) fn context(
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
