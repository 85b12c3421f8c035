//! cloud-node: initialise new nodes and keep their addresses current.
//!
//! A node the kubelet registers with `--cloud-provider=external` carries the taint
//! `node.cloudprovider.kubernetes.io/uninitialized`. For such a node we find its VM
//! in the inventory and, in ONE merge patch of the Node (guarded by its resourceVersion),
//! set `spec.providerID` (only when empty), the instance-type / zone / region labels (GA
//! and beta twins, non-empty values only) and drop the taint; then ONE status patch writes the addresses, and
//! a `Synced` Event is recorded. A VM not found yet keeps the taint: a Warning Event
//! names the node and the node is retried with a growing delay.
//!
//! Every `--node-status-update-frequency` the addresses of initialised nodes are
//! recomputed from one inventory view and patched only where they changed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, NodeAddress as K8sNodeAddress, Taint};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::reflector::Store;
use kube::{Resource, ResourceExt};

use super::backoff::RetryBackoff;
use super::events::{Event, EventType, Recorder, Reporter};
use super::node_cache::{CachedNode, DepartedNodes};
use super::node_vocabulary::{
    LABEL_INSTANCE_TYPE, LABEL_INSTANCE_TYPE_BETA, LABEL_REGION, LABEL_REGION_BETA, LABEL_ZONE,
    LABEL_ZONE_BETA, PROVIDED_NODE_IP_ANNOTATION, UNINITIALIZED_TAINT,
};
use super::{Caches, Context, FirstNodePass, NodeCache, Shutdown};
use crate::cloud::instances::{InstanceError, InstanceMetadata, Instances, NodeAddress, NodeRef};
use crate::cloud::inventory::{CloudStackVms, Inventory, InventorySettings};
use crate::metrics::Metrics;

/// Name of this controller in Events (`reportingController`).
pub(crate) const CONTROLLER_NAME: &str = "cloud-node-controller";
/// Metrics label of this controller.
const METRICS_NAME: &str = "node";
/// First retry delay of a node that could not be initialised; doubles up to [`MAX_RETRY`].
const FIRST_RETRY: Duration = Duration::from_millis(500);
/// Longest retry delay of a node that could not be initialised.
const MAX_RETRY: Duration = Duration::from_secs(300);

/// Why a node could not be initialised, refreshed or checked (cloud-node and
/// node-lifecycle).
#[derive(Debug, thiserror::Error)]
pub(crate) enum NodeError {
    /// No VM matches the node (yet).
    #[error("node {node}: no CloudStack VM matches its providerID or name")]
    VmNotFound {
        /// Node name.
        node: String,
    },
    /// The VM lookup failed.
    #[error(transparent)]
    Instance(#[from] InstanceError),
    /// The Kubernetes API refused a request.
    #[error("node {node}: {action}: {source}")]
    Kube {
        /// Node name.
        node: String,
        /// What we tried (`update`, `patch status`, …).
        action: &'static str,
        /// The API error.
        source: kube::Error,
    },
}

impl NodeError {
    fn kube(node: &str, action: &'static str) -> impl FnOnce(kube::Error) -> Self {
        let node = node.to_string();
        move |source| Self::Kube {
            node,
            action,
            source,
        }
    }
}

/// Runs the cloud-node controller until `shutdown` fires: VM answers from
/// `caches.instances`, Nodes from `caches.nodes`.
pub async fn run(ctx: Arc<Context>, caches: Caches, shutdown: Shutdown) -> anyhow::Result<()> {
    let recorder = Recorder::new(ctx.kube.clone(), reporter(CONTROLLER_NAME));
    let controller = Arc::new(
        CloudNode::new(
            ctx.kube.clone(),
            caches.instances,
            recorder,
            ctx.metrics.clone(),
            ctx.node_status_update_frequency,
        )
        .with_first_pass(caches.first_node_pass)
        .with_departed(caches.nodes.departed()),
    );
    controller
        .run(&caches.nodes, async move { shutdown.wait().await })
        .await;
    Ok(())
}

/// Nodes initialised or refreshed at the same time.
pub(crate) const NODE_SYNC_CONCURRENCY: u16 = 16;

/// A node-facing view of the VMs for this context: one [`Inventory`] over
/// `listVirtualMachines` with the default freshness, counted in the metrics, and the
/// cloud-config `region`.
pub(crate) fn instances_for(ctx: &Context) -> Instances {
    let source = Arc::new(CloudStackVms::new(ctx.cloudstack.clone()));
    let inventory =
        Inventory::new(source, InventorySettings::default()).with_observer(ctx.metrics.clone());
    Instances::new(Arc::new(inventory), ctx.cloud_config.region.clone())
}

/// The Event reporter of a controller.
pub fn reporter(controller: &str) -> Reporter {
    Reporter {
        controller: controller.to_string(),
        instance: None,
    }
}

/// State shared by every reconciliation of the cloud-node controller.
pub struct CloudNode {
    client: kube::Client,
    instances: Instances,
    recorder: Recorder,
    metrics: Arc<Metrics>,
    status_update_frequency: Duration,
    failures: RetryBackoff,
    first_pass: FirstNodePass,
    /// The providerIDs of Nodes deleted lately (see [`DepartedNodes`]).
    departed: DepartedNodes,
}

impl CloudNode {
    /// A controller writing with `client`, asking `instances`, recording Events with
    /// `recorder` and refreshing addresses every `status_update_frequency`.
    pub fn new(
        client: kube::Client,
        instances: Instances,
        recorder: Recorder,
        metrics: Arc<Metrics>,
        status_update_frequency: Duration,
    ) -> Self {
        Self {
            client,
            instances,
            recorder,
            metrics,
            status_update_frequency,
            failures: RetryBackoff::new(FIRST_RETRY, MAX_RETRY),
            first_pass: FirstNodePass::opened(),
            departed: DepartedNodes::default(),
        }
    }

