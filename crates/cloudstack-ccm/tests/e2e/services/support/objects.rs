//! LoadBalancer Service objects: building them and their patches, reading their status and
//! metadata, and letting a controller that should not act have its chance to.

use std::collections::BTreeMap;
use std::time::Duration;

use cloudstack_ccm::controllers::service;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use kube::api::ObjectMeta;
use serde_json::Value;

use super::NAMESPACE;

/// The first ingress IP of a Service.
pub fn ingress_ip(service: &Service) -> Option<String> {
    service
        .status
        .as_ref()?
        .load_balancer
        .as_ref()?
        .ingress
        .as_ref()?
        .first()?
        .ip
        .clone()
}

/// The first ingress entry's `ipMode`.
pub fn ingress_ip_mode(service: &Service) -> Option<String> {
    service
        .status
        .as_ref()?
        .load_balancer
        .as_ref()?
        .ingress
        .as_ref()?
        .first()?
        .ip_mode
        .clone()
}

/// An annotation of a Service.
pub fn annotation<'a>(service: &'a Service, key: &str) -> Option<&'a str> {
    service
        .metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// The Service's `LoadBalancerSupported` condition: (status, reason, message).
pub fn supported_condition(service: &Service) -> Option<(String, String, String)> {
    service
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == service::LOAD_BALANCER_SUPPORTED)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Whether the Service carries the cleanup finalizer.
pub fn has_finalizer(service: &Service) -> bool {
    service::finalizer::has_finalizer(service)
}

/// A LoadBalancer Service named `name` with `(protocol, port, node port)` ports.
pub fn lb_service(name: &str, ports: &[(&str, i32, i32)]) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(NAMESPACE.to_string()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ports: Some(
                ports
                    .iter()
                    .map(|(protocol, port, node_port)| ServicePort {
                        name: Some(format!("{}-{port}", protocol.to_ascii_lowercase())),
                        protocol: Some((*protocol).to_string()),
                        port: *port,
                        node_port: Some(*node_port),
                        ..ServicePort::default()
                    })
                    .collect(),
            ),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// Adds annotations to a Service under construction.
pub fn with_annotations(mut service: Service, annotations: &[(&str, &str)]) -> Service {
    let map = service
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new);
    for (key, value) in annotations {
        map.insert((*key).to_string(), (*value).to_string());
    }
    service
}

/// A JSON merge patch setting the Service's ports.
pub fn ports_patch(ports: &[(&str, i32, i32)]) -> Value {
    let ports: Vec<Value> = ports
        .iter()
        .map(|(protocol, port, node_port)| {
            serde_json::json!({
                "name": format!("{}-{port}", protocol.to_ascii_lowercase()),
                "protocol": protocol,
                "port": port,
                "nodePort": node_port,
            })
        })
        .collect();
    serde_json::json!({ "spec": { "ports": ports } })
}

/// Waits a little for a controller that should NOT act: lets a few reconciles happen.
pub async fn settle() {
    tokio::time::sleep(Duration::from_millis(300)).await;
}
