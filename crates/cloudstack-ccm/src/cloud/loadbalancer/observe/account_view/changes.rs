//! [`ViewChanges`]: what a plan's run did to the objects the [`AccountView`] holds, as
//! its jobs returned them: the public IP an association made, the rules and firewall rules
//! a create or update job returned, the ids deleted, the tags put on or taken off. When
//! every step that ran is of a kind whose effect is known this way, the change is spliced
//! into the view without reading CloudStack again ([`AccountView::patch`]).
//!
//! Members, policies and certificates are not in the view: their steps change nothing of
//! it. A rule's `state` stays as its create job returned it (`Add`; a read after its
//! members are assigned says `Active`): nothing reads it.
//!
//! Two effects no job result shows fully. A rule created with `openfirewall=true` gets a
//! firewall rule whose id nothing returns: it enters the view without its id (a plan that
//! would delete it reads it first, see `Engine::prepare`). A deleted rule takes such a
//! firewall rule with it: known when the rule is tagged as opened so, else the firewall
//! rules of its IP are left unknown, read when first needed
//! ([`AccountView::firewall_rules_on_ip`]).
//!
//! [`AccountView`]: super::AccountView
//! [`AccountView::patch`]: super::AccountView::patch
//! [`AccountView::firewall_rules_on_ip`]: super::AccountView::firewall_rules_on_ip

use std::collections::BTreeSet;

use cloudstack::{FirewallRule, LoadBalancerRule, PublicIpAddress, Tag};

/// The `resourcetype` of load-balancer rules in tag calls.
pub(super) const LOAD_BALANCER: &str = "LoadBalancer";
/// The `resourcetype` of public IPs in tag calls.
pub(super) const PUBLIC_IP: &str = "PublicIpAddress";
/// The `resourcetype` of firewall rules in tag calls.
pub(super) const FIREWALL_RULE: &str = "FirewallRule";
/// The `resourcetype` of ACL items in tag calls.
const NETWORK_ACL: &str = "NetworkACL";

/// What a run changed of the account view's objects, in the order the steps ended.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ViewChanges {
    /// Public IPs as their association jobs returned them.
    pub(super) ips: Vec<PublicIpAddress>,
    /// Load-balancer rules as their create or update jobs returned them.
    pub(super) rules: Vec<LoadBalancerRule>,
    /// Firewall rules as their create jobs returned them.
    pub(super) firewall_rules: Vec<FirewallRule>,
    /// Ids of the load-balancer and firewall rules deleted.
    pub(super) deleted: BTreeSet<String>,
    /// Ids of the public IPs released (with everything on them).
    pub(super) released: BTreeSet<String>,
    /// Tags put on or taken off, in order.
    pub(super) tags: Vec<TagChange>,
    /// Ids of the rules created with `openfirewall=true`.
    pub(super) opened_by: BTreeSet<String>,
    /// ACL items were created or deleted (the view's ACL items are read again).
    pub(super) acl_changed: bool,
    /// Why the results do not say exactly what changed, when they do not.
    pub(super) inexact: Option<String>,
}

/// Tags put on or taken off some resources of one type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TagChange {
    /// `LoadBalancer`, `PublicIpAddress` or `FirewallRule`.
    pub resource_type: String,
    /// The resources.
    pub ids: Vec<String>,
    /// What was done.
    pub change: Tagging,
}

/// A tag change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Tagging {
    /// `createTags` of these keys and values.
    Set(Vec<(String, String)>),
    /// `deleteTags` of these keys.
    Remove(Vec<String>),
}

impl ViewChanges {
    /// An IP as `associateIpAddress` returned it.
    pub(crate) fn associated(&mut self, ip: PublicIpAddress) {
        self.ips.push(ip);
    }

    /// A rule as `createLoadBalancerRule` returned it; `opens_firewall`: created with
    /// `openfirewall=true`.
    pub(crate) fn rule_created(&mut self, rule: LoadBalancerRule, opens_firewall: bool) {
        if opens_firewall {
            self.opened_by.extend(rule.id.iter().cloned());
        }
        self.rules.push(rule);
    }

    /// A rule as `updateLoadBalancerRule` returned it.
    pub(crate) fn rule_updated(&mut self, rule: LoadBalancerRule) {
        self.rules.push(rule);
    }

    /// A firewall rule as `createFirewallRule` returned it.
    pub(crate) fn firewall_rule_created(&mut self, rule: FirewallRule) {
        self.firewall_rules.push(rule);
    }

