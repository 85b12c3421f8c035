//! The object store: every object as JSON keyed by resource, namespace and name, a global
//! monotonically increasing `resourceVersion`, a bounded history of changes for watch
//! replay, and the open watch streams.

mod defaults;
mod views;
mod write;

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;
use tokio::sync::mpsc;

use crate::error::ApiError;
use crate::object::{meta_str, set_resource_version};
use crate::resources::{self, ResourceKind};
use crate::selector::{FieldSelector, LabelSelector};

pub use views::{to_storage, to_view};
pub use write::DeleteOutcome;

/// Default number of changes kept for watch replay.
pub const DEFAULT_HISTORY: usize = 1000;

/// Namespaces that exist from the start, like in a fresh cluster.
const INITIAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

/// `(group, plural, namespace, name)`.
type Key = (&'static str, &'static str, String, String);

/// Watch event types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Object created.
    Added,
    /// Object changed.
    Modified,
    /// Object removed.
    Deleted,
}

impl EventType {
    /// The wire name (`ADDED`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One change, as delivered to watches.
#[derive(Debug, Clone)]
pub struct Change {
    /// The resource that changed.
    pub kind: &'static ResourceKind,
    /// What happened.
    pub event_type: EventType,
    /// The object after the change (for DELETED, its last state with the deletion's
    /// resourceVersion).
    pub object: Value,
    /// The resourceVersion of the change.
    pub resource_version: u64,
}

/// Which objects a list or watch selects.
#[derive(Debug, Clone)]
pub struct Selection {
    /// The resource.
    pub kind: &'static ResourceKind,
    /// Namespace, `None` for all namespaces or cluster-scoped resources.
    pub namespace: Option<String>,
    /// Label selector.
    pub labels: LabelSelector,
    /// Field selector.
    pub fields: FieldSelector,
}

impl Selection {
    /// Everything of `kind` (in `namespace` if given).
    pub fn all(kind: &'static ResourceKind, namespace: Option<&str>) -> Self {
        Self {
            kind,
            namespace: namespace.map(String::from),
            labels: LabelSelector::default(),
            fields: FieldSelector::default(),
        }
    }

    /// Whether a stored object of `kind` is selected (selectors apply to the object as
    /// the selection's resource shows it).
    pub fn matches(&self, kind: &'static ResourceKind, object: &Value) -> bool {
        if !views::same_storage(kind, self.kind) {
            return false;
        }
        let view = views::to_view(self.kind, object);
        self.namespace
            .as_deref()
            .is_none_or(|ns| meta_str(&view, "namespace") == ns)
            && self.labels.matches(&view)
            && self.fields.matches(&view)
    }
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchStart {
    /// Synthetic ADDED events for the current state, then live changes
    /// (`resourceVersion` absent or `0`, or `sendInitialEvents=true`).
    CurrentState,
    /// Replay changes after this resourceVersion from history, then live changes.
    After(u64),
}

/// A subscribed watch: the events to send first, then the live feed. Objects are in
/// their stored form; [`to_view`] turns them into the watched resource's.
#[derive(Debug)]
pub struct Subscription {
    /// Replayed or synthetic events.
    pub initial: Vec<Change>,
    /// The resourceVersion the initial events bring the client to.
    pub resource_version: u64,
    /// Live changes (all resources; the watch filters).
    pub live: mpsc::UnboundedReceiver<Arc<Change>>,
}

/// A page of a list.
#[derive(Debug, Clone)]
pub struct ListPage {
    /// The items.
    pub items: Vec<Value>,
    /// The list's resourceVersion.
    pub resource_version: u64,
    /// Continue token when more items remain.
    pub continue_token: Option<String>,
}

#[derive(Debug)]
struct State {
    objects: BTreeMap<Key, Value>,
    resource_version: u64,
    history: VecDeque<Arc<Change>>,
    history_limit: usize,
    compacted: u64,
    watchers: Vec<mpsc::UnboundedSender<Arc<Change>>>,
    allocators: defaults::Allocators,
}

/// The shared object store.
#[derive(Debug)]
pub struct Store {
    state: Mutex<State>,
}

fn key(kind: &'static ResourceKind, namespace: &str, name: &str) -> Key {
    let kind = views::storage_kind(kind);
    (
        kind.group,
        kind.plural,
        namespace.to_string(),
        name.to_string(),
    )
}

impl Store {
    /// A store with the initial namespaces and a history of `history_limit` changes.
    pub fn new(history_limit: usize) -> Self {
        let store = Self {
            state: Mutex::new(State {
                objects: BTreeMap::new(),
                resource_version: 0,
                history: VecDeque::new(),
                history_limit: history_limit.max(1),
                compacted: 0,
                watchers: Vec::new(),
                allocators: defaults::Allocators::default(),
            }),
        };
        let namespaces = resources::lookup("namespaces").expect("namespaces are served");
        for name in INITIAL_NAMESPACES {
            let body = serde_json::json!({ "metadata": { "name": name } });
            store
                .create(namespaces, None, body)
                .expect("initial namespaces are valid");
        }
        store
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The latest resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.lock().resource_version
    }

    /// Changes the number of changes kept for watch replay (older ones are compacted).
    pub fn set_history_limit(&self, limit: usize) {
        let mut state = self.lock();
        state.history_limit = limit.max(1);
        state.compact();
    }

