//! Nodes as the kubelet registers them: creating them, setting their Ready condition,
//! waiting for what the node controllers do to them, and reading their fields.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSpec, Taint};
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;

use super::{Harness, POLL, Target, UNINITIALIZED_TAINT, eventually};

impl Harness {
    /// The Node API.
    pub fn nodes(&self) -> Api<Node> {
        Api::all(self.kube.clone())
    }

    pub(super) async fn wait_for_real_node_gone(&self, name: &str) {
        eventually(&format!("node {name} deleted"), self.wait(), || async {
            self.nodes()
                .get_opt(name)
                .await
                .unwrap_or_else(|e| panic!("reading node {name}: {e}"))
                .is_none()
                .then_some(())
        })
        .await
    }

    /// Creates a node (and, when `node.ready` is set, its Ready condition). In remote mode
    /// the node is named [`Harness::node_name`] and deleted at [`Harness::stop`].
    pub async fn create_node(&self, mut node: TestNode) -> Node {
        let ready = node.ready;
        let logical = node.name.clone();
        node.name = self.node_name(&logical);
        let name = node.name.clone();
        if let Target::Remote(remote) = &self.target {
            remote
                .created_nodes
                .lock()
                .expect("created nodes lock")
                .push(name.clone());
        }
        let created = self
            .nodes()
            .create(&PostParams::default(), &node.build())
            .await
            .unwrap_or_else(|e| panic!("creating node {name}: {e}"));
        match ready {
            Some(ready) => self.set_ready(&logical, ready).await,
            None => created,
        }
    }

    /// Sets the node's Ready condition to `True` or `False`.
    pub async fn set_ready(&self, name: &str, ready: bool) -> Node {
        let name = &self.node_name(name);
        let status = if ready { "True" } else { "False" };
        let patch = json!({ "status": { "conditions": [{
            "type": "Ready",
            "status": status,
            "reason": if ready { "KubeletReady" } else { "KubeletNotReady" },
            "lastHeartbeatTime": "2026-01-01T00:00:00Z",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }]}});
        self.nodes()
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("setting Ready={status} on node {name}: {e}"))
    }

    /// The node, or `None` when it does not exist.
    pub async fn node(&self, name: &str) -> Option<Node> {
        let name = &self.node_name(name);
        self.nodes()
            .get_opt(name)
            .await
            .unwrap_or_else(|e| panic!("reading node {name}: {e}"))
    }

    /// Waits (at most [`WAIT`]) until node `name` exists and satisfies `check`; panics
    /// naming `what` and showing the node otherwise.
    pub async fn wait_for_node(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&Node) -> bool,
    ) -> Node {
        let mut last = None;
        let wait = self.wait();
        let waited = tokio::time::timeout(wait, async {
            loop {
                if let Some(node) = self.node(name).await {
                    if check(&node) {
                        return node;
                    }
                    last = Some(node);
                }
                tokio::time::sleep(POLL).await;
            }
        })
        .await;
        waited.unwrap_or_else(|_| {
            panic!("node {name} not {what} within {wait:?}; last seen: {last:#?}")
        })
    }

    /// Waits (at most [`WAIT`]) until node `name` no longer exists.
    pub async fn wait_for_node_gone(&self, name: &str) {
        eventually(&format!("node {name} deleted"), self.wait(), || async {
            self.node(name).await.is_none().then_some(())
        })
        .await
    }
}

/// True when the node has a taint with `key`.
pub fn has_taint(node: &Node, key: &str) -> bool {
    node.spec
        .as_ref()
        .and_then(|spec| spec.taints.as_ref())
        .is_some_and(|taints| taints.iter().any(|taint| taint.key == key))
}

/// The node's `spec.providerID` (empty when unset).
pub fn provider_id(node: &Node) -> &str {
    node.spec
        .as_ref()
        .and_then(|spec| spec.provider_id.as_deref())
        .unwrap_or_default()
}

/// The node's labels.
pub fn labels(node: &Node) -> BTreeMap<String, String> {
    node.metadata.labels.clone().unwrap_or_default()
}

/// The node's addresses as `(type, address)` pairs, in order.
pub fn addresses(node: &Node) -> Vec<(String, String)> {
    node.status
        .as_ref()
        .and_then(|status| status.addresses.as_ref())
        .map(|list| {
            list.iter()
                .map(|a| (a.type_.clone(), a.address.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// A node to create, as the kubelet registers it.
#[derive(Debug, Clone)]
pub struct TestNode {
    /// `metadata.name`.
    pub name: String,
    /// `spec.providerID`.
    pub provider_id: Option<String>,
    /// Annotations.
    pub annotations: BTreeMap<String, String>,
    /// Carries the uninitialized taint (default `true`).
    pub uninitialized: bool,
    /// Ready condition to set after creation (`None`: no conditions).
    pub ready: Option<bool>,
    /// Other taints.
    pub taints: Vec<Taint>,
}

impl TestNode {
    /// A node named `name` with the uninitialized taint, no providerID, no conditions.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            provider_id: None,
            annotations: BTreeMap::new(),
            uninitialized: true,
            ready: None,
            taints: Vec::new(),
        }
    }

    /// Sets `spec.providerID`.
    pub fn provider_id(mut self, provider_id: &str) -> Self {
        self.provider_id = Some(provider_id.to_string());
        self
    }

    /// Adds an annotation.
    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.annotations.insert(key.to_string(), value.to_string());
        self
    }

    /// Without the uninitialized taint (already initialised).
    pub fn initialised(mut self) -> Self {
        self.uninitialized = false;
        self
    }

    /// With a Ready condition of `ready`.
    pub fn ready(mut self, ready: bool) -> Self {
        self.ready = Some(ready);
        self
    }

    /// The Node object.
    pub fn build(&self) -> Node {
        let mut taints = self.taints.clone();
        if self.uninitialized {
            taints.push(Taint {
                key: UNINITIALIZED_TAINT.to_string(),
                value: Some("true".to_string()),
                effect: "NoSchedule".to_string(),
                time_added: None,
            });
        }
        Node {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                annotations: (!self.annotations.is_empty()).then(|| self.annotations.clone()),
                labels: Some(BTreeMap::from([(
                    "kubernetes.io/hostname".to_string(),
                    self.name.to_ascii_lowercase(),
                )])),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                provider_id: self.provider_id.clone(),
                taints: (!taints.is_empty()).then_some(taints),
                ..Default::default()
            }),
            status: None,
        }
    }
}
