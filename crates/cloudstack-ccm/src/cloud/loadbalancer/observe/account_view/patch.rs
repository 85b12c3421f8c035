//! [`AccountView::patch`]: a run's [`ViewChanges`] spliced into the view object by object,
//! with no read of CloudStack. The firewall rules of an IP the results do not tell are
//! marked unknown, read when first needed ([`AccountView::firewall_rules_on_ip`]).
//!
//! Order: a patch is numbered from the same counter as the reads, taken when the run has
//! ended. On an IP read again by a later read (number above the patch's) the patch changes
//! nothing: that read saw the run's changes. A patch leaves the other objects on an IP as
//! they are (another Service's run on the same IP patches its own), and records its number
//! on the IP, so a read of that IP that started before it ([`AccountView::misses_a_patch`])
//! is not spliced over it.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use cloudstack::{FirewallRule, LoadBalancerRule, PublicIpAddress, Tag};

use super::AccountView;
use super::changes::{FIREWALL_RULE, LOAD_BALANCER, PUBLIC_IP, ViewChanges};
use crate::cloud::tags::TAG_OPEN_FIREWALL;
use cloudstack::tag_value;

/// The owner fields of a resource, which CloudStack gives the tags put on it.
fn owner(
    account: &Option<String>,
    domainid: &Option<String>,
    domain: &Option<String>,
    project: &Option<String>,
    projectid: &Option<String>,
) -> Tag {
    Tag {
        account: account.clone(),
        domainid: domainid.clone(),
        domain: domain.clone(),
        project: project.clone(),
        projectid: projectid.clone(),
        ..Tag::default()
    }
}

fn rule_owner(rule: &LoadBalancerRule) -> Tag {
    owner(
        &rule.account,
        &rule.domainid,
        &rule.domain,
        &rule.project,
        &rule.projectid,
    )
}

fn ip_owner(ip: &PublicIpAddress) -> Tag {
    owner(
        &ip.account,
        &ip.domainid,
        &ip.domain,
        &ip.project,
        &ip.projectid,
    )
}

/// Whether a firewall rule is one `openfirewall=true` can have made with `rule`: on its
/// IP, TCP on exactly its public port from `0.0.0.0/0`, untagged.
fn may_open(fw: &FirewallRule, rule: &LoadBalancerRule) -> bool {
    fw.ipaddressid.is_some()
        && fw.ipaddressid == rule.publicipid
        && fw
            .protocol
            .as_deref()
            .is_some_and(|p| p.eq_ignore_ascii_case("tcp"))
        && fw.startport.is_some()
        && fw.startport == rule.publicport
        && fw.endport.unwrap_or(0) == rule.publicport.unwrap_or(0)
        && fw.cidrs() == ["0.0.0.0/0"]
        && fw.tags.is_empty()
}

/// The firewall rule `openfirewall=true` made with `rule` (TCP, for a TCP rule only),
/// as a read shows it but for its id, which no job result gives.
fn opened_firewall_rule(rule: &LoadBalancerRule) -> FirewallRule {
    FirewallRule {
        id: None,
        protocol: Some("tcp".into()),
        startport: rule.publicport,
        endport: rule.publicport,
        cidrlist: Some("0.0.0.0/0".into()),
        ipaddressid: rule.publicipid.clone(),
        ipaddress: rule.publicip.clone(),
        networkid: rule.networkid.clone(),
        state: Some("Active".into()),
        traffictype: Some("Ingress".into()),
        fordisplay: Some(true),
        ..FirewallRule::default()
    }
}

/// Whether `rule` is TCP (`openfirewall` makes a firewall rule of the rule's protocol).
fn is_tcp(rule: &LoadBalancerRule) -> bool {
    rule.protocol
        .as_deref()
        .is_none_or(|p| p.eq_ignore_ascii_case("tcp"))
}

