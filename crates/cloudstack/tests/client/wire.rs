//! What goes over the wire: methods, encodings, project scoping, version discovery.

use crate::support;

use cloudstack::requests::*;
use serde_json::json;
use support::{TestServer, envelope};

#[tokio::test]
async fn special_characters_and_maps_survive_signing_and_transport() {
    let server = TestServer::start(|request, _| match request.command.as_str() {
        "createTags" => envelope("createTags", json!({"jobid": "j1"})),
        "queryAsyncJobResult" => envelope(
            "queryAsyncJobResult",
            json!({"jobid": "j1", "jobstatus": 1, "jobresult": {"success": true}}),
        ),
        other => panic!("unexpected command {other}"),
    })
    .await;
    let request = CreateTags {
        resourceids: vec!["0b1d2c3e-0000-4000-8000-000000000001".into()],
        resourcetype: "LoadBalancer".into(),
        tags: vec![
            ("cloudstack-ccm/cluster".into(), "kubernetes".into()),
            (
                "cloudstack-ccm/service".into(),
                "ns/name ~*+:;'!() ü".into(),
            ),
        ],
        customer: None,
    };
    server.client().create_tags(&request).await.unwrap();
    let sent = &server.requests_of("createTags")[0];
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.params["tags[0].key"], "cloudstack-ccm/cluster");
    assert_eq!(sent.params["tags[1].value"], "ns/name ~*+:;'!() ü");
    assert_eq!(sent.params["resourcetype"], "LoadBalancer");
}

#[tokio::test]
async fn vmidipmap_uses_vmid_and_vmip_fields() {
    let server = TestServer::start(|request, _| match request.command.as_str() {
        "assignToLoadBalancerRule" => envelope("assignToLoadBalancerRule", json!({"jobid": "j1"})),
        _ => envelope(
            "queryAsyncJobResult",
            json!({"jobid": "j1", "jobstatus": 1, "jobresult": {"success": true}}),
        ),
    })
    .await;
    let request = AssignToLoadBalancerRule {
        id: "lb-1".into(),
        virtualmachineids: vec!["vm-1".into(), "vm-2".into()],
        vmidipmap: vec![("vm-3".into(), "10.1.1.75".into())],
    };
    server
        .client()
        .assign_to_load_balancer_rule(&request)
        .await
        .unwrap();
    let sent = &server.requests_of("assignToLoadBalancerRule")[0];
    assert_eq!(sent.params["virtualmachineids"], "vm-1,vm-2");
    assert_eq!(sent.params["vmidipmap[0].vmid"], "vm-3");
    assert_eq!(sent.params["vmidipmap[0].vmip"], "10.1.1.75");
}

