//! Scenario 6 (`memory`): peak resident memory and CPU time of the controller manager
//! process with N Nodes and S Services (1 port each), once every Service is provisioned
//! and the controller manager is idle.

use crate::calls::Calls;
use crate::ccm::Flags;
use crate::cloud::CloudModel;
use crate::report::{Row, secs};
use crate::rig::node_object;
use crate::services::LbWorld;
use std::time::Duration;

const NAME: &str = "memory";
/// Target peak RSS: 15 MiB at 1000 Nodes / 20 Services, 25 MiB at 5000 Nodes / 1000
/// Services (interpolated by Node count in between, the smaller target below).
fn target_mib(nodes: usize) -> f64 {
    match nodes {
        ..=1000 => 15.0,
        5000.. => 25.0,
        n => 15.0 + 10.0 * (n - 1000) as f64 / 4000.0,
    }
}

/// Runs the memory scenario.
pub async fn run(nodes: usize, services: usize) -> anyhow::Result<Vec<Row>> {
    let model = CloudModel::new(nodes)
        .job(Duration::from_millis(2))
        .public_ips(services + 256);
    let flags = Flags {
        concurrent_service_syncs: 20,
        service_resync_period: Duration::from_secs(3600),
        node_status_update_frequency: Duration::from_secs(3600),
        ..Flags::default()
    };
    let size = format!("N={nodes} S={services}×1");
    let world = LbWorld::start(model, flags).await?;
    let nodes_only = world.ccm.usage()?;
    let calls_before = Calls::read(&world.rig.sim);
    let setup = world
        .burst(1..=services, 1, setup_timeout(services))
        .await?;
    world
        .wait_quiet(Duration::from_secs(2), Duration::from_secs(120))
        .await;
    let usage = world.ccm.usage()?;
    let calls = provisioning_calls(&calls_before, &Calls::read(&world.rig.sim));
    let log = world.ccm.log.display().to_string();
    world.ccm.stop().await;
    if !setup.complete() {
        return Ok(vec![Row::failed(
            NAME,
            &size,
            "setup",
            format!(
                "{}/{} Services got ingress after {}; calls: {}; log {log}",
                setup.ready.len(),
                setup.expected,
                secs(setup.elapsed.as_secs_f64()),
                calls.breakdown()
            ),
        )]);
    }
    let peak = usage.peak_rss_kib as f64 / 1024.0;
    let target = target_mib(nodes);
    let node_bytes = serde_json::to_vec(&node_object(1, "node-00001", Some("id")))?.len();
    Ok(vec![
        Row::info(
            NAME,
            &size,
            "size of one Node object (JSON, as a kubelet writes it)",
            format!("{node_bytes} bytes"),
        )
        .with_value(node_bytes as f64),
        Row::info(
            NAME,
            &size,
            "CCM RSS with the Nodes only (before Services)",
            nodes_only.rss_text(),
        )
        .with_value(nodes_only.peak_rss_kib as f64 / 1024.0),
        Row::at_most(
            NAME,
            &size,
            "CCM peak RSS (VmHWM)",
            peak,
            format!(
                "{peak:.1} MiB (now {:.1} MiB: anon {:.1}, file {:.1}; {} threads)",
                usage.rss_kib as f64 / 1024.0,
                usage.rss_anon_kib as f64 / 1024.0,
                usage.rss_file_kib as f64 / 1024.0,
                usage.threads
            ),
            target,
            format!("≤ {target} MiB"),
        )
        .with_go(if nodes == 1000 {
            "86 MiB (nodes only)"
        } else {
            ""
        }),
        Row::info(
            NAME,
            &size,
            "CCM CPU time (user+system)",
            format!(
                "{} over {} wall",
                secs(usage.cpu_seconds),
                secs(setup.elapsed.as_secs_f64())
            ),
        )
        .with_value(usage.cpu_seconds),
        Row::info(
            NAME,
            &size,
            "CloudStack calls while provisioning",
            format!("{} calls: {}", calls.total(), calls.breakdown()),
        )
        .with_value(calls.total() as f64),
    ])
}

/// How long provisioning may take: at 5000 Nodes a Service takes about 2 s (its
/// changes queue on the one network, and each change renews the shared view of
/// CloudStack), so 1000 Services need about 35 minutes; allowed: 4 s per Service.
fn setup_timeout(services: usize) -> Duration {
    Duration::from_secs(300 + 4 * services as u64)
}

/// The calls made between two readings of the counters.
fn provisioning_calls(before: &Calls, after: &Calls) -> Calls {
    Calls {
        by_command: after
            .by_command
            .iter()
            .map(|(command, n)| {
                let earlier = before.by_command.get(command).copied().unwrap_or(0);
                (command.clone(), n.saturating_sub(earlier))
            })
            .filter(|(_, n)| *n > 0)
            .collect(),
    }
}
