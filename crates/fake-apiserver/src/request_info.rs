//! The attributes a request is authorised on, as kube-apiserver derives them.
//!
//! [`RequestInfo::parse`] follows `RequestInfoFactory.NewRequestInfo`
//! (`staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go`): the verb from
//! the method (`list`/`watch` for a GET without a name, `deletecollection` for a DELETE
//! without one), namespace, resource, subresource and name from the path. A list or
//! watch (any `watch` value but `0` or `false`) whose field selector requires
//! `metadata.name` (`RequiresExactMatch`: the first `metadata.name=x` or `==x` term,
//! never `!=`) is authorised on that name if it is a valid path segment; a selector
//! that does not parse, like a label selector that does not, names nothing (the
//! `ListOptions` decoding failed).

use std::collections::HashMap;

use axum::http::{Method, Uri};

use serde_json::json;

use crate::error::ApiError;
use crate::params;
use crate::selector::{FieldSelector, LabelSelector};
use crate::validation::path_segment_name_errors;

/// The attributes a request is authorised on.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestInfo {
    /// A request for an API resource (`/api/v1/...`, `/apis/g/v/...`), not a path.
    pub is_resource_request: bool,
    /// The URL path.
    pub path: String,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`
    /// (for non-resource requests: the lowercase method).
    pub verb: String,
    /// API group (`""` for core).
    pub api_group: String,
    /// Namespace (`""` when cluster-scoped or across namespaces).
    pub namespace: String,
    /// Resource (plural).
    pub resource: String,
    /// Subresource (`status`, `token`).
    pub subresource: String,
    /// Object name.
    pub name: String,
}

/// Path segments directly below a namespace that are its subresources, not resources
/// (`namespaceSubresources` in requestinfo.go).
const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];

impl RequestInfo {
    /// The attributes of a request, as `RequestInfoFactory.NewRequestInfo` derives them.
    pub fn parse(method: &Method, uri: &Uri) -> Self {
        let path = uri.path().to_string();
        let mut info = Self {
            path: path.clone(),
            verb: method.as_str().to_lowercase(),
            ..Self::default()
        };
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        if parts.len() < 3 || !matches!(parts[0], "api" | "apis") {
            return info;
        }
        let mut rest = &parts[1..];
        if parts[0] == "apis" {
            if rest.len() < 3 {
                return info;
            }
            info.api_group = rest[0].to_string();
            rest = &rest[1..];
        }
        info.is_resource_request = true;
        rest = &rest[1..];
        info.verb = match method.as_str() {
            "POST" => "create",
            "GET" | "HEAD" => "get",
            "PUT" => "update",
            "PATCH" => "patch",
            "DELETE" => "delete",
            _ => "",
        }
        .to_string();
        if rest.first() == Some(&"namespaces")
            && let Some(ns) = rest.get(1)
        {
            info.namespace = ns.to_string();
            if rest.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&rest[2]) {
                rest = &rest[2..];
            }
        }
        if let Some(resource) = rest.first() {
            info.resource = resource.to_string();
        }
        if let Some(name) = rest.get(1) {
            info.name = name.to_string();
        }
        if let Some(sub) = rest.get(2) {
            info.subresource = sub.to_string();
        }
        let query: HashMap<String, String> = uri
            .query()
            .map(|q| {
                axum::extract::Query::<HashMap<String, String>>::try_from_uri(
                    &format!("/?{q}").parse().unwrap_or_default(),
                )
                .map(|q| q.0)
                .unwrap_or_default()
            })
            .unwrap_or_default();
        if info.name.is_empty() && info.verb == "get" {
            info.verb = if params::flag(&query, "watch") {
                "watch"
            } else {
                "list"
            }
            .into();
            let labels_parse = query
                .get("labelSelector")
                .is_none_or(|s| LabelSelector::parse(s).is_ok());
            let fields = query
                .get("fieldSelector")
                .and_then(|s| FieldSelector::parse_any(s).ok());
            if let Some(name) = fields
                .as_ref()
                .filter(|_| labels_parse)
                .and_then(|f| f.requires_exact_match("metadata.name"))
                .filter(|name| path_segment_name_errors(name).is_empty())
            {
                info.name = name.to_string();
            }
        }
        if info.name.is_empty() && info.verb == "delete" {
            info.verb = "deletecollection".into();
        }
        info
    }
}

impl ApiError {
    /// 403 for a request RBAC does not grant, worded as kube-apiserver's
    /// `responsewriters.Forbidden` (`forbiddenMessage`) and `apierrors.NewForbidden` word
    /// it: `services "web" is forbidden: User "u" cannot patch resource "services/status"
    /// in API group "" in the namespace "default"`.
    pub fn forbidden(info: &RequestInfo, user: &str, reason: &str) -> ApiError {
        let action = if !info.is_resource_request {
            format!("User {user:?} cannot {} path {:?}", info.verb, info.path)
        } else {
            let resource = if info.subresource.is_empty() {
                info.resource.clone()
            } else {
                format!("{}/{}", info.resource, info.subresource)
            };
            let scope = if info.namespace.is_empty() {
                "at the cluster scope".to_string()
            } else {
                format!("in the namespace {:?}", info.namespace)
            };
            format!(
                "User {user:?} cannot {} resource {resource:?} in API group {:?} {scope}",
                info.verb, info.api_group
            )
        };
        let action = if reason.is_empty() {
            action
        } else {
            format!("{action}: {reason}")
        };
        let qualified = match (info.is_resource_request, info.api_group.as_str()) {
            (false, _) => String::new(),
            (true, "") => info.resource.clone(),
            (true, group) => format!("{}.{group}", info.resource),
        };
        let message = match (qualified.is_empty(), info.name.is_empty()) {
            (true, _) => format!("forbidden: {action}"),
            (false, true) => format!("{qualified} is forbidden: {action}"),
            (false, false) => format!("{qualified} {:?} is forbidden: {action}", info.name),
        };
        let mut details = json!({});
        if !info.resource.is_empty() {
            details["kind"] = json!(info.resource);
        }
        if !info.name.is_empty() {
            details["name"] = json!(info.name);
        }
        if !info.api_group.is_empty() {
            details["group"] = json!(info.api_group);
        }
        ApiError {
            code: 403,
            reason: "Forbidden",
            message,
            details: Some(details),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(method: Method, uri: &str) -> RequestInfo {
        RequestInfo::parse(&method, &uri.parse().unwrap())
    }

    #[test]
    fn request_info_follows_new_request_info() {
        let i = info(
            Method::PATCH,
            "/api/v1/namespaces/default/services/web/status",
        );
        assert!(i.is_resource_request);
        assert_eq!(
            (
                &*i.verb,
                &*i.api_group,
                &*i.namespace,
                &*i.resource,
                &*i.name,
                &*i.subresource
            ),
            ("patch", "", "default", "services", "web", "status")
        );
        let i = info(
            Method::GET,
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases?watch=true",
        );
        assert_eq!(
            (&*i.verb, &*i.api_group, &*i.resource),
            ("watch", "coordination.k8s.io", "leases")
        );
        let i = info(
            Method::GET,
            "/api/v1/nodes?fieldSelector=metadata.name%3Dn1",
        );
        assert_eq!((&*i.verb, &*i.name), ("list", "n1"));
        for (query, verb, name) in [
            ("fieldSelector=metadata.name%3D%3Dn1", "list", "n1"),
            ("fieldSelector=metadata.name%21%3Dn1", "list", ""),
            (
                "fieldSelector=spec.unschedulable%3Dfalse,metadata.name%3Dn1",
                "list",
                "n1",
            ),
            (
                "fieldSelector=metadata.name%3Dn2,metadata.name%3Dn1",
                "list",
                "n1",
            ),
            ("fieldSelector=metadata.name%3Da%25b", "list", ""),
            ("fieldSelector=metadata.name%3Dn1,oops", "list", ""),
            (
                "fieldSelector=metadata.name%3Dn1&labelSelector=a+in+b",
                "list",
                "",
            ),
            (
                "fieldSelector=metadata.name%3D%3Dn1&watch=yes",
                "watch",
                "n1",
            ),
            ("watch=False", "list", ""),
            ("watch=", "watch", ""),
        ] {
            let i = info(Method::GET, &format!("/api/v1/nodes?{query}"));
            assert_eq!((&*i.verb, &*i.name), (verb, name), "{query}");
        }
        let i = info(Method::DELETE, "/api/v1/namespaces/default/events");
        assert_eq!(i.verb, "deletecollection");
        let i = info(Method::GET, "/api/v1/namespaces/kube-system");
        assert_eq!(
            (&*i.resource, &*i.name, &*i.namespace),
            ("namespaces", "kube-system", "kube-system")
        );
        let i = info(Method::PUT, "/api/v1/namespaces/foo/finalize");
        assert_eq!(
            (&*i.resource, &*i.name, &*i.subresource),
            ("namespaces", "foo", "finalize")
        );
        let i = info(
            Method::POST,
            "/api/v1/namespaces/kube-system/serviceaccounts/ccm/token",
        );
        assert_eq!(
            (&*i.verb, &*i.resource, &*i.subresource),
            ("create", "serviceaccounts", "token")
        );
        for path in [
            "/api",
            "/api/v1",
            "/apis/rbac.authorization.k8s.io/v1",
            "/version",
            "/healthz",
        ] {
            let i = info(Method::GET, path);
            assert!(!i.is_resource_request, "{path}");
            assert_eq!(i.verb, "get");
        }
    }
}
