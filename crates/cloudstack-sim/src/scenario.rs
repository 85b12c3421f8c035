//! The scenario: a serde (TOML) description of the cloud the simulator starts with.
//! Objects refer to each other by name; [`crate::state::State::from_scenario`] resolves them.

pub use crate::roles::Role;
use crate::roles::RoleSpec;
use crate::version::Version;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A credential that never shows in `Debug` output or logs.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a credential.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    /// The credential itself (for signing or printing on purpose).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// Whole simulated cloud.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Emulated CloudStack version (`4.22.0.0` style).
    #[serde(default)]
    pub version: Version,
    /// Timing, paging and throttling knobs.
    #[serde(default)]
    pub settings: Settings,
    /// Custom roles accounts may name (`custom_role`); see [`crate::roles`].
    #[serde(default, rename = "role")]
    pub roles: Vec<RoleSpec>,
    /// Accounts with their API keys.
    #[serde(default, rename = "account")]
    pub accounts: Vec<AccountSpec>,
    /// Projects.
    #[serde(default, rename = "project")]
    pub projects: Vec<ProjectSpec>,
    /// Zones with their public IP pools.
    #[serde(default, rename = "zone")]
    pub zones: Vec<ZoneSpec>,
    /// VPCs.
    #[serde(default, rename = "vpc")]
    pub vpcs: Vec<VpcSpec>,
    /// Network ACL lists (the global `default_allow`/`default_deny` always exist).
    #[serde(default, rename = "acl_list")]
    pub acl_lists: Vec<AclListSpec>,
    /// Guest networks (isolated or VPC tiers).
    #[serde(default, rename = "network")]
    pub networks: Vec<NetworkSpec>,
    /// Service offerings.
    #[serde(default, rename = "service_offering")]
    pub service_offerings: Vec<OfferingSpec>,
    /// Virtual machines.
    #[serde(default, rename = "vm")]
    pub vms: Vec<VmSpec>,
    /// VPC private gateways.
    #[serde(default, rename = "private_gateway")]
    pub private_gateways: Vec<PrivateGatewaySpec>,
}

/// A VPC private gateway.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrivateGatewaySpec {
    /// Fixed id; generated when absent.
    #[serde(default)]
    pub id: Option<String>,
    /// VPC name.
    pub vpc: String,
    /// Gateway address of the private network.
    pub gateway: String,
    /// The VPC router's address on the private network.
    pub ip_address: String,
    /// Netmask of the private network.
    pub netmask: String,
    /// `Creating`, `Ready` (the default) or `Deleting`.
    #[serde(default)]
    pub state: GatewayState,
}

/// Timing, paging and throttling knobs.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// How long an async job takes once it may run (jobs on one network run one at a time).
    pub job_duration_ms: u64,
    /// Extra latency added to every API call.
    pub call_latency_ms: u64,
    /// API rate limit per account (`api.throttling.*`); off when absent.
    pub throttle: Option<Throttle>,
    /// `default.page.size`: the page-size cap and the implicit page size.
    pub max_page_size: u64,
    /// `job.cancel.threshold.minutes` (60 by default): a job that holds its network's queue
    /// this long is cancelled and the queue moves on (`AsyncJobManagerImpl`'s cleanup task:
    /// "Job is cancelled as it has been blocking others for too long").
    pub job_cancel_threshold_ms: u64,
    /// `expose.cloudstack.version.api.list.capabilities` (true by default): false hides
    /// `cloudstackversion` from `listCapabilities` (`ManagementServerImpl.listCapabilities`).
    pub expose_version_in_capabilities: bool,
    /// `expose.cloudstack.version.api.xml.response` (true by default): the root element of
    /// every XML reply to a caller whose signature was verified carries
    /// `cloud-stack-version="<version>"` (`ApiResponseSerializer.toXMLSerializedString`);
    /// false leaves it out.
    pub expose_version_in_xml: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            job_duration_ms: 100,
            call_latency_ms: 0,
            throttle: None,
            max_page_size: 500,
            job_cancel_threshold_ms: 3_600_000,
            expose_version_in_capabilities: true,
            expose_version_in_xml: true,
        }
    }
}

/// `api.throttling.max` requests per `api.throttling.interval` per account.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Throttle {
    /// Requests allowed per interval.
    pub max: u64,
    /// Interval length in seconds.
    #[serde(default = "one_second")]
    pub interval_secs: u64,
}

fn one_second() -> u64 {
    1
}

