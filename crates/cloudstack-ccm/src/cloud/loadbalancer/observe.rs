//! The observed state of one Service's load balancer in CloudStack: [`ObservedLb`].
//!
//! These are the data types the planner compares with the spec. They follow the shape
//! of CloudStack's responses (ids, names, ports, CIDR lists, tags) and know nothing of
//! Kubernetes. They are filled by the submodules: [`account_view`] reads what the
//! account sees once per resync, [`details`] caches each rule's members and policies,
//! and [`assemble`] picks one Service's share out of both (rules matched by exact name,
//! the IP by its recorded id or address, firewall rules or ACL items for its ports).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

use super::vocabulary::{Algorithm, IpProtocol, LbProtocol, StickinessMethod};
use crate::cloud::cidr::Cidr;
use crate::cloud::tags::{TAG_ASSOCIATED, Tags};

/// Reason (ACL items) and description (policies) the Go CCM puts on what it creates;
/// ACL items use `"<this> for <lb name>"`.
pub(crate) const GO_CCM_MANAGED_TEXT: &str = "Managed by the CloudStack Kubernetes Provider";

/// Who holds a public IP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IpOwnership {
    /// Not allocated to anyone (may be associated).
    Free,
    /// Allocated to the account/project the controller acts for.
    Ours,
    /// Allocated to another account or project (named).
    OtherAccount(String),
}

/// The Service's public IP as CloudStack reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedIp {
    /// IP id.
    pub id: String,
    /// The address.
    pub address: IpAddr,
    /// Allocation state.
    pub ownership: IpOwnership,
    /// Network the IP is associated with (`associatednetworkid`), if any.
    pub associated_network_id: Option<String>,
    /// VPC the IP belongs to, if any.
    pub vpc_id: Option<String>,
    /// Source-NAT IPs cannot be released.
    pub is_source_nat: bool,
    /// Static-NAT IPs cannot carry load-balancer rules.
    pub is_static_nat: bool,
    /// State `Allocating`: its association has not completed (its job still runs, or
    /// failed and CloudStack is giving the address back). Nothing is built on it yet.
    pub is_allocating: bool,
    /// The IP's tags.
    pub tags: Tags,
}

impl ObservedIp {
    /// Whether the controller associated this IP (ownership tag).
    pub(crate) fn associated_by_us(&self) -> bool {
        self.tags.get(TAG_ASSOCIATED).is_some_and(|v| v == "true")
    }
}

/// A health-check policy on a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedHealthCheck {
    /// Policy id.
    pub id: String,
    /// Path probed (`pingpath`).
    pub path: String,
    /// Seconds between probes (`healthcheckinterval`).
    pub interval_secs: u32,
    /// Response timeout (`responsetime`).
    pub timeout_secs: u32,
    /// `healthcheckthresshold`.
    pub healthy_threshold: u32,
    /// `unhealthcheckthresshold`.
    pub unhealthy_threshold: u32,
    /// Description (the controller's policies carry [`GO_CCM_MANAGED_TEXT`]).
    pub description: String,
}

/// A stickiness policy on a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedStickiness {
    /// Policy id.
    pub id: String,
    /// Policy name.
    pub name: String,
    /// Method, if known to us.
    pub method: Option<StickinessMethod>,
    /// Parameters (names lower-cased).
    pub params: BTreeMap<String, String>,
    /// Description (the controller's policies carry [`GO_CCM_MANAGED_TEXT`]).
    pub description: String,
}

/// A load-balancer rule belonging to the Service (matched by exact name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedRule {
    /// Rule id.
    pub id: String,
    /// Rule name.
    pub name: String,
    /// Rule protocol (`tcp`, `udp`, `tcp-proxy`; any case accepted when read).
    pub protocol: LbProtocol,
    /// Public port.
    pub public_port: u16,
    /// Private port (node port).
    pub private_port: u16,
    /// Algorithm.
    pub algorithm: Algorithm,
    /// The rule's `cidrlist` (empty when none was set or before 4.18).
    pub cidrs: Vec<Cidr>,
    /// Public IP id of the rule.
    pub public_ip_id: String,
    /// Network of the rule.
    pub network_id: Option<String>,
    /// VM ids assigned to the rule: the set the rule details cache holds, shared (a rule
    /// of 5000 members is not copied per reconcile).
    pub members: Arc<BTreeSet<String>>,
    /// The rule's tags.
    pub tags: Tags,
    /// Health-check policies.
    pub health_checks: Vec<ObservedHealthCheck>,
    /// Stickiness policies.
    pub stickiness: Vec<ObservedStickiness>,
    /// The server or the role refused the health-check policy list: such policies are
    /// unknown, not absent.
    pub health_checks_unknown: bool,
    /// The stickiness policy list was refused (as [`ObservedRule::health_checks_unknown`]).
    pub stickiness_unknown: bool,
}

