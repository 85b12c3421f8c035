//! The planner: (spec, observed state, backends, capabilities) → [`Plan`]. Pure, no I/O.
//!
//! A plan is a list of phases; the steps of one phase are independent and may run
//! concurrently, a phase starts when the previous one has finished. Every step is one
//! CloudStack async job, and CloudStack runs the jobs of one network one at a time, so
//! the number of steps is what bounds how fast a Service is ready. The planner therefore
//! makes as few steps as the result allows:
//!
//! * on an isolated network with the default source range `0.0.0.0/0`, new rules are
//!   created with `openfirewall=true` instead of separate firewall rules;
//! * all members of a rule are assigned in one call, all removals in another;
//! * all new rules of a Service are tagged in one `createTags` call;
//! * protocol (tcp ↔ tcp-proxy, renaming the rule), algorithm and — on CloudStack
//!   ≥ 4.22 — `cidrlist` changes are made in place with `updateLoadBalancerRule`.
//!
//! Job count for a new Service with `n` ports and `m` > 0 nodes: isolated network with
//! the default range: `1` (associate IP) `+ n` (rules) `+ n` (members) `+ 1` (tag rules)
//! `+ 1` (tag IP) = `2n + 3` in three phases; with source ranges, `+ n` firewall rules in
//! the second phase; VPC tier: `+ n` ACL items. An unchanged Service: no job at all.
//!
//! Phase order: (1) associate the IP and delete what frees a port a new rule needs
//! (so a tcp ↔ udp switch or a node-port change never hits CloudStack's port conflict);
//! (2) create and update rules, open ports, fix members of existing rules, remove
//! outdated policies; (3) members and policies of new rules, tags, and deletion of
//! rules no port needs any more (only once the wanted rules stand).
//!
//! Delete steps are meant to succeed when the object is already gone (deleting a rule
//! also deletes the firewall rule `openfirewall` made for it). After `AssociateIp` the
//! applier records the IP id on the Service before running the next phase.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::IpAddr;

use super::annotations::{Algorithm, Cidr};
use super::observe::{
    GO_CCM_MANAGED_TEXT, IpOwnership, ObservedAclItem, ObservedFirewallRule, ObservedLb,
    ObservedRule, TAG_ASSOCIATED, TAG_CLUSTER, TAG_SERVICE_UID, Tags,
};
use super::spec::{HealthCheck, LbSpec, RuleSpec, Stickiness};
use super::{IpProtocol, LbProtocol};
use crate::cloud::capabilities::{
    DEFAULT_ACL_LISTS, NetworkCapabilities, PortAccess, ServerFeatures,
};

/// Description put on the policies the controller creates (the Go CCM's text, so its
/// policies are recognised and adopted).
pub const POLICY_DESCRIPTION: &str = GO_CCM_MANAGED_TEXT;

/// The nodes that should receive traffic.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Backends {
    /// The network of the VMs' default NICs (where the rules live).
    pub network_id: String,
    /// VM ids of the eligible nodes.
    pub vm_ids: BTreeSet<String>,
}

/// The environment a plan is made for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanContext {
    /// Capabilities of the backends' network.
    pub network: NetworkCapabilities,
    /// Server version gates.
    pub server: ServerFeatures,
    /// Cluster name, for ownership tags.
    pub cluster_name: String,
}

/// Where to associate a new public IP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AssociateTarget {
    /// An isolated network (`networkid`).
    Network(String),
    /// A VPC (`vpcid`); the IP binds to the tier with the first rule.
    Vpc(String),
}

/// A public IP a step works on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IpRef {
    /// An IP that exists.
    Existing {
        /// IP id.
        id: String,
        /// Address.
        address: IpAddr,
    },
    /// The IP associated by this plan's `AssociateIp` step.
    Associated,
}

/// A load-balancer rule a step works on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleRef {
    /// A rule that exists.
    Existing {
        /// Rule id.
        id: String,
        /// Rule name.
        name: String,
    },
    /// A rule created by an earlier phase of this plan.
    Created {
        /// Rule name.
        name: String,
    },
}

/// A resource to tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceRef {
    /// An existing resource id.
    Existing(String),
    /// A rule created by this plan (by name).
    CreatedRule(String),
    /// The IP associated by this plan.
    AssociatedIp,
}

/// The CloudStack resource type of a `createTags` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TagResourceType {
    /// `LoadBalancer`.
    LoadBalancer,
    /// `PublicIpAddress`.
    PublicIpAddress,
}

