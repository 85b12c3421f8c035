//! LoadBalancer Services over the fake cluster's store (no HTTP client needed, so the
//! test can act while controller processes come and go), and what "converged" means.

use cloudstack_ccm::cloud::loadbalancer::annotations;
use cloudstack_ccm::cloud::tags::TAG_SERVICE_UID;
use fake_apiserver::{Cluster, PatchType};
use serde_json::{Value, json};

/// The namespace of every test Service.
pub const NAMESPACE: &str = "default";
/// The finalizer the service controller puts on Services it manages.
pub const FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";

/// A LoadBalancer Service `name` with `(protocol, port, node port)` ports and annotations.
pub fn lb_service(name: &str, ports: &[(&str, i64, i64)], annotations: &[(&str, &str)]) -> Value {
    let annotations: serde_json::Map<String, Value> = annotations
        .iter()
        .map(|(k, v)| ((*k).to_string(), json!(v)))
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": { "name": name, "namespace": NAMESPACE, "annotations": annotations },
        "spec": { "type": "LoadBalancer", "ports": ports_json(ports) },
    })
}

/// The `spec.ports` list for `(protocol, port, node port)` triples.
pub fn ports_json(ports: &[(&str, i64, i64)]) -> Value {
    ports
        .iter()
        .map(|(protocol, port, node_port)| {
            json!({
                "name": format!("{}-{port}", protocol.to_ascii_lowercase()),
                "protocol": protocol,
                "port": port,
                "nodePort": node_port,
            })
        })
        .collect()
}

/// Creates a Service object.
pub fn create(cluster: &Cluster, service: Value) -> Value {
    cluster
        .create("services", Some(NAMESPACE), service)
        .expect("Service created")
}

/// Reads Service `name`, if it exists.
pub fn get(cluster: &Cluster, name: &str) -> Option<Value> {
    cluster.get("services", Some(NAMESPACE), name).ok()
}

/// Every Service of the test namespace.
pub fn list(cluster: &Cluster) -> Vec<Value> {
    cluster
        .list("services", Some(NAMESPACE))
        .expect("Services listed")
}

/// Merge-patches Service `name`.
pub fn patch(cluster: &Cluster, name: &str, patch: &Value) {
    cluster
        .patch(
            "services",
            Some(NAMESPACE),
            name,
            PatchType::Merge,
            patch,
            false,
        )
        .expect("Service patched");
}

/// Deletes Service `name` (only marked while it carries a finalizer).
pub fn delete(cluster: &Cluster, name: &str) {
    cluster
        .delete("services", Some(NAMESPACE), name)
        .expect("Service deleted");
}

/// `metadata.name`.
pub fn name(service: &Value) -> &str {
    service["metadata"]["name"].as_str().unwrap_or_default()
}

/// `metadata.uid`.
pub fn uid(service: &Value) -> &str {
    service["metadata"]["uid"].as_str().unwrap_or_default()
}

/// The first ingress IP.
pub fn ingress_ip(service: &Value) -> Option<&str> {
    service["status"]["loadBalancer"]["ingress"][0]["ip"].as_str()
}

/// The public-IP id the controller recorded on the Service.
pub fn recorded_ip_id(service: &Value) -> Option<&str> {
    service["metadata"]["annotations"][annotations::IP_ID.key].as_str()
}

/// Whether the Service asks for an internal load balancer (`…-internal: "true"`).
pub fn is_internal(service: &Value) -> bool {
    service["metadata"]["annotations"][annotations::INTERNAL.key] == "true"
}

/// The tier of internal rules the controller recorded on the Service.
pub fn recorded_internal_network(service: &Value) -> Option<&str> {
    service["metadata"]["annotations"][annotations::INTERNAL_NETWORK_ID.key].as_str()
}

