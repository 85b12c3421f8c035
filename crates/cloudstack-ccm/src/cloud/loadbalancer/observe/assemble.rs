//! Builds one Service's [`ObservedLb`] from the shared [`AccountView`] and the per-rule
//! details: its rules by exact name (current and legacy names), its IP (requested
//! address, else the claimed address while no id is recorded, else recorded id unless
//! another Service's UID tag is on it, else the IP of its rules), the firewall rules or
//! ACL items of its ports, and the rules of others on the same IP.

use std::collections::BTreeSet;
use std::sync::Arc;

use cloudstack::{
    FirewallRule, ListPublicIpAddresses, LoadBalancerRule, NetworkAcl, PublicIpAddress,
};

use super::account_view::AccountView;
use super::details::{PolicyKinds, RuleDetailsCache};
use super::{
    ForeignRule, IpOwnership, ObservedAclItem, ObservedFirewallRule, ObservedIp, ObservedLb,
    ObservedRule, TakenIp,
};
use crate::cloud::cidr::Cidr;
use crate::cloud::loadbalancer::spec::LbSpec;
use crate::cloud::loadbalancer::vocabulary::{Algorithm, IpProtocol, LbProtocol};
use crate::cloud::tags::{
    TAG_ASSOCIATED, TAG_HEALTH_CHECK, TAG_SERVICE_UID, TAG_STICKINESS, Tags, tag_map,
};

/// The Service's rules in the view, by exact name.
pub(crate) fn own_rules<'a>(
    view: &'a AccountView,
    spec: &'a LbSpec,
) -> impl Iterator<Item = &'a LoadBalancerRule> + 'a {
    view.rules
        .iter()
        .filter(|r| {
            r.name
                .as_deref()
                .is_some_and(|name| spec.owns_rule_name(name))
        })
        .map(|r| &**r)
}

/// Converts a listed rule (with its details) to an [`ObservedRule`]; `None` for entries
/// missing an id, a protocol we know, or ports.
fn observed_rule(rule: &LoadBalancerRule) -> Option<ObservedRule> {
    Some(ObservedRule {
        id: rule.id.clone()?,
        name: rule.name.clone()?,
        protocol: LbProtocol::parse(rule.protocol.as_deref().unwrap_or("tcp"))?,
        public_port: u16::try_from(rule.publicport?).ok()?,
        private_port: u16::try_from(rule.privateport?).ok()?,
        algorithm: rule
            .algorithm
            .as_deref()
            .and_then(Algorithm::parse)
            .unwrap_or(Algorithm::RoundRobin),
        cidrs: Cidr::parse_lenient_list(rule.cidrlist.as_deref().unwrap_or_default()),
        public_ip_id: rule.publicipid.clone().unwrap_or_default(),
        network_id: rule.networkid.clone(),
        members: Arc::default(),
        tags: tag_map(&rule.tags),
        health_checks: Vec::new(),
        stickiness: Vec::new(),
        health_checks_unknown: false,
        stickiness_unknown: false,
    })
}

/// Converts a listed public IP; `ours` says whether it is in the account's allocated list.
pub(crate) fn observed_ip(ip: &PublicIpAddress, ours: bool) -> Option<ObservedIp> {
    let ownership = if ours {
        IpOwnership::Ours
    } else if ip.is_allocated() {
        IpOwnership::OtherAccount(
            ip.project
                .clone()
                .or_else(|| ip.account.clone())
                .unwrap_or_else(|| "another account".into()),
        )
    } else {
        IpOwnership::Free
    };
    Some(ObservedIp {
        id: ip.id.clone()?,
        address: ip.ipaddress.as_deref()?.parse().ok()?,
        ownership,
        associated_network_id: ip.associatednetworkid.clone(),
        vpc_id: ip.vpcid.clone(),
        is_source_nat: ip.issourcenat.unwrap_or(false),
        is_static_nat: ip.isstaticnat.unwrap_or(false),
        is_allocating: ip.is_allocating(),
        tags: tag_map(&ip.tags),
    })
}

