//! Scenario 3 (`lb-burst`): S LoadBalancer Services with P ports created at once on one
//! network; time to each ingress (p50/p95/max), calls, the two lower bounds and our ratio
//! to each, with and without the simulator's throttling.
//!
//! Lower bounds, from the jobs the simulator ran:
//! * critical path: the dependent jobs one Service cannot avoid (associate IP → create
//!   rule → assign members) × job duration;
//! * per-network bound: the simulator (like CloudStack) runs one network's jobs one at a
//!   time, so the fewest jobs the result needs (S × (1 + 2P)) × job duration.

use crate::calls::{
    Calls, fewest_jobs, inherent_chain, job_breakdown, jobs_since, observed_chain, queue_use,
};
use crate::ccm::Flags;
use crate::cloud::CloudModel;
use crate::report::{Row, secs};
use crate::services::LbWorld;
use std::time::Duration;

const NAME: &str = "lb-burst";

/// One burst configuration.
#[derive(Debug, Clone, Copy)]
pub struct BurstCase {
    /// Services created at once.
    pub services: usize,
    /// Ports per Service.
    pub ports: usize,
    /// Async job duration.
    pub job: Duration,
    /// Simulator throttling (requests per second per account).
    pub throttle: Option<u64>,
    /// `--concurrent-service-syncs`.
    pub concurrency: u32,
    /// One Service of the same shape is provisioned first and not measured: the burst
    /// meets a running controller (account view read, job run times learnt), as every
    /// Service but the first of a process does.
    pub warm: bool,
}

impl BurstCase {
    /// The case's name for the bench's filter: `lb-burst-s20-p3-j50ms-c10`, with `-t25`
    /// when throttled, so `-- lb-burst-s1-` runs the single-Service cases only.
    pub fn filter_name(&self) -> String {
        let throttle = self.throttle.map(|t| format!("-t{t}")).unwrap_or_default();
        let warm = if self.warm { "-warm" } else { "" };
        format!(
            "{NAME}-s{}-p{}-j{}ms-c{}{throttle}{warm}",
            self.services,
            self.ports,
            self.job.as_millis(),
            self.concurrency
        )
    }
}

/// Index of the warm-up Service of a warm case (apart from the measured ones).
const WARM_UP: usize = 9999;

/// Backend VMs / Nodes of every burst.
const NODES: usize = 3;

