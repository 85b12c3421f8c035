//! The simulated cloud's state: every entity the API exposes, serialisable for the state
//! file and the `/sim/dump` introspection.

use crate::jobs::Job;
use crate::roles::RoleSpec;
use crate::scenario::{GatewayState, Role, Secret, Settings};
use crate::version::Version;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

mod internal_lb;
mod networks;
mod ssl_certs;
pub use internal_lb::{AnyLbRule, InternalLbRule};
pub use networks::{Network, RoutingFirewallRule, Service, network_text};
pub use ssl_certs::{CertBinding, SslCert};

/// Who owns a resource.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Owner {
    /// An account, by name.
    Account(String),
    /// A project, by id.
    Project(String),
}

/// An account with its single user and key pair.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Account {
    /// Account id.
    pub id: String,
    /// User id.
    pub user_id: String,
    /// Account name (also the user name).
    pub name: String,
    /// Role (the account type).
    pub role: Role,
    /// The custom role the account has instead of the default role of its type, resolved
    /// from the scenario's `[[role]]` ([`crate::commands::access::may_call`] decides with it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_role: Option<RoleSpec>,
    /// API key.
    pub api_key: Secret,
    /// Secret key.
    pub secret_key: Secret,
}

/// A project and its member accounts.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Project {
    /// Id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Member account names.
    pub members: Vec<String>,
}

/// A zone.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Zone {
    /// Id.
    pub id: String,
    /// Name.
    pub name: String,
}

/// A VPC.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Vpc {
    /// Id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Zone id.
    pub zone_id: String,
    /// CIDR.
    pub cidr: String,
    /// Owner.
    pub owner: Owner,
}

/// A network ACL list (global default lists have no VPC).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AclList {
    /// Id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// VPC id (None for `default_allow`/`default_deny`).
    pub vpc_id: Option<String>,
}

/// A service offering.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Offering {
    /// Id.
    pub id: String,
    /// Name.
    pub name: String,
    /// CPUs.
    pub cpu: u32,
    /// Memory MiB.
    pub memory: u32,
}

/// A NIC.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Nic {
    /// Id.
    pub id: String,
    /// Network id.
    pub network_id: String,
    /// IPv4 address.
    pub ipv4: String,
    /// IPv6 address.
    pub ipv6: Option<String>,
    /// Default NIC.
    pub isdefault: bool,
    /// MAC address.
    pub mac: String,
}

/// A virtual machine.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Vm {
    /// Id.
    pub id: String,
    /// Name.
    pub name: String,
    /// State name.
    pub state: String,
    /// Zone id.
    pub zone_id: String,
    /// Offering id.
    pub offering_id: String,
    /// NICs.
    pub nics: Vec<Nic>,
    /// Owner.
    pub owner: Owner,
    /// Creation date.
    pub created: String,
    /// Removal date once expunged (the VM then lives in [`State::expunged_vms`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed: Option<String>,
    /// The numeric id of `vm_instance` (`VMInstanceVO.getId`), unique in the cloud: the
    /// `<id>` of the instance name `i-<account id>-<id>-VM`.
    #[serde(default)]
    pub number: u64,
}

impl Vm {
    /// Destroyed or being expunged: such a VM is not listed by default, not listed as a
    /// member of a load-balancer rule and cannot be assigned to one.
    pub fn is_destroyed(&self) -> bool {
        matches!(self.state.as_str(), "Destroyed" | "Expunging")
    }
}

/// A public IP address of a zone pool (free or allocated).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PublicIp {
    /// Id.
    pub id: String,
    /// Address.
    pub address: String,
    /// Zone id.
    pub zone_id: String,
    /// `Free`, `Allocating`, `Allocated`, `Releasing`.
    pub state: String,
    /// Owner while allocated.
    pub owner: Option<Owner>,
    /// Allocation date while allocated.
    pub allocated: Option<String>,
    /// Associated network.
    pub network_id: Option<String>,
    /// Associated VPC.
    pub vpc_id: Option<String>,
    /// Source-NAT address of its network/VPC.
    pub source_nat: bool,
    /// VM of a static NAT.
    pub static_nat_vm: Option<String>,
}