/// Finds the IP the Service uses or asks for. A requested address not allocated to us is
/// looked up (one call, `allocatedonly=false`) to tell a free address from one owned by
/// someone else.
async fn find_ip(
    client: &cloudstack::Client,
    view: &AccountView,
    spec: &LbSpec,
    rules: &[ObservedRule],
) -> Result<Option<ObservedIp>, cloudstack::Error> {
    if let Some(requested) = spec.requested_ip {
        let address = requested.to_string();
        if let Some(ip) = view.ip_by_address(&address) {
            return Ok(observed_ip(ip, true));
        }
        let found = look_up_address(client, &address).await?;
        return Ok(found.and_then(|ip| observed_ip(&ip, false)));
    }
    if let Some(claimed) = spec.pending_claim()
        && let Some(ip) = find_claimed_ip(client, view, spec, claimed).await?
    {
        return Ok(Some(ip));
    }
    let by_recorded = spec
        .recorded_ip_id
        .as_deref()
        .and_then(|id| view.ip_by_id(id));
    let by_rules = || rules.first().and_then(|r| view.ip_by_id(&r.public_ip_id));
    Ok(by_recorded
        .or_else(by_rules)
        .and_then(|ip| observed_ip(ip, true)))
}

/// The IP recorded on the Service when its UID tag names another Service (and no
/// address is requested: Services may share an address the user brought): that one
/// took it, and the Service must move.
fn taken_ip(view: &AccountView, spec: &LbSpec) -> Option<(String, std::net::IpAddr, String)> {
    if spec.requested_ip.is_some() {
        return None;
    }
    let ip = view.ip_by_id(spec.recorded_ip_id.as_deref()?)?;
    let owner = tag_map(&ip.tags)
        .remove(TAG_SERVICE_UID)
        .filter(|uid| *uid != spec.service.uid)?;
    Some((
        ip.id.clone()?,
        ip.ipaddress.as_deref()?.parse().ok()?,
        owner,
    ))
}

/// The address the Service claimed before associating it: ours when allocated to the
/// account with nothing of anyone else on it (we associated it and were stopped before
/// recording its id, or took it already: its UID tag names the Service), free when
/// still free (one call, `allocatedonly=false`), `None` when someone else holds it (the
/// claim is then replaced by a new one).
async fn find_claimed_ip(
    client: &cloudstack::Client,
    view: &AccountView,
    spec: &LbSpec,
    claimed: std::net::IpAddr,
) -> Result<Option<ObservedIp>, cloudstack::Error> {
    let address = claimed.to_string();
    if let Some(ip) = view.ip_by_address(&address) {
        let id = ip.id.as_deref().unwrap_or_default();
        let mut own_rules = 0;
        let mut other_rules = 0;
        for rule in view.rules_on_ip(id) {
            if rule.name.as_deref().is_some_and(|n| spec.owns_rule_name(n)) {
                own_rules += 1;
            } else {
                other_rules += 1;
            }
        }
        let tags = tag_map(&ip.tags);
        // The Service's UID tag says who took the address; without one, an address the
        // controller associated (an older release's tag) is someone else's unless the
        // Service's rules stand on it.
        let tagged_for_other = match tags.get(TAG_SERVICE_UID) {
            Some(uid) => *uid != spec.service.uid,
            None => tags.contains_key(TAG_ASSOCIATED) && own_rules == 0,
        };
        let others_firewall =
            own_rules == 0 && !view.firewall_rules_on_ip(client, id).await?.is_empty();
        let held_by_other = other_rules > 0
            || others_firewall
            || tagged_for_other
            || ip.issourcenat.unwrap_or(false)
            || ip.isstaticnat.unwrap_or(false);
        return Ok(if held_by_other {
            None
        } else {
            observed_ip(ip, true)
        });
    }
    let found = look_up_address(client, &address).await?;
    Ok(found
        .filter(|ip| !ip.is_allocated())
        .and_then(|ip| observed_ip(&ip, false)))
}

