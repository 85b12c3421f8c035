//! `kubectl` against the in-process API server: the deploy and example documents of the
//! kinds it serves pass a client-side dry run.

use std::collections::BTreeSet;
use std::process::Command;

use anyhow::{Context, Result, ensure};
use serde_yaml::Value;

use super::{deploy_documents, kind, load_documents, manifest_files, name, repo_root, stdout_of};

/// The `apiVersion` string of a resource the fake API server serves.
fn api_version(resource: &fake_apiserver::ResourceKind) -> String {
    if resource.group.is_empty() {
        resource.version.to_owned()
    } else {
        format!("{}/{}", resource.group, resource.version)
    }
}

/// `kubectl apply --dry-run=client` of every deploy and example document whose kind the
/// in-process API server serves (it answers discovery and the GET kubectl makes first).
/// Kinds it does not serve (RBAC, apps, ConfigMap, Secret, ...) cannot be mapped by kubectl
/// there; they are listed in a notice and covered by the static checks above.
#[tokio::test]
async fn served_kinds_pass_kubectl_client_dry_run() -> Result<()> {
    if Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_err()
    {
        eprintln!("\n!!! NOTICE: `kubectl` is not installed: the client dry run was NOT run.\n");
        return Ok(());
    }
    let mut documents = deploy_documents()?;
    for file in manifest_files(&repo_root().join("examples/ingress"))? {
        documents.extend(load_documents(&file)?);
    }
    let served: BTreeSet<(String, &str)> = fake_apiserver::RESOURCES
        .iter()
        .map(|r| (api_version(r), r.kind))
        .collect();
    let (to_apply, skipped): (Vec<&Value>, Vec<&Value>) = documents
        .iter()
        .filter(|d| d["apiVersion"].is_string())
        .partition(|d| {
            let version = d["apiVersion"].as_str().unwrap_or_default().to_owned();
            served.contains(&(version, kind(d)))
        });
    ensure!(!to_apply.is_empty(), "no document of a served kind");
    let skipped_kinds: BTreeSet<&str> = skipped.iter().map(|d| kind(d)).collect();
    eprintln!(
        "\n!!! NOTICE: kinds not served by the in-process API server, so not dry-run by \
         kubectl: {skipped_kinds:?}\n"
    );

    let dir = tempfile::tempdir()?;
    let manifest = dir.path().join("served.yaml");
    let mut text = String::new();
    for document in &to_apply {
        text.push_str("---\n");
        text.push_str(&serde_yaml::to_string(document)?);
    }
    std::fs::write(&manifest, text)?;
    let server = fake_apiserver::FakeApiServer::start().await?;
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig)?;

    let run = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args([
            "apply",
            "--dry-run=client",
            "--validate=false",
            "-o",
            "name",
            "-f",
        ])
        .arg(&manifest)
        .output();
    let output = tokio::time::timeout(std::time::Duration::from_secs(60), run)
        .await
        .context("kubectl did not finish within 60 s")??;
    let stdout = stdout_of(output, "kubectl apply --dry-run=client")?;
    let applied: BTreeSet<String> = stdout.lines().map(str::to_owned).collect();
    // `-o name` prints `<kind>.<group>/<name>`, with no group for the core API.
    let wanted: BTreeSet<String> = to_apply
        .iter()
        .map(|d| {
            let kind = kind(d).to_lowercase();
            match d["apiVersion"].as_str().and_then(|v| v.split_once('/')) {
                Some((group, _)) => format!("{kind}.{group}/{}", name(d)),
                None => format!("{kind}/{}", name(d)),
            }
        })
        .collect();
    assert_eq!(applied, wanted);
    Ok(())
}
