//! The VPC Internal Load Balancer (scheme Internal, provider InternalLbVm):
//! `createLoadBalancer`, `listLoadBalancers`, `deleteLoadBalancer`
//! (`CreateApplicationLoadBalancerCmd`, `ListApplicationLoadBalancersCmd`,
//! `DeleteApplicationLoadBalancerCmd`, `ApplicationLoadBalancerManagerImpl`). Members,
//! tags and `listLoadBalancerRuleInstances` share the public rules' commands
//! ([`crate::state::State::any_lb_rule`]).

use super::access::{Caller, job_denied};
use super::vms::instance_name;
use super::{Ctx, create_reply, job_reply, like, resolve, success, tags_match};
use crate::error::ApiError;
use crate::jobs::JobAction;
use crate::response::list_body;
use crate::state::{InternalLbRule, Network, Service, State, network_text, new_id};
use serde_json::{Map, Value, json};
use std::net::Ipv4Addr;

const ALGORITHMS: &[&str] = &["roundrobin", "leastconn", "source"];
/// `NetUtils.HAPROXY_STATS_PORT` (`network.loadbalancer.haproxy.stats.port`, 8081).
const HAPROXY_STATS_PORT: u16 = 8081;
const SCHEME_REFUSAL: &str = "Invalid value for scheme. Supported value is internal";

/// `CreateApplicationLoadBalancerCmd.getScheme`/`ListApplicationLoadBalancersCmd.getScheme`:
/// `internal` in any case, else an `InvalidParameterValueException` (431).
fn check_scheme(scheme: &str) -> Result<(), ApiError> {
    if scheme.eq_ignore_ascii_case("Internal") {
        Ok(())
    } else {
        Err(ApiError::param(SCHEME_REFUSAL))
    }
}

/// `NetUtils.isValidPort`: 1–65535.
fn valid_port(value: i64) -> Option<u16> {
    u16::try_from(value).ok().filter(|p| *p > 0)
}

/// The network's CIDR as (network address, prefix length).
fn cidr(network: &Network) -> Option<(u32, u32)> {
    let (base, prefix) = network.cidr.split_once('/')?;
    let base = u32::from(base.parse::<Ipv4Addr>().ok()?);
    let prefix: u32 = prefix.parse().ok().filter(|p| *p <= 32)?;
    Some((base & mask(prefix), prefix))
}

fn mask(prefix: u32) -> u32 {
    if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix)
    }
}

/// `NetworkModelImpl.getUsedIpsInNetwork`: the NIC addresses in the network and the source
/// addresses of its internal load balancers (`listLbIpsBySourceIpNetworkId`).
fn used_ips(state: &State, network_id: &str) -> Vec<String> {
    let nics = state
        .vms
        .iter()
        .flat_map(|vm| vm.nics.iter())
        .filter(|n| n.network_id == network_id)
        .map(|n| n.ipv4.clone());
    let lbs = state
        .internal_lb_rules
        .iter()
        .filter(|r| r.source_network_id == network_id)
        .map(|r| r.source_ip.clone());
    nics.chain(lbs).collect()
}

/// `IpAddressManagerImpl.acquireGuestIpAddress` with `NetworkModelImpl.getAvailableIps`: a
/// requested address is refused (`None`) when it is the gateway, in use, or the network or
/// broadcast address; without one, a free address of the CIDR other than the gateway. The
/// server picks a free address at random (`_rand.nextInt`); the simulator takes the lowest,
/// so a client must not rely on which one it gets.
fn acquire_guest_ip(state: &State, network: &Network, requested: Option<&str>) -> Option<String> {
    let (base, prefix) = cidr(network)?;
    let gateway = base + 1;
    let used = used_ips(state, &network.id);
    if let Some(ip) = requested {
        let address = u32::from(ip.parse::<Ipv4Addr>().ok()?);
        let broadcast = base | !mask(prefix);
        if address == gateway || used.iter().any(|u| u == ip) {
            return None;
        }
        if prefix < 31 && (address == base || address == broadcast) {
            return None;
        }
        return Some(ip.to_owned());
    }
    let last = base | !mask(prefix);
    (base + 1..last)
        .filter(|a| *a != gateway)
        .map(|a| Ipv4Addr::from(a).to_string())
        .find(|a| !used.contains(a))
}

