//! Scenarios 1 and 2: initialise N Nodes, then refresh the addresses of N initialised Nodes.
//!
//! 1. `nodes-init`: the controller manager runs; N Nodes appear at once with the
//!    uninitialised taint; we count CloudStack calls and time until every Node has its
//!    providerID and no taint.
//! 2. `nodes-refresh`: a second controller manager with a short
//!    `--node-status-update-frequency` runs over the same N initialised Nodes; we count the
//!    calls over several refresh periods and divide by the refreshes seen in the call log.

use crate::calls::{Calls, bursts};
use crate::ccm::Flags;
use crate::cloud::CloudModel;
use crate::report::{Row, secs};
use crate::rig::{Rig, node_initialised, poll_until};
use std::time::{Duration, Instant};

/// Go CCM v1.2.0: 16 calls to initialise one node (DESIGN.md §3).
const GO_CALLS_PER_INIT: u64 = 16;
/// Go CCM v1.2.0: 8 calls per node on every refresh.
const GO_CALLS_PER_REFRESH: u64 = 8;

/// The calls target of init and refresh: ceil(N / 500) + 2.
fn call_target(nodes: usize) -> u64 {
    nodes.div_ceil(500) as u64 + 2
}

/// Runs scenarios 1 and 2 at `nodes` Nodes (2 only when `refresh`).
pub async fn run(nodes: usize, refresh: bool, init: bool) -> anyhow::Result<Vec<Row>> {
    let rig = Rig::start(CloudModel::new(nodes)).await?;
    let mut rows = Vec::new();
    let size = format!("N={nodes}");
    if init {
        rows.extend(initialise(&rig, nodes, &size).await?);
    } else {
        rig.create_nodes(1..=nodes, true)?;
    }
    if refresh {
        rows.extend(refresh_addresses(&rig, nodes, &size).await?);
    }
    Ok(rows)
}

async fn initialise(rig: &Rig, nodes: usize, size: &str) -> anyhow::Result<Vec<Row>> {
    const NAME: &str = "nodes-init";
    let flags = Flags::default();
    let mut ccm = rig.start_ccm(&flags, &["nodes", "services"]).await?;
    // Every controller's start-up reads (the account view, the orphan pass, routes) belong
    // to the start-up row, not to the Nodes' initialisation: wait until they are done.
    rig.wait_for_quiet_cloudstack(Duration::from_millis(500), Duration::from_secs(10))
        .await;
    let startup = Calls::read(&rig.sim);
    rig.sim.reset_counts();
    let started = Instant::now();
    rig.create_nodes(1..=nodes, false)?;
    let every = Duration::from_millis(if nodes > 1000 { 200 } else { 50 });
    let timeout = Duration::from_secs(60) + Duration::from_millis(20 * nodes as u64);
    let done = poll_until(timeout, every, || async {
        let listed = rig.list("nodes").ok()?;
        let ready = listed.iter().filter(|n| node_initialised(n)).count();
        (ready == nodes).then_some(())
    })
    .await;
    let wall = started.elapsed().as_secs_f64();
    let calls = Calls::read(&rig.sim);
    let alive = ccm.check_alive();
    let mut rows = vec![Row::info(
        NAME,
        size,
        "calls at start-up (before nodes)",
        format!("{} ({})", startup.total(), startup.breakdown()),
    )];
    if done.is_none() {
        let initialised = rig
            .list("nodes")?
            .iter()
            .filter(|n| node_initialised(n))
            .count();
        rows.push(Row::failed(
            NAME,
            size,
            "all nodes initialised",
            format!(
                "{initialised}/{nodes} after {} ({}); log {}",
                secs(wall),
                alive.err().map(|e| e.to_string()).unwrap_or_default(),
                ccm.log.display()
            ),
        ));
        ccm.stop().await;
        return Ok(rows);
    }
    let target = call_target(nodes);
    rows.push(
        Row::at_most(
            NAME,
            size,
            "CloudStack calls",
            calls.total() as f64,
            format!("{} ({})", calls.total(), calls.breakdown()),
            target as f64,
            format!("≤ {target}"),
        )
        .with_go(if nodes == 1000 {
            "47,626 (measured)".to_owned()
        } else {
            format!("≈ {} (16/node)", GO_CALLS_PER_INIT * nodes as u64)
        }),
    );
    let go_wall = if nodes == 1000 { "149 s" } else { "" };
    rows.push(
        Row::info(NAME, size, "wall time to all initialised", secs(wall))
            .with_value(wall)
            .with_go(go_wall),
    );
    let writes: u64 = rig
        .api
        .request_counts()
        .iter()
        .filter(|((verb, resource), _)| {
            resource.starts_with("nodes")
                && matches!(
                    verb,
                    fake_apiserver::Verb::Update | fake_apiserver::Verb::Patch
                )
        })
        .map(|(_, n)| n)
        .sum();
    rows.push(
        Row::info(
            NAME,
            size,
            "Node writes (update+patch)",
            format!("{writes} ({:.1}/node)", writes as f64 / nodes as f64),
        )
        .with_value(writes as f64),
    );
    let usage = ccm.usage()?;
    rows.push(
        Row::info(
            NAME,
            size,
            "CCM peak RSS / CPU",
            format!(
                "{:.1} MiB / {:.2} s",
                usage.peak_rss_kib as f64 / 1024.0,
                usage.cpu_seconds
            ),
        )
        .with_value(usage.peak_rss_kib as f64 / 1024.0)
        .with_go(if nodes == 1000 { "86 MiB" } else { "" }),
    );
    ccm.stop().await;
    Ok(rows)
}

