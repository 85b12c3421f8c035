//! The API commands: a registry (name → handler), the per-call context, and shared filters.

pub mod access;
mod accounts;
mod acl;
mod firewall;
mod infra;
mod internal_lb;
mod ip_rules;
mod ips;
mod jobs_cmd;
mod lb;
mod lb_delete;
mod lb_members;
#[cfg(test)]
mod network_kind_tests;
mod policies;
mod port_forwarding;
mod routes;
mod routing_firewall;
mod ssl_certs;
mod tags;
mod vm_lifecycle;
mod vms;

pub use vm_lifecycle::{destroy_vm, expunge_vm};

use crate::error::ApiError;
use crate::jobs::{JobAction, NewJob};
use crate::params::Params;
use crate::response::Page;
use crate::scenario::Role;
use crate::state::State;
use access::{Caller, Scope};
use serde_json::{Value, json};

/// Fault plan applied to the jobs a call starts.
#[derive(Clone, Debug, Default)]
pub struct JobFaults {
    /// Probability that a job fails with 530.
    pub failure_rate: f64,
    /// Probability that a job never finishes.
    pub never_finish_rate: f64,
    /// Networks (ids or names) on which every job hangs.
    pub hung_networks: Vec<String>,
}

/// Everything a command handler needs.
pub struct Ctx<'a> {
    /// The cloud.
    pub state: &'a mut State,
    /// Who calls.
    pub caller: Caller,
    /// The request parameters.
    pub params: &'a Params,
    /// Job faults to apply.
    pub job_faults: JobFaults,
    /// Jobs started by this call (the server starts their runners).
    pub new_jobs: Vec<String>,
}

