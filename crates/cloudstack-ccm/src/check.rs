//! `cloudstack-ccm check`: before the first deploy, whether the controller will work with
//! this cloud-config, these keys, these networks and this cluster, and what to fix.
//!
//! It reads the same flags and cloud-config as the controller and decides with the same
//! code: what the keys may call ([`crate::cloud::key_access`]), what each network offers
//! and what the controller does there (`NetworkCapabilities::public_refusal`,
//! `internal_refusal`, the planner's own), so the check and the controller never disagree.
//! Only read-only CloudStack and Kubernetes calls; the CloudStack calls are counted and
//! printed at the end.

mod cloudstack_checks;
mod kubernetes;
mod networks;
mod render;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;

use crate::cli::{CheckArgs, ManagerArgs};
use crate::cloud::key_access::{Feature, KeyFeatures};
use crate::config::CloudConfig;
use crate::connect;
use crate::tool::ToolError;

pub use render::{write_json, write_text};

/// The verdict of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Fine.
    Ok,
    /// Works, with a limitation the operator should know.
    Warn,
    /// Will not work until fixed.
    Fail,
    /// Not checked (what it needs is missing, or an earlier check failed).
    Skip,
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// What was checked.
    pub name: String,
    /// The verdict.
    pub status: Status,
    /// What was found.
    pub detail: String,
    /// What to do, for a problem.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// The documentation page to read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub doc: Option<&'static str>,
}

impl Check {
    /// A check with `status`.
    pub fn new(name: impl Into<String>, status: Status, detail: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            status,
            detail: detail.into(),
            hint: None,
            doc: None,
        }
    }

    /// With a hint.
    pub fn hint(mut self, hint: impl Into<String>) -> Check {
        self.hint = Some(hint.into());
        self
    }

    /// With a documentation page.
    pub fn doc(mut self, doc: &'static str) -> Check {
        self.doc = Some(doc);
        self
    }
}

/// A group of checks (`CloudStack`, `Networks`, `Kubernetes`).
#[derive(Debug, Clone, Serialize)]
pub struct Group {
    /// The group's title.
    pub name: &'static str,
    /// Its checks, in order.
    pub checks: Vec<Check>,
}

/// Whether a feature works with these keys, networks and permissions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FeatureVerdict {
    /// Works.
    Works,
    /// Works in part (on some networks, without something).
    Degraded,
    /// Does not work.
    Unavailable,
}

/// One row of the feature table.
#[derive(Debug, Clone, Serialize)]
pub struct FeatureRow {
    /// The feature.
    pub feature: String,
    /// The verdict.
    pub verdict: FeatureVerdict,
    /// Why, when not [`FeatureVerdict::Works`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The fix.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The groups of checks.
    pub groups: Vec<Group>,
    /// Feature → verdict.
    pub features: Vec<FeatureRow>,
    /// CloudStack calls made, by command.
    pub cloudstack_calls: BTreeMap<String, u64>,
    /// The verdict: `ready`, `warnings` or `not ready`.
    pub verdict: &'static str,
}

impl Report {
    /// The exit status: 0 ready, 1 works with warnings, 2 will not work.
    pub fn exit_code(&self) -> i32 {
        match self.worst() {
            Status::Fail => 2,
            Status::Warn => 1,
            _ => 0,
        }
    }

    /// The worst status of any check.
    fn worst(&self) -> Status {
        self.groups
            .iter()
            .flat_map(|g| &g.checks)
            .map(|c| c.status)
            .filter(|s| *s != Status::Skip)
            .max()
            .unwrap_or(Status::Ok)
    }

    /// The total of CloudStack calls.
    pub fn call_count(&self) -> u64 {
        self.cloudstack_calls.values().sum()
    }
}

/// Counts the CloudStack calls of the check, by command.
#[derive(Debug, Default)]
struct CallCounter {
    calls: Mutex<BTreeMap<String, u64>>,
}

impl cloudstack::CallObserver for CallCounter {
    fn on_call(&self, command: &str, _: &cloudstack::CallOutcome, _: Duration) {
        *self
            .calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(command.to_string())
            .or_default() += 1;
    }

    fn on_job(&self, _: &str, _: bool, _: Duration) {}
}

