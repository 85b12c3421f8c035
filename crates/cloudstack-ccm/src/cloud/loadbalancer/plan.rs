//! The planner: (spec, observed state, backends, capabilities) → [`Plan`]. Pure, no I/O.
//!
//! A plan is a list of phases; the steps of one phase are independent and may run
//! concurrently, a phase starts when the previous one has finished. Most steps are one
//! CloudStack async job on the network's queue, and CloudStack runs the jobs of one
//! network one at a time, so the number of steps is what bounds how fast a Service is
//! ready (the exceptions are listed on [`Step`]). The planner therefore makes as few
//! steps as the result allows:
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
//! No step is planned that CloudStack must refuse: deleting a rule also deletes the
//! firewall rule `openfirewall` made for it (rules created so are tagged), so that one is
//! left to the rule's deletion, and any other firewall rule of a deleted rule's port is
//! deleted one phase before the rule (an extra phase in front when the rule goes in the
//! first). Delete steps still succeed when the object is already gone (changed by
//! hand meanwhile). After `AssociateIp` the
//! applier records the IP id on the Service before running the next phase.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use super::capabilities::{DEFAULT_ACL_LISTS, NetworkCapabilities, PortAccess, ServerFeatures};
use super::members::{RuleKey, RuleMembers};
use super::observe::{
    GO_CCM_MANAGED_TEXT, IpOwnership, ObservedAclItem, ObservedFirewallRule, ObservedLb,
    ObservedRule,
};
use super::spec::{HealthCheck, LbSpec, RuleSpec, Stickiness};
use super::vocabulary::{Algorithm, IpProtocol, LbProtocol};
use crate::cloud::cidr::Cidr;
use crate::cloud::tags::{
    TAG_ASSOCIATED, TAG_CLUSTER, TAG_HEALTH_CHECK, TAG_KEEP_IP, TAG_OPEN_FIREWALL, TAG_SERVICE_UID,
    TAG_STICKINESS, Tags,
};

mod planner;
mod step;
mod tls;

use planner::{Planner, Stage};
pub use step::{
    AssociateTarget, CertRef, IpRef, ResourceRef, RuleRef, Step, TagResourceType, VmIds,
};

/// Description put on the policies the controller creates (the Go CCM's text, so its
/// policies are recognised and adopted).
pub(crate) const POLICY_DESCRIPTION: &str = GO_CCM_MANAGED_TEXT;

