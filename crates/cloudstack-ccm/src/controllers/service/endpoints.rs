//! Where the endpoints of a Service run: the Node names holding a ready endpoint, per
//! Service port, for `externalTrafficPolicy: Local` Services.
//!
//! Read from `discovery.k8s.io/v1` EndpointSlices (label `kubernetes.io/service-name`),
//! or from core `Endpoints` where EndpointSlices are forbidden (the ClusterRole CloudStack
//! Kubernetes Service installs grants only `endpoints`). Each object is reduced to a
//! [`Summary`]: its port groups and the Nodes of the endpoints that count, as kube-proxy
//! counts them for a `Local` Service's health check: ready (a missing condition counts as
//! ready), else serving and not terminating. Endpoints without a `nodeName` cannot be
//! placed and are left out. The watch that feeds this index is in `endpoint_watch.rs`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::api::core::v1::{Endpoints, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::cloud::loadbalancer::members::RuleKey;
use crate::cloud::loadbalancer::vocabulary::IpProtocol;

/// The label naming the Service an EndpointSlice belongs to.
pub(crate) const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// A Service by namespace and name.
pub(crate) type ServiceKey = (String, String);

/// The Service key of `service`.
pub(crate) fn service_key(service: &Service) -> ServiceKey {
    (
        service.metadata.namespace.clone().unwrap_or_default(),
        service.metadata.name.clone().unwrap_or_default(),
    )
}

/// Whether the Service sends external traffic only to Nodes with a local endpoint.
pub fn is_local(service: &Service) -> bool {
    service
        .spec
        .as_ref()
        .and_then(|spec| spec.external_traffic_policy.as_deref())
        == Some("Local")
}

/// One port of an endpoint group: its name (`""` when the Service port has none) and
/// protocol.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct GroupPort {
    name: String,
    protocol: IpProtocol,
}

/// Endpoints sharing a set of ports (an EndpointSlice, or one subset of an Endpoints
/// object): the ports and the Nodes holding an endpoint that counts.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PortGroup {
    ports: BTreeSet<GroupPort>,
    nodes: BTreeSet<String>,
}

/// What one EndpointSlice or Endpoints object says about its Service.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Summary {
    groups: Vec<PortGroup>,
}

/// A port's protocol as the endpoint objects give it (TCP when absent); `None` for SCTP.
fn protocol(value: Option<&str>) -> Option<IpProtocol> {
    IpProtocol::parse(value.unwrap_or("TCP"))
}

/// The Service an EndpointSlice belongs to (by its label) and what it says.
pub(crate) fn summarise_slice(slice: &EndpointSlice) -> Option<(ServiceKey, String, Summary)> {
    let meta = &slice.metadata;
    let service = meta.labels.as_ref()?.get(SERVICE_NAME_LABEL)?.clone();
    let namespace = meta.namespace.clone().unwrap_or_default();
    let ports = slice
        .ports
        .iter()
        .flatten()
        .filter_map(|port| {
            Some(GroupPort {
                name: port.name.clone().unwrap_or_default(),
                protocol: protocol(port.protocol.as_deref())?,
            })
        })
        .collect();
    let nodes = slice
        .endpoints
        .iter()
        .filter(|endpoint| {
            let conditions = endpoint.conditions.as_ref();
            let ready = conditions.and_then(|c| c.ready);
            let serving = conditions.and_then(|c| c.serving);
            let terminating = conditions.and_then(|c| c.terminating);
            ready.unwrap_or(true) || (serving == Some(true) && terminating != Some(true))
        })
        .filter_map(|endpoint| endpoint.node_name.clone())
        .collect();
    let summary = Summary {
        groups: vec![PortGroup { ports, nodes }],
    };
    Some(((namespace, service), meta.name.clone()?, summary))
}

/// The Service a core Endpoints object belongs to (the same name) and what it says: its
/// ready `addresses` count, `notReadyAddresses` do not.
pub(crate) fn summarise_endpoints(endpoints: &Endpoints) -> Option<(ServiceKey, String, Summary)> {
    let meta = &endpoints.metadata;
    let name = meta.name.clone()?;
    let namespace = meta.namespace.clone().unwrap_or_default();
    let groups = endpoints
        .subsets
        .iter()
        .flatten()
        .map(|subset| PortGroup {
            ports: subset
                .ports
                .iter()
                .flatten()
                .filter_map(|port| {
                    Some(GroupPort {
                        name: port.name.clone().unwrap_or_default(),
                        protocol: protocol(port.protocol.as_deref())?,
                    })
                })
                .collect(),
            nodes: subset
                .addresses
                .iter()
                .flatten()
                .filter_map(|address| address.node_name.clone())
                .collect(),
        })
        .collect();
    Some(((namespace, name.clone()), name, Summary { groups }))
}

