//! LB rule membership: assign, remove, list instances (API.md §3.11–§3.12).

use super::vms::{VmDetails, render_vm};
use super::{Ctx, job_reply, lookup_required, success};
use crate::error::ApiError;
use crate::jobs::JobAction;
use crate::params::is_uuid;
use crate::response::{Page, list_body};
use crate::state::{LbRule, Member, State};
use serde_json::{Value, json};

/// Resolves `virtualmachineids` and `vmidipmap[i].vmid/vmip` into members of `rule`. A VM
/// outside the rule's network is an error the job reports (the server checks in the job).
fn requested_members(
    ctx: &Ctx<'_>,
    rule: &LbRule,
) -> Result<(Vec<Member>, Option<ApiError>), ApiError> {
    let p = ctx.params;
    let state = &*ctx.state;
    let mut wanted: Vec<(String, Option<String>)> = Vec::new();
    for id in p.list("virtualmachineids").unwrap_or_default() {
        wanted.push((id, None));
    }
    for entry in p.map("vmidipmap")?.values() {
        let vm = entry.get("vmid").cloned().unwrap_or_default();
        wanted.push((vm, entry.get("vmip").cloned()));
    }
    if wanted.is_empty() {
        return Err(ApiError::param(
            "Provide either virtualmachineids or vmidipmap",
        ));
    }
    let mut members = Vec::new();
    let mut failure = None;
    for (vm_id, ip) in wanted {
        let field = if ip.is_some() {
            "vmidipmap"
        } else {
            "virtualmachineids"
        };
        let vm = state
            .vm(&vm_id)
            .filter(|_| is_uuid(&vm_id))
            .ok_or_else(|| ApiError::invalid_uuid(&p.command, field, &vm_id))?;
        ctx.caller
            .check(state, &vm.owner, &format!("instance {}", vm.id))?;
        let nic = vm.nics.iter().find(|n| n.network_id == rule.network_id);
        match (nic, ip) {
            (None, _) => {
                failure.get_or_insert(ApiError::param(format!(
                    "VM {} is not in the network {} of load balancer rule {}",
                    vm.id, rule.network_id, rule.id
                )));
            }
            (Some(nic), Some(ip)) if nic.ipv4 != ip => {
                failure.get_or_insert(ApiError::param(format!(
                    "VM ip {ip} is not an address of VM {}",
                    vm.id
                )));
            }
            (Some(nic), _) => members.push(Member {
                vm_id: vm.id.clone(),
                ip: nic.ipv4.clone(),
            }),
        }
    }
    Ok((members, failure))
}

/// assignToLoadBalancerRule.
pub fn assign_to_load_balancer_rule(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    change_members(ctx, true)
}

/// removeFromLoadBalancerRule.
pub fn remove_from_load_balancer_rule(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    change_members(ctx, false)
}

fn change_members(ctx: &mut Ctx<'_>, add: bool) -> Result<Value, ApiError> {
    let state = &*ctx.state;
    let rule = lookup_required(ctx.params, "id", |id| state.lb_rule(id))?.clone();
    ctx.caller.check(
        state,
        &rule.owner,
        &format!("load balancer rule {}", rule.id),
    )?;
    let (members, failure) = requested_members(ctx, &rule)?;
    let action = if add {
        JobAction::AssignToLbRule {
            rule_id: rule.id.clone(),
            members,
        }
    } else {
        JobAction::RemoveFromLbRule {
            rule_id: rule.id.clone(),
            members,
        }
    };
    let job = ctx.start_job_with(
        Some(rule.network_id.clone()),
        Some(("FirewallRule", rule.id.clone())),
        action,
        failure,
    );
    Ok(job_reply(&job))
}

/// Job: add members (a VM already mapped fails the job).
pub fn finish_assign(
    state: &mut State,
    rule_id: &str,
    members: &[Member],
) -> Result<Value, ApiError> {
    let rule = state
        .lb_rules
        .iter_mut()
        .find(|r| r.id == rule_id)
        .ok_or_else(|| ApiError::internal("Load balancer rule vanished"))?;
    if let Some(m) = members.iter().find(|m| {
        rule.members
            .iter()
            .any(|x| x.vm_id == m.vm_id && x.ip == m.ip)
    }) {
        return Err(ApiError::param(format!(
            "VM {} is already mapped to load balancer.",
            m.vm_id
        )));
    }
    rule.members.extend(members.iter().cloned());
    Ok(success())
}

/// Job: remove members (a VM not mapped fails the job).
pub fn finish_remove(
    state: &mut State,
    rule_id: &str,
    members: &[Member],
) -> Result<Value, ApiError> {
    let rule = state
        .lb_rules
        .iter_mut()
        .find(|r| r.id == rule_id)
        .ok_or_else(|| ApiError::internal("Load balancer rule vanished"))?;
    if let Some(m) = members
        .iter()
        .find(|m| !rule.members.iter().any(|x| x.vm_id == m.vm_id))
    {
        return Err(ApiError::param(format!(
            "The instance id: {} is not assigned to load balancer rule: {rule_id}",
            m.vm_id
        )));
    }
    rule.members
        .retain(|x| !members.iter().any(|m| m.vm_id == x.vm_id));
    Ok(success())
}

/// listLoadBalancerRuleInstances (paging ignored; `count` = items).
pub fn list_load_balancer_rule_instances(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let p = ctx.params;
    let state = &*ctx.state;
    let rule = lookup_required(p, "id", |id| state.lb_rule(id))?;
    ctx.caller.check(
        state,
        &rule.owner,
        &format!("load balancer rule {}", rule.id),
    )?;
    let applied = p.bool("applied").unwrap_or(true);
    let with_ips = p.bool("lbvmips").unwrap_or(false);
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
                && vm.owner == rule.owner
                && vm.nics.iter().any(|n| n.network_id == rule.network_id)
        };
        if !selected || p.text("keyword").is_some_and(|k| !super::like(&vm.name, k)) {
            continue;
        }
        let mut rendered = render_vm(state, vm, VmDetails::all(), ctx.caller.is_admin());
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
