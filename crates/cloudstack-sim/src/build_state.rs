//! Turns a [`Scenario`] (objects named by name) into a [`State`] (objects linked by id).

use crate::scenario::{
    GuestType, LbProvider, NetworkMode, NetworkSpec, Scenario, ScenarioError, VmSpec,
};
use crate::state::{
    Account, AclList, Network, Nic, Offering, Owner, PrivateGateway, Project, PublicIp, State, Vm,
    Vpc, Zone, new_id, now_text,
};
use std::net::Ipv4Addr;

fn invalid(text: String) -> ScenarioError {
    ScenarioError::Invalid(text)
}

fn id_or_new(id: &Option<String>) -> String {
    id.clone().unwrap_or_else(new_id)
}

impl State {
    /// Builds the initial state; every name reference must resolve.
    pub fn from_scenario(scenario: &Scenario) -> Result<Self, ScenarioError> {
        let mut state = State {
            version: scenario.version.clone(),
            settings: scenario.settings.clone(),
            domain_id: new_id(),
            accounts: vec![],
            projects: vec![],
            zones: vec![],
            vpcs: vec![],
            acl_lists: vec![],
            networks: vec![],
            offerings: vec![],
            vms: vec![],
            ips: vec![],
            lb_rules: vec![],
            internal_lb_rules: vec![],
            internal_lb_vms: vec![],
            firewall_rules: vec![],
            routing_firewall_rules: vec![],
            expunged_vms: vec![],
            pf_rules: vec![],
            acl_items: vec![],
            tags: vec![],
            policies: vec![],
            private_gateways: vec![],
            static_routes: vec![],
            ssl_certs: vec![],
            cert_bindings: vec![],
            jobs: vec![],
        };
        for (i, r) in scenario.roles.iter().enumerate() {
            if scenario.roles[..i].iter().any(|o| o.name == r.name) {
                return Err(invalid(format!("role {:?}: duplicate name", r.name)));
            }
            r.validate()
                .map_err(|e| invalid(format!("role {:?}: field rules: {e}", r.name)))?;
        }
        for a in &scenario.accounts {
            let custom_role = match &a.custom_role {
                None => None,
                Some(name) => {
                    let role = scenario.roles.iter().find(|r| &r.name == name);
                    let role = role.ok_or_else(|| {
                        invalid(format!(
                            "account {:?}: field custom_role: no role named {name:?}",
                            a.name
                        ))
                    })?;
                    // An account's type follows its role's (`AccountManagerImpl.createUserAccount`).
                    if role.role_type != a.role {
                        return Err(invalid(format!(
                            "account {:?}: field custom_role: role {name:?} is of type {:?}, the account of type {:?}",
                            a.name, role.role_type, a.role
                        )));
                    }
                    Some(role.clone())
                }
            };
            if state.account(&a.name).is_some()
                || state.account_by_key(a.api_key.expose()).is_some()
            {
                return Err(invalid(format!(
                    "account {:?}: duplicate name or api_key",
                    a.name
                )));
            }
            state.accounts.push(Account {
                id: new_id(),
                user_id: new_id(),
                name: a.name.clone(),
                role: a.role,
                custom_role,
                api_key: a.api_key.clone(),
                secret_key: a.secret_key.clone(),
            });
        }
        for p in &scenario.projects {
            let members = scenario
                .accounts
                .iter()
                .filter(|a| a.projects.contains(&p.name))
                .map(|a| a.name.clone());
            state.projects.push(Project {
                id: id_or_new(&p.id),
                name: p.name.clone(),
                members: members.collect(),
            });
        }
        for a in &scenario.accounts {
            if let Some(p) = a
                .projects
                .iter()
                .find(|p| !state.projects.iter().any(|x| &x.name == *p))
            {
                return Err(invalid(format!(
                    "account {:?}: field projects: no project named {p:?}",
                    a.name
                )));
            }
        }
        for z in &scenario.zones {
            let zone_id = id_or_new(&z.id);
            let mut addresses: Vec<Ipv4Addr> = Vec::new();
            for text in &z.public_ips {
                addresses.push(parse_v4(
                    text,
                    &format!("zone {:?} field public_ips", z.name),
                )?);
            }
            if let Some(range) = &z.public_ip_range {
                let field = format!("zone {:?} field public_ip_range", z.name);
                let (start, end) = (
                    u32::from(parse_v4(&range.start, &field)?),
                    u32::from(parse_v4(&range.end, &field)?),
                );
                if end < start || end - start > 65_535 {
                    return Err(invalid(format!(
                        "{field}: end must follow start (at most 65536 addresses)"
                    )));
                }
                addresses.extend((start..=end).map(Ipv4Addr::from));
            }
            for address in addresses {
                state.ips.push(PublicIp {
                    id: new_id(),
                    address: address.to_string(),
                    zone_id: zone_id.clone(),
                    state: "Free".into(),
                    owner: None,
                    allocated: None,
                    network_id: None,
                    vpc_id: None,
                    source_nat: false,
                    static_nat_vm: None,
                });
            }
            state.zones.push(Zone {
                id: zone_id,
                name: z.name.clone(),
            });
        }
        for v in &scenario.vpcs {
            let what = format!("vpc {:?}", v.name);
            let vpc = Vpc {
                id: id_or_new(&v.id),
                name: v.name.clone(),
                zone_id: state.zone_named(&v.zone, &what)?,
                cidr: v.cidr.clone(),
                owner: state.owner(&v.account, &v.project, &what)?,
            };
            state.allocate_source_nat(&vpc.zone_id, &vpc.owner, None, Some(&vpc.id), &what)?;
            state.vpcs.push(vpc);
        }
        for name in ["default_allow", "default_deny"] {
            let description = format!(
                "Default Network ACL {}",
                if name == "default_allow" {
                    "Allow All"
                } else {
                    "Deny All"
                }
            );
            state.acl_lists.push(AclList {
                id: new_id(),
                name: name.into(),
                description,
                vpc_id: None,
            });
        }
        for l in &scenario.acl_lists {
            let vpc_id = state
                .vpcs
                .iter()
                .find(|v| v.name == l.vpc)
                .map(|v| v.id.clone());
            let vpc_id = vpc_id.ok_or_else(|| {
                invalid(format!(
                    "acl_list {:?}: field vpc: no vpc named {:?}",
                    l.name, l.vpc
                ))
            })?;
            let description = l.description.clone().unwrap_or_else(|| l.name.clone());
            state.acl_lists.push(AclList {
                id: id_or_new(&l.id),
                name: l.name.clone(),
                description,
                vpc_id: Some(vpc_id),
            });
        }
        for g in &scenario.private_gateways {
            let vpc_id = state
                .vpcs
                .iter()
                .find(|v| v.name == g.vpc)
                .map(|v| v.id.clone())
                .ok_or_else(|| {
                    invalid(format!(
                        "private_gateway {:?}: field vpc: no vpc named {:?}",
                        g.gateway, g.vpc
                    ))
                })?;
            state.private_gateways.push(PrivateGateway {
                id: id_or_new(&g.id),
                vpc_id,
                gateway: g.gateway.clone(),
                ip_address: g.ip_address.clone(),
                netmask: g.netmask.clone(),
                state: g.state,
            });
        }
        for n in &scenario.networks {
            let what = format!("network {:?}", n.name);
            if !n.cidr.contains('/')
                || parse_v4(n.cidr.split('/').next().unwrap_or_default(), &what).is_err()
            {
                return Err(invalid(format!(
                    "{what}: field cidr: {:?} is not an IPv4 CIDR",
                    n.cidr
                )));
            }
            let vpc_id = match &n.vpc {
                None => None,
                Some(name) => Some(
                    state
                        .vpcs
                        .iter()
                        .find(|v| &v.name == name)
                        .map(|v| v.id.clone())
                        .ok_or_else(|| {
                            invalid(format!("{what}: field vpc: no vpc named {name:?}"))
                        })?,
                ),
            };
            let acl_id = match (&vpc_id, &n.acl) {
                (None, Some(_)) => {
                    return Err(invalid(format!(
                        "{what}: field acl: only VPC tiers have an ACL list"
                    )));
                }
                (None, None) => None,
                (Some(_), None) => state
                    .acl_lists
                    .iter()
                    .find(|a| a.name == "default_allow")
                    .map(|a| a.id.clone()),
                (Some(vpc), Some(name)) => Some(
                    state
                        .acl_lists
                        .iter()
                        .find(|a| {
                            &a.name == name
                                && (a.vpc_id.is_none() || a.vpc_id.as_ref() == Some(vpc))
                        })
                        .map(|a| a.id.clone())
                        .ok_or_else(|| {
                            invalid(format!(
                                "{what}: field acl: no ACL list {name:?} in its VPC"
                            ))
                        })?,
                ),
            };
            check_kind(n, &what)?;
            let network = Network {
                id: id_or_new(&n.id),
                name: n.name.clone(),
                zone_id: state.zone_named(&n.zone, &what)?,
                cidr: n.cidr.clone(),
                vpc_id,
                acl_id,
                lb_provider: n.lb_provider,
                mode: n.network_mode,
                guest_type: n.guest_type,
                owner: state.owner(&n.account, &n.project, &what)?,
            };
            // An isolated network's router gets a public address flagged source NAT: the
            // source-NAT address of a NATTED network, the router's address (the next hop of
            // `ip4routes`) of a ROUTED one. A shared network has no router address; a tier
            // uses its VPC's.
            if !network.is_tier() && !network.is_shared() {
                state.allocate_source_nat(
                    &network.zone_id,
                    &network.owner,
                    Some(&network.id),
                    None,
                    &what,
                )?;
            }
            state.networks.push(network);
        }
        for o in &scenario.service_offerings {
            state.offerings.push(Offering {
                id: id_or_new(&o.id),
                name: o.name.clone(),
                cpu: o.cpu,
                memory: o.memory,
            });
        }
        for v in &scenario.vms {
            let vm = state.vm_from_spec(v)?;
            state.vms.push(vm);
        }
        Ok(state)
    }