    /// Forgets every change up to the latest resourceVersion: a watch from any older
    /// resourceVersion gets 410 Gone.
    pub fn compact_all(&self) {
        let mut state = self.lock();
        state.history.clear();
        state.compacted = state.resource_version;
    }

    /// One object.
    pub fn get(
        &self,
        kind: &'static ResourceKind,
        namespace: &str,
        name: &str,
    ) -> Result<Value, ApiError> {
        self.lock()
            .objects
            .get(&key(kind, namespace, name))
            .map(|stored| views::to_view(kind, stored).into_owned())
            .ok_or_else(|| ApiError::not_found(kind, name))
    }

    /// Lists selected objects, `limit` at a time, continuing after `continue_token`.
    pub fn list(
        &self,
        selection: &Selection,
        limit: Option<usize>,
        continue_token: Option<&str>,
    ) -> Result<ListPage, ApiError> {
        let state = self.lock();
        let (list_rv, after) = match continue_token {
            Some(token) => parse_continue(token)?,
            None => (state.resource_version, None),
        };
        let mut items = Vec::new();
        let mut continue_token = None;
        let kind = views::storage_kind(selection.kind);
        let selected = state
            .objects
            .range((kind.group, kind.plural, String::new(), String::new())..)
            .take_while(|((g, p, _, _), _)| *g == kind.group && *p == kind.plural)
            .filter(|((_, _, ns, name), _)| {
                after
                    .as_ref()
                    .is_none_or(|(after_ns, after_name)| (ns, name) > (after_ns, after_name))
            })
            .filter(|(_, obj)| selection.matches(kind, obj));
        let mut last_key: Option<(&str, &str)> = None;
        for ((_, _, ns, name), object) in selected {
            if let (Some((last_ns, last_name)), Some(limit)) = (last_key, limit)
                && limit > 0
                && items.len() == limit
            {
                continue_token = Some(format!("{list_rv}/{last_ns}/{last_name}"));
                break;
            }
            items.push(views::to_view(selection.kind, object).into_owned());
            last_key = Some((ns, name));
        }
        Ok(ListPage {
            items,
            resource_version: list_rv,
            continue_token,
        })
    }

    /// Subscribes a watch for `selection` starting at `start`.
    pub fn watch(
        &self,
        selection: &Selection,
        start: WatchStart,
    ) -> Result<Subscription, ApiError> {
        let mut state = self.lock();
        let stored_kind = views::storage_kind(selection.kind);
        let initial = match start {
            WatchStart::CurrentState => state
                .objects
                .iter()
                .filter(|((g, p, _, _), obj)| {
                    *g == stored_kind.group
                        && *p == stored_kind.plural
                        && selection.matches(stored_kind, obj)
                })
                .map(|(_, obj)| Change {
                    kind: stored_kind,
                    event_type: EventType::Added,
                    object: obj.clone(),
                    resource_version: state.resource_version,
                })
                .collect(),
            WatchStart::After(rv) => {
                if rv < state.compacted {
                    return Err(ApiError::expired(rv, state.compacted + 1));
                }
                state
                    .history
                    .iter()
                    .filter(|c| c.resource_version > rv && selection.matches(c.kind, &c.object))
                    .map(|c| (**c).clone())
                    .collect()
            }
        };
        let (sender, live) = mpsc::unbounded_channel();
        state.watchers.push(sender);
        Ok(Subscription {
            initial,
            resource_version: state.resource_version,
            live,
        })
    }

    /// Closes every open watch stream.
    pub fn drop_watches(&self) {
        self.lock().watchers.clear();
    }

    /// Every stored object of `kind`, across namespaces.
    pub fn all(&self, kind: &'static ResourceKind) -> Vec<Value> {
        self.list(&Selection::all(kind, None), None, None)
            .map(|page| page.items)
            .unwrap_or_default()
    }
}

fn parse_continue(token: &str) -> Result<(u64, Option<(String, String)>), ApiError> {
    let invalid = || ApiError::bad_request(format!("continue key is not valid: {token:?}"));
    let mut parts = token.splitn(3, '/');
    let rv = parts
        .next()
        .and_then(|rv| rv.parse().ok())
        .ok_or_else(invalid)?;
    let ns = parts.next().ok_or_else(invalid)?.to_string();
    let name = parts.next().ok_or_else(invalid)?.to_string();
    Ok((rv, Some((ns, name))))
}

impl State {
    fn next_resource_version(&mut self) -> u64 {
        self.resource_version += 1;
        self.resource_version
    }

    fn compact(&mut self) {
        while self.history.len() > self.history_limit {
            if let Some(old) = self.history.pop_front() {
                self.compacted = old.resource_version;
            }
        }
    }

    /// Stores (or removes, for DELETED) the object and publishes the change.
    fn commit(
        &mut self,
        kind: &'static ResourceKind,
        event_type: EventType,
        mut object: Value,
    ) -> Value {
        let kind = views::storage_kind(kind);
        let rv = self.next_resource_version();
        set_resource_version(&mut object, rv);
        let key = key(
            kind,
            meta_str(&object, "namespace"),
            meta_str(&object, "name"),
        );
        if event_type == EventType::Deleted {
            self.objects.remove(&key);
        } else {
            self.objects.insert(key, object.clone());
        }
        let change = Arc::new(Change {
            kind,
            event_type,
            object: object.clone(),
            resource_version: rv,
        });
        self.history.push_back(change.clone());
        self.compact();
        self.watchers.retain(|w| w.send(change.clone()).is_ok());
        object
    }
}
