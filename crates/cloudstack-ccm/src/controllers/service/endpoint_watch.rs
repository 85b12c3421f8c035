//! The one shared watch of endpoints, for `externalTrafficPolicy: Local` Services only.
//!
//! It starts with the first `Local` Service reconciled (a cluster without one reads no
//! endpoint at all). A first `list` of EndpointSlices (one item) chooses the source: where
//! it is forbidden (403) the core Endpoints are watched instead, and one log line says so;
//! no EndpointSlice request is made after that. Every change is filed in the
//! [`EndpointIndex`]; a change of the endpoints of a Service that asked for them
//! ([`EndpointWatch::nodes_by_rule`]) schedules one reconcile of it `coalesce` later, and
//! further changes until then ride on that one: a rolling update makes one member change
//! per rule per `coalesce`, with the latest endpoints.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::ListParams;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::sync::{mpsc, watch};

use super::endpoints::{
    EndpointIndex, SERVICE_NAME_LABEL, ServiceKey, Summary, service_key, summarise_endpoints,
    summarise_slice,
};
use crate::cloud::loadbalancer::members::RuleKey;

/// How long a reconcile waits for the first complete list of endpoints.
const FIRST_LIST_WAIT: Duration = Duration::from_secs(10);
/// Pause between attempts to choose the source when the API server fails otherwise.
const RETRY_PAUSE: Duration = Duration::from_secs(1);

/// Why a Service's endpoints cannot be read now.
#[derive(Debug, thiserror::Error)]
#[error(
    "the endpoints of the Service (externalTrafficPolicy: Local) are not read yet: no complete list of EndpointSlices or Endpoints within {FIRST_LIST_WAIT:?}"
)]
pub struct EndpointsNotRead;

/// The shared endpoint watch and the Services that read it.
#[derive(Clone)]
pub(crate) struct EndpointWatch {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    coalesce: Duration,
    /// The watch task, once started.
    task: OnceLock<tokio::task::JoinHandle<()>>,
    /// `true` once the first complete list is in.
    ready: watch::Sender<bool>,
    state: Mutex<State>,
    triggers: mpsc::UnboundedSender<ObjectRef<Service>>,
}

#[derive(Default)]
struct State {
    index: EndpointIndex,
    /// The `Local` Services whose changes trigger a reconcile.
    interested: HashSet<ServiceKey>,
    /// Services with a reconcile scheduled.
    pending: HashSet<ServiceKey>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(task) = self.task.get() {
            task.abort();
        }
    }
}

impl EndpointWatch {
    /// A watch (not started) and the stream of Services to reconcile after their
    /// endpoints changed.
    pub fn new(
        client: Client,
        coalesce: Duration,
    ) -> (EndpointWatch, BoxStream<'static, ObjectRef<Service>>) {
        let (triggers, receiver) = mpsc::unbounded_channel();
        let watch = EndpointWatch {
            inner: Arc::new(Inner {
                client,
                coalesce,
                task: OnceLock::new(),
                ready: watch::channel(false).0,
                state: Mutex::default(),
                triggers,
            }),
        };
        let stream = futures::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|service| (service, receiver))
        })
        .boxed();
        (watch, stream)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Per rule of `service` (protocol, port), the Nodes holding an endpoint that
    /// counts; from now on a change of them reconciles the Service. Starts the watch on
    /// first use and waits for its first complete list.
    pub(crate) async fn nodes_by_rule(
        &self,
        service: &Service,
    ) -> Result<BTreeMap<RuleKey, BTreeSet<String>>, EndpointsNotRead> {
        self.state().interested.insert(service_key(service));
        let inner = self.inner.clone();
        self.inner
            .task
            .get_or_init(|| tokio::spawn(run(Arc::downgrade(&inner), inner.client.clone())));
        let mut ready = self.inner.ready.subscribe();
        tokio::time::timeout(FIRST_LIST_WAIT, ready.wait_for(|ready| *ready))
            .await
            .map_err(|_| EndpointsNotRead)?
            .map_err(|_| EndpointsNotRead)?;
        Ok(self.state().index.nodes_by_rule(service))
    }

    /// Stops reconciling `service` on endpoint changes (it is no longer `Local`).
    pub(crate) fn forget(&self, service: &Service) {
        let key = service_key(service);
        let mut state = self.state();
        if state.interested.remove(&key) {
            tracing::debug!(service = %format!("{}/{}", key.0, key.1), "endpoints no longer read");
        }
    }
}

impl Inner {
    /// Schedules one reconcile of each interested Service of `changed`, `coalesce` from
    /// now, unless one is scheduled already.
    fn schedule(self: &Arc<Self>, changed: Vec<ServiceKey>) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        for key in changed {
            if !state.interested.contains(&key) || !state.pending.insert(key.clone()) {
                continue;
            }
            let inner = Arc::downgrade(self);
            let coalesce = self.coalesce;
            tokio::spawn(async move {
                tokio::time::sleep(coalesce).await;
                let Some(inner) = inner.upgrade() else {
                    return;
                };
                inner
                    .state
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .pending
                    .remove(&key);
                let service = ObjectRef::new(&key.1).within(&key.0);
                let _ = inner.triggers.send(service);
            });
        }
    }
}

