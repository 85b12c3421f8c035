//! The one Node cache of the process: one watch of the Nodes (one initial list, in pages
//! of `NODE_LIST_PAGE_SIZE`) into one reflector store of [`CachedNode`]s, each Node
//! reduced to what the controllers read.
//!
//! [`super::run`] builds it once and hands it (in [`super::Caches`]) to every controller;
//! the watch starts on first use. The controllers read it these ways:
//! * cloud-node feeds its `Controller` from [`NodeCache::subscribe`] (every Node present
//!   when it subscribes, then every Node the watch applies) over [`NodeCache::store`];
//! * node-lifecycle looks at [`NodeCache::state`] every monitor period;
//! * the service controller re-evaluates eligibility when [`NodeCache::changes`] fires
//!   (after every applied or deleted Node and every completed list), and its orphan pass
//!   reads the Node names from [`NodeCache::state`];
//! * the route controller reads [`NodeCache::state`] every pass (pod CIDRs, addresses,
//!   `NetworkUnavailable`).
//!
//! Readiness is [`NodeCache::wait_until_ready`], not the store's own
//! `Store::wait_until_ready`: that one wakes a single waiter, and the cloud-node
//! `Controller` is already waiting on it.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde::{Deserialize, Deserializer};
use tokio::sync::{mpsc, watch};

use super::node_vocabulary::{EXCLUDE_LABEL, NETWORK_UNAVAILABLE, PROVIDED_NODE_IP_ANNOTATION};

/// Nodes per page of the Node watch's initial list. A kubelet's Node is ~7 KB of JSON and
/// several times that decoded; at kube's default of 500 a page alone is tens of MiB while
/// it is trimmed into the cache, and that peak stays in the resident set.
pub(crate) const NODE_LIST_PAGE_SIZE: u32 = 100;

/// The watcher configuration of the Node watch.
pub(crate) fn node_watch_config() -> watcher::Config {
    watcher::Config::default().page_size(NODE_LIST_PAGE_SIZE)
}

/// A Node as the one Node cache holds it: what the controllers read and nothing else.
/// Name, uid, resourceVersion, creation and deletion timestamps, the provided node IP
/// annotation, the exclude-from-load-balancers label, providerID, taints, pod CIDRs, the
/// Ready and NetworkUnavailable conditions and the addresses.
///
/// A kubelet's Node is ~7 KB of JSON, mostly managedFields, images, nodeInfo, capacity
/// and conditions nobody here reads: the watch decodes only the kept fields (the rest is
/// skipped by the decoder without being allocated, so a page of Nodes never exists in full
/// in memory), and the spec and status are types of their own, a fifth of the size of
/// `NodeSpec` and `NodeStatus` (whose many unread fields cost their room in every Node).
/// The field paths are those of [`Node`] (`node.spec.provider_id`, `node.status.conditions`),
/// and the metadata is an [`ObjectMeta`], so it is a [`kube::Resource`] of kind Node.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct CachedNode {
    /// Name, uid, resourceVersion, timestamps, the kept annotation and label.
    #[serde(deserialize_with = "watched_metadata")]
    pub metadata: ObjectMeta,
    /// The kept spec fields.
    #[serde(default)]
    pub spec: Option<CachedNodeSpec>,
    /// The kept status fields.
    #[serde(default)]
    pub status: Option<CachedNodeStatus>,
    /// When this process received the Node as it is (not part of its value).
    #[serde(skip)]
    pub seen: SeenAt,
}

/// The moment the process received a Node from the API server: the Node existed then,
/// whatever the API server's clock said, so a VM list asked for later is newer than the
/// Node ([`crate::cloud::instances::NodeRef::known_since`]). Never part of a Node's value:
/// two values are equal whenever they were received.
#[derive(Debug, Clone, Copy, Default)]
pub struct SeenAt(pub Option<std::time::Instant>);

impl PartialEq for SeenAt {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

/// The spec fields a [`CachedNode`] keeps.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct CachedNodeSpec {
    /// `spec.providerID`.
    #[serde(rename = "providerID")]
    pub provider_id: Option<String>,
    /// `spec.taints`.
    pub taints: Option<Vec<Taint>>,
    /// `spec.podCIDR`.
    #[serde(rename = "podCIDR")]
    pub pod_cidr: Option<String>,
    /// `spec.podCIDRs`.
    #[serde(rename = "podCIDRs")]
    pub pod_cidrs: Option<Vec<String>>,
}

/// The status fields a [`CachedNode`] keeps.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct CachedNodeStatus {
    /// The Ready and NetworkUnavailable conditions.
    pub conditions: Option<Vec<NodeCondition>>,
    /// `status.addresses`.
    pub addresses: Option<Vec<NodeAddress>>,
}

