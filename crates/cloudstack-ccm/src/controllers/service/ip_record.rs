//! What the controller records on a Service (annotations) so a crash never leaks what it
//! makes: the public IP of a load balancer (the claimed address before it is associated,
//! then the IP id as soon as it is known and before its association finishes), and the
//! tier of an internal load balancer before its first rule is created.

use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Service;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::{Map, Value, json};

use crate::cloud::loadbalancer::annotations;
use crate::cloud::loadbalancer::ip_claim::{IpRecorder, RecordError, RecordedIp};

/// Writes the IP id (and whether we associated it, and the network) into the Service's
/// annotations with a merge patch.
pub(crate) struct AnnotationIpRecorder {
    api: Api<Service>,
    name: String,
}

impl AnnotationIpRecorder {
    /// A recorder for `service`.
    pub fn new(api: Api<Service>, service: &Service) -> Self {
        Self {
            api,
            name: service.name_any(),
        }
    }
}

/// The annotations that record `ip`.
pub fn ip_annotations(ip: &RecordedIp) -> Map<String, Value> {
    let mut values = Map::new();
    values.insert(annotations::IP_ID.key.to_string(), json!(ip.ip_id));
    if ip.associated_by_controller {
        values.insert(
            annotations::IP_ASSOCIATED_BY_CONTROLLER.key.to_string(),
            json!("true"),
        );
    }
    if let Some(network_id) = &ip.network_id {
        values.insert(annotations::NETWORK_ID.key.to_string(), json!(network_id));
    }
    values
}

impl AnnotationIpRecorder {
    /// Merges `annotations` into the Service's; an error names `what` was recorded.
    async fn patch_annotations(&self, annotations: Value, what: String) -> Result<(), RecordError> {
        let patch = json!({ "metadata": { "annotations": annotations } });
        self.api
            .patch(&self.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(drop)
            .map_err(|err| RecordError {
                action: format!("{what} on Service {}", self.name),
                source: Box::new(err),
            })
    }
}

/// The annotation values that remove a public IP's record: its id, the
/// associated-by-controller flag and the claim (the network stays: it may be the user's
/// `network-id` annotation).
fn no_public_ip() -> Value {
    json!({
        annotations::IP_ID.key: null,
        annotations::IP_ASSOCIATED_BY_CONTROLLER.key: null,
        annotations::IP_CLAIM.key: null,
    })
}

impl AnnotationIpRecorder {
    /// Records the tier of the Service's internal rules (and the network the load
    /// balancer lives in), before the first is created; `None` removes the record once
    /// they are all deleted.
    pub async fn record_internal_network(
        &self,
        network_id: Option<&str>,
    ) -> Result<(), RecordError> {
        let mut values = Map::new();
        values.insert(
            annotations::INTERNAL_NETWORK_ID.key.to_string(),
            json!(network_id),
        );
        if let Some(network_id) = network_id {
            values.insert(annotations::NETWORK_ID.key.to_string(), json!(network_id));
        }
        self.patch_annotations(
            Value::Object(values),
            format!("recording the internal load balancer's tier {network_id:?}"),
        )
        .await
    }

    /// Removes the record of a public IP the Service no longer has (it became internal
    /// and its public load balancer was deleted).
    pub async fn forget_public_ip(&self) -> Result<(), RecordError> {
        self.patch_annotations(no_public_ip(), "forgetting the public IP".to_string())
            .await
    }
}

impl IpRecorder for AnnotationIpRecorder {
    fn record<'a>(&'a self, ip: &'a RecordedIp) -> BoxFuture<'a, Result<(), RecordError>> {
        self.patch_annotations(
            Value::Object(ip_annotations(ip)),
            format!("recording public IP {}", ip.ip_id),
        )
        .boxed()
    }

    fn claim<'a>(
        &'a self,
        address: Option<std::net::IpAddr>,
    ) -> BoxFuture<'a, Result<(), RecordError>> {
        let value = address.map(|a| a.to_string());
        self.patch_annotations(
            json!({ annotations::IP_CLAIM.key: value }),
            format!("recording the claim of public IP {address:?}"),
        )
        .boxed()
    }

    /// Removes the IP id, the associated-by-controller flag and the claim (the network
    /// stays: it may be the user's `network-id` annotation).
    fn forget<'a>(&'a self, ip: &'a RecordedIp) -> BoxFuture<'a, Result<(), RecordError>> {
        self.patch_annotations(no_public_ip(), format!("forgetting public IP {}", ip.ip_id))
            .boxed()
    }
}
