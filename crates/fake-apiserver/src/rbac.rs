//! The RBAC authorizer: `rbac.authorization.k8s.io/v1` Roles, ClusterRoles, RoleBindings
//! and ClusterRoleBindings from the store, evaluated as kube-apiserver's
//! `plugin/pkg/auth/authorizer/rbac` does it:
//!
//! * `VisitRulesFor`: the ClusterRoleBindings apply everywhere; the RoleBindings of the
//!   request's namespace apply there only (a RoleBinding may reference a ClusterRole, which
//!   then grants in that namespace only). A binding applies when one subject matches
//!   (`appliesToUser`): `User` by name, `Group` by group, `ServiceAccount` by
//!   `system:serviceaccount:{namespace}:{name}`.
//! * `RuleAllows` (`rbac.go`) and the matchers of `pkg/apis/rbac/v1/evaluation_helpers.go`:
//!   verbs (`*` or equal), apiGroups (`*` or equal), resources (`*`, equal to
//!   `resource/subresource`, or `*/subresource`), resourceNames (empty or containing the
//!   name; a request without a name, like `create` or `list`, never matches a rule with
//!   resourceNames), and for non-resource requests nonResourceURLs (`*`, equal, or a
//!   prefix ending in `*`).
//! * A binding whose role does not exist grants nothing and adds
//!   `RBAC: clusterrole.rbac.authorization.k8s.io "x" not found` to the denial's reason.
//!
//! The bootstrap policy ([`bootstrap_objects`]) is the part of kube-apiserver's
//! (`plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go`) that matters here:
//! `cluster-admin` bound to `system:masters`, `system:discovery` and `system:basic-user`
//! (SelfSubjectAccessReviews and SelfSubjectRulesReviews) for authenticated users,
//! `system:public-info-viewer` for everybody, and `system:auth-delegator` (TokenReviews
//! and SubjectAccessReviews, for delegating servers; bound to no one).
//!
//! Not modelled: privilege-escalation checks when writing Roles and bindings (`escalate`,
//! `bind`), aggregated ClusterRoles, impersonation.

use serde_json::{Value, json};

use crate::auth::{AUTHENTICATED, MASTERS, UserInfo, service_account_user};
use crate::object::meta_str;
use crate::request_info::RequestInfo;
use crate::resources::{self, ResourceKind};
use crate::store::Store;

fn kind(plural: &str) -> &'static ResourceKind {
    resources::find("rbac.authorization.k8s.io", "v1", plural).expect("RBAC resources are served")
}