    /// Resolves a VM description (scenario or `/sim/vms`) against the current state.
    pub fn vm_from_spec(&mut self, v: &VmSpec) -> Result<Vm, ScenarioError> {
        let what = format!("vm {:?}", v.name);
        let offering_id = self
            .offerings
            .iter()
            .find(|o| o.name == v.offering)
            .map(|o| o.id.clone());
        let offering_id = offering_id.ok_or_else(|| {
            invalid(format!(
                "{what}: field offering: no offering named {:?}",
                v.offering
            ))
        })?;
        if v.nics.is_empty() {
            return Err(invalid(format!(
                "{what}: field nics: at least one NIC is needed"
            )));
        }
        let any_default = v.nics.iter().any(|n| n.isdefault);
        let mut nics = Vec::new();
        for (i, n) in v.nics.iter().enumerate() {
            let network_id = self
                .networks
                .iter()
                .find(|x| x.name == n.network)
                .map(|x| x.id.clone());
            let network_id = network_id.ok_or_else(|| {
                invalid(format!(
                    "{what}: field nics[{i}].network: no network named {:?}",
                    n.network
                ))
            })?;
            parse_v4(&n.ipv4, &format!("{what}: field nics[{i}].ipv4"))?;
            let mac_tail = rand::random::<u32>().to_be_bytes();
            nics.push(Nic {
                id: new_id(),
                network_id,
                ipv4: n.ipv4.clone(),
                ipv6: n.ipv6.clone(),
                isdefault: n.isdefault || (!any_default && i == 0),
                mac: format!(
                    "02:00:{:02x}:{:02x}:{:02x}:{:02x}",
                    mac_tail[0], mac_tail[1], mac_tail[2], mac_tail[3]
                ),
            });
        }
        let vm = Vm {
            id: id_or_new(&v.id),
            name: v.name.clone(),
            state: v.state.clone(),
            zone_id: self.zone_named(&v.zone, &what)?,
            offering_id,
            nics,
            owner: self.owner(&v.account, &v.project, &what)?,
            created: now_text(),
            removed: None,
            // `vm_instance.id`: auto-increment, never reused.
            number: self
                .vms
                .iter()
                .chain(&self.expunged_vms)
                .map(|vm| vm.number)
                .max()
                .unwrap_or(0)
                + 1,
        };
        if let Some(address) = &v.static_nat_ip {
            let ip = self
                .ips
                .iter_mut()
                .find(|i| &i.address == address && i.state == "Free");
            let ip = ip.ok_or_else(|| {
                invalid(format!(
                    "{what}: field static_nat_ip: {address} is not a free pool address"
                ))
            })?;
            ip.state = "Allocated".into();
            ip.owner = Some(vm.owner.clone());
            ip.allocated = Some(now_text());
            ip.network_id = vm
                .nics
                .iter()
                .find(|n| n.isdefault)
                .map(|n| n.network_id.clone());
            ip.static_nat_vm = Some(vm.id.clone());
        }
        Ok(vm)
    }

