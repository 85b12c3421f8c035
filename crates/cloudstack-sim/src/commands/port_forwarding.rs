//! Port-forwarding rules of isolated networks and VPC tiers: create, list, delete —
//! modelled so that they take part in rule conflicts and in a VPC address's tier as on the
//! server.
//!
//! Sources (apache/cloudstack): `CreatePortForwardingRuleCmd` (a `BaseAsyncCreateCmd`: the
//! rule is validated and stored in `create()`, state `Add`, applied by the job;
//! `getNetworkId`: the address's network, `networkid` only for an address not associated
//! yet; `getOpenFirewall`: `openfirewall=true` on a VPC address → 431);
//! `RulesManagerImpl.createPortForwardingRule`: a VPC address not yet associated is
//! associated with the tier `networkid` names (`associateIPToGuestNetwork`), the VM needs a
//! NIC in the rule's network ("Vm doesn't belong to network associated with ipAddress");
//! then `FirewallManagerImpl.detectRulesConflict`: a port range overlapping a load-balancer
//! rule on the address conflicts (537) whatever the protocols, two port-forwarding rules
//! only with the same protocol (`allowPf`); with `openfirewall` (true by default outside
//! VPCs) a firewall rule 0.0.0.0/0 for the public range is created
//! (`createRuleForAllCidrs`) and checked like any firewall rule.
//! `UserVmManagerImpl.cleanupVmResources` revokes a VM's rules when it is expunged
//! (`revokePortForwardingRulesForVm`); releasing the address removes them too. A revoked
//! rule that is applied (delete, expunge, a create whose job failed) can leave a VPC address
//! without rules, which then leaves its tier ([`super::ip_rules::unassign_from_tier`]).

use super::access::owner_fields;
use super::ip_rules::{firewall_conflict, forwarding_conflict, guest_association_refusal};
use super::{
    Ctx, create_reply, embedded_tags, job_reply, lookup, lookup_required, resolve, success,
    tags_match,
};
use crate::error::ApiError;
use crate::jobs::JobAction;
use crate::response::list_body;
use crate::state::{FirewallRule, PfRule, State, new_id};
use serde_json::{Map, Value, json};

/// The `portforwardingrule` object (ports as strings, as `FirewallRuleResponse` has them).
pub fn render_pf_rule(state: &State, rule: &PfRule) -> Value {
    let ip = state.ip(&rule.ip_id);
    let vm = state.vm_including_removed(&rule.vm_id);
    let mut out = Map::new();
    for (k, v) in [
        ("id", json!(rule.id)),
        ("protocol", json!(rule.protocol)),
        ("publicport", json!(rule.public_ports.0.to_string())),
        ("publicendport", json!(rule.public_ports.1.to_string())),
        ("privateport", json!(rule.private_ports.0.to_string())),
        ("privateendport", json!(rule.private_ports.1.to_string())),
        ("ipaddressid", json!(rule.ip_id)),
        (
            "ipaddress",
            json!(ip.map(|i| i.address.clone()).unwrap_or_default()),
        ),
        ("virtualmachineid", json!(rule.vm_id)),
        (
            "virtualmachinename",
            json!(vm.map(|v| v.name.clone()).unwrap_or_default()),
        ),
        (
            "virtualmachinedisplayname",
            json!(vm.map(|v| v.name.clone()).unwrap_or_default()),
        ),
        ("vmguestip", json!(rule.vm_ip)),
        ("networkid", json!(rule.network_id)),
        ("state", json!(rule.state)),
        ("cidrlist", json!("")),
        ("fordisplay", json!(true)),
        ("tags", embedded_tags(state, "PortForwardingRule", &rule.id)),
    ] {
        out.insert(k.into(), v);
    }
    owner_fields(state, &rule.owner, &mut out);
    Value::Object(out)
}

/// listPortForwardingRules.
pub fn list_port_forwarding_rules(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let page = ctx.page()?;
    let scope = ctx.scope()?;
    let p = ctx.params;
    let state = &*ctx.state;
    let id = resolve(p, "id", |i| state.pf_rules.iter().any(|r| r.id == i))?;
    let ip = resolve(p, "ipaddressid", |i| state.ip(i).is_some())?;
    let network = resolve(p, "networkid", |i| state.network(i).is_some())?;
    let mut items = Vec::new();
    for rule in &state.pf_rules {
        let keep = scope.matches(&rule.owner)
            && id.is_none_or(|i| i == rule.id)
            && ip.is_none_or(|i| i == rule.ip_id)
            && network.is_none_or(|n| n == rule.network_id)
            && tags_match(state, p, "PortForwardingRule", &rule.id)?;
        if keep {
            items.push(render_pf_rule(state, rule));
        }
    }
    Ok(list_body("portforwardingrule", items, page))
}

