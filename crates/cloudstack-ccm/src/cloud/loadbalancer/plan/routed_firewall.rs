//! The routing firewall companion of a Service whose address another controller assigns
//! (MetalLB, Cilium LB-IPAM) on a ROUTED isolated network: one `createRoutingFirewallRule`
//! per port and address, from the Service's source ranges to the address (`/32`), tagged
//! with the Service's UID; rules of the Service nothing wants any more are deleted. Pure.

use super::*;

/// What the companion of one Service wants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutedFirewallSpec {
    /// The Service's UID (the rules' ownership tag).
    pub service_uid: String,
    /// The ROUTED network of the Service's Nodes.
    pub network_id: String,
    /// The IPv4 addresses the other controller gave the Service.
    pub addresses: Vec<std::net::Ipv4Addr>,
    /// The Service's ports.
    pub ports: Vec<(IpProtocol, u16)>,
    /// Who may reach them (`loadBalancerSourceRanges`, else everything).
    pub sources: Vec<Cidr>,
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

/// The plan bringing `observed` (the Service's rules on every network) to `spec`; with no
/// spec, deleting them all. Deletions go first, so a changed rule never meets its old self.
pub fn plan_routed_firewall(
    spec: Option<&RoutedFirewallSpec>,
    observed: &[ObservedRoutingRule],
    cluster_name: &str,
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
    let mut deletes = Vec::new();
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
    let creates: Vec<Step> = wanted
        .into_iter()
        .map(
            |(network_id, protocol, port, destination)| Step::CreateRoutingFirewallRule {
                network_id,
                protocol,
                port,
                destination,
                cidrs: sources.iter().copied().collect(),
            },
        )
        .collect();
    let mut plan = Plan::from_phases(vec![deletes, creates], Vec::new());
    if let Some(spec) = spec {
        plan.ownership = [
            (TAG_CLUSTER.to_string(), cluster_name.to_string()),
            (TAG_SERVICE_UID.to_string(), spec.service_uid.clone()),
        ]
        .into();
    }
    plan
}
