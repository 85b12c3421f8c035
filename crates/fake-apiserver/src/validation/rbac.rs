//! RoleBinding and ClusterRoleBinding validation (`pkg/apis/rbac/validation/validation.go`):
//!
//! * `ValidateRoleBinding` / `ValidateClusterRoleBinding`: `roleRef.apiGroup` must be
//!   `rbac.authorization.k8s.io`, `roleRef.kind` `Role` or `ClusterRole` (a
//!   ClusterRoleBinding: `ClusterRole` only), `roleRef.name` is required and must be a valid
//!   path segment; each subject (`validateRoleBindingSubject`) needs a name and a known kind:
//!   a `ServiceAccount` a DNS-subdomain name, no apiGroup and (in a ClusterRoleBinding) a
//!   namespace, a `User` or `Group` the apiGroup `rbac.authorization.k8s.io`.
//! * `ValidateRoleBindingUpdate` / `ValidateClusterRoleBindingUpdate`: the same, and the
//!   roleRef never changes (`cannot change roleRef`).
//!
//! Bindings are validated after the v1 defaulting (`pkg/apis/rbac/v1/defaults.go`, see
//! `store/defaults.rs`), so an empty `roleRef.apiGroup` is no error.

use serde_json::Value;

use super::{FieldError, dns1123_subdomain_errors, path_segment_name_errors, quote, str_at};

/// `rbac.GroupName`.
pub const GROUP: &str = "rbac.authorization.k8s.io";

/// `rbac.RoleRef`.
#[derive(Debug, PartialEq, Eq)]
struct RoleRef<'a> {
    api_group: &'a str,
    kind: &'a str,
    name: &'a str,
}

impl<'a> RoleRef<'a> {
    fn of(binding: &'a Value) -> Self {
        Self {
            api_group: str_at(binding, "/roleRef/apiGroup"),
            kind: str_at(binding, "/roleRef/kind"),
            name: str_at(binding, "/roleRef/name"),
        }
    }

    /// The internal struct as `ErrorBody` prints it (`%#v`).
    fn go_value(&self) -> String {
        format!(
            "rbac.RoleRef{{APIGroup:{}, Kind:{}, Name:{}}}",
            quote(self.api_group),
            quote(self.kind),
            quote(self.name)
        )
    }
}

/// `validateRoleBindingSubject` for the subject at `path`.
fn subject_errors(subject: &Value, namespaced: bool, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let field = |child: &str| format!("{path}.{child}");
    let name = str_at(subject, "/name");
    let api_group = str_at(subject, "/apiGroup");
    if name.is_empty() {
        errors.push(FieldError::required(&field("name"), ""));
    }
    match str_at(subject, "/kind") {
        "ServiceAccount" => {
            if !name.is_empty() {
                errors.extend(
                    dns1123_subdomain_errors(name)
                        .iter()
                        .map(|msg| FieldError::invalid(&field("name"), &quote(name), msg)),
                );
            }
            if !api_group.is_empty() {
                errors.push(FieldError::not_supported(
                    &field("apiGroup"),
                    api_group,
                    &[""],
                ));
            }
            if !namespaced && str_at(subject, "/namespace").is_empty() {
                errors.push(FieldError::required(&field("namespace"), ""));
            }
        }
        kind @ ("User" | "Group") => {
            if name.is_empty() {
                let detail = if kind == "User" {
                    "user name cannot be empty"
                } else {
                    "group name cannot be empty"
                };
                errors.push(FieldError::invalid(&field("name"), &quote(name), detail));
            }
            if api_group != GROUP {
                errors.push(FieldError::not_supported(
                    &field("apiGroup"),
                    api_group,
                    &[GROUP],
                ));
            }
        }
        other => errors.push(FieldError::not_supported(
            &field("kind"),
            other,
            &["ServiceAccount", "User", "Group"],
        )),
    }
    errors
}

/// `ValidateRoleBinding` (`namespaced`) or `ValidateClusterRoleBinding`.
pub fn validate_binding(binding: &Value, namespaced: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let role_ref = RoleRef::of(binding);
    if role_ref.api_group != GROUP {
        errors.push(FieldError::not_supported(
            "roleRef.apiGroup",
            role_ref.api_group,
            &[GROUP],
        ));
    }
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    if !kinds.contains(&role_ref.kind) {
        errors.push(FieldError::not_supported(
            "roleRef.kind",
            role_ref.kind,
            kinds,
        ));
    }
    if role_ref.name.is_empty() {
        errors.push(FieldError::required("roleRef.name", ""));
    } else {
        errors.extend(
            path_segment_name_errors(role_ref.name)
                .iter()
                .map(|msg| FieldError::invalid("roleRef.name", &quote(role_ref.name), msg)),
        );
    }
    let subjects = binding.get("subjects").and_then(Value::as_array);
    for (i, subject) in subjects.into_iter().flatten().enumerate() {
        errors.extend(subject_errors(
            subject,
            namespaced,
            &format!("subjects[{i}]"),
        ));
    }
    errors
}

/// `ValidateRoleBindingUpdate` (`namespaced`) or `ValidateClusterRoleBindingUpdate`.
pub fn validate_binding_update(new: &Value, old: &Value, namespaced: bool) -> Vec<FieldError> {
    let mut errors = validate_binding(new, namespaced);
    let role_ref = RoleRef::of(new);
    if role_ref != RoleRef::of(old) {
        errors.push(FieldError::invalid(
            "roleRef",
            &role_ref.go_value(),
            "cannot change roleRef",
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(errors: &[FieldError]) -> Vec<String> {
        errors.iter().map(FieldError::message).collect()
    }

    #[test]
    fn subjects_are_validated_as_validate_role_binding_subject_does() {
        let binding = json!({
            "roleRef": { "apiGroup": GROUP, "kind": "ClusterRole", "name": "view" },
            "subjects": [
                { "kind": "ServiceAccount", "name": "ccm" },
                { "kind": "ServiceAccount", "name": "CCM", "apiGroup": GROUP, "namespace": "kube-system" },
                { "kind": "User", "name": "", "apiGroup": "" },
                { "kind": "Robot", "name": "r2" },
            ],
        });
        assert!(validate_binding(&binding, true).len() > 4);
        assert_eq!(
            messages(&validate_binding(&binding, false)),
            [
                "subjects[0].namespace: Required value".to_string(),
                format!("subjects[1].name: Invalid value: \"CCM\": {}", dns1123_subdomain_errors("CCM")[0]),
                "subjects[1].apiGroup: Unsupported value: \"rbac.authorization.k8s.io\": supported values: \"\"".into(),
                "subjects[2].name: Required value".into(),
                "subjects[2].name: Invalid value: \"\": user name cannot be empty".into(),
                "subjects[2].apiGroup: Unsupported value: \"\": supported values: \"rbac.authorization.k8s.io\"".into(),
                "subjects[3].kind: Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\"".into(),
            ]
        );
    }

    #[test]
    fn an_unchanged_role_ref_passes_an_update() {
        let binding = json!({ "roleRef": { "apiGroup": GROUP, "kind": "Role", "name": "leases" } });
        assert!(validate_binding_update(&binding, &binding, true).is_empty());
        let other =
            json!({ "roleRef": { "apiGroup": GROUP, "kind": "ClusterRole", "name": "leases" } });
        assert_eq!(
            messages(&validate_binding_update(&other, &binding, true)),
            [
                "roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", Name:\"leases\"}: cannot change roleRef"
            ]
        );
    }
}
