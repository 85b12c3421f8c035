//! Unit tests of [`AccountView::patch`]: a run's results spliced into the view.

use std::sync::Arc;

use serde_json::json;

use super::AccountView;
use super::ViewChanges;
use crate::cloud::tags::{TAG_OPEN_FIREWALL, TAG_SERVICE_UID, tag_map};

fn decode<T: serde::de::DeserializeOwned>(json: serde_json::Value) -> T {
    serde_json::from_value(json).expect("decodes")
}

/// A view read as read number 1: ip1 (rule r1 opened with `openfirewall`, its firewall
/// rule f1; firewall rule f2 of the Service's own), ip2 with rule r2, and the networks
/// net1 and tier1.
fn view() -> AccountView {
    let mut view = AccountView::from_parts(
        decode(json!([
            { "id": "r1", "name": "a-tcp-80", "publicipid": "ip1", "publicport": "80",
              "protocol": "tcp", "networkid": "net1",
              "tags": [{ "key": TAG_OPEN_FIREWALL, "value": "true" }] },
            { "id": "r2", "name": "b-tcp-80", "publicipid": "ip2", "publicport": "80",
              "protocol": "tcp", "networkid": "net1" }
        ])),
        decode(json!([
            { "id": "ip1", "ipaddress": "203.0.113.5", "associatednetworkid": "net1" },
            { "id": "ip2", "ipaddress": "203.0.113.6", "associatednetworkid": "net1" }
        ])),
        decode(json!([
            { "id": "f1", "ipaddressid": "ip1", "protocol": "tcp", "startport": 80,
              "endport": 80, "cidrlist": "0.0.0.0/0" },
            { "id": "f2", "ipaddressid": "ip1", "protocol": "tcp", "startport": 443,
              "endport": 443, "cidrlist": "10.0.0.0/8",
              "tags": [{ "key": TAG_SERVICE_UID, "value": "uid-1" }] }
        ])),
        decode(json!([
            { "id": "net1", "name": "isolated" },
            { "id": "tier1", "name": "web-tier" }
        ])),
    );
    view.read = 1;
    view
}

