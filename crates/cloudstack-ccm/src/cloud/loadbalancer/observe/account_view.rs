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
//! [`AccountViewCache`] renews the whole view when a resync starts, when a change of the
//! controller's own failed ([`AccountViewCache::invalidate`]), and when it is older than the
//! cache's maximum age. After a change that succeeded, what its jobs returned is spliced
//! into the view with no read ([`ViewChanges`], [`AccountViewCache::apply_changes`]); when
//! the results do not say all it did, only the public IPs it touched are read again, with
//! what stands on them ([`AccountViewCache::renew_ips`]: three small calls per IP). A
//! burst of new load balancers does not read every rule, address and firewall rule of the
//! account once per Service.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

mod changes;
mod patch;
#[cfg(test)]
mod patch_tests;

pub(crate) use changes::ViewChanges;

use cloudstack::{
    FirewallRule, ListFirewallRules, ListLoadBalancerRules, ListNetworkAcls, ListNetworks,
    ListPublicIpAddresses, LoadBalancerRule, Network, NetworkAcl, PublicIpAddress,
};

/// What the account sees of CloudStack's load-balancer objects and networks, as read at
/// one time (the ACL items as first needed), with the public IPs read again since spliced
/// in. The objects are shared between a view and the views spliced from it.
#[derive(Debug)]
pub(crate) struct AccountView {
    /// Every load-balancer rule the account sees.
    pub rules: Vec<Arc<LoadBalancerRule>>,
    /// Every public IP allocated to the account.
    pub ips: Vec<Arc<PublicIpAddress>>,
    /// Every firewall rule the account sees.
    pub firewall_rules: Vec<Arc<FirewallRule>>,
    /// Every network the account sees.
    pub networks: Arc<Vec<Network>>,
    /// Ingress items by ACL list id, read on first use.
    acl_items: tokio::sync::Mutex<HashMap<String, Arc<Vec<NetworkAcl>>>>,
    /// When the lists were read.
    fetched_at: Instant,
    /// Read number ([`AccountViewCache`]'s counter) of the whole read.
    read: u64,
    /// Read number of each IP read again since, by IP id.
    renewed: HashMap<String, u64>,
    /// Number of the last patch of each IP ([`AccountView::patch`]), by IP id.
    patched: HashMap<String, u64>,
    /// IPs whose firewall rules `firewall_rules` does not hold (a patch left them unknown):
    /// read on first need.
    firewall_unknown: BTreeSet<String>,
    /// The firewall rules of IPs of `firewall_unknown` read since, by IP id.
    firewall_read: tokio::sync::Mutex<HashMap<String, Vec<Arc<FirewallRule>>>>,
}

/// One public IP as read again, with what stands on it; `ip` is `None` when the address
/// is no longer allocated to the account (it was released, and its rules with it).
#[derive(Debug)]
struct RenewedIp {
    /// The IP id.
    id: String,
    /// The address, while the account holds it.
    ip: Option<PublicIpAddress>,
    /// The load-balancer rules on it.
    rules: Vec<LoadBalancerRule>,
    /// The firewall rules on it.
    firewall_rules: Vec<FirewallRule>,
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
    pub(crate) fn from_parts(
        rules: Vec<LoadBalancerRule>,
        ips: Vec<PublicIpAddress>,
        firewall_rules: Vec<FirewallRule>,
        networks: Vec<Network>,
    ) -> AccountView {
        AccountView {
            rules: rules.into_iter().map(Arc::new).collect(),
            ips: ips.into_iter().map(Arc::new).collect(),
            firewall_rules: firewall_rules.into_iter().map(Arc::new).collect(),
            networks: Arc::new(networks),
            acl_items: tokio::sync::Mutex::default(),
            fetched_at: Instant::now(),
            read: 0,
            renewed: HashMap::new(),
            patched: HashMap::new(),
            firewall_unknown: BTreeSet::new(),
            firewall_read: tokio::sync::Mutex::default(),
        }
    }

