//! `cloudstack-ccm plan`: the dry run. With the controller manager's `--cloud-config` and
//! `--kubeconfig`, it lists the LoadBalancer Services and the Nodes, observes CloudStack
//! (read calls only) and prints, per Service, the `Plan` the service controller would
//! apply, then the route changes of the route controller — without applying anything.

use std::io::Write;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::api::ListParams;

use crate::cli::ManagerArgs;
use crate::cloud::key_access::{KeyFeatures, refusal_text};
use crate::cloud::loadbalancer::ensure::Engine;
use crate::config::CloudConfig;
use crate::controllers::Context;
use crate::controllers::node_cache::CachedNode;
use crate::controllers::route::{self, RouteController};
use crate::controllers::service::{
    EndpointSnapshot, ServicePlan, Settings, is_local, plan_services, settings,
};
use crate::metrics::Metrics;

use crate::connect;
use crate::tool::ToolError;

/// The plan of every LoadBalancer Service the controller owns.
#[derive(Debug, Clone)]
pub struct PlanReport {
    /// Per Service: `namespace/name`, the plan (or why there is none) and its members.
    pub plans: Vec<ServicePlan>,
}

impl PlanReport {
    /// Services whose plan could not be made.
    pub fn failed(&self) -> usize {
        self.plans.iter().filter(|p| p.plan.is_err()).count()
    }

    /// Services with something to change.
    pub fn pending(&self) -> usize {
        self.plans
            .iter()
            .filter(|p| p.teardown.is_some() || p.plan.as_ref().is_ok_and(|plan| !plan.is_empty()))
            .count()
    }
}

/// Connects with `args` (the controller manager's flags) and prints the plans to `out`.
pub async fn run(args: &ManagerArgs, out: &mut impl Write) -> Result<PlanReport, ToolError> {
    let config = CloudConfig::load(args.cloud_config.as_deref(), |name| {
        std::env::var(name).ok()
    })?;
    let metrics = Arc::new(Metrics::new());
    let cloudstack = connect::cloudstack_client(&config, metrics.clone())?;
    let server_version = connect::learn_server(&config, &cloudstack).await?.version;
    let kube = connect::kube_client(args).await?;
    let mut ctx = Context::new(
        kube,
        cloudstack,
        server_version,
        config,
        args.cluster_name.clone(),
        metrics,
    )
    .with_args(args);
    // A dry run deletes nothing and plans one Service at a time.
    ctx.delete_orphans = false;
    ctx.concurrent_service_syncs = 1;
    let report = plan_context(&ctx).await?;
    write_report(&report, out)?;
    let client = ctx.cloudstack.clone();
    write_route_plan(Arc::new(ctx), out).await?;
    write_key_report(&client, out)?;
    Ok(report)
}

/// Prints what the keys' role refuses (learnt from `listApis` or from refusals while
/// planning) and what each refusal takes away (docs/keys.md).
pub fn write_key_report(client: &cloudstack::Client, out: &mut impl Write) -> std::io::Result<()> {
    let features = KeyFeatures::of(client);
    let refused: Vec<_> = features.refused_features().collect();
    if refused.is_empty() {
        writeln!(
            out,
            "Keys: no command the controller needs was refused to the cloud-config keys."
        )?;
    } else {
        writeln!(
            out,
            "Keys: the role of the cloud-config keys refuses commands (docs/keys.md):"
        )?;
        for (feature, command) in refused {
            writeln!(out, "  {}", refusal_text(feature, command))?;
        }
    }
    out.flush()
}

