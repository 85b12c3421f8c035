//! LB rule membership: assign, remove, list instances (API.md §3.11–§3.12).

use super::access::Caller;
use super::vms::{VmDetails, pending_vm_jobs, render_vm};
use super::{Ctx, job_reply, success};
use crate::error::ApiError;
use crate::jobs::{JobAction, MemberRequest};
use crate::params::is_uuid;
use crate::response::{Page, list_body};
use crate::state::{Member, State};
use serde_json::{Value, json};

/// The VMs a call names. `virtualmachineids` is a UUID list: parameter processing resolves
/// each id before the job is queued (removed VMs included,
/// `ParamProcessWorker.translateUuidToInternalId`), so an unknown one is a synchronous 431.
/// `vmidipmap` is a plain map that the command resolves inside the job
/// (`AssignToLoadBalancerRuleCmd.getVmIdIpListMap`).
fn requested_members(ctx: &Ctx<'_>) -> Result<Vec<MemberRequest>, ApiError> {
    let p = ctx.params;
    let mut wanted = Vec::new();
    for id in p.list("virtualmachineids").unwrap_or_default() {
        if !is_uuid(&id) || ctx.state.vm_including_removed(&id).is_none() {
            return Err(ApiError::invalid_uuid(&p.command, "virtualmachineids", &id));
        }
        wanted.push(MemberRequest {
            vm_id: id,
            ip: None,
            from_map: false,
        });
    }
    for entry in p.map("vmidipmap")?.values() {
        wanted.push(MemberRequest {
            vm_id: entry.get("vmid").cloned().unwrap_or_else(|| "null".into()),
            ip: entry.get("vmip").cloned(),
            from_map: true,
        });
    }
    Ok(wanted)
}

/// assignToLoadBalancerRule.
pub fn assign_to_load_balancer_rule(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    change_members(ctx, true)
}

/// removeFromLoadBalancerRule.
pub fn remove_from_load_balancer_rule(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    change_members(ctx, false)
}

/// The synchronous part: the rule and `virtualmachineids` are resolved; neither command
/// has an `@ACL` parameter, so ownership is checked in the job. The job waits in the
/// queue of the rule's network (`getSyncObjId`).
fn change_members(ctx: &mut Ctx<'_>, add: bool) -> Result<Value, ApiError> {
    let state = &*ctx.state;
    let rule = super::lookup_lb_rule(ctx.params, state, "id")?;
    let (rule_id, network_id) = (rule.id.to_owned(), rule.network_id.to_owned());
    let members = requested_members(ctx)?;
    let action = if add {
        JobAction::AssignToLbRule {
            rule_id: rule_id.clone(),
            members,
        }
    } else {
        JobAction::RemoveFromLbRule {
            rule_id: rule_id.clone(),
            members,
        }
    };
    let job = ctx.start_job(Some(network_id), Some(("FirewallRule", rule_id)), action);
    Ok(job_reply(&job))
}

/// Resolves the `vmidipmap` entries inside the job: an unknown VM is
/// `InvalidParameterValueException("Unable to find Instance ID: …")`, which the job
/// reports as 431 (`ApiAsyncJobDispatcher.runJob`).
fn check_map_vms(state: &State, members: &[MemberRequest]) -> Result<(), ApiError> {
    match members
        .iter()
        .find(|m| m.from_map && state.vm(&m.vm_id).is_none())
    {
        Some(m) => Err(ApiError::param(format!(
            "Unable to find Instance ID: {}",
            m.vm_id
        ))),
        None => Ok(()),
    }
}

/// The addresses asked for per VM, in request order (`null` ips = the whole VM / its
/// primary address), as `assignToLoadBalancer`/`removeFromLoadBalancerInternal` merge
/// `instanceIds` into `vmIdIpMap`.
fn per_vm(members: &[MemberRequest]) -> Vec<(String, Vec<String>, bool)> {
    let mut out: Vec<(String, Vec<String>, bool)> = Vec::new();
    for m in members {
        let pos = match out.iter().position(|(vm, _, _)| vm == &m.vm_id) {
            Some(pos) => pos,
            None => {
                out.push((m.vm_id.clone(), Vec::new(), false));
                out.len() - 1
            }
        };
        match &m.ip {
            Some(ip) if m.from_map => out[pos].1.push(ip.clone()),
            _ => out[pos].2 = true,
        }
    }
    out
}

