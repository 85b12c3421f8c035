//! cloud-node-lifecycle: delete nodes whose VM is gone, taint nodes whose VM is stopped.
//!
//! Every `--node-monitor-period`, for each node from a watch-fed cache, like the
//! Kubernetes cloud-node-lifecycle controller:
//! * Ready: remove the `node.cloudprovider.kubernetes.io/shutdown` taint if present.
//! * NotReady (Ready condition `False` or `Unknown`): VM stopped → add that taint
//!   (`NoSchedule`); VM gone → a `DeletingNode` Event and the Node is deleted.
//!
//! All answers come from the inventory (one list call serves every node); a failed
//! lookup never deletes anything.
//!
//! Deletions pass a safety rail first ([`deletion_verdict`]): a VM list that holds none,
//! or fewer than half, of the cluster's initialised Nodes says more about the list (a
//! wrong `project-id` or `zone`, an account that cannot see the VMs) than about the
//! Nodes, so nothing is deleted; each Node held back gets one `NodeDeletionRefused`
//! Warning Event and every held-back deletion counts in
//! `cloudstack_ccm_reconciles_total{controller="node-lifecycle",result="deletion_refused"}`.
//! Allowed deletions are rate-limited: at most one Node in ten of the initialised ones
//! (at least one) per monitor period; the rest wait for the next period. The cache keeps each Node reduced to what these
//! decisions read ([`keep_node_cache_fields`]); taints are changed with a merge patch
//! guarded by the Node's resourceVersion, so nothing the cache dropped is written back.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Taint};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};

use super::events::{Event, EventType, Recorder};
use super::node::{
    UNINITIALIZED_TAINT, has_taint, instances_for, keep_node_cache_fields, node_ref, reporter,
};
use super::{Context, Shutdown};
use crate::cloud::instances::{InstanceError, Instances};
use crate::metrics::Metrics;

/// Taint put on nodes whose VM is shut down.
pub const SHUTDOWN_TAINT: &str = "node.cloudprovider.kubernetes.io/shutdown";
/// Reason of the Event recorded before a node is deleted.
pub const DELETING_NODE_REASON: &str = "DeletingNode";
/// Reason of the Warning Event recorded when the safety rail holds a deletion back.
pub const DELETION_REFUSED_REASON: &str = "NodeDeletionRefused";
/// Metrics `result` of a deletion the safety rail held back.
pub const DELETION_REFUSED_RESULT: &str = "deletion_refused";
/// Metrics `result` of a deletion the rate limit put off to a later period.
pub const DELETION_DEFERRED_RESULT: &str = "deletion_deferred";
/// At most one initialised Node in this many is deleted per monitor period (at least one).
pub const NODES_PER_DELETION: usize = 10;
/// Name of this controller in Events (`reportingController`).
pub const CONTROLLER_NAME: &str = "cloud-node-lifecycle-controller";
/// Metrics label of this controller.
const METRICS_NAME: &str = "node-lifecycle";

/// What one look at a node decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LifecycleAction {
    /// Nothing to change.
    None,
    /// The VM is shut down: add the shutdown taint.
    AddShutdownTaint,
    /// The node is Ready again: remove the shutdown taint.
    RemoveShutdownTaint,
    /// The VM is gone: delete the node.
    Delete,
}

