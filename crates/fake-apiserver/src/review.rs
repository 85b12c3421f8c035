//! The review APIs a delegating server calls: `TokenReview` (`authentication.k8s.io/v1`)
//! and `SubjectAccessReview` (`authorization.k8s.io/v1`), create-only, as kube-apiserver
//! serves them.
//!
//! * `POST /apis/authentication.k8s.io/v1/tokenreviews` follows
//!   `pkg/registry/authentication/tokenreview/storage.go`: an empty `spec.token` is a 400
//!   `token is required for TokenReview in authentication`; otherwise the token is checked
//!   by the same authenticators as a request's bearer token ([`Tokens::review`]) and the
//!   object comes back, `201 Created`, with `status.authenticated` and, when it is,
//!   `status.user` (`username`, `groups`). A token no one issued, an expired one or one
//!   whose ServiceAccount is gone is `authenticated: false`.
//! * `POST /apis/authorization.k8s.io/v1/subjectaccessreviews` follows
//!   `pkg/registry/authorization/subjectaccessreview/rest.go` and
//!   `pkg/apis/authorization/validation`: `metadata` must be empty, exactly one of
//!   `spec.resourceAttributes` and `spec.nonResourceAttributes`, and `spec.user` or
//!   `spec.groups` (422 `Invalid` otherwise); the decision is the server's authorizer for
//!   that user and those groups: RBAC when it is on ([`rbac::authorize`], a denial's RBAC
//!   errors in `status.reason`), everything allowed when it is off (`AlwaysAllow`).
//!
//! Both are authorised like any request (`create` on the resource: the
//! `system:auth-delegator` ClusterRole grants it), counted and open to fault injection as
//! `tokenreviews.authentication.k8s.io` and `subjectaccessreviews.authorization.k8s.io`.
//! Not modelled: `uid` and `extra` of the user, token audiences, the allow reason RBAC
//! gives (`RBAC: allowed by ClusterRoleBinding ...`), discovery of the two resources.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::auth::{TokenVerdict, UserInfo};
use crate::error::ApiError;
use crate::faults::Verb;
use crate::rbac::{self, Decision};
use crate::request_info::RequestInfo;
use crate::resources::{self, ResourceKind};
use crate::shared::Shared;
use crate::validation::{FieldError, quote};

/// `tokenreviews.authentication.k8s.io` (create only, not stored).
pub static TOKEN_REVIEWS: ResourceKind = ResourceKind {
    group: "authentication.k8s.io",
    version: "v1",
    plural: "tokenreviews",
    singular: "tokenreview",
    kind: "TokenReview",
    namespaced: false,
    short_names: &[],
    has_status: false,
    create_on_update: false,
    extra_field_labels: &[],
};

/// `subjectaccessreviews.authorization.k8s.io` (create only, not stored).
pub static SUBJECT_ACCESS_REVIEWS: ResourceKind = ResourceKind {
    group: "authorization.k8s.io",
    version: "v1",
    plural: "subjectaccessreviews",
    singular: "subjectaccessreview",
    kind: "SubjectAccessReview",
    namespaced: false,
    short_names: &[],
    has_status: false,
    create_on_update: false,
    extra_field_labels: &[],
};

/// The request body as JSON.
fn parse(body: &Bytes) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))
}

/// Counts the request and applies an injected fault.
async fn check_faults(shared: &Shared, kind: &ResourceKind) -> Result<(), ApiError> {
    let verdict = shared.faults.check(Verb::Create, &kind.qualified_plural());
    if !verdict.latency.is_zero() {
        tokio::time::sleep(verdict.latency).await;
    }
    verdict.error.map_or(Ok(()), Err)
}

