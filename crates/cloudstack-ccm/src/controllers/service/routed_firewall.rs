//! The routing firewall companion (`…-routed-firewall`, docs/networks.md): for a
//! LoadBalancer Service another controller serves (MetalLB, Cilium LB-IPAM) on a ROUTED
//! isolated network, the engine keeps one routing firewall rule per port and address; a
//! finalizer of its own keeps the Service until they are deleted.

use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::runtime::controller::Action;

use kube::ResourceExt;

use super::events;
use super::finalizer;
use super::node_watch::EligibleList;
use crate::cloud::loadbalancer::annotations::{self as ann, Annotations};
use crate::cloud::loadbalancer::ensure::RoutedFirewallRequest;
use crate::cloud::loadbalancer::ensure::{Engine, EnsureError};
use crate::cloud::loadbalancer::spec::companion_source_ranges;
use crate::cloud::loadbalancer::vocabulary::IpProtocol;
use crate::controllers::events::Recorder;

/// The finalizer of a Service with routing firewall rules.
pub const ROUTED_FIREWALL_FINALIZER: &str = "cloudstack.apache.org/routed-firewall-cleanup";

/// Whether the Service asks for the companion: a LoadBalancer Service of another
/// controller's class with the annotation, not being deleted.
fn wanted(service: &Service) -> bool {
    let spec = service.spec.as_ref();
    service.metadata.deletion_timestamp.is_none()
        && spec.and_then(|s| s.type_.as_deref()) == Some("LoadBalancer")
        && spec.is_some_and(|s| s.load_balancer_class.is_some())
        && Annotations::new(service.metadata.annotations.as_ref())
            .flag(&ann::ROUTED_FIREWALL)
            .unwrap_or(false)
}

/// Whether this module handles the Service (it wants the companion, or has rules to
/// delete).
pub(crate) fn concerns(service: &Service) -> bool {
    wanted(service) || finalizer::has_named(service, ROUTED_FIREWALL_FINALIZER)
}

/// What the Service asks for, or why it cannot be read.
fn request(service: &Service) -> Result<RoutedFirewallRequest, String> {
    let spec = service.spec.clone().unwrap_or_default();
    let addresses = service
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.ip.as_deref()?.parse::<std::net::Ipv4Addr>().ok())
        .collect();
    let mut ports = Vec::new();
    for (i, port) in spec.ports.iter().flatten().enumerate() {
        let protocol = match port.protocol.as_deref().unwrap_or("TCP") {
            "TCP" => IpProtocol::Tcp,
            "UDP" => IpProtocol::Udp,
            other => {
                return Err(format!(
                    "spec.ports[{i}].protocol: {other} cannot be opened by a routing firewall rule (TCP and UDP only)"
                ));
            }
        };
        let number = u16::try_from(port.port)
            .map_err(|_| format!("spec.ports[{i}].port: {} is not a port", port.port))?;
        ports.push((protocol, number));
    }
    let sources = companion_source_ranges(service).map_err(|err| err.to_string())?;
    let network_id = Annotations::new(service.metadata.annotations.as_ref())
        .get(&ann::NETWORK_ID, ann::parse_uuid)
        .ok()
        .flatten();
    Ok(RoutedFirewallRequest {
        service_uid: service.metadata.uid.clone().unwrap_or_default(),
        network_id,
        addresses,
        ports,
        sources,
    })
}

/// Why the companion could not do its work (retried with back-off).
#[derive(Debug, thiserror::Error)]
pub(crate) enum RoutedFirewallError {
    /// The finalizer could not be written.
    #[error("{action}: {source}")]
    Kube {
        /// What was being done.
        action: &'static str,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] EnsureError),
}

/// What the companion of a Service works with.
pub(crate) struct Companion<'a> {
    /// The Service's API.
    pub api: &'a Api<Service>,
    /// The load-balancer engine.
    pub engine: &'a Engine,
    /// Posts Events.
    pub recorder: &'a Recorder,
    /// The eligible Nodes (their network is the rules').
    pub eligible: EligibleList,
}

/// Keeps the Service's routing firewall rules, or deletes them and lets the Service go.
pub(crate) async fn reconcile(
    service: &Service,
    with: Companion<'_>,
) -> Result<Action, RoutedFirewallError> {
    let key = format!(
        "{}/{}",
        service.namespace().unwrap_or_default(),
        service.name_any()
    );
    let uid = service.metadata.uid.clone().unwrap_or_default();
    if !wanted(service) {
        let deleted = with.engine.delete_routed_firewall(&uid).await?;
        if deleted > 0 {
            tracing::info!(service = %key, deleted, "routing firewall rules deleted");
        }
        finalizer::remove_named(with.api, service, ROUTED_FIREWALL_FINALIZER)
            .await
            .map_err(|source| RoutedFirewallError::Kube {
                action: "removing the routing firewall finalizer",
                source,
            })?;
        return Ok(Action::await_change());
    }
    let request = match request(service) {
        Ok(request) => request,
        Err(reason) => {
            events::publish_sync_failed(with.recorder, service, &reason).await;
            return Ok(Action::await_change());
        }
    };
    if request.addresses.is_empty() {
        // The other controller has not given it an address yet; its status change runs this.
        return Ok(Action::await_change());
    }
    if !finalizer::has_named(service, ROUTED_FIREWALL_FINALIZER) {
        finalizer::add_named(with.api, service, ROUTED_FIREWALL_FINALIZER)
            .await
            .map_err(|source| RoutedFirewallError::Kube {
                action: "adding the routing firewall finalizer",
                source,
            })?;
    }
    match with
        .engine
        .ensure_routed_firewall(&request, &with.eligible)
        .await
    {
        Ok(steps) => {
            if steps > 0 {
                tracing::info!(service = %key, steps, "routing firewall rules ensured");
            }
            Ok(Action::await_change())
        }
        Err(err) if err.is_permanent() => {
            events::publish_sync_failed(with.recorder, service, &err).await;
            Ok(Action::await_change())
        }
        Err(err) => {
            events::publish_sync_failed(with.recorder, service, &err).await;
            Err(err.into())
        }
    }
}
