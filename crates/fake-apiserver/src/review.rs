//! The review APIs: `TokenReview` (`authentication.k8s.io/v1`), `SubjectAccessReview`
//! and `SelfSubjectAccessReview` (`authorization.k8s.io/v1`), create-only and never
//! stored, as kube-apiserver serves them.
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
//!   `ValidateSubjectAccessReview` (`pkg/apis/authorization/validation`): exactly one of
//!   `spec.resourceAttributes` and `spec.nonResourceAttributes`, `spec.user` or
//!   `spec.groups`, and an empty `metadata` (422 `Invalid` otherwise); the decision is the
//!   server's authorizer for that user and those groups.
//! * `POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews` follows
//!   `pkg/registry/authorization/selfsubjectaccessreview/rest.go` and
//!   `ValidateSelfSubjectAccessReview`: the same attribute and metadata rules, and the
//!   decision is the authorizer's for the user who sent the request, as the access filter
//!   authenticated it (the body names no user). kubectl (`kubectl auth can-i`) sends it as
//!   Kubernetes protobuf, which is read too. Every authenticated user may create one: the
//!   bootstrap ClusterRole `system:basic-user` is bound to `system:authenticated`.
//!
//! Both access reviews are decided by one piece of code ([`access_status`]): RBAC when it
//! is on ([`rbac::authorize`], a denial's RBAC errors in `status.reason`; RBAC has no
//! opinion rather than denying, so `status.denied` is never set), everything allowed when
//! it is off (`AlwaysAllow`). All three are authorised like any request (`create` on the
//! resource), counted and open to fault injection as `tokenreviews.authentication.k8s.io`,
//! `subjectaccessreviews.authorization.k8s.io` and
//! `selfsubjectaccessreviews.authorization.k8s.io`, and listed by discovery with the verb
//! `create` ([`REVIEWS`]).
//!
//! Not modelled: `uid` and `extra` of the user (no authenticator here gives them and RBAC
//! does not read them), token audiences, the allow reason RBAC gives
//! (`RBAC: allowed by ClusterRoleBinding ...`), label and field selectors in
//! `resourceAttributes`, LocalSubjectAccessReview and SelfSubjectRulesReview.

use std::sync::Arc;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::auth::{TokenVerdict, UserInfo};
use crate::error::ApiError;
use crate::faults::Verb;
use crate::protobuf;
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

/// `selfsubjectaccessreviews.authorization.k8s.io` (create only, not stored).
pub static SELF_SUBJECT_ACCESS_REVIEWS: ResourceKind = ResourceKind {
    group: "authorization.k8s.io",
    version: "v1",
    plural: "selfsubjectaccessreviews",
    singular: "selfsubjectaccessreview",
    kind: "SelfSubjectAccessReview",
    namespaced: false,
    short_names: &[],
    has_status: false,
    create_on_update: false,
    extra_field_labels: &[],
};

/// The review resources, served create-only beside [`crate::resources::RESOURCES`].
pub static REVIEWS: [&ResourceKind; 3] = [
    &TOKEN_REVIEWS,
    &SUBJECT_ACCESS_REVIEWS,
    &SELF_SUBJECT_ACCESS_REVIEWS,
];

/// The only verb of the review resources (what discovery lists for them).
pub const REVIEW_VERBS: &[&str] = &["create"];

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

