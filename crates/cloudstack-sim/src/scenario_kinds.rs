//! A built-in scenario with every kind of network a CCM meets beside the NATTED isolated
//! ones: ROUTED (isolated and VPC tier), shared, NSX, Netris and a VPC tier with the
//! Internal Load Balancer.

use crate::scenario::{
    AclListSpec, GuestType, LbProvider, NetworkMode, NetworkSpec, NicSpec, Scenario, VmSpec,
    VpcSpec,
};
use crate::scenario_small::SMALL_ZONE;

/// ROUTED isolated network (Virtual Router) in [`Scenario::network_kinds`].
pub const KINDS_ROUTED_NETWORK: &str = "net-routed";
/// VPC of the ROUTED tier in [`Scenario::network_kinds`].
pub const KINDS_ROUTED_VPC: &str = "vpc-routed";
/// ROUTED VPC tier (VPC Virtual Router, ACL list `default_allow`) in
/// [`Scenario::network_kinds`].
pub const KINDS_ROUTED_TIER: &str = "tier-routed";
/// Shared network (Dhcp, Dns, UserData only) in [`Scenario::network_kinds`].
pub const KINDS_SHARED_NETWORK: &str = "net-shared";
/// NATTED isolated network with NSX as Lb, Firewall, NAT provider in
/// [`Scenario::network_kinds`].
pub const KINDS_NSX_NETWORK: &str = "net-nsx";
/// VPC of the Netris tier in [`Scenario::network_kinds`].
pub const KINDS_NETRIS_VPC: &str = "vpc-netris";
/// ACL list of the Netris tier in [`Scenario::network_kinds`].
pub const KINDS_NETRIS_ACL: &str = "tier-netris-acl";
/// NATTED VPC tier with Netris as Lb, NetworkACL, NAT provider in
/// [`Scenario::network_kinds`].
pub const KINDS_NETRIS_TIER: &str = "tier-netris";
/// VPC of the internal-LB tier in [`Scenario::network_kinds`].
pub const KINDS_INTERNAL_LB_VPC: &str = "vpc-ilb";
/// ACL list of the internal-LB tier in [`Scenario::network_kinds`].
pub const KINDS_INTERNAL_LB_ACL: &str = "tier-ilb-acl";
/// NATTED VPC tier whose offering is
/// `DefaultIsolatedNetworkOfferingForVpcNetworksWithInternalLB` (Lb by InternalLbVm, scheme
/// Internal only; the other services by the VPC Virtual Router) in
/// [`Scenario::network_kinds`].
pub const KINDS_INTERNAL_LB_TIER: &str = "tier-ilb";

fn vpc(name: &str, cidr: &str) -> VpcSpec {
    VpcSpec {
        id: None,
        name: name.into(),
        zone: SMALL_ZONE.into(),
        cidr: cidr.into(),
        account: Some("alice".into()),
        project: None,
    }
}

fn network(name: &str, cidr: &str, vpc: Option<&str>, acl: Option<&str>) -> NetworkSpec {
    NetworkSpec {
        name: name.into(),
        zone: SMALL_ZONE.into(),
        cidr: cidr.into(),
        vpc: vpc.map(str::to_owned),
        acl: acl.map(str::to_owned),
        account: Some("alice".into()),
        ..NetworkSpec::default()
    }
}

/// A Running VM of alice's with one default NIC.
fn vm(name: &str, network: &str, ipv4: &str) -> VmSpec {
    VmSpec {
        id: None,
        name: name.into(),
        state: "Running".into(),
        zone: SMALL_ZONE.into(),
        offering: "small".into(),
        nics: vec![NicSpec {
            network: network.into(),
            ipv4: ipv4.into(),
            ipv6: None,
            isdefault: true,
        }],
        static_nat_ip: None,
        account: Some("alice".into()),
        project: None,
    }
}