    fn zone_named(&self, name: &str, what: &str) -> Result<String, ScenarioError> {
        self.zones
            .iter()
            .find(|z| z.name == name)
            .map(|z| z.id.clone())
            .ok_or_else(|| invalid(format!("{what}: field zone: no zone named {name:?}")))
    }

    fn owner(
        &self,
        account: &Option<String>,
        project: &Option<String>,
        what: &str,
    ) -> Result<Owner, ScenarioError> {
        match (account, project) {
            (Some(_), Some(_)) => Err(invalid(format!(
                "{what}: give either account or project, not both"
            ))),
            (_, Some(p)) => self
                .projects
                .iter()
                .find(|x| &x.name == p)
                .map(|x| Owner::Project(x.id.clone()))
                .ok_or_else(|| invalid(format!("{what}: field project: no project named {p:?}"))),
            (Some(a), None) => self
                .account(a)
                .map(|x| Owner::Account(x.name.clone()))
                .ok_or_else(|| invalid(format!("{what}: field account: no account named {a:?}"))),
            (None, None) => self
                .accounts
                .iter()
                .find(|a| a.role == crate::scenario::Role::User)
                .or(self.accounts.first())
                .map(|a| Owner::Account(a.name.clone()))
                .ok_or_else(|| invalid(format!("{what}: no owner and no account in the scenario"))),
        }
    }

