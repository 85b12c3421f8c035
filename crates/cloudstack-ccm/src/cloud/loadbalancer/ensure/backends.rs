//! Resolving a Service's backends (the VMs of the eligible Nodes on its network), with
//! the memo every Service of one resync shares.

use super::*;

/// The backends of one Service's load balancer and the Nodes left out of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvedBackends {
    /// The network of the load balancer and the VMs of the eligible Nodes on it (no
    /// network when no eligible Node has a VM and none was given).
    pub backends: Backends,
    /// The eligible Nodes on the chosen network and their VMs (Node name → VM id).
    pub vm_of_node: Arc<BTreeMap<String, String>>,
    /// Eligible Nodes on other networks, by name.
    pub elsewhere: Vec<NodeElsewhere>,
}

/// An eligible Node left out because its VM is on another network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeElsewhere {
    /// The Node's name.
    pub node: String,
    /// The network of its VM's default NIC.
    pub network_id: String,
}

impl ResolvedBackends {
    /// The Warning naming the Nodes left out, if any.
    pub(crate) fn elsewhere_warning(&self) -> Option<String> {
        if self.elsewhere.is_empty() {
            return None;
        }
        let names: Vec<String> = self
            .elsewhere
            .iter()
            .map(|n| format!("{} (network {})", n.node, n.network_id))
            .collect();
        Some(format!(
            "nodes on other networks left out of the load balancer on network {}: {}; a load balancer serves one network (choose it with the network-id annotation)",
            self.backends.network_id,
            names.join(", ")
        ))
    }
}

/// Backends resolved from one list of eligible Nodes, one inventory view and one network.
pub(super) struct ResolvedMemo {
    pub(super) nodes: Arc<Vec<(String, String)>>,
    pub(super) network_id: Option<String>,
    pub(super) vms: Arc<ListedVms>,
    pub(super) resolved: ResolvedBackends,
}

/// At most this many resolved backends are kept (one per network a Service names).
pub(super) const RESOLVED_MEMO_SIZE: usize = 8;

impl Engine {
    /// Resolves Nodes (name, providerID) to their VMs and the VMs' default-NIC network,
    /// from the node inventory as it is (a VM's default network does not change while it
    /// lives; the inventory is listed again only when it lacks one of the VMs, so a resync
    /// lists no VM and never makes a call per Node). Nodes whose
    /// VM is unknown are left out. A load balancer serves one network: `network_id` when
    /// given (the one recorded or asked for on the Service), else the network holding the
    /// most of the Nodes (the lowest id among equals); Nodes on other networks are left
    /// out and named in [`ResolvedBackends::elsewhere`].
    ///
    /// The result is reused while `nodes` and the inventory's view are the same objects
    /// (and every VM was found): the Services of a resync share one set of VM ids.
    pub(super) async fn resolve_backends(
        &self,
        nodes: &Arc<Vec<(String, String)>>,
        network_id: Option<&str>,
    ) -> Result<ResolvedBackends, EnsureError> {
        let current = self.inventory.current();
        let trusted = !self.inventory.distrusts();
        if let Some(found) = self.memo().iter().filter(|_| trusted).find(|memo| {
            Arc::ptr_eq(&memo.nodes, nodes)
                && Arc::ptr_eq(&memo.vms, &current)
                && memo.network_id.as_deref() == network_id
        }) {
            return Ok(found.resolved.clone());
        }
        let (resolved, vms, all_found) = self.resolve_backends_now(nodes, network_id).await?;
        if all_found {
            let mut memo = self.memo();
            memo.retain(|memo| Arc::ptr_eq(&memo.nodes, nodes) && Arc::ptr_eq(&memo.vms, &vms));
            if memo.len() >= RESOLVED_MEMO_SIZE {
                memo.remove(0);
            }
            memo.push(ResolvedMemo {
                nodes: nodes.clone(),
                network_id: network_id.map(str::to_string),
                vms,
                resolved: resolved.clone(),
            });
        }
        Ok(resolved)
    }

    pub(super) fn memo(&self) -> std::sync::MutexGuard<'_, Vec<ResolvedMemo>> {
        self.resolved.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// [`Engine::resolve_backends`] without the reuse: also the inventory view it read and
    /// whether every Node's VM was in it.
    async fn resolve_backends_now(
        &self,
        nodes: &[(String, String)],
        network_id: Option<&str>,
    ) -> Result<(ResolvedBackends, Arc<ListedVms>, bool), EnsureError> {
        let mut all_found = true;
        let mut vm_of_node = Vec::with_capacity(nodes.len());
        for (name, provider_id) in nodes {
            match ProviderId::parse(provider_id) {
                Ok(id) => vm_of_node.push((name, id.vm_id().to_ascii_lowercase())),
                Err(err) => {
                    tracing::debug!(node = %name, error = %err, "node left out of load balancers")
                }
            }
        }
        let vms = self
            .inventory
            .view_holding(vm_of_node.iter().map(|(_, vm_id)| vm_id.as_str()))
            .await
            .map_err(EnsureError::Inventory)?;
        let mut by_network: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        for (name, vm_id) in vm_of_node {
            match vms.by_id(&vm_id).and_then(|vm| vm.network_id.as_ref()) {
                Some(network) => {
                    by_network
                        .entry(network.clone())
                        .or_default()
                        .insert(name.clone(), vm_id);
                }
                None => {
                    all_found = false;
                    tracing::debug!(node = %name, vm = %vm_id, "no VM for node; left out of load balancers")
                }
            }
        }
        let chosen = match network_id {
            Some(id) => Some(id.to_string()),
            None => by_network
                .iter()
                .max_by(|(a_id, a), (b_id, b)| a.len().cmp(&b.len()).then(b_id.cmp(a_id)))
                .map(|(id, _)| id.clone()),
        };
        let Some(chosen) = chosen else {
            return Ok((ResolvedBackends::default(), vms, all_found));
        };
        let vm_of_node = by_network.remove(&chosen).unwrap_or_default();
        let vm_ids = Arc::new(vm_of_node.values().cloned().collect());
        let elsewhere = by_network
            .into_iter()
            .flat_map(|(network, members)| {
                members.into_keys().map(move |node| NodeElsewhere {
                    node,
                    network_id: network.clone(),
                })
            })
            .collect();
        let resolved = ResolvedBackends {
            backends: Backends {
                network_id: chosen,
                vm_ids,
                ..Backends::default()
            },
            vm_of_node: Arc::new(vm_of_node),
            elsewhere,
        };
        Ok((resolved, vms, all_found))
    }
}
