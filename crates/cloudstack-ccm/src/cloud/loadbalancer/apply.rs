//! Runs a [`Plan`]: phases in order, the steps of a phase concurrently, every async job
//! awaited. On a failure the current phase finishes its other steps, the plan stops, and
//! the error names the step; everything done so far is reported so caches can be renewed,
//! and the next reconcile plans from what is really there.
//!
//! CloudStack runs the jobs of one network one at a time. Every job but tagging goes
//! through the plan's [`PlanTicket`] on that network's queue
//! ([`crate::cloud::job_queue`]): the network is kept busy, the oldest plan goes first, and each
//! job is polled about when it should end.
//!
//! What a step sends is decided by [`request::request`], a pure function; the public IP's
//! steps follow the crash-safe protocol of [`super::ip_claim`].

pub(super) mod error;
pub(super) mod phase;
mod request;

use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::Mutex;

use cloudstack::{
    CreateLoadBalancer, CreateLoadBalancerRule, CreateTags, FirewallRule, InternalLoadBalancer,
    LoadBalancerRule, RemoveFromLoadBalancerRule, Request, UpdateLoadBalancerRule,
};
use serde_json::Value;

pub use self::error::ApplyError;
pub(super) use self::error::{created_id, failed, gone_is_fine};
use super::ip_claim::{IpClaims, IpRecorder, PickedAddresses};
use super::observe::account_view::ViewChanges;
use super::observe::details::read_members;
use super::plan::{Plan, Step, TagResourceType};
use crate::cloud::job_queue::PlanTicket;
use phase::{PhaseSteps, run_tagging};
use request::{Call, Queued, StepRequest};

/// What a run changed, also when it stopped early.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Applied {
    /// The IP associated by the plan: id and address.
    pub associated_ip: Option<(String, IpAddr)>,
    /// Rules created by the plan: name → id.
    pub created_rules: HashMap<String, String>,
    /// Ids of existing rules whose members or policies changed (or that were deleted).
    pub touched_rules: BTreeSet<String>,
    /// The address of the first internal rule the plan created.
    pub internal_address: Option<IpAddr>,
    /// Certificates uploaded by the plan: fingerprint → id.
    pub uploaded_certificates: HashMap<String, String>,
    /// Number of steps that succeeded.
    pub steps_done: usize,
    /// What the steps that succeeded did to the objects of the account view, as their
    /// jobs returned them.
    pub view_changes: ViewChanges,
}

/// What every step of one run needs.
struct Run<'a> {
    client: &'a cloudstack::Client,
    ticket: &'a PlanTicket,
    /// The public IP's steps.
    ip: IpClaims<'a>,
    state: Mutex<Applied>,
    /// The plan's ownership tags of its rules, also put on the firewall rules and ACL
    /// items it creates (so orphans are found).
    ownership: Vec<(String, String)>,
}

