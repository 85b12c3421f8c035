//! VPC static routes.

use super::de::response;
use super::tag::Tag;

response! {
    /// A VPC static route.
    StaticRoute {
        /// Route id.
        id: Option<String>,
        /// `Add`, `Active`, `Revoke`.
        state: Option<String>,
        /// VPC id.
        vpcid: Option<String>,
        /// Private gateway id (older form).
        gatewayid: Option<String>,
        /// Next-hop address (4.22 form).
        nexthop: Option<String>,
        /// Destination CIDR.
        cidr: Option<String>,
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
