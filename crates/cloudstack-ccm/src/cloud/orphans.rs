//! Orphans: CloudStack objects tagged for this cluster whose Service or Node is gone (a
//! Service deleted while the controller was down for good, a force-removed finalizer, a
//! Node removed while no route controller ran).
//!
//! [`find`] lists, with one tag-filtered list call per kind, the public IPs, load-balancer
//! rules (public and internal), firewall rules, network ACL items and static routes
//! carrying this cluster's tag,
//! and the SSL certificates the controller uploaded for this cluster (certificates take no
//! tags: they are found by name, one `listSslCerts`), and says why each one whose owner no
//! longer exists is an orphan. [`delete`] removes
//! them — rules and routes first, then addresses; a load balancer's objects through a
//! plan per network, run by the apply step in that network's job queue, as every change
//! of a load balancer — but never an address the user brought
//! (only addresses the controller associated carry its tag), never one its Service keeps
//! (`cloudstack-ccm/keep-ip`), never one without rules of a gone Service (it may have been
//! kept with `keep-ip` before the tag existed), and never a route outside
//! `--cluster-cidr` (the route controller leaves those alone too).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use cloudstack::{
    ListFirewallRules, ListLoadBalancerRules, ListNetworkAcls, ListPublicIpAddresses,
    ListStaticRoutes, Tag, tag_value,
};

use crate::cloud::cidr::Cidr;
use crate::cloud::loadbalancer::observe::account_view::AccountView;
use crate::cloud::loadbalancer::plan::Step;
use crate::cloud::loadbalancer::vocabulary::IpProtocol;
use crate::cloud::routes::plan::RouteStep;
use crate::cloud::routes::within_cluster_cidrs;
use crate::cloud::tags::{TAG_ASSOCIATED, TAG_CLUSTER, TAG_KEEP_IP, TAG_NODE, TAG_SERVICE_UID};

mod delete;
mod observe;
#[cfg(test)]
mod observe_tests;

pub(crate) use delete::delete_queued;
pub use delete::{DeleteError, delete};
pub use observe::RoutingFirewall;
pub(crate) use observe::{observe, observe_with_view};

/// The kind of an orphaned object (the `kind` label of the orphan metric).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OrphanKind {
    /// A public IP address.
    PublicIp,
    /// A load-balancer rule.
    LoadBalancerRule,
    /// An internal load-balancer rule (CloudStack's Internal LB on a VPC tier).
    InternalLoadBalancerRule,
    /// A firewall rule.
    FirewallRule,
    /// A routing firewall rule of a ROUTED network (the routing firewall companion).
    RoutingFirewallRule,
    /// A network ACL item.
    AclItem,
    /// A VPC static route.
    StaticRoute,
    /// An SSL certificate the controller uploaded.
    Certificate,
}

impl OrphanKind {
    /// Every kind, in deletion order (addresses last).
    pub const ALL: [OrphanKind; 8] = [
        OrphanKind::LoadBalancerRule,
        OrphanKind::InternalLoadBalancerRule,
        OrphanKind::FirewallRule,
        OrphanKind::RoutingFirewallRule,
        OrphanKind::AclItem,
        OrphanKind::StaticRoute,
        OrphanKind::Certificate,
        OrphanKind::PublicIp,
    ];

    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            OrphanKind::PublicIp => "public_ip",
            OrphanKind::LoadBalancerRule => "load_balancer_rule",
            OrphanKind::InternalLoadBalancerRule => "internal_load_balancer_rule",
            OrphanKind::FirewallRule => "firewall_rule",
            OrphanKind::RoutingFirewallRule => "routing_firewall_rule",
            OrphanKind::AclItem => "acl_item",
            OrphanKind::StaticRoute => "static_route",
            OrphanKind::Certificate => "certificate",
        }
    }
}

impl fmt::Display for OrphanKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What still exists in the cluster.
#[derive(Debug, Clone, Default)]
pub struct Owners {
    /// UIDs of every Service.
    pub service_uids: BTreeSet<String>,
    /// IP ids and addresses any Service names (annotations, `loadBalancerIP`, status).
    pub service_addresses: BTreeSet<String>,
    /// Names of every Node.
    pub nodes: BTreeSet<String>,
    /// `--cluster-cidr`: routes outside are not the controller's to delete.
    pub cluster_cidrs: Vec<Cidr>,
}

/// A tagged object whose owner is gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Orphan {
    /// Kind.
    pub kind: OrphanKind,
    /// CloudStack id.
    pub id: String,
    /// What it is (rule name, address, CIDR).
    pub what: String,
    /// Why it is an orphan.
    pub reason: String,
    /// Whether [`delete`] removes it (`false`: listed only, e.g. an address maybe kept).
    pub deletable: bool,
    /// The network whose job queue its deletion waits in (a load balancer's objects;
    /// for a static route its VPC), when known.
    pub network_id: Option<String>,
    /// Its step in the deletion plan of its network or VPC (`None` for an object no step
    /// can name, e.g. a firewall rule of another protocol).
    pub step: Option<OrphanStep>,
}

