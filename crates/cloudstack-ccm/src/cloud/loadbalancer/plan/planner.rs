//! The rule, member, policy, port and tag decisions behind [`plan`](super::plan()).

use super::*;

/// The three phases the planner fills, in order (see the module doc of
/// [`plan`](super)); each becomes one [`Phase`] of the plan, empty ones dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    /// Associate the IP and delete what frees a port a new rule needs.
    Prepare,
    /// Create and update rules, open ports, fix members of existing rules, remove
    /// outdated policies.
    Build,
    /// Members and policies of new rules, tags, and deletion of rules no port needs.
    Finish,
}

/// How a desired rule is reached.
enum RuleAction<'a> {
    /// Create it.
    Create,
    /// Keep this observed rule (maybe updated).
    Keep(&'a ObservedRule),
}

pub(super) struct Planner<'a> {
    spec: &'a LbSpec,
    observed: &'a ObservedLb,
    backends: &'a Backends,
    ctx: &'a PlanContext,
    ip: IpRef,
    /// The steps of each [`Stage`], indexed by `stage as usize`.
    stages: [Vec<Step>; 3],
    /// Names of rules created by this plan.
    created: Vec<String>,
    /// Public ports of rules deleted and created again (their firewall is redone).
    recreated_ports: BTreeSet<u16>,
    /// Public ports of created rules that get `openfirewall=true`.
    open_firewall: BTreeSet<u16>,
    /// Names of created rules that get `openfirewall=true` (tagged so).
    created_open: BTreeSet<String>,
    /// Ids of observed rules that stay.
    kept_ids: BTreeSet<String>,
    /// The IP the controller the load balancer was taken over from associated (untagged):
    /// tagged as associated by us, so it is released on delete as its creator would.
    pub(super) adopted_ip: Option<String>,
}

impl<'a> Planner<'a> {
    pub(super) fn new(
        spec: &'a LbSpec,
        observed: &'a ObservedLb,
        backends: &'a Backends,
        ctx: &'a PlanContext,
        ip: IpRef,
    ) -> Self {
        Planner {
            spec,
            observed,
            backends,
            ctx,
            ip,
            stages: Default::default(),
            created: Vec::new(),
            recreated_ports: BTreeSet::new(),
            open_firewall: BTreeSet::new(),
            created_open: BTreeSet::new(),
            kept_ids: BTreeSet::new(),
            adopted_ip: None,
        }
    }

    /// Adds `step` to `stage`.
    pub(super) fn push(&mut self, stage: Stage, step: Step) {
        self.stages[stage as usize].push(step);
    }

    /// The steps of every stage, in order.
    pub(super) fn into_stages(self) -> Vec<Vec<Step>> {
        self.stages.into()
    }

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

