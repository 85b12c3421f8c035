//! What the rules on one public address share, whatever their kind (load balancing, port
//! forwarding, firewall): the CIDR check, the conflict checks of
//! `FirewallManagerImpl.detectRulesConflict`, and the VPC tier an address leaves with its
//! last rule. The rule commands import this; it imports none of them.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::error::ApiError;
use crate::state::{FirewallRule, Network, Service, State};

/// `IpAddressManagerImpl.associateIPToGuestNetwork` in an Advanced zone: an address is
/// associated only with an isolated network (a VPC tier is one) whose offering has
/// SourceNat — so never with a ROUTED one. The refusal, an
/// `InvalidParameterValueException`, for `network`; `None` when it may take the address.
/// (The shared-network branch has its own text; `allocateIP` refuses the simulator's shared
/// networks before any association.)
pub fn guest_association_refusal(network: &Network) -> Option<ApiError> {
    (!network.is_shared() && !network.offers(Service::SourceNat)).then(|| {
        ApiError::param(
            "In zone of type Advanced ip address can be associated only to the network of guest type Isolated with the SourceNat enabled",
        )
    })
}

/// True for a valid IPv4/IPv6 CIDR or a bare address.
pub fn check_cidr(text: &str) -> bool {
    let (address, prefix) = match text.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (text, None),
    };
    let max = if address.parse::<Ipv4Addr>().is_ok() {
        32
    } else if address.parse::<Ipv6Addr>().is_ok() {
        128
    } else {
        return false;
    };
    prefix.is_none_or(|p| p.parse::<u32>().is_ok_and(|n| n <= max) && !p.starts_with('+'))
}

/// `FirewallManagerImpl.detectRulesConflict` for a new firewall rule against the firewall
/// rules already on its address. Two firewall rules only conflict when they have the same
/// protocol and their source CIDR lists share an identical entry (`detectConflictingCidrs`
/// compares the strings: `10.0.0.0/8` and `10.1.0.0/16` do not conflict, nor do disjoint
/// lists); then
/// * overlapping port ranges → 537 "The range specified, a-b, conflicts with rule … which
///   has c-d";
/// * both without ports → 537 "There is already a firewall rule specified with protocol =
///   … and no ports";
/// * ICMP with the same type and code → 431 "New rule conflicts with existing rule id=…".
///
/// Rules of other purposes (load balancing, port forwarding) never conflict with a firewall
/// rule (`oneOfRulesIsFirewall`); tcp and udp rules on one port do not conflict either.
pub fn firewall_conflict(state: &State, new: &FirewallRule) -> Result<(), ApiError> {
    for rule in state.firewall_rules.iter().filter(|r| {
        r.ip_id == new.ip_id && r.id != new.id && r.protocol.eq_ignore_ascii_case(&new.protocol)
    }) {
        if !rule.cidrs.iter().any(|c| new.cidrs.contains(c)) {
            continue;
        }
        if new.protocol == "icmp" {
            if rule.icmp_type == new.icmp_type && rule.icmp_code == new.icmp_code {
                return Err(ApiError::param(format!(
                    "New rule conflicts with existing rule id={}",
                    rule.id
                )));
            }
            continue;
        }
        match (new.start_port, new.end_port, rule.start_port, rule.end_port) {
            (None, None, None, None) => {
                return Err(ApiError::conflict(format!(
                    "There is already a firewall rule specified with protocol = {} and no ports",
                    new.protocol
                )));
            }
            (Some(start), Some(end), Some(s), Some(e)) if start <= e && s <= end => {
                return Err(ApiError::conflict(format!(
                    "The range specified, {start}-{end}, conflicts with rule {} which has {s}-{e}",
                    rule.id
                )));
            }
            _ => {}
        }
    }
    Ok(())
}

/// 537 when `ports` on the address overlap a load-balancer rule (any protocol) or a
/// port-forwarding rule of the same protocol (`detectRulesConflict`).
pub fn forwarding_conflict(
    state: &State,
    ip_id: &str,
    ports: (u16, u16),
    protocol: Option<&str>,
) -> Result<(), ApiError> {
    let (start, end) = ports;
    let lb = state
        .lb_rules
        .iter()
        .filter(|r| r.ip_id == ip_id)
        .map(|r| (r.id.as_str(), (r.public_port, r.public_port)));
    let pf = state
        .pf_rules
        .iter()
        .filter(|r| r.ip_id == ip_id && protocol.is_none_or(|p| p == r.protocol))
        .map(|r| (r.id.as_str(), r.public_ports));
    for (id, (s, e)) in lb.chain(pf) {
        if start <= e && s <= end {
            return Err(ApiError::conflict(format!(
                "The range specified, {start}-{end}, conflicts with rule {id} which has {s}-{e}"
            )));
        }
    }
    Ok(())
}

/// `VpcManagerImpl.unassignIPFromVpcNetwork` (`VpcIpAllocationServiceImpl` in newer
/// versions), run whenever a rule of an address is removed once applied: a VPC address
/// that is still "allocated to the VPC" (`isIpAllocatedToVpc`: static NAT, or any
/// `firewall_rules` row on it — `FirewallRulesDao.listByIp` takes every purpose and state,
/// so load-balancing, port-forwarding and firewall rules all count) keeps its tier; one
/// without leaves it (`associated_network_id` cleared) and stays allocated to its VPC, free
/// for a rule on another tier. Any other address is left alone.
pub fn unassign_from_tier(state: &mut State, ip_id: &str) {
    let has_rules = state.lb_rules.iter().any(|r| r.ip_id == ip_id)
        || state.pf_rules.iter().any(|r| r.ip_id == ip_id)
        || state.firewall_rules.iter().any(|r| r.ip_id == ip_id);
    if let Some(ip) = state.ips.iter_mut().find(|i| i.id == ip_id)
        && ip.vpc_id.is_some()
        && ip.static_nat_vm.is_none()
        && !has_rules
    {
        ip.network_id = None;
    }
}
