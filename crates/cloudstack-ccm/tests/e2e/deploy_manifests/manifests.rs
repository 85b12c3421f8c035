//! The content of the plain manifests under `deploy/`, the `Dockerfile` and the ingress
//! examples: every document parses, the Deployment, Secret example and metrics Service are
//! as CKS expects, the kustomization lists every manifest, and the host-network component.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, ensure};

use super::rbac::check_rbac;
use super::{
    HEALTH_PORT, check_deployment, container, deploy_documents, find, kind, load_documents,
    manifest_files, name, parse_documents, read, repo_root, run_tool, stdout_of, strings,
};
use crate::common::target::current_test;

#[test]
fn every_deploy_document_parses_and_has_a_known_kind() -> Result<()> {
    let documents = deploy_documents()?;
    let kinds: BTreeSet<&str> = documents.iter().map(kind).collect();
    let expected: BTreeSet<&str> = [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Deployment",
        "Service",
        "Secret",
        "ServiceMonitor",
        "Kustomization",
        "Component",
    ]
    .into();
    assert_eq!(kinds, expected);
    for document in documents
        .iter()
        .filter(|d| !matches!(kind(d), "Kustomization" | "Component"))
    {
        ensure!(
            document["apiVersion"].is_string(),
            "{document:?} lacks apiVersion"
        );
        ensure!(
            !name(document).is_empty(),
            "{document:?} lacks metadata.name"
        );
    }
    Ok(())
}

#[test]
fn deployment_runs_with_cks_arguments_probes_and_tolerations() -> Result<()> {
    let documents = deploy_documents()?;
    check_deployment(find(&documents, "Deployment", "cloud-controller-manager")?)
}

#[test]
fn secret_example_is_the_cks_secret_with_a_global_section() -> Result<()> {
    let documents = deploy_documents()?;
    let secret = find(&documents, "Secret", "cloudstack-secret")?;
    ensure!(secret["metadata"]["namespace"] == "kube-system");
    let config = secret["stringData"]["cloud-config"]
        .as_str()
        .context("stringData.cloud-config")?;
    ensure!(config.starts_with("[Global]\n"));
    for key in ["api-url", "api-key", "secret-key"] {
        ensure!(
            config.lines().any(|l| l.starts_with(&format!("{key} = "))),
            "cloud-config example lacks {key}"
        );
    }
    Ok(())
}

#[test]
fn metrics_service_targets_the_health_port() -> Result<()> {
    let documents = deploy_documents()?;
    let service = find(&documents, "Service", "cloud-controller-manager-metrics")?;
    ensure!(service["spec"]["selector"]["k8s-app"] == "cloud-controller-manager");
    ensure!(service["spec"]["ports"][0]["port"].as_u64() == Some(HEALTH_PORT));
    let deployment = find(&documents, "Deployment", "cloud-controller-manager")?;
    let container_port = &container(deployment)["ports"][0];
    ensure!(container_port["name"] == service["spec"]["ports"][0]["targetPort"]);
    ensure!(container_port["containerPort"].as_u64() == Some(HEALTH_PORT));
    Ok(())
}

#[test]
fn kustomization_lists_every_manifest_but_the_secret_example() -> Result<()> {
    let deploy = repo_root().join("deploy");
    let kustomization = load_documents(&deploy.join("kustomization.yaml"))?;
    let listed: BTreeSet<String> = strings(&kustomization[0]["resources"])
        .into_iter()
        .collect();
    let on_disk: BTreeSet<String> = manifest_files(&deploy)?
        .iter()
        .filter(|p| p.parent() == Some(deploy.as_path()))
        .filter_map(|p| p.file_name()?.to_str().map(str::to_owned))
        .filter(|name| name != "kustomization.yaml")
        .collect();
    assert_eq!(listed, on_disk);

    let Some(output) = run_tool("kubectl", &["kustomize", "deploy"])? else {
        return Ok(());
    };
    let rendered = parse_documents(&stdout_of(output, "kubectl kustomize deploy")?, "kustomize")?;
    check_rbac(&rendered)?;
    check_deployment(find(&rendered, "Deployment", "cloud-controller-manager")?)?;
    ensure!(
        rendered.iter().all(|d| kind(d) != "Secret"),
        "the placeholder Secret must not be applied by `kubectl apply -k deploy/`"
    );
    Ok(())
}

#[test]
fn dockerfile_ships_the_static_binary_and_runs_it_as_non_root() -> Result<()> {
    let dockerfile = read(&repo_root().join("Dockerfile"))?;
    let instructions: Vec<&str> = dockerfile
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    // One stage from scratch: nothing to pull from a registry, nothing but the binary and
    // the CA bundle in the image.
    ensure!(
        instructions.first() == Some(&"FROM scratch"),
        "the image starts FROM scratch: {instructions:?}"
    );
    ensure!(
        instructions
            .iter()
            .filter(|l| l.starts_with("FROM "))
            .count()
            == 1,
        "a single stage: {instructions:?}"
    );
    ensure!(instructions.contains(&"COPY cloudstack-ccm /usr/local/bin/cloudstack-ccm"));
    ensure!(instructions.contains(&"COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt"));
    let user = instructions
        .iter()
        .find_map(|l| l.strip_prefix("USER "))
        .context("a USER instruction")?;
    let uid: u32 = user.split(':').next().unwrap_or_default().parse()?;
    ensure!(uid != 0, "the image runs as a non-root user, not {user}");
    ensure!(instructions.contains(&"ENTRYPOINT [\"/usr/local/bin/cloudstack-ccm\"]"));
    ensure!(instructions.contains(&format!("EXPOSE {HEALTH_PORT}").as_str()));

    // The script that prepares the build context builds that binary: static, release,
    // without the demo (the simulator and the fake API server stay out of the image).
    let script = read(&repo_root().join("deploy/build-image.sh"))?;
    ensure!(script.contains("target-feature=+crt-static"));
    ensure!(
        script.contains("cargo build --release --locked -p cloudstack-ccm --no-default-features")
    );
    ensure!(script.contains("ca-certificates.crt") && script.contains("-f Dockerfile"));
    let manifest = read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))?;
    ensure!(manifest.contains("name = \"cloudstack-ccm\"\npath = \"src/main.rs\""));
    ensure!(manifest.contains("default = [\"demo\"]"));
    Ok(())
}