impl TagResourceType {
    /// The `resourcetype` value.
    pub fn as_str(self) -> &'static str {
        match self {
            TagResourceType::LoadBalancer => "LoadBalancer",
            TagResourceType::PublicIpAddress => "PublicIpAddress",
        }
    }
}

/// One CloudStack change (one async job).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// `associateIpAddress`.
    AssociateIp {
        /// Network or VPC.
        target: AssociateTarget,
        /// A specific address, when one was asked for.
        address: Option<IpAddr>,
    },
    /// `createLoadBalancerRule`.
    CreateRule {
        /// Rule name.
        name: String,
        /// Public IP.
        ip: IpRef,
        /// Network of the members.
        network_id: String,
        /// Protocol.
        protocol: LbProtocol,
        /// Public port.
        public_port: u16,
        /// Private (node) port.
        private_port: u16,
        /// Algorithm.
        algorithm: Algorithm,
        /// `cidrlist`; empty: not sent.
        cidrs: Vec<Cidr>,
        /// `openfirewall`.
        open_firewall: bool,
    },
    /// `updateLoadBalancerRule` (only the fields that change are set).
    UpdateRule {
        /// Rule id.
        id: String,
        /// Current name.
        name: String,
        /// New name (tcp ↔ tcp-proxy switch).
        new_name: Option<String>,
        /// New protocol.
        protocol: Option<LbProtocol>,
        /// New algorithm.
        algorithm: Option<Algorithm>,
        /// New `cidrlist` (≥ 4.22).
        cidrs: Option<Vec<Cidr>>,
    },
    /// `deleteLoadBalancerRule`.
    DeleteRule {
        /// Rule id.
        id: String,
        /// Rule name.
        name: String,
    },
    /// `assignToLoadBalancerRule` with all VM ids.
    AssignMembers {
        /// The rule.
        rule: RuleRef,
        /// VM ids.
        vm_ids: Vec<String>,
    },
    /// `removeFromLoadBalancerRule` with all VM ids.
    RemoveMembers {
        /// The rule.
        rule: RuleRef,
        /// VM ids.
        vm_ids: Vec<String>,
    },
    /// `createFirewallRule` (isolated networks).
    CreateFirewallRule {
        /// Public IP.
        ip: IpRef,
        /// Protocol (`tcp` for `tcp-proxy`).
        protocol: IpProtocol,
        /// Port.
        port: u16,
        /// Source CIDRs.
        cidrs: Vec<Cidr>,
    },
    /// `deleteFirewallRule`.
    DeleteFirewallRule {
        /// Rule id.
        id: String,
        /// Protocol.
        protocol: IpProtocol,
        /// Port.
        port: u16,
    },
    /// `createNetworkACL` (VPC tiers).
    CreateAclItem {
        /// ACL list id.
        acl_id: String,
        /// Tier id.
        network_id: String,
        /// Protocol.
        protocol: IpProtocol,
        /// Port.
        port: u16,
        /// Source CIDRs.
        cidrs: Vec<Cidr>,
        /// `reason` text marking the item as the Service's.
        reason: String,
    },
    /// `deleteNetworkACL`.
    DeleteAclItem {
        /// Item id.
        id: String,
        /// Protocol.
        protocol: IpProtocol,
        /// Port.
        port: u16,
    },
    /// `createLBHealthCheckPolicy`.
    CreateHealthCheck {
        /// The rule.
        rule: RuleRef,
        /// The policy.
        check: HealthCheck,
    },
    /// `deleteLBHealthCheckPolicy`.
    DeleteHealthCheck {
        /// Policy id.
        id: String,
        /// Rule name (for display).
        rule: String,
    },
    /// `createLBStickinessPolicy`.
    CreateStickiness {
        /// The rule.
        rule: RuleRef,
        /// Policy name.
        name: String,
        /// The policy.
        policy: Stickiness,
    },
    /// `deleteLBStickinessPolicy`.
    DeleteStickiness {
        /// Policy id.
        id: String,
        /// Rule name (for display).
        rule: String,
    },
    /// `createTags` on several resources of one type.
    TagResources {
        /// Resource type.
        resource_type: TagResourceType,
        /// Resources.
        resources: Vec<ResourceRef>,
        /// Tags.
        tags: Tags,
    },
    /// `disassociateIpAddress`.
    ReleaseIp {
        /// IP id.
        id: String,
        /// Address.
        address: IpAddr,
    },
}

/// Steps that may run concurrently.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Phase {
    /// The steps.
    pub steps: Vec<Step>,
}