    fn allocate_source_nat(
        &mut self,
        zone_id: &str,
        owner: &Owner,
        network: Option<&str>,
        vpc: Option<&str>,
        what: &str,
    ) -> Result<(), ScenarioError> {
        let ip = self
            .ips
            .iter_mut()
            .find(|i| i.zone_id == zone_id && i.state == "Free");
        let ip = ip.ok_or_else(|| {
            invalid(format!(
                "{what}: the zone's public IP pool has no address left for source NAT"
            ))
        })?;
        ip.state = "Allocated".into();
        ip.owner = Some(owner.clone());
        ip.allocated = Some(now_text());
        ip.network_id = network.map(str::to_owned);
        ip.vpc_id = vpc.map(str::to_owned);
        ip.source_nat = true;
        Ok(())
    }
}

/// The combinations of guest type, mode and provider CloudStack's offerings allow: a shared
/// network is no VPC tier, has no network mode and no LB provider (its offering has no Lb
/// service); a NetScaler serves no ROUTED network (no Lb service there).
fn check_kind(n: &NetworkSpec, what: &str) -> Result<(), ScenarioError> {
    if n.guest_type == GuestType::Shared {
        if n.vpc.is_some() {
            return Err(invalid(format!(
                "{what}: a Shared network cannot be a VPC tier"
            )));
        }
        if n.network_mode == NetworkMode::Routed {
            return Err(invalid(format!(
                "{what}: a Shared network has no network mode; leave network_mode out"
            )));
        }
        if n.lb_provider != LbProvider::VirtualRouter {
            return Err(invalid(format!(
                "{what}: a Shared network has no Lb service; leave lb_provider out"
            )));
        }
    }
    // `InternalLoadBalancerElement` serves VPC tiers only (its default offering is
    // `DefaultIsolatedNetworkOfferingForVpcNetworksWithInternalLB`, `forVpc`), and a ROUTED
    // offering has no Lb service at all.
    if n.lb_provider == LbProvider::InternalLbVm
        && (n.vpc.is_none() || n.network_mode == NetworkMode::Routed)
    {
        return Err(invalid(format!(
            "{what}: lb_provider InternalLbVm serves NATTED VPC tiers only (give vpc, leave network_mode out)"
        )));
    }
    if n.network_mode == NetworkMode::Routed && n.lb_provider == LbProvider::Netscaler {
        return Err(invalid(format!(
            "{what}: a ROUTED network has no Lb service; its Firewall/NetworkACL provider is VirtualRouter, Nsx or Netris"
        )));
    }
    Ok(())
}

fn parse_v4(text: &str, what: &str) -> Result<Ipv4Addr, ScenarioError> {
    text.parse::<Ipv4Addr>()
        .map_err(|_| invalid(format!("{what}: {text:?} is not an IPv4 address")))
}
