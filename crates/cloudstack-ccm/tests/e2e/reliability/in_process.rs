//! The service controller in process, on the shared e2e harness, with a CloudStack client
//! whose retries and async-job timeout are short (the binary has no setting for the job
//! timeout), and controller settings fast enough for fault tests.

use std::sync::Arc;
use std::time::Duration;

use cloudstack_ccm::controllers::service::{self, Settings};
use cloudstack_ccm::controllers::{Context, ShutdownTrigger, shutdown_channel};
use cloudstack_sim::Scenario;
use tokio::task::JoinHandle;

use crate::common::{Harness, HarnessOptions, TestNode};

/// Short retries, a 1 s job timeout and fast job polling.
pub fn fast_client(h: &Harness) -> cloudstack::Client {
    let (api_key, secret_key) = h.sim.credentials(crate::common::ACCOUNT).expect("alice");
    let mut config =
        cloudstack::ClientConfig::new(h.sim.api_url(), api_key.expose(), secret_key.expose());
    config.max_retries = 3;
    config.retry_backoff_initial = Duration::from_millis(20);
    config.retry_backoff_max = Duration::from_millis(300);
    config.job_timeout = Duration::from_secs(1);
    config.job_poll_initial = Duration::from_millis(10);
    config.job_poll_max = Duration::from_millis(100);
    config.observer = Some(h.ctx.metrics.clone());
    cloudstack::Client::new(config).expect("CloudStack client")
}

/// Resync every second, retry after 50 ms up to 1 s.
pub fn fast_settings() -> Settings {
    Settings {
        resync_period: Duration::from_secs(1),
        concurrency: 4,
        backoff_base: Duration::from_millis(50),
        backoff_max: Duration::from_secs(1),
        node_debounce: Duration::from_millis(50),
        details_max_age: Duration::from_secs(10),
        endpoint_coalesce: Duration::from_millis(100),
    }
}

/// Starts `scenario` with initialised, Ready Nodes for `vms` and the service controller
/// on the fast client (stopped by `Harness::stop`).
pub async fn start_service_controller(scenario: Scenario, vms: &[&str]) -> Harness {
    let mut h = start_with_nodes(scenario, vms).await;
    let ctx = fast_context(&h);
    h.spawn(move |_, caches, shutdown| service::run_with(ctx, fast_settings(), caches, shutdown));
    h
}

/// Starts `scenario` with initialised, Ready Nodes for `vms`, and no controller.
pub async fn start_with_nodes(scenario: Scenario, vms: &[&str]) -> Harness {
    let h = Harness::start_with(HarnessOptions {
        scenario,
        service_resync_period: Duration::from_secs(1),
        ..HarnessOptions::default()
    })
    .await;
    for vm in vms {
        let provider_id = format!("external-cloudstack://{}", h.vm_id(vm));
        h.create_node(
            TestNode::new(vm)
                .provider_id(&provider_id)
                .initialised()
                .ready(true),
        )
        .await;
    }
    h
}

/// The harness's context with the fast client.
pub fn fast_context(h: &Harness) -> Arc<Context> {
    let base = &h.ctx;
    let mut ctx = Context::new(
        base.kube.clone(),
        fast_client(h),
        base.server_version.clone(),
        base.cloud_config.clone(),
        base.cluster_name.clone(),
        base.metrics.clone(),
    )
    .with_readiness(base.readiness.clone());
    ctx.node_status_update_frequency = base.node_status_update_frequency;
    ctx.node_monitor_period = base.node_monitor_period;
    ctx.service_resync_period = base.service_resync_period;
    ctx.concurrent_service_syncs = 4;
    Arc::new(ctx)
}

/// A service controller that can be stopped and started again within one test.
pub struct ServiceController {
    trigger: ShutdownTrigger,
    task: JoinHandle<anyhow::Result<()>>,
}

impl ServiceController {
    /// Starts the service controller on the fast client.
    pub fn start(h: &Harness) -> ServiceController {
        let (trigger, shutdown) = shutdown_channel();
        let task = tokio::spawn(service::run_with(
            fast_context(h),
            fast_settings(),
            h.new_caches(),
            shutdown,
        ));
        ServiceController { trigger, task }
    }

    /// Stops it and waits (at most 10 s) for a clean end.
    pub async fn stop(self) {
        self.trigger.trigger();
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("the controller stops")
            .expect("no panic")
            .expect("a clean end");
    }
}
