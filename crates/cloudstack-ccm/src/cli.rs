//! Command-line flags, compatible with the Kubernetes cloud controller manager conventions
//! and with what CKS and the Go `external-cloudstack` deployment pass.
//!
//! Without a subcommand the binary runs the controller manager. Flags of the framework
//! that do not apply here are accepted and ignored with a warning (see [`ignored`]).

mod check;
pub mod ignored;
pub mod serving;
pub mod values;

use std::ffi::OsString;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};

pub use check::{CheckArgs, CheckOutput};

use crate::cloud::cidr::Cidr;
use values::{parse_duration, parse_go_bool};

/// The provider name the binary answers to (`--cloud-provider`), also the scheme of the
/// providerIDs it writes.
pub use crate::cloud::provider_id::PROVIDER_NAME;

/// The only supported `--leader-elect-resource-lock`.
pub(crate) const LEASE_LOCK: &str = "leases";

const AFTER_HELP: &str = "Flags of the Kubernetes cloud controller manager framework that do not apply \
(--cidr-allocator-type, --node-cidr-mask-size, --use-service-account-credentials, \
--profiling, --kube-api-qps, ...) are accepted \
and ignored with a warning. See docs/configuration.md.";

/// The command line.
#[derive(Debug, Parser)]
#[command(name = "cloudstack-ccm", version, about = "Kubernetes cloud controller manager for Apache CloudStack", after_help = AFTER_HELP)]
pub struct Cli {
    /// A tool to run instead of the controller manager.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// The controller manager's flags.
    #[command(flatten)]
    pub manager: ManagerArgs,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a self-contained demonstration against a simulated CloudStack and API server.
    Demo(DemoArgs),
    /// Print the load-balancer and route changes that would be made, without making them.
    Plan(PlanArgs),
    /// List CloudStack objects tagged for this cluster whose Service or Node is gone.
    Orphans(OrphansArgs),
    /// Check, before deploying, whether the controller will work here and what to fix:
    /// CloudStack (endpoint, keys, what they may call, version, project, zone), the Nodes'
    /// networks, the controller's RBAC and Lease, and a feature table. Only read-only calls,
    /// counted and printed at the end. Exit status 0 ready, 1 works with warnings, 2 will
    /// not work.
    Check(CheckArgs),
}

/// Arguments of `cloudstack-ccm demo`.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// After creating and changing the Service, keep both servers and the controllers
    /// running (instead of deleting it) and print commands to poke them; Ctrl-C stops.
    #[arg(long)]
    pub serve: bool,
    /// Give up when the scenario has not converged after this long.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Show routed pod networks instead: Nodes on a VPC tier get static routes.
    #[arg(long, conflicts_with = "serve")]
    pub vpc: bool,
}

impl Default for DemoArgs {
    fn default() -> Self {
        DemoArgs {
            serve: false,
            timeout: Duration::from_secs(60),
            vpc: false,
        }
    }
}

/// Arguments of `cloudstack-ccm plan`.
#[derive(Debug, Clone, Default, Args)]
pub struct PlanArgs {}

/// Arguments of `cloudstack-ccm orphans`.
#[derive(Debug, Clone, Default, Args)]
pub struct OrphansArgs {
    /// Delete the orphans (never an address the user brought or may have kept).
    #[arg(long)]
    pub delete: bool,
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Flags of the controller manager. They are global: accepted before and after a
/// subcommand (`plan --cloud-config …` reads the same flags as `--cloud-config … plan`).
#[derive(Debug, Clone, Args)]
pub struct ManagerArgs {
    /// Cloud provider name; must be external-cloudstack.
    #[arg(global = true, long, value_name = "NAME", default_value = PROVIDER_NAME, value_parser = parse_provider)]
    pub cloud_provider: String,

    /// Path to the cloud-config file (gcfg, `[Global]` section).
    #[arg(global = true, long, value_name = "PATH")]
    pub cloud_config: Option<PathBuf>,

    /// Path to a kubeconfig file (default: in-cluster, then $KUBECONFIG / ~/.kube/config).
    #[arg(global = true, long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// Address of the Kubernetes API server (overrides the kubeconfig's server).
    #[arg(global = true, long, value_name = "URL")]
    pub master: Option<String>,

