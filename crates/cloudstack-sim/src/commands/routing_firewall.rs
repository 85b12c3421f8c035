//! Routing firewall rules (4.20+): what filters a ROUTED isolated network's routed subnet
//! (`CreateRoutingFirewallRuleCmd`, `ListRoutingFirewallRulesCmd`,
//! `DeleteRoutingFirewallRuleCmd`; `RoutedIpv4ManagerImpl`).
//!
//! A rule is a `FirewallRuleVO` of purpose Firewall with no public address, a source and a
//! destination CIDR list; it is listed as a `firewallrule` (`ApiResponseHelper
//! .createFirewallResponse`, which also prints `destcidrlist`) and tagged as resource type
//! `FirewallRule` (the same response helper's `ResourceObjectType.FirewallRule`). The server
//! keeps these rules in the table of ordinary firewall rules: `listFirewallRules` shows them
//! too (a ROUTED network's `listFirewallRules networkid=` lists its routing rules, see
//! [`super::firewall::list_firewall_rules`]), and both lists are newest first.
//! `listRoutingFirewallRules` lists the routing rules only here (the server's would show a
//! NATTED network's address-bound firewall rules too; a ROUTED network has none).
//!
//! `createRoutingFirewallRule` does not check the network's mode: the service reads the
//! network's Firewall capabilities, so a network without the Firewall service — a VPC tier
//! (ROUTED tiers use ACL items instead), a shared network — is refused with
//! `NetworkModelImpl.getNetworkServiceCapabilities`' `UnsupportedServiceException` (530),
//! while a NATTED isolated network takes the rule as a ROUTED one does.

use super::access::job_denied;
use super::infra::service_capability;
use super::{
    Ctx, create_reply, embedded_tags, job_reply, lookup_required, resolve, success, tags_match,
};
use crate::error::ApiError;
use crate::jobs::JobAction;
use crate::response::list_body;
use crate::state::{RoutingFirewallRule, Service, State, new_id};
use serde_json::{Value, json};

/// The `firewallrule` object of a routing firewall rule (`createFirewallResponse`: no
/// `ipaddressid`/`ipaddress`, ports and ICMP fields as integers when set).
pub fn render_routing_rule(state: &State, rule: &RoutingFirewallRule) -> Value {
    let mut out = json!({
        "id": rule.id, "protocol": rule.protocol, "networkid": rule.network_id,
        "cidrlist": rule.cidrs.join(","), "destcidrlist": rule.dest_cidrs.join(","),
        "state": rule.state, "traffictype": rule.traffic_type, "fordisplay": rule.display,
        "tags": embedded_tags(state, "FirewallRule", &rule.id),
    });
    for (key, value) in [
        ("startport", rule.start_port),
        ("endport", rule.end_port),
        ("icmptype", rule.icmp_type),
        ("icmpcode", rule.icmp_code),
    ] {
        if let Some(v) = value {
            out[key] = json!(v);
        }
    }
    out
}

/// listRoutingFirewallRules (`FirewallManagerImpl.listFirewallRules`, paged, scoped like
/// every list): filters `id`, `networkid`, `traffictype` (`TrafficType.valueOf`: exactly
/// `Ingress` or `Egress`, anything else an `IllegalArgumentException` → 431), `tags`, and
/// for a root admin `fordisplay`.
pub fn list_routing_firewall_rules(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let page = ctx.page()?;
    let scope = ctx.scope()?;
    let p = ctx.params;
    let state = &*ctx.state;
    let id = resolve(p, "id", |i| {
        state.routing_firewall_rules.iter().any(|r| r.id == i)
    })?;
    let network = resolve(p, "networkid", |i| state.network(i).is_some())?;
    let traffic = p.text("traffictype");
    if let Some(t) = traffic.filter(|t| !["Ingress", "Egress"].contains(t)) {
        return Err(ApiError::param_bare(format!(
            "No enum constant com.cloud.network.rules.FirewallRule.TrafficType.{t}"
        )));
    }
    let display = ctx
        .caller
        .is_admin()
        .then(|| p.bool("fordisplay"))
        .flatten();
    let mut items = Vec::new();
    // Newest first: `Filter(FirewallRuleVO.class, "id", false, …)`.
    for rule in state.routing_firewall_rules.iter().rev() {
        let keep = scope.matches(&rule.owner)
            && id.is_none_or(|i| i == rule.id)
            && network.is_none_or(|n| n == rule.network_id)
            && traffic.is_none_or(|t| t == rule.traffic_type)
            && display.is_none_or(|d| d == rule.display)
            && tags_match(state, p, "FirewallRule", &rule.id)?;
        if keep {
            items.push(render_routing_rule(state, rule));
        }
    }
    Ok(list_body("firewallrule", items, page))
}

