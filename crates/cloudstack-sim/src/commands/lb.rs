//! Load-balancer rules: list, create, update, delete (API.md §3.7–§3.10, §6).

use super::access::owner_fields;
use super::access::{Caller, job_denied};
use super::ip_rules::{
    check_cidr, firewall_conflict, forwarding_conflict, guest_association_refusal,
};
use super::{
    Ctx, create_reply, embedded_tags, job_reply, like, lookup, lookup_required, resolve, tags_match,
};
use crate::error::ApiError;
use crate::jobs::JobAction;
use crate::response::list_body;
use crate::scenario::LbProvider;
use crate::state::{FirewallRule, LbRule, Service, State, new_id};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

const ALGORITHMS: &[&str] = &["roundrobin", "leastconn", "source"];
/// Protocols of `createLoadBalancerRule` (`NetUtils`: `tcp`, `udp`, `tcp-proxy`, `ssl`). Every
/// version accepts `ssl` on the Virtual Router; without the `SslTermination` capability
/// (before 4.22) HAProxy serves such a rule as plain TCP, and only `assignCertToLoadBalancer`
/// fails.
const PROTOCOLS: &[&str] = &["tcp", "udp", "tcp-proxy", "ssl"];

/// The `loadbalancer`/`loadbalancerrule` object.
pub fn render_rule(state: &State, rule: &LbRule) -> Value {
    let ip = state.ip(&rule.ip_id);
    let zone_id = ip.map(|i| i.zone_id.clone()).unwrap_or_default();
    let zone = state
        .zone(&zone_id)
        .map(|z| z.name.clone())
        .unwrap_or_default();
    let mut out = Map::new();
    for (k, v) in [
        ("id", json!(rule.id)),
        ("name", json!(rule.name)),
        ("publicipid", json!(rule.ip_id)),
        (
            "publicip",
            json!(ip.map(|i| i.address.clone()).unwrap_or_default()),
        ),
        ("publicport", json!(rule.public_port.to_string())),
        ("privateport", json!(rule.private_port.to_string())),
        ("algorithm", json!(rule.algorithm)),
        ("protocol", json!(rule.protocol)),
        ("state", json!(rule.state)),
        ("networkid", json!(rule.network_id)),
        ("zoneid", json!(zone_id)),
        ("zonename", json!(zone)),
        ("fordisplay", json!(true)),
        ("tags", embedded_tags(state, "LoadBalancer", &rule.id)),
    ] {
        out.insert(k.into(), v);
    }
    if let Some(d) = &rule.description {
        out.insert("description".into(), json!(d));
    }
    if state.version.at_least(4, 18) {
        if let Some(cidrs) = &rule.cidrs {
            let separator = if rule.cidrs_comma { "," } else { " " };
            out.insert("cidrlist".into(), json!(cidrs.join(separator)));
        }
    } else {
        out.insert("cidrlist".into(), json!(""));
    }
    owner_fields(state, &rule.owner, &mut out);
    Value::Object(out)
}

/// listLoadBalancerRules.
pub fn list_load_balancer_rules(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let page = ctx.page()?;
    let scope = ctx.scope()?;
    let p = ctx.params;
    let state = &*ctx.state;
    let id = resolve(p, "id", |i| state.lb_rule(i).is_some())?;
    let ip = resolve(p, "publicipid", |i| state.ip(i).is_some())?;
    let vm = resolve(p, "virtualmachineid", |i| {
        state.vm_including_removed(i).is_some()
    })?;
    let network = resolve(p, "networkid", |i| state.network(i).is_some())?;
    let zone = resolve(p, "zoneid", |i| state.zone(i).is_some())?;
    let mut items = Vec::new();
    for rule in &state.lb_rules {
        let keep = scope.matches(&rule.owner)
            && id.is_none_or(|i| i == rule.id)
            && p.text("name").is_none_or(|n| n == rule.name)
            && p.text("keyword").is_none_or(|k| {
                like(&rule.name, k) || rule.description.as_deref().is_some_and(|d| like(d, k))
            })
            && ip.is_none_or(|i| i == rule.ip_id)
            && vm.is_none_or(|v| rule.members.iter().any(|m| m.vm_id == v))
            && network.is_none_or(|n| n == rule.network_id)
            && zone.is_none_or(|z| state.ip(&rule.ip_id).is_some_and(|i| i.zone_id == z))
            && tags_match(state, p, "LoadBalancer", &rule.id)?;
        if keep {
            items.push(render_rule(state, rule));
        }
    }
    Ok(list_body("loadbalancerrule", items, page))
}

