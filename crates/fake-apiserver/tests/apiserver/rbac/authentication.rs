//! Who a request is: bearer tokens (admin, ServiceAccount, static), anonymous users,
//! deleted ServiceAccounts, the TokenRequest API, and unknown tokens refused with 401 even
//! without RBAC.

use crate::common;

use common::api_error;
use fake_apiserver::{FakeApiServer, UserInfo};
use k8s_openapi::api::core::v1::{Node, Service, ServiceAccount};
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::{Value, json};

use super::rbac_server;

#[tokio::test]
async fn tokens_anonymous_users_and_deleted_service_accounts() {
    let (server, client) = rbac_server(json!([
        { "apiGroups": [""], "resources": ["nodes"], "verbs": ["list"] },
    ]))
    .await;
    Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap();

    // Unknown token: 401 Unauthorized.
    let stranger = server.kube_client_with_token("not-a-token").unwrap();
    let (code, reason, message) = api_error(
        Api::<Node>::all(stranger)
            .list(&ListParams::default())
            .await,
    );
    assert_eq!(
        (code, reason.as_str(), message.as_str()),
        (401, "Unauthorized", "Unauthorized")
    );

    // No token: system:anonymous, refused.
    let anonymous =
        kube::Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap();
    let (code, _, message) = api_error(
        Api::<Node>::all(anonymous)
            .list(&ListParams::default())
            .await,
    );
    assert_eq!(code, 403);
    assert!(
        message.contains("User \"system:anonymous\" cannot list resource \"nodes\""),
        "{message}"
    );

    // A static token of a user in a group bound to cluster-admin.
    server.add_token(
        "ops-token",
        UserInfo {
            name: "ops".into(),
            groups: vec!["system:masters".into()],
        },
    );
    let ops = server.kube_client_with_token("ops-token").unwrap();
    Api::<Node>::all(ops)
        .delete("n1", &DeleteParams::default())
        .await
        .expect("system:masters may do anything");

    // Deleting the ServiceAccount invalidates its tokens.
    Api::<ServiceAccount>::namespaced(server.kube_client().unwrap(), "kube-system")
        .delete("cloud-controller-manager", &DeleteParams::default())
        .await
        .unwrap();
    let (code, _, _) = api_error(Api::<Node>::all(client).list(&ListParams::default()).await);
    assert_eq!(code, 401);
}

#[tokio::test]
async fn the_token_request_api_issues_tokens_held_to_the_role() {
    let (server, _) = rbac_server(json!([
        { "apiGroups": [""], "resources": ["nodes"], "verbs": ["list"] },
    ]))
    .await;
    let admin = server.kube_client().unwrap();
    let token_request = |seconds: u64| {
        http::Request::post(
            "/api/v1/namespaces/kube-system/serviceaccounts/cloud-controller-manager/token",
        )
        .header("content-type", "application/json")
        .body(
            serde_json::to_vec(&json!({
                "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": { "expirationSeconds": seconds },
            }))
            .unwrap(),
        )
        .unwrap()
    };
    let answer: Value = admin.request(token_request(3600)).await.unwrap();
    assert_eq!(answer["kind"], "TokenRequest");
    assert_eq!(answer["spec"]["expirationSeconds"], 3600);
    let token = answer["status"]["token"].as_str().unwrap();
    let client = server.kube_client_with_token(token).unwrap();
    Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("the role grants list nodes");
    let (code, _, _) = api_error(
        Api::<Service>::all(client)
            .list(&ListParams::default())
            .await,
    );
    assert_eq!(code, 403);
    // TokenRequest validation: at least ten minutes.
    let (code, _, message) = api_error(admin.request::<Value>(token_request(60)).await);
    assert_eq!(code, 422);
    assert!(
        message.contains("may not specify a duration less than 10 minutes"),
        "{message}"
    );
}

/// kube-apiserver authenticates whatever the authorization mode (`WithAuthentication`
/// before `WithAuthorization`): with `AlwaysAllow` (RBAC off) a bearer token no
/// authenticator knows is refused with 401 before authorization (`union.NewFailOnError`
/// keeps a bad token from becoming anonymous), a known token and no token at all are
/// allowed, and an `Authorization` header that is not a bearer token is no token
/// (`bearertoken.go`): anonymous.
#[tokio::test]
async fn without_rbac_a_bearer_token_the_server_does_not_know_is_refused() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let server = FakeApiServer::start().await.unwrap();
    let list = |client: kube::Client| async move {
        Api::<Node>::all(client).list(&ListParams::default()).await
    };
    // No token known yet.
    let (code, reason, message) =
        api_error(list(server.kube_client_with_token("not-a-token").unwrap()).await);
    assert_eq!(
        (code, reason.as_str(), message.as_str()),
        (401, "Unauthorized", "Unauthorized")
    );

    // Static tokens (--token-auth-file) and ServiceAccount tokens.
    server.add_token(
        "ops-token",
        UserInfo {
            name: "ops".into(),
            groups: vec![],
        },
    );
    list(server.kube_client_with_token("ops-token").unwrap())
        .await
        .expect("a known static token");
    server
        .create(
            "serviceaccounts",
            Some("kube-system"),
            json!({ "metadata": { "name": "ccm" } }),
        )
        .unwrap();
    let token = server.service_account_token("kube-system", "ccm").unwrap();
    let account = server.kube_client_with_token(&token).unwrap();
    list(account.clone())
        .await
        .expect("a live ServiceAccount's token");
    let (code, _, _) = api_error(list(server.kube_client_with_token("not-a-token").unwrap()).await);
    assert_eq!(code, 401);
    server
        .delete("serviceaccounts", Some("kube-system"), "ccm")
        .unwrap();
    let (code, _, _) = api_error(list(account).await);
    assert_eq!(code, 401, "the ServiceAccount is gone");

    // No token, or no bearer token: anonymous, and AlwaysAllow allows it.
    list(server.kube_client().unwrap())
        .await
        .expect("anonymous");
    let mut config = kube::Config::new(server.url().parse().unwrap());
    config.auth_info.username = Some("admin".into());
    config.auth_info.password = Some("secret".to_string().into());
    list(kube::Client::try_from(config).unwrap())
        .await
        .expect("basic credentials are no bearer token");

    let refused: Vec<u16> = server.denials().iter().map(|d| d.code).collect();
    assert_eq!(refused, [401, 401, 401]);
}
