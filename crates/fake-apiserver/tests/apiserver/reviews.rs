//! TokenReview and SubjectAccessReview over real HTTP with `kube::Api`, as a delegating
//! server calls them: tokens reviewed by the server's authenticators, access decided by
//! its RBAC, the caller itself authorised through `system:auth-delegator`
//! (kube-apiserver's `pkg/registry/authentication/tokenreview` and
//! `pkg/registry/authorization/subjectaccessreview`).

use crate::common;

use common::api_error;
use fake_apiserver::{FakeApiServer, Fault, UserInfo, Verb};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use serde_json::json;

/// A server with RBAC on, the ServiceAccount `kube-system/ccm` bound to
/// `system:auth-delegator`, and `prometheus` (a static token) allowed `get` on
/// `/metrics`; returns the server and a client with the ServiceAccount's token.
async fn delegating_server() -> (FakeApiServer, kube::Client) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let server = FakeApiServer::start_with_rbac().await.unwrap();
    server
        .create(
            "serviceaccounts",
            Some("kube-system"),
            json!({ "metadata": { "name": "ccm" } }),
        )
        .unwrap();
    let bind = |name: &str, role: &str, subject: serde_json::Value| {
        server
            .create(
                "clusterrolebindings",
                None,
                json!({
                    "metadata": { "name": name },
                    "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role },
                    "subjects": [subject],
                }),
            )
            .unwrap();
    };
    bind(
        "ccm-delegator",
        "system:auth-delegator",
        json!({ "kind": "ServiceAccount", "name": "ccm", "namespace": "kube-system" }),
    );
    server
        .create(
            "clusterroles",
            None,
            json!({ "metadata": { "name": "metrics-reader" }, "rules": [{ "nonResourceURLs": ["/metrics"], "verbs": ["get"] }] }),
        )
        .unwrap();
    bind(
        "prometheus",
        "metrics-reader",
        json!({ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "prometheus" }),
    );
    server.add_token(
        "prometheus-token",
        UserInfo {
            name: "prometheus".into(),
            groups: vec!["monitoring".into(), "system:authenticated".into()],
        },
    );
    let token = server.service_account_token("kube-system", "ccm").unwrap();
    let client = server.kube_client_with_token(&token).unwrap();
    (server, client)
}