impl CachedNode {
    /// Drops what the decoder kept but no controller reads: annotations other than the
    /// provided node IP, labels other than the exclusion label, conditions other than
    /// Ready and NetworkUnavailable.
    fn trim(mut self) -> Self {
        self.seen = SeenAt(Some(std::time::Instant::now()));
        let metadata = &mut self.metadata;
        metadata.annotations = metadata.annotations.take().and_then(|mut annotations| {
            let node_ip = annotations.remove(PROVIDED_NODE_IP_ANNOTATION)?;
            Some([(PROVIDED_NODE_IP_ANNOTATION.to_string(), node_ip)].into())
        });
        metadata.labels = metadata.labels.take().and_then(|mut labels| {
            let excluded = labels.remove(EXCLUDE_LABEL)?;
            Some([(EXCLUDE_LABEL.to_string(), excluded)].into())
        });
        if let Some(conditions) = self
            .status
            .as_mut()
            .and_then(|status| status.conditions.as_mut())
        {
            conditions.retain(|c| c.type_ == "Ready" || c.type_ == NETWORK_UNAVAILABLE);
        }
        self
    }
}

impl From<Node> for CachedNode {
    /// What the cache keeps of a full Node (one listed rather than watched).
    fn from(node: Node) -> Self {
        let metadata = node.metadata;
        CachedNode {
            metadata: ObjectMeta {
                name: metadata.name,
                uid: metadata.uid,
                resource_version: metadata.resource_version,
                creation_timestamp: metadata.creation_timestamp,
                deletion_timestamp: metadata.deletion_timestamp,
                annotations: metadata.annotations,
                labels: metadata.labels,
                ..ObjectMeta::default()
            },
            spec: node.spec.map(|spec| CachedNodeSpec {
                provider_id: spec.provider_id,
                taints: spec.taints,
                pod_cidr: spec.pod_cidr,
                pod_cidrs: spec.pod_cidrs,
            }),
            status: node.status.map(|status| CachedNodeStatus {
                conditions: status.conditions,
                addresses: status.addresses,
            }),
            seen: SeenAt::default(),
        }
        .trim()
    }
}

impl kube::Resource for CachedNode {
    type DynamicType = ();
    type Scope = <Node as kube::Resource>::Scope;

    fn kind(dt: &()) -> Cow<'_, str> {
        Node::kind(dt)
    }

    fn group(dt: &()) -> Cow<'_, str> {
        Node::group(dt)
    }

    fn version(dt: &()) -> Cow<'_, str> {
        Node::version(dt)
    }

    fn plural(dt: &()) -> Cow<'_, str> {
        Node::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The metadata fields a [`CachedNode`] keeps (no managedFields).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WatchedMetadata {
    name: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
    annotations: Option<BTreeMap<String, String>>,
    labels: Option<BTreeMap<String, String>>,
}

fn watched_metadata<'de, D: Deserializer<'de>>(decoder: D) -> Result<ObjectMeta, D::Error> {
    let m = WatchedMetadata::deserialize(decoder)?;
    Ok(ObjectMeta {
        name: m.name,
        uid: m.uid,
        resource_version: m.resource_version,
        creation_timestamp: m.creation_timestamp,
        deletion_timestamp: m.deletion_timestamp,
        annotations: m.annotations,
        labels: m.labels,
        ..ObjectMeta::default()
    })
}

/// A watcher event of decoded Nodes with each Node trimmed.
fn cached_event(event: watcher::Event<CachedNode>) -> watcher::Event<CachedNode> {
    match event {
        watcher::Event::Apply(node) => watcher::Event::Apply(node.trim()),
        watcher::Event::Delete(node) => watcher::Event::Delete(node.trim()),
        watcher::Event::InitApply(node) => watcher::Event::InitApply(node.trim()),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

/// The shared Node cache; clones are handles to the same cache. The watch runs from the
/// first use until the last handle is dropped.
#[derive(Clone)]
pub struct NodeCache {
    inner: Arc<Inner>,
}

/// What the handles share.
struct Inner {
    store: Store<CachedNode>,
    fanout: Arc<Fanout>,
    /// The client and the store's writer until the watch starts.
    unstarted: Mutex<Option<(kube::Client, reflector::store::Writer<CachedNode>)>>,
    /// The watch task once started (aborted when the last handle goes).
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(task) = self
            .task
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            task.abort();
        }
    }
}

/// What the watch task tells the readers.
struct Fanout {
    /// Senders of the [`NodeCache::subscribe`] streams (closed ones are dropped).
    subscribers: Mutex<Vec<mpsc::UnboundedSender<ObjectRef<CachedNode>>>>,
    /// `None` until the first list is in; then a count of the changes applied since.
    changes: watch::Sender<Option<u64>>,
    /// The providerIDs of Nodes deleted lately.
    departed: DepartedNodes,
}