/// The endpoint objects of every Service, summarised, by Service and object name.
#[derive(Debug, Default)]
pub(crate) struct EndpointIndex {
    by_service: HashMap<ServiceKey, BTreeMap<String, Summary>>,
    /// The Service each object was filed under (an EndpointSlice's label can change).
    service_of: HashMap<(String, String), ServiceKey>,
}

impl EndpointIndex {
    /// Files (or refiles) object `name` of namespace `service.0`; returns the Services
    /// whose endpoints changed.
    pub(crate) fn apply(
        &mut self,
        service: ServiceKey,
        name: String,
        summary: Summary,
    ) -> Vec<ServiceKey> {
        let object = (service.0.clone(), name.clone());
        let mut changed = Vec::new();
        if let Some(before) = self.service_of.get(&object).cloned()
            && before != service
        {
            changed.extend(self.remove(&object));
        }
        let objects = self.by_service.entry(service.clone()).or_default();
        if objects.get(&name) != Some(&summary) {
            objects.insert(name, summary);
            changed.push(service.clone());
        }
        self.service_of.insert(object, service);
        changed
    }

    /// Forgets object (namespace, name); returns its Service if it was filed.
    pub(crate) fn remove(&mut self, object: &(String, String)) -> Option<ServiceKey> {
        let service = self.service_of.remove(object)?;
        if let Some(objects) = self.by_service.get_mut(&service) {
            objects.remove(&object.1);
            if objects.is_empty() {
                self.by_service.remove(&service);
            }
        }
        Some(service)
    }

    /// The Services whose endpoints differ between `self` and `other`.
    pub(crate) fn differing(&self, other: &EndpointIndex) -> Vec<ServiceKey> {
        let keys: BTreeSet<&ServiceKey> = self
            .by_service
            .keys()
            .chain(other.by_service.keys())
            .collect();
        keys.into_iter()
            .filter(|key| self.by_service.get(*key) != other.by_service.get(*key))
            .cloned()
            .collect()
    }

    /// Per rule of `service` (protocol, port), the Nodes holding an endpoint that counts
    /// for the Service port: the groups carrying a port of the same name and protocol.
    pub(crate) fn nodes_by_rule(&self, service: &Service) -> BTreeMap<RuleKey, BTreeSet<String>> {
        let objects = self.by_service.get(&service_key(service));
        let mut out = BTreeMap::new();
        let ports = service.spec.iter().flat_map(|s| s.ports.iter().flatten());
        for port in ports {
            let (Some(protocol), Ok(number)) =
                (protocol(port.protocol.as_deref()), u16::try_from(port.port))
            else {
                continue;
            };
            let wanted = GroupPort {
                name: port.name.clone().unwrap_or_default(),
                protocol,
            };
            let nodes: BTreeSet<String> = objects
                .into_iter()
                .flat_map(BTreeMap::values)
                .flat_map(|summary| summary.groups.iter())
                .filter(|group| group.ports.contains(&wanted))
                .flat_map(|group| group.nodes.iter().cloned())
                .collect();
            out.insert((protocol, number), nodes);
        }
        out
    }
}

/// The endpoints of every Service as one list read them (the dry run), from
/// EndpointSlices, or from core Endpoints where EndpointSlices are forbidden.
#[derive(Debug, Default)]
pub struct EndpointSnapshot {
    index: EndpointIndex,
}

impl EndpointSnapshot {
    /// Lists the EndpointSlices (the core Endpoints after a 403) of the cluster.
    pub async fn read(client: &kube::Client) -> Result<EndpointSnapshot, kube::Error> {
        use kube::api::{Api, ListParams};
        let mut index = EndpointIndex::default();
        let params = ListParams::default().labels(SERVICE_NAME_LABEL);
        match Api::<EndpointSlice>::all(client.clone())
            .list(&params)
            .await
        {
            Ok(slices) => {
                for (key, name, summary) in slices.items.iter().filter_map(summarise_slice) {
                    index.apply(key, name, summary);
                }
            }
            Err(kube::Error::Api(status)) if status.code == 403 => {
                let all = Api::<Endpoints>::all(client.clone())
                    .list(&ListParams::default())
                    .await?;
                for (key, name, summary) in all.items.iter().filter_map(summarise_endpoints) {
                    index.apply(key, name, summary);
                }
            }
            Err(err) => return Err(err),
        }
        Ok(EndpointSnapshot { index })
    }

