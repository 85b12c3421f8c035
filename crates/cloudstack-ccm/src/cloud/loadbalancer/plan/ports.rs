//! Opening the ports: firewall rules on isolated networks, ACL items on VPC tiers.

use super::*;

impl<'a> Planner<'a> {
    /// Firewall rules (isolated) or ACL items (VPC) for the wanted ports, and removal of
    /// those for ports no rule of the Service uses any more.
    pub(super) fn ports(&mut self, warnings: &mut Vec<String>) {
        let wanted: BTreeMap<(IpProtocol, u16), ()> = self
            .spec
            .rules
            .iter()
            .map(|r| ((r.protocol.ip_protocol(), r.public_port), ()))
            .collect();
        let old_ports: BTreeSet<(IpProtocol, u16)> = self
            .observed
            .rules
            .iter()
            .map(|r| (r.protocol.ip_protocol(), r.public_port))
            .filter(|k| !wanted.contains_key(k))
            .collect();
        match self.ctx.network.port_access.clone() {
            PortAccess::Firewall => self.firewall(&wanted, &old_ports, warnings),
            PortAccess::NetworkAcl { acl_id, acl_name } => {
                if let Some(name) = acl_name
                    .as_deref()
                    .filter(|n| DEFAULT_ACL_LISTS.contains(n))
                {
                    warnings.push(format!(
                        "network {} uses the ACL list {name}: no ACL items are added; use a custom ACL list to open the ports",
                        self.ctx.network.network_label()
                    ));
                    return;
                }
                let Some(acl_id) = acl_id else {
                    warnings.push(format!(
                        "network {} has no ACL list id: ports not opened",
                        self.ctx.network.network_label()
                    ));
                    return;
                };
                self.acl(&acl_id, &wanted, &old_ports, warnings);
            }
            PortAccess::Open => {}
        }
    }

    pub(super) fn firewall(
        &mut self,
        wanted: &BTreeMap<(IpProtocol, u16), ()>,
        old_ports: &BTreeSet<(IpProtocol, u16)>,
        warnings: &mut Vec<String>,
    ) {
        let ranges: BTreeSet<Cidr> = self.spec.source_ranges.iter().copied().collect();
        for &(protocol, port) in wanted.keys() {
            let exact: Vec<&ObservedFirewallRule> = self
                .observed
                .firewall_rules
                .iter()
                .filter(|f| f.protocol == protocol && f.start_port == port && f.end_port == port)
                .collect();
            let recreated = self.recreated_ports.contains(&port);
            if self.open_firewall.contains(&port) {
                // The new rule opens the port itself; a firewall rule left from the old
                // one would conflict with it.
                for f in exact.iter().filter(|_| recreated) {
                    self.push(
                        Stage::Prepare,
                        Step::DeleteFirewallRule {
                            id: f.id.clone(),
                            protocol,
                            port,
                        },
                    );
                }
                continue;
            }
            let covering = self.observed.firewall_rules.iter().any(|f| {
                f.protocol == protocol
                    && f.start_port <= port
                    && port <= f.end_port
                    && f.start_port != f.end_port
            });
            let mut keep = false;
            for f in exact {
                let same = f.cidrs.iter().copied().collect::<BTreeSet<_>>() == ranges;
                if same && !recreated && !keep {
                    keep = true;
                } else {
                    self.push(
                        Stage::Prepare,
                        Step::DeleteFirewallRule {
                            id: f.id.clone(),
                            protocol,
                            port,
                        },
                    );
                    // The firewall rule `openfirewall` made for a rule that stays goes:
                    // the rule no longer has one.
                    let untag: Vec<Step> = self
                        .observed
                        .rules
                        .iter()
                        .filter(|o| {
                            self.kept_ids.contains(&o.id) && !recreated && opened_with(f, o)
                        })
                        .map(|o| Step::UntagResources {
                            resource_type: TagResourceType::LoadBalancer,
                            resources: vec![o.id.clone()],
                            keys: vec![TAG_OPEN_FIREWALL.to_string()],
                        })
                        .collect();
                    for step in untag {
                        self.push(Stage::Prepare, step);
                    }
                }
            }
            if keep {
                continue;
            }
            if covering {
                warnings.push(format!("{protocol} port {port}: a firewall rule for a port range covers it; no rule added"));
                continue;
            }
            self.push(
                Stage::Build,
                Step::CreateFirewallRule {
                    ip: self.ip.clone(),
                    protocol,
                    port,
                    cidrs: self.spec.source_ranges.clone(),
                },
            );
        }
        for f in &self.observed.firewall_rules {
            if f.start_port == f.end_port && old_ports.contains(&(f.protocol, f.start_port)) {
                self.push(
                    Stage::Finish,
                    Step::DeleteFirewallRule {
                        id: f.id.clone(),
                        protocol: f.protocol,
                        port: f.start_port,
                    },
                );
            }
        }
    }