impl AccountView {
    /// The rules of the view deleted by `changes`, with the firewall rules each may have
    /// taken with it (`deleteLoadBalancerRule` deletes the one `openfirewall` made).
    fn deleted_rules<'a>(
        &'a self,
        changes: &'a ViewChanges,
        firewall_rules: &'a [Arc<FirewallRule>],
    ) -> impl Iterator<Item = (&'a LoadBalancerRule, Vec<&'a FirewallRule>)> + 'a {
        self.rules
            .iter()
            .filter(|r| r.id.as_ref().is_some_and(|id| changes.deleted.contains(id)))
            .map(|rule| {
                let taken = firewall_rules
                    .iter()
                    .filter(|fw| {
                        !fw.id
                            .as_ref()
                            .is_some_and(|id| changes.deleted.contains(id))
                    })
                    .filter(|fw| may_open(fw, rule))
                    .map(|fw| &**fw)
                    .collect();
                (&**rule, taken)
            })
    }

    /// The public IPs whose firewall rules `changes` leave unknown: those a rule other
    /// than TCP was created on with `openfirewall=true` (the firewall rule it made is not
    /// modelled), and those of deleted rules that may have taken a firewall rule with
    /// them, unless the rule was tagged as opened so (then the firewall rule it took is
    /// known). Released IPs have none.
    fn firewall_rules_left_unknown(
        &self,
        changes: &ViewChanges,
        firewall_rules: &[Arc<FirewallRule>],
    ) -> BTreeSet<String> {
        let mut ips: BTreeSet<String> = changes
            .rules
            .iter()
            .filter(|r| {
                r.id.as_ref()
                    .is_some_and(|id| changes.opened_by.contains(id))
            })
            .filter(|r| !is_tcp(r))
            .filter_map(|r| r.publicipid.clone())
            .collect();
        for (rule, taken) in self.deleted_rules(changes, firewall_rules) {
            let opened = tag_value(&rule.tags, TAG_OPEN_FIREWALL) == Some("true");
            if !taken.is_empty() && !opened {
                ips.extend(rule.publicipid.iter().cloned());
            }
        }
        ips.retain(|ip| !changes.released.contains(ip));
        ips
    }

    /// The public IP an object of `resource_type` stands on, from the changes or the view.
    fn ip_of(&self, changes: &ViewChanges, resource_type: &str, id: &str) -> Option<String> {
        let is = |t: &str| resource_type.eq_ignore_ascii_case(t);
        let has_id = |candidate: &Option<String>| candidate.as_deref() == Some(id);
        if is(PUBLIC_IP) {
            Some(id.to_string())
        } else if is(LOAD_BALANCER) {
            changes
                .rules
                .iter()
                .find(|r| has_id(&r.id))
                .or_else(|| self.rules.iter().map(|r| &**r).find(|r| has_id(&r.id)))
                .and_then(|r| r.publicipid.clone())
        } else if is(FIREWALL_RULE) {
            changes
                .firewall_rules
                .iter()
                .find(|r| has_id(&r.id))
                .or_else(|| {
                    self.firewall_rules
                        .iter()
                        .map(|r| &**r)
                        .find(|r| has_id(&r.id))
                })
                .and_then(|r| r.ipaddressid.clone())
        } else {
            None
        }
    }

    /// The public IPs `changes` touch.
    fn touched_ips(&self, changes: &ViewChanges) -> BTreeSet<String> {
        let mut ips: BTreeSet<String> = changes.ips.iter().filter_map(|ip| ip.id.clone()).collect();
        ips.extend(changes.rules.iter().filter_map(|r| r.publicipid.clone()));
        ips.extend(
            changes
                .firewall_rules
                .iter()
                .filter_map(|r| r.ipaddressid.clone()),
        );
        ips.extend(changes.released.iter().cloned());
        for id in &changes.deleted {
            ips.extend(
                self.ip_of(changes, LOAD_BALANCER, id)
                    .or_else(|| self.ip_of(changes, FIREWALL_RULE, id)),
            );
        }
        for change in &changes.tags {
            for id in &change.ids {
                ips.extend(self.ip_of(changes, &change.resource_type, id));
            }
        }
        ips
    }

    /// This view with `changes` spliced in as of number `read` (taken when the run
    /// ended): the results replace the objects of the same id, deleted objects and
    /// released IPs (with what stood on them) leave, tags are put on and taken off, an IP
    /// not yet associated with a network takes the network of the first rule created on
    /// it (a VPC address: CloudStack associates it with the rule's tier), and the
    /// firewall rules the results do not tell are marked unknown. Objects left as they
    /// were are shared with this view. `None` when the view holds newer reads of every
    /// IP touched.
    pub(crate) fn patch(&self, changes: &ViewChanges, read: u64) -> Option<AccountView> {
        let fresh: BTreeSet<String> = self
            .touched_ips(changes)
            .into_iter()
            .filter(|ip| read > self.read && self.renewed.get(ip).is_none_or(|r| read > *r))
            .collect();
        if fresh.is_empty() {
            return None;
        }
        let on_fresh = |ip: &Option<String>| ip.as_ref().is_some_and(|ip| fresh.contains(ip));
        let gone = |id: &Option<String>, ip: &Option<String>| {
            id.as_ref().is_some_and(|id| changes.deleted.contains(id))
                || ip.as_ref().is_some_and(|ip| changes.released.contains(ip))
        };
        let (known_firewall, mut firewall_unknown) = self.firewall_known();
        // Firewall rules a deleted rule took with it (known: the rule was opened so).
        let taken: Vec<*const FirewallRule> = self
            .deleted_rules(changes, &known_firewall)
            .filter(|(rule, _)| on_fresh(&rule.publicipid))
            .flat_map(|(_, taken)| taken)
            .map(std::ptr::from_ref)
            .collect();
        firewall_unknown.extend(
            self.firewall_rules_left_unknown(changes, &known_firewall)
                .into_iter()
                .filter(|ip| fresh.contains(ip)),
        );
        firewall_unknown.retain(|ip| !changes.released.contains(ip));

        // Load-balancer rules: the results (last one of an id wins), then retagged.
        let mut results: Vec<&LoadBalancerRule> = Vec::new();
        for rule in changes.rules.iter().rev() {
            if !results.iter().any(|r| r.id == rule.id) {
                results.push(rule);
            }
        }
        results.reverse();
        let result_ids: BTreeSet<&str> = results.iter().filter_map(|r| r.id.as_deref()).collect();
        let retag_rule = |rule: &LoadBalancerRule| {
            let tags = changes.retag(
                LOAD_BALANCER,
                rule.id.as_deref(),
                &rule.tags,
                &rule_owner(rule),
            );
            tags.map(|tags| LoadBalancerRule {
                tags,
                ..rule.clone()
            })
        };
        let mut rules = Vec::with_capacity(self.rules.len() + results.len());
        for rule in &self.rules {
            if !on_fresh(&rule.publicipid) {
                rules.push(rule.clone());
            } else if gone(&rule.id, &rule.publicipid)
                || rule.id.as_deref().is_some_and(|id| result_ids.contains(id))
            {
                continue;
            } else {
                rules.push(retag_rule(rule).map_or_else(|| rule.clone(), Arc::new));
            }
        }
        for rule in results {
            if on_fresh(&rule.publicipid) && !gone(&rule.id, &rule.publicipid) {
                rules.push(Arc::new(retag_rule(rule).unwrap_or_else(|| rule.clone())));
            }
        }

        // Public IPs: the association results, retagged, with the network of a rule.
        let network_of = |ip_id: &Option<String>| {
            rules
                .iter()
                .find(|r| r.publicipid.is_some() && r.publicipid == *ip_id && r.networkid.is_some())
                .and_then(|r| r.networkid.clone())
        };
        let finish_ip = |ip: &PublicIpAddress| -> Option<PublicIpAddress> {
            let tags = changes.retag(PUBLIC_IP, ip.id.as_deref(), &ip.tags, &ip_owner(ip));
            let network = ip
                .associatednetworkid
                .is_none()
                .then(|| network_of(&ip.id))
                .flatten();
            if tags.is_none() && network.is_none() {
                return None;
            }
            let mut ip = ip.clone();
            if let Some(tags) = tags {
                ip.tags = tags;
            }
            if let Some(network) = network {
                ip.associatednetworkname = self.network(&network).and_then(|n| n.name.clone());
                ip.associatednetworkid = Some(network);
            }
            Some(ip)
        };
        let mut ips = Vec::with_capacity(self.ips.len() + changes.ips.len());
        for ip in &self.ips {
            if !on_fresh(&ip.id) {
                ips.push(ip.clone());
            } else if gone(&None, &ip.id) || changes.ips.iter().any(|i| i.id == ip.id) {
                continue;
            } else {
                ips.push(finish_ip(ip).map_or_else(|| ip.clone(), Arc::new));
            }
        }
        for ip in &changes.ips {
            if on_fresh(&ip.id) && !gone(&None, &ip.id) {
                ips.push(Arc::new(finish_ip(ip).unwrap_or_else(|| ip.clone())));
            }
        }

        // Firewall rules: the results, retagged; none on an IP whose rules are unknown.
        let unknown_on =
            |ip: &Option<String>| ip.as_ref().is_some_and(|ip| firewall_unknown.contains(ip));
        let retag_fw = |fw: &FirewallRule| {
            // A firewall rule carries no owner fields: its tags take none.
            let tags = changes.retag(FIREWALL_RULE, fw.id.as_deref(), &fw.tags, &Tag::default());
            tags.map(|tags| FirewallRule { tags, ..fw.clone() })
        };
        let mut firewall_rules = Vec::with_capacity(known_firewall.len());
        for fw in &known_firewall {
            if !on_fresh(&fw.ipaddressid) {
                firewall_rules.push(fw.clone());
            } else if unknown_on(&fw.ipaddressid)
                || gone(&fw.id, &fw.ipaddressid)
                || taken.contains(&Arc::as_ptr(fw))
                || (fw.id.is_some() && changes.firewall_rules.iter().any(|f| f.id == fw.id))
            {
                continue;
            } else {
                firewall_rules.push(retag_fw(fw).map_or_else(|| fw.clone(), Arc::new));
            }
        }
        for fw in &changes.firewall_rules {
            if on_fresh(&fw.ipaddressid)
                && !unknown_on(&fw.ipaddressid)
                && !gone(&fw.id, &fw.ipaddressid)
            {
                firewall_rules.push(Arc::new(retag_fw(fw).unwrap_or_else(|| fw.clone())));
            }
        }
        // The firewall rules `openfirewall` made, unless already there (a read saw them).
        for rule in &rules {
            let opened = rule
                .id
                .as_ref()
                .is_some_and(|id| changes.opened_by.contains(id));
            if opened
                && is_tcp(rule)
                && on_fresh(&rule.publicipid)
                && !unknown_on(&rule.publicipid)
                && !firewall_rules.iter().any(|fw| may_open(fw, rule))
            {
                firewall_rules.push(Arc::new(opened_firewall_rule(rule)));
            }
        }

        let mut patched = self.patched.clone();
        patched.extend(fresh.iter().map(|ip| (ip.clone(), read)));
        let acl_items = match self.acl_items.try_lock() {
            Ok(items) if !changes.acl_changed => items.clone(),
            _ => HashMap::new(),
        };
        Some(AccountView {
            rules,
            ips,
            firewall_rules,
            networks: self.networks.clone(),
            acl_items: tokio::sync::Mutex::new(acl_items),
            fetched_at: self.fetched_at,
            read: self.read,
            renewed: self.renewed.clone(),
            patched,
            firewall_unknown,
            firewall_read: tokio::sync::Mutex::default(),
        })
    }

    /// Whether a read of `ip_ids` numbered `read` started before a patch of one of them:
    /// it may lack what that patch put in.
    pub(crate) fn misses_a_patch<'a>(
        &self,
        mut ip_ids: impl Iterator<Item = &'a String>,
        read: u64,
    ) -> bool {
        ip_ids.any(|ip| self.patched.get(ip).is_some_and(|p| *p >= read))
    }
}