/// One address of the zone's pool, allocated or not (one call, `allocatedonly=false`):
/// tells a free address from one held by someone else.
pub(crate) async fn look_up_address(
    client: &cloudstack::Client,
    address: &str,
) -> Result<Option<PublicIpAddress>, cloudstack::Error> {
    let request = ListPublicIpAddresses {
        ipaddress: Some(address.to_string()),
        allocatedonly: Some(false),
        listall: Some(true),
        ..Default::default()
    };
    let found = client.list_public_ip_addresses(&request).await?;
    Ok(found
        .into_iter()
        .find(|ip| ip.ipaddress.as_deref() == Some(address)))
}

/// The ports that matter for opening rules: the Service's wanted and existing ports,
/// without the ports other rules on the IP hold.
fn port_scope(spec: &LbSpec, rules: &[ObservedRule], foreign: &[ForeignRule]) -> BTreeSet<u16> {
    let foreign_ports: BTreeSet<u16> = foreign.iter().map(|r| r.public_port).collect();
    spec.rules
        .iter()
        .map(|r| r.public_port)
        .chain(rules.iter().map(|r| r.public_port))
        .filter(|port| !foreign_ports.contains(port))
        .collect()
}

/// Whether a port range touches one of `ports`.
fn covers(start: Option<u32>, end: Option<u32>, ports: &BTreeSet<u16>) -> bool {
    let Some(start) = start else { return false };
    let end = end.unwrap_or(start);
    ports.iter().any(|p| (start..=end).contains(&u32::from(*p)))
}

/// Whether a resource is tagged as the Service's.
fn tagged_for(tags: &Tags, spec: &LbSpec) -> bool {
    tags.get(TAG_SERVICE_UID)
        .is_some_and(|uid| *uid == spec.service.uid)
}

/// Converts a firewall rule of the view; one made by `openfirewall` since the view was read
/// has no id yet (empty: see `AccountView::patch`).
fn observed_firewall_rule(rule: &FirewallRule) -> Option<ObservedFirewallRule> {
    let start = u16::try_from(rule.startport?).ok()?;
    Some(ObservedFirewallRule {
        id: rule.id.clone().unwrap_or_default(),
        protocol: IpProtocol::parse(rule.protocol.as_deref()?)?,
        start_port: start,
        end_port: rule
            .endport
            .and_then(|p| u16::try_from(p).ok())
            .unwrap_or(start),
        cidrs: Cidr::parse_lenient_list(rule.cidrlist.as_deref().unwrap_or_default()),
        tags: tag_map(&rule.tags),
    })
}

pub(crate) fn observed_acl_item(item: &NetworkAcl) -> Option<ObservedAclItem> {
    let start = u16::try_from(item.startport?).ok()?;
    Some(ObservedAclItem {
        id: item.id.clone()?,
        acl_id: item.aclid.clone().unwrap_or_default(),
        protocol: IpProtocol::parse(item.protocol.as_deref()?)?,
        start_port: start,
        end_port: item
            .endport
            .and_then(|p| u16::try_from(p).ok())
            .unwrap_or(start),
        cidrs: Cidr::parse_lenient_list(item.cidrlist.as_deref().unwrap_or_default()),
        allow: item
            .action
            .as_deref()
            .is_none_or(|a| a.eq_ignore_ascii_case("allow")),
        reason: item.reason.clone().unwrap_or_default(),
        tags: tag_map(&item.tags),
    })
}