fn tags(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn ids<T>(items: &[Arc<T>], id: impl Fn(&T) -> Option<&str>) -> Vec<String> {
    let mut ids: Vec<String> = items
        .iter()
        .map(|item| id(item).unwrap_or("(none)").to_string())
        .collect();
    ids.sort();
    ids
}

#[test]
fn a_new_load_balancer_enters_the_view_as_its_jobs_returned_it_with_its_tags() {
    let view = view();
    let mut changes = ViewChanges::default();
    changes.associated(decode(json!({
        "id": "ip3", "ipaddress": "203.0.113.7", "vpcid": "vpc1", "account": "alice",
        "domainid": "d1"
    })));
    changes.rule_created(
        decode(json!({ "id": "r3", "name": "c-tcp-80", "publicipid": "ip3",
            "publicport": "80", "protocol": "tcp", "networkid": "tier1",
            "account": "alice", "domainid": "d1" })),
        true,
    );
    changes.tagged(
        "LoadBalancer",
        &["r3".into()],
        &tags(&[(TAG_SERVICE_UID, "uid-3"), (TAG_OPEN_FIREWALL, "true")]),
    );
    changes.tagged(
        "PublicIpAddress",
        &["ip3".into()],
        &tags(&[("cloudstack-ccm/associated", "true")]),
    );
    assert_eq!(changes.why_inexact(), None);
    let patched = view.patch(&changes, 2).expect("newer than the view");

    let rule = patched.rules_on_ip("ip3").next().expect("the new rule");
    assert_eq!(rule.name.as_deref(), Some("c-tcp-80"));
    let rule_tags = tag_map(&rule.tags);
    assert_eq!(
        rule_tags.get(TAG_SERVICE_UID).map(String::as_str),
        Some("uid-3")
    );
    assert_eq!(
        rule_tags.get(TAG_OPEN_FIREWALL).map(String::as_str),
        Some("true")
    );
    let tag = &rule.tags[0];
    assert_eq!(
        (tag.resourceid.as_deref(), tag.resourcetype.as_deref()),
        (Some("r3"), Some("LoadBalancer"))
    );
    assert_eq!(tag.account.as_deref(), Some("alice"), "the rule's owner");

    let ip = patched.ip_by_id("ip3").expect("the new IP");
    assert_eq!(
        tag_map(&ip.tags)
            .get("cloudstack-ccm/associated")
            .map(String::as_str),
        Some("true")
    );
    // A VPC address is associated with the tier of its first rule.
    assert_eq!(ip.associatednetworkid.as_deref(), Some("tier1"));
    assert_eq!(ip.associatednetworkname.as_deref(), Some("web-tier"));

    // `openfirewall` opened port 80 of ip3: known but for its id.
    let opened: Vec<_> = patched
        .firewall_rules
        .iter()
        .filter(|fw| fw.ipaddressid.as_deref() == Some("ip3"))
        .collect();
    assert_eq!(opened.len(), 1);
    assert_eq!(opened[0].id, None);
    assert_eq!(
        (opened[0].startport, opened[0].endport, opened[0].cidrs()),
        (Some(80), Some(80), vec!["0.0.0.0/0".to_string()])
    );
    assert!(patched.firewall_unknown.is_empty());

    // What the run did not touch is shared, not copied; the IPs touched are stamped.
    for (old, new) in view.rules.iter().zip(&patched.rules) {
        assert!(Arc::ptr_eq(old, new), "{:?}", old.id);
    }
    assert!(Arc::ptr_eq(
        &view.firewall_rules[0],
        &patched.firewall_rules[0]
    ));
    assert_eq!(patched.patched.get("ip3"), Some(&2));
    assert_eq!(patched.patched.get("ip1"), None);
}

#[test]
fn updates_deletes_and_new_firewall_rules_replace_what_the_view_held() {
    let view = view();
    let mut changes = ViewChanges::default();
    changes.rule_updated(decode(
        json!({ "id": "r1", "name": "a-tcp-80", "publicipid": "ip1",
        "publicport": "80", "protocol": "tcp", "algorithm": "source",
        "tags": [{ "key": TAG_OPEN_FIREWALL, "value": "true" }] }),
    ));
    changes.deleted("f2");
    changes.firewall_rule_created(decode(json!({ "id": "f3", "ipaddressid": "ip1",
        "protocol": "tcp", "startport": 443, "endport": 443, "cidrlist": "192.0.2.0/24" })));
    changes.tagged(
        "FirewallRule",
        &["f3".into()],
        &tags(&[(TAG_SERVICE_UID, "uid-1")]),
    );
    changes.untagged(
        "LoadBalancer",
        &["r1".into()],
        vec![TAG_OPEN_FIREWALL.into()],
    );
    let patched = view.patch(&changes, 2).expect("newer");

    let r1 = patched.rules_on_ip("ip1").next().expect("r1");
    assert_eq!(
        r1.algorithm.as_deref(),
        Some("source"),
        "the update's result"
    );
    assert!(r1.tags.is_empty(), "the tag taken off after the update");
    assert_eq!(
        ids(&patched.firewall_rules, |f| f.id.as_deref()),
        ["f1", "f3"]
    );
    let f3 = patched
        .firewall_rules
        .iter()
        .find(|f| f.id.as_deref() == Some("f3"))
        .expect("f3");
    assert_eq!(
        tag_map(&f3.tags).get(TAG_SERVICE_UID).map(String::as_str),
        Some("uid-1")
    );
    assert!(
        Arc::ptr_eq(&view.rules[1], &patched.rules[0]),
        "r2, on another IP, is shared"
    );
}

#[test]
fn a_deleted_rule_takes_the_firewall_rule_it_opened() {
    let view = view();
    let mut changes = ViewChanges::default();
    changes.deleted("r1");
    let patched = view.patch(&changes, 2).expect("newer");
    assert_eq!(ids(&patched.rules, |r| r.id.as_deref()), ["r2"]);
    assert_eq!(
        ids(&patched.firewall_rules, |f| f.id.as_deref()),
        ["f2"],
        "f1 went with r1 (tagged as opened so)"
    );
    assert!(patched.firewall_unknown.is_empty());
}

#[test]
fn a_deleted_rule_not_known_to_have_opened_a_firewall_rule_leaves_them_unknown() {
    let mut view = view();
    // r1 untagged: f1 may be its `openfirewall` rule, or one made by hand.
    let mut r1 = (*view.rules[0]).clone();
    r1.tags.clear();
    view.rules[0] = Arc::new(r1);
    let mut changes = ViewChanges::default();
    changes.deleted("r1");
    let patched = view.patch(&changes, 2).expect("newer");
    assert!(patched.firewall_unknown.contains("ip1"));
    assert!(
        patched
            .firewall_rules
            .iter()
            .all(|f| f.ipaddressid.as_deref() != Some("ip1")),
        "none held for ip1: they are read when first needed"
    );
}

#[test]
fn a_released_ip_leaves_with_everything_on_it() {
    let view = view();
    let mut changes = ViewChanges::default();
    changes.deleted("r1");
    changes.released("ip1");
    let patched = view.patch(&changes, 2).expect("newer");
    assert_eq!(ids(&patched.ips, |ip| ip.id.as_deref()), ["ip2"]);
    assert_eq!(ids(&patched.rules, |r| r.id.as_deref()), ["r2"]);
    assert!(patched.firewall_rules.is_empty());
    assert!(patched.firewall_unknown.is_empty());
}

#[test]
fn a_patch_never_replaces_a_newer_read_and_a_read_never_one_newer_patch() {
    let view = view();
    let mut changes = ViewChanges::default();
    changes.deleted("r2");
    assert!(
        view.patch(&changes, 1).is_none(),
        "the whole view was read after the run ended"
    );
    let renewed = view
        .splice(
            vec![super::RenewedIp {
                id: "ip2".into(),
                ip: None,
                rules: Vec::new(),
                firewall_rules: Vec::new(),
            }],
            5,
        )
        .expect("newer");
    assert!(
        renewed.patch(&changes, 4).is_none(),
        "ip2 was read again after the run ended"
    );
    let patched = view.patch(&changes, 6).expect("newer");
    assert!(
        patched.misses_a_patch([&"ip2".to_string()].into_iter(), 3),
        "a read of ip2 that started before the patch may lack it"
    );
    assert!(!patched.misses_a_patch([&"ip2".to_string()].into_iter(), 7));
    assert!(!patched.misses_a_patch([&"ip1".to_string()].into_iter(), 3));
}

#[test]
fn acl_items_are_kept_unless_the_run_changed_some() {
    let view = view();
    view.acl_items
        .try_lock()
        .expect("free")
        .insert("acl1".into(), Arc::new(Vec::new()));
    let mut changes = ViewChanges::default();
    changes.deleted("r2");
    let kept = view.patch(&changes, 2).expect("newer");
    assert!(
        kept.acl_items
            .try_lock()
            .expect("free")
            .contains_key("acl1")
    );
    changes.acl_changed();
    let dropped = view.patch(&changes, 3).expect("newer");
    assert!(dropped.acl_items.try_lock().expect("free").is_empty());
}

#[test]
fn results_that_do_not_say_all_are_inexact() {
    let mut both = ViewChanges::default();
    both.tagged("LoadBalancer", &["r1".into()], &tags(&[("k", "v")]));
    both.untagged("LoadBalancer", &["r1".into()], vec!["k".into()]);
    assert!(both.why_inexact().is_some_and(|why| why.contains('k')));

    let mut other_type = ViewChanges::default();
    other_type.tagged("UserVm", &["vm1".into()], &tags(&[("k", "v")]));
    assert!(other_type.why_inexact().is_some());

    let mut acl = ViewChanges::default();
    acl.tagged("NetworkACL", &["i1".into()], &tags(&[("k", "v")]));
    assert_eq!(acl.why_inexact(), None, "ACL items are read again");
    assert!(acl.acl_changed);

    let mut separate = ViewChanges::default();
    separate.tagged("LoadBalancer", &["r1".into()], &tags(&[("k", "v")]));
    separate.untagged("LoadBalancer", &["r2".into()], vec!["k".into()]);
    assert_eq!(separate.why_inexact(), None);
}

#[tokio::test]
async fn firewall_rules_left_unknown_are_read_once_when_first_needed() {
    let (sim, client) =
        crate::cloud::loadbalancer::simulated_cloud(cloudstack_sim::Scenario::small()).await;
    let mut view = view();
    let mut r1 = (*view.rules[0]).clone();
    r1.tags.clear();
    view.rules[0] = Arc::new(r1);
    let mut changes = ViewChanges::default();
    changes.deleted("r1");
    let patched = view.patch(&changes, 2).expect("newer");
    let firewall_reads = || {
        sim.call_log()
            .iter()
            .filter(|call| call.command == "listFirewallRules")
            .count()
    };

    let known = patched.firewall_rules_on_ip(&client, "ip2").await;
    assert!(known.expect("held").is_empty());
    assert_eq!(firewall_reads(), 0, "ip2's are held");
    // The simulator knows no ip1: CloudStack's 431 for an unknown id.
    assert!(patched.firewall_rules_on_ip(&client, "ip1").await.is_err());
    assert_eq!(firewall_reads(), 1, "ip1's are read");

    // Once read, they are kept, and a view spliced from this one holds them.
    patched
        .firewall_read
        .lock()
        .await
        .insert("ip1".into(), vec![view.firewall_rules[1].clone()]);
    let held = patched
        .firewall_rules_on_ip(&client, "ip1")
        .await
        .expect("kept");
    assert_eq!(held.len(), 1);
    let mut later = ViewChanges::default();
    later.deleted("r2");
    let next = patched.patch(&later, 3).expect("newer");
    assert!(next.firewall_unknown.is_empty());
    assert_eq!(ids(&next.firewall_rules, |f| f.id.as_deref()), ["f2"]);
    assert_eq!(firewall_reads(), 1);
}
