//! Networks (`listNetworks`) with their services, capabilities and providers.

use super::de::response;
use super::tag::Tag;

response! {
    /// One capability of a network service (e.g. `Lb` / `SupportedProtocols`).
    NetworkServiceCapability {
        /// Capability name.
        name: Option<String>,
        /// Capability value (often a comma-separated list, sometimes JSON).
        value: Option<String>,
        /// Whether the offering may choose this capability.
        canchooseservicecapability: Option<bool>,
    }
}

response! {
    /// A provider of a network service (e.g. `VirtualRouter`).
    NetworkServiceProvider {
        /// Provider name.
        name: Option<String>,
        /// Provider id.
        id: Option<String>,
        /// Provider state.
        state: Option<String>,
    }
}

response! {
    /// A service offered by a network (`Lb`, `Firewall`, `NetworkACL`, …).
    NetworkServiceInfo {
        /// Service name.
        name: Option<String>,
        /// The service's capabilities.
        capability: Vec<NetworkServiceCapability>,
        /// The service's providers.
        provider: Vec<NetworkServiceProvider>,
    }
}

impl NetworkServiceInfo {
    /// The value of capability `name` (case-insensitive name match).
    pub fn capability(&self, name: &str) -> Option<&str> {
        self.capability
            .iter()
            .find(|cap| {
                cap.name
                    .as_deref()
                    .is_some_and(|n| n.eq_ignore_ascii_case(name))
            })
            .and_then(|cap| cap.value.as_deref())
    }
}

response! {
    /// A guest network.
    Network {
        /// Network id.
        id: Option<String>,
        /// Network name.
        name: Option<String>,
        /// Display text.
        displaytext: Option<String>,
        /// Guest type (`Isolated`, `Shared`, `L2`).
        r#type: Option<String>,
        /// State.
        state: Option<String>,
        /// Traffic type.
        traffictype: Option<String>,
        /// IPv4 CIDR.
        cidr: Option<String>,
        /// IPv4 gateway.
        gateway: Option<String>,
        /// IPv4 netmask.
        netmask: Option<String>,
        /// IPv6 CIDR.
        ip6cidr: Option<String>,
        /// IPv6 gateway.
        ip6gateway: Option<String>,
        /// VPC id (set for VPC tiers).
        vpcid: Option<String>,
        /// VPC name.
        vpcname: Option<String>,
        /// Network ACL list id (VPC tiers).
        aclid: Option<String>,
        /// Network ACL list name (VPC tiers).
        aclname: Option<String>,
        /// Zone id.
        zoneid: Option<String>,
        /// Zone name.
        zonename: Option<String>,
        /// Owning account.
        account: Option<String>,
        /// Owning domain id.
        domainid: Option<String>,
        /// Owning domain name.
        domain: Option<String>,
        /// Owning project id.
        projectid: Option<String>,
        /// Owning project name.
        project: Option<String>,
        /// Network offering id.
        networkofferingid: Option<String>,
        /// Network offering name.
        networkofferingname: Option<String>,
        /// Persistent network.
        ispersistent: Option<bool>,
        /// Restart required.
        restartrequired: Option<bool>,
        /// IPv4 routing of a ROUTED network (`Static` or `Dynamic`; 4.20+); absent or
        /// empty on a NATTED one (`NetworkResponse.ipv4Routing`).
        ip4routing: Option<String>,
        /// Services with capabilities and providers.
        service: Vec<NetworkServiceInfo>,
        /// Tags.
        tags: Vec<Tag>,
    }
}

impl Network {
    /// Whether the network is a VPC tier (non-empty `vpcid`).
    pub fn is_vpc_tier(&self) -> bool {
        self.vpcid.as_deref().is_some_and(|id| !id.is_empty())
    }

    /// The service named `name` (case-insensitive), e.g. `"Firewall"`, `"NetworkACL"`, `"Lb"`.
    pub fn service(&self, name: &str) -> Option<&NetworkServiceInfo> {
        self.service.iter().find(|svc| {
            svc.name
                .as_deref()
                .is_some_and(|n| n.eq_ignore_ascii_case(name))
        })
    }

    /// Whether the network offers service `name`.
    pub fn has_service(&self, name: &str) -> bool {
        self.service(name).is_some()
    }

    /// The value of capability `capability` of service `service`.
    pub fn capability(&self, service: &str, capability: &str) -> Option<&str> {
        self.service(service)?.capability(capability)
    }

    /// A comma-separated capability of a service as a list of trimmed values
    /// (`"tcp, udp, tcp-proxy"` → `["tcp", "udp", "tcp-proxy"]`).
    pub fn capability_list(&self, service: &str, capability: &str) -> Vec<String> {
        self.capability(service, capability)
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|value| !value.is_empty())
            .map(str::to_owned)
            .collect()
    }
}