/// What to do, in order, plus warnings for the Service's Events.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Phases in order; none is empty.
    pub phases: Vec<Phase>,
    /// Things the plan could not do and will not fail for (e.g. a default ACL list).
    pub warnings: Vec<String>,
}

impl Plan {
    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.phases.is_empty()
    }

    /// Number of CloudStack jobs (one per step).
    pub fn job_count(&self) -> usize {
        self.phases.iter().map(|p| p.steps.len()).sum()
    }

    /// All steps in order.
    pub fn steps(&self) -> impl Iterator<Item = &Step> {
        self.phases.iter().flat_map(|p| p.steps.iter())
    }

    fn from_phases(phases: Vec<Vec<Step>>, warnings: Vec<String>) -> Plan {
        Plan {
            phases: phases
                .into_iter()
                .filter(|s| !s.is_empty())
                .map(|steps| Phase { steps })
                .collect(),
            warnings,
        }
    }
}

/// A spec that cannot be reached on this network; nothing is changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The network has no load-balancing service.
    #[error("network {network} offers no load balancing")]
    NoLoadBalancing {
        /// Network label.
        network: String,
    },
    /// The provider does not take this protocol.
    #[error(
        "port {port}: protocol {protocol} is not supported by the load balancer of network {network} (provider {provider})"
    )]
    UnsupportedProtocol {
        /// Public port.
        port: u16,
        /// Protocol.
        protocol: LbProtocol,
        /// Network label.
        network: String,
        /// Provider name or "unknown".
        provider: String,
    },
    /// The provider does not take this algorithm.
    #[error("algorithm {algorithm} is not supported by the load balancer of network {network}")]
    UnsupportedAlgorithm {
        /// Algorithm.
        algorithm: Algorithm,
        /// Network label.
        network: String,
    },
    /// Health checks were asked for where the provider has none.
    #[error("health checks are not supported by the load balancer of network {network}")]
    HealthCheckUnsupported {
        /// Network label.
        network: String,
    },
    /// The stickiness method is not offered.
    #[error(
        "stickiness method {method} is not supported by the load balancer of network {network}"
    )]
    StickinessUnsupported {
        /// Method name.
        method: String,
        /// Network label.
        network: String,
    },
    /// The requested IP does not exist (for this account).
    #[error("requested IP {address} was not found")]
    RequestedIpNotFound {
        /// Address.
        address: IpAddr,
    },
    /// The IP belongs to another account.
    #[error("IP {address} is allocated to another account ({owner})")]
    IpOwnedByOtherAccount {
        /// Address.
        address: IpAddr,
        /// Owner.
        owner: String,
    },
    /// The IP is associated with another network or VPC.
    #[error("IP {address} is associated with network {actual}, not {expected}")]
    IpOnOtherNetwork {
        /// Address.
        address: IpAddr,
        /// Where it is.
        actual: String,
        /// Where the nodes are.
        expected: String,
    },
    /// Static-NAT IPs cannot carry load-balancer rules.
    #[error("IP {address} is used for static NAT and cannot carry load-balancer rules")]
    IpIsStaticNat {
        /// Address.
        address: IpAddr,
    },
    /// The requested IP differs from the one in use.
    #[error(
        "the load balancer uses IP {current}; moving it to {requested} is not supported: delete and recreate the Service, or remove the request"
    )]
    RequestedIpChanged {
        /// In use.
        current: IpAddr,
        /// Requested.
        requested: IpAddr,
    },
    /// A rule we do not own holds a public port we need.
    #[error(
        "public port {port} on IP {address} is used by load-balancer rule {rule}, which belongs to something else"
    )]
    PortTaken {
        /// Port.
        port: u16,
        /// Address.
        address: IpAddr,
        /// The other rule's name.
        rule: String,
    },
}

/// Plans the steps that take `observed` to `spec` for `backends` on `ctx.network`.
pub fn plan(
    spec: &LbSpec,
    observed: &ObservedLb,
    backends: &Backends,
    ctx: &PlanContext,
) -> Result<Plan, PlanError> {
    let mut warnings = Vec::new();
    check_capabilities(spec, ctx, &mut warnings)?;
    let (ip, associate) = plan_ip(spec, observed, ctx)?;
    if let Some(address) = ip_address(observed) {
        for rule in &spec.rules {
            if let Some(f) = observed
                .foreign_rules
                .iter()
                .find(|f| f.public_port == rule.public_port)
            {
                return Err(PlanError::PortTaken {
                    port: rule.public_port,
                    address,
                    rule: f.name.clone(),
                });
            }
        }
    }
    if backends.vm_ids.is_empty() {
        warnings.push("no eligible nodes: the load balancer has no members".into());
    }
    let mut p = Planner::new(spec, observed, backends, ctx, ip);
    if let Some(step) = associate {
        p.phase1.push(step);
    }
    p.rules();
    p.ports(&mut warnings);
    p.tags();
    Ok(Plan::from_phases(
        vec![p.phase1, p.phase2, p.phase3],
        warnings,
    ))
}

