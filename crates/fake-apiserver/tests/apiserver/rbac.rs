//! RBAC over real HTTP with `kube::Api`: bearer tokens (admin, ServiceAccount, static),
//! Roles, ClusterRoles and bindings enforced for verbs, resources, subresources, resource
//! names and API groups, with kube-apiserver's 401 and 403 Status bodies
//! (`responsewriters.Forbidden` / `forbiddenMessage`, `apierrors.NewForbidden`).

use crate::common;

use common::{api_error, api_status, causes};
use fake_apiserver::{FakeApiServer, UserInfo};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
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

#[tokio::test]
async fn a_service_account_gets_exactly_what_its_cluster_role_grants() {
    let (server, client) = rbac_server(json!([
        { "apiGroups": [""], "resources": ["services"], "verbs": ["get", "list", "watch"] },
        { "apiGroups": [""], "resources": ["services/status"], "verbs": ["update"] },
        { "apiGroups": [""], "resources": ["nodes"], "resourceNames": ["n1"], "verbs": ["get"] },
    ]))
    .await;
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    assert_eq!(
        services
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    let web = services.get("web").await.unwrap();
    services
        .replace_status("web", &PostParams::default(), &web)
        .await
        .expect("update of services/status is granted");

    // Real message of kube-apiserver for a subresource verb that is not granted.
    let patch = json!({ "status": { "loadBalancer": { "ingress": [{ "ip": "203.0.113.1" }] } } });
    let (code, reason, message) = api_error(
        services
            .patch_status("web", &PatchParams::default(), &Patch::Merge(&patch))
            .await,
    );
    assert_eq!((code, reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        message,
        format!(
            "services \"web\" is forbidden: User \"{SA_USER}\" cannot patch resource \"services/status\" in API group \"\" in the namespace \"default\""
        )
    );
    // `services` does not grant `services/status` and vice versa.
    let (code, _, message) = api_error(
        services
            .patch("web", &PatchParams::default(), &Patch::Merge(&json!({})))
            .await,
    );
    assert_eq!(code, 403);
    assert!(
        message.contains("cannot patch resource \"services\""),
        "{message}"
    );

    // resourceNames: n1 only, and never a list.
    let nodes: Api<Node> = Api::all(client.clone());
    nodes.get("n1").await.expect("get n1 is granted");
    let (code, _, message) = api_error(nodes.list(&ListParams::default()).await);
    assert_eq!(code, 403);
    assert_eq!(
        message,
        format!(
            "nodes is forbidden: User \"{SA_USER}\" cannot list resource \"nodes\" in API group \"\" at the cluster scope"
        )
    );
    // API groups: nothing in coordination.k8s.io.
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    let (code, _, message) = api_error(leases.get("cloud-controller-manager").await);
    assert_eq!(code, 403);
    assert_eq!(
        message,
        format!(
            "leases.coordination.k8s.io \"cloud-controller-manager\" is forbidden: User \"{SA_USER}\" cannot get resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"kube-system\""
        )
    );
    // The refused requests are counted.
    assert_eq!(server.forbidden_count(), 4, "{:#?}", server.denials());
}

#[tokio::test]
async fn role_bindings_grant_in_their_namespace_only_and_name_missing_roles() {
    let (server, client) = rbac_server(json!([])).await;
    server
        .create(
            "roles",
            Some("kube-system"),
            json!({ "metadata": { "name": "leases" }, "rules": [
                { "apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"] }
            ] }),
        )
        .unwrap();
    for (namespace, role_kind, role) in [
        ("kube-system", "Role", "leases"),
        ("default", "ClusterRole", "missing"),
    ] {
        server
            .create(
                "rolebindings",
                Some(namespace),
                json!({
                    "metadata": { "name": "ccm" },
                    "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role },
                    "subjects": [{ "kind": "ServiceAccount", "name": "cloud-controller-manager", "namespace": "kube-system" }],
                }),
            )
            .unwrap();
    }
    let lease: Lease = serde_json::from_value(json!({ "metadata": { "name": "l" } })).unwrap();
    Api::<Lease>::namespaced(client.clone(), "kube-system")
        .create(&PostParams::default(), &lease)
        .await
        .expect("the Role grants create in kube-system");
    let (code, _, message) = api_error(
        Api::<Lease>::namespaced(client.clone(), "default")
            .create(&PostParams::default(), &lease)
            .await,
    );
    assert_eq!(code, 403);
    assert_eq!(
        message,
        format!(
            "leases.coordination.k8s.io is forbidden: User \"{SA_USER}\" cannot create resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"default\": RBAC: clusterrole.rbac.authorization.k8s.io \"missing\" not found"
        )
    );
}

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
async fn rbac_objects_are_served_and_without_rbac_everything_is_allowed() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let open = FakeApiServer::start().await.unwrap();
    let anonymous = open.kube_client().unwrap();
    Api::<Node>::all(anonymous)
        .list(&ListParams::default())
        .await
        .expect("no RBAC: everything is allowed");
    assert!(open.list("clusterroles", None).unwrap().is_empty());

    let server = FakeApiServer::start_with_rbac().await.unwrap();
    let names: Vec<String> = server
        .list("clusterroles", None)
        .unwrap()
        .iter()
        .map(|r| r["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(names.contains(&"cluster-admin".to_string()), "{names:?}");
    let admin = server.kube_client().unwrap();
    let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(admin);
    let role: k8s_openapi::api::rbac::v1::ClusterRole = serde_json::from_value(json!({
        "metadata": { "name": "reader" },
        "rules": [{ "apiGroups": [""], "resources": ["nodes"], "verbs": ["get"] }]
    }))
    .unwrap();
    roles.create(&PostParams::default(), &role).await.unwrap();
    assert_eq!(
        roles.get("reader").await.unwrap().rules.unwrap()[0].verbs,
        ["get"]
    );
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

#[tokio::test]
async fn deletecollection_is_a_verb_of_its_own() {
    let (server, client) = rbac_server(json!([
        { "apiGroups": [""], "resources": ["events"], "verbs": ["create", "delete"] },
    ]))
    .await;
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client, "default");
    for name in ["a", "b"] {
        let event = serde_json::from_value(json!({
            "metadata": { "name": name },
            "involvedObject": { "kind": "Node", "name": "n1" },
            "reason": "Test",
        }))
        .unwrap();
        events.create(&PostParams::default(), &event).await.unwrap();
    }
    let (code, _, message) = api_error(
        events
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await,
    );
    assert_eq!(code, 403);
    assert!(
        message.contains("cannot deletecollection resource \"events\""),
        "{message}"
    );
    let admin: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(server.kube_client().unwrap(), "default");
    admin
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .unwrap();
    assert!(server.events().is_empty());
}

/// `ValidateRoleBinding`, `ValidateClusterRoleBinding` and their `...Update`
/// (`pkg/apis/rbac/validation/validation.go`), after the v1 defaulting of
/// `pkg/apis/rbac/v1/defaults.go`: a roleRef names a Role or ClusterRole of
/// rbac.authorization.k8s.io by a name (a ClusterRoleBinding a ClusterRole only), and it
/// never changes.
#[tokio::test]
async fn role_refs_are_validated_on_create_and_never_change() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let server = FakeApiServer::start().await.unwrap();
    let client = server.kube_client().unwrap();
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), "default");
    let binding = |name: &str, role_ref: Value| -> RoleBinding {
        serde_json::from_value(json!({
            "metadata": { "name": name },
            "roleRef": role_ref,
            "subjects": [{ "kind": "ServiceAccount", "name": "cloud-controller-manager", "namespace": "kube-system" }],
        }))
        .unwrap()
    };

    let status = api_status(
        bindings
            .create(
                &PostParams::default(),
                &binding(
                    "bad",
                    json!({ "apiGroup": "example.com", "kind": "Foo", "name": "" }),
                ),
            )
            .await,
    );
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        status.message,
        "RoleBinding.rbac.authorization.k8s.io \"bad\" is invalid: [roleRef.apiGroup: Unsupported value: \"example.com\": supported values: \"rbac.authorization.k8s.io\", roleRef.kind: Unsupported value: \"Foo\": supported values: \"Role\", \"ClusterRole\", roleRef.name: Required value]"
    );
    assert_eq!(
        causes(&status),
        [
            ("roleRef.apiGroup".into(), "FieldValueNotSupported".into()),
            ("roleRef.kind".into(), "FieldValueNotSupported".into()),
            ("roleRef.name".into(), "FieldValueRequired".into()),
        ]
    );
    let details = status.details.unwrap();
    assert_eq!(
        (
            details.kind.as_str(),
            details.group.as_str(),
            details.name.as_str()
        ),
        ("RoleBinding", "rbac.authorization.k8s.io", "bad")
    );
    let status = api_status(
        bindings
            .create(
                &PostParams::default(),
                &binding("slash", json!({ "kind": "Role", "name": "a/b" })),
            )
            .await,
    );
    assert_eq!(
        status.message,
        "RoleBinding.rbac.authorization.k8s.io \"slash\" is invalid: roleRef.name: Invalid value: \"a/b\": may not contain '/'"
    );

    // A ClusterRoleBinding references a ClusterRole only.
    let cluster_binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": { "name": "ccm" },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "ccm" },
    }))
    .unwrap();
    let status = api_status(
        Api::<ClusterRoleBinding>::all(client.clone())
            .create(&PostParams::default(), &cluster_binding)
            .await,
    );
    assert_eq!(
        status.message,
        "ClusterRoleBinding.rbac.authorization.k8s.io \"ccm\" is invalid: roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\""
    );

    // A RoleBinding may reference a ClusterRole; a missing apiGroup is defaulted.
    let created = bindings
        .create(
            &PostParams::default(),
            &binding("ccm", json!({ "kind": "ClusterRole", "name": "view" })),
        )
        .await
        .unwrap();
    assert_eq!(created.role_ref.api_group, "rbac.authorization.k8s.io");

    // The subjects may change, the roleRef may not: not by update, not by patch.
    let mut changed = created.clone();
    changed.subjects = None;
    let changed = bindings
        .replace("ccm", &PostParams::default(), &changed)
        .await
        .unwrap();
    let mut other_role = changed.clone();
    other_role.role_ref.name = "edit".into();
    let status = api_status(
        bindings
            .replace("ccm", &PostParams::default(), &other_role)
            .await,
    );
    assert_eq!(status.code, 422);
    assert_eq!(
        status.message,
        "RoleBinding.rbac.authorization.k8s.io \"ccm\" is invalid: roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", Name:\"edit\"}: cannot change roleRef"
    );
    assert_eq!(
        causes(&status),
        [("roleRef".into(), "FieldValueInvalid".into())]
    );
    let status = api_status(
        bindings
            .patch(
                "ccm",
                &PatchParams::default(),
                &Patch::Merge(json!({ "roleRef": { "kind": "Role" } })),
            )
            .await,
    );
    assert!(
        status.message.ends_with(
            "roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"Role\", Name:\"view\"}: cannot change roleRef"
        ),
        "{}",
        status.message
    );
    assert_eq!(bindings.get("ccm").await.unwrap().role_ref.name, "view");
}