/// `validateRequestedSourceIpForInternalLbRule`: the address must be in the source network's
/// CIDR (an unparsable one is not).
fn in_cidr(network: &Network, ip: &str) -> bool {
    let (Some((base, prefix)), Ok(address)) = (cidr(network), ip.parse::<Ipv4Addr>()) else {
        return false;
    };
    u32::from(address) & mask(prefix) == base
}

/// Whether an InternalLbVm serves the network ([`State::internal_lb_vms`]).
fn has_internal_lb_vm(state: &State, network_id: &str) -> bool {
    state.internal_lb_vms.iter().any(|(n, _)| n == network_id)
}

/// The position-based database id of a network in messages ([`network_text`]).
fn network_number(state: &State, network: &Network) -> usize {
    state
        .networks
        .iter()
        .position(|n| n.id == network.id)
        .unwrap_or_default()
        + 200
}

/// createLoadBalancer: the create phase (`CreateApplicationLoadBalancerCmd.create` →
/// `ApplicationLoadBalancerManagerImpl.createApplicationLoadBalancer`) validates and stores
/// the rule in state `Add`; the job only renders it (`execute` applies nothing, so the rule
/// stays `Add` until a VM is assigned, as a public rule does).
///
/// Checks, in the server's order:
/// 1. the caller's access to the rule's owner, the network's (`ParamProcessWorker
///    .doAccessChecks` before `create()` of a `BaseAsyncCreateCmd`, 531);
/// 2. `getScheme()` — "Invalid value for scheme. Supported value is internal" (431);
/// 3. `validateLbRule`: "LB service is not supported in specified network id",
///    `isLbServiceSupportedInNetwork(…, Internal)` — "Scheme Internal is not supported by the
///    network offering <`NetworkOfferingVO.toString`>", "Invalid value for instance port: N",
///    "Invalid value for source port: N", "Invalid algorithm: X" (431);
/// 4. `validateSourceIpNtwkForInternalLbRule` (a Guest network with a CIDR);
/// 5. `getSourceIp`: a `sourceipaddress` some internal rule of the source network already
///    uses is shared; any other must be in the CIDR ("The requested IP is not in the
///    network's CIDR subnet.", 431) and free (`acquireGuestIpAddress`); without one a free
///    guest address is taken; none → `InsufficientVirtualNetworkCapacityException` "Unable to
///    acquire IP address for network <`NetworkVO.toString`>" (533);
/// 6. the provider (`InternalLoadBalancerElement.validateLBRule`): once an InternalLbVm
///    serves the network ([`State::internal_lb_vms`]), `validateHAProxyLBRule` refuses
///    source port 8081 — "LB service provider cannot support this rule" (431);
/// 7. `detectInternalLbRulesConflict` against the rules on the same source address and
///    network: one of another guest network — "New rule is for a different network than
///    what's specified in rule <id>", an overlapping source port — "The range specified,
///    a-b, conflicts with rule <id> which has c-d" (537).
///
/// `create()` rethrows the 537 and 533 as `ServerApiException`s without their cause
/// (`cserrorcode` 9999); the 431s and the 531 leave as they are. The rule belongs to the
/// network's owner (`getEntityOwnerId`). The command has no sync object
/// (`CreateApplicationLoadBalancerCmd` does not override `getSyncObjType`), so its job waits
/// in no network's queue.
pub fn create_load_balancer(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    create(ctx).map_err(|e| match e.code {
        537 => ApiError::new(e.code, Some(9999), e.text),
        _ => e,
    })
}

