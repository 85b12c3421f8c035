//! Network ACL lists and items of VPC tiers (API.md §3.14).

use super::ip_rules::check_cidr;
use super::{
    Ctx, create_reply, embedded_tags, job_reply, lookup, lookup_required, resolve, success,
    tags_match,
};
use crate::error::ApiError;
use crate::jobs::JobAction;
use crate::response::list_body;
use crate::state::{AclItem, AclList, Owner, State, new_id};
use serde_json::{Value, json};

/// Owner of an ACL list (its VPC's owner); `None` for the global default lists.
pub fn acl_owner(state: &State, list: &AclList) -> Option<Owner> {
    list.vpc_id
        .as_ref()
        .and_then(|v| state.vpc(v))
        .map(|v| v.owner.clone())
}

fn render_list(state: &State, list: &AclList) -> Value {
    let mut out = json!({"id": list.id, "name": list.name, "description": list.description, "fordisplay": true});
    if let Some(vpc) = list.vpc_id.as_ref().and_then(|v| state.vpc(v)) {
        out["vpcid"] = json!(vpc.id);
        out["vpcname"] = json!(vpc.name);
    }
    out
}

/// listNetworkACLLists.
pub fn list_network_acl_lists(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let page = ctx.page()?;
    let scope = ctx.scope()?;
    let p = ctx.params;
    let state = &*ctx.state;
    let id = resolve(p, "id", |i| state.acl_list(i).is_some())?;
    let vpc = resolve(p, "vpcid", |i| state.vpc(i).is_some())?;
    let network = lookup(p, "networkid", |n| state.network(n))?;
    let items = state
        .acl_lists
        .iter()
        .filter(|l| acl_owner(state, l).is_none_or(|o| scope.matches(&o)))
        .filter(|l| id.is_none_or(|i| i == l.id))
        .filter(|l| vpc.is_none_or(|v| l.vpc_id.as_deref() == Some(v) || l.vpc_id.is_none()))
        .filter(|l| network.is_none_or(|n| n.acl_id.as_deref() == Some(&l.id)))
        .filter(|l| p.text("name").is_none_or(|n| n == l.name))
        .map(|l| render_list(state, l))
        .collect();
    Ok(list_body("networkacllist", items, page))
}

/// The `networkacl` object.
pub fn render_item(state: &State, item: &AclItem) -> Value {
    let mut out = json!({
        "id": item.id, "aclid": item.acl_id,
        "aclname": state.acl_list(&item.acl_id).map(|l| l.name.clone()).unwrap_or_default(),
        "number": item.number, "protocol": item.protocol, "cidrlist": item.cidrs.join(","),
        "traffictype": item.traffic_type, "action": item.action, "state": item.state, "fordisplay": true,
        "tags": embedded_tags(state, "NetworkACL", &item.id),
    });
    for (key, value) in [("startport", item.start_port), ("endport", item.end_port)] {
        if let Some(v) = value {
            out[key] = json!(v.to_string());
        }
    }
    for (key, value) in [("icmptype", item.icmp_type), ("icmpcode", item.icmp_code)] {
        if let Some(v) = value {
            out[key] = json!(v);
        }
    }
    if let Some(reason) = &item.reason {
        out["reason"] = json!(reason);
    }
    out
}

/// listNetworkACLs, newest first (`NetworkACLServiceImpl.listNetworkACLItems` sorts by
/// `id` descending, not by `number`).
pub fn list_network_acls(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let page = ctx.page()?;
    let scope = ctx.scope()?;
    let p = ctx.params;
    let state = &*ctx.state;
    let id = resolve(p, "id", |i| state.acl_items.iter().any(|x| x.id == i))?;
    let acl = resolve(p, "aclid", |i| state.acl_list(i).is_some())?;
    let network = lookup(p, "networkid", |n| state.network(n))?;
    let mut items = Vec::new();
    for item in state.acl_items.iter().rev() {
        let owner = state
            .acl_list(&item.acl_id)
            .and_then(|l| acl_owner(state, l));
        // NetworkACLServiceImpl.listNetworkACLItems: with `aclid` the caller's access to the
        // list's VPC is checked and the items are not filtered by account.
        let keep = owner.is_some_and(|o| {
            scope.matches(&o) || acl.is_some() && ctx.caller.can_access(state, &o)
        }) && id.is_none_or(|i| i == item.id)
            && acl.is_none_or(|a| a == item.acl_id)
            && network.is_none_or(|n| n.acl_id.as_deref() == Some(&item.acl_id))
            && p.text("traffictype")
                .is_none_or(|t| t.eq_ignore_ascii_case(&item.traffic_type))
            && p.text("action")
                .is_none_or(|a| a.eq_ignore_ascii_case(&item.action))
            && p.text("protocol")
                .is_none_or(|x| x.eq_ignore_ascii_case(&item.protocol))
            && tags_match(state, p, "NetworkACL", &item.id)?;
        if keep {
            items.push(render_item(state, item));
        }
    }
    Ok(list_body("networkacl", items, page))
}