impl Scenario {
    /// [`Scenario::small`] plus, all alice's, each with one Running VM of alice's:
    /// * `net-routed` (10.1.10.0/24): ROUTED isolated, Virtual Router — VM `vm-routed`
    ///   10.1.10.10;
    /// * `tier-routed` (10.200.1.0/24): ROUTED tier of VPC `vpc-routed` (10.200.0.0/16),
    ///   VPC Virtual Router, ACL list `default_allow` — VM `vm-tier-routed` 10.200.1.10;
    /// * `net-shared` (10.1.20.0/24): Shared, services Dhcp, Dns, UserData — VM `vm-shared`
    ///   10.1.20.10;
    /// * `net-nsx` (10.1.30.0/24): NATTED isolated with NSX as Lb, Firewall, SourceNat,
    ///   StaticNat and PortForwarding provider — VM `vm-nsx` 10.1.30.10;
    /// * `tier-netris` (10.210.1.0/24): NATTED tier of VPC `vpc-netris` (10.210.0.0/16)
    ///   with Netris as Lb, NetworkACL and NAT provider, ACL list `tier-netris-acl` — VM
    ///   `vm-netris` 10.210.1.10;
    /// * `tier-ilb` (10.220.1.0/24): NATTED tier of VPC `vpc-ilb` (10.220.0.0/16) with the
    ///   Internal Load Balancer (`LbProvider::InternalLbVm`: `createLoadBalancer
    ///   scheme=Internal` only, public rules refused), ACL list `tier-ilb-acl` — VM `vm-ilb`
    ///   10.220.1.10.
    ///
    /// `net-routed`, `net-nsx` and both new VPCs hold a source-NAT address of the zone pool
    /// (for `net-routed`, its router's address: the next hop of its `ip4routes`).
    pub fn network_kinds() -> Self {
        let mut scenario = Scenario::small();
        scenario.vpcs.push(vpc(KINDS_ROUTED_VPC, "10.200.0.0/16"));
        scenario.vpcs.push(vpc(KINDS_NETRIS_VPC, "10.210.0.0/16"));
        scenario
            .vpcs
            .push(vpc(KINDS_INTERNAL_LB_VPC, "10.220.0.0/16"));
        scenario.acl_lists.push(AclListSpec {
            id: None,
            name: KINDS_NETRIS_ACL.into(),
            vpc: KINDS_NETRIS_VPC.into(),
            description: Some("ingress rules of tier-netris".into()),
        });
        scenario.acl_lists.push(AclListSpec {
            id: None,
            name: KINDS_INTERNAL_LB_ACL.into(),
            vpc: KINDS_INTERNAL_LB_VPC.into(),
            description: Some("ingress rules of tier-ilb".into()),
        });
        scenario.networks.extend([
            NetworkSpec {
                network_mode: NetworkMode::Routed,
                ..network(KINDS_ROUTED_NETWORK, "10.1.10.0/24", None, None)
            },
            NetworkSpec {
                network_mode: NetworkMode::Routed,
                ..network(
                    KINDS_ROUTED_TIER,
                    "10.200.1.0/24",
                    Some(KINDS_ROUTED_VPC),
                    None,
                )
            },
            NetworkSpec {
                guest_type: GuestType::Shared,
                ..network(KINDS_SHARED_NETWORK, "10.1.20.0/24", None, None)
            },
            NetworkSpec {
                lb_provider: LbProvider::Nsx,
                ..network(KINDS_NSX_NETWORK, "10.1.30.0/24", None, None)
            },
            NetworkSpec {
                lb_provider: LbProvider::Netris,
                ..network(
                    KINDS_NETRIS_TIER,
                    "10.210.1.0/24",
                    Some(KINDS_NETRIS_VPC),
                    Some(KINDS_NETRIS_ACL),
                )
            },
            NetworkSpec {
                lb_provider: LbProvider::InternalLbVm,
                ..network(
                    KINDS_INTERNAL_LB_TIER,
                    "10.220.1.0/24",
                    Some(KINDS_INTERNAL_LB_VPC),
                    Some(KINDS_INTERNAL_LB_ACL),
                )
            },
        ]);
        scenario.vms.extend([
            vm("vm-routed", KINDS_ROUTED_NETWORK, "10.1.10.10"),
            vm("vm-tier-routed", KINDS_ROUTED_TIER, "10.200.1.10"),
            vm("vm-shared", KINDS_SHARED_NETWORK, "10.1.20.10"),
            vm("vm-nsx", KINDS_NSX_NETWORK, "10.1.30.10"),
            vm("vm-netris", KINDS_NETRIS_TIER, "10.210.1.10"),
            vm("vm-ilb", KINDS_INTERNAL_LB_TIER, "10.220.1.10"),
        ]);
        scenario
    }
}