/// `POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews`, for the user the access
/// filter authenticated ([`crate::guard::guard`] puts it in the request's extensions).
pub async fn self_subject_access_review(
    State(shared): State<Arc<Shared>>,
    user: Option<Extension<UserInfo>>,
    body: Bytes,
) -> Response {
    review_own_access(&shared, user.map(|Extension(user)| user), &body)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

/// `metadata` must be empty but for `managedFields` (`ValidateSubjectAccessReview`,
/// `ValidateSelfSubjectAccessReview`).
fn metadata_errors(review: &Value) -> Vec<FieldError> {
    let named = review
        .get("metadata")
        .and_then(Value::as_object)
        .is_some_and(|meta| {
            meta.iter()
                .any(|(key, value)| key != "managedFields" && !value.is_null())
        });
    if named {
        vec![FieldError::invalid("metadata", "", "must be empty")]
    } else {
        Vec::new()
    }
}

/// `%#v` of a Go struct of string fields, as `field.ErrorBody` prints a non-nil pointer
/// to one (`authorization.NonResourceAttributes{Path:"/", Verb:"get"}`).
fn go_struct(name: &str, value: &Value, fields: &[(&str, &str)]) -> String {
    let printed: Vec<String> = fields
        .iter()
        .map(|(go, json)| {
            let text = value.get(*json).and_then(Value::as_str).unwrap_or("");
            format!("{go}:{}", quote(text))
        })
        .collect();
    format!("{name}{{{}}}", printed.join(", "))
}

/// Exactly one of `resourceAttributes` and `nonResourceAttributes`: the rule
/// `ValidateSubjectAccessReviewSpec` and `ValidateSelfSubjectAccessReviewSpec` share. The
/// bad value is the `nonResourceAttributes` pointer: its struct when set, `"null"` (the
/// string `ErrorBody` puts for a nil pointer, then quotes) when not.
fn attribute_errors(spec: &Value) -> Vec<FieldError> {
    let present = |field: &str| spec.get(field).is_some_and(|v| !v.is_null());
    match (
        present("resourceAttributes"),
        present("nonResourceAttributes"),
    ) {
        (true, true) => vec![FieldError::invalid(
            "spec.nonResourceAttributes",
            &go_struct(
                "authorization.NonResourceAttributes",
                &spec["nonResourceAttributes"],
                &[("Path", "path"), ("Verb", "verb")],
            ),
            "cannot be specified in combination with resourceAttributes",
        )],
        (false, false) => vec![FieldError::invalid(
            "spec.resourceAttributes",
            &quote("null"),
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )],
        _ => Vec::new(),
    }
}

/// The validation errors of a SubjectAccessReview (`ValidateSubjectAccessReview`: the
/// spec's, then the metadata's).
fn access_review_errors(review: &Value) -> Vec<FieldError> {
    let spec = review.get("spec").cloned().unwrap_or(Value::Null);
    let mut errors = attribute_errors(&spec);
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
    errors.extend(metadata_errors(review));
    errors
}

/// The validation errors of a SelfSubjectAccessReview (`ValidateSelfSubjectAccessReview`:
/// the spec's, then the metadata's; the spec names no user).
fn self_access_review_errors(review: &Value) -> Vec<FieldError> {
    let spec = review.get("spec").cloned().unwrap_or(Value::Null);
    let mut errors = attribute_errors(&spec);
    errors.extend(metadata_errors(review));
    errors
}

/// The attributes an access review's spec asks about (`ResourceAttributesFrom`,
/// `NonResourceAttributesFrom` in `pkg/registry/authorization/util`).
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

/// The `status` of an access review of `spec`'s attributes for `user`, as both
/// `subjectaccessreview/rest.go` and `selfsubjectaccessreview/rest.go` fill it from
/// `authorizer.Authorize`: `allowed` when the decision is Allow, `denied` when it is Deny
/// (never: RBAC and AlwaysAllow have no Deny), `reason` when there is one.
fn access_status(shared: &Shared, user: &UserInfo, spec: &Value) -> Value {
    let decision = if shared.rbac {
        rbac::authorize(&shared.store, user, &attributes(spec))
    } else {
        Decision::Allow
    };
    match decision {
        Decision::Allow => json!({ "allowed": true }),
        Decision::Deny(reason) if reason.is_empty() => json!({ "allowed": false }),
        Decision::Deny(reason) => json!({ "allowed": false, "reason": reason }),
    }
}

/// `SubjectAccessReviewREST.Create`.
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
    review["status"] = access_status(shared, &user, spec);
    Ok(created(review, &SUBJECT_ACCESS_REVIEWS))
}

/// `SelfSubjectAccessReviewREST.Create`: validated, then decided for the requesting user
/// (400 `no user present on request` if the request carries none).
async fn review_own_access(
    shared: &Shared,
    user: Option<UserInfo>,
    body: &Bytes,
) -> Result<Response, ApiError> {
    check_faults(shared, &SELF_SUBJECT_ACCESS_REVIEWS).await?;
    let mut review = match self_access_review_from_protobuf(body) {
        Some(review) => review,
        None => parse(body)?,
    };
    let errors = self_access_review_errors(&review);
    if !errors.is_empty() {
        return Err(ApiError::invalid(&SELF_SUBJECT_ACCESS_REVIEWS, "", &errors));
    }
    let user = user.ok_or_else(|| ApiError::bad_request("no user present on request"))?;
    review["status"] = access_status(shared, &user, &review["spec"]);
    Ok(created(review, &SELF_SUBJECT_ACCESS_REVIEWS))
}

