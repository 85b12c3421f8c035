//! What CloudStack holds for the Services of a test, read from the simulator's state in
//! process or through the API with the account's keys in remote mode: load balancer rules,
//! public addresses, firewall rules, and the calls made and failed.

use std::collections::BTreeMap;
use std::future::Future;

use crate::common::{Harness, Target};

/// A rule as the simulator holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleView {
    /// Rule id.
    pub id: String,
    /// Rule name.
    pub name: String,
    /// Protocol.
    pub protocol: String,
    /// Public port.
    pub public_port: u16,
    /// Private port.
    pub private_port: u16,
    /// Algorithm.
    pub algorithm: String,
    /// Public IP id.
    pub ip_id: String,
    /// Network id.
    pub network_id: String,
    /// `cidrlist` as stored.
    pub cidrs: Vec<String>,
    /// Member VM names, sorted.
    pub members: Vec<String>,
    /// Tags as `key -> value`.
    pub tags: BTreeMap<String, String>,
}

/// Runs a read of the remote CloudStack from a synchronous helper (the Service tests run
/// on a multi-threaded runtime).
fn remote_read<T>(read: impl Future<Output = T>) -> T {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(read))
}

/// The probe client of a remote harness (uncounted), `None` in process.
pub(super) fn probe(h: &Harness) -> Option<&cloudstack::Client> {
    match &h.target {
        Target::InProcess => None,
        Target::Remote(remote) => Some(&remote.probe),
    }
}

/// A CloudStack `cidrlist` (space- or comma-separated) as a list.
fn split_cidrs(list: Option<&str>) -> Vec<String> {
    list.unwrap_or_default()
        .split([' ', ','])
        .filter(|c| !c.is_empty())
        .map(str::to_string)
        .collect()
}

/// The account's rules whose name starts with `prefix`, read through the API.
async fn remote_rules(client: &cloudstack::Client, prefix: &str) -> Vec<RuleView> {
    let listed = client
        .list_load_balancer_rules(&cloudstack::ListLoadBalancerRules::default())
        .await
        .expect("listing load-balancer rules");
    let mut rules = Vec::new();
    for rule in listed {
        let (Some(id), Some(name)) = (rule.id.clone(), rule.name.clone()) else {
            continue;
        };
        if !name.starts_with(prefix) {
            continue;
        }
        let request = cloudstack::ListLoadBalancerRuleInstances {
            id: id.clone(),
            ..Default::default()
        };
        let instances = match client.list_load_balancer_rule_instances(&request).await {
            Ok(instances) => instances,
            // The rule went between the two reads (the API gives no snapshot): not listed.
            Err(error) if error.code() == Some(431) => continue,
            Err(error) => panic!("listing the members of rule {name}: {error}"),
        };
        let mut members: Vec<String> = instances.iter().filter_map(|vm| vm.name.clone()).collect();
        members.sort();
        rules.push(RuleView {
            id,
            name,
            protocol: rule.protocol.clone().unwrap_or_default(),
            public_port: rule.publicport.unwrap_or_default() as u16,
            private_port: rule.privateport.unwrap_or_default() as u16,
            algorithm: rule.algorithm.clone().unwrap_or_default(),
            ip_id: rule.publicipid.clone().unwrap_or_default(),
            network_id: rule.networkid.clone().unwrap_or_default(),
            cidrs: split_cidrs(rule.cidrlist.as_deref()),
            members,
            tags: rule
                .tags
                .iter()
                .filter_map(|t| Some((t.key.clone()?, t.value.clone()?)))
                .collect(),
        });
    }
    rules
}

/// The rules whose name starts with `prefix`, sorted by public port: the simulator's
/// state in process, the CloudStack API in remote mode.
pub fn rules_with_prefix(h: &Harness, prefix: &str) -> Vec<RuleView> {
    if let Some(client) = probe(h) {
        let mut rules = remote_read(remote_rules(client, prefix));
        rules.sort_by_key(|r| r.public_port);
        return rules;
    }
    let mut rules = h.sim.with_state(|state| {
        state
            .lb_rules
            .iter()
            .filter(|r| r.name.starts_with(prefix))
            .map(|r| {
                let mut members: Vec<String> = r
                    .members
                    .iter()
                    .filter_map(|m| {
                        state
                            .vms
                            .iter()
                            .find(|vm| vm.id == m.vm_id)
                            .map(|vm| vm.name.clone())
                    })
                    .collect();
                members.sort();
                RuleView {
                    id: r.id.clone(),
                    name: r.name.clone(),
                    protocol: r.protocol.clone(),
                    public_port: r.public_port,
                    private_port: r.private_port,
                    algorithm: r.algorithm.clone(),
                    ip_id: r.ip_id.clone(),
                    network_id: r.network_id.clone(),
                    cidrs: r.cidrs.clone().unwrap_or_default(),
                    members,
                    tags: state
                        .tags
                        .iter()
                        .filter(|t| t.resource_id == r.id)
                        .map(|t| (t.key.clone(), t.value.clone()))
                        .collect(),
                }
            })
            .collect::<Vec<_>>()
    });
    rules.sort_by_key(|r| r.public_port);
    rules
}

