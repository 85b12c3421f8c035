//! Server-side defaulting the real API server applies on create and update: Service
//! cluster IPs, node ports and policies, Pod and Namespace phases, reset statuses, and the
//! defaults of a decoded RoleBinding or ClusterRoleBinding.

use serde_json::{Value, json};

use crate::object::meta_mut;
use crate::resources::ResourceKind;
use crate::validation::rbac::GROUP as RBAC_GROUP;

/// Allocators for Service cluster IPs and node ports.
#[derive(Debug)]
pub struct Allocators {
    next_cluster_ip: u32,
    next_node_port: u16,
}

impl Default for Allocators {
    fn default() -> Self {
        Self {
            next_cluster_ip: 10,
            next_node_port: 30000,
        }
    }
}

impl Allocators {
    fn cluster_ip(&mut self) -> String {
        let n = self.next_cluster_ip;
        self.next_cluster_ip += 1;
        format!("10.96.{}.{}", (n >> 8) & 0xff, n & 0xff)
    }

    fn node_port(&mut self) -> u16 {
        let port = self.next_node_port;
        self.next_node_port = if port >= 32767 { 30000 } else { port + 1 };
        port
    }
}

/// Resets the status the way the registry does on create.
pub fn reset_status_on_create(kind: &ResourceKind, object: &mut Value) {
    let status = match kind.kind {
        "Service" => json!({ "loadBalancer": {} }),
        "Pod" => json!({ "phase": "Pending" }),
        "Namespace" => json!({ "phase": "Active" }),
        _ => return,
    };
    object["status"] = status;
    if kind.kind == "Namespace" {
        let name = object["metadata"]["name"].clone();
        let labels = meta_mut(object)
            .entry("labels")
            .or_insert_with(|| json!({}));
        if let Some(labels) = labels.as_object_mut() {
            labels.insert("kubernetes.io/metadata.name".into(), name);
        }
    }
}

/// The v1 defaults every decoded object gets before it is validated. RoleBindings and
/// ClusterRoleBindings (`pkg/apis/rbac/v1/defaults.go`: `SetDefaults_RoleBinding`,
/// `SetDefaults_ClusterRoleBinding`, `SetDefaults_Subject`): an empty `roleRef.apiGroup`,
/// and the empty `apiGroup` of a `User` or `Group` subject, are `rbac.authorization.k8s.io`.
pub fn default_decoded(kind: &ResourceKind, object: &mut Value) {
    if kind.group != RBAC_GROUP || !matches!(kind.kind, "RoleBinding" | "ClusterRoleBinding") {
        return;
    }
    let empty = |v: Option<&Value>| v.and_then(Value::as_str).is_none_or(str::is_empty);
    if object.get("roleRef").is_none_or(Value::is_null) {
        object["roleRef"] = json!({});
    }
    if let Some(role_ref) = object.get_mut("roleRef").and_then(Value::as_object_mut)
        && empty(role_ref.get("apiGroup"))
    {
        role_ref.insert("apiGroup".into(), json!(RBAC_GROUP));
    }
    let subjects = object.get_mut("subjects").and_then(Value::as_array_mut);
    for subject in subjects.into_iter().flatten() {
        let Some(subject) = subject.as_object_mut() else {
            continue;
        };
        let person = matches!(
            subject.get("kind").and_then(Value::as_str),
            Some("User" | "Group")
        );
        if person && empty(subject.get("apiGroup")) {
            subject.insert("apiGroup".into(), json!(RBAC_GROUP));
        }
    }
}

/// Fills defaulted fields; `previous` is the stored object on update.
pub fn apply_defaults(
    kind: &ResourceKind,
    object: &mut Value,
    previous: Option<&Value>,
    allocators: &mut Allocators,
) {
    if kind.kind == "Service" {
        default_service(object, previous, allocators);
    }
}

fn default_service(object: &mut Value, previous: Option<&Value>, allocators: &mut Allocators) {
    if !object.get("spec").is_some_and(Value::is_object) {
        object["spec"] = json!({});
    }
    let previous_spec = previous.and_then(|p| p.get("spec"));
    let spec = &mut object["spec"];
    if spec.get("type").is_none() {
        spec["type"] = json!("ClusterIP");
    }
    let service_type = spec["type"].as_str().unwrap_or("ClusterIP").to_string();
    if spec.get("sessionAffinity").is_none() {
        spec["sessionAffinity"] = json!("None");
    }
    if spec.get("internalTrafficPolicy").is_none() {
        spec["internalTrafficPolicy"] = json!("Cluster");
    }
    if service_type != "ExternalName" {
        let kept_ip = previous_spec.and_then(|p| p.get("clusterIP")).cloned();
        if spec
            .get("clusterIP")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            let ip = kept_ip.unwrap_or_else(|| json!(allocators.cluster_ip()));
            spec["clusterIP"] = ip;
        }
        if spec.get("clusterIPs").is_none() {
            spec["clusterIPs"] = json!([spec["clusterIP"].clone()]);
        }
        if spec.get("ipFamilies").is_none() {
            spec["ipFamilies"] = json!(["IPv4"]);
        }
        if spec.get("ipFamilyPolicy").is_none() {
            spec["ipFamilyPolicy"] = json!("SingleStack");
        }
    }
    let needs_node_ports = service_type == "NodePort" || service_type == "LoadBalancer";
    if needs_node_ports && spec.get("externalTrafficPolicy").is_none() {
        spec["externalTrafficPolicy"] = json!("Cluster");
    }
    if service_type == "LoadBalancer" && spec.get("allocateLoadBalancerNodePorts").is_none() {
        spec["allocateLoadBalancerNodePorts"] = json!(true);
    }
    let previous_ports: Vec<Value> = previous_spec
        .and_then(|p| p.get("ports"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for port in ports {
            if port.get("protocol").is_none() {
                port["protocol"] = json!("TCP");
            }
            if port.get("targetPort").is_none() {
                port["targetPort"] = port.get("port").cloned().unwrap_or(Value::Null);
            }
            if needs_node_ports && port.get("nodePort").is_none() {
                let kept = previous_ports
                    .iter()
                    .find(|p| {
                        p.get("port") == port.get("port")
                            && p.get("protocol") == port.get("protocol")
                    })
                    .and_then(|p| p.get("nodePort"))
                    .cloned();
                port["nodePort"] = kept.unwrap_or_else(|| json!(allocators.node_port()));
            }
        }
    }
}