/// The nodes that should receive traffic.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Backends {
    /// The network of the VMs' default NICs (where the rules live).
    pub network_id: String,
    /// VM ids of the eligible nodes: one set shared by every Service resolved from the
    /// same eligible Nodes (5000 ids are not copied per Service).
    pub vm_ids: Arc<BTreeSet<String>>,
    /// Members of the rules that do not get `vm_ids` (`externalTrafficPolicy: Local`),
    /// by (protocol, public port); empty for `Cluster`.
    pub per_rule: BTreeMap<RuleKey, RuleMembers>,
    /// Member VMs the VM inventory no longer lists (expunged, their mappings dropped by
    /// CloudStack): never removed by a call.
    pub gone: BTreeSet<String>,
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
    /// No port of a new load balancer can be served (TLS ports without TLS termination
    /// or without a usable certificate): no address is taken for nothing.
    #[error("no port can be served: {reasons}")]
    NoPortServed {
        /// Why, per port.
        reasons: String,
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
    let gated = tls::gate(spec, observed, ctx, &mut warnings);
    if gated.as_ref().is_some_and(|g| g.rules.is_empty())
        && observed.rules.is_empty()
        && observed.ip.is_none()
    {
        return Err(PlanError::NoPortServed {
            reasons: warnings.join("; "),
        });
    }
    let spec = gated.as_ref().unwrap_or(spec);
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
    p.adopted_ip = observed
        .ip
        .as_ref()
        .filter(|_| spec.delete_spec().associated_by_predecessor(observed))
        .map(|ip| ip.id.clone());
    if let Some(step) = associate {
        p.push(Stage::Prepare, step);
    }
    p.rules();
    p.ports(&mut warnings);
    p.tags();
    let stages = tls::certificate_steps(spec, observed, ctx, p.into_stages());
    let phases = firewall_deletes_first(stages, observed);
    Ok(Plan::from_phases(phases, warnings))
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
fn firewall_deletes_first(phases: Vec<Vec<Step>>, observed: &ObservedLb) -> Vec<Vec<Step>> {
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

/// Plans the removal of a Service's load balancer.
///
/// Deletes the firewall rules or ACL items of the Service's ports, then its rules (a
/// firewall rule `openfirewall` made goes with its rule and is not deleted on its own:
/// see `firewall_deletes_first`). With `keep-ip` the IP stays and its ownership tags go:
/// it is the user's from then on. Else it releases the IP
/// when the controller associated it, no other rule uses it, it is not a source-NAT IP,
/// and `keep-ip` is not set.
pub(crate) fn plan_delete(spec: &DeleteSpec, observed: &ObservedLb, ctx: &PlanContext) -> Plan {
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
            if (acl_item_is_ours(item, &spec.lb_name, &spec.service_uid)
                || adopted_go_acl_item(item, observed))
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
    let mut release = Vec::new();
    let mut warnings = Vec::new();
    if let Some(ip) = &observed.ip {
        let ours = spec.ip_associated_by_controller
            || ip.associated_by_us()
            || spec.pending_claim == Some(ip.address)
            || spec.associated_by_predecessor(observed);
        if spec.keep_ip {
            warnings.push(format!("keeping IP {} (keep-ip)", ip.address));
            if ip.associated_by_us() {
                // The address now belongs to the user, as one they brought: a later
                // Service that requests it never releases it.
                release.push(Step::UntagResources {
                    resource_type: TagResourceType::PublicIpAddress,
                    resources: vec![ip.id.clone()],
                    keys: [TAG_ASSOCIATED, TAG_CLUSTER, TAG_KEEP_IP]
                        .into_iter()
                        .filter(|key| ip.tags.contains_key(*key))
                        .map(str::to_string)
                        .collect(),
                });
            }
        } else if !observed.foreign_rules.is_empty() {
            warnings.push(format!(
                "keeping IP {}: other load-balancer rules use it",
                ip.address
            ));
        } else if ours && !ip.is_source_nat && ip.ownership == IpOwnership::Ours {
            release.push(Step::ReleaseIp {
                id: ip.id.clone(),
                address: ip.address,
            });
        }
    }
    release.extend(tls::delete_steps(observed));
    let phases = firewall_deletes_first(vec![first, release], observed);
    Plan::from_phases(phases, warnings)
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
    /// The Service asks for an address (`spec.loadBalancerIP` or `…-address`).
    pub requests_address: bool,
    /// An IP id is recorded on the Service (`…-id`).
    pub ip_id_recorded: bool,
    /// Rule-name prefixes of the leaseweb fork for this Service.
    pub legacy_lb_names: Vec<String>,
}

impl DeleteSpec {
    /// Whether the controller the load balancer was taken over from associated its
    /// address, and so would release it on delete (the controller does the same, and
    /// tags the address as its own when it takes the load balancer over):
    ///
    /// * the Go provider (v1.2.0 and before) associated every address
    ///   `spec.loadBalancerIP` did not request; it records no IP id on the Service, so an
    ///   untagged address under the Service's rules with no id recorded and no address
    ///   requested is one it associated (a requested one it associated carries its
    ///   `…-ip-associated-by-controller` annotation);
    /// * the leaseweb fork releases the address of its rules (named by it) unless
    ///   `keep-ip` is set.
    pub fn associated_by_predecessor(&self, observed: &ObservedLb) -> bool {
        let Some(ip) = &observed.ip else {
            return false;
        };
        if ip.associated_by_us() || ip.is_source_nat || ip.ownership != IpOwnership::Ours {
            return false;
        }
        let rules_on_ip = || observed.rules.iter().filter(|r| r.public_ip_id == ip.id);
        let by_go = !self.requests_address
            && !self.ip_id_recorded
            && self.pending_claim.is_none()
            && rules_on_ip().next().is_some();
        let by_leaseweb = rules_on_ip().any(|r| {
            self.legacy_lb_names
                .iter()
                .any(|prefix| r.name.starts_with(&format!("{prefix}-")))
        });
        by_go || by_leaseweb
    }
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
            requests_address: self.requested_ip.is_some(),
            ip_id_recorded: self.recorded_ip_id.is_some(),
            legacy_lb_names: self.legacy_lb_names.clone(),
        }
    }
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