/// `CreateRoutingFirewallRuleCmd.getTrafficType`: ingress by default, any case.
fn traffic_type(text: Option<&str>) -> Result<&'static str, ApiError> {
    match text {
        None => Ok("Ingress"),
        Some(t) if t.eq_ignore_ascii_case("ingress") => Ok("Ingress"),
        Some(t) if t.eq_ignore_ascii_case("egress") => Ok("Egress"),
        Some(t) => Err(ApiError::param(format!("Invalid traffic type {t}"))),
    }
}

/// `CreateRoutingFirewallRuleCmd.getProtocol`: trimmed; protocol numbers 1, 6 and 17 are
/// icmp, tcp and udp, any other number is refused; names pass as sent (lower-cased when
/// stored) and meet the Firewall capabilities later.
fn protocol(text: &str) -> Result<String, ApiError> {
    let text = text.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return match text.parse::<u64>() {
            Ok(1) => Ok("icmp".into()),
            Ok(6) => Ok("tcp".into()),
            Ok(17) => Ok("udp".into()),
            Ok(n) => Err(ApiError::param(format!("Protocol {n} not supported"))),
            Err(_) => Err(ApiError::param(format!("Protocol {text} not supported"))),
        };
    }
    Ok(text.to_owned())
}

/// `NetUtils.isValidIp4Cidr`: an IPv4 address, a slash and a prefix of 0–32.
fn is_ipv4_cidr(text: &str) -> bool {
    text.split_once('/').is_some_and(|(address, prefix)| {
        address.parse::<std::net::Ipv4Addr>().is_ok()
            && !prefix.is_empty()
            && prefix.bytes().all(|b| b.is_ascii_digit())
            && prefix.parse::<u8>().is_ok_and(|p| p <= 32)
    })
}

