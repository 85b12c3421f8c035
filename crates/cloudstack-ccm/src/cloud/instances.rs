//! Node metadata, existence and shutdown, answered from the [`Inventory`].
//!
//! A node is matched to its VM by providerID when it has one (any form
//! `ProviderId::parse` accepts), else by name: ASCII case-insensitive, exact
//! equality (never a substring), and for an FQDN node name also on its first DNS
//! label (`worker-1.example.com` → VM `worker-1`).
//!
//! Label values (instance type, zone, region) are made valid Kubernetes label
//! values by `label_value`: every character other than `A-Z a-z 0-9 - _ .`
//! becomes `-`, the result is cut to 63 characters and trimmed to start and end
//! with an alphanumeric (`Small Instance (2 vCPU)` → `Small-Instance--2-vCPU`).
//! Migration impact: the Go CCM (v1.x) deletes every non-alphanumeric character of
//! the offering and zone names instead (`Small Instance` → `SmallInstance`,
//! `ck8s-medium` → `ck8smedium`, zone `zone-1` → `zone1`). Nodes initialised by the Go
//! CCM keep their labels (labels are set once, at initialisation), but new nodes get
//! the readable form, so selectors and topology constraints on
//! `node.kubernetes.io/instance-type` or the zone labels must list both forms while
//! both kinds of node exist. Names that are plain alphanumerics are identical.
//!
//! This module knows nothing of Kubernetes types: controllers pass the node's
//! name, providerID and `alpha.kubernetes.io/provided-node-ip` annotation as strings.

use std::net::IpAddr;
use std::sync::Arc;

use super::inventory::{Inventory, InventoryError, ListedVms, VmRecord};
use super::provider_id::{ProviderId, ProviderIdError};

/// Longest valid label value.
const MAX_LABEL_VALUE_LEN: usize = 63;

/// What a controller knows of a node when it asks about its VM.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeRef<'a> {
    /// `metadata.name`.
    pub name: &'a str,
    /// `spec.providerID`, if set and non-empty.
    pub provider_id: Option<&'a str>,
    /// The kubelet's `alpha.kubernetes.io/provided-node-ip` annotation, if any.
    pub provided_node_ip: Option<&'a str>,
    /// `metadata.creationTimestamp`: a Node matched by name is matched in a VM list asked
    /// for after it (see [`Inventory::lookup_listed_after`]).
    pub created: Option<jiff::Timestamp>,
    /// A moment the Node is known to have existed (when this process received it); a VM
    /// list asked for after it is newer than the Node.
    pub known_since: Option<std::time::Instant>,
    /// The providerID of a Node of the same name deleted lately: this Node may be on a VM
    /// that replaced that one under the same name, so it is matched by name only in a VM
    /// list asked for after it existed.
    pub previous_provider_id: Option<&'a str>,
}

/// Kind of a node address (the Kubernetes `NodeAddressType` values we produce).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddressKind {
    /// `InternalIP`: the addresses of the VM's NICs.
    InternalIp,
    /// `ExternalIP`: the VM's static-NAT public IP.
    ExternalIp,
    /// `Hostname`: the node's own name.
    Hostname,
}

impl AddressKind {
    /// The Kubernetes spelling (`InternalIP`, `ExternalIP`, `Hostname`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InternalIp => "InternalIP",
            Self::ExternalIp => "ExternalIP",
            Self::Hostname => "Hostname",
        }
    }
}

/// One node address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeAddress {
    /// Its kind.
    pub kind: AddressKind,
    /// The address (an IP, or the host name).
    pub address: String,
}

/// Everything the cloud-node controller writes on a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceMetadata {
    /// `external-cloudstack://<uuid>`.
    pub provider_id: String,
    /// Service offering name as a label value; empty when unknown.
    pub instance_type: String,
    /// Zone name as a label value.
    pub zone: String,
    /// Configured region, else the zone, as a label value.
    pub region: String,
    /// Addresses in the order they go into `status.addresses`.
    pub addresses: Vec<NodeAddress>,
}

