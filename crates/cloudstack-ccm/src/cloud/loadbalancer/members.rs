//! Which VMs each rule of a Service gets as members, from a plain member selection.
//!
//! A Service with `externalTrafficPolicy: Cluster` sends every rule to every eligible
//! Node: kube-proxy forwards from any Node to any endpoint. With `Local`, kube-proxy drops
//! connections on Nodes holding no local endpoint of the Service, so a rule's members are
//! the eligible Nodes holding a ready endpoint for the rule's port. The controllers read
//! the endpoints and hand over only the Node names per rule ([`MemberSelection`]); this
//! module maps them to VMs through the resolved backends.
//!
//! Never an empty member set because endpoints vanished: a rule whose port has no ready
//! endpoint on an eligible Node keeps the members it has ([`RuleMembers::Keep`]).
//!
//! A member VM the VM inventory no longer lists was expunged, and CloudStack drops the
//! load-balancer mappings of a VM it expunges: such a member is never removed by a call
//! (the call could only fail). See [`gone_among`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use super::observe::ObservedLb;
use super::observe::details::RuleDetailsCache;
use super::vocabulary::IpProtocol;
use crate::cloud::inventory::{Inventory, InventoryError, ListedVms};

/// A rule of a Service by what decides its members: its IP protocol and public port.
pub(crate) type RuleKey = (IpProtocol, u16);

/// How the members of a Service's rules are chosen: the engine's input, free of
/// Kubernetes types.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum MemberSelection {
    /// Every eligible Node's VM, for every rule (`externalTrafficPolicy: Cluster`).
    #[default]
    AllEligible,
    /// Per rule, the names of the Nodes holding a ready endpoint of the Service for the
    /// rule's port (`externalTrafficPolicy: Local`); a rule not listed has none.
    NodesWithEndpoints(BTreeMap<RuleKey, BTreeSet<String>>),
}

/// The members one rule gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleMembers {
    /// These VMs, no other.
    Vms(Arc<BTreeSet<String>>),
    /// The members the rule has stay as they are (no eligible Node holds a ready endpoint
    /// for its port); a new rule gets none.
    Keep,
}

impl MemberSelection {
    /// Why the members are what they are, for the dry run and logs.
    pub fn reason(&self) -> &'static str {
        match self {
            MemberSelection::AllEligible => "Cluster: every eligible node",
            MemberSelection::NodesWithEndpoints(_) => {
                "Local: the eligible nodes holding a ready endpoint"
            }
        }
    }
}

/// The members of each rule of `keys` for `selection`, from the VMs of the eligible Nodes
/// on the load balancer's network (`vm_of_node`: Node name → VM id); empty for
/// [`MemberSelection::AllEligible`] (every rule gets the backends' `vm_ids`).
pub(crate) fn per_rule_members(
    vm_of_node: &BTreeMap<String, String>,
    selection: &MemberSelection,
    keys: impl IntoIterator<Item = RuleKey>,
) -> BTreeMap<RuleKey, RuleMembers> {
    let MemberSelection::NodesWithEndpoints(nodes) = selection else {
        return BTreeMap::new();
    };
    let mut shared: Vec<Arc<BTreeSet<String>>> = Vec::new();
    keys.into_iter()
        .map(|key| {
            let vms: BTreeSet<String> = nodes
                .get(&key)
                .into_iter()
                .flatten()
                .filter_map(|node| vm_of_node.get(node).cloned())
                .collect();
            if vms.is_empty() {
                return (key, RuleMembers::Keep);
            }
            // Rules of one Service mostly share their Nodes: share one set.
            let set = match shared.iter().find(|s| ***s == vms) {
                Some(found) => found.clone(),
                None => {
                    let set = Arc::new(vms);
                    shared.push(set.clone());
                    set
                }
            };
            (key, RuleMembers::Vms(set))
        })
        .collect()
}

/// Whether every rule keeps its members (no rule has a Node to serve it).
pub(crate) fn all_kept(per_rule: &BTreeMap<RuleKey, RuleMembers>) -> bool {
    !per_rule.is_empty() && per_rule.values().all(|m| *m == RuleMembers::Keep)
}

