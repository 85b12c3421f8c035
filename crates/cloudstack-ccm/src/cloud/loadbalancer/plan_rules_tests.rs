//! Plan unit tests of the rules: in-place updates, recreation, adoption of other
//! controllers' rules, deletion of unneeded ones.

use super::*;

#[test]
fn proxy_protocol_toggle_renames_the_rule_in_place() {
    let before = simple(&[("TCP", 80, 30080)]);
    let after = spec(
        json!({(ann::PROXY_PROTOCOL.key): "true"}),
        &[("TCP", 80, 30080)],
        json!({}),
    );
    let observed = applied(&before, &["vm1"]);
    let p = plan(
        &after,
        &observed,
        &backends(&["vm1"]),
        &isolated((4, 18, 0)),
    )
    .unwrap();
    assert_eq!(kinds(&p), vec![vec!["update-rule"]]);
    assert_eq!(
        p.phases[0].steps[0],
        Step::UpdateRule {
            id: format!("rule-{LB}-tcp-80"),
            name: format!("{LB}-tcp-80"),
            new_name: Some(format!("{LB}-tcp-proxy-80")),
            protocol: Some(LbProtocol::TcpProxy),
            algorithm: None,
            cidrs: None,
        }
    );
    // And back.
    let observed = applied(&after, &["vm1"]);
    let p = plan(
        &before,
        &observed,
        &backends(&["vm1"]),
        &isolated((4, 18, 0)),
    )
    .unwrap();
    assert_eq!(kinds(&p), vec![vec!["update-rule"]]);
}

#[test]
fn toggle_with_a_new_node_port_deletes_before_it_creates() {
    let before = simple(&[("TCP", 80, 30080)]);
    let after = spec(
        json!({(ann::PROXY_PROTOCOL.key): "true"}),
        &[("TCP", 80, 31111)],
        json!({}),
    );
    let observed = applied(&before, &["vm1"]);
    let p = plan(
        &after,
        &observed,
        &backends(&["vm1"]),
        &isolated((4, 18, 0)),
    )
    .unwrap();
    assert_eq!(
        kinds(&p),
        vec![
            vec!["delete-fw"],
            vec!["delete-rule"],
            vec!["create-rule"],
            vec!["assign", "tag"]
        ]
    );
    let Step::CreateRule {
        name,
        private_port,
        open_firewall,
        ip,
        ..
    } = &p.phases[2].steps[0]
    else {
        panic!("{p}")
    };
    assert_eq!(
        (name.as_str(), *private_port, *open_firewall),
        (format!("{LB}-tcp-proxy-80").as_str(), 31111, true)
    );
    assert_eq!(
        ip,
        &IpRef::Existing {
            id: IP_ID.into(),
            address: "203.0.113.5".parse().unwrap()
        }
    );
}

#[test]
fn protocol_family_change_frees_the_port_first() {
    let before = simple(&[("TCP", 53, 30053)]);
    let after = simple(&[("UDP", 53, 30053)]);
    let p = plan(
        &after,
        &applied(&before, &["vm1"]),
        &backends(&["vm1"]),
        &netscaler(),
    )
    .unwrap();
    // `openfirewall` opens TCP only, so the new udp rule gets its own firewall rule; the
    // tcp firewall rule of the old rule goes before the old rule (which may have made it).
    assert_eq!(
        kinds(&p),
        vec![
            vec!["delete-fw"],
            vec!["delete-rule"],
            vec!["create-rule", "create-fw"],
            vec!["assign", "tag"]
        ]
    );
    let Step::CreateRule { open_firewall, .. } = &p.phases[2].steps[0] else {
        panic!("{p}")
    };
    assert!(!*open_firewall);
}

