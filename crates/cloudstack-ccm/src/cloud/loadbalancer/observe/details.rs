//! Per-rule details that CloudStack only returns rule by rule: the assigned VMs
//! (`listLoadBalancerRuleInstances`) and the health-check and stickiness policies, the
//! latter read only where one may exist (the caller says which kinds; a server or role
//! without the list command has none). They
//! are cached by rule id until the controller changes that rule (apply forgets it), the
//! rule disappears, or the entry is older than the cache's maximum age (which bounds how
//! long a change made by hand in CloudStack goes unnoticed).
//!
//! Member sets are shared by content: rules with the same members (usually every rule:
//! all eligible Nodes serve every Service) hold one copy of the set, so the cache grows
//! with the number of rules and of distinct member sets, not rules × Nodes.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use cloudstack::{
    ListLbHealthCheckPolicies, ListLbStickinessPolicies, ListLoadBalancerRuleInstances, Request,
    VmId,
};

use crate::cloud::loadbalancer::observe::{ObservedHealthCheck, ObservedStickiness};
use crate::cloud::loadbalancer::vocabulary::StickinessMethod;

/// What is known of one rule beyond its list entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RuleDetails {
    /// VM ids assigned to the rule (possibly the eligible set itself, shared).
    pub members: Arc<BTreeSet<String>>,
    /// Health-check policies (read only where the provider has them).
    pub health_checks: Vec<ObservedHealthCheck>,
    /// Stickiness policies (read only where the provider has them).
    pub stickiness: Vec<ObservedStickiness>,
    /// The policy kinds whose list the server or the role refused: unknown, not absent.
    pub refused: PolicyKinds,
}

/// A rule's details as the cache holds them: the member set shared with every other
/// rule that has the same members.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CachedDetails {
    /// The policy kinds that were read (the others are unknown, not absent).
    pub kinds: PolicyKinds,
    /// VM ids assigned to the rule (shared by content).
    pub members: Arc<BTreeSet<String>>,
    /// Health-check policies (read only where the provider has them).
    pub health_checks: Vec<ObservedHealthCheck>,
    /// Stickiness policies (read only where the provider has them).
    pub stickiness: Vec<ObservedStickiness>,
    /// The policy kinds whose list was refused (unknown, not absent).
    pub refused: PolicyKinds,
}

/// Which policy kinds to read for a rule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PolicyKinds {
    /// Read health-check policies.
    pub health_check: bool,
    /// Read stickiness policies.
    pub stickiness: bool,
}

impl PolicyKinds {
    /// Both kinds (details known to be complete, e.g. a rule just created without policies).
    pub const ALL: PolicyKinds = PolicyKinds {
        health_check: true,
        stickiness: true,
    };

    /// Whether details read for `self` tell everything `wanted` asks for.
    pub(crate) fn covers(self, wanted: PolicyKinds) -> bool {
        (self.health_check || !wanted.health_check) && (self.stickiness || !wanted.stickiness)
    }
}

/// The cache of rule details by rule id.
#[derive(Debug)]
pub(crate) struct RuleDetailsCache {
    entries: Mutex<Entries>,
    max_age: Duration,
}

/// The cached entries and the pool of member sets they share.
#[derive(Debug, Default)]
struct Entries {
    by_rule: HashMap<String, (Instant, Arc<CachedDetails>)>,
    member_sets: MemberSetPool,
}

/// Member sets by content hash, held weakly: a set lives as long as a cache entry (or a
/// reader) uses it.
#[derive(Debug, Default)]
struct MemberSetPool {
    by_hash: HashMap<u64, Vec<Weak<BTreeSet<String>>>>,
}

impl MemberSetPool {
    /// The shared copy of `members`: an existing equal set, else `members` itself, added.
    fn share(&mut self, members: Arc<BTreeSet<String>>) -> Arc<BTreeSet<String>> {
        let mut hasher = DefaultHasher::new();
        members.hash(&mut hasher);
        let slot = self.by_hash.entry(hasher.finish()).or_default();
        slot.retain(|weak| weak.strong_count() > 0);
        if let Some(found) = slot
            .iter()
            .filter_map(Weak::upgrade)
            .find(|set| *set == members)
        {
            return found;
        }
        slot.push(Arc::downgrade(&members));
        members
    }