/// Runs one burst and returns its rows.
pub async fn run(case: BurstCase) -> anyhow::Result<Vec<Row>> {
    let mut model = CloudModel::new(NODES).job(case.job);
    if let Some(rate) = case.throttle {
        model = model.throttled(rate);
    }
    let flags = Flags {
        concurrent_service_syncs: case.concurrency,
        service_resync_period: Duration::from_secs(3600),
        ..Flags::default()
    };
    let mut world = LbWorld::start(model, flags).await?;
    let d = case.job.as_secs_f64();
    let fewest = fewest_jobs(case.services, case.ports);
    let network_bound = fewest as f64 * d;
    let timeout = Duration::from_secs_f64(network_bound * 4.0 + 60.0);
    if case.warm {
        let warm_up = world.burst(WARM_UP..=WARM_UP, case.ports, timeout).await?;
        anyhow::ensure!(warm_up.complete(), "the warm-up Service got no ingress");
    }
    world.rig.sim.reset_counts();
    let burst = world.burst(1..=case.services, case.ports, timeout).await?;
    let calls = Calls::read(&world.rig.sim);
    let throttled = world
        .rig
        .sim
        .call_log()
        .iter()
        .filter(|c| c.status == 429)
        .count();
    let jobs = jobs_since(&world.rig.sim, burst.started_ms);
    if let Some(path) = std::env::var_os("SCALE_JOB_TRACE") {
        let mut path = std::path::PathBuf::from(path).into_os_string();
        path.push(format!(
            "-S{}-P{}-{}",
            case.services,
            case.ports,
            case.throttle
                .map_or("free".to_string(), |r| format!("{r}rps"))
        ));
        write_job_trace(&path, burst.started_ms, &jobs)?;
    }
    let alive = world.ccm.check_alive();
    let mut size = format!(
        "S={} P={} {} syncs={}{}",
        case.services,
        case.ports,
        model.label(),
        case.concurrency,
        if case.warm { " warm" } else { "" }
    );
    if case.throttle.is_none() {
        size = size.replace(" call=5ms", "");
    }
    let mut rows = Vec::new();
    if !burst.complete() {
        rows.push(Row::failed(
            NAME,
            &size,
            "all ingress set",
            format!(
                "{}/{} after {} ({}); calls {}; log {}",
                burst.ready.len(),
                burst.expected,
                secs(burst.elapsed.as_secs_f64()),
                alive.err().map(|e| format!("{e:#}")).unwrap_or_default(),
                calls.breakdown(),
                world.ccm.log.display()
            ),
        ));
        world.ccm.stop().await;
        return Ok(rows);
    }
    let (p50, p95, max) = (
        burst.quantile(0.5),
        burst.quantile(0.95),
        burst.quantile(1.0),
    );
    rows.push(
        Row::info(
            NAME,
            &size,
            "time to ingress p50 / p95 / max",
            format!("{p50:.2} / {p95:.2} / {max:.2} s"),
        )
        .with_value(max),
    );
    let chain = inherent_chain(&jobs);
    let critical = chain as f64 * d;
    let queue = queue_use(&jobs);
    rows.push(Row::info(
        NAME,
        &size,
        "jobs; longest chain; network queue busy",
        format!(
            "{} ({}; {} on the network queue); chain {} jobs; busy {:.0}% of {}",
            jobs.len(),
            job_breakdown(&jobs),
            queue.network_jobs,
            observed_chain(&jobs),
            100.0 * queue.busy_ms as f64 / queue.span_ms.max(1) as f64,
            secs(queue.span_ms as f64 / 1000.0)
        ),
    ));
    rows.push(Row::info(
        NAME,
        &size,
        "lower bounds: critical path / per-network",
        format!(
            "{} ({chain} jobs) / {} ({fewest} jobs); ratio {:.2} / {:.2}",
            secs(critical),
            secs(network_bound),
            max / critical,
            max / network_bound
        ),
    ));
    if case.services == 1 {
        let go = if case.ports == 3 && case.job == Duration::from_secs(1) {
            "10.1 s (10 jobs in sequence)"
        } else {
            ""
        };
        rows.push(
            Row::at_most(
                NAME,
                &size,
                "ready ≤ 1.2 × critical path",
                max,
                format!("{max:.2} s = {:.2} × CP", max / critical),
                1.2 * critical,
                format!("≤ {}", secs(1.2 * critical)),
            )
            .with_go(go),
        );
        if network_bound > critical {
            rows.push(Row::at_most(
                NAME,
                &size,
                "ready ≤ 1.2 × max(CP, per-network)",
                max,
                format!("{max:.2} s = {:.2} × bound", max / network_bound),
                1.2 * network_bound,
                format!("≤ {}", secs(1.2 * network_bound)),
            ));
        }
    } else if let Some(rate) = case.throttle {
        let accepted = calls.total() - throttled as u64;
        let call_bound = accepted as f64 / rate as f64;
        let bound = network_bound.max(call_bound);
        rows.push(Row::at_most(
            NAME,
            &size,
            "all ready ≤ 1.2 × max(net, calls/rate)",
            max,
            format!("{max:.2} s = {:.2} × bound", max / bound),
            1.2 * bound,
            format!(
                "≤ {} (accepted calls/{rate} = {})",
                secs(1.2 * bound),
                secs(call_bound)
            ),
        ));
    } else {
        let go = if case.services == 20 {
            "median 105 s, last 201 s (1 s jobs)"
        } else {
            ""
        };
        rows.push(
            Row::at_most(
                NAME,
                &size,
                "all ready ≤ 1.1 × per-network",
                max,
                format!("{max:.2} s = {:.2} × bound", max / network_bound),
                1.1 * network_bound,
                format!("≤ {}", secs(1.1 * network_bound)),
            )
            .with_go(go),
        );
        rows.push(Row::at_most(
            NAME,
            &size,
            "median ready ≤ 0.55 × per-network",
            p50,
            format!("{p50:.2} s = {:.2} × bound", p50 / network_bound),
            0.55 * network_bound,
            format!("≤ {}", secs(0.55 * network_bound)),
        ));
    }
    rows.push(
        Row::info(
            NAME,
            &size,
            "CloudStack calls (mutating / read)",
            format!(
                "{} ({} / {}); 429s {throttled}: {}",
                calls.total(),
                calls.mutating(),
                calls.reads(),
                calls.breakdown()
            ),
        )
        .with_value(calls.total() as f64),
    );
    world.ccm.stop().await;
    Ok(rows)
}

/// Writes one line per job (ms since the burst started: submitted, started, completed;
/// command, entity) for a look at the network queue's idle gaps
/// (`SCALE_JOB_TRACE=/tmp/jobs.txt cargo bench … -- lb-burst`).
fn write_job_trace(
    path: &std::ffi::OsStr,
    started_ms: u64,
    jobs: &[cloudstack_sim::jobs::Job],
) -> anyhow::Result<()> {
    use std::fmt::Write as _;
    let mut out = String::from("submitted started completed command entity\n");
    for job in jobs {
        let since = |ms: u64| ms.saturating_sub(started_ms);
        let _ = writeln!(
            out,
            "{:>6} {:>6} {:>6} {} {}{}",
            since(job.created_ms),
            since(job.start_ms),
            job.completed_ms.map(since).unwrap_or_default(),
            job.command,
            job.instance_id.as_deref().unwrap_or("-"),
            if job.network_id.is_some() {
                ""
            } else {
                " (not queued)"
            }
        );
    }
    std::fs::write(path, out)?;
    Ok(())
}
