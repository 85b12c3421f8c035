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
//! Deletions pass a safety rail first (`deletion_verdict`): a VM list that holds none,
//! or fewer than half, of the cluster's initialised Nodes says more about the list (a
//! wrong `project-id` or `zone`, an account that cannot see the VMs) than about the
//! Nodes, so nothing is deleted; each Node held back gets one `NodeDeletionRefused`
//! Warning Event and every held-back deletion counts in
//! `cloudstack_ccm_reconciles_total{controller="node-lifecycle",result="deletion_refused"}`.
//! Allowed deletions are rate-limited: at most one Node in ten of the initialised ones
//! (at least one) per monitor period; the rest wait for the next period. The cache keeps
//! each Node reduced to what these decisions read ([`CachedNode`]); taints are changed
//! with a merge patch guarded by the Node's resourceVersion, so nothing the cache dropped
//! is written back.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Taint};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::{Resource, ResourceExt};

use super::events::{Event, EventType, Recorder};
use super::node::{NodeError, has_taint, node_ref, reporter};
use super::node_cache::CachedNode;
use super::node_vocabulary::{SHUTDOWN_TAINT, UNINITIALIZED_TAINT};
use super::{Caches, Context, NodeCache, Shutdown};
use crate::cloud::instances::{InstanceError, Instances};
use crate::metrics::Metrics;

/// Reason of the Event recorded before a node is deleted.
pub(crate) const DELETING_NODE_REASON: &str = "DeletingNode";
/// Reason of the Warning Event recorded when the safety rail holds a deletion back.
pub const DELETION_REFUSED_REASON: &str = "NodeDeletionRefused";
/// Metrics `result` of a deletion the safety rail held back.
pub(crate) const DELETION_REFUSED_RESULT: &str = "deletion_refused";
/// Metrics `result` of a deletion the rate limit put off to a later period.
pub(crate) const DELETION_DEFERRED_RESULT: &str = "deletion_deferred";
/// At most one initialised Node in this many is deleted per monitor period (at least one).
pub(crate) const NODES_PER_DELETION: usize = 10;
/// Name of this controller in Events (`reportingController`).
pub(crate) const CONTROLLER_NAME: &str = "cloud-node-lifecycle-controller";
/// Metrics label of this controller.
const METRICS_NAME: &str = "node-lifecycle";

/// What one look at a node decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LifecycleAction {
    /// Nothing to change.
    None,
    /// The VM is shut down: add the shutdown taint.
    AddShutdownTaint,
    /// The node is Ready again: remove the shutdown taint.
    RemoveShutdownTaint,
    /// The VM is gone: delete the node.
    Delete,
}

/// Runs the cloud-node-lifecycle controller until `shutdown` fires: VM answers from
/// `caches.instances`, Nodes from `caches.nodes`.
pub async fn run(ctx: Arc<Context>, caches: Caches, shutdown: Shutdown) -> anyhow::Result<()> {
    let recorder = Recorder::new(ctx.kube.clone(), reporter(CONTROLLER_NAME));
    let controller = Arc::new(NodeLifecycle::new(
        ctx.kube.clone(),
        caches.instances,
        recorder,
        ctx.metrics.clone(),
        ctx.node_monitor_period,
    ));
    controller.run(&caches.nodes, shutdown.wait()).await;
    Ok(())
}

/// What the safety rail says about the deletions one look wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DeletionVerdict {
    /// Delete at most this many now (the others wait for the next period).
    Allow(usize),
    /// Delete none: the VM list does not look like this cluster's.
    Refuse,
}

/// The safety rail: with `initialised` Nodes in the cluster (no uninitialized taint, a
/// usable VM key) of which `found` have their VM in the inventory, refuse every deletion
/// when `found` is zero or less than half of `initialised`; else allow
/// `max(1, initialised / NODES_PER_DELETION)` deletions this period.
pub(crate) fn deletion_verdict(initialised: usize, found: usize) -> DeletionVerdict {
    if found == 0 || found * 2 < initialised {
        return DeletionVerdict::Refuse;
    }
    DeletionVerdict::Allow((initialised / NODES_PER_DELETION).max(1))
}