/// An account with one user and one API key pair.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccountSpec {
    /// Account name.
    pub name: String,
    /// User or root admin (the account type; also the type of its role).
    #[serde(default)]
    pub role: Role,
    /// The name of a scenario `[[role]]` of the same type the account has instead of the
    /// default role of its type (root admin: everything; User: every command but the
    /// admin-only ones). Unknown names fail the scenario.
    #[serde(default)]
    pub custom_role: Option<String>,
    /// API key.
    pub api_key: Secret,
    /// Secret key.
    pub secret_key: Secret,
    /// Names of the projects this account belongs to.
    #[serde(default)]
    pub projects: Vec<String>,
}

impl AccountSpec {
    /// An account of the default role of `role`'s type, keys `<name>-api-key` /
    /// `<name>-secret-key`, member of `projects`.
    pub fn new(name: &str, role: Role, projects: &[&str]) -> Self {
        Self {
            name: name.into(),
            role,
            custom_role: None,
            api_key: Secret::new(format!("{name}-api-key")),
            secret_key: Secret::new(format!("{name}-secret-key")),
            projects: projects.iter().map(|p| (*p).to_owned()).collect(),
        }
    }
}

/// A project.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProjectSpec {
    /// Fixed id (a lower-case UUID); generated when absent.
    #[serde(default)]
    pub id: Option<String>,
    /// Project name.
    pub name: String,
}

/// An IPv4 range, both ends included.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IpRange {
    /// First address.
    pub start: String,
    /// Last address.
    pub end: String,
}

/// A zone.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZoneSpec {
    /// Fixed id; generated when absent.
    #[serde(default)]
    pub id: Option<String>,
    /// Zone name.
    pub name: String,
    /// Public addresses listed one by one.
    #[serde(default)]
    pub public_ips: Vec<String>,
    /// Public addresses given as a range.
    #[serde(default)]
    pub public_ip_range: Option<IpRange>,
}

/// A VPC.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VpcSpec {
    /// Fixed id; generated when absent.
    #[serde(default)]
    pub id: Option<String>,
    /// VPC name.
    pub name: String,
    /// Zone name.
    pub zone: String,
    /// Super CIDR.
    #[serde(default = "default_vpc_cidr")]
    pub cidr: String,
    /// Owning account name (the first account when neither owner is given).
    #[serde(default)]
    pub account: Option<String>,
    /// Owning project name.
    #[serde(default)]
    pub project: Option<String>,
}

fn default_vpc_cidr() -> String {
    "10.100.0.0/16".into()
}

/// A network ACL list of a VPC.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AclListSpec {
    /// Fixed id; generated when absent.
    #[serde(default)]
    pub id: Option<String>,
    /// List name.
    pub name: String,
    /// VPC name.
    pub vpc: String,
    /// Description.
    #[serde(default)]
    pub description: Option<String>,
}

/// Load-balancer provider of a network. For an NSX or Netris network it also provides the
/// Firewall (isolated) or NetworkACL (tier) service, source NAT, static NAT and port
/// forwarding; for a ROUTED network, which has no Lb service, it names only the provider of
/// the Firewall/NetworkACL service.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub enum LbProvider {
    /// The Virtual Router (HAProxy): no UDP since 4.15, no health checks, port 8081 reserved.
    #[default]
    VirtualRouter,
    /// A NetScaler-like appliance: UDP and health checks.
    Netscaler,
    /// VMware NSX (4.19+, `NsxElement`): tcp and udp, roundrobin and leastconn, no health
    /// checks, no SSL termination.
    Nsx,
    /// Netris (4.21+, `NetrisElement`): as NSX, and `updateLoadBalancerRule` takes no
    /// algorithm and no `tcp-proxy`.
    Netris,
    /// The VPC Internal Load Balancer (`InternalLoadBalancerElement`, provider
    /// `InternalLbVm`): VPC tiers only, offering
    /// `DefaultIsolatedNetworkOfferingForVpcNetworksWithInternalLB` — Lb by InternalLbVm with
    /// scheme Internal only (`createLoadBalancer`), every other service by the VPC Virtual
    /// Router. Public load-balancer rules are refused on such a tier.
    InternalLbVm,
}

/// The network mode of a network's offering (`NetworkOffering.NetworkMode`, 4.20+).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "UPPERCASE")]
pub enum NetworkMode {
    /// Guest addresses behind source NAT, public addresses for LB, PF and static NAT.
    #[default]
    Natted,
    /// The guest subnet is routed (static routing here): no Lb, SourceNat, StaticNat or
    /// PortForwarding service; Firewall (isolated) or NetworkACL (tier) filter it.
    Routed,
}

/// The guest type of a network (`Network.GuestType`).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub enum GuestType {
    /// An isolated network or a VPC tier.
    #[default]
    Isolated,
    /// A shared network; here always with the default shared offering's services (Dhcp,
    /// Dns, UserData): no public address can be associated with it.
    Shared,
}