/// createRoutingFirewallRule (async create; `RoutedIpv4ManagerImpl.createRoutingFirewallRule`
/// in the create phase, in its order): `traffictype` ("Invalid traffic type …") and
/// `protocol` ("Protocol N not supported") as the command reads them; every source CIDR
/// ("Invalid source IPv4 CIDR: …") and destination CIDR ("Invalid destination IPv4 CIDR:
/// …", both default `0.0.0.0/0`, IPv4 only); the ports ("publicPort is an invalid value: …",
/// "Public port range is an invalid value: …", "Start port can't be bigger than end port";
/// `endport` defaults to `startport`) — all 431; the caller's access to the network (531);
/// the network's Firewall capabilities: none → `UnsupportedServiceException` "Service
/// Firewall is not supported in the network id=…" (530, cs 4390; a root admin sees the
/// text, with the network's database id where the simulator prints its uuid), a protocol
/// the `SupportedProtocols` (ingress) or `SupportedEgressProtocols` (egress) text does not
/// contain → "Protocol … is not supported in zone"; ICMP fields only with ICMP ("Can specify
/// icmpCode and icmpType for ICMP protocol only"), no ports with ICMP ("Can't specify
/// start/end port when protocol is ICMP"); then `FirewallManagerImpl.detectRulesConflict`
/// against the network's routing rules of the same traffic type. The job applies it.
pub fn create_routing_firewall_rule(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let p = ctx.params;
    let state = &*ctx.state;
    let network = lookup_required(p, "networkid", |id| state.network(id))?;
    let raw_protocol = p.required("protocol")?;
    let traffic = traffic_type(p.text("traffictype"))?;
    let protocol = protocol(raw_protocol)?;
    let icmp = protocol.eq_ignore_ascii_case("icmp");
    let (icmp_type, icmp_code) = (p.int("icmptype")?, p.int("icmpcode")?);
    let all = || vec!["0.0.0.0/0".to_owned()];
    let cidrs = p.list("cidrlist").unwrap_or_else(all);
    let dest_cidrs = p.list("destcidrlist").unwrap_or_else(all);
    if let Some(bad) = cidrs.iter().find(|c| !is_ipv4_cidr(c)) {
        return Err(ApiError::param(format!("Invalid source IPv4 CIDR: {bad}")));
    }
    if let Some(bad) = dest_cidrs.iter().find(|c| !is_ipv4_cidr(c)) {
        return Err(ApiError::param(format!(
            "Invalid destination IPv4 CIDR: {bad}"
        )));
    }
    let start = p.int("startport")?;
    let end = p.int("endport")?.or(start);
    let valid = |port: i64| (1..=65535).contains(&port);
    if let Some(s) = start.filter(|s| !valid(*s)) {
        return Err(ApiError::param(format!(
            "publicPort is an invalid value: {s}"
        )));
    }
    if let Some(e) = end.filter(|e| !valid(*e)) {
        return Err(ApiError::param(format!(
            "Public port range is an invalid value: {e}"
        )));
    }
    if let (Some(s), Some(e)) = (start, end)
        && s > e
    {
        return Err(ApiError::param("Start port can't be bigger than end port"));
    }
    ctx.caller
        .check(state, &network.owner, &format!("network {}", network.id))?;
    if !network.offers(Service::Firewall) {
        let text = if ctx.caller.is_admin() {
            format!(
                "Service Firewall is not supported in the network id={}",
                network.id
            )
        } else {
            "Internal error executing command, please contact your system administrator".into()
        };
        return Err(ApiError::new(530, Some(4390), text));
    }
    let supported_name = if traffic == "Egress" {
        "SupportedEgressProtocols"
    } else {
        "SupportedProtocols"
    };
    let supported = service_capability(network, Service::Firewall, supported_name)
        .unwrap_or_default()
        .to_lowercase();
    if !supported.contains(&protocol.to_lowercase()) {
        return Err(ApiError::param(format!(
            "Protocol {protocol} is not supported in zone"
        )));
    }
    let directions = service_capability(network, Service::Firewall, "SupportedTrafficDirection")
        .unwrap_or_default()
        .to_lowercase();
    if !directions.contains(&traffic.to_lowercase()) {
        return Err(ApiError::param(format!(
            "Traffic Type {traffic} is currently supported by Firewall in network {}",
            network.id
        )));
    }
    if !icmp && (icmp_type.is_some() || icmp_code.is_some()) {
        return Err(ApiError::param(
            "Can specify icmpCode and icmpType for ICMP protocol only",
        ));
    }
    if icmp && (start.is_some() || end.is_some()) {
        return Err(ApiError::param(
            "Can't specify start/end port when protocol is ICMP",
        ));
    }
    let display = if ctx.caller.is_admin() {
        p.bool("fordisplay").unwrap_or(true)
    } else {
        true
    };
    let rule = RoutingFirewallRule {
        id: new_id(),
        network_id: network.id.clone(),
        protocol: protocol.to_lowercase(),
        start_port: start,
        end_port: end,
        icmp_type: icmp.then(|| icmp_type.unwrap_or(-1)),
        icmp_code: icmp.then(|| icmp_code.unwrap_or(-1)),
        cidrs,
        dest_cidrs,
        traffic_type: traffic.into(),
        display,
        state: "Add".into(),
        owner: network.owner.clone(),
    };
    routing_conflict(state, &rule)?;
    let (rule_id, network_id) = (rule.id.clone(), rule.network_id.clone());
    ctx.state.routing_firewall_rules.push(rule);
    // `CreateRoutingFirewallRuleCmd` names no sync object: its job waits in no network
    // queue. Its `getApiResourceType` is Network (the job's instance).
    let job = ctx.start_job(
        None,
        Some(("Network", network_id)),
        JobAction::CreateRoutingFirewallRule {
            rule_id: rule_id.clone(),
        },
    );
    Ok(create_reply(&rule_id, &job))
}

/// `FirewallManagerImpl.detectConflictingCidrs`: two lists conflict when both are empty or
/// they share an entry (compared as strings).
fn cidrs_conflict(a: &[String], b: &[String]) -> bool {
    (a.is_empty() && b.is_empty()) || a.iter().any(|c| b.contains(c))
}