/// `RequestInfoFactory.NewRequestInfo`
/// (`staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go`): a list or watch
/// whose field selector requires `metadata.name` (`RequiresExactMatch`, with `=` or `==`
/// as `fields.ParseSelector` reads them) is authorised on that name, so a rule with
/// resourceNames grants it; `!=` names nothing.
#[tokio::test]
async fn a_metadata_name_field_selector_names_the_object_of_a_list_or_watch() {
    let (server, client) = rbac_server(json!([
        { "apiGroups": [""], "resources": ["nodes"], "resourceNames": ["n1"], "verbs": ["get", "list", "watch"] },
    ]))
    .await;
    server
        .create("nodes", None, json!({ "metadata": { "name": "n2" } }))
        .unwrap();
    let nodes: Api<Node> = Api::all(client);
    for selector in ["metadata.name=n1", "metadata.name==n1"] {
        let listed = nodes
            .list(&ListParams::default().fields(selector))
            .await
            .unwrap_or_else(|e| panic!("{selector}: {e}"));
        let names: Vec<_> = listed.iter().map(|n| n.metadata.name.clone()).collect();
        assert_eq!(names, [Some("n1".to_string())], "{selector}");
    }
    let mut stream = nodes
        .watch(
            &WatchParams::default()
                .fields("metadata.name==n1")
                .timeout(5),
            "0",
        )
        .await
        .expect("a watch of n1 is granted")
        .boxed();
    match stream.next().await {
        Some(Ok(WatchEvent::Added(node))) => assert_eq!(node.metadata.name.as_deref(), Some("n1")),
        other => panic!("expected n1 added, got {other:?}"),
    }

    let (code, _, message) = api_error(
        nodes
            .list(&ListParams::default().fields("metadata.name==n2"))
            .await,
    );
    assert_eq!(code, 403);
    assert_eq!(
        message,
        format!(
            "nodes \"n2\" is forbidden: User \"{SA_USER}\" cannot list resource \"nodes\" in API group \"\" at the cluster scope"
        )
    );
    let (code, _, message) = api_error(
        nodes
            .list(&ListParams::default().fields("metadata.name!=n2"))
            .await,
    );
    assert_eq!(code, 403);
    assert!(message.starts_with("nodes is forbidden: "), "{message}");
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
