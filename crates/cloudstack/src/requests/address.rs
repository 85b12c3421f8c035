//! Requests for public IP addresses.

use super::request;

request! {
    /// `listPublicIpAddresses`. `allocatedonly` defaults to true on the server: pass
    /// `Some(false)` to find a free address by value.
    ListPublicIpAddresses => "listPublicIpAddresses" {
        /// Address id.
        id: Option<String>,
        /// The address.
        ipaddress: Option<String>,
        /// Only allocated addresses (server default true).
        allocatedonly: Option<bool>,
        /// State filter.
        state: Option<String>,
        /// Guest network the address is associated with.
        associatednetworkid: Option<String>,
        /// Source public network id.
        networkid: Option<String>,
        /// VPC id.
        vpcid: Option<String>,
        /// Zone id.
        zoneid: Option<String>,
        /// Source-NAT addresses.
        issourcenat: Option<bool>,
        /// Static-NAT addresses.
        isstaticnat: Option<bool>,
        /// Addresses usable for load balancing.
        forloadbalancing: Option<bool>,
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
    /// `associateIpAddress` (async create). Give one of `networkid`, `vpcid` (VPC tiers),
    /// `zoneid`.
    AssociateIpAddress => "associateIpAddress" {
        /// Guest network id.
        networkid: Option<String>,
        /// VPC id.
        vpcid: Option<String>,
        /// Zone id.
        zoneid: Option<String>,
        /// A specific address to acquire.
        ipaddress: Option<String>,
        /// Project id (filled from the client configuration when unset).
        projectid: Option<String>,
        /// Account (with `domainid`).
        account: Option<String>,
        /// Domain id.
        domainid: Option<String>,
        /// Portable address.
        isportable: Option<bool>,
        /// Shown to the user (admin).
        fordisplay: Option<bool>,
    }
}

request! {
    /// `disassociateIpAddress` (async). `id` is required (CloudStack's listing); `ipaddress`
    /// (4.19+) adds nothing a caller of ours needs.
    DisassociateIpAddress => "disassociateIpAddress" {
        /// Address id (required).
        id: String,
        /// The address (4.19+).
        ipaddress: Option<String>,
    }
}
