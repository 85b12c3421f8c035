//! Scenario 5 (`lb-churn`): S Services over N Nodes; 10 Nodes join (VMs added, Nodes
//! registered uninitialised), then 10 Nodes leave (Node objects deleted): time until every
//! load-balancer rule has exactly the eligible Nodes' VMs as members, and the calls.

use crate::calls::Calls;
use crate::ccm::Flags;
use crate::cloud::{CloudModel, add_vm, vm_name};
use crate::report::{Row, secs};
use crate::rig::poll_until;
use crate::services::LbWorld;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const NAME: &str = "lb-churn";
const PORTS: usize = 1;
const CHURN: usize = 10;

/// Runs the churn with `services` Services over `nodes` initial Nodes.
pub async fn run(services: usize, nodes: usize) -> anyhow::Result<Vec<Row>> {
    let model = CloudModel::new(nodes).job(Duration::from_millis(20));
    let flags = Flags {
        concurrent_service_syncs: 20,
        service_resync_period: Duration::from_secs(3600),
        node_status_update_frequency: Duration::from_secs(3600),
        ..Flags::default()
    };
    let size = format!("S={services}×{PORTS} N={nodes}±{CHURN} {}", model.label());
    let mut world = LbWorld::start(model, flags).await?;
    let setup = world
        .burst(
            1..=services,
            PORTS,
            Duration::from_secs(120 + services as u64),
        )
        .await?;
    if let Some(failed) = setup.setup_failure(NAME, &size) {
        world.ccm.stop().await;
        return Ok(vec![failed]);
    }
    let mut rows = Vec::new();
    let rules = services * PORTS;
    let timeout = Duration::from_secs(120);
    let mut members: BTreeSet<String> = (1..=nodes).map(vm_name).collect();
    world
        .wait_quiet(Duration::from_secs(1), Duration::from_secs(60))
        .await;

    // 10 Nodes join.
    world.rig.sim.reset_counts();
    let started = Instant::now();
    for index in nodes + 1..=nodes + CHURN {
        add_vm(&world.rig.sim, &vm_name(index), index)?;
    }
    world.rig.create_nodes(nodes + 1..=nodes + CHURN, false)?;
    members.extend((nodes + 1..=nodes + CHURN).map(vm_name));
    let joined = converge(&world, &members, rules, timeout).await;
    rows.push(result_row(&world, &size, "add 10 nodes", joined, started));

    // 10 Nodes leave.
    world
        .wait_quiet(Duration::from_secs(1), Duration::from_secs(30))
        .await;
    world.rig.sim.reset_counts();
    let started = Instant::now();
    for index in 1..=CHURN {
        world.rig.api.delete("nodes", None, &vm_name(index))?;
        members.remove(&vm_name(index));
    }
    let left = converge(&world, &members, rules, timeout).await;
    rows.push(result_row(&world, &size, "remove 10 nodes", left, started));
    let alive = world.ccm.check_alive();
    world.ccm.stop().await;
    alive?;
    Ok(rows)
}

async fn converge(
    world: &LbWorld,
    members: &BTreeSet<String>,
    rules: usize,
    timeout: Duration,
) -> bool {
    poll_until(timeout, Duration::from_millis(50), || {
        let done = world.members_match(members, rules);
        async move { done.then_some(()) }
    })
    .await
    .is_some()
}

fn result_row(world: &LbWorld, size: &str, what: &str, done: bool, started: Instant) -> Row {
    let elapsed = started.elapsed().as_secs_f64();
    let calls = Calls::read(&world.rig.sim);
    let metric = format!("{what}: time to converge, calls (mutating / read)");
    let measured = format!(
        "{} , {} ({} / {}): {}",
        secs(elapsed),
        calls.total(),
        calls.mutating(),
        calls.reads(),
        calls.breakdown()
    );
    if done {
        Row::info(NAME, size, &metric, measured).with_value(elapsed)
    } else {
        Row::failed(NAME, size, &metric, format!("not converged: {measured}"))
    }
}