fn create(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let p = ctx.params;
    let state = &*ctx.state;
    let name = p.required("name")?.to_owned();
    let algorithm = p.required("algorithm")?.to_owned();
    let source_port = p.required_int("sourceport")?;
    let instance_port = p.required_int("instanceport")?;
    let network = super::lookup_required(p, "networkid", |id| state.network(id))?;
    let source_network =
        super::lookup_required(p, "sourceipaddressnetworkid", |id| state.network(id))?;
    ctx.caller
        .check(state, &network.owner, &format!("network {}", network.id))?;
    check_scheme(p.required("scheme")?)?;
    if !network.offers(Service::Lb) {
        return Err(ApiError::param(
            "LB service is not supported in specified network id",
        ));
    }
    if !network.supports_internal_lb() {
        return Err(ApiError::param(format!(
            "Scheme Internal is not supported by the network offering {}",
            network.offering_text()
        )));
    }
    let instance_port = valid_port(instance_port).ok_or_else(|| {
        ApiError::param(format!("Invalid value for instance port: {instance_port}"))
    })?;
    let source_port = valid_port(source_port)
        .ok_or_else(|| ApiError::param(format!("Invalid value for source port: {source_port}")))?;
    if !ALGORITHMS.contains(&algorithm.as_str()) {
        return Err(ApiError::param(format!("Invalid algorithm: {algorithm}")));
    }
    let requested = p.text("sourceipaddress");
    let shared = requested.is_some_and(|ip| {
        state
            .internal_lb_rules
            .iter()
            .any(|r| r.source_ip == ip && r.source_network_id == source_network.id)
    });
    let source_ip = match requested {
        Some(ip) if shared => ip.to_owned(),
        _ => {
            if let Some(ip) = requested
                && !in_cidr(source_network, ip)
            {
                return Err(ApiError::param(
                    "The requested IP is not in the network's CIDR subnet.",
                ));
            }
            acquire_guest_ip(state, source_network, requested).ok_or_else(|| {
                ApiError::new(
                    533,
                    Some(9999),
                    format!(
                        "Unable to acquire IP address for network {}",
                        network_text(source_network, network_number(state, source_network))
                    ),
                )
            })?
        }
    };
    if source_port == HAPROXY_STATS_PORT && has_internal_lb_vm(state, &network.id) {
        return Err(ApiError::param(
            "LB service provider cannot support this rule",
        ));
    }
    for other in state
        .internal_lb_rules
        .iter()
        .filter(|r| r.source_ip == source_ip && r.source_network_id == source_network.id)
    {
        if other.network_id != network.id {
            return Err(ApiError::conflict(format!(
                "New rule is for a different network than what's specified in rule {}",
                other.id
            )));
        }
        if other.source_port == source_port {
            return Err(ApiError::conflict(format!(
                "The range specified, {source_port}-{source_port}, conflicts with rule {} which has {}-{}",
                other.id, other.source_port, other.source_port
            )));
        }
    }
    let rule = InternalLbRule {
        id: new_id(),
        name,
        description: p.text("description").map(str::to_owned),
        network_id: network.id.clone(),
        source_ip,
        source_network_id: source_network.id.clone(),
        source_port,
        instance_port,
        algorithm,
        protocol: "tcp".into(),
        state: "Add".into(),
        members: vec![],
        // `fordisplay` is an admin-only parameter (`authorized = {RoleType.Admin}`): the
        // server does not bind it for other callers.
        display: if ctx.caller.is_admin() {
            p.text("fordisplay")
                .is_none_or(|v| v.eq_ignore_ascii_case("true"))
        } else {
            true
        },
        owner: network.owner.clone(),
    };
    let rule_id = rule.id.clone();
    ctx.state.internal_lb_rules.push(rule);
    let job = ctx.start_job(
        None,
        Some(("LoadBalancerRule", rule_id.clone())),
        JobAction::CreateLbRule {
            rule_id: rule_id.clone(),
        },
    );
    Ok(create_reply(&rule_id, &job))
}

/// Job of createLoadBalancer (`CreateApplicationLoadBalancerCmd.execute`): the rule as
/// `createLoadBalancerContainerReponse` renders it; nothing is applied.
pub fn finish_create(state: &mut State, admin: bool, rule_id: &str) -> Result<Value, ApiError> {
    let rule = state
        .internal_lb_rule(rule_id)
        .ok_or_else(|| ApiError::new(530, None, "Failed to create load balancer"))?;
    Ok(json!({"loadbalancer": render(state, rule, admin)}))
}

