//! The engine's side of the routing firewall companion
//! ([`super::plan::plan_routed_firewall`]): the network of the Service's Nodes, the
//! Service's routing firewall rules and ACL items (by its UID tag, out of one listing of
//! the cluster's per view of the account), the plan, and its run on the network's job
//! queue like every other change.

use super::*;
use crate::cloud::cidr::Cidr;
use crate::cloud::loadbalancer::capabilities::DEFAULT_ACL_LISTS;
use crate::cloud::loadbalancer::observe::ObservedAclItem;
use crate::cloud::loadbalancer::observe::assemble::observed_acl_item;
use crate::cloud::loadbalancer::plan::{
    ObservedRoutingRule, RoutedFirewallSpec, RoutedTarget, plan_routed_firewall,
};
use crate::cloud::loadbalancer::vocabulary::IpProtocol;
use crate::cloud::tags::{TAG_CLUSTER, TAG_SERVICE_UID};
use cloudstack::tag_value;

/// What the companion of one Service asks for, before its network is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutedFirewallRequest {
    /// The Service's UID.
    pub service_uid: String,
    /// The network recorded or asked for on the Service, if any.
    pub network_id: Option<String>,
    /// The IPv4 addresses the other controller gave the Service.
    pub addresses: Vec<std::net::Ipv4Addr>,
    /// The Service's ports.
    pub ports: Vec<(IpProtocol, u16)>,
    /// `loadBalancerSourceRanges`, else everything.
    pub sources: Vec<Cidr>,
}

impl Engine {
    /// Keeps one routing firewall rule per port and address of the Service on the ROUTED
    /// isolated network of its Nodes (`eligible`), or one ACL item per port in a ROUTED
    /// tier's custom ACL list. A network that is not ROUTED, or a tier without a custom
    /// list, is a [`PlanError`] naming it, and nothing is made. Returns the steps run.
    pub async fn ensure_routed_firewall(
        &self,
        request: &RoutedFirewallRequest,
        eligible: &Arc<Vec<(String, String)>>,
    ) -> Result<usize, EnsureError> {
        let resolved = self
            .resolve_backends(eligible, request.network_id.as_deref())
            .await?;
        let network_id = resolved.backends.network_id.clone();
        if network_id.is_empty() {
            return Err(EnsureError::Network(NetworkError::Unknown));
        }
        let view = self.view().await?;
        let ctx = self.plan_context(&view, &network_id)?;
        let caps = &ctx.network;
        let network = caps.network_label();
        let target = match &caps.port_access {
            _ if !caps.routed => {
                return Err(EnsureError::Plan(PlanError::NotRouted { network }));
            }
            PortAccess::Firewall => RoutedTarget::Isolated,
            PortAccess::NetworkAcl {
                acl_id: Some(acl_id),
                acl_name,
            } if !acl_name
                .as_deref()
                .is_some_and(|n| DEFAULT_ACL_LISTS.contains(&n)) =>
            {
                RoutedTarget::Tier {
                    acl_id: acl_id.clone(),
                }
            }
            PortAccess::NetworkAcl { acl_name, .. } => {
                return Err(EnsureError::Plan(PlanError::NoCustomAclList {
                    network,
                    acl: acl_name.clone().unwrap_or_else(|| "none".into()),
                }));
            }
            PortAccess::Open => RoutedTarget::Isolated,
        };
        let spec = RoutedFirewallSpec {
            service_uid: request.service_uid.clone(),
            network_id,
            target,
            addresses: request.addresses.clone(),
            ports: request.ports.clone(),
            sources: request.sources.clone(),
        };
        self.run_routed_firewall(Some(&spec), &request.service_uid)
            .await
    }

    /// Deletes every routing firewall rule of the Service (`service_uid`), wherever it is.
    pub async fn delete_routed_firewall(&self, service_uid: &str) -> Result<usize, EnsureError> {
        self.run_routed_firewall(None, service_uid).await
    }

