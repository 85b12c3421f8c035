//! The Helm chart under `deploy/chart/`: its metadata and values parse, its templates use
//! exactly the values that exist, its defaults and RBAC match the plain manifests, and (when
//! `helm` is installed) it renders.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use anyhow::{Context, Result, ensure};
use serde_yaml::Value;

use super::rbac::check_rbac;
use super::{
    HEALTH_PORT, check_deployment, container, deploy_documents, find, kind, load_documents,
    parse_documents, read, repo_root, run_tool, stdout_of, strings,
};
use crate::common::target::current_test;

fn chart_dir() -> PathBuf {
    repo_root().join("deploy/chart")
}

fn chart_values() -> Result<Value> {
    Ok(load_documents(&chart_dir().join("values.yaml"))?.remove(0))
}

/// The template files, by file name.
pub(super) fn chart_templates() -> Result<BTreeMap<String, String>> {
    let mut templates = BTreeMap::new();
    for entry in std::fs::read_dir(chart_dir().join("templates"))? {
        let path = entry?.path();
        let file_name = path.file_name().and_then(|n| n.to_str()).context("name")?;
        templates.insert(file_name.to_owned(), read(&path)?);
    }
    Ok(templates)
}

/// The dotted paths after `prefix` in `text` (`.Values.metrics.port` -> `metrics.port`).
fn references_after(text: &str, prefix: &str) -> Vec<String> {
    text.match_indices(prefix)
        .map(|(at, _)| {
            text[at + prefix.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '.')
                .collect::<String>()
                .trim_end_matches('.')
                .to_owned()
        })
        .filter(|path| !path.is_empty())
        .collect()
}

/// Every `.Values` path a template reads, with `$var := .Values.x` aliases resolved.
fn values_references(template: &str) -> Vec<String> {
    let mut references = references_after(template, ".Values.");
    for (at, _) in template.match_indices(":= .Values.") {
        let before = template[..at].trim_end();
        let variable: String = before
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '$' || *c == '_')
            .collect::<String>()
            .chars()
            .rev()
            .collect();
        let base = &references_after(&template[at..], ":= .Values.")[0];
        for field in references_after(template, &format!("{variable}.")) {
            references.push(format!("{base}.{field}"));
        }
    }
    references
}

fn lookup<'a>(values: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(values, |node, key| node.as_mapping()?.get(key))
}

#[test]
fn chart_metadata_and_values_parse() -> Result<()> {
    let chart = load_documents(&chart_dir().join("Chart.yaml"))?.remove(0);
    ensure!(chart["apiVersion"] == "v2");
    ensure!(chart["name"] == "cloudstack-ccm");
    ensure!(chart["version"].is_string() && chart["appVersion"].is_string());
    let values = chart_values()?;
    for key in [
        "image.repository",
        "image.tag",
        "image.pullPolicy",
        "replicas",
        "cloudConfig.existingSecret",
        "cloudConfig.apiUrl",
        "cloudConfig.apiKey",
        "cloudConfig.secretKey",
        "cloudConfig.projectId",
        "cloudConfig.zone",
        "cloudConfig.region",
        "cloudConfig.sslNoVerify",
        "metrics.enabled",
        "metrics.port",
        "metrics.serviceMonitor.enabled",
        "extraArgs",
        "resources",
        "nodeSelector",
        "tolerations",
        "affinity",
        "priorityClassName",
    ] {
        ensure!(lookup(&values, key).is_some(), "values.yaml lacks {key}");
    }
    Ok(())
}

#[test]
fn chart_templates_reference_only_existing_values_and_use_them_all() -> Result<()> {
    let values = chart_values()?;
    let mut used = BTreeSet::new();
    for (file, template) in chart_templates()? {
        for reference in values_references(&template) {
            ensure!(
                lookup(&values, &reference).is_some(),
                "{file} reads .Values.{reference}, which values.yaml does not define"
            );
            used.insert(reference);
        }
    }
    let top_level: Vec<String> = values
        .as_mapping()
        .context("values.yaml is a mapping")?
        .keys()
        .filter_map(|k| k.as_str().map(str::to_owned))
        .collect();
    for key in top_level {
        ensure!(
            used.iter()
                .any(|r| r == &key || r.starts_with(&format!("{key}."))),
            "values.yaml defines {key}, which no template reads"
        );
    }
    Ok(())
}

