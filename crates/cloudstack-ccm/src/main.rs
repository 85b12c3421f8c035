//! `cloudstack-ccm`: parses flags, loads the cloud-config, connects to CloudStack and
//! Kubernetes, serves health and metrics, and runs the controllers while leading.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use cloudstack_ccm::cli::{Cli, Command, LogFormat, ManagerArgs, log_directives};
use cloudstack_ccm::config::CloudConfig;
use cloudstack_ccm::connect;
use cloudstack_ccm::controllers::{self, Context, ControllerSet, Shutdown, shutdown_channel};
use cloudstack_ccm::leader::{
    ElectionState, LeaderElector, LeaderStatus, LeaseConfig, Outcome, Term, default_identity,
};
use cloudstack_ccm::metrics::Metrics;
use cloudstack_ccm::server::{self, Readiness, ServerState};

fn main() -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let parsed = match Cli::parse_with_warnings(std::env::args_os()) {
        Ok(parsed) => parsed,
        Err(error) => return usage_error(error),
    };
    let args = parsed.cli.manager;
    match parsed.cli.command {
        #[cfg(feature = "demo")]
        Some(Command::Demo(demo)) if demo.vpc => {
            return run_tool(async move {
                cloudstack_ccm::demo::vpc::run(&demo, std::io::stdout().lock()).await?;
                Ok(())
            });
        }
        #[cfg(feature = "demo")]
        Some(Command::Demo(demo)) => {
            return run_tool(async move {
                cloudstack_ccm::demo::run(&demo, std::io::stdout().lock()).await?;
                Ok(())
            });
        }
        #[cfg(not(feature = "demo"))]
        Some(Command::Demo(_)) => {
            return fail(anyhow::anyhow!(
                "this build has no demo: it was built without the `demo` feature (the image ships the controller manager only); run the demo from a default build"
            ));
        }
        Some(Command::Plan(_)) => {
            init_tracing(&args);
            return run_tool(async move {
                let report =
                    cloudstack_ccm::dry_run::run(&args, &mut std::io::stdout().lock()).await?;
                match report.failed() {
                    0 => Ok(()),
                    n => Err(anyhow::anyhow!("{n} Service(s) could not be planned")),
                }
            });
        }
        Some(Command::Check(check)) => {
            init_tracing(&args);
            // Exit status: 0 ready, 1 works with warnings, 2 will not work (a check that
            // cannot run at all is a 2 too).
            let report = runtime().and_then(|runtime| {
                runtime
                    .block_on(cloudstack_ccm::check::run(
                        &args,
                        &check,
                        &mut std::io::stdout().lock(),
                    ))
                    .map_err(anyhow::Error::from)
            });
            return match report {
                Ok(report) => ExitCode::from(u8::try_from(report.exit_code()).unwrap_or(2)),
                Err(error) => {
                    fail(error);
                    ExitCode::from(2)
                }
            };
        }
        Some(Command::Orphans(orphans)) => {
            init_tracing(&args);
            return run_tool(async move {
                let report = cloudstack_ccm::orphans::run(
                    &args,
                    orphans.delete,
                    &mut std::io::stdout().lock(),
                )
                .await?;
                match report.failed() {
                    0 => Ok(()),
                    n => Err(anyhow::anyhow!("{n} orphan(s) could not be deleted")),
                }
            });
        }
        None => {}
    }
    init_tracing(&args);
    for warning in &parsed.warnings {
        tracing::warn!("{warning}");
    }
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(error) => return fail(error),
    };
    match runtime.block_on(run_manager(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(error),
    }
}

/// Runs a subcommand to completion on a fresh runtime.
fn run_tool(tool: impl std::future::Future<Output = anyhow::Result<()>>) -> ExitCode {
    let result = runtime().and_then(|runtime| runtime.block_on(tool));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(error),
    }
}

/// Worker threads of the async runtime unless `TOKIO_WORKER_THREADS` says otherwise. The
/// controller manager waits on the network far more than it computes: on a node with many
/// cores, a worker per core (the runtime's default) adds memory (each worker's stack and
/// allocator arena), not speed. Scale bench `idle`, 100 Nodes / 20 Services: 16 workers
/// held 17.4 MiB at rest, 2 workers 16.1 MiB, at the same CPU.
const MAX_WORKER_THREADS: usize = 2;

/// The multi-threaded async runtime every command runs on, with at most
/// [`MAX_WORKER_THREADS`] workers (fewer on fewer cores) unless `TOKIO_WORKER_THREADS`
/// is set.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    if std::env::var_os("TOKIO_WORKER_THREADS").is_none() {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
        builder.worker_threads(cores.min(MAX_WORKER_THREADS));
    }
    builder
        .build()
        .map_err(|error| anyhow::anyhow!("cannot start the async runtime: {error}"))
}

/// Prints `--help` and `--version` as clap does; any other command-line error as one
/// line naming the flag, with clap's usage-error exit code 2.
fn usage_error(error: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        error.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        error.exit();
    }
    let rendered = error.render().to_string();
    let line = rendered
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("invalid command line");
    let line = line.strip_prefix("error: ").unwrap_or(line);
    eprintln!("cloudstack-ccm: error: {line} (see --help)");
    ExitCode::from(2)
}

/// Prints `error` as one line and returns failure.
fn fail(error: anyhow::Error) -> ExitCode {
    eprintln!("cloudstack-ccm: error: {}", one_line(&error));
    ExitCode::FAILURE
}

