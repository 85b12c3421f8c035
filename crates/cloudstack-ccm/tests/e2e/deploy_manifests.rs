//! Checks of the deployment artefacts: the manifests under `deploy/`, the Helm chart under
//! `deploy/chart/`, the `Dockerfile` and the ingress examples under `examples/ingress/`.
//!
//! Every YAML document is parsed; the Deployment must carry CKS's arguments, probes,
//! tolerations and two replicas; the RBAC rules must be exactly the ones the code uses; the
//! chart's templates may only reference values that exist and its defaults must match the
//! plain manifests. Where `kubectl` or `helm` is installed the artefacts are also rendered
//! by the real tools; when a tool is missing the test says so loudly and checks the rest.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};
use serde::Deserialize;
use serde_yaml::Value;

/// One RBAC permission: (API group, resource, verb).
type Permission = (String, String, String);

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

/// Checks the RBAC objects (plain or rendered).
fn check_rbac(documents: &[Value]) -> Result<()> {
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
fn rbac_grants_exactly_what_the_code_uses() -> Result<()> {
    check_rbac(&deploy_documents()?)
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

// ---------------------------------------------------------------------------------------
// The Helm chart
// ---------------------------------------------------------------------------------------

fn chart_dir() -> PathBuf {
    repo_root().join("deploy/chart")
}

fn chart_values() -> Result<Value> {
    Ok(load_documents(&chart_dir().join("values.yaml"))?.remove(0))
}

/// The template files, by file name.
fn chart_templates() -> Result<BTreeMap<String, String>> {
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
fn without_template_lines(template: &str) -> String {
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

// ---------------------------------------------------------------------------------------
// kubectl against the in-process API server
// ---------------------------------------------------------------------------------------

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
