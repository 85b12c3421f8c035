//! `cloudstack-ccm orphans`: lists the CloudStack objects tagged for this cluster whose
//! Service or Node no longer exists ([`crate::cloud::orphans`]), with why; `--delete`
//! removes them (never an address the user brought or may have kept).

use std::collections::BTreeSet;
use std::io::Write;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Service};
use kube::Api;
use kube::api::ListParams;

use crate::cli::ManagerArgs;
use crate::cloud::cidr::Cidr;
use crate::cloud::job_queue::NetworkQueues;
use crate::cloud::loadbalancer::annotations as ann;
use crate::cloud::loadbalancer::observe::account_view::AccountView;
use crate::cloud::orphans::{self, Orphan, Owners};
use crate::config::CloudConfig;
use crate::connect;
use crate::metrics::Metrics;
use crate::tool::ToolError;

/// The orphans found and, with `--delete`, how each deletion went.
#[derive(Debug)]
pub struct OrphanReport {
    /// Every orphan.
    pub orphans: Vec<Orphan>,
    /// Deletions: the orphan and the error text, if it failed.
    pub deleted: Vec<(Orphan, Option<String>)>,
    /// The kinds not looked for: the keys' role refuses their list.
    pub not_looked_for: Vec<orphans::NotLookedFor>,
}

impl OrphanReport {
    /// Deletions that failed.
    pub fn failed(&self) -> usize {
        self.deleted.iter().filter(|(_, e)| e.is_some()).count()
    }
}

/// The names of the cluster's Nodes as a caller already knows them (the controllers' Node
/// cache), read when [`owners`] needs them.
pub type NodeNames<'a> = &'a (dyn Fn() -> BTreeSet<String> + Sync);

/// What exists in the cluster: Service UIDs and the addresses they name (the address,
/// IP id and claim annotations, `loadBalancerIP`, the status), Node names (from
/// `node_names` when given; else listed), and `cluster_cidrs` (`--cluster-cidr`). Read it
/// after what is tagged in CloudStack: an object made for a Service or Node created
/// meanwhile then finds its owner.
pub async fn owners(
    kube: &kube::Client,
    node_names: Option<NodeNames<'_>>,
    cluster_cidrs: &[Cidr],
) -> Result<Owners, ToolError> {
    let services = Api::<Service>::all(kube.clone())
        .list(&ListParams::default())
        .await
        .map_err(|source| ToolError::List {
            what: "Services",
            source,
        })?;
    let nodes: BTreeSet<String> = match node_names {
        Some(names) => names(),
        None => Api::<Node>::all(kube.clone())
            .list(&ListParams::default())
            .await
            .map_err(|source| ToolError::List {
                what: "Nodes",
                source,
            })?
            .items
            .into_iter()
            .filter_map(|n| n.metadata.name)
            .collect(),
    };
    let mut owners = Owners::default();
    for service in &services.items {
        if let Some(uid) = &service.metadata.uid {
            owners.service_uids.insert(uid.clone());
        }
        let annotations = service.metadata.annotations.as_ref();
        for key in [ann::ADDRESS.key, ann::IP_ID.key, ann::IP_CLAIM.key] {
            if let Some(value) = annotations.and_then(|a| a.get(key)) {
                owners.service_addresses.insert(value.clone());
            }
        }
        if let Some(ip) = service
            .spec
            .as_ref()
            .and_then(|s| s.load_balancer_ip.clone())
        {
            owners.service_addresses.insert(ip);
        }
        let ingress = service
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|lb| lb.ingress.as_ref());
        for entry in ingress.into_iter().flatten() {
            if let Some(ip) = &entry.ip {
                owners.service_addresses.insert(ip.clone());
            }
        }
    }
    owners.nodes = nodes;
    owners.cluster_cidrs = cluster_cidrs.to_vec();
    Ok(owners)
}