/// The one answer of a failed assign job: `AssignToLoadBalancerRuleCmd.execute` turns every
/// `CloudRuntimeException` of `LoadBalancingRulesManagerImpl.assignToLoadBalancer`
/// (`InvalidParameterValueException` and `PermissionDeniedException` are ones) into this.
fn assign_failed(reason: String) -> ApiError {
    tracing::info!(reason = %reason, "assignToLoadBalancerRule job fails");
    ApiError::new(530, None, "Failed to assign load balancer rule")
}

/// Job of assignToLoadBalancerRule (`LoadBalancingRulesManagerImpl.assignToLoadBalancer`):
/// every VM must exist and not be Destroyed/Expunging, be accessible to the caller and
/// owned by the rule's owner (`RulesManagerImpl.checkRuleAndUserVm`), have a NIC in the
/// rule's network, and not already be mapped with that address. The rule is then applied
/// ([`super::lb::apply_rule`]).
pub fn finish_assign(
    state: &mut State,
    caller: &Caller,
    rule_id: &str,
    members: &[MemberRequest],
) -> Result<Value, ApiError> {
    check_map_vms(state, members)?;
    if let Some(m) = members
        .iter()
        .find(|m| m.from_map && !m.ip.as_deref().is_some_and(is_ipv4))
    {
        return Err(ApiError::param(format!(
            "Invalid ip address {} passed in vmidipmap for vmid {}",
            m.ip.as_deref().unwrap_or("null"),
            m.vm_id
        )));
    }
    let rule = state.any_lb_rule(rule_id).ok_or_else(|| {
        assign_failed(format!(
            "Failed to assign to load balancer {rule_id}, the load balancer was not found."
        ))
    })?;
    if members.is_empty() {
        return Err(assign_failed(
            "Both instanceids and vmidipmap  can't be null".into(),
        ));
    }
    let mut added = Vec::new();
    for (vm_id, ips, primary) in per_vm(members) {
        let vm = state
            .vm(&vm_id)
            .filter(|vm| !vm.is_destroyed())
            .ok_or_else(|| assign_failed(format!("Invalid instance id specified: {vm_id}")))?;
        if !caller.can_access(state, rule.owner) || !caller.can_access(state, &vm.owner) {
            return Err(assign_failed(format!(
                "Account {} does not have permission to operate on instance {vm_id} or load balancer rule {rule_id}",
                caller.account
            )));
        }
        if &vm.owner != rule.owner {
            return Err(assign_failed(format!(
                "New rule {rule_id} and vm id={vm_id} belong to different accounts"
            )));
        }
        let nic = vm
            .nics
            .iter()
            .find(|n| n.network_id == rule.network_id)
            .ok_or_else(|| {
                assign_failed(format!(
                    "VM {vm_id} cannot be added because it doesn't belong in the same network."
                ))
            })?;
        let mut addresses = ips.clone();
        if primary || addresses.is_empty() {
            addresses.push(nic.ipv4.clone());
        }
        if let Some(ip) = addresses.iter().find(|ip| *ip != &nic.ipv4) {
            return Err(assign_failed(format!(
                "VM ip {ip} specified does not belong to nic in network {}",
                rule.network_id
            )));
        }
        if let Some(ip) = addresses.iter().find(|ip| {
            rule.members
                .iter()
                .any(|m| m.vm_id == vm_id && &m.ip == *ip)
        }) {
            return Err(assign_failed(format!(
                "VM {vm_id} with {ip} is already mapped to load balancer."
            )));
        }
        addresses.dedup();
        added.extend(addresses.into_iter().map(|ip| Member {
            vm_id: vm_id.clone(),
            ip,
        }));
    }
    if let Some(members) = state.lb_members_mut(rule_id) {
        members.extend(added);
    }
    // `assignToLoadBalancer` → `applyLoadBalancerConfig`: the rule is now `Active`.
    super::lb::apply_rule(state, rule_id);
    Ok(success())
}

