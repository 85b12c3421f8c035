//! Validation as kube-apiserver reports it: field errors, and the object validations the
//! store runs on create and update.
//!
//! * [`FieldError`] is `field.Error`
//!   (`staging/src/k8s.io/apimachinery/pkg/util/validation/field/errors.go`): a type
//!   (`Required value`, `Invalid value`, `Unsupported value`, `Forbidden`), the field path
//!   and the body `ErrorBody` prints; [`ApiError::invalid`](crate::ApiError::invalid) turns
//!   a list of them into the 422 Status `apierrors.NewInvalid` builds.
//! * [`validate_create`] and [`validate_update`]: the strategies' `Validate` and
//!   `ValidateUpdate` for Events ([`events`]). Objects are in their stored form (core
//!   Events for both Event APIs); the resource a request was sent to decides what is
//!   checked, as the request's group version does on the real server.
//!
//! Not modelled: `ValidateObjectMeta` and `ValidateObjectMetaUpdate` beyond what the store
//! itself enforces, and the validation of every other resource (Roles' rules, Services,
//! Nodes, Leases, RBAC objects, ...).

pub mod events;

use serde_json::Value;

use crate::resources::ResourceKind;

/// The kind of a [`FieldError`] (`field.ErrorType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorType {
    /// `field.Required`.
    Required,
    /// `field.Invalid`.
    Invalid,
    /// `field.NotSupported`.
    NotSupported,
    /// `field.Forbidden`.
    Forbidden,
}

impl ErrorType {
    /// The Status cause reason (`metav1.CauseType`).
    pub fn cause(self) -> &'static str {
        match self {
            Self::Required => "FieldValueRequired",
            Self::Invalid => "FieldValueInvalid",
            Self::NotSupported => "FieldValueNotSupported",
            Self::Forbidden => "FieldValueForbidden",
        }
    }

    /// `ErrorType.String`.
    fn text(self) -> &'static str {
        match self {
            Self::Required => "Required value",
            Self::Invalid => "Invalid value",
            Self::NotSupported => "Unsupported value",
            Self::Forbidden => "Forbidden",
        }
    }
}

/// One validation error (`field.Error`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// What is wrong.
    pub error_type: ErrorType,
    /// The field path (`roleRef.kind`, `subjects[0].name`).
    pub field: String,
    /// `ErrorBody`: the type, the bad value where one is shown, and the detail.
    pub body: String,
}

fn with_detail(head: String, detail: &str) -> String {
    if detail.is_empty() {
        head
    } else {
        format!("{head}: {detail}")
    }
}

impl FieldError {
    /// `field.Required(path, detail)`: `Required value[: detail]`.
    pub fn required(field: &str, detail: &str) -> Self {
        Self {
            error_type: ErrorType::Required,
            field: field.into(),
            body: with_detail(ErrorType::Required.text().into(), detail),
        }
    }

    /// `field.Forbidden(path, detail)`: `Forbidden: detail`.
    pub fn forbidden(field: &str, detail: &str) -> Self {
        Self {
            error_type: ErrorType::Forbidden,
            field: field.into(),
            body: with_detail(ErrorType::Forbidden.text().into(), detail),
        }
    }

    /// `field.Invalid(path, value, detail)`: `Invalid value: <value>[: detail]`, the value
    /// already printed as `ErrorBody` prints it (see [`quote`]).
    pub fn invalid(field: &str, value: &str, detail: &str) -> Self {
        Self {
            error_type: ErrorType::Invalid,
            field: field.into(),
            body: with_detail(format!("{}: {value}", ErrorType::Invalid.text()), detail),
        }
    }

    /// An error whose body is given as is (for checks of this server's own).
    pub fn with_body(error_type: ErrorType, field: &str, body: &str) -> Self {
        Self {
            error_type,
            field: field.into(),
            body: body.into(),
        }
    }

    /// `field.Error.Error()`: `field: body`.
    pub fn message(&self) -> String {
        format!("{}: {}", self.field, self.body)
    }
}

/// A string as Go's `%q` prints it (for the ASCII the API carries: Rust's escaping).
pub fn quote(value: &str) -> String {
    format!("{value:?}")
}

/// A string field at a JSON pointer, `""` when missing or not a string (Go's zero value).
pub fn str_at<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The errors of creating `object` (in its stored form) through `kind`.
pub fn validate_create(kind: &ResourceKind, object: &Value) -> Vec<FieldError> {
    match (kind.group, kind.kind) {
        ("" | "events.k8s.io", "Event") => {
            events::validate_create(object, events::RequestVersion::of(kind))
        }
        _ => Vec::new(),
    }
}

/// The errors of replacing `old` by `new` (both in their stored form) through `kind`.
pub fn validate_update(kind: &ResourceKind, new: &Value, old: &Value) -> Vec<FieldError> {
    match (kind.group, kind.kind) {
        ("" | "events.k8s.io", "Event") => {
            events::validate_update(new, old, events::RequestVersion::of(kind))
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_printed_as_error_body_prints_them() {
        assert_eq!(
            FieldError::required("roleRef.name", "").message(),
            "roleRef.name: Required value"
        );
        assert_eq!(
            FieldError::invalid("action", &quote(""), "can have at most 128 characters").message(),
            "action: Invalid value: \"\": can have at most 128 characters"
        );
    }

    #[test]
    fn new_invalid_names_the_kind_with_its_group_and_lists_several_errors_once() {
        let leases = crate::resources::find("coordination.k8s.io", "v1", "leases").unwrap();
        let reason = FieldError::required("reason", "");
        let error = crate::ApiError::invalid(
            leases,
            "l",
            &[reason.clone(), FieldError::forbidden("spec", "no"), reason],
        );
        assert_eq!(error.code, 422);
        assert_eq!(
            error.message,
            "Lease.coordination.k8s.io \"l\" is invalid: [reason: Required value, spec: Forbidden: no]"
        );
        let details = error.details.unwrap();
        assert_eq!(details["kind"], "Lease");
        assert_eq!(details["group"], "coordination.k8s.io");
        assert_eq!(details["causes"].as_array().unwrap().len(), 3);
        assert_eq!(details["causes"][1]["reason"], "FieldValueForbidden");
        assert_eq!(details["causes"][1]["message"], "Forbidden: no");
        assert_eq!(details["causes"][1]["field"], "spec");
    }
}
