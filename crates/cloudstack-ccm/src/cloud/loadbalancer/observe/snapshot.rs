//! One shared view of CloudStack for a resync: every load-balancer rule, every allocated
//! public IP, every firewall rule, every network and every VM's default-NIC network the
//! account sees, each read with ONE paginated list call, plus the ingress items of the ACL lists in use (one call per list,
//! read when first needed). All Services reconciled during a resync read the same view,
//! so a resync of many unchanged Services costs a handful of calls, whatever the number
//! of Services and Nodes.
//!
//! The view is renewed when a resync starts ([`SnapshotCache::invalidate`]) and after any
//! change the controller made ([`SnapshotCache::invalidate`] from apply), and when it is
//! older than the cache's maximum age.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cloudstack::{
    FirewallRule, ListFirewallRules, ListLoadBalancerRules, ListNetworkAcls, ListNetworks,
    ListPublicIpAddresses, ListVirtualMachines, LoadBalancerRule, Network, NetworkAcl,
    PublicIpAddress, Request, VmSummary,
};

/// The shared view of CloudStack.
#[derive(Debug)]
pub struct CloudSnapshot {
    /// Every load-balancer rule the account sees.
    pub rules: Vec<LoadBalancerRule>,
    /// Every public IP allocated to the account.
    pub ips: Vec<PublicIpAddress>,
    /// Every firewall rule the account sees.
    pub firewall_rules: Vec<FirewallRule>,
    /// Every network the account sees.
    pub networks: Vec<Network>,
    /// Default-NIC network of every VM, by lower-case VM id.
    pub vm_networks: HashMap<String, String>,
    /// Ingress items by ACL list id, read on first use.
    acl_items: tokio::sync::Mutex<HashMap<String, Arc<Vec<NetworkAcl>>>>,
    /// When the lists were read.
    fetched_at: Instant,
}

impl CloudSnapshot {
    /// Reads the five lists concurrently.
    pub async fn fetch(client: &cloudstack::Client) -> Result<CloudSnapshot, cloudstack::Error> {
        let rules = ListLoadBalancerRules {
            listall: Some(true),
            ..Default::default()
        };
        let ips = ListPublicIpAddresses {
            listall: Some(true),
            allocatedonly: Some(true),
            ..Default::default()
        };
        let firewall = ListFirewallRules {
            listall: Some(true),
            ..Default::default()
        };
        let networks = ListNetworks {
            listall: Some(true),
            ..Default::default()
        };
        let vms = ListVirtualMachines {
            listall: Some(true),
            details: vec!["min".into(), "nics".into()],
            ..Default::default()
        };
        let (rules, ips, firewall_rules, networks, vms) = futures::try_join!(
            client.list_load_balancer_rules(&rules),
            client.list_public_ip_addresses(&ips),
            client.list_firewall_rules(&firewall),
            client.list_networks(&networks),
            // Only the fields of the VM → network map are decoded.
            client.list_all::<VmSummary>(
                ListVirtualMachines::COMMAND,
                "virtualmachine",
                vms.to_params()
            ),
        )?;
        Ok(CloudSnapshot {
            rules,
            ips,
            firewall_rules,
            networks,
            vm_networks: vm_networks(&vms),
            acl_items: tokio::sync::Mutex::default(),
            fetched_at: Instant::now(),
        })
    }

    /// A snapshot made of given lists (for tests and the dry run).
    pub fn from_parts(
        rules: Vec<LoadBalancerRule>,
        ips: Vec<PublicIpAddress>,
        firewall_rules: Vec<FirewallRule>,
        networks: Vec<Network>,
        vms: &[VmSummary],
    ) -> CloudSnapshot {
        CloudSnapshot {
            rules,
            ips,
            firewall_rules,
            networks,
            vm_networks: vm_networks(vms),
            acl_items: tokio::sync::Mutex::default(),
            fetched_at: Instant::now(),
        }
    }

    /// The allocated IP with this id.
    pub fn ip_by_id(&self, id: &str) -> Option<&PublicIpAddress> {
        self.ips.iter().find(|ip| ip.id.as_deref() == Some(id))
    }

    /// The allocated IP with this address.
    pub fn ip_by_address(&self, address: &str) -> Option<&PublicIpAddress> {
        self.ips
            .iter()
            .find(|ip| ip.ipaddress.as_deref() == Some(address))
    }

    /// The network with this id.
    pub fn network(&self, id: &str) -> Option<&Network> {
        self.networks.iter().find(|n| n.id.as_deref() == Some(id))
    }