async fn refresh_addresses(rig: &Rig, nodes: usize, size: &str) -> anyhow::Result<Vec<Row>> {
    const NAME: &str = "nodes-refresh";
    let period = Duration::from_secs(if nodes > 1000 { 5 } else { 2 });
    let flags = Flags {
        node_status_update_frequency: period,
        ..Flags::default()
    };
    let mut ccm = rig.start_ccm(&flags, &["nodes"]).await?;
    // Let the start-up sync pass, then count over whole periods.
    tokio::time::sleep(period / 2).await;
    rig.sim.reset_counts();
    let window = period * 3;
    tokio::time::sleep(window).await;
    let calls = Calls::read(&rig.sim);
    let refreshes = bursts(
        &rig.sim,
        "listVirtualMachines",
        u64::try_from(period.as_millis() / 2).unwrap_or(u64::MAX),
    );
    let alive = ccm.check_alive();
    ccm.stop().await;
    alive?;
    let label = format!("{size} period={}s", period.as_secs());
    if refreshes == 0 {
        return Ok(vec![Row::failed(
            NAME,
            &label,
            "calls per refresh",
            format!(
                "no listVirtualMachines in {} s ({} calls: {})",
                window.as_secs(),
                calls.total(),
                calls.breakdown()
            ),
        )]);
    }
    let per_refresh = calls.total() as f64 / refreshes as f64;
    let target = call_target(nodes);
    Ok(vec![
        Row::at_most(
            NAME,
            &label,
            "CloudStack calls per refresh",
            per_refresh,
            format!(
                "{per_refresh:.1} ({} calls / {refreshes} refreshes: {})",
                calls.total(),
                calls.breakdown()
            ),
            target as f64,
            format!("≤ {target}"),
        )
        .with_go(format!("{} (8/node)", GO_CALLS_PER_REFRESH * nodes as u64)),
    ])
}

/// Scenario 1b, `nodes-cold`: N Nodes registered by their kubelets wait (uninitialised)
/// before the controller manager starts with every controller, as when a cluster's CCM is
/// deployed after its Nodes joined. We time from the process start until every Node is
/// initialised and count every CloudStack call made until then: the other controllers'
/// start-up reads (account view, orphan count, static routes) must not run before the
/// Nodes are done.
pub async fn cold_start(nodes: usize) -> anyhow::Result<Vec<Row>> {
    const NAME: &str = "nodes-cold";
    let rig = Rig::start(CloudModel::new(nodes)).await?;
    let size = format!("N={nodes}");
    rig.create_nodes(1..=nodes, false)?;
    rig.sim.reset_counts();
    let started = Instant::now();
    let mut ccm = rig.start_ccm(&Flags::default(), &[]).await?;
    let every = Duration::from_millis(if nodes > 1000 { 200 } else { 20 });
    let timeout = Duration::from_secs(60) + Duration::from_millis(20 * nodes as u64);
    // The start of the last poll that still saw a Node waiting: every call made up to
    // then was made while a Node waited (the poll itself lags behind the controller).
    let still_waiting_at = std::cell::Cell::new(cloudstack_sim::jobs::now_ms());
    let done = poll_until(timeout, every, || async {
        let asked_at = cloudstack_sim::jobs::now_ms();
        let listed = rig.list("nodes").ok()?;
        let ready = listed.iter().filter(|n| node_initialised(n)).count();
        if ready < nodes {
            still_waiting_at.set(asked_at);
        }
        (ready == nodes).then_some(())
    })
    .await;
    let wall = started.elapsed().as_secs_f64();
    let calls = Calls::logged_until(&rig.sim, still_waiting_at.get());
    if done.is_none() {
        let alive = ccm.check_alive();
        ccm.stop().await;
        return Ok(vec![Row::failed(
            NAME,
            &size,
            "all nodes initialised",
            format!(
                "not after {} ({})",
                secs(wall),
                alive.err().map(|e| e.to_string()).unwrap_or_default()
            ),
        )]);
    }
    // listApis (what the keys may call, asked once at start since 2026-12-07),
    // listCapabilities, then one listVirtualMachines page per 500 VMs.
    let target = nodes.div_ceil(500) as u64 + 2;
    let rows = vec![
        Row::at_most(
            NAME,
            &size,
            "CloudStack calls while a Node waited",
            calls.total() as f64,
            format!("{} ({})", calls.total(), calls.breakdown()),
            target as f64,
            format!("≤ {target}"),
        )
        .with_go(if nodes == 1000 { "47,626" } else { "" }),
        Row::info(
            NAME,
            &size,
            "wall time from process start to all initialised",
            secs(wall),
        )
        .with_value(wall)
        .with_go(if nodes == 1000 { "149 s" } else { "" }),
    ];
    ccm.stop().await;
    Ok(rows)
}
