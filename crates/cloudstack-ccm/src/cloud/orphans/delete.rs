//! Deleting orphans. The objects of a load balancer (rules, firewall rules, ACL items,
//! addresses, certificates) go the way every change of a load balancer goes: a [`Plan`]
//! per network run by the apply step with a [`PlanTicket`] of that network's
//! job queue ([`NetworkQueues`]), so the deletions wait in line with the Services' jobs.
//!
//! A network's plan has three phases: firewall rules, routing firewall rules and ACL items
//! (a firewall rule is deleted before the rule of its port, as the planner does), then the
//! rules, public and internal, then the addresses and certificates (once nothing stands
//! on them). Each step of a phase runs as
//! its own one-step plan on the network's ticket, so that every orphan gets its own
//! result; a failed step stops the network's later phases (the next pass plans again from
//! what is there). Static routes go the route controller's way: one [`RoutePlan`] of
//! deletions run by its apply step, each VPC's jobs in line in a queue keyed by the VPC
//! (a queue of the deletion's own: the route controller's lives with that controller). A
//! delete that finds nothing has done its job.

use std::collections::BTreeMap;

use futures::future::join_all;

use super::{Orphan, OrphanKind, OrphanStep};
use crate::cloud::job_queue::{NetworkQueues, PlanTicket};
use crate::cloud::loadbalancer::apply::{self, ApplyError};
use crate::cloud::loadbalancer::ensure::NoRecording;
use crate::cloud::loadbalancer::ip_claim::PickedAddresses;
use crate::cloud::loadbalancer::plan::{Phase, Plan, Step};
use crate::cloud::routes;
use crate::cloud::routes::plan::{RoutePlan, RouteStep};