fn port(command: &str, name: &str, value: i64) -> Result<u16, ApiError> {
    u16::try_from(value).ok().filter(|p| *p > 0).ok_or_else(|| {
        let _ = command;
        ApiError::param(format!("{name} is an invalid value: {value}"))
    })
}

fn check_algorithm(algorithm: &str) -> Result<(), ApiError> {
    if ALGORITHMS.contains(&algorithm) {
        Ok(())
    } else {
        Err(ApiError::param(format!("Invalid algorithm: {algorithm}")))
    }
}

/// Provider validation (`validateLBRule`): the Virtual Router takes no UDP since 4.15 and
/// never public port 8081 (HAProxy stats); `NsxElement`/`NetrisElement.validateLBRule`
/// accept every rule. `createPublicLoadBalancer` runs it before
/// `detectRulesConflict`, so a UDP rule on a port a TCP rule holds gets this error, not a
/// conflict; its `InvalidParameterValueException` reaches the caller through
/// `CreateLoadBalancerRuleCmd.create` as a bare `ServerApiException` (`cserrorcode` 9999).
fn check_provider(
    state: &State,
    provider: LbProvider,
    protocol: &str,
    public_port: u16,
) -> Result<(), ApiError> {
    let unsupported = match provider {
        LbProvider::VirtualRouter => {
            (protocol == "udp" && state.version.at_least(4, 15)) || public_port == 8081
        }
        LbProvider::Netscaler | LbProvider::Nsx | LbProvider::Netris => false,
        // Never reached by a public rule: `isLbServiceSupportedInNetwork` refuses scheme
        // Public on the internal-LB offering first.
        LbProvider::InternalLbVm => false,
    };
    if unsupported {
        Err(ApiError::param_bare(
            "LB service provider cannot support this rule",
        ))
    } else {
        Ok(())
    }
}

/// Parses and validates a `cidrlist` parameter.
fn cidrs_param(ctx: &Ctx<'_>) -> Result<Option<Vec<String>>, ApiError> {
    let Some(list) = ctx.params.list("cidrlist") else {
        return Ok(None);
    };
    for cidr in &list {
        if !check_cidr(cidr) {
            return Err(ApiError::param(format!("CIDR [{cidr}] is invalid.")));
        }
    }
    Ok(Some(list))
}

/// createLoadBalancerRule: validated and stored (state `Add`) at once; the job applies only
/// the opened firewall rule ([`finish_create`]).
///
/// The create phase (`CreateLoadBalancerRuleCmd.create`) catches the
/// `InvalidParameterValueException` (431), `NetworkRuleConflictException` (537) and
/// `InsufficientAddressCapacityException` (533) of `createPublicLoadBalancerRule` and
/// rethrows each as a `ServerApiException` without its cause, so their `cserrorcode` is the
/// `ServerApiException`'s own 9999; a `PermissionDeniedException` passes through (531, 4365).
pub fn create_load_balancer_rule(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    // Parameter processing, `doAccessChecks`: a `BaseAsyncCreateCmd`'s owner is asked for —
    // `CreateLoadBalancerRuleCmd.getEntityOwnerId` → `getAccountId` → `getSourceIpAddressId`,
    // which refuses an address that is not `readyToUse()` (Allocated) with an
    // `InvalidParameterValueException` no `create()` wraps: 431 cs 4350. The server prints
    // the address's internal id; the simulator its UUID.
    if let Some(ip) = ctx
        .params
        .uuid("publicipid")?
        .and_then(|id| ctx.state.ip(id))
        && ip.state != "Allocated"
    {
        return Err(ApiError::param(format!(
            "Unable to create load balancer rule, invalid IP address ID {}",
            ip.id
        )));
    }
    create_rule(ctx).map_err(|e| match e.code {
        431 | 533 | 537 => ApiError::new(e.code, Some(9999), e.text),
        _ => e,
    })
}

