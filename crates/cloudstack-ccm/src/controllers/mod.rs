//! Everything that watches and writes Kubernetes objects.
//!
//! This module holds what the controllers share: the [`Context`], which controllers are
//! enabled ([`ControllerSet`], from `--controllers`), the [`Shutdown`] signal, and
//! [`run`], which starts the enabled controllers while this replica leads.
//!
//! Each controller module exposes
//! `pub async fn run(ctx: Arc<Context>, shutdown: Shutdown) -> anyhow::Result<()>`,
//! which returns `Ok(())` once `shutdown` fires and it has stopped.

pub mod backoff;
pub mod events;
pub mod node;
pub mod node_lifecycle;
pub mod route;
pub mod service;

mod set;
mod shutdown;

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;

use crate::config::CloudConfig;
use crate::metrics::Metrics;
use crate::server::Readiness;

pub use set::{ControllerName, ControllerSet, ControllerSetError};
pub use shutdown::{Shutdown, ShutdownTrigger, shutdown_channel};

/// What every controller needs, shared as `Arc<Context>`.
pub struct Context {
    /// Kubernetes API client.
    pub kube: kube::Client,
    /// CloudStack API client (reports every call to [`Context::metrics`]).
    pub cloudstack: cloudstack::Client,
    /// The CloudStack version (detected via `listCapabilities`, or the config's `version`).
    pub server_version: cloudstack::ServerVersion,
    /// The cloud-config (zone, region, project).
    pub cloud_config: CloudConfig,
    /// `--cluster-name`: tags and names cloud resources.
    pub cluster_name: String,
    /// The metrics registry.
    pub metrics: Arc<Metrics>,
    /// Readiness; mark caches synced once the controllers' first sync is done.
    pub readiness: Readiness,
    /// `--node-status-update-frequency`: how often node addresses are refreshed (5 m).
    pub node_status_update_frequency: Duration,
    /// `--node-monitor-period`: how often NotReady nodes are checked (5 s).
    pub node_monitor_period: Duration,
    /// `--service-resync-period`: how often every LoadBalancer Service is reconciled (100 s).
    pub service_resync_period: Duration,
    /// `--concurrent-service-syncs`: Services reconciled at the same time.
    pub concurrent_service_syncs: usize,
    /// `--load-balancer-class`: the class this controller owns, besides class-less Services.
    pub load_balancer_class: Option<String>,
    /// The route controller's flags.
    pub routes: route::RouteSettings,
    /// `--delete-orphans`: the service controller deletes the orphans it counts.
    pub delete_orphans: bool,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("cloudstack", &self.cloudstack)
            .field("server_version", &self.server_version)
            .field("cloud_config", &self.cloud_config)
            .field("cluster_name", &self.cluster_name)
            .field("readiness", &self.readiness)
            .field(
                "node_status_update_frequency",
                &self.node_status_update_frequency,
            )
            .field("node_monitor_period", &self.node_monitor_period)
            .field("service_resync_period", &self.service_resync_period)
            .field("concurrent_service_syncs", &self.concurrent_service_syncs)
            .field("load_balancer_class", &self.load_balancer_class)
            .field("routes", &self.routes)
            .field("delete_orphans", &self.delete_orphans)
            .finish_non_exhaustive()
    }
}

/// Starts the controllers of `enabled` and waits for them.
///
/// Returns `Ok(())` when every controller has stopped after `shutdown`; an error as soon
/// as one controller fails or stops on its own (the process then exits non-zero).
pub async fn run(
    ctx: Arc<Context>,
    enabled: ControllerSet,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let mut tasks: JoinSet<(ControllerName, anyhow::Result<()>)> = JoinSet::new();
    // One VM inventory (one list call per refresh) serves both node controllers, and when
    // both run, node-lifecycle reads cloud-node's Node cache (one copy of every Node).
    let node_instances = node::instances_for(&ctx);
    let both_node_controllers = enabled.is_enabled(ControllerName::CloudNode)
        && enabled.is_enabled(ControllerName::CloudNodeLifecycle);
    let (handoff, shared_nodes) = if both_node_controllers {
        let (sender, receiver) = tokio::sync::watch::channel(None);
        (Some(sender), Some(receiver))
    } else {
        (None, None)
    };
    for name in enabled.enabled() {
        let (ctx, shutdown) = (ctx.clone(), shutdown.clone());
        match name {
            ControllerName::CloudNode => {
                let instances = node_instances.clone();
                let handoff = handoff.clone();
                tasks.spawn(async move {
                    let result = node::run_sharing_store(ctx, instances, shutdown, handoff).await;
                    (name, result)
                });
            }
            ControllerName::CloudNodeLifecycle => {
                let instances = node_instances.clone();
                let shared = shared_nodes.clone();
                tasks.spawn(async move {
                    let result =
                        node_lifecycle::run_on_store(ctx, instances, shutdown, shared).await;
                    (name, result)
                });
            }
            ControllerName::Service => {
                tasks.spawn(async move { (name, service::run(ctx, shutdown).await) });
            }
            ControllerName::Route => {
                let instances = node_instances.clone();
                tasks.spawn(async move { (name, route::run(ctx, instances, shutdown).await) });
            }
        }
    }
    tracing::info!(controllers = %enabled, "controllers started");
    tokio::spawn(mark_synced_after_first_inventory(
        ctx.clone(),
        node_instances.inventory().clone(),
        shutdown.clone(),
    ));
    if tasks.is_empty() {
        shutdown.wait().await;
        return Ok(());
    }
    while let Some(joined) = tasks.join_next().await {
        let (name, result) =
            joined.map_err(|error| anyhow::anyhow!("a controller task panicked: {error}"))?;
        match result {
            Ok(()) if shutdown.is_triggered() => {
                tracing::info!(controller = %name, "controller stopped")
            }
            Ok(()) => anyhow::bail!("controller {name} stopped unexpectedly"),
            Err(error) => return Err(error.context(format!("controller {name} failed"))),
        }
    }
    Ok(())
}

/// Marks the caches synced (`/readyz`) once the VM inventory has been read from CloudStack,
/// retrying every few seconds until it can be or `shutdown` fires.
async fn mark_synced_after_first_inventory(
    ctx: Arc<Context>,
    inventory: Arc<crate::cloud::inventory::Inventory>,
    shutdown: Shutdown,
) {
    const RETRY: Duration = Duration::from_secs(2);
    loop {
        let attempt = tokio::select! {
            _ = shutdown.wait() => return,
            result = inventory.snapshot() => result,
        };
        match attempt {
            Ok(_) => {
                ctx.readiness.mark_synced();
                tracing::info!("VM inventory read; caches synced");
                return;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot read the VM inventory yet; not ready");
                tokio::select! {
                    _ = shutdown.wait() => return,
                    _ = tokio::time::sleep(RETRY) => {}
                }
            }
        }
    }
}
