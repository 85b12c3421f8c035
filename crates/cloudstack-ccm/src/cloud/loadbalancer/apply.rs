//! Runs a [`Plan`]: phases in order, the steps of a phase concurrently, every async job
//! awaited. On a failure the current phase finishes its other steps, the plan stops, and
//! the error names the step; everything done so far is reported so caches can be renewed,
//! and the next reconcile plans from what is really there.
//!
//! CloudStack runs the jobs of one network one at a time. Every job but tagging goes
//! through the plan's [`PlanTicket`] on that network's queue
//! ([`super::job_queue`]): the network is kept busy, the oldest plan goes first, and each
//! job is polled about when it should end.
//!
//! A new public IP is first claimed: a free address of the zone is picked and recorded
//! on the Service (through an [`IpRecorder`]) before `associateIpAddress` asks for it, so
//! an address CloudStack allocated just before a crash is found again. The IP id is
//! recorded as soon as `associateIpAddress` returns it, before its job is awaited.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Mutex;

use cloudstack::{
    AssignToLoadBalancerRule, AssociateIpAddress, CreateFirewallRule, CreateLbHealthCheckPolicy,
    CreateLbStickinessPolicy, CreateLoadBalancerRule, CreateNetworkAcl, CreateTags,
    DeleteFirewallRule, DeleteLbHealthCheckPolicy, DeleteLbStickinessPolicy,
    DeleteLoadBalancerRule, DeleteNetworkAcl, DeleteTags, DisassociateIpAddress,
    ListPublicIpAddresses, PublicIpAddress, RemoveFromLoadBalancerRule, Request,
    UpdateLoadBalancerRule,
};
use futures::future::BoxFuture;
use serde_json::Value;

use super::job_queue::{PlanTicket, QueuedJob};
use super::observe::details::read_members;
use super::plan::{
    AssociateTarget, IpRef, POLICY_DESCRIPTION, Plan, ResourceRef, RuleRef, Step, TagResourceType,
};
use crate::cloud::cidr::Cidr;

/// The public IP a plan associated, as recorded on the Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedIp {
    /// The IP id.
    pub ip_id: String,
    /// The controller associated it (so it may release it).
    pub associated_by_controller: bool,
    /// The network the rules live in.
    pub network_id: Option<String>,
}

/// Records a newly associated IP on its Service, before the association finishes.
pub trait IpRecorder: Send + Sync {
    /// Records `ip`; an error stops the plan (and the IP is released again).
    fn record<'a>(&'a self, ip: &'a RecordedIp) -> BoxFuture<'a, Result<(), String>>;
    /// Records `address` as the Service's claim, before it is associated: after a crash
    /// the address is found again whether or not CloudStack allocated it. `None` removes
    /// the claim (CloudStack refused the association: whoever holds the address later is
    /// not us).
    fn claim<'a>(&'a self, address: Option<IpAddr>) -> BoxFuture<'a, Result<(), String>>;
    /// Removes the record of `ip` and the claim: its association job failed, so CloudStack released the
    /// address and may hand it to someone else.
    fn forget<'a>(&'a self, ip: &'a RecordedIp) -> BoxFuture<'a, Result<(), String>>;
}

/// A step that failed, named.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// A CloudStack call failed.
    #[error("{step}: {source}")]
    CloudStack {
        /// The step (its display form).
        step: String,
        /// The error.
        #[source]
        source: cloudstack::Error,
    },
    /// The IP could not be recorded on the Service.
    #[error("associate IP: {0}")]
    Record(String),
    /// A step refers to something an earlier phase should have made.
    #[error("{step}: {detail}")]
    Unresolved {
        /// The step.
        step: String,
        /// What is missing.
        detail: String,
    },
}