/// The `loadbalancer` object (`ApiResponseHelper.createLoadBalancerContainerReponse`):
/// * `sourceipaddressnetworkid` is the rule's own `networkid` (the method reads
///   `lb.getNetworkId()`, not the source network);
/// * one `loadbalancerrule` `{sourceport, instanceport, state}` (a revoked rule shows
///   `Deleting`);
/// * one `loadbalancerinstance` `{id, name, ipaddress}` per mapped VM
///   (`LoadBalancingRulesManagerImpl.getLbInstances`: a map keyed by the VM's NIC address in
///   the rule's network; `name` is the VM's instance name; no `state` is set);
/// * `tags` with `key` and `value` only (`createResourceTagResponse(tag, true)`);
/// * `description` only when the rule has one;
/// * `fordisplay` for a root admin only: `ApplicationLoadBalancerResponse.forDisplay` is
///   `@Param(authorized = {RoleType.Admin})`, a field the response serializer leaves out for
///   anyone else.
pub fn render(state: &State, rule: &InternalLbRule, admin: bool) -> Value {
    let mut out = Map::new();
    out.insert("id".into(), json!(rule.id));
    out.insert("name".into(), json!(rule.name));
    if let Some(d) = &rule.description {
        out.insert("description".into(), json!(d));
    }
    out.insert("algorithm".into(), json!(rule.algorithm));
    if admin {
        out.insert("fordisplay".into(), json!(rule.display));
    }
    out.insert("networkid".into(), json!(rule.network_id));
    super::access::entity_owner_fields(state, &rule.owner, &mut out);
    out.insert("sourceipaddress".into(), json!(rule.source_ip));
    out.insert("sourceipaddressnetworkid".into(), json!(rule.network_id));
    out.insert(
        "loadbalancerrule".into(),
        json!([{
            "sourceport": rule.source_port,
            "instanceport": rule.instance_port,
            "state": rule.state,
        }]),
    );
    let mut instances: Vec<Value> = Vec::new();
    for member in &rule.members {
        let Some(vm) = state.vm(&member.vm_id) else {
            continue;
        };
        let Some(nic) = vm.nics.iter().find(|n| n.network_id == rule.network_id) else {
            continue;
        };
        if instances.iter().any(|i| i["ipaddress"] == nic.ipv4) {
            continue;
        }
        instances
            .push(json!({"id": vm.id, "name": instance_name(state, vm), "ipaddress": nic.ipv4}));
    }
    out.insert("loadbalancerinstance".into(), Value::Array(instances));
    let tags: Vec<Value> = state
        .tags
        .iter()
        .filter(|t| t.resource_type == "LoadBalancer" && t.resource_id == rule.id)
        .map(|t| json!({"key": t.key, "value": t.value}))
        .collect();
    out.insert("tags".into(), Value::Array(tags));
    Value::Object(out)
}

/// True when `id` names a row of `firewall_rules` (what parameter processing resolves a
/// `FirewallRuleResponse` UUID against): a rule of either load-balancing scheme, a
/// firewall, port-forwarding or routing firewall rule.
fn firewall_row(state: &State, id: &str) -> bool {
    state.any_lb_rule(id).is_some()
        || state.firewall_rules.iter().any(|r| r.id == id)
        || state.pf_rules.iter().any(|r| r.id == id)
        || state.routing_firewall_rules.iter().any(|r| r.id == id)
}