    pub(super) fn acl(
        &mut self,
        acl_id: &str,
        wanted: &BTreeMap<(IpProtocol, u16), ()>,
        old_ports: &BTreeSet<(IpProtocol, u16)>,
        warnings: &mut Vec<String>,
    ) {
        let ranges: BTreeSet<Cidr> = self.spec.source_ranges.iter().copied().collect();
        let ours = |i: &ObservedAclItem| {
            acl_item_is_ours(i, &self.spec.lb_name, &self.spec.service.uid)
                || adopted_go_acl_item(i, self.observed)
        };
        for &(protocol, port) in wanted.keys() {
            let all: Vec<&ObservedAclItem> = self
                .observed
                .acl_items
                .iter()
                .filter(|i| i.protocol == protocol && i.start_port == port && i.end_port == port)
                .collect();
            // An item someone made by hand for this port decides it; we add nothing.
            if all
                .iter()
                .any(|i| !ours(i) && !acl_item_is_a_load_balancers(i))
            {
                continue;
            }
            // Another Service's item on this port is its own (each Service keeps one, so
            // deleting one Service never closes the port for the other); the ACL list has
            // no destination address, so its ranges reach this Service's IP too.
            let (exact, others): (Vec<&ObservedAclItem>, Vec<&ObservedAclItem>) =
                all.into_iter().partition(|i| ours(i));
            for other in others {
                let other_ranges: BTreeSet<Cidr> = other.cidrs.iter().copied().collect();
                if other.allow && !other_ranges.is_subset(&ranges) {
                    let listed: Vec<String> = other.cidrs.iter().map(Cidr::to_string).collect();
                    warnings.push(format!(
                        "{protocol} port {port}: the ACL list of network {} also admits {} for another load balancer on the same port (ACL items have no destination address)",
                        self.ctx.network.network_label(),
                        listed.join(",")
                    ));
                }
            }
            let mut keep = false;
            for i in exact {
                let same = i.allow && i.cidrs.iter().copied().collect::<BTreeSet<_>>() == ranges;
                if same && !keep {
                    keep = true;
                } else {
                    self.push(
                        Stage::Prepare,
                        Step::DeleteAclItem {
                            id: i.id.clone(),
                            protocol,
                            port,
                        },
                    );
                }
            }
            if !keep {
                self.push(
                    Stage::Build,
                    Step::CreateAclItem {
                        acl_id: acl_id.to_string(),
                        network_id: self.ctx.network.network_id.clone(),
                        protocol,
                        port,
                        cidrs: self.spec.source_ranges.clone(),
                        reason: acl_reason(&self.spec.lb_name),
                    },
                );
            }
        }
        for i in &self.observed.acl_items {
            if ours(i) && old_ports.contains(&(i.protocol, i.start_port)) {
                self.push(
                    Stage::Finish,
                    Step::DeleteAclItem {
                        id: i.id.clone(),
                        protocol: i.protocol,
                        port: i.start_port,
                    },
                );
            }
        }
    }
}

/// Whether firewall rule `fw` is the one `openfirewall=true` made with `rule`: the
/// controller tagged the rule so when it created it, and the firewall rule is TCP on
/// exactly the rule's port from `0.0.0.0/0`, untagged (CloudStack's conflict check allows
/// no second rule from the same CIDR on that port).
pub(crate) fn opened_with(fw: &ObservedFirewallRule, rule: &ObservedRule) -> bool {
    rule.tags
        .get(TAG_OPEN_FIREWALL)
        .is_some_and(|v| v == "true")
        && fw.protocol == IpProtocol::Tcp
        && rule.protocol.ip_protocol() == IpProtocol::Tcp
        && fw.start_port == rule.public_port
        && fw.end_port == rule.public_port
        && fw.cidrs == [Cidr::ANY_V4]
        && fw.tags.is_empty()
}

