//! The Kubernetes checks: the controller's RBAC (SelfSubjectAccessReview, or a
//! SubjectAccessReview for `--as` when an admin runs the check), the leader Lease and who
//! holds it, and the LoadBalancer Services the controller would take.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec, SubjectAccessReview,
    SubjectAccessReviewSpec, SubjectAccessReviewStatus,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::Api;
use kube::api::{ListParams, PostParams};

use super::{Check, Group, Status};
use crate::cli::{CheckArgs, ManagerArgs};

/// A Node's name and providerID.
pub(super) struct NodeNames {
    /// `metadata.name`.
    pub name: String,
    /// `spec.providerID`.
    pub provider_id: Option<String>,
}

/// The cluster's Nodes.
pub(super) async fn node_names(kube: &kube::Client) -> Result<Vec<NodeNames>, String> {
    let nodes = Api::<Node>::all(kube.clone())
        .list(&ListParams::default())
        .await
        .map_err(|error| format!("cannot list the Nodes: {error}"))?;
    Ok(nodes
        .items
        .into_iter()
        .filter_map(|node| {
            Some(NodeNames {
                name: node.metadata.name?,
                provider_id: node.spec.and_then(|s| s.provider_id),
            })
        })
        .collect())
}

/// One permission the controllers need.
struct Permission {
    verb: &'static str,
    group: &'static str,
    resource: &'static str,
    subresource: &'static str,
    namespace: Option<&'static str>,
    /// What needs it.
    why: &'static str,
    /// A missing one stops the controller (else it only loses a feature).
    required: bool,
}

const fn permission(
    verb: &'static str,
    group: &'static str,
    resource: &'static str,
    why: &'static str,
) -> Permission {
    Permission {
        verb,
        group,
        resource,
        subresource: "",
        namespace: None,
        why,
        required: true,
    }
}

/// What the controllers ask of the API server (`deploy/rbac.yaml` grants each).
const PERMISSIONS: &[Permission] = &[
    permission("list", "", "nodes", "the Node cache"),
    permission("watch", "", "nodes", "the Node cache"),
    permission("patch", "", "nodes", "Node initialisation"),
    permission(
        "delete",
        "",
        "nodes",
        "node-lifecycle: Nodes whose VM is gone",
    ),
    Permission {
        subresource: "status",
        ..permission("patch", "", "nodes", "Node addresses and conditions")
    },
    permission("list", "", "services", "the service controller"),
    permission("watch", "", "services", "the service controller"),
    permission("patch", "", "services", "the finalizer and the IP records"),
    Permission {
        subresource: "status",
        ..permission("patch", "", "services", "the load balancer's ingress")
    },
    permission(
        "create",
        "",
        "events",
        "Events (core v1, as client-go's recorder)",
    ),
    permission("patch", "", "events", "Events (counting repeats)"),
    permission(
        "list",
        "discovery.k8s.io",
        "endpointslices",
        "externalTrafficPolicy: Local",
    ),
    Permission {
        namespace: Some("kube-system"),
        ..permission("get", "coordination.k8s.io", "leases", "leader election")
    },
    Permission {
        namespace: Some("kube-system"),
        ..permission("update", "coordination.k8s.io", "leases", "leader election")
    },
    Permission {
        required: false,
        ..permission(
            "get",
            "",
            "secrets",
            "TLS termination from a kubernetes.io/tls Secret",
        )
    },
    Permission {
        required: false,
        ..permission(
            "create",
            "authentication.k8s.io",
            "tokenreviews",
            "/metrics with delegated authentication",
        )
    },
    Permission {
        required: false,
        ..permission(
            "create",
            "authorization.k8s.io",
            "subjectaccessreviews",
            "/metrics with delegated authorization",
        )
    },
];

/// The Lease the controller (and the Go provider) hold.
const LEASE: &str = "cloud-controller-manager";

/// Runs the Kubernetes checks.
pub(super) async fn check(kube: &kube::Client, args: &ManagerArgs, check: &CheckArgs) -> Group {
    let mut checks = Vec::new();
    checks.extend(rbac(kube, check.as_user.as_deref()).await);
    checks.push(lease(kube).await);
    checks.push(services(kube, args).await);
    Group {
        name: "Kubernetes",
        checks,
    }
}

