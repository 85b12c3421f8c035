//! The RBAC objects of the manifests: exactly the permissions the code uses, the bindings
//! to the controller's ServiceAccount, and the metrics reader Prometheus scrapes with.

use std::collections::BTreeSet;

use anyhow::{Context, Result, ensure};
use serde_yaml::Value;

use super::chart::{chart_templates, without_template_lines};
use super::{deploy_documents, find, parse_documents, strings};

/// One RBAC permission: (API group, resource, verb).
type Permission = (String, String, String);

/// Flattens the rules of a ClusterRole or Role into single permissions.
fn permissions(role: &Value) -> BTreeSet<Permission> {
    let mut all = BTreeSet::new();
    for rule in role["rules"].as_sequence().into_iter().flatten() {
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                for verb in strings(&rule["verbs"]) {
                    all.insert((group.clone(), resource.clone(), verb));
                }
            }
        }
    }
    all
}

fn expand(group: &str, resource: &str, verbs: &[&str]) -> Vec<Permission> {
    verbs
        .iter()
        .map(|verb| (group.to_owned(), resource.to_owned(), (*verb).to_owned()))
        .collect()
}

/// What the controllers do with the Kubernetes API, cluster-wide.
fn expected_cluster_permissions() -> BTreeSet<Permission> {
    [
        expand(
            "",
            "nodes",
            &["get", "list", "watch", "update", "patch", "delete"],
        ),
        expand("", "nodes/status", &["patch", "update"]),
        expand("", "services", &["get", "list", "watch", "update", "patch"]),
        expand("", "services/status", &["patch", "update"]),
        expand("", "events", &["create", "patch", "update"]),
        expand(
            "discovery.k8s.io",
            "endpointslices",
            &["get", "list", "watch"],
        ),
        expand("", "secrets", &["get", "list", "watch"]),
    ]
    .concat()
    .into_iter()
    .collect()
}

/// Leader election, in kube-system only.
fn expected_lease_permissions() -> BTreeSet<Permission> {
    expand(
        "coordination.k8s.io",
        "leases",
        &["get", "create", "update"],
    )
    .into_iter()
    .collect()
}

/// Checks the RBAC objects (plain or rendered).
pub(super) fn check_rbac(documents: &[Value]) -> Result<()> {
    let cluster_role = find(documents, "ClusterRole", "system:cloud-controller-manager")?;
    assert_eq!(permissions(cluster_role), expected_cluster_permissions());
    let role = find(
        documents,
        "Role",
        "cloud-controller-manager:leader-election",
    )?;
    ensure!(role["metadata"]["namespace"] == "kube-system");
    assert_eq!(permissions(role), expected_lease_permissions());

    for (binding_kind, role_kind, role_name) in [
        (
            "ClusterRoleBinding",
            "ClusterRole",
            "system:cloud-controller-manager",
        ),
        (
            "RoleBinding",
            "Role",
            "cloud-controller-manager:leader-election",
        ),
    ] {
        let binding = find(documents, binding_kind, role_name)?;
        ensure!(binding["roleRef"]["kind"] == role_kind);
        ensure!(binding["roleRef"]["name"] == role_name);
        let subject = &binding["subjects"][0];
        ensure!(subject["kind"] == "ServiceAccount");
        ensure!(subject["name"] == "cloud-controller-manager");
        ensure!(subject["namespace"] == "kube-system");
    }
    // The secure port delegates authentication and authorization to the API server.
    let delegator = find(
        documents,
        "ClusterRoleBinding",
        "cloud-controller-manager:auth-delegator",
    )?;
    ensure!(delegator["roleRef"]["kind"] == "ClusterRole");
    ensure!(delegator["roleRef"]["name"] == "system:auth-delegator");
    let subject = &delegator["subjects"][0];
    ensure!(subject["kind"] == "ServiceAccount" && subject["name"] == "cloud-controller-manager");
    ensure!(subject["namespace"] == "kube-system");
    find(documents, "ServiceAccount", "cloud-controller-manager")?;
    Ok(())
}

/// Checks a ServiceMonitor endpoint scrapes /metrics over HTTPS with a bearer token.
fn check_https_scrape(monitor: &Value) -> Result<()> {
    let endpoint = &monitor["spec"]["endpoints"][0];
    ensure!(endpoint["port"] == "metrics" && endpoint["path"] == "/metrics");
    ensure!(endpoint["scheme"] == "https", "scrape over HTTPS");
    ensure!(
        endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token",
        "scrape with Prometheus's ServiceAccount token"
    );
    Ok(())
}

/// Checks the metrics-reader ClusterRole grants `get` on `/metrics` and is bound.
fn check_metrics_reader(documents: &[Value]) -> Result<()> {
    let reader = find(
        documents,
        "ClusterRole",
        "cloud-controller-manager:metrics-reader",
    )?;
    let rule = &reader["rules"][0];
    ensure!(strings(&rule["nonResourceURLs"]) == ["/metrics"]);
    ensure!(strings(&rule["verbs"]) == ["get"]);
    let binding = find(
        documents,
        "ClusterRoleBinding",
        "cloud-controller-manager:metrics-reader",
    )?;
    ensure!(binding["roleRef"]["name"] == "cloud-controller-manager:metrics-reader");
    ensure!(binding["subjects"][0]["kind"] == "ServiceAccount");
    Ok(())
}

#[test]
fn metrics_are_scraped_over_https_with_a_bearer_token_the_role_allows() -> Result<()> {
    let documents = deploy_documents()?;
    check_https_scrape(find(
        &documents,
        "ServiceMonitor",
        "cloud-controller-manager",
    )?)?;
    check_metrics_reader(&documents)?;
    let template = chart_templates()?
        .get("servicemonitor.yaml")
        .context("template servicemonitor.yaml")?
        .clone();
    let text = template
        .replace(
            "{{ .Values.metrics.serviceMonitor.prometheusServiceAccount.name }}",
            "prometheus-k8s",
        )
        .replace(
            "{{ .Values.metrics.serviceMonitor.prometheusServiceAccount.namespace }}",
            "monitoring",
        )
        .replace("{{ .Values.metrics.serviceMonitor.interval }}", "30s");
    let rendered = parse_documents(&without_template_lines(&text), "servicemonitor.yaml")?;
    check_https_scrape(find(
        &rendered,
        "ServiceMonitor",
        "cloud-controller-manager",
    )?)?;
    check_metrics_reader(&rendered)
}

#[test]
fn rbac_grants_exactly_what_the_code_uses() -> Result<()> {
    check_rbac(&deploy_documents()?)
}
