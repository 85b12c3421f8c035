//! Discovery documents: `/version`, `/api`, `/api/v1`, `/apis`, `/apis/{group}` and
//! `/apis/{group}/{version}`, so kubectl and kube clients can find the served resources:
//! the stored ones of [`RESOURCES`] with every verb, and the create-only reviews of
//! [`review::REVIEWS`] with `create` alone (their groups listed after the others).

use axum::Json;
use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::resources::{RESOURCES, ResourceKind, VERBS};
use crate::review::{self, REVIEW_VERBS};

/// Every served resource with its verbs.
fn served() -> impl Iterator<Item = (&'static ResourceKind, &'static [&'static str])> {
    RESOURCES
        .iter()
        .map(|r| (r, VERBS))
        .chain(review::REVIEWS.iter().map(|r| (*r, REVIEW_VERBS)))
}

/// The distinct API groups (excluding core), in table order.
fn groups() -> Vec<&'static str> {
    let mut groups: Vec<&'static str> = Vec::new();
    for (r, _) in served() {
        if !r.group.is_empty() && !groups.contains(&r.group) {
            groups.push(r.group);
        }
    }
    groups
}

/// `/version`.
pub async fn version() -> Json<Value> {
    Json(json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-04-23T00:00:00Z",
        "goVersion": "go1.24.2",
        "compiler": "gc",
        "platform": "linux/amd64"
    }))
}

/// `/api`.
pub async fn core_versions() -> Json<Value> {
    Json(json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{ "clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1" }]
    }))
}

fn group_document(group: &str) -> Value {
    let version = served()
        .find(|(r, _)| r.group == group)
        .map(|(r, _)| r.version)
        .unwrap_or("v1");
    let group_version = json!({ "groupVersion": format!("{group}/{version}"), "version": version });
    json!({
        "name": group,
        "versions": [group_version.clone()],
        "preferredVersion": group_version
    })
}

/// `/apis`.
pub async fn group_list() -> Json<Value> {
    let groups: Vec<Value> = groups().into_iter().map(group_document).collect();
    Json(json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups }))
}

/// `/apis/{group}`.
pub async fn group(Path(group): Path<String>) -> Response {
    if !groups().contains(&group.as_str()) {
        return ApiError::path_not_found().into_response();
    }
    let mut document = group_document(&group);
    document["kind"] = json!("APIGroup");
    document["apiVersion"] = json!("v1");
    Json(document).into_response()
}

fn resource_list(group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for (r, verbs) in served().filter(|(r, _)| r.group == group && r.version == version) {
        resources.push(json!({
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": verbs,
            "shortNames": r.short_names,
        }));
        if r.kind == "ServiceAccount" {
            resources.push(json!({
                "name": format!("{}/token", r.plural),
                "singularName": "",
                "namespaced": true,
                "group": "authentication.k8s.io",
                "version": "v1",
                "kind": "TokenRequest",
                "verbs": ["create"],
            }));
        }
        if r.has_status {
            resources.push(json!({
                "name": format!("{}/status", r.plural),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    if resources.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources
    }))
}

/// `/api/v1`.
pub async fn core_resources() -> Response {
    resource_list("", "v1").map_or_else(
        || ApiError::path_not_found().into_response(),
        |list| Json(list).into_response(),
    )
}

/// `/apis/{group}/{version}`.
pub async fn group_resources(Path((group, version)): Path<(String, String)>) -> Response {
    resource_list(&group, &version).map_or_else(
        || ApiError::path_not_found().into_response(),
        |list| Json(list).into_response(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_list_has_status_subresources_and_short_names() {
        let list = resource_list("", "v1").unwrap();
        let names: Vec<&str> = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"nodes/status"));
        assert!(names.contains(&"services/status"));
        let svc = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "services")
            .unwrap();
        assert_eq!(svc["shortNames"], json!(["svc"]));
        assert!(resource_list("apps", "v1").is_none());
    }

    #[test]
    fn reviews_are_listed_create_only() {
        let list = resource_list("authorization.k8s.io", "v1").unwrap();
        let ssar = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "selfsubjectaccessreviews")
            .unwrap();
        assert_eq!(ssar["kind"], "SelfSubjectAccessReview");
        assert_eq!(ssar["verbs"], json!(["create"]));
        assert_eq!(ssar["namespaced"], false);
        assert!(groups().contains(&"authentication.k8s.io"));
    }
}