/// The RBAC lines: one per missing permission, one line when all are granted.
async fn rbac(kube: &kube::Client, as_user: Option<&str>) -> Vec<Check> {
    let who = as_user.unwrap_or("the kubeconfig's user");
    let mut missing = Vec::new();
    for permission in PERMISSIONS {
        let attributes = ResourceAttributes {
            verb: Some(permission.verb.into()),
            group: Some(permission.group.into()),
            resource: Some(permission.resource.into()),
            subresource: (!permission.subresource.is_empty())
                .then(|| permission.subresource.into()),
            namespace: permission.namespace.map(Into::into),
            ..Default::default()
        };
        let status = match review(kube, as_user, attributes).await {
            Ok(status) => status,
            Err(error) => {
                return vec![
                    Check::new("RBAC", Status::Skip, format!("cannot ask the API server: {error}"))
                        .hint("an admin can check the controller's ServiceAccount with --as system:serviceaccount:kube-system:cloud-controller-manager"),
                ];
            }
        };
        if !status.allowed {
            missing.push(permission);
        }
    }
    if missing.is_empty() {
        return vec![Check::new(
            "RBAC",
            Status::Ok,
            format!(
                "{who} may do everything the controllers ask ({} checks)",
                PERMISSIONS.len()
            ),
        )];
    }
    missing
        .into_iter()
        .map(|p| {
            let resource = if p.subresource.is_empty() {
                p.resource.to_string()
            } else {
                format!("{}/{}", p.resource, p.subresource)
            };
            let group = if p.group.is_empty() { "core" } else { p.group };
            Check::new(
                format!("RBAC {} {resource}", p.verb),
                if p.required { Status::Fail } else { Status::Warn },
                format!("{who} may not {} {resource} ({group}): needed for {}", p.verb, p.why),
            )
            .hint("apply deploy/rbac.yaml (or the Helm chart's RBAC) for the controller's ServiceAccount")
            .doc("docs/configuration.md")
        })
        .collect()
}

/// Asks whether the requester (or `as_user`) may do what `attributes` say.
async fn review(
    kube: &kube::Client,
    as_user: Option<&str>,
    attributes: ResourceAttributes,
) -> Result<SubjectAccessReviewStatus, kube::Error> {
    let status = match as_user {
        None => {
            let review = SelfSubjectAccessReview {
                spec: SelfSubjectAccessReviewSpec {
                    resource_attributes: Some(attributes),
                    ..Default::default()
                },
                ..Default::default()
            };
            Api::<SelfSubjectAccessReview>::all(kube.clone())
                .create(&PostParams::default(), &review)
                .await?
                .status
        }
        Some(user) => {
            let review = SubjectAccessReview {
                spec: SubjectAccessReviewSpec {
                    resource_attributes: Some(attributes),
                    user: Some(user.to_string()),
                    groups: Some(groups_of(user)),
                    ..Default::default()
                },
                ..Default::default()
            };
            Api::<SubjectAccessReview>::all(kube.clone())
                .create(&PostParams::default(), &review)
                .await?
                .status
        }
    };
    Ok(status.unwrap_or_default())
}

/// The groups the API server gives `user` when it authenticates (a ServiceAccount's
/// token: `system:serviceaccounts`, `system:serviceaccounts:<namespace>`).
fn groups_of(user: &str) -> Vec<String> {
    let mut groups = vec!["system:authenticated".to_string()];
    if let Some(rest) = user.strip_prefix("system:serviceaccount:")
        && let Some((namespace, _)) = rest.split_once(':')
    {
        groups.push("system:serviceaccounts".into());
        groups.push(format!("system:serviceaccounts:{namespace}"));
    }
    groups
}

/// Who holds the leader Lease (another controller, such as the Go provider, would keep
/// ours waiting).
async fn lease(kube: &kube::Client) -> Check {
    let leases = Api::<Lease>::namespaced(kube.clone(), "kube-system");
    let lease = match leases.get_opt(LEASE).await {
        Ok(lease) => lease,
        Err(error) => return Check::new("leader Lease", Status::Skip, error.to_string()),
    };
    let Some(spec) = lease.and_then(|l| l.spec) else {
        return Check::new(
            "leader Lease",
            Status::Ok,
            "kube-system/cloud-controller-manager is free",
        );
    };
    let holder = spec.holder_identity.unwrap_or_default();
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(15));
    let live = spec.renew_time.is_some_and(|renewed| {
        renewed.0.as_second() + duration > jiff::Timestamp::now().as_second()
    });
    if holder.is_empty() || !live {
        return Check::new(
            "leader Lease",
            Status::Ok,
            "kube-system/cloud-controller-manager is free or expired",
        );
    }
    Check::new(
        "leader Lease",
        Status::Warn,
        format!("kube-system/cloud-controller-manager is held by {holder} and renewed"),
    )
    .hint("another controller (the Go provider, or a running replica of ours) leads: ours waits until it stops; scale the old Deployment to 0 when swapping the image")
    .doc("docs/migration.md")
}

/// The LoadBalancer Services the controller would serve, and those of another class.
async fn services(kube: &kube::Client, args: &ManagerArgs) -> Check {
    let listed = match Api::<Service>::all(kube.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(listed) => listed.items,
        Err(error) => return Check::new("Services", Status::Skip, error.to_string()),
    };
    let load_balancers: Vec<&Service> = listed
        .iter()
        .filter(|s| s.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer"))
        .collect();
    let ours = load_balancers
        .iter()
        .filter(|s| {
            let class = s
                .spec
                .as_ref()
                .and_then(|s| s.load_balancer_class.as_deref());
            class.is_none() || class == args.load_balancer_class.as_deref()
        })
        .count();
    Check::new(
        "Services",
        Status::Ok,
        format!(
            "{} LoadBalancer Service(s): {ours} for this controller, {} of another loadBalancerClass",
            load_balancers.len(),
            load_balancers.len() - ours
        ),
    )
}