fn create_rule(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let p = ctx.params;
    let state = &*ctx.state;
    let name = p.required("name")?.to_owned();
    let algorithm = p.required("algorithm")?.to_owned();
    let private_port = port(&p.command, "privateport", p.required_int("privateport")?)?;
    let public_port = port(&p.command, "publicport", p.required_int("publicport")?)?;
    let ip = lookup_required(p, "publicipid", |id| state.ip(id))?;
    check_algorithm(&algorithm)?;
    let protocol = p.text("protocol").unwrap_or("tcp").trim().to_lowercase();
    if !PROTOCOLS.contains(&protocol.as_str()) {
        return Err(ApiError::param(format!("Invalid protocol: {protocol}")));
    }
    let owner = ip.owner.clone().ok_or_else(|| {
        ApiError::param(format!(
            "Unable to create load balancer rule; IP address {} is not allocated",
            ip.address
        ))
    })?;
    ctx.caller
        .check(state, &owner, &format!("IP address {}", ip.address))?;
    // `createPublicLoadBalancerRule`: a static-NAT address is a `NetworkRuleConflictException`
    // (537), checked before `createPublicLoadBalancer` gets to its own 431 for the same case.
    if ip.static_nat_vm.is_some() {
        return Err(ApiError::conflict(format!(
            "Can't do load balance on ip address: {}",
            ip.address
        )));
    }
    let requested_network = lookup(p, "networkid", |id| state.network(id))?;
    // `createPublicLoadBalancerRule`: an address associated with a network keeps it — the
    // rule is for that network (`createPublicLoadBalancer` takes the address's), whatever
    // `networkid` says; a VPC address not associated yet is associated with the tier
    // `networkid` names; any other network → "Ip address … is not assigned to the network …".
    let network = match (&ip.network_id, requested_network) {
        (Some(n), _) => state
            .network(n)
            .ok_or_else(|| ApiError::internal("network vanished"))?,
        (None, Some(n)) if ip.vpc_id.is_some() && n.vpc_id == ip.vpc_id => n,
        (None, Some(n)) => {
            return Err(ApiError::param(format!(
                "Ip address {} is not assigned to the network {}",
                ip.address, n.id
            )));
        }
        (None, None) => {
            return Err(ApiError::param(format!(
                "Unable to create load balancer rule; the IP address {} is not associated with any network, specify networkid",
                ip.address
            )));
        }
    };
    let in_vpc = ip.vpc_id.is_some();
    let open_firewall = match p.bool("openfirewall") {
        Some(true) if in_vpc => {
            return Err(ApiError::param(
                "Can't have openFirewall=true when IP address belongs to VPC",
            ));
        }
        Some(v) => v,
        None => !in_vpc,
    };
    let cidrs = if state.version.at_least(4, 18) {
        cidrs_param(ctx)?
    } else {
        None
    };
    let assign_to_tier = ip.network_id.is_none();
    check_network_kind(ctx.caller.is_admin(), ip, network, assign_to_tier, &name)?;
    check_provider(state, network.lb_provider, &protocol, public_port)?;
    let start = i64::from(public_port);
    // FirewallManagerImpl.detectRulesConflict: a load-balancer rule conflicts with any
    // load-balancer or port-forwarding rule on the same address and port, whatever their
    // protocols (no allowance covers LB/LB or LB/PF), so tcp and udp on one public port are a
    // 537.
    forwarding_conflict(state, &ip.id, (public_port, public_port), None)?;
    // `createRuleForAllCidrs`: the opened firewall rule (0.0.0.0/0, the public port) goes
    // through the same conflict detection as any firewall rule.
    let firewall = if open_firewall {
        Some(FirewallRule {
            id: new_id(),
            ip_id: ip.id.clone(),
            protocol: "tcp".into(),
            start_port: Some(start),
            end_port: Some(start),
            icmp_type: None,
            icmp_code: None,
            cidrs: vec!["0.0.0.0/0".into()],
            state: "Add".into(),
            owner: owner.clone(),
        })
    } else {
        None
    };
    if let Some(opened) = &firewall {
        firewall_conflict(state, opened)?;
    }
    let rule = LbRule {
        id: new_id(),
        name,
        description: p.text("description").map(str::to_owned),
        ip_id: ip.id.clone(),
        network_id: network.id.clone(),
        public_port,
        private_port,
        algorithm,
        protocol,
        cidrs,
        cidrs_comma: false,
        state: "Add".into(),
        members: vec![],
        firewall_rule_id: firewall.as_ref().map(|f| f.id.clone()),
        owner,
    };
    let (ip_id, network_id, rule_id) = (ip.id.clone(), network.id.clone(), rule.id.clone());
    // `CreateLoadBalancerRuleCmd.getSyncObjId` is `getNetworkId()`: `networkid` when given.
    let queue = requested_network.map_or_else(|| network_id.clone(), |n| n.id.clone());
    if let Some(ip) = ctx.state.ips.iter_mut().find(|i| i.id == ip_id) {
        ip.network_id.get_or_insert(network_id);
    }
    ctx.state.firewall_rules.extend(firewall);
    ctx.state.lb_rules.push(rule);
    let job = ctx.start_job(
        Some(queue),
        Some(("FirewallRule", rule_id.clone())),
        JobAction::CreateLbRule {
            rule_id: rule_id.clone(),
        },
    );
    Ok(create_reply(&rule_id, &job))
}

