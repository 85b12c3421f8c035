//! Every response sample in `tests/fixtures/` (real CloudStack replies, see its README) is
//! served over HTTP and decoded through the typed client methods.

use crate::support;

use cloudstack::requests::*;
use cloudstack::{AsyncJob, Client, NetworkAclList, Params};
use serde_json::{Value, json};
use support::{TestServer, envelope};

/// Fixture files covered by the tests below.
const COVERED: &[&str] = &[
    "assignToLoadBalancerRule.json",
    "associateIpAddress.json",
    "createFirewallRule.json",
    "createLoadBalancerRule.json",
    "createNetworkACL.json",
    "createTags.json",
    "deleteFirewallRule.json",
    "deleteLoadBalancerRule.json",
    "deleteTags.json",
    "disassociateIpAddress.json",
    "listApis.json",
    "listAsyncJobs.json",
    "listCapabilities.json",
    "listFirewallRules.json",
    "listLoadBalancerRuleInstances.json",
    "listLoadBalancerRules.json",
    "listNetworkACLLists.json",
    "listNetworkACLs.json",
    "listNetworks.json",
    "listProjects.json",
    "listPublicIpAddresses.json",
    "listVirtualMachines.json",
    "listZones.json",
    "queryAsyncJobResult.json",
    "removeFromLoadBalancerRule.json",
    "updateNetworkACLList.json",
];

fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// The object under the fixture's only key.
fn inner(name: &str) -> Value {
    fixture(name)
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()
        .clone()
}

#[test]
fn every_fixture_is_covered() {
    let dir = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let mut present: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".json") && name != "signing-test-vectors.json")
        .collect();
    present.sort();
    assert_eq!(present, COVERED);
}

/// Serves a fixture as page 1 or to an unpaged call (and `{}` for later pages).
async fn list_server(command: &'static str, body: Value) -> (TestServer, Client) {
    let server = TestServer::start(move |request, _| {
        assert_eq!(request.command, command);
        if request.params.get("page").is_none_or(|page| page == "1") {
            (200, body.clone())
        } else {
            envelope(command, json!({}))
        }
    })
    .await;
    let client = server.client();
    (server, client)
}

/// Serves `start` for `command` and the fixture's job object for `queryAsyncJobResult`.
async fn job_server(command: &'static str, start: Value, job: Value) -> (TestServer, Client) {
    let server = TestServer::start(move |request, _| {
        if request.command == command {
            envelope(command, start.clone())
        } else {
            assert_eq!(request.command, "queryAsyncJobResult");
            envelope("queryAsyncJobResult", job.clone())
        }
    })
    .await;
    let client = server.client();
    (server, client)
}

/// A start reply for an async-job fixture: `{id?, jobid}`.
fn start_of(job: &Value, with_id: bool) -> Value {
    let mut start = json!({"jobid": job["jobid"].clone()});
    if with_id {
        start["id"] = job["jobinstanceid"].clone();
    }
    start
}

fn success_job() -> Value {
    json!({"jobid": "j", "jobstatus": 1, "jobresultcode": 0, "jobresult": {"success": true}})
}

