//! Endpoints (core/v1) and EndpointSlices (discovery.k8s.io/v1) over real HTTP with
//! `kube::Api`: created, listed by the `kubernetes.io/service-name` label and watched like
//! any namespaced resource, and authorised per API group (the ClusterRole CloudStack
//! Kubernetes Service installs grants `endpoints` but not `endpointslices`).

use crate::common;

use common::api_error;
use fake_apiserver::FakeApiServer;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Endpoints;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

fn slice(name: &str, service: &str, node: &str) -> EndpointSlice {
    serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { "kubernetes.io/service-name": service } },
        "addressType": "IPv4",
        "endpoints": [{ "addresses": ["10.1.0.5"], "nodeName": node, "conditions": { "ready": true } }],
        "ports": [{ "name": "http", "port": 8080, "protocol": "TCP" }],
    }))
    .unwrap()
}

#[tokio::test]
async fn endpoint_slices_are_listed_by_service_label_and_watched() {
    let (_server, client) = common::start().await;
    let slices: Api<EndpointSlice> = Api::default_namespaced(client.clone());
    let created = slices
        .create(&PostParams::default(), &slice("web-abc", "web", "n1"))
        .await
        .unwrap();
    slices
        .create(&PostParams::default(), &slice("db-abc", "db", "n2"))
        .await
        .unwrap();
    let web = slices
        .list(&ListParams::default().labels("kubernetes.io/service-name=web"))
        .await
        .unwrap();
    assert_eq!(web.items.len(), 1);
    assert_eq!(web.items[0].endpoints[0].node_name.as_deref(), Some("n1"));

    let rv = created.metadata.resource_version.clone().unwrap();
    let mut events = slices
        .watch(
            &WatchParams::default().labels("kubernetes.io/service-name=web"),
            &rv,
        )
        .await
        .unwrap()
        .boxed();
    slices
        .create(&PostParams::default(), &slice("web-def", "web", "n3"))
        .await
        .unwrap();
    match events.next().await.unwrap().unwrap() {
        WatchEvent::Added(s) => assert_eq!(s.metadata.name.as_deref(), Some("web-def")),
        other => panic!("expected Added, got {other:?}"),
    }

    let endpoints: Api<Endpoints> = Api::default_namespaced(client);
    let ep: Endpoints = serde_json::from_value(json!({
        "metadata": { "name": "web" },
        "subsets": [{ "addresses": [{ "ip": "10.1.0.5", "nodeName": "n1" }], "ports": [{ "name": "http", "port": 8080 }] }],
    }))
    .unwrap();
    endpoints.create(&PostParams::default(), &ep).await.unwrap();
    let got = endpoints.get("web").await.unwrap();
    assert_eq!(
        got.subsets.unwrap()[0].addresses.as_ref().unwrap()[0]
            .node_name
            .as_deref(),
        Some("n1")
    );
}

#[tokio::test]
async fn endpoint_slices_are_forbidden_where_only_endpoints_are_granted() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let server = FakeApiServer::start_with_rbac().await.unwrap();
    server
        .create(
            "serviceaccounts",
            Some("kube-system"),
            json!({ "metadata": { "name": "ccm" } }),
        )
        .unwrap();
    server
        .create(
            "clusterroles",
            None,
            json!({ "metadata": { "name": "ccm" }, "rules": [
                { "apiGroups": [""], "resources": ["endpoints"], "verbs": ["get", "list", "watch"] },
            ] }),
        )
        .unwrap();
    server
        .create(
            "clusterrolebindings",
            None,
            json!({
                "metadata": { "name": "ccm" },
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "ccm" },
                "subjects": [{ "kind": "ServiceAccount", "name": "ccm", "namespace": "kube-system" }],
            }),
        )
        .unwrap();
    let token = server.service_account_token("kube-system", "ccm").unwrap();
    let client = server.kube_client_with_token(&token).unwrap();
    let slices: Api<EndpointSlice> = Api::all(client.clone());
    let (code, _reason, message) = api_error(slices.list(&ListParams::default()).await);
    assert_eq!(code, 403);
    assert!(
        message.contains("endpointslices") && message.contains("discovery.k8s.io"),
        "{message}"
    );
    let endpoints: Api<Endpoints> = Api::all(client);
    assert!(
        endpoints
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}
