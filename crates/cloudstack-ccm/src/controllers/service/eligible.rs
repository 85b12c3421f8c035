//! Which Nodes may serve as load-balancer backends, decided like the Kubernetes service
//! controller: not being deleted, not carrying the exclusion label (whatever its value),
//! not about to be removed by the cluster autoscaler, and initialised (a providerID naming
//! a VM).

use std::collections::BTreeSet;

use crate::controllers::node::taints;
use crate::controllers::node_cache::CachedNode;

use crate::controllers::node_vocabulary::{
    EXCLUDE_LABEL, TO_BE_DELETED_TAINT, UNINITIALIZED_TAINT,
};

/// The Node's `spec.providerID`.
fn provider_id(node: &CachedNode) -> Option<&str> {
    node.spec.as_ref()?.provider_id.as_deref()
}

/// Whether `node` may be a backend of a load balancer. A Node whose VM cannot be found is
/// dropped later, when its providerID is resolved.
pub(crate) fn is_eligible(node: &CachedNode) -> bool {
    let metadata = &node.metadata;
    if metadata.deletion_timestamp.is_some() {
        return false;
    }
    let excluded = metadata
        .labels
        .as_ref()
        .is_some_and(|labels| labels.contains_key(EXCLUDE_LABEL));
    if excluded {
        return false;
    }
    let tainted = taints(node)
        .iter()
        .any(|taint| taint.key == TO_BE_DELETED_TAINT || taint.key == UNINITIALIZED_TAINT);
    let has_provider_id = provider_id(node).is_some_and(|id| !id.is_empty());
    !tainted && has_provider_id
}

/// How long after its creation a Node with the uninitialized taint counts as being
/// initialised (after that, it is a Node that will not be initialised, e.g. without a VM).
pub(crate) const INITIALISATION_GRACE: jiff::SignedDuration = jiff::SignedDuration::from_secs(300);

/// Whether `node` is waiting for the cloud-node controller: it carries the uninitialized
/// taint (the kubelet's `--cloud-provider=external`), is not being deleted, and was
/// created less than [`INITIALISATION_GRACE`] before `now` (or has no creation time).
pub(crate) fn is_initialising(node: &CachedNode, now: jiff::Timestamp) -> bool {
    let metadata = &node.metadata;
    let tainted = taints(node)
        .iter()
        .any(|taint| taint.key == UNINITIALIZED_TAINT);
    let recent = metadata
        .creation_timestamp
        .as_ref()
        .is_none_or(|created| now.duration_since(created.0) < INITIALISATION_GRACE);
    metadata.deletion_timestamp.is_none() && tainted && recent
}

/// One eligible Node, reduced to what load balancing needs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct EligibleNode {
    /// The Node's name.
    pub name: String,
    /// The Node's `spec.providerID`.
    pub provider_id: String,
}

/// The set of eligible Nodes; two sets compare equal when the same Nodes with the same
/// providerIDs are eligible, which is what decides whether Services must be re-synced.
pub(crate) type EligibleSet = BTreeSet<EligibleNode>;

/// The eligible subset of `nodes`.
pub(crate) fn eligible_set<'a>(nodes: impl IntoIterator<Item = &'a CachedNode>) -> EligibleSet {
    nodes
        .into_iter()
        .filter(|node| is_eligible(node))
        .filter_map(|node| {
            Some(EligibleNode {
                name: node.metadata.name.clone()?,
                provider_id: provider_id(node)?.to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::node_cache::{CachedNode, CachedNodeSpec};
    use k8s_openapi::api::core::v1::Taint;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn node(name: &str) -> CachedNode {
        let mut node = CachedNode::default();
        node.metadata.name = Some(name.to_string());
        node.spec = Some(CachedNodeSpec {
            provider_id: Some(format!("external-cloudstack://{name}")),
            ..CachedNodeSpec::default()
        });
        node
    }

    fn with_label(mut node: CachedNode, value: &str) -> CachedNode {
        node.metadata.labels = Some([(EXCLUDE_LABEL.to_string(), value.to_string())].into());
        node
    }

    fn with_taint(mut node: CachedNode, key: &str) -> CachedNode {
        let spec = node.spec.get_or_insert_with(CachedNodeSpec::default);
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
        no_provider.spec = Some(CachedNodeSpec::default());
        let cases = [
            (node("plain"), true),
            (with_label(node("x"), "false"), false),
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
    fn initialising_nodes_are_told_apart() {
        let now = jiff::Timestamp::UNIX_EPOCH + jiff::SignedDuration::from_hours(1000);
        let created = |mut node: CachedNode, ago: jiff::SignedDuration| {
            node.metadata.creation_timestamp = Some(Time(now - ago));
            node
        };
        let mut deleting = with_taint(node("d"), UNINITIALIZED_TAINT);
        deleting.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        let mut no_provider = node("p");
        no_provider.spec = Some(CachedNodeSpec::default());
        let tainted = || with_taint(node("u"), UNINITIALIZED_TAINT);
        let cases = [
            (node("plain"), false),
            (tainted(), true),
            (
                created(tainted(), jiff::SignedDuration::from_secs(10)),
                true,
            ),
            (created(tainted(), INITIALISATION_GRACE * 2), false),
            (no_provider, false),
            (with_label(node("x"), "true"), false),
            (deleting, false),
        ];
        for (node, want) in cases {
            assert_eq!(is_initialising(&node, now), want, "{:?}", node.metadata);
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