fn capitalised(text: &str) -> String {
    let lower = text.to_lowercase();
    let mut chars = lower.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// createNetworkACL.
pub fn create_network_acl(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let p = ctx.params;
    let state = &*ctx.state;
    let mut protocol = p.required("protocol")?.trim().to_lowercase();
    if protocol == "1" {
        protocol = "icmp".into();
    }
    if !["tcp", "udp", "icmp", "all"].contains(&protocol.as_str())
        && protocol.parse::<u8>().is_err()
    {
        return Err(ApiError::param(format!("Invalid protocol: {protocol}")));
    }
    let list = match (
        lookup(p, "aclid", |a| state.acl_list(a))?,
        lookup(p, "networkid", |n| state.network(n))?,
    ) {
        (Some(l), _) => l,
        (None, Some(n)) => n
            .acl_id
            .as_ref()
            .and_then(|a| state.acl_list(a))
            .ok_or_else(|| {
                ApiError::param(format!(
                    "Network {} is not a VPC tier with a network ACL list",
                    n.id
                ))
            })?,
        (None, None) => return Err(ApiError::param("Please specify either aclId or networkId")),
    };
    let Some(owner) = acl_owner(state, list) else {
        return Err(ApiError::param("Default ACL cannot be modified"));
    };
    ctx.caller
        .check(state, &owner, &format!("network ACL list {}", list.id))?;
    let traffic = capitalised(p.text("traffictype").unwrap_or("ingress"));
    if !["Ingress", "Egress"].contains(&traffic.as_str()) {
        return Err(ApiError::param(format!(
            "Invalid traffic type {}",
            p.text("traffictype").unwrap_or_default()
        )));
    }
    let action = capitalised(p.text("action").unwrap_or("allow"));
    if !["Allow", "Deny"].contains(&action.as_str()) {
        return Err(ApiError::param(format!(
            "Invalid action {}",
            p.text("action").unwrap_or_default()
        )));
    }
    let cidrs = p
        .list("cidrlist")
        .unwrap_or_else(|| vec!["0.0.0.0/0".into()]);
    if let Some(bad) = cidrs.iter().find(|c| !check_cidr(c)) {
        return Err(ApiError::param(format!(
            "Source CIDRs formatting error {bad}"
        )));
    }
    let start = p.int("startport")?;
    let end = p.int("endport")?.or(start);
    if let (Some(s), Some(e)) = (start, end)
        && (s > e || !(0..=65535).contains(&s) || !(0..=65535).contains(&e))
    {
        return Err(ApiError::param(format!("Invalid port range {s}-{e}")));
    }
    let existing = state.acl_items.iter().filter(|i| i.acl_id == list.id);
    let number = match p.int("number")? {
        Some(n)
            if state
                .acl_items
                .iter()
                .any(|i| i.acl_id == list.id && i.number == n) =>
        {
            return Err(ApiError::param(format!(
                "ACL item with number {n} already exists in ACL: {}",
                list.id
            )));
        }
        Some(n) => n,
        None => existing.map(|i| i.number).max().unwrap_or(0) + 1,
    };
    let item = AclItem {
        id: new_id(),
        acl_id: list.id.clone(),
        number,
        protocol,
        start_port: start,
        end_port: end,
        cidrs,
        traffic_type: traffic,
        action,
        icmp_type: p.int("icmptype")?,
        icmp_code: p.int("icmpcode")?,
        reason: p.text("reason").map(str::to_owned),
        state: "Add".into(),
    };
    let (item_id, queue) = (item.id.clone(), list.vpc_id.clone());
    ctx.state.acl_items.push(item);
    let job = ctx.start_job(
        queue,
        Some(("NetworkAcl", item_id.clone())),
        JobAction::CreateNetworkAcl {
            item_id: item_id.clone(),
        },
    );
    Ok(create_reply(&item_id, &job))
}

/// Job: the item is applied.
pub fn finish_create(state: &mut State, item_id: &str) -> Result<Value, ApiError> {
    let item = state
        .acl_items
        .iter_mut()
        .find(|i| i.id == item_id)
        .ok_or_else(|| ApiError::internal("ACL item vanished"))?;
    item.state = "Active".into();
    let item = item.clone();
    Ok(json!({"networkacl": render_item(state, &item)}))
}

/// deleteNetworkACL.
pub fn delete_network_acl(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let state = &*ctx.state;
    let item = lookup_required(ctx.params, "id", |id| {
        state.acl_items.iter().find(|i| i.id == id)
    })?;
    let list = state
        .acl_list(&item.acl_id)
        .ok_or_else(|| ApiError::internal("ACL list vanished"))?;
    let owner =
        acl_owner(state, list).ok_or_else(|| ApiError::param("Default ACL cannot be modified"))?;
    ctx.caller
        .check(state, &owner, &format!("network ACL item {}", item.id))?;
    let (item_id, queue) = (item.id.clone(), list.vpc_id.clone());
    let job = ctx.start_job(
        queue,
        Some(("NetworkAcl", item_id.clone())),
        JobAction::DeleteNetworkAcl { item_id },
    );
    Ok(job_reply(&job))
}

/// Job: remove the item.
pub fn finish_delete(state: &mut State, item_id: &str) -> Result<Value, ApiError> {
    state.acl_items.retain(|i| i.id != item_id);
    state.tags.retain(|t| t.resource_id != item_id);
    Ok(success())
}
