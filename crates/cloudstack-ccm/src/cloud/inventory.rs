//! One cached, paginated view of the VMs; every node lookup reads it.
//!
//! The whole view comes from ONE `listVirtualMachines` (all pages, `listall=true`,
//! `projectid` when configured, `details=min,nics,servoff`). It is refreshed when it
//! is older than [`InventorySettings::max_age`] and when a lookup misses, with
//! single flight: one refresh runs at a time, callers that arrive meanwhile wait for
//! it and share its result (or its error). A miss right after a refresh does not
//! refresh again within [`InventorySettings::min_refresh_interval`], so a node that
//! really has no VM cannot cause a storm of list calls.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;

/// `details` asked of `listVirtualMachines`: `min` keeps the answer small, `nics`
/// adds the addresses and `servoff` the service offering name (the instance type).
pub(crate) const VM_DETAILS: [&str; 3] = ["min", "nics", "servoff"];

/// What the controller manager needs to know about one VM.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VmRecord {
    /// VM id (lower-case UUID).
    pub id: String,
    /// VM name (the guest host name), as CloudStack returns it.
    pub name: String,
    /// VM state (`Running`, `Stopped`, …).
    pub state: String,
    /// Zone name.
    pub zone_name: String,
    /// Service offering name; empty when CloudStack did not return it.
    pub service_offering_name: String,
    /// The IPv4 and IPv6 addresses of every NIC: the default NIC's first (IPv4, then
    /// IPv6), then the other NICs' in the order of their network id (NIC order in a
    /// reply is not guaranteed, so a fixed order keeps node addresses stable).
    pub internal_ips: Vec<String>,
    /// Static-NAT public IP of the VM.
    pub public_ip: Option<String>,
    /// Network of the default NIC.
    pub network_id: Option<String>,
}

impl VmRecord {
    /// True when the VM is stopped or on its way there (`Stopped`, `Stopping`, `Shutdown`).
    pub(crate) fn is_shut_down(&self) -> bool {
        matches!(self.state.as_str(), "Stopped" | "Stopping" | "Shutdown")
    }

    /// True when the VM is `Running`.
    pub fn is_running(&self) -> bool {
        self.state == "Running"
    }
}

impl From<&cloudstack::VmSummary> for VmRecord {
    fn from(vm: &cloudstack::VmSummary) -> Self {
        let non_empty = |value: &Option<String>| value.clone().filter(|v| !v.is_empty());
        let mut nics: Vec<&cloudstack::NicSummary> = vm.nic.iter().collect();
        nics.sort_by_key(|nic| {
            (
                nic.isdefault != Some(true),
                nic.networkid.clone(),
                nic.ipaddress.clone(),
            )
        });
        let internal_ips = nics
            .iter()
            .flat_map(|nic| [non_empty(&nic.ipaddress), non_empty(&nic.ip6address)])
            .flatten()
            .collect();
        Self {
            id: vm.id.clone().unwrap_or_default().to_ascii_lowercase(),
            name: vm.name.clone().unwrap_or_default(),
            state: vm.state.clone().unwrap_or_default(),
            zone_name: vm.zonename.clone().unwrap_or_default(),
            service_offering_name: vm.serviceofferingname.clone().unwrap_or_default(),
            internal_ips,
            public_ip: non_empty(&vm.publicip),
            // The default NIC sorts first.
            network_id: nics.first().and_then(|n| non_empty(&n.networkid)),
        }
    }
}

/// Whether a VM in this state is gone for Kubernetes: `Destroyed` (kept, and listed to
/// admin keys, until `expunge.delay` passes; a replacement VM may already carry its name)
/// or `Expunging`. Such a VM is left out of the inventory, so no Node matches it.
fn is_destroyed(state: Option<&str>) -> bool {
    matches!(state, Some("Destroyed" | "Expunging"))
}

/// Error listing the VMs.
#[derive(Debug, Clone, thiserror::Error)]
#[error("listing virtual machines: {0}")]
pub struct InventoryError(Arc<dyn std::error::Error + Send + Sync>);

impl InventoryError {
    /// Wraps the error of a VM source.
    pub fn new(source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self(Arc::new(source))
    }
}

/// Where the VMs come from: one call returning every VM the controller may see.
pub trait VmSource: Send + Sync {
    /// Lists all VMs (all pages).
    fn list_vms(&self) -> BoxFuture<'_, Result<Vec<VmRecord>, InventoryError>>;
}

/// [`VmSource`] backed by the CloudStack API: `listVirtualMachines` with
/// `listall=true` and `VM_DETAILS`, all pages. The client adds the configured
/// `projectid` itself.
#[derive(Debug, Clone)]
pub struct CloudStackVms {
    client: cloudstack::Client,
}

