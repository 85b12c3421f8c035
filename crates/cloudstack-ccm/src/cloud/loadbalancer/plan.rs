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
//! the default range: `1` (associate IP) `+ 1` (tag IP) `+ n` (rules) `+ n` (members)
//! `+ 1` (tag rules) = `2n + 3` in three phases (the IP's tags go beside the rules); with
//! source ranges, `+ n` firewall rules in the second phase; VPC tier: `+ n` ACL items. An
//! unchanged Service: no job at all.
//!
//! Phase order: (1) associate the IP and delete what frees a port a new rule needs
//! (so a tcp ↔ udp switch or a node-port change never hits CloudStack's port conflict);
//! (2) take an IP found allocated (adopted, or recorded without the Service's UID tag):
//! its ownership tags, the UID among them, which CloudStack keeps once per key, so of two
//! Services that both believe they hold an address only one gets it, before either
//! builds on it (see `super::ip_claim`; absent for a new address, which is tagged in the
//! next phase, beside its rules);
//! (3) create and update rules, open ports, fix members of existing rules, remove
//! outdated policies; (4) members and policies of new rules, tags, and deletion of
//! rules no port needs any more (only once the wanted rules stand).
//!
//! No step is planned that CloudStack must refuse: deleting a rule also deletes the
//! firewall rule `openfirewall` made for it (rules created so are tagged), so that one is
//! left to the rule's deletion, and any other firewall rule of a deleted rule's port is
//! deleted one phase before the rule (an extra phase in front when the rule goes in the
//! first). Delete steps still succeed when the object is already gone (changed by
//! hand meanwhile). After `AssociateIp` the
//! applier records the IP id on the Service before running the next phase.

use crate::cloud::key_access::{Feature, KeyFeatures};
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
    TAG_STICKINESS, Tags, owner_tags,
};

mod capability_check;
mod delete;
mod internal;
mod ip;
mod last_applied;
mod members;
mod policies;
mod ports;
mod provider;
mod routed_firewall;
mod rules;
mod stages;
mod step;
mod tags;
mod tls;

use capability_check::check_capabilities;
pub use delete::DeleteSpec;
pub(crate) use delete::plan_delete;
pub(crate) use internal::{check_internal, plan_internal, plan_internal_delete};
use ip::{ip_address, plan_ip};
use last_applied::with_last_applied_access;
use ports::firewall_deletes_first;
pub(crate) use ports::{acl_item_is_ours, adopted_go_acl_item};
pub use routed_firewall::{
    ObservedRoutingRule, RoutedFirewallSpec, RoutedTarget, plan_routed_firewall,
};
use stages::{Planner, Stage};
pub use step::{
    AssociateTarget, CertRef, InternalAddress, IpRef, ResourceRef, RuleRef, Step, TagResourceType,
    VmIds,
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
    /// The features the CloudStack keys may not use (their role refuses a command).
    pub access: KeyFeatures,
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
    /// The tags every object the plan creates gets (when empty: those of the plan's
    /// `TagResources` step of its load-balancer rules).
    pub ownership: Tags,
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

    /// The plan without its tag steps when the keys may not tag
    /// ([`Feature::OwnershipTags`]): ownership then rests on the Service's records and the
    /// rule names, and tags go with the objects they are on.
    fn fitted_to_keys(mut self, access: &KeyFeatures) -> Plan {
        if access.allows(Feature::OwnershipTags) {
            return self;
        }
        for phase in &mut self.phases {
            phase.steps.retain(|step| {
                !matches!(
                    step,
                    Step::TagResources { .. } | Step::UntagResources { .. }
                )
            });
        }
        self.phases.retain(|phase| !phase.steps.is_empty());
        self
    }

    fn from_phases(phases: Vec<Vec<Step>>, warnings: Vec<String>) -> Plan {
        Plan {
            phases: phases
                .into_iter()
                .filter(|s| !s.is_empty())
                .map(|steps| Phase { steps })
                .collect(),
            warnings,
            ownership: Tags::new(),
        }
    }
}

/// A spec that cannot be reached on this network; nothing is changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The network has no load-balancing service (ROUTED mode, a shared network, an
    /// offering without `Lb`).
    #[error("no CloudStack load balancer on network {network}: {why}")]
    NoLoadBalancing {
        /// Network label.
        network: String,
        /// Why, and what the user can do instead.
        why: String,
    },
    /// An internal load balancer was asked for on a network that has none.
    #[error("no internal load balancer on network {network}: {why}")]
    NoInternalLoadBalancing {
        /// Network label.
        network: String,
        /// Why, and what the user can do instead.
        why: String,
    },
    /// The routing firewall companion was asked for on a network that is not in ROUTED
    /// mode.
    #[error(
        "network {network} is not in ROUTED mode: the routing firewall companion opens addresses on ROUTED networks only"
    )]
    NotRouted {
        /// Network label.
        network: String,
    },
    /// The companion would add ACL items to a tier without a custom ACL list.
    #[error(
        "network {network} uses the ACL list {acl}: no ACL items can be added to it; give the tier a custom ACL list to open the Service's ports"
    )]
    NoCustomAclList {
        /// Network label.
        network: String,
        /// The list's name, or `none`.
        acl: String,
    },
    /// The provider needs an address of the Service's own (Netris), and the Service's is
    /// the network's source-NAT address.
    #[error(
        "address {address} is the source-NAT address of network {network}: Netris load balancers need an address of their own; remove the requested address"
    )]
    AddressNotDedicated {
        /// The address.
        address: IpAddr,
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
    let served = provider::gate(spec, observed, ctx, &mut warnings)?;
    let spec = served.as_ref().unwrap_or(spec);
    check_capabilities(spec, ctx, &mut warnings)?;
    warnings.extend(refused_asks(spec, &ctx.access));
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
    for step in delete::taken_ip_rule_deletes(observed) {
        p.push(Stage::Prepare, step);
    }
    p.rules();
    p.ports(&mut warnings);
    p.tags();
    let stages = tls::certificate_steps(spec, observed, ctx, p.into_stages());
    let phases = firewall_deletes_first(stages, observed);
    Ok(Plan::from_phases(phases, warnings).fitted_to_keys(&ctx.access))
}

/// What `spec` asks that the keys' role keeps from it: one sentence per feature, naming
/// the refused command and the annotation (a Warning Event and the Service's
/// `LoadBalancerSupported` condition carry them). The rest of the Service is served.
pub fn refused_asks(spec: &LbSpec, access: &KeyFeatures) -> Vec<String> {
    [
        (Feature::HealthCheck, spec.health_check.is_some()),
        (Feature::Stickiness, spec.stickiness.is_some()),
        (Feature::TlsTermination, spec.tls.is_some()),
    ]
    .into_iter()
    .filter(|(_, asked)| *asked)
    .filter_map(|(feature, _)| access.refusal_text(feature))
    .collect()
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
