//! A Service's internal load-balancer rules (CloudStack's Internal LB on a VPC tier):
//! read with `listLoadBalancers`, the only list that shows them (`listLoadBalancerRules`
//! lists the public scheme only). Members come in the same reply, and the Services of one
//! tier share the listing for a view of the account, so a resync reads each tier once
//! whatever the number and size of its internal load balancers.

use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use cloudstack::{InternalLoadBalancer, ListLoadBalancers};

use super::super::spec::LbSpec;
use super::super::vocabulary::{Algorithm, INTERNAL_SCHEME};
use super::account_view::AccountView;
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

/// The internal rules of each tier as last listed, shared by the Services of one view of
/// the account: a resync lists each tier once, not once per Service (Services reconciled
/// at the same time wait for the one listing). A listing begun before a change of the
/// tier's rules ended is never reused (it may miss what the change made).
#[derive(Debug, Default)]
pub(crate) struct InternalRuleCache {
    tiers: Mutex<HashMap<String, Arc<Tier>>>,
}

/// One tier's listing.
#[derive(Debug, Default)]
struct Tier {
    /// Bumped when a change of the tier's rules begins and when it ends.
    generation: AtomicU64,
    /// The listing, the view it serves and the generation it was begun at.
    listed: tokio::sync::Mutex<Option<Listing>>,
}

type Listing = (Weak<AccountView>, u64, Arc<Vec<ObservedInternalRule>>);

/// A change of a tier's internal rules in progress (see [`InternalRuleCache::changing`]).
pub(crate) struct TierChange {
    tier: Arc<Tier>,
}

impl Drop for TierChange {
    fn drop(&mut self) {
        self.tier.generation.fetch_add(1, Ordering::SeqCst);
    }
}

impl InternalRuleCache {
    /// The rules of tier `network_id` for `view`: cached, or listed now.
    pub(crate) async fn rules(
        &self,
        client: &cloudstack::Client,
        view: &Arc<AccountView>,
        network_id: &str,
    ) -> Result<Arc<Vec<ObservedInternalRule>>, cloudstack::Error> {
        let tier = self.tier(network_id);
        let mut listed = tier.listed.lock().await;
        let generation = tier.generation.load(Ordering::SeqCst);
        if let Some((of, at, rules)) = listed.as_ref()
            && *at == generation
            && of.upgrade().is_some_and(|v| Arc::ptr_eq(&v, view))
        {
            return Ok(rules.clone());
        }
        let rules = Arc::new(list_internal(client, network_id).await?);
        *listed = Some((Arc::downgrade(view), generation, rules.clone()));
        Ok(rules)
    }

    /// Marks tier `network_id` as being changed until the guard is dropped (also when the
    /// change is dropped half-way): no listing begun before its end is reused.
    pub(crate) fn changing(&self, network_id: &str) -> TierChange {
        let tier = self.tier(network_id);
        tier.generation.fetch_add(1, Ordering::SeqCst);
        TierChange { tier }
    }

    fn tier(&self, network_id: &str) -> Arc<Tier> {
        self.tiers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(network_id.to_string())
            .or_default()
            .clone()
    }
}

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