impl Ctx<'_> {
    /// The requested page, validated.
    pub fn page(&self) -> Result<Page, ApiError> {
        Page::from_params(self.params, self.state.settings.max_page_size)
    }

    /// The list scope of this call.
    pub fn scope(&self) -> Result<Scope, ApiError> {
        Scope::of(self.state, &self.caller, self.params)
    }

    /// Queues a job (behind others on `network_id`) and returns its id.
    pub fn start_job(
        &mut self,
        network_id: Option<String>,
        instance: Option<(&'static str, String)>,
        action: JobAction,
    ) -> String {
        self.start_job_with(network_id, instance, action, None)
    }

    /// Like [`Ctx::start_job`]; a `failure` makes the job fail with that error when it runs.
    pub fn start_job_with(
        &mut self,
        network_id: Option<String>,
        instance: Option<(&'static str, String)>,
        action: JobAction,
        failure: Option<ApiError>,
    ) -> String {
        let hung = network_id.as_ref().is_some_and(|id| {
            let name = self.state.network(id).map(|n| n.name.as_str());
            self.job_faults
                .hung_networks
                .iter()
                .any(|h| h == id || Some(h.as_str()) == name)
        });
        let never = hung || rand::random::<f64>() < self.job_faults.never_finish_rate;
        let failure = failure.or_else(|| {
            (rand::random::<f64>() < self.job_faults.failure_rate).then(|| {
                ApiError::internal(format!("Simulated failure of job {}", self.params.command))
            })
        });
        let (instance_type, instance_id) = match instance {
            Some((t, id)) => (Some(t), Some(id)),
            None => (None, None),
        };
        let id = self.state.enqueue_job(
            NewJob {
                command: self.params.command.clone(),
                account: self.caller.account.clone(),
                network_id,
                instance_type,
                instance_id,
                action,
            },
            never,
            failure,
        );
        self.new_jobs.push(id.clone());
        id
    }
}

/// A command handler.
pub type Handler = fn(&mut Ctx<'_>) -> Result<Value, ApiError>;

/// A supported API command.
pub struct Command {
    /// API name (case-sensitive).
    pub name: &'static str,
    /// Handler.
    pub run: Handler,
    /// Async (returns a job id).
    pub is_async: bool,
    /// First version with the command (older versions do not have it: 401, as for any
    /// unknown command); `listApis` shows it as `since` (`"4.17.0"`).
    pub since: Option<(u32, u32)>,
    /// Annotated for root admins only: the default User role has no row for it, so users
    /// get the 432 of [`crate::roles::refusal`].
    pub admin_only: bool,
    /// The role types its `@APICommand(authorized = …)` lists: a custom role with no rule
    /// matching the command may call it only when its type is listed
    /// (`DynamicRoleBasedAPIAccessChecker.checkApiPermissionByRole`). Empty for most
    /// commands, which carry no `authorized` list.
    pub authorized: &'static [Role],
}

/// `authorized = {RoleType.Admin, RoleType.ResourceAdmin, RoleType.DomainAdmin,
/// RoleType.User}`: every role type the simulator has.
const ALL_ROLE_TYPES: &[Role] = &[Role::Admin, Role::User];

impl Command {
    /// True when the emulated version has this command.
    pub fn exists_in(&self, version: &crate::version::Version) -> bool {
        self.since
            .is_none_or(|(major, minor)| version.at_least(major, minor))
    }
}

const fn sync(name: &'static str, run: Handler) -> Command {
    Command {
        name,
        run,
        is_async: false,
        since: None,
        admin_only: false,
        authorized: &[],
    }
}

const fn job(name: &'static str, run: Handler) -> Command {
    Command {
        name,
        run,
        is_async: true,
        since: None,
        admin_only: false,
        authorized: &[],
    }
}

/// Every supported command.
pub const COMMANDS: &[Command] = &[
    sync("listVirtualMachines", vms::list_virtual_machines),
    job(
        "destroyVirtualMachine",
        vm_lifecycle::destroy_virtual_machine,
    ),
    job(
        "expungeVirtualMachine",
        vm_lifecycle::expunge_virtual_machine,
    ),
    sync("listZones", infra::list_zones),
    sync("listNetworks", infra::list_networks),
    sync("listProjects", infra::list_projects),
    sync("listCapabilities", infra::list_capabilities),
    // ListApisCmd: `authorized = {Admin, ResourceAdmin, DomainAdmin, User}`.
    Command {
        authorized: ALL_ROLE_TYPES,
        ..sync("listApis", infra::list_apis)
    },
    sync("listAccounts", accounts::list_accounts),
    Command {
        name: "listManagementServersMetrics",
        run: infra::list_management_servers_metrics,
        is_async: false,
        since: Some((4, 17)),
        admin_only: true,
        // ListMgmtsMetricsCmd: `authorized = {RoleType.Admin}`.
        authorized: &[Role::Admin],
    },
    sync("listPublicIpAddresses", ips::list_public_ip_addresses),
    job("associateIpAddress", ips::associate_ip_address),
    job("disassociateIpAddress", ips::disassociate_ip_address),
    sync("listLoadBalancerRules", lb::list_load_balancer_rules),
    job("createLoadBalancer", internal_lb::create_load_balancer),
    sync("listLoadBalancers", internal_lb::list_load_balancers),
    job("deleteLoadBalancer", internal_lb::delete_load_balancer),
    job("createLoadBalancerRule", lb::create_load_balancer_rule),
    job("updateLoadBalancerRule", lb::update_load_balancer_rule),
    job(
        "deleteLoadBalancerRule",
        lb_delete::delete_load_balancer_rule,
    ),
    job(
        "assignToLoadBalancerRule",
        lb_members::assign_to_load_balancer_rule,
    ),
    job(
        "removeFromLoadBalancerRule",
        lb_members::remove_from_load_balancer_rule,
    ),
    sync(
        "listLoadBalancerRuleInstances",
        lb_members::list_load_balancer_rule_instances,
    ),
    sync("listFirewallRules", firewall::list_firewall_rules),
    job("createFirewallRule", firewall::create_firewall_rule),
    job("deleteFirewallRule", firewall::delete_firewall_rule),
    Command {
        name: "listRoutingFirewallRules",
        run: routing_firewall::list_routing_firewall_rules,
        is_async: false,
        since: Some((4, 20)),
        admin_only: false,
        // `@APICommand(authorized = {Admin, ResourceAdmin, DomainAdmin, User})`.
        authorized: ALL_ROLE_TYPES,
    },
    Command {
        name: "createRoutingFirewallRule",
        run: routing_firewall::create_routing_firewall_rule,
        is_async: true,
        since: Some((4, 20)),
        admin_only: false,
        // `@APICommand(authorized = {Admin, ResourceAdmin, DomainAdmin, User})`.
        authorized: ALL_ROLE_TYPES,
    },
    Command {
        name: "deleteRoutingFirewallRule",
        run: routing_firewall::delete_routing_firewall_rule,
        is_async: true,
        since: Some((4, 20)),
        admin_only: false,
        // `@APICommand(authorized = {Admin, ResourceAdmin, DomainAdmin, User})`.
        authorized: ALL_ROLE_TYPES,
    },
    sync(
        "listPortForwardingRules",
        port_forwarding::list_port_forwarding_rules,
    ),
    job(
        "createPortForwardingRule",
        port_forwarding::create_port_forwarding_rule,
    ),
    job(
        "deletePortForwardingRule",
        port_forwarding::delete_port_forwarding_rule,
    ),
    sync("listNetworkACLLists", acl::list_network_acl_lists),
    sync("listNetworkACLs", acl::list_network_acls),
    job("createNetworkACL", acl::create_network_acl),
    job("deleteNetworkACL", acl::delete_network_acl),
    job("createTags", tags::create_tags),
    job("deleteTags", tags::delete_tags),
    sync("listTags", tags::list_tags),
    sync(
        "listLBHealthCheckPolicies",
        policies::list_health_check_policies,
    ),
    job(
        "createLBHealthCheckPolicy",
        policies::create_health_check_policy,
    ),
    job("deleteLBHealthCheckPolicy", policies::delete_policy),
    sync(
        "listLBStickinessPolicies",
        policies::list_stickiness_policies,
    ),
    job(
        "createLBStickinessPolicy",
        policies::create_stickiness_policy,
    ),
    job("deleteLBStickinessPolicy", policies::delete_policy),
    sync("listStaticRoutes", routes::list_static_routes),
    job("createStaticRoute", routes::create_static_route),
    job("deleteStaticRoute", routes::delete_static_route),
    sync("uploadSslCert", ssl_certs::upload_ssl_cert),
    sync("listSslCerts", ssl_certs::list_ssl_certs),
    sync("deleteSslCert", ssl_certs::delete_ssl_cert),
    job(
        "assignCertToLoadBalancer",
        ssl_certs::assign_cert_to_load_balancer,
    ),
    job(
        "removeCertFromLoadBalancer",
        ssl_certs::remove_cert_from_load_balancer,
    ),
    sync("queryAsyncJobResult", jobs_cmd::query_async_job_result),
    sync("listAsyncJobs", jobs_cmd::list_async_jobs),
];

/// The command named exactly `name`.
pub fn find(name: &str) -> Option<&'static Command> {
    COMMANDS.iter().find(|c| c.name == name)
}

/// True for commands that change state (everything but `list*`/`query*`).
pub fn is_mutating(name: &str) -> bool {
    !(name.starts_with("list") || name.starts_with("query"))
}

/// Runs the work of a job at its completion time, on behalf of the account that started it.
pub fn run_job_action(
    state: &mut State,
    account: &str,
    action: &JobAction,
) -> Result<Value, ApiError> {
    let caller = Caller {
        account: account.to_owned(),
        role: state.account(account).map(|a| a.role).unwrap_or(Role::User),
    };
    match action {
        JobAction::AssociateIp { ip_id, network_id } => {
            ips::finish_associate(state, ip_id, network_id.as_deref())
        }
        JobAction::DisassociateIp { ip_id } => ips::finish_disassociate(state, &caller, ip_id),
        JobAction::CreateLbRule { rule_id } => lb::finish_create(state, &caller, rule_id),
        JobAction::UpdateLbRule { rule_id, changes } => {
            lb::finish_update(state, &caller, rule_id, changes)
        }
        JobAction::DeleteLbRule {
            rule_id,
            revoke_related_firewall_rule,
        } => lb_delete::finish_delete(state, &caller, rule_id, *revoke_related_firewall_rule),
        JobAction::AssignToLbRule { rule_id, members } => {
            lb_members::finish_assign(state, &caller, rule_id, members)
        }
        JobAction::RemoveFromLbRule { rule_id, members } => {
            lb_members::finish_remove(state, &caller, rule_id, members)
        }
        JobAction::CreateFirewallRule { rule_id } => firewall::finish_create(state, rule_id),
        JobAction::DeleteFirewallRule { rule_id } => firewall::finish_delete(state, rule_id),
        JobAction::CreateRoutingFirewallRule { rule_id } => {
            routing_firewall::finish_create(state, rule_id)
        }
        JobAction::DeleteRoutingFirewallRule { rule_id } => {
            routing_firewall::finish_delete(state, &caller, rule_id)
        }
        JobAction::CreateNetworkAcl { item_id } => acl::finish_create(state, item_id),
        JobAction::DeleteNetworkAcl { item_id } => acl::finish_delete(state, item_id),
        JobAction::CreateTags {
            resource_type,
            resource_ids,
            tags,
            customer,
        } => tags::finish_create(state, &caller, resource_type, resource_ids, tags, customer),
        JobAction::DeleteTags {
            resource_type,
            resource_ids,
            tags,
        } => tags::finish_delete(state, &caller, resource_type, resource_ids, tags),
        JobAction::CreatePolicy { policy_id } => policies::finish_create(state, policy_id),
        JobAction::DeletePolicy { policy_id } => policies::finish_delete(state, policy_id),
        JobAction::DestroyVm { vm_id, expunge } => {
            vm_lifecycle::finish_destroy(state, &caller, vm_id, *expunge)
        }
        JobAction::ExpungeVm { vm_id } => vm_lifecycle::finish_expunge(state, &caller, vm_id),
        JobAction::CreateStaticRoute { route_id } => routes::finish_create(state, route_id),
        JobAction::DeleteStaticRoute { route_id } => routes::finish_delete(state, route_id),
        JobAction::CreatePfRule { rule_id } => port_forwarding::finish_create(state, rule_id),
        JobAction::DeletePfRule { rule_id } => port_forwarding::finish_delete(state, rule_id),
        JobAction::AssignCert {
            rule_id,
            cert_id,
            forced,
        } => ssl_certs::finish_assign(state, &caller, rule_id, cert_id, *forced),
        JobAction::RemoveCert { rule_id } => ssl_certs::finish_remove(state, &caller, rule_id),
    }
}

/// Undoes the create phase of a job that failed (the entity it created disappears).
pub fn roll_back_job(state: &mut State, action: &JobAction) {
    match action {
        JobAction::AssociateIp { ip_id, .. } => ips::release(state, ip_id),
        JobAction::CreateLbRule { rule_id } => lb_delete::remove_rule(state, rule_id),
        JobAction::CreatePfRule { rule_id } => {
            port_forwarding::revoke_rules_where(state, |r| &r.id == rule_id)
        }
        JobAction::CreateFirewallRule { rule_id } => {
            state.firewall_rules.retain(|r| &r.id != rule_id)
        }
        JobAction::CreateRoutingFirewallRule { rule_id } => {
            state.routing_firewall_rules.retain(|r| &r.id != rule_id)
        }
        JobAction::CreateNetworkAcl { item_id } => state.acl_items.retain(|r| &r.id != item_id),
        JobAction::CreatePolicy { policy_id } => state.policies.retain(|p| &p.id != policy_id),
        JobAction::CreateStaticRoute { route_id } => {
            state.static_routes.retain(|r| &r.id != route_id)
        }
        _ => {}
    }
}

/// `{"success":true}`, the result of delete-type jobs.
pub fn success() -> Value {
    json!({"success": true})
}

/// `{"jobid": …}`.
pub fn job_reply(job_id: &str) -> Value {
    json!({"jobid": job_id})
}

/// `{"id": …, "jobid": …}` of the create-type commands.
pub fn create_reply(id: &str, job_id: &str) -> Value {
    json!({"id": id, "jobid": job_id})
}

/// LIKE `%keyword%`, case-insensitive (MySQL default collation).
pub fn like(haystack: &str, needle: &str) -> bool {
    haystack.to_lowercase().contains(&needle.to_lowercase())
}

/// The `tags[i].key/value` filter of list calls: OR across the pairs, each key AND value.
pub fn tags_match(
    state: &State,
    params: &Params,
    resource_type: &str,
    resource_id: &str,
) -> Result<bool, ApiError> {
    let wanted = params.map("tags")?;
    if wanted.is_empty() {
        return Ok(true);
    }
    Ok(wanted.values().any(|pair| {
        state.tags.iter().any(|t| {
            t.resource_type == resource_type
                && t.resource_id == resource_id
                && pair.get("key").is_none_or(|k| k == &t.key)
                && pair.get("value").is_none_or(|v| v == &t.value)
        })
    }))
}

/// The `tags` array embedded in resource responses.
pub fn embedded_tags(state: &State, resource_type: &str, resource_id: &str) -> Value {
    Value::Array(
        state
            .tags
            .iter()
            .filter(|t| t.resource_type == resource_type && t.resource_id == resource_id)
            .map(|t| tags::render_tag(state, t))
            .collect(),
    )
}

/// Looks up an entity by a UUID parameter; an unknown id gives the server's 431 text.
pub fn lookup<'s, T>(
    params: &Params,
    name: &str,
    find: impl FnOnce(&str) -> Option<&'s T>,
) -> Result<Option<&'s T>, ApiError> {
    match params.uuid(name)? {
        None => Ok(None),
        Some(id) => find(id)
            .map(Some)
            .ok_or_else(|| ApiError::invalid_uuid(&params.command, name, id)),
    }
}