/// The step that deletes an orphan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrphanStep {
    /// A load balancer's object: a step of a load-balancer [`Plan`](crate::cloud::loadbalancer::plan::Plan).
    LoadBalancer(Step),
    /// A static route: a step of a [`RoutePlan`](crate::cloud::routes::plan::RoutePlan).
    Route(RouteStep),
}

impl fmt::Display for Orphan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} ({}): {}",
            self.kind, self.id, self.what, self.reason
        )?;
        if !self.deletable {
            f.write_str("; not deleted automatically")?;
        }
        Ok(())
    }
}

fn cluster_filter(cluster: &str) -> Vec<(String, String)> {
    vec![(TAG_CLUSTER.to_string(), cluster.to_string())]
}

/// Why an object tagged with a Service UID is an orphan, if it is.
fn service_gone(tags: &[Tag], owners: &Owners) -> Option<String> {
    let uid = tag_value(tags, TAG_SERVICE_UID)?;
    (!owners.service_uids.contains(uid)).then(|| format!("Service {uid} no longer exists"))
}

/// Everything tagged for a cluster, as listed (one call per kind).
#[derive(Debug, Clone, Default)]
pub struct Tagged {
    /// Load-balancer rules.
    pub rules: Vec<cloudstack::LoadBalancerRule>,
    /// Internal load-balancer rules.
    pub internal_rules: Vec<cloudstack::InternalLoadBalancer>,
    /// Firewall rules.
    pub firewall_rules: Vec<cloudstack::FirewallRule>,
    /// Routing firewall rules (listed only where the server has them, 4.20+).
    pub routing_firewall_rules: Vec<cloudstack::FirewallRule>,
    /// Network ACL items.
    pub acl_items: Vec<cloudstack::NetworkAcl>,
    /// Static routes.
    pub routes: Vec<cloudstack::StaticRoute>,
    /// Public IP addresses.
    pub ips: Vec<cloudstack::PublicIpAddress>,
    /// The account's SSL certificates (those of the cluster are told by name).
    pub certificates: Vec<cloudstack::SslCert>,
    /// The cluster listed for (certificate names carry it).
    pub cluster: String,
    /// The kinds not looked for, each with the command the keys' role refused.
    pub not_looked_for: Vec<NotLookedFor>,
}

/// A kind of object the orphan pass could not look for: the keys' role refuses its list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotLookedFor {
    /// What was not looked for (`static routes`, `SSL certificates`, …).
    pub kind: &'static str,
    /// The command refused.
    pub command: String,
}

impl std::fmt::Display for NotLookedFor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (the keys' role may not call {})",
            self.kind, self.command
        )
    }
}

/// Lists the orphans of `cluster` (reading CloudStack, then judging with `owners`).
pub async fn find(
    client: &cloudstack::Client,
    cluster: &str,
    owners: &Owners,
    routing: RoutingFirewall,
) -> Result<Vec<Orphan>, cloudstack::Error> {
    Ok(classify(&observe(client, cluster, routing).await?, owners))
}

/// The networks of the load-balancer rules tagged for the cluster: by the Service UID
/// they are tagged with, and by their public IP's id. A firewall rule, ACL item,
/// certificate or address of a gone Service queues on the network of its Service's rules.
#[derive(Debug, Default)]
struct RuleNetworks<'a> {
    by_service: BTreeMap<&'a str, &'a str>,
    by_ip: BTreeMap<&'a str, &'a str>,
}

impl<'a> RuleNetworks<'a> {
    fn of(rules: &'a [cloudstack::LoadBalancerRule]) -> Self {
        let mut networks = RuleNetworks::default();
        for rule in rules {
            let Some(network) = rule.networkid.as_deref() else {
                continue;
            };
            if let Some(uid) = tag_value(&rule.tags, TAG_SERVICE_UID) {
                networks.by_service.entry(uid).or_insert(network);
            }
            if let Some(ip) = rule.publicipid.as_deref() {
                networks.by_ip.entry(ip).or_insert(network);
            }
        }
        networks
    }

    fn of_service(&self, tags: &[Tag]) -> Option<String> {
        let uid = tag_value(tags, TAG_SERVICE_UID)?;
        self.by_service.get(uid).map(|n| n.to_string())
    }

    fn of_ip(&self, ip_id: Option<&str>) -> Option<String> {
        self.by_ip.get(ip_id?).map(|n| n.to_string())
    }
}

