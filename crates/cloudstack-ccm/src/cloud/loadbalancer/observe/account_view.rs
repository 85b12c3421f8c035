//! [`AccountView`]: what the account sees of CloudStack's load-balancer objects, shared
//! by every Service of a resync: every load-balancer rule, every allocated public IP,
//! every firewall rule and every network, each read with ONE paginated list call, plus the
//! ingress items of the ACL lists in use (one call per list, read when first needed). All
//! Services reconciled during a resync read the same view, so a resync of many unchanged
//! Services costs a handful of calls, whatever the number of Services and Nodes.
//!
//! The VMs are not in it: which network a Node's VM is on comes from the node inventory
//! (`cloud/inventory.rs`), the one VM list of the process (see
//! `Engine::resolve_backends`), so a resync reads no VM and its reads do not grow with
//! the number of Nodes.
//!
//! [`AccountViewCache`] renews the view when a resync starts, a Node changes or the
//! controller changed something itself ([`AccountViewCache::invalidate`]), and when it is
//! older than the cache's maximum age.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cloudstack::{
    FirewallRule, ListFirewallRules, ListLoadBalancerRules, ListNetworkAcls, ListNetworks,
    ListPublicIpAddresses, LoadBalancerRule, Network, NetworkAcl, PublicIpAddress,
};

/// What the account sees of CloudStack's load-balancer objects and networks, as read at
/// one time (the ACL items as first needed).
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
    /// Ingress items by ACL list id, read on first use.
    acl_items: tokio::sync::Mutex<HashMap<String, Arc<Vec<NetworkAcl>>>>,
    /// When the lists were read.
    fetched_at: Instant,
}

impl AccountView {
    /// Reads the four lists concurrently.
    async fn fetch(client: &cloudstack::Client) -> Result<AccountView, cloudstack::Error> {
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
        let (rules, ips, firewall_rules, networks) = futures::try_join!(
            client.list_load_balancer_rules(&rules),
            client.list_public_ip_addresses(&ips),
            client.list_firewall_rules(&firewall),
            client.list_networks(&networks),
        )?;
        Ok(AccountView::from_parts(
            rules,
            ips,
            firewall_rules,
            networks,
        ))
    }

    /// A view made of the given lists, read now.
    pub fn from_parts(
        rules: Vec<LoadBalancerRule>,
        ips: Vec<PublicIpAddress>,
        firewall_rules: Vec<FirewallRule>,
        networks: Vec<Network>,
    ) -> AccountView {
        AccountView {
            rules,
            ips,
            firewall_rules,
            networks,
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

/// Holds the current [`AccountView`]; concurrent readers share one fetch.
#[derive(Debug)]
pub(crate) struct AccountViewCache {
    /// The view and the generations it was read in.
    current: tokio::sync::Mutex<Option<Cached>>,
    /// Bumped by every invalidation; a view read in an older generation is not used.
    generation: AtomicU64,
    max_age: Duration,
}

/// A view with the generations it was read in.
#[derive(Debug)]
struct Cached {
    generation: u64,
    view: Arc<AccountView>,
}

impl AccountViewCache {
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
    ) -> Result<Arc<AccountView>, cloudstack::Error> {
        let mut current = self.current.lock().await;
        let generation = self.generation.load(Ordering::SeqCst);
        if let Some(cached) = current.as_ref()
            && cached.generation == generation
            && cached.view.fetched_at.elapsed() < self.max_age
        {
            return Ok(cached.view.clone());
        }
        let fresh = Arc::new(AccountView::fetch(client).await?);
        // Stamped with the generations seen before the read: an invalidation during the
        // read (a change that may be missing from it) makes the next caller read again.
        *current = Some(Cached {
            generation,
            view: fresh.clone(),
        });
        Ok(fresh)
    }

    /// Forgets the view; the next [`AccountViewCache::get`] reads CloudStack again.
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let view = AccountView::from_parts(rules, ips, Vec::new(), Vec::new());
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
