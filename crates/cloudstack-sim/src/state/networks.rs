//! Guest networks: their kind (isolated, VPC tier or shared; NATTED or ROUTED), the services
//! their offering gives them with each service's provider, and the routing firewall rules of
//! ROUTED networks.

use super::Owner;
use crate::scenario::{GuestType, LbProvider, NetworkMode};
use serde::{Deserialize, Serialize};

/// A guest network.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Network {
    /// Id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Zone id.
    pub zone_id: String,
    /// CIDR.
    pub cidr: String,
    /// VPC id for a tier.
    pub vpc_id: Option<String>,
    /// ACL list id for a tier.
    pub acl_id: Option<String>,
    /// LB provider (for a ROUTED network: the Firewall/NetworkACL provider).
    pub lb_provider: LbProvider,
    /// NATTED or ROUTED; state files written before modes load NATTED.
    #[serde(default)]
    pub mode: NetworkMode,
    /// Isolated or Shared; state files written before guest types load Isolated.
    #[serde(default)]
    pub guest_type: GuestType,
    /// Owner.
    pub owner: Owner,
}

/// A network service (CloudStack `Network.Service`) as `listNetworks` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    /// Load balancing.
    Lb,
    /// Source NAT.
    SourceNat,
    /// Port forwarding.
    PortForwarding,
    /// Static NAT.
    StaticNat,
    /// DHCP.
    Dhcp,
    /// DNS.
    Dns,
    /// User data.
    UserData,
    /// Firewall (isolated networks).
    Firewall,
    /// Network ACL (VPC tiers).
    NetworkAcl,
}

impl Service {
    /// The service's name in the API.
    pub fn name(self) -> &'static str {
        match self {
            Self::Lb => "Lb",
            Self::SourceNat => "SourceNat",
            Self::PortForwarding => "PortForwarding",
            Self::StaticNat => "StaticNat",
            Self::Dhcp => "Dhcp",
            Self::Dns => "Dns",
            Self::UserData => "UserData",
            Self::Firewall => "Firewall",
            Self::NetworkAcl => "NetworkACL",
        }
    }
}

impl Network {
    /// A VPC tier (NetworkACL service) rather than an isolated network (Firewall service).
    pub fn is_tier(&self) -> bool {
        self.vpc_id.is_some()
    }

    /// A ROUTED network (`RoutedIpv4Manager.isRoutedNetwork`).
    pub fn is_routed(&self) -> bool {
        self.mode == NetworkMode::Routed
    }

    /// A shared network.
    pub fn is_shared(&self) -> bool {
        self.guest_type == GuestType::Shared
    }

    /// The services of the network's offering with their provider, in the order
    /// `listNetworks` prints them:
    /// * shared (`DefaultSharedNetworkOffering`): Dhcp, Dns, UserData by the Virtual Router;
    /// * ROUTED: Dhcp, Dns, UserData by the (VPC) Virtual Router, and Firewall (isolated) or
    ///   NetworkACL (tier) by the router or NSX/Netris — "SourceNat/StaticNat/Lb/
    ///   PortForwarding/Vpn service are not supported in ROUTED mode"
    ///   (`createNetworkOffering`);
    /// * NATTED: Lb by the LB provider (InternalLbVm on an internal-LB tier:
    ///   `NetworkOrchestrator.configure`'s `internalLbOffProviders`, which has no
    ///   PortForwarding and no StaticNat); SourceNat, PortForwarding, StaticNat and
    ///   Firewall/NetworkACL by the router, or by NSX/Netris on their networks (the NAT
    ///   offerings of `NsxElement`/`NetrisElement`); Dhcp, Dns, UserData by the router.
    pub fn services(&self) -> Vec<(Service, &'static str)> {
        let router = if self.is_tier() {
            "VpcVirtualRouter"
        } else {
            "VirtualRouter"
        };
        let filter = if self.is_tier() {
            Service::NetworkAcl
        } else {
            Service::Firewall
        };
        let external = match self.lb_provider {
            LbProvider::Nsx => Some("Nsx"),
            LbProvider::Netris => Some("Netris"),
            LbProvider::VirtualRouter | LbProvider::Netscaler | LbProvider::InternalLbVm => None,
        };
        let rules = external.unwrap_or(router);
        let basic = [
            (Service::Dhcp, router),
            (Service::Dns, router),
            (Service::UserData, router),
        ];
        if self.is_shared() {
            return basic.to_vec();
        }
        if self.is_routed() {
            let mut list = basic.to_vec();
            list.push((filter, rules));
            return list;
        }
        let lb = match self.lb_provider {
            LbProvider::VirtualRouter => router,
            LbProvider::Netscaler => "Netscaler",
            LbProvider::InternalLbVm => "InternalLbVm",
            LbProvider::Nsx | LbProvider::Netris => rules,
        };
        let mut list = vec![(Service::Lb, lb), (Service::SourceNat, rules)];
        // `internalLbOffProviders` (NetworkOrchestrator/ConfigurationServerImpl): Dhcp, Dns,
        // UserData, NetworkACL, Gateway, Lb by InternalLbVm, SourceNat — no PortForwarding,
        // no StaticNat.
        if self.lb_provider != LbProvider::InternalLbVm {
            list.extend([
                (Service::PortForwarding, rules),
                (Service::StaticNat, rules),
            ]);
        }
        list.extend(basic);
        list.push((filter, rules));
        list
    }