fn strings(value: Option<&Value>) -> Vec<&str> {
    value
        .and_then(Value::as_array)
        .map(|items| items.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// `VerbMatches`.
fn verb_matches(rule: &Value, verb: &str) -> bool {
    strings(rule.get("verbs"))
        .iter()
        .any(|v| *v == "*" || *v == verb)
}

/// `APIGroupMatches`.
fn api_group_matches(rule: &Value, group: &str) -> bool {
    strings(rule.get("apiGroups"))
        .iter()
        .any(|g| *g == "*" || *g == group)
}

/// `ResourceMatches`.
fn resource_matches(rule: &Value, combined: &str, subresource: &str) -> bool {
    strings(rule.get("resources")).iter().any(|r| {
        *r == "*"
            || *r == combined
            || (!subresource.is_empty()
                && r.len() == subresource.len() + 2
                && r.starts_with("*/")
                && r.ends_with(subresource))
    })
}

/// `ResourceNameMatches`.
fn resource_name_matches(rule: &Value, name: &str) -> bool {
    let names = strings(rule.get("resourceNames"));
    names.is_empty() || names.contains(&name)
}

/// `NonResourceURLMatches`.
fn non_resource_url_matches(rule: &Value, path: &str) -> bool {
    strings(rule.get("nonResourceURLs")).iter().any(|u| {
        *u == "*" || *u == path || u.strip_suffix('*').is_some_and(|p| path.starts_with(p))
    })
}

/// `RuleAllows`: whether one PolicyRule grants the request.
pub fn rule_allows(info: &RequestInfo, rule: &Value) -> bool {
    if info.is_resource_request {
        let combined = if info.subresource.is_empty() {
            info.resource.clone()
        } else {
            format!("{}/{}", info.resource, info.subresource)
        };
        verb_matches(rule, &info.verb)
            && api_group_matches(rule, &info.api_group)
            && resource_matches(rule, &combined, &info.subresource)
            && resource_name_matches(rule, &info.name)
    } else {
        verb_matches(rule, &info.verb) && non_resource_url_matches(rule, &info.path)
    }
}

/// `appliesToUser` for one subject of a binding in `binding_namespace`.
fn subject_matches(subject: &Value, user: &UserInfo, binding_namespace: &str) -> bool {
    let name = subject.get("name").and_then(Value::as_str).unwrap_or("");
    match subject.get("kind").and_then(Value::as_str) {
        Some("User") => user.name == name,
        Some("Group") => user.groups.iter().any(|g| g == name),
        Some("ServiceAccount") => {
            let namespace = subject
                .get("namespace")
                .and_then(Value::as_str)
                .filter(|ns| !ns.is_empty())
                .unwrap_or(binding_namespace);
            user.name == service_account_user(namespace, name)
        }
        _ => false,
    }
}

/// The outcome of authorising a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// A rule grants the request.
    Allow,
    /// No rule does; the reason (possibly empty) is appended to the 403 message.
    Deny(String),
}

/// Authorises `info` for `user` against the RBAC objects in `store`.
pub fn authorize(store: &Store, user: &UserInfo, info: &RequestInfo) -> Decision {
    let mut errors = Vec::new();
    let mut bindings: Vec<Value> = store.all(kind("clusterrolebindings"));
    if info.is_resource_request && !info.namespace.is_empty() {
        bindings.extend(
            store
                .all(kind("rolebindings"))
                .into_iter()
                .filter(|b| meta_str(b, "namespace") == info.namespace),
        );
    }
    for binding in &bindings {
        let binding_namespace = meta_str(binding, "namespace");
        let applies = binding
            .get("subjects")
            .and_then(Value::as_array)
            .is_some_and(|subjects| {
                subjects
                    .iter()
                    .any(|s| subject_matches(s, user, binding_namespace))
            });
        if !applies {
            continue;
        }
        let role_kind = binding.pointer("/roleRef/kind").and_then(Value::as_str);
        let role_name = binding
            .pointer("/roleRef/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let role = match role_kind {
            Some("ClusterRole") => store.get(kind("clusterroles"), "", role_name),
            Some("Role") if !binding_namespace.is_empty() => {
                store.get(kind("roles"), binding_namespace, role_name)
            }
            _ => continue,
        };
        let role = match role {
            Ok(role) => role,
            Err(_) => {
                let singular = if role_kind == Some("Role") {
                    "role"
                } else {
                    "clusterrole"
                };
                errors.push(format!(
                    "{singular}.rbac.authorization.k8s.io \"{role_name}\" not found"
                ));
                continue;
            }
        };
        if role
            .get("rules")
            .and_then(Value::as_array)
            .is_some_and(|rules| rules.iter().any(|rule| rule_allows(info, rule)))
        {
            return Decision::Allow;
        }
    }
    // utilerrors.NewAggregate prints one error bare and several as `[a, b]`.
    match errors.as_slice() {
        [] => Decision::Deny(String::new()),
        [one] => Decision::Deny(format!("RBAC: {one}")),
        many => Decision::Deny(format!("RBAC: [{}]", many.join(", "))),
    }
}

/// The bootstrap ClusterRoles and ClusterRoleBindings a fresh cluster has, as
/// `(resource, object)`.
pub fn bootstrap_objects() -> Vec<(&'static ResourceKind, Value)> {
    let meta = |name: &str| {
        json!({
            "name": name,
            "labels": { "kubernetes.io/bootstrapping": "rbac-defaults" },
            "annotations": { "rbac.authorization.kubernetes.io/autoupdate": "true" },
        })
    };
    let role = |name: &str, rules: Value| json!({ "metadata": meta(name), "rules": rules });
    let binding = |name: &str, groups: &[&str]| {
        let subjects: Vec<Value> = groups
            .iter()
            .map(|g| json!({ "apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g }))
            .collect();
        json!({
            "metadata": meta(name),
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name },
            "subjects": subjects,
        })
    };
    let (roles, bindings) = (kind("clusterroles"), kind("clusterrolebindings"));
    vec![
        (
            roles,
            role(
                "cluster-admin",
                json!([
                    { "apiGroups": ["*"], "resources": ["*"], "verbs": ["*"] },
                    { "nonResourceURLs": ["*"], "verbs": ["*"] },
                ]),
            ),
        ),
        (bindings, binding("cluster-admin", &[MASTERS])),
        (
            roles,
            role(
                "system:discovery",
                json!([{ "nonResourceURLs": [
                    "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi",
                    "/openapi/*", "/readyz", "/version", "/version/"
                ], "verbs": ["get"] }]),
            ),
        ),
        (bindings, binding("system:discovery", &[AUTHENTICATED])),
        (
            roles,
            role(
                "system:basic-user",
                json!([{
                    "apiGroups": ["authorization.k8s.io"],
                    "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    "verbs": ["create"],
                }]),
            ),
        ),
        (bindings, binding("system:basic-user", &[AUTHENTICATED])),
        (
            roles,
            role(
                "system:auth-delegator",
                json!([
                    { "apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"] },
                    { "apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"] },
                ]),
            ),
        ),
        (
            roles,
            role(
                "system:public-info-viewer",
                json!([{ "nonResourceURLs": [
                    "/healthz", "/livez", "/readyz", "/version", "/version/"
                ], "verbs": ["get"] }]),
            ),
        ),
        (
            bindings,
            binding(
                "system:public-info-viewer",
                &[AUTHENTICATED, "system:unauthenticated"],
            ),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Method;

    fn info(method: Method, uri: &str) -> RequestInfo {
        RequestInfo::parse(&method, &uri.parse().unwrap())
    }

    /// Cases from `TestRuleMatches`/`TestResourceMatches` in kubernetes'
    /// `pkg/apis/rbac/v1/evaluation_helpers_test.go` and `rbac_test.go`.
    #[test]
    fn rule_allows_matches_verbs_groups_resources_subresources_and_names() {
        let status_patch = info(
            Method::PATCH,
            "/api/v1/namespaces/default/services/web/status",
        );
        let services_only = json!({ "apiGroups": [""], "resources": ["services"], "verbs": ["*"] });
        assert!(
            !rule_allows(&status_patch, &services_only),
            "services does not grant services/status"
        );
        let status =
            json!({ "apiGroups": [""], "resources": ["services/status"], "verbs": ["patch"] });
        assert!(rule_allows(&status_patch, &status));
        let any_status =
            json!({ "apiGroups": [""], "resources": ["*/status"], "verbs": ["patch"] });
        assert!(rule_allows(&status_patch, &any_status));
        let everything = json!({ "apiGroups": ["*"], "resources": ["*"], "verbs": ["*"] });
        assert!(rule_allows(&status_patch, &everything));
        let wrong_group =
            json!({ "apiGroups": ["apps"], "resources": ["services/status"], "verbs": ["patch"] });
        assert!(!rule_allows(&status_patch, &wrong_group));
        let update_only =
            json!({ "apiGroups": [""], "resources": ["services/status"], "verbs": ["update"] });
        assert!(!rule_allows(&status_patch, &update_only));

        let named = json!({ "apiGroups": [""], "resources": ["services"], "resourceNames": ["web"], "verbs": ["get", "list", "create"] });
        assert!(rule_allows(
            &info(Method::GET, "/api/v1/namespaces/default/services/web"),
            &named
        ));
        assert!(!rule_allows(
            &info(Method::GET, "/api/v1/namespaces/default/services/db"),
            &named
        ));
        assert!(!rule_allows(
            &info(Method::GET, "/api/v1/namespaces/default/services"),
            &named
        ));
        assert!(rule_allows(
            &info(
                Method::GET,
                "/api/v1/namespaces/default/services?fieldSelector=metadata.name%3Dweb"
            ),
            &named
        ));
        assert!(!rule_allows(
            &info(Method::POST, "/api/v1/namespaces/default/services"),
            &named
        ));

        let discovery = json!({ "nonResourceURLs": ["/apis/*", "/version"], "verbs": ["get"] });
        assert!(rule_allows(
            &info(Method::GET, "/apis/events.k8s.io/v1"),
            &discovery
        ));
        assert!(rule_allows(&info(Method::GET, "/version"), &discovery));
        assert!(!rule_allows(&info(Method::GET, "/api"), &discovery));
        assert!(
            !rule_allows(&info(Method::GET, "/api/v1/nodes"), &discovery),
            "non-resource rules grant no resource"
        );
    }

    #[test]
    fn subjects_match_users_groups_and_service_accounts() {
        let sa = UserInfo::service_account("kube-system", "ccm");
        let subject =
            json!({ "kind": "ServiceAccount", "name": "ccm", "namespace": "kube-system" });
        assert!(subject_matches(&subject, &sa, ""));
        let defaulted = json!({ "kind": "ServiceAccount", "name": "ccm" });
        assert!(subject_matches(&defaulted, &sa, "kube-system"));
        assert!(!subject_matches(&defaulted, &sa, "default"));
        let group = json!({ "kind": "Group", "name": "system:serviceaccounts:kube-system" });
        assert!(subject_matches(&group, &sa, ""));
        let user = json!({ "kind": "User", "name": "system:serviceaccount:kube-system:ccm" });
        assert!(subject_matches(&user, &sa, ""));
        assert!(!subject_matches(
            &json!({ "kind": "User", "name": "alice" }),
            &sa,
            ""
        ));
    }
}