    /// This view with the IPs of `renewed` as read again (read number `read`): their
    /// objects replace what the view held of them, unless the view holds a newer read of
    /// an IP. The ACL items are read again when next needed (a change may have touched
    /// them). `None` when every IP's read is older than the view's.
    fn splice(&self, renewed: Vec<RenewedIp>, read: u64) -> Option<AccountView> {
        let newer: Vec<RenewedIp> = renewed
            .into_iter()
            .filter(|ip| read > self.read && self.renewed.get(&ip.id).is_none_or(|r| read > *r))
            .collect();
        if newer.is_empty() {
            return None;
        }
        let ids: BTreeSet<&str> = newer.iter().map(|ip| ip.id.as_str()).collect();
        let on_renewed = |ip_id: Option<&str>| ip_id.is_some_and(|id| ids.contains(id));
        let (firewall_rules, mut firewall_unknown) = self.firewall_known();
        firewall_unknown.retain(|ip| !ids.contains(ip.as_str()));
        let mut view = AccountView {
            rules: self
                .rules
                .iter()
                .filter(|r| !on_renewed(r.publicipid.as_deref()))
                .cloned()
                .collect(),
            ips: self
                .ips
                .iter()
                .filter(|ip| !on_renewed(ip.id.as_deref()))
                .cloned()
                .collect(),
            firewall_rules: firewall_rules
                .into_iter()
                .filter(|r| !on_renewed(r.ipaddressid.as_deref()))
                .collect(),
            networks: self.networks.clone(),
            acl_items: tokio::sync::Mutex::default(),
            fetched_at: self.fetched_at,
            read: self.read,
            renewed: self.renewed.clone(),
            patched: self.patched.clone(),
            firewall_unknown,
            firewall_read: tokio::sync::Mutex::default(),
        };
        for ip in newer {
            view.renewed.insert(ip.id, read);
            view.ips.extend(ip.ip.map(Arc::new));
            view.rules.extend(ip.rules.into_iter().map(Arc::new));
            view.firewall_rules
                .extend(ip.firewall_rules.into_iter().map(Arc::new));
        }
        Some(view)
    }

    /// The allocated IP with this id.
    pub(crate) fn ip_by_id(&self, id: &str) -> Option<&PublicIpAddress> {
        self.ips
            .iter()
            .find(|ip| ip.id.as_deref() == Some(id))
            .map(|ip| &**ip)
    }

    /// The allocated IP with this address.
    pub(crate) fn ip_by_address(&self, address: &str) -> Option<&PublicIpAddress> {
        self.ips
            .iter()
            .find(|ip| ip.ipaddress.as_deref() == Some(address))
            .map(|ip| &**ip)
    }

    /// The network with this id.
    pub fn network(&self, id: &str) -> Option<&Network> {
        self.networks.iter().find(|n| n.id.as_deref() == Some(id))
    }