/// What `createPublicLoadBalancerRule` and `createPublicLoadBalancer` refuse about the
/// rule's network, in their order:
/// * `NetworkModelImpl.checkIpForService(ip, Lb)` on an isolated network: an address that
///   already serves a service (here its source NAT — a ROUTED network's router address, a
///   VPC's source-NAT address) needs a provider of Lb in the network, else an
///   `InvalidParameterException` that `createPublicLoadBalancerRule` swallows, ending in
///   `CloudRuntimeException("Failed to create load balancer rule: <name>")`: 530 (cs 4250),
///   shown to a root admin only (`ApiServer.handleRequest`);
/// * a VPC address not associated yet goes to the tier through
///   `associateIPToGuestNetwork` ([`guest_association_refusal`]: a ROUTED tier has no
///   SourceNat) — 431, the address stays with its VPC;
/// * `isLbServiceSupportedInNetwork(networkId, Scheme.Public)`: "LB service is not
///   supported in specified network id" (431), then an offering without public LB (the
///   internal-LB tier's) → "Scheme Public is not supported by the network offering
///   <`NetworkOfferingVO.toString`>" (431).
///
/// The 431s leave through [`create_load_balancer_rule`] with `cserrorcode` 9999.
fn check_network_kind(
    caller_is_admin: bool,
    ip: &crate::state::PublicIp,
    network: &crate::state::Network,
    assign_to_tier: bool,
    name: &str,
) -> Result<(), ApiError> {
    if ip.source_nat && !network.is_shared() && !network.offers(Service::Lb) {
        return Err(ApiError::new(
            530,
            Some(4250),
            if caller_is_admin {
                format!("Failed to create load balancer rule: {name}")
            } else {
                "Internal error executing command, please contact your system administrator".into()
            },
        ));
    }
    if assign_to_tier && let Some(refusal) = guest_association_refusal(network) {
        return Err(refusal);
    }
    if !network.offers(Service::Lb) {
        return Err(ApiError::param(
            "LB service is not supported in specified network id",
        ));
    }
    if !network.supports_public_lb() {
        return Err(ApiError::param(format!(
            "Scheme Public is not supported by the network offering {}",
            network.offering_text()
        )));
    }
    Ok(())
}

