//! Firewall rules of isolated networks (API.md §3.13); the CIDR and conflict checks they
//! share with LB rules and ACL items are in [`super::ip_rules`].

use super::ip_rules::{check_cidr, firewall_conflict};
use super::{
    Ctx, create_reply, embedded_tags, job_reply, lookup_required, resolve, success, tags_match,
};
use crate::error::ApiError;
use crate::jobs::JobAction;
use crate::response::list_body;
use crate::state::{FirewallRule, State, new_id};
use serde_json::{Value, json};

/// The `firewallrule` object.
pub fn render_firewall_rule(state: &State, rule: &FirewallRule) -> Value {
    let ip = state.ip(&rule.ip_id);
    let mut out = json!({
        "id": rule.id, "protocol": rule.protocol, "ipaddressid": rule.ip_id,
        "ipaddress": ip.map(|i| i.address.clone()).unwrap_or_default(),
        "cidrlist": rule.cidrs.join(","), "state": rule.state, "traffictype": "Ingress",
        "fordisplay": true, "tags": embedded_tags(state, "FirewallRule", &rule.id),
    });
    if let Some(n) = ip.and_then(|i| i.network_id.clone()) {
        out["networkid"] = json!(n);
    }
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

/// listFirewallRules (`FirewallManagerImpl.listFirewallRules`): rules of purpose Firewall
/// from `firewall_rules`, newest first (`Filter(FirewallRuleVO.class, "id", false, …)`).
/// Routing firewall rules are rows of that table too (purpose Firewall, no public address):
/// a ROUTED network's `listFirewallRules networkid=` lists them, and a listing without an
/// `ipaddressid` carries them among the rest. The simulator keeps the two kinds in two
/// vectors and lists the address-bound rules, then the routing ones, each newest first (one
/// network in practice has only one of the kinds).
pub fn list_firewall_rules(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let page = ctx.page()?;
    let scope = ctx.scope()?;
    let p = ctx.params;
    let state = &*ctx.state;
    let id = resolve(p, "id", |i| {
        state.firewall_rules.iter().any(|r| r.id == i)
            || state.routing_firewall_rules.iter().any(|r| r.id == i)
    })?;
    let ip = resolve(p, "ipaddressid", |i| state.ip(i).is_some())?;
    let network = resolve(p, "networkid", |i| state.network(i).is_some())?;
    if let Some(address) = ip.and_then(|i| state.ip(i)) {
        // FirewallManagerImpl.listFirewallRules: the address must be ready to use
        // (`IPAddressVO.readyToUse`: Allocated) and accessible to the caller.
        let owner = address
            .owner
            .as_ref()
            .filter(|_| address.state == "Allocated");
        let owner = owner.ok_or_else(|| {
            ApiError::param(format!(
                "Ip address id={} not ready for firewall rules yet",
                address.id
            ))
        })?;
        ctx.caller
            .check(state, owner, &format!("IP address {}", address.address))?;
    }
    let mut items = Vec::new();
    for rule in state.firewall_rules.iter().rev() {
        let keep = scope.matches(&rule.owner)
            && id.is_none_or(|i| i == rule.id)
            && ip.is_none_or(|i| i == rule.ip_id)
            && network.is_none_or(|n| {
                state
                    .ip(&rule.ip_id)
                    .is_some_and(|i| i.network_id.as_deref() == Some(n))
            })
            && tags_match(state, p, "FirewallRule", &rule.id)?;
        if keep {
            items.push(render_firewall_rule(state, rule));
        }
    }
    // Routing rules have no source address: an `ipaddressid` filter never matches them.
    if ip.is_none() {
        for rule in state.routing_firewall_rules.iter().rev() {
            let keep = scope.matches(&rule.owner)
                && id.is_none_or(|i| i == rule.id)
                && network.is_none_or(|n| n == rule.network_id)
                && tags_match(state, p, "FirewallRule", &rule.id)?;
            if keep {
                items.push(super::routing_firewall::render_routing_rule(state, rule));
            }
        }
    }
    Ok(list_body("firewallrule", items, page))
}

/// createFirewallRule.
pub fn create_firewall_rule(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let p = ctx.params;
    let state = &*ctx.state;
    let ip = lookup_required(p, "ipaddressid", |id| state.ip(id))?;
    let protocol = p.required("protocol")?.trim().to_lowercase();
    // `CreateFirewallRuleCmd.create` checks the CIDRs before anything else, as a bare
    // `ServerApiException(PARAM_ERROR)`: 431 with `cserrorcode` 9999.
    let cidrs = p
        .list("cidrlist")
        .unwrap_or_else(|| vec!["0.0.0.0/0".into()]);
    if let Some(bad) = cidrs.iter().find(|c| !check_cidr(c)) {
        return Err(ApiError::param_bare(format!(
            "Source CIDRs formatting error {bad}"
        )));
    }
    // `FirewallManagerImpl.createIngressFirewallRule` passes `rule.getNetworkId()` as an
    // argument: `CreateFirewallRuleCmd.getNetworkId` refuses an address bound to no network
    // (one still `Allocating`: `associateIPToGuestNetwork` binds it in its job) with an
    // `InvalidParameterValueException` — 431 cs 4350, before `createFirewallRule` (and its
    // `checkIpForService`) runs. The server prints the address's internal id.
    if ip.network_id.is_none() {
        return Err(ApiError::param(format!(
            "Unable to create firewall rule for the IP address ID={} as IP is not associated with any network and no networkId is passed in",
            ip.id
        )));
    }
    if !["tcp", "udp", "icmp"].contains(&protocol.as_str()) {
        return Err(ApiError::param(format!(
            "Invalid protocol: {protocol}; only tcp, udp and icmp are supported"
        )));
    }
    let owner = ip
        .owner
        .clone()
        .ok_or_else(|| ApiError::param(format!("IP address {} is not allocated", ip.address)))?;
    ctx.caller
        .check(state, &owner, &format!("IP address {}", ip.address))?;
    let network = ip.network_id.clone().filter(|_| ip.vpc_id.is_none()).ok_or_else(|| {
        ApiError::param(format!("Unable to create firewall rule; IP address {} is not associated with an isolated network", ip.address))
    })?;
    // `FirewallManagerImpl.validateFirewallRule`: on a ROUTED network whose gateway is the
    // Virtual Router (`isVirtualRouterGateway`), a `CloudRuntimeException` (530 cs 4250) —
    // its text for a root admin only, the generic one for anyone else.
    if state.network(&network).is_some_and(|n| n.is_routed()) {
        return Err(ApiError::cloud_runtime(
            ctx.caller.is_admin(),
            "Unable to create routing firewall rule. Please use routing firewall API instead.",
        ));
    }
    let (mut start, mut end, mut icmp_type, mut icmp_code) =
        (p.int("startport")?, p.int("endport")?, None, None);
    if protocol == "icmp" {
        (start, end) = (None, None);
        icmp_type = Some(p.int("icmptype")?.unwrap_or(-1));
        icmp_code = Some(p.int("icmpcode")?.unwrap_or(-1));
    } else {
        end = end.or(start);
        for (name, value) in [("start", start), ("end", end)] {
            if let Some(v) = value.filter(|v| !(1..=65535).contains(v)) {
                return Err(ApiError::param(format!(
                    "Invalid value for {name} port: {v}"
                )));
            }
        }
        if let (Some(s), Some(e)) = (start, end)
            && s > e
        {
            return Err(ApiError::param("Start port can't be bigger than end port"));
        }
    }
    let rule = FirewallRule {
        id: new_id(),
        ip_id: ip.id.clone(),
        protocol,
        start_port: start,
        end_port: end,
        icmp_type,
        icmp_code,
        cidrs,
        state: "Add".into(),
        owner,
    };
    firewall_conflict(state, &rule)?;
    let rule_id = rule.id.clone();
    ctx.state.firewall_rules.push(rule);
    let job = ctx.start_job(
        Some(network),
        Some(("FirewallRule", rule_id.clone())),
        JobAction::CreateFirewallRule {
            rule_id: rule_id.clone(),
        },
    );
    Ok(create_reply(&rule_id, &job))
}

/// Job: the rule is applied.
pub fn finish_create(state: &mut State, rule_id: &str) -> Result<Value, ApiError> {
    let rule = state
        .firewall_rules
        .iter_mut()
        .find(|r| r.id == rule_id)
        .ok_or_else(|| ApiError::internal("Firewall rule vanished"))?;
    rule.state = "Active".into();
    let rule = rule.clone();
    Ok(json!({"firewallrule": render_firewall_rule(state, &rule)}))
}

/// deleteFirewallRule.
pub fn delete_firewall_rule(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let state = &*ctx.state;
    let rule = lookup_required(ctx.params, "id", |id| {
        state.firewall_rules.iter().find(|r| r.id == id)
    })?;
    ctx.caller
        .check(state, &rule.owner, &format!("firewall rule {}", rule.id))?;
    let network = state.ip(&rule.ip_id).and_then(|i| i.network_id.clone());
    let rule_id = rule.id.clone();
    let job = ctx.start_job(
        network,
        Some(("FirewallRule", rule_id.clone())),
        JobAction::DeleteFirewallRule { rule_id },
    );
    Ok(job_reply(&job))
}

/// Job: remove the rule (and forget it in an LB rule that opened it); applying the revoked
/// rule (`FirewallManagerImpl.applyRules`) unassigns a VPC address whose last rule it was
/// from its tier.
pub fn finish_delete(state: &mut State, rule_id: &str) -> Result<Value, ApiError> {
    let ip_id = state
        .firewall_rules
        .iter()
        .find(|r| r.id == rule_id)
        .map(|r| r.ip_id.clone());
    state.firewall_rules.retain(|r| r.id != rule_id);
    state.tags.retain(|t| t.resource_id != rule_id);
    for lb in state
        .lb_rules
        .iter_mut()
        .filter(|r| r.firewall_rule_id.as_deref() == Some(rule_id))
    {
        lb.firewall_rule_id = None;
    }
    if let Some(ip_id) = ip_id {
        super::ip_rules::unassign_from_tier(state, &ip_id);
    }
    Ok(success())
}

#[cfg(test)]
mod tests {
    use super::check_cidr;

    #[test]
    fn cidr_validation() {
        for good in [
            "0.0.0.0/0",
            "10.0.0.0/8",
            "192.168.1.7",
            "::/0",
            "fd00::/64",
        ] {
            assert!(check_cidr(good), "{good}");
        }
        for bad in ["10.0.0.0/33", " 10.0.0.0/8", "10.0.0/8", "fd00::/129", "x"] {
            assert!(!check_cidr(bad), "{bad}");
        }
    }
}
