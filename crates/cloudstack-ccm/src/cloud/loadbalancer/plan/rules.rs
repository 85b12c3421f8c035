//! Which rules a plan creates, updates, keeps and deletes.

use super::*;

/// How a desired rule is reached.
enum RuleAction<'a> {
    /// Create it.
    Create,
    /// Keep this observed rule (maybe updated).
    Keep(&'a ObservedRule),
}

impl<'a> Planner<'a> {
    /// The `cidrlist` to send when creating a rule (empty: none).
    fn create_cidrs(&self) -> Vec<Cidr> {
        match &self.spec.rule_cidrs {
            Some(c) if self.ctx.server.lb_cidrlist_on_create => c.clone(),
            _ => Vec::new(),
        }
    }

    /// Whether an observed rule's `cidrlist` differs from the wanted one (absent and
    /// empty both mean everything).
    fn cidrs_differ(&self, rule: &ObservedRule) -> bool {
        if !self.ctx.server.lb_cidrlist_on_create {
            return false;
        }
        let effective = |c: &[Cidr]| -> BTreeSet<Cidr> {
            if c.is_empty() {
                [Cidr::ANY_V4].into()
            } else {
                c.iter().copied().collect()
            }
        };
        let wanted = effective(self.spec.rule_cidrs.as_deref().unwrap_or_default());
        effective(&rule.cidrs) != wanted
    }

    pub(super) fn rules(&mut self) {
        let spec = self.spec;
        let observed = self.observed;
        let mut used: BTreeSet<&str> = BTreeSet::new();
        // Exact names first, so a rule is never taken over by another port.
        for rule in &spec.rules {
            if observed.rule(&rule.name).is_some() {
                used.insert(rule.name.as_str());
            }
        }
        let mut kept: Vec<(&RuleSpec, &ObservedRule)> = Vec::new();
        for rule in &spec.rules {
            let action = match observed.rule(&rule.name) {
                Some(o) => RuleAction::Keep(o),
                None => self.match_other(rule, &mut used),
            };
            match action {
                RuleAction::Keep(o) => {
                    if o.private_port != rule.node_port
                        || (self.cidrs_differ(o) && !self.ctx.server.lb_cidrlist_update)
                        || o.protocol.ip_protocol() != rule.protocol.ip_protocol()
                    {
                        self.push(
                            Stage::Prepare,
                            Step::DeleteRule {
                                id: o.id.clone(),
                                name: o.name.clone(),
                            },
                        );
                        self.recreated_ports.insert(rule.public_port);
                        self.create(rule);
                    } else {
                        self.update(rule, o);
                        self.kept_ids.insert(o.id.clone());
                        kept.push((rule, o));
                    }
                }
                RuleAction::Create => self.create(rule),
            }
        }
        for (rule, o) in kept {
            let r = RuleRef::Existing {
                id: o.id.clone(),
                name: o.name.clone(),
            };
            self.members(rule, r.clone(), &o.members, Stage::Build);
            self.policies(rule, Some(o), r);
        }
        // Rules of the Service no port wants any more.
        let wanted_ports: BTreeSet<u16> = spec.rules.iter().map(|r| r.public_port).collect();
        for o in &observed.rules {
            if used.contains(o.name.as_str()) {
                continue;
            }
            let step = Step::DeleteRule {
                id: o.id.clone(),
                name: o.name.clone(),
            };
            if wanted_ports.contains(&o.public_port) {
                self.push(Stage::Prepare, step);
            } else {
                self.push(Stage::Finish, step);
            }
        }
    }

    /// Finds an observed rule of the Service for this port under another name: a legacy
    /// name with the same protocol (adopted as is), or the tcp ↔ tcp-proxy twin.
    fn match_other(&mut self, rule: &RuleSpec, used: &mut BTreeSet<&'a str>) -> RuleAction<'a> {
        let candidates = self
            .observed
            .rules
            .iter()
            .filter(|o| o.public_port == rule.public_port && !used.contains(o.name.as_str()));
        let mut twin = None;
        for o in candidates {
            if o.protocol == rule.protocol {
                used.insert(o.name.as_str());
                return RuleAction::Keep(o);
            }
            twin.get_or_insert(o);
        }
        match twin {
            Some(o) => {
                used.insert(o.name.as_str());
                RuleAction::Keep(o)
            }
            None => RuleAction::Create,
        }
    }

    pub(super) fn create(&mut self, rule: &RuleSpec) {
        // `openfirewall=true` opens the port for TCP only, so a UDP rule gets its own
        // firewall rule.
        let isolated_default = self.ctx.network.port_access == PortAccess::Firewall
            && rule.protocol.ip_protocol() == IpProtocol::Tcp
            && self.spec.source_ranges == [Cidr::ANY_V4]
            && !self.firewall_kept(rule.protocol.ip_protocol(), rule.public_port);
        if isolated_default {
            self.open_firewall.insert(rule.public_port);
            self.created_open.insert(rule.name.clone());
        }
        self.push(
            Stage::Build,
            Step::CreateRule {
                name: rule.name.clone(),
                ip: self.ip.clone(),
                network_id: self.backends.network_id.clone(),
                protocol: rule.protocol,
                public_port: rule.public_port,
                private_port: rule.node_port,
                algorithm: self.spec.algorithm,
                cidrs: self.create_cidrs(),
                open_firewall: isolated_default,
            },
        );
        self.created.push(rule.name.clone());
        let r = RuleRef::Created {
            name: rule.name.clone(),
        };
        self.members(rule, r.clone(), &BTreeSet::new(), Stage::Finish);
        self.policies(rule, None, r);
    }

    /// Whether an observed firewall rule for exactly this port stays in place.
    fn firewall_kept(&self, protocol: IpProtocol, port: u16) -> bool {
        !self.recreated_ports.contains(&port)
            && self
                .observed
                .firewall_rules
                .iter()
                .any(|f| f.protocol == protocol && f.start_port == port && f.end_port == port)
    }

    pub(super) fn update(&mut self, rule: &RuleSpec, o: &ObservedRule) {
        let rename = o.protocol != rule.protocol;
        let cidrs = (self.cidrs_differ(o) && self.ctx.server.lb_cidrlist_update).then(|| {
            let c = self.spec.rule_cidrs.clone().unwrap_or_default();
            if c.is_empty() { vec![Cidr::ANY_V4] } else { c }
        });
        let algorithm = (o.algorithm != self.spec.algorithm).then_some(self.spec.algorithm);
        if rename || cidrs.is_some() || algorithm.is_some() {
            self.push(
                Stage::Build,
                Step::UpdateRule {
                    id: o.id.clone(),
                    name: o.name.clone(),
                    new_name: rename.then(|| rule.name.clone()),
                    protocol: rename.then_some(rule.protocol),
                    algorithm,
                    cidrs,
                },
            );
        }
    }
}
