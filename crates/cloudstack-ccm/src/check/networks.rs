//! The networks checks: from the Nodes to their VMs and default NICs, each network with its
//! kind, load-balancer provider and what the controller does there — decided by the
//! planner's own functions (`public_refusal`, `internal_refusal`), so the check says what
//! the controller then does.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::kubernetes::NodeNames;
use super::{Check, Group, Status};
use crate::cloud::instances::{Instances, NodeRef};
use crate::cloud::inventory::{CloudStackVms, Inventory, InventorySettings};
use crate::cloud::key_access::Feature;
use crate::cloud::loadbalancer::capabilities::{
    NetworkCapabilities, NetworkFacts, PortAccess, ServerFeatures,
};

/// A network of the Nodes and what the controller does there.
pub(super) struct NetworkRow {
    /// Its capabilities.
    pub caps: NetworkCapabilities,
    /// Why a public load balancer is refused there (`None`: served).
    pub public: Option<String>,
    /// Why an internal load balancer is refused there (`None`: served).
    pub internal: Option<String>,
}

/// What the networks group found.
pub(super) struct Networks {
    /// The checks.
    pub group: Group,
    /// The Nodes' networks.
    pub caps: Vec<NetworkRow>,
}

impl Networks {
    /// How many networks satisfy `f`.
    pub fn count(&self, f: impl Fn(&NetworkRow) -> bool) -> usize {
        self.caps.iter().filter(|n| f(n)).count()
    }

    /// Whether some network of the Nodes offers `feature` (`None`: no network known, or
    /// not a network matter).
    pub fn offers(&self, feature: Feature) -> Option<bool> {
        if self.caps.is_empty() {
            return None;
        }
        let any = |f: &dyn Fn(&NetworkRow) -> bool| Some(self.caps.iter().any(f));
        match feature {
            Feature::TlsTermination => any(&|n| n.public.is_none() && n.caps.ssl_termination),
            Feature::InternalLoadBalancer => any(&|n| n.internal.is_none()),
            Feature::RoutingFirewall => any(&|n| n.caps.routed),
            Feature::Stickiness => any(&|n| !n.caps.stickiness_methods.is_empty()),
            Feature::HealthCheck => any(&|n| n.caps.health_check),
            Feature::StaticRoutes => any(&|n| n.caps.vpc_id.is_some()),
            _ => None,
        }
    }
}

/// Checks the networks of `nodes` (or says why they cannot be checked).
pub(super) async fn check(
    client: &cloudstack::Client,
    version: Option<&cloudstack::ServerVersion>,
    nodes: Result<&[NodeNames], &String>,
) -> Networks {
    let skipped = |detail: &str| Networks {
        group: Group {
            name: "Networks",
            checks: vec![Check::new("networks of the Nodes", Status::Skip, detail)],
        },
        caps: Vec::new(),
    };
    let Some(version) = version else {
        return skipped("CloudStack cannot be asked");
    };
    let nodes = match nodes {
        Ok(nodes) => nodes,
        Err(why) => return skipped(why),
    };
    if nodes.is_empty() {
        return skipped("the cluster has no Node yet");
    }
    // The node controller's own lookup: one VM list, Nodes found by providerID, else by
    // name (case-insensitive, an FQDN's first label).
    let inventory = Inventory::new(
        Arc::new(CloudStackVms::new(client.clone())),
        InventorySettings::default(),
    );
    let instances = Instances::new(Arc::new(inventory), None);
    let vms = match instances.inventory().snapshot().await {
        Ok(vms) => vms,
        Err(error) => return skipped(&format!("cannot list the VMs: {error}")),
    };
    let mut checks = Vec::new();
    let mut networks: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    let mut without_vm = Vec::new();
    for node in nodes {
        let key = NodeRef {
            name: &node.name,
            provider_id: node.provider_id.as_deref().filter(|id| !id.is_empty()),
            ..NodeRef::default()
        };
        let network = instances
            .find_vm_in(&vms, &key)
            .ok()
            .flatten()
            .and_then(|vm| vm.network_id.clone());
        match network {
            Some(network) => networks.entry(network).or_default().push(&node.name),
            None => without_vm.push(node.name.as_str()),
        }
    }
    if !without_vm.is_empty() {
        checks.push(
            Check::new(
                "Nodes without a VM",
                Status::Warn,
                format!(
                    "no VM of the keys' account or project matches {}",
                    without_vm.join(", ")
                ),
            )
            .hint("check project-id and that the Node names (or providerIDs) are the VMs'")
            .doc("docs/troubleshooting.md"),
        );
    }
    let listed = match client
        .list_networks(&cloudstack::ListNetworks::default())
        .await
    {
        Ok(listed) => listed,
        Err(error) => {
            checks.push(Check::new(
                "networks",
                Status::Fail,
                format!("cannot list the networks: {error}"),
            ));
            return Networks {
                group: Group {
                    name: "Networks",
                    checks,
                },
                caps: Vec::new(),
            };
        }
    };
    let server = ServerFeatures::for_version(version.major(), version.minor(), version.patch());
    let mut rows = Vec::new();
    for (id, node_names) in &networks {
        let Some(network) = listed.iter().find(|n| n.id.as_deref() == Some(id.as_str())) else {
            checks.push(Check::new(
                format!("network {id}"),
                Status::Warn,
                format!("not listed for the keys (Nodes {})", node_names.join(", ")),
            ));
            continue;
        };
        let caps = NetworkCapabilities::from_facts(&NetworkFacts::from_network(network), &server);
        let row = NetworkRow {
            public: caps.public_refusal(),
            internal: caps.internal_refusal(),
            caps,
        };
        checks.push(network_check(&row, node_names));
        rows.push(row);
    }
    if !rows.is_empty()
        && rows
            .iter()
            .all(|r| r.public.is_some() && r.internal.is_some())
    {
        checks.push(
            Check::new(
                "load balancers",
                Status::Fail,
                "no network of the Nodes has a CloudStack load balancer: every LoadBalancer Service of ours would be refused",
            )
            .hint("give the Services a loadBalancerClass served by MetalLB or Cilium LB-IPAM, or move the Nodes to a network with the Lb service")
            .doc("docs/networks.md"),
        );
    }
    checks.push(free_addresses(client).await);
    Networks {
        group: Group {
            name: "Networks",
            checks,
        },
        caps: rows,
    }
}