impl ApplyError {
    /// The CloudStack error behind this failure, if any.
    pub fn cloudstack(&self) -> Option<&cloudstack::Error> {
        match self {
            ApplyError::CloudStack { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// What a run changed, also when it stopped early.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// The IP associated by the plan: id and address.
    pub associated_ip: Option<(String, IpAddr)>,
    /// Rules created by the plan: name → id.
    pub created_rules: HashMap<String, String>,
    /// Ids of existing rules whose members or policies changed (or that were deleted).
    pub touched_rules: BTreeSet<String>,
    /// Number of steps that succeeded.
    pub steps_done: usize,
}

/// Addresses picked by plans still running in this process, so two Services being
/// provisioned at once do not pick the same free address (the second association would
/// be refused and that Service would wait for its retry).
#[derive(Debug, Default)]
pub struct PickedAddresses(Mutex<HashSet<IpAddr>>);

impl PickedAddresses {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<IpAddr>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Picks one of `free` at random that no running plan picked, and marks it.
    fn pick(&self, free: &[IpAddr]) -> Option<IpAddr> {
        let mut picked = self.lock();
        let candidates: Vec<IpAddr> = free
            .iter()
            .filter(|address| !picked.contains(address))
            .copied()
            .collect();
        let address = *candidates.get(rand::random_range(0..candidates.len().max(1)))?;
        picked.insert(address);
        Some(address)
    }
}

/// The addresses one run picked, released when the run ends (however it ends).
struct RunPicks<'a> {
    shared: &'a PickedAddresses,
    mine: Mutex<Vec<IpAddr>>,
}

impl Drop for RunPicks<'_> {
    fn drop(&mut self) {
        let mine = std::mem::take(&mut *self.mine.lock().unwrap_or_else(|e| e.into_inner()));
        let mut shared = self.shared.lock();
        for address in mine {
            shared.remove(&address);
        }
    }
}

/// What every step of one run needs.
struct Run<'a> {
    client: &'a cloudstack::Client,
    ticket: &'a PlanTicket,
    picks: RunPicks<'a>,
    recorder: &'a dyn IpRecorder,
    /// The zone of the plan's network, where a new address is claimed.
    zone_id: Option<&'a str>,
    state: Mutex<Applied>,
    /// The plan's ownership tags of its rules, also put on the firewall rules and ACL
    /// items it creates (so orphans are found).
    ownership: Vec<(String, String)>,
}

impl Run<'_> {
    /// Runs a request that queues on the network to the end of its job.
    async fn queued<R: Request>(&self, step: &Step, request: &R) -> Result<Value, ApplyError> {
        self.ticket
            .run(self.client, R::COMMAND, request.to_params())
            .await
            .map_err(failed(step))
    }

    /// Puts the ownership tags on the object a create job made (`key` of its result); a
    /// failure only costs finding it as an orphan later, so it is logged, not raised.
    async fn tag_created(&self, reply: &Value, key: &str, resource_type: &str) {
        let Some(id) = reply[key]["id"]
            .as_str()
            .filter(|_| !self.ownership.is_empty())
        else {
            return;
        };
        let request = CreateTags {
            resourceids: vec![id.to_string()],
            resourcetype: resource_type.to_string(),
            tags: self.ownership.clone(),
            ..Default::default()
        };
        if let Err(error) = self.client.create_tags(&request).await {
            tracing::warn!(%error, id, resource_type, "cannot tag a created object");
        }
    }

    /// Like [`Run::queued`] for a delete: finding nothing to delete is fine.
    async fn queued_delete<R: Request>(&self, step: &Step, request: &R) -> Result<(), ApplyError> {
        gone_is_fine(
            self.ticket
                .run(self.client, R::COMMAND, request.to_params())
                .await
                .map(drop),
        )
        .map_err(failed(step))
    }
}

/// Runs `plan` with `client`, its jobs queued on the network with `ticket`. Returns what
/// was done and, if a step failed, the error. `zone_id` is the zone of the plan's
/// network, where a new address is claimed (one not in `picked`).
pub async fn apply(
    client: &cloudstack::Client,
    ticket: &PlanTicket,
    picked: &PickedAddresses,
    plan: &Plan,
    recorder: &dyn IpRecorder,
    zone_id: Option<&str>,
) -> (Applied, Result<(), ApplyError>) {
    let run = Run {
        client,
        ticket,
        picks: RunPicks {
            shared: picked,
            mine: Mutex::new(Vec::new()),
        },
        recorder,
        zone_id,
        state: Mutex::new(Applied::default()),
        ownership: plan
            .steps()
            .find_map(|s| match s {
                Step::TagResources {
                    resource_type: TagResourceType::LoadBalancer,
                    tags,
                    ..
                } => Some(tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect()),
                _ => None,
            })
            .unwrap_or_default(),
    };
    let state = &run.state;
    for phase in &plan.phases {
        let runs = phase.steps.iter().map(|step| run_step(&run, step));
        let results = futures::future::join_all(runs).await;
        let mut failed = None;
        for result in results {
            match result {
                Ok(()) => state.lock().unwrap_or_else(|e| e.into_inner()).steps_done += 1,
                Err(err) => {
                    failed.get_or_insert(err);
                }
            }
        }
        if let Some(err) = failed {
            roll_back_new_ip(&run, plan, &err).await;
            return (
                run.state.into_inner().unwrap_or_else(|e| e.into_inner()),
                Err(err),
            );
        }
    }
    (
        run.state.into_inner().unwrap_or_else(|e| e.into_inner()),
        Ok(()),
    )
}

