//! Load-balancer rules, firewall rules, network ACL items and ACL lists.

use super::de::{response, split_cidrs};
use super::tag::Tag;

response! {
    /// A load-balancer rule. Ports arrive as strings from CloudStack; both forms decode.
    LoadBalancerRule {
        /// Rule id.
        id: Option<String>,
        /// Rule name.
        name: Option<String>,
        /// Description.
        description: Option<String>,
        /// Public IP id.
        publicipid: Option<String>,
        /// Public IP.
        publicip: Option<String>,
        /// Public port.
        publicport: Option<u32>,
        /// Private (backend) port.
        privateport: Option<u32>,
        /// `roundrobin`, `leastconn` or `source`.
        algorithm: Option<String>,
        /// `tcp`, `udp` or `tcp-proxy`.
        protocol: Option<String>,
        /// Allowed source CIDRs (space-separated since 4.18; see [`LoadBalancerRule::cidrs`]).
        cidrlist: Option<String>,
        /// `Add`, `Active`, `Deleting`.
        state: Option<String>,
        /// Shown to the user.
        fordisplay: Option<bool>,
        /// Guest network id.
        networkid: Option<String>,
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
        /// Tags.
        tags: Vec<Tag>,
    }
}

impl LoadBalancerRule {
    /// The source CIDRs, split on commas and whitespace (servers use either).
    pub fn cidrs(&self) -> Vec<String> {
        split_cidrs(self.cidrlist.as_deref())
    }
}

response! {
    /// One port pair of an internal load-balancer rule (`loadbalancerrule` of
    /// `listLoadBalancers`).
    InternalLoadBalancerPorts {
        /// Port the rule listens on.
        sourceport: Option<u32>,
        /// Port of the members.
        instanceport: Option<u32>,
        /// `Add`, `Active`, `Revoke`.
        state: Option<String>,
    }
}

response! {
    /// A member of an internal load-balancer rule (`loadbalancerinstance`).
    InternalLoadBalancerInstance {
        /// VM id.
        id: Option<String>,
        /// VM name.
        name: Option<String>,
        /// VM state.
        state: Option<String>,
        /// The VM's address on the rule's network.
        ipaddress: Option<String>,
    }
}

response! {
    /// An internal load-balancer rule (CloudStack's Internal LB, `listLoadBalancers` and
    /// `createLoadBalancer`).
    InternalLoadBalancer {
        /// Rule id.
        id: Option<String>,
        /// Rule name.
        name: Option<String>,
        /// Description.
        description: Option<String>,
        /// `roundrobin`, `leastconn` or `source`.
        algorithm: Option<String>,
        /// Network of the members.
        networkid: Option<String>,
        /// The source address.
        sourceipaddress: Option<String>,
        /// Network of the source address.
        sourceipaddressnetworkid: Option<String>,
        /// Owning account.
        account: Option<String>,
        /// Owning domain id.
        domainid: Option<String>,
        /// Owning project id.
        projectid: Option<String>,
        /// Its port pair (one per rule).
        loadbalancerrule: Vec<InternalLoadBalancerPorts>,
        /// Its members.
        loadbalancerinstance: Vec<InternalLoadBalancerInstance>,
        /// Tags.
        tags: Vec<Tag>,
    }
}

response! {
    /// A firewall rule (isolated networks). Ports arrive as integers on modern servers.
    FirewallRule {
        /// Rule id.
        id: Option<String>,
        /// `tcp`, `udp`, `icmp`.
        protocol: Option<String>,
        /// First port.
        startport: Option<u32>,
        /// Last port.
        endport: Option<u32>,
        /// ICMP type.
        icmptype: Option<i32>,
        /// ICMP code.
        icmpcode: Option<i32>,
        /// Source CIDRs, comma-separated.
        cidrlist: Option<String>,
        /// Destination CIDRs.
        destcidrlist: Option<String>,
        /// Public IP id.
        ipaddressid: Option<String>,
        /// Public IP.
        ipaddress: Option<String>,
        /// Network id.
        networkid: Option<String>,
        /// State.
        state: Option<String>,
        /// Traffic type.
        traffictype: Option<String>,
        /// Shown to the user.
        fordisplay: Option<bool>,
        /// Tags.
        tags: Vec<Tag>,
    }
}

