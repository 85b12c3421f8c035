//! Which Nodes may serve as load-balancer backends, decided like the Kubernetes service
//! controller: not being deleted, not excluded by label, not about to be removed by the
//! cluster autoscaler, and initialised (a providerID naming a VM).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Node, NodeSpec};

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

/// Reduces `node` to what [`is_eligible`] and [`eligible_set`] read: name, deletion
/// timestamp, the exclusion label, providerID and taints. The service controller's Node
/// store keeps only this, so it stays small whatever else the Nodes carry (images,
/// managed fields, conditions, other labels).
pub fn keep_eligibility_fields(node: &mut Node) {
    let metadata = std::mem::take(&mut node.metadata);
    node.metadata.name = metadata.name;
    node.metadata.resource_version = metadata.resource_version;
    node.metadata.deletion_timestamp = metadata.deletion_timestamp;
    node.metadata.labels = metadata.labels.and_then(|mut labels| {
        let excluded = labels.remove(EXCLUDE_LABEL)?;
        Some([(EXCLUDE_LABEL.to_string(), excluded)].into())
    });
    node.spec = node.spec.take().map(|spec| NodeSpec {
        provider_id: spec.provider_id,
        taints: spec.taints,
        ..NodeSpec::default()
    });
    node.status = None;
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
    use k8s_openapi::api::core::v1::{NodeStatus, Taint};
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
    fn trimmed_nodes_keep_their_eligibility() {
        let mut deleting = with_taint(node("d"), "other");
        deleting.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        let cases = [
            node("plain"),
            with_label(node("x"), "false"),
            with_label(node("x"), "true"),
            with_taint(node("t"), TO_BE_DELETED_TAINT),
            with_taint(node("u"), UNINITIALIZED_TAINT),
            deleting,
        ];
        for original in cases {
            let mut trimmed = original.clone();
            trimmed.metadata.annotations = Some([("a".to_string(), "b".to_string())].into());
            trimmed.status = Some(NodeStatus::default());
            keep_eligibility_fields(&mut trimmed);
            assert_eq!(is_eligible(&trimmed), is_eligible(&original));
            assert_eq!(eligible_set([&trimmed]), eligible_set([&original]));
            assert!(trimmed.status.is_none() && trimmed.metadata.annotations.is_none());
        }
        let mut labelled = with_label(node("l"), "true");
        labelled
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .insert("zone".into(), "z1".into());
        keep_eligibility_fields(&mut labelled);
        assert_eq!(
            labelled.metadata.labels.unwrap().len(),
            1,
            "other labels go"
        );
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