/// The state of public IP `id` (`Allocated`, `Free`, …), if it exists: in remote mode as
/// `listPublicIpAddresses id=… allocatedonly=false` shows it (`None` when it is not listed).
pub fn ip_state(h: &Harness, id: &str) -> Option<String> {
    if let Some(client) = probe(h) {
        let request = cloudstack::ListPublicIpAddresses {
            id: Some(id.to_string()),
            allocatedonly: Some(false),
            ..Default::default()
        };
        return match remote_read(client.list_public_ip_addresses(&request)) {
            Ok(list) => list.first().and_then(|ip| ip.state.clone()),
            Err(error) if error.code() == Some(431) => None,
            Err(error) => panic!("listing public IP {id}: {error}"),
        };
    }
    h.sim.with_state(|state| {
        state
            .ips
            .iter()
            .find(|ip| ip.id == id)
            .map(|ip| ip.state.clone())
    })
}

/// The id of public address `address` (the account's, in remote mode).
pub fn ip_id_of(h: &Harness, address: &str) -> String {
    if let Some(client) = probe(h) {
        let request = cloudstack::ListPublicIpAddresses {
            ipaddress: Some(address.to_string()),
            ..Default::default()
        };
        return remote_read(client.list_public_ip_addresses(&request))
            .unwrap_or_else(|e| panic!("listing public IP {address}: {e}"))
            .first()
            .and_then(|ip| ip.id.clone())
            .unwrap_or_else(|| panic!("no public IP {address} in the account"));
    }
    h.sim
        .with_state(|state| {
            state
                .ips
                .iter()
                .find(|ip| ip.address == address)
                .map(|ip| ip.id.clone())
        })
        .unwrap_or_else(|| panic!("no public IP {address} in the simulator"))
}

/// Firewall rules on IP `ip_id`: (protocol, start port, CIDRs), sorted.
pub fn firewall_rules(h: &Harness, ip_id: &str) -> Vec<(String, i64, Vec<String>)> {
    if let Some(client) = probe(h) {
        let request = cloudstack::ListFirewallRules {
            ipaddressid: Some(ip_id.to_string()),
            ..Default::default()
        };
        let mut rules: Vec<(String, i64, Vec<String>)> =
            match remote_read(client.list_firewall_rules(&request)) {
                Ok(list) => list
                    .iter()
                    .map(|f| {
                        (
                            f.protocol.clone().unwrap_or_default(),
                            f.startport.map_or(-1, i64::from),
                            split_cidrs(f.cidrlist.as_deref()),
                        )
                    })
                    .collect(),
                // A released address has no rules.
                Err(error) if error.code() == Some(431) => Vec::new(),
                Err(error) => panic!("listing firewall rules of IP {ip_id}: {error}"),
            };
        rules.sort();
        return rules;
    }
    let mut rules = h.sim.with_state(|state| {
        state
            .firewall_rules
            .iter()
            .filter(|f| f.ip_id == ip_id)
            .map(|f| {
                (
                    f.protocol.clone(),
                    f.start_port.unwrap_or(-1),
                    f.cidrs.clone(),
                )
            })
            .collect::<Vec<_>>()
    });
    rules.sort();
    rules
}

/// Mutating CloudStack calls by command since the last reset.
pub fn mutating_counts(h: &Harness) -> BTreeMap<String, u64> {
    h.cloudstack_call_counts()
        .into_iter()
        .filter(|(command, count)| *count > 0 && !cloudstack::is_read(command))
        .collect()
}

/// Milliseconds since the Unix epoch, on the simulator's clock (for [`failing_calls`]).
pub fn sim_now_ms() -> u64 {
    cloudstack_sim::jobs::now_ms()
}