/// After a step CloudStack refused for good (a parameter error or a rule conflict: the
/// provider cannot do it, and a retry will not either), releases the IP this plan has
/// just associated and forgets its record, so a load balancer that cannot be built holds
/// no address. Only while no rule of the plan stands on it; a failed release is logged
/// and leaves the IP recorded (released with the Service, as before).
async fn roll_back_new_ip(run: &Run<'_>, plan: &Plan, err: &ApplyError) {
    /// CloudStack's PARAM_ERROR and NETWORK_RULE_CONFLICT_ERROR.
    const REFUSED: [u32; 2] = [431, 537];
    let refused = matches!(err, ApplyError::CloudStack { source, .. }
        if source.code().is_some_and(|code| REFUSED.contains(&code)));
    let associated_here = plan
        .steps()
        .any(|step| matches!(step, Step::AssociateIp { .. }));
    let (ip, rules_stand) = {
        let state = lock(&run.state);
        (state.associated_ip.clone(), !state.created_rules.is_empty())
    };
    let Some((id, address)) = ip.filter(|_| refused && associated_here && !rules_stand) else {
        return;
    };
    let step = Step::ReleaseIp {
        id: id.clone(),
        address,
    };
    let release = DisassociateIpAddress {
        id: Some(id.clone()),
        ..Default::default()
    };
    if let Err(release_err) = run.queued_delete(&step, &release).await {
        tracing::warn!(ip_id = %id, error = %release_err, "cannot release the IP of a refused load balancer");
        return;
    }
    lock(&run.state).associated_ip = None;
    let record = RecordedIp {
        ip_id: id.clone(),
        associated_by_controller: true,
        network_id: None,
    };
    if let Err(detail) = run.recorder.forget(&record).await {
        tracing::warn!(ip_id = %id, error = %detail, "cannot forget a released IP");
    }
    tracing::info!(ip_id = %id, %address, "released the IP of a load balancer CloudStack refused");
}

/// Shorthand: wraps a CloudStack error with the step's name.
fn failed(step: &Step) -> impl FnOnce(cloudstack::Error) -> ApplyError + '_ {
    move |source| ApplyError::CloudStack {
        step: step.to_string(),
        source,
    }
}

/// The id of the entity a create job makes (`what`: "rule", "IP"), from its start reply.
fn created_id(step: &Step, job: &QueuedJob, what: &str) -> Result<String, ApplyError> {
    job.start()
        .id
        .clone()
        .ok_or_else(|| ApplyError::Unresolved {
            step: step.to_string(),
            detail: format!("the reply carried no {what} id"),
        })
}

/// A delete that finds nothing to delete has done its job.
fn gone_is_fine(result: Result<(), cloudstack::Error>) -> Result<(), cloudstack::Error> {
    match result {
        Err(err) if err.is_not_found() => Ok(()),
        other => other,
    }
}

fn cidr_strings(cidrs: &[Cidr]) -> Vec<String> {
    cidrs.iter().map(Cidr::to_string).collect()
}

fn lock(state: &Mutex<Applied>) -> std::sync::MutexGuard<'_, Applied> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

/// The id of an IP a step refers to.
fn ip_id(step: &Step, ip: &IpRef, state: &Mutex<Applied>) -> Result<String, ApplyError> {
    match ip {
        IpRef::Existing { id, .. } => Ok(id.clone()),
        IpRef::Associated => lock(state)
            .associated_ip
            .as_ref()
            .map(|(id, _)| id.clone())
            .ok_or_else(|| ApplyError::Unresolved {
                step: step.to_string(),
                detail: "no IP was associated".into(),
            }),
    }
}