impl CloudStackVms {
    /// Lists with `client`.
    pub fn new(client: cloudstack::Client) -> Self {
        Self { client }
    }
}

impl VmSource for CloudStackVms {
    fn list_vms(&self) -> BoxFuture<'_, Result<Vec<VmRecord>, InventoryError>> {
        Box::pin(async move {
            let request = cloudstack::ListVirtualMachines {
                listall: Some(true),
                details: VM_DETAILS.iter().map(|d| d.to_string()).collect(),
                ..Default::default()
            };
            use cloudstack::Request as _;
            // Only the fields of a VmRecord are decoded (not whole VM objects), and each
            // page becomes records before the next is read.
            self.client
                .list_all_mapped(
                    cloudstack::ListVirtualMachines::COMMAND,
                    "virtualmachine",
                    request.to_params(),
                    |vm: cloudstack::VmSummary| {
                        (!is_destroyed(vm.state.as_deref())).then(|| VmRecord::from(&vm))
                    },
                )
                .await
                .map_err(InventoryError::new)
        })
    }
}

/// How fresh the inventory is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InventorySettings {
    /// A view older than this is refreshed before it is read.
    pub max_age: Duration,
    /// A miss refreshes only when the view is at least this old.
    pub min_refresh_interval: Duration,
}

impl Default for InventorySettings {
    fn default() -> Self {
        Self {
            max_age: Duration::from_secs(30),
            min_refresh_interval: Duration::from_secs(2),
        }
    }
}

/// The VMs as of one list call, indexed by id and by lower-cased name.
#[derive(Debug, Default)]
pub struct ListedVms {
    vms: Vec<Arc<VmRecord>>,
    by_id: HashMap<String, Arc<VmRecord>>,
    by_name: HashMap<String, Vec<Arc<VmRecord>>>,
    fetched_at: Option<Instant>,
    /// When the list call was sent (monotonic, and on the wall clock).
    asked_at: Option<(Instant, jiff::Timestamp)>,
}

impl ListedVms {
    /// A view of `records` as if just listed.
    pub fn from_records(records: Vec<VmRecord>) -> Self {
        let now = Instant::now();
        Self::new(records, (now, jiff::Timestamp::now()), now)
    }

    fn new(
        records: Vec<VmRecord>,
        asked_at: (Instant, jiff::Timestamp),
        fetched_at: Instant,
    ) -> Self {
        let vms: Vec<Arc<VmRecord>> = records.into_iter().map(Arc::new).collect();
        let mut by_id = HashMap::with_capacity(vms.len());
        let mut by_name: HashMap<String, Vec<Arc<VmRecord>>> = HashMap::with_capacity(vms.len());
        for vm in &vms {
            by_id.insert(vm.id.clone(), vm.clone());
            by_name
                .entry(vm.name.to_ascii_lowercase())
                .or_default()
                .push(vm.clone());
        }
        Self {
            vms,
            by_id,
            by_name,
            fetched_at: Some(fetched_at),
            asked_at: Some(asked_at),
        }
    }

    /// Whether this list was asked for after an object created at `created` (a Node's
    /// `creationTimestamp`, whole seconds on the API server's clock) existed: asked a
    /// second or more after it, or after `known_since`, when the caller already knew the
    /// object. A VM replaced under the same name shows in no older list.
    pub(crate) fn asked_after(&self, created: jiff::Timestamp, known_since: Instant) -> bool {
        self.asked_at.is_some_and(|(at, wall)| {
            at >= known_since
                || wall
                    >= created
                        .saturating_add(jiff::SignedDuration::from_secs(1))
                        .unwrap_or(created)
        })
    }

    /// The VM with this id (compared case-insensitively).
    pub(crate) fn by_id(&self, id: &str) -> Option<&Arc<VmRecord>> {
        self.by_id.get(&id.to_ascii_lowercase())
    }

    /// The VMs whose name equals `name`, ignoring ASCII case (several when names repeat).
    pub(crate) fn by_name(&self, name: &str) -> &[Arc<VmRecord>] {
        self.by_name
            .get(&name.to_ascii_lowercase())
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// Every VM.
    pub fn vms(&self) -> &[Arc<VmRecord>] {
        &self.vms
    }

    /// When the list call was answered; `None` before the first refresh.
    pub(crate) fn fetched_at(&self) -> Option<Instant> {
        self.fetched_at
    }

    fn age(&self) -> Option<Duration> {
        self.fetched_at.map(|at| at.elapsed())
    }
}

/// Counters of the inventory's work since it was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InventoryStats {
    /// List calls made (successful or not).
    pub refreshes: u64,
    /// Lookups answered from the view as it was.
    pub hits: u64,
    /// Lookups the view could not answer as it was (they refresh it when allowed).
    pub misses: u64,
}