impl Run<'_> {
    /// Runs a call that queues on the network to the end of its job.
    async fn queued(&self, step: &Step, call: Queued) -> Result<Value, ApplyError> {
        self.ticket
            .run(self.client, call.command, call.params)
            .await
            .map_err(failed(step))
    }

    /// Puts the ownership tags on the object a create job made (`key` of its result); a
    /// failure only costs finding it as an orphan later, so it is logged, not raised.
    /// The tags put on are recorded in the view changes.
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
        match self.client.create_tags(&request).await {
            Ok(()) => lock(&self.state).view_changes.tagged(
                resource_type,
                &request.resourceids,
                &request.tags,
            ),
            Err(error) if error.is_command_refused() => {
                tracing::debug!(%error, id, resource_type, "not tagged: the keys' role may not tag");
            }
            Err(error) => {
                tracing::warn!(%error, id, resource_type, "cannot tag a created object");
            }
        }
    }

    /// Like [`Run::queued`] for a delete: finding nothing to delete is fine.
    async fn queued_delete(&self, step: &Step, call: Queued) -> Result<(), ApplyError> {
        gone_is_fine(
            self.ticket
                .run(self.client, call.command, call.params)
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
        ip: IpClaims::new(client, ticket, picked, recorder, zone_id),
        state: Mutex::new(Applied::default()),
        ownership: Some(plan.ownership.clone())
            .filter(|tags| !tags.is_empty())
            .map(|tags| tags.into_iter().collect())
            .or_else(|| {
                plan.steps().find_map(|s| match s {
                    Step::TagResources {
                        resource_type: TagResourceType::LoadBalancer,
                        tags,
                        ..
                    } => Some(tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect()),
                    _ => None,
                })
            })
            .unwrap_or_default(),
    };
    let state = &run.state;
    for phase in &plan.phases {
        let steps = PhaseSteps::of(&phase.steps);
        let runs = phase.steps.iter().map(|step| {
            let steps = &steps;
            let run = &run;
            async move {
                let result = run_step(run, step, steps).await;
                steps.ended(step);
                result
            }
        });
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
/// provider cannot do it, and a retry will not either), gives back the IP this plan has
/// just associated ([`IpClaims::release_unused`]), so a load balancer that cannot be
/// built holds no address. Only while no rule of the plan stands on it.
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
    if run.ip.release_unused(&id, address).await {
        lock(&run.state).associated_ip = None;
    }
}

fn lock(state: &Mutex<Applied>) -> std::sync::MutexGuard<'_, Applied> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs one step to its end (its jobs awaited), and records what it did.
/// Whether a tag step met the keys' role refusing the tag commands: the step is skipped,
/// not failed (ownership then rests on the Service's records and the rule names, and the
/// next plan has no tag steps: see `Plan::fitted_to_keys`).
fn refused_tags<T, E: std::borrow::Borrow<cloudstack::Error>>(
    step: &Step,
    result: &Result<T, E>,
) -> bool {
    let Err(error) = result else {
        return false;
    };
    let refused = error.borrow().is_command_refused();
    if refused {
        tracing::debug!(%step, "skipped: the keys' role may not tag");
    }
    refused
}

async fn run_step(run: &Run<'_>, step: &Step, phase: &PhaseSteps) -> Result<(), ApplyError> {
    let StepRequest { call, touches } = request::request(step, &lock(&run.state))?;
    if let Some(id) = touches {
        lock(&run.state).touched_rules.insert(id);
    }
    match call {
        Call::AssociateIp {
            target,
            address,
            replacing,
        } => {
            let (id, address, ip) = run
                .ip
                .associate(step, &target, address, replacing.as_deref())
                .await?;
            let mut state = lock(&run.state);
            state.associated_ip = Some((id, address));
            state.view_changes.associated(ip);
            Ok(())
        }
        Call::AdoptClaimedIp {
            target,
            id,
            address,
        } => {
            run.ip.adopt(&target, &id).await?;
            lock(&run.state).associated_ip = Some((id, address));
            Ok(())
        }
        Call::CreateRule { name, call } => {
            let job = run
                .ticket
                .submit(run.client, call.command, call.params)
                .await
                .map_err(failed(step))?;
            let id = created_id(step, &job, "rule")?;
            lock(&run.state).created_rules.insert(name, id);
            let result = job.wait(run.client).await.map_err(failed(step))?;
            let opens_firewall = matches!(
                step,
                Step::CreateRule {
                    open_firewall: true,
                    ..
                }
            );
            let rule = cloudstack::job_object::<LoadBalancerRule>(
                CreateLoadBalancerRule::COMMAND,
                result,
                "loadbalancer",
            );
            let changes = &mut lock(&run.state).view_changes;
            match rule {
                Ok(rule) => changes.rule_created(rule, opens_firewall),
                Err(error) => changes.inexact(error.to_string()),
            }
            Ok(())
        }
        Call::CreateInternalRule { name, call } => {
            let job = run
                .ticket
                .submit(run.client, call.command, call.params)
                .await
                .map_err(failed(step))?;
            let id = created_id(step, &job, "internal rule")?;
            lock(&run.state).created_rules.insert(name, id);
            let result = job.wait(run.client).await.map_err(failed(step))?;
            let rule = cloudstack::job_object::<InternalLoadBalancer>(
                CreateLoadBalancer::COMMAND,
                result,
                "loadbalancer",
            )
            .map_err(failed(step))?;
            let address = rule
                .sourceipaddress
                .as_deref()
                .and_then(|a| a.parse::<IpAddr>().ok())
                .ok_or_else(|| ApplyError::Unresolved {
                    step: step.to_string(),
                    detail: "the reply carried no source address".into(),
                })?;
            lock(&run.state).internal_address.get_or_insert(address);
            Ok(())
        }
        Call::Job(call) => {
            let result = run.queued(step, call).await?;
            let changes = &mut lock(&run.state).view_changes;
            match step {
                Step::UpdateRule { .. } => match cloudstack::job_object::<LoadBalancerRule>(
                    UpdateLoadBalancerRule::COMMAND,
                    result,
                    "loadbalancer",
                ) {
                    Ok(rule) => changes.rule_updated(rule),
                    Err(error) => changes.inexact(error.to_string()),
                },
                // Members, policies and certificates are not in the view.
                Step::AssignMembers { .. }
                | Step::CreateHealthCheck { .. }
                | Step::CreateStickiness { .. }
                | Step::AssignCertificate { .. }
                | Step::RemoveCertificate { .. } => {}
                _ => changes.inexact(format!("step {step}")),
            }
            Ok(())
        }
        Call::CreateTagged {
            call,
            reply_key,
            resource_type,
        } => {
            let command = call.command;
            let reply = run.queued(step, call).await?;
            run.tag_created(&reply, reply_key, resource_type).await;
            let changes = &mut lock(&run.state).view_changes;
            match step {
                Step::CreateFirewallRule { .. } => {
                    match cloudstack::job_object::<FirewallRule>(command, reply, reply_key) {
                        Ok(rule) => changes.firewall_rule_created(rule),
                        Err(error) => changes.inexact(error.to_string()),
                    }
                }
                Step::CreateAclItem { .. } => changes.acl_changed(),
                // Routing firewall rules are not part of the account's view.
                Step::CreateRoutingFirewallRule { .. } => {}
                _ => changes.inexact(format!("step {step}")),
            }
            Ok(())
        }
        Call::Delete(call) => {
            run.queued_delete(step, call).await?;
            let changes = &mut lock(&run.state).view_changes;
            match step {
                Step::DeleteRule { id, .. } | Step::DeleteFirewallRule { id, .. } => {
                    changes.deleted(id);
                }
                Step::ReleaseIp { id, .. } => changes.released(id),
                // Internal rules are not part of the account's view.
                Step::DeleteInternalRule { .. } => {}
                Step::DeleteAclItem { .. } => changes.acl_changed(),
                Step::DeleteHealthCheck { .. }
                | Step::DeleteStickiness { .. }
                | Step::DeleteRoutingFirewallRule { .. } => {}
                _ => changes.inexact(format!("step {step}")),
            }
            Ok(())
        }
        Call::RemoveMembers { rule_id, vm_ids } => {
            remove_members(run, step, &rule_id, &vm_ids).await
        }
        // Tags do not queue on the network.
        Call::CreateTags(request) => {
            let tagged = run_tagging(run.client, &request, phase).await;
            if refused_tags(step, &tagged) {
                return Ok(());
            }
            tagged.map_err(failed(step))?;
            lock(&run.state).view_changes.tagged(
                &request.resourcetype,
                &request.resourceids,
                &request.tags,
            );
            Ok(())
        }
        Call::TakeIp {
            ip_id,
            service_uid,
            request,
        } => {
            let taken = run
                .ip
                .take(step, &request, &ip_id, &service_uid, phase)
                .await;
            if let Err(ApplyError::CloudStack { source, .. }) = &taken
                && refused_tags(step, &Err::<(), _>(source))
            {
                return Ok(());
            }
            let tagged_now = taken?;
            let changes = &mut lock(&run.state).view_changes;
            if tagged_now {
                changes.tagged(&request.resourcetype, &request.resourceids, &request.tags);
            } else {
                // Already ours: which of the other tags it carries is not known here.
                changes.inexact(format!("step {step}: the IP was already taken"));
            }
            Ok(())
        }
        Call::DeleteTags(request) => {
            let untagged = run_tagging(run.client, &request, phase).await;
            if refused_tags(step, &untagged) {
                return Ok(());
            }
            untagged.map_err(failed(step))?;
            let keys = request.tags.iter().map(|(key, _)| key.clone()).collect();
            lock(&run.state).view_changes.untagged(
                &request.resourcetype,
                &request.resourceids,
                keys,
            );
            Ok(())
        }
        // Certificates are not network objects: their calls are synchronous.
        Call::UploadCertificate {
            fingerprint,
            request,
        } => {
            let uploaded = run
                .client
                .upload_ssl_cert(&request)
                .await
                .map_err(failed(step))?;
            let id = uploaded.id.ok_or_else(|| ApplyError::Unresolved {
                step: step.to_string(),
                detail: "the reply carried no certificate id".into(),
            })?;
            lock(&run.state)
                .uploaded_certificates
                .insert(fingerprint, id);
            Ok(())
        }
        Call::DeleteCertificate(request) => {
            gone_is_fine(run.client.delete_ssl_cert(&request).await).map_err(failed(step))
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
    run.queued(step, Queued::of(&request)).await.map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn api_error(code: u32, text: &str) -> cloudstack::Error {
        cloudstack::Error::Api {
            command: "deleteFirewallRule".into(),
            http_status: u16::try_from(code).unwrap_or(530),
            errorcode: code,
            cserrorcode: Some(9999),
            errortext: text.into(),
        }
    }

    fn job_error(code: u32, text: &str) -> cloudstack::Error {
        cloudstack::Error::JobFailed {
            command: "deleteLoadBalancerRule".into(),
            jobid: "j1".into(),
            errorcode: code,
            errortext: text.into(),
        }
    }

    #[test]
    fn a_delete_that_finds_nothing_has_done_its_job() {
        assert!(gone_is_fine(Ok(())).is_ok());
        let gone = [
            // The id no longer names an entity (the API layer's answer).
            api_error(
                431,
                "Unable to execute API command deletefirewallrule due to invalid value. Invalid parameter id value=f1 due to incorrect long value format, or entity does not exist or due to incorrect parameter annotation for the field in api cmd class.",
            ),
            // The rule went while the job waited (the manager's answer).
            job_error(431, "Unable to find load balancer rule r1"),
        ];
        for err in gone {
            let text = err.to_string();
            assert!(gone_is_fine(Err(err)).is_ok(), "gone: {text}");
        }
        let failed = [
            api_error(
                431,
                "Unable to execute API command deletefirewallrule due to missing parameter id",
            ),
            api_error(530, "router is busy"),
            job_error(536, "resource in use"),
            // Not "not found": the role may not call the command.
            api_error(
                401,
                "The given command 'deleteFirewallRule' either does not exist, is not available for user.",
            ),
            cloudstack::Error::Decode {
                command: "deleteFirewallRule".into(),
                detail: "does not exist".into(),
            },
        ];
        for err in failed {
            let text = err.to_string();
            assert!(gone_is_fine(Err(err)).is_err(), "still an error: {text}");
        }
    }
}
