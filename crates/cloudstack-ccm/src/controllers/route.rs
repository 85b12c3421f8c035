//! The route controller: every Node's pod CIDR gets a VPC static route to the Node's
//! InternalIP ([`crate::cloud::routes`]), and the Node's `NetworkUnavailable` condition is
//! set as Kubernetes' route controller sets it (`RouteCreated` / `NoRouteCreated`).
//!
//! It starts only with `--allocate-node-cidrs` and `--configure-cloud-routes` (as in
//! Kubernetes), on CloudStack 4.22 or later, and only when the Nodes' VMs sit on VPC tiers;
//! otherwise one log line says why and it idles until shutdown. Every
//! `--route-reconciliation-period` it reads the Nodes from the process's one Node cache
//! (which keeps their pod CIDRs and this condition), works out the routes they need,
//! observes the routes CloudStack has and applies the difference. Each pass is counted in
//! `cloudstack_ccm_reconciles_total{controller="route"}`.
//!
//! Its jobs queue per VPC ([`NetworkQueues`] keyed by VPC id), as CloudStack queues them:
//! `createStaticRoute` and `deleteStaticRoute` synchronise on the VPC
//! (`BaseAsyncCmd.vpcSyncObject`), load-balancer and firewall commands on their tier
//! network (`networkSyncObject`), so the two never wait for each other on the server.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use tokio::time::Instant;

use k8s_openapi::api::core::v1::Node;
use kube::Api;

pub(crate) mod network_condition;
use network_condition::set_network_condition;

use super::node_cache::CachedNode;
use crate::cli::ManagerArgs;
use crate::cloud::cidr::Cidr;
use crate::cloud::instances::Instances;
use crate::cloud::job_queue::NetworkQueues;
use crate::cloud::routes::plan::{RouteInputs, RoutePlan, RouteStep, plan};
use crate::cloud::routes::{
    DesiredRoute, apply, observe, unsupported_reason, within_cluster_cidrs,
};
use crate::controllers::node::node_ref;
use crate::metrics::{RESULT_ERROR, RESULT_OK};

use super::events::{Event, EventType, Recorder};
use super::node::reporter;
use super::node_cache::NodeCache;
use super::{Caches, Context, Shutdown};

/// The controller's name in metrics.
const METRICS_NAME: &str = "route";

/// The component the route controller's Events name (the Kubernetes route controller's).
const CONTROLLER_NAME: &str = "route_controller";

/// The route controller's flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteSettings {
    /// `--configure-cloud-routes`.
    pub configure_cloud_routes: bool,
    /// `--allocate-node-cidrs`.
    pub allocate_node_cidrs: bool,
    /// `--cluster-cidr`.
    pub cluster_cidrs: Vec<Cidr>,
    /// `--route-reconciliation-period`.
    pub reconciliation_period: Duration,
}

impl Default for RouteSettings {
    /// The flags' defaults: routes configured, but no CIDRs allocated (so no controller).
    fn default() -> Self {
        RouteSettings {
            configure_cloud_routes: true,
            allocate_node_cidrs: false,
            cluster_cidrs: Vec::new(),
            reconciliation_period: Duration::from_secs(10),
        }
    }
}

impl RouteSettings {
    /// The settings of the command line.
    pub(crate) fn from_args(args: &ManagerArgs) -> Self {
        RouteSettings {
            configure_cloud_routes: args.configure_cloud_routes,
            allocate_node_cidrs: args.allocate_node_cidrs,
            cluster_cidrs: args.cluster_cidr.clone(),
            reconciliation_period: args.route_reconciliation_period,
        }
    }
}

/// Why the controller does not run with these flags and this server, if it does not.
pub fn not_started_reason(ctx: &Context) -> Option<String> {
    let settings = &ctx.routes;
    if !settings.allocate_node_cidrs || !settings.configure_cloud_routes {
        return Some(format!(
            "will not configure cloud routes for allocate-node-cidrs: {}, configure-cloud-routes: {}",
            settings.allocate_node_cidrs, settings.configure_cloud_routes
        ));
    }
    unsupported_reason(&ctx.server_version)
}

