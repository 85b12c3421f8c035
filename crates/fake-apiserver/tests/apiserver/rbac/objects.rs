//! The RBAC objects themselves: served (and everything allowed without RBAC), and their
//! roleRefs validated on create and never changed.

use crate::common;

use common::{api_status, causes};
use fake_apiserver::FakeApiServer;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

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