    /// Drops the hashes whose sets are all gone.
    fn prune(&mut self) {
        self.by_hash.retain(|_, slot| {
            slot.retain(|weak| weak.strong_count() > 0);
            !slot.is_empty()
        });
    }
}

impl Entries {
    /// Caches `details` (with the policy `kinds` read) for `rule_id`, sharing its member set.
    fn insert(
        &mut self,
        rule_id: &str,
        details: RuleDetails,
        kinds: PolicyKinds,
    ) -> Arc<CachedDetails> {
        let cached = Arc::new(CachedDetails {
            kinds,
            members: self.member_sets.share(details.members),
            health_checks: details.health_checks,
            stickiness: details.stickiness,
            refused: details.refused,
        });
        self.by_rule
            .insert(rule_id.to_string(), (Instant::now(), cached.clone()));
        cached
    }
}

impl RuleDetailsCache {
    /// A cache whose entries are read again after `max_age`.
    pub fn new(max_age: Duration) -> Self {
        Self {
            entries: Mutex::new(Entries::default()),
            max_age,
        }
    }

    /// The details of rule `rule_id` with the policy `kinds` asked for, read from
    /// CloudStack when not cached (or cached without one of those kinds).
    pub async fn get(
        &self,
        client: &cloudstack::Client,
        rule_id: &str,
        kinds: PolicyKinds,
    ) -> Result<Arc<CachedDetails>, cloudstack::Error> {
        if let Some((read_at, details)) = self.lock().by_rule.get(rule_id)
            && read_at.elapsed() < self.max_age
            && details.kinds.covers(kinds)
        {
            return Ok(details.clone());
        }
        let details = read(client, rule_id, kinds).await?;
        Ok(self.lock().insert(rule_id, details, kinds))
    }

    /// Records what the controller just made rule `rule_id` into (complete: members and
    /// every policy it has).
    pub fn insert(&self, rule_id: &str, details: RuleDetails) {
        self.lock().insert(rule_id, details, PolicyKinds::ALL);
    }

    /// Drops the VMs of `gone` (expunged: CloudStack dropped their mappings) from the
    /// cached members of rule `rule_id`, keeping the entry's age.
    pub(crate) fn drop_members(&self, rule_id: &str, gone: &BTreeSet<String>) {
        let mut entries = self.lock();
        let Some((read_at, cached)) = entries.by_rule.get(rule_id).cloned() else {
            return;
        };
        if cached.members.iter().all(|vm| !gone.contains(vm)) {
            return;
        }
        let members: BTreeSet<String> = cached.members.difference(gone).cloned().collect();
        let members = entries.member_sets.share(Arc::new(members));
        let updated = Arc::new(CachedDetails {
            members,
            ..(*cached).clone()
        });
        entries
            .by_rule
            .insert(rule_id.to_string(), (read_at, updated));
        entries.member_sets.prune();
    }

    /// Forgets rule `rule_id` (after the controller changed it).
    pub(crate) fn forget(&self, rule_id: &str) {
        let mut entries = self.lock();
        entries.by_rule.remove(rule_id);
        entries.member_sets.prune();
    }

