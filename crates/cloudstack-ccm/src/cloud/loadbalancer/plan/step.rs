//! The steps of a plan: what each changes in CloudStack, and how they print.

use super::*;

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
    /// The IP associated (or adopted) by this plan's `AssociateIp` (`AdoptClaimedIp`) step.
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

/// The tier address an internal rule listens on (`sourceipaddress` of
/// `createLoadBalancer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InternalAddress {
    /// This address: asked for, or the one the Service's internal rules use.
    Known(IpAddr),
    /// A free address of the tier, picked by CloudStack (the first rule of a new
    /// internal load balancer).
    Acquire,
    /// The address the plan's first internal rule got (rules of one Service share it).
    OfFirstRule,
}

/// A certificate a step assigns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertRef {
    /// A certificate that exists in CloudStack.
    Existing(String),
    /// The certificate uploaded by this plan's `UploadCertificate` (by fingerprint).
    Uploaded(String),
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

/// One change of the load balancer. Most steps are one CloudStack async job that queues
/// on the network; the exceptions: [`Step::AdoptClaimedIp`] makes no CloudStack call (it
/// records an IP on the Service), [`Step::TagResources`] and [`Step::UntagResources`] are
/// jobs that do not queue on the network, [`Step::AssociateIp`] first reads the zone's
/// free addresses and records its pick on the Service when no address was asked for,
/// and [`Step::RemoveMembers`] reads the members and runs a second job when CloudStack
/// refuses the first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// `associateIpAddress`.
    AssociateIp {
        /// Network or VPC.
        target: AssociateTarget,
        /// A specific address, when one was asked for.
        address: Option<IpAddr>,
        /// The id of the address recorded on the Service that another Service took
        /// (`super::super::observe::TakenIp`): its record is dropped first (no
        /// CloudStack call), so a crash never leaves the new claim behind an old record.
        replacing: Option<String>,
    },
    /// Takes over the address the Service claimed, found allocated to the account with
    /// nothing of anyone else on it (we associated it and were stopped before recording
    /// its id): records its id, as associated by the controller. No CloudStack call.
    AdoptClaimedIp {
        /// Network or VPC it was associated with.
        target: AssociateTarget,
        /// IP id.
        id: String,
        /// The claimed address.
        address: IpAddr,
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
    /// `createLoadBalancer` with scheme `Internal`: an internal rule on the tier (one
    /// port pair, TCP). Members and tags go as for public rules.
    CreateInternalRule {
        /// Rule name.
        name: String,
        /// The tier (members and source address).
        network_id: String,
        /// Where it listens.
        address: InternalAddress,
        /// The Service port.
        source_port: u16,
        /// The node port.
        instance_port: u16,
        /// Algorithm.
        algorithm: Algorithm,
    },
    /// `deleteLoadBalancer`: an internal rule.
    DeleteInternalRule {
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
        vm_ids: VmIds,
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
    /// `createRoutingFirewallRule` (a ROUTED isolated network): a port of an address
    /// another controller assigns (MetalLB, Cilium), opened to the Service's sources.
    CreateRoutingFirewallRule {
        /// The ROUTED network.
        network_id: String,
        /// Protocol.
        protocol: IpProtocol,
        /// Port.
        port: u16,
        /// The address, as a `/32`.
        destination: Cidr,
        /// Source CIDRs.
        cidrs: Vec<Cidr>,
    },
    /// `deleteRoutingFirewallRule`.
    DeleteRoutingFirewallRule {
        /// Rule id.
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
    /// `deleteTags` of some keys on several resources of one type.
    UntagResources {
        /// Resource type.
        resource_type: TagResourceType,
        /// Resource ids.
        resources: Vec<String>,
        /// Tag keys to remove.
        keys: Vec<String>,
    },
    /// `uploadSslCert` (synchronous, does not queue on the network). The material's `Debug`
    /// hides the key.
    UploadCertificate {
        /// Name (cluster, Service UID, fingerprint).
        name: String,
        /// Fingerprint of the certificate.
        fingerprint: String,
        /// The PEM material.
        material: Box<super::super::certificates::PemMaterial>,
    },
    /// `assignCertToLoadBalancer`. With `forced` (4.17+, sent whenever the server has it)
    /// a bound certificate is replaced in the same job, and a repeat after a crash does not
    /// fail on the binding the first one made.
    AssignCertificate {
        /// The rule (protocol `ssl`).
        rule: RuleRef,
        /// The certificate.
        certificate: CertRef,
        /// Send `forced=true` (4.17+).
        forced: bool,
        /// A certificate is bound to the rule now (a swap).
        replaces: bool,
    },
    /// `removeCertFromLoadBalancer` (before 4.17, where a bound certificate cannot be
    /// replaced in one job).
    RemoveCertificate {
        /// The rule.
        rule: RuleRef,
    },
    /// `deleteSslCert` (synchronous) of a certificate the controller uploaded.
    DeleteCertificate {
        /// Certificate id.
        id: String,
        /// Its name (for display).
        name: String,
    },
    /// `disassociateIpAddress`.
    ReleaseIp {
        /// IP id.
        id: String,
        /// Address.
        address: IpAddr,
    },
}

/// The VMs a member change adds: every eligible VM (a new rule; the set shared by the plans
/// of a resync, not copied per Service) or the few that a rule lacks.
#[derive(Debug, Clone)]
pub enum VmIds {
    /// Every VM of the backends ([`Backends::vm_ids`]).
    Eligible(Arc<BTreeSet<String>>),
    /// Some VMs.
    Some(Vec<String>),
}

impl VmIds {
    /// The ids, in order.
    pub fn iter(&self) -> Box<dyn Iterator<Item = &String> + '_> {
        match self {
            VmIds::Eligible(set) => Box::new(set.iter()),
            VmIds::Some(list) => Box::new(list.iter()),
        }
    }

    /// How many.
    pub fn len(&self) -> usize {
        match self {
            VmIds::Eligible(set) => set.len(),
            VmIds::Some(list) => list.len(),
        }
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl PartialEq for VmIds {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for VmIds {}

impl PartialEq<Vec<String>> for VmIds {
    fn eq(&self, other: &Vec<String>) -> bool {
        self.iter().eq(other.iter())
    }
}

impl From<Vec<String>> for VmIds {
    fn from(list: Vec<String>) -> Self {
        VmIds::Some(list)
    }
}

mod display;
