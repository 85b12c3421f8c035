//! Requests for load-balancer rules and their members.

use super::request;

request! {
    /// `listLoadBalancerRules`. `keyword` matches name or description by substring:
    /// re-filter by exact name.
    ListLoadBalancerRules => "listLoadBalancerRules" {
        /// Rule id.
        id: Option<String>,
        /// Exact rule name.
        name: Option<String>,
        /// Substring of name or description.
        keyword: Option<String>,
        /// Public IP id.
        publicipid: Option<String>,
        /// Rules with this VM assigned.
        virtualmachineid: Option<String>,
        /// Guest network id.
        networkid: Option<String>,
        /// Zone id.
        zoneid: Option<String>,
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
        /// Tag filter.
        tags: Vec<(String, String)>,
    }
}

request! {
    /// `createLoadBalancerRule` (async create).
    CreateLoadBalancerRule => "createLoadBalancerRule" {
        /// Rule name (required).
        name: String,
        /// `roundrobin`, `leastconn` or `source` (required).
        algorithm: String,
        /// Backend port (required).
        privateport: u32,
        /// Public port (required).
        publicport: u32,
        /// Public IP id.
        publicipid: Option<String>,
        /// Guest network id (needed for VPC tiers).
        networkid: Option<String>,
        /// Zone id (elastic LB only).
        zoneid: Option<String>,
        /// `tcp` (default), `udp`, `tcp-proxy`.
        protocol: Option<String>,
        /// Open the firewall for the public port (server default true outside VPCs).
        openfirewall: Option<bool>,
        /// Allowed source CIDRs (4.18+; ignored by older servers).
        cidrlist: Vec<String>,
        /// Description.
        description: Option<String>,
        /// Account (with `domainid`).
        account: Option<String>,
        /// Domain id.
        domainid: Option<String>,
        /// Shown to the user (admin).
        fordisplay: Option<bool>,
    }
}

request! {
    /// `updateLoadBalancerRule` (async). Ports and IP cannot change.
    UpdateLoadBalancerRule => "updateLoadBalancerRule" {
        /// Rule id (required).
        id: String,
        /// New name.
        name: Option<String>,
        /// New description.
        description: Option<String>,
        /// New algorithm.
        algorithm: Option<String>,
        /// New protocol.
        protocol: Option<String>,
        /// New source CIDRs (4.22+; silently ignored by older servers — gate on version).
        cidrlist: Vec<String>,
        /// Shown to the user (admin).
        fordisplay: Option<bool>,
        /// Custom id (admin).
        customid: Option<String>,
    }
}

request! {
    /// `deleteLoadBalancerRule` (async).
    DeleteLoadBalancerRule => "deleteLoadBalancerRule" {
        /// Rule id (required).
        id: String,
    }
}

request! {
    /// `assignToLoadBalancerRule` (async).
    AssignToLoadBalancerRule => "assignToLoadBalancerRule" {
        /// Rule id (required).
        id: String,
        /// VM ids (list).
        virtualmachineids: Vec<String>,
        /// VM id → IP pairs (map `vmidipmap[i].vmid/vmip`).
        vmidipmap: Vec<(String, String)>,
    }
}

request! {
    /// `removeFromLoadBalancerRule` (async).
    RemoveFromLoadBalancerRule => "removeFromLoadBalancerRule" {
        /// Rule id (required).
        id: String,
        /// VM ids (list).
        virtualmachineids: Vec<String>,
        /// VM id → IP pairs (map `vmidipmap[i].vmid/vmip`).
        vmidipmap: Vec<(String, String)>,
    }
}

request! {
    /// `listLoadBalancerRuleInstances` (items `loadbalancerruleinstance`; the `lbvmips`
    /// variant has another shape and is not offered here).
    ListLoadBalancerRuleInstances => "listLoadBalancerRuleInstances" {
        /// Rule id (required).
        id: String,
        /// Assigned VMs (server default true) or assignable ones (false).
        applied: Option<bool>,
        /// Keyword search.
        keyword: Option<String>,
    }
}

request! {
    /// `createLoadBalancer` (async create): an internal load-balancer rule on a VPC tier
    /// (CloudStack's Internal LB, scheme `Internal`). One source port per rule; rules of one
    /// source address share it on different ports. The protocol is always TCP.
    CreateLoadBalancer => "createLoadBalancer" {
        /// Rule name (required).
        name: String,
        /// The tier the members are on (required).
        networkid: String,
        /// Port the rule listens on (required).
        sourceport: u32,
        /// Port of the members (required).
        instanceport: u32,
        /// `roundrobin`, `leastconn` or `source` (required).
        algorithm: String,
        /// The network of the source address (required; the tier itself).
        sourceipaddressnetworkid: String,
        /// `Internal` (required; the only value CloudStack takes).
        scheme: String,
        /// The source address: an address already used by an internal rule of that
        /// network is shared; absent, CloudStack picks a free one of the network.
        sourceipaddress: Option<String>,
        /// Description.
        description: Option<String>,
        /// Shown to the user (admin).
        fordisplay: Option<bool>,
    }
}

request! {
    /// `listLoadBalancers`: internal load-balancer rules (never shown by
    /// `listLoadBalancerRules`).
    ListLoadBalancers => "listLoadBalancers" {
        /// Rule id.
        id: Option<String>,
        /// Rule name.
        name: Option<String>,
        /// Substring of name or description.
        keyword: Option<String>,
        /// `Internal`.
        scheme: Option<String>,
        /// Network of the members.
        networkid: Option<String>,
        /// Source address.
        sourceipaddress: Option<String>,
        /// Network of the source address.
        sourceipaddressnetworkid: Option<String>,
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
        /// Tag filter.
        tags: Vec<(String, String)>,
    }
}

request! {
    /// `deleteLoadBalancer` (async): deletes an internal load-balancer rule.
    DeleteLoadBalancer => "deleteLoadBalancer" {
        /// Rule id (required).
        id: String,
    }
}
