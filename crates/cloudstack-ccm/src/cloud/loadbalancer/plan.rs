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

mod planner;
mod step;

use planner::Planner;
pub use step::{AssociateTarget, IpRef, ResourceRef, RuleRef, Step, TagResourceType};

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
    /// The provider keeps this public port for itself.
    #[error(
        "port {port}: the load balancer of network {network} (provider {provider}) keeps this public port for itself (HAProxy statistics); use another port"
    )]
    PortReserved {
        /// Public port.
        port: u16,
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
    /// An annotation that decides who may connect cannot be read and CloudStack shows no
    /// value applied before, so there is nothing safe to keep.
    #[error(
        "{what} cannot be read (see the Warning Event about the annotation) and the load balancer shows none applied before; nothing is opened until the annotation is fixed"
    )]
    LastAppliedUnknown {
        /// What cannot be read.
        what: &'static str,
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
    let resolved = with_last_applied_access(spec, observed, ctx)?;
    let spec = resolved.as_ref().unwrap_or(spec);
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
        let ours = spec.ip_associated_by_controller
            || ip.associated_by_us()
            || spec.pending_claim == Some(ip.address);
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
    /// The claimed address while no IP id is recorded ([`LbSpec::pending_claim`]): when
    /// observed as ours, we associated it.
    pub pending_claim: Option<IpAddr>,
}

impl LbSpec {
    /// The part of the spec deletion needs.
    pub fn delete_spec(&self) -> DeleteSpec {
        DeleteSpec {
            lb_name: self.lb_name.clone(),
            service_uid: self.service.uid.clone(),
            keep_ip: self.keep_ip,
            ip_associated_by_controller: self.ip_associated_by_controller,
            pending_claim: self.pending_claim(),
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

/// Whether an ACL item was made for a load balancer (any Service's, by this controller
/// or the Go CCM) rather than by hand.
pub fn acl_item_is_a_load_balancers(item: &ObservedAclItem) -> bool {
    item.tags.contains_key(TAG_SERVICE_UID)
        || item
            .reason
            .starts_with(&format!("{GO_CCM_MANAGED_TEXT} for "))
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
        if caps.reserved_ports.contains(&rule.public_port) {
            return Err(PlanError::PortReserved {
                port: rule.public_port,
                network,
                provider: caps.lb_provider.clone().unwrap_or_else(|| "unknown".into()),
            });
        }
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
    if spec.health_check.is_some() {
        if !caps.health_check {
            return Err(PlanError::HealthCheckUnsupported { network });
        }
        for rule in spec.rules.iter().filter(|r| r.protocol == LbProtocol::Udp) {
            warnings.push(format!(
                "no health check on UDP port {}: CloudStack's health checks probe over HTTP",
                rule.public_port
            ));
        }
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

/// When the spec cannot read its source ranges or source CIDRs (a bad annotation), the
/// spec with the values last applied, as CloudStack shows them: the `cidrlist` of the
/// Service's rules; the ranges of its firewall rules or ACL items. `None` when nothing
/// is to be kept.
fn with_last_applied_access(
    spec: &LbSpec,
    observed: &ObservedLb,
    ctx: &PlanContext,
) -> Result<Option<LbSpec>, PlanError> {
    if !spec.keep_rule_cidrs && !spec.keep_source_ranges {
        return Ok(None);
    }
    let mut resolved = spec.clone();
    if spec.keep_rule_cidrs {
        let rule = observed
            .rules
            .first()
            .ok_or(PlanError::LastAppliedUnknown {
                what: "the source CIDRs",
            })?;
        resolved.rule_cidrs = Some(rule.cidrs.clone());
        resolved.keep_rule_cidrs = false;
    }
    if spec.keep_source_ranges {
        let ports: BTreeSet<(IpProtocol, u16)> = observed
            .rules
            .iter()
            .map(|r| (r.protocol.ip_protocol(), r.public_port))
            .collect();
        let applied = match &ctx.network.port_access {
            PortAccess::Firewall => observed
                .firewall_rules
                .iter()
                .find(|f| ports.contains(&(f.protocol, f.start_port)))
                .map(|f| f.cidrs.clone()),
            // No item is ever added on a default list (or without a list): nothing to keep.
            PortAccess::NetworkAcl { acl_id, acl_name }
                if acl_id.is_none()
                    || acl_name
                        .as_deref()
                        .is_some_and(|n| DEFAULT_ACL_LISTS.contains(&n)) =>
            {
                Some(vec![Cidr::ANY_V4])
            }
            PortAccess::NetworkAcl { .. } => observed
                .acl_items
                .iter()
                .find(|i| acl_item_is_ours(i, &spec.lb_name, &spec.service.uid))
                .map(|i| i.cidrs.clone()),
            PortAccess::Open => Some(vec![Cidr::ANY_V4]),
        };
        resolved.source_ranges =
            applied
                .filter(|c| !c.is_empty())
                .ok_or(PlanError::LastAppliedUnknown {
                    what: "the source ranges",
                })?;
        resolved.keep_source_ranges = false;
    }
    Ok(Some(resolved))
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
    if spec.pending_claim() == Some(ip.address) {
        return Ok((
            IpRef::Associated,
            Some(Step::AdoptClaimedIp {
                target,
                id: ip.id.clone(),
                address: ip.address,
            }),
        ));
    }
    Ok((
        IpRef::Existing {
            id: ip.id.clone(),
            address: ip.address,
        },
        None,
    ))
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