/// A port or the end of a range (`NetUtils.isValidPort`).
fn port_param(ctx: &Ctx<'_>, name: &str, default: Option<u16>) -> Result<u16, ApiError> {
    match (ctx.params.int(name)?, default) {
        (Some(v), _) => u16::try_from(v)
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| ApiError::param(format!("{name} is an invalid value: {v}"))),
        (None, Some(d)) => Ok(d),
        (None, None) => Err(ApiError::missing(&ctx.params.command, name)),
    }
}

/// createPortForwardingRule: validated and stored (state `Add`) at once, applied by the job.
pub fn create_port_forwarding_rule(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let p = ctx.params;
    let state = &*ctx.state;
    let ip = lookup_required(p, "ipaddressid", |id| state.ip(id))?;
    let vm = lookup_required(p, "virtualmachineid", |id| state.vm_including_removed(id))?;
    let requested_network = lookup(p, "networkid", |id| state.network(id))?;
    let protocol = p.required("protocol")?.trim().to_lowercase();
    if !["tcp", "udp"].contains(&protocol.as_str()) {
        return Err(ApiError::param(format!(
            "Protocol {protocol} is not supported in zone {}",
            ip.zone_id
        )));
    }
    let public_start = port_param(ctx, "publicport", None)?;
    let public_end = port_param(ctx, "publicendport", Some(public_start))?;
    let private_start = port_param(ctx, "privateport", None)?;
    let private_end = port_param(ctx, "privateendport", Some(private_start))?;
    if public_start > public_end || private_start > private_end {
        return Err(ApiError::param("Start port can't be bigger than end port"));
    }
    let owner = ip.owner.clone().ok_or_else(|| {
        ApiError::param(format!(
            "Unable to create port forwarding rule; IP address {} is not allocated",
            ip.address
        ))
    })?;
    let in_vpc = ip.vpc_id.is_some();
    let open_firewall = match p.bool("openfirewall") {
        Some(true) if in_vpc => {
            return Err(ApiError::param(
                "Can't have openFirewall=true when IP address belongs to VPC",
            ));
        }
        Some(v) => v,
        None => !in_vpc,
    };
    // `RulesManagerImpl.createPortForwardingRule` refuses a static-NAT address first, as an
    // `InvalidParameterValueException` that `CreatePortForwardingRuleCmd.create` does not
    // catch: 431 with `cserrorcode` 4350 (not the 537 of `detectRulesConflict`).
    if ip.static_nat_vm.is_some() {
        return Err(ApiError::param(format!(
            "Unable to create port forwarding rule; ip id={} has static nat enabled",
            ip.id
        )));
    }
    ctx.caller
        .check(state, &owner, &format!("IP address {}", ip.address))?;
    ctx.caller
        .check(state, &vm.owner, &format!("instance {}", vm.id))?;
    // `CreatePortForwardingRuleCmd.getNetworkId`: the network the address is associated
    // with, whatever `networkid` says; `networkid` only for an address not associated yet.
    // `createPortForwardingRule` then associates a VPC address with the tier it names.
    let (network, assign_to_tier) = match (&ip.network_id, requested_network) {
        (Some(n), _) => (n.clone(), false),
        (None, Some(n)) if in_vpc && n.vpc_id == ip.vpc_id => (n.id.clone(), true),
        (None, Some(n)) => {
            return Err(ApiError::param(format!(
                "Ip address {} is not assigned to the network {}",
                ip.address, n.id
            )));
        }
        (None, None) => {
            return Err(ApiError::param(format!(
                "Unable to create port forwarding rule for the ipAddress id={} as ip is not associated with any network and no networkId is passed in",
                ip.id
            )));
        }
    };
    // `associateIPToGuestNetwork` refuses a tier without SourceNat (a ROUTED one); the
    // `InvalidParameterValueException` passes `CreatePortForwardingRuleCmd.create` as is.
    if assign_to_tier
        && let Some(refusal) = state.network(&network).and_then(guest_association_refusal)
    {
        return Err(refusal);
    }
    if vm.removed.is_some() {
        return Err(ApiError::param(format!(
            "Unable to create port forwarding rule on address {}, invalid virtual machine id specified ({}).",
            ip.address, vm.id
        )));
    }
    if vm.is_destroyed() {
        return Err(ApiError::param(format!("Invalid user vm: {}", vm.id)));
    }
    let nic = vm
        .nics
        .iter()
        .find(|n| n.network_id == network)
        .ok_or_else(|| ApiError::param("Vm doesn't belong to network associated with ipAddress"))?;
    forwarding_conflict(state, &ip.id, (public_start, public_end), Some(&protocol))?;
    let firewall = if open_firewall {
        let opened = FirewallRule {
            id: new_id(),
            ip_id: ip.id.clone(),
            protocol: protocol.clone(),
            start_port: Some(i64::from(public_start)),
            end_port: Some(i64::from(public_end)),
            icmp_type: None,
            icmp_code: None,
            cidrs: vec!["0.0.0.0/0".into()],
            state: "Add".into(),
            owner: owner.clone(),
        };
        firewall_conflict(state, &opened)?;
        Some(opened)
    } else {
        None
    };
    let rule = PfRule {
        id: new_id(),
        ip_id: ip.id.clone(),
        network_id: network.clone(),
        vm_id: vm.id.clone(),
        vm_ip: nic.ipv4.clone(),
        protocol,
        public_ports: (public_start, public_end),
        private_ports: (private_start, private_end),
        state: "Add".into(),
        firewall_rule_id: firewall.as_ref().map(|f| f.id.clone()),
        owner,
    };
    let (rule_id, ip_id) = (rule.id.clone(), ip.id.clone());
    if assign_to_tier && let Some(ip) = ctx.state.ips.iter_mut().find(|i| i.id == ip_id) {
        ip.network_id = Some(network.clone());
    }
    ctx.state.firewall_rules.extend(firewall);
    ctx.state.pf_rules.push(rule);
    let job = ctx.start_job(
        Some(network),
        Some(("FirewallRule", rule_id.clone())),
        JobAction::CreatePfRule {
            rule_id: rule_id.clone(),
        },
    );
    Ok(create_reply(&rule_id, &job))
}

