//! VPC static routes for the Nodes' pod CIDRs: observe → plan → apply, like the
//! load-balancer engine.
//!
//! Each Node with a pod CIDR whose VM sits on a VPC tier gets one static route in that VPC,
//! `cidr = pod CIDR → nexthop = the Node's InternalIP`, tagged with the cluster name and the
//! Node name. [`observe`] reads the routes (one `listStaticRoutes` call), [`plan`] compares
//! them with what the Nodes need (pure, so `cloudstack-ccm plan` prints it and tests assert
//! on it), and [`apply`] runs the plan, serialising each VPC's jobs through the shared
//! network job queue ([`crate::cloud::loadbalancer::job_queue`]). Routes without this
//! cluster's tag are never changed.

pub mod apply;
pub mod observe;
pub mod plan;

use std::net::IpAddr;

use crate::cloud::cidr::Cidr;

/// The first CloudStack version whose `createStaticRoute` takes `vpcid` + `nexthop`
/// (`CreateStaticRouteCmd`, 4.22.0; before it a route needs a private gateway).
pub(crate) const NEXT_HOP_SINCE: (u32, u32) = (4, 22);

/// Why routes cannot be managed on this server, if they cannot.
pub(crate) fn unsupported_reason(version: &cloudstack::ServerVersion) -> Option<String> {
    let (major, minor) = NEXT_HOP_SINCE;
    (!version.at_least(major, minor, 0)).then(|| {
        format!(
            "CloudStack {version} has no next-hop static routes (createStaticRoute nexthop needs {major}.{minor})"
        )
    })
}

/// True when `inner` lies inside `outer` (same address family).
pub(crate) fn cidr_contains(outer: &Cidr, inner: &Cidr) -> bool {
    if outer.prefix > inner.prefix {
        return false;
    }
    match (outer.addr, inner.addr) {
        (IpAddr::V4(o), IpAddr::V4(i)) => {
            let mask = u32::MAX
                .checked_shl(32 - u32::from(outer.prefix))
                .unwrap_or(0);
            u32::from(o) & mask == u32::from(i) & mask
        }
        (IpAddr::V6(o), IpAddr::V6(i)) => {
            let mask = u128::MAX
                .checked_shl(128 - u32::from(outer.prefix))
                .unwrap_or(0);
            u128::from(o) & mask == u128::from(i) & mask
        }
        _ => false,
    }
}

/// True when the two networks overlap (one contains the other).
pub(crate) fn cidrs_overlap(a: &Cidr, b: &Cidr) -> bool {
    cidr_contains(a, b) || cidr_contains(b, a)
}

/// The route one Node needs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct DesiredRoute {
    /// Node name.
    pub node: String,
    /// VPC of the Node's VM.
    pub vpc_id: String,
    /// The pod CIDR (IPv4).
    pub cidr: Cidr,
    /// The Node's InternalIP.
    pub next_hop: IpAddr,
}

/// A static route as CloudStack lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedRoute {
    /// Route id.
    pub id: String,
    /// VPC id.
    pub vpc_id: String,
    /// Destination CIDR as listed.
    pub cidr: String,
    /// Next hop (absent for a private-gateway route).
    pub next_hop: Option<String>,
    /// Value of the cluster tag.
    pub cluster: Option<String>,
    /// Value of the Node tag.
    pub node: Option<String>,
}

impl ObservedRoute {
    /// Whether this route carries `cluster`'s tag.
    pub fn is_owned_by(&self, cluster: &str) -> bool {
        self.cluster.as_deref() == Some(cluster)
    }

    /// The parsed destination.
    pub fn destination(&self) -> Option<Cidr> {
        Cidr::parse(&self.cidr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(text: &str) -> Cidr {
        Cidr::parse(text).unwrap()
    }

    #[test]
    fn containment_and_overlap() {
        assert!(cidr_contains(
            &cidr("10.244.0.0/16"),
            &cidr("10.244.3.0/24")
        ));
        assert!(!cidr_contains(
            &cidr("10.244.3.0/24"),
            &cidr("10.244.0.0/16")
        ));
        assert!(!cidr_contains(
            &cidr("10.245.0.0/16"),
            &cidr("10.244.3.0/24")
        ));
        assert!(cidr_contains(&cidr("0.0.0.0/0"), &cidr("10.244.3.0/24")));
        assert!(cidr_contains(&cidr("fd00::/48"), &cidr("fd00:0:0:1::/64")));
        assert!(!cidr_contains(&cidr("fd00::/48"), &cidr("10.0.0.0/8")));
        assert!(cidrs_overlap(
            &cidr("10.244.3.0/24"),
            &cidr("10.244.0.0/16")
        ));
        assert!(!cidrs_overlap(
            &cidr("10.244.3.0/24"),
            &cidr("10.244.4.0/24")
        ));
    }

    #[test]
    fn version_gate() {
        assert!(unsupported_reason(&cloudstack::ServerVersion::new(4, 22, 0)).is_none());
        let reason = unsupported_reason(&cloudstack::ServerVersion::new(4, 21, 1)).unwrap();
        assert!(reason.contains("needs 4.22"), "{reason}");
    }
}
