//! Public IP addresses: list, associate, disassociate (API.md §3.4–§3.6).

use super::access::{Caller, owner_fields};
use super::ip_rules::guest_association_refusal;
use super::{Ctx, create_reply, embedded_tags, job_reply, lookup, resolve, success, tags_match};
use crate::error::ApiError;
use crate::jobs::JobAction;
use crate::response::list_body;
use crate::state::{PublicIp, State, now_text};
use serde_json::{Map, Value, json};

/// The `ipaddress`/`publicipaddress` object.
pub fn render_ip(state: &State, ip: &PublicIp) -> Value {
    let zone = state
        .zone(&ip.zone_id)
        .map(|z| z.name.clone())
        .unwrap_or_default();
    let mut out = Map::new();
    for (k, v) in [
        ("id", json!(ip.id)),
        ("ipaddress", json!(ip.address)),
        ("state", json!(ip.state)),
        ("zoneid", json!(ip.zone_id)),
        ("zonename", json!(zone)),
        ("issourcenat", json!(ip.source_nat)),
        ("isstaticnat", json!(ip.static_nat_vm.is_some())),
        ("issystem", json!(false)),
        ("isportable", json!(false)),
        ("forvirtualnetwork", json!(true)),
        ("fordisplay", json!(true)),
        ("forsystemvms", json!(false)),
        ("vlanid", json!("00000000-0000-4000-8000-0000000000cc")),
        ("vlanname", json!("vlan://untagged")),
        (
            "hasrules",
            json!(
                state.lb_rules.iter().any(|r| r.ip_id == ip.id)
                    || state.firewall_rules.iter().any(|r| r.ip_id == ip.id)
            ),
        ),
        ("tags", embedded_tags(state, "PublicIpAddress", &ip.id)),
    ] {
        out.insert(k.into(), v);
    }
    if let Some(date) = &ip.allocated {
        out.insert("allocated".into(), json!(date));
    }
    if let Some(n) = ip.network_id.as_ref().and_then(|n| state.network(n)) {
        out.insert("associatednetworkid".into(), json!(n.id));
        out.insert("associatednetworkname".into(), json!(n.name));
    }
    if let Some(v) = ip.vpc_id.as_ref().and_then(|v| state.vpc(v)) {
        out.insert("vpcid".into(), json!(v.id));
        out.insert("vpcname".into(), json!(v.name));
    }
    if let Some(vm) = ip.static_nat_vm.as_ref().and_then(|v| state.vm(v)) {
        out.insert("virtualmachineid".into(), json!(vm.id));
        out.insert("virtualmachinename".into(), json!(vm.name));
        out.insert("virtualmachinedisplayname".into(), json!(vm.name));
        out.insert("virtualmachinetype".into(), json!("User"));
        if let Some(nic) = vm.nics.iter().find(|n| n.isdefault) {
            out.insert("vmipaddress".into(), json!(nic.ipv4));
        }
    }
    if let Some(owner) = &ip.owner {
        owner_fields(state, owner, &mut out);
    }
    Value::Object(out)
}

/// listPublicIpAddresses.
pub fn list_public_ip_addresses(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let page = ctx.page()?;
    let scope = ctx.scope()?;
    let p = ctx.params;
    let state = &*ctx.state;
    let allocated_only = p.bool("allocatedonly").unwrap_or(true);
    let id = resolve(p, "id", |i| state.ip(i).is_some())?;
    let network = resolve(p, "associatednetworkid", |i| state.network(i).is_some())?;
    let vpc = resolve(p, "vpcid", |i| state.vpc(i).is_some())?;
    let zone = resolve(p, "zoneid", |i| state.zone(i).is_some())?;
    let mut found: Vec<&PublicIp> = Vec::new();
    for ip in &state.ips {
        let visible = match &ip.owner {
            None => !allocated_only,
            Some(owner) => scope.matches(owner),
        };
        let keep = visible
            && id.is_none_or(|i| i == ip.id)
            && p.text("ipaddress").is_none_or(|a| a == ip.address)
            && network.is_none_or(|n| ip.network_id.as_deref() == Some(n))
            && vpc.is_none_or(|v| ip.vpc_id.as_deref() == Some(v))
            && zone.is_none_or(|z| z == ip.zone_id)
            && p.bool("issourcenat").is_none_or(|s| s == ip.source_nat)
            && p.bool("isstaticnat")
                .is_none_or(|s| s == ip.static_nat_vm.is_some())
            && p.text("state")
                .is_none_or(|s| s.eq_ignore_ascii_case(&ip.state))
            && tags_match(state, p, "PublicIpAddress", &ip.id)?;
        if keep {
            found.push(ip);
        }
    }
    found.sort_by(|a, b| b.address.cmp(&a.address));
    let items = found.into_iter().map(|ip| render_ip(state, ip)).collect();
    Ok(list_body("publicipaddress", items, page))
}

