//! `cloudstack-ccm demo --vpc`: routed pod networks in a VPC. Two VMs on the simulator's VPC
//! tier become Nodes with pod CIDRs (as kube-controller-manager allocates them); the real
//! cloud-node and route controllers run against the simulator (CloudStack 4.22) and the
//! in-process API server, and the demo shows each Node's static route appear in the VPC,
//! its `NetworkUnavailable` condition turn `False`, and a deleted Node's route go.

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cloudstack_sim::{NicSpec, Scenario, SimServer, VmSpec};
use fake_apiserver::FakeApiServer;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;

use super::error::DemoError;
use super::scenario::{ACCOUNT, JOB_DURATION_MS};
use crate::cli::DemoArgs;
use crate::config::CloudConfig;
use crate::connect;
use crate::controllers::node_vocabulary::UNINITIALIZED_TAINT;
use crate::controllers::route::RouteSettings;
use crate::controllers::{self, Context, ControllerSet, shutdown_channel};
use crate::leader::{ElectionState, LeaderStatus};
use crate::metrics::Metrics;
use crate::server::Readiness;

/// `(node and VM name, address on the tier, pod CIDR)`.
const NODES: [(&str, &str, &str); 2] = [
    ("worker-1", "10.100.1.11", "10.244.1.0/24"),
    ("worker-2", "10.100.1.12", "10.244.2.0/24"),
];

/// How often the demo looks.
const POLL: Duration = Duration::from_millis(50);

/// The simulator's small cloud with the Node VMs on the VPC tier.
fn cloud() -> Scenario {
    let mut scenario = Scenario::small();
    scenario.settings.job_duration_ms = JOB_DURATION_MS;
    scenario.vms = NODES
        .iter()
        .map(|(name, ip, _)| VmSpec {
            id: None,
            name: name.to_string(),
            state: "Running".to_string(),
            zone: cloudstack_sim::SMALL_ZONE.to_string(),
            offering: "small".to_string(),
            nics: vec![NicSpec {
                network: cloudstack_sim::SMALL_TIER.to_string(),
                ipv4: ip.to_string(),
                ipv6: None,
                isdefault: true,
            }],
            static_nat_ip: None,
            account: Some(ACCOUNT.to_string()),
            project: None,
        })
        .collect();
    scenario
}

/// The static routes in the simulator: `(cidr, next hop, node tag)`.
fn routes(sim: &SimServer) -> Vec<(String, String, String)> {
    sim.with_state(|state| {
        state
            .static_routes
            .iter()
            .filter(|r| r.state == "Active")
            .map(|r| {
                let node = state
                    .tags
                    .iter()
                    .find(|t| t.resource_id == r.id && t.key == crate::cloud::tags::TAG_NODE)
                    .map(|t| t.value.clone())
                    .unwrap_or_default();
                (r.cidr.clone(), r.next_hop.clone().unwrap_or_default(), node)
            })
            .collect()
    })
}