#[tokio::test]
async fn list_virtual_machines_fixture() {
    // The sample nests the list one level deeper (see fixtures/README.md); serve the list.
    let body = json!({"listvirtualmachinesresponse": inner("listVirtualMachines.json")["listVirtualMachines"].clone()});
    let (_server, client) = list_server("listVirtualMachines", body).await;
    let vms = client
        .list_virtual_machines(&ListVirtualMachines::default())
        .await
        .unwrap();
    assert_eq!(vms.len(), 1);
    let vm = &vms[0];
    assert_eq!(
        vm.id.as_deref(),
        Some("915653c4-298b-4d74-bdee-4ced282114f1")
    );
    assert_eq!(
        vm.serviceofferingname.as_deref(),
        Some("Very small instance")
    );
    assert_eq!(vm.memory, Some(256));
    let nic = vm.default_nic().unwrap();
    assert_eq!(nic.ipaddress.as_deref(), Some("10.1.1.62"));
    assert_eq!(nic.r#type.as_deref(), Some("Isolated"));
}

#[tokio::test]
async fn list_zones_fixture() {
    let (_server, client) = list_server("listZones", fixture("listZones.json")).await;
    let zones = client.list_zones(&ListZones::default()).await.unwrap();
    assert_eq!(zones[0].id.as_deref(), Some("1"));
    assert_eq!(zones[0].networktype.as_deref(), Some("Advanced"));
}

#[tokio::test]
async fn list_networks_fixture() {
    let (_server, client) = list_server("listNetworks", fixture("listNetworks.json")).await;
    let networks = client
        .list_networks(&ListNetworks::default())
        .await
        .unwrap();
    assert!(!networks.is_empty());
    let network = &networks[0];
    assert!(!network.is_vpc_tier());
    assert_eq!(
        network.capability("lb", "SupportedLbAlgorithms"),
        Some("roundrobin,leastconn,source")
    );
    assert_eq!(
        network.capability_list("Lb", "SupportedProtocols"),
        ["tcp", "udp", "tcp-proxy"]
    );
    assert!(
        network
            .service("Lb")
            .unwrap()
            .capability("SupportedStickinessMethods")
            .unwrap()
            .contains("LbCookie")
    );
}

#[tokio::test]
async fn list_public_ip_addresses_fixture() {
    let (_server, client) = list_server(
        "listPublicIpAddresses",
        fixture("listPublicIpAddresses.json"),
    )
    .await;
    let ips = client
        .list_public_ip_addresses(&ListPublicIpAddresses::default())
        .await
        .unwrap();
    assert_eq!(ips.len(), 4);
    assert_eq!(ips[0].id.as_deref(), Some("34000"));
    assert!(ips[0].is_allocated());
    assert_eq!(ips[3].issourcenat, Some(true));
}

#[tokio::test]
async fn list_load_balancer_rules_fixture() {
    let (_server, client) = list_server(
        "listLoadBalancerRules",
        fixture("listLoadBalancerRules.json"),
    )
    .await;
    let rules = client
        .list_load_balancer_rules(&ListLoadBalancerRules::default())
        .await
        .unwrap();
    assert!(rules.len() >= 2);
    assert_eq!(rules[0].id.as_deref(), Some("2253"));
    assert_eq!(rules[1].id.as_deref(), Some("2249"), "numeric id");
    assert_eq!(rules[0].publicport, Some(80), "string port");
    assert_eq!(rules[1].algorithm.as_deref(), Some("leastconn"));
}

#[tokio::test]
async fn list_load_balancer_rule_instances_fixture() {
    let (_server, client) = list_server(
        "listLoadBalancerRuleInstances",
        fixture("listLoadBalancerRuleInstances.json"),
    )
    .await;
    let vms = client
        .list_load_balancer_rule_instances(&ListLoadBalancerRuleInstances {
            id: "2253".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(vms.len() >= 2);
    assert_eq!(vms[0].id.as_deref(), Some("2614"));
    assert_eq!(
        vms[0].default_nic().unwrap().networkid.as_deref(),
        Some("860")
    );
}

#[tokio::test]
async fn list_firewall_rules_fixture() {
    let (_server, client) =
        list_server("listFirewallRules", fixture("listFirewallRules.json")).await;
    let rules = client
        .list_firewall_rules(&ListFirewallRules::default())
        .await
        .unwrap();
    assert_eq!(rules.len(), 1);
    assert_eq!((rules[0].startport, rules[0].endport), (Some(33), Some(34)));
    assert_eq!(rules[0].cidrs(), ["192.168.0.0/16"]);
}

#[tokio::test]
async fn list_network_acl_lists_fixture() {
    let (server, client) =
        list_server("listNetworkACLLists", fixture("listNetworkACLLists.json")).await;
    let lists = client
        .list_network_acl_lists(&ListNetworkAclLists::default())
        .await
        .unwrap();
    assert_eq!(lists.len(), 1);
    assert_eq!(lists[0].name.as_deref(), Some("test"));
    assert!(!lists[0].is_builtin());
    // count says 4 but the page held 1: the client asks for page 2, which is empty.
    assert_eq!(server.requests_of("listNetworkACLLists").len(), 2);
}

#[tokio::test]
async fn list_network_acls_fixture() {
    let (_server, client) = list_server("listNetworkACLs", fixture("listNetworkACLs.json")).await;
    let acls = client
        .list_network_acls(&ListNetworkAcls::default())
        .await
        .unwrap();
    assert_eq!((acls[0].startport, acls[0].number), (Some(80), Some(1)));
    assert_eq!(acls[0].action.as_deref(), Some("Allow"));
}

#[tokio::test]
async fn list_projects_fixture() {
    let (_server, client) = list_server("listProjects", fixture("listProjects.json")).await;
    let projects = client
        .list_projects(&ListProjects::default())
        .await
        .unwrap();
    assert_eq!(projects[0].name.as_deref(), Some("ExampleProjectName"));
    assert_eq!(projects[0].state.as_deref(), Some("Active"));
}

#[tokio::test]
async fn list_async_jobs_fixture() {
    let (_server, client) = list_server("listAsyncJobs", fixture("listAsyncJobs.json")).await;
    let jobs = client
        .list_async_jobs(&ListAsyncJobs::default())
        .await
        .unwrap();
    assert_eq!(
        jobs[0].jobid.as_deref(),
        Some("6679e6b9-4bf2-4d83-b9f0-235fc1609227")
    );
    assert_eq!(jobs[0].jobresultcode, Some(0));
}

#[tokio::test]
async fn list_apis_fixture() {
    let (_server, client) = list_server("listApis", fixture("listApis.json")).await;
    let apis: Vec<Value> = client
        .list_all("listApis", "api", Params::new())
        .await
        .unwrap();
    assert!(!apis.is_empty());
    assert!(apis.iter().all(|api| api["name"].is_string()));
}

#[tokio::test]
async fn list_capabilities_fixture() {
    let (_server, client) = list_server("listCapabilities", fixture("listCapabilities.json")).await;
    let capabilities = client.list_capabilities().await.unwrap();
    assert_eq!(capabilities.cloudstackversion.as_deref(), Some("4.15.2.0"));
    assert_eq!(capabilities.support_elb, Some(false), "string boolean");
    assert_eq!(capabilities.apilimitmax, None);
    assert_eq!(
        capabilities.version().unwrap(),
        cloudstack::ServerVersion::new(4, 15, 2)
    );
}

#[tokio::test]
async fn associate_ip_address_fixture() {
    let job = inner("associateIpAddress.json");
    let (_server, client) =
        job_server("associateIpAddress", start_of(&job, true), job.clone()).await;
    let start = client
        .associate_ip_address_begin(&AssociateIpAddress::default())
        .await
        .unwrap();
    assert_eq!(
        start.id.as_deref(),
        Some("dc51835f-b0e2-4a2e-91a4-6cccc44bdae3")
    );
    let ip = client.associate_ip_address_finish(&start).await.unwrap();
    assert_eq!(ip.ipaddress.as_deref(), Some("10.70.3.100"));
    assert_eq!(ip.state.as_deref(), Some("Allocating"));
}

#[tokio::test]
async fn create_load_balancer_rule_fixture() {
    let job = inner("createLoadBalancerRule.json");
    let (_server, client) =
        job_server("createLoadBalancerRule", start_of(&job, true), job.clone()).await;
    let rule = client
        .create_load_balancer_rule(&CreateLoadBalancerRule::default())
        .await
        .unwrap();
    assert_eq!(rule.name.as_deref(), Some("testLBRule"));
    assert_eq!(
        (rule.publicport, rule.privateport),
        (Some(9090), Some(9090))
    );
    assert!(rule.cidrs().is_empty(), "empty cidrlist");
    assert_eq!(rule.state.as_deref(), Some("Add"));
}

#[tokio::test]
async fn create_firewall_rule_fixture() {
    let job = inner("createFirewallRule.json");
    let (_server, client) =
        job_server("createFirewallRule", start_of(&job, true), job.clone()).await;
    let rule = client
        .create_firewall_rule(&CreateFirewallRule::default())
        .await
        .unwrap();
    assert_eq!(rule.cidrs(), ["0.0.0.0/0"]);
    assert_eq!(rule.ipaddress.as_deref(), Some("192.168.2.4"));
}

#[tokio::test]
async fn create_network_acl_fixtures() {
    // createNetworkACL.json is the start reply; queryAsyncJobResult.json is its job.
    let start = inner("createNetworkACL.json");
    let job = inner("queryAsyncJobResult.json");
    let (_server, client) = job_server("createNetworkACL", start, job).await;
    let begun = client
        .create_network_acl_begin(&CreateNetworkAcl::default())
        .await
        .unwrap();
    assert_eq!(begun.jobid, "111112");
    assert_eq!(
        begun.id.as_deref(),
        Some("54bd8cc6-5db0-4f64-8495-a0dfaf3fb4d5")
    );
    let acl = client
        .create_network_acl(&CreateNetworkAcl::default())
        .await
        .unwrap();
    assert_eq!((acl.startport, acl.number), (Some(1), Some(20)));
    assert_eq!(acl.traffictype.as_deref(), Some("Egress"));
    let raw: AsyncJob = client.query_async_job_result("111112").await.unwrap();
    assert_eq!(raw.jobstatus, Some(1));
    assert_eq!(
        raw.cmd.as_deref(),
        Some("org.apache.cloudstack.api.command.user.network.CreateNetworkACLCmd")
    );
}

#[tokio::test]
async fn success_job_fixtures() {
    for (command, file) in [
        ("assignToLoadBalancerRule", "assignToLoadBalancerRule.json"),
        ("createTags", "createTags.json"),
        ("deleteTags", "deleteTags.json"),
        ("deleteFirewallRule", "deleteFirewallRule.json"),
        ("disassociateIpAddress", "disassociateIpAddress.json"),
    ] {
        let job = inner(file);
        let (server, client) = job_server(command, start_of(&job, false), job.clone()).await;
        let result = match command {
            "assignToLoadBalancerRule" => {
                client
                    .assign_to_load_balancer_rule(&AssignToLoadBalancerRule::default())
                    .await
            }
            "createTags" => client.create_tags(&CreateTags::default()).await,
            "deleteTags" => client.delete_tags(&DeleteTags::default()).await,
            "deleteFirewallRule" => {
                client
                    .delete_firewall_rule(&DeleteFirewallRule::default())
                    .await
            }
            _ => {
                client
                    .disassociate_ip_address(&DisassociateIpAddress::default())
                    .await
            }
        };
        result.unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(
            server.requests_of("queryAsyncJobResult")[0].params["jobid"],
            job["jobid"].as_str().unwrap()
        );
    }
}

#[tokio::test]
async fn numeric_job_id_start_fixtures() {
    for (command, file) in [
        ("deleteLoadBalancerRule", "deleteLoadBalancerRule.json"),
        (
            "removeFromLoadBalancerRule",
            "removeFromLoadBalancerRule.json",
        ),
    ] {
        let start = inner(file);
        let jobid = start["jobid"].to_string();
        let (server, client) = job_server(command, start, success_job()).await;
        let result = match command {
            "deleteLoadBalancerRule" => {
                client
                    .delete_load_balancer_rule(&DeleteLoadBalancerRule::default())
                    .await
            }
            _ => {
                client
                    .remove_from_load_balancer_rule(&RemoveFromLoadBalancerRule::default())
                    .await
            }
        };
        result.unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(
            server.requests_of("queryAsyncJobResult")[0].params["jobid"],
            jobid
        );
    }
}

#[test]
fn update_network_acl_list_fixture_decodes_as_an_async_job() {
    let body = serde_json::to_vec(&fixture("updateNetworkACLList.json")).unwrap();
    let job: AsyncJob = serde_json::from_value(
        cloudstack::decode_reply("updateNetworkACLList", 200, &body).unwrap(),
    )
    .unwrap();
    let list: NetworkAclList =
        serde_json::from_value(job.jobresult.unwrap()["networkacllist"].clone()).unwrap();
    assert_eq!(list.description.as_deref(), Some("testtest"));
    assert_eq!(list.fordisplay, Some(true));
}
