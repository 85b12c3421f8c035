//! HTTP routing: discovery endpoints and the resource handler that maps
//! `/api/v1/...` and `/apis/{group}/{version}/...` paths to store operations.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::auth::{self, DEFAULT_TOKEN_LIFETIME};
use crate::discovery;
use crate::error::ApiError;
use crate::faults::Verb;
use crate::guard::guard;
use crate::openapi;
use crate::params;
use crate::patch::PatchType;
use crate::resources::{self, ResourceKind};
use crate::review;
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::{DeleteOutcome, Selection, WatchStart, to_storage};
use crate::table;
use crate::watch::{self, WatchRequest};

pub use crate::shared::Shared;

/// The full router.
pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/version", get(discovery::version))
        .route("/api", get(discovery::core_versions))
        .route("/api/v1", get(discovery::core_resources))
        .route("/apis", get(discovery::group_list))
        .route("/apis/{group}", get(discovery::group))
        .route("/apis/{group}/{version}", get(discovery::group_resources))
        .route("/openapi/v3", get(openapi::root))
        .route("/openapi/v3/api/{version}", get(openapi::core_document))
        .route(
            "/openapi/v3/apis/{group}/{version}",
            get(openapi::group_document),
        )
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(|| async { "ok" }))
        .route("/livez", get(|| async { "ok" }))
        .route(
            "/apis/authentication.k8s.io/v1/tokenreviews",
            post(review::token_review),
        )
        .route(
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            post(review::subject_access_review),
        )
        .route(
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            post(review::self_subject_access_review),
        )
        .fallback(resource_handler)
        .layer(axum::middleware::from_fn_with_state(shared.clone(), guard))
        .with_state(shared)
}

/// The object a request addresses.
#[derive(Debug)]
struct Target {
    kind: &'static ResourceKind,
    namespace: Option<String>,
    name: Option<String>,
    status: bool,
    /// The ServiceAccount `token` subresource (TokenRequest).
    token: bool,
}

impl Target {
    /// Counter and fault name: `services`, `nodes/status`, `events.events.k8s.io`.
    fn resource_name(&self) -> String {
        let base = self.kind.qualified_plural();
        if self.status {
            format!("{base}/status")
        } else if self.token {
            format!("{base}/token")
        } else {
            base
        }
    }
}

fn parse_target(path: &str) -> Result<Target, ApiError> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segments.as_slice() {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Err(ApiError::path_not_found()),
    };
    let find =
        |plural: &str| resources::find(group, version, plural).ok_or_else(ApiError::path_not_found);
    let namespaced_plural =
        |plural: &str| resources::find(group, version, plural).filter(|k| k.namespaced);
    let target = |kind: &'static ResourceKind,
                  namespace: Option<&str>,
                  name: Option<&str>,
                  sub: Option<&str>|
     -> Result<Target, ApiError> {
        let (status, token) = match sub {
            None => (false, false),
            Some("status") if kind.has_status => (true, false),
            Some("token") if kind.kind == "ServiceAccount" => (false, true),
            Some(_) => return Err(ApiError::path_not_found()),
        };
        Ok(Target {
            kind,
            namespace: namespace.map(String::from),
            name: name.map(String::from),
            status,
            token,
        })
    };
    match rest {
        ["namespaces", ns, plural, tail @ ..] if namespaced_plural(plural).is_some() => {
            let kind = find(plural)?;
            match tail {
                [] => target(kind, Some(ns), None, None),
                [name] => target(kind, Some(ns), Some(name), None),
                [name, sub] => target(kind, Some(ns), Some(name), Some(sub)),
                _ => Err(ApiError::path_not_found()),
            }
        }
        [plural] => target(find(plural)?, None, None, None),
        [plural, name] => {
            let kind = find(plural)?;
            if kind.namespaced {
                return Err(ApiError::path_not_found());
            }
            target(kind, None, Some(name), None)
        }
        [plural, name, sub] => {
            let kind = find(plural)?;
            if kind.namespaced {
                return Err(ApiError::path_not_found());
            }
            target(kind, None, Some(name), Some(sub))
        }
        _ => Err(ApiError::path_not_found()),
    }
}

fn verb_of(
    method: &Method,
    target: &Target,
    query: &HashMap<String, String>,
) -> Result<Verb, ApiError> {
    let verb = match (method.as_str(), target.name.is_some()) {
        ("GET", true) => Verb::Get,
        ("GET", false) if params::flag(query, "watch") => Verb::Watch,
        ("GET", false) => Verb::List,
        ("POST", false) => Verb::Create,
        ("POST", true) if target.token => Verb::Create,
        ("DELETE", false) => Verb::DeleteCollection,
        ("PUT", true) => Verb::Update,
        ("PATCH", true) => Verb::Patch,
        ("DELETE", true) => Verb::Delete,
        (other, _) => {
            return Err(ApiError::method_not_allowed(
                &other.to_lowercase(),
                target.kind,
            ));
        }
    };
    if target.status && !matches!(verb, Verb::Get | Verb::Update | Verb::Patch) {
        return Err(ApiError::method_not_allowed(&verb.to_string(), target.kind));
    }
    if target.token && verb != Verb::Create {
        return Err(ApiError::method_not_allowed(&verb.to_string(), target.kind));
    }
    Ok(verb)
}