/// Which objects say where endpoints run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// `discovery.k8s.io/v1` EndpointSlices.
    Slices,
    /// Core `Endpoints` (EndpointSlices are forbidden).
    Endpoints,
}

/// Lists one EndpointSlice: allowed → slices; 403 → core Endpoints (said once).
async fn choose_source(client: &Client) -> Source {
    let slices: Api<EndpointSlice> = Api::all(client.clone());
    loop {
        match slices.list_metadata(&ListParams::default().limit(1)).await {
            Ok(_) => return Source::Slices,
            Err(kube::Error::Api(status)) if status.code == 403 => {
                tracing::warn!(
                    "EndpointSlices (discovery.k8s.io) are forbidden to this controller: reading core Endpoints for externalTrafficPolicy: Local Services; grant endpointslices get/list/watch to use them"
                );
                return Source::Endpoints;
            }
            Err(err) => {
                tracing::debug!(error = %err, "listing EndpointSlices failed; trying again");
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        }
    }
}

/// One watcher event reduced to what the index needs.
enum Change {
    /// A relist starts.
    Init,
    /// An object during a relist.
    InitApply(Option<(ServiceKey, String, Summary)>),
    /// The relist is complete.
    InitDone,
    /// An object (namespace, name) was added or changed; without a Service, it leaves
    /// the one it was filed under.
    Apply((String, String), Option<(ServiceKey, String, Summary)>),
    /// An object (namespace, name) was deleted.
    Delete((String, String)),
}

fn change_of<K: kube::Resource>(
    event: watcher::Event<K>,
    summarise: fn(&K) -> Option<(ServiceKey, String, Summary)>,
) -> Change {
    let object = |k: &K| {
        let meta = k.meta();
        (
            meta.namespace.clone().unwrap_or_default(),
            meta.name.clone().unwrap_or_default(),
        )
    };
    match event {
        watcher::Event::Init => Change::Init,
        watcher::Event::InitApply(k) => Change::InitApply(summarise(&k)),
        watcher::Event::InitDone => Change::InitDone,
        watcher::Event::Apply(k) => Change::Apply(object(&k), summarise(&k)),
        watcher::Event::Delete(k) => Change::Delete(object(&k)),
    }
}

/// Chooses the source and follows it into the index until the watch is dropped.
async fn run(inner: std::sync::Weak<Inner>, client: Client) {
    let source = choose_source(&client).await;
    let changes: BoxStream<'static, Change> = match source {
        Source::Slices => {
            let config = watcher::Config::default().labels(SERVICE_NAME_LABEL);
            watcher(Api::<EndpointSlice>::all(client), config)
                .default_backoff()
                .filter_map(|event| async move { logged(event) })
                .map(|event| change_of(event, summarise_slice))
                .boxed()
        }
        Source::Endpoints => watcher(Api::<Endpoints>::all(client), watcher::Config::default())
            .default_backoff()
            .filter_map(|event| async move { logged(event) })
            .map(|event| change_of(event, summarise_endpoints))
            .boxed(),
    };
    follow(inner, changes).await;
}

/// The event, or `None` after logging the watch error (the watcher backs off and
/// resumes by itself).
fn logged<K>(event: Result<watcher::Event<K>, watcher::Error>) -> Option<watcher::Event<K>> {
    match event {
        Ok(event) => Some(event),
        Err(err) => {
            tracing::warn!(error = %err, "watching endpoints failed; retrying");
            None
        }
    }
}

/// Files every change in the index and schedules the reconciles it calls for.
async fn follow(inner: std::sync::Weak<Inner>, mut changes: BoxStream<'static, Change>) {
    let mut relist: Option<EndpointIndex> = None;
    while let Some(change) = changes.next().await {
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let changed = {
            let mut state = inner.state.lock().unwrap_or_else(|e| e.into_inner());
            match change {
                Change::Init => {
                    relist = Some(EndpointIndex::default());
                    Vec::new()
                }
                Change::InitApply(filed) => {
                    if let (Some(index), Some((key, name, summary))) = (relist.as_mut(), filed) {
                        index.apply(key, name, summary);
                    }
                    Vec::new()
                }
                Change::InitDone => {
                    inner.ready.send_replace(true);
                    match relist.take() {
                        Some(index) => {
                            let changed = state.index.differing(&index);
                            state.index = index;
                            changed
                        }
                        None => Vec::new(),
                    }
                }
                Change::Apply(_, Some((key, name, summary))) => {
                    state.index.apply(key, name, summary)
                }
                Change::Apply(object, None) => state.index.remove(&object).into_iter().collect(),
                Change::Delete(object) => state.index.remove(&object).into_iter().collect(),
            }
        };
        inner.schedule(changed);
    }
}
