//! Object semantics over real HTTP with `kube::Api`: versions, conflicts, Status errors,
//! status subresources, finalizers, patches and selectors.

use crate::common;

use common::{api_error, start};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

fn service(name: &str) -> Service {
    serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { "app": name } },
        "spec": { "type": "LoadBalancer", "ports": [{ "port": 80 }] }
    }))
    .unwrap()
}

#[tokio::test]
async fn create_assigns_metadata_and_versions_increase() {
    let (_server, client) = start().await;
    let services: Api<Service> = Api::default_namespaced(client);
    let a = services
        .create(&PostParams::default(), &service("a"))
        .await
        .unwrap();
    let b = services
        .create(&PostParams::default(), &service("b"))
        .await
        .unwrap();
    let rv = |s: &Service| {
        s.metadata
            .resource_version
            .clone()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    assert!(rv(&b) > rv(&a));
    assert!(a.metadata.uid.is_some() && a.metadata.creation_timestamp.is_some());
    assert_eq!(a.metadata.generation, Some(1));
    let spec = a.spec.unwrap();
    assert!(spec.cluster_ip.is_some());
    assert!(
        spec.ports.unwrap()[0].node_port.is_some(),
        "LoadBalancer ports get node ports"
    );
    let list = services.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 2);
    assert_eq!(
        list.metadata
            .resource_version
            .unwrap()
            .parse::<u64>()
            .unwrap(),
        rv(&b)
    );
}

#[tokio::test]
async fn errors_are_status_bodies_like_the_real_server() {
    let (_server, client) = start().await;
    let services: Api<Service> = Api::default_namespaced(client.clone());
    let (code, reason, message) = api_error(services.get("missing").await);
    assert_eq!(
        (code, reason.as_str(), message.as_str()),
        (404, "NotFound", "services \"missing\" not found")
    );

    services
        .create(&PostParams::default(), &service("web"))
        .await
        .unwrap();
    let (code, reason, message) = api_error(
        services
            .create(&PostParams::default(), &service("web"))
            .await,
    );
    assert_eq!(
        (code, reason.as_str(), message.as_str()),
        (409, "AlreadyExists", "services \"web\" already exists")
    );

    let elsewhere: Api<Service> = Api::namespaced(client.clone(), "nowhere");
    let (code, _, message) = api_error(
        elsewhere
            .create(&PostParams::default(), &service("x"))
            .await,
    );
    assert_eq!(
        (code, message.as_str()),
        (404, "namespaces \"nowhere\" not found")
    );

    let (code, reason, message) = api_error(
        services
            .list(&ListParams::default().fields("spec.type=LoadBalancer"))
            .await,
    );
    assert_eq!(
        (code, reason.as_str(), message.as_str()),
        (400, "BadRequest", "field label not supported: spec.type")
    );
}

#[tokio::test]
async fn stale_replace_conflicts_and_fresh_replace_succeeds() {
    let (_server, client) = start().await;
    let services: Api<Service> = Api::default_namespaced(client);
    let original = services
        .create(&PostParams::default(), &service("web"))
        .await
        .unwrap();
    let mut first = original.clone();
    first.metadata.labels = Some([("v".to_string(), "1".to_string())].into());
    let updated = services
        .replace("web", &PostParams::default(), &first)
        .await
        .unwrap();
    assert_ne!(
        updated.metadata.resource_version,
        original.metadata.resource_version
    );

    let mut stale = original.clone();
    stale.metadata.labels = Some([("v".to_string(), "2".to_string())].into());
    let (code, reason, message) = api_error(
        services
            .replace("web", &PostParams::default(), &stale)
            .await,
    );
    assert_eq!((code, reason.as_str()), (409, "Conflict"));
    assert!(
        message.contains("the object has been modified"),
        "{message}"
    );

    let stale_patch = json!({ "metadata": { "resourceVersion": original.metadata.resource_version, "labels": { "v": "3" } } });
    let (code, _, _) = api_error(
        services
            .patch("web", &PatchParams::default(), &Patch::Merge(&stale_patch))
            .await,
    );
    assert_eq!(code, 409);
}

