//! Refusing (or warning about) what the network's load-balancer provider cannot do.

use super::*;

pub(super) fn check_capabilities(
    spec: &LbSpec,
    ctx: &PlanContext,
    warnings: &mut Vec<String>,
) -> Result<(), PlanError> {
    let caps = &ctx.network;
    let network = caps.network_label();
    if let Some(why) = caps.public_refusal() {
        return Err(PlanError::NoLoadBalancing { network, why });
    }
    for rule in &spec.rules {
        if caps.reserved_ports.contains(&rule.public_port) {
            return Err(PlanError::PortReserved {
                port: rule.public_port,
                network,
                provider: caps.lb_provider.clone().unwrap_or_else(|| "unknown".into()),
            });
        }
        if !caps.lb_protocols.contains(&rule.protocol) {
            return Err(PlanError::UnsupportedProtocol {
                port: rule.public_port,
                protocol: rule.protocol,
                network,
                provider: caps.lb_provider.clone().unwrap_or_else(|| "unknown".into()),
            });
        }
    }
    if !caps.lb_algorithms.contains(&spec.algorithm) {
        return Err(PlanError::UnsupportedAlgorithm {
            algorithm: spec.algorithm,
            network,
        });
    }
    if spec.health_check.is_some() {
        if !caps.health_check {
            return Err(PlanError::HealthCheckUnsupported { network });
        }
        for rule in spec.rules.iter().filter(|r| r.protocol == LbProtocol::Udp) {
            warnings.push(format!(
                "no health check on UDP port {}: CloudStack's health checks probe over HTTP",
                rule.public_port
            ));
        }
    }
    if let Some(s) = &spec.stickiness
        && !caps.stickiness_methods.contains(&s.method)
    {
        return Err(PlanError::StickinessUnsupported {
            method: s.method.to_string(),
            network,
        });
    }
    if spec.rule_cidrs.as_ref().is_some_and(|c| !c.is_empty()) && !ctx.server.lb_cidrlist_on_create
    {
        let (ma, mi, pa) = ctx.server.version;
        warnings.push(format!(
            "source-cidrs ignored: CloudStack {ma}.{mi}.{pa} has no load-balancer rule cidrlist (needs 4.18)"
        ));
    }
    Ok(())
}