#[test]
fn rule_cidrlist_change_recreates_on_4_18_and_updates_on_4_22() {
    let before = simple(&[("TCP", 80, 30080)]);
    let after = spec(
        json!({(ann::SOURCE_CIDRS.key): "10.0.0.0/8"}),
        &[("TCP", 80, 30080)],
        json!({}),
    );
    let observed = applied(&before, &["vm1"]);

    let old = plan(
        &after,
        &observed,
        &backends(&["vm1"]),
        &isolated((4, 18, 0)),
    )
    .unwrap();
    assert_eq!(
        kinds(&old),
        vec![
            vec!["delete-fw"],
            vec!["delete-rule"],
            vec!["create-rule"],
            vec!["assign", "tag"]
        ]
    );
    let Step::CreateRule { cidrs, .. } = &old.phases[2].steps[0] else {
        panic!("{old}")
    };
    assert_eq!(cidrs, &vec![Cidr::parse("10.0.0.0/8").unwrap()]);

    let new = plan(
        &after,
        &observed,
        &backends(&["vm1"]),
        &isolated((4, 22, 0)),
    )
    .unwrap();
    assert_eq!(kinds(&new), vec![vec!["update-rule"]]);
    let Step::UpdateRule {
        cidrs, new_name, ..
    } = &new.phases[0].steps[0]
    else {
        panic!("{new}")
    };
    assert_eq!(cidrs, &Some(vec![Cidr::parse("10.0.0.0/8").unwrap()]));
    assert_eq!(new_name, &None);

    // Before 4.18 the rule has no cidrlist: nothing changes, a warning says so.
    let older = plan(
        &after,
        &observed,
        &backends(&["vm1"]),
        &isolated((4, 17, 0)),
    )
    .unwrap();
    assert!(older.is_empty(), "{older}");
    assert_eq!(older.warnings.len(), 1);
}

#[test]
fn removed_port_is_deleted_after_the_wanted_rules_stand() {
    let before = simple(&THREE_PORTS[..2]);
    let after = simple(&[("TCP", 80, 30080), ("TCP", 9090, 30990)]);
    let p = plan(
        &after,
        &applied(&before, &["vm1"]),
        &backends(&["vm1"]),
        &isolated((4, 18, 0)),
    )
    .unwrap();
    assert_eq!(
        kinds(&p),
        vec![
            vec!["create-rule", "delete-fw"],
            vec!["assign", "delete-rule", "tag"]
        ]
    );
}

#[test]
fn go_ccm_load_balancer_is_adopted_unchanged() {
    let s = simple(&THREE_PORTS);
    let mut observed = applied(&s, &["vm1", "vm2"]);
    // The Go CCM leaves no tags, no cidrlist before 4.18 / 0.0.0.0/0 after.
    for r in &mut observed.rules {
        r.tags.clear();
        r.cidrs = vec![Cidr::ANY_V4];
    }
    if let Some(ip) = observed.ip.as_mut() {
        ip.tags.clear();
    }
    for ctx in [isolated((4, 18, 0)), isolated((4, 22, 0))] {
        let p = plan(&s, &observed, &backends(&["vm1", "vm2"]), &ctx).unwrap();
        // The rules get our tags; the address the Go CCM associated too (released on
        // delete, as the Go CCM would).
        assert_eq!(kinds(&p), vec![vec!["tag", "tag"]], "{p}");
        let Step::TagResources {
            resource_type,
            resources,
            ..
        } = &p.phases[0].steps[0]
        else {
            panic!("{p}")
        };
        assert_eq!(*resource_type, TagResourceType::LoadBalancer);
        assert_eq!(resources.len(), 3);
    }
}

#[test]
fn leaseweb_rules_are_adopted_under_their_names() {
    let s = simple(&THREE_PORTS[..2]);
    let mut observed = applied(&s, &["vm1"]);
    for r in &mut observed.rules {
        r.name = r.name.replace(LB, "K8s_svc_prod_shop_web");
    }
    let p = plan(&s, &observed, &backends(&["vm1"]), &isolated((4, 18, 0))).unwrap();
    assert!(p.is_empty(), "{p}");
}

#[test]
fn algorithm_change_is_an_update() {
    let s = spec(
        json!({}),
        &[("TCP", 80, 30080)],
        json!({"sessionAffinity": "ClientIP"}),
    );
    let observed = applied(&simple(&[("TCP", 80, 30080)]), &["vm1"]);
    let p = plan(&s, &observed, &backends(&["vm1"]), &isolated((4, 18, 0))).unwrap();
    let Step::UpdateRule {
        algorithm,
        new_name,
        ..
    } = &p.phases[0].steps[0]
    else {
        panic!("{p}")
    };
    assert_eq!(
        (*algorithm, new_name.clone()),
        (Some(Algorithm::Source), None)
    );
}