    /// Reads the Nodes deleted lately from `departed` (the Node cache's), so a Node
    /// registered again under a departed name is matched in a VM list newer than it.
    pub(crate) fn with_departed(mut self, departed: DepartedNodes) -> Self {
        self.departed = departed;
        self
    }

    /// Opens `first_pass` once the Nodes awaiting initialisation when the Node cache
    /// first fills have each been tried once.
    pub(crate) fn with_first_pass(mut self, first_pass: FirstNodePass) -> Self {
        self.first_pass = first_pass;
        self
    }

    /// Runs until `shutdown` completes over the Nodes of `nodes`: initialises tainted
    /// nodes as they appear and refreshes addresses periodically.
    pub async fn run(
        self: Arc<Self>,
        nodes: &NodeCache,
        shutdown: impl Future<Output = ()> + Send + Sync + 'static,
    ) {
        let store = nodes.store();
        // Bounded like the Kubernetes cloud-node controller's workers: every node of a large
        // cluster at once would hold thousands of requests (and their memory) in flight.
        let controller = Controller::for_shared_stream(nodes.subscribe(), store.clone())
            .with_config(ControllerConfig::default().concurrency(NODE_SYNC_CONCURRENCY));
        let first_list = tokio::spawn({
            let (nodes, first_pass) = (nodes.clone(), self.first_pass.clone());
            async move {
                nodes.wait_until_ready().await;
                first_pass.begin(
                    nodes
                        .state()
                        .iter()
                        .filter(|node| {
                            node.meta().deletion_timestamp.is_none()
                                && has_taint(node, UNINITIALIZED_TAINT)
                        })
                        .map(|node| node.name_any()),
                );
            }
        });
        let (stop_refresh, refresh_stopped) = tokio::sync::oneshot::channel::<()>();
        // In a JoinSet, aborted if this future is dropped (a lost leader lease).
        let mut refresher = tokio::task::JoinSet::new();
        refresher.spawn(
            self.clone()
                .refresh_addresses_every_period(store, refresh_stopped),
        );
        controller
            .graceful_shutdown_on(shutdown)
            .run(reconcile, error_policy, self)
            .for_each(|result| async move {
                if let Err(error) = result {
                    tracing::debug!(%error, "cloud-node reconcile ended with an error");
                }
            })
            .await;
        tracing::debug!("cloud-node controller stopped");
        first_list.abort();
        let _ = stop_refresh.send(());
        let _ = refresher.join_next().await;
        tracing::debug!("cloud-node address refresh stopped");
    }