/// The providerIDs of the Nodes deleted in the last [`DepartedNodes::MEMORY`], by name: a
/// Node registered again under one of these names may be on a VM that replaced the old one
/// under the same name, which a VM list read before cannot show.
#[derive(Debug, Clone, Default)]
pub struct DepartedNodes(Arc<Mutex<HashMap<String, (String, std::time::Instant)>>>);

impl DepartedNodes {
    /// How long a deleted Node's providerID is remembered.
    const MEMORY: std::time::Duration = std::time::Duration::from_secs(600);

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (String, std::time::Instant)>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn record(&self, node: &CachedNode) {
        let provider_id = node.spec.as_ref().and_then(|s| s.provider_id.clone());
        if let (Some(name), Some(provider_id)) = (node.metadata.name.clone(), provider_id) {
            let mut departed = self.lock();
            departed.retain(|_, (_, at)| at.elapsed() < Self::MEMORY);
            departed.insert(name, (provider_id, std::time::Instant::now()));
        }
    }

    /// The providerID of the Node named `name` deleted lately, if any.
    pub fn provider_id(&self, name: &str) -> Option<String> {
        self.lock()
            .get(name)
            .filter(|(_, at)| at.elapsed() < Self::MEMORY)
            .map(|(provider_id, _)| provider_id.clone())
    }
}

impl NodeCache {
    /// A cache of the Nodes `client` sees; nothing is listed or watched until first use.
    pub fn new(client: kube::Client) -> Self {
        let (store, writer) = reflector::store();
        Self::from_parts(store, Some((client, writer)))
    }

    /// A cache that never watches, filled through the returned writer (for unit tests).
    #[cfg(test)]
    pub(crate) fn detached() -> (Self, reflector::store::Writer<CachedNode>) {
        let (store, writer) = reflector::store();
        (Self::from_parts(store, None), writer)
    }

    fn from_parts(
        store: Store<CachedNode>,
        unstarted: Option<(kube::Client, reflector::store::Writer<CachedNode>)>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                fanout: Arc::new(Fanout {
                    subscribers: Mutex::default(),
                    changes: watch::Sender::new(None),
                    departed: DepartedNodes::default(),
                }),
                unstarted: Mutex::new(unstarted),
                task: Mutex::default(),
            }),
        }
    }

    /// Starts the watch unless it runs already.
    fn start(&self) {
        let Some((client, writer)) = self
            .inner
            .unstarted
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        else {
            return;
        };
        let api: Api<CachedNode> = Api::all(client);
        let task = tokio::spawn(feed(api, writer, self.inner.fanout.clone()));
        *self.inner.task.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
    }

    /// The reflector store (for a `Controller` over the cache). Do not call its
    /// `wait_until_ready`: see the module documentation.
    pub fn store(&self) -> Store<CachedNode> {
        self.start();
        self.inner.store.clone()
    }

    /// Every cached Node (empty until the first list is in).
    pub fn state(&self) -> Vec<Arc<CachedNode>> {
        self.start();
        self.inner.store.state()
    }

    /// The providerIDs of the Nodes deleted lately (shared, kept up to date by the watch).
    pub fn departed(&self) -> DepartedNodes {
        self.inner.fanout.departed.clone()
    }

    /// The names of every cached Node.
    pub fn names(&self) -> std::collections::BTreeSet<String> {
        self.state()
            .iter()
            .filter_map(|node| node.metadata.name.clone())
            .collect()
    }

    /// Waits until the first complete list of Nodes is in; any number of callers may wait.
    pub async fn wait_until_ready(&self) {
        let mut changes = self.changes();
        // The sender lives in the watch task's Fanout and in this cache: never closed here.
        let _ = changes.wait_for(Option::is_some).await;
    }

    /// A receiver that is marked changed after every Node applied or deleted and every
    /// completed list (the first one included); its value is `None` until the first list.
    pub fn changes(&self) -> watch::Receiver<Option<u64>> {
        self.start();
        self.inner.fanout.changes.subscribe()
    }

    /// Every Node in the cache when called (once the first list is in, if it is not yet),
    /// then every Node the watch applies (again after each re-list), as the cache holds it
    /// when the stream is read. Deleted Nodes are not sent.
    pub fn subscribe(&self) -> impl Stream<Item = Arc<CachedNode>> + Send + 'static {
        self.start();
        let (sender, receiver) = mpsc::unbounded_channel();
        {
            let mut subscribers = self
                .inner
                .fanout
                .subscribers
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            // Under the lock the watch task holds while it applies and sends an event,
            // so no Node is missed or sent before it is in the store.
            if self.inner.fanout.changes.borrow().is_some() {
                for node in self.inner.store.state() {
                    let _ = sender.send(ObjectRef::from_obj(&*node));
                }
            }
            subscribers.push(sender);
        }
        let store = self.inner.store.clone();
        futures::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|key| (key, receiver))
        })
        .filter_map(move |key| std::future::ready(store.get(&key)))
    }
}

