//! The plan of an internal load balancer (CloudStack's Internal LB on a VPC tier, see
//! docs/networks.md): one internal rule per TCP port (`createLoadBalancer`, one port pair
//! each), all on one address of the tier, members as for public rules. Pure.
//!
//! CloudStack gives the first rule a free address of the tier when none is named; the
//! others name it (`detectInternalLbRulesConflict` lets rules share an address on
//! different ports). So a new load balancer's first rule goes one phase ahead of the
//! others. An internal rule cannot be changed in place (no update command takes its
//! ports or algorithm): a changed one is deleted and created again, the delete first
//! when the port is needed on the same address. A new address gets its rules before the
//! old address loses its own.

use super::members::member_steps;
use super::*;
use crate::cloud::loadbalancer::observe::ObservedInternalRule;

/// Plans `spec`'s internal load balancer on the backends' tier from its `observed`
/// internal rules.
pub(crate) fn plan_internal(
    spec: &LbSpec,
    observed: &[ObservedInternalRule],
    backends: &Backends,
    ctx: &PlanContext,
) -> Result<Plan, PlanError> {
    let caps = &ctx.network;
    check_internal(caps)?;
    if spec.rules.is_empty() {
        return Err(PlanError::NoPortServed {
            reasons: "CloudStack's internal load balancer has TCP rules only".into(),
        });
    }
    // The InternalLbVm is an HAProxy like the Virtual Router's: once it stands, its
    // statistics port is refused (`validateHAProxyLBRule`).
    if let Some(rule) = spec
        .rules
        .iter()
        .find(|r| caps.reserved_ports.contains(&r.public_port))
    {
        return Err(PlanError::PortReserved {
            port: rule.public_port,
            network: caps.network_label(),
            provider: caps.lb_provider.clone().unwrap_or_else(|| "unknown".into()),
        });
    }
    if !caps.lb_algorithms.contains(&spec.algorithm) {
        return Err(PlanError::UnsupportedAlgorithm {
            algorithm: spec.algorithm,
            network: caps.network_label(),
        });
    }
    let asked = spec.internal.as_ref().and_then(|i| i.address);
    let address = asked.or_else(|| observed.iter().find_map(|r| r.address));
    let mut stages: [Vec<Step>; 4] = Default::default();
    let mut used: BTreeSet<&str> = BTreeSet::new();
    let mut created = Vec::new();
    let mut acquire_first = address.is_none();
    let mut warnings = Vec::new();
    if backends.vm_ids.is_empty() {
        warnings.push("no eligible nodes: the load balancer has no members".into());
    }
    if let Some(warning) = acl_warning(spec, caps) {
        warnings.push(warning);
    }
    for rule in &spec.rules {
        let key = (IpProtocol::Tcp, rule.public_port);
        // A rule on another address is not this one: the new rule stands before the old
        // one goes, so moving the address leaves no gap.
        let found = observed.iter().find(|o| {
            o.name == rule.name
                && !used.contains(o.id.as_str())
                && (address.is_none() || o.address == address)
        });
        if let Some(o) = found {
            used.insert(o.id.as_str());
            let unchanged = o.source_port == rule.public_port
                && o.instance_port == rule.node_port
                && o.algorithm == Some(spec.algorithm);
            if unchanged {
                let r = RuleRef::Existing {
                    id: o.id.clone(),
                    name: o.name.clone(),
                };
                stages[Stage::Build as usize].extend(member_steps(backends, key, r, &o.members));
                continue;
            }
            stages[Stage::Prepare as usize].push(Step::DeleteInternalRule {
                id: o.id.clone(),
                name: o.name.clone(),
            });
        }
        let (on, stage) = match address {
            Some(address) => (InternalAddress::Known(address), Stage::Build),
            None if acquire_first => {
                acquire_first = false;
                (InternalAddress::Acquire, Stage::Claim)
            }
            None => (InternalAddress::OfFirstRule, Stage::Build),
        };
        stages[stage as usize].push(Step::CreateInternalRule {
            name: rule.name.clone(),
            network_id: backends.network_id.clone(),
            address: on,
            source_port: rule.public_port,
            instance_port: rule.node_port,
            algorithm: spec.algorithm,
        });
        let r = RuleRef::Created {
            name: rule.name.clone(),
        };
        stages[Stage::Finish as usize].extend(member_steps(backends, key, r, &BTreeSet::new()));
        created.push(rule.name.clone());
    }
    // Rules no port wants: first when a new rule needs their port on the same address.
    for o in observed.iter().filter(|o| !used.contains(o.id.as_str())) {
        let in_the_way = spec.rules.iter().any(|r| r.public_port == o.source_port)
            && (address.is_none() || o.address == address);
        let stage = if in_the_way {
            Stage::Prepare
        } else {
            Stage::Finish
        };
        stages[stage as usize].push(Step::DeleteInternalRule {
            id: o.id.clone(),
            name: o.name.clone(),
        });
    }
    let owner = owner_tags(&ctx.cluster_name, &spec.service.uid);
    let mut resources: Vec<ResourceRef> =
        created.into_iter().map(ResourceRef::CreatedRule).collect();
    resources.extend(
        observed
            .iter()
            .filter(|o| {
                used.contains(o.id.as_str()) && owner.iter().any(|(k, v)| o.tags.get(k) != Some(v))
            })
            .filter(|o| {
                !stages[Stage::Prepare as usize]
                    .iter()
                    .any(|s| deletes(s, &o.id))
            })
            .map(|o| ResourceRef::Existing(o.id.clone())),
    );
    if !resources.is_empty() {
        stages[Stage::Finish as usize].push(Step::TagResources {
            resource_type: TagResourceType::LoadBalancer,
            resources,
            tags: owner,
        });
    }
    Ok(Plan::from_phases(stages.into(), warnings))
}

/// What the tier's ACL list means for the internal rules: the controller opens no ACL
/// items for them (the VPC's tiers reach one another through the tier's ACL list), so any
/// list but `default_allow` must admit their ports itself.
fn acl_warning(spec: &LbSpec, caps: &NetworkCapabilities) -> Option<String> {
    let PortAccess::NetworkAcl { acl_name, .. } = &caps.port_access else {
        return None;
    };
    let name = acl_name.as_deref().unwrap_or("none");
    if name == "default_allow" {
        return None;
    }
    let ports: Vec<String> = spec
        .rules
        .iter()
        .map(|r| r.public_port.to_string())
        .collect();
    Some(format!(
        "ACL list {name} of tier {}: the controller opens no ACL items for internal rules; the list must admit TCP port(s) {} from the tiers that use them",
        caps.network_label(),
        ports.join(", ")
    ))
}

/// Refuses a network without CloudStack's internal load balancer, naming what it offers.
pub(crate) fn check_internal(caps: &NetworkCapabilities) -> Result<(), PlanError> {
    match caps.internal_refusal() {
        None => Ok(()),
        Some(why) => Err(PlanError::NoInternalLoadBalancing {
            network: caps.network_label(),
            why,
        }),
    }
}

/// Whether `step` deletes the internal rule `id`.
fn deletes(step: &Step, id: &str) -> bool {
    matches!(step, Step::DeleteInternalRule { id: i, .. } if i == id)
}

/// The deletion of every observed internal rule (the Service went away or became
/// public), in one phase.
pub(crate) fn plan_internal_delete(observed: &[ObservedInternalRule]) -> Plan {
    let steps = observed
        .iter()
        .map(|o| Step::DeleteInternalRule {
            id: o.id.clone(),
            name: o.name.clone(),
        })
        .collect();
    Plan::from_phases(vec![steps], Vec::new())
}
