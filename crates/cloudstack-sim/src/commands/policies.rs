//! LB health-check and stickiness policies, where the network's provider supports them
//! (API.md §3.18: the Virtual Router has no health checks).

use super::infra::{health_check_policy, stickiness_methods};
use super::{Ctx, create_reply, job_reply, lookup, lookup_required, success};
use crate::error::ApiError;
use crate::jobs::JobAction;
use crate::response::{Page, list_body};
use crate::scenario::LbProvider;
use crate::state::{LbPolicy, LbRule, PolicyKind, State, new_id};
use serde_json::{Value, json};
use std::collections::BTreeMap;

fn provider(state: &State, rule: &LbRule) -> LbProvider {
    state
        .network(&rule.network_id)
        .map(|n| n.lb_provider)
        .unwrap_or_default()
}

fn render_policy(p: &LbPolicy) -> Value {
    match p.kind {
        PolicyKind::HealthCheck => json!({
            "id": p.id, "pingpath": p.ping_path.clone().unwrap_or_default(),
            "description": p.description.clone().unwrap_or_default(), "state": p.state,
            "responsetime": p.values.get("responsetimeout").and_then(|v| v.parse::<i64>().ok()).unwrap_or(2),
            "healthcheckinterval": p.values.get("intervaltime").and_then(|v| v.parse::<i64>().ok()).unwrap_or(5),
            "healthcheckthresshold": p.values.get("healthythreshold").and_then(|v| v.parse::<i64>().ok()).unwrap_or(2),
            "unhealthcheckthresshold": p.values.get("unhealthythreshold").and_then(|v| v.parse::<i64>().ok()).unwrap_or(1),
            "fordisplay": true,
        }),
        PolicyKind::Stickiness => json!({
            "id": p.id, "name": p.name, "methodname": p.method, "params": p.values,
            "description": p.description.clone().unwrap_or_default(), "state": p.state, "fordisplay": true,
        }),
    }
}

/// The per-rule wrapper object (`healthcheckpolicies` / `stickinesspolicies` items).
fn render_wrapper(state: &State, rule: &LbRule, kind: PolicyKind) -> Value {
    let policies: Vec<Value> = state
        .policies
        .iter()
        .filter(|p| p.rule_id == rule.id && p.kind == kind)
        .map(render_policy)
        .collect();
    let mut out = json!({"lbruleid": rule.id, "zoneid": state.ip(&rule.ip_id).map(|i| i.zone_id.clone()).unwrap_or_default()});
    let mut owner = serde_json::Map::new();
    super::access::owner_fields(state, &rule.owner, &mut owner);
    for (k, v) in owner {
        out[k] = v;
    }
    let key = if kind == PolicyKind::HealthCheck {
        "healthcheckpolicy"
    } else {
        "stickinesspolicy"
    };
    out[key] = Value::Array(policies);
    out
}

fn list_policies(ctx: &mut Ctx<'_>, kind: PolicyKind, item_key: &str) -> Result<Value, ApiError> {
    let p = ctx.params;
    let state = &*ctx.state;
    let by_policy = lookup(p, "id", |id| {
        state.policies.iter().find(|x| x.id == id && x.kind == kind)
    })?;
    let rule = match by_policy {
        Some(policy) => state
            .lb_rule(&policy.rule_id)
            .ok_or_else(|| ApiError::internal("Load balancer rule vanished"))?,
        None => lookup_required(p, "lbruleid", |id| state.lb_rule(id))?,
    };
    ctx.caller.check(
        state,
        &rule.owner,
        &format!("load balancer rule {}", rule.id),
    )?;
    let has_any = state
        .policies
        .iter()
        .any(|x| x.rule_id == rule.id && x.kind == kind);
    let items = if has_any {
        vec![render_wrapper(state, rule, kind)]
    } else {
        vec![]
    };
    Ok(list_body(item_key, items, Page::all()))
}

/// listLBHealthCheckPolicies.
pub fn list_health_check_policies(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    list_policies(ctx, PolicyKind::HealthCheck, "healthcheckpolicies")
}