/// Plans the removal of a Service's load balancer.
///
/// Deletes the Service's rules, their firewall rules or ACL items, then releases the IP
/// when the controller associated it, no other rule uses it, it is not a source-NAT IP,
/// and `keep-ip` is not set.
pub fn plan_delete(spec: &DeleteSpec, observed: &ObservedLb, ctx: &PlanContext) -> Plan {
    let mut first = Vec::new();
    let ports: BTreeSet<(IpProtocol, u16)> = observed
        .rules
        .iter()
        .map(|r| (r.protocol.ip_protocol(), r.public_port))
        .collect();
    for rule in &observed.rules {
        first.push(Step::DeleteRule {
            id: rule.id.clone(),
            name: rule.name.clone(),
        });
    }
    for fw in &observed.firewall_rules {
        if fw.start_port == fw.end_port && ports.contains(&(fw.protocol, fw.start_port)) {
            first.push(Step::DeleteFirewallRule {
                id: fw.id.clone(),
                protocol: fw.protocol,
                port: fw.start_port,
            });
        }
    }
    if matches!(ctx.network.port_access, PortAccess::NetworkAcl { .. }) {
        for item in &observed.acl_items {
            if acl_item_is_ours(item, &spec.lb_name, &spec.service_uid)
                && ports.contains(&(item.protocol, item.start_port))
            {
                first.push(Step::DeleteAclItem {
                    id: item.id.clone(),
                    protocol: item.protocol,
                    port: item.start_port,
                });
            }
        }
    }
    let mut second = Vec::new();
    let mut warnings = Vec::new();
    if let Some(ip) = &observed.ip {
        let ours = spec.ip_associated_by_controller || ip.associated_by_us();
        if spec.keep_ip {
            warnings.push(format!("keeping IP {} (keep-ip)", ip.address));
        } else if !observed.foreign_rules.is_empty() {
            warnings.push(format!(
                "keeping IP {}: other load-balancer rules use it",
                ip.address
            ));
        } else if ours && !ip.is_source_nat && ip.ownership == IpOwnership::Ours {
            second.push(Step::ReleaseIp {
                id: ip.id.clone(),
                address: ip.address,
            });
        }
    }
    Plan::from_phases(vec![first, second], warnings)
}

/// What deleting a load balancer needs to know; built leniently, so a Service with a
/// broken annotation can still be cleaned up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteSpec {
    /// Load-balancer name (rule-name prefix).
    pub lb_name: String,
    /// Service UID (ownership tags).
    pub service_uid: String,
    /// `…-keep-ip` (true when unreadable).
    pub keep_ip: bool,
    /// `…-ip-associated-by-controller`.
    pub ip_associated_by_controller: bool,
}

impl LbSpec {
    /// The part of the spec deletion needs.
    pub fn delete_spec(&self) -> DeleteSpec {
        DeleteSpec {
            lb_name: self.lb_name.clone(),
            service_uid: self.service.uid.clone(),
            keep_ip: self.keep_ip,
            ip_associated_by_controller: self.ip_associated_by_controller,
        }
    }
}

/// Whether an ACL item was made for this Service: tagged with its UID, or carrying the
/// Go CCM's reason for its load-balancer name.
pub fn acl_item_is_ours(item: &ObservedAclItem, lb_name: &str, service_uid: &str) -> bool {
    item.tags
        .get(TAG_SERVICE_UID)
        .is_some_and(|u| u == service_uid)
        || item.reason == acl_reason(lb_name)
}

/// The `reason` put on ACL items (the Go CCM's text).
pub fn acl_reason(lb_name: &str) -> String {
    format!("{GO_CCM_MANAGED_TEXT} for {lb_name}")
}

fn ip_address(observed: &ObservedLb) -> Option<IpAddr> {
    observed.ip.as_ref().map(|ip| ip.address)
}

