//! Errors: the `metav1.Status` failures the API server answers with, and the library's own
//! start-up errors.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::resources::ResourceKind;
use crate::validation::FieldError;

/// A failed API request, rendered as a `metav1.Status` body exactly like kube-apiserver.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    /// HTTP status code (also `Status.code`).
    pub code: u16,
    /// Machine-readable reason (`NotFound`, `AlreadyExists`, `Conflict`, ...).
    pub reason: &'static str,
    /// Human-readable message.
    pub message: String,
    /// `Status.details`, when the real server fills it.
    pub details: Option<Value>,
}

impl ApiError {
    fn with_details(
        code: u16,
        reason: &'static str,
        message: String,
        kind: &ResourceKind,
        name: &str,
    ) -> Self {
        let mut details = json!({ "name": name, "kind": kind.plural });
        if !kind.group.is_empty() {
            details["group"] = json!(kind.group);
        }
        Self {
            code,
            reason,
            message,
            details: Some(details),
        }
    }

    /// 404 `nodes "x" not found`.
    pub fn not_found(kind: &ResourceKind, name: &str) -> Self {
        let message = format!("{} \"{name}\" not found", kind.qualified_plural());
        Self::with_details(404, "NotFound", message, kind, name)
    }

    /// 409 `services "x" already exists`.
    pub fn already_exists(kind: &ResourceKind, name: &str) -> Self {
        let message = format!("{} \"{name}\" already exists", kind.qualified_plural());
        Self::with_details(409, "AlreadyExists", message, kind, name)
    }

    /// 409 Conflict with the real server's optimistic-concurrency message.
    pub fn conflict(kind: &ResourceKind, name: &str, cause: &str) -> Self {
        let message = format!(
            "Operation cannot be fulfilled on {} \"{name}\": {cause}",
            kind.qualified_plural()
        );
        Self::with_details(409, "Conflict", message, kind, name)
    }

    /// 409 Conflict for a stale `resourceVersion`.
    pub fn stale(kind: &ResourceKind, name: &str) -> Self {
        Self::conflict(
            kind,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 Invalid as `apierrors.NewInvalid` builds it: `Kind[.group] "name" is invalid: `
    /// and the one error, or all of them as `[a, b]` (repeated messages once), with one
    /// Status cause per error.
    pub fn invalid(kind: &ResourceKind, name: &str, errors: &[FieldError]) -> Self {
        let qualified_kind = if kind.group.is_empty() {
            kind.kind.to_string()
        } else {
            format!("{}.{}", kind.kind, kind.group)
        };
        let mut messages: Vec<String> = Vec::new();
        for message in errors.iter().map(FieldError::message) {
            if !messages.contains(&message) {
                messages.push(message);
            }
        }
        let message = match messages.as_slice() {
            [] => format!("{qualified_kind} \"{name}\" is invalid"),
            [one] => format!("{qualified_kind} \"{name}\" is invalid: {one}"),
            many => format!(
                "{qualified_kind} \"{name}\" is invalid: [{}]",
                many.join(", ")
            ),
        };
        let causes: Vec<Value> = errors
            .iter()
            .map(|e| json!({ "reason": e.error_type.cause(), "message": e.body, "field": e.field }))
            .collect();
        let mut details = json!({ "name": name, "kind": kind.kind, "causes": causes });
        if !kind.group.is_empty() {
            details["group"] = json!(kind.group);
        }
        Self {
            code: 422,
            reason: "Invalid",
            message,
            details: Some(details),
        }
    }

    /// 401 for a bearer token the server does not know (`apierrors.NewUnauthorized`).
    pub fn unauthorized() -> Self {
        Self {
            code: 401,
            reason: "Unauthorized",
            message: "Unauthorized".into(),
            details: None,
        }
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self {
            code: 400,
            reason: "BadRequest",
            message: message.into(),
            details: None,
        }
    }

    /// 410 Gone for a watch or list from a compacted `resourceVersion`.
    pub fn expired(requested: u64, oldest: u64) -> Self {
        Self {
            code: 410,
            reason: "Expired",
            message: format!("too old resource version: {requested} ({oldest})"),
            details: None,
        }
    }

    /// 404 for a path no resource is served at.
    pub fn path_not_found() -> Self {
        Self {
            code: 404,
            reason: "NotFound",
            message: "the server could not find the requested resource".into(),
            details: None,
        }
    }

    /// 405 for a verb a resource does not support.
    pub fn method_not_allowed(verb: &str, kind: &ResourceKind) -> Self {
        Self {
            code: 405,
            reason: "MethodNotAllowed",
            message: format!(
                "the server does not allow this method on the requested resource ({verb} {})",
                kind.plural
            ),
            details: None,
        }
    }

    /// 415 for an unsupported patch content type.
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self {
            code: 415,
            reason: "UnsupportedMediaType",
            message: format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got {content_type:?})"
            ),
            details: None,
        }
    }

    /// An injected failure with the given status code.
    pub fn injected(code: u16) -> Self {
        let (reason, message) = match code {
            409 => ("Conflict", "injected conflict"),
            429 => (
                "TooManyRequests",
                "injected throttling, please try again later",
            ),
            500 => ("InternalError", "injected internal error"),
            503 => ("ServiceUnavailable", "injected unavailability"),
            _ => ("Unknown", "injected failure"),
        };
        let mut err = Self {
            code,
            reason,
            message: message.into(),
            details: None,
        };
        if code == 429 {
            err.details = Some(json!({ "retryAfterSeconds": 1 }));
        }
        err
    }

    /// The `metav1.Status` body.
    pub fn status_body(&self) -> Value {
        let mut body = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            body["details"] = details.clone();
        }
        body
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (code, axum::Json(self.status_body())).into_response();
        if self.code == 429 {
            response
                .headers_mut()
                .insert("retry-after", axum::http::HeaderValue::from_static("1"));
        }
        response
    }
}

/// Errors starting or driving the server from the library.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Binding the listening socket failed.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address that was requested.
        addr: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Building a `kube::Client` for the server failed.
    #[error("cannot build a kube client for {url}: {source}")]
    Client {
        /// The server URL.
        url: String,
        /// The kube error.
        source: kube::Error,
    },
    /// Writing the kubeconfig failed.
    #[error("cannot write kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The target file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// An unknown resource name was given to the store handle.
    #[error("unknown resource {0:?} (expected e.g. nodes, services, leases, events.events.k8s.io)")]
    UnknownResource(String),
    /// A store operation was refused with an API error.
    #[error(transparent)]
    Api(#[from] ApiError),
}