/// Runs every check with the controller's flags and the cloud-config, and writes the
/// report to `out` (text for a person, or JSON with `--output json`).
pub async fn run(
    args: &ManagerArgs,
    check: &CheckArgs,
    out: &mut impl std::io::Write,
) -> Result<Report, ToolError> {
    let config = CloudConfig::load(args.cloud_config.as_deref(), |name| {
        std::env::var(name).ok()
    })?;
    let counter = Arc::new(CallCounter::default());
    let mut client_config = connect::client_config(&config);
    // One answer is enough to judge: no long retries in a preflight.
    client_config.max_retries = 1;
    client_config.observer = Some(counter.clone());
    let client = cloudstack::Client::new(client_config)
        .map_err(|e| ToolError::Connect(connect::ConnectError::CloudStack(e)))?;

    let cloud = cloudstack_checks::check(&config, &client).await;
    let kube = match connect::kube_client(args).await {
        Ok(kube) => Some(kube),
        Err(_) if args.kubeconfig.is_none() && args.master.is_none() => None,
        Err(error) => return Err(ToolError::Connect(error)),
    };
    let nodes = match &kube {
        Some(kube) => kubernetes::node_names(kube).await,
        None => {
            Err("no kubeconfig: pass --kubeconfig to check the cluster's networks and RBAC".into())
        }
    };
    let networks = networks::check(&client, cloud.version.as_ref(), nodes.as_deref()).await;
    let kubernetes = match &kube {
        Some(kube) => kubernetes::check(kube, args, check).await,
        None => Group {
            name: "Kubernetes",
            checks: vec![
                Check::new(
                    "cluster",
                    Status::Skip,
                    "no kubeconfig given: RBAC, the Lease and the Services are not checked",
                )
                .hint("pass --kubeconfig (and --as system:serviceaccount:kube-system:cloud-controller-manager when run by an admin)"),
            ],
        },
    };
    let access = KeyFeatures::of(&client);
    let features = feature_rows(&access, &networks, cloud.reachable);
    let groups = vec![cloud.group, networks.group, kubernetes];
    let calls = counter
        .calls
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let mut report = Report {
        groups,
        features,
        cloudstack_calls: calls,
        verdict: "",
    };
    report.verdict = match report.exit_code() {
        0 => "ready",
        1 => "works with warnings",
        _ => "will not work",
    };
    match check.output {
        crate::cli::CheckOutput::Json => write_json(&report, out)?,
        crate::cli::CheckOutput::Text => write_text(&report, out, check.color())?,
    }
    Ok(report)
}

/// The feature table: what the keys allow ([`KeyFeatures`]) against what the networks
/// offer.
fn feature_rows(
    access: &KeyFeatures,
    networks: &networks::Networks,
    reachable: bool,
) -> Vec<FeatureRow> {
    let mut rows = Vec::new();
    let row = |feature: &str, verdict, reason: Option<String>, fix: Option<String>| FeatureRow {
        feature: feature.to_string(),
        verdict,
        reason,
        fix,
    };
    if !reachable {
        rows.push(row(
            "everything",
            FeatureVerdict::Unavailable,
            Some("CloudStack cannot be asked with this cloud-config".into()),
            Some("fix the CloudStack checks above".into()),
        ));
        return rows;
    }
    let public = networks.count(|n| n.public.is_none());
    let total = networks.caps.len();
    rows.push(match (public, total) {
        (_, 0) => row(
            "public load balancers",
            FeatureVerdict::Works,
            Some("no Node network known to check".into()),
            None,
        ),
        (p, t) if p == t => row("public load balancers", FeatureVerdict::Works, None, None),
        (0, _) => row(
            "public load balancers",
            FeatureVerdict::Unavailable,
            Some("no network of the Nodes has a public CloudStack load balancer".into()),
            Some(
                "see docs/networks.md: a loadBalancerClass served by MetalLB or Cilium LB-IPAM"
                    .into(),
            ),
        ),
        (p, t) => row(
            "public load balancers",
            FeatureVerdict::Degraded,
            Some(format!("{p} of {t} Node networks serve them")),
            Some("see the Networks checks above".into()),
        ),
    });
    for feature in [
        Feature::TlsTermination,
        Feature::InternalLoadBalancer,
        Feature::RoutingFirewall,
        Feature::Stickiness,
        Feature::HealthCheck,
        Feature::OwnershipTags,
        Feature::StaticRoutes,
        Feature::VersionDetection,
        Feature::ScopeCheck,
    ] {
        let offered = networks.offers(feature);
        rows.push(match (access.refused(feature), offered) {
            (Some(command), _) => row(
                feature.describe(),
                if feature.is_planned_around() {
                    FeatureVerdict::Degraded
                } else {
                    FeatureVerdict::Unavailable
                },
                Some(format!("the keys' role may not call {command}")),
                Some(format!("grant the role {command} (docs/keys.md)")),
            ),
            (None, Some(false)) => row(
                feature.describe(),
                FeatureVerdict::Unavailable,
                Some("no network of the Nodes offers it".into()),
                Some("docs/networks.md".into()),
            ),
            (None, _) => row(feature.describe(), FeatureVerdict::Works, None, None),
        });
    }
    rows
}
