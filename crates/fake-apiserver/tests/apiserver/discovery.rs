//! Discovery and OpenAPI endpoints over real HTTP, plus fault injection seen by a client.

use crate::common;

use common::{api_error, start};
use fake_apiserver::{Fault, Verb};
use http::Request;
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use serde_json::Value;

async fn get_json(client: &kube::Client, path: &str) -> kube::Result<Value> {
    client
        .request::<Value>(Request::get(path).body(Vec::new()).unwrap())
        .await
}

#[tokio::test]
async fn discovery_documents_describe_served_resources() {
    let (_server, client) = start().await;
    let version = client.apiserver_version().await.unwrap();
    assert_eq!(
        (version.major.as_str(), version.minor.as_str()),
        ("1", "33")
    );
    let core = get_json(&client, "/api/v1").await.unwrap();
    let nodes = core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "nodes")
        .unwrap();
    assert_eq!(
        (nodes["kind"].as_str(), nodes["namespaced"].as_bool()),
        (Some("Node"), Some(false))
    );
    let groups = get_json(&client, "/apis").await.unwrap();
    let names: Vec<&str> = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "events.k8s.io",
            "coordination.k8s.io",
            "rbac.authorization.k8s.io",
            "discovery.k8s.io",
            "authentication.k8s.io",
            "authorization.k8s.io"
        ]
    );
    let leases = get_json(&client, "/apis/coordination.k8s.io/v1")
        .await
        .unwrap();
    assert_eq!(leases["resources"][0]["name"], "leases");
    let openapi = get_json(&client, "/openapi/v3").await.unwrap();
    assert!(openapi["paths"].get("api/v1").is_some());
}

#[tokio::test]
async fn unknown_paths_answer_404_status() {
    let (_server, client) = start().await;
    for path in ["/openapi/v2", "/apis/apps/v1", "/api/v1/deployments"] {
        let (code, reason, _) = api_error(get_json(&client, path).await);
        assert_eq!((code, reason.as_str()), (404, "NotFound"), "{path}");
    }
}

#[tokio::test]
async fn injected_faults_fail_then_recover_and_requests_are_counted() {
    let (server, client) = start().await;
    server
        .create(
            "nodes",
            None,
            serde_json::json!({ "metadata": { "name": "n1" } }),
        )
        .unwrap();
    let nodes: Api<Node> = Api::all(client);
    server.set_faults(vec![
        Fault::error(500).on(Verb::Get, "nodes").times(1),
        Fault::error(429).on(Verb::List, "nodes").times(1),
    ]);
    assert_eq!(api_error(nodes.get("n1").await).0, 500);
    assert!(nodes.get("n1").await.is_ok());
    assert_eq!(server.request_count(Verb::Get, "nodes"), 2);
    // kube's client retries a 429 by itself: one call, two requests.
    assert_eq!(
        nodes.list(&Default::default()).await.unwrap().items.len(),
        1
    );
    assert_eq!(server.request_count(Verb::List, "nodes"), 2);
}