/// The cause chain joined with `: `, leaving out a cause whose text the message before it
/// already carries (several error types include their source in their own message).
fn one_line(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let text = cause.to_string().replace('\n', " ");
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// Logs to stderr: text (coloured only on a terminal and without `NO_COLOR`) or JSON.
fn init_tracing(args: &ManagerArgs) {
    use std::io::IsTerminal as _;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(log_directives(args.verbosity)));
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr);
    match args.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

async fn run_manager(args: ManagerArgs) -> anyhow::Result<()> {
    args.validate()?;
    let (enabled, warnings) = ControllerSet::parse(&args.controllers)?;
    let config = CloudConfig::load(args.cloud_config.as_deref(), |name| {
        std::env::var(name).ok()
    })?;
    for warning in warnings {
        tracing::warn!("{warning}");
    }
    tracing::info!(version = env!("CARGO_PKG_VERSION"), controllers = %enabled, "starting cloudstack-ccm");

    let metrics = Arc::new(Metrics::new());
    let cloudstack = connect::cloudstack_client(&config, metrics.clone())?;
    let kube = connect::kube_client(&args).await?;

    let status = LeaderStatus::new().with_metrics(metrics.clone());
    let readiness = Readiness::new(status.clone());
    let (trigger, shutdown) = shutdown_channel();
    // Node initialisation runs first and alone; the reloader's account read waits for it.
    let first_node_pass = controllers::FirstNodePass::new();
    cloudstack_ccm::reload::spawn(
        args.cloud_config.as_deref(),
        &config,
        &cloudstack,
        &metrics,
        shutdown.clone(),
        first_node_pass.clone(),
    );
    let addr = SocketAddr::new(args.bind_address, args.secure_port);
    let security = server::Security::from_args(&args.serving, args.bind_address, &kube)
        .await
        .map_err(anyhow::Error::msg)?;
    let listener = server::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    tracing::info!(address = %listener.local_addr()?, scheme = security.scheme(), "serving /healthz, /readyz, /livez and /metrics");
    let server_state = ServerState {
        metrics: metrics.clone(),
        readiness: readiness.clone(),
    };
    let server_shutdown = shutdown.clone();
    let server = tokio::spawn(server::serve_secured(
        listener,
        server_state,
        server::ServerLimits::default(),
        security,
        async move { server_shutdown.wait().await },
    ));
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("received a termination signal; shutting down");
        trigger.trigger();
        // Keep the trigger alive: dropping it would look like a second signal to nobody.
        std::future::pending::<()>().await;
    });

    // CloudStack away at start-up (an upgrade, a blip) is waited out with /healthz served
    // and /readyz not ready; new keys in the cloud-config are adopted meanwhile.
    // A cloud-config CloudStack refuses (a certificate, a zone) ends the process; a
    // CloudStack that cannot be asked now is waited for, with /healthz served.
    let detected = match connect::contact_cloudstack(&config, &cloudstack).await {
        Ok(version) => version,
        Err(error) => {
            match connect::wait_for_cloudstack(&config, &cloudstack, shutdown.wait(), error).await?
            {
                Some(version) => version,
                None => {
                    server.abort();
                    return Ok(());
                }
            }
        }
    };
    let server_version = detected.version;
    tracing::info!(%server_version, "CloudStack version {server_version} {}", detected.source);
    let ctx = Arc::new(
        Context::new(
            kube.clone(),
            cloudstack,
            server_version,
            config,
            args.cluster_name.clone(),
            metrics,
        )
        .with_args(&args)
        .with_readiness(readiness),
    );
    // Built once: a lost lease stops the controllers, and the next term starts them again
    // on what they had learnt (another leader in between makes it read CloudStack again).
    let caches = controllers::Caches {
        first_node_pass,
        ..controllers::Caches::for_context(&ctx)
    };
    let result = if args.leader_elect {
        run_elected(&args, kube, status, ctx, caches, enabled, shutdown.clone()).await
    } else {
        tracing::info!("leader election disabled; starting controllers");
        status.set(ElectionState::Leading);
        controllers::run_on(ctx, caches, enabled, shutdown.clone()).await
    };
    server.abort();
    result
}

async fn run_elected(
    args: &ManagerArgs,
    kube: kube::Client,
    status: LeaderStatus,
    ctx: Arc<Context>,
    caches: controllers::Caches,
    enabled: ControllerSet,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let config = LeaseConfig {
        lease_duration: args.leader_elect_lease_duration,
        renew_deadline: args.leader_elect_renew_deadline,
        retry_period: args.leader_elect_retry_period,
        ..LeaseConfig::new(
            args.leader_elect_resource_namespace.clone(),
            args.leader_elect_resource_name.clone(),
            default_identity(),
        )
    };
    let elector = LeaderElector::new(kube, config, status);
    let controllers_shutdown = shutdown.clone();
    let lead = move |term: Term| {
        if !term.continued {
            caches.service.forget_observed();
        }
        controllers::run_on(
            ctx.clone(),
            caches.clone(),
            enabled,
            controllers_shutdown.clone(),
        )
    };
    match elector.run(lead, shutdown.wait()).await {
        Outcome::Finished(result) => result,
        Outcome::ShutdownWhileStandby | Outcome::Abandoned => Ok(()),
    }
}

async fn wait_for_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut stream) => {
                stream.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = terminate => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        let inner = anyhow::anyhow!("listCapabilities: CloudStack error 401");
        let error =
            inner.context("cannot detect the version: listCapabilities: CloudStack error 401");
        assert_eq!(
            one_line(&error),
            "cannot detect the version: listCapabilities: CloudStack error 401"
        );
        let error = anyhow::anyhow!("connection refused").context("cannot reach CloudStack");
        assert_eq!(
            one_line(&error),
            "cannot reach CloudStack: connection refused"
        );
    }
}
