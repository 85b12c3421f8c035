//! Everything that watches and writes Kubernetes objects.
//!
//! This module holds what the controllers share: the [`Context`], the [`Caches`] (one VM
//! inventory view, one Node cache and what the service controller learnt of CloudStack),
//! which controllers are enabled ([`ControllerSet`], from `--controllers`), the
//! [`Shutdown`] signal, and [`run`], which builds the caches once and starts the enabled
//! controllers on them while this replica leads ([`run_on`] starts them on caches kept
//! from an earlier leadership term).
//!
//! Each controller module (`node`, `node_lifecycle`, `service`, `route`) exposes
//! `pub async fn run(ctx: Arc<Context>, caches: Caches, shutdown: Shutdown) -> anyhow::Result<()>`,
//! which returns `Ok(())` once `shutdown` fires and it has stopped. The service
//! controller also has `run_with`, the same with explicit [`service::Settings`].

pub mod backoff;
pub mod events;
pub mod first_node_pass;
pub mod node;
pub mod node_cache;
pub mod node_lifecycle;
pub mod node_vocabulary;
pub mod route;
pub mod service;

#[cfg(test)]
mod cached_node_tests;
mod set;
mod shutdown;

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;

use crate::cloud::instances::Instances;
use crate::config::CloudConfig;
use crate::metrics::Metrics;
use crate::server::Readiness;

pub use first_node_pass::FirstNodePass;
pub use node_cache::NodeCache;
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

/// `--node-status-update-frequency`'s default.
pub(crate) const DEFAULT_NODE_STATUS_UPDATE_FREQUENCY: Duration = Duration::from_secs(300);
/// `--node-monitor-period`'s default.
pub(crate) const DEFAULT_NODE_MONITOR_PERIOD: Duration = Duration::from_secs(5);
/// `--service-resync-period`'s default.
pub(crate) const DEFAULT_SERVICE_RESYNC_PERIOD: Duration = Duration::from_secs(100);

impl Context {
    /// A context over these clients, with the flags' defaults: node status every 5 m,
    /// node monitor every 5 s, Service resync every 100 s, one Service sync at a time,
    /// no load-balancer class, the route controller's defaults, no orphan deletion, and a
    /// [`Readiness`] following a [`LeaderStatus`](crate::leader::LeaderStatus) of its own.
    /// [`Context::with_args`] takes the flags instead; the fields are public for the rest.
    pub fn new(
        kube: kube::Client,
        cloudstack: cloudstack::Client,
        server_version: cloudstack::ServerVersion,
        cloud_config: CloudConfig,
        cluster_name: impl Into<String>,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            kube,
            cloudstack,
            server_version,
            cloud_config,
            cluster_name: cluster_name.into(),
            metrics,
            readiness: Readiness::new(crate::leader::LeaderStatus::new()),
            node_status_update_frequency: DEFAULT_NODE_STATUS_UPDATE_FREQUENCY,
            node_monitor_period: DEFAULT_NODE_MONITOR_PERIOD,
            service_resync_period: DEFAULT_SERVICE_RESYNC_PERIOD,
            concurrent_service_syncs: 1,
            load_balancer_class: None,
            routes: route::RouteSettings::default(),
            delete_orphans: false,
        }
    }

    /// Takes the controller flags of `args`: the periods, `--concurrent-service-syncs`,
    /// `--load-balancer-class`, the route flags and `--delete-orphans`.
    pub fn with_args(mut self, args: &crate::cli::ManagerArgs) -> Self {
        self.node_status_update_frequency = args.node_status_update_frequency;
        self.node_monitor_period = args.node_monitor_period;
        self.service_resync_period = args.service_resync_period;
        self.concurrent_service_syncs =
            usize::try_from(args.concurrent_service_syncs.get()).unwrap_or(1);
        self.load_balancer_class = args.load_balancer_class.clone();
        self.routes = route::RouteSettings::from_args(args);
        self.delete_orphans = args.delete_orphans;
        self
    }

    /// Uses `readiness` (e.g. following the leader election's status).
    pub fn with_readiness(mut self, readiness: Readiness) -> Self {
        self.readiness = readiness;
        self
    }
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

