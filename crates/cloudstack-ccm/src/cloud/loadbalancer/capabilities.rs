//! What a network's load-balancer provider and the CloudStack server allow.
//!
//! [`NetworkCapabilities`] is derived from a network's [`NetworkFacts`], taken from a
//! `listNetworks` entry (its `service[]` list above all): whether ports are opened with
//! firewall rules (isolated networks) or network ACL items (VPC tiers), and which LB
//! protocols, algorithms, health checks and stickiness methods the provider offers.
//! [`ServerFeatures`] holds the version gates of API.md §6. All are plain data, so the
//! planner is pure and testable without a network.

mod verdict;

use std::collections::BTreeSet;

use crate::cloud::loadbalancer::vocabulary::{Algorithm, LbProtocol, StickinessMethod};

/// The built-in ACL lists that rules cannot be added to.
pub(crate) const DEFAULT_ACL_LISTS: [&str; 2] = ["default_allow", "default_deny"];

/// Provider names of the Virtual Router family (no UDP since 4.15, no health checks).
const VIRTUAL_ROUTER_PROVIDERS: [&str; 3] = ["VirtualRouter", "VpcVirtualRouter", "InternalLbVm"];

/// One entry of a network's `service[]`: its name, capabilities and providers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct NetworkService {
    /// Service name (`Lb`, `Firewall`, `NetworkACL`, ...).
    pub name: String,
    /// Capabilities as `(name, value)` pairs.
    pub capabilities: Vec<(String, String)>,
    /// Provider names (`VirtualRouter`, `Netscaler`, ...); may be empty.
    pub providers: Vec<String>,
}

impl NetworkService {
    /// The value of a capability, if listed.
    pub(crate) fn capability(&self, name: &str) -> Option<&str> {
        self.capabilities
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The facts about a network that capabilities are derived from (the `listNetworks`
/// fields `id`, `name`, `vpcid`, `aclid`, `aclname`, `service[]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct NetworkFacts {
    /// Network id.
    pub id: String,
    /// Network name.
    pub name: String,
    /// VPC id when the network is a VPC tier.
    pub vpc_id: Option<String>,
    /// Id of the tier's ACL list.
    pub acl_id: Option<String>,
    /// Name of the tier's ACL list.
    pub acl_name: Option<String>,
    /// ROUTED mode (`ip4routing` set): CloudStack routes the guest subnet, with no NAT and
    /// no load balancer.
    pub routed: bool,
    /// Guest type `Shared`.
    pub shared: bool,
    /// The network's services.
    pub services: Vec<NetworkService>,
}

impl NetworkFacts {
    /// The facts of a network as `listNetworks` returns it (an empty `vpcid`, `aclid` or
    /// `aclname` counts as none).
    pub(crate) fn from_network(network: &cloudstack::Network) -> NetworkFacts {
        NetworkFacts {
            id: network.id.clone().unwrap_or_default(),
            name: network.name.clone().unwrap_or_default(),
            vpc_id: network.vpcid.clone().filter(|v| !v.is_empty()),
            acl_id: network.aclid.clone().filter(|v| !v.is_empty()),
            acl_name: network.aclname.clone().filter(|v| !v.is_empty()),
            routed: network.ip4routing.as_deref().is_some_and(|r| !r.is_empty()),
            shared: network
                .r#type
                .as_deref()
                .is_some_and(|t| t.eq_ignore_ascii_case("Shared")),
            services: network
                .service
                .iter()
                .map(|s| NetworkService {
                    name: s.name.clone().unwrap_or_default(),
                    capabilities: s
                        .capability
                        .iter()
                        .filter_map(|c| {
                            Some((c.name.clone()?, c.value.clone().unwrap_or_default()))
                        })
                        .collect(),
                    providers: s.provider.iter().filter_map(|p| p.name.clone()).collect(),
                })
                .collect(),
        }
    }
}

/// How the public ports of a load balancer are opened on this network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortAccess {
    /// Firewall rules on the public IP (isolated networks).
    Firewall,
    /// Items in the tier's network ACL list (VPC tiers).
    NetworkAcl {
        /// The ACL list id, when known.
        acl_id: Option<String>,
        /// The ACL list name, when known.
        acl_name: Option<String>,
    },
    /// Neither service: nothing to open.
    Open,
}

/// The load-balancer providers whose behaviour differs from what they advertise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LbProviderKind {
    /// The Virtual Router family (`VirtualRouter`, `VpcVirtualRouter`, `InternalLbVm`).
    VirtualRouter,
    /// NSX (`NsxElement`): monitors members itself, ignores `cidrlist` and stickiness.
    Nsx,
    /// Netris (`NetrisElement`): TCP only, honours `cidrlist`, refuses `algorithm` and
    /// `tcp-proxy` on update, ignores stickiness.
    Netris,
    /// Any other provider (NetScaler, ...), taken at its word.
    Other,
}