/// Called on each refresh (`true` when it succeeded) and each lookup (`true` when the
/// view answered it as it was, `false` when it needed a refresh); lets the metrics
/// registry count them.
pub trait InventoryObserver: Send + Sync {
    /// A refresh ended.
    fn refreshed(&self, ok: bool);
    /// A lookup was answered from the view (`true`) or not (`false`).
    fn looked_up(&self, hit: bool);
}

impl InventoryObserver for crate::metrics::Metrics {
    fn refreshed(&self, ok: bool) {
        self.inventory_refresh(ok);
    }

    fn looked_up(&self, hit: bool) {
        if hit {
            self.inventory_hit();
        } else {
            self.inventory_miss();
        }
    }
}

#[derive(Debug, Default)]
struct RefreshState {
    last_error: Option<InventoryError>,
}

/// The cached, single-flight view of all VMs.
pub struct Inventory {
    source: Arc<dyn VmSource>,
    settings: InventorySettings,
    snapshot: RwLock<Arc<ListedVms>>,
    refresh: tokio::sync::Mutex<RefreshState>,
    attempts: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    observer: Option<Arc<dyn InventoryObserver>>,
    /// Set by [`Inventory::distrust`]: a call built on the view failed; the next read lists
    /// again.
    distrusted: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Inventory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inventory")
            .field("settings", &self.settings)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Inventory {
    /// An empty inventory reading from `source`; the first read lists the VMs.
    pub fn new(source: Arc<dyn VmSource>, settings: InventorySettings) -> Self {
        Self {
            source,
            settings,
            snapshot: RwLock::new(Arc::new(ListedVms::default())),
            refresh: tokio::sync::Mutex::new(RefreshState::default()),
            attempts: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            observer: None,
            distrusted: Default::default(),
        }
    }

    /// Says that a call built on the current view failed (a VM assigned to a load
    /// balancer may be gone since the view was listed): the next read lists the VMs again,
    /// so a gone VM is not assigned again and again until the view ages out.
    pub(crate) fn distrust(&self) {
        self.distrusted.store(true, Ordering::SeqCst);
    }

    /// Whether the view is distrusted (listed again by the next read; the failure that
    /// distrusted it is retried on the caller's back-off, which bounds the lists).
    pub(crate) fn distrusts(&self) -> bool {
        self.distrusted.load(Ordering::SeqCst)
    }

    /// Reports refreshes and lookups to `observer` as well.
    pub fn with_observer(mut self, observer: Arc<dyn InventoryObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// The freshness settings.
    pub fn settings(&self) -> InventorySettings {
        self.settings
    }

    /// Counters since creation.
    pub fn stats(&self) -> InventoryStats {
        InventoryStats {
            refreshes: self.attempts.load(Ordering::SeqCst),
            hits: self.hits.load(Ordering::SeqCst),
            misses: self.misses.load(Ordering::SeqCst),
        }
    }

    /// The current view, refreshed first when older than `max_age` (or never fetched).
    pub async fn snapshot(&self) -> Result<Arc<ListedVms>, InventoryError> {
        let max_age = self.settings.max_age;
        self.refresh_when(|snap| snap.age().is_none_or(|age| age >= max_age))
            .await
    }

    /// Answers `find` from the view; when it finds nothing, refreshes once (unless the
    /// view is younger than `min_refresh_interval`) and asks again. `None` means the
    /// VM is not there.
    pub async fn lookup<T>(
        &self,
        find: impl Fn(&ListedVms) -> Option<T>,
    ) -> Result<Option<T>, InventoryError> {
        self.lookup_listed_after(None, find).await
    }

    /// [`Inventory::lookup`] in a view asked for after the object `created` (when given:
    /// its creation time on the API server's clock, whole seconds, and a moment it is
    /// known to have existed): an older view is listed again first, so an object made
    /// after it — a Node registered for a VM that replaced another of the same name — is
    /// never matched from it.
    pub async fn lookup_listed_after<T>(
        &self,
        created: Option<(jiff::Timestamp, Option<Instant>)>,
        find: impl Fn(&ListedVms) -> Option<T>,
    ) -> Result<Option<T>, InventoryError> {
        // A moment the object existed: when the caller received it, else now.
        let now = Instant::now();
        let newer = |snap: &ListedVms| {
            created.is_none_or(|(created, known_since)| {
                snap.asked_after(created, known_since.unwrap_or(now))
            })
        };
        let mut snapshot = self.snapshot().await?;
        if !newer(&snapshot) {
            snapshot = self.refresh_when(|snap| !newer(snap)).await?;
        }
        if let Some(found) = find(&snapshot) {
            self.count_lookup(true);
            return Ok(Some(found));
        }
        self.count_lookup(false);
        let snapshot = self.refresh_after_miss(&snapshot).await?;
        Ok(find(&snapshot))
    }

    /// The view as it is, whatever its age (listed first if it never was), for readers
    /// that need only what does not change while a VM lives (its default network) and
    /// leave freshness to the node controllers' refreshes. When it lacks any VM of `ids`
    /// (a VM newer than the view), it is refreshed once, as [`Inventory::lookup`] does on
    /// a miss; a VM still missing after that is not there.
    pub(crate) async fn view_holding<'a>(
        &self,
        ids: impl IntoIterator<Item = &'a str> + Clone,
    ) -> Result<Arc<ListedVms>, InventoryError> {
        let view = self
            .refresh_when(|view| view.fetched_at().is_none())
            .await?;
        let holds_all =
            |view: &ListedVms| ids.clone().into_iter().all(|id| view.by_id(id).is_some());
        if holds_all(&view) {
            self.count_lookup(true);
            return Ok(view);
        }
        self.count_lookup(false);
        self.refresh_after_miss(&view).await
    }

    /// The view, listed again first when it still holds one of `ids` and is older than
    /// `max_age` (or was never listed): VMs about to be removed from a load balancer may
    /// have been expunged since, and CloudStack refuses to remove those.
    pub(crate) async fn view_confirming<'a>(
        &self,
        ids: impl IntoIterator<Item = &'a str> + Clone,
        max_age: Duration,
    ) -> Result<Arc<ListedVms>, InventoryError> {
        let min_interval = max_age;
        self.refresh_when(|view| {
            let holds_one = ids.clone().into_iter().any(|id| view.by_id(id).is_some());
            view.fetched_at().is_none()
                || (holds_one && view.age().is_none_or(|age| age >= min_interval))
        })
        .await
    }

