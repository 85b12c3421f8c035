//! Which IP the load balancer uses, and whether to associate one.

use super::*;

pub(super) fn ip_address(observed: &ObservedLb) -> Option<IpAddr> {
    observed.ip.as_ref().map(|ip| ip.address)
}

/// Decides which IP to use and whether to associate one.
pub(super) fn plan_ip(
    spec: &LbSpec,
    observed: &ObservedLb,
    ctx: &PlanContext,
) -> Result<(IpRef, Option<Step>), PlanError> {
    let caps = &ctx.network;
    let target = match &caps.vpc_id {
        Some(vpc) => AssociateTarget::Vpc(vpc.clone()),
        None => AssociateTarget::Network(caps.network_id.clone()),
    };
    let Some(ip) = &observed.ip else {
        if let Some(address) = spec.requested_ip {
            return Err(PlanError::RequestedIpNotFound { address });
        }
        return Ok((
            IpRef::Associated,
            Some(Step::AssociateIp {
                target,
                address: None,
                replacing: observed.taken_ip.as_ref().map(|taken| taken.id.clone()),
            }),
        ));
    };
    if let Some(requested) = spec.requested_ip
        && requested != ip.address
    {
        return Err(PlanError::RequestedIpChanged {
            current: ip.address,
            requested,
        });
    }
    match &ip.ownership {
        IpOwnership::OtherAccount(owner) => {
            return Err(PlanError::IpOwnedByOtherAccount {
                address: ip.address,
                owner: owner.clone(),
            });
        }
        IpOwnership::Free => {
            return Ok((
                IpRef::Associated,
                Some(Step::AssociateIp {
                    target,
                    address: Some(ip.address),
                    replacing: None,
                }),
            ));
        }
        IpOwnership::Ours => {}
    }
    if ip.is_static_nat {
        return Err(PlanError::IpIsStaticNat {
            address: ip.address,
        });
    }
    let wrong_place = match &caps.vpc_id {
        Some(vpc) => {
            ip.vpc_id.as_ref().is_some_and(|v| v != vpc)
                || ip
                    .associated_network_id
                    .as_ref()
                    .is_some_and(|n| n != &caps.network_id)
                || (ip.vpc_id.is_none() && ip.associated_network_id.is_some())
        }
        None => {
            ip.vpc_id.is_some()
                || ip
                    .associated_network_id
                    .as_ref()
                    .is_some_and(|n| n != &caps.network_id)
        }
    };
    if wrong_place {
        let actual = ip
            .associated_network_id
            .clone()
            .or_else(|| ip.vpc_id.as_ref().map(|v| format!("VPC {v}")))
            .unwrap_or_default();
        return Err(PlanError::IpOnOtherNetwork {
            address: ip.address,
            actual,
            expected: caps.network_label(),
        });
    }
    if spec.pending_claim() == Some(ip.address) {
        return Ok((
            IpRef::Associated,
            Some(Step::AdoptClaimedIp {
                target,
                id: ip.id.clone(),
                address: ip.address,
            }),
        ));
    }
    Ok((
        IpRef::Existing {
            id: ip.id.clone(),
            address: ip.address,
        },
        None,
    ))
}