/// The policy kinds worth reading for a rule: of those its network `offered`, only the
/// ones the Service asks for or the rule's tags say the controller made (a policy made by
/// hand on a rule of ours is not looked for).
fn policy_kinds_to_read(offered: PolicyKinds, spec: &LbSpec, tags: &Tags) -> PolicyKinds {
    PolicyKinds {
        health_check: offered.health_check
            && (spec.health_check.is_some() || tags.contains_key(TAG_HEALTH_CHECK)),
        stickiness: offered.stickiness
            && (spec.stickiness.is_some() || tags.contains_key(TAG_STICKINESS)),
    }
}

/// Everything the reader needs besides the view.
pub(crate) struct ObserveInputs<'a> {
    /// The CloudStack client (for the few reads not in the view).
    pub client: &'a cloudstack::Client,
    /// The per-rule details cache.
    pub details: &'a RuleDetailsCache,
    /// Which policies the network offers (of those, only the ones that may exist are read).
    pub policy_kinds: PolicyKinds,
    /// ACL list of the Service's network, when it is a VPC tier with its own list.
    pub acl_id: Option<&'a str>,
}

/// What CloudStack holds for `spec`.
pub(crate) async fn observe(
    inputs: &ObserveInputs<'_>,
    view: &AccountView,
    spec: &LbSpec,
) -> Result<ObservedLb, cloudstack::Error> {
    let listed: Vec<&LoadBalancerRule> = own_rules(view, spec).collect();
    let mut rules: Vec<ObservedRule> = listed.iter().filter_map(|r| observed_rule(r)).collect();
    let details = futures::future::try_join_all(rules.iter().map(|r| {
        let kinds = policy_kinds_to_read(inputs.policy_kinds, spec, &r.tags);
        inputs.details.get(inputs.client, &r.id, kinds)
    }))
    .await?;
    for (rule, details) in rules.iter_mut().zip(details) {
        rule.members = details.members.clone();
        rule.health_checks = details.health_checks.clone();
        rule.stickiness = details.stickiness.clone();
        rule.health_checks_unknown = details.refused.health_check;
        rule.stickiness_unknown = details.refused.stickiness;
    }
    let taken_ip = taken_ip(view, spec).map(|(id, address, owner_uid)| {
        let (on_it, others): (Vec<ObservedRule>, Vec<ObservedRule>) = std::mem::take(&mut rules)
            .into_iter()
            .partition(|r| r.public_ip_id == id);
        rules = others;
        TakenIp {
            id,
            address,
            owner_uid,
            own_rules: on_it.into_iter().map(|r| (r.id, r.name)).collect(),
        }
    });
    let ip = match taken_ip {
        Some(_) => None,
        None => find_ip(inputs.client, view, spec, &rules).await?,
    };
    let own_ids: BTreeSet<&str> = rules.iter().map(|r| r.id.as_str()).collect();
    let foreign_rules: Vec<ForeignRule> = match &ip {
        Some(ip) => view
            .rules_on_ip(&ip.id)
            .filter(|r| r.id.as_deref().is_some_and(|id| !own_ids.contains(id)))
            .filter_map(|r| {
                Some(ForeignRule {
                    id: r.id.clone()?,
                    name: r.name.clone().unwrap_or_default(),
                    public_port: u16::try_from(r.publicport?).ok()?,
                })
            })
            .collect(),
        None => Vec::new(),
    };
    let ports = port_scope(spec, &rules, &foreign_rules);
    let firewall_rules = match &ip {
        Some(ip) => view
            .firewall_rules_on_ip(inputs.client, &ip.id)
            .await?
            .iter()
            .filter(|r| {
                covers(r.startport, r.endport, &ports) || tagged_for(&tag_map(&r.tags), spec)
            })
            .filter_map(|r| observed_firewall_rule(r))
            .collect(),
        None => Vec::new(),
    };
    let acl_items = match inputs.acl_id {
        Some(acl_id) => view
            .acl_items(inputs.client, acl_id)
            .await?
            .iter()
            .filter(|item| {
                item.traffictype
                    .as_deref()
                    .is_none_or(|t| t.eq_ignore_ascii_case("ingress"))
            })
            .filter(|item| {
                covers(item.startport, item.endport, &ports)
                    || tagged_for(&tag_map(&item.tags), spec)
                    || item
                        .reason
                        .as_deref()
                        .is_some_and(|reason| reason.contains(&spec.lb_name))
            })
            .filter_map(observed_acl_item)
            .collect(),
        None => Vec::new(),
    };
    let acl_ports_of_others = match inputs.acl_id {
        Some(acl_id) => view
            .rules
            .iter()
            .filter(|r| r.id.as_deref().is_some_and(|id| !own_ids.contains(id)))
            .filter(|r| {
                r.networkid
                    .as_deref()
                    .and_then(|n| view.network(n))
                    .is_some_and(|n| n.aclid.as_deref() == Some(acl_id))
            })
            .filter_map(|r| {
                let protocol = LbProtocol::parse(r.protocol.as_deref().unwrap_or("tcp"))?;
                Some((protocol.ip_protocol(), u16::try_from(r.publicport?).ok()?))
            })
            .collect(),
        None => BTreeSet::new(),
    };
    Ok(ObservedLb {
        ip,
        rules,
        firewall_rules,
        acl_items,
        foreign_rules,
        acl_ports_of_others,
        certificates: Default::default(),
        taken_ip,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed_rule(json: serde_json::Value) -> LoadBalancerRule {
        serde_json::from_value(json).expect("rule decodes")
    }

    #[test]
    fn listed_rules_are_read_leniently() {
        let rule = listed_rule(serde_json::json!({
            "id": "r1", "name": "aabc-tcp-proxy-443", "protocol": "TCP-Proxy",
            "publicport": "443", "privateport": "30443", "algorithm": "source",
            "cidrlist": "10.0.0.0/8 192.168.0.0/16", "publicipid": "ip1",
            "tags": [{ "key": TAG_SERVICE_UID, "value": "uid-1" }]
        }));
        let observed = observed_rule(&rule).expect("converted");
        assert_eq!(observed.protocol, LbProtocol::TcpProxy);
        assert_eq!((observed.public_port, observed.private_port), (443, 30443));
        assert_eq!(observed.algorithm, Algorithm::Source);
        assert_eq!(observed.cidrs.len(), 2);
        assert_eq!(
            observed.tags.get(TAG_SERVICE_UID).map(String::as_str),
            Some("uid-1")
        );
        let odd = listed_rule(
            serde_json::json!({ "id": "r2", "name": "x", "protocol": "sctp", "publicport": "1", "privateport": "2" }),
        );
        assert_eq!(
            observed_rule(&odd),
            None,
            "unknown protocols are not ours to manage"
        );
    }

    #[test]
    fn ip_ownership_follows_the_allocated_list() {
        let ip: PublicIpAddress = serde_json::from_value(serde_json::json!({
            "id": "ip1", "ipaddress": "203.0.113.7", "allocated": "2026-01-01T00:00:00+0000", "account": "bob"
        }))
        .expect("ip decodes");
        assert_eq!(
            observed_ip(&ip, true).expect("ip").ownership,
            IpOwnership::Ours
        );
        assert_eq!(
            observed_ip(&ip, false).expect("ip").ownership,
            IpOwnership::OtherAccount("bob".into())
        );
        let free: PublicIpAddress =
            serde_json::from_value(serde_json::json!({ "id": "ip2", "ipaddress": "203.0.113.8" }))
                .expect("ip decodes");
        assert_eq!(
            observed_ip(&free, false).expect("ip").ownership,
            IpOwnership::Free
        );
    }

    #[test]
    fn port_ranges_cover_ports() {
        let ports: BTreeSet<u16> = [80, 443].into();
        assert!(covers(Some(80), None, &ports));
        assert!(covers(Some(400), Some(500), &ports));
        assert!(!covers(Some(81), Some(442), &ports));
        assert!(!covers(None, None, &ports));
    }
}
