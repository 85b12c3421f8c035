//! The demo's world: the CloudStack simulator and the in-process Kubernetes API server on
//! 127.0.0.1, a cloud-config pointing at the simulator, and the real controllers
//! ([`controllers::run`], leader election off) with the binary's default settings.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cloudstack_sim::{Faults, SimServer};
use fake_apiserver::FakeApiServer;
use tokio::task::JoinHandle;

use super::error::DemoError;
use super::scenario::{self, ACCOUNT, CALL_LATENCY_MS};
use crate::cli::Cli;
use crate::config::CloudConfig;
use crate::connect;
use crate::controllers::{self, Context, ControllerSet, ShutdownTrigger, shutdown_channel};
use crate::leader::{ElectionState, LeaderStatus};
use crate::metrics::Metrics;
use crate::server::Readiness;

/// Both servers and the running controllers.
pub(crate) struct World {
    /// The CloudStack simulator.
    pub sim: SimServer,
    /// The Kubernetes API server.
    pub apiserver: FakeApiServer,
    /// The cloud-config the controllers read (the demo account's keys).
    pub cloud_config: String,
    /// The CloudStack version the controllers detected.
    pub server_version: cloudstack::ServerVersion,
    trigger: ShutdownTrigger,
    controllers: Option<JoinHandle<anyhow::Result<()>>>,
}

impl World {
    /// Starts the servers with the demo scenario and the controllers against them.
    pub async fn start() -> Result<World, DemoError> {
        let sim = SimServer::start(scenario::cloud()).await?;
        sim.set_faults(Faults {
            latency_ms: BTreeMap::from([("*".to_string(), CALL_LATENCY_MS)]),
            ..Faults::default()
        });
        let apiserver = FakeApiServer::start().await?;
        let (api_key, secret_key) = sim
            .credentials(ACCOUNT)
            .ok_or_else(|| DemoError::Scenario(format!("account {ACCOUNT} has no keys")))?;
        let cloud_config = format!(
            "[Global]\napi-url = {}\napi-key = {}\nsecret-key = {}\nzone = {}\n",
            sim.api_url(),
            api_key.expose(),
            secret_key.expose(),
            cloudstack_sim::SMALL_ZONE
        );
        let config = CloudConfig::from_text(&cloud_config, |_| None)?;
        // The binary's defaults, without leader election.
        let args =
            Cli::parse_with_warnings(["cloudstack-ccm", "--leader-elect=false"].map(Into::into))
                .map_err(|error| DemoError::Scenario(format!("default flags: {error}")))?
                .cli
                .manager;
        let metrics = Arc::new(Metrics::new());
        let cloudstack = connect::cloudstack_client(&config, metrics.clone())?;
        let server_version = connect::learn_server(&config, &cloudstack).await?.version;
        let status = LeaderStatus::new().with_metrics(metrics.clone());
        status.set(ElectionState::Leading);
        let ctx = Arc::new(
            Context::new(
                apiserver.kube_client()?,
                cloudstack,
                server_version.clone(),
                config,
                args.cluster_name.clone(),
                metrics,
            )
            .with_args(&args)
            .with_readiness(Readiness::new(status)),
        );
        let (trigger, shutdown) = shutdown_channel();
        let controllers = tokio::spawn(controllers::run(ctx, ControllerSet::all(), shutdown));
        Ok(World {
            sim,
            apiserver,
            cloud_config,
            server_version,
            trigger,
            controllers: Some(controllers),
        })
    }

    /// An error when the controllers have stopped (they should run until [`World::stop`]).
    pub(crate) async fn check_controllers(&mut self) -> Result<(), DemoError> {
        if !self
            .controllers
            .as_ref()
            .is_some_and(|task| task.is_finished())
        {
            return Ok(());
        }
        match self.controllers.take() {
            Some(task) => match joined(task.await) {
                Ok(()) => Err(DemoError::Controllers(
                    "the controllers stopped on their own".to_string(),
                )),
                Err(error) => Err(error),
            },
            None => Ok(()),
        }
    }

    /// Stops the controllers (waiting for them, at most 10 s) and both servers.
    pub async fn stop(mut self) -> Result<(), DemoError> {
        self.trigger.trigger();
        let result = match self.controllers.take() {
            Some(task) => match tokio::time::timeout(STOP_TIMEOUT, task).await {
                Ok(result) => joined(result),
                Err(_) => Err(DemoError::Controllers(format!(
                    "the controllers did not stop within {STOP_TIMEOUT:?}"
                ))),
            },
            None => Ok(()),
        };
        self.sim.shutdown();
        drop(self.apiserver);
        result
    }
}

/// How long the controllers get to stop.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// The controllers' outcome as a demo result.
fn joined(result: Result<anyhow::Result<()>, tokio::task::JoinError>) -> Result<(), DemoError> {
    match result {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(DemoError::Controllers(format!("{error:#}"))),
        Err(error) => Err(DemoError::Controllers(format!(
            "the controller task failed: {error}"
        ))),
    }
}