    /// Controllers to run: '*' for all, a name to enable, '-name' to disable.
    /// Names: cloud-node, cloud-node-lifecycle, service, route.
    #[arg(
        global = true,
        long,
        value_name = "NAMES",
        allow_hyphen_values = true,
        value_delimiter = ',',
        default_value = "*"
    )]
    pub controllers: Vec<String>,

    /// Cluster name, used to tag and name cloud resources.
    #[arg(global = true, long, value_name = "NAME", default_value = "kubernetes")]
    pub cluster_name: String,

    /// Number of Services reconciled at the same time.
    #[arg(global = true, long, value_name = "N", default_value = "1")]
    pub concurrent_service_syncs: NonZeroU32,

    /// How often node addresses are refreshed from CloudStack.
    #[arg(global = true, long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    pub node_status_update_frequency: Duration,

    /// How often NotReady nodes are checked against CloudStack (deleted or shut-down VMs).
    #[arg(global = true, long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub node_monitor_period: Duration,

    /// How often every LoadBalancer Service is reconciled even without a change.
    #[arg(global = true, long, value_name = "DURATION", default_value = "100s", value_parser = parse_duration)]
    pub service_resync_period: Duration,

    /// Only handle Services with this spec.loadBalancerClass (besides Services without a class).
    #[arg(global = true, long, value_name = "CLASS")]
    pub load_balancer_class: Option<String>,

    /// Run leader election; only the leader runs controllers.
    #[arg(global = true, long, value_name = "BOOL", action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_value = "true", default_missing_value = "true", value_parser = parse_go_bool)]
    pub leader_elect: bool,

    /// How long a lease is valid without renewal.
    #[arg(global = true, long, value_name = "DURATION", default_value = "15s", value_parser = parse_duration)]
    pub leader_elect_lease_duration: Duration,

    /// How long the leader keeps trying to renew before it steps down.
    #[arg(global = true, long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub leader_elect_renew_deadline: Duration,

    /// Interval between acquire and renew attempts.
    #[arg(global = true, long, value_name = "DURATION", default_value = "2s", value_parser = parse_duration)]
    pub leader_elect_retry_period: Duration,

    /// Name of the Lease object.
    #[arg(
        global = true,
        long,
        value_name = "NAME",
        default_value = "cloud-controller-manager"
    )]
    pub leader_elect_resource_name: String,

    /// Namespace of the Lease object.
    #[arg(
        global = true,
        long,
        value_name = "NAMESPACE",
        default_value = "kube-system"
    )]
    pub leader_elect_resource_namespace: String,

    /// Lock type; only 'leases' is supported.
    #[arg(global = true, long, value_name = "TYPE", default_value = LEASE_LOCK, value_parser = parse_lock)]
    pub leader_elect_resource_lock: String,

    /// Address of the /healthz, /readyz and /metrics server (HTTPS).
    #[arg(global = true, long, value_name = "IP", default_value = "0.0.0.0")]
    pub bind_address: IpAddr,

    /// Port of the /healthz, /readyz and /metrics server (0 = pick a free port).
    #[arg(global = true, long, value_name = "PORT", default_value = "10258")]
    pub secure_port: u16,

    /// HTTPS, delegated authentication and authorization of that server.
    #[command(flatten)]
    pub serving: serving::ServingArgs,

    /// Log verbosity: 0 info, 2 debug for this program, 4 debug for all, 6 trace.
    #[arg(global = true, short = 'v', long = "v", value_name = "LEVEL", default_value = "0",
          value_parser = clap::value_parser!(u8).range(0..=10))]
    pub verbosity: u8,

    /// Log format.
    #[arg(
        global = true,
        long,
        alias = "logging-format",
        value_name = "FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub log_format: LogFormat,

    // Routes and orphans.
    /// Create VPC static routes for the Nodes' pod CIDRs (the route controller; it also
    /// needs --allocate-node-cidrs, VPC tiers and CloudStack 4.22).
    #[arg(long, global = true, value_name = "BOOL", action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_value = "true", default_missing_value = "true", value_parser = parse_go_bool)]
    pub configure_cloud_routes: bool,

    /// The Nodes get pod CIDRs (allocated by kube-controller-manager); as in Kubernetes, the
    /// route controller runs only when this is set.
    #[arg(long, global = true, value_name = "BOOL", action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true", value_parser = parse_go_bool)]
    pub allocate_node_cidrs: bool,

    /// CIDR range(s) of the pods (comma-separated); routes tagged for this cluster outside
    /// them are left alone.
    #[arg(long, global = true, value_name = "CIDRS", value_delimiter = ',', value_parser = parse_cidr)]
    pub cluster_cidr: Vec<Cidr>,

    /// How often the route controller reconciles every route.
    #[arg(long, global = true, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub route_reconciliation_period: Duration,

    /// Let the service controller delete the orphans it counts on its periodic pass.
    #[arg(long, global = true, value_name = "BOOL", action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true", value_parser = parse_go_bool)]
    pub delete_orphans: bool,
}

