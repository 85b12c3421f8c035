//! VM lifecycle: destroyVirtualMachine (with and without `expunge`) and expungeVirtualMachine,
//! and what each does to load-balancer mappings, static NAT, NICs and tags.
//!
//! Sources (apache/cloudstack):
//! * `DestroyVMCmd` / `ExpungeVMCmd`: `id` is a UUID parameter with `@ACL(OperateEntry)`, so
//!   an unknown id is a synchronous 431 and another account's VM a synchronous 531
//!   (`ParamProcessWorker`, run by `ApiServer.queueCommand` before the job is queued);
//!   everything else happens inside the job.
//! * `UserVmManagerImpl.destroyVm`: `expunge=true` needs an admin (or
//!   `allow.user.expunge.recover.vm`, off by default): `PermissionDeniedException("Account
//!   does not have permission for expunging.")`, which the job reports as 530
//!   (`ApiAsyncJobDispatcher.runJob`: not a `ServerApiException`). A VM already Destroyed is
//!   returned unchanged. Destroy stops the VM and moves it to `Destroyed` (`Expunging` with
//!   `expunge=true`); load-balancer mappings, static NAT and NICs stay until expunge.
//! * `UserVmManagerImpl.expunge` → `cleanupVmResources`: `revokePortForwardingRulesForVm`
//!   revokes and applies the VM's port-forwarding rules; `removeVmFromLoadBalancers` marks
//!   every `LoadBalancerVMMapVO` of the VM revoked and re-applies the rules, which deletes
//!   the mappings; `disableStaticNat` on the VM's static-NAT address (the address stays
//!   allocated); `releaseNetworkResourcesOnExpunge` releases the NICs; `UserVmDaoImpl.remove`
//!   marks the row removed and deletes its tags. Applying the revoked forwarding rules
//!   (`FirewallManagerImpl.applyRules`) and disabling static NAT both end in
//!   `unassignIPFromVpcNetwork`: a VPC address left without rules or static NAT leaves its
//!   tier.
//! * `UserVmManagerImpl.expungeVm`: a VM not Destroyed/Expunging/Error →
//!   `CloudRuntimeException("Please destroy vm with specified vmId before expunge")`, a removed
//!   one → `InvalidParameterValueException("Unable to find a virtual machine with specified
//!   vmId")`; `ExpungeVMCmd.execute` maps them to 530 and 431 with the same text.

use super::access::Caller;
use super::vms::{PendingVmJobs, VmDetails, render_vm};
use super::{Ctx, job_reply, success};
use crate::error::ApiError;
use crate::jobs::JobAction;
use crate::state::{State, now_text};
use serde_json::{Value, json};

/// Resolves the `id` of a VM command as parameter processing does (expunged VMs included)
/// and applies the `@ACL(OperateEntry)` check.
fn vm_param(ctx: &Ctx<'_>) -> Result<String, ApiError> {
    let p = ctx.params;
    let id = p.required_uuid("id")?;
    let vm = ctx
        .state
        .vm_including_removed(id)
        .ok_or_else(|| ApiError::invalid_uuid(&p.command, "id", id))?;
    ctx.caller
        .check(ctx.state, &vm.owner, &format!("instance {}", vm.id))?;
    Ok(vm.id.clone())
}

/// destroyVirtualMachine.
pub fn destroy_virtual_machine(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let vm_id = vm_param(ctx)?;
    let expunge = ctx.params.bool("expunge").unwrap_or(false);
    let job = ctx.start_job(
        None,
        Some(("VirtualMachine", vm_id.clone())),
        JobAction::DestroyVm { vm_id, expunge },
    );
    Ok(job_reply(&job))
}

/// expungeVirtualMachine.
pub fn expunge_virtual_machine(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let vm_id = vm_param(ctx)?;
    let job = ctx.start_job(
        None,
        Some(("VirtualMachine", vm_id.clone())),
        JobAction::ExpungeVm { vm_id },
    );
    Ok(job_reply(&job))
}

/// The 530 a job reports for a caller who may not expunge.
fn expunge_denied() -> ApiError {
    ApiError::new(530, None, "Account does not have permission for expunging.")
}