fn token_review(token: &str) -> TokenReview {
    TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn metrics_review(user: &str, groups: &[&str], path: &str) -> SubjectAccessReview {
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.into()),
            groups: Some(groups.iter().map(|g| g.to_string()).collect()),
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(path.into()),
                verb: Some("get".into()),
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[tokio::test]
async fn a_token_review_answers_from_the_servers_tokens() {
    let (server, client) = delegating_server().await;
    let reviews: Api<TokenReview> = Api::all(client);
    let post = PostParams::default();

    let answer = reviews
        .create(&post, &token_review("prometheus-token"))
        .await
        .unwrap();
    let status = answer.status.expect("a status");
    assert_eq!(status.authenticated, Some(true));
    let user = status.user.expect("the user");
    assert_eq!(user.username.as_deref(), Some("prometheus"));
    assert_eq!(user.groups.unwrap(), ["monitoring", "system:authenticated"]);

    let sa = server.service_account_token("kube-system", "ccm").unwrap();
    let status = reviews
        .create(&post, &token_review(&sa))
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(
        status.user.unwrap().username.as_deref(),
        Some("system:serviceaccount:kube-system:ccm")
    );

    let status = reviews
        .create(&post, &token_review("nobody-issued-this"))
        .await
        .unwrap()
        .status
        .unwrap();
    assert_ne!(status.authenticated, Some(true), "an unknown token");

    // A ServiceAccount's token stops authenticating when the ServiceAccount is gone.
    server
        .create(
            "serviceaccounts",
            Some("default"),
            json!({ "metadata": { "name": "short-lived" } }),
        )
        .unwrap();
    let doomed = server
        .service_account_token("default", "short-lived")
        .unwrap();
    server
        .delete("serviceaccounts", Some("default"), "short-lived")
        .unwrap();
    let status = reviews
        .create(&post, &token_review(&doomed))
        .await
        .unwrap()
        .status
        .unwrap();
    assert_ne!(
        status.authenticated,
        Some(true),
        "the ServiceAccount is gone"
    );

    let (code, _, message) = api_error(reviews.create(&post, &token_review("")).await);
    assert_eq!(code, 400);
    assert_eq!(
        message,
        "token is required for TokenReview in authentication"
    );
    assert_eq!(
        server.request_count(Verb::Create, "tokenreviews.authentication.k8s.io"),
        5
    );
}

#[tokio::test]
async fn a_subject_access_review_answers_from_the_servers_rbac() {
    let (_server, client) = delegating_server().await;
    let reviews: Api<SubjectAccessReview> = Api::all(client);
    let post = PostParams::default();
    let allowed = |review: SubjectAccessReview| review.status.expect("a status").allowed;

    let prometheus = metrics_review("prometheus", &["system:authenticated"], "/metrics");
    assert!(allowed(reviews.create(&post, &prometheus).await.unwrap()));
    let elsewhere = metrics_review("prometheus", &["system:authenticated"], "/debug");
    assert!(!allowed(reviews.create(&post, &elsewhere).await.unwrap()));
    let anonymous = metrics_review("system:anonymous", &["system:unauthenticated"], "/metrics");
    assert!(!allowed(reviews.create(&post, &anonymous).await.unwrap()));
    // The bootstrap policy lets everybody get /healthz, and system:masters everything.
    let health = metrics_review("system:anonymous", &["system:unauthenticated"], "/healthz");
    assert!(allowed(reviews.create(&post, &health).await.unwrap()));
    let admin = metrics_review("someone", &["system:masters"], "/metrics");
    assert!(allowed(reviews.create(&post, &admin).await.unwrap()));

    let resource = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some("prometheus".into()),
            resource_attributes: Some(ResourceAttributes {
                verb: Some("list".into()),
                resource: Some("nodes".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    assert!(!allowed(reviews.create(&post, &resource).await.unwrap()));

    let nobody = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some("/metrics".into()),
                verb: Some("get".into()),
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let (code, reason, message) = api_error(reviews.create(&post, &nobody).await);
    assert_eq!((code, &*reason), (422, "Invalid"));
    assert!(
        message.contains(
            "spec.user: Invalid value: \"\": at least one of user or group must be specified"
        ),
        "{message}"
    );
}

#[tokio::test]
async fn reviews_need_the_auth_delegator_grant_and_can_fail() {
    let (server, _) = delegating_server().await;
    server
        .create(
            "serviceaccounts",
            Some("kube-system"),
            json!({ "metadata": { "name": "unbound" } }),
        )
        .unwrap();
    let token = server
        .service_account_token("kube-system", "unbound")
        .unwrap();
    let unbound = server.kube_client_with_token(&token).unwrap();
    let (code, _, message) = api_error(
        Api::<TokenReview>::all(unbound.clone())
            .create(&PostParams::default(), &token_review("prometheus-token"))
            .await,
    );
    assert_eq!(code, 403);
    assert!(
        message.contains(
            "cannot create resource \"tokenreviews\" in API group \"authentication.k8s.io\""
        ),
        "{message}"
    );
    let (code, _, _) = api_error(
        Api::<SubjectAccessReview>::all(unbound)
            .create(
                &PostParams::default(),
                &metrics_review("prometheus", &[], "/metrics"),
            )
            .await,
    );
    assert_eq!(code, 403);

    // Fault injection, as for any resource.
    server.set_faults(vec![
        Fault::error(500).on(Verb::Create, "subjectaccessreviews.authorization.k8s.io"),
    ]);
    let client = server.kube_client().unwrap();
    let (code, _, _) = api_error(
        Api::<SubjectAccessReview>::all(client)
            .create(
                &PostParams::default(),
                &metrics_review("prometheus", &[], "/metrics"),
            )
            .await,
    );
    assert_eq!(code, 500);
}

#[tokio::test]
async fn without_rbac_every_access_review_is_allowed() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let server = FakeApiServer::start().await.unwrap();
    let reviews: Api<SubjectAccessReview> = Api::all(server.kube_client().unwrap());
    let review = metrics_review("system:anonymous", &["system:unauthenticated"], "/metrics");
    let answer = reviews
        .create(&PostParams::default(), &review)
        .await
        .unwrap();
    assert!(answer.status.unwrap().allowed, "AlwaysAllow");
}