#[tokio::test]
async fn status_subresource_is_isolated_from_main_writes() {
    let (_server, client) = start().await;
    let services: Api<Service> = Api::default_namespaced(client);
    services
        .create(&PostParams::default(), &service("web"))
        .await
        .unwrap();

    let ingress = json!({ "status": { "loadBalancer": { "ingress": [{ "ip": "203.0.113.7" }] } } });
    let main = services
        .patch("web", &PatchParams::default(), &Patch::Merge(&ingress))
        .await
        .unwrap();
    assert!(
        main.status
            .unwrap()
            .load_balancer
            .unwrap()
            .ingress
            .is_none(),
        "main write ignores status"
    );

    let with_status = json!({ "spec": { "type": "ClusterIP" }, "status": { "loadBalancer": { "ingress": [{ "ip": "203.0.113.7" }] } } });
    let patched = services
        .patch_status("web", &PatchParams::default(), &Patch::Merge(&with_status))
        .await
        .unwrap();
    assert_eq!(
        patched.spec.as_ref().unwrap().type_.as_deref(),
        Some("LoadBalancer"),
        "status write ignores spec"
    );
    assert_eq!(
        patched
            .status
            .unwrap()
            .load_balancer
            .unwrap()
            .ingress
            .unwrap()[0]
            .ip
            .as_deref(),
        Some("203.0.113.7")
    );
    assert_eq!(
        patched.metadata.generation,
        Some(1),
        "status changes do not bump generation"
    );

    let spec_change = json!({ "spec": { "ports": [{ "port": 443 }] } });
    let bumped = services
        .patch("web", &PatchParams::default(), &Patch::Merge(&spec_change))
        .await
        .unwrap();
    assert_eq!(bumped.metadata.generation, Some(2));
    assert!(
        bumped
            .status
            .unwrap()
            .load_balancer
            .unwrap()
            .ingress
            .is_some(),
        "main write keeps status"
    );

    let unchanged = services
        .patch("web", &PatchParams::default(), &Patch::Merge(&spec_change))
        .await
        .unwrap();
    assert_eq!(
        unchanged.metadata.resource_version, bumped.metadata.resource_version,
        "no-op writes keep the version"
    );
}

#[tokio::test]
async fn finalizers_delay_deletion_until_removed() {
    let (server, client) = start().await;
    let services: Api<Service> = Api::default_namespaced(client);
    let mut svc = service("web");
    svc.metadata.finalizers = Some(vec!["example.com/cleanup".into()]);
    services.create(&PostParams::default(), &svc).await.unwrap();

    let pending = services
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    let marked = pending
        .left()
        .expect("an object with finalizers is returned, not removed");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert!(services.get("web").await.is_ok());

    let add = json!({ "metadata": { "finalizers": ["example.com/cleanup", "example.com/new"] } });
    let (code, _, _) = api_error(
        services
            .patch("web", &PatchParams::default(), &Patch::Merge(&add))
            .await,
    );
    assert_eq!(code, 422, "no new finalizers while deleting");

    let remove = json!({ "metadata": { "finalizers": null } });
    services
        .patch("web", &PatchParams::default(), &Patch::Merge(&remove))
        .await
        .unwrap();
    let (code, _, _) = api_error(services.get("web").await);
    assert_eq!(code, 404);
    assert!(server.get("services", Some("default"), "web").is_err());
}

#[tokio::test]
async fn delete_preconditions_and_plain_delete() {
    let (_server, client) = start().await;
    let services: Api<Service> = Api::default_namespaced(client);
    services
        .create(&PostParams::default(), &service("web"))
        .await
        .unwrap();
    let wrong = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some("nope".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    let (code, _, message) = api_error(services.delete("web", &wrong).await);
    assert_eq!(code, 409);
    assert!(
        message.contains("Precondition failed: UID in precondition: nope"),
        "{message}"
    );
    let gone = services
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        gone.is_right(),
        "an immediate delete answers with a Success Status"
    );
    assert_eq!(
        api_error(services.delete("web", &DeleteParams::default()).await).0,
        404
    );
}