/// Why a node's VM could not be looked up.
#[derive(Debug, Clone, thiserror::Error)]
pub enum InstanceError {
    /// The node's `spec.providerID` is not a CloudStack providerID.
    #[error("node {node}: spec.providerID: {source}")]
    ProviderId {
        /// Node name.
        node: String,
        /// What is wrong with it.
        source: ProviderIdError,
    },
    /// More than one VM has the node's name.
    #[error("node {node}: {} VMs are named {name:?} ({}); set spec.providerID to pick one", ids.len(), ids.join(", "))]
    AmbiguousName {
        /// Node name.
        node: String,
        /// The name that matched.
        name: String,
        /// Ids of the matching VMs.
        ids: Vec<String>,
    },
    /// The `alpha.kubernetes.io/provided-node-ip` annotation is not one of the VM's addresses.
    #[error(
        "node {node}: annotation alpha.kubernetes.io/provided-node-ip: {ip:?} is not an address of VM {vm_id} ({})",
        known.join(", ")
    )]
    ProvidedNodeIp {
        /// Node name.
        node: String,
        /// The annotation value.
        ip: String,
        /// The VM id.
        vm_id: String,
        /// The VM's addresses.
        known: Vec<String>,
    },
    /// The VM list could not be read.
    #[error(transparent)]
    Inventory(#[from] InventoryError),
}

/// Node questions answered from the inventory.
#[derive(Debug, Clone)]
pub struct Instances {
    inventory: Arc<Inventory>,
    region: Option<String>,
}

impl Instances {
    /// Answers from `inventory`; `region` is the cloud-config `region`, if any.
    pub fn new(inventory: Arc<Inventory>, region: Option<String>) -> Self {
        Self {
            inventory,
            region: region.filter(|r| !r.trim().is_empty()),
        }
    }

    /// The inventory behind these answers.
    pub fn inventory(&self) -> &Arc<Inventory> {
        &self.inventory
    }

    /// The node's VM, `None` when there is none (after one refresh on a miss).
    pub(crate) async fn find_vm(
        &self,
        node: &NodeRef<'_>,
    ) -> Result<Option<Arc<VmRecord>>, InstanceError> {
        let key = VmKey::for_node(node)?;
        // By id the answer cannot be another VM; by name, after a Node of the same name
        // went, a list older than this Node may hold the VM its VM replaced.
        let created = match key {
            VmKey::Name(_) if node.previous_provider_id.is_some() => {
                node.created.map(|created| (created, node.known_since))
            }
            _ => None,
        };
        let found = self
            .inventory
            .lookup_listed_after(created, |snapshot| match key.resolve(node.name, snapshot) {
                Ok(None) => None,
                other => Some(other),
            })
            .await?;
        found.transpose().map(Option::flatten)
    }

    /// The node's VM in `snapshot` as it is (no refresh): for questions about many nodes
    /// at once that must all be answered from the same list.
    pub(crate) fn find_vm_in(
        &self,
        snapshot: &ListedVms,
        node: &NodeRef<'_>,
    ) -> Result<Option<Arc<VmRecord>>, InstanceError> {
        VmKey::for_node(node)?.resolve(node.name, snapshot)
    }

    /// Metadata for the node, `None` when its VM is not (yet) there.
    pub async fn metadata(
        &self,
        node: &NodeRef<'_>,
    ) -> Result<Option<InstanceMetadata>, InstanceError> {
        match self.find_vm(node).await? {
            Some(vm) => metadata_for(&vm, node, self.region.as_deref()).map(Some),
            None => Ok(None),
        }
    }

    /// Whether the node's VM exists; a VM that is gone is `false`, not an error.
    pub async fn exists(&self, node: &NodeRef<'_>) -> Result<bool, InstanceError> {
        Ok(self.find_vm(node).await?.is_some())
    }

    /// Whether the node's VM is `Stopped`, `Stopping` or `Shutdown` (`false` when gone).
    pub async fn shutdown(&self, node: &NodeRef<'_>) -> Result<bool, InstanceError> {
        Ok(self
            .find_vm(node)
            .await?
            .is_some_and(|vm| vm.is_shut_down()))
    }
}

