//! The members (VMs) of each rule.

use super::*;

impl<'a> Planner<'a> {
    /// Members of one rule: the backends' VMs (or, for `Local`, the rule's own), added
    /// and removed in one call each; a rule whose port has no Node to serve it keeps its
    /// members, and a member the inventory no longer lists is left to CloudStack.
    pub(super) fn members(
        &mut self,
        spec: &RuleSpec,
        rule: RuleRef,
        current: &BTreeSet<String>,
        stage: Stage,
    ) {
        let key = (spec.protocol.ip_protocol(), spec.public_port);
        let wanted = match self.backends.per_rule.get(&key) {
            None => &self.backends.vm_ids,
            Some(RuleMembers::Vms(vms)) => vms,
            Some(RuleMembers::Keep) => return,
        };
        // A rule without members gets the wanted set itself, not a copy of it.
        let add = if current.is_empty() {
            VmIds::Eligible(wanted.clone())
        } else {
            VmIds::Some(wanted.difference(current).cloned().collect())
        };
        let remove: Vec<String> = current
            .difference(wanted)
            .filter(|vm| !self.backends.gone.contains(*vm))
            .cloned()
            .collect();
        let target = &mut self.stages[stage as usize];
        if !add.is_empty() {
            target.push(Step::AssignMembers {
                rule: rule.clone(),
                vm_ids: add,
            });
        }
        if !remove.is_empty() {
            target.push(Step::RemoveMembers {
                rule,
                vm_ids: remove,
            });
        }
    }
}