fn parse_cidr(text: &str) -> Result<Cidr, String> {
    match Cidr::parse(text) {
        Some(cidr) if text.contains('/') => Ok(cidr),
        _ => Err(format!("{text:?} is not a CIDR (example: 10.244.0.0/16)")),
    }
}

fn parse_provider(text: &str) -> Result<String, String> {
    if text == PROVIDER_NAME {
        Ok(text.to_owned())
    } else {
        Err(format!(
            "unsupported cloud provider {text:?}: this controller manager is {PROVIDER_NAME:?}"
        ))
    }
}

fn parse_lock(text: &str) -> Result<String, String> {
    if text == LEASE_LOCK {
        Ok(text.to_owned())
    } else {
        Err(format!(
            "unsupported resource lock {text:?}: only {LEASE_LOCK:?} is supported"
        ))
    }
}

/// A parsed command line and the warnings about ignored flags.
#[derive(Debug)]
pub struct ParsedCli {
    /// The flags.
    pub cli: Cli,
    /// One message per ignored flag, naming it.
    pub warnings: Vec<String>,
}

impl Cli {
    /// Parses `args` (program name first), removing ignored framework flags first.
    pub fn parse_with_warnings(
        args: impl IntoIterator<Item = OsString>,
    ) -> Result<ParsedCli, clap::Error> {
        let (kept, removed) = ignored::strip_ignored(args);
        let cli = Cli::try_parse_from(kept)?;
        let warnings = removed
            .into_iter()
            .map(|flag| format!("flag {flag} does not apply to the CloudStack cloud controller manager and is ignored"))
            .collect();
        Ok(ParsedCli { cli, warnings })
    }
}

/// An inconsistent combination of flags.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FlagError(pub String);

impl ManagerArgs {
    /// Checks what single-flag parsing cannot: the leader-election timings must satisfy
    /// lease duration > renew deadline > 1.2 × retry period (as client-go requires).
    pub fn validate(&self) -> Result<(), FlagError> {
        if self.leader_elect_lease_duration <= self.leader_elect_renew_deadline {
            return Err(FlagError(
                "--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline"
                    .into(),
            ));
        }
        if self.leader_elect_renew_deadline.as_secs_f64()
            <= self.leader_elect_retry_period.as_secs_f64() * 1.2
        {
            return Err(FlagError(
                "--leader-elect-renew-deadline must be greater than 1.2 × --leader-elect-retry-period".into(),
            ));
        }
        if self.leader_elect_retry_period.is_zero() {
            return Err(FlagError(
                "--leader-elect-retry-period must be greater than zero".into(),
            ));
        }
        if self.node_monitor_period.is_zero() || self.node_status_update_frequency.is_zero() {
            return Err(FlagError(
                "--node-monitor-period and --node-status-update-frequency must be greater than zero".into(),
            ));
        }
        Ok(())
    }
}