    fn create(&mut self, rule: &RuleSpec) {
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

    fn update(&mut self, rule: &RuleSpec, o: &ObservedRule) {
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

    /// Members of one rule: the backends' VMs (or, for `Local`, the rule's own), added
    /// and removed in one call each; a rule whose port has no Node to serve it keeps its
    /// members, and a member the inventory no longer lists is left to CloudStack.
    fn members(
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

    /// Health-check and stickiness policies of one rule. Removals of outdated policies
    /// go before creations (one policy of each kind per rule). A kind whose list the
    /// server or the role refused is left alone on a rule tagged as having one from the
    /// controller: it cannot be compared or removed, and creating another would fail
    /// ("Already applied … policy").
    fn policies(&mut self, rule: &RuleSpec, o: Option<&ObservedRule>, r: RuleRef) {
        let unknown_health_check =
            o.is_some_and(|o| o.health_checks_unknown && o.tags.contains_key(TAG_HEALTH_CHECK));
        let unknown_stickiness =
            o.is_some_and(|o| o.stickiness_unknown && o.tags.contains_key(TAG_STICKINESS));
        let caps = &self.ctx.network;
        let name = o
            .map_or(rule.name.as_str(), |o| o.name.as_str())
            .to_string();
        let hc = self
            .spec
            .health_check
            .as_ref()
            .filter(|_| caps.health_check && rule.protocol != LbProtocol::Udp)
            .filter(|_| !unknown_health_check);
        let mut create_hc = hc.is_some();
        for h in o.map(|o| o.health_checks.as_slice()).unwrap_or_default() {
            let same = hc.is_some_and(|w| {
                w.path == h.path
                    && w.interval_secs == h.interval_secs
                    && w.timeout_secs == h.timeout_secs
                    && w.healthy_threshold == h.healthy_threshold
                    && w.unhealthy_threshold == h.unhealthy_threshold
            });
            if same && create_hc {
                create_hc = false;
            } else if hc.is_some() || h.description == POLICY_DESCRIPTION {
                self.push(
                    Stage::Build,
                    Step::DeleteHealthCheck {
                        id: h.id.clone(),
                        rule: name.clone(),
                    },
                );
            }
        }
        if let (true, Some(check)) = (create_hc, hc) {
            self.push(
                Stage::Finish,
                Step::CreateHealthCheck {
                    rule: r.clone(),
                    check: check.clone(),
                },
            );
        }
        let st = self
            .spec
            .stickiness
            .as_ref()
            .filter(|_| !unknown_stickiness);
        let mut create_st = st.is_some();
        for s in o.map(|o| o.stickiness.as_slice()).unwrap_or_default() {
            let same = st.is_some_and(|w| Some(w.method) == s.method && w.params == s.params);
            if same && create_st {
                create_st = false;
            } else if st.is_some() || s.description == POLICY_DESCRIPTION {
                self.push(
                    Stage::Build,
                    Step::DeleteStickiness {
                        id: s.id.clone(),
                        rule: name.clone(),
                    },
                );
            }
        }
        if let (true, Some(policy)) = (create_st, st) {
            self.push(
                Stage::Finish,
                Step::CreateStickiness {
                    rule: r,
                    name: format!(
                        "{}-{}",
                        self.spec.lb_name,
                        policy.method.as_str().to_ascii_lowercase()
                    ),
                    policy: policy.clone(),
                },
            );
        }
    }

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

    fn firewall(
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

    fn acl(
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

    /// Ownership tags, and the tags saying which policies the controller gives the rules
    /// (so their policies are read again, see `observe`): one call per distinct set of
    /// missing tags (usually one for all new rules), the associated IP in another.
    pub(super) fn tags(&mut self) {
        let owner: Tags = [
            (TAG_CLUSTER.to_string(), self.ctx.cluster_name.clone()),
            (TAG_SERVICE_UID.to_string(), self.spec.service.uid.clone()),
        ]
        .into();
        let mut policies = Tags::new();
        if self.spec.health_check.is_some() && self.ctx.network.health_check {
            policies.insert(TAG_HEALTH_CHECK.to_string(), "true".to_string());
        }
        if self.spec.stickiness.is_some() {
            policies.insert(TAG_STICKINESS.to_string(), "true".to_string());
        }
        let mut by_tags: BTreeMap<Tags, Vec<ResourceRef>> = BTreeMap::new();
        let all: Tags = owner.clone().into_iter().chain(policies.clone()).collect();
        for name in &self.created {
            let mut tags = all.clone();
            if self.created_open.contains(name) {
                tags.insert(TAG_OPEN_FIREWALL.to_string(), "true".to_string());
            }
            by_tags
                .entry(tags)
                .or_default()
                .push(ResourceRef::CreatedRule(name.clone()));
        }
        for o in &self.observed.rules {
            if !self.kept_ids.contains(&o.id) {
                continue;
            }
            let untagged = owner.iter().any(|(k, v)| o.tags.get(k) != Some(v));
            let mut missing = if untagged { owner.clone() } else { Tags::new() };
            for (k, v) in &policies {
                if !o.tags.contains_key(k) {
                    missing.insert(k.clone(), v.clone());
                }
            }
            if !missing.is_empty() {
                by_tags
                    .entry(missing)
                    .or_default()
                    .push(ResourceRef::Existing(o.id.clone()));
            }
        }
        for (tags, resources) in by_tags {
            self.push(
                Stage::Finish,
                Step::TagResources {
                    resource_type: TagResourceType::LoadBalancer,
                    resources,
                    tags,
                },
            );
        }
        let mut ours: Tags = [
            (TAG_CLUSTER.to_string(), self.ctx.cluster_name.clone()),
            (TAG_ASSOCIATED.to_string(), "true".to_string()),
        ]
        .into();
        if self.spec.keep_ip {
            ours.insert(TAG_KEEP_IP.to_string(), "true".to_string());
        }
        if let Some(id) = &self.adopted_ip {
            self.push(
                Stage::Finish,
                Step::TagResources {
                    resource_type: TagResourceType::PublicIpAddress,
                    resources: vec![ResourceRef::Existing(id.clone())],
                    tags: ours.clone(),
                },
            );
        } else if self.ip == IpRef::Associated {
            self.push(
                Stage::Build,
                Step::TagResources {
                    resource_type: TagResourceType::PublicIpAddress,
                    resources: vec![ResourceRef::AssociatedIp],
                    tags: ours,
                },
            );
        } else {
            self.keep_ip_tag();
        }
    }

    /// An address the controller associated says whether its Service keeps it
    /// ([`TAG_KEEP_IP`]), so that the orphan pass never releases a kept address whose
    /// Service went without the controller seeing it.
    fn keep_ip_tag(&mut self) {
        let Some(ip) = self.observed.ip.as_ref().filter(|ip| ip.associated_by_us()) else {
            return;
        };
        let tagged = ip.tags.get(TAG_KEEP_IP).is_some_and(|v| v == "true");
        let step = match (self.spec.keep_ip, tagged) {
            (true, false) => Step::TagResources {
                resource_type: TagResourceType::PublicIpAddress,
                resources: vec![ResourceRef::Existing(ip.id.clone())],
                tags: [(TAG_KEEP_IP.to_string(), "true".to_string())].into(),
            },
            (false, true) => Step::UntagResources {
                resource_type: TagResourceType::PublicIpAddress,
                resources: vec![ip.id.clone()],
                keys: vec![TAG_KEEP_IP.to_string()],
            },
            _ => return,
        };
        self.push(Stage::Finish, step);
    }
}