/// associateIpAddress: the address is reserved at once, the job associates it.
pub fn associate_ip_address(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let p = ctx.params;
    let state = &*ctx.state;
    let network = lookup(p, "networkid", |id| state.network(id))?;
    let vpc = lookup(p, "vpcid", |id| state.vpc(id))?;
    let zone = lookup(p, "zoneid", |id| state.zone(id))?;
    let owner = ctx.caller.owner_for_create(state, p)?;
    let (zone_id, network_id, vpc_id) = match (network, vpc, zone) {
        (Some(n), _, _) => {
            // `NetworkServiceImpl.allocateIP`, create phase: in an Advanced zone a shared
            // network takes an address only when its offering has one of the services
            // `isSharedNetworkOfferingWithServices` looks for; the simulator's shared
            // networks have none of them.
            if n.is_shared() {
                return Err(ApiError::param(
                    "Associate IP address can only be called on the shared networks in the advanced zone with Firewall/Source Nat/Static Nat/Port Forwarding/Load balancing services enabled",
                ));
            }
            ctx.caller
                .check(state, &n.owner, &format!("network {}", n.id))?;
            (n.zone_id.clone(), Some(n.id.clone()), n.vpc_id.clone())
        }
        (None, Some(v), _) => {
            ctx.caller
                .check(state, &v.owner, &format!("vpc {}", v.id))?;
            (v.zone_id.clone(), None, Some(v.id.clone()))
        }
        (None, None, Some(z)) => (z.id.clone(), None, None),
        (None, None, None) => {
            return Err(ApiError::param(
                "Unable to figure out zone to assign IP to. Please specify either zoneId, or networkId, or vpcId in the call",
            ));
        }
    };
    let refusal = network.and_then(guest_association_refusal);
    let index = match p.text("ipaddress") {
        Some(address) => {
            let index = state.ips.iter().position(|i| i.address == address && i.zone_id == zone_id);
            let index = index.ok_or_else(|| ApiError::param(format!("Unable to find public IP address {address} in the zone")))?;
            if state.ips[index].state != "Free" {
                return Err(ApiError::param(format!("Public IP address {address} is already allocated")));
            }
            index
        }
        None => state.ips.iter().position(|i| i.zone_id == zone_id && i.state == "Free").ok_or_else(|| {
            if ctx.caller.is_admin() {
                ApiError::no_address("Insufficient address capacity")
            } else {
                ApiError::no_address("Internal error executing command, please contact your system administrator")
            }
        })?,
    };
    let ip = &mut ctx.state.ips[index];
    ip.state = "Allocating".into();
    ip.owner = Some(owner);
    ip.allocated = Some(now_text());
    // `NetworkServiceImpl.allocateIP` reserves the address; the network is bound in the job
    // (`IpAddressManagerImpl.associateIPToGuestNetwork` sets `associated_with_network_id`):
    // while `Allocating` the address shows no `associatednetworkid`.
    ip.vpc_id = vpc_id.clone();
    let ip_id = ip.id.clone();
    // AssociateIPAddrCmd.execute → NetworkServiceImpl.associateIPToNetwork, in the job: a
    // VPC tier's address must be associated with the VPC; then
    // `IpAddressManagerImpl.associateIPToGuestNetwork` refuses an isolated network without
    // SourceNat (a ROUTED one). Either way the address is released again.
    let tier = network_id.is_some() && vpc_id.is_some();
    let failure = if tier {
        Some(ApiError::param(
            "Can't assign ip to the network directly when network belongs to VPC.Specify vpcId to associate ip address to VPC",
        ))
    } else {
        refusal
    };
    let queue = network_id.clone().or(vpc_id);
    let job = ctx.start_job_with(
        queue,
        Some(("IpAddress", ip_id.clone())),
        JobAction::AssociateIp {
            ip_id: ip_id.clone(),
            network_id,
        },
        failure,
    );
    Ok(create_reply(&ip_id, &job))
}

