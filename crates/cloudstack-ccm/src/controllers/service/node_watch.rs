//! Watches Nodes into a shared store and turns changes of the eligible set into one
//! re-sync signal per burst (not one per Node event). The store keeps each Node reduced
//! to what eligibility reads ([`EligibilityNode`]), and the eligible Nodes are
//! computed once per change and shared by every reconcile ([`NodeCache::eligible`]).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::runtime::reflector::store::WriterDropped;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::{Notify, mpsc};

use super::eligible::{EligibilityNode, EligibleSet, eligible_set, is_initialising};

/// The eligible Nodes as (name, providerID) pairs, in name order.
pub type EligibleList = Arc<Vec<(String, String)>>;

/// The watched Nodes and their eligible subset, kept current by the watch.
#[derive(Clone)]
pub struct NodeCache {
    store: Store<EligibilityNode>,
    /// Renewed after every watch event once the first list is in; `None` before.
    eligible: Arc<Mutex<Option<EligibleList>>>,
}

impl NodeCache {
    /// Waits until the first complete list of Nodes is in.
    pub async fn wait_until_ready(&self) -> Result<(), WriterDropped> {
        self.store.wait_until_ready().await
    }

    /// The eligible Nodes: one list shared by every caller, renewed after each change of
    /// the Nodes (computed from the store until the watch has renewed it once).
    pub fn eligible(&self) -> EligibleList {
        let cached = self
            .eligible
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        cached.unwrap_or_else(|| Arc::new(as_pairs(&self.current())))
    }

    /// Whether some Node is being initialised by the cloud-node controller (and may
    /// become eligible any moment); see [`is_initialising`].
    pub fn initialising(&self) -> bool {
        let now = jiff::Timestamp::now();
        self.store
            .state()
            .iter()
            .any(|node| is_initialising(&**node, now))
    }

    /// The eligible set of the store's Nodes.
    fn current(&self) -> EligibleSet {
        eligible_set(self.store.state().iter().map(|node| &**node))
    }

    /// Recomputes the shared eligible list from the store; returns the eligible set.
    fn refresh(&self) -> EligibleSet {
        let current = self.current();
        let list = Arc::new(as_pairs(&current));
        *self.eligible.lock().unwrap_or_else(|e| e.into_inner()) = Some(list);
        current
    }
}

/// The set as (name, providerID) pairs.
fn as_pairs(set: &EligibleSet) -> Vec<(String, String)> {
    set.iter()
        .map(|n| (n.name.clone(), n.provider_id.clone()))
        .collect()
}

impl std::fmt::Debug for NodeCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeCache")
            .field("nodes", &self.store.len())
            .finish_non_exhaustive()
    }
}

/// The Node cache and the signal stream that fires once after the eligible set changed.
pub struct NodeWatch {
    /// All Nodes (reduced to what eligibility reads) and the eligible ones.
    pub store: NodeCache,
    /// Emits `()` once per burst of changes to the eligible set (after `debounce`).
    pub changes: BoxStream<'static, ()>,
    /// Keeps the watch running; dropping it stops the watch.
    pub tasks: TaskGuard,
}

/// Aborts the background tasks when dropped.
pub struct TaskGuard(Vec<tokio::task::JoinHandle<()>>);

impl Drop for TaskGuard {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// Starts watching `nodes`. The first complete list sets the baseline; every later change
/// of the eligible set wakes a debouncer that waits `debounce` (collecting further
/// changes) and then emits one signal.
pub fn start(nodes: Api<Node>, debounce: Duration) -> NodeWatch {
    // The same Nodes, decoded into the compact type.
    let nodes: Api<EligibilityNode> = Api::all(nodes.into_client());
    let (store, writer) = reflector::store();
    let events = reflector::reflector(
        writer,
        watcher(nodes, crate::controllers::node::node_watch_config())
            .default_backoff()
            .modify(EligibilityNode::keep_eligibility_fields),
    );
    let cache = NodeCache {
        store,
        eligible: Arc::default(),
    };
    let changed = Arc::new(Notify::new());
    let watch_task = tokio::spawn(track_eligible(events, cache.clone(), changed.clone()));
    let (sender, receiver) = mpsc::channel(1);
    let debounce_task = tokio::spawn(async move {
        loop {
            changed.notified().await;
            tokio::time::sleep(debounce).await;
            // A full channel already holds a pending signal, which covers this one.
            if let Err(mpsc::error::TrySendError::Closed(())) = sender.try_send(()) {
                return;
            }
        }
    });
    NodeWatch {
        store: cache,
        changes: futures::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|signal| (signal, receiver))
        })
        .boxed(),
        tasks: TaskGuard(vec![watch_task, debounce_task]),
    }
}

/// Reads the watch; after each event, renews the eligible list, compares the eligible set
/// with the last one and notifies on a change.
async fn track_eligible<S>(events: S, cache: NodeCache, changed: Arc<Notify>)
where
    S: Stream<Item = Result<watcher::Event<EligibilityNode>, watcher::Error>> + Send,
{
    let mut last: Option<EligibleSet> = None;
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => continue,
            Ok(_) => {}
            Err(err) => {
                tracing::warn!(error = %err, "node watch failed; retrying");
                continue;
            }
        }
        let current = cache.refresh();
        match &last {
            Some(previous) if *previous == current => {}
            Some(_) => {
                tracing::debug!(eligible = current.len(), "eligible nodes changed");
                last = Some(current);
                changed.notify_one();
            }
            None => last = Some(current),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::service::eligible::EligibilitySpec;

    fn node(name: &str, provider_id: Option<&str>) -> EligibilityNode {
        let mut node = EligibilityNode::default();
        node.metadata.name = Some(name.to_string());
        node.spec = Some(EligibilitySpec {
            provider_id: provider_id.map(str::to_string),
            taints: None,
        });
        node
    }

    #[test]
    fn the_eligible_list_is_shared_and_renewed_on_refresh() {
        let (store, mut writer) = reflector::store::<EligibilityNode>();
        writer.apply_watcher_event(&watcher::Event::Apply(node("b", Some("cs://2"))));
        writer.apply_watcher_event(&watcher::Event::Apply(node("a", Some("cs://1"))));
        writer.apply_watcher_event(&watcher::Event::Apply(node("c", None)));
        let cache = NodeCache {
            store,
            eligible: Arc::default(),
        };
        let pairs = |list: &EligibleList| -> Vec<(String, String)> { list.to_vec() };
        let want = vec![
            ("a".to_string(), "cs://1".to_string()),
            ("b".to_string(), "cs://2".to_string()),
        ];
        assert_eq!(
            pairs(&cache.eligible()),
            want,
            "computed before any refresh"
        );
        assert_eq!(cache.refresh().len(), 2);
        let first = cache.eligible();
        assert!(
            Arc::ptr_eq(&first, &cache.eligible()),
            "one list for every caller"
        );
        writer.apply_watcher_event(&watcher::Event::Delete(node("a", Some("cs://1"))));
        assert!(
            Arc::ptr_eq(&first, &cache.eligible()),
            "kept until refreshed"
        );
        cache.refresh();
        assert_eq!(pairs(&cache.eligible()), want[1..].to_vec());
    }
}