/// A SelfSubjectAccessReview sent as Kubernetes protobuf (`kubectl auth can-i` does), as
/// JSON: `metadata` (field 1: its `name`, `generateName` and `namespace`, fields 1 to 3,
/// when set) and `spec` (field 2: `resourceAttributes`, field 1, and
/// `nonResourceAttributes`, field 2, each only when present) of
/// `staging/src/k8s.io/api/authorization/v1/generated.proto`. `None` for a body that is
/// not protobuf.
fn self_access_review_from_protobuf(body: &[u8]) -> Option<Value> {
    let raw = protobuf::unknown_raw(body)?;
    let strings = |buf: &[u8], names: &[&str]| -> Option<Value> {
        let mut object = serde_json::Map::new();
        for (number, name) in (1..).zip(names) {
            let text = protobuf::string(buf, number)?;
            if !text.is_empty() {
                object.insert((*name).to_string(), json!(text));
            }
        }
        Some(Value::Object(object))
    };
    let mut review = json!({ "spec": {} });
    if let Some(meta) = protobuf::message(raw, 1)? {
        let meta = strings(meta, &["name", "generateName", "namespace"])?;
        if meta.as_object().is_some_and(|m| !m.is_empty()) {
            review["metadata"] = meta;
        }
    }
    if let Some(spec) = protobuf::message(raw, 2)? {
        if let Some(resource) = protobuf::message(spec, 1)? {
            review["spec"]["resourceAttributes"] = strings(
                resource,
                &[
                    "namespace",
                    "verb",
                    "group",
                    "version",
                    "resource",
                    "subresource",
                    "name",
                ],
            )?;
        }
        if let Some(non_resource) = protobuf::message(spec, 2)? {
            review["spec"]["nonResourceAttributes"] = strings(non_resource, &["path", "verb"])?;
        }
    }
    Some(review)
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

    /// `ValidateSelfSubjectAccessReview`, with the values `field.ErrorBody` prints.
    #[test]
    fn self_access_reviews_need_exactly_one_kind_of_attributes_and_no_user() {
        let ok = json!({ "spec": { "resourceAttributes": { "verb": "get", "resource": "pods" } } });
        assert!(self_access_review_errors(&ok).is_empty());
        let messages = |review: Value| -> Vec<String> {
            self_access_review_errors(&review)
                .iter()
                .map(FieldError::message)
                .collect()
        };
        assert_eq!(
            messages(json!({ "spec": {} })),
            [
                "spec.resourceAttributes: Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified"
            ]
        );
        assert_eq!(
            messages(
                json!({ "spec": { "resourceAttributes": {}, "nonResourceAttributes": { "path": "/metrics", "verb": "get" } } })
            ),
            [
                "spec.nonResourceAttributes: Invalid value: authorization.NonResourceAttributes{Path:\"/metrics\", Verb:\"get\"}: cannot be specified in combination with resourceAttributes"
            ]
        );
        let named = json!({ "metadata": { "name": "x" }, "spec": {} });
        let fields: Vec<String> = self_access_review_errors(&named)
            .into_iter()
            .map(|e| e.field)
            .collect();
        assert_eq!(fields, ["spec.resourceAttributes", "metadata"]);
    }

    /// The body `kubectl auth can-i get /healthz` sends (captured from kubectl 1.32).
    #[test]
    fn a_protobuf_self_access_review_gives_its_spec() {
        let body = b"k8s\x00\n2\n\x17authorization.k8s.io/v1\x12\x17SelfSubjectAccessReview\x12/\n\x10\n\x00\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00\x12\x11\x12\x0f\n\x08/healthz\x12\x03get\x1a\x08\x08\x00\x12\x00\x1a\x00 \x00\x1a\x00\"\x00";
        assert_eq!(
            self_access_review_from_protobuf(body),
            Some(
                json!({ "spec": { "nonResourceAttributes": { "path": "/healthz", "verb": "get" } } })
            )
        );
        // spec { resourceAttributes { namespace: "default", verb: "list", resource: "pods" } }
        let resource = [
            &[0x0a, 7][..],
            b"default",
            &[0x12, 4],
            b"list",
            &[0x2a, 4],
            b"pods",
        ]
        .concat();
        let spec = [&[0x0a, resource.len() as u8][..], &resource].concat();
        let raw = [&[0x12, spec.len() as u8][..], &spec].concat();
        let body = [&b"k8s\0"[..], &[0x12, raw.len() as u8], &raw].concat();
        assert_eq!(
            self_access_review_from_protobuf(&body),
            Some(
                json!({ "spec": { "resourceAttributes": { "namespace": "default", "verb": "list", "resource": "pods" } } })
            )
        );
        assert_eq!(self_access_review_from_protobuf(b"{}"), None);
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