/// A UUID filter of a list call, resolved as parameter processing does before any command
/// runs (`ParamProcessWorker.translateUuidToInternalId`): an id that names no entity —
/// unknown, or deleted where the server deletes rows — is a 431, not an empty list.
pub fn resolve<'p>(
    params: &'p Params,
    name: &str,
    exists: impl FnOnce(&str) -> bool,
) -> Result<Option<&'p str>, ApiError> {
    match params.uuid(name)? {
        None => Ok(None),
        Some(id) if exists(id) => Ok(Some(id)),
        Some(id) => Err(ApiError::invalid_uuid(&params.command, name, id)),
    }
}

/// A required UUID parameter naming a load-balancer rule of either scheme (both are rows of
/// `firewall_rules`, which parameter processing searches): unknown → the server's 431.
pub fn lookup_lb_rule<'s>(
    params: &Params,
    state: &'s State,
    name: &str,
) -> Result<crate::state::AnyLbRule<'s>, ApiError> {
    let id = params
        .uuid(name)?
        .ok_or_else(|| ApiError::missing(&params.command, name))?;
    state
        .any_lb_rule(id)
        .ok_or_else(|| ApiError::invalid_uuid(&params.command, name, id))
}

/// Like [`lookup`] for a required parameter.
pub fn lookup_required<'s, T>(
    params: &Params,
    name: &str,
    find: impl FnOnce(&str) -> Option<&'s T>,
) -> Result<&'s T, ApiError> {
    lookup(params, name, find)?.ok_or_else(|| ApiError::missing(&params.command, name))
}
