//! Which Nodes may serve as load-balancer backends, decided like the Kubernetes service
//! controller: not being deleted, not excluded by label, not about to be removed by the
//! cluster autoscaler, and initialised (a providerID naming a VM).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Node;

/// Label that removes a Node from every load balancer (any value but `"false"` excludes).
pub const EXCLUDE_LABEL: &str = "node.kubernetes.io/exclude-from-external-load-balancers";
/// Taint the cluster autoscaler puts on a Node it is about to delete.
pub const TO_BE_DELETED_TAINT: &str = "ToBeDeletedByClusterAutoscaler";
/// Taint a Node carries until the cloud-node controller has initialised it.
pub const UNINITIALIZED_TAINT: &str = "node.cloudprovider.kubernetes.io/uninitialized";

/// Whether `node` may be a backend of a load balancer. A Node whose VM cannot be found is
/// dropped later, when its providerID is resolved.
pub fn is_eligible(node: &Node) -> bool {
    if node.metadata.deletion_timestamp.is_some() {
        return false;
    }
    let excluded = node
        .metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get(EXCLUDE_LABEL))
        .is_some_and(|value| value != "false");
    if excluded {
        return false;
    }
    let spec = node.spec.as_ref();
    let tainted = spec
        .and_then(|spec| spec.taints.as_ref())
        .is_some_and(|taints| {
            taints
                .iter()
                .any(|taint| taint.key == TO_BE_DELETED_TAINT || taint.key == UNINITIALIZED_TAINT)
        });
    let has_provider_id = spec
        .and_then(|spec| spec.provider_id.as_deref())
        .is_some_and(|id| !id.is_empty());
    !tainted && has_provider_id
}

/// One eligible Node, reduced to what load balancing needs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EligibleNode {
    /// The Node's name.
    pub name: String,
    /// The Node's `spec.providerID`.
    pub provider_id: String,
}

/// The set of eligible Nodes; two sets compare equal when the same Nodes with the same
/// providerIDs are eligible, which is what decides whether Services must be re-synced.
pub type EligibleSet = BTreeSet<EligibleNode>;

/// The eligible subset of `nodes`.
pub fn eligible_set<'a>(nodes: impl IntoIterator<Item = &'a Node>) -> EligibleSet {
    nodes
        .into_iter()
        .filter(|node| is_eligible(node))
        .filter_map(|node| {
            Some(EligibleNode {
                name: node.metadata.name.clone()?,
                provider_id: node.spec.as_ref()?.provider_id.clone()?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeSpec, Taint};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn node(name: &str) -> Node {
        let mut node = Node::default();
        node.metadata.name = Some(name.to_string());
        node.spec = Some(NodeSpec {
            provider_id: Some(format!("external-cloudstack://{name}")),
            ..NodeSpec::default()
        });
        node
    }

    fn with_label(mut node: Node, value: &str) -> Node {
        node.metadata.labels = Some([(EXCLUDE_LABEL.to_string(), value.to_string())].into());
        node
    }

    fn with_taint(mut node: Node, key: &str) -> Node {
        let spec = node.spec.get_or_insert_with(NodeSpec::default);
        spec.taints = Some(vec![Taint {
            key: key.to_string(),
            effect: "NoSchedule".to_string(),
            ..Taint::default()
        }]);
        node
    }

    #[test]
    fn eligibility_follows_the_kubernetes_service_controller() {
        let mut deleting = node("d");
        deleting.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        let mut no_provider = node("p");
        no_provider.spec = Some(NodeSpec::default());
        let cases = [
            (node("plain"), true),
            (with_label(node("x"), "false"), true),
            (with_label(node("x"), "true"), false),
            (with_label(node("x"), ""), false),
            (with_taint(node("t"), TO_BE_DELETED_TAINT), false),
            (with_taint(node("u"), UNINITIALIZED_TAINT), false),
            (with_taint(node("o"), "other"), true),
            (deleting, false),
            (no_provider, false),
        ];
        for (node, want) in cases {
            assert_eq!(is_eligible(&node), want, "{:?}", node.metadata);
        }
    }

    #[test]
    fn eligible_set_changes_only_with_eligibility() {
        let a = node("a");
        let b = node("b");
        let excluded = with_label(node("c"), "yes");
        let before = eligible_set([&a, &b]);
        assert_eq!(before, eligible_set([&a, &b, &excluded]));
        assert_ne!(before, eligible_set([&a]));
        let names: Vec<_> = before.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
    }
}
