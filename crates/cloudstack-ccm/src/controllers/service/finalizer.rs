//! Which Services we load-balance, and the cleanup finalizer that keeps a Service until
//! its CloudStack objects are gone.

use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::cloud::loadbalancer::spec::{self, SpecOptions};

/// The finalizer the Kubernetes service controller (and the Go CCM) put on Services with a
/// load balancer.
pub const FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";

/// Whether `service` asks for a load balancer from us and is not being deleted.
pub(crate) fn wants_load_balancer(service: &Service, options: &SpecOptions) -> bool {
    service.metadata.deletion_timestamp.is_none() && spec::wants_load_balancer(service, options)
}

/// Whether `service` carries the cleanup finalizer.
pub fn has_finalizer(service: &Service) -> bool {
    has_named(service, FINALIZER)
}

/// Adds the finalizer with a JSON patch guarded by a `test` of the current list, so a
/// concurrent change of the finalizers makes the patch fail instead of losing one.
pub async fn add(api: &Api<Service>, service: &Service) -> Result<Service, kube::Error> {
    add_named(api, service, FINALIZER).await
}

/// Removes the finalizer (if present) with a guarded JSON patch.
pub async fn remove(api: &Api<Service>, service: &Service) -> Result<(), kube::Error> {
    remove_named(api, service, FINALIZER).await
}

/// Whether `service` carries the finalizer `finalizer`.
pub(crate) fn has_named(service: &Service, finalizer: &str) -> bool {
    service
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(|list| list.iter().any(|f| f == finalizer))
}

/// [`add`] for the finalizer `finalizer`.
pub(crate) async fn add_named(
    api: &Api<Service>,
    service: &Service,
    finalizer: &str,
) -> Result<Service, kube::Error> {
    let name = service.metadata.name.as_deref().unwrap_or_default();
    let patch = match service.metadata.finalizers.as_ref() {
        None => json!([
            { "op": "test", "path": "/metadata/finalizers", "value": null },
            { "op": "add", "path": "/metadata/finalizers", "value": [finalizer] },
        ]),
        Some(current) => json!([
            { "op": "test", "path": "/metadata/finalizers", "value": current },
            { "op": "add", "path": "/metadata/finalizers/-", "value": finalizer },
        ]),
    };
    json_patch(api, name, patch).await
}

/// [`remove`] for the finalizer `finalizer`.
pub(crate) async fn remove_named(
    api: &Api<Service>,
    service: &Service,
    finalizer: &str,
) -> Result<(), kube::Error> {
    let name = service.metadata.name.as_deref().unwrap_or_default();
    let Some(current) = service.metadata.finalizers.as_ref() else {
        return Ok(());
    };
    let Some(index) = current.iter().position(|f| f == finalizer) else {
        return Ok(());
    };
    let patch = json!([
        { "op": "test", "path": format!("/metadata/finalizers/{index}"), "value": finalizer },
        { "op": "remove", "path": format!("/metadata/finalizers/{index}") },
    ]);
    match json_patch(api, name, patch).await {
        Ok(_) => Ok(()),
        // Already gone (the last finalizer removed the object).
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(err) => Err(err),
    }
}

/// Sends a JSON patch (RFC 6902) given as a JSON array.
async fn json_patch(
    api: &Api<Service>,
    name: &str,
    patch: serde_json::Value,
) -> Result<Service, kube::Error> {
    // The operations are built above from literals, so they always decode.
    let patch = Patch::<()>::Json(
        serde_json::from_value(patch).expect("finalizer patches are valid JSON patches"),
    );
    api.patch(name, &PatchParams::default(), &patch).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ServiceSpec;

    fn service(type_: &str, class: Option<&str>) -> Service {
        Service {
            spec: Some(ServiceSpec {
                type_: Some(type_.to_string()),
                load_balancer_class: class.map(str::to_string),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        }
    }

    #[test]
    fn deleting_services_no_longer_want_a_load_balancer() {
        let options = SpecOptions::default();
        assert!(wants_load_balancer(
            &service("LoadBalancer", None),
            &options
        ));
        assert!(!wants_load_balancer(&service("ClusterIP", None), &options));
        let mut deleting = service("LoadBalancer", None);
        deleting.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
        );
        assert!(!wants_load_balancer(&deleting, &options));
    }

    #[test]
    fn finalizer_presence() {
        let mut svc = service("LoadBalancer", None);
        assert!(!has_finalizer(&svc));
        svc.metadata.finalizers = Some(vec!["other".into(), FINALIZER.into()]);
        assert!(has_finalizer(&svc));
    }
}