/// A VM assigned to an LB rule.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Member {
    /// VM id.
    pub vm_id: String,
    /// Guest address used.
    pub ip: String,
}

/// A load-balancer rule.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LbRule {
    /// Id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Description.
    pub description: Option<String>,
    /// Public IP id.
    pub ip_id: String,
    /// Network id.
    pub network_id: String,
    /// Public port.
    pub public_port: u16,
    /// Private port.
    pub private_port: u16,
    /// `roundrobin|leastconn|source`.
    pub algorithm: String,
    /// `tcp|udp|tcp-proxy`.
    pub protocol: String,
    /// Source CIDRs (stored, rendered space-separated).
    pub cidrs: Option<Vec<String>>,
    /// The CIDRs were last set by updateLoadBalancerRule, which stores them comma-joined
    /// (`StringUtils.join(cidrList, ",")`) where create joins them with spaces
    /// (`generateCidrString`); the response echoes the stored text.
    #[serde(default)]
    pub cidrs_comma: bool,
    /// `Add` or `Active`.
    pub state: String,
    /// Members.
    pub members: Vec<Member>,
    /// Firewall rule created by `openfirewall`.
    pub firewall_rule_id: Option<String>,
    /// Owner.
    pub owner: Owner,
}

/// A port-forwarding rule: a public port range of an address to a VM's guest address.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PfRule {
    /// Id.
    pub id: String,
    /// Public IP id.
    pub ip_id: String,
    /// Network id (the address's).
    pub network_id: String,
    /// Target VM.
    pub vm_id: String,
    /// The VM's guest address in the network.
    pub vm_ip: String,
    /// `tcp` or `udp`.
    pub protocol: String,
    /// Public port range.
    pub public_ports: (u16, u16),
    /// Private port range.
    pub private_ports: (u16, u16),
    /// `Add` or `Active`.
    pub state: String,
    /// Firewall rule created by `openfirewall`.
    pub firewall_rule_id: Option<String>,
    /// Owner.
    pub owner: Owner,
}

/// A firewall rule on an isolated network's public IP.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FirewallRule {
    /// Id.
    pub id: String,
    /// Public IP id.
    pub ip_id: String,
    /// `tcp|udp|icmp`.
    pub protocol: String,
    /// Start port.
    pub start_port: Option<i64>,
    /// End port.
    pub end_port: Option<i64>,
    /// ICMP type.
    pub icmp_type: Option<i64>,
    /// ICMP code.
    pub icmp_code: Option<i64>,
    /// Source CIDRs.
    pub cidrs: Vec<String>,
    /// `Add` or `Active`.
    pub state: String,
    /// Owner.
    pub owner: Owner,
}

/// An item of a network ACL list.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AclItem {
    /// Id.
    pub id: String,
    /// ACL list id.
    pub acl_id: String,
    /// Rule number.
    pub number: i64,
    /// Protocol.
    pub protocol: String,
    /// Start port.
    pub start_port: Option<i64>,
    /// End port.
    pub end_port: Option<i64>,
    /// Source CIDRs.
    pub cidrs: Vec<String>,
    /// `Ingress` or `Egress`.
    pub traffic_type: String,
    /// `Allow` or `Deny`.
    pub action: String,
    /// ICMP type.
    pub icmp_type: Option<i64>,
    /// ICMP code.
    pub icmp_code: Option<i64>,
    /// Reason.
    pub reason: Option<String>,
    /// `Add` or `Active`.
    pub state: String,
}

/// A resource tag.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Tag {
    /// Key.
    pub key: String,
    /// Value.
    pub value: String,
    /// Resource id.
    pub resource_id: String,
    /// Resource type (`LoadBalancer`, `PublicIpAddress`, …).
    pub resource_type: String,
    /// Customer.
    pub customer: Option<String>,
    /// Owner (the resource's).
    pub owner: Owner,
}