/// A port as a step names it (0 when missing or out of range: display only).
fn port(value: Option<u32>) -> u16 {
    value
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or_default()
}

/// The certificates uploaded for Services of `cluster` that no longer exist.
fn certificates(
    listed: &[cloudstack::SslCert],
    cluster: &str,
    owners: &Owners,
    networks: &RuleNetworks<'_>,
) -> Vec<Orphan> {
    use crate::cloud::loadbalancer::certificates::parse_certificate_name;
    listed
        .iter()
        .filter_map(|cert| {
            let name = cert.name.as_deref().unwrap_or_default();
            let uid = parse_certificate_name(cluster, name)?;
            let id = cert.id.clone().unwrap_or_default();
            (!owners.service_uids.contains(uid)).then(|| Orphan {
                kind: OrphanKind::Certificate,
                id: id.clone(),
                what: name.to_string(),
                reason: format!("Service {uid} no longer exists"),
                deletable: true,
                network_id: networks.by_service.get(uid).map(|n| n.to_string()),
                step: Some(OrphanStep::LoadBalancer(Step::DeleteCertificate {
                    id,
                    name: name.to_string(),
                })),
            })
        })
        .collect()
}

/// A firewall or routing firewall rule whose Service is gone (`kind` says which, and so
/// which delete step removes it); `place` ends its description.
fn rule_orphan(
    rule: &cloudstack::FirewallRule,
    kind: OrphanKind,
    reason: String,
    place: &str,
    network_id: Option<String>,
) -> Orphan {
    let id = rule.id.clone().unwrap_or_default();
    let port = port(rule.startport);
    let step = rule
        .protocol
        .as_deref()
        .and_then(IpProtocol::parse)
        .map(|protocol| match kind {
            OrphanKind::RoutingFirewallRule => Step::DeleteRoutingFirewallRule {
                id: id.clone(),
                protocol,
                port,
            },
            _ => Step::DeleteFirewallRule {
                id: id.clone(),
                protocol,
                port,
            },
        })
        .map(OrphanStep::LoadBalancer);
    Orphan {
        kind,
        what: format!(
            "{} {} {place}",
            rule.protocol.as_deref().unwrap_or_default(),
            rule.startport.map(|p| p.to_string()).unwrap_or_default(),
        ),
        id,
        reason,
        deletable: true,
        network_id,
        step,
    }
}