/// The members of `observed`'s rules that are not wanted there (`per_rule`, else
/// `vm_ids`: the backends' members): what the plan would remove.
pub(crate) fn removal_candidates(
    observed: &ObservedLb,
    vm_ids: &BTreeSet<String>,
    per_rule: &BTreeMap<RuleKey, RuleMembers>,
) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for rule in &observed.rules {
        let key = (rule.protocol.ip_protocol(), rule.public_port);
        let wanted: &BTreeSet<String> = match per_rule.get(&key) {
            None => vm_ids,
            Some(RuleMembers::Vms(vms)) => vms,
            Some(RuleMembers::Keep) => continue,
        };
        out.extend(rule.members.difference(wanted).cloned());
    }
    out
}

/// The VMs of `candidates` that the VM inventory `listed` does not hold (expunged);
/// none while the inventory has never listed.
pub(crate) fn gone_among(candidates: BTreeSet<String>, listed: &ListedVms) -> BTreeSet<String> {
    if listed.fetched_at().is_none() {
        return BTreeSet::new();
    }
    candidates
        .into_iter()
        .filter(|vm| listed.by_id(vm).is_none())
        .collect()
}

/// A VM list older than this is read again before members it still lists are removed
/// (at most one list per this period, shared by every Service removing members then).
const REMOVAL_RECHECK: Duration = Duration::from_millis(250);

/// The members a plan would remove (see [`removal_candidates`]), other than eligible
/// Nodes' VMs (`vm_ids`, found in the inventory just now), that the VM `inventory`
/// (listed again if it still holds one and is older than [`REMOVAL_RECHECK`]) no longer
/// lists: expunged, their mappings gone with them. They are also dropped from the
/// cached members of the rules in `details`.
pub(crate) async fn gone_members(
    inventory: &Inventory,
    details: &RuleDetailsCache,
    observed: &ObservedLb,
    vm_ids: &BTreeSet<String>,
    per_rule: &BTreeMap<RuleKey, RuleMembers>,
) -> Result<BTreeSet<String>, InventoryError> {
    let mut candidates = removal_candidates(observed, vm_ids, per_rule);
    candidates.retain(|vm| !vm_ids.contains(vm));
    if candidates.is_empty() {
        return Ok(candidates);
    }
    let listed = inventory
        .view_confirming(candidates.iter().map(String::as_str), REMOVAL_RECHECK)
        .await?;
    let gone = gone_among(candidates, &listed);
    if !gone.is_empty() {
        tracing::debug!(vms = ?gone, "members no longer listed are left to CloudStack");
        for rule in &observed.rules {
            details.drop_members(&rule.id, &gone);
        }
    }
    Ok(gone)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolved() -> BTreeMap<String, String> {
        [("n1", "vm1"), ("n2", "vm2"), ("n3", "vm3")]
            .into_iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    fn names(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn local_rules_get_the_vms_of_the_nodes_with_endpoints() {
        let tcp80 = (IpProtocol::Tcp, 80);
        let tcp443 = (IpProtocol::Tcp, 443);
        let udp53 = (IpProtocol::Udp, 53);
        let selection = MemberSelection::NodesWithEndpoints(
            [
                (tcp80, names(&["n2", "elsewhere"])),
                (tcp443, names(&["n2"])),
                (udp53, names(&["unknown"])),
            ]
            .into(),
        );
        let members = per_rule_members(&resolved(), &selection, [tcp80, tcp443, udp53]);
        let RuleMembers::Vms(a) = &members[&tcp80] else {
            panic!("{members:?}")
        };
        assert_eq!(**a, names(&["vm2"]));
        let RuleMembers::Vms(b) = &members[&tcp443] else {
            panic!("{members:?}")
        };
        assert!(Arc::ptr_eq(a, b), "rules with the same nodes share one set");
        assert_eq!(members[&udp53], RuleMembers::Keep);
        assert!(!all_kept(&members));
    }

    #[test]
    fn no_endpoint_anywhere_keeps_every_rule_and_cluster_selects_nothing_per_rule() {
        let key = (IpProtocol::Tcp, 80);
        let empty = MemberSelection::NodesWithEndpoints(BTreeMap::new());
        assert!(all_kept(&per_rule_members(&resolved(), &empty, [key])));
        let cluster = per_rule_members(&resolved(), &MemberSelection::AllEligible, [key]);
        assert!(cluster.is_empty());
        assert!(!all_kept(&cluster));
    }
}