    async fn run_routed_firewall(
        &self,
        spec: Option<&RoutedFirewallSpec>,
        service_uid: &str,
    ) -> Result<usize, EnsureError> {
        let objects = match spec {
            // The companions of a resync share one listing of the cluster's objects.
            Some(_) => {
                let view = self.view().await?;
                self.companion_objects
                    .get(&view, "", || {
                        self.list_companion_objects(TAG_CLUSTER, &self.settings.cluster_name)
                    })
                    .await
            }
            // A deletion lists afresh.
            None => self
                .list_companion_objects(TAG_SERVICE_UID, service_uid)
                .await
                .map(Arc::new),
        }
        .map_err(EnsureError::Observe)?;
        let of_service =
            |tags: &[cloudstack::Tag]| tag_value(tags, TAG_SERVICE_UID) == Some(service_uid);
        let observed: Vec<ObservedRoutingRule> = objects
            .rules
            .iter()
            .filter(|r| of_service(&r.tags))
            .filter_map(observed_rule)
            .collect();
        let items: Vec<ObservedAclItem> = objects
            .acl_items
            .iter()
            .filter(|i| of_service(&i.tags))
            .filter_map(observed_acl_item)
            .collect();
        let plan = plan_routed_firewall(spec, &observed, &items, &self.settings.cluster_name);
        if plan.is_empty() {
            return Ok(0);
        }
        // One queue: the network the rules are on (a Service's rules are on one network);
        // for ACL items left without a spec, a queue of their list's (CloudStack runs a
        // tier's jobs one at a time anyway).
        let network = spec
            .map(|s| s.network_id.clone())
            .or_else(|| observed.first().map(|r| r.network_id.clone()))
            .or_else(|| items.first().map(|i| format!("acl-list {}", i.acl_id)))
            .unwrap_or_default();
        tracing::info!(service_uid, "routing firewall:\n{plan}");
        let change = self.companion_objects.changing("");
        let (applied, result) = self.run_unrecorded(&network, &plan).await;
        drop(change);
        result?;
        Ok(applied.steps_done)
    }

    /// The routing firewall rules (from 4.20; before, there are none and asking would be
    /// a 401) and the ACL items tagged `key=value`. Rules the keys' role may not list are
    /// none it could have made: a deletion goes on without them.
    async fn list_companion_objects(
        &self,
        key: &str,
        value: &str,
    ) -> Result<CompanionObjects, cloudstack::Error> {
        let tags = vec![(key.to_string(), value.to_string())];
        let rules = if self.settings.server.routing_firewall {
            match self
                .client
                .list_routing_firewall_rules(&cloudstack::ListRoutingFirewallRules {
                    listall: Some(true),
                    tags: tags.clone(),
                    ..Default::default()
                })
                .await
            {
                Err(error) if error.is_command_refused() => Vec::new(),
                listed => listed?,
            }
        } else {
            Vec::new()
        };
        let acl_items = self
            .client
            .list_network_acls(&cloudstack::ListNetworkAcls {
                listall: Some(true),
                tags,
                ..Default::default()
            })
            .await?;
        Ok(CompanionObjects { rules, acl_items })
    }
}

/// What the routing firewall companions made: listed by the cluster's tag once per view
/// of the account for every companion Service, or by one Service's tag for its deletion.
#[derive(Debug, Default)]
pub(crate) struct CompanionObjects {
    /// Routing firewall rules.
    rules: Vec<cloudstack::FirewallRule>,
    /// ACL items.
    acl_items: Vec<cloudstack::NetworkAcl>,
}

/// A listed routing firewall rule of ours; `None` when it lacks what a rule of ours has.
fn observed_rule(rule: &cloudstack::FirewallRule) -> Option<ObservedRoutingRule> {
    let cidrs = |list: Option<&str>| -> BTreeSet<Cidr> {
        Cidr::parse_lenient_list(list.unwrap_or_default())
            .into_iter()
            .collect()
    };
    Some(ObservedRoutingRule {
        id: rule.id.clone()?,
        network_id: rule.networkid.clone().unwrap_or_default(),
        protocol: IpProtocol::parse(rule.protocol.as_deref()?)?,
        port: u16::try_from(rule.startport?).ok()?,
        destinations: cidrs(rule.destcidrlist.as_deref()),
        sources: cidrs(rule.cidrlist.as_deref()),
    })
}
