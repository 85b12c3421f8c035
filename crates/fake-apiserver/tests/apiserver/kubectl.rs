//! The real `kubectl` against the server: create from YAML, list, patch (strategic and
//! merge) and delete Nodes and Services through a generated kubeconfig. Skipped with a
//! notice when kubectl is not installed.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::start;
use fake_apiserver::Verb;

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

/// Runs kubectl expecting a failure; returns stderr.
async fn kubectl_fails(kubeconfig: &Path, args: &[&str]) -> String {
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
    assert!(!output.status.success(), "{rendered} succeeded");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The whitespace-separated words of the line of `output` containing `needle`.
fn words_of_line(output: &str, needle: &str) -> Vec<String> {
    output
        .lines()
        .find(|line| line.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{output}"))
        .split_whitespace()
        .map(String::from)
        .collect()
}

/// Objects as a cluster with the controller running holds them: an initialised Node, a
/// LoadBalancer Service with its ingress, a Pod, and Events about both through core/v1
/// and events.k8s.io/v1.
fn seed_cluster(server: &fake_apiserver::FakeApiServer) {
    server
        .create(
            "nodes",
            None,
            serde_json::json!({
                "metadata": { "name": "worker-1", "labels": { "node-role.kubernetes.io/control-plane": "" } },
                "spec": { "providerID": "external-cloudstack://vm-1" },
            }),
        )
        .unwrap();
    server
        .patch(
            "nodes",
            None,
            "worker-1",
            fake_apiserver::PatchType::Merge,
            &serde_json::json!({ "status": {
                "conditions": [{ "type": "Ready", "status": "True" }],
                "addresses": [{ "type": "InternalIP", "address": "10.1.1.11" }, { "type": "ExternalIP", "address": "203.0.113.11" }],
                "nodeInfo": { "kubeletVersion": "v1.33.1", "osImage": "Ubuntu 24.04", "kernelVersion": "6.8.0", "containerRuntimeVersion": "containerd://1.7.0" },
            } }),
            true,
        )
        .unwrap();
    let service = server
        .create(
            "services",
            Some("default"),
            serde_json::json!({
                "metadata": { "name": "web" },
                "spec": { "type": "LoadBalancer", "selector": { "app": "web" }, "ports": [{ "port": 80, "nodePort": 30080 }] },
            }),
        )
        .unwrap();
    server
        .patch(
            "services",
            Some("default"),
            "web",
            fake_apiserver::PatchType::Merge,
            &serde_json::json!({ "status": { "loadBalancer": { "ingress": [{ "ip": "203.0.113.9" }] } } }),
            true,
        )
        .unwrap();
    server
        .create(
            "pods",
            Some("default"),
            serde_json::json!({
                "metadata": { "name": "web-1", "labels": { "app": "web" } },
                "spec": { "nodeName": "worker-1", "containers": [{ "name": "web", "image": "nginx" }] },
            }),
        )
        .unwrap();
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    server
        .create(
            "events",
            Some("default"),
            serde_json::json!({
                "metadata": { "name": "web.1" },
                "involvedObject": { "kind": "Service", "namespace": "default", "name": "web", "uid": service["metadata"]["uid"], "apiVersion": "v1" },
                "reason": "SyncLoadBalancerFailed", "type": "Warning",
                "message": "Error syncing load balancer: invalid annotation cloudstack-load-balancer-algorithm",
                "source": { "component": "service-controller" }, "count": 7,
                "firstTimestamp": now, "lastTimestamp": now,
            }),
        )
        .unwrap();
    let node_uid = server.get("nodes", None, "worker-1").unwrap()["metadata"]["uid"].clone();
    server
        .create(
            "events.events.k8s.io",
            Some("default"),
            serde_json::json!({
                "metadata": { "name": "worker-1.2" },
                "eventTime": format!("{}.000000Z", now.trim_end_matches('Z')),
                "regarding": { "kind": "Node", "name": "worker-1", "uid": node_uid, "apiVersion": "v1" },
                "reason": "Synced", "note": "Node synced successfully", "type": "Normal",
                "action": "InitializeNode", "reportingController": "cloud-node-controller",
                "reportingInstance": "ccm-1",
            }),
        )
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_prints_the_real_columns_and_describe_shows_events() {
    if !Path::new(KUBECTL).exists() {
        eprintln!("skipping: {KUBECTL} is not installed");
        return;
    }
    let (server, _client) = start().await;
    seed_cluster(&server);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig: PathBuf = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();

    // Columns of pkg/printers/internalversion/printers.go.
    let nodes = kubectl(&kubeconfig, &["get", "nodes"]).await;
    assert_eq!(
        words_of_line(&nodes, "NAME"),
        ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    );
    let row = words_of_line(&nodes, "worker-1");
    assert_eq!(
        (&*row[1], &*row[2], &*row[4]),
        ("Ready", "control-plane", "v1.33.1"),
        "{nodes}"
    );
    let wide = kubectl(&kubeconfig, &["get", "nodes", "-o", "wide"]).await;
    assert!(
        wide.contains("INTERNAL-IP")
            && wide.contains("EXTERNAL-IP")
            && wide.contains("CONTAINER-RUNTIME"),
        "{wide}"
    );
    let row = words_of_line(&wide, "worker-1");
    assert!(
        row.contains(&"10.1.1.11".to_string()) && row.contains(&"203.0.113.11".to_string()),
        "{wide}"
    );

    let services = kubectl(&kubeconfig, &["get", "svc", "-o", "wide"]).await;
    assert_eq!(
        words_of_line(&services, "NAME"),
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE",
            "SELECTOR"
        ]
    );
    let row = words_of_line(&services, "web");
    assert_eq!(
        (&*row[1], &*row[3], &*row[4], &*row[6]),
        ("LoadBalancer", "203.0.113.9", "80:30080/TCP", "app=web"),
        "{services}"
    );
    // `kubectl get -w`: watch events as one-row Tables.
    let mut watch = std::process::Command::new(KUBECTL)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["get", "svc", "-w", "--output-watch-events"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    let stdout = watch.stdout.take().expect("piped");
    let (lines, mut received) = tokio::sync::mpsc::unbounded_channel();
    tokio::task::spawn_blocking(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    let mut next_line_with = async |word: &str| {
        tokio::time::timeout(std::time::Duration::from_secs(20), async {
            loop {
                let line = received.recv().await.expect("kubectl is still watching");
                if line.contains(word) {
                    return line;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("kubectl get -w printed no {word} line"))
    };
    let added = next_line_with("ADDED").await;
    assert!(added.contains("web"), "{added}");
    server
        .patch(
            "services",
            Some("default"),
            "web",
            fake_apiserver::PatchType::Merge,
            &serde_json::json!({ "status": { "loadBalancer": { "ingress": [{ "ip": "203.0.113.10" }] } } }),
            true,
        )
        .unwrap();
    let modified = next_line_with("MODIFIED").await;
    let _ = watch.kill();
    let _ = watch.wait();
    assert!(
        modified.contains("web") && modified.contains("203.0.113.10"),
        "{modified}"
    );
    server
        .patch(
            "services",
            Some("default"),
            "web",
            fake_apiserver::PatchType::Merge,
            &serde_json::json!({ "status": { "loadBalancer": { "ingress": [{ "ip": "203.0.113.9" }] } } }),
            true,
        )
        .unwrap();

    let pods = kubectl(&kubeconfig, &["get", "pods", "-o", "wide"]).await;
    assert!(
        words_of_line(&pods, "web-1").contains(&"worker-1".to_string()),
        "{pods}"
    );

    // Both Events, whichever API they were posted through.
    let events = kubectl(&kubeconfig, &["get", "events", "-A"]).await;
    assert_eq!(
        words_of_line(&events, "NAMESPACE")[..6],
        ["NAMESPACE", "LAST", "SEEN", "TYPE", "REASON", "OBJECT"]
    );
    assert!(
        events.contains("service/web") && events.contains("node/worker-1"),
        "{events}"
    );

    let describe = kubectl(&kubeconfig, &["describe", "service", "web"]).await;
    assert!(
        describe.contains("LoadBalancer Ingress:") && describe.contains("203.0.113.9"),
        "{describe}"
    );
    let warning = words_of_line(&describe, "SyncLoadBalancerFailed");
    assert_eq!(warning[0], "Warning", "{describe}");
    assert!(
        describe.contains("invalid annotation cloudstack-load-balancer-algorithm"),
        "{describe}"
    );
    assert!(describe.contains("(x7 over"), "the count shows: {describe}");

    let describe = kubectl(&kubeconfig, &["describe", "node", "worker-1"]).await;
    assert!(
        describe.contains("ProviderID:") && describe.contains("external-cloudstack://vm-1"),
        "{describe}"
    );
    assert!(
        describe.contains("Synced") && describe.contains("Node synced successfully"),
        "{describe}"
    );
}

/// kubectl sends credentials only over TLS (clientcmd reads a kubeconfig's user only when
/// `IsConfigTransportTLS`), so against this plain-HTTP server it runs without RBAC: it
/// stores `deploy/rbac.yaml` and `kubectl create token` gets a ServiceAccount token from the
/// TokenRequest API. (That the token is then held to the role is tested with a kube client
/// in `rbac.rs`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_deploy_rbac_and_creates_a_token() {
    if !Path::new(KUBECTL).exists() {
        eprintln!("skipping: {KUBECTL} is not installed");
        return;
    }
    let (server, _client) = start().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig: PathBuf = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/rbac.yaml");
    let applied = kubectl(&kubeconfig, &["apply", "-f", manifest]).await;
    assert!(
        applied.contains("clusterrole.rbac.authorization.k8s.io/system:cloud-controller-manager created")
            && applied.contains("serviceaccount/cloud-controller-manager created")
            && applied.contains("rolebinding.rbac.authorization.k8s.io/cloud-controller-manager:leader-election created"),
        "{applied}"
    );
    let again = kubectl(&kubeconfig, &["apply", "-f", manifest]).await;
    assert!(again.contains("unchanged"), "{again}");
    let roles = kubectl(&kubeconfig, &["get", "clusterroles"]).await;
    assert!(roles.contains("system:cloud-controller-manager"), "{roles}");
    let token = kubectl(
        &kubeconfig,
        &[
            "create",
            "token",
            "cloud-controller-manager",
            "-n",
            "kube-system",
        ],
    )
    .await;
    assert!(token.trim().len() >= 32, "{token}");
    let refused = kubectl_fails(
        &kubeconfig,
        &["create", "token", "nobody", "-n", "kube-system"],
    )
    .await;
    assert!(
        refused.contains("serviceaccounts \"nobody\" not found"),
        "{refused}"
    );
}

/// Runs `kubectl auth can-i ARGS` (discovery cached under `dir`); returns whether it
/// exited 0, its stdout and its stderr. It prints `yes` and exits 0, or `no` and exits 1.
async fn can_i(kubeconfig: &Path, dir: &Path, args: &[&str]) -> (bool, String, String) {
    let mut command = Command::new(KUBECTL);
    command
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .arg("--request-timeout=10s")
        .args(["auth", "can-i"])
        .args(args);
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .expect("kubectl runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).trim().to_string(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `kubectl auth can-i` posts a SelfSubjectAccessReview (as protobuf) and prints the
/// server's answer. kubectl sends no credentials over plain HTTP (see above), so it asks
/// as `system:anonymous`, which RBAC lets create the review only once `system:basic-user`
/// is bound to it (kube-apiserver binds it to `system:authenticated` alone).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_can_i_answers_from_rbac() {
    if !Path::new(KUBECTL).exists() {
        eprintln!("skipping: {KUBECTL} is not installed");
        return;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let server = fake_apiserver::FakeApiServer::start_with_rbac()
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig: PathBuf = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, fake_apiserver::kubeconfig_yaml(&server.url())).unwrap();
    let bind = |name: &str, kind: &str, role: &str, namespace: Option<&str>| {
        let resource = if namespace.is_some() {
            "rolebindings"
        } else {
            "clusterrolebindings"
        };
        server
            .create(
                resource,
                namespace,
                serde_json::json!({
                    "metadata": { "name": name },
                    "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role },
                    "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:unauthenticated" }],
                }),
            )
            .unwrap();
    };
    bind(
        "anonymous-discovery",
        "ClusterRole",
        "system:discovery",
        None,
    );

    let (ok, _, refused) = can_i(&kubeconfig, dir.path(), &["list", "pods"]).await;
    assert!(!ok);
    assert!(
        refused.contains("User \"system:anonymous\" cannot create resource \"selfsubjectaccessreviews\" in API group \"authorization.k8s.io\""),
        "{refused}"
    );

    bind(
        "anonymous-basic-user",
        "ClusterRole",
        "system:basic-user",
        None,
    );
    server
        .create(
            "roles",
            Some("default"),
            serde_json::json!({
                "metadata": { "name": "pod-reader" },
                "rules": [{ "apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"] }],
            }),
        )
        .unwrap();
    bind(
        "anonymous-pod-reader",
        "Role",
        "pod-reader",
        Some("default"),
    );

    for (args, expected) in [
        (&["list", "pods"][..], "yes"),
        (&["get", "pods/web"], "yes"),
        (&["delete", "pods"], "no"),
        (&["list", "pods", "-n", "kube-system"], "no"),
        (&["list", "nodes"], "no"),
        (&["get", "/healthz"], "yes"),
        (&["get", "/metrics"], "no"),
    ] {
        let (ok, answer, stderr) = can_i(&kubeconfig, dir.path(), args).await;
        assert_eq!(
            (answer.as_str(), ok),
            (expected, expected == "yes"),
            "kubectl auth can-i {}: {stderr}",
            args.join(" ")
        );
    }
    // Seven answered; the refused one never reached the handler that counts.
    assert_eq!(
        server.request_count(
            Verb::Create,
            "selfsubjectaccessreviews.authorization.k8s.io"
        ),
        7
    );
}
