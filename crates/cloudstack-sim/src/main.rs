//! `cloudstack-sim`: run the CloudStack API simulator.

use anyhow::Context as _;
use clap::Parser;
use cloudstack_sim::{Scenario, SimOptions, SimServer, Version};
use std::net::SocketAddr;
use std::path::PathBuf;

const ABOUT: &str = "Apache CloudStack management-server API simulator.

Serves the signed CloudStack API at http://LISTEN/client/api (GET or POST form, response=json)
for the commands a Kubernetes cloud controller manager uses: VMs, zones, networks, projects,
public IPs, load-balancer rules and members, firewall rules, network ACLs, tags, LB policies,
async jobs (queryAsyncJobResult, listAsyncJobs), listCapabilities, listApis and listAccounts.
Signatures are verified like the real server (HMAC-SHA1, signatureVersion=3 + expires).";

const AFTER: &str = "Introspection and fault injection (JSON, unauthenticated, under /sim):
  GET  /sim/counts              calls per command
  GET  /sim/calls               call log (time, command, account, status, error, job)
  POST /sim/reset               clear counters and call log
  GET  /sim/dump                whole state: IPs, rules, firewall rules, ACL items, members, tags, jobs
  GET  /sim/jobs                jobs with queue times (start_ms, finish_ms, completed_ms)
  GET  /sim/faults, PUT /sim/faults
       {\"errors\": {\"listVirtualMachines\": {\"rate\": 0.5, \"code\": 530, \"text\": \"boom\"}},
        \"latency_ms\": {\"*\": 20}, \"job_failure_rate\": 0.1, \"job_never_finish_rate\": 0.0}
  PUT  /sim/job-duration        {\"ms\": 1000}
  POST /sim/vms                 a VM like a scenario [[vm]] entry (JSON) -> {\"id\"}
  DELETE /sim/vms/ID            expunge a VM
  POST /sim/vms/ID/destroy      destroy a VM without expunging it
  POST /sim/vms/ID/stop, /sim/vms/ID/start, PUT /sim/vms/ID/state {\"state\": \"Stopped\"}

Without --scenario the built-in small scenario runs (zone1, networks net-vr, net-ns, VPC tier
tier1, VMs node-1..3, accounts alice/bob (users) and admin (root admin)); its keys are printed.
Example scenario: examples/sim/small.toml. Logs every call with RUST_LOG (default info).";

/// Command-line flags.
#[derive(Parser, Debug)]
#[command(name = "cloudstack-sim", about = ABOUT, long_about = ABOUT, after_help = AFTER, disable_version_flag = true)]
struct Cli {
    /// Scenario file (TOML); the built-in small scenario when absent.
    #[arg(long)]
    scenario: Option<PathBuf>,
    /// Listen address.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Persist state here after every change and reload it on start.
    #[arg(long)]
    state_file: Option<PathBuf>,
    /// Emulated CloudStack version (e.g. 4.15, 4.18, 4.19, 4.22), overriding the scenario's.
    #[arg(long)]
    version: Option<String>,
    /// Async job duration (e.g. 1s, 300ms), overriding the scenario's.
    #[arg(long, value_parser = humantime::parse_duration)]
    job_duration: Option<std::time::Duration>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let cli = Cli::parse();
    let builtin = cli.scenario.is_none();
    let mut scenario = match &cli.scenario {
        Some(path) => Scenario::load(path)?,
        None => Scenario::small(),
    };
    if let Some(v) = &cli.version {
        scenario.version = Version::parse(v)
            .map_err(anyhow::Error::msg)
            .context("--version")?;
    }
    if let Some(d) = cli.job_duration {
        scenario.settings.job_duration_ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    }
    let sim = SimServer::start_with(
        scenario.clone(),
        SimOptions {
            listen: cli.listen,
            state_file: cli.state_file.clone(),
        },
    )
    .await?;
    println!("CloudStack simulator {} listening", scenario.version);
    println!("API URL:   {}", sim.api_url());
    println!("Admin URL: {}", sim.admin_url());
    if builtin {
        for account in &scenario.accounts {
            println!(
                "account {} ({:?}): api key {} secret key {}",
                account.name,
                account.role,
                account.api_key.expose(),
                account.secret_key.expose()
            );
        }
    }
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    sim.shutdown();
    Ok(())
}