/// The id of a rule a step refers to; existing rules are marked as touched.
fn rule_id(step: &Step, rule: &RuleRef, state: &Mutex<Applied>) -> Result<String, ApplyError> {
    match rule {
        RuleRef::Existing { id, .. } => {
            lock(state).touched_rules.insert(id.clone());
            Ok(id.clone())
        }
        RuleRef::Created { name } => {
            lock(state)
                .created_rules
                .get(name)
                .cloned()
                .ok_or_else(|| ApplyError::Unresolved {
                    step: step.to_string(),
                    detail: format!("rule {name} was not created"),
                })
        }
    }
}

/// Runs one step to its end (its jobs awaited).
async fn run_step(run: &Run<'_>, step: &Step) -> Result<(), ApplyError> {
    let state = &run.state;
    match step {
        Step::AssociateIp { target, address } => {
            let address = match address {
                Some(address) => Some(*address),
                None => claim_free_ip(run, step).await?,
            };
            associate_ip(run, step, target, address).await
        }
        Step::AdoptClaimedIp {
            target,
            id,
            address,
        } => {
            let record = RecordedIp {
                ip_id: id.clone(),
                associated_by_controller: true,
                network_id: match target {
                    AssociateTarget::Network(id) => Some(id.clone()),
                    AssociateTarget::Vpc(_) => None,
                },
            };
            run.recorder
                .record(&record)
                .await
                .map_err(ApplyError::Record)?;
            lock(state).associated_ip = Some((id.clone(), *address));
            Ok(())
        }
        Step::CreateRule {
            name,
            ip,
            network_id,
            protocol,
            public_port,
            private_port,
            algorithm,
            cidrs,
            open_firewall,
        } => {
            let request = CreateLoadBalancerRule {
                name: name.clone(),
                algorithm: algorithm.as_str().to_string(),
                privateport: u32::from(*private_port),
                publicport: u32::from(*public_port),
                publicipid: Some(ip_id(step, ip, state)?),
                networkid: Some(network_id.clone()),
                protocol: Some(protocol.as_str().to_string()),
                openfirewall: Some(*open_firewall),
                cidrlist: cidr_strings(cidrs),
                ..Default::default()
            };
            let job = run
                .ticket
                .submit(
                    run.client,
                    CreateLoadBalancerRule::COMMAND,
                    request.to_params(),
                )
                .await
                .map_err(failed(step))?;
            let id = created_id(step, &job, "rule")?;
            lock(state).created_rules.insert(name.clone(), id);
            job.wait(run.client).await.map_err(failed(step))?;
            Ok(())
        }
        Step::UpdateRule {
            id,
            new_name,
            protocol,
            algorithm,
            cidrs,
            ..
        } => {
            lock(state).touched_rules.insert(id.clone());
            let request = UpdateLoadBalancerRule {
                id: id.clone(),
                name: new_name.clone(),
                protocol: protocol.map(|p| p.as_str().to_string()),
                algorithm: algorithm.map(|a| a.as_str().to_string()),
                cidrlist: cidrs.as_deref().map(cidr_strings).unwrap_or_default(),
                ..Default::default()
            };
            run.queued(step, &request).await.map(drop)
        }
        Step::DeleteRule { id, .. } => {
            lock(state).touched_rules.insert(id.clone());
            run.queued_delete(step, &DeleteLoadBalancerRule { id: id.clone() })
                .await
        }
        Step::AssignMembers { rule, vm_ids } => {
            let request = AssignToLoadBalancerRule {
                id: rule_id(step, rule, state)?,
                virtualmachineids: vm_ids.clone(),
                ..Default::default()
            };
            run.queued(step, &request).await.map(drop)
        }
        Step::RemoveMembers { rule, vm_ids } => {
            let id = rule_id(step, rule, state)?;
            remove_members(run, step, &id, vm_ids).await
        }
        Step::CreateFirewallRule {
            ip,
            protocol,
            port,
            cidrs,
        } => {
            let request = CreateFirewallRule {
                ipaddressid: ip_id(step, ip, state)?,
                protocol: protocol.as_str().to_string(),
                startport: Some(u32::from(*port)),
                endport: Some(u32::from(*port)),
                cidrlist: cidr_strings(cidrs),
                ..Default::default()
            };
            let reply = run.queued(step, &request).await?;
            run.tag_created(&reply, "firewallrule", "FirewallRule")
                .await;
            Ok(())
        }
        Step::DeleteFirewallRule { id, .. } => {
            run.queued_delete(step, &DeleteFirewallRule { id: id.clone() })
                .await
        }
        Step::CreateAclItem {
            acl_id,
            network_id,
            protocol,
            port,
            cidrs,
            reason,
        } => {
            let request = CreateNetworkAcl {
                protocol: protocol.as_str().to_string(),
                aclid: Some(acl_id.clone()),
                networkid: Some(network_id.clone()),
                startport: Some(u32::from(*port)),
                endport: Some(u32::from(*port)),
                cidrlist: cidr_strings(cidrs),
                traffictype: Some("Ingress".into()),
                action: Some("Allow".into()),
                reason: Some(reason.clone()),
                ..Default::default()
            };
            let reply = run.queued(step, &request).await?;
            run.tag_created(&reply, "networkacl", "NetworkACL").await;
            Ok(())
        }
        Step::DeleteAclItem { id, .. } => {
            run.queued_delete(step, &DeleteNetworkAcl { id: id.clone() })
                .await
        }
        Step::CreateHealthCheck { rule, check } => {
            let request = CreateLbHealthCheckPolicy {
                lbruleid: rule_id(step, rule, state)?,
                pingpath: Some(check.path.clone()),
                responsetimeout: Some(check.timeout_secs),
                intervaltime: Some(check.interval_secs),
                healthythreshold: Some(check.healthy_threshold),
                unhealthythreshold: Some(check.unhealthy_threshold),
                description: Some(POLICY_DESCRIPTION.to_string()),
                ..Default::default()
            };
            run.queued(step, &request).await.map(drop)
        }
        Step::DeleteHealthCheck { id, .. } => {
            run.queued_delete(step, &DeleteLbHealthCheckPolicy { id: id.clone() })
                .await
        }
        Step::CreateStickiness { rule, name, policy } => {
            let request = CreateLbStickinessPolicy {
                lbruleid: rule_id(step, rule, state)?,
                name: name.clone(),
                methodname: policy.method.as_str().to_string(),
                param: policy
                    .params
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                description: Some(POLICY_DESCRIPTION.to_string()),
                ..Default::default()
            };
            run.queued(step, &request).await.map(drop)
        }
        Step::DeleteStickiness { id, .. } => {
            run.queued_delete(step, &DeleteLbStickinessPolicy { id: id.clone() })
                .await
        }
        Step::TagResources {
            resource_type,
            resources,
            tags,
        } => {
            let resourceids = resources
                .iter()
                .map(|resource| match resource {
                    ResourceRef::Existing(id) => Ok(id.clone()),
                    ResourceRef::CreatedRule(name) => {
                        rule_id(step, &RuleRef::Created { name: name.clone() }, state)
                    }
                    ResourceRef::AssociatedIp => ip_id(step, &IpRef::Associated, state),
                })
                .collect::<Result<Vec<_>, _>>()?;
            let request = CreateTags {
                resourceids,
                resourcetype: resource_type.as_str().to_string(),
                tags: tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                ..Default::default()
            };
            // Tags do not queue on the network.
            run.client.create_tags(&request).await.map_err(failed(step))
        }
        Step::UntagResources {
            resource_type,
            resources,
            keys,
        } => {
            let request = DeleteTags {
                resourceids: resources.clone(),
                resourcetype: resource_type.as_str().to_string(),
                tags: keys.iter().map(|k| (k.clone(), String::new())).collect(),
            };
            // Tags do not queue on the network.
            run.client.delete_tags(&request).await.map_err(failed(step))
        }
        Step::ReleaseIp { id, .. } => {
            let request = DisassociateIpAddress {
                id: Some(id.clone()),
                ..Default::default()
            };
            run.queued_delete(step, &request).await
        }
    }
}

