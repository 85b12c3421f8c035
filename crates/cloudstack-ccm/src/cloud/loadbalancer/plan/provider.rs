//! What NSX and Netris do differently from what their capabilities advertise (the
//! research in `network-modes.md`, Q3): the spec adjusted before planning, with a Warning
//! for each thing not applied, so the Service is still served and no call is refused.
//!
//! * NSX (`NsxElement.applyLBRules`): creates an active monitor for every pool itself, so a
//!   health-check annotation is noted, not sent (`createLBHealthCheckPolicy` is refused);
//!   stickiness policies are stored and never applied; a rule's `cidrlist` is dropped, so
//!   source CIDRs go through firewall rules or ACL items instead.
//! * Netris (`NetrisElement.applyLBRules`, `validateInputsForExternalNetworkProvider`):
//!   serves TCP only (a UDP rule would silently serve TCP): a UDP port gets no rule; no
//!   PROXY protocol (`tcp-proxy` is refused on update); the algorithm of a rule cannot be
//!   changed (`algorithm` is refused on update); stickiness is not applied; `cidrlist` is
//!   applied, so source ranges also go there; an address is the Service's own, never the
//!   network's source-NAT address.

use super::*;
use crate::cloud::loadbalancer::capabilities::LbProviderKind;
use crate::cloud::loadbalancer::vocabulary::rule_name;

/// The spec as the network's provider can serve it (`None`: unchanged), warnings pushed.
pub(super) fn gate(
    spec: &LbSpec,
    observed: &ObservedLb,
    ctx: &PlanContext,
    warnings: &mut Vec<String>,
) -> Result<Option<LbSpec>, PlanError> {
    let caps = &ctx.network;
    let network = caps.network_label();
    match caps.lb_kind {
        LbProviderKind::Nsx => Ok(Some(nsx(spec, caps, &network, warnings))),
        LbProviderKind::Netris => netris(spec, observed, &network, warnings).map(Some),
        LbProviderKind::VirtualRouter | LbProviderKind::Other => Ok(None),
    }
}

fn nsx(
    spec: &LbSpec,
    caps: &NetworkCapabilities,
    network: &str,
    warnings: &mut Vec<String>,
) -> LbSpec {
    let mut gated = spec.clone();
    if gated.health_check.take().is_some() {
        warnings.push(format!(
            "health check not applied: NSX monitors the members of the load balancer on network {network} itself (an active TCP or ICMP monitor on each pool)"
        ));
    }
    if gated.stickiness.take().is_some() {
        warnings.push(format!(
            "stickiness not applied: NSX does not apply stickiness policies (network {network})"
        ));
    }
    if let Some(cidrs) = gated.rule_cidrs.take().filter(|c| !c.is_empty()) {
        let through = match caps.port_access {
            PortAccess::Firewall => "firewall rules",
            _ => "ACL items",
        };
        if gated.source_ranges == [Cidr::ANY_V4] && !gated.keep_source_ranges {
            warnings.push(format!(
                "source CIDRs applied through {through}: NSX ignores a rule's cidrlist (network {network})"
            ));
            gated.source_ranges = cidrs;
        } else {
            warnings.push(format!(
                "source CIDRs not applied: NSX ignores a rule's cidrlist, and the ports are opened to the Service's loadBalancerSourceRanges through {through} (network {network})"
            ));
        }
    }
    gated.keep_rule_cidrs = false;
    gated
}

fn netris(
    spec: &LbSpec,
    observed: &ObservedLb,
    network: &str,
    warnings: &mut Vec<String>,
) -> Result<LbSpec, PlanError> {
    if let Some(ip) = observed.ip.as_ref().filter(|ip| ip.is_source_nat) {
        return Err(PlanError::AddressNotDedicated {
            address: ip.address,
            network: network.to_string(),
        });
    }
    let mut gated = spec.clone();
    let udp: Vec<String> = gated
        .rules
        .iter()
        .filter(|r| r.protocol.ip_protocol() == IpProtocol::Udp)
        .map(|r| r.public_port.to_string())
        .collect();
    if !udp.is_empty() {
        warnings.push(format!(
            "port(s) {}: UDP is not served by Netris (a rule would serve TCP): no rule for them (network {network})",
            udp.join(", ")
        ));
        gated
            .rules
            .retain(|r| r.protocol.ip_protocol() != IpProtocol::Udp);
    }
    if gated.proxy_protocol {
        warnings.push(format!(
            "PROXY protocol not applied: Netris serves plain TCP (network {network})"
        ));
        gated.proxy_protocol = false;
        for rule in &mut gated.rules {
            if rule.protocol == LbProtocol::TcpProxy {
                rule.protocol = LbProtocol::Tcp;
                rule.name = rule_name(&gated.lb_name, LbProtocol::Tcp, rule.public_port);
            }
        }
    }
    if gated.stickiness.take().is_some() {
        warnings.push(format!(
            "stickiness not applied: Netris does not apply stickiness policies (network {network})"
        ));
    }
    if let Some(current) = observed
        .rules
        .iter()
        .map(|r| r.algorithm)
        .find(|a| *a != gated.algorithm)
    {
        warnings.push(format!(
            "algorithm {} not applied: Netris refuses to change the algorithm of a rule; the rules keep {current} (network {network})",
            gated.algorithm
        ));
        gated.algorithm = current;
    }
    if gated.rule_cidrs.is_none() && !gated.keep_rule_cidrs && gated.source_ranges != [Cidr::ANY_V4]
    {
        // Netris applies a rule's cidrlist (an ACL per rule, `applyAclRulesForLb`).
        gated.rule_cidrs = Some(gated.source_ranges.clone());
    }
    Ok(gated)
}