fn check_capabilities(
    spec: &LbSpec,
    ctx: &PlanContext,
    warnings: &mut Vec<String>,
) -> Result<(), PlanError> {
    let caps = &ctx.network;
    let network = caps.network_label();
    if !caps.has_lb {
        return Err(PlanError::NoLoadBalancing { network });
    }
    for rule in &spec.rules {
        if !caps.lb_protocols.contains(&rule.protocol) {
            return Err(PlanError::UnsupportedProtocol {
                port: rule.public_port,
                protocol: rule.protocol,
                network,
                provider: caps.lb_provider.clone().unwrap_or_else(|| "unknown".into()),
            });
        }
    }
    if !caps.lb_algorithms.contains(&spec.algorithm) {
        return Err(PlanError::UnsupportedAlgorithm {
            algorithm: spec.algorithm,
            network,
        });
    }
    if let Some(hc) = &spec.health_check
        && !caps.health_check
    {
        if hc.explicit {
            return Err(PlanError::HealthCheckUnsupported { network });
        }
        warnings.push(format!(
            "no health check for externalTrafficPolicy: Local: the load balancer of network {network} has none"
        ));
    }
    if let Some(s) = &spec.stickiness
        && !caps.stickiness_methods.contains(&s.method)
    {
        return Err(PlanError::StickinessUnsupported {
            method: s.method.to_string(),
            network,
        });
    }
    if spec.rule_cidrs.as_ref().is_some_and(|c| !c.is_empty()) && !ctx.server.lb_cidrlist_on_create
    {
        let (ma, mi, pa) = ctx.server.version;
        warnings.push(format!(
            "source-cidrs ignored: CloudStack {ma}.{mi}.{pa} has no load-balancer rule cidrlist (needs 4.18)"
        ));
    }
    Ok(())
}

/// Decides which IP to use and whether to associate one.
fn plan_ip(
    spec: &LbSpec,
    observed: &ObservedLb,
    ctx: &PlanContext,
) -> Result<(IpRef, Option<Step>), PlanError> {
    let caps = &ctx.network;
    let target = match &caps.vpc_id {
        Some(vpc) => AssociateTarget::Vpc(vpc.clone()),
        None => AssociateTarget::Network(caps.network_id.clone()),
    };
    let Some(ip) = &observed.ip else {
        if let Some(address) = spec.requested_ip {
            return Err(PlanError::RequestedIpNotFound { address });
        }
        return Ok((
            IpRef::Associated,
            Some(Step::AssociateIp {
                target,
                address: None,
            }),
        ));
    };
    if let Some(requested) = spec.requested_ip
        && requested != ip.address
    {
        return Err(PlanError::RequestedIpChanged {
            current: ip.address,
            requested,
        });
    }
    match &ip.ownership {
        IpOwnership::OtherAccount(owner) => {
            return Err(PlanError::IpOwnedByOtherAccount {
                address: ip.address,
                owner: owner.clone(),
            });
        }
        IpOwnership::Free => {
            return Ok((
                IpRef::Associated,
                Some(Step::AssociateIp {
                    target,
                    address: Some(ip.address),
                }),
            ));
        }
        IpOwnership::Ours => {}
    }
    if ip.is_static_nat {
        return Err(PlanError::IpIsStaticNat {
            address: ip.address,
        });
    }
    let wrong_place = match &caps.vpc_id {
        Some(vpc) => {
            ip.vpc_id.as_ref().is_some_and(|v| v != vpc)
                || ip
                    .associated_network_id
                    .as_ref()
                    .is_some_and(|n| n != &caps.network_id)
                || (ip.vpc_id.is_none() && ip.associated_network_id.is_some())
        }
        None => {
            ip.vpc_id.is_some()
                || ip
                    .associated_network_id
                    .as_ref()
                    .is_some_and(|n| n != &caps.network_id)
        }
    };
    if wrong_place {
        let actual = ip
            .associated_network_id
            .clone()
            .or_else(|| ip.vpc_id.as_ref().map(|v| format!("VPC {v}")))
            .unwrap_or_default();
        return Err(PlanError::IpOnOtherNetwork {
            address: ip.address,
            actual,
            expected: caps.network_label(),
        });
    }
    Ok((
        IpRef::Existing {
            id: ip.id.clone(),
            address: ip.address,
        },
        None,
    ))
}

/// How a desired rule is reached.
enum RuleAction<'a> {
    /// Create it.
    Create,
    /// Keep this observed rule (maybe updated).
    Keep(&'a ObservedRule),
}