/// Whether the Service carries the cleanup finalizer.
pub fn has_finalizer(service: &Value) -> bool {
    service["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| f.iter().any(|v| v == FINALIZER))
}

/// Whether the Service is marked for deletion.
pub fn is_deleting(service: &Value) -> bool {
    service["metadata"]["deletionTimestamp"].is_string()
}

/// The number of ports of the Service.
pub fn port_count(service: &Value) -> usize {
    service["spec"]["ports"].as_array().map_or(0, Vec::len)
}

/// The `(port, nodePort)` pairs of the Service's spec.
pub fn wanted_ports(service: &Value) -> std::collections::BTreeSet<(u64, u64)> {
    service["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| Some((p["port"].as_u64()?, p["nodePort"].as_u64()?)))
        .collect()
}

/// Whether a live Service is converged: finalizer, ingress IP and recorded IP id, and
/// (checked against the simulator) one active, tagged rule with members per port on that
/// IP, with the spec's public port and node port (a port change keeps the count of rules,
/// so counting alone would take a change not yet made for a converged Service).
pub fn is_converged(service: &Value, sim: &cloudstack_sim::SimServer) -> bool {
    converged(service, sim, false)
}

/// Like [`is_converged`], but an IP or rule whose job never finishes (fault injection)
/// counts although it stays `Allocating` or `Add`: nothing the controller does can finish it.
pub fn is_converged_allowing_stuck_jobs(service: &Value, sim: &cloudstack_sim::SimServer) -> bool {
    converged(service, sim, true)
}

/// IPs and rules whose association or creation job never finishes.
pub fn stuck_resources(state: &cloudstack_sim::state::State) -> Vec<String> {
    state
        .jobs
        .iter()
        .filter(|j| j.finish_ms.is_none())
        .filter_map(|j| match &j.action {
            cloudstack_sim::jobs::JobAction::CreateLbRule { rule_id } => Some(rule_id.clone()),
            cloudstack_sim::jobs::JobAction::AssociateIp { ip_id, .. } => Some(ip_id.clone()),
            _ => None,
        })
        .collect()
}

/// `<load-balancer name>-`: the prefix of every rule of the Service.
fn rule_prefix(service: &Value) -> String {
    format!(
        "{}-",
        cloudstack_ccm::cloud::loadbalancer::vocabulary::default_lb_name(uid(service))
    )
}

/// Whether resource `id` carries the Service's UID tag.
fn tagged_for(state: &cloudstack_sim::state::State, id: &str, service: &Value) -> bool {
    state
        .tags
        .iter()
        .any(|t| t.resource_id == id && t.key == TAG_SERVICE_UID && t.value == uid(service))
}

fn converged(service: &Value, sim: &cloudstack_sim::SimServer, allow_stuck: bool) -> bool {
    if is_deleting(service) || !has_finalizer(service) {
        return false;
    }
    if is_internal(service) {
        return internal_converged(service, sim);
    }
    let (Some(address), Some(ip_id)) = (ingress_ip(service), recorded_ip_id(service)) else {
        return false;
    };
    let prefix = rule_prefix(service);
    let want = port_count(service);
    let wanted = wanted_ports(service);
    sim.with_state(|state| {
        let stuck = if allow_stuck {
            stuck_resources(state)
        } else {
            Vec::new()
        };
        let active =
            |r: &cloudstack_sim::state::LbRule| r.state == "Active" || stuck.contains(&r.id);
        let ip_ok = state.ips.iter().any(|ip| {
            ip.id == ip_id
                && ip.address == address
                && (ip.state == "Allocated" || stuck.contains(&ip.id))
        });
        let rules: Vec<_> = state
            .lb_rules
            .iter()
            .filter(|r| r.name.starts_with(&prefix))
            .collect();
        let tagged = |id: &str| tagged_for(state, id, service);
        let ports: std::collections::BTreeSet<(u64, u64)> = rules
            .iter()
            .map(|r| (u64::from(r.public_port), u64::from(r.private_port)))
            .collect();
        // Firewall rules left by a plan a kill cut short (a removed port's, a second one
        // for a port) are the controller's to clean up before it has converged.
        let mut firewall_ports = std::collections::BTreeSet::new();
        let firewall_ok = state
            .firewall_rules
            .iter()
            .filter(|f| f.ip_id == ip_id)
            .all(|f| {
                let port = f.start_port.and_then(|p| u64::try_from(p).ok());
                port.is_some_and(|p| wanted.iter().any(|(public, _)| *public == p))
                    && firewall_ports.insert((f.protocol.clone(), port))
            });
        ip_ok
            && firewall_ok
            && rules.len() == want
            && ports == wanted
            && rules
                .iter()
                .all(|r| r.ip_id == ip_id && active(r) && !r.members.is_empty() && tagged(&r.id))
    })
}

/// Whether an internal Service is converged: finalizer, ingress address and recorded tier,
/// and one tagged internal rule with members per port on that address, with the spec's
/// port and node port; no public IP recorded.
fn internal_converged(service: &Value, sim: &cloudstack_sim::SimServer) -> bool {
    let (Some(address), Some(tier)) = (ingress_ip(service), recorded_internal_network(service))
    else {
        return false;
    };
    let prefix = rule_prefix(service);
    let wanted = wanted_ports(service);
    sim.with_state(|state| {
        let rules: Vec<_> = state
            .internal_lb_rules
            .iter()
            .filter(|r| r.name.starts_with(&prefix))
            .collect();
        let tagged = |id: &str| tagged_for(state, id, service);
        let ports: std::collections::BTreeSet<(u64, u64)> = rules
            .iter()
            .map(|r| (u64::from(r.source_port), u64::from(r.instance_port)))
            .collect();
        recorded_ip_id(service).is_none()
            && rules.len() == wanted.len()
            && ports == wanted
            && rules.iter().all(|r| {
                r.source_ip == address
                    && r.network_id == tier
                    && !r.members.is_empty()
                    && tagged(&r.id)
            })
    })
}

/// Whether a public Service on a tier with the internal load balancer only is settled as
/// refused: nothing reported or recorded, and no internal rule of its left.
pub fn is_refused_on_internal_tier(service: &Value, sim: &cloudstack_sim::SimServer) -> bool {
    let prefix = rule_prefix(service);
    has_finalizer(service)
        && ingress_ip(service).is_none()
        && recorded_internal_network(service).is_none()
        && recorded_ip_id(service).is_none()
        && sim.with_state(|s| {
            !s.internal_lb_rules
                .iter()
                .any(|r| r.name.starts_with(&prefix))
        })
}
