//! listVirtualMachines and the `virtualmachine` object with its `details` groups (API.md §3.1).

use super::access::owner_fields;
use super::{Ctx, embedded_tags, like, resolve, tags_match};
use crate::error::ApiError;
use crate::response::list_body;
use crate::state::{State, Vm};
use serde_json::{Map, Value, json};
use std::collections::HashMap;

const DETAILS: &[&str] = &[
    "all", "group", "nics", "stats", "secgrp", "tmpl", "servoff", "diskoff", "backoff", "iso",
    "volume", "min", "affgrp",
];

/// Which optional groups of fields a VM response includes.
#[derive(Clone, Copy, Debug)]
pub struct VmDetails {
    nics: bool,
    servoff: bool,
    stats: bool,
    tmpl: bool,
}

impl VmDetails {
    /// Everything (`details` absent or `all`).
    pub fn all() -> Self {
        Self {
            nics: true,
            servoff: true,
            stats: true,
            tmpl: true,
        }
    }

    fn parse(list: Option<Vec<String>>) -> Result<Self, ApiError> {
        let Some(list) = list else {
            return Ok(Self::all());
        };
        if let Some(bad) = list
            .iter()
            .find(|d| !DETAILS.contains(&d.to_lowercase().as_str()))
        {
            return Err(ApiError::param(format!(
                "The details parameter contains a non permitted value {bad}. The allowed values are {}",
                DETAILS.join(", ")
            )));
        }
        let has = |d: &str| {
            list.iter()
                .any(|x| x.eq_ignore_ascii_case(d) || x.eq_ignore_ascii_case("all"))
        };
        Ok(Self {
            nics: has("nics"),
            servoff: has("servoff"),
            stats: has("stats"),
            tmpl: has("tmpl"),
        })
    }
}

/// The `nic` objects of a VM.
fn render_nics(state: &State, vm: &Vm) -> Value {
    let nics = vm.nics.iter().map(|nic| {
        let network = state.network(&nic.network_id);
        let (base, prefix) = network
            .map(|n| n.cidr.as_str())
            .unwrap_or("0.0.0.0/24")
            .split_once('/')
            .unwrap_or(("0.0.0.0", "24"));
        let prefix: u32 = prefix.parse().unwrap_or(24);
        let base: u32 = base
            .parse::<std::net::Ipv4Addr>()
            .map(u32::from)
            .unwrap_or_default();
        let mask = if prefix == 0 {
            0
        } else {
            u32::MAX << (32 - prefix.min(32))
        };
        let mut out = json!({
            "id": nic.id, "networkid": nic.network_id,
            "networkname": network.map(|n| n.name.clone()).unwrap_or_default(),
            "ipaddress": nic.ipv4, "netmask": std::net::Ipv4Addr::from(mask).to_string(),
            "gateway": std::net::Ipv4Addr::from(base + 1).to_string(),
            "macaddress": nic.mac, "isdefault": nic.isdefault, "traffictype": "Guest",
            "type": network.map_or("Isolated", |n| n.guest_type.as_str()),
            "secondaryip": [], "extradhcpoption": [],
        });
        if let Some(v6) = &nic.ipv6 {
            out["ip6address"] = json!(v6);
            out["ip6cidr"] = json!("fd00::/64");
            out["ip6gateway"] = json!("fd00::1");
        }
        if let Some(vpc) = network
            .and_then(|n| n.vpc_id.as_ref())
            .and_then(|v| state.vpc(v))
        {
            out["vpcid"] = json!(vpc.id);
            out["vpcname"] = json!(vpc.name);
        }
        out
    });
    Value::Array(nics.collect())
}

/// VM id → id of the pending job whose instance it is. `user_vm_view` joins the pending
/// async job of each VM and the response carries it (`UserVmJoinDaoImpl.newUserVmResponse`:
/// `setJobId`/`setJobStatus`).
pub type PendingVmJobs<'s> = HashMap<&'s str, &'s str>;

