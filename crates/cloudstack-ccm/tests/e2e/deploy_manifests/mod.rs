//! Checks of the deployment artefacts: the manifests under `deploy/`, the Helm chart under
//! `deploy/chart/`, the `Dockerfile` and the ingress examples under `examples/ingress/`.
//!
//! Every YAML document is parsed; the Deployment must carry CKS's arguments, probes,
//! tolerations and two replicas; the RBAC rules must be exactly the ones the code uses; the
//! chart's templates may only reference values that exist and its defaults must match the
//! plain manifests. Where `kubectl` or `helm` is installed the artefacts are also rendered
//! by the real tools; when a tool is missing the test says so loudly and checks the rest.
//!
//! This module holds what the checks share: reading and parsing the YAML documents, finding
//! one by kind and name, the Deployment's check, and running an external tool.

mod chart;
mod kubectl;
mod manifests;
mod rbac;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};
use serde::Deserialize;
use serde_yaml::Value;

/// The CKS arguments the Deployment must pass, exactly as CKS writes them.
const CKS_ARGUMENTS: [&str; 3] = [
    "--cloud-provider=external-cloudstack",
    "--cloud-config=/config/cloud-config",
    "--leader-elect=true",
];

/// The health and metrics port.
const HEALTH_PORT: u64 = 10258;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Parses every YAML document of a string, skipping empty documents.
fn parse_documents(text: &str, origin: &str) -> Result<Vec<Value>> {
    let mut documents = Vec::new();
    for (index, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let value = Value::deserialize(document)
            .with_context(|| format!("{origin}: YAML document {index} does not parse"))?;
        if !value.is_null() {
            documents.push(value);
        }
    }
    Ok(documents)
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

fn load_documents(path: &Path) -> Result<Vec<Value>> {
    parse_documents(&read(path)?, &path.display().to_string())
}

/// The `.yaml` files directly in `dir` and its subdirectories, except `deploy/chart`.
fn manifest_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|name| name != "chart") {
                files.extend(manifest_files(&path)?);
            }
        } else if path
            .extension()
            .is_some_and(|ext| ext == "yaml" || ext == "yml")
        {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

fn kind(document: &Value) -> &str {
    document["kind"].as_str().unwrap_or("")
}

fn name(document: &Value) -> &str {
    document["metadata"]["name"].as_str().unwrap_or("")
}

/// The one document of a kind (and name) among `documents`.
fn find<'a>(documents: &'a [Value], wanted_kind: &str, wanted_name: &str) -> Result<&'a Value> {
    let matches: Vec<&Value> = documents
        .iter()
        .filter(|d| kind(d) == wanted_kind && name(d) == wanted_name)
        .collect();
    ensure!(
        matches.len() == 1,
        "expected one {wanted_kind} {wanted_name}, found {}",
        matches.len()
    );
    Ok(matches[0])
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_sequence()
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn deploy_documents() -> Result<Vec<Value>> {
    let mut all = Vec::new();
    for file in manifest_files(&repo_root().join("deploy"))? {
        all.extend(load_documents(&file)?);
    }
    Ok(all)
}

fn container(deployment: &Value) -> &Value {
    &deployment["spec"]["template"]["spec"]["containers"][0]
}

