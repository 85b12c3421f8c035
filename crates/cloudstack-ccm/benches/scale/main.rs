//! Scale benchmark of the controller manager: CloudStack call budget, load-balancer
//! latency, scale and memory.
//!
//! ```text
//! cargo bench -p cloudstack-ccm --bench scale                    # full run
//! cargo bench -p cloudstack-ccm --bench scale -- --quick         # smoke run (~2 min)
//! cargo bench -p cloudstack-ccm --bench scale -- lb --json out.json
//! ```
//!
//! Every scenario starts the CloudStack simulator and the fake Kubernetes API server in
//! this process and runs the real `cloudstack-ccm` binary as a child process against them.
//! Calls are read from the simulator's counters and call log, Kubernetes state from the
//! fake API server's store, memory and CPU from `/proc/<pid>` of the child. Each scenario
//! prints a table: measured value, target, pass/miss, and the Go CCM's number where
//! DESIGN.md §3 gives one. See docs/performance.md.

mod burst;
mod calls;
mod ccm;
mod churn;
mod cloud;
mod idle;
mod memory;
mod nodes;
mod options;
mod plan;
mod report;
mod rig;
mod services;
mod steady;

use options::Options;
use report::Row;

fn main() -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let options = Options::parse(std::env::args().skip(1))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let rows = runtime.block_on(plan::run_all(&options))?;
    if let Some(path) = &options.json {
        let command = std::env::args().collect::<Vec<_>>().join(" ");
        let document = report::to_json(&rows, &command, options.quick);
        std::fs::write(path, serde_json::to_string_pretty(&document)?)?;
        println!("wrote {}", path.display());
    }
    let missed = rows
        .iter()
        .filter(|r| r.verdict != report::Verdict::Pass && r.verdict != report::Verdict::Info)
        .count();
    println!("\n## All results\n\n{}", report::table(&rows));
    println!("{missed} row(s) missed a target or failed");
    Ok(())
}

/// Prints one scenario's rows as a table as soon as it has run.
fn print_scenario(title: &str, rows: &[Row]) {
    println!("\n## {title}\n\n{}", report::table(rows));
}