/// A firewall rule on the Service's public IP (isolated networks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedFirewallRule {
    /// Rule id.
    pub id: String,
    /// Protocol (only tcp/udp rules are read).
    pub protocol: IpProtocol,
    /// First port.
    pub start_port: u16,
    /// Last port.
    pub end_port: u16,
    /// Source CIDRs.
    pub cidrs: Vec<Cidr>,
    /// The rule's tags.
    pub tags: Tags,
}

/// An ingress item of the tier's network ACL list (VPC tiers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedAclItem {
    /// Item id.
    pub id: String,
    /// ACL list id.
    pub acl_id: String,
    /// Protocol (only tcp/udp items are read).
    pub protocol: IpProtocol,
    /// First port.
    pub start_port: u16,
    /// Last port.
    pub end_port: u16,
    /// Source CIDRs.
    pub cidrs: Vec<Cidr>,
    /// `Allow` (true) or `Deny`.
    pub allow: bool,
    /// Free-text reason (the Go CCM marks its items here).
    pub reason: String,
    /// The item's tags.
    pub tags: Tags,
}

/// A load-balancer rule on the same public IP that belongs to someone else (another
/// Service sharing the IP, or a rule made by hand).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignRule {
    /// Rule id.
    pub id: String,
    /// Rule name.
    pub name: String,
    /// Public port it holds.
    pub public_port: u16,
}

/// What CloudStack holds for one Service.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObservedLb {
    /// The public IP in use or asked for (by recorded id, requested address, or the
    /// IP of the Service's rules); `None` when there is none yet.
    pub ip: Option<ObservedIp>,
    /// The Service's rules (exact names, current and legacy prefixes).
    pub rules: Vec<ObservedRule>,
    /// Firewall rules on the IP for the Service's ports (isolated networks).
    pub firewall_rules: Vec<ObservedFirewallRule>,
    /// Ingress ACL items for the Service's ports (VPC tiers).
    pub acl_items: Vec<ObservedAclItem>,
    /// Rules on the same IP that are not the Service's.
    pub foreign_rules: Vec<ForeignRule>,
    /// (protocol, public port) of the rules of others on the networks that share the
    /// Service's ACL list (VPC tiers): an unmarked ACL item for one of these ports may
    /// serve them.
    pub acl_ports_of_others: BTreeSet<(IpProtocol, u16)>,
    /// The certificates on the Service's rules and those the controller uploaded for it
    /// (read only for Services with TLS rules or asking for TLS).
    pub certificates: ObservedCertificates,
    /// The address recorded on the Service that another Service holds (`ip` is then
    /// `None`): forgotten, and a new one claimed.
    pub taken_ip: Option<TakenIp>,
}

/// An address recorded on the Service whose ownership tag names another Service: two
/// Services believed they held it (a claim left by a leader that lost its Lease, found
/// allocated), and the other tagged it first (see
/// [`ip_claim`](super::ip_claim)). The Service forgets it, claims a new address, and
/// releases nothing of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TakenIp {
    /// IP id.
    pub id: String,
    /// The address.
    pub address: IpAddr,
    /// The UID of the Service that holds it.
    pub owner_uid: String,
    /// The Service's own rules that stand on it (id, name), deleted with the move.
    pub own_rules: Vec<(String, String)>,
}

/// A certificate as `listSslCerts` shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObservedCertificate {
    /// Certificate id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Fingerprint (SHA-256, upper-case, colon-separated).
    pub fingerprint: String,
    /// The rules it is assigned to.
    pub rule_ids: Vec<String>,
}

/// The certificates that matter to one Service.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObservedCertificates {
    /// The account's certificates were read; when not, nothing is planned for them.
    pub listed: bool,
    /// The certificate assigned to each of the Service's rules (by rule id).
    pub bound: BTreeMap<String, ObservedCertificate>,
    /// The certificates the controller uploaded for the Service (found by name).
    pub ours: Vec<ObservedCertificate>,
}

impl ObservedLb {
    /// The rule with this exact name.
    pub fn rule(&self, name: &str) -> Option<&ObservedRule> {
        self.rules.iter().find(|r| r.name == name)
    }
}

pub(crate) mod account_view;
pub(crate) mod assemble;
pub mod details;
pub(crate) mod internal;
pub(crate) mod shared_listing;

pub use internal::ObservedInternalRule;