/// listLBStickinessPolicies.
pub fn list_stickiness_policies(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    list_policies(ctx, PolicyKind::Stickiness, "stickinesspolicies")
}

fn in_range(
    ctx: &Ctx<'_>,
    name: &str,
    min: i64,
    max: i64,
    values: &mut BTreeMap<String, String>,
) -> Result<(), ApiError> {
    if let Some(v) = ctx.params.int(name)? {
        if !(min..=max).contains(&v) {
            return Err(ApiError::new(
                430,
                Some(4350),
                format!(
                    "Failed to create HealthCheck policy: {name} must be between {min} and {max}"
                ),
            ));
        }
        values.insert(name.to_owned(), v.to_string());
    }
    Ok(())
}

/// createLBHealthCheckPolicy. `LoadBalancingRulesManagerImpl.createLBHealthCheckPolicy`:
/// `validateHealthCheck` finds no `HealthCheckPolicy` capability on the Virtual Router, NSX
/// or Netris ([`health_check_policy`]) → "Failed to create HealthCheck policy: Validation
/// Failed (HealthCheck Policy is not supported by LB Provider for the LB rule id :<id>)".
pub fn create_health_check_policy(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let state = &*ctx.state;
    let rule = lookup_required(ctx.params, "lbruleid", |id| state.lb_rule(id))?.clone();
    ctx.caller.check(
        state,
        &rule.owner,
        &format!("load balancer rule {}", rule.id),
    )?;
    if !health_check_policy(provider(state, &rule)) {
        return Err(ApiError::new(
            430,
            Some(4350),
            format!(
                "Failed to create HealthCheck policy: Validation Failed (HealthCheck Policy is not supported by LB Provider for the LB rule id :{})",
                rule.id
            ),
        ));
    }
    if state
        .policies
        .iter()
        .any(|p| p.rule_id == rule.id && p.kind == PolicyKind::HealthCheck)
    {
        return Err(ApiError::param(
            "Failed to create HealthCheck policy: Already applied a healthcheck policy to the LB rule",
        ));
    }
    let mut values = BTreeMap::new();
    in_range(ctx, "responsetimeout", 2, 60, &mut values)?;
    in_range(ctx, "intervaltime", 1, 20940, &mut values)?;
    in_range(ctx, "healthythreshold", 1, 10, &mut values)?;
    in_range(ctx, "unhealthythreshold", 1, 10, &mut values)?;
    let policy = LbPolicy {
        id: new_id(),
        rule_id: rule.id.clone(),
        kind: PolicyKind::HealthCheck,
        name: None,
        method: None,
        ping_path: Some(ctx.params.text("pingpath").unwrap_or("/").to_owned()),
        values,
        description: ctx.params.text("description").map(str::to_owned),
        state: "Add".into(),
    };
    start_create(ctx, &rule, policy)
}

/// createLBStickinessPolicy: the method must be one the provider advertises
/// (`genericValidator`, [`stickiness_methods`]); NSX and Netris advertise the HAProxy list,
/// so a policy there is stored and applied to nothing.
pub fn create_stickiness_policy(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let p = ctx.params;
    let state = &*ctx.state;
    let rule = lookup_required(p, "lbruleid", |id| state.lb_rule(id))?.clone();
    let name = p.required("name")?.to_owned();
    let method = p.required("methodname")?.to_owned();
    ctx.caller.check(
        state,
        &rule.owner,
        &format!("load balancer rule {}", rule.id),
    )?;
    let Some(method) = stickiness_methods(provider(state, &rule))
        .iter()
        .find(|m| m.eq_ignore_ascii_case(&method))
    else {
        return Err(ApiError::param(format!(
            "Failed to create Stickiness policy: Validation Failed (Stickiness method {method} is not supported by the LB provider)"
        )));
    };
    if state
        .policies
        .iter()
        .any(|x| x.rule_id == rule.id && x.kind == PolicyKind::Stickiness)
    {
        return Err(ApiError::param(
            "Failed to create Stickiness policy: Already applied a stickiness policy to the LB rule",
        ));
    }
    let values = p
        .map("param")?
        .values()
        .filter_map(|e| {
            Some((
                e.get("name")?.clone(),
                e.get("value").cloned().unwrap_or_default(),
            ))
        })
        .collect();
    let policy = LbPolicy {
        id: new_id(),
        rule_id: rule.id.clone(),
        kind: PolicyKind::Stickiness,
        name: Some(name),
        method: Some((*method).to_owned()),
        ping_path: None,
        values,
        description: p.text("description").map(str::to_owned),
        state: "Add".into(),
    };
    start_create(ctx, &rule, policy)
}