/// `removeFromLoadBalancerRule`. CloudStack drops an expunged VM from every rule itself,
/// and refuses the whole call with 431 when one VM is not (or no longer) assigned or does
/// not exist. Then the rule's members are read again: those no longer assigned count as
/// removed, and the others are removed in a second call. The rule's cached members are
/// renewed after the run (the rule is marked touched).
async fn remove_members(
    run: &Run<'_>,
    step: &Step,
    rule_id: &str,
    vm_ids: &[String],
) -> Result<(), ApplyError> {
    let request = RemoveFromLoadBalancerRule {
        id: rule_id.to_string(),
        virtualmachineids: vm_ids.to_vec(),
        ..Default::default()
    };
    let refused = match run
        .ticket
        .run(
            run.client,
            RemoveFromLoadBalancerRule::COMMAND,
            request.to_params(),
        )
        .await
    {
        Ok(_) => return Ok(()),
        Err(err) if err.code() == Some(cloudstack::PARAM_ERROR) => err,
        Err(err) => return Err(failed(step)(err)),
    };
    let assigned = read_members(run.client, rule_id)
        .await
        .map_err(failed(step))?;
    let still: Vec<String> = vm_ids
        .iter()
        .filter(|vm| assigned.iter().any(|a| a.eq_ignore_ascii_case(vm)))
        .cloned()
        .collect();
    if still.len() == vm_ids.len() {
        // Every VM is still assigned: the refusal was about something else.
        return Err(failed(step)(refused));
    }
    tracing::info!(
        rule = rule_id,
        gone = ?vm_ids.iter().filter(|vm| !still.contains(vm)).collect::<Vec<_>>(),
        "members already gone from the rule (VM expunged or removed)"
    );
    if still.is_empty() {
        return Ok(());
    }
    let request = RemoveFromLoadBalancerRule {
        id: rule_id.to_string(),
        virtualmachineids: still,
        ..Default::default()
    };
    run.queued(step, &request).await.map(drop)
}