/// State of the cloud-node-lifecycle controller.
pub(crate) struct NodeLifecycle {
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

    /// Runs until `shutdown` completes, looking at the Nodes of `nodes` every monitor
    /// period once the first list is in.
    pub async fn run(
        self: Arc<Self>,
        nodes: &NodeCache,
        shutdown: impl Future<Output = ()> + Send,
    ) {
        let monitor = async {
            nodes.wait_until_ready().await;
            let mut ticker = tokio::time::interval(self.monitor_period);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticker.tick().await;
                self.monitor(&nodes.state()).await;
            }
        };
        tokio::select! {
            _ = shutdown => {}
            _ = monitor => {}
        }
    }

    /// Looks at each node once and acts on it; deletions go through the safety rail
    /// (see the module documentation) once every node has been looked at.
    pub async fn monitor(&self, nodes: &[Arc<CachedNode>]) {
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
                    self.metrics
                        .reconcile(METRICS_NAME, crate::metrics::RESULT_ERROR);
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
        node: &CachedNode,
        started: std::time::Instant,
        result: Result<LifecycleAction, NodeError>,
    ) {
        self.metrics
            .reconcile_duration(METRICS_NAME, started.elapsed());
        match result {
            Ok(action) => self.metrics.reconcile(METRICS_NAME, action_label(action)),
            Err(error) => {
                self.metrics
                    .reconcile(METRICS_NAME, crate::metrics::RESULT_ERROR);
                tracing::warn!(node = %node.name_any(), %error, "node lifecycle check failed");
            }
        }
    }

    /// How many of `nodes` are initialised, and how many of those the VM list holds, all
    /// resolved against one VM list.
    /// A node whose VM key is unusable (a foreign providerID) is not counted; one whose
    /// name several VMs share is found.
    async fn coverage(&self, nodes: &[Arc<CachedNode>]) -> Result<(usize, usize), NodeError> {
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
    async fn refuse_deletion(&self, node: &CachedNode, initialised: usize, found: usize) {
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
    fn forget_refusals(&self, still_refused: &[Arc<CachedNode>]) {
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
        node: &CachedNode,
        action: LifecycleAction,
    ) -> Result<LifecycleAction, NodeError> {
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
                    .map_err(|source| NodeError::Kube {
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
                    .map_err(|source| NodeError::Kube {
                        node: name.clone(),
                        action: "delete",
                        source,
                    })?;
            }
        }
        Ok(action)
    }

    /// Decides what to do with `node`, reading only the inventory.
    pub async fn decide(&self, node: &CachedNode) -> Result<LifecycleAction, NodeError> {
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
        LifecycleAction::None => crate::metrics::RESULT_OK,
        LifecycleAction::AddShutdownTaint => "tainted",
        LifecycleAction::RemoveShutdownTaint => "untainted",
        LifecycleAction::Delete => "deleted",
    }
}

/// True when the node's `Ready` condition is `True`.
pub(crate) fn is_ready(node: &CachedNode) -> bool {
    node.status
        .as_ref()
        .and_then(|status| status.conditions.as_ref())
        .and_then(|conditions| conditions.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|ready| ready.status == "True")
}

/// A merge patch setting the node's taints to those of `node`, valid only while the Node
/// still has `node`'s resourceVersion (a concurrent change makes it fail with a conflict,
/// as an update would).
pub(crate) fn taints_patch(node: &CachedNode) -> serde_json::Value {
    let taints = node.spec.as_ref().and_then(|spec| spec.taints.clone());
    serde_json::json!({
        "metadata": { "resourceVersion": node.metadata.resource_version },
        "spec": { "taints": taints.unwrap_or_default() },
    })
}

/// Adds (`true`) or removes (`false`) the shutdown taint.
pub(crate) fn set_shutdown_taint(node: &mut CachedNode, present: bool) {
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
    use crate::controllers::node_cache::{CachedNode, CachedNodeStatus};
    use k8s_openapi::api::core::v1::NodeCondition;

    fn node_with_ready(status: Option<&str>) -> CachedNode {
        CachedNode {
            status: Some(CachedNodeStatus {
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
