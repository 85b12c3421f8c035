//! The tags the controller puts on what it creates in CloudStack: who owns an object
//! (cluster, Service, Node), so it is found again after a crash and cleaned up when its
//! owner is gone, and what CloudStack made along with it or what it may carry.

use std::collections::BTreeMap;

/// Resource tags as `key -> value`.
pub type Tags = BTreeMap<String, String>;

/// A CloudStack object's tags as a map (entries without a key are skipped).
pub(crate) fn tag_map(tags: &[cloudstack::Tag]) -> Tags {
    tags.iter()
        .filter_map(|t| Some((t.key.clone()?, t.value.clone().unwrap_or_default())))
        .collect()
}

/// The ownership tags of what the controller makes for a Service: its cluster and its UID.
pub(crate) fn owner_tags(cluster: &str, service_uid: &str) -> Tags {
    [
        (TAG_CLUSTER.to_string(), cluster.to_string()),
        (TAG_SERVICE_UID.to_string(), service_uid.to_string()),
    ]
    .into()
}

/// Tag key naming the cluster that owns a resource.
pub(crate) const TAG_CLUSTER: &str = "cloudstack-ccm/cluster";
/// Tag key naming the Service (UID) that owns a resource.
pub const TAG_SERVICE_UID: &str = "cloudstack-ccm/service-uid";
/// Tag key set on public IPs the controller associated itself.
pub(crate) const TAG_ASSOCIATED: &str = "cloudstack-ccm/associated";
/// Tag key set on rules the controller gave a health-check policy: their policies are
/// read even when the Service no longer asks for one (to remove it).
pub(crate) const TAG_HEALTH_CHECK: &str = "cloudstack-ccm/health-check";
/// Tag key set on rules the controller created with `openfirewall=true`: CloudStack made
/// their firewall rule (TCP, the rule's port, from `0.0.0.0/0`) and deletes it with them.
pub(crate) const TAG_OPEN_FIREWALL: &str = "cloudstack-ccm/open-firewall";
/// Tag key set on rules the controller gave a stickiness policy (as [`TAG_HEALTH_CHECK`]).
pub(crate) const TAG_STICKINESS: &str = "cloudstack-ccm/stickiness";
/// Tag key set on a public IP the controller associated while its Service asks to keep it
/// (`keep-ip`): should the Service disappear without the controller seeing it (a
/// force-removed finalizer), the orphan pass still never releases the address.
pub(crate) const TAG_KEEP_IP: &str = "cloudstack-ccm/keep-ip";
/// Tag key naming the Node a VPC static route serves.
pub(crate) const TAG_NODE: &str = "cloudstack-ccm/node";