/// Why an orphan was not deleted.
#[derive(Debug, thiserror::Error)]
pub enum DeleteError {
    /// Its step of the network's plan failed.
    #[error(transparent)]
    Step(#[from] ApplyError),
    /// Deleting a static route failed.
    #[error(transparent)]
    Route(cloudstack::Error),
    /// An earlier phase of its network's plan failed; it is left for the next pass.
    #[error("not attempted: {0}")]
    NotAttempted(String),
    /// No step of a plan deletes it (e.g. a firewall rule of another protocol).
    #[error("no load-balancer step deletes it; delete it by hand")]
    NoStep,
}

/// The steps of one network's deletion, by phase, with the index of their orphan.
type Phases = [Vec<(usize, Step)>; 3];

/// The phase of a deletion step (see the module doc).
fn phase_of(step: &Step) -> usize {
    match step {
        Step::DeleteFirewallRule { .. }
        | Step::DeleteRoutingFirewallRule { .. }
        | Step::DeleteAclItem { .. } => 0,
        Step::DeleteRule { .. } | Step::DeleteInternalRule { .. } => 1,
        _ => 2,
    }
}

/// The deletable load-balancer orphans with a step, by network (empty: unknown).
fn by_network(orphans: &[Orphan]) -> BTreeMap<String, Phases> {
    let mut networks: BTreeMap<String, Phases> = BTreeMap::new();
    for (index, orphan) in orphans.iter().enumerate() {
        let Some(OrphanStep::LoadBalancer(step)) =
            orphan.step.as_ref().filter(|_| orphan.deletable)
        else {
            continue;
        };
        networks
            .entry(orphan.network_id.clone().unwrap_or_default())
            .or_default()[phase_of(step)]
        .push((index, step.clone()));
    }
    networks
}

/// The plan of one network's deletion (empty phases dropped).
fn plan_of(phases: &Phases) -> Plan {
    Plan {
        phases: phases
            .iter()
            .filter(|steps| !steps.is_empty())
            .map(|steps| Phase {
                steps: steps.iter().map(|(_, step)| step.clone()).collect(),
            })
            .collect(),
        ..Plan::default()
    }
}

/// Runs one network's plan on a ticket of its queue; the result of each orphan by index.
async fn run_network(
    client: &cloudstack::Client,
    queues: &NetworkQueues,
    network: &str,
    phases: &Phases,
) -> Vec<(usize, Result<(), DeleteError>)> {
    let ticket: PlanTicket = queues.enter(network);
    let picked = PickedAddresses::default();
    tracing::info!(network, "deleting orphans:\n{}", plan_of(phases));
    let mut results = Vec::new();
    let mut failed: Option<String> = None;
    for steps in phases.iter().filter(|steps| !steps.is_empty()) {
        if let Some(reason) = &failed {
            results.extend(
                steps
                    .iter()
                    .map(|(index, _)| (*index, Err(DeleteError::NotAttempted(reason.clone())))),
            );
            continue;
        }
        let runs = steps.iter().map(|(index, step)| {
            let (ticket, picked) = (&ticket, &picked);
            async move {
                let plan = Plan {
                    phases: vec![Phase {
                        steps: vec![step.clone()],
                    }],
                    ..Plan::default()
                };
                let (_, result) =
                    apply::apply(client, ticket, picked, &plan, &NoRecording, None).await;
                (*index, result)
            }
        });
        for (index, result) in join_all(runs).await {
            if let Err(error) = &result {
                failed.get_or_insert_with(|| format!("an earlier step failed: {error}"));
            }
            results.push((index, result.map_err(DeleteError::Step)));
        }
    }
    results
}

/// The route plan deleting the deletable static routes among `orphans`.
pub(crate) fn route_plan(orphans: &[Orphan]) -> RoutePlan {
    RoutePlan {
        steps: orphans
            .iter()
            .filter(|orphan| orphan.deletable)
            .filter_map(|orphan| match &orphan.step {
                Some(OrphanStep::Route(step)) => Some(step.clone()),
                _ => None,
            })
            .collect(),
        ..Default::default()
    }
}

/// Runs [`route_plan`]; the result of each route orphan by index.
async fn delete_routes(
    client: &cloudstack::Client,
    orphans: &[Orphan],
) -> Vec<(usize, Result<(), DeleteError>)> {
    let plan = route_plan(orphans);
    if plan.is_empty() {
        return Vec::new();
    }
    // The cluster name only tags created routes; a deletion plan creates none.
    let outcomes = routes::apply::apply(client, &NetworkQueues::default(), "", &plan).await;
    outcomes
        .into_iter()
        .filter_map(|outcome| {
            let RouteStep::Delete { id, .. } = &outcome.step else {
                return None;
            };
            let index = orphans
                .iter()
                .position(|orphan| orphan.kind == OrphanKind::StaticRoute && orphan.id == *id)?;
            Some((index, outcome.result.map_err(DeleteError::Route)))
        })
        .collect()
}

/// Deletes the deletable `orphans` (see the module doc), the load balancers' plans in job
/// queues of their own; an object already gone counts as deleted. The results come in
/// [`OrphanKind::ALL`] order.
pub async fn delete(
    client: &cloudstack::Client,
    orphans: &[Orphan],
) -> Vec<(Orphan, Result<(), DeleteError>)> {
    delete_queued(client, &NetworkQueues::default(), orphans).await
}

/// [`delete`], the load balancers' plans queued in `queues` (the engine's, so that they
/// wait in line with the Services' jobs).
pub(crate) async fn delete_queued(
    client: &cloudstack::Client,
    queues: &NetworkQueues,
    orphans: &[Orphan],
) -> Vec<(Orphan, Result<(), DeleteError>)> {
    let networks = by_network(orphans);
    let runs = networks
        .iter()
        .map(|(network, phases)| run_network(client, queues, network, phases));
    let (lb_results, route_results) =
        futures::join!(join_all(runs), delete_routes(client, orphans));
    let mut results: BTreeMap<usize, Result<(), DeleteError>> = lb_results
        .into_iter()
        .flatten()
        .chain(route_results)
        .collect();
    for (index, orphan) in orphans.iter().enumerate() {
        if orphan.deletable && !results.contains_key(&index) {
            results.insert(index, Err(DeleteError::NoStep));
        }
    }
    let mut out = Vec::new();
    for kind in OrphanKind::ALL {
        for (index, orphan) in orphans.iter().enumerate() {
            if orphan.kind == kind
                && let Some(result) = results.remove(&index)
            {
                out.push((orphan.clone(), result));
            }
        }
    }
    out
}

#[cfg(test)]
#[path = "delete_tests.rs"]
pub(super) mod tests;
