//! Internal load-balancer rules (scheme Internal, `ApplicationLoadBalancerRuleVO`): rows of
//! the same `load_balancing_rules`/`firewall_rules` tables as the public rules, with a guest
//! source address instead of a public one. They are kept apart from [`super::LbRule`] here
//! (`listLoadBalancerRules` never shows them: `searchForLoadBalancers` sets scheme Public),
//! and the commands that take either kind by id (assign/remove members,
//! `listLoadBalancerRuleInstances`, `deleteLoadBalancerRule`, tags of type `LoadBalancer`)
//! reach both through [`State::any_lb_rule`].

use super::{Member, Owner, State};
use serde::{Deserialize, Serialize};

/// An internal load-balancer rule (`createLoadBalancer scheme=Internal`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct InternalLbRule {
    /// Id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Description.
    pub description: Option<String>,
    /// The guest network the rule balances to (`networkid`).
    pub network_id: String,
    /// The guest address the rule listens on (`sourceipaddress`).
    pub source_ip: String,
    /// The network of the source address (`sourceipaddressnetworkid`).
    pub source_network_id: String,
    /// Source port (`sourceport`).
    pub source_port: u16,
    /// Instance port (`instanceport`).
    pub instance_port: u16,
    /// `roundrobin|leastconn|source`.
    pub algorithm: String,
    /// Always `tcp` (`CreateApplicationLoadBalancerCmd.getProtocol`).
    pub protocol: String,
    /// `Add` or `Active`.
    pub state: String,
    /// Members.
    pub members: Vec<Member>,
    /// `fordisplay`.
    pub display: bool,
    /// Owner (the network's: `CreateApplicationLoadBalancerCmd.getEntityOwnerId`).
    pub owner: Owner,
}

/// What every command sharing the rules table needs of a rule of either scheme.
#[derive(Clone, Copy, Debug)]
pub struct AnyLbRule<'a> {
    /// Id.
    pub id: &'a str,
    /// The rule's guest network.
    pub network_id: &'a str,
    /// Owner.
    pub owner: &'a Owner,
    /// Members.
    pub members: &'a [Member],
    /// True for an internal rule.
    pub internal: bool,
}

impl State {
    /// An internal load-balancer rule by id.
    pub fn internal_lb_rule(&self, id: &str) -> Option<&InternalLbRule> {
        self.internal_lb_rules.iter().find(|r| r.id == id)
    }

    /// A load-balancer rule of either scheme by id (the `load_balancing_rules` table).
    pub fn any_lb_rule(&self, id: &str) -> Option<AnyLbRule<'_>> {
        if let Some(r) = self.lb_rule(id) {
            return Some(AnyLbRule {
                id: &r.id,
                network_id: &r.network_id,
                owner: &r.owner,
                members: &r.members,
                internal: false,
            });
        }
        self.internal_lb_rule(id).map(|r| AnyLbRule {
            id: &r.id,
            network_id: &r.network_id,
            owner: &r.owner,
            members: &r.members,
            internal: true,
        })
    }

    /// The members of a rule of either scheme, to change them.
    pub fn lb_members_mut(&mut self, id: &str) -> Option<&mut Vec<Member>> {
        if let Some(r) = self.lb_rules.iter_mut().find(|r| r.id == id) {
            return Some(&mut r.members);
        }
        self.internal_lb_rules
            .iter_mut()
            .find(|r| r.id == id)
            .map(|r| &mut r.members)
    }

    /// The state field of a rule of either scheme, to change it.
    pub fn lb_state_mut(&mut self, id: &str) -> Option<(&mut String, bool)> {
        if let Some(r) = self.lb_rules.iter_mut().find(|r| r.id == id) {
            return Some((&mut r.state, r.members.is_empty()));
        }
        self.internal_lb_rules
            .iter_mut()
            .find(|r| r.id == id)
            .map(|r| (&mut r.state, r.members.is_empty()))
    }

    /// Drops a VM's mappings from every rule of either scheme; the ids of the rules it was
    /// mapped to.
    pub fn unmap_vm(&mut self, vm_id: &str) -> Vec<String> {
        let mut mapped = Vec::new();
        let public = self.lb_rules.iter_mut().map(|r| (&r.id, &mut r.members));
        let internal = self
            .internal_lb_rules
            .iter_mut()
            .map(|r| (&r.id, &mut r.members));
        for (id, members) in public.chain(internal) {
            if members.iter().any(|m| m.vm_id == vm_id) {
                members.retain(|m| m.vm_id != vm_id);
                mapped.push(id.clone());
            }
        }
        mapped
    }
}