/// Why a node could not be handled.
#[derive(Debug, thiserror::Error)]
pub enum LifecycleError {
    /// The VM lookup failed.
    #[error(transparent)]
    Instance(#[from] InstanceError),
    /// The Kubernetes API refused a request.
    #[error("node {node}: {action}: {source}")]
    Kube {
        /// Node name.
        node: String,
        /// What we tried.
        action: &'static str,
        /// The API error.
        source: kube::Error,
    },
}

/// Runs the cloud-node-lifecycle controller until `shutdown` fires, with VM answers
/// from [`instances_for`]. See [`run_with`] to share one inventory between controllers.
pub async fn run(ctx: Arc<Context>, shutdown: Shutdown) -> anyhow::Result<()> {
    let instances = instances_for(&ctx);
    run_with(ctx, instances, shutdown).await
}

/// Runs the cloud-node-lifecycle controller until `shutdown` fires, answering from `instances`.
pub async fn run_with(
    ctx: Arc<Context>,
    instances: Instances,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    run_on_store(ctx, instances, shutdown, None).await
}

/// [`run_with`], reading the Nodes from the cloud-node controller's cache handed over on
/// `shared` (see [`super::node::StoreHandoff`]) instead of a watch of its own; with
/// `None`, it watches the Nodes itself.
pub async fn run_on_store(
    ctx: Arc<Context>,
    instances: Instances,
    shutdown: Shutdown,
    shared: Option<SharedStore>,
) -> anyhow::Result<()> {
    let recorder = Recorder::new(ctx.kube.clone(), reporter(CONTROLLER_NAME));
    let controller = Arc::new(NodeLifecycle::new(
        ctx.kube.clone(),
        instances,
        recorder,
        ctx.metrics.clone(),
        ctx.node_monitor_period,
    ));
    match shared {
        Some(shared) => controller.run_on_shared(shutdown.wait(), shared).await,
        None => controller.run(shutdown.wait()).await,
    }
    Ok(())
}

/// The receiving end of [`super::node::StoreHandoff`].
pub type SharedStore = tokio::sync::watch::Receiver<Option<Store<Node>>>;

/// What the safety rail says about the deletions one look wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeletionVerdict {
    /// Delete at most this many now (the others wait for the next period).
    Allow(usize),
    /// Delete none: the VM list does not look like this cluster's.
    Refuse,
}

/// The safety rail: with `initialised` Nodes in the cluster (no uninitialized taint, a
/// usable VM key) of which `found` have their VM in the inventory, refuse every deletion
/// when `found` is zero or less than half of `initialised`; else allow
/// `max(1, initialised / NODES_PER_DELETION)` deletions this period.
pub fn deletion_verdict(initialised: usize, found: usize) -> DeletionVerdict {
    if found == 0 || found * 2 < initialised {
        return DeletionVerdict::Refuse;
    }
    DeletionVerdict::Allow((initialised / NODES_PER_DELETION).max(1))
}