/// Polls `probe` until it answers, at most `timeout`.
async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> Result<T, DemoError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(found) = probe().await {
            return Ok(found);
        }
        if Instant::now() > deadline {
            return Err(DemoError::NotConverged {
                phase: "demo --vpc".into(),
                waiting_for: what.into(),
                timeout,
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Runs the VPC tour, writing one line per step to `out`.
pub async fn run(args: &DemoArgs, mut out: impl Write) -> Result<(), DemoError> {
    let sim = SimServer::start(cloud()).await?;
    let apiserver = FakeApiServer::start().await?;
    let (api_key, secret_key) = sim
        .credentials(ACCOUNT)
        .ok_or_else(|| DemoError::Scenario(format!("account {ACCOUNT} has no keys")))?;
    let config = CloudConfig::from_text(
        &format!(
            "[Global]\napi-url = {}\napi-key = {}\nsecret-key = {}\nzone = {}\n",
            sim.api_url(),
            api_key.expose(),
            secret_key.expose(),
            cloudstack_sim::SMALL_ZONE
        ),
        |_| None,
    )?;
    let metrics = Arc::new(Metrics::new());
    let cloudstack = connect::cloudstack_client(&config, metrics.clone())?;
    let server_version = connect::learn_server(&config, &cloudstack).await?.version;
    let status = LeaderStatus::new().with_metrics(metrics.clone());
    status.set(ElectionState::Leading);
    let kube = apiserver.kube_client()?;
    let mut ctx = Context::new(
        kube.clone(),
        cloudstack,
        server_version.clone(),
        config,
        "kubernetes",
        metrics,
    )
    .with_readiness(Readiness::new(status));
    ctx.routes = RouteSettings {
        allocate_node_cidrs: true,
        reconciliation_period: Duration::from_millis(500),
        ..RouteSettings::default()
    };
    let ctx = Arc::new(ctx);
    let (enabled, _) = ControllerSet::parse(&["cloud-node", "route"])
        .map_err(|error| DemoError::Scenario(error.to_string()))?;
    let (trigger, shutdown) = shutdown_channel();
    let controllers = tokio::spawn(controllers::run(ctx, enabled, shutdown));
    let started = Instant::now();
    let at = || format!("{:>6.2}s", started.elapsed().as_secs_f64());
    writeln!(
        out,
        "cloudstack-ccm demo --vpc: CloudStack {server_version} simulator at {} (VPC {}, tier {}), \
         Kubernetes API server at {}; controllers cloud-node and route (--allocate-node-cidrs)",
        sim.api_url(),
        cloudstack_sim::SMALL_VPC,
        cloudstack_sim::SMALL_TIER,
        apiserver.url()
    )?;

    let nodes: Api<Node> = Api::all(kube);
    for (name, _, cidr) in NODES {
        let node: Node = serde_json::from_value(json!({
            "metadata": { "name": name, "labels": { "kubernetes.io/hostname": name } },
            "spec": {
                "podCIDR": cidr,
                "podCIDRs": [cidr],
                "taints": [{ "key": UNINITIALIZED_TAINT, "value": "true", "effect": "NoSchedule" }],
            },
        }))
        .map_err(|error| DemoError::Scenario(error.to_string()))?;
        nodes
            .create(&PostParams::default(), &node)
            .await
            .map_err(|error| DemoError::Scenario(format!("creating Node {name}: {error}")))?;
        writeln!(out, "{} Node {name} registers with pod CIDR {cidr}", at())?;
    }
    for (name, ip, cidr) in NODES {
        wait_for(&format!("a route for {name}"), args.timeout, || async {
            routes(&sim)
                .iter()
                .any(|(c, hop, node)| c == cidr && hop == ip && node == name)
                .then_some(())
        })
        .await?;
        writeln!(
            out,
            "{} VPC {}: static route {cidr} -> next hop {ip} (Node {name}'s InternalIP), tagged for the cluster",
            at(),
            cloudstack_sim::SMALL_VPC
        )?;
        let nodes = nodes.clone();
        wait_for(
            &format!("{name}'s NetworkUnavailable condition"),
            args.timeout,
            || {
                let nodes = nodes.clone();
                async move {
                    let node = nodes.get(name).await.ok()?;
                    node.status?
                        .conditions?
                        .into_iter()
                        .find(|c| c.type_ == "NetworkUnavailable" && c.status == "False")
                        .and_then(|c| c.reason)
                }
            },
        )
        .await
        .map(|reason| {
            writeln!(
                out,
                "{} Node {name}: NetworkUnavailable=False ({reason})",
                at()
            )
        })??;
    }
    let (gone, _, gone_cidr) = NODES[1];
    nodes
        .delete(gone, &DeleteParams::default())
        .await
        .map_err(|error| DemoError::Scenario(format!("deleting Node {gone}: {error}")))?;
    writeln!(out, "{} Node {gone} is deleted", at())?;
    wait_for(&format!("{gone}'s route to go"), args.timeout, || async {
        (!routes(&sim).iter().any(|(c, _, _)| c == gone_cidr)).then_some(())
    })
    .await?;
    writeln!(
        out,
        "{} VPC {}: static route {gone_cidr} removed",
        at(),
        cloudstack_sim::SMALL_VPC
    )?;
    writeln!(
        out,
        "Done: {} route(s) left in the VPC; pods on each Node are reachable through the VPC router, no overlay.",
        routes(&sim).len()
    )?;
    trigger.trigger();
    match tokio::time::timeout(Duration::from_secs(10), controllers).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(error))) => return Err(DemoError::Controllers(format!("{error:#}"))),
        Ok(Err(error)) => return Err(DemoError::Controllers(error.to_string())),
        Err(_) => {
            return Err(DemoError::Controllers(
                "the controllers did not stop".into(),
            ));
        }
    }
    sim.shutdown();
    Ok(())
}