impl LbProviderKind {
    /// The kind of the provider named `name` (as `service[].provider[].name` has it).
    fn of(name: Option<&str>, health_check: bool) -> LbProviderKind {
        match name {
            Some(p)
                if VIRTUAL_ROUTER_PROVIDERS
                    .iter()
                    .any(|v| v.eq_ignore_ascii_case(p)) =>
            {
                LbProviderKind::VirtualRouter
            }
            Some(p) if p.eq_ignore_ascii_case("Nsx") => LbProviderKind::Nsx,
            Some(p) if p.eq_ignore_ascii_case("Netris") => LbProviderKind::Netris,
            Some(_) => LbProviderKind::Other,
            // What the Virtual Router looks like in responses that omit the provider.
            None if !health_check => LbProviderKind::VirtualRouter,
            None => LbProviderKind::Other,
        }
    }
}

/// What the network's load-balancer provider supports, after version adjustments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkCapabilities {
    /// Network id.
    pub network_id: String,
    /// Network name (for messages).
    pub network_name: String,
    /// VPC id when the network is a VPC tier (IPs are associated with the VPC).
    pub vpc_id: Option<String>,
    /// How ports are opened.
    pub port_access: PortAccess,
    /// Whether the network offers the `Lb` service at all.
    pub has_lb: bool,
    /// ROUTED mode (`ip4routing`): no load balancer can exist there.
    pub routed: bool,
    /// A shared network.
    pub shared: bool,
    /// The provider's kind, for what its capabilities do not say.
    pub lb_kind: LbProviderKind,
    /// The LB provider, when the response names it.
    pub lb_provider: Option<String>,
    /// LB protocols the provider accepts.
    pub lb_protocols: BTreeSet<LbProtocol>,
    /// Algorithms the provider accepts.
    pub lb_algorithms: BTreeSet<Algorithm>,
    /// Whether LB health-check policies are supported.
    pub health_check: bool,
    /// Stickiness methods the provider accepts.
    pub stickiness_methods: BTreeSet<StickinessMethod>,
    /// Public ports the provider keeps for itself: the Virtual Router's HAProxy listens
    /// for its statistics on `network.loadbalancer.haproxy.stats.port` (8081 unless an
    /// operator changed it) and refuses rules there (`validateHAProxyLBRule`).
    pub reserved_ports: BTreeSet<u16>,
    /// Whether the provider terminates TLS with a certificate (`SslTermination`, which
    /// `assignCertToLoadBalancer` requires): NetScaler, and the Virtual Router from 4.22
    /// (apache/cloudstack#11468). Below 4.22 the Virtual Router takes protocol `ssl` and
    /// serves it as plain TCP, so the capability is read together with the version.
    pub ssl_termination: bool,
    /// Which load-balancer schemes the offering carries (`LbSchemes`).
    pub lb_schemes: LbSchemes,
}

/// The load-balancer schemes of a network's offering: public rules on a public address
/// (`createLoadBalancerRule`), internal rules on an address of the tier
/// (`createLoadBalancer`, provider `InternalLbVm`). CloudStack's `createNetworkOffering`
/// refuses both on one offering ("Public lb and internal lb can't be enabled at the same
/// time on the offering") for the Virtual Router family.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LbSchemes {
    /// `Public`.
    pub public: bool,
    /// `Internal` (on a VPC tier).
    pub internal: bool,
}