/// State of the cloud-node-lifecycle controller.
pub struct NodeLifecycle {
    client: kube::Client,
    instances: Instances,
    recorder: Recorder,
    metrics: Arc<Metrics>,
    monitor_period: Duration,
    /// Nodes whose deletion the safety rail holds back (their Warning Event is recorded).
    refused: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl NodeLifecycle {
    /// A controller looking at all nodes every `monitor_period`.
    pub fn new(
        client: kube::Client,
        instances: Instances,
        recorder: Recorder,
        metrics: Arc<Metrics>,
        monitor_period: Duration,
    ) -> Self {
        Self {
            client,
            instances,
            recorder,
            metrics,
            monitor_period,
            refused: Default::default(),
        }
    }

    /// Runs until `shutdown` completes.
    pub async fn run(self: Arc<Self>, shutdown: impl Future<Output = ()> + Send) {
        let api: Api<Node> = Api::all(self.client.clone());
        let (store, writer) = reflector::store();
        let nodes = watcher(api, super::node::node_watch_config())
            .default_backoff()
            .modify(keep_node_cache_fields);
        let feed = reflector::reflector(writer, nodes)
            .touched_objects()
            .for_each(|event| async move {
                if let Err(error) = event {
                    tracing::debug!(%error, "node watch error");
                }
            });
        let monitor = self.monitor_every_period(store);
        tokio::select! {
            _ = shutdown => {}
            _ = feed => {}
            _ = monitor => {}
        }
    }

    /// Runs until `shutdown` completes, over the Nodes of another controller's cache
    /// (once it is handed over). That cache is not waited on (its owner waits on it, and
    /// only one waiter is woken): until it is filled, a look sees no nodes.
    pub async fn run_on_shared(
        self: Arc<Self>,
        shutdown: impl Future<Output = ()> + Send,
        mut shared: SharedStore,
    ) {
        let monitor = async {
            let Ok(store) = shared.wait_for(Option::is_some).await.map(|s| s.clone()) else {
                return;
            };
            if let Some(store) = store {
                self.monitor_periodically(store).await;
            }
        };
        tokio::select! {
            _ = shutdown => {}
            _ = monitor => {}
        }
    }

    async fn monitor_every_period(&self, store: Store<Node>) {
        if store.wait_until_ready().await.is_err() {
            return;
        }
        self.monitor_periodically(store).await;
    }

    async fn monitor_periodically(&self, store: Store<Node>) {
        let mut ticker = tokio::time::interval(self.monitor_period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            self.monitor(&store.state()).await;
        }
    }

    /// Looks at each node once and acts on it; deletions go through the safety rail
    /// (see the module documentation) once every node has been looked at.
    pub async fn monitor(&self, nodes: &[Arc<Node>]) {
        let mut doomed = Vec::new();
        for node in nodes {
            let started = std::time::Instant::now();
            let result = match self.decide(node).await {
                Ok(LifecycleAction::Delete) => {
                    doomed.push(node.clone());
                    continue;
                }
                Ok(action) => self.act(node, action).await,
                Err(error) => Err(error),
            };
            self.record(node, started, result);
        }
        if doomed.is_empty() {
            self.forget_refusals(&[]);
            return;
        }
        let (initialised, found) = match self.coverage(nodes).await {
            Ok(coverage) => coverage,
            Err(error) => {
                tracing::warn!(%error, "cannot check the VM list before deleting nodes; deleting none");
                for _ in &doomed {
                    self.metrics.reconcile(METRICS_NAME, "error");
                }
                return;
            }
        };
        match deletion_verdict(initialised, found) {
            DeletionVerdict::Refuse => {
                self.forget_refusals(&doomed);
                for node in &doomed {
                    self.refuse_deletion(node, initialised, found).await;
                }
            }
            DeletionVerdict::Allow(budget) => {
                self.forget_refusals(&[]);
                for (index, node) in doomed.iter().enumerate() {
                    if index >= budget {
                        tracing::info!(node = %node.name_any(), "deleting node in a later period (rate limit)");
                        self.metrics
                            .reconcile(METRICS_NAME, DELETION_DEFERRED_RESULT);
                        continue;
                    }
                    let started = std::time::Instant::now();
                    let result = self.act(node, LifecycleAction::Delete).await;
                    self.record(node, started, result);
                }
            }
        }
    }

    /// Counts one look at `node` in the metrics, and logs a failure.
    fn record(
        &self,
        node: &Node,
        started: std::time::Instant,
        result: Result<LifecycleAction, LifecycleError>,
    ) {
        self.metrics
            .reconcile_duration(METRICS_NAME, started.elapsed());
        match result {
            Ok(action) => self.metrics.reconcile(METRICS_NAME, action_label(action)),
            Err(error) => {
                self.metrics.reconcile(METRICS_NAME, "error");
                tracing::warn!(node = %node.name_any(), %error, "node lifecycle check failed");
            }
        }
    }

    /// How many of `nodes` are initialised, and how many of those the VM list holds, all
    /// resolved against one VM list.
    /// A node whose VM key is unusable (a foreign providerID) is not counted; one whose
    /// name several VMs share is found.
    async fn coverage(&self, nodes: &[Arc<Node>]) -> Result<(usize, usize), LifecycleError> {
        let snapshot = self
            .instances
            .inventory()
            .snapshot()
            .await
            .map_err(InstanceError::from)?;
        let (mut initialised, mut found) = (0, 0);
        for node in nodes {
            if has_taint(node, UNINITIALIZED_TAINT) {
                continue;
            }
            match self.instances.find_vm_in(&snapshot, &node_ref(node)) {
                Ok(Some(_)) | Err(InstanceError::AmbiguousName { .. }) => {
                    initialised += 1;
                    found += 1;
                }
                Ok(None) => initialised += 1,
                Err(_) => {}
            }
        }
        Ok((initialised, found))
    }

    /// Holds the deletion of `node` back: counted each time, logged and recorded as a
    /// Warning Event once until the rail lets deletions through again.
    async fn refuse_deletion(&self, node: &Node, initialised: usize, found: usize) {
        self.metrics
            .reconcile(METRICS_NAME, DELETION_REFUSED_RESULT);
        let name = node.name_any();
        let first = self
            .refused
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(name.clone());
        if !first {
            return;
        }
        let note = format!(
            "Not deleting node {name} although CloudStack lists no VM for it: the VM list holds \
             {found} of the cluster's {initialised} initialised Nodes (fewer than half), which \
             points at the cloud-config (project-id, zone) or the account's rights rather than \
             at the Nodes; delete the Node by hand if its VM is really gone"
        );
        tracing::warn!(node = %name, "{note}");
        let event = Event {
            type_: EventType::Warning,
            reason: DELETION_REFUSED_REASON.to_string(),
            note: Some(note),
            action: "DeleteNode".to_string(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, &node.object_ref(&())).await {
            tracing::warn!(node = %name, %error, "recording an Event failed");
        }
    }

    /// Keeps the refused-node memory to `still_refused` (a node leaving it gets a new
    /// Warning Event if it is held back again later).
    fn forget_refusals(&self, still_refused: &[Arc<Node>]) {
        let mut refused = self
            .refused
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if refused.is_empty() {
            return;
        }
        let keep: std::collections::HashSet<String> =
            still_refused.iter().map(|n| n.name_any()).collect();
        refused.retain(|name| keep.contains(name));
    }

    /// Carries out `action` on `node`.
    async fn act(
        &self,
        node: &Node,
        action: LifecycleAction,
    ) -> Result<LifecycleAction, LifecycleError> {
        let name = node.name_any();
        match action {
            LifecycleAction::None => {}
            LifecycleAction::AddShutdownTaint | LifecycleAction::RemoveShutdownTaint => {
                let mut updated = node.clone();
                set_shutdown_taint(&mut updated, action == LifecycleAction::AddShutdownTaint);
                Api::<Node>::all(self.client.clone())
                    .patch(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(taints_patch(&updated)),
                    )
                    .await
                    .map_err(|source| LifecycleError::Kube {
                        node: name.clone(),
                        action: "update taints",
                        source,
                    })?;
                tracing::info!(node = %name, ?action, "shutdown taint changed");
            }
            LifecycleAction::Delete => {
                tracing::info!(node = %name, "deleting node: its VM no longer exists");
                let event = Event {
                    type_: EventType::Normal,
                    reason: DELETING_NODE_REASON.to_string(),
                    note: Some(format!(
                        "Deleting node {name} because it does not exist in CloudStack"
                    )),
                    action: "DeleteNode".to_string(),
                    secondary: None,
                };
                if let Err(error) = self.recorder.publish(&event, &node.object_ref(&())).await {
                    tracing::warn!(node = %name, %error, "recording an Event failed");
                }
                Api::<Node>::all(self.client.clone())
                    .delete(&name, &DeleteParams::default())
                    .await
                    .map_err(|source| LifecycleError::Kube {
                        node: name.clone(),
                        action: "delete",
                        source,
                    })?;
            }
        }
        Ok(action)
    }

    /// Decides what to do with `node`, reading only the inventory.
    pub async fn decide(&self, node: &Node) -> Result<LifecycleAction, LifecycleError> {
        let tainted = has_taint(node, SHUTDOWN_TAINT);
        if is_ready(node) {
            return Ok(if tainted {
                LifecycleAction::RemoveShutdownTaint
            } else {
                LifecycleAction::None
            });
        }
        Ok(match self.instances.find_vm(&node_ref(node)).await? {
            None => LifecycleAction::Delete,
            Some(vm) if vm.is_shut_down() && !tainted => LifecycleAction::AddShutdownTaint,
            Some(_) => LifecycleAction::None,
        })
    }
}

fn action_label(action: LifecycleAction) -> &'static str {
    match action {
        LifecycleAction::None => "ok",
        LifecycleAction::AddShutdownTaint => "tainted",
        LifecycleAction::RemoveShutdownTaint => "untainted",
        LifecycleAction::Delete => "deleted",
    }
}

/// True when the node's `Ready` condition is `True`.
pub fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .and_then(|conditions| conditions.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|ready| ready.status == "True")
}