fn parse_body(body: &Bytes) -> Result<Value, ApiError> {
    if body.is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))
}

fn selection(target: &Target, query: &HashMap<String, String>) -> Result<Selection, ApiError> {
    Ok(Selection {
        kind: target.kind,
        namespace: target.namespace.clone(),
        labels: LabelSelector::parse(query.get("labelSelector").map_or("", String::as_str))?,
        fields: FieldSelector::parse(
            query.get("fieldSelector").map_or("", String::as_str),
            target.kind,
        )?,
    })
}

/// The `Accept` header asks for a `meta.k8s.io/v1` Table (what `kubectl get` sends).
fn wants_table(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(table::wants_table)
}

/// `objects` (as served at `target`) as a Table; Events are printed from their core form.
fn table_response(
    target: &Target,
    objects: Vec<Value>,
    metadata: Value,
    query: &HashMap<String, String>,
) -> Response {
    let objects: Vec<Value> = objects
        .into_iter()
        .map(|object| to_storage(target.kind, object))
        .collect();
    let include = query.get("includeObject").map(String::as_str);
    axum::Json(table::table(target.kind, &objects, metadata, include)).into_response()
}

fn list_response(
    target: &Target,
    shared: &Shared,
    query: &HashMap<String, String>,
    as_table: bool,
) -> Result<Response, ApiError> {
    let limit = match query.get("limit") {
        Some(l) => Some(
            l.parse::<usize>()
                .map_err(|_| ApiError::bad_request(format!("invalid limit: {l:?}")))?,
        ),
        None => None,
    };
    let page = shared.store.list(
        &selection(target, query)?,
        limit,
        query
            .get("continue")
            .map(String::as_str)
            .filter(|c| !c.is_empty()),
    )?;
    let mut metadata = json!({ "resourceVersion": page.resource_version.to_string() });
    if let Some(token) = page.continue_token {
        metadata["continue"] = json!(token);
    }
    if as_table {
        return Ok(table_response(target, page.items, metadata, query));
    }
    let body = json!({
        "kind": format!("{}List", target.kind.kind),
        "apiVersion": target.kind.api_version(),
        "metadata": metadata,
        "items": page.items,
    });
    Ok(axum::Json(body).into_response())
}

fn watch_response(
    target: &Target,
    shared: &Shared,
    query: &HashMap<String, String>,
    as_table: bool,
) -> Result<Response, ApiError> {
    let send_initial_events = params::flag(query, "sendInitialEvents");
    let start = match query.get("resourceVersion").map(String::as_str) {
        _ if send_initial_events => WatchStart::CurrentState,
        None | Some("" | "0") => WatchStart::CurrentState,
        Some(rv) => WatchStart::After(
            rv.parse()
                .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion: {rv:?}")))?,
        ),
    };
    let timeout = match query.get("timeoutSeconds") {
        Some(t) => t
            .parse::<u64>()
            .map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds: {t:?}")))?,
        None => 1800,
    };
    Ok(watch::serve(
        &shared.store,
        WatchRequest {
            selection: selection(target, query)?,
            start,
            bookmarks: params::flag(query, "allowWatchBookmarks"),
            send_initial_events,
            timeout: Duration::from_secs(timeout),
            bookmark_interval: shared.bookmark_interval,
            table: as_table.then(|| query.get("includeObject").cloned()),
        },
    ))
}

fn delete_response(target: &Target, outcome: DeleteOutcome) -> Response {
    match outcome {
        DeleteOutcome::Pending(object) => axum::Json(object).into_response(),
        DeleteOutcome::Deleted(object) => {
            let mut details = json!({
                "name": object["metadata"]["name"],
                "kind": target.kind.plural,
                "uid": object["metadata"]["uid"],
            });
            if !target.kind.group.is_empty() {
                details["group"] = json!(target.kind.group);
            }
            axum::Json(json!({
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": details,
            }))
            .into_response()
        }
    }
}

/// `POST .../serviceaccounts/{name}/token` (TokenRequest, `pkg/registry/core/serviceaccount/
/// storage/token.go`): a token for an existing ServiceAccount, valid for
/// `spec.expirationSeconds` (at least 10 minutes, default one hour).
fn token_request(
    shared: &Shared,
    namespace: &str,
    name: &str,
    body: &Bytes,
) -> Result<Response, ApiError> {
    let accounts = resources::find("", "v1", "serviceaccounts").expect("served");
    let account = shared.store.get(accounts, namespace, name)?;
    let request = match auth::token_request_from_protobuf(body) {
        Some(request) => request,
        None => parse_body(body)?,
    };
    let lifetime = match request.pointer("/spec/expirationSeconds") {
        None | Some(Value::Null) => DEFAULT_TOKEN_LIFETIME,
        Some(value) => {
            let seconds = value.as_u64().unwrap_or(0);
            if seconds < 600 {
                return Err(ApiError {
                    code: 422,
                    reason: "Invalid",
                    message: format!(
                        "TokenRequest.authentication.k8s.io \"{name}\" is invalid: spec.expirationSeconds: Invalid value: {value}: may not specify a duration less than 10 minutes"
                    ),
                    details: None,
                });
            }
            Duration::from_secs(seconds)
        }
    };
    let (token, expires) = shared.access.tokens.issue(&account, lifetime);
    let answer = auth::token_request_response(&account, &request, &token, expires, lifetime);
    Ok((StatusCode::CREATED, axum::Json(answer)).into_response())
}