/// One network's line: its kind, provider and protocols, and what the controller does.
fn network_check(row: &NetworkRow, nodes: &[&str]) -> Check {
    let caps = &row.caps;
    let protocols: BTreeSet<&str> = caps.lb_protocols.iter().map(|p| p.as_str()).collect();
    let acl = match &caps.port_access {
        PortAccess::NetworkAcl {
            acl_name: Some(name),
            ..
        } => format!(", ACL list {name}"),
        _ => String::new(),
    };
    let facts = format!(
        "{} ({}, Lb provider {}, protocols {}, TLS termination {}{acl}; Nodes {})",
        caps.network_label(),
        caps.kind(),
        caps.lb_provider.as_deref().unwrap_or("none"),
        if protocols.is_empty() {
            "none".to_string()
        } else {
            protocols.into_iter().collect::<Vec<_>>().join(", ")
        },
        if caps.ssl_termination { "yes" } else { "no" },
        nodes.join(", ")
    );
    let name = format!("network {}", caps.network_name);
    match (&row.public, &row.internal) {
        (None, None) => Check::new(name, Status::Ok, format!("{facts}: public and internal load balancers served")),
        (None, Some(_)) => Check::new(name, Status::Ok, format!("{facts}: public load balancers served")),
        (Some(_), None) => Check::new(
            name,
            Status::Warn,
            format!("{facts}: internal load balancers only"),
        )
        .hint("annotate the Services service.beta.kubernetes.io/cloudstack-load-balancer-internal: \"true\"")
        .doc("docs/networks.md"),
        (Some(why), Some(_)) if caps.routed => Check::new(
            name,
            Status::Warn,
            format!("{facts}: no load balancer; the routing firewall companion opens the addresses of another controller's Services"),
        )
        .hint(why.clone())
        .doc("docs/networks.md"),
        (Some(why), Some(_)) => Check::new(name, Status::Warn, format!("{facts}: Services are refused"))
            .hint(why.clone())
            .doc("docs/networks.md"),
    }
}

/// The zone's free public addresses, where the keys may see them.
async fn free_addresses(client: &cloudstack::Client) -> Check {
    let listed = client
        .list_public_ip_addresses(&cloudstack::ListPublicIpAddresses {
            allocatedonly: Some(false),
            state: Some("Free".into()),
            ..Default::default()
        })
        .await;
    match listed {
        Ok(free) if free.is_empty() => Check::new(
            "free public addresses",
            Status::Warn,
            "none free: a new public load balancer would fail (533)",
        )
        .hint("ask the CloudStack operator for public addresses, or bring one per Service (spec.loadBalancerIP)"),
        Ok(free) => Check::new("free public addresses", Status::Ok, format!("{} free", free.len())),
        Err(error) => Check::new("free public addresses", Status::Skip, error.to_string()),
    }
}