/// Job of createLoadBalancerRule (`CreateLoadBalancerRuleCmd.execute`): only the firewall
/// rule `openfirewall` made is applied (`applyIngressFirewallRules`); the load-balancer rule
/// itself is not, so it stays `Add` until [`apply_rule`] runs with a member mapped.
pub fn finish_create(
    state: &mut State,
    caller: &super::access::Caller,
    rule_id: &str,
) -> Result<Value, ApiError> {
    if state.internal_lb_rule(rule_id).is_some() {
        return super::internal_lb::finish_create(state, caller.is_admin(), rule_id);
    }
    let rule = state
        .lb_rule(rule_id)
        .cloned()
        .ok_or_else(|| ApiError::internal("Load balancer rule vanished"))?;
    let result = json!({"loadbalancer": render_rule(state, &rule)});
    if let Some(fw) = state
        .firewall_rules
        .iter_mut()
        .find(|f| Some(&f.id) == rule.firewall_rule_id.as_ref())
    {
        fw.state = "Active".into();
    }
    Ok(result)
}

/// Applies a rule's configuration as `LoadBalancingRulesManagerImpl.applyLoadBalancerRules`
/// records it (with `updateRulesInDB`; the Virtual Router and NetScaler allow roll-back, so
/// `applyLoadBalancerConfig` applies this rule alone): `Add` becomes `Active`, and a rule
/// left with no VM mapping goes back to `Add` ("no more active LB-VM mappings"). So a rule
/// is `Active` exactly when it has been applied with at least one member.
///
/// An internal rule is applied the same way (`applyLoadBalancerRules` with the network's
/// rules of scheme Internal; `InternalLoadBalancerElement.applyLBRules` skips a rule with no
/// VM and deploys one InternalLbVm per source address that has a rule with VMs).
pub fn apply_rule(state: &mut State, rule_id: &str) {
    if let Some((rule_state, no_members)) = state.lb_state_mut(rule_id) {
        *rule_state = if no_members { "Add" } else { "Active" }.into();
    }
    if let Some(rule) = state
        .internal_lb_rule(rule_id)
        .filter(|r| !r.members.is_empty())
    {
        let vm = (rule.source_network_id.clone(), rule.source_ip.clone());
        if !state.internal_lb_vms.contains(&vm) {
            state.internal_lb_vms.push(vm);
        }
    }
}

/// updateLoadBalancerRule (`cidrlist` only from 4.22; ignored before, like an unknown
/// parameter). `UpdateLoadBalancerRuleCmd` has no `@ACL` parameter and validates nothing
/// itself: only `id` is resolved before the job is queued; everything else happens in
/// [`finish_update`].
pub fn update_load_balancer_rule(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let p = ctx.params;
    let state = &*ctx.state;
    let rule = lookup_required(p, "id", |id| state.lb_rule(id))?;
    let mut changes = BTreeMap::new();
    for field in ["name", "description", "algorithm", "protocol"] {
        if let Some(v) = p.text(field) {
            changes.insert(field.to_owned(), v.to_owned());
        }
    }
    if state.version.at_least(4, 22)
        && let Some(cidrs) = p.list("cidrlist")
    {
        changes.insert("cidrlist".into(), cidrs.join(","));
    }
    let (rule_id, network) = (rule.id.clone(), rule.network_id.clone());
    let job = ctx.start_job(
        Some(network),
        Some(("FirewallRule", rule_id.clone())),
        JobAction::UpdateLbRule { rule_id, changes },
    );
    Ok(job_reply(&job))
}

/// How the server prints a rule in messages (`LoadBalancerVO.toString`).
fn rule_text(rule: &LbRule) -> String {
    format!(
        "LoadBalancer {{\"uuid\":\"{}\",\"name\":\"{}\"}}",
        rule.id, rule.name
    )
}