/// The orphans among `tagged`, judged against what exists.
pub fn classify(tagged: &Tagged, owners: &Owners) -> Vec<Orphan> {
    let mut out = Vec::new();
    let rules = &tagged.rules;
    let networks = RuleNetworks::of(rules);
    let mut ips_with_orphaned_rules = BTreeSet::new();
    let mut ips_with_live_rules = BTreeSet::new();
    for rule in rules {
        let ip = rule.publicipid.clone().unwrap_or_default();
        match service_gone(&rule.tags, owners) {
            Some(reason) => {
                ips_with_orphaned_rules.insert(ip);
                let id = rule.id.clone().unwrap_or_default();
                let name = rule.name.clone().unwrap_or_default();
                out.push(Orphan {
                    kind: OrphanKind::LoadBalancerRule,
                    id: id.clone(),
                    what: name.clone(),
                    reason,
                    deletable: true,
                    network_id: rule.networkid.clone(),
                    step: Some(OrphanStep::LoadBalancer(Step::DeleteRule { id, name })),
                });
            }
            None => {
                ips_with_live_rules.insert(ip);
            }
        }
    }
    for rule in &tagged.internal_rules {
        if let Some(reason) = service_gone(&rule.tags, owners) {
            let id = rule.id.clone().unwrap_or_default();
            let name = rule.name.clone().unwrap_or_default();
            out.push(Orphan {
                kind: OrphanKind::InternalLoadBalancerRule,
                id: id.clone(),
                what: format!(
                    "{name} on {}",
                    rule.sourceipaddress.as_deref().unwrap_or_default()
                ),
                reason,
                deletable: true,
                network_id: rule.networkid.clone(),
                step: Some(OrphanStep::LoadBalancer(Step::DeleteInternalRule {
                    id,
                    name,
                })),
            });
        }
    }
    // CloudStack keeps routing firewall rules in the firewall rules' table, with the same
    // purpose (`listFirewallRules` may show them too): each is reported once, as what it is.
    let routing_ids: BTreeSet<&str> = tagged
        .routing_firewall_rules
        .iter()
        .filter_map(|r| r.id.as_deref())
        .collect();
    for rule in tagged
        .firewall_rules
        .iter()
        .filter(|r| r.id.as_deref().is_none_or(|id| !routing_ids.contains(id)))
    {
        if let Some(reason) = service_gone(&rule.tags, owners) {
            let network_id = rule
                .networkid
                .clone()
                .or_else(|| networks.of_ip(rule.ipaddressid.as_deref()))
                .or_else(|| networks.of_service(&rule.tags));
            let on = format!("on {}", rule.ipaddress.as_deref().unwrap_or_default());
            out.push(rule_orphan(
                rule,
                OrphanKind::FirewallRule,
                reason,
                &on,
                network_id,
            ));
        }
    }
    for rule in &tagged.routing_firewall_rules {
        if let Some(reason) = service_gone(&rule.tags, owners) {
            let to = format!("to {}", rule.destcidrlist.as_deref().unwrap_or_default());
            let network_id = rule.networkid.clone();
            out.push(rule_orphan(
                rule,
                OrphanKind::RoutingFirewallRule,
                reason,
                &to,
                network_id,
            ));
        }
    }
    let acl_items = &tagged.acl_items;
    for item in acl_items {
        if let Some(reason) = service_gone(&item.tags, owners) {
            let id = item.id.clone().unwrap_or_default();
            let step = item
                .protocol
                .as_deref()
                .and_then(IpProtocol::parse)
                .map(|protocol| Step::DeleteAclItem {
                    id: id.clone(),
                    protocol,
                    port: port(item.startport),
                })
                .map(OrphanStep::LoadBalancer);
            out.push(Orphan {
                kind: OrphanKind::AclItem,
                id,
                what: format!(
                    "{} {} in list {}",
                    item.protocol.as_deref().unwrap_or_default(),
                    item.startport.map(|p| p.to_string()).unwrap_or_default(),
                    item.aclname.as_deref().unwrap_or_default()
                ),
                reason,
                deletable: true,
                network_id: networks.of_service(&item.tags),
                step,
            });
        }
    }
    let routes = &tagged.routes;
    for route in routes {
        let node = tag_value(&route.tags, TAG_NODE).unwrap_or_default();
        if !owners.nodes.contains(node) {
            let destination = route.cidr.as_deref().and_then(Cidr::parse);
            let managed = within_cluster_cidrs(&owners.cluster_cidrs, destination);
            let id = route.id.clone().unwrap_or_default();
            let reason = format!("Node {node} no longer exists");
            let step = route.vpcid.clone().map(|vpc_id| RouteStep::Delete {
                id: id.clone(),
                vpc_id,
                cidr: route.cidr.clone().unwrap_or_default(),
                next_hop: route.nexthop.clone(),
                reason: reason.clone(),
            });
            out.push(Orphan {
                kind: OrphanKind::StaticRoute,
                id,
                what: format!(
                    "{} via {}",
                    route.cidr.as_deref().unwrap_or_default(),
                    route.nexthop.as_deref().unwrap_or("a private gateway")
                ),
                reason: if managed {
                    reason
                } else {
                    format!("{reason}; the route is outside --cluster-cidr")
                },
                deletable: managed,
                network_id: route.vpcid.clone(),
                step: step.map(OrphanStep::Route),
            });
        }
    }
    let ips = &tagged.ips;
    for ip in ips {
        let id = ip.id.clone().unwrap_or_default();
        let address = ip.ipaddress.clone().unwrap_or_default();
        if owners.service_addresses.contains(&id)
            || owners.service_addresses.contains(&address)
            || ips_with_live_rules.contains(&id)
        {
            continue;
        }
        let associated = tag_value(&ip.tags, TAG_ASSOCIATED) == Some("true");
        let kept = tag_value(&ip.tags, TAG_KEEP_IP) == Some("true");
        let (reason, deletable) = if kept {
            (
                "no Service uses it; its Service asked to keep it (keep-ip)".to_string(),
                false,
            )
        } else if ips_with_orphaned_rules.contains(&id) && associated {
            (
                "no Service uses it; its rules belong to deleted Services".to_string(),
                true,
            )
        } else if associated {
            (
                "no Service uses it and it has no rules (it may have been kept with keep-ip)"
                    .to_string(),
                false,
            )
        } else {
            (
                "no Service uses it; the controller did not associate it".to_string(),
                false,
            )
        };
        let step = address.parse().ok().map(|parsed| {
            OrphanStep::LoadBalancer(Step::ReleaseIp {
                id: id.clone(),
                address: parsed,
            })
        });
        out.push(Orphan {
            kind: OrphanKind::PublicIp,
            network_id: networks
                .of_ip(Some(&id))
                .or_else(|| ip.associatednetworkid.clone()),
            id,
            what: address,
            reason,
            deletable,
            step,
        });
    }
    out.extend(certificates(
        &tagged.certificates,
        &tagged.cluster,
        owners,
        &networks,
    ));
    out
}

#[cfg(test)]
#[path = "orphans/classify_tests.rs"]
mod tests;