/// listLoadBalancers (`ApplicationLoadBalancerManagerImpl.listApplicationLoadBalancers`):
/// scoped as every list (`buildACLSearchParameters`), ordered by id, filtered by `id`,
/// `name` (exact), `keyword` (name or description), `sourceipaddress`,
/// `sourceipaddressnetworkid`, `scheme` (only `internal` is valid: "Invalid value for
/// scheme. Supported value is internal", 431), `networkid`, `fordisplay` and `tags`. Only
/// rules with a source address and source network are listed, so public rules never are,
/// with or without `scheme`.
pub fn list_load_balancers(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let page = ctx.page()?;
    let scope = ctx.scope()?;
    let p = ctx.params;
    let state = &*ctx.state;
    let id = resolve(p, "id", |i| firewall_row(state, i))?;
    let source_network = resolve(p, "sourceipaddressnetworkid", |i| {
        state.network(i).is_some()
    })?;
    let network = resolve(p, "networkid", |i| state.network(i).is_some())?;
    if let Some(scheme) = p.text("scheme") {
        check_scheme(scheme)?;
    }
    let display = if ctx.caller.is_admin() {
        p.bool("fordisplay")
    } else {
        None
    };
    let mut items = Vec::new();
    for rule in &state.internal_lb_rules {
        let keep = scope.matches(&rule.owner)
            && id.is_none_or(|i| i == rule.id)
            && p.text("name").is_none_or(|n| n == rule.name)
            && p.text("keyword").is_none_or(|k| {
                like(&rule.name, k) || rule.description.as_deref().is_some_and(|d| like(d, k))
            })
            && p.text("sourceipaddress")
                .is_none_or(|ip| ip == rule.source_ip)
            && source_network.is_none_or(|n| n == rule.source_network_id)
            && network.is_none_or(|n| n == rule.network_id)
            && display.is_none_or(|d| d == rule.display)
            && tags_match(state, p, "LoadBalancer", &rule.id)?;
        if keep {
            items.push(render(state, rule, ctx.caller.is_admin()));
        }
    }
    Ok(list_body("loadbalancer", items, page))
}

/// deleteLoadBalancer: `id` is resolved against `firewall_rules` (431 when it names no row);
/// `ApiServer.queueCommand` then asks `getEntityOwnerId`, which looks it up as a load
/// balancer ("Can't find load balancer by id specified", 431, for a firewall or
/// port-forwarding rule's id), and the job waits in the queue of the rule's network. A
/// public rule's id is a load balancer too: the job deletes it with
/// `deleteLoadBalancerRule(id, true)` but, unlike `deleteLoadBalancerRule` the command,
/// without revoking its `openfirewall` firewall rule first, so a rule that has one is left
/// revoked and the job fails ([`super::lb_delete::finish_delete`]).
pub fn delete_load_balancer(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let p = ctx.params;
    let state = &*ctx.state;
    let id = resolve(p, "id", |i| firewall_row(state, i))?
        .ok_or_else(|| ApiError::missing(&p.command, "id"))?;
    let rule = state
        .any_lb_rule(id)
        .ok_or_else(|| ApiError::param("Can't find load balancer by id specified"))?;
    let (rule_id, network) = (rule.id.to_owned(), rule.network_id.to_owned());
    let job = ctx.start_job(
        Some(network),
        Some(("FirewallRule", rule_id.clone())),
        JobAction::DeleteLbRule {
            rule_id,
            revoke_related_firewall_rule: false,
        },
    );
    Ok(job_reply(&job))
}

/// Job deleting an internal rule (`deleteApplicationLoadBalancer` →
/// `LoadBalancingRulesManagerImpl.deleteLoadBalancerRule(id, true)`): the caller's access
/// (530), then the rule is revoked and applied — it goes with its mappings and tags. Its
/// source address is free again once no rule uses it (`getUsedIpsInNetwork`), and the
/// InternalLbVm of that address is destroyed (`InternalLoadBalancerElement.applyLBRules`:
/// "all the rules for this vm are in Revoke state").
pub fn finish_delete(state: &mut State, caller: &Caller, rule_id: &str) -> Result<Value, ApiError> {
    let Some(rule) = state.internal_lb_rule(rule_id) else {
        return Err(ApiError::param(format!(
            "Unable to find load balancer rule {rule_id}"
        )));
    };
    if !caller.can_access(state, &rule.owner) {
        return Err(job_denied(caller, &format!("load balancer rule {rule_id}")));
    }
    let vm = (rule.source_network_id.clone(), rule.source_ip.clone());
    state.internal_lb_rules.retain(|r| r.id != rule_id);
    state
        .tags
        .retain(|t| !(t.resource_type == "LoadBalancer" && t.resource_id == rule_id));
    let address_in_use = state
        .internal_lb_rules
        .iter()
        .any(|r| (&r.source_network_id, &r.source_ip) == (&vm.0, &vm.1));
    if !address_in_use {
        state.internal_lb_vms.retain(|v| *v != vm);
    }
    Ok(success())
}