/// Runs the controller until `shutdown`, with VM answers from `caches.instances` and the
/// Nodes from `caches.nodes`.
pub async fn run(ctx: Arc<Context>, caches: Caches, shutdown: Shutdown) -> anyhow::Result<()> {
    if let Some(reason) = not_started_reason(&ctx) {
        tracing::info!("route controller not started: {reason}");
        shutdown.wait().await;
        return Ok(());
    }
    // Node initialisation first and alone: no CloudStack read of ours competes with it.
    tokio::select! {
        () = caches.first_node_pass.wait("route") => {}
        () = shutdown.wait() => return Ok(()),
    }
    let controller = RouteController::new(ctx.clone(), caches);
    let mut started = false;
    let mut refused_said: Option<String> = None;
    loop {
        let result = controller.pass().await;
        let outcome = if result.is_ok() {
            RESULT_OK
        } else {
            RESULT_ERROR
        };
        ctx.metrics.reconcile(METRICS_NAME, outcome);
        match result {
            Ok(Pass::Isolated(networks)) => {
                tracing::info!(
                    "route controller not started: the Nodes' VMs are on isolated networks ({}); VPC static routes need VPC tiers",
                    networks.join(", ")
                );
                shutdown.wait().await;
                return Ok(());
            }
            Ok(Pass::Done) if !started => {
                started = true;
                tracing::info!("route controller started");
            }
            Ok(Pass::Done) => {}
            Ok(Pass::Refused(command)) => {
                if refused_said.as_deref() != Some(command.as_str()) {
                    tracing::warn!(
                        "route controller cannot configure pod routes: the CloudStack keys' role may not call {command}; the Nodes' NetworkUnavailable condition says so, and it asks again in 30 minutes or with new keys (docs/keys.md)"
                    );
                    refused_said = Some(command);
                }
            }
            Err(error) => tracing::warn!(%error, "route reconciliation failed; retrying"),
        }
        tokio::select! {
            _ = shutdown.wait() => return Ok(()),
            _ = tokio::time::sleep(ctx.routes.reconciliation_period) => {}
        }
    }
}

/// How a pass ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pass {
    /// Routes reconciled.
    Done,
    /// Every Node VM found is on an isolated network (named): nothing to route.
    Isolated(Vec<String>),
    /// The keys' role refuses this static-route command: no route can be made.
    Refused(String),
}

/// Why a pass could not run.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    /// Reading CloudStack failed.
    #[error("reading CloudStack: {0}")]
    Observe(#[source] cloudstack::Error),
}

/// What the Nodes need, worked out from the Nodes, the VMs and the networks.
#[derive(Debug, Clone, Default)]
pub struct NodeRoutes {
    /// The plan's inputs (without the observed routes).
    pub inputs: RouteInputs,
    /// Networks of Node VMs that are not VPC tiers.
    pub isolated_networks: BTreeSet<String>,
    /// Node VMs found on VPC tiers.
    pub on_vpc: usize,
    /// Nodes that get no route, with why.
    pub skipped: Vec<String>,
}

/// The route controller's state.
pub struct RouteController {
    ctx: Arc<Context>,
    instances: Instances,
    nodes: NodeCache,
    queues: NetworkQueues,
    /// Warnings already logged (each once).
    warned: Mutex<HashSet<String>>,
    /// Posts the `FailedToCreateRoute` Events.
    recorder: Recorder,
    /// When each Node's last `FailedToCreateRoute` Event was posted, and since when its
    /// route has failed (cleared once the route is made).
    failures: Mutex<HashMap<String, RouteFailure>>,
}

/// A Node whose route could not be made.
#[derive(Debug, Clone, Copy)]
struct RouteFailure {
    /// The first failure of this run of failures.
    since: Instant,
    /// The last Event posted about it.
    posted: Instant,
}

/// The reason of the Warning the Kubernetes route controller posts on a Node whose route
/// it could not create (`route_controller.go`, `reconcile`).
pub const FAILED_TO_CREATE_ROUTE_REASON: &str = "FailedToCreateRoute";