struct Planner<'a> {
    spec: &'a LbSpec,
    observed: &'a ObservedLb,
    backends: &'a Backends,
    ctx: &'a PlanContext,
    ip: IpRef,
    phase1: Vec<Step>,
    phase2: Vec<Step>,
    phase3: Vec<Step>,
    /// Names of rules created by this plan.
    created: Vec<String>,
    /// Public ports of rules deleted and created again (their firewall is redone).
    recreated_ports: BTreeSet<u16>,
    /// Created rules that get `openfirewall=true`.
    open_firewall: BTreeSet<u16>,
    /// Ids of observed rules that stay.
    kept_ids: BTreeSet<String>,
}

impl<'a> Planner<'a> {
    fn new(
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
            phase1: Vec::new(),
            phase2: Vec::new(),
            phase3: Vec::new(),
            created: Vec::new(),
            recreated_ports: BTreeSet::new(),
            open_firewall: BTreeSet::new(),
            kept_ids: BTreeSet::new(),
        }
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

    fn rules(&mut self) {
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
                        self.phase1.push(Step::DeleteRule {
                            id: o.id.clone(),
                            name: o.name.clone(),
                        });
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
            self.members(r.clone(), &o.members, 2);
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
                self.phase1.push(step);
            } else {
                self.phase3.push(step);
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
        let isolated_default = self.ctx.network.port_access == PortAccess::Firewall
            && self.spec.source_ranges == [Cidr::ANY_V4]
            && !self.firewall_kept(rule.protocol.ip_protocol(), rule.public_port);
        if isolated_default {
            self.open_firewall.insert(rule.public_port);
        }
        self.phase2.push(Step::CreateRule {
            name: rule.name.clone(),
            ip: self.ip.clone(),
            network_id: self.backends.network_id.clone(),
            protocol: rule.protocol,
            public_port: rule.public_port,
            private_port: rule.node_port,
            algorithm: self.spec.algorithm,
            cidrs: self.create_cidrs(),
            open_firewall: isolated_default,
        });
        self.created.push(rule.name.clone());
        let r = RuleRef::Created {
            name: rule.name.clone(),
        };
        self.members(r.clone(), &BTreeSet::new(), 3);
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
            self.phase2.push(Step::UpdateRule {
                id: o.id.clone(),
                name: o.name.clone(),
                new_name: rename.then(|| rule.name.clone()),
                protocol: rename.then_some(rule.protocol),
                algorithm,
                cidrs,
            });
        }
    }

    fn members(&mut self, rule: RuleRef, current: &BTreeSet<String>, phase: u8) {
        let wanted = &self.backends.vm_ids;
        let add: Vec<String> = wanted.difference(current).cloned().collect();
        let remove: Vec<String> = current.difference(wanted).cloned().collect();
        let target = if phase == 2 {
            &mut self.phase2
        } else {
            &mut self.phase3
        };
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
    /// go before creations (one policy of each kind per rule).
    fn policies(&mut self, rule: &RuleSpec, o: Option<&ObservedRule>, r: RuleRef) {
        let caps = &self.ctx.network;
        let name = o
            .map_or(rule.name.as_str(), |o| o.name.as_str())
            .to_string();
        let hc = self
            .spec
            .health_check
            .as_ref()
            .filter(|_| caps.health_check);
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
                self.phase2.push(Step::DeleteHealthCheck {
                    id: h.id.clone(),
                    rule: name.clone(),
                });
            }
        }
        if let (true, Some(check)) = (create_hc, hc) {
            self.phase3.push(Step::CreateHealthCheck {
                rule: r.clone(),
                check: check.clone(),
            });
        }
        let st = self.spec.stickiness.as_ref();
        let mut create_st = st.is_some();
        for s in o.map(|o| o.stickiness.as_slice()).unwrap_or_default() {
            let same = st.is_some_and(|w| Some(w.method) == s.method && w.params == s.params);
            if same && create_st {
                create_st = false;
            } else if st.is_some() || s.description == POLICY_DESCRIPTION {
                self.phase2.push(Step::DeleteStickiness {
                    id: s.id.clone(),
                    rule: name.clone(),
                });
            }
        }
        if let (true, Some(policy)) = (create_st, st) {
            self.phase3.push(Step::CreateStickiness {
                rule: r,
                name: format!(
                    "{}-{}",
                    self.spec.lb_name,
                    policy.method.as_str().to_ascii_lowercase()
                ),
                policy: policy.clone(),
            });
        }
    }

    /// Firewall rules (isolated) or ACL items (VPC) for the wanted ports, and removal of
    /// those for ports no rule of the Service uses any more.
    fn ports(&mut self, warnings: &mut Vec<String>) {
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
                self.acl(&acl_id, &wanted, &old_ports);
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
                    self.phase1.push(Step::DeleteFirewallRule {
                        id: f.id.clone(),
                        protocol,
                        port,
                    });
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
                    self.phase1.push(Step::DeleteFirewallRule {
                        id: f.id.clone(),
                        protocol,
                        port,
                    });
                }
            }
            if keep {
                continue;
            }
            if covering {
                warnings.push(format!("{protocol} port {port}: a firewall rule for a port range covers it; no rule added"));
                continue;
            }
            self.phase2.push(Step::CreateFirewallRule {
                ip: self.ip.clone(),
                protocol,
                port,
                cidrs: self.spec.source_ranges.clone(),
            });
        }
        for f in &self.observed.firewall_rules {
            if f.start_port == f.end_port && old_ports.contains(&(f.protocol, f.start_port)) {
                self.phase3.push(Step::DeleteFirewallRule {
                    id: f.id.clone(),
                    protocol: f.protocol,
                    port: f.start_port,
                });
            }
        }
    }

    fn acl(
        &mut self,
        acl_id: &str,
        wanted: &BTreeMap<(IpProtocol, u16), ()>,
        old_ports: &BTreeSet<(IpProtocol, u16)>,
    ) {
        let ranges: BTreeSet<Cidr> = self.spec.source_ranges.iter().copied().collect();
        let ours =
            |i: &ObservedAclItem| acl_item_is_ours(i, &self.spec.lb_name, &self.spec.service.uid);
        for &(protocol, port) in wanted.keys() {
            let exact: Vec<&ObservedAclItem> = self
                .observed
                .acl_items
                .iter()
                .filter(|i| i.protocol == protocol && i.start_port == port && i.end_port == port)
                .collect();
            // An item someone else made for this port decides it; we add nothing.
            if exact.iter().any(|i| !ours(i)) {
                continue;
            }
            let mut keep = false;
            for i in exact {
                let same = i.allow && i.cidrs.iter().copied().collect::<BTreeSet<_>>() == ranges;
                if same && !keep {
                    keep = true;
                } else {
                    self.phase1.push(Step::DeleteAclItem {
                        id: i.id.clone(),
                        protocol,
                        port,
                    });
                }
            }
            if !keep {
                self.phase2.push(Step::CreateAclItem {
                    acl_id: acl_id.to_string(),
                    network_id: self.ctx.network.network_id.clone(),
                    protocol,
                    port,
                    cidrs: self.spec.source_ranges.clone(),
                    reason: acl_reason(&self.spec.lb_name),
                });
            }
        }
        for i in &self.observed.acl_items {
            if ours(i) && old_ports.contains(&(i.protocol, i.start_port)) {
                self.phase3.push(Step::DeleteAclItem {
                    id: i.id.clone(),
                    protocol: i.protocol,
                    port: i.start_port,
                });
            }
        }
    }

    /// Ownership tags: all rules lacking them in one call, the associated IP in another.
    fn tags(&mut self) {
        let rule_tags: Tags = [
            (TAG_CLUSTER.to_string(), self.ctx.cluster_name.clone()),
            (TAG_SERVICE_UID.to_string(), self.spec.service.uid.clone()),
        ]
        .into();
        let mut resources: Vec<ResourceRef> = self
            .created
            .iter()
            .cloned()
            .map(ResourceRef::CreatedRule)
            .collect();
        for o in &self.observed.rules {
            let untagged = rule_tags.iter().any(|(k, v)| o.tags.get(k) != Some(v));
            if self.kept_ids.contains(&o.id) && untagged {
                resources.push(ResourceRef::Existing(o.id.clone()));
            }
        }
        if !resources.is_empty() {
            self.phase3.push(Step::TagResources {
                resource_type: TagResourceType::LoadBalancer,
                resources,
                tags: rule_tags,
            });
        }
        if self.ip == IpRef::Associated {
            self.phase2.push(Step::TagResources {
                resource_type: TagResourceType::PublicIpAddress,
                resources: vec![ResourceRef::AssociatedIp],
                tags: [
                    (TAG_CLUSTER.to_string(), self.ctx.cluster_name.clone()),
                    (TAG_ASSOCIATED.to_string(), "true".to_string()),
                ]
                .into(),
            });
        }
    }
}

