//! What the client needs to know about a command from its name alone: HTTP method, retry
//! safety and project scoping.

/// Page size used by [`crate::Client::list_all`] (CloudStack's default and maximum).
pub const PAGE_SIZE: u32 = 500;

/// Commands that accept `projectid` and get [`crate::ClientConfig::project_id`] added.
pub(crate) const PROJECT_SCOPED: &[&str] = &[
    "listVirtualMachines",
    "listNetworks",
    "listPublicIpAddresses",
    "listLoadBalancerRules",
    "listLoadBalancers",
    "listFirewallRules",
    "listNetworkACLLists",
    "listNetworkACLs",
    "listTags",
    "associateIpAddress",
    "uploadSslCert",
];

/// Whether a command only reads: `list*` (including `listCapabilities`) and `query*`
/// (including `queryAsyncJobResult`). Reads are sent with GET and retried on transient
/// failures.
pub fn is_read(command: &str) -> bool {
    command.starts_with("list") || command.starts_with("query")
}

/// Whether the client may resend `command` after any transient failure (5xx, connection
/// error, timeout). Only reads qualify (`queryAsyncJobResult` is one): a mutating call whose
/// reply was lost may have taken effect, so repeating it could create a duplicate rule or
/// allocate a second IP. Callers of mutating commands re-observe the cloud state and decide
/// themselves. (A 429 is different: it is raised before the command runs, so the client
/// retries it for every command.)
pub fn is_retry_safe(command: &str) -> bool {
    is_read(command)
}

/// Whether `command` accepts a `projectid` parameter that the client should fill in.
pub fn accepts_project(command: &str) -> bool {
    PROJECT_SCOPED.contains(&command)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        assert!(
            is_read("listVirtualMachines")
                && is_read("queryAsyncJobResult")
                && is_read("listCapabilities")
        );
        assert!(!is_read("createLoadBalancerRule") && !is_retry_safe("associateIpAddress"));
        assert!(
            accepts_project("associateIpAddress") && !accepts_project("createLoadBalancerRule")
        );
    }
}