/// The shortest time between two `FailedToCreateRoute` Events about one Node: a route
/// failing on every pass is one Event, then a reminder, not one Event per retry.
const ROUTE_FAILURE_EVENT_PERIOD: Duration = Duration::from_secs(300);

impl RouteController {
    /// A controller using `ctx` and the shared VM view and Node cache.
    pub fn new(ctx: Arc<Context>, caches: Caches) -> Self {
        RouteController {
            instances: caches.instances,
            nodes: caches.nodes,
            recorder: Recorder::new(ctx.kube.clone(), reporter(CONTROLLER_NAME)),
            ctx,
            queues: NetworkQueues::default(),
            warned: Mutex::new(HashSet::new()),
            failures: Mutex::default(),
        }
    }

    /// Plans without changing anything: the routes to create and delete.
    pub async fn plan(&self) -> Result<(NodeRoutes, RoutePlan), RouteError> {
        let nodes = self.cached_nodes().await;
        self.plan_for(&nodes).await
    }

    /// Every Node of the cluster as the Node cache holds it (once its first list is in).
    async fn cached_nodes(&self) -> Vec<Arc<CachedNode>> {
        self.nodes.wait_until_ready().await;
        self.nodes.state()
    }

    /// The routes `nodes` need against the routes CloudStack has.
    async fn plan_for(
        &self,
        nodes: &[Arc<CachedNode>],
    ) -> Result<(NodeRoutes, RoutePlan), RouteError> {
        let mut wanted = node_routes(&self.ctx, &self.instances, nodes).await?;
        wanted.inputs.observed = observe::routes(&self.ctx.cloudstack)
            .await
            .map_err(RouteError::Observe)?;
        let plan = plan(&self.ctx.cluster_name, &wanted.inputs);
        Ok((wanted, plan))
    }