/// A health-check or stickiness policy of an LB rule.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LbPolicy {
    /// Id.
    pub id: String,
    /// LB rule id.
    pub rule_id: String,
    /// `healthcheck` or `stickiness`.
    pub kind: PolicyKind,
    /// Name (stickiness).
    pub name: Option<String>,
    /// Method (stickiness).
    pub method: Option<String>,
    /// Ping path (health check).
    pub ping_path: Option<String>,
    /// Timing/threshold values (health check) or method parameters (stickiness).
    pub values: BTreeMap<String, String>,
    /// Description.
    pub description: Option<String>,
    /// `Add` or `Active`.
    pub state: String,
}

/// Kind of LB policy.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum PolicyKind {
    /// Health check.
    HealthCheck,
    /// Stickiness.
    Stickiness,
}

/// A VPC private gateway: the older form of `createStaticRoute` names one
/// (CloudStack `VpcGatewayVO`, type Private).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PrivateGateway {
    /// Id.
    pub id: String,
    /// VPC id.
    pub vpc_id: String,
    /// The gateway address on the private network (the next hop of its routes).
    pub gateway: String,
    /// The VPC router's address on the private network.
    pub ip_address: String,
    /// Netmask of the private network.
    pub netmask: String,
    /// State; state files written before gateways had one load them `Ready`.
    #[serde(default)]
    pub state: GatewayState,
}

/// A VPC static route (CloudStack `StaticRouteVO`): to a private gateway or, since 4.22, to
/// a next-hop address.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StaticRoute {
    /// Id.
    pub id: String,
    /// VPC id.
    pub vpc_id: String,
    /// Destination CIDR.
    pub cidr: String,
    /// Private gateway id (older form).
    pub gateway_id: Option<String>,
    /// Next-hop address (4.22 form).
    pub next_hop: Option<String>,
    /// `Add`, `Active` (a revoked route disappears when its delete job runs).
    pub state: String,
    /// Owner (the VPC's).
    pub owner: Owner,
    /// Creation date.
    pub created: String,
}

/// Everything.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct State {
    /// Emulated version.
    pub version: Version,
    /// Knobs.
    pub settings: Settings,
    /// Domain id (a single ROOT domain).
    pub domain_id: String,
    /// Accounts.
    pub accounts: Vec<Account>,
    /// Projects.
    pub projects: Vec<Project>,
    /// Zones.
    pub zones: Vec<Zone>,
    /// VPCs.
    pub vpcs: Vec<Vpc>,
    /// ACL lists.
    pub acl_lists: Vec<AclList>,
    /// Networks.
    pub networks: Vec<Network>,
    /// Offerings.
    pub offerings: Vec<Offering>,
    /// VMs (not expunged).
    pub vms: Vec<Vm>,
    /// Expunged VMs. Their rows stay, as `vm_instance.removed` does on the server:
    /// parameter processing still resolves their UUIDs
    /// (`ParamProcessWorker.translateUuidToInternalId` searches removed entities too), while
    /// every list and lookup ignores them.
    #[serde(default)]
    pub expunged_vms: Vec<Vm>,
    /// Public IPs (every pool address).
    pub ips: Vec<PublicIp>,
    /// LB rules (scheme Public).
    pub lb_rules: Vec<LbRule>,
    /// Internal LB rules (scheme Internal, `createLoadBalancer`), in creation order.
    #[serde(default)]
    pub internal_lb_rules: Vec<InternalLbRule>,
    /// The InternalLbVms standing, as `(source network id, source address)`:
    /// `InternalLoadBalancerElement.applyLBRules` deploys one per source address the first
    /// time a rule of it is applied with a VM, and destroys it only when every rule of the
    /// address is revoked (`getVmsToDestroy` by `countBySourceIpAndNotRevoked`): a rule left
    /// without members keeps it.
    #[serde(default)]
    pub internal_lb_vms: Vec<(String, String)>,
    /// Firewall rules.
    pub firewall_rules: Vec<FirewallRule>,
    /// Routing firewall rules of ROUTED networks.
    #[serde(default)]
    pub routing_firewall_rules: Vec<RoutingFirewallRule>,
    /// Port-forwarding rules.
    #[serde(default)]
    pub pf_rules: Vec<PfRule>,
    /// ACL items.
    pub acl_items: Vec<AclItem>,
    /// Tags.
    pub tags: Vec<Tag>,
    /// LB policies.
    pub policies: Vec<LbPolicy>,
    /// VPC private gateways.
    #[serde(default)]
    pub private_gateways: Vec<PrivateGateway>,
    /// VPC static routes.
    #[serde(default)]
    pub static_routes: Vec<StaticRoute>,
    /// Uploaded SSL certificates.
    #[serde(default)]
    pub ssl_certs: Vec<SslCert>,
    /// Certificates assigned to LB rules (`load_balancer_cert_map`).
    #[serde(default)]
    pub cert_bindings: Vec<CertBinding>,
    /// Async jobs.
    pub jobs: Vec<Job>,
}