/// Checks what the Deployment must contain, wherever it comes from (plain or rendered).
fn check_deployment(deployment: &Value) -> Result<()> {
    ensure!(deployment["metadata"]["namespace"] == "kube-system");
    ensure!(
        deployment["spec"]["replicas"].as_u64() == Some(2),
        "replicas must be 2"
    );
    ensure!(
        deployment["spec"]["selector"]["matchLabels"]["k8s-app"] == "cloud-controller-manager",
        "the selector must be the Go provider's (k8s-app: cloud-controller-manager)"
    );
    let pod = &deployment["spec"]["template"]["spec"];
    ensure!(pod["serviceAccountName"] == "cloud-controller-manager");
    ensure!(pod["priorityClassName"] == "system-cluster-critical");
    ensure!(pod["nodeSelector"]["node-role.kubernetes.io/control-plane"] == "");
    ensure!(pod["securityContext"]["runAsNonRoot"] == true);
    let tolerations = pod["tolerations"].as_sequence().context("tolerations")?;
    ensure!(
        tolerations.iter().any(|t| {
            t["key"] == "node.cloudprovider.kubernetes.io/uninitialized"
                && t["effect"] == "NoSchedule"
        }),
        "the uninitialized NoSchedule taint must be tolerated"
    );
    ensure!(
        tolerations
            .iter()
            .any(|t| t["key"] == "node-role.kubernetes.io/control-plane"),
        "the control-plane taint must be tolerated"
    );
    // A fresh cluster's Nodes are NotReady until the CNI runs, and the CNI may wait for
    // the CCM: it must be scheduled on a NotReady node.
    ensure!(
        tolerations.iter().any(|t| {
            t["key"] == "node.kubernetes.io/not-ready"
                && t["operator"] == "Exists"
                && t["effect"] == "NoSchedule"
        }),
        "the not-ready NoSchedule taint must be tolerated"
    );
    ensure!(
        tolerations.iter().any(|t| {
            t["key"] == "node.kubernetes.io/not-ready"
                && t["effect"] == "NoExecute"
                && t["tolerationSeconds"].as_u64().is_some()
        }),
        "the not-ready NoExecute taint must be tolerated for a bounded time, so a replica \
         on a node that stays NotReady moves"
    );

    let container = container(deployment);
    let args = strings(&container["args"]);
    for wanted in CKS_ARGUMENTS {
        ensure!(
            args.iter().any(|a| a == wanted),
            "args {args:?} lack {wanted}"
        );
    }
    ensure!(args.iter().any(|a| a == "--bind-address=0.0.0.0"));
    ensure!(args.contains(&format!("--secure-port={HEALTH_PORT}")));
    for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
        let get = &container[probe]["httpGet"];
        ensure!(get["path"] == path, "{probe} path must be {path}");
        ensure!(get["port"].as_u64() == Some(HEALTH_PORT), "{probe} port");
        ensure!(get["scheme"] == "HTTPS", "{probe} scheme must be HTTPS");
    }
    let security = &container["securityContext"];
    ensure!(security["readOnlyRootFilesystem"] == true);
    ensure!(security["allowPrivilegeEscalation"] == false);
    ensure!(strings(&security["capabilities"]["drop"]) == ["ALL"]);
    ensure!(container["resources"]["requests"]["memory"] == "32Mi");
    ensure!(container["resources"]["limits"]["memory"] == "128Mi");
    ensure!(container["resources"]["requests"]["cpu"] == "50m");

    let mount = &container["volumeMounts"][0];
    ensure!(mount["mountPath"] == "/config" && mount["readOnly"] == true);
    let volume = pod["volumes"]
        .as_sequence()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == mount["name"])
        .context("the /config volume")?;
    ensure!(volume["secret"]["secretName"] == "cloudstack-secret");
    Ok(())
}

/// Runs a command if its program exists; `None` (after a loud notice) when it does not.
fn run_tool(program: &str, args: &[&str]) -> Result<Option<std::process::Output>> {
    match Command::new(program)
        .args(args)
        .current_dir(repo_root())
        .output()
    {
        Ok(output) => Ok(Some(output)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            eprintln!(
                "\n!!! NOTICE: `{program}` is not installed: `{program} {}` was NOT run; \
                 only the static checks ran.\n",
                args.join(" ")
            );
            Ok(None)
        }
        Err(error) => Err(error).with_context(|| format!("running {program}")),
    }
}

fn stdout_of(output: std::process::Output, what: &str) -> Result<String> {
    if !output.status.success() {
        bail!("{what} failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    Ok(String::from_utf8(output.stdout)?)
}
