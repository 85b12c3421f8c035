//! [`AccountView`]: what the account sees of CloudStack, shared by every Service of a
//! resync: every load-balancer rule, every allocated public IP, every firewall rule,
//! every network and every VM's default-NIC network, each read with ONE paginated list
//! call, plus the ingress items of the ACL lists in use (one call per list, read when
//! first needed). All Services reconciled during a resync read the same view, so a
//! resync of many unchanged Services costs a handful of calls, whatever the number of
//! Services and Nodes.
//!
//! [`AccountViewCache`] renews the view when a resync starts or a Node changes
//! ([`AccountViewCache::invalidate`]), and when it is older than the cache's maximum
//! age. After a change the controller made itself ([`AccountViewCache::invalidate_objects`]
//! from apply) the rules, IPs, firewall rules and networks are read again but the VM →
//! network map is kept: the controller never changes VMs, and re-listing every VM after
//! every Service would cost O(Nodes) per Service.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cloudstack::{
    FirewallRule, ListFirewallRules, ListLoadBalancerRules, ListNetworkAcls, ListNetworks,
    ListPublicIpAddresses, ListVirtualMachines, LoadBalancerRule, Network, NetworkAcl,
    PublicIpAddress, Request, VmSummary,
};

/// What the account sees of CloudStack's load-balancer objects, networks and VMs, as
/// read at one time (the ACL items as first needed).
#[derive(Debug)]
pub(crate) struct AccountView {
    /// Every load-balancer rule the account sees.
    pub rules: Vec<LoadBalancerRule>,
    /// Every public IP allocated to the account.
    pub ips: Vec<PublicIpAddress>,
    /// Every firewall rule the account sees.
    pub firewall_rules: Vec<FirewallRule>,
    /// Every network the account sees.
    pub networks: Vec<Network>,
    /// Default-NIC network of every VM, by lower-case VM id (shared with the next view
    /// when only the controller's own changes made this one stale).
    pub vm_networks: Arc<HashMap<String, String>>,
    /// Ingress items by ACL list id, read on first use.
    acl_items: tokio::sync::Mutex<HashMap<String, Arc<Vec<NetworkAcl>>>>,
    /// When the lists were read.
    fetched_at: Instant,
    /// When the VM list was read.
    vms_fetched_at: Instant,
}

impl AccountView {
    /// Reads the lists concurrently; with `known_vms` (a map and when it was read) the
    /// VM list is not read again.
    async fn fetch_keeping_vms(
        client: &cloudstack::Client,
        known_vms: Option<(Arc<HashMap<String, String>>, Instant)>,
    ) -> Result<AccountView, cloudstack::Error> {
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
        let read_vms = async {
            if let Some(known) = known_vms {
                return Ok(known);
            }
            // Only the fields of the VM → network map are decoded.
            let listed = client
                .list_all::<VmSummary>(
                    ListVirtualMachines::COMMAND,
                    "virtualmachine",
                    vms.to_params(),
                )
                .await?;
            Ok((Arc::new(vm_networks(&listed)), Instant::now()))
        };
        let (rules, ips, firewall_rules, networks, (vm_networks, vms_fetched_at)) = futures::try_join!(
            client.list_load_balancer_rules(&rules),
            client.list_public_ip_addresses(&ips),
            client.list_firewall_rules(&firewall),
            client.list_networks(&networks),
            read_vms,
        )?;
        Ok(AccountView {
            rules,
            ips,
            firewall_rules,
            networks,
            vm_networks,
            acl_items: tokio::sync::Mutex::default(),
            fetched_at: Instant::now(),
            vms_fetched_at,
        })
    }

    /// A view made of given lists, for tests.
    #[cfg(test)]
    pub fn from_parts(
        rules: Vec<LoadBalancerRule>,
        ips: Vec<PublicIpAddress>,
        firewall_rules: Vec<FirewallRule>,
        networks: Vec<Network>,
        vms: &[VmSummary],
    ) -> AccountView {
        AccountView {
            rules,
            ips,
            firewall_rules,
            networks,
            vm_networks: Arc::new(vm_networks(vms)),
            acl_items: tokio::sync::Mutex::default(),
            fetched_at: Instant::now(),
            vms_fetched_at: Instant::now(),
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

/// Holds the current [`AccountView`]; concurrent readers share one fetch.
#[derive(Debug)]
pub(crate) struct AccountViewCache {
    /// The view and the generations it was read in.
    current: tokio::sync::Mutex<Option<Cached>>,
    /// Bumped by every invalidation; a view read in an older generation is not used.
    generation: AtomicU64,
    /// Bumped by the invalidations that also drop the VM → network map.
    vm_generation: AtomicU64,
    max_age: Duration,
}

/// A view with the generations it was read in.
#[derive(Debug)]
struct Cached {
    generation: u64,
    vm_generation: u64,
    view: Arc<AccountView>,
}

impl AccountViewCache {
    /// A cache whose view is renewed at least every `max_age`.
    pub fn new(max_age: Duration) -> Self {
        Self {
            current: tokio::sync::Mutex::new(None),
            generation: AtomicU64::new(0),
            vm_generation: AtomicU64::new(0),
            max_age,
        }
    }

    /// The current view, read from CloudStack if there is none, it is too old, or it was
    /// invalidated. Callers arriving during a read wait for it and share it.
    pub async fn get(
        &self,
        client: &cloudstack::Client,
    ) -> Result<Arc<AccountView>, cloudstack::Error> {
        let mut current = self.current.lock().await;
        let generation = self.generation.load(Ordering::SeqCst);
        let vm_generation = self.vm_generation.load(Ordering::SeqCst);
        if let Some(cached) = current.as_ref()
            && cached.generation == generation
            && cached.view.fetched_at.elapsed() < self.max_age
        {
            return Ok(cached.view.clone());
        }
        let known_vms = current
            .as_ref()
            .filter(|cached| cached.vm_generation == vm_generation)
            .filter(|cached| cached.view.vms_fetched_at.elapsed() < self.max_age)
            .map(|cached| (cached.view.vm_networks.clone(), cached.view.vms_fetched_at));
        let fresh = Arc::new(AccountView::fetch_keeping_vms(client, known_vms).await?);
        // Stamped with the generations seen before the read: an invalidation during the
        // read (a change that may be missing from it) makes the next caller read again.
        *current = Some(Cached {
            generation,
            vm_generation,
            view: fresh.clone(),
        });
        Ok(fresh)
    }

    /// Forgets the view; the next [`AccountViewCache::get`] reads CloudStack again.
    pub fn invalidate(&self) {
        self.vm_generation.fetch_add(1, Ordering::SeqCst);
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Forgets the rules, IPs, firewall rules and networks of the view (after the
    /// controller changed some), keeping the VM → network map.
    pub fn invalidate_objects(&self) {
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
        let view = AccountView::from_parts(Vec::new(), Vec::new(), Vec::new(), Vec::new(), &vms);
        assert_eq!(
            view.vm_networks.get("vm-a").map(String::as_str),
            Some("main")
        );
        assert!(
            !view.vm_networks.contains_key("vm-b"),
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
        let view = AccountView::from_parts(rules, ips, Vec::new(), Vec::new(), &[]);
        assert_eq!(
            view.ip_by_address("203.0.113.5")
                .and_then(|ip| ip.id.as_deref()),
            Some("ip1")
        );
        assert!(view.ip_by_id("ip2").is_none());
        let on_ip1: Vec<_> = view
            .rules_on_ip("ip1")
            .filter_map(|r| r.id.as_deref())
            .collect();
        assert_eq!(on_ip1, ["r1"]);
    }
}