/// Current time in the server's date format (`2021-10-01T16:25:11+0000`).
pub fn now_text() -> String {
    format_time(jiff::Timestamp::now())
}

/// Formats a timestamp in the server's date format.
pub fn format_time(ts: jiff::Timestamp) -> String {
    ts.strftime("%Y-%m-%dT%H:%M:%S%z").to_string()
}

/// A fresh lower-case UUID.
pub fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

impl State {
    /// The account with this API key.
    pub fn account_by_key(&self, api_key: &str) -> Option<&Account> {
        self.accounts.iter().find(|a| a.api_key.expose() == api_key)
    }

    /// An account by name.
    pub fn account(&self, name: &str) -> Option<&Account> {
        self.accounts.iter().find(|a| a.name == name)
    }

    /// A zone by id.
    pub fn zone(&self, id: &str) -> Option<&Zone> {
        self.zones.iter().find(|z| z.id == id)
    }

    /// A network by id.
    pub fn network(&self, id: &str) -> Option<&Network> {
        self.networks.iter().find(|n| n.id == id)
    }

    /// A VPC by id.
    pub fn vpc(&self, id: &str) -> Option<&Vpc> {
        self.vpcs.iter().find(|v| v.id == id)
    }

    /// A project by id.
    pub fn project(&self, id: &str) -> Option<&Project> {
        self.projects.iter().find(|p| p.id == id)
    }

    /// A public IP by id.
    pub fn ip(&self, id: &str) -> Option<&PublicIp> {
        self.ips.iter().find(|i| i.id == id)
    }

    /// A VM by id (not an expunged one).
    pub fn vm(&self, id: &str) -> Option<&Vm> {
        self.vms.iter().find(|v| v.id == id)
    }

    /// A VM by id, expunged ones included (what parameter processing resolves).
    pub fn vm_including_removed(&self, id: &str) -> Option<&Vm> {
        self.vm(id)
            .or_else(|| self.expunged_vms.iter().find(|v| v.id == id))
    }

    /// An LB rule by id.
    pub fn lb_rule(&self, id: &str) -> Option<&LbRule> {
        self.lb_rules.iter().find(|r| r.id == id)
    }

    /// A VPC static route by id.
    pub fn static_route(&self, id: &str) -> Option<&StaticRoute> {
        self.static_routes.iter().find(|r| r.id == id)
    }

    /// A private gateway by id.
    pub fn private_gateway(&self, id: &str) -> Option<&PrivateGateway> {
        self.private_gateways.iter().find(|g| g.id == id)
    }

    /// An ACL list by id.
    pub fn acl_list(&self, id: &str) -> Option<&AclList> {
        self.acl_lists.iter().find(|a| a.id == id)
    }
}
