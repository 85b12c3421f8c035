//! Watches Nodes into a shared store and turns changes of the eligible set into one
//! re-sync signal per burst (not one per Node event). The store keeps each Node reduced
//! to what eligibility reads ([`keep_eligibility_fields`]).

use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::{Notify, mpsc};

use super::eligible::{EligibleSet, eligible_set, keep_eligibility_fields};

/// The Node store and the signal stream that fires once after the eligible set changed.
pub struct NodeWatch {
    /// All Nodes, kept current by the watch.
    pub store: Store<Node>,
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
    let (store, writer) = reflector::store();
    let events = reflector::reflector(
        writer,
        watcher(nodes, watcher::Config::default())
            .default_backoff()
            .modify(keep_eligibility_fields),
    );
    let changed = Arc::new(Notify::new());
    let watch_task = tokio::spawn(track_eligible(events, store.clone(), changed.clone()));
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
        store,
        changes: futures::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|signal| (signal, receiver))
        })
        .boxed(),
        tasks: TaskGuard(vec![watch_task, debounce_task]),
    }
}

/// Reads the watch; after each event, compares the eligible set with the last one and
/// notifies on a change.
async fn track_eligible<S>(events: S, store: Store<Node>, changed: Arc<Notify>)
where
    S: Stream<Item = Result<watcher::Event<Node>, watcher::Error>> + Send,
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
        let current = eligible_set(store.state().iter().map(|node| &**node));
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
