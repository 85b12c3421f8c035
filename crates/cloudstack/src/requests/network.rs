//! Requests for VMs, zones, networks and projects.

use super::request;

request! {
    /// `listVirtualMachines`. Pass `details` (e.g. `min,nics`; add `servoff` for the
    /// service offering) since the default differs between versions.
    ListVirtualMachines => "listVirtualMachines" {
        /// VM id.
        id: Option<String>,
        /// VM ids (list).
        ids: Vec<String>,
        /// Name (exact match on 4.19+, substring before: re-filter).
        name: Option<String>,
        /// State filter.
        state: Option<String>,
        /// Zone id.
        zoneid: Option<String>,
        /// Network id.
        networkid: Option<String>,
        /// VPC id.
        vpcid: Option<String>,
        /// Detail groups (list: `min`, `nics`, `servoff`, …).
        details: Vec<String>,
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
        /// Tag filter (map `tags[i].key/value`).
        tags: Vec<(String, String)>,
    }
}

request! {
    /// `listZones`.
    ListZones => "listZones" {
        /// Zone id.
        id: Option<String>,
        /// Zone name.
        name: Option<String>,
        /// Only zones available to the caller.
        available: Option<bool>,
        /// `Basic` or `Advanced`.
        networktype: Option<String>,
        /// Keyword search.
        keyword: Option<String>,
    }
}

request! {
    /// `listNetworks`.
    ListNetworks => "listNetworks" {
        /// Network id.
        id: Option<String>,
        /// Network name (newer servers).
        name: Option<String>,
        /// Zone id.
        zoneid: Option<String>,
        /// VPC id.
        vpcid: Option<String>,
        /// Guest type (`Isolated`, `Shared`, `L2`).
        r#type: Option<String>,
        /// Traffic type.
        traffictype: Option<String>,
        /// Networks offering these services (list).
        supportedservices: Vec<String>,
        /// Only VPC tiers (true) or non-VPC networks (false).
        forvpc: Option<bool>,
        /// System networks.
        issystem: Option<bool>,
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
    /// `listProjects`.
    ListProjects => "listProjects" {
        /// Project id.
        id: Option<String>,
        /// Project name.
        name: Option<String>,
        /// Display text.
        displaytext: Option<String>,
        /// State.
        state: Option<String>,
        /// Keyword search.
        keyword: Option<String>,
        /// List everything the caller may see.
        listall: Option<bool>,
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
