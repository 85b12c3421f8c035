//! Runs a [`RoutePlan`]: per VPC, deletions first, then creations, every job through the
//! VPC's place in the shared [`NetworkQueues`] (CloudStack runs one VPC router's jobs one
//! at a time). A new route is tagged as soon as `createStaticRoute` names it, before its
//! job is awaited, so a crash leaves no untagged route of ours; when tagging fails the
//! route is deleted again.

use std::collections::BTreeMap;

use cloudstack::{CreateStaticRoute, CreateTags, DeleteStaticRoute, Request};
use futures::future::join_all;

use crate::cloud::job_queue::{NetworkQueues, PlanTicket};

use super::DesiredRoute;
use super::plan::{RoutePlan, RouteStep};
use crate::cloud::tags::{TAG_CLUSTER, TAG_NODE};

/// The result of one step.
#[derive(Debug)]
pub struct StepOutcome {
    /// The step.
    pub step: RouteStep,
    /// `Ok` or the CloudStack error.
    pub result: Result<(), cloudstack::Error>,
}

/// Runs `plan` for `cluster`; VPCs run concurrently, each VPC's steps in plan order
/// (deletions, then creations).
pub async fn apply(
    client: &cloudstack::Client,
    queues: &NetworkQueues,
    cluster: &str,
    plan: &RoutePlan,
) -> Vec<StepOutcome> {
    let mut by_vpc: BTreeMap<&str, Vec<&RouteStep>> = BTreeMap::new();
    for step in &plan.steps {
        by_vpc.entry(step.vpc_id()).or_default().push(step);
    }
    let runs = by_vpc.into_iter().map(|(vpc_id, steps)| async move {
        let ticket = queues.enter(vpc_id);
        let (deletes, creates): (Vec<&RouteStep>, Vec<&RouteStep>) = steps
            .into_iter()
            .partition(|s| matches!(s, RouteStep::Delete { .. }));
        let mut outcomes = join_all(
            deletes
                .into_iter()
                .map(|step| run_step(client, &ticket, cluster, step)),
        )
        .await;
        outcomes.extend(
            join_all(
                creates
                    .into_iter()
                    .map(|step| run_step(client, &ticket, cluster, step)),
            )
            .await,
        );
        outcomes
    });
    join_all(runs).await.into_iter().flatten().collect()
}

async fn run_step(
    client: &cloudstack::Client,
    ticket: &PlanTicket,
    cluster: &str,
    step: &RouteStep,
) -> StepOutcome {
    let result = match step {
        RouteStep::Create(route) => create(client, ticket, cluster, route).await,
        RouteStep::Delete { id, .. } => delete(client, ticket, id).await,
    };
    StepOutcome {
        step: step.clone(),
        result,
    }
}

/// Deletes a route; one already gone is deleted.
async fn delete(
    client: &cloudstack::Client,
    ticket: &PlanTicket,
    id: &str,
) -> Result<(), cloudstack::Error> {
    let request = DeleteStaticRoute { id: id.to_string() };
    match ticket
        .run(client, DeleteStaticRoute::COMMAND, request.to_params())
        .await
    {
        Err(error) if error.is_not_found() => Ok(()),
        other => other.map(drop),
    }
}

async fn create(
    client: &cloudstack::Client,
    ticket: &PlanTicket,
    cluster: &str,
    route: &DesiredRoute,
) -> Result<(), cloudstack::Error> {
    let request = CreateStaticRoute {
        cidr: route.cidr.to_string(),
        vpcid: Some(route.vpc_id.clone()),
        nexthop: Some(route.next_hop.to_string()),
        gatewayid: None,
    };
    let job = ticket
        .submit(client, CreateStaticRoute::COMMAND, request.to_params())
        .await?;
    let route_id = job.start().id.clone();
    let tagged = match &route_id {
        Some(id) => {
            let tags = CreateTags {
                resourceids: vec![id.clone()],
                resourcetype: "StaticRoute".into(),
                tags: vec![
                    (TAG_CLUSTER.to_string(), cluster.to_string()),
                    (TAG_NODE.to_string(), route.node.clone()),
                ],
                customer: None,
            };
            client.create_tags(&tags).await
        }
        None => Err(cloudstack::Error::Decode {
            command: CreateStaticRoute::COMMAND.to_string(),
            detail: "the reply names no route id".into(),
        }),
    };
    let created = job.wait(client).await.map(drop);
    match (tagged, created) {
        (Ok(()), created) => created,
        (Err(error), Ok(())) => {
            // An untagged route would never be ours again: take it back.
            if let Some(id) = &route_id
                && let Err(undo) = delete(client, ticket, id).await
            {
                tracing::warn!(route = %id, error = %undo, "cannot delete a static route whose tagging failed");
            }
            Err(error)
        }
        (Err(_), Err(error)) => Err(error),
    }
}