/// Where [`report`] looks: the cluster, its Nodes and its `--cluster-cidr`.
pub struct Scope<'a> {
    /// `--cluster-name`: the tag value of the cluster's objects.
    pub cluster: &'a str,
    /// The Node names the controllers' Node cache holds, or `None` to list the Nodes.
    pub node_names: Option<NodeNames<'a>>,
    /// `--cluster-cidr`.
    pub cluster_cidrs: &'a [Cidr],
    /// Whether the server has routing firewall rules to look at.
    pub routing_firewall: orphans::RoutingFirewall,
}

/// Finds the orphans in `scope` and, when `delete` is set, deletes them, their plans in
/// job queues of their own. CloudStack is read first, then the Services and Nodes (see
/// [`owners`]).
pub async fn report(
    cloudstack: &cloudstack::Client,
    kube: &kube::Client,
    scope: Scope<'_>,
    delete: bool,
) -> Result<OrphanReport, ToolError> {
    let queues = NetworkQueues::default();
    let delete = delete.then_some(&queues);
    report_queued(cloudstack, kube, scope, delete, None).await
}

/// [`report`], deleting (when `delete` is given) with the plans queued in `delete`: the
/// service controller passes its engine's queues, so orphan deletions wait in line with
/// the Services' jobs, and its account view (`view`), which already holds the
/// load-balancer rules, firewall rules and addresses of the account.
pub(crate) async fn report_queued(
    cloudstack: &cloudstack::Client,
    kube: &kube::Client,
    scope: Scope<'_>,
    delete: Option<&NetworkQueues>,
    view: Option<&AccountView>,
) -> Result<OrphanReport, ToolError> {
    let tagged = match view {
        Some(view) => {
            orphans::observe_with_view(cloudstack, scope.cluster, view, scope.routing_firewall)
                .await
        }
        None => orphans::observe(cloudstack, scope.cluster, scope.routing_firewall).await,
    }
    .map_err(ToolError::CloudStack)?;
    let owners = owners(kube, scope.node_names, scope.cluster_cidrs).await?;
    let orphans = orphans::classify(&tagged, &owners);
    let deleted = if let Some(queues) = delete {
        orphans::delete_queued(cloudstack, queues, &orphans)
            .await
            .into_iter()
            .map(|(orphan, result)| (orphan, result.err().map(|e| e.to_string())))
            .collect()
    } else {
        Vec::new()
    };
    Ok(OrphanReport {
        orphans,
        deleted,
        not_looked_for: tagged.not_looked_for,
    })
}

/// Connects with `args` and prints the orphans (and deletions) to `out`.
pub async fn run(
    args: &ManagerArgs,
    delete: bool,
    out: &mut impl Write,
) -> Result<OrphanReport, ToolError> {
    let config = CloudConfig::load(args.cloud_config.as_deref(), |name| {
        std::env::var(name).ok()
    })?;
    let cloudstack = connect::cloudstack_client(&config, Arc::new(Metrics::new()))?;
    let version = connect::learn_server(&config, &cloudstack).await?.version;
    let kube = connect::kube_client(args).await?;
    let scope = Scope {
        cluster: &args.cluster_name,
        node_names: None,
        cluster_cidrs: &args.cluster_cidr,
        routing_firewall: orphans::RoutingFirewall::of(&version),
    };
    let report = report(&cloudstack, &kube, scope, delete).await?;
    write_report(&report, &args.cluster_name, out)?;
    Ok(report)
}

/// Prints one line per orphan, the deletions, and a summary.
pub fn write_report(
    report: &OrphanReport,
    cluster: &str,
    out: &mut impl Write,
) -> std::io::Result<()> {
    for orphan in &report.orphans {
        writeln!(out, "{orphan}")?;
    }
    for (orphan, error) in &report.deleted {
        match error {
            None => writeln!(out, "deleted {} {}", orphan.kind, orphan.id)?,
            Some(error) => writeln!(out, "cannot delete {} {}: {error}", orphan.kind, orphan.id)?,
        }
    }
    for not_looked_for in &report.not_looked_for {
        writeln!(out, "not looked for: {not_looked_for}")?;
    }
    writeln!(
        out,
        "{} orphan(s) tagged for cluster {cluster:?}; {} deleted, {} failed.",
        report.orphans.len(),
        report.deleted.len() - report.failed(),
        report.failed()
    )?;
    out.flush()
}
