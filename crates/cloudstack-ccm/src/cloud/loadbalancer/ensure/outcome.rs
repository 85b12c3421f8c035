//! What the engine returns: the errors, the prepared plan, and the results of ensuring
//! and deleting a load balancer.

use super::*;
use crate::cloud::key_access::Feature;

/// Why a Service's load balancer could not be ensured or deleted.
#[derive(Debug, thiserror::Error)]
pub enum EnsureError {
    /// Reading CloudStack failed.
    #[error("reading CloudStack: {0}")]
    Observe(#[source] cloudstack::Error),
    /// Listing the VMs (the node inventory) failed.
    #[error("reading CloudStack: {0}")]
    Inventory(#[source] InventoryError),
    /// The spec cannot be reached on this network (nothing was changed).
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A step failed.
    #[error(transparent)]
    Apply(#[from] ApplyError),
    /// The load balancer's network could not be determined.
    #[error(transparent)]
    Network(#[from] NetworkError),
    /// The plan ran, yet the load balancer has no public IP.
    #[error("the load balancer has no public IP")]
    NoPublicIp,
    /// The plan ran, yet the internal load balancer has no address.
    #[error("the internal load balancer has no address")]
    NoInternalAddress,
    /// The Service's address is still `Allocating`: no rule is built on it until its
    /// association completes (retried soon; a failed association gives it back).
    #[error(
        "public IP {address} is still being associated (state Allocating); its rules wait until the association completes"
    )]
    IpNotReady {
        /// The address.
        address: IpAddr,
    },
}

/// Why the network of a Service's load balancer is not known.
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    /// CloudStack's view holds no network of this id.
    #[error("network {0} not found")]
    NotFound(String),
    /// No eligible node has a VM, and neither the Service nor a rule names a network.
    #[error("no eligible node with a VM, so the load balancer's network is unknown")]
    Unknown,
}

impl EnsureError {
    /// Whether retrying without a change of the Service cannot help (bad input, an IP
    /// owned by someone else, an unsupported protocol): no backoff retry needed, the
    /// periodic resync still re-checks it.
    pub(crate) fn is_permanent(&self) -> bool {
        matches!(self, EnsureError::Plan(_))
            || self.refused_command().is_some_and(|command| {
                let features = Feature::needing(command);
                features.is_empty() || !features.iter().all(|f| f.is_planned_around())
            })
    }

    /// The command the CloudStack keys' role refused (432), when that is why this failed:
    /// retrying cannot help until the role changes (the client does not send it again for a
    /// while), and the Service's condition names it.
    pub(crate) fn refused_command(&self) -> Option<&str> {
        let error = match self {
            EnsureError::Observe(error) => error,
            EnsureError::Apply(error) => error.cloudstack()?,
            _ => return None,
        };
        error
            .is_command_refused()
            .then(|| error.command())
            .flatten()
    }
}

/// How a plan changes the load balancer, for Events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Nothing to do.
    None,
    /// Only members are added or removed (the backend nodes changed).
    MembersOnly,
    /// Anything else.
    Other,
}

/// A plan ready to run, with what it was made from.
#[derive(Debug)]
pub struct Prepared {
    pub(super) plan: Plan,
    pub(super) observation: Observation,
    pub(super) network_id: String,
    /// Zone of the network (where a new address is claimed).
    pub(super) zone_id: Option<String>,
}

/// What a plan was made from, by the kind of load balancer it builds.
#[derive(Debug)]
pub(crate) enum Observation {
    /// A public load balancer: what CloudStack holds for it.
    Public(Box<ObservedLb>),
    /// An internal one: the tier address its rules use, if any stand.
    Internal {
        /// The address of the observed internal rules.
        address: Option<IpAddr>,
    },
}

impl Prepared {
    /// The plan.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// What the plan changes.
    pub fn change(&self) -> Change {
        change_of(&self.plan)
    }

    /// The network the plan runs on.
    pub fn network_id(&self) -> &str {
        &self.network_id
    }

    /// Whether the plan creates internal rules (their tier is recorded on the Service
    /// first, so a crash never leaves rules nothing will look for).
    pub fn creates_internal_rules(&self) -> bool {
        self.plan
            .steps()
            .any(|step| matches!(step, Step::CreateInternalRule { .. }))
    }
}

/// What `plan` changes.
pub(super) fn change_of(plan: &Plan) -> Change {
    if plan.is_empty() {
        Change::None
    } else if plan
        .steps()
        .all(|s| matches!(s, Step::AssignMembers { .. } | Step::RemoveMembers { .. }))
    {
        Change::MembersOnly
    } else {
        Change::Other
    }
}

/// The result of running a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ensured {
    /// The load balancer's address: public, or the tier address of an internal one.
    pub address: IpAddr,
    /// The public address's id (`None` for an internal load balancer).
    pub ip_id: Option<String>,
    /// The network the rules live in.
    pub network_id: String,
    /// Warnings of the plan (for a Warning Event).
    pub warnings: Vec<String>,
    /// Steps of the plan run (most are one async job; see [`Step`]).
    pub steps: usize,
}

/// The result of deleting a load balancer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deleted {
    /// Steps of the plan run (0: there was nothing).
    pub steps: usize,
    /// Warnings (e.g. the IP was kept).
    pub warnings: Vec<String>,
}

/// The two kinds of load balancer a Service can have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LbKind {
    /// Public rules on a public address.
    Public,
    /// Internal rules on a tier address.
    Internal,
}

impl LbKind {
    /// How the kind reads in messages.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            LbKind::Public => "public",
            LbKind::Internal => "internal",
        }
    }
}
