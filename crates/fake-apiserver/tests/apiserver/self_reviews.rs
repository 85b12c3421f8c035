//! SelfSubjectAccessReview over real HTTP with `kube::Api`, as `kubectl auth can-i` and
//! controllers that check their own access call it: decided by the server's RBAC for the
//! user who sends it, whatever the body says (kube-apiserver's
//! `pkg/registry/authorization/selfsubjectaccessreview/rest.go`), validated by
//! `ValidateSelfSubjectAccessReview`, and open to every authenticated user through the
//! bootstrap `system:basic-user` binding. (`kubectl auth can-i` itself is in `kubectl.rs`.)

use crate::common;

use common::{api_error, api_status, causes};
use fake_apiserver::{FakeApiServer, Fault, UserInfo, Verb};
use http::Request;
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SelfSubjectAccessReview,
    SelfSubjectAccessReviewSpec, SubjectAccessReview, SubjectAccessReviewSpec,
    SubjectAccessReviewStatus,
};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

const PATH: &str = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";

/// A server with RBAC on and the static token `alice-token` of the user `alice` (groups
/// `dev`, `system:authenticated`), who may read Pods in `default` through a Role and a
/// RoleBinding, and is also bound there to the Role `ghost`, which does not exist.
async fn alices_server() -> (FakeApiServer, kube::Client) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let server = FakeApiServer::start_with_rbac().await.unwrap();
    server.add_token(
        "alice-token",
        UserInfo {
            name: "alice".into(),
            groups: vec!["dev".into(), "system:authenticated".into()],
        },
    );
    server
        .create(
            "roles",
            Some("default"),
            json!({
                "metadata": { "name": "pod-reader" },
                "rules": [{ "apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"] }],
            }),
        )
        .unwrap();
    for role in ["pod-reader", "ghost"] {
        server
            .create(
                "rolebindings",
                Some("default"),
                json!({
                    "metadata": { "name": format!("alice-{role}") },
                    "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role },
                    "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice" }],
                }),
            )
            .unwrap();
    }
    let client = server.kube_client_with_token("alice-token").unwrap();
    (server, client)
}

fn resource_attributes(verb: &str, resource: &str, namespace: &str) -> ResourceAttributes {
    ResourceAttributes {
        verb: Some(verb.into()),
        resource: Some(resource.into()),
        namespace: Some(namespace.into()),
        ..Default::default()
    }
}

fn can_i(verb: &str, resource: &str, namespace: &str) -> SelfSubjectAccessReview {
    SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(resource_attributes(verb, resource, namespace)),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn can_i_path(verb: &str, path: &str) -> SelfSubjectAccessReview {
    SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(path.into()),
                verb: Some(verb.into()),
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

async fn status(
    client: &kube::Client,
    review: &SelfSubjectAccessReview,
) -> SubjectAccessReviewStatus {
    Api::<SelfSubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), review)
        .await
        .unwrap()
        .status
        .expect("a status")
}

/// `POST` of a raw JSON body with `client`.
async fn post_json(client: &kube::Client, body: Value) -> kube::Result<Value> {
    let request = Request::post(PATH)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&body).unwrap())
        .unwrap();
    client.request::<Value>(request).await
}

/// A client that sends no credentials (`system:anonymous`).
fn anonymous_client(server: &FakeApiServer) -> kube::Client {
    let config = kube::Config::new(server.url().parse().unwrap());
    kube::Client::try_from(config).unwrap()
}

#[tokio::test]
async fn a_self_review_answers_for_the_requester_from_rbac() {
    let (server, alice) = alices_server().await;

    let review = can_i("list", "pods", "default");
    let answer = Api::<SelfSubjectAccessReview>::all(alice.clone())
        .create(&PostParams::default(), &review)
        .await
        .unwrap();
    assert_eq!(answer.spec, review.spec, "the request is echoed");
    let granted = answer.status.expect("a status");
    assert!(granted.allowed);
    assert_eq!((granted.denied, granted.reason), (None, None));

    // Not granted: allowed false, never denied (RBAC has no opinion), and the RBAC errors
    // met on the way as the reason, exactly what a SubjectAccessReview for alice says.
    let refused = status(&alice, &can_i("delete", "pods", "default")).await;
    assert!(!refused.allowed);
    assert_eq!(refused.denied, None);
    assert_eq!(
        refused.reason.as_deref(),
        Some("RBAC: role.rbac.authorization.k8s.io \"ghost\" not found")
    );
    let sar = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some("alice".into()),
            groups: Some(vec!["dev".into(), "system:authenticated".into()]),
            resource_attributes: Some(resource_attributes("delete", "pods", "default")),
            ..Default::default()
        },
        ..Default::default()
    };
    let delegated = Api::<SubjectAccessReview>::all(server.kube_client().unwrap())
        .create(&PostParams::default(), &sar)
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(delegated, refused);

    // The Role grants in `default` only, and nothing on Nodes.
    let elsewhere = status(&alice, &can_i("list", "pods", "kube-system")).await;
    assert_eq!((elsewhere.allowed, elsewhere.reason), (false, None));
    assert!(!status(&alice, &can_i("get", "nodes", "")).await.allowed);

    // Non-resource requests: the bootstrap policy lets everybody get /healthz.
    assert!(status(&alice, &can_i_path("get", "/healthz")).await.allowed);
    assert!(!status(&alice, &can_i_path("get", "/metrics")).await.allowed);

    assert_eq!(
        server.request_count(
            Verb::Create,
            "selfsubjectaccessreviews.authorization.k8s.io"
        ),
        6
    );
    assert!(server.denials().is_empty(), "{:?}", server.denials());
}

