//! End-to-end tests of the cloud-node controller: the real controller against the
//! CloudStack simulator and the fake API server over HTTP (or remote endpoints, see
//! `common::target`).

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use cloudstack_ccm::cloud::inventory::InventorySettings;
use cloudstack_ccm::controllers::events::Recorder;
use cloudstack_ccm::controllers::node::{self, CloudNode};
use cloudstack_ccm::controllers::node_cache::CachedNode;
use cloudstack_sim::Scenario;
use common::{
    Harness, HarnessOptions, TestNode, UNINITIALIZED_TAINT, addresses, event_note, has_taint,
    labels, provider_id, skip_check_in_remote_mode, skip_in_remote_mode,
};
use fake_apiserver::Verb;
use k8s_openapi::api::core::v1::Node;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;

fn initialised(node: &Node) -> bool {
    !has_taint(node, UNINITIALIZED_TAINT)
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

async fn harness_with_node_controller(options: HarnessOptions) -> Harness {
    let mut harness = Harness::start_with(options).await;
    harness.spawn(node::run);
    harness
}

#[tokio::test]
async fn initialises_a_node_in_one_patch_and_one_status_patch() {
    let h = harness_with_node_controller(HarnessOptions::default()).await;
    let vm = h.vm("node-1");
    h.create_node(TestNode::new("node-1")).await;

    let node = h.wait_for_node("node-1", "initialised", initialised).await;
    assert_eq!(
        provider_id(&node),
        format!("external-cloudstack://{}", vm.id)
    );
    let labels = labels(&node);
    if !h.is_remote() {
        assert_eq!((vm.offering.as_str(), vm.zone.as_str()), ("small", "zone1"));
    }
    for key in [
        "node.kubernetes.io/instance-type",
        "beta.kubernetes.io/instance-type",
    ] {
        assert_eq!(labels[key], vm.offering, "{key}");
    }
    for key in [
        "topology.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/region",
    ] {
        assert_eq!(labels[key], vm.zone, "{key}");
    }
    let node = h
        .wait_for_node("node-1", "given addresses", |n| !addresses(n).is_empty())
        .await;
    if !h.is_remote() {
        assert_eq!(vm.ipv4, "10.1.1.10");
    }
    assert_eq!(
        addresses(&node),
        pairs(&[
            ("InternalIP", vm.ipv4.as_str()),
            ("Hostname", h.node_name("node-1").as_str())
        ])
    );
    let synced = h.wait_for_event("node-1", "Synced").await;
    assert_eq!(synced["type"], "Normal");

    assert_eq!(h.kube_request_count(Verb::Patch, "nodes"), 1);
    assert_eq!(h.kube_request_count(Verb::Patch, "nodes/status"), 1);
    assert_eq!(h.kube_request_count(Verb::Update, "nodes"), 0);

    if h.is_remote() {
        skip_check_in_remote_mode(
            "one inventory refresh and one reconcile in the metrics",
            "a real cluster may hold other nodes that the controller reconciles too",
        );
        h.stop().await;
        return;
    }
    let metrics = h.ctx.metrics.encode();
    for line in [
        r#"cloudstack_ccm_inventory_refreshes_total{result="ok"} 1"#,
        r#"cloudstack_ccm_reconciles_total{controller="node",result="ok"} 1"#,
    ] {
        assert!(metrics.contains(line), "{line} missing from:\n{metrics}");
    }
    h.stop().await;
}

#[tokio::test]
async fn matches_fqdn_and_mixed_case_names_exactly() {
    if skip_in_remote_mode("adds VMs to the simulator") {
        return;
    }
    let h = harness_with_node_controller(HarnessOptions::default()).await;
    let mixed = h.add_vm("Worker-Mixed-1", "10.1.1.50");
    h.create_node(TestNode::new("node-2.cluster.example.com"))
        .await;
    h.create_node(TestNode::new("worker-mixed-1")).await;
    // `node` is a prefix of every VM name but names no VM: it must stay uninitialised.
    h.create_node(TestNode::new("node")).await;

    let fqdn = h
        .wait_for_node("node-2.cluster.example.com", "initialised", initialised)
        .await;
    assert_eq!(
        provider_id(&fqdn),
        format!("external-cloudstack://{}", h.vm_id("node-2"))
    );
    let fqdn = h
        .wait_for_node("node-2.cluster.example.com", "given addresses", |n| {
            !addresses(n).is_empty()
        })
        .await;
    assert_eq!(
        addresses(&fqdn),
        pairs(&[
            ("InternalIP", "10.1.1.11"),
            ("Hostname", "node-2.cluster.example.com")
        ])
    );
    let lower = h
        .wait_for_node("worker-mixed-1", "initialised", initialised)
        .await;
    assert_eq!(
        provider_id(&lower),
        format!("external-cloudstack://{mixed}")
    );

    let warning = h.wait_for_event("node", "InstanceNotFound").await;
    assert_eq!(warning["type"], "Warning");
    assert!(event_note(&warning).contains("node node:"), "{warning}");
    let unmatched = h.node("node").await.unwrap();
    assert!(has_taint(&unmatched, UNINITIALIZED_TAINT));
    assert_eq!(provider_id(&unmatched), "");
    h.stop().await;
}

#[tokio::test]
async fn finds_vms_by_every_accepted_provider_id_form() {
    if skip_in_remote_mode("adds VMs to the simulator") {
        return;
    }
    let h = harness_with_node_controller(HarnessOptions::default()).await;
    let forms: Vec<(String, String)> = (0..4)
        .map(|i| {
            let id = h.add_vm(&format!("vm-by-id-{i}"), &format!("10.1.1.{}", 60 + i));
            let provider_id = match i {
                0 => format!("external-cloudstack://{id}"),
                1 => format!("cloudstack:///{id}"),
                2 => format!("cloudstack://eu-west/{id}"),
                _ => id.to_ascii_uppercase(),
            };
            (format!("node-by-id-{i}"), provider_id)
        })
        .collect();
    for (name, provider) in &forms {
        h.create_node(TestNode::new(name).provider_id(provider))
            .await;
    }
    for (i, (name, provider)) in forms.iter().enumerate() {
        let node = h.wait_for_node(name, "initialised", initialised).await;
        assert_eq!(
            provider_id(&node),
            provider,
            "an existing providerID is kept"
        );
        let node = h
            .wait_for_node(name, "given addresses", |n| !addresses(n).is_empty())
            .await;
        let ip = format!("10.1.1.{}", 60 + i);
        assert_eq!(addresses(&node)[0], ("InternalIP".to_string(), ip));
        assert_eq!(labels(&node)["node.kubernetes.io/instance-type"], "small");
    }
    h.stop().await;
}

#[tokio::test]
async fn a_foreign_provider_id_is_reported_and_the_node_kept_tainted() {
    let h = harness_with_node_controller(HarnessOptions::default()).await;
    h.create_node(TestNode::new("node-1").provider_id("aws:///eu-west-1a/i-0123"))
        .await;
    let warning = h.wait_for_event("node-1", "SyncNodeFailed").await;
    let note = event_note(&warning);
    assert!(
        note.contains(&h.node_name("node-1")) && note.contains("aws:///eu-west-1a/i-0123"),
        "{note}"
    );
    assert!(has_taint(
        &h.node("node-1").await.unwrap(),
        UNINITIALIZED_TAINT
    ));
    h.stop().await;
}

#[tokio::test]
async fn a_vm_that_appears_late_is_picked_up() {
    if skip_in_remote_mode("adds a VM to the simulator while the test runs") {
        return;
    }
    let h = harness_with_node_controller(HarnessOptions::default()).await;
    h.create_node(TestNode::new("late-1")).await;

    let warning = h.wait_for_event("late-1", "InstanceNotFound").await;
    assert_eq!(warning["type"], "Warning");
    assert!(event_note(&warning).contains("late-1"));
    assert!(has_taint(
        &h.node("late-1").await.unwrap(),
        UNINITIALIZED_TAINT
    ));

    let id = h.add_vm("late-1", "10.1.1.70");
    let node = h.wait_for_node("late-1", "initialised", initialised).await;
    assert_eq!(provider_id(&node), format!("external-cloudstack://{id}"));
    h.stop().await;
}

#[tokio::test]
async fn honours_the_provided_node_ip() {
    if skip_in_remote_mode("gives a scenario VM an IPv6 address") {
        return;
    }
    let mut scenario = Scenario::small();
    scenario.vms[0].nics[0].ipv6 = Some("fd00::10".to_string());
    let h = harness_with_node_controller(HarnessOptions {
        scenario,
        ..HarnessOptions::default()
    })
    .await;
    let annotation = "alpha.kubernetes.io/provided-node-ip";
    h.create_node(TestNode::new("node-1").annotation(annotation, "fd00::10"))
        .await;
    h.create_node(TestNode::new("node-2").annotation(annotation, "10.9.9.9"))
        .await;

    let node = h
        .wait_for_node("node-1", "given addresses", |n| !addresses(n).is_empty())
        .await;
    assert_eq!(
        addresses(&node),
        pairs(&[("InternalIP", "fd00::10"), ("Hostname", "node-1")]),
        "the provided IP comes first and replaces the other InternalIP"
    );

    let warning = h.wait_for_event("node-2", "SyncNodeFailed").await;
    let note = event_note(&warning);
    assert!(
        note.contains("provided-node-ip") && note.contains("10.9.9.9"),
        "{note}"
    );
    assert!(has_taint(
        &h.node("node-2").await.unwrap(),
        UNINITIALIZED_TAINT
    ));
    h.stop().await;
}

#[tokio::test]
async fn a_node_ip_on_a_second_nic_initialises_the_node_and_every_nic_is_listed() {
    if skip_in_remote_mode("needs a simulator VM with a second NIC") {
        return;
    }
    let mut scenario = Scenario::small();
    // node-1 also sits on the NetScaler network, on a NIC that is not its default one.
    scenario.vms[0].nics.push(cloudstack_sim::NicSpec {
        network: cloudstack_sim::SMALL_NETSCALER_NETWORK.to_string(),
        ipv4: "10.1.2.50".to_string(),
        ipv6: None,
        isdefault: false,
    });
    let default_ip = scenario.vms[0].nics[0].ipv4.clone();
    let h = harness_with_node_controller(HarnessOptions {
        scenario,
        ..HarnessOptions::default()
    })
    .await;
    let annotation = "alpha.kubernetes.io/provided-node-ip";
    h.create_node(TestNode::new("node-1").annotation(annotation, "10.1.2.50"))
        .await;

    let node = h
        .wait_for_node("node-1", "initialised with addresses", |n| {
            initialised(n) && !addresses(n).is_empty()
        })
        .await;
    assert_eq!(
        addresses(&node),
        pairs(&[("InternalIP", "10.1.2.50"), ("Hostname", "node-1")]),
        "the kubelet's IP (second NIC) comes first and is the only InternalIP"
    );
    h.stop().await;

    // Without the annotation, every NIC's address is listed, the default NIC's first.
    let mut scenario = Scenario::small();
    scenario.vms[0].nics.push(cloudstack_sim::NicSpec {
        network: cloudstack_sim::SMALL_NETSCALER_NETWORK.to_string(),
        ipv4: "10.1.2.50".to_string(),
        ipv6: None,
        isdefault: false,
    });
    let h = harness_with_node_controller(HarnessOptions {
        scenario,
        ..HarnessOptions::default()
    })
    .await;
    h.create_node(TestNode::new("node-1")).await;
    let node = h
        .wait_for_node("node-1", "initialised with addresses", |n| {
            initialised(n) && !addresses(n).is_empty()
        })
        .await;
    assert_eq!(
        addresses(&node),
        pairs(&[
            ("InternalIP", default_ip.as_str()),
            ("InternalIP", "10.1.2.50"),
            ("Hostname", "node-1")
        ])
    );
    h.stop().await;
}

#[tokio::test]
async fn region_comes_from_the_cloud_config() {
    let h = harness_with_node_controller(HarnessOptions {
        region: Some("eu west".to_string()),
        ..HarnessOptions::default()
    })
    .await;
    h.create_node(TestNode::new("node-1")).await;
    let node = h.wait_for_node("node-1", "initialised", initialised).await;
    let labels = labels(&node);
    assert_eq!(labels["topology.kubernetes.io/region"], "eu-west");
    assert_eq!(labels["topology.kubernetes.io/zone"], h.vm("node-1").zone);
    h.stop().await;
}

/// A scenario with `count` more VMs named `worker-1…`.
fn scenario_with_workers(count: usize) -> Scenario {
    let mut scenario = Scenario::small();
    scenario.add_vms(cloudstack_sim::SMALL_NETWORK, "worker-", count);
    scenario
}

#[tokio::test]
async fn initialising_100_nodes_costs_at_most_3_cloudstack_calls() {
    if skip_in_remote_mode("needs a scenario of 100 VMs") {
        return;
    }
    let h = harness_with_node_controller(HarnessOptions {
        scenario: scenario_with_workers(100),
        inventory: InventorySettings::default(),
        ..HarnessOptions::default()
    })
    .await;
    h.sim.reset_counts();
    let names: Vec<String> = (1..=100).map(|i| format!("worker-{i}")).collect();
    for name in &names {
        h.create_node(TestNode::new(name)).await;
    }
    for name in &names {
        h.wait_for_node(name, "initialised", initialised).await;
    }
    let calls = h.sim.call_counts();
    let total: u64 = calls.values().sum();
    println!("CloudStack calls to initialise 100 nodes: {calls:?}");
    assert!(
        total <= 3,
        "initialising 100 nodes cost {total} calls: {calls:?}"
    );
    assert_eq!(
        calls.keys().collect::<Vec<_>>(),
        vec!["listVirtualMachines"]
    );
    let cluster = h.cluster();
    assert_eq!(cluster.request_count(Verb::Patch, "nodes"), 100);
    assert_eq!(cluster.request_count(Verb::Patch, "nodes/status"), 100);
    h.stop().await;
}

#[tokio::test]
async fn refreshing_addresses_of_100_nodes_costs_one_call_and_patches_only_changes() {
    if skip_in_remote_mode("needs a scenario of 100 VMs") {
        return;
    }
    let h = harness_with_node_controller(HarnessOptions {
        scenario: scenario_with_workers(100),
        inventory: InventorySettings::default(),
        ..HarnessOptions::default()
    })
    .await;
    let names: Vec<String> = (1..=100).map(|i| format!("worker-{i}")).collect();
    for name in &names {
        h.create_node(TestNode::new(name)).await;
    }
    for name in &names {
        h.wait_for_node(name, "given addresses", |n| {
            initialised(n) && !addresses(n).is_empty()
        })
        .await;
    }
    // Drift: 10 nodes report a stale address.
    let stale =
        json!({ "status": { "addresses": [{ "type": "InternalIP", "address": "192.0.2.1" }] } });
    for name in &names[..10] {
        h.nodes()
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&stale))
            .await
            .unwrap();
    }
    h.sim.reset_counts();
    h.cluster().reset_request_counts();

    let controller = CloudNode::new(
        h.kube.clone(),
        h.instances.clone(),
        Recorder::new(h.kube.clone(), node::reporter("test")),
        h.ctx.metrics.clone(),
        Duration::from_secs(300),
    );
    let nodes: Vec<Arc<CachedNode>> = h
        .nodes()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|node| Arc::new(CachedNode::from(node)))
        .collect();
    controller.refresh_addresses(&nodes).await;

    let calls = h.cloudstack_calls();
    println!(
        "CloudStack calls to refresh 100 nodes: {:?}",
        h.sim.call_counts()
    );
    assert_eq!(calls, 1, "{:?}", h.sim.call_counts());
    assert_eq!(h.cluster().request_count(Verb::Patch, "nodes/status"), 10);
    for name in &names[..10] {
        let node = h.node(name).await.unwrap();
        assert_eq!(addresses(&node)[0].0, "InternalIP");
        assert_ne!(addresses(&node)[0].1, "192.0.2.1", "{name}");
    }
    h.stop().await;
}