/// Job of updateLoadBalancerRule (`LoadBalancingRulesManagerImpl.updateLoadBalancerRule`):
/// the caller's access (530); `cidrlist` entries (431 "Invalid CIDR list: …", stored
/// comma-joined as `StringUtils.join(cidrList, ",")`); then the provider's `validateLbRule`
/// on the changed rule → 431 "Modifications in lb rule … are not supported." The algorithm
/// itself is never validated by the update: the Virtual Router's
/// `NetworkHelperImpl.validateHAProxyLBRule` checks only the stats port 8081, UDP (from 4.15)
/// and the protocol, so an unknown algorithm is stored and the job succeeds there, while
/// `NetscalerElement.validateLBRule` refuses an algorithm it does not know (NSX and Netris
/// accept any; on Netris [`netris_update_refusal`] has refused every `algorithm` before the
/// `cidrlist` check). A changed
/// algorithm or protocol (and from 4.22 a changed `cidrlist`, apache/cloudstack#11568)
/// re-applies the rule (`applyLoadBalancerConfig`, see [`apply_rule`]).
pub fn finish_update(
    state: &mut State,
    caller: &Caller,
    rule_id: &str,
    changes: &BTreeMap<String, String>,
) -> Result<Value, ApiError> {
    let rule = state
        .lb_rule(rule_id)
        .ok_or_else(|| ApiError::param(format!("Unable to find lb rule by id={rule_id}")))?;
    if !caller.can_access(state, &rule.owner) {
        return Err(job_denied(caller, &format!("load balancer rule {rule_id}")));
    }
    let provider = state
        .network(&rule.network_id)
        .map(|n| n.lb_provider)
        .unwrap_or_default();
    if provider == LbProvider::Netris {
        netris_update_refusal(changes)?;
    }
    let mut updated = rule.clone();
    for (field, value) in changes {
        match field.as_str() {
            "name" => updated.name = value.clone(),
            "description" => updated.description = Some(value.clone()),
            "algorithm" => updated.algorithm = value.clone(),
            "protocol" => updated.protocol = value.trim().to_lowercase(),
            "cidrlist" => {
                if value.split(',').any(|c| !check_cidr(c)) {
                    return Err(ApiError::param(format!("Invalid CIDR list: {value}")));
                }
                updated.cidrs = Some(value.split(',').map(str::to_owned).collect());
                updated.cidrs_comma = true;
            }
            _ => {}
        }
    }
    let algorithm_refused =
        provider == LbProvider::Netscaler && check_algorithm(&updated.algorithm).is_err();
    if !PROTOCOLS.contains(&updated.protocol.as_str())
        || check_provider(state, provider, &updated.protocol, updated.public_port).is_err()
        || algorithm_refused
    {
        return Err(ApiError::param(format!(
            "Modifications in lb rule {} are not supported.",
            rule_text(rule)
        )));
    }
    let reapply = updated.algorithm != rule.algorithm
        || updated.protocol != rule.protocol
        || updated.cidrs != rule.cidrs;
    if updated.protocol != "ssl" {
        // `removeCertMapIfExists`: a rule that no longer speaks ssl loses its certificate
        state.cert_bindings.retain(|b| b.rule_id != rule_id);
    }
    if let Some(slot) = state.lb_rules.iter_mut().find(|r| r.id == rule_id) {
        *slot = updated;
    }
    if reapply {
        apply_rule(state, rule_id);
    }
    let rendered = state
        .lb_rule(rule_id)
        .map(|rule| render_rule(state, rule))
        .unwrap_or_default();
    Ok(json!({"loadbalancer": rendered}))
}

/// `LoadBalancingRulesManagerImpl.validateInputsForExternalNetworkProvider`, run by
/// `updateLoadBalancerRule` after the access check and before the `cidrlist` check when the
/// network's offering has Lb by Netris: any `algorithm` at all, and `protocol=tcp-proxy`
/// (any case), are refused (431 in the job).
fn netris_update_refusal(changes: &BTreeMap<String, String>) -> Result<(), ApiError> {
    if let Some(algorithm) = changes.get("algorithm") {
        return Err(ApiError::param(format!(
            "Algorithm: {algorithm} specified for Netris Provider is not supported."
        )));
    }
    if changes
        .get("protocol")
        .is_some_and(|p| p.eq_ignore_ascii_case("tcp-proxy"))
    {
        return Err(ApiError::param(
            "TCP Proxy protocol is not supported for Netris Provider.",
        ));
    }
    Ok(())
}