#[tokio::test]
async fn the_body_names_no_one_the_requester_is_evaluated() {
    let (_server, alice) = alices_server().await;
    // A SelfSubjectAccessReviewSpec has no user fields; ones sent anyway are dropped by
    // decoding in kube-apiserver and never read here.
    let answer = post_json(
        &alice,
        json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {
                "user": "kubernetes-admin",
                "groups": ["system:masters"],
                "uid": "0",
                "resourceAttributes": { "verb": "delete", "resource": "nodes" },
            },
        }),
    )
    .await
    .unwrap();
    assert_eq!(answer["kind"], "SelfSubjectAccessReview");
    assert_eq!(answer["apiVersion"], "authorization.k8s.io/v1");
    assert_eq!(answer["status"]["allowed"], false, "{answer}");
}

#[tokio::test]
async fn exactly_one_kind_of_attributes_or_422() {
    let (_server, alice) = alices_server().await;
    let reviews: Api<SelfSubjectAccessReview> = Api::all(alice);
    let post = PostParams::default();

    let neither = SelfSubjectAccessReview::default();
    let status = api_status(reviews.create(&post, &neither).await);
    assert_eq!((status.code, &*status.reason), (422, "Invalid"));
    assert_eq!(
        status.message,
        "SelfSubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.resourceAttributes: Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified"
    );
    assert_eq!(
        causes(&status),
        [(
            "spec.resourceAttributes".to_string(),
            "FieldValueInvalid".to_string()
        )]
    );

    let mut both = can_i_path("get", "/metrics");
    both.spec.resource_attributes = Some(resource_attributes("get", "pods", "default"));
    let status = api_status(reviews.create(&post, &both).await);
    assert_eq!(status.code, 422);
    assert_eq!(
        status.message,
        "SelfSubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.nonResourceAttributes: Invalid value: authorization.NonResourceAttributes{Path:\"/metrics\", Verb:\"get\"}: cannot be specified in combination with resourceAttributes"
    );

    let mut named = can_i("get", "pods", "default");
    named.metadata.name = Some("mine".into());
    let (code, _, message) = api_error(reviews.create(&post, &named).await);
    assert_eq!(code, 422);
    assert!(
        message.ends_with("metadata: Invalid value: : must be empty"),
        "{message}"
    );
}

#[tokio::test]
async fn unauthenticated_requests_are_refused_as_everywhere() {
    let (server, _) = alices_server().await;
    let review = serde_json::to_value(can_i("get", "pods", "default")).unwrap();

    // A token no one issued: 401 whatever the authorization mode.
    let stranger = server.kube_client_with_token("nobody-issued-this").unwrap();
    let (code, reason, _) = api_error(post_json(&stranger, review.clone()).await);
    assert_eq!((code, &*reason), (401, "Unauthorized"));

    // No token: system:anonymous is not in system:authenticated, so system:basic-user does
    // not apply to it.
    let (code, reason, message) = api_error(post_json(&anonymous_client(&server), review).await);
    assert_eq!((code, &*reason), (403, "Forbidden"));
    assert_eq!(
        message,
        "selfsubjectaccessreviews.authorization.k8s.io is forbidden: User \"system:anonymous\" cannot create resource \"selfsubjectaccessreviews\" in API group \"authorization.k8s.io\" at the cluster scope"
    );
    let codes: Vec<u16> = server.denials().iter().map(|d| d.code).collect();
    assert_eq!(codes, [401, 403]);
}

#[tokio::test]
async fn a_user_with_no_bindings_may_still_ask() {
    let (server, _) = alices_server().await;
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
    let refused = status(&unbound, &can_i("get", "pods", "default")).await;
    assert_eq!((refused.allowed, refused.denied), (false, None));
    // Creating a SelfSubjectAccessReview is what system:basic-user grants it.
    let own = status(&unbound, &can_i("create", "selfsubjectaccessreviews", "")).await;
    assert!(!own.allowed, "the group is missing from the attributes");
    let mut own = can_i("create", "selfsubjectaccessreviews", "");
    own.spec.resource_attributes.as_mut().unwrap().group = Some("authorization.k8s.io".into());
    assert!(status(&unbound, &own).await.allowed);
    assert!(server.denials().is_empty(), "{:?}", server.denials());

    // Counted and open to fault injection like any resource.
    server.set_faults(vec![Fault::error(500).on(
        Verb::Create,
        "selfsubjectaccessreviews.authorization.k8s.io",
    )]);
    let (code, _, _) = api_error(
        Api::<SelfSubjectAccessReview>::all(unbound)
            .create(&PostParams::default(), &can_i("get", "pods", "default"))
            .await,
    );
    assert_eq!(code, 500);
}

#[tokio::test]
async fn without_rbac_every_self_review_is_allowed_even_anonymous() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let server = FakeApiServer::start().await.unwrap();
    let answer = post_json(
        &anonymous_client(&server),
        serde_json::to_value(can_i("delete", "nodes", "")).unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(answer["status"], json!({ "allowed": true }), "AlwaysAllow");
}