/// How a node is matched to a VM.
#[derive(Debug, Clone, PartialEq, Eq)]
enum VmKey {
    /// By the id in its providerID.
    Id(ProviderId),
    /// By name: each candidate in turn (full name, then first DNS label).
    Name(Vec<String>),
}

impl VmKey {
    fn for_node(node: &NodeRef<'_>) -> Result<Self, InstanceError> {
        match node.provider_id.map(str::trim).filter(|p| !p.is_empty()) {
            Some(provider_id) => ProviderId::parse(provider_id)
                .map(Self::Id)
                .map_err(|source| InstanceError::ProviderId {
                    node: node.name.to_string(),
                    source,
                }),
            None => Ok(Self::Name(name_candidates(node.name))),
        }
    }

    fn resolve(
        &self,
        node: &str,
        snapshot: &ListedVms,
    ) -> Result<Option<Arc<VmRecord>>, InstanceError> {
        match self {
            Self::Id(id) => Ok(snapshot.by_id(id.vm_id()).cloned()),
            Self::Name(candidates) => {
                for name in candidates {
                    match snapshot.by_name(name) {
                        [] => continue,
                        [vm] => return Ok(Some(vm.clone())),
                        many => {
                            return Err(InstanceError::AmbiguousName {
                                node: node.to_string(),
                                name: name.clone(),
                                ids: many.iter().map(|vm| vm.id.clone()).collect(),
                            });
                        }
                    }
                }
                Ok(None)
            }
        }
    }
}

/// Names a VM of this node may have: the node name, then its first DNS label.
fn name_candidates(node_name: &str) -> Vec<String> {
    let full = node_name.to_ascii_lowercase();
    let mut candidates = vec![full.clone()];
    if let Some((first, _)) = full.split_once('.')
        && !first.is_empty()
    {
        candidates.push(first.to_string());
    }
    candidates
}

/// Builds the metadata of `node` from its VM.
pub(crate) fn metadata_for(
    vm: &VmRecord,
    node: &NodeRef<'_>,
    region: Option<&str>,
) -> Result<InstanceMetadata, InstanceError> {
    let provider_id =
        ProviderId::from_vm_id(&vm.id).map_err(|source| InstanceError::ProviderId {
            node: node.name.to_string(),
            source,
        })?;
    let zone = label_value(&vm.zone_name);
    let region = region.map(label_value).unwrap_or_else(|| zone.clone());
    Ok(InstanceMetadata {
        provider_id: provider_id.to_string(),
        instance_type: label_value(&vm.service_offering_name),
        zone,
        region,
        addresses: node_addresses(vm, node)?,
    })
}

/// The node's addresses: every NIC's IPv4 and IPv6, the default NIC's first
/// (`InternalIP`), static-NAT IP (`ExternalIP`), the node name (`Hostname`). With a
/// provided node IP (the kubelet's `--node-ip`, on any NIC), like the Kubernetes
/// cloud-node controller: the IP must be one of the VM's addresses; it comes first and
/// other addresses of its kind are dropped.
pub(crate) fn node_addresses(
    vm: &VmRecord,
    node: &NodeRef<'_>,
) -> Result<Vec<NodeAddress>, InstanceError> {
    let mut cloud: Vec<NodeAddress> = vm
        .internal_ips
        .iter()
        .map(|ip| NodeAddress {
            kind: AddressKind::InternalIp,
            address: ip.clone(),
        })
        .collect();
    if let Some(ip) = &vm.public_ip {
        cloud.push(NodeAddress {
            kind: AddressKind::ExternalIp,
            address: ip.clone(),
        });
    }
    cloud.push(NodeAddress {
        kind: AddressKind::Hostname,
        address: node.name.to_string(),
    });

    let provided: Vec<&str> = node
        .provided_node_ip
        .map(|ips| {
            ips.split(',')
                .map(str::trim)
                .filter(|ip| !ip.is_empty())
                .collect()
        })
        .unwrap_or_default();
    if provided.is_empty() {
        return Ok(cloud);
    }
    let mut enforced: Vec<NodeAddress> = Vec::new();
    for ip in provided {
        let wanted: Option<IpAddr> = ip.parse().ok();
        let matched = cloud.iter().find(|address| {
            address.kind != AddressKind::Hostname
                && wanted.is_some()
                && address.address.parse::<IpAddr>().ok() == wanted
        });
        match matched {
            Some(address) => enforced.push(address.clone()),
            None => {
                return Err(InstanceError::ProvidedNodeIp {
                    node: node.name.to_string(),
                    ip: ip.to_string(),
                    vm_id: vm.id.clone(),
                    known: cloud
                        .iter()
                        .filter(|a| a.kind != AddressKind::Hostname)
                        .map(|a| a.address.clone())
                        .collect(),
                });
            }
        }
    }
    let enforced_kinds: Vec<AddressKind> = enforced.iter().map(|a| a.kind).collect();
    enforced.extend(
        cloud
            .into_iter()
            .filter(|a| !enforced_kinds.contains(&a.kind)),
    );
    Ok(enforced)
}