#[test]
fn chart_defaults_match_the_plain_manifests() -> Result<()> {
    let values = chart_values()?;
    let documents = deploy_documents()?;
    let deployment = find(&documents, "Deployment", "cloud-controller-manager")?;
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(values["replicas"], deployment["spec"]["replicas"]);
    assert_eq!(values["tolerations"], pod["tolerations"]);
    assert_eq!(values["nodeSelector"], pod["nodeSelector"]);
    assert_eq!(values["priorityClassName"], pod["priorityClassName"]);
    assert_eq!(values["resources"], container(deployment)["resources"]);
    assert_eq!(values["metrics"]["port"].as_u64(), Some(HEALTH_PORT));
    assert_eq!(values["logLevel"].as_u64(), Some(2));
    ensure!(strings(&container(deployment)["args"]).contains(&"--v=2".to_owned()));
    Ok(())
}

/// Drops the lines holding template actions; what is left of the RBAC templates is YAML.
pub(super) fn without_template_lines(template: &str) -> String {
    template
        .lines()
        .filter(|line| !line.contains("{{"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn chart_rbac_matches_the_plain_manifests() -> Result<()> {
    let templates = chart_templates()?;
    let account = chart_values()?["serviceAccount"]["name"]
        .as_str()
        .context("serviceAccount.name")?
        .to_owned();
    let mut documents = Vec::new();
    for file in ["clusterrole.yaml", "role.yaml", "serviceaccount.yaml"] {
        let template = templates
            .get(file)
            .with_context(|| format!("template {file}"))?;
        let text = template.replace("{{ .Values.serviceAccount.name }}", &account);
        documents.extend(parse_documents(&without_template_lines(&text), file)?);
    }
    check_rbac(&documents)
}

#[test]
fn chart_renders_with_helm_when_available() -> Result<()> {
    let chart = chart_dir();
    let chart = chart.to_str().context("chart path")?;
    let Some(output) = run_tool(
        "helm",
        &[
            "template",
            "ccm",
            chart,
            "--namespace",
            "kube-system",
            "--set",
            "cloudConfig.existingSecret=cloudstack-secret",
        ],
    )?
    else {
        println!(
            "skipped: {}: `helm` is not installed, so the chart was not rendered \
             (the static chart checks of this module still ran)",
            current_test()
        );
        return Ok(());
    };
    let rendered = parse_documents(&stdout_of(output, "helm template")?, "helm template")?;
    check_rbac(&rendered)?;
    check_deployment(find(&rendered, "Deployment", "cloud-controller-manager")?)?;
    ensure!(rendered.iter().all(|d| kind(d) != "Secret"));

    let inline = run_tool(
        "helm",
        &[
            "template",
            "ccm",
            chart,
            "--set",
            "cloudConfig.apiUrl=https://cs.example/client/api",
            "--set",
            "cloudConfig.apiKey=k",
            "--set",
            "cloudConfig.secretKey=s",
            "--set",
            "cloudConfig.zone=zone1",
        ],
    )?
    .context("helm vanished")?;
    let rendered = parse_documents(&stdout_of(inline, "helm template (inline)")?, "helm")?;
    let secret = find(&rendered, "Secret", "cloudstack-secret")?;
    let config = secret["stringData"]["cloud-config"]
        .as_str()
        .context("cloud-config")?;
    ensure!(config.contains("api-url = \"https://cs.example/client/api\""));
    ensure!(config.contains("zone = \"zone1\""));
    ensure!(!config.contains("project-id"));

    let missing = run_tool("helm", &["template", "ccm", chart])?.context("helm vanished")?;
    ensure!(
        !missing.status.success(),
        "rendering without credentials must fail"
    );
    ensure!(String::from_utf8_lossy(&missing.stderr).contains("cloudConfig"));
    Ok(())
}