/// Settles the firewall-rule deletions for the ports of rules the plan deletes.
///
/// `deleteLoadBalancerRule` also deletes the firewall rule `openfirewall=true` made with
/// the rule (CloudStack's `related` rule, which no list shows), so a `deleteFirewallRule`
/// of it sent after (or run after, in the network's queue) fails. The deletion of a
/// firewall rule known to go with its rule ([`opened_with`]) is dropped: the rule's
/// deletion takes it. Any other firewall rule of such a port is deleted in the phase
/// before the rule (an empty phase is added in front for rules deleted in the first), so
/// it is found whoever made it, and the rule's deletion finds no related rule left.
pub(super) fn firewall_deletes_first(
    phases: Vec<Vec<Step>>,
    observed: &ObservedLb,
) -> Vec<Vec<Step>> {
    let mut phases: Vec<Vec<Step>> = std::iter::once(Vec::new()).chain(phases).collect();
    let mut rule_deleted_in: BTreeMap<(IpProtocol, u16), (usize, &ObservedRule)> = BTreeMap::new();
    for (index, steps) in phases.iter().enumerate() {
        for step in steps {
            let Step::DeleteRule { id, .. } = step else {
                continue;
            };
            if let Some(rule) = observed.rules.iter().find(|r| r.id == *id) {
                rule_deleted_in
                    .entry((rule.protocol.ip_protocol(), rule.public_port))
                    .or_insert((index, rule));
            }
        }
    }
    for index in 1..phases.len() {
        let mut kept = Vec::new();
        for step in std::mem::take(&mut phases[index]) {
            let deleted_rule = match &step {
                Step::DeleteFirewallRule { id, protocol, port } => rule_deleted_in
                    .get(&(*protocol, *port))
                    .filter(|(at, _)| *at <= index)
                    .map(|(at, rule)| (*at, *rule, id.as_str())),
                _ => None,
            };
            let Some((at, rule, fw_id)) = deleted_rule else {
                kept.push(step);
                continue;
            };
            let goes_with_rule = observed
                .firewall_rules
                .iter()
                .find(|f| f.id == fw_id)
                .is_some_and(|fw| opened_with(fw, rule));
            if !goes_with_rule {
                phases[at - 1].push(step);
            }
        }
        phases[index].extend(kept);
    }
    phases
}

/// Whether an ACL item is the one the Go CCM (v1.2.0 and before) made for a port of this
/// Service: it adds, per port, an unmarked `Allow` item from `0.0.0.0/0` (no reason, no
/// tags) to the tier's list, shared by every load balancer on that port. It is the
/// Service's when one of its rules has that port and no rule of anyone else on a network
/// using that list does. Such an item is removed with the Service, and replaced by the
/// Service's own item when its source ranges change.
pub(crate) fn adopted_go_acl_item(item: &ObservedAclItem, observed: &ObservedLb) -> bool {
    let key = (item.protocol, item.start_port);
    item.allow
        && item.start_port == item.end_port
        && item.reason.is_empty()
        && item.tags.is_empty()
        && item.cidrs == [Cidr::ANY_V4]
        && observed
            .rules
            .iter()
            .any(|r| (r.protocol.ip_protocol(), r.public_port) == key)
        && !observed.acl_ports_of_others.contains(&key)
}

/// Whether an ACL item was made for this Service: tagged with its UID, or carrying the
/// Go CCM's reason for its load-balancer name.
pub(crate) fn acl_item_is_ours(item: &ObservedAclItem, lb_name: &str, service_uid: &str) -> bool {
    item.tags
        .get(TAG_SERVICE_UID)
        .is_some_and(|u| u == service_uid)
        || item.reason == acl_reason(lb_name)
}

/// Whether an ACL item was made for a load balancer (any Service's, by this controller
/// or the Go CCM) rather than by hand.
pub(crate) fn acl_item_is_a_load_balancers(item: &ObservedAclItem) -> bool {
    item.tags.contains_key(TAG_SERVICE_UID)
        || item
            .reason
            .starts_with(&format!("{GO_CCM_MANAGED_TEXT} for "))
}

/// The `reason` put on ACL items (the Go CCM's text).
pub(crate) fn acl_reason(lb_name: &str) -> String {
    format!("{GO_CCM_MANAGED_TEXT} for {lb_name}")
}