/// Makes `raw` a valid Kubernetes label value (see the module documentation):
/// invalid characters become `-`, at most 63 characters, alphanumerics at both ends.
pub(crate) fn label_value(raw: &str) -> String {
    let replaced: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .take(MAX_LABEL_VALUE_LEN)
        .collect();
    replaced
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "8a0b4f3e-1c2d-4e5f-9a8b-7c6d5e4f3a2b";

    fn vm() -> VmRecord {
        VmRecord {
            id: ID.into(),
            name: "Worker-1".into(),
            state: "Running".into(),
            zone_name: "Zone 1".into(),
            service_offering_name: "Small Instance".into(),
            internal_ips: vec!["10.1.1.5".into(), "fd00::5".into()],
            public_ip: Some("203.0.113.7".into()),
            network_id: None,
        }
    }

    fn node(name: &str) -> NodeRef<'_> {
        NodeRef {
            name,
            ..Default::default()
        }
    }

    fn addresses(list: &[NodeAddress]) -> Vec<(&'static str, &str)> {
        list.iter()
            .map(|a| (a.kind.as_str(), a.address.as_str()))
            .collect()
    }

    #[test]
    fn label_values() {
        let cases = [
            ("Small Instance", "Small-Instance"),
            ("Small Instance (2 vCPU)", "Small-Instance--2-vCPU"),
            ("ck8s.medium_v2", "ck8s.medium_v2"),
            ("  -Large- ", "Large"),
            ("große", "gro-e"),
            ("", ""),
            ("()", ""),
            (&"a".repeat(70), &"a".repeat(63)),
            (&format!("{}-b", "a".repeat(62)), &"a".repeat(62)),
        ];
        for (raw, expected) in cases {
            assert_eq!(label_value(raw), expected, "{raw:?}");
        }
    }

    #[test]
    fn name_candidates_for_fqdn_and_plain_names() {
        assert_eq!(name_candidates("Worker-1"), vec!["worker-1"]);
        assert_eq!(
            name_candidates("Worker-1.Example.com"),
            vec!["worker-1.example.com", "worker-1"]
        );
        assert_eq!(name_candidates(".x"), vec![".x"]);
    }

    #[test]
    fn metadata_from_vm() {
        let metadata = metadata_for(&vm(), &node("worker-1.example.com"), None).unwrap();
        assert_eq!(metadata.provider_id, format!("external-cloudstack://{ID}"));
        assert_eq!(metadata.instance_type, "Small-Instance");
        assert_eq!(metadata.zone, "Zone-1");
        assert_eq!(metadata.region, "Zone-1");
        assert_eq!(
            addresses(&metadata.addresses),
            vec![
                ("InternalIP", "10.1.1.5"),
                ("InternalIP", "fd00::5"),
                ("ExternalIP", "203.0.113.7"),
                ("Hostname", "worker-1.example.com"),
            ]
        );
        let metadata = metadata_for(&vm(), &node("worker-1"), Some("eu west")).unwrap();
        assert_eq!(metadata.region, "eu-west");
    }

    #[test]
    fn provided_node_ip_comes_first_and_replaces_its_kind() {
        let vm = vm();
        let with_ip = |ip| NodeRef {
            name: "worker-1",
            provider_id: None,
            provided_node_ip: Some(ip),
            created: None,
            known_since: None,
            previous_provider_id: None,
        };
        let got = node_addresses(&vm, &with_ip("fd00:0::5")).unwrap();
        assert_eq!(
            addresses(&got),
            vec![
                ("InternalIP", "fd00::5"),
                ("ExternalIP", "203.0.113.7"),
                ("Hostname", "worker-1"),
            ]
        );
        let got = node_addresses(&vm, &with_ip("203.0.113.7")).unwrap();
        assert_eq!(addresses(&got)[0], ("ExternalIP", "203.0.113.7"));
        assert_eq!(got.len(), 4);
        let got = node_addresses(&vm, &with_ip("10.1.1.5,fd00::5")).unwrap();
        assert_eq!(
            addresses(&got)[..2],
            [("InternalIP", "10.1.1.5"), ("InternalIP", "fd00::5")]
        );

        let error = node_addresses(&vm, &with_ip("10.9.9.9")).unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("worker-1") && text.contains("10.9.9.9"),
            "{text}"
        );
        assert!(text.contains("provided-node-ip"), "{text}");
        assert!(node_addresses(&vm, &with_ip("worker-1")).is_err());
    }

    #[test]
    fn resolve_matches_exact_names_only() {
        let other = VmRecord {
            id: "9a0b4f3e-1c2d-4e5f-9a8b-7c6d5e4f3a2b".into(),
            name: "worker-10".into(),
            ..vm()
        };
        let snapshot = ListedVms::from_records(vec![vm(), other.clone()]);
        let resolve = |name: &str| {
            VmKey::for_node(&node(name))
                .unwrap()
                .resolve(name, &snapshot)
        };
        assert_eq!(resolve("WORKER-1").unwrap().unwrap().id, ID);
        assert_eq!(resolve("worker-1.cluster.local").unwrap().unwrap().id, ID);
        assert_eq!(resolve("worker-10").unwrap().unwrap().id, other.id);
        assert!(resolve("worker").unwrap().is_none());
        assert!(resolve("orker-1").unwrap().is_none());

        let twin = VmRecord {
            id: "7a0b4f3e-1c2d-4e5f-9a8b-7c6d5e4f3a2b".into(),
            ..vm()
        };
        let snapshot = ListedVms::from_records(vec![vm(), twin]);
        let error = VmKey::for_node(&node("worker-1"))
            .unwrap()
            .resolve("worker-1", &snapshot)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("2 VMs are named") && error.contains(ID),
            "{error}"
        );
    }

    #[test]
    fn key_for_node_prefers_the_provider_id() {
        let by_id = NodeRef {
            name: "worker-1",
            provider_id: Some("cloudstack:///8a0b4f3e-1c2d-4e5f-9a8b-7c6d5e4f3a2b"),
            provided_node_ip: None,
            created: None,
            known_since: None,
            previous_provider_id: None,
        };
        assert_eq!(
            VmKey::for_node(&by_id).unwrap(),
            VmKey::Id(ProviderId::parse(ID).unwrap())
        );
        let empty = NodeRef {
            provider_id: Some(" "),
            ..node("w")
        };
        assert_eq!(
            VmKey::for_node(&empty).unwrap(),
            VmKey::Name(vec!["w".into()])
        );
        let foreign = NodeRef {
            provider_id: Some("aws:///i-1"),
            ..node("w")
        };
        let error = VmKey::for_node(&foreign).unwrap_err().to_string();
        assert!(
            error.contains("node w") && error.contains("aws:///i-1"),
            "{error}"
        );
    }
}