#[tokio::test]
async fn strategic_merge_patches_node_taints_and_addresses() {
    let (_server, client) = start().await;
    let nodes: Api<Node> = Api::all(client);
    let node: Node = serde_json::from_value(json!({
        "metadata": { "name": "n1" },
        "spec": { "taints": [
            { "key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule" },
            { "key": "dedicated", "value": "db", "effect": "NoSchedule" } ] },
        "status": { "addresses": [{ "type": "Hostname", "address": "n1" }] }
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();

    let taints = json!({ "spec": { "taints": [{ "key": "dedicated", "value": "db", "effect": "NoSchedule" }], "providerID": "cloudstack:///abc" } });
    let patched = nodes
        .patch("n1", &PatchParams::default(), &Patch::Strategic(&taints))
        .await
        .unwrap();
    let spec = patched.spec.unwrap();
    assert_eq!(
        spec.taints.unwrap().len(),
        1,
        "taints are an atomic list in the real API"
    );
    assert_eq!(spec.provider_id.as_deref(), Some("cloudstack:///abc"));

    let addresses = json!({ "status": { "addresses": [
        { "type": "InternalIP", "address": "10.1.1.5" }, { "type": "Hostname", "address": "n1" } ] } });
    let patched = nodes
        .patch_status("n1", &PatchParams::default(), &Patch::Strategic(&addresses))
        .await
        .unwrap();
    let got: Vec<(String, String)> = patched
        .status
        .unwrap()
        .addresses
        .unwrap()
        .into_iter()
        .map(|a| (a.type_, a.address))
        .collect();
    assert_eq!(
        got,
        vec![
            ("Hostname".into(), "n1".into()),
            ("InternalIP".into(), "10.1.1.5".into())
        ]
    );
}

#[tokio::test]
async fn label_and_field_selectors_filter_lists() {
    let (_server, client) = start().await;
    let services: Api<Service> = Api::default_namespaced(client.clone());
    for name in ["a", "b", "c"] {
        services
            .create(&PostParams::default(), &service(name))
            .await
            .unwrap();
    }
    let names = |list: kube::core::ObjectList<Service>| -> Vec<String> {
        list.items
            .into_iter()
            .map(|s| s.metadata.name.unwrap())
            .collect()
    };
    assert_eq!(
        names(
            services
                .list(&ListParams::default().labels("app in (a,c)"))
                .await
                .unwrap()
        ),
        ["a", "c"]
    );
    assert_eq!(
        names(
            services
                .list(&ListParams::default().labels("app!=a"))
                .await
                .unwrap()
        ),
        ["b", "c"]
    );
    assert_eq!(
        names(
            services
                .list(&ListParams::default().fields("metadata.name=b"))
                .await
                .unwrap()
        ),
        ["b"]
    );
    let all: Api<Service> = Api::all(client);
    let first = all.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(first.items.len(), 2);
    let token = first.metadata.continue_.clone().expect("a continue token");
    let rest = all
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(names(rest), ["c"]);
}

/// Secrets as the kube-apiserver serves them: namespaced, and selectable by `type`
/// (`SecretToSelectableFields`), which a controller watching only `kubernetes.io/tls`
/// Secrets uses; another field is refused.
#[tokio::test]
async fn secrets_are_served_and_selected_by_type() {
    let (_server, client) = start().await;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client, "default");
    // A tls Secret without its two keys is refused as ValidateSecret refuses it.
    let incomplete: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
        "metadata": { "name": "incomplete" },
        "type": "kubernetes.io/tls",
        "data": { "tls.crt": "dmFsdWU=" }
    }))
    .unwrap();
    let refused = secrets
        .create(&PostParams::default(), &incomplete)
        .await
        .expect_err("a tls Secret without tls.key");
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 422 && s.message.contains("data[tls.key]: Required value")),
        "{refused}"
    );
    for (name, kind) in [("tls", "kubernetes.io/tls"), ("plain", "Opaque")] {
        let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
            "metadata": { "name": name },
            "type": kind,
            "data": { "tls.crt": "dmFsdWU=", "tls.key": "dmFsdWU=" }
        }))
        .unwrap();
        secrets
            .create(&PostParams::default(), &secret)
            .await
            .unwrap();
    }
    let tls = secrets
        .list(&ListParams::default().fields("type=kubernetes.io/tls"))
        .await
        .unwrap();
    let names: Vec<_> = tls
        .items
        .iter()
        .filter_map(|s| s.metadata.name.clone())
        .collect();
    assert_eq!(names, ["tls"]);
    assert_eq!(
        secrets.get("plain").await.unwrap().data.unwrap()["tls.key"].0,
        b"value".to_vec()
    );
    let refused = secrets
        .list(&ListParams::default().fields("data.k=x"))
        .await;
    assert_eq!(api_error(refused).0, 400);
}
