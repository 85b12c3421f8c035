//! Requests for firewall rules (isolated networks) and network ACLs (VPC tiers).

use super::request;

request! {
    /// `listFirewallRules`.
    ListFirewallRules => "listFirewallRules" {
        /// Rule id.
        id: Option<String>,
        /// Public IP id.
        ipaddressid: Option<String>,
        /// Network id.
        networkid: Option<String>,
        /// List everything the caller may see.
        listall: Option<bool>,
        /// Project id (filled from the client configuration when unset).
        projectid: Option<String>,
        /// Account (with `domainid`).
        account: Option<String>,
        /// Domain id.
        domainid: Option<String>,
        /// Include subdomains.
        isrecursive: Option<bool>,
        /// Keyword search.
        keyword: Option<String>,
        /// Tag filter.
        tags: Vec<(String, String)>,
    }
}

request! {
    /// `createFirewallRule` (async create).
    CreateFirewallRule => "createFirewallRule" {
        /// Public IP id (required).
        ipaddressid: String,
        /// `tcp`, `udp` or `icmp` (required).
        protocol: String,
        /// First port.
        startport: Option<u32>,
        /// Last port (defaults to `startport`).
        endport: Option<u32>,
        /// Source CIDRs (list; server default `0.0.0.0/0`).
        cidrlist: Vec<String>,
        /// ICMP type.
        icmptype: Option<i32>,
        /// ICMP code.
        icmpcode: Option<i32>,
        /// `user` (default) or `system`.
        r#type: Option<String>,
        /// Shown to the user.
        fordisplay: Option<bool>,
    }
}

request! {
    /// `deleteFirewallRule` (async).
    DeleteFirewallRule => "deleteFirewallRule" {
        /// Rule id (required).
        id: String,
    }
}

request! {
    /// `listNetworkACLLists`.
    ListNetworkAclLists => "listNetworkACLLists" {
        /// List id.
        id: Option<String>,
        /// List name.
        name: Option<String>,
        /// VPC id.
        vpcid: Option<String>,
        /// Network id.
        networkid: Option<String>,
        /// List everything the caller may see.
        listall: Option<bool>,
        /// Project id (filled from the client configuration when unset).
        projectid: Option<String>,
        /// Account (with `domainid`).
        account: Option<String>,
        /// Domain id.
        domainid: Option<String>,
        /// Include subdomains.
        isrecursive: Option<bool>,
        /// Keyword search.
        keyword: Option<String>,
    }
}

request! {
    /// `listNetworkACLs`.
    ListNetworkAcls => "listNetworkACLs" {
        /// Item id.
        id: Option<String>,
        /// ACL list id.
        aclid: Option<String>,
        /// Network id.
        networkid: Option<String>,
        /// `Ingress` or `Egress`.
        traffictype: Option<String>,
        /// `Allow` or `Deny`.
        action: Option<String>,
        /// Protocol.
        protocol: Option<String>,
        /// List everything the caller may see.
        listall: Option<bool>,
        /// Project id (filled from the client configuration when unset).
        projectid: Option<String>,
        /// Account (with `domainid`).
        account: Option<String>,
        /// Domain id.
        domainid: Option<String>,
        /// Include subdomains.
        isrecursive: Option<bool>,
        /// Keyword search.
        keyword: Option<String>,
        /// Tag filter.
        tags: Vec<(String, String)>,
    }
}

request! {
    /// `createNetworkACL` (async create). Give `aclid` or `networkid`.
    CreateNetworkAcl => "createNetworkACL" {
        /// `tcp`, `udp`, `icmp`, `all` or a protocol number (required).
        protocol: String,
        /// ACL list id.
        aclid: Option<String>,
        /// Network id.
        networkid: Option<String>,
        /// First port.
        startport: Option<u32>,
        /// Last port (defaults to `startport`).
        endport: Option<u32>,
        /// Source CIDRs (list).
        cidrlist: Vec<String>,
        /// `ingress` (default) or `egress`.
        traffictype: Option<String>,
        /// `allow` or `deny`.
        action: Option<String>,
        /// Rule number (order).
        number: Option<u32>,
        /// ICMP type.
        icmptype: Option<i32>,
        /// ICMP code.
        icmpcode: Option<i32>,
        /// Reason text.
        reason: Option<String>,
        /// Shown to the user.
        fordisplay: Option<bool>,
    }
}

request! {
    /// `deleteNetworkACL` (async).
    DeleteNetworkAcl => "deleteNetworkACL" {
        /// Item id (required).
        id: String,
    }
}

request! {
    /// `createRoutingFirewallRule` (async create, 4.20+): opens a ROUTED isolated network to
    /// traffic from `cidrlist` to `destcidrlist` on a port range.
    CreateRoutingFirewallRule => "createRoutingFirewallRule" {
        /// The ROUTED network (required).
        networkid: String,
        /// `tcp`, `udp`, `icmp`, `all` or a protocol number (required).
        protocol: String,
        /// First port.
        startport: Option<u32>,
        /// Last port.
        endport: Option<u32>,
        /// Source CIDRs (server default `0.0.0.0/0`).
        cidrlist: Vec<String>,
        /// Destination CIDRs (server default `0.0.0.0/0`).
        destcidrlist: Vec<String>,
        /// `ingress` (default) or `egress`.
        traffictype: Option<String>,
    }
}

request! {
    /// `listRoutingFirewallRules` (4.20+).
    ListRoutingFirewallRules => "listRoutingFirewallRules" {
        /// Rule id.
        id: Option<String>,
        /// Network id.
        networkid: Option<String>,
        /// List everything the caller may see.
        listall: Option<bool>,
        /// Project id.
        projectid: Option<String>,
        /// Tag filter.
        tags: Vec<(String, String)>,
    }
}

request! {
    /// `deleteRoutingFirewallRule` (async, 4.20+).
    DeleteRoutingFirewallRule => "deleteRoutingFirewallRule" {
        /// Rule id (required).
        id: String,
    }
}
