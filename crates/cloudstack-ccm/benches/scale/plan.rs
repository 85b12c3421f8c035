//! Which scenarios run at which sizes, for the quick and the full run.

use crate::burst::BurstCase;
use crate::options::Options;
use crate::report::Row;
use crate::{burst, churn, idle, memory, nodes, print_scenario, steady};
use std::time::Duration;

/// `--concurrent-service-syncs` of the burst scenarios.
const BURST_SYNCS: u32 = 10;
/// Job duration of the single-Service cases (the reference: 1 s jobs).
const SLOW_JOB: Duration = Duration::from_secs(1);
/// Job duration of the bursts (bounds scale with it, ratios stay comparable).
const FAST_JOB: Duration = Duration::from_millis(50);
/// Throttling of the throttled bursts (CloudStack's default when enabled).
const THROTTLE: u64 = 25;

/// Runs every selected scenario in order and returns all rows.
pub async fn run_all(options: &Options) -> anyhow::Result<Vec<Row>> {
    let mut all = Vec::new();
    let mut record = |title: String, name: &str, result: anyhow::Result<Vec<Row>>| {
        let rows = scenario_rows(name, &title, result);
        print_scenario(&title, &rows);
        all.extend(rows);
    };
    let quick = options.quick;

    let init = options.selects("nodes-init");
    let refresh = options.selects("nodes-refresh");
    if init || refresh {
        let sizes: &[usize] = if quick {
            &[100, 1000]
        } else {
            &[100, 1000, 5000]
        };
        for &n in sizes {
            record(
                format!("nodes N={n}"),
                "nodes",
                nodes::run(n, refresh, init).await,
            );
        }
    }

    if options.selects("nodes-cold") {
        let sizes: &[usize] = if quick { &[100] } else { &[100, 1000] };
        for &n in sizes {
            record(
                format!("nodes-cold N={n}"),
                "nodes-cold",
                nodes::cold_start(n).await,
            );
        }
    }

    for case in burst_cases(quick) {
        if !options.selects(&case.filter_name()) {
            continue;
        }
        let title = format!(
            "lb-burst S={} P={} job={:?} throttle={:?}",
            case.services, case.ports, case.job, case.throttle
        );
        record(title, "lb-burst", burst::run(case).await);
    }

    if options.selects("lb-steady") {
        let (services, sizes, resync): (usize, &[usize], u64) = if quick {
            (20, &[3, 100], 6)
        } else {
            (500, &[3, 1000], 40)
        };
        for &n in sizes {
            let title = format!("lb-steady S={services} N={n}");
            let result = steady::run(services, n, Duration::from_secs(resync)).await;
            record(title, "lb-steady", result);
        }
    }

    if options.selects("lb-churn") {
        let (services, nodes) = if quick { (10, 5) } else { (100, 10) };
        let title = format!("lb-churn S={services} N={nodes}");
        record(title, "lb-churn", churn::run(services, nodes).await);
    }

    if options.selects("idle") {
        let window = Duration::from_secs(if quick { 20 } else { 120 });
        for &(nodes, services) in &[(100, 20), (1000, 20)] {
            if quick && nodes > 100 {
                continue;
            }
            let title = format!("idle N={nodes} S={services}");
            record(title, "idle", idle::run(nodes, services, window).await);
        }
    }

    // `memory` runs every size, `memory-n1000` only the 1000-Node one.
    let memory_sizes: &[(usize, usize)] = if quick {
        &[(500, 50)]
    } else {
        &[(1000, 20), (5000, 1000)]
    };
    for &(nodes, services) in memory_sizes {
        if options.selects(&format!("memory-n{nodes}")) {
            let title = format!("memory N={nodes} S={services}");
            record(title, "memory", memory::run(nodes, services).await);
        }
    }
    Ok(all)
}

/// The burst sizes: S = 1 with 1 s jobs; bursts with 50 ms jobs, with and without throttling.
fn burst_cases(quick: bool) -> Vec<BurstCase> {
    let case = |services, ports, job, throttle| BurstCase {
        services,
        ports,
        job,
        throttle,
        concurrency: BURST_SYNCS,
        warm: false,
    };
    let mut cases = vec![
        case(1, 3, SLOW_JOB, None),
        BurstCase {
            warm: true,
            ..case(1, 3, SLOW_JOB, None)
        },
    ];
    if !quick {
        cases.insert(0, case(1, 1, SLOW_JOB, None));
        // The reference burst: 20 three-port Services at once with 1 s jobs.
        cases.push(case(20, 3, SLOW_JOB, None));
    }
    let bursts: &[usize] = if quick { &[10] } else { &[20, 50, 200] };
    for &services in bursts {
        for ports in [1, 3] {
            if quick && ports == 1 {
                continue;
            }
            cases.push(case(services, ports, FAST_JOB, None));
        }
    }
    if !quick {
        // How --concurrent-service-syncs shapes a burst (1 = the Go default).
        for concurrency in [1, 50] {
            cases.push(BurstCase {
                concurrency,
                ..case(50, 3, FAST_JOB, None)
            });
        }
    }
    let throttled: &[usize] = if quick { &[10] } else { &[50, 200] };
    for &services in throttled {
        cases.push(case(services, 3, FAST_JOB, Some(THROTTLE)));
    }
    cases
}

/// The rows of a scenario, or one failed row naming the error.
fn scenario_rows(name: &str, title: &str, result: anyhow::Result<Vec<Row>>) -> Vec<Row> {
    result.unwrap_or_else(|e| vec![Row::failed(name, title, "run", format!("{e:#}"))])
}
