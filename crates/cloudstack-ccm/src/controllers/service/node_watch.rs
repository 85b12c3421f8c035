//! The service controller's view of the shared Node cache ([`crate::controllers::NodeCache`]):
//! the eligible Nodes, computed once per change of the Nodes and shared by every reconcile
//! ([`EligibleNodes::eligible`]), and one re-sync signal per burst of changes to the
//! eligible set (not one per Node event).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use tokio::sync::{Notify, mpsc};

use super::eligible::{EligibleSet, eligible_set, is_initialising};
use crate::controllers::NodeCache;

/// The eligible Nodes as (name, providerID) pairs, in name order.
pub(crate) type EligibleList = Arc<Vec<(String, String)>>;

/// The cached Nodes and their eligible subset, renewed on every change of the Nodes.
#[derive(Clone)]
pub(crate) struct EligibleNodes {
    nodes: NodeCache,
    /// Renewed after every change once the first list is in; `None` before.
    eligible: Arc<Mutex<Option<EligibleList>>>,
}

impl EligibleNodes {
    /// Waits until the first complete list of Nodes is in.
    pub async fn wait_until_ready(&self) {
        self.nodes.wait_until_ready().await
    }

    /// The eligible Nodes: one list shared by every caller, renewed after each change of
    /// the Nodes (computed from the cache until the first renewal).
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
        self.nodes
            .state()
            .iter()
            .any(|node| is_initialising(node, now))
    }

    /// The eligible set of the cached Nodes.
    fn current(&self) -> EligibleSet {
        eligible_set(self.nodes.state().iter().map(|node| &**node))
    }

    /// Recomputes the shared eligible list from the cache; returns the eligible set.
    fn refresh(&self) -> EligibleSet {
        let current = self.current();
        let list = Arc::new(as_pairs(&current));
        *self.eligible.lock().unwrap_or_else(|e| e.into_inner()) = Some(list);
        current
    }
}

/// The set as (name, providerID) pairs.
pub(super) fn as_pairs(set: &EligibleSet) -> Vec<(String, String)> {
    set.iter()
        .map(|n| (n.name.clone(), n.provider_id.clone()))
        .collect()
}

impl std::fmt::Debug for EligibleNodes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EligibleNodes")
            .field("nodes", &self.nodes)
            .finish_non_exhaustive()
    }
}

/// The eligible view and the signal stream that fires once after the eligible set changed.
pub(crate) struct NodeWatch {
    /// The cached Nodes and the eligible ones.
    pub store: EligibleNodes,
    /// Emits `()` once per burst of changes to the eligible set (after `debounce`).
    pub changes: BoxStream<'static, ()>,
    /// Keeps the tracking running; dropping it stops it.
    pub tasks: TaskGuard,
}

/// Aborts the background tasks when dropped.
pub(crate) struct TaskGuard(Vec<tokio::task::JoinHandle<()>>);

impl Drop for TaskGuard {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// Follows the changes of `nodes`. The first complete list sets the baseline; every later
/// change of the eligible set wakes a debouncer that waits `debounce` (collecting further
/// changes) and then emits one signal.
pub fn start(nodes: NodeCache, debounce: Duration) -> NodeWatch {
    let view = EligibleNodes {
        nodes,
        eligible: Arc::default(),
    };
    let changed = Arc::new(Notify::new());
    let track_task = tokio::spawn(track_eligible(view.clone(), changed.clone()));
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
        store: view,
        changes: futures::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|signal| (signal, receiver))
        })
        .boxed(),
        tasks: TaskGuard(vec![track_task, debounce_task]),
    }
}

/// After each change of the cached Nodes (changes in a burst coalesce), renews the
/// eligible list, compares the eligible set with the last one and notifies on a change.
async fn track_eligible(view: EligibleNodes, changed: Arc<Notify>) {
    let mut changes = view.nodes.changes();
    let mut last: Option<EligibleSet> = None;
    loop {
        if changes.borrow_and_update().is_some() {
            let current = view.refresh();
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
        if changes.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::node_cache::{CachedNode, CachedNodeSpec};
    use kube::runtime::watcher;

    fn node(name: &str, provider_id: Option<&str>) -> CachedNode {
        let mut node = CachedNode::default();
        node.metadata.name = Some(name.to_string());
        node.spec = Some(CachedNodeSpec {
            provider_id: provider_id.map(str::to_string),
            ..CachedNodeSpec::default()
        });
        node
    }

    #[test]
    fn the_eligible_list_is_shared_and_renewed_on_refresh() {
        let (nodes, mut writer) = NodeCache::detached();
        writer.apply_watcher_event(&watcher::Event::Apply(node("b", Some("cs://2"))));
        writer.apply_watcher_event(&watcher::Event::Apply(node("a", Some("cs://1"))));
        writer.apply_watcher_event(&watcher::Event::Apply(node("c", None)));
        let cache = EligibleNodes {
            nodes,
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