impl std::fmt::Debug for NodeCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeCache")
            .field("nodes", &self.inner.store.len())
            .finish_non_exhaustive()
    }
}

/// The watch task: applies each event to the store, then tells the subscribers and the
/// change receivers.
async fn feed(
    api: Api<CachedNode>,
    mut writer: reflector::store::Writer<CachedNode>,
    fanout: Arc<Fanout>,
) {
    let events = watcher(api, node_watch_config())
        .default_backoff()
        .map_ok(cached_event);
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(error) => {
                tracing::warn!(%error, "node watch failed; retrying");
                continue;
            }
        };
        let mut subscribers = fanout.subscribers.lock().unwrap_or_else(|e| e.into_inner());
        writer.apply_watcher_event(&event);
        let touched: Vec<ObjectRef<CachedNode>> = match &event {
            watcher::Event::Apply(node) => vec![ObjectRef::from_obj(node)],
            watcher::Event::InitDone => writer
                .as_reader()
                .state()
                .iter()
                .map(|node| ObjectRef::from_obj(&**node))
                .collect(),
            watcher::Event::Delete(node) => {
                fanout.departed.record(node);
                Vec::new()
            }
            watcher::Event::Init | watcher::Event::InitApply(_) => continue,
        };
        subscribers.retain(|subscriber| {
            touched
                .iter()
                .all(|key| subscriber.send(key.clone()).is_ok())
        });
        // Still under the lock: a subscriber sees either this count or this event.
        fanout
            .changes
            .send_modify(|count| *count = Some(count.map_or(0, |n| n + 1)));
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::controllers::node_vocabulary::SHUTDOWN_TAINT;
    use k8s_openapi::api::core::v1::{NodeSpec, NodeStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    /// A Node as a kubelet writes it, with one of everything each controller reads.
    pub(in crate::controllers) fn kubelet_node() -> Node {
        let mut node = Node::default();
        node.metadata.name = Some("worker-1".into());
        node.metadata.resource_version = Some("42".into());
        node.metadata.creation_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        node.metadata.labels = Some(
            [
                ("zone".to_string(), "z1".to_string()),
                (EXCLUDE_LABEL.to_string(), "false".to_string()),
            ]
            .into(),
        );
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
        node.status = Some(NodeStatus {
            conditions: Some(vec![
                NodeCondition {
                    type_: "Ready".into(),
                    status: "False".into(),
                    ..Default::default()
                },
                NodeCondition {
                    type_: NETWORK_UNAVAILABLE.into(),
                    status: "False".into(),
                    reason: Some("RouteCreated".into()),
                    ..Default::default()
                },
                NodeCondition {
                    type_: "MemoryPressure".into(),
                    status: "False".into(),
                    ..Default::default()
                },
            ]),
            addresses: Some(vec![k8s_openapi::api::core::v1::NodeAddress {
                type_: "InternalIP".into(),
                address: "10.1.1.5".into(),
            }]),
            images: Some(Vec::new()),
            ..Default::default()
        });
        node.spec
            .as_mut()
            .expect("spec")
            .taints
            .get_or_insert_with(Vec::new)
            .push(k8s_openapi::api::core::v1::Taint {
                key: SHUTDOWN_TAINT.into(),
                effect: "NoSchedule".into(),
                ..Default::default()
            });
        node
    }

    #[test]
    fn the_watch_decodes_only_what_the_cache_keeps() {
        let mut node = kubelet_node();
        node.metadata.managed_fields = Some(vec![Default::default()]);
        let json = serde_json::to_vec(&node).unwrap();
        let decoded: CachedNode = serde_json::from_slice(&json).unwrap();
        assert!(decoded.metadata.managed_fields.is_none());
        assert_eq!(decoded.trim(), CachedNode::from(node));
        // A Node without spec or status (as a fresh object may be) decodes too.
        let bare: CachedNode =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "n"}})).unwrap();
        assert_eq!(bare.metadata.name.as_deref(), Some("n"));
    }

    #[test]
    fn a_cached_node_is_a_fraction_of_a_node() {
        // What each of thousands of cached Nodes costs before its strings.
        assert!(
            std::mem::size_of::<CachedNode>() * 2 < std::mem::size_of::<Node>(),
            "{} against {}",
            std::mem::size_of::<CachedNode>(),
            std::mem::size_of::<Node>()
        );
    }
}
