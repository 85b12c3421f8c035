//! The Service's `status.loadBalancer.ingress`: what it should say, and a patch only when
//! it says something else.

use k8s_openapi::api::core::v1::{LoadBalancerIngress, Service};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

/// What the ingress of a provisioned load balancer should show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum IngressTarget {
    /// The public IP; `proxy` sets `ipMode: Proxy` (traffic arrives with the PROXY header).
    Ip {
        /// The public IP address.
        address: String,
        /// Whether proxy protocol is on.
        proxy: bool,
    },
    /// A hostname given by the `…-hostname` annotation, shown instead of the IP.
    Hostname(String),
}

impl IngressTarget {
    /// The ingress list this target stands for.
    pub fn ingress(&self) -> Vec<LoadBalancerIngress> {
        let entry = match self {
            Self::Ip { address, proxy } => LoadBalancerIngress {
                ip: Some(address.clone()),
                ip_mode: proxy.then(|| "Proxy".to_string()),
                ..LoadBalancerIngress::default()
            },
            Self::Hostname(hostname) => LoadBalancerIngress {
                hostname: Some(hostname.clone()),
                ..LoadBalancerIngress::default()
            },
        };
        vec![entry]
    }
}

/// The ingress list currently in the Service's status.
pub(crate) fn current_ingress(service: &Service) -> Vec<LoadBalancerIngress> {
    service
        .status
        .as_ref()
        .and_then(|status| status.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.clone())
        .unwrap_or_default()
}

/// Whether two ingress lists say the same thing. A missing `ipMode` next to an IP means
/// `VIP` (the API server's default), so it does not count as a difference.
pub(crate) fn same_ingress(
    current: &[LoadBalancerIngress],
    wanted: &[LoadBalancerIngress],
) -> bool {
    fn key(entry: &LoadBalancerIngress) -> (Option<&str>, Option<&str>, &str) {
        let mode = match (&entry.ip, entry.ip_mode.as_deref()) {
            (Some(_), None) => "VIP",
            (_, mode) => mode.unwrap_or(""),
        };
        (entry.ip.as_deref(), entry.hostname.as_deref(), mode)
    }
    current.len() == wanted.len() && current.iter().zip(wanted).all(|(a, b)| key(a) == key(b))
}

/// Patches `status.loadBalancer.ingress` to `wanted` unless it already says that.
/// Returns whether a patch was sent.
pub(crate) async fn patch_if_changed(
    api: &Api<Service>,
    service: &Service,
    wanted: &[LoadBalancerIngress],
) -> Result<bool, kube::Error> {
    if same_ingress(&current_ingress(service), wanted) {
        return Ok(false);
    }
    let name = service.metadata.name.as_deref().unwrap_or_default();
    let patch = json!({ "status": { "loadBalancer": { "ingress": wanted } } });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(true)
}

/// The condition the controller sets on a Service it cannot serve with a CloudStack load
/// balancer at all (no load balancer on the network, an IPv6-only Service), `False` with
/// a reason and the cause; removed once that no longer holds.
pub const LOAD_BALANCER_SUPPORTED: &str = "cloudstack.apache.org/LoadBalancerSupported";

/// Why a Service gets no CloudStack load balancer: the condition's `reason` and `message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unsupported {
    /// CamelCase reason (`NoLoadBalancerOnNetwork`, `IPv6NotSupported`).
    pub reason: &'static str,
    /// What the Warning Event says.
    pub message: String,
}

/// Sets [`LOAD_BALANCER_SUPPORTED`] to `False` with `unsupported`, or removes it when
/// `None`; no write when the Service already says so. The other conditions are kept.
pub(crate) async fn set_unsupported(
    api: &Api<Service>,
    service: &Service,
    unsupported: Option<&Unsupported>,
) -> Result<bool, kube::Error> {
    let current = service
        .status
        .as_ref()
        .and_then(|status| status.conditions.clone())
        .unwrap_or_default();
    let ours = current.iter().find(|c| c.type_ == LOAD_BALANCER_SUPPORTED);
    let same = match (ours, unsupported) {
        (None, None) => true,
        (Some(c), Some(u)) => c.status == "False" && c.reason == u.reason && c.message == u.message,
        _ => false,
    };
    if same {
        return Ok(false);
    }
    let mut conditions: Vec<_> = current
        .iter()
        .filter(|c| c.type_ != LOAD_BALANCER_SUPPORTED)
        .cloned()
        .collect();
    if let Some(u) = unsupported {
        conditions.push(k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
            type_: LOAD_BALANCER_SUPPORTED.to_string(),
            status: "False".to_string(),
            reason: u.reason.to_string(),
            message: u.message.clone(),
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                jiff::Timestamp::now(),
            ),
            observed_generation: service.metadata.generation,
        });
    }
    let name = service.metadata.name.as_deref().unwrap_or_default();
    let patch = json!({ "status": { "conditions": conditions } });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_target_sets_proxy_mode_only_with_proxy_protocol() {
        let plain = IngressTarget::Ip {
            address: "203.0.113.5".into(),
            proxy: false,
        }
        .ingress();
        assert_eq!(plain[0].ip.as_deref(), Some("203.0.113.5"));
        assert_eq!(plain[0].ip_mode, None);
        let proxied = IngressTarget::Ip {
            address: "203.0.113.5".into(),
            proxy: true,
        }
        .ingress();
        assert_eq!(proxied[0].ip_mode.as_deref(), Some("Proxy"));
        let named = IngressTarget::Hostname("lb.example.com".into()).ingress();
        assert_eq!(named[0].hostname.as_deref(), Some("lb.example.com"));
        assert_eq!(named[0].ip, None);
    }

    #[test]
    fn defaulted_vip_mode_is_not_a_change() {
        let wanted = IngressTarget::Ip {
            address: "203.0.113.5".into(),
            proxy: false,
        }
        .ingress();
        let mut defaulted = wanted.clone();
        defaulted[0].ip_mode = Some("VIP".into());
        assert!(same_ingress(&defaulted, &wanted));
        let proxied = IngressTarget::Ip {
            address: "203.0.113.5".into(),
            proxy: true,
        }
        .ingress();
        assert!(!same_ingress(&defaulted, &proxied));
        assert!(!same_ingress(&[], &wanted));
        let other = IngressTarget::Ip {
            address: "203.0.113.6".into(),
            proxy: false,
        }
        .ingress();
        assert!(!same_ingress(&wanted, &other));
    }
}
