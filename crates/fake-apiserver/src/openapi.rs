//! A minimal OpenAPI v3 surface: the `/openapi/v3` root and one document per group
//! version declaring, for each resource, the PATCH operation with its
//! `x-kubernetes-group-version-kind` and the `fieldValidation` query parameter. That is
//! what kubectl checks before choosing server-side field validation; without it kubectl
//! falls back to downloading full client-side schemas. `/openapi/v2` stays 404.

use axum::Json;
use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::resources::RESOURCES;

fn group_version_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`: the index of group-version documents.
pub async fn root() -> Json<Value> {
    let mut paths = Map::new();
    for r in RESOURCES {
        let path = group_version_path(r.group, r.version);
        let url = format!("/openapi/v3/{path}?hash=1");
        paths.insert(path, json!({ "serverRelativeURL": url }));
    }
    Json(json!({ "paths": paths }))
}

fn document(group: &str, version: &str) -> Option<Value> {
    let mut paths = Map::new();
    let prefix = group_version_path(group, version);
    let string_param = |name: &str, location: &str| json!({ "name": name, "in": location, "required": location == "path", "schema": { "type": "string" } });
    for r in RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version)
    {
        let gvk = json!({ "group": r.group, "version": r.version, "kind": r.kind });
        let item = if r.namespaced {
            format!("/{prefix}/namespaces/{{namespace}}/{}/{{name}}", r.plural)
        } else {
            format!("/{prefix}/{}/{{name}}", r.plural)
        };
        let mut parameters = vec![string_param("name", "path")];
        if r.namespaced {
            parameters.push(string_param("namespace", "path"));
        }
        paths.insert(
            item,
            json!({
                "parameters": parameters,
                "patch": {
                    "parameters": [string_param("fieldValidation", "query")],
                    "operationId": format!("patch{}", r.kind),
                    "x-kubernetes-action": "patch",
                    "x-kubernetes-group-version-kind": gvk,
                    "responses": { "200": { "description": "OK" } }
                }
            }),
        );
    }
    if paths.is_empty() {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": { "title": "Kubernetes", "version": "v1.33.0" },
        "paths": paths,
        "components": {}
    }))
}

/// `/openapi/v3/api/{version}`.
pub async fn core_document(Path(version): Path<String>) -> Response {
    document("", &version).map_or_else(
        || ApiError::path_not_found().into_response(),
        |d| Json(d).into_response(),
    )
}

/// `/openapi/v3/apis/{group}/{version}`.
pub async fn group_document(Path((group, version)): Path<(String, String)>) -> Response {
    document(&group, &version).map_or_else(
        || ApiError::path_not_found().into_response(),
        |d| Json(d).into_response(),
    )
}