/// `POST /apis/authentication.k8s.io/v1/tokenreviews`.
pub async fn token_review(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    review_token(&shared, &body)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

async fn review_token(shared: &Shared, body: &Bytes) -> Result<Response, ApiError> {
    check_faults(shared, &TOKEN_REVIEWS).await?;
    let mut review = parse(body)?;
    let token = review
        .pointer("/spec/token")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if token.is_empty() {
        return Err(ApiError::bad_request(
            "token is required for TokenReview in authentication",
        ));
    }
    let accounts = resources::find("", "v1", "serviceaccounts").expect("served");
    let verdict = shared
        .access
        .tokens
        .review(&token, |ns, name| shared.store.get(accounts, ns, name).ok());
    review["status"] = match verdict {
        TokenVerdict::Valid(user) => json!({
            "authenticated": true,
            "user": { "username": user.name, "groups": user.groups },
        }),
        TokenVerdict::Unknown | TokenVerdict::Invalid => json!({ "user": {} }),
    };
    Ok(created(review, &TOKEN_REVIEWS))
}

/// `POST /apis/authorization.k8s.io/v1/subjectaccessreviews`.
pub async fn subject_access_review(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    review_access(&shared, &body)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

/// The validation errors of a SubjectAccessReview (`ValidateSubjectAccessReview`).
fn access_review_errors(review: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if review
        .get("metadata")
        .and_then(Value::as_object)
        .is_some_and(|meta| {
            meta.iter()
                .any(|(key, value)| key != "managedFields" && !value.is_null())
        })
    {
        errors.push(FieldError::invalid("metadata", "", "must be empty"));
    }
    let spec = review.get("spec").cloned().unwrap_or(Value::Null);
    let present = |field: &str| spec.get(field).is_some_and(|v| !v.is_null());
    match (
        present("resourceAttributes"),
        present("nonResourceAttributes"),
    ) {
        (true, true) => errors.push(FieldError::invalid(
            "spec.nonResourceAttributes",
            "",
            "cannot be specified in combination with resourceAttributes",
        )),
        (false, false) => errors.push(FieldError::invalid(
            "spec.resourceAttributes",
            "null",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
        _ => {}
    }
    let user = spec.get("user").and_then(Value::as_str).unwrap_or("");
    let has_groups = spec
        .get("groups")
        .and_then(Value::as_array)
        .is_some_and(|groups| !groups.is_empty());
    if user.is_empty() && !has_groups {
        errors.push(FieldError::invalid(
            "spec.user",
            &quote(user),
            "at least one of user or group must be specified",
        ));
    }
    errors
}

/// The attributes a SubjectAccessReview's spec asks about.
fn attributes(spec: &Value) -> RequestInfo {
    let text = |value: Option<&Value>| value.and_then(Value::as_str).unwrap_or("").to_string();
    match spec.get("nonResourceAttributes").filter(|v| !v.is_null()) {
        Some(attributes) => RequestInfo {
            is_resource_request: false,
            path: text(attributes.get("path")),
            verb: text(attributes.get("verb")),
            ..RequestInfo::default()
        },
        None => {
            let attributes = &spec["resourceAttributes"];
            RequestInfo {
                is_resource_request: true,
                verb: text(attributes.get("verb")),
                api_group: text(attributes.get("group")),
                namespace: text(attributes.get("namespace")),
                resource: text(attributes.get("resource")),
                subresource: text(attributes.get("subresource")),
                name: text(attributes.get("name")),
                ..RequestInfo::default()
            }
        }
    }
}

async fn review_access(shared: &Shared, body: &Bytes) -> Result<Response, ApiError> {
    check_faults(shared, &SUBJECT_ACCESS_REVIEWS).await?;
    let mut review = parse(body)?;
    let errors = access_review_errors(&review);
    if !errors.is_empty() {
        return Err(ApiError::invalid(&SUBJECT_ACCESS_REVIEWS, "", &errors));
    }
    let spec = &review["spec"];
    let user = UserInfo {
        name: spec
            .get("user")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        groups: spec
            .get("groups")
            .and_then(Value::as_array)
            .map(|groups| {
                groups
                    .iter()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default(),
    };
    let decision = if shared.rbac {
        rbac::authorize(&shared.store, &user, &attributes(spec))
    } else {
        Decision::Allow
    };
    review["status"] = match decision {
        Decision::Allow => json!({ "allowed": true }),
        Decision::Deny(reason) if reason.is_empty() => json!({ "allowed": false }),
        Decision::Deny(reason) => json!({ "allowed": false, "reason": reason }),
    };
    Ok(created(review, &SUBJECT_ACCESS_REVIEWS))
}

/// The review as the server answers it: kind and apiVersion set, empty metadata, 201.
fn created(mut review: Value, kind: &ResourceKind) -> Response {
    review["kind"] = json!(kind.kind);
    review["apiVersion"] = json!(kind.api_version());
    review["metadata"] = json!({ "creationTimestamp": null });
    (StatusCode::CREATED, axum::Json(review)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_reviews_are_validated_as_validate_subject_access_review_does() {
        let ok = json!({ "spec": { "user": "u", "nonResourceAttributes": { "path": "/metrics", "verb": "get" } } });
        assert!(access_review_errors(&ok).is_empty());
        let groups_only = json!({ "spec": { "groups": ["g"], "resourceAttributes": { "verb": "get", "resource": "nodes" } } });
        assert!(access_review_errors(&groups_only).is_empty());
        let neither = json!({ "spec": { "user": "u" } });
        assert_eq!(
            access_review_errors(&neither)[0].field,
            "spec.resourceAttributes"
        );
        let both = json!({ "spec": { "user": "u", "resourceAttributes": {}, "nonResourceAttributes": {} } });
        assert_eq!(
            access_review_errors(&both)[0].field,
            "spec.nonResourceAttributes"
        );
        let nobody = json!({ "spec": { "nonResourceAttributes": { "path": "/", "verb": "get" } } });
        assert_eq!(access_review_errors(&nobody)[0].field, "spec.user");
        let named = json!({ "metadata": { "name": "x" }, "spec": { "user": "u", "nonResourceAttributes": {} } });
        assert_eq!(access_review_errors(&named)[0].field, "metadata");
    }

    #[test]
    fn attributes_come_from_the_spec() {
        let info =
            attributes(&json!({ "nonResourceAttributes": { "path": "/metrics", "verb": "get" } }));
        assert!(!info.is_resource_request);
        assert_eq!((&*info.path, &*info.verb), ("/metrics", "get"));
        let info = attributes(
            &json!({ "resourceAttributes": { "verb": "patch", "resource": "services", "subresource": "status", "namespace": "default", "name": "web" } }),
        );
        assert!(info.is_resource_request);
        assert_eq!(
            (
                &*info.verb,
                &*info.resource,
                &*info.subresource,
                &*info.namespace,
                &*info.name
            ),
            ("patch", "services", "status", "default", "web")
        );
    }
}
