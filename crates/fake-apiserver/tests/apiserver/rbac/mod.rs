//! RBAC over real HTTP with `kube::Api`: bearer tokens (admin, ServiceAccount, static),
//! Roles, ClusterRoles and bindings enforced for verbs, resources, subresources, resource
//! names and API groups, with kube-apiserver's 401 and 403 Status bodies
//! (`responsewriters.Forbidden` / `forbiddenMessage`, `apierrors.NewForbidden`).
//!
//! This module holds the server the tests share; [`authorization`] the tests of what rules
//! and bindings grant, [`authentication`] those of tokens, [`objects`] those of the RBAC
//! objects themselves.

mod authentication;
mod authorization;
mod objects;

use fake_apiserver::FakeApiServer;
use serde_json::{Value, json};

const SA_USER: &str = "system:serviceaccount:kube-system:cloud-controller-manager";

/// A server with RBAC on, a Service `default/web`, a Node `n1` and the ServiceAccount
/// `kube-system/cloud-controller-manager`; returns the server and the ServiceAccount's token.
async fn rbac_server(rules: Value) -> (FakeApiServer, kube::Client) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let server = FakeApiServer::start_with_rbac().await.unwrap();
    server
        .create(
            "serviceaccounts",
            Some("kube-system"),
            json!({ "metadata": { "name": "cloud-controller-manager" } }),
        )
        .unwrap();
    server
        .create(
            "services",
            Some("default"),
            json!({ "metadata": { "name": "web" }, "spec": { "type": "LoadBalancer", "ports": [{ "port": 80 }] } }),
        )
        .unwrap();
    server
        .create("nodes", None, json!({ "metadata": { "name": "n1" } }))
        .unwrap();
    server
        .create(
            "clusterroles",
            None,
            json!({ "metadata": { "name": "ccm" }, "rules": rules }),
        )
        .unwrap();
    server
        .create(
            "clusterrolebindings",
            None,
            json!({
                "metadata": { "name": "ccm" },
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "ccm" },
                "subjects": [{ "kind": "ServiceAccount", "name": "cloud-controller-manager", "namespace": "kube-system" }],
            }),
        )
        .unwrap();
    let token = server
        .service_account_token("kube-system", "cloud-controller-manager")
        .unwrap();
    let client = server.kube_client_with_token(&token).unwrap();
    (server, client)
}