/// Job of createPortForwardingRule: the rule (and its opened firewall rule) is applied.
pub fn finish_create(state: &mut State, rule_id: &str) -> Result<Value, ApiError> {
    let rule = state
        .pf_rules
        .iter_mut()
        .find(|r| r.id == rule_id)
        .ok_or_else(|| ApiError::internal("Port forwarding rule vanished"))?;
    rule.state = "Active".into();
    let rule = rule.clone();
    if let Some(fw) = state
        .firewall_rules
        .iter_mut()
        .find(|f| Some(&f.id) == rule.firewall_rule_id.as_ref())
    {
        fw.state = "Active".into();
    }
    Ok(json!({"portforwardingrule": render_pf_rule(state, &rule)}))
}

/// deletePortForwardingRule (`id` with `@ACL(OperateEntry)`: another account's rule is a
/// synchronous 531).
pub fn delete_port_forwarding_rule(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let state = &*ctx.state;
    let rule = lookup_required(ctx.params, "id", |id| {
        state.pf_rules.iter().find(|r| r.id == id)
    })?;
    ctx.caller.check(
        state,
        &rule.owner,
        &format!("port forwarding rule {}", rule.id),
    )?;
    let (rule_id, network) = (rule.id.clone(), rule.network_id.clone());
    let job = ctx.start_job(
        Some(network),
        Some(("FirewallRule", rule_id.clone())),
        JobAction::DeletePfRule { rule_id },
    );
    Ok(job_reply(&job))
}

/// Job of deletePortForwardingRule; also the undoing of a create whose job failed
/// (`CreatePortForwardingRuleCmd.execute` → `revokePortForwardingRule(id, true)`). Applying
/// the revoked rule (`FirewallManagerImpl.applyRules`) unassigns a VPC address whose last
/// rule it was from its tier ([`super::ip_rules::unassign_from_tier`]).
pub fn finish_delete(state: &mut State, rule_id: &str) -> Result<Value, ApiError> {
    revoke_rules_where(state, |r| r.id == rule_id);
    Ok(success())
}

/// Removes every rule `doomed` picks, each as [`remove_rule`] does, and returns the
/// addresses they were on.
pub fn remove_rules_where(
    state: &mut State,
    doomed: impl Fn(&crate::state::PfRule) -> bool,
) -> Vec<String> {
    let doomed: Vec<(String, String)> = state
        .pf_rules
        .iter()
        .filter(|r| doomed(r))
        .map(|r| (r.id.clone(), r.ip_id.clone()))
        .collect();
    let mut ips = Vec::new();
    for (id, ip_id) in doomed {
        remove_rule(state, &id);
        if !ips.contains(&ip_id) {
            ips.push(ip_id);
        }
    }
    ips
}

/// Revokes and applies every rule `doomed` picks (`revokePortForwardingRuleInternal` then
/// `applyPortForwardingRules`, as deletePortForwardingRule and
/// `revokePortForwardingRulesForVm` do): the rules go, and each VPC address left without
/// rules leaves its tier.
pub fn revoke_rules_where(state: &mut State, doomed: impl Fn(&crate::state::PfRule) -> bool) {
    for ip_id in remove_rules_where(state, doomed) {
        super::ip_rules::unassign_from_tier(state, &ip_id);
    }
}

/// Removes a rule with its tags and `openfirewall` firewall rule.
pub fn remove_rule(state: &mut State, rule_id: &str) {
    let Some(pos) = state.pf_rules.iter().position(|r| r.id == rule_id) else {
        return;
    };
    let rule = state.pf_rules.remove(pos);
    if let Some(fw) = rule.firewall_rule_id {
        state.firewall_rules.retain(|f| f.id != fw);
        state.tags.retain(|t| t.resource_id != fw);
    }
    state.tags.retain(|t| t.resource_id != rule_id);
}