    async fn refresh_addresses_every_period(
        self: Arc<Self>,
        store: Store<CachedNode>,
        mut stop: tokio::sync::oneshot::Receiver<()>,
    ) {
        // Not `store.wait_until_ready()`: the controller waits on the same store and
        // only one waiter is woken. Until the store fills, a tick sees no nodes.
        let mut ticker = tokio::time::interval(self.status_update_frequency);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        loop {
            tokio::select! {
                _ = &mut stop => return,
                _ = ticker.tick() => self.refresh_addresses(&store.state()).await,
            }
        }
    }

    /// Recomputes the addresses of every initialised node in `nodes` and patches the
    /// ones that changed. One inventory refresh (one list call) serves all nodes.
    pub async fn refresh_addresses(&self, nodes: &[Arc<CachedNode>]) {
        if let Err(error) = self.instances.inventory().refresh().await {
            tracing::warn!(%error, "refreshing node addresses skipped");
            return;
        }
        for node in nodes
            .iter()
            .filter(|node| !has_taint(node, UNINITIALIZED_TAINT))
        {
            let name = node.name_any();
            let result = self.refresh_node_addresses(node).await;
            let outcome = match &result {
                Ok(true) => "updated",
                Ok(false) => "unchanged",
                Err(_) => crate::metrics::RESULT_ERROR,
            };
            self.metrics.reconcile(METRICS_NAME, outcome);
            if let Err(error) = result {
                tracing::warn!(node = %name, %error, "refreshing node addresses failed");
            }
        }
    }

    /// Patches the node's addresses when they differ from its VM's; `Ok(true)` if patched.
    async fn refresh_node_addresses(&self, node: &CachedNode) -> Result<bool, NodeError> {
        let name = node.name_any();
        let Some(metadata) = self.instances.metadata(&node_ref(node)).await? else {
            // A node whose VM is gone is the lifecycle controller's business.
            return Ok(false);
        };
        let wanted = to_k8s_addresses(&metadata.addresses);
        let current = node
            .status
            .as_ref()
            .and_then(|status| status.addresses.clone())
            .unwrap_or_default();
        if current == wanted {
            return Ok(false);
        }
        self.patch_addresses(&name, &wanted).await?;
        tracing::info!(node = %name, "node addresses updated");
        Ok(true)
    }

    async fn initialise(&self, node: &CachedNode) -> Result<(), NodeError> {
        let name = node.name_any();
        let previous = self.departed.provider_id(&name);
        let reference = NodeRef {
            previous_provider_id: previous.as_deref(),
            ..node_ref(node)
        };
        let metadata = self
            .instances
            .metadata(&reference)
            .await?
            .ok_or_else(|| NodeError::VmNotFound { node: name.clone() })?;
        let api: Api<Node> = Api::all(self.client.clone());
        let patch = initialisation_patch(node, &metadata);
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(NodeError::kube(&name, "patch"))?;
        self.patch_addresses(&name, &to_k8s_addresses(&metadata.addresses))
            .await?;
        tracing::info!(node = %name, provider_id = %metadata.provider_id, "node initialised");
        self.publish(
            node,
            EventType::Normal,
            "Synced",
            "Node synced successfully".to_string(),
        )
        .await;
        Ok(())
    }

    async fn patch_addresses(
        &self,
        name: &str,
        addresses: &[K8sNodeAddress],
    ) -> Result<(), NodeError> {
        let api: Api<Node> = Api::all(self.client.clone());
        let patch = serde_json::json!({ "status": { "addresses": addresses } });
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(NodeError::kube(name, "patch status"))?;
        Ok(())
    }