impl LbSchemes {
    /// From the `Lb` service (`None`: the network has none, so no scheme): its `LbSchemes`
    /// capability (`Internal,Public`); without it, the provider decides: `InternalLbVm` is
    /// internal, any other public.
    fn of(lb: Option<&NetworkService>, vpc_tier: bool) -> LbSchemes {
        let Some(lb) = lb else {
            return LbSchemes::default();
        };
        let provider = lb.providers.first().map(String::as_str);
        let (public, internal) = match lb.capability("LbSchemes") {
            Some(list) => {
                let has = |scheme: &str| split_list(list).any(|s| s.eq_ignore_ascii_case(scheme));
                (has("Public"), has("Internal"))
            }
            None => {
                let internal_vm = provider.is_some_and(|p| p.eq_ignore_ascii_case("InternalLbVm"));
                (!internal_vm, internal_vm)
            }
        };
        LbSchemes {
            public,
            // `createLoadBalancer` places its address in a guest network's CIDR: CloudStack
            // offers the internal scheme on VPC tiers.
            internal: internal && vpc_tier,
        }
    }

    /// How the schemes read in a message: `public`, `internal` or `public and internal`.
    pub(crate) fn describe(self) -> &'static str {
        match (self.public, self.internal) {
            (true, true) => "public and internal",
            (true, false) => "public",
            (false, true) => "internal",
            (false, false) => "no",
        }
    }
}

/// The HAProxy statistics port of the Virtual Router (CloudStack's default).
pub(crate) const HAPROXY_STATS_PORT: u16 = 8081;

impl NetworkCapabilities {
    /// Derives the capabilities of a network on a server.
    pub(crate) fn from_facts(
        network: &NetworkFacts,
        server: &ServerFeatures,
    ) -> NetworkCapabilities {
        let service = |name: &str| {
            network
                .services
                .iter()
                .find(|s| s.name.eq_ignore_ascii_case(name))
        };
        let port_access = if service("Firewall").is_some() {
            PortAccess::Firewall
        } else if service("NetworkACL").is_some() || network.vpc_id.is_some() {
            PortAccess::NetworkAcl {
                acl_id: network.acl_id.clone(),
                acl_name: network.acl_name.clone(),
            }
        } else {
            PortAccess::Open
        };
        let lb = service("Lb");
        let lb_provider = lb.and_then(|s| s.providers.first().cloned());
        let health_check = lb
            .and_then(|s| s.capability("HealthCheckPolicy"))
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        let lb_kind = LbProviderKind::of(lb_provider.as_deref(), health_check);
        let virtual_router = lb_kind == LbProviderKind::VirtualRouter;
        let mut lb_protocols: BTreeSet<LbProtocol> =
            match lb.and_then(|s| s.capability("SupportedProtocols")) {
                Some(list) => split_list(list).filter_map(LbProtocol::parse).collect(),
                None => [LbProtocol::Tcp].into(),
            };
        if virtual_router && !server.virtual_router_udp_lb {
            lb_protocols.remove(&LbProtocol::Udp);
        }
        // Netris advertises "tcp, udp", but `CreateLoadBalancerRuleCmd.getProtocol` gives it
        // tcp whatever was asked: a UDP rule would silently serve TCP.
        if lb_kind == LbProviderKind::Netris {
            lb_protocols = [LbProtocol::Tcp].into();
        }
        let lb_algorithms = match lb.and_then(|s| s.capability("SupportedLbAlgorithms")) {
            Some(list) => split_list(list).filter_map(Algorithm::parse).collect(),
            None => Algorithm::ALL.into(),
        };
        let ssl_termination = lb
            .and_then(|s| s.capability("SslTermination"))
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
            && (!virtual_router || server.virtual_router_ssl_termination);
        if ssl_termination {
            lb_protocols.insert(LbProtocol::Ssl);
        }
        // NSX and Netris advertise the HAProxy methods, store the policies and never apply
        // them (`NsxElement.applyLBRules`, `NetrisElement.applyLBRules` pass none).
        let stickiness_methods = match lb_kind {
            LbProviderKind::Nsx | LbProviderKind::Netris => BTreeSet::new(),
            _ => lb
                .and_then(|s| s.capability("SupportedStickinessMethods"))
                .map(parse_stickiness_methods)
                .unwrap_or_default(),
        };
        NetworkCapabilities {
            network_id: network.id.clone(),
            network_name: network.name.clone(),
            vpc_id: network.vpc_id.clone(),
            port_access,
            has_lb: lb.is_some(),
            routed: network.routed,
            shared: network.shared,
            lb_kind,
            lb_provider,
            lb_protocols,
            lb_algorithms,
            health_check,
            stickiness_methods,
            reserved_ports: if virtual_router {
                [HAPROXY_STATS_PORT].into()
            } else {
                BTreeSet::new()
            },
            ssl_termination,
            lb_schemes: LbSchemes::of(lb, network.vpc_id.is_some()),
        }
    }

