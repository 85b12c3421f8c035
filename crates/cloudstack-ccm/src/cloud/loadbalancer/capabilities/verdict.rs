//! What the controller does on a network, from its capabilities: whether a public or an
//! internal load balancer can be built there and why not, and what kind of network it is.
//! The planner refuses a Service with these reasons and `cloudstack-ccm check` shows them
//! per network: one decision for both.

use super::{LbProviderKind, NetworkCapabilities};

impl NetworkCapabilities {
    /// Why the network has no CloudStack load balancer, when it has none: ROUTED mode, a
    /// shared network, or an offering without `Lb`.
    pub(crate) fn no_load_balancer_reason(&self) -> Option<&'static str> {
        if self.has_lb {
            return None;
        }
        Some(if self.routed {
            "it is in ROUTED mode (ip4routing): CloudStack routes its subnet and has no load balancer there; give the Service a loadBalancerClass served by MetalLB or Cilium LB-IPAM"
        } else if self.shared {
            "it is a shared network without the Lb service; give the Service a loadBalancerClass served by MetalLB or Cilium LB-IPAM"
        } else {
            "its network offering has no Lb service"
        })
    }

    /// Why a public load balancer cannot be built on this network, if it cannot: no
    /// load balancer at all ([`Self::no_load_balancer_reason`]), or an offering with the
    /// internal scheme only. The planner refuses the Service with it, and
    /// `cloudstack-ccm check` shows it per network: one decision for both.
    pub(crate) fn public_refusal(&self) -> Option<String> {
        if let Some(why) = self.no_load_balancer_reason() {
            return Some(why.to_string());
        }
        (!self.lb_schemes.public).then(|| {
            format!(
                "its network offering has the {} load-balancer scheme only (provider {}): annotate the Service with service.beta.kubernetes.io/cloudstack-load-balancer-internal: \"true\" for a load balancer reachable inside the VPC, or give it a loadBalancerClass",
                self.lb_schemes.describe(),
                self.lb_provider.as_deref().unwrap_or("unknown")
            )
        })
    }

    /// Why an internal load balancer cannot be built on this network, if it cannot, and
    /// what the network offers instead (shared by the planner and `cloudstack-ccm check`).
    pub(crate) fn internal_refusal(&self) -> Option<String> {
        if self.lb_schemes.internal {
            return None;
        }
        if self.vpc_id.is_none() {
            return Some("it is not a VPC tier: CloudStack's internal load balancer serves VPC tiers only; remove service.beta.kubernetes.io/cloudstack-load-balancer-internal for a public load balancer".into());
        }
        Some(match self.no_load_balancer_reason() {
            Some(why) => why.to_string(),
            None => format!(
                "its network offering has the {} load-balancer scheme only, not the internal one (provider InternalLbVm, e.g. DefaultIsolatedNetworkOfferingForVpcNetworksWithInternalLB); remove service.beta.kubernetes.io/cloudstack-load-balancer-internal for a public load balancer",
                self.lb_schemes.describe()
            ),
        })
    }

    /// What kind of network this is, for a person: `ROUTED`, `shared`, `NSX`, `Netris`,
    /// `internal-LB tier`, `VPC tier`, `isolated`.
    pub(crate) fn kind(&self) -> &'static str {
        if self.routed {
            "ROUTED"
        } else if self.shared {
            "shared"
        } else if self.lb_kind == LbProviderKind::Nsx {
            "NSX"
        } else if self.lb_kind == LbProviderKind::Netris {
            "Netris"
        } else if self.lb_schemes.internal && !self.lb_schemes.public {
            "internal-LB tier"
        } else if self.vpc_id.is_some() {
            "VPC tier"
        } else {
            "isolated"
        }
    }
}