    /// Per rule of `service`, the Nodes holding an endpoint that counts.
    pub(crate) fn nodes_by_rule(&self, service: &Service) -> BTreeMap<RuleKey, BTreeSet<String>> {
        self.index.nodes_by_rule(service)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn service(policy: &str) -> Service {
        serde_json::from_value(json!({
            "metadata": { "name": "web", "namespace": "shop" },
            "spec": { "type": "LoadBalancer", "externalTrafficPolicy": policy, "ports": [
                { "name": "http", "port": 80, "protocol": "TCP" },
                { "name": "dns", "port": 53, "protocol": "UDP" },
            ] },
        }))
        .unwrap()
    }

    fn slice(name: &str, endpoints: serde_json::Value) -> EndpointSlice {
        serde_json::from_value(json!({
            "metadata": { "name": name, "namespace": "shop", "labels": { SERVICE_NAME_LABEL: "web" } },
            "addressType": "IPv4",
            "endpoints": endpoints,
            "ports": [{ "name": "http", "port": 8080, "protocol": "TCP" }],
        }))
        .unwrap()
    }

    fn file(index: &mut EndpointIndex, slice: &EndpointSlice) -> Vec<ServiceKey> {
        let (key, name, summary) = summarise_slice(slice).unwrap();
        index.apply(key, name, summary)
    }

    fn set(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn endpoints_count_as_kube_proxy_counts_them_per_port() {
        let mut index = EndpointIndex::default();
        let changed = file(
            &mut index,
            &slice(
                "web-a",
                json!([
                    { "addresses": ["10.0.0.1"], "nodeName": "ready", "conditions": { "ready": true } },
                    { "addresses": ["10.0.0.2"], "nodeName": "unknown", "conditions": {} },
                    { "addresses": ["10.0.0.3"], "nodeName": "starting", "conditions": { "ready": false, "serving": false } },
                    { "addresses": ["10.0.0.4"], "nodeName": "draining", "conditions": { "ready": false, "serving": true, "terminating": true } },
                    { "addresses": ["10.0.0.5"], "nodeName": "serving", "conditions": { "ready": false, "serving": true } },
                    { "addresses": ["10.0.0.6"], "conditions": { "ready": true } },
                ]),
            ),
        );
        assert_eq!(changed, vec![("shop".to_string(), "web".to_string())]);
        let nodes = index.nodes_by_rule(&service("Local"));
        assert_eq!(
            nodes[&(IpProtocol::Tcp, 80)],
            set(&["ready", "serving", "unknown"])
        );
        assert!(
            nodes[&(IpProtocol::Udp, 53)].is_empty(),
            "no slice has the dns port"
        );
    }

    #[test]
    fn only_real_changes_are_reported_and_deletes_forget() {
        let mut index = EndpointIndex::default();
        let one = slice(
            "web-a",
            json!([{ "addresses": ["10.0.0.1"], "nodeName": "n1" }]),
        );
        assert_eq!(file(&mut index, &one).len(), 1);
        assert!(file(&mut index, &one).is_empty(), "the same summary again");
        let before = EndpointIndex {
            by_service: index.by_service.clone(),
            service_of: index.service_of.clone(),
        };
        let key = ("shop".to_string(), "web-a".to_string());
        assert_eq!(index.remove(&key).map(|k| k.1), Some("web".to_string()));
        assert!(index.nodes_by_rule(&service("Local"))[&(IpProtocol::Tcp, 80)].is_empty());
        assert_eq!(before.differing(&index).len(), 1);
    }

    #[test]
    fn core_endpoints_count_ready_addresses_only() {
        let endpoints: Endpoints = serde_json::from_value(json!({
            "metadata": { "name": "web", "namespace": "shop" },
            "subsets": [{
                "addresses": [{ "ip": "10.0.0.1", "nodeName": "n1" }],
                "notReadyAddresses": [{ "ip": "10.0.0.2", "nodeName": "n2" }],
                "ports": [{ "name": "http", "port": 8080 }, { "name": "dns", "port": 5353, "protocol": "UDP" }],
            }],
        }))
        .unwrap();
        let (key, name, summary) = summarise_endpoints(&endpoints).unwrap();
        let mut index = EndpointIndex::default();
        index.apply(key, name, summary);
        let nodes = index.nodes_by_rule(&service("Local"));
        assert_eq!(nodes[&(IpProtocol::Tcp, 80)], set(&["n1"]));
        assert_eq!(nodes[&(IpProtocol::Udp, 53)], set(&["n1"]));
        assert!(is_local(&service("Local")) && !is_local(&service("Cluster")));
    }
}