/// What the controllers of one process read together, built once by [`run`]: clones
/// are handles to the same caches.
#[derive(Debug, Clone)]
pub struct Caches {
    /// The VM inventory view (one `listVirtualMachines` per refresh serves every lookup).
    pub instances: Instances,
    /// The Node cache (one watch of the Nodes, started by its first reader).
    pub nodes: NodeCache,
    /// Opens when the cloud-node controller's first pass is done: the other controllers
    /// make their first CloudStack read after it.
    pub first_node_pass: FirstNodePass,
    /// The service controller's engine and orphan-pass state, kept across terms.
    pub service: service::Memory,
}

impl Caches {
    /// The caches of `ctx`: `node::instances_for`, a [`NodeCache`] of `ctx.kube` and a
    /// closed [`FirstNodePass`] (the cloud-node controller opens it).
    pub fn for_context(ctx: &Context) -> Self {
        Self {
            instances: node::instances_for(ctx),
            nodes: NodeCache::new(ctx.kube.clone()),
            first_node_pass: FirstNodePass::new(),
            service: service::Memory::default(),
        }
    }
}

/// Starts the controllers of `enabled` on new [`Caches`] and waits for them.
///
/// Returns `Ok(())` when every controller has stopped after `shutdown`; an error as soon
/// as one controller fails or stops on its own (the process then exits non-zero).
pub async fn run(
    ctx: Arc<Context>,
    enabled: ControllerSet,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let caches = Caches::for_context(&ctx);
    run_on(ctx, caches, enabled, shutdown).await
}

/// [`run`] on `caches`, which outlive it: dropping this future (a lost leader lease)
/// aborts every controller task at once and keeps the caches for the next term.
pub async fn run_on(
    ctx: Arc<Context>,
    caches: Caches,
    enabled: ControllerSet,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    if !enabled.is_enabled(ControllerName::CloudNode) {
        caches.first_node_pass.open();
    }
    // Dropped with this future: aborts every task it holds.
    let mut tasks: JoinSet<(ControllerName, anyhow::Result<()>)> = JoinSet::new();
    for name in enabled.enabled() {
        let (ctx, caches, shutdown) = (ctx.clone(), caches.clone(), shutdown.clone());
        tasks.spawn(async move {
            let result = match name {
                ControllerName::CloudNode => node::run(ctx, caches, shutdown).await,
                ControllerName::CloudNodeLifecycle => {
                    node_lifecycle::run(ctx, caches, shutdown).await
                }
                ControllerName::Service => service::run(ctx, caches, shutdown).await,
                ControllerName::Route => route::run(ctx, caches, shutdown).await,
            };
            (name, result)
        });
    }
    tracing::info!(controllers = %enabled, "controllers started");
    tokio::spawn(mark_synced_after_first_inventory(
        ctx.clone(),
        caches.instances.inventory().clone(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_context_defaults_are_the_flags_defaults() {
        let args = crate::cli::Cli::parse_with_warnings(["cloudstack-ccm"].map(Into::into))
            .expect("no flags parse")
            .cli
            .manager;
        assert_eq!(
            args.node_status_update_frequency,
            DEFAULT_NODE_STATUS_UPDATE_FREQUENCY
        );
        assert_eq!(args.node_monitor_period, DEFAULT_NODE_MONITOR_PERIOD);
        assert_eq!(args.service_resync_period, DEFAULT_SERVICE_RESYNC_PERIOD);
        assert_eq!(args.concurrent_service_syncs.get(), 1);
        assert_eq!(args.load_balancer_class, None);
        assert!(!args.delete_orphans);
        assert_eq!(
            route::RouteSettings::from_args(&args),
            route::RouteSettings::default()
        );
    }
}