/// Job of destroyVirtualMachine: `{"virtualmachine": …}` in state Destroyed (or Expunging,
/// then expunged, with `expunge=true`).
pub fn finish_destroy(
    state: &mut State,
    caller: &Caller,
    vm_id: &str,
    expunge: bool,
) -> Result<Value, ApiError> {
    if expunge && !caller.is_admin() {
        return Err(expunge_denied());
    }
    let vm = state.vm(vm_id).ok_or_else(|| {
        ApiError::param(format!("unable to find a virtual machine with id {vm_id}"))
    })?;
    if vm.is_destroyed() && !expunge {
        let vm = vm.clone();
        return Ok(
            json!({"virtualmachine": render_vm(state, &vm, VmDetails::all(), caller.is_admin(), &PendingVmJobs::new())}),
        );
    }
    if let Some(vm) = state.vms.iter_mut().find(|v| v.id == vm_id) {
        vm.state = if expunge { "Expunging" } else { "Destroyed" }.into();
    }
    let vm = state
        .vm(vm_id)
        .cloned()
        .unwrap_or_else(|| unreachable!("found above"));
    let rendered = render_vm(
        state,
        &vm,
        VmDetails::all(),
        caller.is_admin(),
        &PendingVmJobs::new(),
    );
    if expunge {
        expunge_vm(state, vm_id);
    }
    Ok(json!({"virtualmachine": rendered}))
}

/// Job of expungeVirtualMachine: `{"success": true}`.
pub fn finish_expunge(state: &mut State, caller: &Caller, vm_id: &str) -> Result<Value, ApiError> {
    let vm = state.vm(vm_id).ok_or_else(|| {
        ApiError::param_bare("Unable to find a virtual machine with specified vmId")
    })?;
    if !matches!(vm.state.as_str(), "Destroyed" | "Expunging" | "Error") {
        return Err(ApiError::new(
            530,
            None,
            "Please destroy vm with specified vmId before expunge",
        ));
    }
    if !caller.is_admin() {
        return Err(expunge_denied());
    }
    expunge_vm(state, vm_id);
    Ok(success())
}

/// Expunges a VM (`UserVmManagerImpl.expunge`): revokes its port-forwarding rules, drops
/// its load-balancer mappings, disables its static NAT (a VPC address left without rules
/// leaves its tier), releases its NICs, deletes its tags and marks the row removed. False
/// when no such (unexpunged) VM exists.
pub fn expunge_vm(state: &mut State, vm_id: &str) -> bool {
    let Some(pos) = state.vms.iter().position(|v| v.id == vm_id) else {
        return false;
    };
    let mut vm = state.vms.remove(pos);
    vm.state = "Expunging".into();
    vm.removed = Some(now_text());
    vm.nics.clear();
    state.expunged_vms.push(vm);
    let mapped = state.unmap_vm(vm_id);
    // `removeVmFromLoadBalancers` re-applies each rule the VM was mapped to.
    for rule_id in &mapped {
        super::lb::apply_rule(state, rule_id);
    }
    super::port_forwarding::revoke_rules_where(state, |r| r.vm_id == vm_id);
    let static_nat: Vec<String> = state
        .ips
        .iter()
        .filter(|i| i.static_nat_vm.as_deref() == Some(vm_id))
        .map(|i| i.id.clone())
        .collect();
    for ip_id in static_nat {
        if let Some(ip) = state.ips.iter_mut().find(|i| i.id == ip_id) {
            ip.static_nat_vm = None;
        }
        super::ip_rules::unassign_from_tier(state, &ip_id);
    }
    state
        .tags
        .retain(|t| !(t.resource_type == "UserVm" && t.resource_id == vm_id));
    true
}

/// Destroys a VM without expunging it (`destroyVirtualMachine` without `expunge`): state
/// Destroyed; mappings, static NAT and NICs stay. False when no such VM exists.
pub fn destroy_vm(state: &mut State, vm_id: &str) -> bool {
    match state.vms.iter_mut().find(|v| v.id == vm_id) {
        Some(vm) => {
            if !vm.is_destroyed() {
                vm.state = "Destroyed".into();
            }
            true
        }
        None => false,
    }
}