    /// A readable name for messages: `name (id)`.
    pub(crate) fn network_label(&self) -> String {
        if self.network_name.is_empty() {
            self.network_id.clone()
        } else {
            format!("{} ({})", self.network_name, self.network_id)
        }
    }
}

/// Splits a capability list such as `"tcp, udp, tcp-proxy"` (note the spaces).
fn split_list(list: &str) -> impl Iterator<Item = &str> {
    list.split(',').map(str::trim).filter(|s| !s.is_empty())
}

/// Reads the method names out of `SupportedStickinessMethods`, a JSON list of
/// `{"methodname": ..., "paramlist": [...]}`.
fn parse_stickiness_methods(json: &str) -> BTreeSet<StickinessMethod> {
    match serde_json::from_str::<Vec<serde_json::Value>>(json) {
        Ok(items) => items
            .iter()
            .filter_map(|m| m.get("methodname")?.as_str())
            .filter_map(StickinessMethod::parse)
            .collect(),
        Err(_) => BTreeSet::new(),
    }
}

/// Version-dependent behaviour of the CloudStack server (API.md §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerFeatures {
    /// The server version `(major, minor, patch)`.
    pub version: (u32, u32, u32),
    /// `createLoadBalancerRule` takes `cidrlist` (≥ 4.18).
    pub lb_cidrlist_on_create: bool,
    /// `updateLoadBalancerRule` takes `cidrlist` (≥ 4.22).
    pub lb_cidrlist_update: bool,
    /// `disassociateIpAddress` takes `ipaddress` (≥ 4.19).
    pub disassociate_by_address: bool,
    /// The Virtual Router accepts UDP load-balancer rules (< 4.15).
    pub virtual_router_udp_lb: bool,
    /// The Virtual Router terminates TLS (≥ 4.22, apache/cloudstack#11468).
    pub virtual_router_ssl_termination: bool,
    /// `assignCertToLoadBalancer` takes `forced`, replacing a bound certificate in one
    /// job (≥ 4.17).
    pub lb_cert_forced: bool,
    /// ROUTED networks and their routing firewall rules exist (≥ 4.20); an older server
    /// answers `listRoutingFirewallRules` with 401, which reads as refused keys.
    pub routing_firewall: bool,
}