#[test]
fn ingress_examples_enable_proxy_protocol_on_both_sides() -> Result<()> {
    const ANNOTATION: &str = "service.beta.kubernetes.io/cloudstack-load-balancer-proxy-protocol";
    let dir = repo_root().join("examples/ingress");
    let nginx = load_documents(&dir.join("ingress-nginx.yaml"))?;
    let service = find(&nginx, "Service", "ingress-nginx-controller")?;
    ensure!(service["metadata"]["annotations"][ANNOTATION] == "true");
    ensure!(service["spec"]["type"] == "LoadBalancer");
    let config = find(&nginx, "ConfigMap", "ingress-nginx-controller")?;
    ensure!(config["data"]["use-proxy-protocol"] == "true");

    let traefik = load_documents(&dir.join("traefik.yaml"))?;
    let service = find(&traefik, "Service", "traefik")?;
    ensure!(service["metadata"]["annotations"][ANNOTATION] == "true");
    let args = strings(&container(find(&traefik, "Deployment", "traefik")?)["args"]);
    for port in service["spec"]["ports"].as_sequence().context("ports")? {
        let entry_point = port["targetPort"].as_str().context("targetPort")?;
        let flag = format!("--entryPoints.{entry_point}.proxyProtocol.trustedIPs=");
        ensure!(
            args.iter().any(|a| a.starts_with(&flag)),
            "Traefik entry point {entry_point} does not accept the PROXY header"
        );
    }

    let nginx_values = load_documents(&dir.join("ingress-nginx-values.yaml"))?;
    ensure!(nginx_values[0]["controller"]["config"]["use-proxy-protocol"] == "true");
    ensure!(nginx_values[0]["controller"]["service"]["annotations"][ANNOTATION] == "true");
    let traefik_values = load_documents(&dir.join("traefik-values.yaml"))?;
    ensure!(traefik_values[0]["service"]["annotations"][ANNOTATION] == "true");
    for entry_point in ["web", "websecure"] {
        let trusted = &traefik_values[0]["ports"][entry_point]["proxyProtocol"]["trustedIPs"];
        ensure!(!strings(trusted).is_empty(), "{entry_point} trustedIPs");
    }
    Ok(())
}

#[test]
fn the_host_network_component_changes_only_the_pod_network() -> Result<()> {
    let component = load_documents(&repo_root().join("deploy/host-network/kustomization.yaml"))?;
    ensure!(kind(&component[0]) == "Component");
    // A kustomization of the operator's own, as the component's header shows.
    let dir = tempfile::tempdir()?;
    // kustomize takes relative paths only: up to `/` from the temporary directory, then
    // down to deploy/.
    let up = "../".repeat(dir.path().canonicalize()?.components().count() - 1);
    let deploy = PathBuf::from(up).join(
        repo_root()
            .join("deploy")
            .canonicalize()?
            .strip_prefix("/")?,
    );
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
             resources:\n  - {}\ncomponents:\n  - {}\n",
            deploy.display(),
            deploy.join("host-network").display()
        ),
    )?;
    let target = dir.path().to_str().context("a UTF-8 path")?;
    let Some(output) = run_tool("kubectl", &["kustomize", target])? else {
        println!(
            "skipped: {}: `kubectl` is not installed, so the component was not rendered \
             (only its kind was checked)",
            current_test()
        );
        return Ok(());
    };
    let rendered = parse_documents(
        &stdout_of(output, "kubectl kustomize with deploy/host-network")?,
        "kustomize",
    )?;
    check_rbac(&rendered)?;
    let deployment = find(&rendered, "Deployment", "cloud-controller-manager")?;
    check_deployment(deployment)?;
    let pod = &deployment["spec"]["template"]["spec"];
    ensure!(pod["hostNetwork"] == true, "hostNetwork: {pod:?}");
    ensure!(
        pod["dnsPolicy"] == "ClusterFirstWithHostNet",
        "cluster DNS on the host network"
    );
    // Both replicas bind port 10258 of their node: a surge replica could not start on a
    // single control-plane node, so the update replaces instead of surging.
    let update = &deployment["spec"]["strategy"]["rollingUpdate"];
    ensure!(update["maxSurge"].as_u64() == Some(0), "{update:?}");
    ensure!(update["maxUnavailable"].as_u64() == Some(1), "{update:?}");
    Ok(())
}