    /// One reconciliation: plan, apply, set the Nodes' conditions.
    pub async fn pass(&self) -> Result<Pass, RouteError> {
        let nodes = self.cached_nodes().await;
        let (wanted, plan) = match self.plan_for(&nodes).await {
            Err(RouteError::Observe(error)) if error.is_command_refused() => {
                let command = error.command().unwrap_or("listStaticRoutes").to_string();
                return self.refused(&nodes, command).await;
            }
            other => other?,
        };
        if wanted.on_vpc == 0 && !wanted.isolated_networks.is_empty() {
            return Ok(Pass::Isolated(
                wanted.isolated_networks.iter().cloned().collect(),
            ));
        }
        for warning in wanted.skipped.iter().chain(&plan.warnings) {
            self.warn_once(warning);
        }
        let outcomes = apply::apply(
            &self.ctx.cloudstack,
            &self.queues,
            &self.ctx.cluster_name,
            &plan,
        )
        .await;
        let mut created: BTreeMap<String, bool> = plan
            .satisfied
            .iter()
            .map(|node| (node.clone(), true))
            .collect();
        for outcome in &outcomes {
            match (&outcome.step, &outcome.result) {
                (step, Ok(())) => tracing::info!("{step}: done"),
                (step, Err(error)) => tracing::warn!(%error, "{step}: failed"),
            }
            if let RouteStep::Create(route) = &outcome.step {
                let ok = outcome.result.is_ok();
                let entry = created.entry(route.node.clone()).or_insert(ok);
                *entry &= ok;
                if let Err(error) = &outcome.result {
                    self.report_failure(route, &error.to_string()).await;
                }
            }
        }
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|node, _| created.get(node) == Some(&false));
        let node_api = Api::<Node>::all(self.ctx.kube.clone());
        // The conditions as cached at the start of the pass: no read per Node.
        let listed: HashMap<&str, &CachedNode> = nodes
            .iter()
            .filter_map(|node| Some((node.metadata.name.as_deref()?, node.as_ref())))
            .collect();
        for (node, ok) in created {
            let current = listed.get(node.as_str()).copied();
            let created = if ok {
                Ok(())
            } else {
                Err("RouteController failed to create a route")
            };
            if let Err(error) = set_network_condition(&node_api, &node, current, created).await {
                tracing::warn!(node = %node, %error, "cannot set the NetworkUnavailable condition");
            }
        }
        Ok(Pass::Done)
    }

    /// The keys' role refuses the static-route commands: the Nodes that need a route say
    /// so in their `NetworkUnavailable` condition (written once; the client does not send
    /// the command again for a while, so the next passes cost no CloudStack call).
    async fn refused(
        &self,
        nodes: &[Arc<CachedNode>],
        command: String,
    ) -> Result<Pass, RouteError> {
        let wanted = node_routes(&self.ctx, &self.instances, nodes).await?;
        if wanted.on_vpc == 0 && !wanted.isolated_networks.is_empty() {
            return Ok(Pass::Isolated(
                wanted.isolated_networks.iter().cloned().collect(),
            ));
        }
        let message = format!(
            "RouteController cannot create routes: the CloudStack keys' role may not call {command} (docs/keys.md)"
        );
        let node_api = Api::<Node>::all(self.ctx.kube.clone());
        let listed: HashMap<&str, &CachedNode> = nodes
            .iter()
            .filter_map(|node| Some((node.metadata.name.as_deref()?, node.as_ref())))
            .collect();
        let needing: BTreeSet<&str> = wanted
            .inputs
            .desired
            .iter()
            .map(|route| route.node.as_str())
            .collect();
        for node in needing {
            let current = listed.get(node).copied();
            if let Err(error) = set_network_condition(&node_api, node, current, Err(&message)).await
            {
                tracing::warn!(node = %node, %error, "cannot set the NetworkUnavailable condition");
            }
        }
        Ok(Pass::Refused(command))
    }

    /// Posts the Kubernetes route controller's Warning `FailedToCreateRoute` on the Node,
    /// with its message ("Could not create route … for node … after …: …"), at most once
    /// every [`ROUTE_FAILURE_EVENT_PERIOD`] per Node. (The upstream controller posts no
    /// Event when the route is made; the `NetworkUnavailable` condition says it.)
    async fn report_failure(&self, route: &DesiredRoute, error: &str) {
        let now = Instant::now();
        let since = {
            let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
            match failures.get_mut(&route.node) {
                Some(failure)
                    if now.duration_since(failure.posted) < ROUTE_FAILURE_EVENT_PERIOD =>
                {
                    return;
                }
                Some(failure) => {
                    failure.posted = now;
                    failure.since
                }
                None => {
                    failures.insert(
                        route.node.clone(),
                        RouteFailure {
                            since: now,
                            posted: now,
                        },
                    );
                    now
                }
            }
        };
        let note = format!(
            "Could not create route {} {} for node {} after {:?}: {error}",
            route.node,
            route.cidr,
            route.node,
            now.duration_since(since)
        );
        let event = Event {
            type_: EventType::Warning,
            reason: FAILED_TO_CREATE_ROUTE_REASON.to_string(),
            note: Some(note),
            action: "CreateRoute".to_string(),
            secondary: None,
        };
        let reference = ObjectReference {
            kind: Some("Node".into()),
            api_version: Some("v1".into()),
            name: Some(route.node.clone()),
            // As the upstream controller names it: the Node's name stands for its UID.
            uid: Some(route.node.clone()),
            ..Default::default()
        };
        if let Err(error) = self.recorder.publish(&event, &reference).await {
            tracing::warn!(node = %route.node, %error, "recording an Event failed");
        }
    }

    fn warn_once(&self, warning: &str) {
        let mut warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
        if warned.insert(warning.to_string()) {
            tracing::warn!("{warning}");
        }
    }
}