/// Picks a free address of the zone (one list, `allocatedonly=false`, state `Free`) at
/// random among those no running plan of this process picked (so two Services rarely
/// pick the same one, and never two of ours), and records it on the Service before it
/// is associated. `None` when CloudStack lists no free address: CloudStack
/// then picks one itself.
async fn claim_free_ip(run: &Run<'_>, step: &Step) -> Result<Option<IpAddr>, ApplyError> {
    let (client, zone_id, recorder) = (run.client, run.zone_id, run.recorder);
    let request = ListPublicIpAddresses {
        allocatedonly: Some(false),
        state: Some("Free".into()),
        zoneid: zone_id.map(str::to_string),
        ..Default::default()
    };
    let listed = client
        .list_public_ip_addresses(&request)
        .await
        .map_err(failed(step))?;
    let free: Vec<IpAddr> = listed
        .iter()
        .filter(|ip| !ip.is_allocated())
        .filter(|ip| {
            ip.state
                .as_deref()
                .is_none_or(|s| s.eq_ignore_ascii_case("free"))
        })
        .filter_map(|ip| ip.ipaddress.as_deref()?.parse().ok())
        .collect();
    let Some(address) = run.picks.shared.pick(&free) else {
        tracing::warn!(
            zone = zone_id.unwrap_or_default(),
            "no free public IP listed; CloudStack picks one, unclaimed"
        );
        return Ok(None);
    };
    run.picks
        .mine
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(address);
    recorder
        .claim(Some(address))
        .await
        .map_err(ApplyError::Record)?;
    Ok(Some(address))
}

