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
}

impl OrphanReport {
    /// Deletions that failed.
    pub fn failed(&self) -> usize {
        self.deleted.iter().filter(|(_, e)| e.is_some()).count()
    }
}

/// What exists in the cluster: Service UIDs and the addresses they name, Node names
/// (`node_names` when given, e.g. from the controllers' Node cache; else listed).
pub async fn owners(
    kube: &kube::Client,
    node_names: Option<BTreeSet<String>>,
) -> Result<Owners, ToolError> {
    let services = Api::<Service>::all(kube.clone())
        .list(&ListParams::default())
        .await
        .map_err(|source| ToolError::List {
            what: "Services",
            source,
        })?;
    let nodes = match node_names {
        Some(names) => names,
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
        let annotations = service.metadata.annotations.iter().flatten();
        for (key, value) in annotations {
            if key.contains("cloudstack") {
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
    Ok(owners)
}

/// Finds the orphans of `cluster` and, when `delete` is set, deletes them; the Nodes are
/// `node_names` when given (see [`owners`]).
pub async fn report(
    cloudstack: &cloudstack::Client,
    kube: &kube::Client,
    cluster: &str,
    delete: bool,
    node_names: Option<BTreeSet<String>>,
) -> Result<OrphanReport, ToolError> {
    let tagged = orphans::observe(cloudstack, cluster)
        .await
        .map_err(ToolError::CloudStack)?;
    let orphans = orphans::classify(&tagged, &owners(kube, node_names).await?);
    let deleted = if delete {
        orphans::delete(cloudstack, &orphans)
            .await
            .into_iter()
            .map(|(orphan, result)| (orphan, result.err().map(|e| e.to_string())))
            .collect()
    } else {
        Vec::new()
    };
    Ok(OrphanReport { orphans, deleted })
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
    let kube = connect::kube_client(args).await?;
    let report = report(&cloudstack, &kube, &args.cluster_name, delete, None).await?;
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
    writeln!(
        out,
        "{} orphan(s) tagged for cluster {cluster:?}; {} deleted, {} failed.",
        report.orphans.len(),
        report.deleted.len() - report.failed(),
        report.failed()
    )?;
    out.flush()
}