/// `FirewallManagerImpl.detectRulesConflict` for a rule without a public address: it meets
/// the network's rules of purpose Firewall and the same traffic type. Two rules of the same
/// protocol whose source lists and destination lists both overlap conflict — ICMP with the
/// same type and code → 431 "New rule conflicts with existing rule id=…"; both without
/// ports → 537 "There is already a firewall rule specified with protocol = … and no ports";
/// overlapping ports → 537 "The range specified, a-b, conflicts with rule … which has c-d".
/// `CreateRoutingFirewallRuleCmd.create` rethrows the 537 as a bare `ServerApiException`
/// (cs 9999). Rule ids are printed as uuids where the server prints database ids.
fn routing_conflict(state: &State, new: &RoutingFirewallRule) -> Result<(), ApiError> {
    let others = state.routing_firewall_rules.iter().filter(|r| {
        r.network_id == new.network_id
            && r.traffic_type == new.traffic_type
            && r.protocol.eq_ignore_ascii_case(&new.protocol)
    });
    for rule in others {
        if !(cidrs_conflict(&rule.cidrs, &new.cidrs)
            && cidrs_conflict(&rule.dest_cidrs, &new.dest_cidrs))
        {
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
                return Err(ApiError::new(
                    537,
                    Some(9999),
                    format!(
                        "There is already a firewall rule specified with protocol = {} and no ports",
                        new.protocol
                    ),
                ));
            }
            (Some(start), Some(end), Some(s), Some(e)) if start <= e && s <= end => {
                return Err(ApiError::new(
                    537,
                    Some(9999),
                    format!(
                        "The range specified, {start}-{end}, conflicts with rule {} which has {s}-{e}",
                        rule.id
                    ),
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Job of createRoutingFirewallRule (`applyRoutingFirewallRule`): the rule is applied.
pub fn finish_create(state: &mut State, rule_id: &str) -> Result<Value, ApiError> {
    let rule = state
        .routing_firewall_rules
        .iter_mut()
        .find(|r| r.id == rule_id)
        .ok_or_else(|| ApiError::internal("Routing firewall rule vanished"))?;
    rule.state = "Active".into();
    let rule = rule.clone();
    Ok(json!({"firewallrule": render_routing_rule(state, &rule)}))
}

/// deleteRoutingFirewallRule: `id` (no `@ACL`) is resolved by parameter processing — an id
/// that names no rule is a 431, as for deleteFirewallRule; the command names no sync
/// object, so the job waits in no network queue; its instance is the rule's network
/// (`getApiResourceType`/`getApiResourceId`).
pub fn delete_routing_firewall_rule(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let state = &*ctx.state;
    let rule = lookup_required(ctx.params, "id", |id| {
        state.routing_firewall_rules.iter().find(|r| r.id == id)
    })?;
    let (rule_id, network_id) = (rule.id.clone(), rule.network_id.clone());
    let job = ctx.start_job(
        None,
        Some(("Network", network_id)),
        JobAction::DeleteRoutingFirewallRule { rule_id },
    );
    Ok(job_reply(&job))
}

/// Job of deleteRoutingFirewallRule (`RoutedIpv4ManagerImpl.revokeRoutingFirewallRule` →
/// `FirewallManagerImpl.revokeIngressFirewallRule`/`revokeEgressFirewallRule`): the
/// caller's access (530 in the job), then the rule goes with its tags.
pub fn finish_delete(
    state: &mut State,
    caller: &super::access::Caller,
    rule_id: &str,
) -> Result<Value, ApiError> {
    let Some(rule) = state
        .routing_firewall_rules
        .iter()
        .find(|r| r.id == rule_id)
    else {
        return Err(ApiError::param(format!(
            "Unable to find routing firewall rule with id {rule_id}"
        )));
    };
    if !caller.can_access(state, &rule.owner) {
        return Err(job_denied(caller, &format!("firewall rule {rule_id}")));
    }
    state.routing_firewall_rules.retain(|r| r.id != rule_id);
    state.tags.retain(|t| t.resource_id != rule_id);
    Ok(success())
}

#[cfg(test)]
mod tests {
    use super::{is_ipv4_cidr, protocol};

    #[test]
    fn cidrs_are_ipv4_with_a_prefix() {
        for good in ["0.0.0.0/0", "203.0.113.7/32", "10.0.0.0/8"] {
            assert!(is_ipv4_cidr(good), "{good}");
        }
        for bad in [
            "10.0.0.1",
            "10.0.0.0/33",
            "fd00::/64",
            "10.0.0.0/",
            "10.0.0/8",
        ] {
            assert!(!is_ipv4_cidr(bad), "{bad}");
        }
    }

    #[test]
    fn protocol_numbers_map_to_names() {
        assert_eq!(protocol(" 6 ").unwrap(), "tcp");
        assert_eq!(protocol("17").unwrap(), "udp");
        assert_eq!(protocol("1").unwrap(), "icmp");
        assert_eq!(protocol("TCP").unwrap(), "TCP");
        let refused = protocol("47").unwrap_err();
        assert_eq!(
            (refused.code, refused.text.as_str()),
            (431, "Protocol 47 not supported")
        );
    }
}