#[tokio::test]
async fn the_periodic_refresh_restores_drifted_addresses() {
    let h = harness_with_node_controller(HarnessOptions {
        node_status_update_frequency: Duration::from_millis(200),
        ..HarnessOptions::default()
    })
    .await;
    h.create_node(TestNode::new("node-1")).await;
    h.wait_for_node("node-1", "given addresses", |n| !addresses(n).is_empty())
        .await;
    let stale =
        json!({ "status": { "addresses": [{ "type": "InternalIP", "address": "192.0.2.1" }] } });
    h.nodes()
        .patch_status(
            &h.node_name("node-1"),
            &PatchParams::default(),
            &Patch::Merge(&stale),
        )
        .await
        .unwrap();
    let vm = h.vm("node-1");
    let expected = pairs(&[
        ("InternalIP", vm.ipv4.as_str()),
        ("Hostname", h.node_name("node-1").as_str()),
    ]);
    let node = h
        .wait_for_node("node-1", "restored", |n| addresses(n) == expected)
        .await;
    assert!(initialised(&node));
    h.stop().await;
}

/// A Node replaced by a VM of the same name while the old VM is only Destroyed (it stays
/// listed, to admin keys, until `expunge.delay` passes: `UserVmManagerImpl.destroyVm`):
/// the Node is matched to the live VM, never to the destroyed one.
#[tokio::test]
async fn a_destroyed_vm_of_the_same_name_is_not_the_nodes_vm() {
    if skip_in_remote_mode("destroys a VM and adds one in the simulator") {
        return;
    }
    let h = harness_with_node_controller(HarnessOptions {
        account: "admin".to_string(),
        ..HarnessOptions::default()
    })
    .await;
    let old = h.vm_id("node-1");
    assert!(h.sim.destroy_vm(&old), "the old VM is destroyed");
    let new = h.add_vm("node-1", "10.1.1.80");
    h.create_node(TestNode::new("node-1")).await;
    let node = h.wait_for_node("node-1", "initialised", initialised).await;
    assert_eq!(provider_id(&node), format!("external-cloudstack://{new}"));
    let node = h
        .wait_for_node("node-1", "given addresses", |n| !addresses(n).is_empty())
        .await;
    assert!(
        addresses(&node).contains(&("InternalIP".to_string(), "10.1.1.80".to_string())),
        "{:?}",
        addresses(&node)
    );
    h.stop().await;
}