/// A merge patch setting the node's taints to those of `node`, valid only while the Node
/// still has `node`'s resourceVersion (a concurrent change makes it fail with a conflict,
/// as an update would).
pub fn taints_patch(node: &Node) -> serde_json::Value {
    let taints = node.spec.as_ref().and_then(|spec| spec.taints.clone());
    serde_json::json!({
        "metadata": { "resourceVersion": node.metadata.resource_version },
        "spec": { "taints": taints.unwrap_or_default() },
    })
}

/// Adds (`true`) or removes (`false`) the shutdown taint.
pub fn set_shutdown_taint(node: &mut Node, present: bool) {
    let taints = node
        .spec
        .get_or_insert_with(Default::default)
        .taints
        .get_or_insert_with(Vec::new);
    taints.retain(|taint| taint.key != SHUTDOWN_TAINT);
    if present {
        taints.push(Taint {
            key: SHUTDOWN_TAINT.to_string(),
            value: None,
            effect: "NoSchedule".to_string(),
            time_added: None,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::node::PROVIDED_NODE_IP_ANNOTATION;
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus};

    fn node_with_ready(status: Option<&str>) -> Node {
        Node {
            status: Some(NodeStatus {
                conditions: status.map(|s| {
                    vec![NodeCondition {
                        type_: "Ready".into(),
                        status: s.into(),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn readiness_from_the_ready_condition() {
        assert!(is_ready(&node_with_ready(Some("True"))));
        assert!(!is_ready(&node_with_ready(Some("False"))));
        assert!(!is_ready(&node_with_ready(Some("Unknown"))));
        assert!(!is_ready(&node_with_ready(None)));
    }

    #[test]
    fn trimmed_nodes_keep_what_the_decisions_read() {
        let mut node = node_with_ready(Some("False"));
        node.metadata.name = Some("worker-1".into());
        node.metadata.resource_version = Some("42".into());
        node.metadata.labels = Some([("zone".to_string(), "z1".to_string())].into());
        node.metadata.annotations = Some(
            [
                (
                    PROVIDED_NODE_IP_ANNOTATION.to_string(),
                    "10.1.1.5".to_string(),
                ),
                ("other".to_string(), "x".to_string()),
            ]
            .into(),
        );
        node.spec = Some(NodeSpec {
            provider_id: Some("external-cloudstack://vm-1".into()),
            pod_cidr: Some("10.244.0.0/24".into()),
            ..NodeSpec::default()
        });
        set_shutdown_taint(&mut node, true);
        let status = node.status.as_mut().unwrap();
        status.conditions.as_mut().unwrap().push(NodeCondition {
            type_: "MemoryPressure".into(),
            status: "False".into(),
            ..Default::default()
        });
        status.images = Some(Vec::new());
        let mut trimmed = node.clone();
        keep_node_cache_fields(&mut trimmed);
        assert_eq!(is_ready(&trimmed), is_ready(&node));
        assert!(has_taint(&trimmed, SHUTDOWN_TAINT));
        assert_eq!(node_ref(&trimmed), node_ref(&node));
        assert!(trimmed.metadata.labels.is_none());
        assert_eq!(trimmed.metadata.annotations.as_ref().unwrap().len(), 1);
        let status = trimmed.status.as_ref().unwrap();
        assert!(status.images.is_none());
        assert_eq!(status.conditions.as_ref().unwrap().len(), 1);
        let patch = taints_patch(&trimmed);
        assert_eq!(patch["metadata"]["resourceVersion"], "42");
        assert_eq!(patch["spec"]["taints"][0]["key"], SHUTDOWN_TAINT);
        set_shutdown_taint(&mut trimmed, false);
        assert_eq!(
            taints_patch(&trimmed)["spec"]["taints"],
            serde_json::json!([]),
            "an empty list removes the last taint"
        );
    }

    #[test]
    fn deletion_verdict_table() {
        let cases = [
            // (initialised, found, verdict)
            (0, 0, DeletionVerdict::Refuse),
            (1, 0, DeletionVerdict::Refuse),
            (3, 0, DeletionVerdict::Refuse),
            (3, 1, DeletionVerdict::Refuse),
            (2, 1, DeletionVerdict::Allow(1)),
            (3, 2, DeletionVerdict::Allow(1)),
            (10, 5, DeletionVerdict::Allow(1)),
            (10, 4, DeletionVerdict::Refuse),
            (25, 24, DeletionVerdict::Allow(2)),
            (1000, 990, DeletionVerdict::Allow(100)),
        ];
        for (initialised, found, want) in cases {
            assert_eq!(
                deletion_verdict(initialised, found),
                want,
                "{found} of {initialised}"
            );
        }
    }

    #[test]
    fn shutdown_taint_added_once_and_removed() {
        let mut node = node_with_ready(Some("False"));
        set_shutdown_taint(&mut node, true);
        set_shutdown_taint(&mut node, true);
        let taints = node.spec.as_ref().unwrap().taints.as_ref().unwrap();
        assert_eq!(taints.len(), 1);
        assert_eq!(taints[0].effect, "NoSchedule");
        assert!(has_taint(&node, SHUTDOWN_TAINT));
        set_shutdown_taint(&mut node, false);
        assert!(!has_taint(&node, SHUTDOWN_TAINT));
    }
}
