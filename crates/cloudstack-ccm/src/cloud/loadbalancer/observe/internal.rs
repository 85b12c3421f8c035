//! A Service's internal load-balancer rules (CloudStack's Internal LB on a VPC tier):
//! read with `listLoadBalancers`, the only list that shows them (`listLoadBalancerRules`
//! lists the public scheme only). Members come in the same reply, and the Services of one
//! tier share the listing for a view of the account, so a resync reads each tier once
//! whatever the number and size of its internal load balancers.

use std::collections::BTreeSet;
use std::net::IpAddr;

use cloudstack::{InternalLoadBalancer, ListLoadBalancers};

use super::super::spec::LbSpec;
use super::super::vocabulary::{Algorithm, INTERNAL_SCHEME};
use super::shared_listing::SharedListing;
use crate::cloud::tags::{TAG_SERVICE_UID, Tags, tag_map};

/// An internal rule of the Service (one port pair).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedInternalRule {
    /// Rule id.
    pub id: String,
    /// Rule name.
    pub name: String,
    /// The tier address it listens on.
    pub address: Option<IpAddr>,
    /// The port it listens on.
    pub source_port: u16,
    /// The members' port.
    pub instance_port: u16,
    /// Algorithm, when known to us.
    pub algorithm: Option<Algorithm>,
    /// Its members (VM ids).
    pub members: BTreeSet<String>,
    /// Its tags.
    pub tags: Tags,
}

/// Every internal rule on tier `network_id` (one `listLoadBalancers`, members included).
pub(crate) async fn list_internal(
    client: &cloudstack::Client,
    network_id: &str,
) -> Result<Vec<ObservedInternalRule>, cloudstack::Error> {
    let request = ListLoadBalancers {
        networkid: Some(network_id.to_string()),
        scheme: Some(INTERNAL_SCHEME.to_string()),
        listall: Some(true),
        ..Default::default()
    };
    Ok(client
        .list_load_balancers(&request)
        .await?
        .into_iter()
        .filter_map(observed_internal_rule)
        .collect())
}

/// The rules of `spec`'s Service among `listed`: named after it (current or legacy
/// prefix) or tagged with its UID.
pub(crate) fn of_service(
    listed: &[ObservedInternalRule],
    spec: &LbSpec,
) -> Vec<ObservedInternalRule> {
    listed
        .iter()
        .filter(|rule| {
            spec.owns_rule_name(&rule.name)
                || rule.tags.get(TAG_SERVICE_UID) == Some(&spec.service.uid)
        })
        .cloned()
        .collect()
}

/// The internal rules of each tier, listed once per view of the account and shared by
/// its Services (key: the tier's id).
pub(crate) type InternalRuleCache = SharedListing<Vec<ObservedInternalRule>>;

/// One listed internal rule; one without an id, a name or its port pair is skipped.
pub(crate) fn observed_internal_rule(listed: InternalLoadBalancer) -> Option<ObservedInternalRule> {
    let ports = listed.loadbalancerrule.first()?;
    Some(ObservedInternalRule {
        id: listed.id?,
        name: listed.name.unwrap_or_default(),
        address: listed
            .sourceipaddress
            .as_deref()
            .and_then(|a| a.parse().ok()),
        source_port: u16::try_from(ports.sourceport?).ok()?,
        instance_port: u16::try_from(ports.instanceport?).ok()?,
        algorithm: listed.algorithm.as_deref().and_then(Algorithm::parse),
        members: listed
            .loadbalancerinstance
            .iter()
            .filter_map(|vm| vm.id.clone())
            .collect(),
        tags: tag_map(&listed.tags),
    })
}
