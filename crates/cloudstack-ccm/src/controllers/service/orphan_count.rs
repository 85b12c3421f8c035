//! The service controller's orphan pass: at start and then on every tenth resync (at most
//! once every five minutes, as it lists five kinds of objects), the objects
//! tagged for this cluster whose Service or Node is gone are counted
//! (`cloudstack_ccm_orphaned_resources{kind}`), one log line says so when the counts
//! change, and with `--delete-orphans` they are deleted ([`crate::orphans::report`]),
//! their plans in the engine's job queues, in line with the Services' jobs.
//! The Node names come from the shared Node cache (no list of the Nodes of its own), read
//! after CloudStack so that a route made for a Node that joined meanwhile finds it.
//! When and what the last pass found is kept in [`OrphanPasses`] across leadership terms,
//! so leading again does not bring a pass forward.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::cloud::loadbalancer::ensure::Engine;
use crate::cloud::orphans::OrphanKind;
use crate::controllers::{Context, NodeCache, Shutdown};

/// Resyncs between two orphan passes.
const RESYNCS_PER_PASS: u32 = 10;

/// The shortest time between two orphan passes.
const MIN_PERIOD: Duration = Duration::from_secs(300);

/// When the last pass ran and what it counted; clones share it.
#[derive(Debug, Clone, Default)]
pub struct OrphanPasses(Arc<Mutex<LastPass>>);

#[derive(Debug, Default)]
struct LastPass {
    at: Option<Instant>,
    counts: Option<BTreeMap<OrphanKind, usize>>,
}

/// Runs the pass until `shutdown` (`resync_period`: the service controller's), once
/// `nodes` holds its first complete list (before, every Node would look gone), and a
/// period after the last pass of `passes`. Deletions queue in `engine`'s job queues.
pub async fn run(
    ctx: Arc<Context>,
    engine: Arc<Engine>,
    nodes: NodeCache,
    resync_period: Duration,
    passes: OrphanPasses,
    shutdown: Shutdown,
) {
    let period = (resync_period * RESYNCS_PER_PASS).max(MIN_PERIOD);
    tokio::select! {
        () = nodes.wait_until_ready() => {}
        () = shutdown.wait() => return,
    }
    loop {
        let last_at = passes.0.lock().unwrap_or_else(|e| e.into_inner()).at;
        if let Some(at) = last_at {
            tokio::select! {
                _ = shutdown.wait() => return,
                _ = tokio::time::sleep_until(at + period) => {}
            }
        }
        let mut last = passes
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .counts
            .clone();
        pass(&ctx, &engine, &nodes, &mut last).await;
        *passes.0.lock().unwrap_or_else(|e| e.into_inner()) = LastPass {
            at: Some(Instant::now()),
            counts: last,
        };
    }
}

async fn pass(
    ctx: &Context,
    engine: &Engine,
    nodes: &NodeCache,
    last: &mut Option<BTreeMap<OrphanKind, usize>>,
) {
    let node_names = || nodes.names();
    let scope = crate::orphans::Scope {
        cluster: &ctx.cluster_name,
        node_names: Some(&node_names),
        routing_firewall: crate::cloud::orphans::RoutingFirewall::of(&ctx.server_version),
        cluster_cidrs: &ctx.routes.cluster_cidrs,
    };
    let delete = ctx.delete_orphans.then(|| engine.queues());
    // The engine's view (read now, or shared with the Services reconciled meanwhile):
    // the first Service after start-up then reads no list the pass already read.
    let view = match engine.account_view().await {
        Ok(view) => view,
        Err(error) => {
            tracing::warn!(%error, "cannot look for orphaned CloudStack objects");
            return;
        }
    };
    let report =
        crate::orphans::report_queued(&ctx.cloudstack, &ctx.kube, scope, delete, Some(&view)).await;
    let report = match report {
        Ok(report) => report,
        Err(error) => {
            tracing::warn!(%error, "cannot look for orphaned CloudStack objects");
            return;
        }
    };
    if !report.not_looked_for.is_empty() && last.is_none() {
        let kinds: Vec<String> = report
            .not_looked_for
            .iter()
            .map(ToString::to_string)
            .collect();
        tracing::warn!(
            "the orphan pass cannot look for: {} (docs/keys.md)",
            kinds.join("; ")
        );
    }
    let mut counts: BTreeMap<OrphanKind, usize> =
        OrphanKind::ALL.into_iter().map(|kind| (kind, 0)).collect();
    for orphan in &report.orphans {
        *counts.entry(orphan.kind).or_default() += 1;
    }
    for (kind, count) in &counts {
        ctx.metrics.set_orphans(kind.as_str(), *count);
    }
    if last.as_ref() != Some(&counts) {
        let total: usize = counts.values().sum();
        let summary: Vec<String> = counts
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(kind, n)| format!("{kind}={n}"))
            .collect();
        tracing::info!(
            total,
            "orphaned CloudStack objects tagged for this cluster: {}",
            if summary.is_empty() {
                "none".to_string()
            } else {
                summary.join(", ")
            }
        );
        *last = Some(counts);
    }
    for (orphan, error) in &report.deleted {
        match error {
            None => tracing::info!("deleted orphan {orphan}"),
            Some(error) => tracing::warn!(%error, "cannot delete orphan {orphan}"),
        }
    }
}