/// `DELETE` on a collection: deletes every selected object and answers the list of them.
fn delete_collection(
    target: &Target,
    shared: &Shared,
    query: &HashMap<String, String>,
    body: &Bytes,
) -> Result<Response, ApiError> {
    let options = parse_body(body)?;
    let page = shared.store.list(&selection(target, query)?, None, None)?;
    let mut deleted = Vec::new();
    for object in page.items {
        let ns = object["metadata"]["namespace"].as_str().map(String::from);
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or("")
            .to_string();
        match shared
            .store
            .delete(target.kind, ns.as_deref(), &name, &options)
        {
            Ok(DeleteOutcome::Deleted(o) | DeleteOutcome::Pending(o)) => deleted.push(o),
            Err(error) if error.code == 404 => {}
            Err(error) => return Err(error),
        }
    }
    Ok(axum::Json(json!({
        "kind": format!("{}List", target.kind.kind),
        "apiVersion": target.kind.api_version(),
        "metadata": { "resourceVersion": shared.store.resource_version().to_string() },
        "items": deleted,
    }))
    .into_response())
}

async fn serve(
    shared: &Shared,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    query: &HashMap<String, String>,
    body: &Bytes,
) -> Result<Response, ApiError> {
    let target = parse_target(uri.path())?;
    let verb = verb_of(method, &target, query)?;
    let verdict = shared.faults.check(verb, &target.resource_name());
    if !verdict.latency.is_zero() {
        tokio::time::sleep(verdict.latency).await;
    }
    if let Some(error) = verdict.error {
        return Err(error);
    }
    let ns = target.namespace.as_deref();
    let name = target.name.as_deref().unwrap_or("");
    let store = &shared.store;
    match verb {
        Verb::Get => {
            let object = store.get(target.kind, ns.unwrap_or(""), name)?;
            if wants_table(headers) {
                let metadata = json!({ "resourceVersion": object["metadata"]["resourceVersion"] });
                return Ok(table_response(&target, vec![object], metadata, query));
            }
            Ok(axum::Json(object).into_response())
        }
        Verb::List => list_response(&target, shared, query, wants_table(headers)),
        Verb::Watch => watch_response(&target, shared, query, wants_table(headers)),
        Verb::Create if target.token => token_request(shared, ns.unwrap_or(""), name, body),
        Verb::Create => {
            let created = store.create(target.kind, ns, parse_body(body)?)?;
            Ok((StatusCode::CREATED, axum::Json(created)).into_response())
        }
        Verb::DeleteCollection => delete_collection(&target, shared, query, body),
        Verb::Update => {
            let updated = store.replace(target.kind, ns, name, parse_body(body)?, target.status)?;
            Ok(axum::Json(updated).into_response())
        }
        Verb::Patch => {
            let content_type = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            let patch_type = PatchType::from_content_type(content_type)?;
            let patched = store.patch(target.kind, ns, name, patch_type, body, target.status)?;
            Ok(axum::Json(patched).into_response())
        }
        Verb::Delete => {
            let outcome = store.delete(target.kind, ns, name, &parse_body(body)?)?;
            Ok(delete_response(&target, outcome))
        }
    }
}

async fn resource_handler(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
    body: Bytes,
) -> Response {
    let response = serve(&shared, &method, &uri, &headers, &query, &body).await;
    let response = response.unwrap_or_else(IntoResponse::into_response);
    tracing::debug!(%method, %uri, status = %response.status(), "request");
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_map_to_targets() {
        let t = parse_target("/api/v1/namespaces/default/services/web/status").unwrap();
        assert_eq!(
            (
                t.kind.plural,
                t.namespace.as_deref(),
                t.name.as_deref(),
                t.status
            ),
            ("services", Some("default"), Some("web"), true)
        );
        let t = parse_target("/api/v1/namespaces/kube-system").unwrap();
        assert_eq!(
            (t.kind.plural, t.name.as_deref()),
            ("namespaces", Some("kube-system"))
        );
        let t = parse_target("/api/v1/namespaces/foo/status").unwrap();
        assert!(t.status && t.kind.plural == "namespaces");
        let t = parse_target("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases").unwrap();
        assert_eq!((t.kind.kind, t.name), ("Lease", None));
        let t = parse_target("/api/v1/services").unwrap();
        assert!(t.namespace.is_none() && t.name.is_none());
        assert_eq!(
            parse_target("/api/v1/nodes/n1/proxy").unwrap_err().code,
            404
        );
        assert_eq!(
            parse_target("/apis/apps/v1/deployments").unwrap_err().code,
            404
        );
        assert_eq!(parse_target("/api/v1/services/web").unwrap_err().code, 404);
    }
}