impl FirewallRule {
    /// The source CIDRs.
    pub fn cidrs(&self) -> Vec<String> {
        split_cidrs(self.cidrlist.as_deref())
    }
}

response! {
    /// A network ACL item (VPC tiers). Ports arrive as strings; both forms decode.
    NetworkAcl {
        /// Item id.
        id: Option<String>,
        /// ACL list id.
        aclid: Option<String>,
        /// ACL list name.
        aclname: Option<String>,
        /// Rule number (order).
        number: Option<u32>,
        /// Protocol.
        protocol: Option<String>,
        /// First port.
        startport: Option<u32>,
        /// Last port.
        endport: Option<u32>,
        /// Source CIDRs, comma-separated.
        cidrlist: Option<String>,
        /// `Ingress` or `Egress`.
        traffictype: Option<String>,
        /// `Allow` or `Deny`.
        action: Option<String>,
        /// ICMP type.
        icmptype: Option<i32>,
        /// ICMP code.
        icmpcode: Option<i32>,
        /// State.
        state: Option<String>,
        /// Reason text.
        reason: Option<String>,
        /// Shown to the user.
        fordisplay: Option<bool>,
        /// Tags.
        tags: Vec<Tag>,
    }
}

impl NetworkAcl {
    /// The source CIDRs.
    pub fn cidrs(&self) -> Vec<String> {
        split_cidrs(self.cidrlist.as_deref())
    }
}

response! {
    /// A network ACL list.
    NetworkAclList {
        /// List id.
        id: Option<String>,
        /// Name (`default_allow` and `default_deny` are built in).
        name: Option<String>,
        /// Description.
        description: Option<String>,
        /// VPC id (absent for the built-in lists).
        vpcid: Option<String>,
        /// VPC name.
        vpcname: Option<String>,
        /// Shown to the user.
        fordisplay: Option<bool>,
    }
}

impl NetworkAclList {
    /// Whether this is one of the built-in lists `default_allow`/`default_deny`, to which
    /// no item can be added.
    pub fn is_builtin(&self) -> bool {
        matches!(self.name.as_deref(), Some("default_allow" | "default_deny"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `listLoadBalancers` item as `ApplicationLoadBalancerResponse` serialises it (ports
    /// are integers there, `loadbalancerrule` and `loadbalancerinstance` lists).
    #[test]
    fn an_internal_load_balancer_decodes_with_its_port_pair_and_members() {
        let item = serde_json::json!({
            "id": "6a0c7c5e-3a41-4a27-9a51-0f1f2f6e0c11",
            "name": "a1b2c3-tcp-5432",
            "algorithm": "roundrobin",
            "networkid": "net-1",
            "sourceipaddress": "10.220.1.4",
            "sourceipaddressnetworkid": "net-1",
            "account": "alice",
            "loadbalancerrule": [{"sourceport": 5432, "instanceport": 31432, "state": "Active"}],
            "loadbalancerinstance": [
                {"id": "vm-1", "name": "node-1", "state": "Running", "ipaddress": "10.220.1.10"}
            ],
            "tags": [{"key": "kubernetes.io/cluster", "value": "c1"}],
            "fordisplay": true
        });
        let lb: InternalLoadBalancer = serde_json::from_value(item).expect("decodes");
        assert_eq!(lb.sourceipaddress.as_deref(), Some("10.220.1.4"));
        assert_eq!(lb.loadbalancerrule[0].sourceport, Some(5432));
        assert_eq!(lb.loadbalancerrule[0].instanceport, Some(31432));
        assert_eq!(lb.loadbalancerinstance[0].id.as_deref(), Some("vm-1"));
        assert_eq!(lb.tags.len(), 1);
    }
}
