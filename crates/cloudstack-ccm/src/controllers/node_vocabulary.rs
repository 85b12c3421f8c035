//! The Node vocabulary the controllers read and write: taints, labels, annotations and
//! conditions, named once here so that the Node cache, which keeps exactly these, and
//! every controller import them from one place (no controller imports another for a name).

/// Taint the kubelet sets until a cloud controller initialises the node.
pub const UNINITIALIZED_TAINT: &str = "node.cloudprovider.kubernetes.io/uninitialized";
/// Taint put on nodes whose VM is shut down.
pub const SHUTDOWN_TAINT: &str = "node.cloudprovider.kubernetes.io/shutdown";
/// Taint the cluster autoscaler puts on a Node it is about to delete.
pub(crate) const TO_BE_DELETED_TAINT: &str = "ToBeDeletedByClusterAutoscaler";
/// Label that removes a Node from every load balancer by its presence, whatever its value
/// (`"false"` too), as the Kubernetes service controller reads it.
pub const EXCLUDE_LABEL: &str = "node.kubernetes.io/exclude-from-external-load-balancers";
/// Annotation in which the kubelet passes `--node-ip`.
pub(crate) const PROVIDED_NODE_IP_ANNOTATION: &str = "alpha.kubernetes.io/provided-node-ip";
/// The Node condition the route controller owns.
pub(crate) const NETWORK_UNAVAILABLE: &str = "NetworkUnavailable";
/// Instance-type label (GA).
pub(crate) const LABEL_INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
/// Instance-type label (beta twin).
pub(crate) const LABEL_INSTANCE_TYPE_BETA: &str = "beta.kubernetes.io/instance-type";
/// Zone label (GA).
pub(crate) const LABEL_ZONE: &str = "topology.kubernetes.io/zone";
/// Zone label (beta twin).
pub(crate) const LABEL_ZONE_BETA: &str = "failure-domain.beta.kubernetes.io/zone";
/// Region label (GA).
pub(crate) const LABEL_REGION: &str = "topology.kubernetes.io/region";
/// Region label (beta twin).
pub(crate) const LABEL_REGION_BETA: &str = "failure-domain.beta.kubernetes.io/region";
