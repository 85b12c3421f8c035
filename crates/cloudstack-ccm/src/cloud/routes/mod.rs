//! VPC static routes for the Nodes' pod CIDRs: observe → plan → apply, like the
//! load-balancer engine.
//!
//! Each Node with a pod CIDR whose VM sits on a VPC tier gets one static route in that VPC,
//! `cidr = pod CIDR → nexthop = the Node's InternalIP`, tagged with the cluster name and the
//! Node name. [`observe`] reads the routes (one `listStaticRoutes` call, and `listNetworks` for
//! the tiers' VPCs), [`plan`] compares
//! them with what the Nodes need (pure, so `cloudstack-ccm plan` prints it and tests assert
//! on it), and [`apply`] runs the plan, serialising each VPC's jobs through a network job queue
//! ([`crate::cloud::job_queue`]; the route controller's own, keyed by VPC id). Routes without this
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

/// Whether a route to `destination` is this controller's to change under `--cluster-cidr`
/// (`cluster_cidrs`): every route when none is given, else only those inside one. A
/// tagged route outside is left alone, by the route controller and by the orphan pass.
pub(crate) fn within_cluster_cidrs(cluster_cidrs: &[Cidr], destination: Option<Cidr>) -> bool {
    cluster_cidrs.is_empty()
        || destination.is_some_and(|d| cluster_cidrs.iter().any(|c| c.contains(&d)))
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
    pub(crate) fn is_owned_by(&self, cluster: &str) -> bool {
        self.cluster.as_deref() == Some(cluster)
    }

    /// The parsed destination.
    pub(crate) fn destination(&self) -> Option<Cidr> {
        Cidr::parse(&self.cidr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_gate() {
        assert!(unsupported_reason(&cloudstack::ServerVersion::new(4, 22, 0)).is_none());
        let reason = unsupported_reason(&cloudstack::ServerVersion::new(4, 21, 1)).unwrap();
        assert!(reason.contains("needs 4.22"), "{reason}");
    }
}