impl GuestType {
    /// The name the API prints (`type` of a network or NIC).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Isolated => "Isolated",
            Self::Shared => "Shared",
        }
    }
}

/// A guest network: isolated (Firewall service) or a VPC tier (NetworkACL service), NATTED
/// or ROUTED, or a shared network.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkSpec {
    /// Fixed id; generated when absent.
    #[serde(default)]
    pub id: Option<String>,
    /// Network name.
    pub name: String,
    /// Zone name.
    pub zone: String,
    /// Guest CIDR (`/24` style); the gateway is the first address.
    pub cidr: String,
    /// VPC name for a tier.
    #[serde(default)]
    pub vpc: Option<String>,
    /// ACL list name for a tier (`default_allow`, `default_deny` or a list of the VPC).
    #[serde(default)]
    pub acl: Option<String>,
    /// Load-balancer provider.
    #[serde(default)]
    pub lb_provider: LbProvider,
    /// `NATTED` (the default) or `ROUTED`.
    #[serde(default)]
    pub network_mode: NetworkMode,
    /// `Isolated` (the default) or `Shared` (not a VPC tier, NATTED, default LB provider).
    #[serde(default)]
    pub guest_type: GuestType,
    /// Owning account name (the first account when neither owner is given).
    #[serde(default)]
    pub account: Option<String>,
    /// Owning project name.
    #[serde(default)]
    pub project: Option<String>,
}

/// A service offering.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OfferingSpec {
    /// Fixed id; generated when absent.
    #[serde(default)]
    pub id: Option<String>,
    /// Offering name (the Kubernetes instance type).
    pub name: String,
    /// CPU count.
    #[serde(default = "one")]
    pub cpu: u32,
    /// Memory in MiB.
    #[serde(default = "default_memory")]
    pub memory: u32,
}

fn one() -> u32 {
    1
}
fn default_memory() -> u32 {
    2048
}

/// A NIC of a VM.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NicSpec {
    /// Network name.
    pub network: String,
    /// IPv4 address in the network.
    pub ipv4: String,
    /// IPv6 address.
    #[serde(default)]
    pub ipv6: Option<String>,
    /// Default NIC (exactly one per VM; the first one when none is marked).
    #[serde(default)]
    pub isdefault: bool,
}

/// A virtual machine.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VmSpec {
    /// Fixed id; generated when absent.
    #[serde(default)]
    pub id: Option<String>,
    /// VM name (host name).
    pub name: String,
    /// State (`Running`, `Stopped`, …).
    #[serde(default = "running")]
    pub state: String,
    /// Zone name.
    pub zone: String,
    /// Service offering name.
    pub offering: String,
    /// NICs.
    pub nics: Vec<NicSpec>,
    /// A static-NAT public address from the zone pool.
    #[serde(default)]
    pub static_nat_ip: Option<String>,
    /// Owning account name (the first account when neither owner is given).
    #[serde(default)]
    pub account: Option<String>,
    /// Owning project name.
    #[serde(default)]
    pub project: Option<String>,
}

fn running() -> String {
    "Running".into()
}

/// A scenario file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// I/O error reading the file.
    #[error("reading scenario {path}: {source}")]
    Io {
        /// File path.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// TOML syntax or schema error.
    #[error("parsing scenario {path}: {source}")]
    Parse {
        /// File path.
        path: String,
        /// Cause.
        source: toml::de::Error,
    },
    /// A reference or value inside the scenario is wrong.
    #[error("scenario: {0}")]
    Invalid(String),
}

impl Scenario {
    /// Parses a TOML scenario text.
    pub fn from_toml(text: &str) -> Result<Self, ScenarioError> {
        toml::from_str(text).map_err(|source| ScenarioError::Parse {
            path: "<text>".into(),
            source,
        })
    }

    /// Reads a TOML scenario file.
    pub fn load(path: &std::path::Path) -> Result<Self, ScenarioError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Io {
            path: shown.clone(),
            source,
        })?;
        toml::from_str(&text).map_err(|source| ScenarioError::Parse {
            path: shown,
            source,
        })
    }

    /// The credentials of an account by name.
    pub fn account(&self, name: &str) -> Option<&AccountSpec> {
        self.accounts.iter().find(|a| a.name == name)
    }
}

/// The state of a VPC gateway (CloudStack `VpcGateway.State`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum GatewayState {
    /// Being set up on the VPC router.
    Creating,
    /// In service: static routes may name it.
    #[default]
    Ready,
    /// Being removed.
    Deleting,
}

impl std::fmt::Display for GatewayState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Creating => "Creating",
            Self::Ready => "Ready",
            Self::Deleting => "Deleting",
        })
    }
}
