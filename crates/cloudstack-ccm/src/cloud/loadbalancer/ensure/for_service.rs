//! The engine's front door for one Service: [`Engine::plan_service`] decides the
//! network once, resolves the backends, picks each rule's members and plans; the
//! controller then runs the plan with [`Engine::apply`] (the dry run prints it), and
//! [`Engine::ensure_deleted`] removes the load balancer.

use super::*;
use crate::cloud::loadbalancer::members::{
    MemberSelection, RuleMembers, all_kept, per_rule_members,
};

/// One Service's load balancer as planned, with what the plan was made from.
#[derive(Debug)]
pub(crate) struct PlannedService {
    /// The backends on the Service's network (its per-rule members set) and the Nodes
    /// left out of it.
    pub(crate) resolved: ResolvedBackends,
    /// Rules that keep their members for want of a Node with an endpoint.
    pub(crate) kept_rules: KeptRules,
    /// The plan ready to run, or why it could not be made; `None` when no eligible Node
    /// has a VM on the network (a load balancer is never emptied for want of Nodes:
    /// nothing is planned). An error here comes after the backends were resolved, so
    /// the caller still reports the Nodes left out and the rules that keep members.
    pub(crate) prepared: Result<Option<Prepared>, EnsureError>,
}

impl Engine {
    /// Plans the load balancer of `spec` for the `eligible` Nodes (name, providerID) and
    /// the member selection of the Service, without changing anything.
    ///
    /// The network is decided here, once: the one recorded on (or asked for by) the
    /// Service, else the one of its existing rules, else the network holding the most of
    /// the eligible Nodes' VMs.
    pub(crate) async fn plan_service(
        &self,
        spec: &LbSpec,
        eligible: &Arc<Vec<(String, String)>>,
        selection: &MemberSelection,
    ) -> Result<PlannedService, EnsureError> {
        let network = self.network_in_use(spec).await?;
        let mut resolved = self.resolve_backends(eligible, network.as_deref()).await?;
        let kept_rules = per_rule(
            &mut resolved.backends,
            &resolved.vm_of_node,
            selection,
            spec,
        );
        let prepared = if resolved.backends.vm_ids.is_empty() {
            Ok(None)
        } else {
            self.prepare(spec, &resolved.backends).await.map(Some)
        };
        Ok(PlannedService {
            resolved,
            kept_rules,
            prepared,
        })
    }
}

/// Rules that keep their members for want of a Node with an endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeptRules {
    /// None: every rule gets its members.
    None,
    /// Some rules; the Warning naming them.
    Some(String),
    /// Every rule; the note of the `UnAvailableLoadBalancer` Warning.
    All(String),
}

/// Sets the per-rule members of `backends` for `selection` (from `vm_of_node`, the
/// eligible Nodes' VMs on the network) and says which rules keep their members.
pub(crate) fn per_rule(
    backends: &mut Backends,
    vm_of_node: &BTreeMap<String, String>,
    selection: &MemberSelection,
    spec: &LbSpec,
) -> KeptRules {
    let keys = spec
        .rules
        .iter()
        .map(|rule| (rule.protocol.ip_protocol(), rule.public_port));
    backends.per_rule = per_rule_members(vm_of_node, selection, keys);
    if all_kept(&backends.per_rule) {
        return KeptRules::All(
            "no eligible node holds a ready endpoint of the Service (externalTrafficPolicy: Local): the load balancer keeps its members until one does".to_string(),
        );
    }
    let kept: Vec<String> = backends
        .per_rule
        .iter()
        .filter(|(_, members)| **members == RuleMembers::Keep)
        .map(|((protocol, port), _)| format!("{}/{port}", protocol.as_str()))
        .collect();
    if kept.is_empty() {
        KeptRules::None
    } else {
        KeptRules::Some(format!(
            "port(s) {}: no eligible node holds a ready endpoint (externalTrafficPolicy: Local); their rules keep their members",
            kept.join(", ")
        ))
    }
}
