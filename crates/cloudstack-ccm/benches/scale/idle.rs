//! Scenario `idle`: what the controller manager costs at rest. N Nodes and S Services
//! (1 port each) are provisioned, then nothing changes for a window: the CPU time the
//! process spends in it (every thread, from the scheduler's accounting) per idle second,
//! the CloudStack calls it makes, and its memory.
//!
//! The fake API server sends watch bookmarks once a minute here, as kube-apiserver's watch
//! cache does (`bookmarkFrequency`), not every second as in the other scenarios: at rest,
//! the bookmarks are most of what arrives, and the measure is of the controller at rest
//! against a real API server. The flags are the defaults (Service resync every 100 s,
//! node status every 5 min, node monitor every 5 s).

use crate::calls::Calls;
use crate::ccm::Flags;
use crate::cloud::CloudModel;
use crate::report::{Row, secs};
use crate::rig::Rig;
use crate::services::LbWorld;
use std::time::{Duration, Instant};

const NAME: &str = "idle";
/// The target: at most this much CPU per idle second, at 100 Nodes and 20 Services.
const TARGET_MS_PER_S: f64 = 0.2;
/// The size the target is set for; other sizes are reported.
const TARGET_NODES: usize = 100;
/// Peak RSS targets by number of Nodes (20 Services), for the image's build (static, no
/// demo: `SCALE_CCM_BINARY`, see `ccm.rs`); the bench's default build carries the demo's
/// simulator and API server in its code, so its rows are reported only.
const RSS_TARGETS_MIB: [(usize, f64); 2] = [(100, 15.0), (1000, 20.0)];

/// Runs the idle scenario over `window`.
pub async fn run(nodes: usize, services: usize, window: Duration) -> anyhow::Result<Vec<Row>> {
    let model = CloudModel::new(nodes)
        .job(Duration::from_millis(2))
        .public_ips(services + 256);
    let flags = Flags {
        concurrent_service_syncs: 20,
        ..Flags::default()
    };
    let size = format!("N={nodes} S={services}×1");
    let options = fake_apiserver::ServerOptions {
        bookmark_interval: Duration::from_secs(60),
        ..fake_apiserver::ServerOptions::default()
    };
    let rig = Rig::start_with(model, options).await?;
    let world = LbWorld::start_on(rig, model, flags).await?;
    let setup = world
        .burst(1..=services, 1, Duration::from_secs(300))
        .await?;
    world
        .wait_quiet(Duration::from_secs(2), Duration::from_secs(120))
        .await;
    if let Ok(pause) = std::env::var("SCALE_IDLE_PAUSE") {
        // Time to attach a profiler (`perf record -g -p <pid>`) before the window.
        println!("idle: pid {} at rest", world.ccm.pid());
        tokio::time::sleep(Duration::from_secs(pause.parse().unwrap_or(10))).await;
    }
    let calls_before = Calls::read(&world.rig.sim);
    let cpu_before = world.ccm.cpu_nanos()?;
    let started = Instant::now();
    tokio::time::sleep(window).await;
    let cpu_after = world.ccm.cpu_nanos()?;
    let elapsed = started.elapsed();
    let calls_after = Calls::read(&world.rig.sim);
    let usage = world.ccm.usage()?;
    world.ccm.stop().await;
    if let Some(failed) = setup.setup_failure(NAME, &size) {
        return Ok(vec![failed]);
    }
    let cpu_ms = (cpu_after.saturating_sub(cpu_before)) as f64 / 1e6;
    let per_second = cpu_ms / elapsed.as_secs_f64();
    let calls = calls_after.total() - calls_before.total();
    let mutating = calls_after.mutating() - calls_before.mutating();
    let metric = "CCM CPU per idle second (user+system, every thread)";
    let measured = format!(
        "{per_second:.3} ms/s ({cpu_ms:.1} ms over {})",
        secs(elapsed.as_secs_f64())
    );
    let cpu_row = if nodes == TARGET_NODES {
        Row::at_most(
            NAME,
            &size,
            metric,
            per_second,
            measured,
            TARGET_MS_PER_S,
            format!("≤ {TARGET_MS_PER_S} ms/s"),
        )
    } else {
        Row::info(NAME, &size, metric, measured).with_value(per_second)
    };
    Ok(vec![
        cpu_row,
        Row::info(
            NAME,
            &size,
            "CloudStack calls in the idle window",
            format!("{calls} ({mutating} mutating)"),
        )
        .with_value(calls as f64),
        rss_row(&size, nodes, &usage),
    ])
}

/// The RSS row: against its target where one is set for `nodes` and the image's build
/// runs, else reported only.
fn rss_row(size: &str, nodes: usize, usage: &crate::ccm::Usage) -> Row {
    const METRIC: &str = "CCM RSS at rest";
    let peak_mib = usage.peak_rss_kib as f64 / 1024.0;
    let target = RSS_TARGETS_MIB
        .iter()
        .find(|(at, _)| *at == nodes)
        .map(|(_, mib)| *mib);
    match target {
        Some(mib) if crate::ccm::runs_given_binary() => Row::at_most(
            NAME,
            size,
            METRIC,
            peak_mib,
            usage.rss_text(),
            mib,
            format!("≤ {mib} MiB peak (image's build)"),
        ),
        Some(mib) => Row::info(
            NAME,
            size,
            METRIC,
            format!(
                "{} (target ≤ {mib} MiB for the image's build: SCALE_CCM_BINARY)",
                usage.rss_text()
            ),
        )
        .with_value(peak_mib),
        None => Row::info(NAME, size, METRIC, usage.rss_text()).with_value(peak_mib),
    }
}
