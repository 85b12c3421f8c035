//! Scenario 4 (`lb-steady`): S Services × 2 ports, nothing changes, one full resync:
//! CloudStack calls, mutating and read, at two cluster sizes (reads must not grow with N).
//!
//! The Services are provisioned with short jobs; then the controller manager is restarted
//! with `--service-resync-period=R` (its first pass over every Service is reported as the
//! restart pass), and the calls in the next window of length R — exactly one periodic
//! resync of every Service — are counted.

use crate::calls::Calls;
use crate::ccm::Flags;
use crate::cloud::CloudModel;
use crate::report::{Row, secs};
use crate::services::LbWorld;
use std::time::{Duration, Instant};

const NAME: &str = "lb-steady";
const PORTS: usize = 2;

/// Runs the steady-state resync with `services` Services over `nodes` Nodes.
pub async fn run(services: usize, nodes: usize, resync: Duration) -> anyhow::Result<Vec<Row>> {
    let model = CloudModel::new(nodes).job(Duration::from_millis(5));
    let flags = Flags {
        concurrent_service_syncs: 20,
        service_resync_period: resync,
        node_status_update_frequency: Duration::from_secs(3600),
        ..Flags::default()
    };
    let size = format!("S={services}×{PORTS} N={nodes} R={}s", resync.as_secs());
    let world = LbWorld::start(model, flags).await?;
    let setup = world
        .burst(
            1..=services,
            PORTS,
            Duration::from_secs(120 + services as u64),
        )
        .await?;
    if !setup.complete() {
        let row = Row::failed(
            NAME,
            &size,
            "setup",
            format!(
                "{}/{} Services got ingress; log {}",
                setup.ready.len(),
                setup.expected,
                world.ccm.log.display()
            ),
        );
        world.ccm.stop().await;
        return Ok(vec![row]);
    }
    world
        .wait_quiet(Duration::from_secs(2), Duration::from_secs(60))
        .await;
    world.rig.sim.reset_counts();
    let restarted_at = Instant::now();
    let mut world = world.restart().await?;
    // The restart pass must be over before the window starts, or its cold reads count.
    let settled = world
        .wait_quiet(Duration::from_secs(3), Duration::from_secs(600))
        .await;
    let restart_pass = Calls::read(&world.rig.sim);
    let restart_time = restarted_at.elapsed().as_secs_f64();
    world.rig.sim.reset_counts();
    tokio::time::sleep(resync).await;
    world
        .wait_quiet(Duration::from_secs(1), Duration::from_secs(30))
        .await;
    let resync_calls = Calls::read(&world.rig.sim);
    let restart_note = if settled {
        ""
    } else {
        " (not settled after 600 s)"
    };
    let alive = world.ccm.check_alive();
    world.ccm.stop().await;
    alive?;
    Ok(vec![
        Row::info(
            NAME,
            &size,
            "restart pass (cold) calls (mutating / read)",
            format!(
                "{} ({} / {}) in {}{restart_note}: {}",
                restart_pass.total(),
                restart_pass.mutating(),
                restart_pass.reads(),
                secs(restart_time),
                restart_pass.breakdown()
            ),
        )
        .with_value(restart_pass.total() as f64),
        Row::at_most(
            NAME,
            &size,
            "one resync: mutating calls",
            resync_calls.mutating() as f64,
            resync_calls.mutating().to_string(),
            0.0,
            "0",
        ),
        Row::at_most(
            NAME,
            &size,
            "one resync: read calls",
            resync_calls.reads() as f64,
            format!("{} ({})", resync_calls.reads(), resync_calls.breakdown()),
            10.0,
            "≤ 10, independent of N",
        ),
    ])
}