    /// The provider of `service` in this network, if the network has the service.
    pub fn provider(&self, service: Service) -> Option<&'static str> {
        self.services()
            .into_iter()
            .find(|(s, _)| *s == service)
            .map(|(_, p)| p)
    }

    /// Whether the network has `service` (`NetworkModel.areServicesSupportedInNetwork`).
    pub fn offers(&self, service: Service) -> bool {
        self.provider(service).is_some()
    }

    /// The offering name `listNetworks` shows: the default offerings' unique names of
    /// `NetworkOffering` (the Netris ones follow the names of their constants
    /// `DEFAULT_NAT_NETRIS_OFFERING_FOR_VPC`/`DEFAULT_ROUTED_NETRIS_OFFERING_FOR_VPC`, whose
    /// values were not read); a ROUTED Virtual Router offering is the operator's own, named
    /// here after what it is.
    pub fn offering_name(&self) -> &'static str {
        match (self.guest_type, self.mode, self.is_tier(), self.lb_provider) {
            (GuestType::Shared, ..) => "DefaultSharedNetworkOffering",
            (_, NetworkMode::Routed, false, LbProvider::Nsx) => "DefaultRoutedNSXNetworkOffering",
            (_, NetworkMode::Routed, true, LbProvider::Nsx) => {
                "DefaultRoutedNSXNetworkOfferingForVpc"
            }
            (_, NetworkMode::Routed, true, LbProvider::Netris) => {
                "DefaultRoutedNetrisNetworkOfferingForVpc"
            }
            (_, NetworkMode::Routed, true, _) => "RoutedNetworkOfferingForVpcNetworks",
            (_, NetworkMode::Routed, false, _) => "RoutedIsolatedNetworkOffering",
            (_, NetworkMode::Natted, false, LbProvider::Nsx) => "DefaultNATNSXNetworkOffering",
            (_, NetworkMode::Natted, true, LbProvider::Nsx) => "DefaultNATNSXNetworkOfferingForVpc",
            (_, NetworkMode::Natted, true, LbProvider::Netris) => {
                "DefaultNATNetrisNetworkOfferingForVpc"
            }
            (_, NetworkMode::Natted, true, LbProvider::InternalLbVm) => {
                "DefaultIsolatedNetworkOfferingForVpcNetworksWithInternalLB"
            }
            (_, NetworkMode::Natted, true, _) => "DefaultIsolatedNetworkOfferingForVpcNetworks",
            (_, NetworkMode::Natted, false, _) => {
                "DefaultIsolatedNetworkOfferingWithSourceNatService"
            }
        }
    }
}

impl Network {
    /// `NetworkOffering.isPublicLb()` of the network's offering: every offering with Lb but
    /// the internal-LB one (`NetworkOrchestrator.configure` builds it with
    /// `setPublicLb(false)`; "Public lb and internal lb can't be enabled at the same time on
    /// the offering", `createNetworkOffering`).
    pub fn supports_public_lb(&self) -> bool {
        self.offers(Service::Lb) && self.lb_provider != LbProvider::InternalLbVm
    }