/// The pending jobs of VMs, for [`render_vm`].
pub fn pending_vm_jobs(state: &State) -> PendingVmJobs<'_> {
    state
        .jobs
        .iter()
        .filter(|j| j.status == 0 && j.instance_type.as_deref() == Some("VirtualMachine"))
        .filter_map(|j| j.instance_id.as_deref().map(|vm| (vm, j.id.as_str())))
        .collect()
}

/// A VM's internal name (`VMInstanceVO.getInstanceName`, set at allocation from
/// `VirtualMachineName.getVmName(vmId, accountId, "VM")`: `i-<account id>-<vm id>-VM`),
/// unique as the numeric ids are. The account ids are the simulator's: 2, 3, … in the
/// scenario's order of accounts, then one per project account.
pub fn instance_name(state: &State, vm: &Vm) -> String {
    format!("i-{}-{}-VM", account_number(state, &vm.owner), vm.number)
}

/// The numeric id of the account that owns `owner`'s resources (`account.id`; 1 is SYSTEM).
fn account_number(state: &State, owner: &crate::state::Owner) -> usize {
    let position = match owner {
        crate::state::Owner::Account(name) => state.accounts.iter().position(|a| &a.name == name),
        crate::state::Owner::Project(id) => state
            .projects
            .iter()
            .position(|p| &p.id == id)
            .map(|i| state.accounts.len() + i),
    };
    position.map_or(1, |i| i + 2)
}

/// The `virtualmachine` object.
pub fn render_vm(
    state: &State,
    vm: &Vm,
    details: VmDetails,
    admin: bool,
    pending: &PendingVmJobs<'_>,
) -> Value {
    let zone = state
        .zone(&vm.zone_id)
        .map(|z| z.name.clone())
        .unwrap_or_default();
    let mut out = Map::new();
    for (k, v) in [
        ("id", json!(vm.id)),
        ("name", json!(vm.name)),
        ("displayname", json!(vm.name)),
        ("state", json!(vm.state)),
        ("created", json!(vm.created)),
        ("zoneid", json!(vm.zone_id)),
        ("zonename", json!(zone)),
        ("hypervisor", json!("Simulator")),
        ("haenable", json!(false)),
        ("displayvm", json!(true)),
        ("isdynamicallyscalable", json!(false)),
        ("guestosid", json!("00000000-0000-4000-8000-000000000001")),
        ("osdisplayname", json!("Ubuntu 22.04 LTS")),
        ("tags", embedded_tags(state, "UserVm", &vm.id)),
    ] {
        out.insert(k.into(), v);
    }
    owner_fields(state, &vm.owner, &mut out);
    if let Some(job) = pending.get(vm.id.as_str()) {
        out.insert("jobid".into(), json!(job));
        out.insert("jobstatus".into(), json!(0));
    }
    if let Some(account) = state
        .accounts
        .iter()
        .find(|a| matches!(&vm.owner, crate::state::Owner::Account(n) if n == &a.name))
    {
        out.insert("userid".into(), json!(account.user_id));
        out.insert("username".into(), json!(account.name));
    }
    if admin {
        out.insert("instancename".into(), json!(instance_name(state, vm)));
        out.insert(
            "hostid".into(),
            json!("00000000-0000-4000-8000-0000000000aa"),
        );
        out.insert("hostname".into(), json!("SimulatedHost-1"));
    }
    if let Some(ip) = state
        .ips
        .iter()
        .find(|i| i.static_nat_vm.as_deref() == Some(&vm.id))
    {
        out.insert("publicip".into(), json!(ip.address));
        out.insert("publicipid".into(), json!(ip.id));
    }
    if details.servoff
        && let Some(o) = state.offerings.iter().find(|o| o.id == vm.offering_id)
    {
        out.insert("serviceofferingid".into(), json!(o.id));
        out.insert("serviceofferingname".into(), json!(o.name));
        out.insert("cpunumber".into(), json!(o.cpu));
        out.insert("cpuspeed".into(), json!(2000));
        out.insert("memory".into(), json!(o.memory));
    }
    if details.tmpl {
        out.insert(
            "templateid".into(),
            json!("00000000-0000-4000-8000-0000000000bb"),
        );
        out.insert("templatename".into(), json!("ubuntu-22.04"));
        out.insert("templatedisplaytext".into(), json!("Ubuntu 22.04"));
        out.insert("passwordenabled".into(), json!(false));
    }
    if details.stats {
        out.insert("cpuused".into(), json!("1%"));
        out.insert("networkkbsread".into(), json!(0));
        out.insert("networkkbswrite".into(), json!(0));
    }
    if details.nics {
        out.insert("nic".into(), render_nics(state, vm));
    }
    Value::Object(out)
}