    async fn publish(&self, node: &CachedNode, type_: EventType, reason: &str, note: String) {
        let event = Event {
            type_,
            reason: reason.to_string(),
            note: Some(note),
            action: "InitializeNode".to_string(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, &node.object_ref(&())).await {
            tracing::warn!(node = %node.name_any(), %error, "recording an Event failed");
        }
    }

    /// The delay before retrying `node`, growing with each failure in a row.
    fn next_retry(&self, node: &str) -> Duration {
        self.failures.next_delay(node)
    }

    fn forget_failures(&self, node: &str) {
        self.failures.reset(node);
    }
}

async fn reconcile(node: Arc<CachedNode>, ctx: Arc<CloudNode>) -> Result<Action, NodeError> {
    let name = node.name_any();
    if node.meta().deletion_timestamp.is_some() || !has_taint(&node, UNINITIALIZED_TAINT) {
        ctx.first_pass.tried(&name);
        ctx.forget_failures(&name);
        return Ok(Action::await_change());
    }
    let started = std::time::Instant::now();
    let result = ctx.initialise(&node).await;
    ctx.first_pass.tried(&name);
    ctx.metrics
        .reconcile_duration(METRICS_NAME, started.elapsed());
    match result {
        Ok(()) => {
            ctx.metrics
                .reconcile(METRICS_NAME, crate::metrics::RESULT_OK);
            ctx.forget_failures(&name);
            Ok(Action::await_change())
        }
        Err(error) => {
            let result = match error {
                NodeError::VmNotFound { .. } => "not-found",
                _ => crate::metrics::RESULT_ERROR,
            };
            ctx.metrics.reconcile(METRICS_NAME, result);
            tracing::warn!(node = %name, %error, "initialising node failed");
            let reason = match error {
                NodeError::VmNotFound { .. } => "InstanceNotFound",
                _ => "SyncNodeFailed",
            };
            ctx.publish(&node, EventType::Warning, reason, error.to_string())
                .await;
            Err(error)
        }
    }
}

fn error_policy(node: Arc<CachedNode>, _error: &NodeError, ctx: Arc<CloudNode>) -> Action {
    Action::requeue(ctx.next_retry(&node.name_any()))
}

/// The strings the cloud layer needs from a node.
pub(crate) fn node_ref(node: &CachedNode) -> NodeRef<'_> {
    NodeRef {
        name: node.metadata.name.as_deref().unwrap_or_default(),
        provider_id: node
            .spec
            .as_ref()
            .and_then(|spec| spec.provider_id.as_deref())
            .filter(|id| !id.is_empty()),
        provided_node_ip: node
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(PROVIDED_NODE_IP_ANNOTATION))
            .map(String::as_str),
        created: node.metadata.creation_timestamp.as_ref().map(|time| time.0),
        known_since: node.seen.0,
        previous_provider_id: None,
    }
}

/// True when the node carries a taint with this key.
pub fn has_taint(node: &CachedNode, key: &str) -> bool {
    taints(node).iter().any(|taint| taint.key == key)
}

/// The node's taints.
pub fn taints(node: &CachedNode) -> &[Taint] {
    node.spec
        .as_ref()
        .and_then(|spec| spec.taints.as_deref())
        .unwrap_or_default()
}

/// The merge patch that initialises `node`: the instance-type / zone / region labels
/// (non-empty values only; the Node's other labels stay, a merge patch only adds keys),
/// `spec.providerID` when empty, and the taints without the uninitialized one. It carries
/// the cached resourceVersion, so a Node changed since (say, a taint added) is refused
/// with a conflict and retried from the new state instead of being overwritten.
pub(crate) fn initialisation_patch(
    node: &CachedNode,
    metadata: &InstanceMetadata,
) -> serde_json::Value {
    let labels: BTreeMap<&str, &str> = [
        (LABEL_INSTANCE_TYPE, &metadata.instance_type),
        (LABEL_INSTANCE_TYPE_BETA, &metadata.instance_type),
        (LABEL_ZONE, &metadata.zone),
        (LABEL_ZONE_BETA, &metadata.zone),
        (LABEL_REGION, &metadata.region),
        (LABEL_REGION_BETA, &metadata.region),
    ]
    .into_iter()
    .filter(|(_, value)| !value.is_empty())
    .map(|(key, value)| (key, value.as_str()))
    .collect();
    let taints: Vec<&Taint> = taints(node)
        .iter()
        .filter(|taint| taint.key != UNINITIALIZED_TAINT)
        .collect();
    let mut spec = serde_json::json!({ "taints": taints });
    let provider_id = node
        .spec
        .as_ref()
        .and_then(|spec| spec.provider_id.as_deref());
    if provider_id.is_none_or(str::is_empty) {
        spec["providerID"] = serde_json::json!(metadata.provider_id);
    }
    serde_json::json!({
        "metadata": { "resourceVersion": node.metadata.resource_version, "labels": labels },
        "spec": spec,
    })
}

