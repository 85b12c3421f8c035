//! Resource tags: createTags, deleteTags, listTags (API.md §3.15).

use super::access::owner_fields;
use super::acl::acl_owner;
use super::{Ctx, job_reply, success};
use crate::error::ApiError;
use crate::jobs::JobAction;
use crate::response::list_body;
use crate::state::{Owner, State, Tag};
use serde_json::{Map, Value, json};

const TYPES: &[&str] = &[
    "UserVm",
    "Network",
    "Vpc",
    "LoadBalancer",
    "PublicIpAddress",
    "FirewallRule",
    "NetworkACL",
    "StaticRoute",
    "Project",
];

/// The canonical resource type name (matched case-insensitively like the server).
fn resource_type(text: &str) -> Result<&'static str, ApiError> {
    TYPES
        .iter()
        .find(|t| t.eq_ignore_ascii_case(text))
        .copied()
        .ok_or_else(|| ApiError::param(format!("Invalid resource type: {text}")))
}

/// Owner of a taggable resource, if it exists.
fn resource_owner(state: &State, kind: &str, id: &str) -> Option<Owner> {
    match kind {
        "UserVm" => state.vm(id).map(|v| v.owner.clone()),
        "Network" => state.network(id).map(|n| n.owner.clone()),
        "Vpc" => state.vpc(id).map(|v| v.owner.clone()),
        "LoadBalancer" => state.lb_rule(id).map(|r| r.owner.clone()),
        "PublicIpAddress" => state.ip(id).and_then(|i| i.owner.clone()),
        "FirewallRule" => state
            .firewall_rules
            .iter()
            .find(|r| r.id == id)
            .map(|r| r.owner.clone()),
        "NetworkACL" => state
            .acl_items
            .iter()
            .find(|i| i.id == id)
            .and_then(|i| state.acl_list(&i.acl_id))
            .and_then(|l| acl_owner(state, l)),
        "StaticRoute" => state.static_route(id).map(|r| r.owner.clone()),
        "Project" => state.project(id).map(|p| Owner::Project(p.id.clone())),
        _ => None,
    }
}

/// The `tag` object.
pub fn render_tag(state: &State, tag: &Tag) -> Value {
    let mut out = Map::new();
    out.insert("key".into(), json!(tag.key));
    out.insert("value".into(), json!(tag.value));
    out.insert("resourceid".into(), json!(tag.resource_id));
    out.insert("resourcetype".into(), json!(tag.resource_type));
    if let Some(c) = &tag.customer {
        out.insert("customer".into(), json!(c));
    }
    owner_fields(state, &tag.owner, &mut out);
    Value::Object(out)
}

/// Checks `resourceids` + `resourcetype` and returns them.
fn resources(ctx: &Ctx<'_>) -> Result<(String, Vec<String>), ApiError> {
    let p = ctx.params;
    let ids = p
        .list("resourceids")
        .ok_or_else(|| ApiError::missing(&p.command, "resourceids"))?;
    let kind = resource_type(p.required("resourcetype")?)?;
    for id in &ids {
        let owner = resource_owner(ctx.state, kind, id).ok_or_else(|| {
            ApiError::param(format!(
                "Unable to find resource by id {id} and type {kind}"
            ))
        })?;
        ctx.caller
            .check(ctx.state, &owner, &format!("{kind} {id}"))?;
    }
    Ok((kind.to_owned(), ids))
}

/// createTags.
pub fn create_tags(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let (resource_type, resource_ids) = resources(ctx)?;
    let map = ctx.params.map("tags")?;
    if map.is_empty() {
        return Err(ApiError::missing(&ctx.params.command, "tags"));
    }
    let mut tags = Vec::new();
    for pair in map.values() {
        let key = pair
            .get("key")
            .filter(|k| !k.is_empty())
            .ok_or_else(|| ApiError::param("Tag key can't be empty"))?;
        tags.push((key.clone(), pair.get("value").cloned().unwrap_or_default()));
    }
    let customer = ctx.params.text("customer").map(str::to_owned);
    let job = ctx.start_job(
        None,
        None,
        JobAction::CreateTags {
            resource_type,
            resource_ids,
            tags,
            customer,
        },
    );
    Ok(job_reply(&job))
}

/// Job: add the tags (a key already on a resource fails the job).
pub fn finish_create(
    state: &mut State,
    resource_type: &str,
    resource_ids: &[String],
    tags: &[(String, String)],
    customer: &Option<String>,
) -> Result<Value, ApiError> {
    let mut added = Vec::new();
    for id in resource_ids {
        let owner = resource_owner(state, resource_type, id).ok_or_else(|| {
            ApiError::param(format!(
                "Unable to find resource by id {id} and type {resource_type}"
            ))
        })?;
        for (key, value) in tags {
            if state
                .tags
                .iter()
                .any(|t| &t.resource_id == id && &t.key == key)
            {
                return Err(ApiError::param(format!(
                    "tag {key} already on {resource_type} with id {id}"
                )));
            }
            added.push(Tag {
                key: key.clone(),
                value: value.clone(),
                resource_id: id.clone(),
                resource_type: resource_type.to_owned(),
                customer: customer.clone(),
                owner: owner.clone(),
            });
        }
    }
    state.tags.extend(added);
    Ok(success())
}

/// deleteTags.
pub fn delete_tags(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let (resource_type, resource_ids) = resources(ctx)?;
    let tags = ctx
        .params
        .map("tags")?
        .values()
        .filter_map(|pair| {
            pair.get("key")
                .map(|k| (k.clone(), pair.get("value").cloned()))
        })
        .collect();
    let job = ctx.start_job(
        None,
        None,
        JobAction::DeleteTags {
            resource_type,
            resource_ids,
            tags,
        },
    );
    Ok(job_reply(&job))
}

/// Job: remove matching tags (all of the resources' tags when no pair is given).
pub fn finish_delete(
    state: &mut State,
    resource_type: &str,
    resource_ids: &[String],
    tags: &[(String, Option<String>)],
) -> Result<Value, ApiError> {
    state.tags.retain(|t| {
        let on_resource = t.resource_type == resource_type && resource_ids.contains(&t.resource_id);
        let selected = tags.is_empty()
            || tags
                .iter()
                .any(|(k, v)| k == &t.key && v.as_ref().is_none_or(|v| v == &t.value));
        !(on_resource && selected)
    });
    Ok(success())
}

/// listTags.
pub fn list_tags(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let page = ctx.page()?;
    let scope = ctx.scope()?;
    let p = ctx.params;
    let state = &*ctx.state;
    let kind = p.text("resourcetype").map(resource_type).transpose()?;
    let items = state
        .tags
        .iter()
        .filter(|t| {
            scope.matches(&t.owner)
                || p.text("resourceid").is_some() && ctx.caller.can_access(state, &t.owner)
        })
        .filter(|t| kind.is_none_or(|k| k == t.resource_type))
        .filter(|t| p.text("resourceid").is_none_or(|r| r == t.resource_id))
        .filter(|t| p.text("key").is_none_or(|k| k == t.key))
        .filter(|t| p.text("value").is_none_or(|v| v == t.value))
        .filter(|t| {
            p.text("customer")
                .is_none_or(|c| t.customer.as_deref() == Some(c))
        })
        .map(|t| render_tag(state, t))
        .collect();
    Ok(list_body("tag", items, page))
}
