//! Deleting public load-balancer rules: `deleteLoadBalancerRule` and its job (also the
//! job of `deleteLoadBalancer` on a public rule), and the removal of a rule with what
//! CloudStack deletes along with it.

use super::access::{Caller, job_denied};
use super::{Ctx, job_reply, success};
use crate::error::ApiError;
use crate::jobs::JobAction;
use crate::state::State;
use serde_json::Value;

/// deleteLoadBalancerRule: `id` resolved before the job is queued; ownership checked in the
/// job (`DeleteLoadBalancerRuleCmd` has no `@ACL` parameter). An internal rule's id is a row
/// of the same table and is deleted the same way (`deleteLoadBalancerRule(id, true)`).
pub fn delete_load_balancer_rule(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let state = &*ctx.state;
    let rule = super::lookup_lb_rule(ctx.params, state, "id")?;
    let (rule_id, network) = (rule.id.to_owned(), rule.network_id.to_owned());
    let job = ctx.start_job(
        Some(network),
        Some(("FirewallRule", rule_id.clone())),
        JobAction::DeleteLbRule {
            rule_id,
            revoke_related_firewall_rule: true,
        },
    );
    Ok(job_reply(&job))
}

/// Job of deleteLoadBalancerRule (`DeleteLoadBalancerRuleCmd.execute`:
/// `revokeRelatedFirewallRule` then `deleteLoadBalancerRule`): the caller's access (530),
/// then the rule goes with its mappings, policies and the firewall rule `openfirewall`
/// created; applying the revoked rule (`applyLoadBalancerRules`) unassigns a VPC address
/// whose last rule it was from its tier ([`super::ip_rules::unassign_from_tier`]).
///
/// `deleteLoadBalancer` on a public rule deletes it without revoking the related firewall
/// rule first (`revoke_related_firewall_rule` false): `deleteLoadBalancerRule` then finds
/// it (`findByRelatedId`), leaves the rule revoked (state `Deleting`) and fails — 530
/// "Unable to remove load balancer rule <id>".
pub fn finish_delete(
    state: &mut State,
    caller: &Caller,
    rule_id: &str,
    revoke_related_firewall_rule: bool,
) -> Result<Value, ApiError> {
    if state.internal_lb_rule(rule_id).is_some() {
        return super::internal_lb::finish_delete(state, caller, rule_id);
    }
    let Some(rule) = state.lb_rule(rule_id) else {
        return Err(ApiError::param(format!(
            "Unable to find load balancer rule {rule_id}"
        )));
    };
    if !caller.can_access(state, &rule.owner) {
        return Err(job_denied(caller, &format!("load balancer rule {rule_id}")));
    }
    if !revoke_related_firewall_rule && rule.firewall_rule_id.is_some() {
        if let Some(rule) = state.lb_rules.iter_mut().find(|r| r.id == rule_id) {
            rule.state = "Deleting".into();
        }
        return Err(ApiError::new(
            530,
            None,
            format!("Unable to remove load balancer rule {rule_id}"),
        ));
    }
    let ip_id = rule.ip_id.clone();
    remove_rule(state, rule_id);
    super::ip_rules::unassign_from_tier(state, &ip_id);
    Ok(success())
}

/// Removes a rule with its members, policies, tags and `openfirewall` firewall rule. Its
/// address keeps its tier: this is also the undoing of a create whose job failed
/// (`CreateLoadBalancerRuleCmd.execute` → `deleteLoadBalancerRule(id, false)`, which removes
/// the rule without applying anything, so `unassignIPFromVpcNetwork` is not reached).
pub fn remove_rule(state: &mut State, rule_id: &str) {
    let Some(pos) = state.lb_rules.iter().position(|r| r.id == rule_id) else {
        return;
    };
    let rule = state.lb_rules.remove(pos);
    if let Some(fw) = rule.firewall_rule_id {
        state.firewall_rules.retain(|f| f.id != fw);
        state.tags.retain(|t| t.resource_id != fw);
    }
    state.policies.retain(|p| p.rule_id != rule_id);
    state.tags.retain(|t| t.resource_id != rule_id);
    state.cert_bindings.retain(|b| b.rule_id != rule_id);
}
