//! Validation as kube-apiserver reports it: field errors, and the object validations the
//! store runs on create and update.
//!
//! * [`FieldError`] is `field.Error`
//!   (`staging/src/k8s.io/apimachinery/pkg/util/validation/field/errors.go`): a type
//!   (`Required value`, `Invalid value`, `Unsupported value`, `Forbidden`), the field path
//!   and the body `ErrorBody` prints; [`ApiError::invalid`](crate::ApiError::invalid) turns
//!   a list of them into the 422 Status `apierrors.NewInvalid` builds.
//! * Name formats, with their messages: `IsValidPathSegmentName`
//!   (`staging/src/k8s.io/apimachinery/pkg/api/validation/path/name.go`),
//!   `IsDNS1123Subdomain` and `IsQualifiedName`
//!   (`staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go`, as in v1.33).
//! * [`validate_create`] and [`validate_update`]: the strategies' `Validate` and
//!   `ValidateUpdate` for Events ([`events`]) and RoleBindings and ClusterRoleBindings
//!   ([`rbac`]). Objects are in their stored form (core
//!   Events for both Event APIs); the resource a request was sent to decides what is
//!   checked, as the request's group version does on the real server.
//!
//! Not modelled: `ValidateObjectMeta` and `ValidateObjectMetaUpdate` beyond what the store
//! itself enforces, and the validation of every other resource (Roles' rules, Services,
//! Nodes, Leases, ...).

pub mod events;
pub mod rbac;

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

    /// `field.NotSupported(path, value, supported)` for a string value:
    /// `Unsupported value: "x": supported values: "a", "b"`.
    pub fn not_supported(field: &str, value: &str, supported: &[&str]) -> Self {
        let quoted: Vec<String> = supported.iter().map(|v| quote(v)).collect();
        let detail = if quoted.is_empty() {
            String::new()
        } else {
            format!("supported values: {}", quoted.join(", "))
        };
        Self {
            error_type: ErrorType::NotSupported,
            field: field.into(),
            body: with_detail(
                format!("{}: {}", ErrorType::NotSupported.text(), quote(value)),
                &detail,
            ),
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

/// `IsValidPathSegmentName`: a name that can be a URL path segment.
pub fn path_segment_name_errors(name: &str) -> Vec<String> {
    for illegal in [".", ".."] {
        if name == illegal {
            return vec![format!("may not be '{illegal}'")];
        }
    }
    ["/", "%"]
        .iter()
        .filter(|illegal| name.contains(**illegal))
        .map(|illegal| format!("may not contain '{illegal}'"))
        .collect()
}

/// `RegexError`.
fn regex_error(message: &str, format: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{message} (regex used for validation is '{format}')");
    }
    let examples: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{message} (e.g. {}regex used for validation is '{format}')",
        examples.join(" or ")
    )
}

/// `MaxLenError`.
fn max_len_error(length: usize) -> String {
    format!("must be no more than {length} characters")
}

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN_ERROR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_MAX: usize = 253;

/// Whether `value` matches `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`.
fn is_dns1123_label_shape(value: &str) -> bool {
    let bytes = value.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            alnum(first) && alnum(last) && bytes.iter().all(|b| alnum(b) || *b == b'-')
        }
        _ => false,
    }
}

/// `IsDNS1123Subdomain`.
pub fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX {
        errors.push(max_len_error(DNS1123_SUBDOMAIN_MAX));
    }
    if !value.split('.').all(is_dns1123_label_shape) {
        let format = format!("{DNS1123_LABEL_FMT}(\\.{DNS1123_LABEL_FMT})*");
        errors.push(regex_error(
            DNS1123_SUBDOMAIN_ERROR,
            &format,
            &["example.com"],
        ));
    }
    errors
}

const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERROR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_MAX: usize = 63;