/// Works out the routes `nodes` need: pod CIDRs (IPv4) of Nodes whose VM is on a VPC tier,
/// to the Node's InternalIP. A Node whose VM, network or address cannot be found now is
/// kept (its routes stay).
pub(crate) async fn node_routes(
    ctx: &Context,
    instances: &Instances,
    nodes: &[Arc<CachedNode>],
) -> Result<NodeRoutes, RouteError> {
    let networks = observe::network_vpcs(&ctx.cloudstack)
        .await
        .map_err(RouteError::Observe)?;
    let mut out = NodeRoutes {
        inputs: RouteInputs {
            cluster_cidrs: ctx.routes.cluster_cidrs.clone(),
            ..Default::default()
        },
        ..Default::default()
    };
    for node in nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        if node.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let cidrs = pod_cidrs(node);
        if cidrs.is_empty() {
            continue;
        }
        let vm = match instances.find_vm(&node_ref(node)).await {
            Ok(Some(vm)) => vm,
            Ok(None) | Err(_) => {
                out.inputs.keep_nodes.insert(name);
                continue;
            }
        };
        let network = vm.network_id.as_deref().map(str::to_ascii_lowercase);
        let vpc = match network.as_deref().map(|n| (n, networks.get(n))) {
            Some((_, Some(Some(vpc)))) => vpc.clone(),
            Some((network, Some(None))) => {
                out.isolated_networks.insert(network.to_string());
                continue;
            }
            _ => {
                out.inputs.keep_nodes.insert(name);
                continue;
            }
        };
        out.on_vpc += 1;
        let Some(next_hop) = internal_ipv4(node) else {
            out.inputs.keep_nodes.insert(name);
            continue;
        };
        for cidr in cidrs {
            if !within_cluster_cidrs(&ctx.routes.cluster_cidrs, Some(cidr)) {
                out.skipped.push(format!(
                    "Node {name}: pod CIDR {cidr} is outside --cluster-cidr; no route made"
                ));
                continue;
            }
            out.inputs.desired.push(DesiredRoute {
                node: name.clone(),
                vpc_id: vpc.clone(),
                cidr,
                next_hop,
            });
        }
    }
    Ok(out)
}

/// The Node's IPv4 pod CIDRs (`spec.podCIDRs`, else `spec.podCIDR`).
pub fn pod_cidrs(node: &CachedNode) -> Vec<Cidr> {
    let Some(spec) = &node.spec else {
        return Vec::new();
    };
    let texts: Vec<&str> = match &spec.pod_cidrs {
        Some(list) if !list.is_empty() => list.iter().map(String::as_str).collect(),
        _ => spec.pod_cidr.as_deref().into_iter().collect(),
    };
    texts
        .into_iter()
        .filter_map(Cidr::parse)
        .filter(|c| c.addr.is_ipv4())
        .collect()
}

/// The Node's first IPv4 `InternalIP`.
pub(crate) fn internal_ipv4(node: &CachedNode) -> Option<IpAddr> {
    node.status
        .as_ref()?
        .addresses
        .as_ref()?
        .iter()
        .filter(|a| a.type_ == "InternalIP")
        .filter_map(|a| a.address.parse::<IpAddr>().ok())
        .find(IpAddr::is_ipv4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::node_cache::{CachedNode, CachedNodeSpec, CachedNodeStatus};
    use k8s_openapi::api::core::v1::NodeAddress;

    #[test]
    fn pod_cidrs_and_address() {
        let node = CachedNode {
            spec: Some(CachedNodeSpec {
                pod_cidr: Some("10.244.1.0/24".into()),
                pod_cidrs: Some(vec!["10.244.1.0/24".into(), "fd00:10:244:1::/64".into()]),
                ..Default::default()
            }),
            status: Some(CachedNodeStatus {
                addresses: Some(vec![
                    NodeAddress {
                        type_: "Hostname".into(),
                        address: "n1".into(),
                    },
                    NodeAddress {
                        type_: "InternalIP".into(),
                        address: "fd00::5".into(),
                    },
                    NodeAddress {
                        type_: "InternalIP".into(),
                        address: "10.100.1.5".into(),
                    },
                ]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let cidrs: Vec<String> = pod_cidrs(&node).iter().map(ToString::to_string).collect();
        assert_eq!(cidrs, ["10.244.1.0/24"]);
        assert_eq!(internal_ipv4(&node), Some("10.100.1.5".parse().unwrap()));
        assert!(pod_cidrs(&CachedNode::default()).is_empty());
    }
}