/// Converts addresses to the Kubernetes type.
pub(crate) fn to_k8s_addresses(addresses: &[NodeAddress]) -> Vec<K8sNodeAddress> {
    addresses
        .iter()
        .map(|address| K8sNodeAddress {
            type_: address.kind.as_str().to_string(),
            address: address.address.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::instances::AddressKind;
    use crate::controllers::node_cache::{CachedNode, CachedNodeSpec};

    fn metadata(instance_type: &str) -> InstanceMetadata {
        InstanceMetadata {
            provider_id: "external-cloudstack://8a0b4f3e-1c2d-4e5f-9a8b-7c6d5e4f3a2b".into(),
            instance_type: instance_type.into(),
            zone: "zone-1".into(),
            region: "zone-1".into(),
            addresses: vec![NodeAddress {
                kind: AddressKind::InternalIp,
                address: "10.1.1.5".into(),
            }],
        }
    }

    fn tainted_node(provider_id: Option<&str>) -> CachedNode {
        CachedNode {
            metadata: kube::api::ObjectMeta {
                name: Some("worker-1".into()),
                labels: Some(BTreeMap::from([("keep".into(), "me".into())])),
                ..Default::default()
            },
            spec: Some(CachedNodeSpec {
                provider_id: provider_id.map(str::to_string),
                taints: Some(vec![
                    Taint {
                        key: UNINITIALIZED_TAINT.into(),
                        value: Some("true".into()),
                        effect: "NoSchedule".into(),
                        time_added: None,
                    },
                    Taint {
                        key: "dedicated".into(),
                        value: Some("db".into()),
                        effect: "NoSchedule".into(),
                        time_added: None,
                    },
                ]),
                ..Default::default()
            }),
            status: None,
            seen: Default::default(),
        }
    }

    #[test]
    fn initialisation_sets_labels_provider_id_and_drops_the_taint() {
        let mut node = tainted_node(None);
        node.metadata.resource_version = Some("7".into());
        let patch = initialisation_patch(&node, &metadata("Small-Instance"));
        let labels = &patch["metadata"]["labels"];
        for key in [LABEL_INSTANCE_TYPE, LABEL_INSTANCE_TYPE_BETA] {
            assert_eq!(labels[key], "Small-Instance");
        }
        for key in [LABEL_ZONE, LABEL_ZONE_BETA, LABEL_REGION, LABEL_REGION_BETA] {
            assert_eq!(labels[key], "zone-1");
        }
        // Other labels are not in the merge patch, so the API server keeps them.
        assert!(labels.get("keep").is_none());
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        assert_eq!(
            patch["spec"]["providerID"],
            "external-cloudstack://8a0b4f3e-1c2d-4e5f-9a8b-7c6d5e4f3a2b"
        );
        let taints: Vec<&str> = patch["spec"]["taints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["key"].as_str().unwrap())
            .collect();
        assert_eq!(taints, vec!["dedicated"]);
    }

    #[test]
    fn initialisation_keeps_an_existing_provider_id_and_skips_empty_labels() {
        let existing = "cloudstack:///8a0b4f3e-1c2d-4e5f-9a8b-7c6d5e4f3a2b";
        let patch = initialisation_patch(&tainted_node(Some(existing)), &metadata(""));
        assert!(patch["spec"].get("providerID").is_none());
        let labels = &patch["metadata"]["labels"];
        assert!(labels.get(LABEL_INSTANCE_TYPE).is_none());
        assert!(labels.get(LABEL_INSTANCE_TYPE_BETA).is_none());
        assert_eq!(labels[LABEL_ZONE], "zone-1");
    }

    #[test]
    fn retry_delay_doubles_up_to_five_minutes() {
        let backoff = RetryBackoff::new(FIRST_RETRY, MAX_RETRY);
        let delays: Vec<u64> = (0..4)
            .map(|_| backoff.next_delay("node-1").as_millis() as u64)
            .collect();
        assert_eq!(delays, vec![500, 1000, 2000, 4000]);
        for _ in 0..30 {
            backoff.next_delay("node-1");
        }
        assert_eq!(backoff.next_delay("node-1"), MAX_RETRY);
    }

    #[test]
    fn node_ref_reads_provider_id_and_annotation() {
        let mut node = tainted_node(Some(""));
        node.metadata.annotations = Some(BTreeMap::from([(
            PROVIDED_NODE_IP_ANNOTATION.to_string(),
            "10.1.1.5".to_string(),
        )]));
        let reference = node_ref(&node);
        assert_eq!(reference.name, "worker-1");
        assert_eq!(
            reference.provider_id, None,
            "an empty providerID is no providerID"
        );
        assert_eq!(reference.provided_node_ip, Some("10.1.1.5"));
    }
}
