//! Start-up order: Node initialisation first and alone.
//!
//! When the controllers start, the cloud-node controller has every Node to initialise that
//! the kubelets registered while no controller ran. The other controllers' first
//! CloudStack reads (the service controller's account view and orphan count, the route
//! controller's static routes) would share the API, the account's rate limit and the
//! Kubernetes API with it and delay every Node, and none of them is needed to initialise
//! one. [`FirstNodePass`] opens once every Node that carried the uninitialized taint when
//! the Node cache first filled has been tried once (initialised or not: a Node whose VM
//! is not found does not hold the others back), or after `MAX_WAIT`; those controllers
//! wait for it before their first read.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

/// The longest the other controllers wait for the first pass of Node initialisation.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(30);

/// The gate that opens when the first pass of Node initialisation is done. Clones share
/// one gate.
#[derive(Debug, Clone)]
pub struct FirstNodePass {
    state: Arc<Mutex<PassState>>,
    open: watch::Sender<bool>,
}

/// What the pass still waits for.
#[derive(Debug, Default)]
struct PassState {
    /// The Nodes not tried yet; `None` until the Node cache's first list was taken.
    pending: Option<HashSet<String>>,
    /// Nodes tried before the first list was taken (the controller may start on them
    /// before the pass learns the list).
    tried_early: HashSet<String>,
}

impl FirstNodePass {
    /// A closed gate: it opens when `FirstNodePass::begin`'s Nodes have been tried.
    pub fn new() -> Self {
        Self {
            state: Arc::default(),
            open: watch::Sender::new(false),
        }
    }

    /// An open gate (no cloud-node controller runs in this process, or a test starts
    /// controllers on their own).
    pub fn opened() -> Self {
        let gate = Self::new();
        gate.open();
        gate
    }

    /// The pass waits for these Nodes (those carrying the uninitialized taint when the
    /// Node cache first filled); opens at once when there are none.
    pub(crate) fn begin(&self, uninitialised: impl IntoIterator<Item = String>) {
        let done = {
            let mut state = self.state.lock().expect("first node pass lock");
            let early = std::mem::take(&mut state.tried_early);
            let pending: HashSet<String> = uninitialised
                .into_iter()
                .filter(|name| !early.contains(name))
                .collect();
            let done = pending.is_empty();
            state.pending = Some(pending);
            done
        };
        if done {
            self.open();
        }
    }

    /// Node `name` has been tried once (initialised, or failed and requeued).
    pub(crate) fn tried(&self, name: &str) {
        if self.is_open() {
            return;
        }
        let done = {
            let mut state = self.state.lock().expect("first node pass lock");
            match state.pending.as_mut() {
                Some(pending) => pending.remove(name) && pending.is_empty(),
                None => {
                    state.tried_early.insert(name.to_string());
                    false
                }
            }
        };
        if done {
            self.open();
        }
    }

    /// Opens the gate.
    pub fn open(&self) {
        self.open.send_replace(true);
    }

    /// True once the gate is open.
    pub(crate) fn is_open(&self) -> bool {
        *self.open.borrow()
    }

    /// Waits until the gate opens, at most `MAX_WAIT`; `who` names the waiter in the
    /// log line said when the wait ends by time.
    pub async fn wait(&self, who: &str) {
        if !self.wait_quietly().await {
            tracing::info!(
                controller = who,
                "Node initialisation's first pass still runs after {}s; starting anyway",
                MAX_WAIT.as_secs()
            );
        }
    }
}

impl FirstNodePass {
    /// Waits until the gate opens, at most [`MAX_WAIT`], without a word (a replica that
    /// does not lead never opens it); whether it opened.
    pub(crate) async fn wait_quietly(&self) -> bool {
        let mut open = self.open.subscribe();
        tokio::time::timeout(MAX_WAIT, open.wait_for(|open| *open))
            .await
            .is_ok()
    }
}

impl Default for FirstNodePass {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn opens_when_every_node_of_the_first_list_was_tried() {
        let gate = FirstNodePass::new();
        gate.begin(names(&["a", "b"]));
        assert!(!gate.is_open());
        gate.tried("a");
        gate.tried("c"); // not in the first list: joined later
        assert!(!gate.is_open());
        gate.tried("b");
        assert!(gate.is_open());
    }

    #[test]
    fn nodes_tried_before_the_list_was_taken_count() {
        let gate = FirstNodePass::new();
        gate.tried("a");
        gate.begin(names(&["a", "b"]));
        assert!(!gate.is_open());
        gate.tried("b");
        assert!(gate.is_open());
    }

    #[test]
    fn an_empty_first_list_opens_at_once() {
        let gate = FirstNodePass::new();
        gate.begin(Vec::new());
        assert!(gate.is_open());
        assert!(FirstNodePass::opened().is_open());
    }

    #[tokio::test]
    async fn a_waiter_is_released_when_the_gate_opens() {
        let gate = FirstNodePass::new();
        gate.begin(names(&["a"]));
        let waiter = tokio::spawn({
            let gate = gate.clone();
            async move { gate.wait("test").await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        gate.tried("a");
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("released")
            .expect("joined");
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_gives_up_after_the_longest_wait() {
        let gate = FirstNodePass::new();
        gate.begin(names(&["stuck"]));
        let started = tokio::time::Instant::now();
        gate.wait("test").await;
        assert_eq!(started.elapsed(), MAX_WAIT);
        assert!(!gate.is_open());
    }
}
