//! Requests for VPC static routes.

use super::request;

request! {
    /// `listStaticRoutes`.
    ListStaticRoutes => "listStaticRoutes" {
        /// Route id.
        id: Option<String>,
        /// VPC id.
        vpcid: Option<String>,
        /// Private gateway id.
        gatewayid: Option<String>,
        /// `Add`, `Active`, `Revoke`.
        state: Option<String>,
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
    /// `createStaticRoute` (async create): `vpcid` + `nexthop` (CloudStack 4.22 and later)
    /// or the older `gatewayid` form; the two forms are mutually exclusive.
    CreateStaticRoute => "createStaticRoute" {
        /// Destination CIDR, outside the VPC CIDR (required).
        cidr: String,
        /// VPC id (with `nexthop`).
        vpcid: Option<String>,
        /// Next-hop address inside the VPC CIDR or a private gateway's network (4.22+).
        nexthop: Option<String>,
        /// Private gateway id (the older form).
        gatewayid: Option<String>,
    }
}

request! {
    /// `deleteStaticRoute` (async).
    DeleteStaticRoute => "deleteStaticRoute" {
        /// Route id (required).
        id: String,
    }
}