#[tokio::test]
async fn project_id_is_added_where_accepted() {
    let server = TestServer::start(|request, _| match request.command.as_str() {
        "associateIpAddress" => {
            envelope("associateIpAddress", json!({"id": "ip-1", "jobid": "j1"}))
        }
        "listZones" => envelope("listZones", json!({})),
        "listLoadBalancerRules" => envelope("listLoadBalancerRules", json!({})),
        other => panic!("unexpected command {other}"),
    })
    .await;
    let mut config = server.config();
    config.project_id = Some("proj-1".into());
    let client = cloudstack::Client::new(config).unwrap();
    let start = client
        .associate_ip_address_begin(&AssociateIpAddress {
            networkid: Some("net-1".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(start.id.as_deref(), Some("ip-1"));
    client.list_zones(&ListZones::default()).await.unwrap();
    client
        .list_load_balancer_rules(&ListLoadBalancerRules {
            projectid: Some("other".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        server.requests_of("associateIpAddress")[0].params["projectid"],
        "proj-1"
    );
    assert!(
        !server.requests_of("listZones")[0]
            .params
            .contains_key("projectid")
    );
    assert_eq!(
        server.requests_of("listLoadBalancerRules")[0].params["projectid"],
        "other",
        "an explicit project wins"
    );
}

#[tokio::test]
async fn server_version_comes_from_list_capabilities() {
    let fixture: serde_json::Value =
        serde_json::from_str(include_str!("../fixtures/listCapabilities.json")).unwrap();
    let server = TestServer::start(move |_, _| (200, fixture.clone())).await;
    let client = server.client();
    let version = client.server_version().await.unwrap();
    assert_eq!(version, cloudstack::ServerVersion::new(4, 15, 2));
    assert!(!version.at_least(4, 18, 0));
    let sent = &server.requests_of("listCapabilities")[0];
    assert_eq!(sent.method, "GET");
    assert_eq!(sent.params["response"], "json");
    assert_eq!(sent.params["signatureversion"], "3");
}

#[tokio::test]
async fn parameter_names_are_sent_lower_case() {
    let server = TestServer::start(|_, _| envelope("listVirtualMachines", json!({}))).await;
    let params = cloudstack::Params::new()
        .set("listAll", true)
        .set("apiKey", "ignored");
    server
        .client()
        .call("listVirtualMachines", params)
        .await
        .unwrap();
    let sent = &server.requests_of("listVirtualMachines")[0];
    assert_eq!(sent.params["listall"], "true");
    assert_eq!(
        sent.params["apikey"],
        support::API_KEY,
        "the client's own key always wins"
    );
    assert!(!sent.params.contains_key("listAll") && !sent.params.contains_key("apiKey"));
}

#[tokio::test]
async fn rate_limit_spaces_requests() {
    let server = TestServer::start(|_, _| envelope("listZones", json!({}))).await;
    let mut config = server.config();
    config.requests_per_second = std::num::NonZeroU32::new(10);
    let client = cloudstack::Client::new(config).unwrap();
    let started = std::time::Instant::now();
    for _ in 0..12 {
        client.list_zones(&ListZones::default()).await.unwrap();
    }
    // A burst of 10 passes at once; the 11th and 12th wait 100 ms each (10 per second).
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(150),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(server.requests_of("listZones").len(), 12);
}

#[test]
fn invalid_configuration_is_rejected_naming_the_field() {
    let bad_url = cloudstack::ClientConfig::new("mgmt:8080/client/api", "k", "s");
    let error = cloudstack::Client::new(bad_url).unwrap_err().to_string();
    assert!(error.contains("api_url"), "{error}");

    let mut missing_ca = cloudstack::ClientConfig::new("https://mgmt/client/api", "k", "s");
    missing_ca.ca_file = Some("/nonexistent/ca.pem".into());
    let error = cloudstack::Client::new(missing_ca).unwrap_err().to_string();
    assert!(
        error.contains("ca-file") && error.contains("/nonexistent/ca.pem"),
        "{error}"
    );

    let empty_secret = cloudstack::ClientConfig::new("https://mgmt/client/api", "k", "");
    let error = cloudstack::Client::new(empty_secret)
        .unwrap_err()
        .to_string();
    assert!(error.contains("secret_key"), "{error}");
}

#[test]
fn client_debug_output_hides_keys() {
    let client = cloudstack::Client::new(cloudstack::ClientConfig::new(
        "https://mgmt/client/api",
        support::API_KEY,
        support::SECRET_KEY,
    ))
    .unwrap();
    let debug = format!("{client:?}");
    assert!(
        !debug.contains(support::API_KEY) && !debug.contains(support::SECRET_KEY),
        "{debug}"
    );
}

#[tokio::test]
async fn stickiness_policy_params_and_result() {
    let server = TestServer::start(|request, _| match request.command.as_str() {
        "createLBStickinessPolicy" => envelope("createLBStickinessPolicy", json!({"id": "sp-1", "jobid": "j1"})),
        "queryAsyncJobResult" => envelope(
            "queryAsyncJobResult",
            json!({"jobid": "j1", "jobstatus": 1, "jobresult": {"stickinesspolicies": {
                "lbruleid": "lb-1",
                "stickinesspolicy": [{"id": "sp-1", "name": "affinity", "methodname": "SourceBased", "params": {"expire": "3h"}}]
            }}}),
        ),
        other => panic!("unexpected command {other}"),
    })
    .await;
    let request = CreateLbStickinessPolicy {
        lbruleid: "lb-1".into(),
        name: "affinity".into(),
        methodname: "SourceBased".into(),
        param: vec![
            ("expire".into(), "3h".into()),
            ("tablesize".into(), "200k".into()),
        ],
        ..Default::default()
    };
    let policies = server
        .client()
        .create_lb_stickiness_policy(&request)
        .await
        .unwrap();
    assert_eq!(policies.lbruleid.as_deref(), Some("lb-1"));
    assert_eq!(
        policies.stickinesspolicy[0].methodname.as_deref(),
        Some("SourceBased")
    );
    let sent = &server.requests_of("createLBStickinessPolicy")[0];
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.params["param[0].name"], "expire");
    assert_eq!(sent.params["param[0].value"], "3h");
    assert_eq!(sent.params["param[1].name"], "tablesize");
}
