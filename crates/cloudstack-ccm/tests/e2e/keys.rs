//! The keys a cluster really gets: the real binary against a simulator whose roles decide
//! as CloudStack's `DynamicRoleBasedAPIAccessChecker` does (432 before the signature).
//!
//! * CloudStack Kubernetes Service's project keys (31 APIs, then `*` DENY; a cloud-config
//!   with `project-id`, no `zone`, no `version`): Nodes initialised, a Service served on
//!   the project's isolated network and on its VPC tier, deleted with nothing left; a
//!   SIGKILL between the address association and the first rule leaks nothing and takes
//!   no second address; no refused command asked more than twice.
//! * A role without the SSL commands: a TLS Service is warned (Event and condition name the
//!   refused command and the annotation), its plain port served, and it is deleted; a
//!   plain Service beside it is unaffected.
//! * A server hiding its version (`listCapabilities` without `cloudstackversion`, and
//!   XML replies without `cloud-stack-version`): the controller starts and serves.
//! * The default User role: a normal day has no refused and no failing call.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::common::{self, TestNode, UNINITIALIZED_TAINT};
use crate::reliability::audit::{self, Baseline};
use crate::reliability::ccm::Ccm;
use crate::reliability::rig::Rig;
use crate::reliability::services::{self, lb_service};
use cloudstack_ccm::cloud::loadbalancer::annotations::{INTERNAL, TLS_CERTIFICATE_ID, TLS_PORTS};
use cloudstack_sim::{
    CKS_ACCOUNT, CKS_NETWORK, CKS_NODE_PREFIX, CKS_TIER, RoleSpec, RuleSpec, SMALL_NETWORK,
    SMALL_PROJECT_ID, Scenario,
};
use serde_json::Value;

mod normal_day;

/// How long the controller may take for each step of a test.
const STEP: Duration = Duration::from_secs(30);

/// The SSL commands a role may take away.
const SSL_COMMANDS: [&str; 5] = [
    "uploadSslCert",
    "listSslCerts",
    "deleteSslCert",
    "assignCertToLoadBalancer",
    "removeCertFromLoadBalancer",
];

/// The cloud-config CloudStack Kubernetes Service writes for a project's cluster.
fn cks_cloud_config(rig: &Rig) -> PathBuf {
    rig.cloud_config_extra(CKS_ACCOUNT, &format!("project-id = {SMALL_PROJECT_ID}\n"))
}

/// Registers the VMs `names` as kubelets do: uninitialised Nodes without providerID.
fn register_nodes(rig: &Rig, names: &[String]) {
    let cluster = rig.cluster();
    for name in names {
        let node = serde_json::to_value(TestNode::new(name).build()).expect("a Node");
        cluster.create("nodes", None, node).expect("Node created");
    }
}

/// Waits until every Node of `names` has its providerID and no uninitialized taint.
async fn wait_initialised(rig: &Rig, names: &[String], ccm: &Ccm) {
    let cluster = rig.cluster();
    let initialised = || {
        names.iter().all(|name| {
            let Ok(node) = cluster.get("nodes", None, name) else {
                return false;
            };
            let tainted = node["spec"]["taints"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t["key"] == UNINITIALIZED_TAINT));
            node["spec"]["providerID"].is_string() && !tainted
        })
    };
    let deadline = tokio::time::Instant::now() + STEP;
    while !initialised() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "Nodes {names:?} not initialised: {}",
            ccm.output()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `probe` holds, at most [`STEP`]; panics with `what` and the log.
async fn wait_for(what: &str, ccm: &Ccm, mut probe: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + STEP;
    while !probe() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}: {}",
            ccm.output()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits for Service `name` to have an ingress address; returns it.
async fn wait_served(rig: &Rig, name: &str, ccm: &Ccm) -> String {
    let cluster = rig.cluster();
    wait_for(&format!("an ingress address on {name}"), ccm, || {
        services::get(&cluster, name).is_some_and(|s| services::ingress_ip(&s).is_some())
    })
    .await;
    let service = services::get(&cluster, name).expect("the Service");
    services::ingress_ip(&service)
        .expect("an address")
        .to_owned()
}

