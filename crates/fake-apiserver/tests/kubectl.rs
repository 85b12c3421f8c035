//! The real `kubectl` against the server: create from YAML, list, patch (strategic and
//! merge) and delete Nodes and Services through a generated kubeconfig. Skipped with a
//! notice when kubectl is not installed.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::start;

const KUBECTL: &str = "/usr/bin/kubectl";

const MANIFEST: &str = "\
apiVersion: v1
kind: Node
metadata:
  name: worker-1
  labels:
    role: worker
spec:
  taints:
  - key: node.cloudprovider.kubernetes.io/uninitialized
    value: \"true\"
    effect: NoSchedule
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  type: LoadBalancer
  selector:
    app: web
  ports:
  - port: 80
";

/// Runs kubectl with the kubeconfig on a blocking thread; returns stdout, failing the test
/// with stderr on a non-zero exit.
async fn kubectl(kubeconfig: &Path, args: &[&str]) -> String {
    let mut command = Command::new(KUBECTL);
    command
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--request-timeout=10s")
        .args(args);
    let rendered = format!("kubectl {}", args.join(" "));
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .expect("kubectl runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{rendered} failed: {}{}",
        stdout,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_lists_patches_and_deletes_nodes_and_services() {
    if !Path::new(KUBECTL).exists() {
        eprintln!("skipping: {KUBECTL} is not installed");
        return;
    }
    let (server, _client) = start().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig: PathBuf = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let manifest = dir.path().join("objects.yaml");
    std::fs::write(&manifest, MANIFEST).unwrap();

    let created = kubectl(&kubeconfig, &["create", "-f", manifest.to_str().unwrap()]).await;
    assert!(
        created.contains("node/worker-1 created") && created.contains("service/web created"),
        "{created}"
    );

    let nodes = kubectl(&kubeconfig, &["get", "nodes", "-o", "name"]).await;
    assert_eq!(nodes.trim(), "node/worker-1");
    let services = kubectl(
        &kubeconfig,
        &["get", "svc", "-l", "app!=other", "-o", "name"],
    )
    .await;
    assert_eq!(services.trim(), "service/web");

    let taint_patch = r#"{"spec":{"providerID":"cloudstack:///vm-1","taints":null}}"#;
    kubectl(
        &kubeconfig,
        &["patch", "node", "worker-1", "-p", taint_patch],
    )
    .await;
    let node = server.get("nodes", None, "worker-1").unwrap();
    assert_eq!(node["spec"]["providerID"], "cloudstack:///vm-1");
    assert!(
        node["spec"].get("taints").is_none(),
        "strategic patch removed the taints"
    );

    kubectl(
        &kubeconfig,
        &[
            "patch",
            "svc",
            "web",
            "--type",
            "merge",
            "-p",
            r#"{"metadata":{"labels":{"tier":"front"}}}"#,
        ],
    )
    .await;
    let provider = kubectl(
        &kubeconfig,
        &[
            "get",
            "svc",
            "web",
            "-o",
            "jsonpath={.metadata.labels.tier}",
        ],
    )
    .await;
    assert_eq!(provider, "front");

    kubectl(&kubeconfig, &["delete", "svc", "web"]).await;
    kubectl(&kubeconfig, &["delete", "node", "worker-1"]).await;
    assert!(server.list("services", Some("default")).unwrap().is_empty());
    assert!(server.list("nodes", None).unwrap().is_empty());
    let remaining = kubectl(&kubeconfig, &["get", "nodes,svc", "-o", "name"]).await;
    assert!(remaining.trim().is_empty(), "{remaining}");
}
