//! Built-in scenarios for tests, the demo and the binary's default.

use crate::scenario::{
    AccountSpec, AclListSpec, IpRange, LbProvider, NetworkSpec, NicSpec, OfferingSpec, ProjectSpec,
    Role, Scenario, Settings, VmSpec, VpcSpec, ZoneSpec,
};
use crate::version::Version;

/// Name of the zone of [`Scenario::small`].
pub const SMALL_ZONE: &str = "zone1";
/// Isolated network behind a Virtual Router in [`Scenario::small`].
pub const SMALL_NETWORK: &str = "net-vr";
/// Isolated network with a NetScaler-like LB provider in [`Scenario::small`].
pub const SMALL_NETSCALER_NETWORK: &str = "net-ns";
/// VPC tier in [`Scenario::small`].
pub const SMALL_TIER: &str = "tier1";
/// VPC in [`Scenario::small`].
pub const SMALL_VPC: &str = "vpc1";
/// ACL list of the VPC tier in [`Scenario::small`].
pub const SMALL_ACL: &str = "tier1-acl";
/// Project in [`Scenario::small`].
pub const SMALL_PROJECT: &str = "proj1";
/// The fixed id of [`SMALL_PROJECT`] in [`Scenario::small`].
pub const SMALL_PROJECT_ID: &str = "5e1f0c2a-7b3d-4c9e-8a61-2f4d6b8c0e13";

fn account(name: &str, role: Role, projects: &[&str]) -> AccountSpec {
    AccountSpec::new(name, role, projects)
}

fn network(
    name: &str,
    cidr: &str,
    vpc: Option<&str>,
    acl: Option<&str>,
    lb: LbProvider,
) -> NetworkSpec {
    NetworkSpec {
        id: None,
        name: name.into(),
        zone: SMALL_ZONE.into(),
        cidr: cidr.into(),
        vpc: vpc.map(str::to_owned),
        acl: acl.map(str::to_owned),
        lb_provider: lb,
        account: Some("alice".into()),
        ..NetworkSpec::default()
    }
}

impl Scenario {
    /// A small cloud: zone `zone1` with 200 public addresses; accounts `alice` and `bob`
    /// (users; keys `<name>-api-key` / `<name>-secret-key`) and `admin` (root admin);
    /// project `proj1` (id [`SMALL_PROJECT_ID`]; alice is a member); isolated VR network `net-vr` with VMs
    /// `node-1..3` (Running); NetScaler network `net-ns`; VPC `vpc1` with tier `tier1` using
    /// ACL list `tier1-acl`; offerings `small` and `large`.
    pub fn small() -> Self {
        let mut scenario = Scenario {
            version: Version::default(),
            settings: Settings {
                job_duration_ms: 50,
                ..Settings::default()
            },
            roles: vec![],
            accounts: vec![
                account("alice", Role::User, &[SMALL_PROJECT]),
                account("bob", Role::User, &[]),
                account("admin", Role::Admin, &[]),
            ],
            projects: vec![ProjectSpec {
                id: Some(SMALL_PROJECT_ID.into()),
                name: SMALL_PROJECT.into(),
            }],
            zones: vec![ZoneSpec {
                id: None,
                name: SMALL_ZONE.into(),
                public_ips: vec![],
                public_ip_range: Some(IpRange {
                    start: "203.0.113.10".into(),
                    end: "203.0.113.209".into(),
                }),
            }],
            vpcs: vec![VpcSpec {
                id: None,
                name: SMALL_VPC.into(),
                zone: SMALL_ZONE.into(),
                cidr: "10.100.0.0/16".into(),
                account: Some("alice".into()),
                project: None,
            }],
            acl_lists: vec![AclListSpec {
                id: None,
                name: SMALL_ACL.into(),
                vpc: SMALL_VPC.into(),
                description: Some("ingress rules of tier1".into()),
            }],
            networks: vec![
                network(
                    SMALL_NETWORK,
                    "10.1.1.0/24",
                    None,
                    None,
                    LbProvider::VirtualRouter,
                ),
                network(
                    SMALL_NETSCALER_NETWORK,
                    "10.1.2.0/24",
                    None,
                    None,
                    LbProvider::Netscaler,
                ),
                network(
                    SMALL_TIER,
                    "10.100.1.0/24",
                    Some(SMALL_VPC),
                    Some(SMALL_ACL),
                    LbProvider::VirtualRouter,
                ),
            ],
            service_offerings: vec![
                OfferingSpec {
                    id: None,
                    name: "small".into(),
                    cpu: 1,
                    memory: 2048,
                },
                OfferingSpec {
                    id: None,
                    name: "large".into(),
                    cpu: 4,
                    memory: 8192,
                },
            ],
            vms: vec![],
            private_gateways: vec![],
        };
        scenario.add_vms(SMALL_NETWORK, "node-", 3);
        scenario
    }

    /// Adds `count` Running VMs named `<prefix>1…` (continuing after existing ones with that
    /// prefix) with one default NIC on `network`, owned like the network. Returns their names.
    pub fn add_vms(&mut self, network: &str, prefix: &str, count: usize) -> Vec<String> {
        let spec = self.networks.iter().find(|n| n.name == network).cloned();
        let spec =
            spec.unwrap_or_else(|| panic!("add_vms: no network named {network:?} in the scenario"));
        let base = cidr_base(&spec.cidr);
        let used = self
            .vms
            .iter()
            .filter(|vm| vm.nics.iter().any(|n| n.network == network))
            .count();
        let existing = self
            .vms
            .iter()
            .filter(|vm| vm.name.starts_with(prefix))
            .count();
        let offering = self
            .service_offerings
            .first()
            .map(|o| o.name.clone())
            .unwrap_or_default();
        let mut names = Vec::with_capacity(count);
        for i in 0..count {
            let host = 10 + used + i;
            let name = format!("{prefix}{}", existing + i + 1);
            self.vms.push(VmSpec {
                id: None,
                name: name.clone(),
                state: "Running".into(),
                zone: spec.zone.clone(),
                offering: offering.clone(),
                nics: vec![NicSpec {
                    network: network.into(),
                    ipv4: std::net::Ipv4Addr::from(base + host as u32).to_string(),
                    ipv6: None,
                    isdefault: true,
                }],
                static_nat_ip: None,
                account: spec.account.clone(),
                project: spec.project.clone(),
            });
            names.push(name);
        }
        names
    }
}

/// The network address of an IPv4 CIDR as a number (0 when unparsable).
fn cidr_base(cidr: &str) -> u32 {
    cidr.split('/')
        .next()
        .and_then(|a| a.parse::<std::net::Ipv4Addr>().ok())
        .map(u32::from)
        .unwrap_or_default()
}