/// `associateIpAddress`: record the id on the Service as soon as the reply names it, then
/// wait for the job. If recording fails the IP is released again, so nothing leaks.
async fn associate_ip(
    run: &Run<'_>,
    step: &Step,
    target: &AssociateTarget,
    address: Option<IpAddr>,
) -> Result<(), ApplyError> {
    let (client, recorder) = (run.client, run.recorder);
    let (networkid, vpcid, network_id) = match target {
        AssociateTarget::Network(id) => (Some(id.clone()), None, Some(id.clone())),
        AssociateTarget::Vpc(id) => (None, Some(id.clone()), None),
    };
    let request = AssociateIpAddress {
        networkid,
        vpcid,
        ipaddress: address.map(|a| a.to_string()),
        ..Default::default()
    };
    let job = match run
        .ticket
        .submit(client, AssociateIpAddress::COMMAND, request.to_params())
        .await
    {
        Ok(job) => job,
        Err(err) => {
            // Refused (a 4xx answer): nothing was allocated, and a claimed address must
            // not be taken for ours when someone else acquires it later. Any other failure
            // may have been accepted, so the claim stays to find it again.
            let refused = matches!(&err, cloudstack::Error::Api { http_status, .. }
                if (400..500).contains(http_status));
            if refused
                && address.is_some()
                && let Err(detail) = recorder.claim(None).await
            {
                tracing::warn!(error = %detail, "cannot drop the claim of a refused IP association");
            }
            return Err(failed(step)(err));
        }
    };
    let id = created_id(step, &job, "IP")?;
    let record = RecordedIp {
        ip_id: id.clone(),
        associated_by_controller: true,
        network_id,
    };
    let recorded = recorder.record(&record).await;
    let finished = job.wait(client).await.and_then(|result| {
        cloudstack::job_object::<PublicIpAddress>(AssociateIpAddress::COMMAND, result, "ipaddress")
    });
    if recorded.is_ok()
        && let Err(cloudstack::Error::JobFailed { .. }) = &finished
        && let Err(detail) = recorder.forget(&record).await
    {
        tracing::warn!(ip_id = %id, error = %detail, "cannot forget an IP whose association failed");
    }
    let finished = finished.map_err(failed(step));
    if let Err(detail) = recorded {
        let release = DisassociateIpAddress {
            id: Some(id.clone()),
            ..Default::default()
        };
        if let Err(err) = run.queued_delete(step, &release).await {
            tracing::warn!(ip_id = %id, error = %err, "cannot release an IP that could not be recorded");
        }
        return Err(ApplyError::Record(detail));
    }
    let ip = finished?;
    let parsed = ip
        .ipaddress
        .as_deref()
        .and_then(|a| a.parse::<IpAddr>().ok())
        .or(address);
    let address = parsed.ok_or_else(|| ApplyError::Unresolved {
        step: step.to_string(),
        detail: "the job result carried no address".into(),
    })?;
    lock(&run.state).associated_ip = Some((id, address));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_plans_never_pick_the_same_free_address() {
        let picked = PickedAddresses::default();
        let free: Vec<IpAddr> = ["203.0.113.1", "203.0.113.2"]
            .iter()
            .map(|a| a.parse().expect("address"))
            .collect();
        let first = picked.pick(&free).expect("one is free");
        let second = picked.pick(&free).expect("the other is free");
        assert_ne!(first, second);
        assert_eq!(picked.pick(&free), None, "both are being associated");
        {
            let run = RunPicks {
                shared: &picked,
                mine: Mutex::new(vec![first]),
            };
            drop(run);
        }
        assert_eq!(
            picked.pick(&free),
            Some(first),
            "released when its run ended"
        );
    }

    #[test]
    fn errors_name_the_step() {
        let step = Step::DeleteRule {
            id: "r1".into(),
            name: "aabc-tcp-80".into(),
        };
        let err = failed(&step)(cloudstack::Error::Decode {
            command: "deleteLoadBalancerRule".into(),
            detail: "bad".into(),
        });
        assert!(err.to_string().contains("aabc-tcp-80"), "{err}");
        assert!(err.cloudstack().is_some());
    }

    #[test]
    fn references_resolve_from_earlier_phases() {
        let state = Mutex::new(Applied::default());
        let step = Step::DeleteRule {
            id: "r1".into(),
            name: "n".into(),
        };
        assert!(
            ip_id(&step, &IpRef::Associated, &state).is_err(),
            "nothing associated yet"
        );
        lock(&state).associated_ip = Some(("ip-1".into(), "203.0.113.5".parse().expect("address")));
        lock(&state)
            .created_rules
            .insert("aabc-tcp-80".into(), "rule-9".into());
        assert_eq!(
            ip_id(&step, &IpRef::Associated, &state).expect("resolved"),
            "ip-1"
        );
        let created = RuleRef::Created {
            name: "aabc-tcp-80".into(),
        };
        assert_eq!(
            rule_id(&step, &created, &state).expect("resolved"),
            "rule-9"
        );
        let existing = RuleRef::Existing {
            id: "rule-1".into(),
            name: "x".into(),
        };
        assert_eq!(
            rule_id(&step, &existing, &state).expect("resolved"),
            "rule-1"
        );
        assert!(
            lock(&state).touched_rules.contains("rule-1"),
            "existing rules are marked touched"
        );
    }
}