/// `IsQualifiedName`: `[prefix/]name`, the prefix a DNS subdomain, the name at most 63
/// alphanumerics, `-`, `_` or `.` starting and ending with an alphanumeric.
pub fn qualified_name_errors(value: &str) -> Vec<String> {
    let examples = ["MyName", "my.name", "123-abc"];
    let mut errors = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_string());
            } else {
                errors.extend(
                    dns1123_subdomain_errors(prefix)
                        .into_iter()
                        .map(|e| format!("prefix part {e}")),
                );
            }
            *name
        }
        _ => {
            errors.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_ERROR, QUALIFIED_NAME_FMT, &examples)
            ));
            return errors;
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_string());
    } else if name.len() > QUALIFIED_NAME_MAX {
        errors.push(format!("name part {}", max_len_error(QUALIFIED_NAME_MAX)));
    }
    let bytes = name.as_bytes();
    let alnum = |b: &u8| b.is_ascii_alphanumeric();
    let shaped = match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            alnum(first)
                && alnum(last)
                && bytes
                    .iter()
                    .all(|b| alnum(b) || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    };
    if !shaped {
        errors.push(format!(
            "name part {}",
            regex_error(QUALIFIED_NAME_ERROR, QUALIFIED_NAME_FMT, &examples)
        ));
    }
    errors
}

/// The errors of creating `object` (in its stored form) through `kind`.
pub fn validate_create(kind: &ResourceKind, object: &Value) -> Vec<FieldError> {
    match (kind.group, kind.kind) {
        ("" | "events.k8s.io", "Event") => {
            events::validate_create(object, events::RequestVersion::of(kind))
        }
        ("rbac.authorization.k8s.io", "RoleBinding") => rbac::validate_binding(object, true),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => {
            rbac::validate_binding(object, false)
        }
        ("", "Secret") => secret_errors(object),
        _ => Vec::new(),
    }
}

/// The errors of replacing `old` by `new` (both in their stored form) through `kind`.
pub fn validate_update(kind: &ResourceKind, new: &Value, old: &Value) -> Vec<FieldError> {
    match (kind.group, kind.kind) {
        ("" | "events.k8s.io", "Event") => {
            events::validate_update(new, old, events::RequestVersion::of(kind))
        }
        ("rbac.authorization.k8s.io", "RoleBinding") => {
            rbac::validate_binding_update(new, old, true)
        }
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => {
            rbac::validate_binding_update(new, old, false)
        }
        ("", "Secret") => secret_errors(new),
        _ => Vec::new(),
    }
}

/// `ValidateSecret` (`pkg/apis/core/validation/validation.go`) for the type this server's
/// clients write: a `kubernetes.io/tls` Secret must hold `data[tls.crt]` and
/// `data[tls.key]` (422 `Required value` for each one missing).
fn secret_errors(secret: &Value) -> Vec<FieldError> {
    if secret.get("type").and_then(Value::as_str) != Some("kubernetes.io/tls") {
        return Vec::new();
    }
    ["tls.crt", "tls.key"]
        .into_iter()
        .filter(|key| secret.pointer(&format!("/data/{key}")).is_none())
        .map(|key| FieldError::required(&format!("data[{key}]"), ""))
        .collect()
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
        assert_eq!(
            FieldError::not_supported("roleRef.kind", "Foo", &["Role", "ClusterRole"]).message(),
            "roleRef.kind: Unsupported value: \"Foo\": supported values: \"Role\", \"ClusterRole\""
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

    #[test]
    fn name_formats_follow_apimachinery() {
        assert!(path_segment_name_errors("system:controller:x").is_empty());
        assert_eq!(path_segment_name_errors(".."), ["may not be '..'"]);
        assert_eq!(
            path_segment_name_errors("a/b%c"),
            ["may not contain '/'", "may not contain '%'"]
        );
        assert!(dns1123_subdomain_errors("ccm.kube-system").is_empty());
        assert_eq!(
            dns1123_subdomain_errors("Web"),
            [
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
            ]
        );
        assert_eq!(dns1123_subdomain_errors("a.").len(), 1);
        assert_eq!(dns1123_subdomain_errors(&"a".repeat(254)).len(), 1);
        assert!(qualified_name_errors("cloud-node-controller").is_empty());
        assert!(qualified_name_errors("cloudstack.apache.org/ccm").is_empty());
        // With `Required value`, the real server's three errors for an empty
        // reportingController.
        assert_eq!(
            qualified_name_errors(""),
            [
                "name part must be non-empty",
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
            ]
        );
        assert_eq!(
            qualified_name_errors("/x"),
            ["prefix part must be non-empty"]
        );
        assert_eq!(qualified_name_errors("a/b/c").len(), 1);
    }
}