    /// A load-balancer or firewall rule deleted (or found gone).
    pub(crate) fn deleted(&mut self, id: &str) {
        self.deleted.insert(id.to_string());
    }

    /// A public IP released.
    pub(crate) fn released(&mut self, id: &str) {
        self.released.insert(id.to_string());
    }

    /// `createTags` of `tags` on `ids` of `resource_type`.
    pub(crate) fn tagged(
        &mut self,
        resource_type: &str,
        ids: &[String],
        tags: &[(String, String)],
    ) {
        self.tag_change(resource_type, ids, Tagging::Set(tags.to_vec()));
    }

    /// `deleteTags` of `keys` on `ids` of `resource_type`.
    pub(crate) fn untagged(&mut self, resource_type: &str, ids: &[String], keys: Vec<String>) {
        self.tag_change(resource_type, ids, Tagging::Remove(keys));
    }

    fn tag_change(&mut self, resource_type: &str, ids: &[String], change: Tagging) {
        if resource_type.eq_ignore_ascii_case(NETWORK_ACL) {
            // The view's ACL items are read again after any change of them.
            self.acl_changed();
            return;
        }
        let known = [LOAD_BALANCER, PUBLIC_IP, FIREWALL_RULE]
            .iter()
            .any(|t| t.eq_ignore_ascii_case(resource_type));
        if !known {
            self.inexact(format!("tags of {resource_type} resources"));
            return;
        }
        self.tags.push(TagChange {
            resource_type: resource_type.to_string(),
            ids: ids.to_vec(),
            change,
        });
    }

    /// ACL items were created or deleted.
    pub(crate) fn acl_changed(&mut self) {
        self.acl_changed = true;
    }

    /// The run did something whose effect on the view is not known exactly (`why`).
    pub(crate) fn inexact(&mut self, why: impl Into<String>) {
        self.inexact.get_or_insert_with(|| why.into());
    }

    /// Why the changes are not known exactly: a step whose effect is not modelled, a job
    /// result that did not decode, or one tag key both put on and taken off one resource
    /// (whose order the results do not tell). `None` when they are known.
    pub(crate) fn why_inexact(&self) -> Option<String> {
        if let Some(why) = &self.inexact {
            return Some(why.clone());
        }
        let mut set = BTreeSet::new();
        let mut removed = BTreeSet::new();
        for change in &self.tags {
            for id in &change.ids {
                let (into, keys): (_, Vec<&String>) = match &change.change {
                    Tagging::Set(tags) => (&mut set, tags.iter().map(|(k, _)| k).collect()),
                    Tagging::Remove(keys) => (&mut removed, keys.iter().collect()),
                };
                into.extend(keys.into_iter().map(|k| (id.clone(), k.clone())));
            }
        }
        set.intersection(&removed)
            .next()
            .map(|(id, key)| format!("tag {key} both put on and taken off {id}"))
    }

    /// Nothing changed that the view holds.
    pub(crate) fn is_empty(&self) -> bool {
        *self == ViewChanges::default()
    }

    /// The tags of resource `id` of `resource_type` after the run's tag changes, from
    /// `tags` (what the view or a job result holds); `None` when no change touched it.
    /// A tag put on takes the owner of the resource (`owner`).
    pub(super) fn retag(
        &self,
        resource_type: &str,
        id: Option<&str>,
        tags: &[Tag],
        owner: &Tag,
    ) -> Option<Vec<Tag>> {
        let id = id?;
        let mut out: Option<Vec<Tag>> = None;
        for change in self.tags.iter().filter(|c| {
            c.resource_type.eq_ignore_ascii_case(resource_type) && c.ids.iter().any(|i| i == id)
        }) {
            let out = out.get_or_insert_with(|| tags.to_vec());
            match &change.change {
                Tagging::Set(set) => {
                    for (key, value) in set {
                        out.retain(|t| t.key.as_deref() != Some(key));
                        out.push(Tag {
                            key: Some(key.clone()),
                            value: Some(value.clone()),
                            resourceid: Some(id.to_string()),
                            resourcetype: Some(resource_type.to_string()),
                            ..owner.clone()
                        });
                    }
                }
                Tagging::Remove(keys) => {
                    out.retain(|t| {
                        !t.key
                            .as_deref()
                            .is_some_and(|k| keys.iter().any(|x| x == k))
                    });
                }
            }
        }
        out
    }
}
