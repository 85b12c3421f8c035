//! The table of served resources: group, version, plural, kind, scope, verbs, short names and
//! the field selectors each one supports.

/// One served resource type.
#[derive(Debug, PartialEq, Eq)]
pub struct ResourceKind {
    /// API group (`""` for core).
    pub group: &'static str,
    /// API version within the group.
    pub version: &'static str,
    /// Plural resource name used in URLs.
    pub plural: &'static str,
    /// Singular resource name.
    pub singular: &'static str,
    /// Object kind.
    pub kind: &'static str,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// kubectl short names.
    pub short_names: &'static [&'static str],
    /// Whether a `/status` subresource exists (main writes then ignore `.status`).
    pub has_status: bool,
    /// Whether `PUT` on a missing object creates it.
    pub create_on_update: bool,
    /// Field selector labels beyond `metadata.name` and `metadata.namespace`.
    pub extra_field_labels: &'static [&'static str],
}

/// Verbs every served collection supports.
pub const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

impl ResourceKind {
    /// `apiVersion` of objects of this kind (`v1`, `coordination.k8s.io/v1`).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `plural` or `plural.group` as the real server names resources in messages.
    pub fn qualified_plural(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// Whether `label` is a supported field selector label.
    pub fn supports_field(&self, label: &str) -> bool {
        label == "metadata.name"
            || (label == "metadata.namespace" && self.namespaced)
            || self.extra_field_labels.contains(&label)
    }
}

/// Every served resource.
pub static RESOURCES: &[ResourceKind] = &[
    ResourceKind {
        group: "",
        version: "v1",
        plural: "namespaces",
        singular: "namespace",
        kind: "Namespace",
        namespaced: false,
        short_names: &["ns"],
        has_status: true,
        create_on_update: false,
        extra_field_labels: &["status.phase"],
    },
    ResourceKind {
        group: "",
        version: "v1",
        plural: "nodes",
        singular: "node",
        kind: "Node",
        namespaced: false,
        short_names: &["no"],
        has_status: true,
        create_on_update: false,
        extra_field_labels: &["spec.unschedulable"],
    },
    ResourceKind {
        group: "",
        version: "v1",
        plural: "services",
        singular: "service",
        kind: "Service",
        namespaced: true,
        short_names: &["svc"],
        has_status: true,
        create_on_update: false,
        extra_field_labels: &[],
    },
    ResourceKind {
        group: "",
        version: "v1",
        plural: "secrets",
        singular: "secret",
        kind: "Secret",
        namespaced: true,
        short_names: &[],
        has_status: false,
        create_on_update: false,
        // `type` as kube-apiserver's `SecretToSelectableFields` offers it
        extra_field_labels: &["type"],
    },
    ResourceKind {
        group: "",
        version: "v1",
        plural: "pods",
        singular: "pod",
        kind: "Pod",
        namespaced: true,
        short_names: &["po"],
        has_status: true,
        create_on_update: false,
        extra_field_labels: &["spec.nodeName", "status.phase", "status.podIP"],
    },
    // Endpoints: `pkg/registry/core/endpoint/strategy.go` allows create on update.
    ResourceKind {
        group: "",
        version: "v1",
        plural: "endpoints",
        singular: "endpoints",
        kind: "Endpoints",
        namespaced: true,
        short_names: &["ep"],
        has_status: false,
        create_on_update: true,
        extra_field_labels: &[],
    },
    ResourceKind {
        group: "",
        version: "v1",
        plural: "events",
        singular: "event",
        kind: "Event",
        namespaced: true,
        short_names: &["ev"],
        has_status: false,
        create_on_update: true,
        extra_field_labels: &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
    },
    ResourceKind {
        group: "events.k8s.io",
        version: "v1",
        plural: "events",
        singular: "event",
        kind: "Event",
        namespaced: true,
        short_names: &["ev"],
        has_status: false,
        create_on_update: true,
        extra_field_labels: &[
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "regarding.apiVersion",
            "regarding.resourceVersion",
            "regarding.fieldPath",
            "reason",
            "reportingController",
            "type",
        ],
    },
    ResourceKind {
        group: "coordination.k8s.io",
        version: "v1",
        plural: "leases",
        singular: "lease",
        kind: "Lease",
        namespaced: true,
        short_names: &[],
        has_status: false,
        create_on_update: true,
        extra_field_labels: &[],
    },
    ResourceKind {
        group: "",
        version: "v1",
        plural: "serviceaccounts",
        singular: "serviceaccount",
        kind: "ServiceAccount",
        namespaced: true,
        short_names: &["sa"],
        has_status: false,
        create_on_update: false,
        extra_field_labels: &[],
    },
    ResourceKind {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        plural: "clusterroles",
        singular: "clusterrole",
        kind: "ClusterRole",
        namespaced: false,
        short_names: &[],
        has_status: false,
        create_on_update: true,
        extra_field_labels: &[],
    },
    ResourceKind {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        plural: "clusterrolebindings",
        singular: "clusterrolebinding",
        kind: "ClusterRoleBinding",
        namespaced: false,
        short_names: &[],
        has_status: false,
        create_on_update: true,
        extra_field_labels: &[],
    },
    ResourceKind {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        plural: "roles",
        singular: "role",
        kind: "Role",
        namespaced: true,
        short_names: &[],
        has_status: false,
        create_on_update: true,
        extra_field_labels: &[],
    },
    ResourceKind {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        plural: "rolebindings",
        singular: "rolebinding",
        kind: "RoleBinding",
        namespaced: true,
        short_names: &[],
        has_status: false,
        create_on_update: true,
        extra_field_labels: &[],
    },
    // EndpointSlices: `pkg/registry/discovery/endpointslice/strategy.go` has no status
    // subresource and refuses create on update.
    ResourceKind {
        group: "discovery.k8s.io",
        version: "v1",
        plural: "endpointslices",
        singular: "endpointslice",
        kind: "EndpointSlice",
        namespaced: true,
        short_names: &[],
        has_status: false,
        create_on_update: false,
        extra_field_labels: &[],
    },
];

/// The resource served at `group`/`version` with the given plural.
pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static ResourceKind> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// Resolves a kubectl-style resource name (`nodes`, `svc`, `leases`,
/// `events.events.k8s.io`, `Service`) to a resource; core wins on ambiguity.
pub fn lookup(name: &str) -> Option<&'static ResourceKind> {
    if let Some(found) = RESOURCES.iter().find(|r| r.qualified_plural() == name) {
        return Some(found);
    }
    RESOURCES.iter().find(|r| {
        r.plural == name
            || r.singular == name
            || r.kind.eq_ignore_ascii_case(name)
            || r.short_names.contains(&name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_resolves_kubectl_names() {
        assert_eq!(lookup("svc").map(|r| r.kind), Some("Service"));
        assert_eq!(lookup("no").map(|r| r.plural), Some("nodes"));
        assert_eq!(lookup("events").map(|r| r.group), Some(""));
        assert_eq!(
            lookup("events.events.k8s.io").map(|r| r.group),
            Some("events.k8s.io")
        );
        assert_eq!(lookup("Lease").map(|r| r.plural), Some("leases"));
        assert_eq!(lookup("ep").map(|r| r.kind), Some("Endpoints"));
        assert_eq!(
            lookup("endpointslices").map(|r| r.group),
            Some("discovery.k8s.io")
        );
        assert!(lookup("deployments").is_none());
    }

    #[test]
    fn services_reject_spec_type_field_selector() {
        let svc = lookup("services").unwrap();
        assert!(svc.supports_field("metadata.name"));
        assert!(!svc.supports_field("spec.type"));
        assert!(
            !lookup("nodes")
                .unwrap()
                .supports_field("metadata.namespace")
        );
    }
}