impl ServerFeatures {
    /// The features of a server version.
    pub(crate) fn for_version(major: u32, minor: u32, patch: u32) -> ServerFeatures {
        let at_least = |ma: u32, mi: u32| (major, minor) >= (ma, mi);
        ServerFeatures {
            version: (major, minor, patch),
            lb_cidrlist_on_create: at_least(4, 18),
            lb_cidrlist_update: at_least(4, 22),
            disassociate_by_address: at_least(4, 19),
            virtual_router_udp_lb: !at_least(4, 15),
            virtual_router_ssl_termination: at_least(4, 22),
            lb_cert_forced: at_least(4, 17),
            routing_firewall: at_least(4, 20),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lb_service(caps: &[(&str, &str)], providers: &[&str]) -> NetworkService {
        NetworkService {
            name: "Lb".into(),
            capabilities: caps
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
            providers: providers.iter().map(|p| p.to_string()).collect(),
        }
    }

    /// The Lb capabilities of the Virtual Router, as in `fixtures/listNetworks.json`.
    fn vr_lb() -> NetworkService {
        lb_service(
            &[
                ("SupportedLbAlgorithms", "roundrobin,leastconn,source"),
                ("SupportedProtocols", "tcp, udp, tcp-proxy"),
                (
                    "SupportedStickinessMethods",
                    r#"[{"methodname":"LbCookie","paramlist":[]},{"methodname":"AppCookie","paramlist":[]},{"methodname":"SourceBased","paramlist":[]}]"#,
                ),
            ],
            &[],
        )
    }

    #[test]
    fn isolated_virtual_router_network() {
        let net = NetworkFacts {
            id: "n1".into(),
            name: "iso".into(),
            services: vec![
                vr_lb(),
                NetworkService {
                    name: "Firewall".into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let caps = NetworkCapabilities::from_facts(&net, &ServerFeatures::for_version(4, 18, 0));
        assert_eq!(caps.port_access, PortAccess::Firewall);
        assert_eq!(
            caps.lb_protocols,
            [LbProtocol::Tcp, LbProtocol::TcpProxy].into()
        );
        assert_eq!(caps.lb_algorithms.len(), 3);
        assert_eq!(caps.stickiness_methods.len(), 3);
        assert!(!caps.health_check);
        // Before 4.15 the Virtual Router still took UDP.
        let old = NetworkCapabilities::from_facts(&net, &ServerFeatures::for_version(4, 14, 1));
        assert!(old.lb_protocols.contains(&LbProtocol::Udp));
    }

    #[test]
    fn vpc_tier_uses_the_acl() {
        let net = NetworkFacts {
            id: "t1".into(),
            vpc_id: Some("v1".into()),
            acl_id: Some("acl1".into()),
            acl_name: Some("web".into()),
            services: vec![
                vr_lb(),
                NetworkService {
                    name: "NetworkACL".into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let caps = NetworkCapabilities::from_facts(&net, &ServerFeatures::for_version(4, 22, 0));
        assert_eq!(
            caps.port_access,
            PortAccess::NetworkAcl {
                acl_id: Some("acl1".into()),
                acl_name: Some("web".into())
            }
        );
    }

    #[test]
    fn netscaler_keeps_udp_and_health_checks() {
        let net = NetworkFacts {
            id: "n2".into(),
            services: vec![lb_service(
                &[
                    ("SupportedProtocols", "tcp,udp,http"),
                    ("HealthCheckPolicy", "true"),
                ],
                &["Netscaler"],
            )],
            ..Default::default()
        };
        let caps = NetworkCapabilities::from_facts(&net, &ServerFeatures::for_version(4, 20, 0));
        assert_eq!(caps.lb_protocols, [LbProtocol::Tcp, LbProtocol::Udp].into());
        assert!(caps.health_check);
        assert_eq!(caps.port_access, PortAccess::Open);
    }

    #[test]
    fn version_gates() {
        let cases = [
            ((4, 15, 0), false, false, false),
            ((4, 18, 0), true, false, false),
            ((4, 19, 1), true, false, true),
            ((4, 22, 0), true, true, true),
            ((5, 0, 0), true, true, true),
        ];
        for ((ma, mi, pa), create, update, disassociate) in cases {
            let f = ServerFeatures::for_version(ma, mi, pa);
            assert_eq!(f.lb_cidrlist_on_create, create, "{ma}.{mi}");
            assert_eq!(f.lb_cidrlist_update, update, "{ma}.{mi}");
            assert_eq!(f.disassociate_by_address, disassociate, "{ma}.{mi}");
        }
    }

    #[test]
    fn listed_networks_become_capability_facts() {
        let network: cloudstack::Network = serde_json::from_value(serde_json::json!({
            "id": "n1", "name": "tier", "vpcid": "v1", "aclid": "a1", "aclname": "web",
            "service": [{
                "name": "Lb",
                "capability": [{ "name": "SupportedProtocols", "value": "tcp, udp" }],
                "provider": [{ "name": "VpcVirtualRouter" }]
            }, { "name": "NetworkACL" }]
        }))
        .expect("network decodes");
        let facts = NetworkFacts::from_network(&network);
        assert_eq!(facts.id, "n1");
        assert_eq!(facts.vpc_id.as_deref(), Some("v1"));
        assert_eq!(facts.acl_id.as_deref(), Some("a1"));
        assert_eq!(facts.services.len(), 2);
        assert_eq!(
            facts.services[0].capability("SupportedProtocols"),
            Some("tcp, udp")
        );
        assert_eq!(facts.services[0].providers, ["VpcVirtualRouter"]);
        let empty: cloudstack::Network =
            serde_json::from_value(serde_json::json!({ "id": "n2", "vpcid": "" }))
                .expect("network decodes");
        assert_eq!(
            NetworkFacts::from_network(&empty).vpc_id,
            None,
            "an empty vpcid is no VPC"
        );
    }
}
