//! Orphan classification unit tests: kinds, and what is (and is reported once as) an orphan.

use super::*;

#[test]
fn kinds_and_display() {
    assert_eq!(OrphanKind::ALL.last(), Some(&OrphanKind::PublicIp));
    let orphan = Orphan {
        kind: OrphanKind::PublicIp,
        id: "ip-1".into(),
        what: "203.0.113.10".into(),
        reason: "no Service uses it".into(),
        deletable: false,
        network_id: Some("net-1".into()),
        step: None,
    };
    assert_eq!(
        orphan.to_string(),
        "public_ip ip-1 (203.0.113.10): no Service uses it; not deleted automatically"
    );
}

/// A rule as a list command shows it, tagged for a Service that is gone.
fn tagged_rule(id: &str, json: serde_json::Value) -> cloudstack::FirewallRule {
    let mut rule = json;
    rule["id"] = id.into();
    rule["tags"] = serde_json::json!([
        { "key": TAG_CLUSTER, "value": "c1" },
        { "key": TAG_SERVICE_UID, "value": "gone" }
    ]);
    serde_json::from_value(rule).expect("rule")
}

#[test]
fn a_routing_firewall_rule_that_the_firewall_list_shows_too_is_one_orphan() {
    let routing = tagged_rule(
        "fw-routed",
        serde_json::json!({"protocol": "tcp", "startport": 80, "endport": 80,
            "networkid": "net-1", "destcidrlist": "10.1.10.200/32"}),
    );
    let plain = tagged_rule(
        "fw-plain",
        serde_json::json!({"protocol": "tcp", "startport": 443, "endport": 443,
            "ipaddressid": "ip-1", "ipaddress": "203.0.113.10"}),
    );
    let tagged = Tagged {
        firewall_rules: vec![routing.clone(), plain],
        routing_firewall_rules: vec![routing],
        cluster: "c1".into(),
        ..Tagged::default()
    };
    let found: Vec<(OrphanKind, String)> = classify(&tagged, &Owners::default())
        .into_iter()
        .map(|o| (o.kind, o.id))
        .collect();
    assert_eq!(
        found,
        [
            (OrphanKind::FirewallRule, "fw-plain".to_string()),
            (OrphanKind::RoutingFirewallRule, "fw-routed".to_string()),
        ]
    );
}

#[test]
fn an_internal_rule_of_a_gone_service_is_an_orphan_deleted_on_its_tier() {
    let rule: cloudstack::InternalLoadBalancer = serde_json::from_value(serde_json::json!({
        "id": "ilb-1", "name": "agone-tcp-5432", "networkid": "tier-1",
        "sourceipaddress": "10.220.1.4",
        "loadbalancerrule": [{"sourceport": 5432, "instanceport": 31432}],
        "tags": [{ "key": TAG_CLUSTER, "value": "c1" }, { "key": TAG_SERVICE_UID, "value": "gone" }]
    }))
    .expect("rule");
    let tagged = Tagged {
        internal_rules: vec![rule],
        cluster: "c1".into(),
        ..Tagged::default()
    };
    let orphans = classify(&tagged, &Owners::default());
    assert_eq!(orphans.len(), 1);
    let orphan = &orphans[0];
    assert_eq!(orphan.kind, OrphanKind::InternalLoadBalancerRule);
    assert_eq!(orphan.what, "agone-tcp-5432 on 10.220.1.4");
    assert_eq!(orphan.network_id.as_deref(), Some("tier-1"));
    assert!(matches!(
        &orphan.step,
        Some(OrphanStep::LoadBalancer(Step::DeleteInternalRule { id, .. })) if id == "ilb-1"
    ));
}