/// Deletes Service `name` and waits until it is gone (its finalizer removed).
async fn delete_and_wait(rig: &Rig, name: &str, ccm: &Ccm) {
    let cluster = rig.cluster();
    services::delete(&cluster, name);
    wait_for(&format!("{name} to be deleted"), ccm, || {
        services::get(&cluster, name).is_none()
    })
    .await;
}

/// The calls the simulator refused with 432, by command.
fn refused_calls(rig: &Rig) -> BTreeMap<String, usize> {
    let mut refused = BTreeMap::new();
    for call in rig.sim.call_log().iter().filter(|c| c.status == 432) {
        *refused.entry(call.command.clone()).or_default() += 1;
    }
    refused
}

/// The calls that failed otherwise (any status but 200 and 432), and the failed jobs.
fn other_failures(rig: &Rig) -> Vec<String> {
    let mut failed: Vec<String> = rig
        .sim
        .call_log()
        .iter()
        .filter(|c| c.status != 200 && c.status != 432)
        .map(|c| format!("{} {}: {:?}", c.command, c.status, c.error))
        .collect();
    failed.extend(rig.sim.with_state(|s| {
        s.jobs
            .iter()
            .filter(|job| job.status == 2)
            .map(|job| format!("job {} of {} failed: {:?}", job.id, job.command, job.result))
            .collect::<Vec<_>>()
    }));
    failed
}

/// Asserts that no call failed but those the role refused (432).
fn assert_no_other_failures(rig: &Rig) {
    let failed = other_failures(rig);
    assert!(
        failed.is_empty(),
        "no call fails but the refused ones: {failed:?}"
    );
}

/// Asserts that no refused command was asked more than twice.
fn assert_refusals_paced(rig: &Rig, ccm: &Ccm) {
    let refused = refused_calls(rig);
    println!(
        "refused calls: {refused:?}; all calls: {}",
        rig.sim.call_log().len()
    );
    assert!(
        refused.values().all(|count| *count <= 2),
        "a refused command was asked more than twice: {refused:?}\n{}",
        ccm.output()
    );
}

/// Asserts the simulator holds nothing of the Services (none is left).
fn assert_nothing_left(rig: &Rig, baseline: &Baseline) {
    let findings = audit::audit(&rig.sim, baseline, &[]);
    assert!(findings.is_clean(), "left behind: {findings}");
}