/// Prints the route changes the route controller would make (or why it would not run).
pub async fn write_route_plan(ctx: Arc<Context>, out: &mut impl Write) -> std::io::Result<()> {
    if let Some(reason) = route::not_started_reason(&ctx) {
        writeln!(out, "Routes: not managed ({reason}).")?;
        return out.flush();
    }
    let caches = crate::controllers::Caches::for_context(&ctx);
    match RouteController::new(ctx, caches).plan().await {
        Ok((wanted, _)) if wanted.on_vpc == 0 && !wanted.isolated_networks.is_empty() => writeln!(
            out,
            "Routes: not managed (the Nodes' VMs are on isolated networks)."
        )?,
        Ok((wanted, plan)) => {
            writeln!(
                out,
                "Routes: {} change(s). Dry run: nothing was changed.",
                plan.steps.len()
            )?;
            for line in wanted.skipped.iter() {
                writeln!(out, "  warning: {line}")?;
            }
            for line in plan.to_string().lines() {
                writeln!(out, "  {line}")?;
            }
        }
        Err(error) => writeln!(out, "Routes: cannot plan: {error}")?,
    }
    out.flush()
}

/// Plans every Service of the cluster behind `ctx` without changing anything.
pub(crate) async fn plan_context(ctx: &Context) -> Result<PlanReport, ToolError> {
    let services = Api::<Service>::all(ctx.kube.clone())
        .list(&ListParams::default())
        .await
        .map_err(|source| ToolError::List {
            what: "Services",
            source,
        })?;
    // Decoded as the Node cache holds them: only what eligibility reads.
    let nodes = Api::<CachedNode>::all(ctx.kube.clone())
        .list(&ListParams::default())
        .await
        .map_err(|source| ToolError::List {
            what: "Nodes",
            source,
        })?;
    let settings = Settings::from_context(ctx);
    let inventory = crate::controllers::node::instances_for(ctx)
        .inventory()
        .clone();
    let engine = Engine::new(ctx.cloudstack.clone(), inventory, settings.engine(ctx));
    let options = settings::spec_options(ctx);
    // Endpoints are read only for Local Services, as the controller does.
    let endpoints = if services.items.iter().any(is_local) {
        EndpointSnapshot::read(&ctx.kube)
            .await
            .map_err(|source| ToolError::List {
                what: "EndpointSlices",
                source,
            })?
    } else {
        EndpointSnapshot::default()
    };
    let plans = plan_services(
        &engine,
        Some(&ctx.kube),
        &services.items,
        &nodes.items,
        &endpoints,
        &options,
    )
    .await;
    Ok(PlanReport { plans })
}

/// Prints each Service's plan (its `Display`), then a one-line summary.
pub fn write_report(report: &PlanReport, out: &mut impl Write) -> std::io::Result<()> {
    if report.plans.is_empty() {
        writeln!(out, "No LoadBalancer Service to plan.")?;
    }
    for ServicePlan {
        key,
        plan,
        members,
        teardown,
    } in &report.plans
    {
        if let Some((kind, deletion)) = teardown {
            writeln!(
                out,
                "Service {key}: first deletes its {kind} load balancer: {} CloudStack job(s)",
                deletion.job_count()
            )?;
            for line in deletion.to_string().lines() {
                writeln!(out, "  {line}")?;
            }
        }
        match plan {
            Ok(plan) if plan.is_empty() => {
                writeln!(out, "Service {key}: up to date")?;
                for warning in &plan.warnings {
                    writeln!(out, "  warning: {warning}")?;
                }
            }
            Ok(plan) => {
                writeln!(
                    out,
                    "Service {key}: {} CloudStack job(s) in {} phase(s)",
                    plan.job_count(),
                    plan.phases.len()
                )?;
                for line in plan.to_string().lines() {
                    writeln!(out, "  {line}")?;
                }
            }
            Err(reason) => writeln!(out, "Service {key}: cannot plan: {reason}")?,
        }
        for set in members {
            writeln!(out, "  {set}")?;
        }
    }
    writeln!(
        out,
        "{} Service(s): {} to change, {} failed to plan. Dry run: nothing was changed.",
        report.plans.len(),
        report.pending(),
        report.failed()
    )?;
    out.flush()
}