    /// `NetworkOffering.isInternalLb()`: only
    /// `DefaultIsolatedNetworkOfferingForVpcNetworksWithInternalLB` (`setInternalLb(true)`);
    /// the NSX/Netris offerings the simulator models are their public-LB ones.
    pub fn supports_internal_lb(&self) -> bool {
        self.offers(Service::Lb) && self.lb_provider == LbProvider::InternalLbVm
    }

    /// `NetworkOfferingVO.toString` (4.20+: `NetworkOffering {"id":…,"uuid":…,"name":…,
    /// "trafficType":"Guest"}`, `ReflectionToStringBuilderUtils.reflectOnlySelectedFields`).
    /// The database id and UUID of a default offering are install-specific; the simulator
    /// numbers the offerings it knows in a fixed order and derives a stable UUID from the name.
    pub fn offering_text(&self) -> String {
        let name = self.offering_name();
        format!(
            "NetworkOffering {{\"id\":{},\"uuid\":\"{}\",\"name\":\"{name}\",\"trafficType\":\"Guest\"}}",
            offering_number(name),
            name_uuid(name)
        )
    }
}

/// `NetworkVO.toString`: `Network {"id": <n>, "name": "<name>", "uuid": "<uuid>",
/// "networkofferingid": <n>}`. `number` is the network's database id, which the simulator
/// does not keep: callers pass its position in the state plus 200.
pub fn network_text(network: &Network, number: usize) -> String {
    format!(
        "Network {{\"id\": {number}, \"name\": \"{}\", \"uuid\": \"{}\", \"networkofferingid\": {}}}",
        network.name,
        network.id,
        offering_number(network.offering_name())
    )
}

/// A fixed database id for each offering name the simulator knows.
fn offering_number(name: &str) -> usize {
    const KNOWN: &[&str] = &[
        "DefaultSharedNetworkOffering",
        "DefaultIsolatedNetworkOfferingWithSourceNatService",
        "DefaultIsolatedNetworkOfferingForVpcNetworks",
        "DefaultIsolatedNetworkOfferingForVpcNetworksWithInternalLB",
        "RoutedIsolatedNetworkOffering",
        "RoutedNetworkOfferingForVpcNetworks",
        "DefaultNATNSXNetworkOffering",
        "DefaultNATNSXNetworkOfferingForVpc",
        "DefaultRoutedNSXNetworkOffering",
        "DefaultRoutedNSXNetworkOfferingForVpc",
        "DefaultNATNetrisNetworkOfferingForVpc",
        "DefaultRoutedNetrisNetworkOfferingForVpc",
    ];
    KNOWN.iter().position(|k| *k == name).map_or(99, |i| i + 1)
}

/// A stable lower-case UUID-shaped text derived from `name` (FNV-1a, 128 bits).
fn name_uuid(name: &str) -> String {
    let mut hash: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    for byte in name.bytes() {
        hash ^= u128::from(byte);
        hash = hash.wrapping_mul(0x0000_0000_0100_0000_0000_0000_0000_013b);
    }
    let hex = format!("{hash:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// A routing firewall rule of a ROUTED network (`RoutedIpv4ManagerImpl
/// .createRoutingFirewallRule`: a `FirewallRuleVO` of purpose Firewall with no public
/// address, a source and a destination CIDR list).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RoutingFirewallRule {
    /// Id.
    pub id: String,
    /// Network id.
    pub network_id: String,
    /// `tcp`, `udp`, `icmp`, `all`, … (lower case).
    pub protocol: String,
    /// Start port.
    pub start_port: Option<i64>,
    /// End port.
    pub end_port: Option<i64>,
    /// ICMP type (`-1` by default for ICMP).
    pub icmp_type: Option<i64>,
    /// ICMP code (`-1` by default for ICMP).
    pub icmp_code: Option<i64>,
    /// Source CIDRs.
    pub cidrs: Vec<String>,
    /// Destination CIDRs.
    pub dest_cidrs: Vec<String>,
    /// `Ingress` or `Egress`.
    pub traffic_type: String,
    /// `fordisplay`.
    pub display: bool,
    /// `Add` or `Active`.
    pub state: String,
    /// Owner (the network's).
    pub owner: Owner,
}