fn start_create(ctx: &mut Ctx<'_>, rule: &LbRule, policy: LbPolicy) -> Result<Value, ApiError> {
    let policy_id = policy.id.clone();
    ctx.state.policies.push(policy);
    let job = ctx.start_job(
        Some(rule.network_id.clone()),
        Some(("LoadBalancer", rule.id.clone())),
        JobAction::CreatePolicy {
            policy_id: policy_id.clone(),
        },
    );
    Ok(create_reply(&policy_id, &job))
}

/// Job: the policy is applied with its rule (`applyLBStickinessPolicy` /
/// `applyLBHealthCheckPolicy` set the rule to `Add` and call `applyLoadBalancerConfig`, see
/// [`super::lb::apply_rule`]).
pub fn finish_create(state: &mut State, policy_id: &str) -> Result<Value, ApiError> {
    let policy = state
        .policies
        .iter_mut()
        .find(|p| p.id == policy_id)
        .ok_or_else(|| ApiError::internal("Policy vanished"))?;
    policy.state = "Active".into();
    let policy = policy.clone();
    super::lb::apply_rule(state, &policy.rule_id);
    let rule = state
        .lb_rule(&policy.rule_id)
        .cloned()
        .ok_or_else(|| ApiError::internal("Load balancer rule vanished"))?;
    let key = if policy.kind == PolicyKind::HealthCheck {
        "healthcheckpolicies"
    } else {
        "stickinesspolicies"
    };
    Ok(json!({ key: render_wrapper(state, &rule, policy.kind) }))
}

/// deleteLBHealthCheckPolicy and deleteLBStickinessPolicy.
pub fn delete_policy(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let state = &*ctx.state;
    let kind = if ctx.params.command.contains("HealthCheck") {
        PolicyKind::HealthCheck
    } else {
        PolicyKind::Stickiness
    };
    let policy = lookup_required(ctx.params, "id", |id| {
        state.policies.iter().find(|p| p.id == id && p.kind == kind)
    })?;
    let rule = state
        .lb_rule(&policy.rule_id)
        .ok_or_else(|| ApiError::internal("Load balancer rule vanished"))?;
    ctx.caller.check(
        state,
        &rule.owner,
        &format!("load balancer rule {}", rule.id),
    )?;
    let (policy_id, network) = (policy.id.clone(), rule.network_id.clone());
    let job = ctx.start_job(
        Some(network),
        Some(("LoadBalancer", rule.id.clone())),
        JobAction::DeletePolicy { policy_id },
    );
    Ok(job_reply(&job))
}

/// Job: remove the policy and apply its rule (`deleteLBStickinessPolicy` /
/// `deleteLBHealthCheckPolicy` with `apply`: `applyLoadBalancerConfig`, see
/// [`super::lb::apply_rule`]).
pub fn finish_delete(state: &mut State, policy_id: &str) -> Result<Value, ApiError> {
    let rule_id = state
        .policies
        .iter()
        .find(|p| p.id == policy_id)
        .map(|p| p.rule_id.clone());
    state.policies.retain(|p| p.id != policy_id);
    if let Some(rule_id) = rule_id {
        super::lb::apply_rule(state, &rule_id);
    }
    Ok(success())
}