    /// After `missed` lacked a VM: lists again unless another caller already renewed the
    /// view or `missed` is younger than `min_refresh_interval`.
    async fn refresh_after_miss(
        &self,
        missed: &ListedVms,
    ) -> Result<Arc<ListedVms>, InventoryError> {
        let min_interval = self.settings.min_refresh_interval;
        let seen = missed.fetched_at();
        self.refresh_when(|view| {
            view.fetched_at() == seen && view.age().is_none_or(|age| age >= min_interval)
        })
        .await
    }

    /// Lists the VMs now (single flight), whatever the age of the view.
    pub async fn refresh(&self) -> Result<Arc<ListedVms>, InventoryError> {
        self.refresh_when(|_| true).await
    }

    /// The view as it is now, without reading CloudStack (empty before the first list).
    pub(crate) fn current(&self) -> Arc<ListedVms> {
        self.snapshot
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Refreshes when `stale` says the view is stale; a caller that waited while
    /// another refresh ran takes that refresh's result instead of starting its own.
    async fn refresh_when(
        &self,
        stale: impl Fn(&ListedVms) -> bool,
    ) -> Result<Arc<ListedVms>, InventoryError> {
        let stale = |view: &ListedVms| stale(view) || self.distrusts();
        let current = self.current();
        if !stale(&current) {
            return Ok(current);
        }
        let attempts_seen = self.attempts.load(Ordering::SeqCst);
        let mut state = self.refresh.lock().await;
        if self.attempts.load(Ordering::SeqCst) != attempts_seen {
            return match &state.last_error {
                Some(error) => Err(error.clone()),
                None => Ok(self.current()),
            };
        }
        let current = self.current();
        if !stale(&current) {
            return Ok(current);
        }
        let asked_at = (Instant::now(), jiff::Timestamp::now());
        let result = self.source.list_vms().await;
        self.attempts.fetch_add(1, Ordering::SeqCst);
        if let Some(observer) = &self.observer {
            observer.refreshed(result.is_ok());
        }
        match result {
            Ok(records) => {
                tracing::debug!(vms = records.len(), "inventory refreshed");
                self.distrusted.store(false, Ordering::SeqCst);
                let fresh = Arc::new(ListedVms::new(records, asked_at, Instant::now()));
                *self
                    .snapshot
                    .write()
                    .unwrap_or_else(|poisoned| poisoned.into_inner()) = fresh.clone();
                state.last_error = None;
                Ok(fresh)
            }
            Err(error) => {
                tracing::warn!(%error, "inventory refresh failed");
                state.last_error = Some(error.clone());
                Err(error)
            }
        }
    }

    fn count_lookup(&self, hit: bool) {
        let counter = if hit { &self.hits } else { &self.misses };
        counter.fetch_add(1, Ordering::SeqCst);
        if let Some(observer) = &self.observer {
            observer.looked_up(hit);
        }
    }
}

#[cfg(test)]
#[path = "inventory_tests.rs"]
mod tests;
