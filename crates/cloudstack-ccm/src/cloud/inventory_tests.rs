//! Inventory unit tests: refresh, single flight, misses, the records kept.

use super::*;
use std::sync::Mutex;

/// A VM source that counts its calls and can be slowed down or made to fail.
#[derive(Default)]
struct CountingSource {
    vms: Mutex<Vec<VmRecord>>,
    calls: AtomicU64,
    delay: Duration,
    fail: std::sync::atomic::AtomicBool,
}

#[derive(Debug, thiserror::Error)]
#[error("listVirtualMachines failed")]
struct ListFailed;

impl VmSource for CountingSource {
    fn list_vms(&self) -> BoxFuture<'_, Result<Vec<VmRecord>, InventoryError>> {
        Box::pin(async move {
            self.calls.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(self.delay).await;
            if self.fail.load(Ordering::SeqCst) {
                return Err(InventoryError::new(ListFailed));
            }
            Ok(self.vms.lock().unwrap().clone())
        })
    }
}

fn vm(id: &str, name: &str) -> VmRecord {
    VmRecord {
        id: id.into(),
        name: name.into(),
        state: "Running".into(),
        ..Default::default()
    }
}

fn inventory(source: &Arc<CountingSource>, min_refresh_interval: Duration) -> Arc<Inventory> {
    Arc::new(Inventory::new(
        source.clone(),
        InventorySettings {
            max_age: Duration::from_secs(600),
            min_refresh_interval,
        },
    ))
}

#[tokio::test]
async fn indexes_by_id_and_lower_cased_name() {
    let source = Arc::new(CountingSource::default());
    *source.vms.lock().unwrap() = vec![vm("aa", "Worker-1"), vm("bb", "worker-2")];
    let inventory = inventory(&source, Duration::ZERO);
    let snapshot = inventory.snapshot().await.unwrap();
    assert_eq!(snapshot.by_id("AA").unwrap().name, "Worker-1");
    assert_eq!(snapshot.by_name("WORKER-1")[0].id, "aa");
    assert!(
        snapshot.by_name("worker").is_empty(),
        "never a substring match"
    );
    assert_eq!(snapshot.vms().len(), 2);
}

#[tokio::test]
async fn concurrent_misses_share_one_refresh() {
    let source = Arc::new(CountingSource {
        delay: Duration::from_millis(50),
        ..Default::default()
    });
    let inventory = inventory(&source, Duration::ZERO);
    inventory.snapshot().await.unwrap();
    assert_eq!(source.calls.load(Ordering::SeqCst), 1);
    source.vms.lock().unwrap().push(vm("cc", "late"));

    let lookups = (0..20).map(|_| {
        let inventory = inventory.clone();
        tokio::spawn(async move { inventory.lookup(|s| s.by_id("cc").cloned()).await })
    });
    for found in futures::future::join_all(lookups).await {
        assert_eq!(found.unwrap().unwrap().unwrap().name, "late");
    }
    assert_eq!(
        source.calls.load(Ordering::SeqCst),
        2,
        "one list for 20 misses"
    );
    let stats = inventory.stats();
    assert_eq!((stats.refreshes, stats.hits, stats.misses), (2, 0, 20));
}

#[tokio::test]
async fn miss_within_min_interval_does_not_refresh() {
    let source = Arc::new(CountingSource::default());
    let inventory = inventory(&source, Duration::from_secs(600));
    for _ in 0..5 {
        let found = inventory
            .lookup(|s| s.by_id("gone").cloned())
            .await
            .unwrap();
        assert!(found.is_none());
    }
    assert_eq!(source.calls.load(Ordering::SeqCst), 1);
    assert_eq!(inventory.stats().misses, 5);
}

#[tokio::test]
async fn stale_view_is_refreshed_before_reading() {
    let source = Arc::new(CountingSource::default());
    let inventory = Inventory::new(
        source.clone(),
        InventorySettings {
            max_age: Duration::ZERO,
            min_refresh_interval: Duration::ZERO,
        },
    );
    inventory.snapshot().await.unwrap();
    inventory.snapshot().await.unwrap();
    assert_eq!(source.calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn waiters_share_a_failed_refresh_and_the_next_call_retries() {
    let source = Arc::new(CountingSource {
        delay: Duration::from_millis(50),
        ..Default::default()
    });
    source.fail.store(true, Ordering::SeqCst);
    let inventory = inventory(&source, Duration::ZERO);
    let snapshots = (0..10).map(|_| {
        let inventory = inventory.clone();
        tokio::spawn(async move { inventory.snapshot().await.map(|_| ()) })
    });
    for result in futures::future::join_all(snapshots).await {
        let error = result.unwrap().unwrap_err();
        assert!(
            error.to_string().contains("listVirtualMachines failed"),
            "{error}"
        );
    }
    assert_eq!(source.calls.load(Ordering::SeqCst), 1);
    source.fail.store(false, Ordering::SeqCst);
    inventory.snapshot().await.unwrap();
    assert_eq!(source.calls.load(Ordering::SeqCst), 2);
}
#[tokio::test]
async fn a_view_holding_known_vms_is_used_whatever_its_age() {
    let source = Arc::new(CountingSource::default());
    *source.vms.lock().unwrap() = vec![vm("vm-1", "node-1")];
    let inventory = Arc::new(Inventory::new(
        source.clone(),
        InventorySettings {
            max_age: Duration::ZERO,
            min_refresh_interval: Duration::ZERO,
        },
    ));
    // Never listed: one list.
    let view = inventory.view_holding(["vm-1"]).await.unwrap();
    assert!(view.by_id("VM-1").is_some());
    assert_eq!(source.calls.load(Ordering::SeqCst), 1);
    // Older than max_age but holding the VMs asked for: no list.
    inventory.view_holding(["vm-1"]).await.unwrap();
    assert_eq!(source.calls.load(Ordering::SeqCst), 1);
    // A VM newer than the view: one refresh, which finds it.
    source.vms.lock().unwrap().push(vm("vm-2", "node-2"));
    let view = inventory.view_holding(["vm-1", "vm-2"]).await.unwrap();
    assert!(view.by_id("vm-2").is_some());
    assert_eq!(source.calls.load(Ordering::SeqCst), 2);
}

#[test]
fn record_from_virtual_machine_lists_the_default_nic_first() {
    let vm: cloudstack::VmSummary = serde_json::from_value(serde_json::json!({
        "id": "8A0B4F3E-1C2D-4E5F-9A8B-7C6D5E4F3A2B",
        "name": "worker-1",
        "state": "Stopping",
        "zonename": "zone-1",
        "serviceofferingname": "Small Instance",
        "hostname": "hypervisor-7",
        "publicip": "203.0.113.7",
        "nic": [
            {"ipaddress": "10.1.1.9", "networkid": "net-b", "isdefault": false},
            {"ipaddress": "10.1.1.5", "ip6address": "fd00::5", "isdefault": true},
            {"ipaddress": "192.168.7.4", "networkid": "net-a", "isdefault": false}
        ]
    }))
    .unwrap();
    let record = VmRecord::from(&vm);
    assert_eq!(record.id, "8a0b4f3e-1c2d-4e5f-9a8b-7c6d5e4f3a2b");
    assert_eq!(
        record.internal_ips,
        ["10.1.1.5", "fd00::5", "192.168.7.4", "10.1.1.9"]
    );
    assert_eq!(record.public_ip.as_deref(), Some("203.0.113.7"));
    assert_eq!(record.service_offering_name, "Small Instance");
    assert!(record.is_shut_down());
    assert!(!record.is_running());
}
