//! The routing firewall companion of a Service whose address another controller assigns
//! (MetalLB, Cilium LB-IPAM) on a ROUTED network: on an isolated network one
//! `createRoutingFirewallRule` per port and address, from the Service's source ranges to
//! the address (`/32`); on a VPC tier one ACL item per port in the tier's list (ACL items
//! have no destination). Tagged with the Service's UID; what nothing wants any more is
//! deleted. Pure.

use super::*;

/// What the companion of one Service wants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutedFirewallSpec {
    /// The Service's UID (the rules' ownership tag).
    pub service_uid: String,
    /// The ROUTED network of the Service's Nodes.
    pub network_id: String,
    /// Where the ports are opened.
    pub target: RoutedTarget,
    /// The IPv4 addresses the other controller gave the Service.
    pub addresses: Vec<std::net::Ipv4Addr>,
    /// The Service's ports.
    pub ports: Vec<(IpProtocol, u16)>,
    /// Who may reach them (`loadBalancerSourceRanges`, else everything).
    pub sources: Vec<Cidr>,
}

/// How a ROUTED network is opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoutedTarget {
    /// An isolated network: routing firewall rules.
    Isolated,
    /// A VPC tier: items of its (custom) ACL list.
    Tier {
        /// The ACL list id.
        acl_id: String,
    },
}

/// A routing firewall rule of the Service, as CloudStack lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedRoutingRule {
    /// Rule id.
    pub id: String,
    /// The rule's network.
    pub network_id: String,
    /// Protocol.
    pub protocol: IpProtocol,
    /// Port (the rule's first).
    pub port: u16,
    /// Destination CIDRs.
    pub destinations: BTreeSet<Cidr>,
    /// Source CIDRs.
    pub sources: BTreeSet<Cidr>,
}

/// The plan bringing `observed` (the Service's rules on every network) and `items` (its
/// ACL items) to `spec`; with no spec, deleting them all. Deletions go first, so a changed
/// rule never meets its old self.
pub fn plan_routed_firewall(
    spec: Option<&RoutedFirewallSpec>,
    observed: &[ObservedRoutingRule],
    items: &[ObservedAclItem],
    cluster_name: &str,
) -> Plan {
    let tier = spec.and_then(|s| match &s.target {
        RoutedTarget::Tier { acl_id } => Some((s, acl_id.as_str())),
        RoutedTarget::Isolated => None,
    });
    let (item_deletes, item_creates) = acl_items(tier, items);
    let rules_spec = spec.filter(|s| s.target == RoutedTarget::Isolated);
    let mut plan = routing_rules(rules_spec, observed, item_deletes, item_creates);
    if let Some(spec) = spec {
        plan.ownership = owner_tags(cluster_name, &spec.service_uid);
    }
    plan
}

/// The ACL item steps: one item per port with the spec's sources, in the tier's list.
fn acl_items(
    tier: Option<(&RoutedFirewallSpec, &str)>,
    items: &[ObservedAclItem],
) -> (Vec<Step>, Vec<Step>) {
    let mut wanted: BTreeSet<(IpProtocol, u16)> = tier
        .map(|(s, _)| s.ports.iter().copied().collect())
        .unwrap_or_default();
    let sources: BTreeSet<Cidr> = tier
        .map(|(s, _)| s.sources.iter().copied().collect())
        .unwrap_or_default();
    let mut deletes = Vec::new();
    for item in items {
        let same = tier.is_some_and(|(_, acl_id)| item.acl_id == acl_id)
            && item.allow
            && item.start_port == item.end_port
            && item.cidrs.iter().copied().collect::<BTreeSet<_>>() == sources;
        if !(same && wanted.remove(&(item.protocol, item.start_port))) {
            deletes.push(Step::DeleteAclItem {
                id: item.id.clone(),
                protocol: item.protocol,
                port: item.start_port,
            });
        }
    }
    let creates = match tier {
        Some((spec, acl_id)) => wanted
            .into_iter()
            .map(|(protocol, port)| Step::CreateAclItem {
                acl_id: acl_id.to_string(),
                network_id: spec.network_id.clone(),
                protocol,
                port,
                cidrs: sources.iter().copied().collect(),
                reason: super::ports::acl_reason(
                    &crate::cloud::loadbalancer::vocabulary::default_lb_name(&spec.service_uid),
                ),
            })
            .collect(),
        None => Vec::new(),
    };
    (deletes, creates)
}

/// The routing firewall rule steps, after the ACL item steps of `item_deletes` and
/// `item_creates`.
fn routing_rules(
    spec: Option<&RoutedFirewallSpec>,
    observed: &[ObservedRoutingRule],
    item_deletes: Vec<Step>,
    item_creates: Vec<Step>,
) -> Plan {
    let mut wanted: BTreeSet<(String, IpProtocol, u16, Cidr)> = BTreeSet::new();
    let sources: BTreeSet<Cidr> = spec
        .map(|s| s.sources.iter().copied().collect())
        .unwrap_or_default();
    if let Some(spec) = spec {
        for address in &spec.addresses {
            let destination = Cidr {
                addr: std::net::IpAddr::V4(*address),
                prefix: 32,
            };
            for (protocol, port) in &spec.ports {
                wanted.insert((spec.network_id.clone(), *protocol, *port, destination));
            }
        }
    }
    let mut deletes = item_deletes;
    for rule in observed {
        let key = rule
            .destinations
            .iter()
            .next()
            .map(|d| (rule.network_id.clone(), rule.protocol, rule.port, *d));
        let kept = rule.destinations.len() == 1
            && rule.sources == sources
            && key.as_ref().is_some_and(|k| wanted.remove(k));
        if !kept {
            deletes.push(Step::DeleteRoutingFirewallRule {
                id: rule.id.clone(),
                protocol: rule.protocol,
                port: rule.port,
            });
        }
    }
    let creates: Vec<Step> = item_creates
        .into_iter()
        .chain(
            wanted
                .into_iter()
                .map(
                    |(network_id, protocol, port, destination)| Step::CreateRoutingFirewallRule {
                        network_id,
                        protocol,
                        port,
                        destination,
                        cidrs: sources.iter().copied().collect(),
                    },
                ),
        )
        .collect();
    Plan::from_phases(vec![deletes, creates], Vec::new())
}