/// The `tracing` filter for a `-v` level: 0–1 info; 2–3 also debug for this program and
/// the CloudStack client; 4–5 debug for everything; 6 and up trace. Below 4 the TLS
/// verifier's own error lines are left out: the failed call's error names the
/// certificate problem once.
pub fn log_directives(verbosity: u8) -> &'static str {
    match verbosity {
        0..=1 => "info,rustls_platform_verifier=off",
        2..=3 => "info,cloudstack_ccm=debug,cloudstack=debug,rustls_platform_verifier=off",
        4..=5 => "debug",
        _ => "trace",
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;
    use std::time::Duration;

    use super::{Cli, Command, LogFormat, log_directives};

    fn parse(args: &[&str]) -> Result<super::ParsedCli, clap::Error> {
        Cli::parse_with_warnings(
            std::iter::once("cloudstack-ccm")
                .chain(args.iter().copied())
                .map(OsString::from),
        )
    }

    #[test]
    fn every_flag_of_the_controller_manager_is_accepted_after_a_subcommand() {
        use clap::CommandFactory;
        let command = Cli::command();
        let local: Vec<&str> = command
            .get_arguments()
            .filter(|arg| !arg.is_global_set())
            .map(|arg| arg.get_id().as_str())
            .filter(|id| !matches!(*id, "help" | "version"))
            .collect();
        assert!(local.is_empty(), "flags not global: {local:?}");
        let parsed = parse(&[
            "plan",
            "--allocate-node-cidrs=true",
            "--cluster-cidr=10.244.0.0/16",
            "--route-reconciliation-period=30s",
            "--configure-cloud-routes=false",
            "--delete-orphans",
        ])
        .expect("route and orphan flags after plan");
        assert!(parsed.cli.manager.allocate_node_cidrs && parsed.cli.manager.delete_orphans);
        assert_eq!(
            parsed.cli.manager.route_reconciliation_period,
            Duration::from_secs(30)
        );
    }

    #[test]
    fn cks_arguments_parse() {
        let parsed = parse(&[
            "--cloud-provider=external-cloudstack",
            "--cloud-config=/config/cloud-config",
            "--leader-elect=true",
        ])
        .unwrap();
        let args = parsed.cli.manager;
        assert!(parsed.cli.command.is_none());
        assert!(parsed.warnings.is_empty());
        assert_eq!(
            args.cloud_config.as_deref(),
            Some(std::path::Path::new("/config/cloud-config"))
        );
        assert!(args.leader_elect);
        assert_eq!(args.leader_elect_lease_duration, Duration::from_secs(15));
        assert_eq!(args.leader_elect_renew_deadline, Duration::from_secs(10));
        assert_eq!(args.leader_elect_retry_period, Duration::from_secs(2));
        assert_eq!(args.leader_elect_resource_name, "cloud-controller-manager");
        assert_eq!(args.leader_elect_resource_namespace, "kube-system");
        assert_eq!(args.node_status_update_frequency, Duration::from_secs(300));
        assert_eq!(args.node_monitor_period, Duration::from_secs(5));
        assert_eq!(args.secure_port, 10258);
        assert_eq!(args.cluster_name, "kubernetes");
        assert_eq!(args.concurrent_service_syncs.get(), 1);
        assert_eq!(args.controllers, ["*"]);
        assert_eq!(args.log_format, LogFormat::Text);
        args.validate().unwrap();
    }

    #[test]
    fn go_style_bools() {
        for (flag, want) in [
            ("--leader-elect", true),
            ("--leader-elect=false", false),
            ("--leader-elect=0", false),
            ("--leader-elect=True", true),
        ] {
            assert_eq!(
                parse(&[flag]).unwrap().cli.manager.leader_elect,
                want,
                "{flag}"
            );
        }
        assert!(parse(&[]).unwrap().cli.manager.leader_elect, "default true");
        assert!(parse(&["--leader-elect=maybe"]).is_err());
    }

    #[test]
    fn durations_and_verbosity() {
        let args = parse(&[
            "--leader-elect-lease-duration=2m0s",
            "--leader-elect-renew-deadline",
            "1h30m",
            "--node-monitor-period=500ms",
            "-v=4",
        ])
        .unwrap()
        .cli
        .manager;
        assert_eq!(args.leader_elect_lease_duration, Duration::from_secs(120));
        assert_eq!(args.leader_elect_renew_deadline, Duration::from_secs(5400));
        assert_eq!(args.node_monitor_period, Duration::from_millis(500));
        assert_eq!(args.verbosity, 4);
        assert_eq!(parse(&["--v=2"]).unwrap().cli.manager.verbosity, 2);
        assert_eq!(parse(&["-v", "6"]).unwrap().cli.manager.verbosity, 6);
        assert!(parse(&["--v=11"]).is_err());
        assert!(parse(&["--node-monitor-period=soon"]).is_err());
    }

    #[test]
    fn ignored_flags_warn_by_name() {
        let parsed = parse(&[
            "--cloud-provider=external-cloudstack",
            "--node-cidr-mask-size=24",
            "--use-service-account-credentials",
            "--authentication-skip-lookup",
            "--requestheader-uid-headers",
            "X-Remote-Uid",
        ])
        .unwrap();
        assert_eq!(parsed.warnings.len(), 4);
        assert!(
            parsed.warnings[0].contains("--node-cidr-mask-size"),
            "{:?}",
            parsed.warnings
        );
        assert!(parsed.warnings[3].contains("--requestheader-uid-headers"));
    }

    #[test]
    fn route_and_orphan_flags() {
        let args = parse(&[]).unwrap().cli.manager;
        assert!(args.configure_cloud_routes && !args.allocate_node_cidrs);
        assert!(args.cluster_cidr.is_empty() && !args.delete_orphans);
        assert_eq!(args.route_reconciliation_period, Duration::from_secs(10));
        let parsed = parse(&[
            "--allocate-node-cidrs",
            "--configure-cloud-routes=false",
            "--cluster-cidr=10.244.0.0/16,fd00:10:244::/56",
            "--route-reconciliation-period=1m0s",
            "--delete-orphans=true",
        ])
        .unwrap();
        assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
        let args = parsed.cli.manager;
        assert!(args.allocate_node_cidrs && !args.configure_cloud_routes && args.delete_orphans);
        assert_eq!(args.cluster_cidr.len(), 2);
        assert_eq!(args.cluster_cidr[0].to_string(), "10.244.0.0/16");
        assert_eq!(args.route_reconciliation_period, Duration::from_secs(60));
        assert!(parse(&["--cluster-cidr=10.244.0.0"]).is_err());
        assert!(parse(&["--allocate-node-cidrs=maybe"]).is_err());
        assert!(matches!(
            parse(&["orphans", "--delete"]).unwrap().cli.command,
            Some(Command::Orphans(super::OrphansArgs { delete: true }))
        ));
    }

    #[test]
    fn wrong_provider_and_lock_are_rejected_clearly() {
        let err = parse(&["--cloud-provider=aws"]).unwrap_err().to_string();
        assert!(err.contains("unsupported cloud provider \"aws\""), "{err}");
        let err = parse(&["--leader-elect-resource-lock=endpoints"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("only \"leases\""), "{err}");
    }

    #[test]
    fn inconsistent_lease_timings_are_rejected() {
        let args = parse(&[
            "--leader-elect-lease-duration=5s",
            "--leader-elect-renew-deadline=10s",
        ])
        .unwrap()
        .cli
        .manager;
        assert!(
            args.validate()
                .unwrap_err()
                .0
                .contains("--leader-elect-lease-duration")
        );
        let args = parse(&[
            "--leader-elect-renew-deadline=2s",
            "--leader-elect-retry-period=2s",
        ])
        .unwrap()
        .cli
        .manager;
        assert!(
            args.validate()
                .unwrap_err()
                .0
                .contains("--leader-elect-renew-deadline")
        );
    }

    #[test]
    fn subcommands_and_controllers_list() {
        assert!(matches!(
            parse(&["demo"]).unwrap().cli.command,
            Some(Command::Demo(_))
        ));
        assert!(matches!(
            parse(&["plan"]).unwrap().cli.command,
            Some(Command::Plan(_))
        ));
        let args = parse(&["--controllers=*,-service"]).unwrap().cli.manager;
        assert_eq!(args.controllers, ["*", "-service"]);
        let args = parse(&["--log-format=json", "--load-balancer-class=cloudstack"])
            .unwrap()
            .cli
            .manager;
        assert_eq!(args.log_format, LogFormat::Json);
        assert_eq!(args.load_balancer_class.as_deref(), Some("cloudstack"));
    }

    #[test]
    fn verbosity_maps_to_filters() {
        assert!(log_directives(0).starts_with("info,"));
        assert!(log_directives(2).contains("cloudstack_ccm=debug"));
        assert_eq!(log_directives(4), "debug");
        assert_eq!(log_directives(10), "trace");
    }
}
