//! What Roles, ClusterRoles and their bindings grant: verbs, resources, subresources,
//! namespaces, resource names (also through a `metadata.name` field selector), and
//! `deletecollection` as a verb of its own.

use crate::common;

use common::api_error;
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::json;

use super::{SA_USER, rbac_server};

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
