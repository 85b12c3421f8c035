//! `externalTrafficPolicy`: which members a Service's rules get. `Cluster` (the default):
//! every eligible Node, and no endpoint is read. `Local`: per rule, the eligible Nodes
//! holding a ready endpoint for its port; a rule with none keeps its members (with a
//! Warning), so vanished endpoints never empty a load balancer.

use k8s_openapi::api::core::v1::Service;

use super::endpoint_watch::{EndpointWatch, EndpointsNotRead};
use super::endpoints::is_local;
use crate::cloud::loadbalancer::members::{
    MemberSelection, RuleMembers, all_kept, per_rule_members,
};
use crate::cloud::loadbalancer::plan::Backends;
use crate::cloud::loadbalancer::spec::LbSpec;
use std::collections::BTreeMap;

/// What the member selection of a Service is: every eligible Node for `Cluster`, the
/// Nodes with endpoints for `Local` (read from the shared endpoint watch).
pub(crate) async fn member_selection(
    service: &Service,
    endpoints: &EndpointWatch,
) -> Result<MemberSelection, EndpointsNotRead> {
    if !is_local(service) {
        endpoints.forget(service);
        return Ok(MemberSelection::AllEligible);
    }
    Ok(MemberSelection::NodesWithEndpoints(
        endpoints.nodes_by_rule(service).await?,
    ))
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