    /// Rules on the public IP `ip_id`.
    pub fn rules_on_ip<'a>(
        &'a self,
        ip_id: &'a str,
    ) -> impl Iterator<Item = &'a LoadBalancerRule> + 'a {
        self.rules
            .iter()
            .filter(move |r| r.publicipid.as_deref() == Some(ip_id))
    }

    /// Firewall rules on the public IP `ip_id`.
    pub fn firewall_rules_on_ip<'a>(
        &'a self,
        ip_id: &'a str,
    ) -> impl Iterator<Item = &'a FirewallRule> + 'a {
        self.firewall_rules
            .iter()
            .filter(move |r| r.ipaddressid.as_deref() == Some(ip_id))
    }

    /// The ingress items of ACL list `acl_id` (one `listNetworkACLs` the first time).
    pub async fn acl_items(
        &self,
        client: &cloudstack::Client,
        acl_id: &str,
    ) -> Result<Arc<Vec<NetworkAcl>>, cloudstack::Error> {
        let mut items = self.acl_items.lock().await;
        if let Some(found) = items.get(acl_id) {
            return Ok(found.clone());
        }
        let request = ListNetworkAcls {
            aclid: Some(acl_id.to_string()),
            traffictype: Some("Ingress".into()),
            listall: Some(true),
            ..Default::default()
        };
        let read = Arc::new(client.list_network_acls(&request).await?);
        items.insert(acl_id.to_string(), read.clone());
        Ok(read)
    }
}

/// The default-NIC network of each VM, by lower-case VM id.
fn vm_networks(vms: &[VmSummary]) -> HashMap<String, String> {
    vms.iter()
        .filter_map(|vm| {
            let network = vm.default_nic()?.networkid.clone()?;
            Some((vm.id.as_deref()?.to_ascii_lowercase(), network))
        })
        .collect()
}

/// Holds the current [`CloudSnapshot`]; concurrent readers share one fetch.
#[derive(Debug)]
pub struct SnapshotCache {
    /// The view and the generation it was read in.
    current: tokio::sync::Mutex<Option<(u64, Arc<CloudSnapshot>)>>,
    /// Bumped by every invalidation; a view read in an older generation is not used.
    generation: AtomicU64,
    max_age: Duration,
}

impl SnapshotCache {
    /// A cache whose view is renewed at least every `max_age`.
    pub fn new(max_age: Duration) -> Self {
        Self {
            current: tokio::sync::Mutex::new(None),
            generation: AtomicU64::new(0),
            max_age,
        }
    }

    /// The current view, read from CloudStack if there is none, it is too old, or it was
    /// invalidated. Callers arriving during a read wait for it and share it.
    pub async fn get(
        &self,
        client: &cloudstack::Client,
    ) -> Result<Arc<CloudSnapshot>, cloudstack::Error> {
        let mut current = self.current.lock().await;
        let generation = self.generation.load(Ordering::SeqCst);
        if let Some((read_in, snapshot)) = current.as_ref()
            && *read_in == generation
            && snapshot.fetched_at.elapsed() < self.max_age
        {
            return Ok(snapshot.clone());
        }
        let fresh = Arc::new(CloudSnapshot::fetch(client).await?);
        // Stamped with the generation seen before the read: an invalidation during the
        // read (a change that may be missing from it) makes the next caller read again.
        *current = Some((generation, fresh.clone()));
        Ok(fresh)
    }

    /// Forgets the view; the next [`SnapshotCache::get`] reads CloudStack again.
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vms_map_to_their_default_nic_network() {
        let vms: Vec<VmSummary> = serde_json::from_value(serde_json::json!([
            { "id": "VM-A", "nic": [
                { "networkid": "secondary", "isdefault": false },
                { "networkid": "main", "isdefault": true } ] },
            { "id": "vm-b", "nic": [] }
        ]))
        .expect("vms decode");
        let snapshot =
            CloudSnapshot::from_parts(Vec::new(), Vec::new(), Vec::new(), Vec::new(), &vms);
        assert_eq!(
            snapshot.vm_networks.get("vm-a").map(String::as_str),
            Some("main")
        );
        assert!(
            !snapshot.vm_networks.contains_key("vm-b"),
            "no default NIC, no network"
        );
    }

    #[test]
    fn lookups_by_id_address_and_ip() {
        let rules: Vec<LoadBalancerRule> = serde_json::from_value(serde_json::json!([
            { "id": "r1", "publicipid": "ip1" }, { "id": "r2", "publicipid": "ip2" }
        ]))
        .expect("rules decode");
        let ips: Vec<PublicIpAddress> = serde_json::from_value(
            serde_json::json!([{ "id": "ip1", "ipaddress": "203.0.113.5" }]),
        )
        .expect("ips decode");
        let snapshot = CloudSnapshot::from_parts(rules, ips, Vec::new(), Vec::new(), &[]);
        assert_eq!(
            snapshot
                .ip_by_address("203.0.113.5")
                .and_then(|ip| ip.id.as_deref()),
            Some("ip1")
        );
        assert!(snapshot.ip_by_id("ip2").is_none());
        let on_ip1: Vec<_> = snapshot
            .rules_on_ip("ip1")
            .filter_map(|r| r.id.as_deref())
            .collect();
        assert_eq!(on_ip1, ["r1"]);
    }
}
