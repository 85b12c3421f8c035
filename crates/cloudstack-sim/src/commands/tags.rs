//! Resource tags: createTags, deleteTags, listTags (API.md §3.15).

use super::access::{Caller, owner_fields};
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
    "PortForwardingRule",
    "NetworkACL",
    "StaticRoute",
    "Project",
];

/// The canonical resource type name, matched case-insensitively
/// (`TaggedResourceManagerImpl.getResourceType`: "Invalid resource type …").
fn resource_type_named(text: &str) -> Result<&'static str, ApiError> {
    TYPES
        .iter()
        .find(|t| t.eq_ignore_ascii_case(text))
        .copied()
        .ok_or_else(|| ApiError::param(format!("Invalid resource type {text}")))
}

/// Owner of a taggable resource, if it exists.
fn resource_owner(state: &State, kind: &str, id: &str) -> Option<Owner> {
    match kind {
        "UserVm" => state.vm(id).map(|v| v.owner.clone()),
        "Network" => state.network(id).map(|n| n.owner.clone()),
        "Vpc" => state.vpc(id).map(|v| v.owner.clone()),
        // `ResourceObjectType.LoadBalancer` is `LoadBalancerVO`, the `load_balancing_rules`
        // table: internal rules too.
        "LoadBalancer" => state.any_lb_rule(id).map(|r| r.owner.clone()),
        "PublicIpAddress" => state.ip(id).and_then(|i| i.owner.clone()),
        // Routing firewall rules live in the firewall-rule table too.
        "FirewallRule" => state
            .firewall_rules
            .iter()
            .find(|r| r.id == id)
            .map(|r| r.owner.clone())
            .or_else(|| {
                state
                    .routing_firewall_rules
                    .iter()
                    .find(|r| r.id == id)
                    .map(|r| r.owner.clone())
            }),
        "PortForwardingRule" => state
            .pf_rules
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

/// The required `resourceids` and `resourcetype` as sent. `CreateTagsCmd`/`DeleteTagsCmd`
/// take both as plain strings, so nothing about them is checked before the job.
fn resources(ctx: &Ctx<'_>) -> Result<(String, Vec<String>), ApiError> {
    let p = ctx.params;
    let ids = p
        .list("resourceids")
        .ok_or_else(|| ApiError::missing(&p.command, "resourceids"))?;
    let kind = p.required("resourcetype")?;
    Ok((kind.to_owned(), ids))
}

/// createTags: only the required parameters are checked before the job is queued.
pub fn create_tags(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let (resource_type, resource_ids) = resources(ctx)?;
    let map = ctx.params.map("tags")?;
    if map.is_empty() {
        return Err(ApiError::missing(&ctx.params.command, "tags"));
    }
    let tags = map
        .values()
        .filter_map(|pair| {
            pair.get("key")
                .map(|k| (k.clone(), pair.get("value").cloned().unwrap_or_default()))
        })
        .collect();
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

/// Job of createTags (`TaggedResourceManagerImpl.createTags`, all or nothing): the resource
/// type must be one of `ResourceObjectType` (431 "Invalid resource type …"), every resource
/// must exist (431 "Unable to find resource by uuid … and type …") and be the caller's
/// (`checkResourceAccessible`, a `PermissionDeniedException`: 530), every value non-empty
/// (431); a key already on a resource breaks the unique key of `resource_tags` (530 "tag K
/// already on <Type> with id <id>").
pub fn finish_create(
    state: &mut State,
    caller: &Caller,
    resource_type: &str,
    resource_ids: &[String],
    tags: &[(String, String)],
    customer: &Option<String>,
) -> Result<Value, ApiError> {
    let kind = resource_type_named(resource_type)?;
    let mut added = Vec::new();
    for (key, value) in tags {
        for id in resource_ids {
            let owner = resource_owner(state, kind, id).ok_or_else(|| {
                ApiError::param(format!(
                    "Unable to find resource by uuid {id} and type {kind}"
                ))
            })?;
            if !caller.can_access(state, &owner) {
                return Err(ApiError::new(
                    530,
                    None,
                    format!(
                        "Account '{}' doesn't have permissions to create tags for resource '{id}({key})'.",
                        caller.account
                    ),
                ));
            }
            if value.is_empty() {
                return Err(ApiError::param(format!(
                    "Value for the key {key} is either null or empty"
                )));
            }
            let duplicate = state
                .tags
                .iter()
                .chain(&added)
                .any(|t| &t.resource_id == id && t.resource_type == kind && &t.key == key);
            if duplicate {
                // `createTags` turns the unique key's `EntityExistsException` into this
                // `CloudRuntimeException` (530), naming the id as the caller sent it.
                return Err(ApiError::new(
                    530,
                    None,
                    format!("tag {key} already on {kind} with id {id}"),
                ));
            }
            added.push(Tag {
                key: key.clone(),
                value: value.clone(),
                resource_id: id.clone(),
                resource_type: kind.to_owned(),
                customer: customer.clone(),
                owner,
            });
        }
    }
    state.tags.extend(added);
    Ok(success())
}

/// deleteTags: only the required parameters are checked before the job is queued.
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

/// Job of deleteTags (`TaggedResourceManagerImpl.deleteTags`): the tags of the resources
/// whose key (and value, when given) match case-insensitively — all of them when no pair is
/// given. The caller must own each (530); when nothing matches the job fails with 431
/// "Unable to find any tags which conform to specified delete parameters.".
pub fn finish_delete(
    state: &mut State,
    caller: &Caller,
    resource_type: &str,
    resource_ids: &[String],
    tags: &[(String, Option<String>)],
) -> Result<Value, ApiError> {
    let kind = resource_type_named(resource_type)?;
    let selected = |t: &Tag| {
        t.resource_type == kind
            && resource_ids.contains(&t.resource_id)
            && (tags.is_empty()
                || tags.iter().any(|(k, v)| {
                    k.eq_ignore_ascii_case(&t.key)
                        && v.as_ref().is_none_or(|v| v.eq_ignore_ascii_case(&t.value))
                }))
    };
    if let Some(t) = state
        .tags
        .iter()
        .find(|t| selected(t) && !caller.can_access(state, &t.owner))
    {
        return Err(super::access::job_denied(
            caller,
            &format!("{kind} {}", t.resource_id),
        ));
    }
    if !state.tags.iter().any(&selected) {
        return Err(ApiError::param(
            "Unable to find any tags which conform to specified delete parameters.",
        ));
    }
    state.tags.retain(|t| !selected(t));
    Ok(success())
}

/// listTags.
pub fn list_tags(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let page = ctx.page()?;
    let scope = ctx.scope()?;
    let p = ctx.params;
    let state = &*ctx.state;
    let kind = p
        .text("resourcetype")
        .map(resource_type_named)
        .transpose()?;
    let items = state
        .tags
        .iter()
        .filter(|t| scope.matches(&t.owner))
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
