//! The members (VMs) of each rule.

use super::*;

impl<'a> Planner<'a> {
    /// Members of one rule (see [`member_steps`]), added to `stage`.
    pub(super) fn members(
        &mut self,
        spec: &RuleSpec,
        rule: RuleRef,
        current: &BTreeSet<String>,
        stage: Stage,
    ) {
        let key = (spec.protocol.ip_protocol(), spec.public_port);
        let steps = member_steps(self.backends, key, rule, current);
        self.stages[stage as usize].extend(steps);
    }
}

/// The steps that give the rule of `key` its members: the backends' VMs (or, for
/// `Local`, the rule's own), added and removed in one call each; a rule whose port has no
/// Node to serve it keeps its members, and a member the inventory no longer lists is
/// left to CloudStack. Public and internal rules alike.
pub(super) fn member_steps(
    backends: &Backends,
    key: RuleKey,
    rule: RuleRef,
    current: &BTreeSet<String>,
) -> Vec<Step> {
    let wanted = match backends.per_rule.get(&key) {
        None => &backends.vm_ids,
        Some(RuleMembers::Vms(vms)) => vms,
        Some(RuleMembers::Keep) => return Vec::new(),
    };
    // A rule without members gets the wanted set itself, not a copy of it.
    let add = if current.is_empty() {
        VmIds::Eligible(wanted.clone())
    } else {
        VmIds::Some(wanted.difference(current).cloned().collect())
    };
    let remove: Vec<String> = current
        .difference(wanted)
        .filter(|vm| !backends.gone.contains(*vm))
        .cloned()
        .collect();
    let mut steps = Vec::new();
    if !add.is_empty() {
        steps.push(Step::AssignMembers {
            rule: rule.clone(),
            vm_ids: add,
        });
    }
    if !remove.is_empty() {
        steps.push(Step::RemoveMembers {
            rule,
            vm_ids: remove,
        });
    }
    steps
}