/// True when `vm` passes the `state` filter (`QueryManagerImpl.searchForUserVMsInternal`):
/// `Present` = not Destroyed/Expunging; without `state` an admin sees every state, while a
/// non-admin never sees Destroyed or Expunging VMs (`allow.user.view.destroyed.vm` is off),
/// not even when asking for that state.
fn state_matches(vm: &Vm, wanted: Option<&str>, admin: bool) -> bool {
    if !admin && vm.is_destroyed() {
        return false;
    }
    match wanted {
        None => true,
        Some(w) if w.eq_ignore_ascii_case("present") => !vm.is_destroyed(),
        Some(w) => w.eq_ignore_ascii_case(&vm.state),
    }
}

/// listVirtualMachines.
pub fn list_virtual_machines(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let page = ctx.page()?;
    let scope = ctx.scope()?;
    let p = ctx.params;
    let state = &*ctx.state;
    let details = VmDetails::parse(p.list("details"))?;
    let id = resolve(p, "id", |i| state.vm_including_removed(i).is_some())?;
    if id.is_some() && p.text("ids").is_some() {
        return Err(ApiError::param(
            "id and ids are mutually exclusive, specify only one",
        ));
    }
    let ids = p.list("ids");
    if let Some(bad) = ids
        .iter()
        .flatten()
        .find(|i| !crate::params::is_uuid(i) || state.vm_including_removed(i).is_none())
    {
        return Err(ApiError::invalid_uuid(&p.command, "ids", bad));
    }
    let zone = resolve(p, "zoneid", |i| state.zone(i).is_some())?;
    let network = resolve(p, "networkid", |i| state.network(i).is_some())?;
    let vpc = resolve(p, "vpcid", |i| state.vpc(i).is_some())?;
    let exact_name = state.version.at_least(4, 19);
    let pending = pending_vm_jobs(state);
    let mut items = Vec::new();
    for vm in &state.vms {
        let keep = scope.matches(&vm.owner)
            && id.is_none_or(|i| i == vm.id)
            && ids.as_ref().is_none_or(|l| l.contains(&vm.id))
            && state_matches(vm, p.text("state"), ctx.caller.is_admin())
            && zone.is_none_or(|z| z == vm.zone_id)
            && network.is_none_or(|n| vm.nics.iter().any(|nic| nic.network_id == n))
            && vpc.is_none_or(|v| {
                vm.nics.iter().any(|nic| {
                    state
                        .network(&nic.network_id)
                        .is_some_and(|n| n.vpc_id.as_deref() == Some(v))
                })
            })
            && p.text("name").is_none_or(|n| {
                if exact_name {
                    n.eq_ignore_ascii_case(&vm.name)
                } else {
                    like(&vm.name, n)
                }
            })
            && p.text("keyword").is_none_or(|k| {
                like(&vm.name, k) || vm.nics.iter().any(|nic| nic.ipv4.contains(k))
            })
            && tags_match(state, p, "UserVm", &vm.id)?;
        if keep {
            items.push(render_vm(
                state,
                vm,
                details,
                ctx.caller.is_admin(),
                &pending,
            ));
        }
    }
    Ok(list_body("virtualmachine", items, page))
}