/// Job (`associateIPToGuestNetwork`): the address is bound to its network and allocated.
pub fn finish_associate(
    state: &mut State,
    ip_id: &str,
    network_id: Option<&str>,
) -> Result<Value, ApiError> {
    let ip = state
        .ips
        .iter_mut()
        .find(|i| i.id == ip_id)
        .ok_or_else(|| ApiError::internal("IP address vanished"))?;
    if let Some(network) = network_id {
        ip.network_id = Some(network.to_owned());
    }
    ip.state = "Allocated".into();
    let ip = state
        .ip(ip_id)
        .cloned()
        .unwrap_or_else(|| unreachable!("found above"));
    Ok(json!({"ipaddress": render_ip(state, &ip)}))
}

/// disassociateIpAddress. Before the job is queued the command resolves the address
/// (`getEntityOwnerId`/`getSyncObjId` of `DisassociateIPAddrCmd`: `id` and `ipaddress` are
/// mutually exclusive, an unknown `ipaddress` is "Unable to find IP address by IP
/// address=…"); ownership and source NAT are checked in the job.
pub fn disassociate_ip_address(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let p = ctx.params;
    let state = &*ctx.state;
    let by_address = state
        .version
        .at_least(4, 19)
        .then(|| p.text("ipaddress"))
        .flatten();
    // `ParamProcessWorker.processParameters` binds `id` first (an unknown UUID is its 431),
    // then `doAccessChecks` → `getEntityOwnerId` → `getIpAddress` decides between them.
    let by_id = lookup(p, "id", |id| state.ip(id))?;
    let ip = match (by_id, by_address) {
        (Some(_), Some(_)) => {
            return Err(ApiError::param(
                "id parameter is mutually exclusive with ipaddress parameter",
            ));
        }
        (None, None) if state.version.at_least(4, 19) => {
            return Err(ApiError::param(
                "Please specify either IP address or IP address ID",
            ));
        }
        // Before 4.19 `id` is required (the listing of those versions): the dispatcher's 431.
        (None, None) => return Err(ApiError::missing(&p.command, "id")),
        (Some(ip), None) => ip,
        (None, Some(address)) => {
            state
                .ips
                .iter()
                .find(|i| i.address == address)
                .ok_or_else(|| {
                    ApiError::param(format!("Unable to find IP address by IP address={address}"))
                })?
        }
    };
    let (ip_id, queue) = (ip.id.clone(), ip.network_id.clone().or(ip.vpc_id.clone()));
    let job = ctx.start_job(
        queue,
        Some(("IpAddress", ip_id.clone())),
        JobAction::DisassociateIp { ip_id },
    );
    Ok(job_reply(&job))
}

/// Job of disassociateIpAddress (`NetworkServiceImpl.releaseIpAddressInternal`): an address
/// that is not allocated is done already (success); the caller must have access (530); a
/// source-NAT address of an implemented network or a VPC cannot be released
/// (`IllegalArgumentException`, 530 in the job); otherwise the address goes back to the pool
/// with its rules.
pub fn finish_disassociate(
    state: &mut State,
    caller: &Caller,
    ip_id: &str,
) -> Result<Value, ApiError> {
    let Some(ip) = state.ip(ip_id) else {
        return Err(ApiError::param("Unable to find ip address by id"));
    };
    let Some(owner) = ip.owner.clone() else {
        return Ok(success());
    };
    if !caller.can_access(state, &owner) {
        return Err(super::access::job_denied(
            caller,
            &format!("IP address {}", ip.address),
        ));
    }
    if ip.source_nat {
        return Err(ApiError::new(
            530,
            None,
            "ip address is used for source nat purposes and can not be disassociated.",
        ));
    }
    release(state, ip_id);
    Ok(success())
}

/// Returns an address to the pool with its LB rules, firewall rules and tags.
pub fn release(state: &mut State, ip_id: &str) {
    super::port_forwarding::remove_rules_where(state, |r| r.ip_id == ip_id);
    let rules: Vec<String> = state
        .lb_rules
        .iter()
        .filter(|r| r.ip_id == ip_id)
        .map(|r| r.id.clone())
        .collect();
    for rule in rules {
        super::lb_delete::remove_rule(state, &rule);
    }
    let firewall: Vec<String> = state
        .firewall_rules
        .iter()
        .filter(|r| r.ip_id == ip_id)
        .map(|r| r.id.clone())
        .collect();
    state.firewall_rules.retain(|r| r.ip_id != ip_id);
    state
        .tags
        .retain(|t| !(t.resource_id == ip_id || firewall.contains(&t.resource_id)));
    if let Some(ip) = state.ips.iter_mut().find(|i| i.id == ip_id) {
        ip.state = "Free".into();
        ip.owner = None;
        ip.allocated = None;
        ip.network_id = None;
        ip.vpc_id = None;
        ip.static_nat_vm = None;
    }
}