fn join<T: fmt::Display>(items: &[T], sep: &str) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(sep)
}

impl fmt::Display for IpRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpRef::Existing { address, .. } => write!(f, "{address}"),
            IpRef::Associated => f.write_str("the new IP"),
        }
    }
}

impl fmt::Display for RuleRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuleRef::Existing { name, .. } | RuleRef::Created { name } => f.write_str(name),
        }
    }
}

impl fmt::Display for ResourceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResourceRef::Existing(id) => f.write_str(id),
            ResourceRef::CreatedRule(name) => f.write_str(name),
            ResourceRef::AssociatedIp => f.write_str("the new IP"),
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::AssociateIp { target, address } => {
                let what = address.map_or("a new IP".to_string(), |a| format!("IP {a}"));
                match target {
                    AssociateTarget::Network(n) => write!(f, "associate {what} with network {n}"),
                    AssociateTarget::Vpc(v) => write!(f, "associate {what} with VPC {v}"),
                }
            }
            Step::CreateRule {
                name,
                ip,
                protocol,
                public_port,
                private_port,
                algorithm,
                cidrs,
                open_firewall,
                ..
            } => {
                write!(
                    f,
                    "create rule {name}: {ip}:{public_port} -> node port {private_port} ({protocol}, {algorithm}"
                )?;
                if !cidrs.is_empty() {
                    write!(f, ", cidrlist {}", join(cidrs, ","))?;
                }
                if *open_firewall {
                    f.write_str(", open firewall")?;
                }
                f.write_str(")")
            }
            Step::UpdateRule {
                name,
                new_name,
                protocol,
                algorithm,
                cidrs,
                ..
            } => {
                let mut changes = Vec::new();
                if let Some(n) = new_name {
                    changes.push(format!("rename to {n}"));
                }
                if let Some(p) = protocol {
                    changes.push(format!("protocol {p}"));
                }
                if let Some(a) = algorithm {
                    changes.push(format!("algorithm {a}"));
                }
                if let Some(c) = cidrs {
                    changes.push(format!("cidrlist {}", join(c, ",")));
                }
                write!(f, "update rule {name}: {}", changes.join(", "))
            }
            Step::DeleteRule { name, .. } => write!(f, "delete rule {name}"),
            Step::AssignMembers { rule, vm_ids } => {
                write!(f, "assign {} to rule {rule}", join(vm_ids, ","))
            }
            Step::RemoveMembers { rule, vm_ids } => {
                write!(f, "remove {} from rule {rule}", join(vm_ids, ","))
            }
            Step::CreateFirewallRule {
                ip,
                protocol,
                port,
                cidrs,
            } => {
                write!(
                    f,
                    "open firewall {protocol} {ip}:{port} from {}",
                    join(cidrs, ",")
                )
            }
            Step::DeleteFirewallRule { id, protocol, port } => {
                write!(f, "delete firewall rule {id} ({protocol} {port})")
            }
            Step::CreateAclItem {
                acl_id,
                protocol,
                port,
                cidrs,
                ..
            } => {
                write!(
                    f,
                    "add ACL item to {acl_id}: allow {protocol} {port} from {}",
                    join(cidrs, ",")
                )
            }
            Step::DeleteAclItem { id, protocol, port } => {
                write!(f, "delete ACL item {id} ({protocol} {port})")
            }
            Step::CreateHealthCheck { rule, check } => write!(
                f,
                "add health check to rule {rule}: {} every {}s, timeout {}s, healthy {}, unhealthy {}",
                check.path,
                check.interval_secs,
                check.timeout_secs,
                check.healthy_threshold,
                check.unhealthy_threshold
            ),
            Step::DeleteHealthCheck { id, rule } => {
                write!(f, "delete health check {id} of rule {rule}")
            }
            Step::CreateStickiness { rule, policy, .. } => {
                let params: Vec<String> = policy
                    .params
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                write!(f, "add stickiness {} to rule {rule}", policy.method)?;
                if !params.is_empty() {
                    write!(f, " ({})", params.join(","))?;
                }
                Ok(())
            }
            Step::DeleteStickiness { id, rule } => {
                write!(f, "delete stickiness policy {id} of rule {rule}")
            }
            Step::TagResources {
                resource_type,
                resources,
                tags,
            } => {
                let tags: Vec<String> = tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
                write!(
                    f,
                    "tag {} {}: {}",
                    resource_type.as_str(),
                    join(resources, ","),
                    tags.join(",")
                )
            }
            Step::ReleaseIp { address, .. } => write!(f, "release IP {address}"),
        }
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            writeln!(f, "no changes")?;
        }
        for (i, phase) in self.phases.iter().enumerate() {
            writeln!(f, "phase {}:", i + 1)?;
            for step in &phase.steps {
                writeln!(f, "  - {step}")?;
            }
        }
        for w in &self.warnings {
            writeln!(f, "warning: {w}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