/// The Service's `LoadBalancerSupported` condition, if set.
fn supported_condition(rig: &Rig, name: &str) -> Option<Value> {
    let service = services::get(&rig.cluster(), name)?;
    service["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "cloudstack.apache.org/LoadBalancerSupported")
        .cloned()
}

/// The Events about `name`, as "reason: note" lines.
fn events_about(rig: &Rig, name: &str) -> Vec<String> {
    common::events_in(&rig.cluster(), name)
        .iter()
        .map(|event| {
            format!(
                "{}: {}",
                common::event_reason(event).unwrap_or_default(),
                common::event_note(event)
            )
        })
        .collect()
}

/// The names of the project's VMs.
fn project_nodes() -> Vec<String> {
    (1..=3).map(|i| format!("{CKS_NODE_PREFIX}{i}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cks_project_keys_initialise_nodes_and_serve_and_delete_services() {
    let rig = Rig::start(Scenario::cks_project()).await;
    let baseline = Baseline::take(&rig.sim);
    let nodes = project_nodes();
    register_nodes(&rig, &nodes);
    let ccm = Ccm::start(&rig, "cks", &cks_cloud_config(&rig), &[]);
    wait_initialised(&rig, &nodes, &ccm).await;

    // A Service on the project's isolated network (the Nodes' network).
    let cluster = rig.cluster();
    services::create(&cluster, lb_service("web", &[("TCP", 80, 30080)], &[]));
    let address = wait_served(&rig, "web", &ccm).await;
    let served_on = rig.sim.with_state(|s| {
        let ip = s
            .ips
            .iter()
            .find(|ip| ip.address == address)
            .map(|ip| ip.id.clone());
        s.lb_rules
            .iter()
            .filter(|r| Some(&r.ip_id) == ip.as_ref())
            .map(|r| r.network_id.clone())
            .collect::<Vec<_>>()
    });
    let network_id = rig.sim.with_state(|s| {
        s.networks
            .iter()
            .find(|n| n.name == CKS_NETWORK)
            .map(|n| n.id.clone())
    });
    assert_eq!(served_on, vec![network_id.expect("the project's network")]);

    delete_and_wait(&rig, "web", &ccm).await;
    assert_nothing_left(&rig, &baseline);
    assert_refusals_paced(&rig, &ccm);
    let events = events_about(&rig, "web");
    assert!(
        !events
            .iter()
            .any(|e| e.starts_with("SyncLoadBalancerFailed")),
        "a refused tag is no failure: {events:?}"
    );
    let output = ccm.output();
    assert!(
        output.contains("the orphan pass cannot look for"),
        "the orphan pass says what it cannot look for: {output}"
    );
    assert!(
        output.contains("CloudStack refuses listCapabilities to the role"),
        "the refusal is said: {output}"
    );
    assert_eq!(
        output
            .matches("CloudStack refuses createTags to the role")
            .count(),
        1,
        "said once: {output}"
    );
    assert_no_other_failures(&rig);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cks_project_keys_serve_and_delete_a_service_on_a_vpc_tier() {
    let mut scenario = Scenario::cks_project();
    let nodes = scenario.add_vms(CKS_TIER, "tnode-", 2);
    let rig = Rig::start(scenario).await;
    let baseline = Baseline::take(&rig.sim);
    register_nodes(&rig, &nodes);
    let ccm = Ccm::start(&rig, "cks-tier", &cks_cloud_config(&rig), &[]);
    wait_initialised(&rig, &nodes, &ccm).await;

    let cluster = rig.cluster();
    services::create(&cluster, lb_service("tier-web", &[("TCP", 80, 30180)], &[]));
    let address = wait_served(&rig, "tier-web", &ccm).await;
    let acl_items = rig.sim.with_state(|s| s.acl_items.len());
    assert!(
        acl_items > 0,
        "the tier's ACL list admits the port ({address})"
    );

    delete_and_wait(&rig, "tier-web", &ccm).await;
    assert_nothing_left(&rig, &baseline);
    assert_refusals_paced(&rig, &ccm);
    assert_no_other_failures(&rig);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cks_project_keys_killed_between_the_address_and_the_first_rule_leak_nothing() {
    let mut scenario = Scenario::cks_project();
    // Slow jobs: the kill lands while the address is being associated.
    scenario.settings.job_duration_ms = 1_500;
    let rig = Rig::start(scenario).await;
    let baseline = Baseline::take(&rig.sim);
    let nodes = project_nodes();
    register_nodes(&rig, &nodes);
    let config = cks_cloud_config(&rig);
    let mut ccm = Ccm::start(&rig, "cks-kill", &config, &[]);
    wait_initialised(&rig, &nodes, &ccm).await;

    let cluster = rig.cluster();
    services::create(&cluster, lb_service("killed", &[("TCP", 80, 30280)], &[]));
    let count = |command: &str| {
        rig.sim
            .call_log()
            .iter()
            .filter(|c| c.command == command && c.status == 200)
            .count()
    };
    wait_for("associateIpAddress", &ccm, || {
        count("associateIpAddress") == 1
    })
    .await;
    ccm.kill();
    assert_eq!(
        count("createLoadBalancerRule"),
        0,
        "killed before the first rule"
    );

    let ccm = Ccm::start(&rig, "cks-kill", &config, &[]);
    delete_and_wait(&rig, "killed", &ccm).await;
    assert_eq!(count("associateIpAddress"), 1, "no second address taken");
    assert_nothing_left(&rig, &baseline);
    assert_refusals_paced(&rig, &ccm);
}

/// `small()` where `alice`'s role is the default User role without the SSL commands.
fn without_ssl_commands() -> Scenario {
    let mut scenario = Scenario::small();
    let mut rules: Vec<RuleSpec> = SSL_COMMANDS.iter().map(|c| RuleSpec::deny(*c)).collect();
    rules.push(RuleSpec::allow("*"));
    scenario.roles.push(RoleSpec {
        name: "User without SSL".into(),
        role_type: cloudstack_sim::Role::User,
        rules,
    });
    for account in scenario
        .accounts
        .iter_mut()
        .filter(|a| a.name == common::ACCOUNT)
    {
        account.custom_role = Some("User without SSL".into());
    }
    scenario
}

/// The small scenario's VMs on `net-vr`, as Nodes.
fn small_nodes(rig: &Rig) -> Vec<String> {
    let names: Vec<String> = rig.sim.with_state(|s| {
        let network = s
            .networks
            .iter()
            .find(|n| n.name == SMALL_NETWORK)
            .map(|n| n.id.clone())
            .unwrap_or_default();
        s.vms
            .iter()
            .filter(|vm| vm.nics.iter().any(|nic| nic.network_id == network))
            .map(|vm| vm.name.clone())
            .collect()
    });
    assert!(!names.is_empty(), "VMs on {SMALL_NETWORK}");
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_without_the_ssl_commands_warns_a_tls_service_and_still_deletes_it() {
    let rig = Rig::start(without_ssl_commands()).await;
    let baseline = Baseline::take(&rig.sim);
    let nodes = small_nodes(&rig);
    register_nodes(&rig, &nodes);
    let ccm = Ccm::start(&rig, "no-ssl", &rig.cloud_config(common::ACCOUNT), &[]);
    wait_initialised(&rig, &nodes, &ccm).await;

    let cluster = rig.cluster();
    let tls = [
        (
            TLS_CERTIFICATE_ID.key,
            "1d3a7c2e-5b4f-4e8a-9c61-2f0b8d7e6a15",
        ),
        (TLS_PORTS.key, "443"),
    ];
    services::create(
        &cluster,
        lb_service("shop", &[("TCP", 80, 30380), ("TCP", 443, 30381)], &tls),
    );
    services::create(&cluster, lb_service("plain", &[("TCP", 8080, 30382)], &[]));
    wait_served(&rig, "shop", &ccm).await;
    wait_served(&rig, "plain", &ccm).await;

    // The TLS port has no rule (never plain TCP for a port asked to be HTTPS); the
    // Warning and the condition name the refused command and the annotation.
    let ports: Vec<u16> = rig
        .sim
        .with_state(|s| s.lb_rules.iter().map(|r| r.public_port).collect());
    assert!(
        ports.contains(&80) && ports.contains(&8080) && !ports.contains(&443),
        "{ports:?}"
    );
    wait_for("the condition on shop", &ccm, || {
        supported_condition(&rig, "shop").is_some_and(|c| c["reason"] == "CommandRefused")
    })
    .await;
    let condition = supported_condition(&rig, "shop").expect("the condition");
    let message = condition["message"].as_str().unwrap_or_default();
    assert!(
        SSL_COMMANDS.iter().any(|c| message.contains(c))
            && message.contains("cloudstack-load-balancer-tls-"),
        "the condition names the command and the annotation: {message}"
    );
    let events = events_about(&rig, "shop");
    assert!(
        events
            .iter()
            .any(|e| SSL_COMMANDS.iter().any(|c| e.contains(c)) && e.contains("443")),
        "a Warning names the refused command and the port: {events:?}"
    );
    assert!(
        supported_condition(&rig, "plain").is_none(),
        "the plain Service is not touched"
    );

    // The dry run says what the refusal takes away, per Service and for the keys.
    let config = rig.cloud_config(common::ACCOUNT);
    let plan = std::process::Command::new(crate::reliability::ccm::BINARY)
        .arg("plan")
        .arg(format!("--cloud-config={}", config.display()))
        .arg(format!("--kubeconfig={}", rig.kubeconfig.display()))
        .output()
        .expect("cloudstack-ccm plan runs");
    let printed = String::from_utf8_lossy(&plan.stdout);
    assert!(
        plan.status.success(),
        "{printed}\n{}",
        String::from_utf8_lossy(&plan.stderr)
    );
    assert!(
        printed.contains("port 443: no rule: the CloudStack keys' role may not call uploadSslCert"),
        "the Service's plan names the refusal: {printed}"
    );
    assert!(
        printed.contains("Keys: the role of the cloud-config keys refuses commands")
            && printed.contains("no TLS termination"),
        "the keys' report: {printed}"
    );

    delete_and_wait(&rig, "shop", &ccm).await;
    delete_and_wait(&rig, "plain", &ccm).await;
    assert_nothing_left(&rig, &baseline);
    // listApis told what the role allows: no SSL command was ever sent.
    assert!(refused_calls(&rig).is_empty(), "{:?}", refused_calls(&rig));
    assert_no_other_failures(&rig);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cks_project_keys_without_static_routes_say_so_once_on_the_nodes() {
    let mut scenario = Scenario::cks_project();
    let nodes = scenario.add_vms(CKS_TIER, "rnode-", 2);
    let rig = Rig::start(scenario).await;
    register_nodes(&rig, &nodes);
    let cluster = rig.cluster();
    for (i, node) in nodes.iter().enumerate() {
        let cidr = format!("10.244.{i}.0/24");
        let patch = serde_json::json!({ "spec": { "podCIDR": cidr, "podCIDRs": [cidr] } });
        cluster
            .patch(
                "nodes",
                None,
                node,
                fake_apiserver::PatchType::Merge,
                &patch,
                false,
            )
            .expect("podCIDR set");
    }
    let ccm = Ccm::start(
        &rig,
        "cks-routes",
        &cks_cloud_config(&rig),
        &[
            "--allocate-node-cidrs=true",
            "--cluster-cidr=10.244.0.0/16",
            "--route-reconciliation-period=1s",
        ],
    );
    wait_initialised(&rig, &nodes, &ccm).await;
    let condition = |name: &str| {
        let node = cluster.get("nodes", None, name).ok()?;
        node["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "NetworkUnavailable")
            .cloned()
    };
    wait_for("NetworkUnavailable on the Nodes", &ccm, || {
        nodes.iter().all(|n| {
            condition(n).is_some_and(|c| {
                c["status"] == "True"
                    && c["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("listStaticRoutes"))
            })
        })
    })
    .await;
    // Several reconciliation periods: the refusal is said once and not asked again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let output = ccm.output();
    assert_eq!(
        output
            .matches("route controller cannot configure pod routes")
            .count(),
        1,
        "{output}"
    );
    assert_eq!(refused_calls(&rig).get("listStaticRoutes"), Some(&1));
    assert_refusals_paced(&rig, &ccm);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cks_project_keys_refuse_an_internal_load_balancer_with_a_condition_and_delete_it() {
    let mut scenario = Scenario::cks_project();
    // The project's tier offers the internal scheme (InternalLbVm), which its keys may
    // not use.
    for tier in scenario.networks.iter_mut().filter(|n| n.name == CKS_TIER) {
        tier.lb_provider = cloudstack_sim::LbProvider::InternalLbVm;
    }
    let nodes = scenario.add_vms(CKS_TIER, "inode-", 2);
    let rig = Rig::start(scenario).await;
    let baseline = Baseline::take(&rig.sim);
    register_nodes(&rig, &nodes);
    let ccm = Ccm::start(&rig, "cks-internal", &cks_cloud_config(&rig), &[]);
    wait_initialised(&rig, &nodes, &ccm).await;

    let cluster = rig.cluster();
    let internal = [(INTERNAL.key, "true")];
    services::create(
        &cluster,
        lb_service("inside", &[("TCP", 80, 30580)], &internal),
    );
    wait_for("the condition on inside", &ccm, || {
        supported_condition(&rig, "inside").is_some_and(|c| c["reason"] == "CommandRefused")
    })
    .await;
    let condition = supported_condition(&rig, "inside").expect("the condition");
    let message = condition["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("LoadBalancer") && message.contains(INTERNAL.key),
        "names the refused command and the annotation: {message}"
    );
    // Asked once, then held: several resyncs later no second refusal of the same command.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_refusals_paced(&rig, &ccm);

    delete_and_wait(&rig, "inside", &ccm).await;
    assert_nothing_left(&rig, &baseline);
}