    /// Rules on the public IP `ip_id`.
    pub(crate) fn rules_on_ip<'a>(
        &'a self,
        ip_id: &'a str,
    ) -> impl Iterator<Item = &'a LoadBalancerRule> + 'a {
        self.rules
            .iter()
            .filter(move |r| r.publicipid.as_deref() == Some(ip_id))
            .map(|r| &**r)
    }

    /// Firewall rules on the public IP `ip_id`, read (one `listFirewallRules` the first
    /// time) when the view does not hold them: a change made them unknown.
    pub(crate) async fn firewall_rules_on_ip(
        &self,
        client: &cloudstack::Client,
        ip_id: &str,
    ) -> Result<Vec<Arc<FirewallRule>>, cloudstack::Error> {
        // An address still being associated has none, and CloudStack refuses to list them.
        if !self.firewall_unknown.contains(ip_id)
            || self.ip_by_id(ip_id).is_some_and(|ip| ip.is_allocating())
        {
            return Ok(self
                .firewall_rules
                .iter()
                .filter(|r| r.ipaddressid.as_deref() == Some(ip_id))
                .cloned()
                .collect());
        }
        let mut read = self.firewall_read.lock().await;
        if let Some(found) = read.get(ip_id) {
            return Ok(found.clone());
        }
        let request = ListFirewallRules {
            ipaddressid: Some(ip_id.to_string()),
            listall: Some(true),
            ..Default::default()
        };
        let rules: Vec<Arc<FirewallRule>> = client
            .list_firewall_rules(&request)
            .await?
            .into_iter()
            .map(Arc::new)
            .collect();
        read.insert(ip_id.to_string(), rules.clone());
        Ok(rules)
    }

    /// The firewall rules this view holds with those read since on first need, and the
    /// IPs whose firewall rules are still unknown: what a view spliced from this one
    /// starts from.
    fn firewall_known(&self) -> (Vec<Arc<FirewallRule>>, BTreeSet<String>) {
        let mut rules = self.firewall_rules.clone();
        let mut unknown = self.firewall_unknown.clone();
        if let Ok(read) = self.firewall_read.try_lock() {
            for (ip, read) in read.iter() {
                if unknown.remove(ip) {
                    rules.extend(read.iter().cloned());
                }
            }
        }
        (rules, unknown)
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

/// Reads public IP `id` again with the rules and firewall rules on it (three calls; one
/// when the account no longer holds the address: a released address has no rules).
async fn read_ip(client: &cloudstack::Client, id: &str) -> Result<RenewedIp, cloudstack::Error> {
    let ip = client
        .list_public_ip_addresses(&ListPublicIpAddresses {
            id: Some(id.to_string()),
            allocatedonly: Some(true),
            listall: Some(true),
            ..Default::default()
        })
        .await?
        .into_iter()
        .find(|ip| ip.id.as_deref() == Some(id));
    // Nothing stands on an address still being associated, and CloudStack refuses to
    // list its firewall rules.
    if ip.as_ref().is_none_or(|ip| ip.is_allocating()) {
        return Ok(RenewedIp {
            id: id.to_string(),
            ip,
            rules: Vec::new(),
            firewall_rules: Vec::new(),
        });
    }
    let rules = ListLoadBalancerRules {
        publicipid: Some(id.to_string()),
        listall: Some(true),
        ..Default::default()
    };
    let firewall = ListFirewallRules {
        ipaddressid: Some(id.to_string()),
        listall: Some(true),
        ..Default::default()
    };
    let (rules, firewall_rules) = futures::try_join!(
        client.list_load_balancer_rules(&rules),
        client.list_firewall_rules(&firewall),
    )?;
    Ok(RenewedIp {
        id: id.to_string(),
        ip,
        rules,
        firewall_rules,
    })
}

/// Holds the current [`AccountView`]; concurrent readers share one fetch.
#[derive(Debug)]
pub(crate) struct AccountViewCache {
    /// The view and the generations it was read in.
    current: tokio::sync::Mutex<Option<Cached>>,
    /// Bumped by every invalidation; a view read in an older generation is not used.
    generation: AtomicU64,
    /// Numbers every read of CloudStack (whole or per IP) in the order they start, so a
    /// later read of an IP is never replaced by an earlier one.
    reads: AtomicU64,
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
            reads: AtomicU64::new(0),
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
        let read = self.reads.fetch_add(1, Ordering::SeqCst) + 1;
        let mut fresh = AccountView::fetch(client).await?;
        fresh.read = read;
        let fresh = Arc::new(fresh);
        // Stamped with the generations seen before the read: an invalidation during the
        // read (a change that may be missing from it) makes the next caller read again.
        *current = Some(Cached {
            generation,
            view: fresh.clone(),
        });
        Ok(fresh)
    }

    /// Forgets the view; the next [`AccountViewCache::get`] reads CloudStack again.
    pub(crate) fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Reads the public IPs `ip_ids` again (after a change of the controller's own that
    /// succeeded, so every change on them is visible) and splices them into the current
    /// view. A read that fails forgets the view instead (the next reader reads it all).
    pub(crate) async fn renew_ips(&self, client: &cloudstack::Client, ip_ids: &BTreeSet<String>) {
        if ip_ids.is_empty() {
            return;
        }
        let read = self.reads.fetch_add(1, Ordering::SeqCst) + 1;
        let renewed =
            futures::future::try_join_all(ip_ids.iter().map(|id| read_ip(client, id))).await;
        let renewed = match renewed {
            Ok(renewed) => renewed,
            Err(error) => {
                tracing::debug!(%error, "reading changed public IPs again failed; the view is read again");
                self.invalidate();
                return;
            }
        };
        let mut current = self.current.lock().await;
        if let Some(cached) = current.as_mut() {
            if cached.view.misses_a_patch(ip_ids.iter(), read) {
                // A run's results were spliced in after this read started.
                self.invalidate();
            } else if let Some(spliced) = cached.view.splice(renewed, read) {
                cached.view = Arc::new(spliced);
            }
        }
    }

    /// Splices what a run that ended changed (`changes`, known exactly) into the current
    /// view ([`AccountView::patch`]), with no read.
    pub(crate) async fn apply_changes(&self, changes: &ViewChanges) {
        if changes.is_empty() {
            return;
        }
        let read = self.reads.fetch_add(1, Ordering::SeqCst) + 1;
        let mut current = self.current.lock().await;
        if let Some(cached) = current.as_mut()
            && let Some(patched) = cached.view.patch(changes, read)
        {
            cached.view = Arc::new(patched);
        }
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

    fn decode<T: serde::de::DeserializeOwned>(json: serde_json::Value) -> T {
        serde_json::from_value(json).expect("decodes")
    }

    /// A view read as read number 1: ip1 with rule r1 and firewall rule f1, ip2 with r2.
    fn view_of_two_ips() -> AccountView {
        let mut view = AccountView::from_parts(
            decode(serde_json::json!([
                { "id": "r1", "publicipid": "ip1" }, { "id": "r2", "publicipid": "ip2" }
            ])),
            decode(serde_json::json!([
                { "id": "ip1", "ipaddress": "203.0.113.5" },
                { "id": "ip2", "ipaddress": "203.0.113.6" }
            ])),
            decode(serde_json::json!([{ "id": "f1", "ipaddressid": "ip1" }])),
            Vec::new(),
        );
        view.read = 1;
        view
    }

    fn ids<'a>(items: impl Iterator<Item = &'a Option<String>>) -> Vec<&'a str> {
        let mut ids: Vec<&str> = items.filter_map(|id| id.as_deref()).collect();
        ids.sort();
        ids
    }

    #[test]
    fn a_renewed_ip_replaces_what_stood_on_it_and_nothing_else() {
        let view = view_of_two_ips();
        let renewed = RenewedIp {
            id: "ip1".into(),
            ip: Some(decode(
                serde_json::json!({ "id": "ip1", "ipaddress": "203.0.113.5" }),
            )),
            rules: decode(serde_json::json!([
                { "id": "r3", "publicipid": "ip1" }, { "id": "r4", "publicipid": "ip1" }
            ])),
            firewall_rules: Vec::new(),
        };
        let spliced = view.splice(vec![renewed], 2).expect("newer than the view");
        assert_eq!(ids(spliced.rules.iter().map(|r| &r.id)), ["r2", "r3", "r4"]);
        assert!(spliced.firewall_rules.is_empty(), "f1 is gone from ip1");
        assert_eq!(ids(spliced.ips.iter().map(|ip| &ip.id)), ["ip1", "ip2"]);
        assert!(
            Arc::ptr_eq(
                spliced
                    .ips
                    .iter()
                    .find(|ip| ip.id.as_deref() == Some("ip2"))
                    .expect("ip2"),
                view.ips
                    .iter()
                    .find(|ip| ip.id.as_deref() == Some("ip2"))
                    .expect("ip2"),
            ),
            "what was not read again is shared, not copied"
        );
    }

    #[test]
    fn a_released_ip_leaves_the_view_with_its_rules() {
        let view = view_of_two_ips();
        let released = RenewedIp {
            id: "ip1".into(),
            ip: None,
            rules: Vec::new(),
            firewall_rules: Vec::new(),
        };
        let spliced = view.splice(vec![released], 2).expect("newer than the view");
        assert_eq!(ids(spliced.ips.iter().map(|ip| &ip.id)), ["ip2"]);
        assert_eq!(ids(spliced.rules.iter().map(|r| &r.id)), ["r2"]);
        assert!(spliced.firewall_rules.is_empty());
    }

    #[test]
    fn an_older_read_never_replaces_a_newer_one() {
        let view = view_of_two_ips();
        let empty = |id: &str| RenewedIp {
            id: id.into(),
            ip: None,
            rules: Vec::new(),
            firewall_rules: Vec::new(),
        };
        assert!(
            view.splice(vec![empty("ip1")], 1).is_none(),
            "a read that started before the whole view's"
        );
        let renewed = view.splice(vec![empty("ip1")], 5).expect("newer");
        assert!(
            renewed
                .splice(vec![empty("ip2"), empty("ip1")], 3)
                .is_some_and(|v| {
                    ids(v.ips.iter().map(|ip| &ip.id)).is_empty()
                        && v.renewed.get("ip1") == Some(&5)
                        && v.renewed.get("ip2") == Some(&3)
                }),
            "ip2's read is newer than the view, ip1's older than its last renewal"
        );
        assert!(renewed.splice(vec![empty("ip1")], 4).is_none());
    }
}