    /// Keeps only the rules in `live` (drops rules that no longer exist).
    pub fn retain<'a>(&self, live: impl IntoIterator<Item = &'a str>) {
        let live: BTreeSet<&str> = live.into_iter().collect();
        let mut entries = self.lock();
        entries.by_rule.retain(|id, _| live.contains(id.as_str()));
        entries.member_sets.prune();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The ids of the VMs assigned to rule `rule_id` (`listLoadBalancerRuleInstances`, all
/// pages).
pub(crate) async fn read_members(
    client: &cloudstack::Client,
    rule_id: &str,
) -> Result<BTreeSet<String>, cloudstack::Error> {
    let request = ListLoadBalancerRuleInstances {
        id: rule_id.to_string(),
        ..Default::default()
    };
    // The answer carries whole VM objects; only their ids are decoded.
    let vms: Vec<VmId> = client
        .list_all(
            ListLoadBalancerRuleInstances::COMMAND,
            "loadbalancerruleinstance",
            request.to_params(),
        )
        .await?;
    Ok(vms.into_iter().filter_map(|vm| vm.id).collect())
}

/// Reads the members and the wanted policy kinds of one rule, concurrently.
async fn read(
    client: &cloudstack::Client,
    rule_id: &str,
    kinds: PolicyKinds,
) -> Result<RuleDetails, cloudstack::Error> {
    let members = read_members(client, rule_id);
    let health_checks = async {
        if !kinds.health_check {
            return Ok(Some(Vec::new()));
        }
        let request = ListLbHealthCheckPolicies {
            lbruleid: Some(rule_id.to_string()),
            ..Default::default()
        };
        let Some(lists) = refused_as_none(client.list_lb_health_check_policies(&request).await)?
        else {
            return Ok(None);
        };
        Ok(Some(
            lists
                .into_iter()
                .flat_map(|list| list.healthcheckpolicy)
                .filter_map(|p| {
                    Some(ObservedHealthCheck {
                        id: p.id?,
                        path: p.pingpath.unwrap_or_default(),
                        description: p.description.unwrap_or_default(),
                        interval_secs: to_u32(p.healthcheckinterval),
                        timeout_secs: to_u32(p.responsetime),
                        healthy_threshold: to_u32(p.healthcheckthresshold),
                        unhealthy_threshold: to_u32(p.unhealthcheckthresshold),
                    })
                })
                .collect(),
        ))
    };
    let stickiness = async {
        if !kinds.stickiness {
            return Ok(Some(Vec::new()));
        }
        let request = ListLbStickinessPolicies {
            lbruleid: Some(rule_id.to_string()),
            ..Default::default()
        };
        let Some(lists) = refused_as_none(client.list_lb_stickiness_policies(&request).await)?
        else {
            return Ok(None);
        };
        Ok(Some(
            lists
                .into_iter()
                .flat_map(|list| list.stickinesspolicy)
                .filter_map(|p| {
                    Some(ObservedStickiness {
                        id: p.id?,
                        name: p.name.unwrap_or_default(),
                        description: p.description.unwrap_or_default(),
                        method: p.methodname.as_deref().and_then(StickinessMethod::parse),
                        params: stickiness_params(p.params.as_ref()),
                    })
                })
                .collect(),
        ))
    };
    let (members, health_checks, stickiness) =
        futures::try_join!(members, health_checks, stickiness)?;
    Ok(RuleDetails {
        members: Arc::new(members),
        refused: PolicyKinds {
            health_check: health_checks.is_none(),
            stickiness: stickiness.is_none(),
        },
        health_checks: health_checks.unwrap_or_default(),
        stickiness: stickiness.unwrap_or_default(),
    })
}

/// A policy list the server or the role does not offer (`None`): CloudStack answers 432
/// for an unsupported action or a command the role may not call (the client then holds
/// the command: [`cloudstack::Error::is_command_refused`]), 401 for a command a project
/// role denies, and "… does not exist or is not available for the user" for a command it
/// does not know. No policy of
/// that kind is seen, and the planner leaves the kind alone on rules the controller gave
/// one (see `Planner::policies`).
fn refused_as_none<T>(
    listed: Result<Vec<T>, cloudstack::Error>,
) -> Result<Option<Vec<T>>, cloudstack::Error> {
    match listed {
        Err(err) if is_unsupported(&err) => {
            tracing::debug!(error = %err, "policy list not available: policies unknown");
            Ok(None)
        }
        other => other.map(Some),
    }
}

/// Whether an error says the command is not offered (see [`refused_as_none`]).
fn is_unsupported(err: &cloudstack::Error) -> bool {
    err.is_command_refused()
        || matches!(err.code(), Some(401 | 432))
        || err
            .text()
            .is_some_and(|text| text.to_ascii_lowercase().contains("not available"))
}

/// A non-negative count from CloudStack's integer fields (absent or negative → 0).
fn to_u32(value: Option<i64>) -> u32 {
    value.and_then(|v| u32::try_from(v).ok()).unwrap_or(0)
}

/// Stickiness parameters as CloudStack returns them (a JSON object of strings, names
/// lower-cased).
fn stickiness_params(
    params: Option<&serde_json::Value>,
) -> std::collections::BTreeMap<String, String> {
    let Some(serde_json::Value::Object(map)) = params else {
        return Default::default();
    };
    map.iter()
        .map(|(k, v)| {
            let value = match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k.to_ascii_lowercase(), value)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u32, text: &str) -> cloudstack::Error {
        cloudstack::Error::Api {
            command: "listLBStickinessPolicies".into(),
            http_status: u16::try_from(code).unwrap_or(530),
            errorcode: code,
            cserrorcode: None,
            errortext: text.into(),
        }
    }

    #[test]
    fn an_unsupported_policy_list_means_unknown_policies() {
        for err in [
            api_error(432, "Unknown API command"),
            api_error(401, "unable to verify user credentials"),
            api_error(
                530,
                "The given command:listLBHealthCheckPolicies does not exist or it is not available for user",
            ),
        ] {
            let listed: Result<Vec<u8>, _> = Err(err);
            assert_eq!(refused_as_none(listed).expect("refused"), None);
        }
        let other: Result<Vec<u8>, _> = Err(api_error(530, "job failed"));
        assert!(refused_as_none(other).is_err(), "other errors stay errors");
    }

    #[test]
    fn cached_details_cover_the_kinds_they_were_read_with() {
        let none = PolicyKinds::default();
        let sticky = PolicyKinds {
            health_check: false,
            stickiness: true,
        };
        assert!(none.covers(none));
        assert!(
            !none.covers(sticky),
            "read without policies: stickiness unknown"
        );
        assert!(sticky.covers(none));
        assert!(PolicyKinds::ALL.covers(sticky));
    }

    #[test]
    fn policy_fields_are_read_leniently() {
        assert_eq!(to_u32(Some(5)), 5);
        assert_eq!(to_u32(Some(-1)), 0);
        assert_eq!(to_u32(None), 0);
        let params = stickiness_params(Some(
            &serde_json::json!({ "TableSize": "200k", "expire": 30 }),
        ));
        assert_eq!(params.get("tablesize").map(String::as_str), Some("200k"));
        assert_eq!(params.get("expire").map(String::as_str), Some("30"));
        assert!(stickiness_params(None).is_empty());
    }

    fn details(members: &[&str]) -> RuleDetails {
        RuleDetails {
            members: Arc::new(members.iter().map(|m| m.to_string()).collect()),
            ..RuleDetails::default()
        }
    }

    #[test]
    fn forgotten_and_dead_rules_leave_the_cache() {
        let cache = RuleDetailsCache::new(Duration::from_secs(60));
        for id in ["a", "b", "c"] {
            cache.insert(id, details(&[id]));
        }
        cache.forget("a");
        cache.retain(["b"]);
        let entries = cache.lock();
        let left: Vec<&String> = entries.by_rule.keys().collect();
        assert_eq!(left, ["b"]);
        assert_eq!(
            entries.member_sets.by_hash.len(),
            1,
            "sets of dropped rules go"
        );
    }

    #[test]
    fn rules_with_equal_members_share_one_set() {
        let cache = RuleDetailsCache::new(Duration::from_secs(60));
        cache.insert("r1", details(&["vm-1", "vm-2"]));
        cache.insert("r2", details(&["vm-2", "vm-1"]));
        cache.insert("r3", details(&["vm-1"]));
        let entries = cache.lock();
        let members = |id: &str| entries.by_rule[id].1.members.clone();
        assert!(Arc::ptr_eq(&members("r1"), &members("r2")));
        assert!(!Arc::ptr_eq(&members("r1"), &members("r3")));
        assert_eq!(
            *members("r3"),
            BTreeSet::from(["vm-1".to_string()]),
            "a different set keeps its own members"
        );
    }
}