/// The 431 `RemoveFromLoadBalancerRuleCmd.execute` answers for any
/// `InvalidParameterValueException` of `removeFromLoadBalancerInternal`.
fn remove_failed(reason: String) -> ApiError {
    tracing::info!(reason = %reason, "removeFromLoadBalancerRule job fails");
    ApiError::param_bare("Failed to remove Instance from load balancer rule")
}

/// Job of removeFromLoadBalancerRule
/// (`LoadBalancingRulesManagerImpl.removeFromLoadBalancerInternal`): a VM given by
/// `virtualmachineids` loses all its mappings on the rule, and one that has none is left
/// as it is (`listByLoadBalancerIdAndVmId` returns an empty list, never null, so the
/// "not configured" branch is unreachable); a `vmidipmap` address that is not mapped fails
/// the job with 431. A caller without access to the rule gets `PermissionDeniedException`,
/// which the job reports as 530.
pub fn finish_remove(
    state: &mut State,
    caller: &Caller,
    rule_id: &str,
    members: &[MemberRequest],
) -> Result<Value, ApiError> {
    check_map_vms(state, members)?;
    let rule = state
        .any_lb_rule(rule_id)
        .ok_or_else(|| remove_failed(format!("Invalid load balancer value: {rule_id}")))?;
    if !caller.can_access(state, rule.owner) {
        return Err(super::access::job_denied(
            caller,
            &format!("load balancer rule {rule_id}"),
        ));
    }
    if members.is_empty() {
        return Err(remove_failed(
            "Both instanceids and vmidipmap  can't be null".into(),
        ));
    }
    let wanted = per_vm(members);
    for (vm_id, ips, _) in &wanted {
        if let Some(ip) = ips.iter().find(|ip| {
            !rule
                .members
                .iter()
                .any(|m| &m.vm_id == vm_id && &m.ip == *ip)
        }) {
            return Err(remove_failed(format!(
                "The instance id: {vm_id} is not configured for LB rule {rule_id} with address {ip}"
            )));
        }
    }
    if let Some(members) = state.lb_members_mut(rule_id) {
        members.retain(|m| {
            !wanted
                .iter()
                .any(|(vm, ips, all)| vm == &m.vm_id && (*all || ips.contains(&m.ip)))
        });
    }
    // The revoked mappings are applied (`applyLoadBalancerConfig`): a rule whose last
    // mapping went is back in `Add`.
    super::lb::apply_rule(state, rule_id);
    Ok(success())
}

/// True for a dotted IPv4 address (`NetUtils.isValidIp4`).
fn is_ipv4(text: &str) -> bool {
    text.parse::<std::net::Ipv4Addr>().is_ok()
}

/// listLoadBalancerRuleInstances (paging ignored; `count` = items).
pub fn list_load_balancer_rule_instances(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let p = ctx.params;
    let state = &*ctx.state;
    let rule = super::lookup_lb_rule(p, state, "id")?;
    ctx.caller.check(
        state,
        rule.owner,
        &format!("load balancer rule {}", rule.id),
    )?;
    let applied = p.bool("applied").unwrap_or(true);
    let with_ips = p.bool("lbvmips").unwrap_or(false);
    let pending = pending_vm_jobs(state);
    let mut items = Vec::new();
    for vm in &state.vms {
        if matches!(
            vm.state.as_str(),
            "Destroyed" | "Expunging" | "Error" | "Unknown"
        ) {
            continue;
        }
        let ips: Vec<&str> = rule
            .members
            .iter()
            .filter(|m| m.vm_id == vm.id)
            .map(|m| m.ip.as_str())
            .collect();
        let selected = if applied {
            !ips.is_empty()
        } else {
            ips.is_empty()
                && &vm.owner == rule.owner
                && vm.nics.iter().any(|n| n.network_id == rule.network_id)
        };
        if !selected || p.text("keyword").is_some_and(|k| !super::like(&vm.name, k)) {
            continue;
        }
        let mut rendered = render_vm(state, vm, VmDetails::all(), ctx.caller.is_admin(), &pending);
        rendered["servicestate"] = json!("Active");
        items.push(if with_ips {
            json!({"loadbalancerruleinstance": rendered, "lbvmipaddresses": ips})
        } else {
            rendered
        });
    }
    Ok(list_body(
        if with_ips {
            "lbrulevmidip"
        } else {
            "loadbalancerruleinstance"
        },
        items,
        Page::all(),
    ))
}
